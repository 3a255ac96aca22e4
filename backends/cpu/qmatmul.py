"""Native dequantize-fused ``quantized_matmul`` for the ``cpu`` backend.

``y = x @ dequantize(wq, scales, biases).T`` without ever materializing the float
weight: each kernel reads the packed codes once, unpacks them in registers, applies
the group's affine map (``w = scale * code + bias``, one FMA per vector) and
accumulates against ``x``. Layout: MLX's affine groups (see ``graph/ops.py`` above
``QUANT_BITS``): row ``n`` of the (N, K) weight is ``K // group_size`` groups, codes
packed little-end first into uint32 words, so byte ``j`` of a 4-bit row holds
elements ``2j`` (low nibble) and ``2j + 1`` (high nibble).

Kernel (C++ generated per (bits, group_size, scale dtype), built through the
backend's cache in :mod:`.build`, launched with the uniform kernel ABI
``kernel(void** bufs, const int64_t* args)`` of ``braze._core``):

* **Vectorization**, chosen at compile time from the ISA macros of ``-march=native``
  (the cache key holds the host's CPU features): AVX-512 (16 lanes), AVX2+FMA (8
  lanes) or portable scalar C++. A block of codes is zero-extended byte -> int32
  (``vpmovzxbd``); at 4 bits ``and 15`` gives the even elements and ``>> 4`` the odd
  ones, so x is de-interleaved once per launch into a scratch row (even elements of
  each block, then the odd ones) and no shuffle runs in the inner loop. 8-bit codes
  are already in element order.
* **Rows of x**: below 16 rows (decode, short prompts) the codes are unpacked in
  registers and each unpacked weight vector serves up to 4 rows of x; M = 1 keeps 4
  independent accumulators to hide the FMA latency. At 4 bits with AVX-512 the 16
  possible weights of a group are computed once (``fma(iota, scale, bias)``) and each
  code is a ``vpermps`` lane lookup (no int->float conversion, no mask). From 16 rows
  on (prefill), a tile of weight rows (~64 KiB) is dequantized into a float buffer once
  and multiplied by every row of x with a 4x4 (AVX2: 4x2) register-blocked kernel.
* **Threads**: OpenMP, the N rows split evenly between threads; small problems run
  on one thread (a parallel region costs more than they do).
* **Accuracy** (exact-float path, the only one): every weight is ``fma(code, s, b)``
  in float32 (the reference rounds ``code * s`` then adds ``b``: at most one ulp of
  the weight apart) and the products are summed in float32 in a different order than
  BLAS. Against a float64 evaluation of the dequantized weight (asserted by
  ``tests/test_quantized.py`` for every ISA path, M = 1 ... 33, K up to 384):
  ``|y - y64| <= 1e-5 * (|x| @ (|code * scale| + |bias|).T)`` elementwise. No int8
  approximation of x is made (a VNNI int8 variant would be ~1e-2 relative).
* **Fallbacks**: no compiler / a failed build -> the numpy reference (dequantize then
  matmul) after **one** ``RuntimeWarning``; x of another float dtype is computed in
  float32 and the result cast once (as the reference does); scales/biases of
  different dtypes or other than float32/float16 are converted to float32.

``BRAZE_QMM_ISA`` (0 scalar, 1 AVX2, 2 AVX-512) caps the instruction set (tests
exercise every path on one machine); it can only lower what the host has.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from typing import Any

import numpy as np

from ... import _core
from ...graph import dtypes as dt
from ...graph.ops import QUANTIZED_MATMUL, _qmm_ref, quant_check, reference_eval
from . import build as _build
from . import default_num_threads

__all__ = ["QuantizedMatmul", "host_isa", "kernel_isa", "quantized_matmul", "source"]

ISA_NAMES = {0: "scalar", 1: "avx2", 2: "avx512"}
PARALLEL_WEIGHTS = 1 << 17  # N*K*max(1, M/4) below this runs on one thread

_SOURCE = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

#if defined(__AVX512F__)
#define BZ_ISA_HOST 2
#elif defined(__AVX2__) && defined(__FMA__)
#define BZ_ISA_HOST 1
#else
#define BZ_ISA_HOST 0
#endif
#if defined(BZ_ISA_MAX) && BZ_ISA_MAX < BZ_ISA_HOST
#define BZ_ISA BZ_ISA_MAX
#else
#define BZ_ISA BZ_ISA_HOST
#endif

#define BZ_INLINE inline __attribute__((always_inline))
#define BZ_MB 4                          /* rows of x per unpacked weight vector */
#define BZ_GBYTES (BZ_GS * BZ_BITS / 8)  /* packed bytes per group */

#if BZ_HALF
typedef uint16_t stype;
static BZ_INLINE float bz_h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f;  /* subnormal: m * 2^-24 */
        uint32_t vb;
        memcpy(&vb, &v, 4);
        f = s | vb;
    } else if (e == 31) {
        f = s | 0x7f800000u | (m << 13);
    } else {
        f = s | ((e + 112u) << 23) | (m << 13);
    }
    float r;
    memcpy(&r, &f, 4);
    return r;
#endif
}
#else
typedef float stype;
#endif

#if BZ_ISA == 2
struct VT {
    typedef __m512 F;
    typedef __m512i I;
    enum { L = 16, BB = 16, NR = 4 };  /* lanes; packed bytes per block; tile micro-kernel cols */
    static BZ_INLINE F zero() { return _mm512_setzero_ps(); }
    static BZ_INLINE F set1(float v) { return _mm512_set1_ps(v); }
    static BZ_INLINE F load(const float* p) { return _mm512_loadu_ps(p); }
    static BZ_INLINE void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static BZ_INLINE F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static BZ_INLINE F add(F a, F b) { return _mm512_add_ps(a, b); }
    static BZ_INLINE float hsum(F v) { return _mm512_reduce_add_ps(v); }
    static BZ_INLINE I bytes(const uint8_t* p) {
        return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p));
    }
    static BZ_INLINE I shr4(I v) { return _mm512_srli_epi32(v, 4); }
    static BZ_INLINE F cvt(I v) { return _mm512_cvtepi32_ps(v); }
    static BZ_INLINE F cvt4(I v) { return cvt(_mm512_and_si512(v, _mm512_set1_epi32(15))); }
};
#elif BZ_ISA == 1
struct VT {
    typedef __m256 F;
    typedef __m256i I;
    enum { L = 8, BB = 8, NR = 2 };
    static BZ_INLINE F zero() { return _mm256_setzero_ps(); }
    static BZ_INLINE F set1(float v) { return _mm256_set1_ps(v); }
    static BZ_INLINE F load(const float* p) { return _mm256_loadu_ps(p); }
    static BZ_INLINE void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static BZ_INLINE F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static BZ_INLINE F add(F a, F b) { return _mm256_add_ps(a, b); }
    static BZ_INLINE float hsum(F v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    static BZ_INLINE I bytes(const uint8_t* p) {
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
    }
    static BZ_INLINE I shr4(I v) { return _mm256_srli_epi32(v, 4); }
    static BZ_INLINE F cvt(I v) { return _mm256_cvtepi32_ps(v); }
    static BZ_INLINE F cvt4(I v) { return cvt(_mm256_and_si256(v, _mm256_set1_epi32(15))); }
};
#endif

#if BZ_ISA > 0
/* Elements per block: one block is VT::BB packed bytes, unpacked into 2 vectors (4 bits:
   even elements, odd elements) or 1 vector (8 bits). x (and a dequantized tile) is stored
   de-interleaved per block at 4 bits (see bz_permute), as is at 8 bits. */
#define BZ_E (VT::BB * 8 / BZ_BITS)
#define BZ_P (BZ_BITS == 4 ? 2 : 1)
#define BZ_BPG (BZ_GS / BZ_E)

/* One group's dequantization: w = fma(code, scale, bias). With AVX-512 at 4 bits the 16
   possible values are computed once per group into a register and each code is a lane
   permutation (vpermps reads only the low 4 bits of each index: no mask needed). */
struct GroupW {
    typedef VT::F F;
#if BZ_ISA == 2 && BZ_BITS == 4
    F T;
    BZ_INLINE GroupW(float s, float b) {
        const F iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        T = VT::fma(iota, VT::set1(s), VT::set1(b));
    }
    BZ_INLINE void deq(const uint8_t* p, F& lo, F& hi) const {
        const VT::I v = VT::bytes(p);
        lo = _mm512_permutexvar_ps(v, T);
        hi = _mm512_permutexvar_ps(VT::shr4(v), T);
    }
    BZ_INLINE F deq8(const uint8_t*) const { return T; }  /* never called at 4 bits */
#else
    F sv, bv;
    BZ_INLINE GroupW(float s, float b) : sv(VT::set1(s)), bv(VT::set1(b)) {}
    BZ_INLINE void deq(const uint8_t* p, F& lo, F& hi) const {
        const VT::I v = VT::bytes(p);
        lo = VT::fma(VT::cvt4(v), sv, bv);
        hi = VT::fma(VT::cvt(VT::shr4(v)), sv, bv);
    }
    BZ_INLINE F deq8(const uint8_t* p) const { return VT::fma(VT::cvt(VT::bytes(p)), sv, bv); }
#endif
};

/* One group (u-th of the iteration) of MB rows of x against one weight row. */
template <int MB, int A>
static BZ_INLINE void bz_group(VT::F (&acc)[MB][A], const uint8_t* wp, float s, float b,
                               const float* xp, int64_t K, int u) {
    typedef VT::F F;
    const GroupW gw(s, b);
#pragma GCC unroll 16
    for (int j = 0; j < BZ_BPG; ++j) {
        const int blk = u * BZ_BPG + j;
        const float* xj = xp + j * BZ_E;
        if (BZ_BITS == 4) {
            F wl, wh;
            gw.deq(wp + j * VT::BB, wl, wh);
#pragma GCC unroll 8
            for (int m = 0; m < MB; ++m) {
                acc[m][(2 * blk) % A] = VT::fma(wl, VT::load(xj + m * K), acc[m][(2 * blk) % A]);
                acc[m][(2 * blk + 1) % A] =
                    VT::fma(wh, VT::load(xj + m * K + VT::L), acc[m][(2 * blk + 1) % A]);
            }
        } else {
            const F w = gw.deq8(wp + j * VT::BB);
#pragma GCC unroll 8
            for (int m = 0; m < MB; ++m)
                acc[m][blk % A] = VT::fma(w, VT::load(xj + m * K), acc[m][blk % A]);
        }
    }
}

/* out[m * N] = dot(x row m, w row) for MB consecutive rows of x (stride K). */
template <int MB>
static void bz_rows(const uint8_t* wrow, const float* s, const float* b, const float* xp,
                    int64_t K, int64_t G, float* out, int64_t N) {
    typedef VT::F F;
    constexpr int A = MB <= 2 ? 4 : 2;            /* accumulators per row */
    constexpr int GU = BZ_BPG * BZ_P >= A ? 1 : A / (BZ_BPG * BZ_P);  /* groups per iteration */
    F acc[MB][A];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 4
        for (int a = 0; a < A; ++a) acc[m][a] = VT::zero();
    int64_t g = 0;
    for (; g + GU <= G; g += GU) {
#pragma GCC unroll 4
        for (int u = 0; u < GU; ++u)
            bz_group<MB, A>(acc, wrow + (g + u) * BZ_GBYTES, s[g + u], b[g + u],
                            xp + (g + u) * BZ_GS, K, u);
    }
    for (; g < G; ++g) bz_group<MB, A>(acc, wrow + g * BZ_GBYTES, s[g], b[g], xp + g * BZ_GS, K, 0);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
        F t = acc[m][0];
#pragma GCC unroll 4
        for (int a = 1; a < A; ++a) t = VT::add(t, acc[m][a]);
        out[m * N] = VT::hsum(t);
    }
}

/* A weight row dequantized to float32 (in x's de-interleaved order). */
static void bz_dequant_row(const uint8_t* wrow, const float* s, const float* b, int64_t G,
                           float* dst) {
    for (int64_t g = 0; g < G; ++g) {
        const GroupW gw(s[g], b[g]);
        const uint8_t* wp = wrow + g * BZ_GBYTES;
        float* d = dst + g * BZ_GS;
#pragma GCC unroll 16
        for (int j = 0; j < BZ_BPG; ++j) {
            if (BZ_BITS == 4) {
                VT::F wl, wh;
                gw.deq(wp + j * VT::BB, wl, wh);
                VT::store(d + j * BZ_E, wl);
                VT::store(d + j * BZ_E + VT::L, wh);
            } else {
                VT::store(d + j * BZ_E, gw.deq8(wp + j * VT::BB));
            }
        }
    }
}

/* MR rows of x (stride K) against VT::NR rows of a float tile (stride K): an MR x NR
   block of out (only the first nv columns are stored). */
template <int MR>
static void bz_micro(const float* xm, const float* wt, int64_t K, float* out, int64_t N,
                     int64_t nv) {
    typedef VT::F F;
    constexpr int NR = VT::NR;
    F acc[MR][NR];
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[m][j] = VT::zero();
    for (int64_t k = 0; k < K; k += VT::L) {
        F w[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) w[j] = VT::load(wt + j * K + k);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
            const F xv = VT::load(xm + m * K + k);
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) acc[m][j] = VT::fma(xv, w[j], acc[m][j]);
        }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m)
        for (int j = 0; j < nv; ++j) out[m * N + j] = VT::hsum(acc[m][j]);
}

/* x row -> per block of BZ_E elements: the even elements, then the odd ones (4 bits). */
static void bz_permute(const float* x, float* xp, int64_t K) {
    for (int64_t k0 = 0; k0 < K; k0 += BZ_E)
        for (int j = 0; j < VT::L; ++j) {
            xp[k0 + j] = x[k0 + 2 * j];
            xp[k0 + VT::L + j] = x[k0 + 2 * j + 1];
        }
}
#define BZ_PERMUTE (BZ_BITS == 4)
#define BZ_TILED 1
#else
/* Portable scalar path: elements in natural order. */
template <int MB>
static void bz_rows(const uint8_t* wrow, const float* s, const float* b, const float* xp,
                    int64_t K, int64_t G, float* out, int64_t N) {
    float acc[MB];
    for (int m = 0; m < MB; ++m) acc[m] = 0.0f;
    const int64_t per = 32 / BZ_BITS;
    const uint32_t mask = (1u << BZ_BITS) - 1u;
    for (int64_t g = 0; g < G; ++g) {
        const float sg = s[g], bg = b[g];
        for (int64_t w = 0; w < BZ_GS / per; ++w) {
            uint32_t word;
            memcpy(&word, wrow + (g * (BZ_GS / per) + w) * 4, 4);
            const int64_t k0 = g * BZ_GS + w * per;
            for (int64_t i = 0; i < per; ++i) {
                const float q = (float)((word >> (i * BZ_BITS)) & mask);
                const float wv = q * sg + bg;
                for (int m = 0; m < MB; ++m) acc[m] += wv * xp[m * K + k0 + i];
            }
        }
    }
    for (int m = 0; m < MB; ++m) out[m * N] = acc[m];
}
static void bz_permute(const float*, float*, int64_t) {}
#define BZ_PERMUTE 0
#define BZ_TILED 0
#endif

#if BZ_HALF
/* n float16 values to float32 (vectorized with F16C / AVX-512). */
static BZ_INLINE void bz_h2f_n(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__) && BZ_ISA == 2
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(src + i))));
#endif
#if defined(__F16C__) && BZ_ISA >= 1
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + i))));
#endif
    for (; i < n; ++i) dst[i] = bz_h2f(src[i]);
}
#endif

/* Scales and biases of weight row n as float32 (converted into sb at float16). */
static BZ_INLINE void bz_row_sb(const stype* sc, const stype* bi, int64_t n, int64_t G,
                                float* sb, const float** s, const float** b) {
#if BZ_HALF
    bz_h2f_n(sc + n * G, sb, G);
    bz_h2f_n(bi + n * G, sb + G, G);
    *s = sb;
    *b = sb + G;
#else
    (void)sb;
    *s = sc + n * G;
    *b = bi + n * G;
#endif
}

/* bufs: x (M, K) float32, wq (N, K*bits/8 bytes), scales (N, G), biases (N, G),
   out (M, N) float32, scratch (M, K) float32 (the de-interleaved x at 4 bits).
   args: threads, M, N, K. M < 0: write the compiled ISA level to ((int64_t*)bufs[0])[0].
   M < BZ_TILE_M: fused (codes unpacked in registers against up to 4 rows of x);
   else a tile of weight rows is dequantized into an L1/L2-sized float buffer and
   multiplied by every row of x with a register-blocked micro-kernel. */
#define BZ_TILE_M 16
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs,
                                                                 const int64_t* args) {
    const int64_t nt = args[0], M = args[1], N = args[2], K = args[3];
    if (M < 0) {
        ((int64_t*)bufs[0])[0] = BZ_ISA;
        return;
    }
    const float* x = (const float*)bufs[0];
    const uint8_t* wq = (const uint8_t*)bufs[1];
    const stype* sc = (const stype*)bufs[2];
    const stype* bi = (const stype*)bufs[3];
    float* out = (float*)bufs[4];
    float* scratch = (float*)bufs[5];
    const int64_t G = K / BZ_GS, rowbytes = K * BZ_BITS / 8;
    const float* xp = BZ_PERMUTE ? scratch : x;
    const bool tiled = BZ_TILED && M >= BZ_TILE_M;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        if (BZ_PERMUTE) {
            for (int64_t m = M * t / T; m < M * (t + 1) / T; ++m)
                bz_permute(x + m * K, scratch + m * K, K);
#pragma omp barrier
        }
        const int64_t n0 = N * t / T, n1 = N * (t + 1) / T;
        float* sb = BZ_HALF ? (float*)malloc(sizeof(float) * (size_t)(2 * G + 1)) : nullptr;
        const float *s, *b;
#if BZ_TILED
        if (tiled) {
            constexpr int NR = VT::NR;
            int64_t NT = ((int64_t)(64 * 1024 / 4) / K) / NR * NR;  /* tile rows: ~64 KiB */
            if (NT < NR) NT = NR;
            if (NT > 64) NT = 64;
            float* tile = (float*)calloc((size_t)(NT * K), sizeof(float));
            for (int64_t c0 = n0; c0 < n1; c0 += NT) {
                const int64_t nc = n1 - c0 < NT ? n1 - c0 : NT;
                for (int64_t r = 0; r < nc; ++r) {
                    bz_row_sb(sc, bi, c0 + r, G, sb, &s, &b);
                    bz_dequant_row(wq + (c0 + r) * rowbytes, s, b, G, tile + r * K);
                }
                for (int64_t m0 = 0; m0 < M; m0 += 4) {
                    const int64_t mr = M - m0 < 4 ? M - m0 : 4;
                    const float* xm = xp + m0 * K;
                    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
                        const int64_t nv = nc - j0 < NR ? nc - j0 : NR;
                        float* o = out + m0 * N + c0 + j0;
                        const float* wt = tile + j0 * K;
                        switch (mr) {
                            case 1: bz_micro<1>(xm, wt, K, o, N, nv); break;
                            case 2: bz_micro<2>(xm, wt, K, o, N, nv); break;
                            case 3: bz_micro<3>(xm, wt, K, o, N, nv); break;
                            default: bz_micro<4>(xm, wt, K, o, N, nv); break;
                        }
                    }
                }
            }
            free(tile);
        } else
#endif
        {
            for (int64_t m0 = 0; m0 < M; m0 += BZ_MB) {
                const int64_t mb = M - m0 < BZ_MB ? M - m0 : BZ_MB;
                const float* xm = xp + m0 * K;
                for (int64_t n = n0; n < n1; ++n) {
                    bz_row_sb(sc, bi, n, G, sb, &s, &b);
                    const uint8_t* wrow = wq + n * rowbytes;
                    float* o = out + m0 * N + n;
                    switch (mb) {
                        case 1: bz_rows<1>(wrow, s, b, xm, K, G, o, N); break;
                        case 2: bz_rows<2>(wrow, s, b, xm, K, G, o, N); break;
                        case 3: bz_rows<3>(wrow, s, b, xm, K, G, o, N); break;
                        default: bz_rows<4>(wrow, s, b, xm, K, G, o, N); break;
                    }
                }
            }
        }
        free(sb);
    }
}
"""


