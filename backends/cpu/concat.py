"""Native ``concat`` for the ``cpu`` backend's replay programs.

A compiled step that returns stacked per-layer results (an LLM's new keys and values)
ends with concatenations; run from Python they cost a transition each — and right after
a decode step has streamed its weights through the caches, a cold one (~70 us for a
few KB). As a program step the copy runs in the same native segment as the kernels.

Any dtype (elements copied by size), up to 4 dims, inputs as strided views (offset and
element strides; rows with a unit inner stride are one ``memcpy``), the output
contiguous. Single-threaded: the concatenations this serves are small.

Args (int64): inputs n, element bytes, axis (of the 4-d padded shape), the output's 4
dims, then per input: element offset, 4 element strides, its size along the axis.
Buffers: the n inputs, then the output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph.view import View
from ..replay import NativeLibraryCall
from . import build as _build
from .library import KernelFamily

__all__ = ["native_call", "source"]

MAX_DIMS = 4

_SOURCE = r"""
#include <cstdint>
#include <cstring>

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void **bufs,
                                                            const int64_t *a) {
    const int64_t n = a[0], es = a[1], ax = a[2];
    const int64_t O[4] = {a[3], a[4], a[5], a[6]};
    const int64_t os[4] = {O[1] * O[2] * O[3], O[2] * O[3], O[3], 1};
    char *out = (char *) bufs[n];
    int64_t at = 0;  // where this input starts along the axis
    for (int64_t i = 0; i < n; ++i) {
        const int64_t *p = a + 7 + i * 6;
        const char *src = (const char *) bufs[i];
        int64_t S[4] = {O[0], O[1], O[2], O[3]};
        S[ax] = p[5];
        const int64_t shift = at * os[ax];
        for (int64_t i0 = 0; i0 < S[0]; ++i0)
            for (int64_t i1 = 0; i1 < S[1]; ++i1)
                for (int64_t i2 = 0; i2 < S[2]; ++i2) {
                    char *d = out + es * (i0 * os[0] + i1 * os[1] + i2 * os[2] + shift);
                    const char *s = src + es * (p[0] + i0 * p[1] + i1 * p[2] + i2 * p[3]);
                    if (p[4] == 1 || S[3] == 1) {
                        std::memcpy(d, s, (size_t) (es * S[3]));
                    } else {
                        for (int64_t i3 = 0; i3 < S[3]; ++i3)
                            std::memcpy(d + es * i3, s + es * i3 * p[4], (size_t) es);
                    }
                }
        at += p[5];
    }
}
"""


def source() -> tuple[str, str]:
    """(C++ source, symbol) of the concat kernel.

    >>> source()[1]
    'bz_concat'
    """
    return _SOURCE.replace("BZ_SYMBOL", "bz_concat"), "bz_concat"


_KERNELS = KernelFamily(lambda _: source())


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
    """``concat`` as a replay-program step (inputs of the output's dtype, at most 4
    dims); None otherwise (numpy's concatenate runs).

    >>> from braze.graph.view import View
    >>> f4 = np.dtype(np.float32)
    >>> native_call({"axis": 0}, [(View.contiguous((2, 3)), f4)] * 2, ((4, 3), f4)) is not None
    True
    """
    shape, dtype = out
    nd = len(shape)
    if set(attrs) != {"axis"} or nd > MAX_DIMS or nd == 0 or 0 in shape \
            or any(d != dtype for _, d in inputs) or dtype.hasobject:
        return None
    try:
        h = _KERNELS.handle()
    except _build.BuildError:
        return None
    pad = MAX_DIMS - nd
    axis = attrs["axis"] % nd + pad
    args = [len(inputs), dtype.itemsize, axis, *((1,) * pad + tuple(shape))]
    for v, _ in inputs:
        args += [v.offset, *((0,) * pad + tuple(v.strides)), v.shape[axis - pad]]
    return NativeLibraryCall(h, np.array(args, np.int64), threads_arg=False)
