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
from .library import file_kernel

__all__ = ["native_call", "source"]

MAX_DIMS = 4


source, _KERNELS = file_kernel(__package__, "kernels/concat.cc", "bz_concat")


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
    h = _KERNELS.handle_or_none()
    if h is None:
        return None
    pad = MAX_DIMS - nd
    axis = attrs["axis"] % nd + pad
    args = [len(inputs), dtype.itemsize, axis, *((1,) * pad + tuple(shape))]
    for v, _ in inputs:
        args += [v.offset, *((0,) * pad + tuple(v.strides)), v.shape[axis - pad]]
    return NativeLibraryCall(h, np.array(args, np.int64), threads_arg=False)