def host_isa() -> int:
    """The best kernel ISA level this CPU runs: 2 AVX-512, 1 AVX2+FMA, 0 scalar.

    >>> host_isa() in (0, 1, 2)
    True
    """
    feats = set(_core.cpu_features())
    if "avx512f" in feats:
        return 2
    if {"avx2", "fma"} <= feats:
        return 1
    return 0


def _isa_cap(isa: int | None) -> int | None:
    if isa is None:
        return _ENV_ISA
    if isa not in ISA_NAMES:
        raise ValueError(f"quantized_matmul: isa must be 0 (scalar), 1 (avx2) or 2 (avx512), "
                         f"got {isa!r}")
    return isa


def _env_isa() -> int | None:
    env = os.environ.get("BRAZE_QMM_ISA")
    if not env:
        return None
    if env not in ("0", "1", "2"):
        raise ValueError(f"BRAZE_QMM_ISA must be 0, 1 or 2, got {env!r}")
    return int(env)


_ENV_ISA = _env_isa()  # read at import


def source(bits: int, group_size: int, half: bool, isa: int | None = None) -> tuple[str, str]:
    """(C++ source, symbol) of the kernel for one (bits, group_size, scale dtype).

    ``half``: scales and biases are float16 (else float32); ``isa`` caps the
    instruction set (None: the best the compiler's ``-march=native`` allows).

    >>> src, sym = source(4, 64, False)
    >>> sym
    'bz_qmm_b4_g64_f32'
    """
    sym = f"bz_qmm_b{bits}_g{group_size}_{'f16' if half else 'f32'}"
    defs = [f"#define BZ_BITS {bits}", f"#define BZ_GS {group_size}",
            f"#define BZ_HALF {int(half)}"]
    if isa is not None:
        defs.append(f"#define BZ_ISA_MAX {isa}")
        sym += f"_isa{isa}"
    text = "\n".join(defs) + "\n" + _SOURCE.replace("BZ_SYMBOL", sym)
    return text, sym


