"""Native float32 ``x @ W.T`` (matrix-vector and GEMM) for the ``cpu`` backend's replay
programs, and stacks of GEMMs for batched or strided products.

A decode step multiplies one row (or a few) by every weight matrix: ``x @ W.T`` with
W (N, K) row-major, which BLAS runs as a gemv called from Python between native
segments. Up to ``MAX_ROWS`` rows of x this kernel streams W once per call, 4 rows at a
time, with 4 independent SIMD dot products (AVX-512 / AVX2 FMA, scalar elsewhere) and
software prefetch of the next rows, the N rows split evenly between OpenMP threads; the
few rows of x stay in L1. Above (pre-fill, training), on AVX-512 / AVX2 / NEON hosts, a
GEMM in the 4-bit kernel's pre-fill scheme (``qmatmul``, ``kernels/gemm_tile.h``): x
packed once per call into contiguous K x 32 panels (register-blocked transposes; the
scratch reused per thread), chunks of <= 64 rows of W, per panel the chunk's 8-row tiles
with an 8 x 32 block of out^T in 16 registers (2 loads + 8 broadcasts per 16 FMAs), one
chain per output summed over k in order (1 and 2 threads agree bit for bit). It runs as
a replay-program step (``native_call``): float32, x contiguous or (GEMM) the transpose
of a contiguous matrix, the right operand W.T or a contiguous (K, N) matrix. Batched and
strided products (attention's ``q @ k^T`` over heads of a fused projection, their
backward's transposed forms) run as a stack of such GEMMs over the operands in place
(``batched_args``, ``matmul_strided``): each matrix row-major with any row stride or its
transpose, batch dims broadcast; many small products share the threads one per product.
Everything else keeps numpy's matmul. Measurements: README (Performance).

Args (int64): threads, M, N, K (M < 0: write 1.0 to out[0] if the GEMM path is built),
flags (bit 0 swap: W first, ``M @ v`` as a program step, whose buffers come in the
matmul's operand order; bits 1, 2: x / W given transposed; bit 3: a stack of strided
GEMMs, described by the args after it). Buffers: x (M, K), W (N, K), out (M, N). The
vecmat kernel likewise for ``X.T @ v`` (``vecmat``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _core
from ...graph.view import View
from ..kernel_sources import source as _kernel_source
from ..replay import NativeLibraryCall
from . import build as _build
from .library import KernelFamily, file_kernel

__all__ = ["MAX_ROWS", "batched_args", "gemm_available", "matmul_strided", "matvec",
           "native_call", "source", "vecmat", "vecmat_source"]

MAX_ROWS = 8  # rows of x up to which the matvec path runs (above: the GEMM path)
PARALLEL_WEIGHTS = 1 << 16  # N*K below this runs on one thread
PARALLEL_FLOPS = 1 << 19  # a stack of GEMMs with fewer multiply-adds runs on one thread
_F32 = np.dtype(np.float32)


def source(isa: int | None = None) -> tuple[str, str]:
    """(C++ source, symbol) of the matvec kernel; ``isa`` caps the instruction set (0
    scalar, 1 AVX2, 2 AVX-512; None: what ``-march=native`` allows) so tests run
    every path on one machine.

    >>> source()[1], source(0)[1]
    ('bz_matvec_f32', 'bz_matvec_f32_isa0')
    """
    sym = "bz_matvec_f32" + ("" if isa is None else f"_isa{isa}")
    defs: dict[str, object] = {} if isa is None else {"BZ_ISA_MAX": isa}
    defs["BZ_SYMBOL"] = sym
    return _kernel_source(__package__, "kernels/matvec.cc", defs), sym


_KERNELS = KernelFamily(source)
_GEMM: dict[int | None, bool] = {}


def gemm_available(isa: int | None = None) -> bool:
    """Whether the kernel built here has the GEMM path for more than ``MAX_ROWS`` rows
    (AVX-512 or AVX2+FMA; elsewhere those products stay with numpy's BLAS)."""
    if isa not in _GEMM:
        flag = np.zeros(1, np.float32)
        _core.launch(_KERNELS.handle(isa), [flag, flag, flag],
                     np.array([1, -1, 0, 0, 0], np.int64))
        _GEMM[isa] = bool(flag[0])
    return _GEMM[isa]


def matvec(x: np.ndarray, w: np.ndarray, num_threads: int = 1, isa: int | None = None,
           tx: bool = False, tw: bool = False) -> np.ndarray:
    """``x @ w.T`` for float32 x (M, K) and w (N, K), both C-contiguous, with the kernel
    (eager: tests and benchmarks). ``tx`` / ``tw``: x is given as x.T (K, M), w as w.T
    (K, N), both C-contiguous: a matmul's ``X.T @ g`` and ``g @ W`` without a transposed
    copy made beforehand (the GEMM path transposes in blocks; more than ``MAX_ROWS`` rows).

    >>> matvec(np.ones((1, 3), np.float32), np.full((2, 3), 2.0, np.float32)).tolist()
    [[6.0, 6.0]]
    """
    m, k = x.shape[::-1] if tx and x.ndim == 2 else x.shape if x.ndim == 2 else (0, -1)
    n, kw = w.shape[::-1] if tw and w.ndim == 2 else w.shape if w.ndim == 2 else (0, -2)
    if x.dtype != _F32 or w.dtype != _F32 or k != kw or \
            not (x.flags.c_contiguous and w.flags.c_contiguous):
        raise ValueError(f"matvec: expected C-contiguous float32 x (M, K) and w (N, K), got "
                         f"{x.dtype} {x.shape} and {w.dtype} {w.shape}")
    if (tx or tw) and (m <= MAX_ROWS or not gemm_available(isa)):
        raise ValueError(f"matvec: transposed operands need the GEMM path (more than "
                         f"{MAX_ROWS} rows), got {m} rows")
    out = np.empty((m, n), np.float32)
    if out.size:
        _core.launch(_KERNELS.handle(isa), [x, w, out],
                     np.array([num_threads, m, n, k, 2 * tx + 4 * tw], np.int64))
    return out


def _matrix(shape: tuple[int, int], strides: tuple[int, int]) -> tuple[bool, int] | None:
    """(given transposed, row stride) of a (rows, cols) matrix with these element strides:
    row-major with any row stride, or the transpose of one; None otherwise. A size-1 dim's
    stride does not matter."""
    (r, c), (sr, sc) = shape, strides
    if c == 1 or sc == 1:
        return False, sr if r > 1 else c
    if r == 1 or sr == 1:
        return True, sc
    return None


def batched_args(a: View, b: View, out_shape: tuple[int, ...], threads: int
                 ) -> np.ndarray | None:
    """The kernel's args for ``a @ b`` as a stack of GEMMs (args[4] bit 3): a (..., M, K)
    and b (..., K, N) float32 views (offsets and element strides over their buffers; batch
    dims broadcast), the output (broadcast batch..., M, N) contiguous; None when a matrix
    is neither row-major nor its transpose, or a stride is negative.

    >>> from braze.graph.view import View
    >>> q = View((2, 4, 3), (36, 9, 1), 3)  # a column slice of (2, 4, 9) rows: row stride 9
    >>> batched_args(q, View((3, 5), (5, 1)), (2, 4, 5), 2).tolist()
    [2, 4, 5, 3, 12, 9, 5, 3, 0, 1, 2, 36, 0]
    """
    if len(a.shape) < 2 or len(b.shape) < 2 or min(a.strides + b.strides, default=0) < 0:
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    batch = out_shape[:-2]
    xa = _matrix((m, k), (a.strides[-2], a.strides[-1]))  # x = a
    wb = _matrix((n, k), (b.strides[-1], b.strides[-2]))  # W = b^T (N, K)
    if xa is None or wb is None:
        return None
    tx, ldx = xa
    tw, ldw = wb
    ab, bb = a.broadcast(batch + a.shape[-2:]), b.broadcast(batch + b.shape[-2:])
    dims = [(d, sa, sb) for d, sa, sb in zip(batch, ab.strides[:-2], bb.strides[:-2]) if d != 1]
    return np.array([threads, m, n, k, 2 * tx + 4 * tw + 8, ldx, ldw, a.offset, b.offset,
                     len(dims), *(v for dim in dims for v in dim)], np.int64)


def _span(a: np.ndarray) -> tuple[np.ndarray, View] | None:
    """A C-contiguous 1-d array over the memory of ``a`` (non-negative strides, whole
    elements) and ``a`` as a view of it; None for other layouts."""
    item = a.itemsize
    if any(st < 0 or st % item for st in a.strides):
        return None
    span = 1 + sum((d - 1) * (st // item) for d, st in zip(a.shape, a.strides))
    flat = np.lib.stride_tricks.as_strided(a, (span,), (item,))
    return flat, View(a.shape, tuple(st // item for st in a.strides))


def matmul_strided(a: np.ndarray, b: np.ndarray, num_threads: int = 1) -> np.ndarray | None:
    """``a @ b`` for float32 a (..., M, K) and b (..., K, N), each matrix row-major or
    transposed with any row stride and the batch dims broadcast, as a stack of GEMMs
    read in place (batched attention products, slices of a fused projection) on
    ``num_threads`` threads (one when the product is small); None when the layout does
    not fit or this build has no GEMM path (the caller's matmul runs).

    >>> q = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, :, 1:]  # row stride 4
    >>> k = np.ones((3, 2), np.float32)
    >>> np.array_equal(matmul_strided(q, k), q @ k)
    True
    """
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim < 2 or \
            a.shape[-1] != b.shape[-2] or a.size == 0 or b.size == 0 or not gemm_available():
        return None  # (empty operands: numpy's matmul gives the zeros or the empty result)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) +
                   (a.shape[-2], b.shape[-1]), np.float32)
    if out.size == 0:
        return out
    sa, sb = _span(a), _span(b)
    if sa is None or sb is None:
        return None
    threads = 1 if out.size * a.shape[-1] < PARALLEL_FLOPS else num_threads
    args = batched_args(sa[1], sb[1], out.shape, threads)
    if args is None:
        return None
    _core.launch(_KERNELS.handle(), [sa[0], sb[0], out], args)
    return out


vecmat_source, _VECMAT = file_kernel(__package__, "kernels/vecmat.cc", "bz_vecmat_f32")


def vecmat(v: np.ndarray, a: np.ndarray, num_threads: int = 1) -> np.ndarray:
    """``v @ a`` (``a.T @ v``) for float32 v (N,) and a row-major a (N, K): the rows in
    fixed chunks (threads share them; the partial sums are added in chunk order, so any
    thread count gives the same bits). A gradient's ``X.T @ r`` without a transposed copy
    or a BLAS thread pool beside the kernels' OpenMP one.

    >>> vecmat(np.ones(3, np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)).tolist()
    [6.0, 9.0]
    """
    if v.dtype != _F32 or a.dtype != _F32 or v.ndim != 1 or a.ndim != 2 or \
            v.shape[0] != a.shape[0] or not (v.flags.c_contiguous and a.flags.c_contiguous):
        raise ValueError(f"vecmat: expected C-contiguous float32 v (N,) and a (N, K), got "
                         f"{v.dtype} {v.shape} and {a.dtype} {a.shape}")
    out = np.empty(a.shape[1], np.float32)
    if out.size:
        _core.launch(_VECMAT.handle(), [v, a, out],
                     np.array([num_threads, a.shape[0], a.shape[1], 0], np.int64))
    return out


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype], num_threads: int
                ) -> NativeLibraryCall | None:
    """``matmul(x, W.T)`` as a replay-program step when x is float32, contiguous with
    at most ``MAX_ROWS`` rows and W.T is the transpose of a contiguous (N, K) float32
    matrix, or ``M @ v`` / ``X.T @ v`` of a contiguous matrix; None otherwise (numpy's
    matmul runs). Build failures also give None.

    >>> from braze.graph.view import View
    >>> x, wt = View.contiguous((1, 8)), View.contiguous((4, 8)).permute((1, 0))
    >>> native_call({}, [(x, _F32), (wt, _F32)], ((1, 4), _F32), 2) is not None
    True
    """
    (xv, xd), (wv, wd) = inputs
    if attrs or xd != _F32 or wd != _F32 or out[1] != _F32:
        return None
    if len(xv.shape) == 2 and len(wv.shape) == 1:
        return _vector_call(xv, wv, out, num_threads)
    if len(wv.shape) != 2 or xv.offset or wv.offset:
        return _batched_call(xv, wv, out, num_threads)
    k, n = wv.shape
    if xv.shape[-1] != k or n == 0 or k == 0:
        return None
    m = xv.size // k
    if m == 0 or out[0] != xv.shape[:-1] + (n,):
        return None
    # x contiguous, or (2-d, the GEMM path) the transpose of a contiguous (K, M) matrix
    tx = not xv.is_contiguous()
    if tx and (len(xv.shape) != 2 or m <= MAX_ROWS or
               xv.canonical() != View((m, k), (1 if m > 1 else 0, m if k > 1 else 0))):
        return _batched_call(xv, wv, out, num_threads)
    # W.T of a contiguous (N, K) W: strides (1, K), offset 0 (size-1 dims: stride 0); or
    # (the GEMM path) a contiguous (K, N) right operand
    tw = wv.canonical() != View((k, n), (1 if k > 1 else 0, k if n > 1 else 0))
    if tw and (m <= MAX_ROWS or not wv.is_contiguous()):
        return _batched_call(xv, wv, out, num_threads)
    try:
        h = _KERNELS.handle()
        if m > MAX_ROWS and not gemm_available():
            return None
    except _build.BuildError:
        return None
    threads = 1 if n * k * max(1, m // 8) < PARALLEL_WEIGHTS else num_threads
    return NativeLibraryCall(h, np.array([threads, m, n, k, 2 * tx + 4 * tw], np.int64))


def _batched_call(xv: View, wv: View, out: tuple[tuple[int, ...], np.dtype], num_threads: int
                  ) -> NativeLibraryCall | None:
    """``a @ b`` of float32 views with at least 2 dims each (strided matrices, broadcast
    batch dims) as a program step: a stack of GEMMs (``batched_args``); None otherwise."""
    if len(xv.shape) < 2 or len(wv.shape) < 2 or 0 in out[0] or xv.shape[-1] != wv.shape[-2] \
            or xv.shape[-1] == 0:
        return None
    work = math.prod(out[0]) * xv.shape[-1]
    args = batched_args(xv, wv, out[0], 1 if work < PARALLEL_FLOPS else num_threads)
    if args is None:
        return None
    try:
        if not gemm_available():
            return None
        return NativeLibraryCall(_KERNELS.handle(), args)
    except _build.BuildError:
        return None


def _vector_call(av: View, vv: View, out: tuple[tuple[int, ...], np.dtype], num_threads: int
                 ) -> NativeLibraryCall | None:
    """``M @ v`` (the matvec kernel, its buffers swapped) or ``X.T @ v`` (the vecmat
    kernel) of a contiguous float32 matrix as a program step; None otherwise."""
    n, k = av.shape
    if vv.shape != (k,) or out[0] != (n,) or n == 0 or k == 0 or \
            not (vv.offset == 0 and vv.is_contiguous()) or av.offset != 0:
        return None
    threads = 1 if n * k < PARALLEL_WEIGHTS else num_threads
    try:
        if av.is_contiguous():  # M @ v
            return NativeLibraryCall(_KERNELS.handle(), np.array([threads, 1, n, k, 1],
                                                                 np.int64))
        # X.T @ v of a contiguous (k, n) X: strides (1, n) (size-1 dims: stride 0)
        if av.canonical() == View((n, k), (1 if n > 1 else 0, n if k > 1 else 0)):
            return NativeLibraryCall(_VECMAT.handle(), np.array([threads, k, n, 1], np.int64))
    except _build.BuildError:
        pass
    return None
