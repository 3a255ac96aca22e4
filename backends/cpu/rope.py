"""Native rotary position embedding for the ``cpu`` backend (the ``rope`` library op).

One kernel per call, float32: the (T, dims/2) cos/sin table is computed once per call
(threads split it by position; angles as the reference rounds them: position and
frequency in float32, ``base**(-2i/dims)`` in float64; cos and sin vectorized through
libmvec where glibc has it), or taken from the calling thread's last call when that had
the same positions, base and scale (a decode step ropes q and k of every layer at the
same positions: one table for all of them), then every row (leading
index, position) of x is rotated in one pass: pair ``(a, b)`` -> ``(a*cos - b*sin,
b*cos + a*sin)``, the pairs ``(2i, 2i+1)`` (traditional) or ``(i, i + dims/2)``.
Features past ``dims`` are copied. x is read through element strides (up to 4 dims
after merging: heads split out of a fused q/k/v projection need no copy); the output
is contiguous. As the fused-kernel alternative showed, a size-2 pair axis makes a
generated elementwise kernel loop rows of 2 elements (~170 us per SmolLM2 pre-fill
rope vs ~15 us here).

The offset may be one per entry of x's first axis (batched decoding: sequences at
different positions), each entry then getting its own (T, dims/2) table.

Args (int64): threads, R0, R1, T, D, dims, traditional, base and scale (float64
bits), offset element size (4 or 8), x offset and 4 strides (R0, R1, T, D), the
offset buffer's element offset, the number of offsets, the leading rows (R0 * R1
order) per offset and the offsets' element stride. Buffers: x, offset, out (R0, R1, T, D).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import ROPE, reference_eval
from ...graph.view import View, merge_dims
from ..kernel_sources import source as _kernel_source
from ..replay import NativeLibraryCall
from . import build as _build
from .codegen import libmvec_functions
from .library import KernelFamily, NativeOp

__all__ = ["Rope", "source"]

PARALLEL_ELEMENTS = 1 << 15  # x elements below this run on one thread
_F32 = np.dtype(np.float32)


def source() -> tuple[str, str]:
    """(C++ source, symbol) of the rope kernel for this host.

    >>> source()[1]
    'bz_rope_f32'
    """
    sym = "bz_rope_f32"
    mvec = int({"sin", "cos"} <= libmvec_functions())
    return _kernel_source(__package__, "kernels/rope.cc",
                          {"BZ_MVEC": mvec, "BZ_SYMBOL": sym}), sym


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
    # one offset, or one per entry of x's first axis (batched decoding)
    nb, bdiv, ostride = (1, 1, 0) if not off.shape else \
        (off.shape[0], max(1, math.prod(x.shape[1:-2])), off.strides[0])
    return np.array([nt, r0, r1, t, d, attrs["dims"], int(attrs["traditional"]), bits[0],
                     bits[1], off_itemsize, x.offset, s0, s1, *x.strides[-2:], off.offset,
                     nb, bdiv, ostride], np.int64)


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
        off = np.asarray(offset, np.int64)
        off = np.ascontiguousarray(off) if off.ndim else off  # (which makes a 0-d 1-d)
        xc = np.ascontiguousarray(x).reshape(-1 if not off.ndim else x.shape[0],
                                             -1 if off.ndim else 1, *x.shape[-2:])
        view = View(xc.shape, tuple(st // 4 for st in xc.strides))
        args = _args(attrs, view, View(off.shape, (1,) * off.ndim), off.itemsize,
                     self._num_threads())
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