_handles: dict[tuple[int, int, bool, int | None], int] = {}
_failed: dict[tuple[int, int, bool, int | None], _build.BuildError] = {}
_lock = threading.Lock()


def _handle(bits: int, group_size: int, half: bool, isa: int | None) -> int:
    """The loaded kernel (built on first use); raises BuildError."""
    key = (bits, group_size, half, isa)
    h = _handles.get(key)
    if h is not None:
        return h
    if key in _failed:
        raise _failed[key]
    with _lock:
        h = _handles.get(key)
        if h is not None:
            return h
        try:
            h = _build.load(*source(bits, group_size, half, isa))
        except _build.BuildError as e:
            _failed[key] = e
            raise
        _handles[key] = h
        return h


def kernel_isa(bits: int = 4, group_size: int = 32, half: bool = False,
               isa: int | None = None) -> int:
    """The ISA level the kernel for these parameters was compiled with (builds it).

    >>> kernel_isa() == host_isa()
    True
    """
    h = _handle(bits, group_size, half, _isa_cap(isa))
    box = np.zeros(1, np.int64)
    _core.launch(h, [box, box, box, box, box, box], np.array([1, -1, 0, 0], np.int64))
    return int(box[0])


_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)
_NO_SCRATCH = np.empty(1, np.float32)  # 8 bits: x is read in place


