"""Native float32 ``x @ W.T`` (matrix-vector and GEMM) for the ``cpu`` backend's replay
programs.

A decode step multiplies one row (or a few) by every weight matrix: ``x @ W.T`` with
W (N, K) row-major, which BLAS runs as a gemv called from Python between native
segments. Up to ``MAX_ROWS`` rows of x this kernel streams W once per call, 4 rows at a
time, with 4 independent SIMD dot products (AVX-512 / AVX2 FMA, scalar elsewhere) and
software prefetch of the next rows, the N rows split evenly between OpenMP threads; the
few rows of x stay in L1. Above (pre-fill), on AVX-512 hosts, a GEMM in the 4-bit
kernel's pre-fill scheme (``qmatmul``): x transposed once per call (rows padded to 16
floats: aligned loads), chunks of <= 64 rows of W, per 32 rows of x the chunk's 8-row
tiles with an 8 x 32 block of out^T in 16 registers (2 loads + 8 broadcasts per 16 FMAs),
one chain per output summed over k in order (1 and 2 threads agree bit for bit).
Elsewhere those products stay with numpy's BLAS. It runs as a replay-program step
(``native_call``): float32, x contiguous, the right operand the transpose of a contiguous
(N, K) matrix (what ``Linear`` hands over). Everything else keeps numpy's matmul.

Measured on this host (2 cores, AVX-512): SmolLM2-135M's 121 float32 matvecs per
token (538 MB of weights) 18.5 ms (29 GB/s) vs 25.3 ms through numpy/OpenBLAS; its
pre-fill GEMMs (M = 104) 200-240 GFLOP/s vs OpenBLAS 156-181 (float32 pre-fill 614-669
-> 728-769 tok/s: no OpenBLAS thread pool beside the OpenMP one either).

Args (int64): threads, M, N, K (M < 0: write 1.0 to out[0] if the GEMM path is built).
Buffers: x (M, K), W (N, K), out (M, N).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ...graph.view import View
from ..replay import NativeLibraryCall
from . import build as _build
from .library import DISPATCH, GEMM_TILE, KernelFamily

__all__ = ["MAX_ROWS", "gemm_available", "matvec", "native_call", "source"]

MAX_ROWS = 8  # rows of x up to which the matvec path runs (above: the GEMM path)
PARALLEL_WEIGHTS = 1 << 16  # N*K below this runs on one thread
_F32 = np.dtype(np.float32)

_SOURCE = r"""
#include <cstdint>
#include <cstdlib>
BZ_DISPATCH
#define BZ_MAX_ROWS 8
#ifndef BZ_ISA_MAX
#define BZ_ISA_MAX 2
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

static inline void bz_rows4(const float *x, const float *w, float *y, int64_t K, int64_t M,
                            int64_t N) {
    const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
    for (int64_t m = 0; m < M; ++m) {
        const float *xm = x + m * K;
        int64_t k = 0;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
#if defined(__AVX512F__) && BZ_ISA_MAX >= 2
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; k + 16 <= K; k += 16) {
            if (m == 0) {
                _mm_prefetch((const char *) (w0 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char *) (w1 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char *) (w2 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char *) (w3 + k + 4 * K), _MM_HINT_T0);
            }
            const __m512 xv = _mm512_loadu_ps(xm + k);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), xv, a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), xv, a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), xv, a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), xv, a3);
        }
        s0 = _mm512_reduce_add_ps(a0), s1 = _mm512_reduce_add_ps(a1);
        s2 = _mm512_reduce_add_ps(a2), s3 = _mm512_reduce_add_ps(a3);
#elif defined(__AVX2__) && defined(__FMA__) && BZ_ISA_MAX >= 1
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; k + 8 <= K; k += 8) {
            const __m256 xv = _mm256_loadu_ps(xm + k);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), xv, a3);
        }
        float t[8];
        __m256 *acc[4] = {&a0, &a1, &a2, &a3};
        float *out[4] = {&s0, &s1, &s2, &s3};
        for (int r = 0; r < 4; ++r) {
            _mm256_storeu_ps(t, *acc[r]);
            *out[r] = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
        }
