"""Native rotary position embedding for the ``cpu`` backend (the ``rope`` library op).

One kernel per call, float32: the (T, dims/2) cos/sin table is computed once per call
(threads split it by position; angles as the reference rounds them: position and
frequency in float32, ``base**(-2i/dims)`` in float64), then every row (leading
index, position) of x is rotated in one pass: pair ``(a, b)`` -> ``(a*cos - b*sin,
b*cos + a*sin)``, the pairs ``(2i, 2i+1)`` (traditional) or ``(i, i + dims/2)``.
Features past ``dims`` are copied. x is read through element strides (up to 4 dims
after merging: heads split out of a fused q/k/v projection need no copy); the output
is contiguous. As the fused-kernel alternative showed, a size-2 pair axis makes a
generated elementwise kernel loop rows of 2 elements (~170 us per SmolLM2 pre-fill
rope vs ~15 us here).

Args (int64): threads, R0, R1, T, D, dims, traditional, base and scale (float64
bits), offset element size (4 or 8), x offset and 4 strides (R0, R1, T, D), the
offset buffer's element offset. Buffers: x, offset, out (R0, R1, T, D).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import ROPE, reference_eval
from ...graph.view import View, merge_dims
from ..replay import NativeLibraryCall
from . import build as _build
from .codegen import libmvec_functions
from .library import KernelFamily, NativeOp

__all__ = ["Rope", "source"]

PARALLEL_ELEMENTS = 1 << 15  # x elements below this run on one thread
_F32 = np.dtype(np.float32)

_SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
extern "C" {
#if BZ_MVEC
#pragma omp declare simd notinbranch
#endif
float cosf(float);
#if BZ_MVEC
#pragma omp declare simd notinbranch
#endif
float sinf(float);
double pow(double, double);
}

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void **bufs,
                                                            const int64_t *a) {
    const int64_t nt = a[0], R0 = a[1], R1 = a[2], T = a[3], D = a[4], dims = a[5];
    const int64_t trad = a[6];
    double base, scale_d;
    std::memcpy(&base, &a[7], sizeof base);
    std::memcpy(&scale_d, &a[8], sizeof scale_d);
    const int64_t *xs = a + 10;
    const float *X = (const float *) bufs[0] + xs[0];
    const int64_t off = a[9] == 4 ? (int64_t) ((const int32_t *) bufs[1])[a[15]]
                                  : ((const int64_t *) bufs[1])[a[15]];
    float *O = (float *) bufs[2];
    const int64_t half = dims / 2, rows = R0 * R1 * T;
    const float scale = (float) scale_d;
    std::vector<float> inv(half), cs((size_t) (T * half) + 1), sn((size_t) (T * half) + 1);
    for (int64_t i = 0; i < half; ++i) inv[i] = (float) pow(base, (-(double) i * 2.0) / dims);
#pragma omp parallel num_threads((int) nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; ++t) {
            const float pos = (float) (off + t) * scale;
            float *c = cs.data() + t * half, *s = sn.data() + t * half;
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
                const float th = pos * inv[i];
                c[i] = cosf(th);
                s[i] = sinf(th);
            }
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = r % T, r1 = (r / T) % R1, r0 = r / (T * R1);
            const float *x = X + r0 * xs[1] + r1 * xs[2] + t * xs[3];
            const int64_t sd = xs[4];
            float *o = O + r * D;
            const float *c = cs.data() + t * half, *s = sn.data() + t * half;
            if (trad) {
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[(2 * i) * sd], x1 = x[(2 * i + 1) * sd];
                    o[2 * i] = x0 * c[i] + x1 * -s[i];
                    o[2 * i + 1] = x1 * c[i] + x0 * s[i];
                }
            } else if (sd == 1) {
#pragma omp simd
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[i], x1 = x[i + half];
                    o[i] = x0 * c[i] + x1 * -s[i];
                    o[i + half] = x1 * c[i] + x0 * s[i];
                }
            } else {
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[i * sd], x1 = x[(i + half) * sd];
                    o[i] = x0 * c[i] + x1 * -s[i];
                    o[i + half] = x1 * c[i] + x0 * s[i];
                }
            }
            for (int64_t d = dims; d < D; ++d) o[d] = x[d * sd];
        }
    }
}
"""


def source() -> tuple[str, str]:
    """(C++ source, symbol) of the rope kernel for this host.

    >>> source()[1]
    'bz_rope_f32'
    """
    sym = "bz_rope_f32"
    mvec = int({"sin", "cos"} <= libmvec_functions())
    return f"#define BZ_MVEC {mvec}\n" + _SOURCE.replace("BZ_SYMBOL", sym), sym


_KERNELS = KernelFamily(lambda _: source())


def _merge_leading(v: View) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The leading dims (all but T, D) of a view as at most 2 (size, stride) pairs."""
    merged = [(n, st[0]) for n, st in merge_dims(v.shape[:-2], [v.strides[:-2]])]
    if len(merged) > 2:
        return None
    while len(merged) < 2:
        merged.insert(0, (1, 0))
    return (merged[0][0], merged[1][0]), (merged[0][1], merged[1][1])


def _args(attrs: dict[str, Any], x: View, off: View, off_itemsize: int, threads: int
          ) -> np.ndarray | None:
    lead = _merge_leading(x)
    if lead is None:
        return None
    (r0, r1), (s0, s1) = lead
    t, d = x.shape[-2:]
    nt = 1 if x.size < PARALLEL_ELEMENTS else threads
    bits = np.array([attrs["base"], attrs["scale"]], np.float64).view(np.int64)
    return np.array([nt, r0, r1, t, d, attrs["dims"], int(attrs["traditional"]), bits[0],
                     bits[1], off_itemsize, x.offset, s0, s1, *x.strides[-2:], off.offset],
                    np.int64)


class Rope(NativeOp):
    """The ``cpu`` backend's ``library["rope"]``: the native kernel for float32 x (the
    numpy reference for other dtypes, or after one warning when it cannot be built);
    also a replay-program step (``native_call``).

    >>> impl = Rope()
    >>> x = np.ones((1, 2, 4), np.float32)
    >>> attrs = {"dims": 4, "traditional": True, "base": 1e4, "scale": 1.0}
    >>> impl(attrs, np.dtype(np.float32), x, np.array(0)).shape
    (1, 2, 4)
    """

    op = "rope"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 offset: np.ndarray) -> np.ndarray:
        h = None
        if x.dtype == _F32 and out_dtype == _F32 and x.size:
            h = self._kernel(_KERNELS.handle)
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(ROPE, attrs, out_dtype, x, offset)
        xc = np.ascontiguousarray(x).reshape(-1, 1, *x.shape[-2:])
        off = np.asarray(offset, np.int64)
        view = View(xc.shape, tuple(st // 4 for st in xc.strides))
        args = _args(attrs, view, View((), ()), off.itemsize, self._num_threads())
        out = np.empty(x.shape, np.float32)
        _core.launch(h, [xc, off, out], args)
        self.calls["native"] += 1
        return out

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """The kernel as a replay-program step (float32, strided x); None otherwise."""
        (xv, xd), (ov, od) = inputs
        if xd != _F32 or out[1] != _F32 or xv.size == 0 or od.itemsize not in (4, 8):
            return None
        try:
            h = _KERNELS.handle()
        except _build.BuildError:
            return None
        args = _args(attrs, xv, ov, od.itemsize, self._num_threads())
        return None if args is None else NativeLibraryCall(h, args)