def _native(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
            group_size: int, bits: int, num_threads: int, isa: int | None) -> np.ndarray:
    """The kernel's float32 result (x already float32, shapes already checked)."""
    k = x.shape[-1]
    n = wq.shape[0]
    x2 = x if x.ndim == 2 else x.reshape(-1, k)
    if not x2.flags.c_contiguous:
        x2 = np.ascontiguousarray(x2)
    m = x2.shape[0]
    if m == 0 or n == 0 or k == 0:
        return np.zeros(x.shape[:-1] + (n,), np.float32)
    sd, bd = scales.dtype, biases.dtype
    half = sd == _F16 and bd == _F16
    if half:
        scales, biases = scales.view(np.uint16), biases.view(np.uint16)
    elif sd != _F32 or bd != _F32:
        scales, biases = scales.astype(np.float32), biases.astype(np.float32)
    if not (scales.flags.c_contiguous and biases.flags.c_contiguous and wq.flags.c_contiguous):
        scales, biases, wq = (np.ascontiguousarray(a) for a in (scales, biases, wq))
    h = _handle(bits, group_size, half, isa)
    out = np.empty((m, n), np.float32)
    scratch = np.empty(m * k, np.float32) if bits == 4 else _NO_SCRATCH
    # a parallel region costs more than a small problem: one thread below PARALLEL_WEIGHTS
    threads = 1 if n * k * (m // 4 or 1) < PARALLEL_WEIGHTS else min(num_threads, n)
    _core.launch(h, [x2, wq, scales, biases, out, scratch], np.array([threads, m, n, k], np.int64))
    return out if x.ndim == 2 else out.reshape(x.shape[:-1] + (n,))


def _check(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
           group_size: int, bits: int) -> None:
    k = quant_check("quantized_matmul", (wq.shape, wq.dtype), (scales.shape, scales.dtype),
                    (biases.shape, biases.dtype), group_size, bits)
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(f"quantized_matmul: x of shape {x.shape} does not match packed "
                         f"weights of {wq.shape[0]} rows x {k} columns (last dims differ)")
    if not dt.is_real_floating(x.dtype):
        raise TypeError(f"quantized_matmul: x must be real floating, got {dt.name(x.dtype)}")


def quantized_matmul(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
                     *, group_size: int = 32, bits: int = 4, num_threads: int | None = None,
                     isa: int | None = None) -> np.ndarray:
    """``x @ dequantize(wq, scales, biases).T`` on numpy arrays with the native kernel.

    Eager (no graph): the building block the ``cpu`` backend's library op and the
    benchmark use. The result has x's dtype (computed in float32). ``num_threads``:
    default ``BRAZE_NUM_THREADS`` / all CPUs; ``isa``: cap the instruction set (0
    scalar, 1 AVX2, 2 AVX-512). Raises BuildError when the kernel cannot be built.

    >>> import numpy as np
    >>> from braze.arrays.quantized import pack
    >>> wq = pack(np.full((3, 32), 2), 4)
    >>> s, b = np.full((3, 1), 0.5, np.float32), np.zeros((3, 1), np.float32)
    >>> quantized_matmul(np.ones((1, 32), np.float32), wq, s, b, group_size=32, bits=4)
    array([[32., 32., 32.]], dtype=float32)
    """
    x, wq, scales, biases = (np.asarray(a) for a in (x, wq, scales, biases))
    _check(x, wq, scales, biases, group_size, bits)
    out = _native(x.astype(np.float32, copy=False), wq, scales, biases, group_size, bits,
                  num_threads or default_num_threads(), _isa_cap(isa))
    return out if out.dtype == x.dtype else out.astype(x.dtype)


class QuantizedMatmul:
    """The ``cpu`` backend's ``library["quantized_matmul"]``: ``impl(attrs, out_dtype,
    x, wq, scales, biases)`` runs the native kernel (the numpy reference after one
    warning when it cannot be built). ``calls`` counts native and numpy runs.

    >>> import braze as bz
    >>> impl = QuantizedMatmul()
    >>> wq, s, b = (np.asarray(a) for a in bz.quantize(bz.ones((2, 32)), bits=8))
    >>> impl({"group_size": 32, "bits": 8}, np.dtype(np.float32), np.ones((1, 32), np.float32),
    ...      wq, s, b).tolist()
    [[32.0, 32.0]]
    >>> impl.calls["native"]
    1
    """

    def __init__(self, backend: Any = None) -> None:
        self._backend = weakref.ref(backend) if backend is not None else None
        self.calls = {"native": 0, "numpy": 0}
        self._warned = False

    def _num_threads(self) -> int:
        b = self._backend() if self._backend is not None else None
        return b.num_threads if b is not None else default_num_threads()

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 wq: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
        gs, bits = attrs["group_size"], attrs["bits"]
        try:
            out = _native(x if x.dtype == _F32 else x.astype(np.float32), wq, scales, biases,
                          gs, bits, self._num_threads(), _ENV_ISA)
        except _build.BuildError as e:
            if not self._warned:
                self._warned = True
                warnings.warn("braze cpu backend: the quantized_matmul kernel (bits="
                              f"{bits}, group_size={gs}) failed to build; quantized_matmul "
                              f"runs with the numpy reference instead.\n{e}", RuntimeWarning,
                              stacklevel=2)
            self.calls["numpy"] += 1
            return reference_eval(QUANTIZED_MATMUL, attrs, out_dtype, x, wq, scales, biases)
        self.calls["native"] += 1
        return out if out.dtype == out_dtype else out.astype(out_dtype)


def reference(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, *,
              group_size: int, bits: int) -> np.ndarray:
    """The numpy reference (dequantize, then matmul), for comparison.

    >>> from braze.arrays.quantized import pack
    >>> reference(np.ones((1, 32), np.float32), pack(np.ones((1, 32)), 8),
    ...           np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32),
    ...           group_size=32, bits=8).tolist()
    [[32.0]]
    """
    return _qmm_ref(x, wq, scales, biases, group_size=group_size, bits=bits)