#endif
        for (; k < K; ++k) {
            const float xk = xm[k];
            s0 += w0[k] * xk, s1 += w1[k] * xk, s2 += w2[k] * xk, s3 += w3[k] * xk;
        }
        float *ym = y + m * N;
        ym[0] = s0, ym[1] = s1, ym[2] = s2, ym[3] = s3;
    }
}

static inline void bz_row1(const float *x, const float *w, float *y, int64_t K, int64_t M,
                           int64_t N) {
    for (int64_t m = 0; m < M; ++m) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += w[k] * x[m * K + k];
        y[m * N] = s;
    }
}

#if defined(__AVX512F__) && BZ_ISA_MAX >= 2
#define BZ_GEMM 1
/* GEMM (M > MAX_ROWS), qmatmul's pre-fill scheme: out^T = W x^T with xT = x transposed
   (K x M, once per call). Chunks of <= 64 rows of W (~128 KiB, L2); per 32 rows of x, the
   chunk's 8-row tiles: 2 * 8 accumulators in registers; per k, 2 (masked) loads of xT, 8
   broadcasts of W, 16 FMAs -- one chain per output, summed over k in order. */
BZ_GEMM_TILE

static void bz_gemm(const float *x, const float *W, float *y, int64_t M, int64_t N, int64_t K,
                    int64_t nt) {
    if (K == 0) {  /* empty sums */
        for (int64_t i = 0; i < M * N; ++i) y[i] = 0.f;
        return;
    }
    /* rows of xT padded to 16 floats: every load of 16 is one aligned cache line */
    const int64_t Mp = (M + 15) / 16 * 16;
    float *xT = (float *) aligned_alloc(64, sizeof(float) * (size_t) (K * Mp));
    for (int64_t m0 = 0; m0 < M; m0 += 16)  /* 16 x 16 blocks */
        for (int64_t k0 = 0; k0 < K; k0 += 16)
            for (int64_t k = k0; k < (k0 + 16 < K ? k0 + 16 : K); ++k)
                for (int64_t m = m0; m < (m0 + 16 < M ? m0 + 16 : M); ++m)
                    xT[k * Mp + m] = x[m * K + k];
    int64_t NC = (32768 / K) / 8 * 8;
    NC = NC < 8 ? 8 : (NC > 64 ? 64 : NC);
#pragma omp parallel num_threads((int) nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t blocks = (N + 7) / 8;
        const int64_t n0 = 8 * (blocks * t / T), n1 = 8 * (blocks * (t + 1) / T);
        const int64_t ne = n1 < N ? n1 : N;
        for (int64_t h0 = n0; h0 < ne; h0 += NC) {
            const int64_t nh = ne - h0 < NC ? ne - h0 : NC;
            for (int64_t m0 = 0; m0 < M; m0 += 32) {
                const int64_t mv = M - m0 < 32 ? M - m0 : 32;
                for (int64_t j0 = 0; j0 < nh; j0 += 8)
                    bz_wx_tiles(W + (h0 + j0) * K, nh - j0 < 8 ? nh - j0 : 8, K, xT + m0, Mp,
                                mv, y + m0 * N + h0 + j0, N);
            }
        }
    }
    free(xT);
}
#else
#define BZ_GEMM 0
#endif

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void **bufs,
                                                            const int64_t *a) {
    const int64_t nt = a[0], M = a[1], N = a[2], K = a[3];
    const float *x = (const float *) bufs[0], *W = (const float *) bufs[1];
    float *y = (float *) bufs[2];
    if (M < 0) {  /* query: does this build have the GEMM path? */
        y[0] = (float) BZ_GEMM;
        return;
    }
#if BZ_GEMM
    if (M > BZ_MAX_ROWS) {
        bz_gemm(x, W, y, M, N, K, nt);
        return;
    }
#endif
    const int64_t blocks = N / 4;
#pragma omp parallel num_threads((int) nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = blocks * t / T, hi = blocks * (t + 1) / T;
        for (int64_t b = lo; b < hi; ++b) bz_rows4(x, W + 4 * b * K, y + 4 * b, K, M, N);
        if (t == T - 1)
            for (int64_t n = 4 * blocks; n < N; ++n) bz_row1(x, W + n * K, y + n, K, M, N);
    }
}
"""


def source(isa: int | None = None) -> tuple[str, str]:
    """(C++ source, symbol) of the matvec kernel; ``isa`` caps the instruction set (0
    scalar, 1 AVX2, 2 AVX-512; None: what ``-march=native`` allows) so tests run
    every path on one machine.

    >>> source()[1], source(0)[1]
    ('bz_matvec_f32', 'bz_matvec_f32_isa0')
    """
    sym = "bz_matvec_f32" + ("" if isa is None else f"_isa{isa}")
    head = "" if isa is None else f"#define BZ_ISA_MAX {isa}\n"
    return head + _SOURCE.replace("BZ_SYMBOL", sym).replace("BZ_GEMM_TILE", GEMM_TILE).replace(
        "BZ_DISPATCH", DISPATCH), sym


_KERNELS = KernelFamily(source)
_GEMM: dict[int | None, bool] = {}


def gemm_available(isa: int | None = None) -> bool:
    """Whether the kernel built here has the GEMM path for more than ``MAX_ROWS`` rows
    (AVX-512; elsewhere those products stay with numpy's BLAS)."""
    if isa not in _GEMM:
        flag = np.zeros(1, np.float32)
        _core.launch(_KERNELS.handle(isa), [flag, flag, flag],
                     np.array([1, -1, 0, 0], np.int64))
        _GEMM[isa] = bool(flag[0])
    return _GEMM[isa]


def matvec(x: np.ndarray, w: np.ndarray, num_threads: int = 1, isa: int | None = None
           ) -> np.ndarray:
    """``x @ w.T`` for float32 x (M, K) and w (N, K), both C-contiguous, with the kernel
    (eager: tests and benchmarks).

    >>> matvec(np.ones((1, 3), np.float32), np.full((2, 3), 2.0, np.float32)).tolist()
    [[6.0, 6.0]]
    """
    if x.dtype != _F32 or w.dtype != _F32 or x.ndim != 2 or w.ndim != 2 or \
            x.shape[1] != w.shape[1] or not (x.flags.c_contiguous and w.flags.c_contiguous):
        raise ValueError(f"matvec: expected C-contiguous float32 x (M, K) and w (N, K), got "
                         f"{x.dtype} {x.shape} and {w.dtype} {w.shape}")
    m, k = x.shape
    out = np.empty((m, w.shape[0]), np.float32)
    if out.size:
        _core.launch(_KERNELS.handle(isa), [x, w, out],
                     np.array([num_threads, m, w.shape[0], k], np.int64))
    return out


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype], num_threads: int
                ) -> NativeLibraryCall | None:
    """``matmul(x, W.T)`` as a replay-program step when x is float32, contiguous with
    at most ``MAX_ROWS`` rows and W.T is the transpose of a contiguous (N, K) float32
    matrix; None otherwise (numpy's matmul runs). Build failures also give None.

    >>> from braze.graph.view import View
    >>> x, wt = View.contiguous((1, 8)), View.contiguous((4, 8)).permute((1, 0))
    >>> native_call({}, [(x, _F32), (wt, _F32)], ((1, 4), _F32), 2) is not None
    True
    """
    (xv, xd), (wv, wd) = inputs
    if attrs or xd != _F32 or wd != _F32 or out[1] != _F32 or len(wv.shape) != 2:
        return None
    k, n = wv.shape
    if xv.shape[-1] != k or not (xv.offset == 0 and xv.is_contiguous()) or n == 0 or k == 0:
        return None
    m = xv.size // k
    if m == 0 or out[0] != xv.shape[:-1] + (n,):
        return None
    # W.T of a contiguous (N, K) W: strides (1, K), offset 0 (size-1 dims: stride 0)
    if wv.offset != 0 or wv.canonical() != View((k, n), (1 if k > 1 else 0,
                                                         k if n > 1 else 0)):
        return None
    try:
        h = _KERNELS.handle()
        if m > MAX_ROWS and not gemm_available():
            return None
    except _build.BuildError:
        return None
    threads = 1 if n * k * max(1, m // 8) < PARALLEL_WEIGHTS else num_threads
    return NativeLibraryCall(h, np.array([threads, m, n, k], np.int64))
