"""Shared pieces of the ``cpu`` backend's native library-op kernels (quantized matmul,
attention, rope, matvec): a family of kernels built on first use, and the base of the
``library[op]`` implementations (thread count from the backend, call counters, one
warning when a kernel cannot be built).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from . import build as _build

__all__ = ["DISPATCH", "GEMM_TILE", "KernelFamily", "NativeOp"]

# The AVX-512 GEMM register tile shared by the float32 pre-fill GEMM (matvec.py) and the
# 4-bit one (qmatmul.py, on dequantized rows): y[m * N + j] = w row j . x row m for the
# nw <= 8 rows of w (row stride K) and mv <= 32 rows of x, given transposed (xT[k * ld +
# m]). An 8 x 32 block of out^T in 16 registers: per k, 2 (masked) loads of xT, 8
# broadcasts of w, 16 FMAs, no horizontal sums; one chain per output, summed over k in
# order; the block goes to y through a stack buffer (scattered stores with stride N
# touch a page per lane and were slower). Needs <immintrin.h>, AVX-512F and DISPATCH.
# f(std::integral_constant<int, n>) for a runtime n in [1, N] (n >= N: N): one template
# instance per block size -- register-blocked kernels need compile-time sizes -- without a
# hand-written switch per kernel. Any ISA; C++17.
DISPATCH = r"""
#include <type_traits>
template <int N, class F> static inline __attribute__((always_inline)) void
bz_dispatch(int64_t n, F&& f) {
    if constexpr (N > 1) {
        if (n < N) {
            bz_dispatch<N - 1>(n, f);
            return;
        }
    }
    f(std::integral_constant<int, N>{});
}
"""

GEMM_TILE = r"""
template <int NW>
static void bz_wx_tile(const float* w, int64_t K, const float* xT, int64_t ld, int64_t mv,
                       float* y, int64_t N) {
    __m512 acc[NW][2];  /* unrolled: registers, not memory */
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const __mmask16 k0 = mv >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << mv) - 1u);
    const __mmask16 k1 = mv >= 32 ? (__mmask16)0xFFFF
                         : mv <= 16 ? (__mmask16)0 : (__mmask16)((1u << (mv - 16)) - 1u);
    for (int64_t k = 0; k < K; ++k) {
        const __m512 x0 = _mm512_maskz_loadu_ps(k0, xT + k * ld);
        const __m512 x1 = _mm512_maskz_loadu_ps(k1, xT + k * ld + 16);
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r) {
            const __m512 wv = _mm512_set1_ps(w[r * K + k]);
            acc[r][0] = _mm512_fmadd_ps(wv, x0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(wv, x1, acc[r][1]);
        }
    }
    float blk[NW][32];
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) {
        _mm512_storeu_ps(blk[r], acc[r][0]);
        _mm512_storeu_ps(blk[r] + 16, acc[r][1]);
    }
    for (int64_t m = 0; m < mv; ++m)
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r) y[m * N + r] = blk[r][m];
}

static inline void bz_wx_tiles(const float* w, int64_t nw, int64_t K, const float* xT,
                               int64_t ld, int64_t mv, float* y, int64_t N) {
    bz_dispatch<8>(nw, [&](auto r) { bz_wx_tile<decltype(r)::value>(w, K, xT, ld, mv, y, N); });
}
"""


class KernelFamily:
    """Kernels from ``source(key) -> (C++ source, symbol)``, built and loaded on first use
    per key; a failed build is remembered (raised again, never retried in-process).

    >>> fam = KernelFamily(lambda key: (
    ...     'extern "C" __attribute__((visibility("default"))) '
    ...     'void bz_doc_nop(void**, const long*) {}', "bz_doc_nop"))
    >>> fam.handle() == fam.handle()
    True
    """

    def __init__(self, source: Callable[[Any], tuple[str, str]]) -> None:
        self._source = source
        self._handles: dict[Hashable, int] = {}
        self._failed: dict[Hashable, _build.BuildError] = {}
        self._lock = threading.Lock()

    def handle(self, key: Hashable = None) -> int:
        """The loaded kernel for ``key``; raises BuildError."""
        h = self._handles.get(key)
        if h is not None:
            return h
        if key in self._failed:
            raise self._failed[key]
        with self._lock:
            if key not in self._handles:
                try:
                    self._handles[key] = _build.load(*self._source(key))
                except _build.BuildError as e:
                    self._failed[key] = e
                    raise
        return self._handles[key]

    def handles(self) -> dict[Hashable, int]:
        """The kernels loaded so far, by key."""
        return dict(self._handles)


class NativeOp:
    """Base of a ``cpu`` library-op implementation ``impl(attrs, out_dtype, *inputs)``:
    ``calls`` counts native and numpy runs; ``_kernel(get)`` returns a handle, or None
    after one RuntimeWarning naming the op when the kernel cannot be built (the caller
    then runs the numpy reference)."""

    op = ""

    def __init__(self, backend: Any = None) -> None:
        self._backend = weakref.ref(backend) if backend is not None else None
        self.calls = {"native": 0, "numpy": 0}
        self._warned = False

    def _num_threads(self) -> int:
        b = self._backend() if self._backend is not None else None
        if b is not None:
            return b.num_threads
        from . import default_num_threads  # the package imports this module

        return default_num_threads()

    def _warn_build(self, e: _build.BuildError, what: str = "") -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"braze cpu backend: the {self.op} kernel{what} failed to build; "
                          f"{self.op} runs with the numpy reference instead.\n{e}",
                          RuntimeWarning, stacklevel=4)

    def _kernel(self, get: Callable[[], int], what: str = "") -> int | None:
        try:
            return get()
        except _build.BuildError as e:
            self._warn_build(e, what)
            return None
