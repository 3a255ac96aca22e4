"""Native attention for the ``cpu`` backend (the ``scaled_dot_product_attention`` op).

One kernel per call, float32: for each query row (batch, query head, position) it
computes the scores against the visible keys (the first ``past_length`` rows of a
cached chunk, then the new keys up to the causal limit), the softmax and the weighted
sum of values, with a per-thread scratch row for the scores — the (T, S) score
matrix is never written to memory, the cache is read in place (no concatenation)
and grouped-query heads index their shared key/value head (never repeated).

* Every input is read through element strides and an offset (args), so the views a
  graph hands over (heads split out of a fused q/k/v projection, a cache prefix)
  need no copies; the output is contiguous (B, Hq, T, Dv).
* Scores: each thread transposes the keys of the (batch, key head) its rows need
  once (d-major, past rows then new ones), so the scores of 16 keys are 16 lanes of
  D broadcast multiply-adds — no horizontal reductions (a dot product per key with a
  16-lane reduction tree was 2-3x slower at pre-fill); with fewer than 8 query rows
  per key head (decode) the transposition costs more than it saves, and each score
  is a dot product with 16 partial sums reduced in a fixed order. Every sum runs in a fixed
  order: 1 and N threads give the same result. ``exp`` is libm's (its libmvec SIMD
  variant where glibc has one).
* A query row that sees no key gets NaN, as the reference's softmax over nothing.
* Threads: OpenMP over query rows when the work (rows x keys x (D + Dv)) is at least
  ``PARALLEL_WORK``; one thread below (a parallel region costs more).
* The past keys and values may be float16 (a KV cache of half the memory and memory
  traffic: decoding a batch reads every sequence's cache every step) with float32 q, k,
  v; each element is widened exactly as it is read.
* Other dtypes run the numpy reference (float16/bfloat16 computed in float32 there).

* Batched decoding: the past length may be one per batch row (B,), and a past index
  (B,) may say which batch row of the past each batch row reads (a server's batch of
  sequences at different positions over one cache of fixed slots: the cache is read in
  place, never gathered); an index out of range is clamped into the past.

Args (int64): threads, B, Hq, Hkv, T, S, has_past, P, D, Dv, causal, scale (float64
bits), past-length element size (4 or 8), then (offset, 4 strides) in elements for
q, k, v, past keys, past values, the past lengths' element offset and stride (0: one
length), has_index, the index's element size, offset and stride, the past's batch size.
Buffers: q, k, v, [past keys, past values, past lengths, [past index]], out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import SDPA, reference_eval
from ...graph.view import View
from ..kernel_sources import source as _kernel_source
from ..replay import NativeLibraryCall
from . import build as _build
from .codegen import libmvec_functions
from .library import KernelFamily, NativeOp

__all__ = ["ScaledDotProductAttention", "source"]

PARALLEL_WORK = 1 << 18  # rows * keys * (D + Dv) below this runs on one thread
_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)


def source() -> tuple[str, str]:
    """(C++ source, symbol) of the attention kernel for this host.

    >>> source()[1]
    'bz_sdpa_f32'
    """
    sym = "bz_sdpa_f32"
    mvec = int("exp" in libmvec_functions())
    return _kernel_source(__package__, "kernels/attention.cc",
                          {"BZ_MVEC": mvec, "BZ_SYMBOL": sym}), sym


_KERNELS = KernelFamily(lambda _: source())


def _args(attrs: dict[str, Any], views: list[View], off_itemsize: int, threads: int,
          index_itemsize: int = 0, past_half: bool = False) -> np.ndarray:
    q, k, v = views[:3]
    b, hq, t, d = q.shape
    hkv, s, dv = k.shape[1], k.shape[2], v.shape[3]
    past = len(views) >= 6
    p = views[3].shape[2] if past else 0
    work = b * hq * t * (p + s) * (d + dv)
    nt = 1 if work < PARALLEL_WORK else threads
    scale = np.array([attrs["scale"]], np.float64).view(np.int64)[0]
    a = [nt, b, hq, hkv, t, s, int(past), p, d, dv, int(attrs["causal"]), int(scale),
         off_itemsize]
    for i in range(5):
        if i < 3 or past:
            vw = views[i]
            a += [vw.offset, *vw.strides]
        else:
            a += [0, 0, 0, 0, 0]
    lens = views[5] if past else None
    a.append(lens.offset if lens is not None else 0)
    a.append(lens.strides[0] if lens is not None and lens.shape else 0)  # per-row lengths
    if len(views) == 7:  # the past batch row each batch row reads
        ix = views[6]
        a += [1, index_itemsize, ix.offset, ix.strides[0]]
    else:
        a += [0, 0, 0, 0]
    a.append(views[3].shape[0] if past else 0)
    a.append(int(past_half))
    return np.array(a, np.int64)


def _past_half(dtypes: list[np.dtype]) -> bool | None:
    """Whether the kernel reads a float16 past (True), a float32 one (False), or cannot
    run these dtypes (None): q, k, v float32; the past keys and values both float32 or
    both float16 (a half-size KV cache)."""
    if any(d != _F32 for d in dtypes[:3]):
        return None
    if len(dtypes) < 6:
        return False
    pk, pv = dtypes[3], dtypes[4]
    if pk == pv == _F32:
        return False
    return True if pk == pv == _F16 else None


class ScaledDotProductAttention(NativeOp):
    """The ``cpu`` backend's ``library["scaled_dot_product_attention"]``: the native
    kernel for float32 (the numpy reference for other dtypes, or after one warning
    when the kernel cannot be built); also a replay-program step (``native_call``).

    >>> import braze as bz
    >>> impl = ScaledDotProductAttention()
    >>> q = np.ones((1, 1, 2, 4), np.float32)
    >>> impl({"scale": 0.5, "causal": True}, np.dtype(np.float32), q, q, q).shape
    (1, 1, 2, 4)
    """

    op = "scaled_dot_product_attention"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, *xs: np.ndarray
                 ) -> np.ndarray:
        half = _past_half([x.dtype for x in xs])
        h = self._kernel(_KERNELS.handle) if half is not None and out_dtype == _F32 else None
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(SDPA, attrs, out_dtype, *xs)
        if len(xs) >= 6:  # only the valid cached rows are copied (not a whole cache)
            lens = np.asarray(xs[5], np.int64)
            n = min(max(int(lens.max(initial=0)), 0), xs[3].shape[2])
            xs = (*xs[:3], xs[3][:, :, :n], xs[4][:, :, :n], lens,
                  *(np.asarray(x, np.int64) for x in xs[6:]))
        arrays = [np.ascontiguousarray(x) if x.ndim else x for x in xs]  # (0-d stays 0-d)
        views = [View(a.shape, tuple(st // a.itemsize for st in a.strides)) for a in arrays]
        q, v = arrays[0], arrays[2]
        out = np.empty(q.shape[:3] + v.shape[3:], np.float32)
        if out.size:
            args = _args(attrs, views, 8 if len(xs) >= 6 else 0, self._num_threads(), 8,
                         bool(half))
            _core.launch(h, [*arrays, out], args)
        self.calls["native"] += 1
        return out

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """The kernel as a replay-program step (float32, any strides); None otherwise."""
        half = _past_half([d for _, d in inputs])
        if out[1] != _F32 or half is None or 0 in out[0]:
            return None
        if any(d.itemsize not in (4, 8) for _, d in inputs[5:]):
            return None  # the kernel reads 32- or 64-bit past lengths and indices
        try:
            h = _KERNELS.handle()
        except _build.BuildError:
            return None
        views = [v for v, _ in inputs]
        return NativeLibraryCall(h, _args(attrs, views, inputs[5][1].itemsize
                                          if len(inputs) >= 6 else 0, self._num_threads(),
                                          inputs[6][1].itemsize if len(inputs) == 7 else 0,
                                          half))
