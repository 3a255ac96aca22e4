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
  on (prefill), chunks of weight rows are dequantized into a float buffer once and
  multiplied by every row of x: AVX-512 computes ``out^T = W x^T`` (x transposed once
  per call; 8 weight rows x 32 rows of x in 16 registers, 2 loads + 8 broadcasts per
  16 FMAs, no horizontal sums; ~120 GFLOP/s per core here, about BLAS sgemm), AVX2 a
  4x2 dot-product kernel.
* **Threads**: OpenMP, the N rows split evenly between threads; small problems run
  on one thread (a parallel region costs more than they do).
* **Prefetch** (M < 16 paths, int8 and exact): each pass issues ``prefetcht0`` for the
  codes, scales and biases of the weight rows ``BZ_PF_ROWS`` (8) rows ahead, so the next
  rows stream in from DRAM while these compute (decode reads every weight once per token,
  from memory, and the hardware prefetcher alone left the loads exposed: SmolLM2-135M's
  4-bit matvecs of one token on one thread 8.9 -> 6.2 ms). No effect on the results.
* **Per-call Python work**: the launch-ready state of a weight (kernel handle, VNNI level,
  argument arrays per (M, threads, int8)) is cached per (wq, scales, biases) objects,
  holding only weak references (the entry leaves with the arrays); float16 scales are
  passed as they are (the kernel reads raw 16-bit words).
* **int8 activations** (``act="int8"``, M <= ``INT8_MAX_M`` = 8, kernels compiled with
  AVX-512 VNNI, or AVX-VNNI at the AVX2 level; elsewhere the exact path runs): each row
  of x is quantized once per call per block of 32 (``dx = max|x| / 127``, ``q =
  rint(x / dx)``, int8), with per-block ``sum(x)`` and per-group sums for the bias. The
  codes stay bytes: ``vpdpbusd`` (u8 code x s8 q -> int32) at 64 elements per AVX-512
  instruction. 4 bits: 64 packed bytes (4 blocks) split by one ``and`` / one ``shift +
  and`` into low and high nibbles, x de-interleaved per chunk of 128 at quantization so
  no shuffle runs in the loop; the odd tail (K % 128) unpacks words ``(w | w << 4) &
  0x0f0f`` in natural order. Per chunk: two chained ``vpdpbusd``, one int->float
  conversion, one ``vpermps`` to spread the 4 blocks' combined scales ``s * dx``
  (precomputed per row), one FMA. 4 weight rows x up to 4 x rows per pass, one
  accumulator chain per output (the same arithmetic whatever the blocking or thread:
  1 and 2 threads give identical results). ``y = sum_blk s*dx*idot + sum_g b*sum(x_g) +
  Z * sum_blk s*(sum(x_blk) - dx*sum(q_blk))``: the last term centres the codes
  (``Z`` = 8 at 4 bits, 128 at 8) exactly, which halves the error.
  Bound (asserted by the tests): ``|y - y64| <= 0.5 * sum_blk |s| * dx * sum_k |code_k -
  Z|`` + float32 rounding. Measured on SmolLM2-135M's weights (all 30 layers' qkv,
  o, gate_up, down at 4 bits; the 8-bit tied embedding as lm_head) against the exact
  path, ``||y_int8 - y|| / ||y||``: captured decode activations median 0.7-0.9 %, max
  2.0 % (4 bits), median 0.7 %, max 1.0 % (8 bits); random normal x median 0.5-0.6 %.
  Per matvec on one thread (hot cache, this 2-core AVX-512 host): 576x3072 4-bit
  95 -> 50 us, 1536x576 47 -> 17 us; the 8-bit lm_head is memory bound (1.2x).
* **int8 GEMM** (``act="int8"``, M > ``INT8_MAX_M``, 4-bit weights, AVX-512 VNNI kernels;
  the AVX-VNNI kernel runs the matvec path above for every M; 8-bit weights run the exact
  path): the same quantization of x (dx, q, the centring ``ez`` and group sums, rows
  quantized in parallel, each block stored as its 16 even elements then its 16 odd
  ones) and the same bound, but the output's 16 lanes are 16 weight rows: per call
  each tile of 16 rows is repacked (per block of 32, 4 vectors of one dword = 8 codes
  per row; scales and biases to float32 per lane), its nibbles split once per block and
  reused by 8 rows of x: per (row of x, block), 8 ``vpdpbusd`` against broadcast dwords
  of q into an int32 chain, then ``t = idot * dx + ez``, ``acc += t * s`` (``+ b *
  sum(x_g)`` at a group's first block). Every output is one chain over the blocks
  whatever the row block, tile or thread (1 and 2 threads give identical results);
  OpenMP over tiles. SmolLM2-135M prefill shapes at M = 96 on 2 threads (this host):
  2.0-3.3x the tiled float path (~420 vs ~140 GFLOP/s), end to end 84-token prefill 440
  -> ~800 tok/s. Not under ``auto``: with int8 prefill (the qkv projection alone
  suffices) SmolLM2 no longer answers "Paris" in ``examples/llm/chat.py`` (the relative
  errors, 0.3-1 %, are those of the decode path, but every cached key/value carries them).
* **Which activations** (``BRAZE_QMM_ACT`` = ``auto`` | ``int8`` | ``float``, read at
  import, again by ``reload_env()``; ``act=`` overrides): the default ``auto`` runs int8
  against 4-bit weights up to ``INT8_MAX_M`` rows and the exact path against 8-bit ones
  and for more rows. At 4 bits the int8 error
  (< 1 %) is far below the weights' own quantization error (~10 %) and the matvecs are
  1.5-2.8x faster; at 8 bits it would double the weights' error for 1.2x (memory bound),
  and on SmolLM2 it flips the greedy answer of ``tests/test_llm.py`` when the 8-bit
  lm_head runs int8 (it does not with ``auto``).
* **Accuracy** (exact-float path): every weight is ``fma(code, s, b)``
  in float32 (the reference rounds ``code * s`` then adds ``b``: at most one ulp of
  the weight apart) and the products are summed in float32 in a different order than
  BLAS. Against a float64 evaluation of the dequantized weight (asserted by
  ``tests/test_quantized.py`` for every ISA path, M = 1 ... 33, K up to 384):
  ``|y - y64| <= 1e-5 * (|x| @ (|code * scale| + |bias|).T)`` elementwise. No
  approximation of x is made.
* **Fallbacks**: no compiler / a failed build -> the numpy reference (dequantize then
  matmul) after **one** ``RuntimeWarning``; x of another float dtype is computed in
  float32 and the result cast once (as the reference does); scales/biases of
  different dtypes or other than float32/float16 are converted to float32.

``BRAZE_QMM_ISA`` (0 scalar, 1 AVX2, 2 AVX-512) caps the instruction set (tests
exercise every path on one machine); it can only lower what the host has.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import numpy as np

from ... import _core
from ...graph import dtypes as dt
from ...graph.ops import QUANTIZED_MATMUL, _qmm_ref, quant_check, reference_eval
from ...graph.view import View
from ..replay import NativeLibraryCall
from . import build as _build
from . import default_num_threads
from .library import DISPATCH, GEMM_TILE, KernelFamily, NativeOp

__all__ = ["QuantizedMatmul", "act_mode", "host_isa", "int8_available", "kernel_isa",
           "quantized_matmul", "reload_env", "source"]

ISA_NAMES = {0: "scalar", 1: "avx2", 2: "avx512"}
PARALLEL_WEIGHTS = 1 << 17  # N*K*max(1, M/4) below this runs on one thread
INT8_MAX_M = 8  # rows of x up to which int8 runs the matvec path (BZ_I8_MMAX), then GEMM
ACT_MODES = ("auto", "int8", "float")
DEFAULT_ACT = "auto"  # int8 activations against 4-bit weights, exact float against 8-bit

_SOURCE = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
BZ_DISPATCH
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
/* Software prefetch of [p, p + n) into L2 (one hint per cache line): the weight rows a
   few passes ahead, so the next rows' codes and scales stream in while these compute. */
#ifndef BZ_PF_ROWS
#define BZ_PF_ROWS 8
#endif
static BZ_INLINE void bz_prefetch(const void* p, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
#else
    (void)p;
    (void)n;
#endif
}
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

/* out[m * N + j] = x row m . tile row j for m < M, j < nt (x and the tile with stride K):
   bz_micro over 4 rows of x by VT::NR tile rows (8 loads per 16 FMAs at AVX-512), tile
   groups outer (for few rows of x: the tile streams once). Reads whole VT::NR-row groups
   of the tile: rows up to nt rounded up must be readable. The AVX2 pre-fill path (4 rows
   of x per call), and the AVX-512 one's last block of <= 16 rows (where its broadcast
   kernel, one vector per weight row, is load-bound). Always inlined: as a call, its
   AVX-512 caller ran ~12 % slower. */
static BZ_INLINE void bz_tile_rows(const float* xp, int64_t M, int64_t K, const float* tile,
                                   int64_t nt, float* out, int64_t N) {
    constexpr int NR = VT::NR;
    for (int64_t j0 = 0; j0 < nt; j0 += NR) {
        const int64_t nv = nt - j0 < NR ? nt - j0 : NR;
        const float* wt = tile + j0 * K;
        for (int64_t m0 = 0; m0 < M; m0 += 4) {
            const float* xm = xp + m0 * K;
            float* o = out + m0 * N + j0;
            bz_dispatch<4>(M - m0, [&](auto r) {
                bz_micro<decltype(r)::value>(xm, wt, K, o, N, nv); });
        }
    }
}

#if BZ_ISA == 2
/* Pre-fill (AVX-512): out^T = W x^T. A tile of BZ_NW = 8 dequantized weight rows (row
   major, as dequantized) against 32 rows of x transposed (xT[k * M + m], once per call:
   M*K elements against M*N*K multiply-adds) with an 8 x 32 block of out^T in 16
   registers: per k, 2 loads of xT, 8 broadcasts of weights, 16 FMAs, no horizontal sums
   and no transposition of weights; the block goes to out through a stack buffer. */
#define BZ_NW 8
#define BZ_NC 64 /* at most this many weight rows dequantized per chunk, */
#define BZ_CHUNK_FLOATS 32768 /* about this many floats (128 KiB: L2 keeps x^T too) */
#define BZ_WXT 1
/* dst[c * ld + r] = src[r * C + c] for rows r in [r0, r1), all C columns: 16x16 blocks
   (both sides touch 16 cache lines per block, not one line per element). */
static void bz_transpose(const float* src, int64_t r0, int64_t r1, int64_t C, float* dst,
                         int64_t ld) {
    for (int64_t rb = r0; rb < r1; rb += 16) {
        const int64_t re = rb + 16 < r1 ? rb + 16 : r1;
        for (int64_t cb = 0; cb < C; cb += 16) {
            const int64_t ce = cb + 16 < C ? cb + 16 : C;
            for (int64_t c = cb; c < ce; ++c)
                for (int64_t r = rb; r < re; ++r) dst[c * ld + r] = src[r * C + c];
        }
    }
}

BZ_GEMM_TILE

#else
#define BZ_WXT 0
#endif

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

#if BZ_ISA > 0
/* Weight rows [c0, c0 + nc) dequantized to float32 into tile (row stride K). */
static void bz_dequant_rows(const uint8_t* wq, const stype* sc, const stype* bi, float* sb,
                            int64_t c0, int64_t nc, int64_t G, int64_t K, float* tile) {
    const int64_t rowbytes = K * BZ_BITS / 8;
    const float *s, *b;
    for (int64_t r = 0; r < nc; ++r) {
        bz_row_sb(sc, bi, c0 + r, G, sb, &s, &b);
        bz_dequant_row(wq + (c0 + r) * rowbytes, s, b, G, tile + r * K);
    }
}
#endif

/* ---------------------------------------------------------------- int8-activation path
   x quantized once per call to int8 per block of 32 (dx = max|x| / 127, q = rint(x / dx)),
   integer dot products against the unsigned codes with VNNI (u8 x s8 -> int32), then per
   output y = sum_blocks s * dx * idot + sum_groups b * sum(x). */
#if BZ_ISA == 2 && defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define BZ_VNNI 2
#elif BZ_ISA >= 1 && defined(__AVXVNNI__)
#define BZ_VNNI 1
#else
#define BZ_VNNI 0
#endif

#if BZ_VNNI
#define BZ_I8_PAD 16 /* dx and sum(x) arrays padded with zeros to a multiple of this */
static BZ_INLINE int64_t bz_pad16(int64_t n) { return (n + 15) / 16 * 16; }

#if BZ_VNNI == 2
/* 64 elements (2 blocks of 32) per step. 4-bit codes: 32 packed bytes zero-extended to
   words, (w | w << 4) & 0x0f0f puts element 2j (low nibble) in byte 2j and element 2j+1
   in byte 2j+1: natural order, no shuffle of x. */
struct QV {
    typedef __m512 F;
    typedef __m512i I;
    enum { E = 64, L = 16, C = 128 };
    /* 4-bit chunk of C elements (4 blocks): 64 packed bytes; the low nibbles pair with the
       chunk's even elements of x, the high ones with the odd (x de-interleaved per chunk);
       int32 lane i sums block i / 4 */
    static BZ_INLINE void w4c(const uint8_t* p, I& lo, I& hi) {
        const I v = _mm512_loadu_si512((const void*)p), f = _mm512_set1_epi8(15);
        lo = _mm512_and_si512(v, f);
        hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), f);
    }
    static BZ_INLINE F dot2(I lo, I ql, I hi, I qh) {
        return _mm512_cvtepi32_ps(
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, ql), hi, qh));
    }
    static BZ_INLINE F spatc(const float* cs) {
        const __m512i i = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        return _mm512_permutexvar_ps(i, _mm512_castps128_ps512(_mm_loadu_ps(cs)));
    }
    static BZ_INLINE I nib(I z) {
        return _mm512_ternarylogic_epi32(z, _mm512_slli_epi16(z, 4), _mm512_set1_epi16(0x0f0f),
                                         0xA8); /* (a | b) & c */
    }
    static BZ_INLINE I w4(const uint8_t* p) {
        return nib(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i*)p)));
    }
    static BZ_INLINE I w8(const uint8_t* p) { return _mm512_loadu_si512((const void*)p); }
    /* the last, odd block of 32 (upper half undefined: multiplied by x's zero padding) */
    static BZ_INLINE I w4t(const uint8_t* p) {
        const __m256i z = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)p));
        return nib(_mm512_castsi256_si512(z));
    }
    static BZ_INLINE I w8t(const uint8_t* p) {
        return _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)p));
    }
    static BZ_INLINE I qload(const int8_t* p) { return _mm512_loadu_si512((const void*)p); }
    static BZ_INLINE F dot(I w, I q) {
        return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q));
    }
    /* combined scales of a step: lanes 0-7 block cs[0], lanes 8-15 block cs[1] */
    static BZ_INLINE F spat(const float* cs) {
        const __m128 two = _mm_castpd_ps(_mm_load_sd((const double*)cs));
        const __m512i i = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        return _mm512_permutexvar_ps(i, _mm512_castps128_ps512(two));
    }
    /* n (1..16) scales/biases from p as float32, zero filled */
    static BZ_INLINE F lds(const stype* p, int64_t n) {
        const __mmask16 k = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
#if BZ_HALF
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
#else
        return _mm512_maskz_loadu_ps(k, p);
#endif
    }
    /* lane i <- lane i * 32 / BZ_GS (block -> its weight group) */
    static BZ_INLINE F expand(F v) {
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                               15);
        const __m512i i = _mm512_srli_epi32(iota, BZ_GS == 64 ? 1 : 2);
        return _mm512_permutexvar_ps(i, v);
    }
    static BZ_INLINE F load(const float* p) { return _mm512_loadu_ps(p); }
    static BZ_INLINE void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    static BZ_INLINE F zero() { return _mm512_setzero_ps(); }
    static BZ_INLINE F add(F a, F b) { return _mm512_add_ps(a, b); }
    static BZ_INLINE F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static BZ_INLINE F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static BZ_INLINE float hsum(F v) { return _mm512_reduce_add_ps(v); }
};
#else
/* AVX-VNNI (no AVX-512 VNNI): 32 elements (one block) per step. */
struct QV {
    typedef __m256 F;
    typedef __m256i I;
    enum { E = 32, L = 8, C = 64 };
    static BZ_INLINE void w4c(const uint8_t* p, I& lo, I& hi) {
        const I v = _mm256_loadu_si256((const __m256i*)p), f = _mm256_set1_epi8(15);
        lo = _mm256_and_si256(v, f);
        hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), f);
    }
    static BZ_INLINE F dot2(I lo, I ql, I hi, I qh) {
        const __m256i a = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, ql);
        return _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(a, hi, qh));
    }
    static BZ_INLINE F spatc(const float* cs) {
        const __m128 two = _mm_castpd_ps(_mm_load_sd((const double*)cs));
        return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two),
                                        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    }
    static BZ_INLINE I w4(const uint8_t* p) {
        const I z = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)p));
        return _mm256_and_si256(_mm256_or_si256(z, _mm256_slli_epi16(z, 4)),
                                _mm256_set1_epi16(0x0f0f));
    }
    static BZ_INLINE I w8(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
    static BZ_INLINE I w4t(const uint8_t* p) { return w4(p); }  /* never called */
    static BZ_INLINE I w8t(const uint8_t* p) { return w8(p); }
    static BZ_INLINE I qload(const int8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
    static BZ_INLINE F dot(I w, I q) {
        return _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, q));
    }
    static BZ_INLINE F spat(const float* cs) { return _mm256_broadcast_ss(cs); }
    static BZ_INLINE F lds(const stype* p, int64_t n) {
        stype t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const stype* src = p;
        if (n < 8) {
            memcpy(t, p, sizeof(stype) * (size_t)n);
            src = t;
        }
#if BZ_HALF
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)src));
#else
        return _mm256_loadu_ps(src);
#endif
    }
    static BZ_INLINE F expand(F v) {
        const __m256i i = _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            BZ_GS == 64 ? 1 : 2);
        return _mm256_permutevar8x32_ps(v, i);
    }
    static BZ_INLINE F load(const float* p) { return _mm256_loadu_ps(p); }
    static BZ_INLINE void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static BZ_INLINE F zero() { return _mm256_setzero_ps(); }
    static BZ_INLINE F add(F a, F b) { return _mm256_add_ps(a, b); }
    static BZ_INLINE F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static BZ_INLINE F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static BZ_INLINE float hsum(F v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
};
#endif

/* One x row (K floats) -> q (int8, zero padded to Kp), dx (one per block of 32, zero
   padded to a multiple of 16), sx (sum of x over each weight group, zero padded). AVX2. */
#define BZ_ZC (BZ_BITS == 4 ? 8.0f : 128.0f) /* the centre of the code range */
static void bz_quant_row(const float* x, int64_t K, int64_t Kp, int8_t* q, float* dx,
                         float* ez, float* sx, bool blk = false) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i deint = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                           0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const int64_t G32 = K / 32, G = K / BZ_GS;
    for (int64_t g = 0; g < G32; ++g) {
        const float* xg = x + g * 32;
        const __m256 v0 = _mm256_loadu_ps(xg), v1 = _mm256_loadu_ps(xg + 8),
                     v2 = _mm256_loadu_ps(xg + 16), v3 = _mm256_loadu_ps(xg + 24);
        const __m256 a = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0),
                                                     _mm256_andnot_ps(sign, v1)),
                                       _mm256_max_ps(_mm256_andnot_ps(sign, v2),
                                                     _mm256_andnot_ps(sign, v3)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        /* cvtps rounds to nearest even; |x * id| <= 127 (+ rounding): no saturation */
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
        {   /* ez = Z * (sum of the block's x - dx * sum of its q): centres the codes */
            const __m256i qs = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(qs), _mm256_extracti128_si256(qs, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
            const __m256 xs = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));
            __m128 u = _mm_add_ps(_mm256_castps256_ps128(xs), _mm256_extractf128_ps(xs, 1));
            u = _mm_add_ps(u, _mm_movehl_ps(u, u));
            u = _mm_add_ss(u, _mm_movehdup_ps(u));
            ez[g] = BZ_ZC * (_mm_cvtss_f32(u) - d * (float)_mm_cvtsi128_si32(t));
        }
        i0 = _mm256_packs_epi32(i0, i1);
        i2 = _mm256_packs_epi32(i2, i3);
        i0 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i0, i2), perm);
        const int64_t c = g / (QV::C / 32);
        if (BZ_BITS == 4 && blk) { /* GEMM layout: each block's 16 even elements, then odd */
            i0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(i0, deint), 0xD8);
            _mm256_storeu_si256((__m256i*)(q + g * 32), i0);
        } else if (BZ_BITS == 4 && c < K / QV::C) {
            /* chunk of C elements: the even elements of its blocks, then the odd ones */
            i0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(i0, deint), 0xD8);
            int8_t* qc = q + c * QV::C + (g % (QV::C / 32)) * 16;
            _mm_storeu_si128((__m128i*)qc, _mm256_castsi256_si128(i0));
            _mm_storeu_si128((__m128i*)(qc + QV::C / 2), _mm256_extracti128_si256(i0, 1));
        } else {
            _mm256_storeu_si256((__m256i*)(q + g * 32), i0);
        }
        dx[g] = d;
    }
    for (int64_t k = K; k < Kp; ++k) q[k] = 0;
    for (int64_t g = G32; g < bz_pad16(G32); ++g) dx[g] = ez[g] = 0.0f;
    for (int64_t g = 0; g < G; ++g) {
        __m256 s = _mm256_setzero_ps();
        for (int j = 0; j < BZ_GS; j += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + g * BZ_GS + j));
        __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        t = _mm_add_ps(t, _mm_movehl_ps(t, t));
        t = _mm_add_ss(t, _mm_movehdup_ps(t));
        sx[g] = _mm_cvtss_f32(t);
    }
    for (int64_t g = G; g < bz_pad16(G); ++g) sx[g] = 0.0f;
}

/* Quantized x, per row m: q + m*Kp (int8), dx + m*Gp and ez + m*Gp (per block of 32),
   sx + m*Gp (per weight group). */
struct QX {
    const int8_t* q;
    const float* dx;
    const float* ez;
    const float* sx;
    int64_t Kp, Gp, G32, G;
};

/* Per weight row r and x row m: cs[(m*R + r)*Gp + blk] = scale(blk) * dx(m, blk) and the
   rest as a vector bb[(m*R + r)*L]: sum_g b_g * sum(x over group g) + sum_blk scale(blk) *
   ez(m, blk), the centring (codes c - Z against x exactly: the int8 error is that of
   (c - Z) * x, |c - Z| <= Z, not of c * x). */
template <int MB, int R>
static BZ_INLINE void bz_i8_prep(const stype* sc, const stype* bi, int64_t n, const QX& qx,
                                 int64_t m0, float* cs, float* bb) {
    typedef QV::F F;
    constexpr int L = QV::L;
    const int64_t G32 = qx.G32, G = qx.G, Gp = qx.Gp;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const stype* s = sc + (n + r) * G;
        const stype* b = bi + (n + r) * G;
        F acc[MB];
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) acc[m] = QV::zero();
        for (int64_t i = 0; i < G32; i += L) {
            F sv;
            if (BZ_GS == 32) {
                sv = QV::lds(s + i, G32 - i);
            } else {
                const int64_t j = i * 32 / BZ_GS;
                sv = QV::expand(QV::lds(s + j, G - j));
            }
#pragma GCC unroll 8
            for (int m = 0; m < MB; ++m) {
                const F d = QV::load(qx.dx + (m0 + m) * Gp + i);
                QV::store(cs + (m * R + r) * Gp + i, QV::mul(sv, d));
                acc[m] = QV::fma(sv, QV::load(qx.ez + (m0 + m) * Gp + i), acc[m]);
            }
        }
        for (int64_t g = 0; g < G; g += L) {
            const F bv = QV::lds(b + g, G - g);
#pragma GCC unroll 8
            for (int m = 0; m < MB; ++m)
                acc[m] = QV::fma(bv, QV::load(qx.sx + (m0 + m) * Gp + g), acc[m]);
        }
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) QV::store(bb + (m * R + r) * L, acc[m]);
    }
}

/* MB rows of x against R weight rows: out[m * N + r]. Every output is one chain over the
   steps (same arithmetic whatever MB, R and the thread): results do not depend on them. */
template <int MB, int R>
static BZ_INLINE void bz_i8_rows(const uint8_t* wrow, int64_t rowbytes, const stype* sc,
                                 const stype* bi, int64_t n, const QX& qx, int64_t m0, int64_t K,
                                 float* cs, float* bb, float* out, int64_t N) {
    typedef QV::F F;
    typedef QV::I I;
    bz_i8_prep<MB, R>(sc, bi, n, qx, m0, cs, bb);
    const int64_t Gp = qx.Gp;
    F acc[MB][R];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[m][r] = QV::zero();
    const int8_t* q0 = qx.q + m0 * qx.Kp;
    int64_t k = 0;
    if (BZ_BITS == 4) { /* chunks of C elements, x de-interleaved per chunk */
        for (; k + QV::C <= K; k += QV::C) {
            I lo[R], hi[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) QV::w4c(wrow + r * rowbytes + k / 2, lo[r], hi[r]);
#pragma GCC unroll 8
            for (int m = 0; m < MB; ++m) {
                const I ql = QV::qload(q0 + m * qx.Kp + k);
                const I qh = QV::qload(q0 + m * qx.Kp + k + QV::C / 2);
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    acc[m][r] = QV::fma(QV::dot2(lo[r], ql, hi[r], qh),
                                        QV::spatc(cs + (m * R + r) * Gp + k / 32), acc[m][r]);
            }
        }
    }
    for (; k + QV::E <= K; k += QV::E) { /* natural order */
        I w[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const uint8_t* wp = wrow + r * rowbytes + k * BZ_BITS / 8;
            w[r] = BZ_BITS == 4 ? QV::w4(wp) : QV::w8(wp);
        }
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
            const I qv = QV::qload(q0 + m * qx.Kp + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
                acc[m][r] = QV::fma(QV::dot(w[r], qv), QV::spat(cs + (m * R + r) * Gp + k / 32),
                                    acc[m][r]);
        }
    }
    if (QV::E == 64 && k < K) { /* the last block of 32 (cs is zero past it) */
        I w[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const uint8_t* wp = wrow + r * rowbytes + k * BZ_BITS / 8;
            w[r] = BZ_BITS == 4 ? QV::w4t(wp) : QV::w8t(wp);
        }
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
            const I qv = QV::qload(q0 + m * qx.Kp + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
                acc[m][r] = QV::fma(QV::dot(w[r], qv), QV::spat(cs + (m * R + r) * Gp + k / 32),
                                    acc[m][r]);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
            out[m * N + r] = QV::hsum(QV::add(acc[m][r], QV::load(bb + (m * R + r) * QV::L)));
}

#define BZ_I8_RB 4 /* weight rows per pass */

/* Rows [n0, n1) of the output for every row of x (M <= BZ_I8_MMAX). */
static void bz_i8_part(const uint8_t* wq, const stype* sc, const stype* bi, const QX& qx,
                       int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, float* out) {
    const int64_t rowbytes = K * BZ_BITS / 8;
    float* cs = (float*)malloc(sizeof(float) * (size_t)(4 * BZ_I8_RB * (qx.Gp + QV::L)));
    float* bb = (float*)malloc(sizeof(float) * (size_t)(4 * BZ_I8_RB * QV::L));
    for (int64_t n = n0; n < n1;) {
        const int R = n1 - n >= BZ_I8_RB ? BZ_I8_RB : 1;
        const uint8_t* wrow = wq + n * rowbytes;
        if (n + BZ_PF_ROWS + R <= n1) {
            bz_prefetch(wrow + BZ_PF_ROWS * rowbytes, R * rowbytes);
            bz_prefetch(sc + (n + BZ_PF_ROWS) * qx.G, R * qx.G * (int64_t)sizeof(stype));
            bz_prefetch(bi + (n + BZ_PF_ROWS) * qx.G, R * qx.G * (int64_t)sizeof(stype));
        }
        for (int64_t m0 = 0; m0 < M; m0 += 4) {
            const int64_t mb = M - m0 < 4 ? M - m0 : 4;
            float* o = out + m0 * N + n;
#define BZ_I8_CASE(MBV)                                                                      \
    case MBV:                                                                                \
        if (R == BZ_I8_RB)                                                                   \
            bz_i8_rows<MBV, BZ_I8_RB>(wrow, rowbytes, sc, bi, n, qx, m0, K, cs, bb, o, N);   \
        else                                                                                 \
            bz_i8_rows<MBV, 1>(wrow, rowbytes, sc, bi, n, qx, m0, K, cs, bb, o, N);          \
        break;
            switch (mb) {
                BZ_I8_CASE(1)
                BZ_I8_CASE(2)
                BZ_I8_CASE(3)
                default: BZ_I8_CASE(4)
            }
#undef BZ_I8_CASE
        }
        n += R;
    }
    free(cs);
    free(bb);
}

#if BZ_VNNI == 2 && BZ_BITS == 4
/* ------------------------------------------------ int8 GEMM (M > BZ_I8_MMAX, 4 bits)
   The output's 16 lanes are 16 weight rows (a tile): the tile's codes are repacked once
   per call, per block of 32, as 4 vectors of one dword (8 codes) per row, so one
   vpdpbusd against a broadcast dword of q (4 even or 4 odd elements of x, the block
   de-interleaved at quantization) gives 4 products for 16 outputs. Per block and x row:
   8 vpdpbusd into an int32 chain, then t = idot * dx + ez and acc += t * s (+ b * sum(x)
   at each group's first block): every output is one chain over the blocks, whatever
   the tile, the row block or the thread. */
#define BZ_GT 16 /* weight rows per tile (lanes) */
#define BZ_GM 8  /* rows of x per register block */
struct GT {  /* one repacked tile: w[blk][j][lane] dwords, s[blk][lane], b[g][lane] */
    uint32_t* w;
    float* s;
    float* b;
};
static void bz_gemm_pack(const uint8_t* wq, const stype* sc, const stype* bi, int64_t n0,
                         int64_t nr, int64_t K, GT& t) {
    const int64_t G32 = K / 32, G = K / BZ_GS, rowbytes = K / 2;
    for (int64_t r = 0; r < BZ_GT; ++r) {
        if (r < nr) {
            const uint32_t* src = (const uint32_t*)(wq + (n0 + r) * rowbytes);
            const stype* s = sc + (n0 + r) * G;
            const stype* b = bi + (n0 + r) * G;
            for (int64_t i = 0; i < G32 * 4; ++i) t.w[i * BZ_GT + r] = src[i];
            for (int64_t i = 0; i < G32; ++i) {
#if BZ_HALF
                t.s[i * BZ_GT + r] = bz_h2f(s[i * 32 / BZ_GS]);
#else
                t.s[i * BZ_GT + r] = s[i * 32 / BZ_GS];
#endif
            }
            for (int64_t g = 0; g < G; ++g) {
#if BZ_HALF
                t.b[g * BZ_GT + r] = bz_h2f(b[g]);
#else
                t.b[g * BZ_GT + r] = b[g];
#endif
            }
        } else {
            for (int64_t i = 0; i < G32 * 4; ++i) t.w[i * BZ_GT + r] = 0;
            for (int64_t i = 0; i < G32; ++i) t.s[i * BZ_GT + r] = 0.0f;
            for (int64_t g = 0; g < G; ++g) t.b[g * BZ_GT + r] = 0.0f;
        }
    }
}
template <int MB>
static BZ_INLINE void bz_gemm_block(const GT& t, const QX& qx, int64_t m0, int64_t K,
                                    float* out, int64_t N, __mmask16 mask) {
    const int64_t G32 = K / 32;
    constexpr int64_t BPG = BZ_GS / 32; /* blocks per group */
    __m512 acc[MB];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[m] = _mm512_setzero_ps();
    const __m512i f = _mm512_set1_epi8(15);
    for (int64_t blk = 0; blk < G32; ++blk) {
        __m512i lo[4], hi[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m512i v = _mm512_loadu_si512((const void*)(t.w + (blk * 4 + j) * BZ_GT));
            lo[j] = _mm512_and_si512(v, f);
            hi[j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), f);
        }
        const __m512 sv = _mm512_loadu_ps(t.s + blk * BZ_GT);
        __m512 bv = _mm512_setzero_ps();
        const bool gfirst = blk % BPG == 0;
        if (gfirst) bv = _mm512_loadu_ps(t.b + blk / BPG * BZ_GT);
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
            const int32_t* qm = (const int32_t*)(qx.q + (m0 + m) * qx.Kp + blk * 32);
            __m512i ia = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                ia = _mm512_dpbusd_epi32(ia, lo[j], _mm512_set1_epi32(qm[j]));
                ia = _mm512_dpbusd_epi32(ia, hi[j], _mm512_set1_epi32(qm[4 + j]));
            }
            const __m512 tv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia),
                                              _mm512_set1_ps(qx.dx[(m0 + m) * qx.Gp + blk]),
                                              _mm512_set1_ps(qx.ez[(m0 + m) * qx.Gp + blk]));
            acc[m] = _mm512_fmadd_ps(tv, sv, acc[m]);
            if (gfirst)
                acc[m] = _mm512_fmadd_ps(bv, _mm512_set1_ps(qx.sx[(m0 + m) * qx.Gp + blk / BPG]),
                                         acc[m]);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) _mm512_mask_storeu_ps(out + (m0 + m) * N, mask, acc[m]);
}
/* Tiles [t0, t1) of BZ_GT weight rows against every row of x. */
static void bz_gemm_part(const uint8_t* wq, const stype* sc, const stype* bi, const QX& qx,
                         int64_t M, int64_t N, int64_t K, int64_t t0, int64_t t1, float* out) {
    const int64_t G32 = K / 32, G = K / BZ_GS;
    GT t;
    t.w = (uint32_t*)aligned_alloc(64, (size_t)(((G32 * 4 + G32 + G) * BZ_GT * 4 + 63) / 64 * 64));
    t.s = (float*)(t.w + G32 * 4 * BZ_GT);
    t.b = t.s + G32 * BZ_GT;
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t n0 = ti * BZ_GT, nr = N - n0 < BZ_GT ? N - n0 : BZ_GT;
        bz_gemm_pack(wq, sc, bi, n0, nr, K, t);
        const __mmask16 mask = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1u);
        float* o = out + n0;
        int64_t m0 = 0;
        for (; m0 + BZ_GM <= M; m0 += BZ_GM) bz_gemm_block<BZ_GM>(t, qx, m0, K, o, N, mask);
        if (M > m0)  /* the last 1..BZ_GM-1 rows */
            bz_dispatch<BZ_GM - 1>(M - m0, [&](auto r) {
                bz_gemm_block<decltype(r)::value>(t, qx, m0, K, o, N, mask); });
    }
    free(t.w);
}
#define BZ_GEMM 1
#else
#define BZ_GEMM 0
#endif
#endif
#define BZ_I8_MMAX 8

/* bufs: x (M, K) float32, wq (N, K*bits/8 bytes), scales (N, G), biases (N, G),
   out (M, N) float32, scratch (M, K) float32 (the de-interleaved x at 4 bits).
   args: threads, M, N, K, act (1: int8 activations where compiled and M <= BZ_I8_MMAX).
   M < 0: write the compiled ISA level and VNNI level (0 none, 1 AVX-VNNI, 2 AVX-512 VNNI)
   to ((int64_t*)bufs[0])[0] and [1].
   M < BZ_TILE_M: fused (codes unpacked in registers against up to 4 rows of x);
   else a tile of weight rows is dequantized into an L1/L2-sized float buffer and
   multiplied by every row of x with a register-blocked micro-kernel. */
#define BZ_TILE_M 16
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs,
                                                                 const int64_t* args) {
    const int64_t nt = args[0], M = args[1], N = args[2], K = args[3], act = args[4];
    if (M < 0) {
        ((int64_t*)bufs[0])[0] = BZ_ISA;
        ((int64_t*)bufs[0])[1] = BZ_VNNI;
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
#if BZ_VNNI
#if BZ_GEMM
    if (act == 1 && M > BZ_I8_MMAX) {
        const int64_t Kp = K, Gp = bz_pad16(K / 32);
        int8_t* qb = (int8_t*)malloc((size_t)(M * Kp));
        float* dx = (float*)malloc(sizeof(float) * (size_t)(3 * M * Gp));
        float* ez = dx + M * Gp;
        float* sx = ez + M * Gp;
        const QX qx = {qb, dx, ez, sx, Kp, Gp, K / 32, K / BZ_GS};
        const int64_t NT = (N + BZ_GT - 1) / BZ_GT;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            for (int64_t m = M * t / T; m < M * (t + 1) / T; ++m)
                bz_quant_row(x + m * K, K, Kp, qb + m * Kp, dx + m * Gp, ez + m * Gp,
                             sx + m * Gp, true);
#pragma omp barrier
            bz_gemm_part(wq, sc, bi, qx, M, N, K, NT * t / T, NT * (t + 1) / T, out);
        }
        free(qb);
        free(dx);
        return;
    }
#endif
    if (act == 1) {
        const int64_t Kp = (K + 63) / 64 * 64, Gp = bz_pad16(K / 32);
        int8_t* qb = (int8_t*)malloc((size_t)(M * Kp));
        float* dx = (float*)malloc(sizeof(float) * (size_t)(3 * M * Gp));
        float* ez = dx + M * Gp;
        float* sx = ez + M * Gp;
        for (int64_t m = 0; m < M; ++m)
            bz_quant_row(x + m * K, K, Kp, qb + m * Kp, dx + m * Gp, ez + m * Gp, sx + m * Gp);
        const QX qx = {qb, dx, ez, sx, Kp, Gp, K / 32, K / BZ_GS};
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            bz_i8_part(wq, sc, bi, qx, M, N, K, N * t / T, N * (t + 1) / T, out);
        }
        free(qb);
        free(dx);
        return;
    }
#else
    (void)act;
#endif
    float* bz_xT = nullptr; /* the pre-fill path's shared transpose of x */
    (void)bz_xT;
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
#if BZ_WXT
        if (tiled) {
            /* xT (K x M) is shared: the rows of x split between threads, then each
               thread's weight rows */
#pragma omp single
            bz_xT = (float*)malloc(sizeof(float) * (size_t)(M * K));
            bz_transpose(xp, M * t / T, M * (t + 1) / T, K, bz_xT, M);
#pragma omp barrier
            /* chunks of NC weight rows dequantized at once; per block of 32 rows of x,
               the chunk's 8-row tiles in order: each row of out gets BZ_NC consecutive
               floats (rows of out a multiple of 4 KiB apart alias in L1 otherwise) */
            int64_t NC = (BZ_CHUNK_FLOATS / K) / BZ_NW * BZ_NW;
            NC = NC < BZ_NW ? BZ_NW : (NC > BZ_NC ? BZ_NC : NC);
            /* zeroed: the tail kernel reads whole VT::NR-row groups past a last chunk */
            float* tile = (float*)calloc((size_t)(NC * K), sizeof(float));
            for (int64_t h0 = n0; h0 < n1; h0 += NC) {
                const int64_t nh = n1 - h0 < NC ? n1 - h0 : NC;
                bz_dequant_rows(wq, sc, bi, sb, h0, nh, G, K, tile);
                for (int64_t m0 = 0; m0 < M; m0 += 32) {
                    const int64_t mv = M - m0 < 32 ? M - m0 : 32;
                    if (mv <= 16) {  /* a short last block: dot products (bz_tile_rows) */
                        bz_tile_rows(xp + m0 * K, mv, K, tile, nh, out + m0 * N + h0, N);
                        continue;
                    }
                    const float* xT = bz_xT + m0;
                    for (int64_t j0 = 0; j0 < nh; j0 += BZ_NW)
                        bz_wx_tiles(tile + j0 * K, nh - j0 < BZ_NW ? nh - j0 : BZ_NW, K, xT, M,
                                    mv, out + m0 * N + h0 + j0, N);
                }
            }
            free(tile);
#pragma omp barrier
#pragma omp single
            free(bz_xT);
        } else
#elif BZ_TILED
        if (tiled) {
            constexpr int NR = VT::NR;
            int64_t NT = ((int64_t)(64 * 1024 / 4) / K) / NR * NR;  /* tile rows: ~64 KiB */
            if (NT < NR) NT = NR;
            if (NT > 64) NT = 64;
            float* tile = (float*)calloc((size_t)(NT * K), sizeof(float));
            for (int64_t c0 = n0; c0 < n1; c0 += NT) {
                const int64_t nc = n1 - c0 < NT ? n1 - c0 : NT;
                bz_dequant_rows(wq, sc, bi, sb, c0, nc, G, K, tile);
                for (int64_t m0 = 0; m0 < M; m0 += 4)  /* 4 rows of x in L1, the tile swept */
                    bz_tile_rows(xp + m0 * K, M - m0 < 4 ? M - m0 : 4, K, tile, nc,
                                 out + m0 * N + c0, N);
            }
            free(tile);
        } else
#endif
        {
            for (int64_t m0 = 0; m0 < M; m0 += BZ_MB) {
                const int64_t mb = M - m0 < BZ_MB ? M - m0 : BZ_MB;
                const float* xm = xp + m0 * K;
                for (int64_t n = n0; n < n1; ++n) {
                    if (n + BZ_PF_ROWS < n1) {
                        bz_prefetch(wq + (n + BZ_PF_ROWS) * rowbytes, rowbytes);
                        bz_prefetch(sc + (n + BZ_PF_ROWS) * G, G * (int64_t)sizeof(stype));
                        bz_prefetch(bi + (n + BZ_PF_ROWS) * G, G * (int64_t)sizeof(stype));
                    }
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
_ENV_ACT = os.environ.get("BRAZE_QMM_ACT") or None  # read at import (an env lookup per call
# cost ~1 us, ~1 % of a decode token)


def reload_env() -> None:
    """Re-read ``BRAZE_QMM_ACT`` and ``BRAZE_QMM_ISA`` (read once, at import).

    >>> reload_env()
    """
    global _ENV_ISA, _ENV_ACT
    _ENV_ISA = _env_isa()
    _ENV_ACT = os.environ.get("BRAZE_QMM_ACT") or None


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
    text = "\n".join(defs) + "\n" + _SOURCE.replace("BZ_SYMBOL", sym).replace(
        "BZ_GEMM_TILE", GEMM_TILE).replace("BZ_DISPATCH", DISPATCH)
    return text, sym


_KERNELS = KernelFamily(lambda key: source(*key))


def _handle(bits: int, group_size: int, half: bool, isa: int | None) -> int:
    """The loaded kernel (built on first use); raises BuildError."""
    return _KERNELS.handle((bits, group_size, half, isa))


def _levels(bits: int, group_size: int, half: bool, isa: int | None) -> tuple[int, int]:
    key = (bits, group_size, half, isa)
    lv = _levels_cache.get(key)
    if lv is None:
        h = _handle(bits, group_size, half, isa)
        box = np.zeros(2, np.int64)
        _core.launch(h, [box] * 6, np.array([1, -1, 0, 0, 0], np.int64))
        lv = _levels_cache[key] = (int(box[0]), int(box[1]))
    return lv


_levels_cache: dict[tuple[int, int, bool, int | None], tuple[int, int]] = {}


def kernel_isa(bits: int = 4, group_size: int = 32, half: bool = False,
               isa: int | None = None) -> int:
    """The ISA level the kernel for these parameters was compiled with (builds it).

    >>> kernel_isa() == host_isa()
    True
    """
    return _levels(bits, group_size, half, _isa_cap(isa))[0]


def int8_available(bits: int = 4, group_size: int = 32, half: bool = False,
                   isa: int | None = None) -> bool:
    """Whether that kernel has the int8-activation path (compiled with AVX-512 VNNI, or
    AVX-VNNI at the AVX2 level); without it every call runs the exact float path.

    >>> int8_available(isa=0)
    False
    """
    return _levels(bits, group_size, half, _isa_cap(isa))[1] > 0


def act_mode(act: str | None = None) -> str:
    """The activation mode a call runs with: ``act`` if given, else ``BRAZE_QMM_ACT``
    (read at import and by ``reload_env()``), else ``DEFAULT_ACT`` (``"auto"``: int8
    against 4-bit weights, float against 8-bit ones).

    >>> act_mode("float")
    'float'
    """
    if act is None and _ENV_ACT is None:
        return DEFAULT_ACT
    mode = act if act is not None else _ENV_ACT
    if mode not in ACT_MODES:
        src = "act" if act is not None else "BRAZE_QMM_ACT"
        raise ValueError(f"quantized_matmul: {src} must be 'auto', 'int8' or 'float', "
                         f"got {mode!r}")
    return mode


_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)
_NO_SCRATCH = np.empty(1, np.float32)  # 8 bits: x is read in place


class _Weights:
    """A weight's launch-ready state, cached per (wq, scales, biases) objects: the kernel
    handle, its VNNI level and the argument arrays per (M, threads, int8)."""

    __slots__ = ("refs", "h", "vnni", "args", "__weakref__")

    def __init__(self, refs: tuple[Any, ...], h: int, vnni: int) -> None:
        self.refs = refs
        self.h = h
        self.vnni = vnni
        self.args: dict[tuple[int, int, bool], np.ndarray] = {}


# (id(wq), id(scales), id(biases), group_size, bits, isa) -> _Weights; an entry holds only
# weak references to the arrays (checked on every hit) and leaves when one of them dies
_wcache: dict[tuple[int, int, int, int, int, int | None], _Weights] = {}


def _prepared(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int,
              bits: int, isa: int | None) -> _Weights | None:
    """The cached state of weights that need no conversion (float16 or float32 scales and
    biases of one dtype, all C-contiguous numpy arrays); None for the others."""
    key = (id(wq), id(scales), id(biases), group_size, bits, isa)
    e = _wcache.get(key)
    if e is not None:
        r = e.refs
        if r[0]() is wq and r[1]() is scales and r[2]() is biases:
            return e
    sd = scales.dtype
    if (type(wq) is not np.ndarray or type(scales) is not np.ndarray
            or type(biases) is not np.ndarray or sd != biases.dtype or sd not in (_F16, _F32)
            or not (scales.flags.c_contiguous and biases.flags.c_contiguous
                    and wq.flags.c_contiguous)):
        return None
    half = sd == _F16
    h = _handle(bits, group_size, half, isa)
    vnni = _levels(bits, group_size, half, isa)[1]

    def drop(_: Any, key: tuple[int, int, int, int, int, int | None] = key) -> None:
        _wcache.pop(key, None)

    e = _Weights((weakref.ref(wq, drop), weakref.ref(scales, drop), weakref.ref(biases, drop)),
                 h, vnni)
    if len(_wcache) > 4096:  # stale entries whose arrays live on elsewhere
        _wcache.clear()
    _wcache[key] = e
    return e


def _native(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
            group_size: int, bits: int, num_threads: int, isa: int | None,
            act: str | None = None) -> np.ndarray:
    """The kernel's float32 result (x already float32, shapes already checked)."""
    k = x.shape[-1]
    n = wq.shape[0]
    x2 = x if x.ndim == 2 else x.reshape(-1, k)
    if not x2.flags.c_contiguous:
        x2 = np.ascontiguousarray(x2)
    m = x2.shape[0]
    if m == 0 or n == 0 or k == 0:
        return np.zeros(x.shape[:-1] + (n,), np.float32)
    e = _prepared(wq, scales, biases, group_size, bits, isa)
    if e is None:  # converted copies (the kernel reads float16 as raw 16-bit words)
        sd, bd = scales.dtype, biases.dtype
        if not (sd == bd and sd in (_F16, _F32)):
            scales, biases = scales.astype(np.float32), biases.astype(np.float32)
        scales, biases, wq = (np.ascontiguousarray(a) for a in (scales, biases, wq))
        half = scales.dtype == _F16
        e = _Weights((), _handle(bits, group_size, half, isa),
                     _levels(bits, group_size, half, isa)[1])
    out = np.empty((m, n), np.float32)
    args, scratch_len = _launch_args(e, m, n, k, bits, num_threads, act)
    scratch = np.empty(scratch_len, np.float32) if scratch_len else _NO_SCRATCH
    _core.launch(e.h, [x2, wq, scales, biases, out, scratch], args)
    return out if x.ndim == 2 else out.reshape(x.shape[:-1] + (n,))


def _launch_args(e: _Weights, m: int, n: int, k: int, bits: int, num_threads: int,
                 act: str | None) -> tuple[np.ndarray, int]:
    """The kernel's int64 args for an (M, K) x against N packed rows, and the float32
    scratch it needs (0: none; the kernel then gets a 1-element placeholder)."""
    mode = act_mode(act)
    # int8: M <= INT8_MAX_M at 4 bits under auto (and any bits under "int8"); the GEMM
    # (M > INT8_MAX_M) at 4 bits under "int8" only (under auto it flips SmolLM2's answer)
    int8 = e.vnni > 0 and (
        (m <= INT8_MAX_M and (mode == "int8" or (mode == "auto" and bits == 4)))
        or (m > INT8_MAX_M and bits == 4 and mode == "int8"))
    # a parallel region costs more than a small problem: one thread below PARALLEL_WEIGHTS
    threads = 1 if n * k * (m // 4 or 1) < PARALLEL_WEIGHTS else min(num_threads, n)
    akey = (m, threads, int8)
    args = e.args.get(akey)
    if args is None:
        args = e.args[akey] = np.array([threads, m, n, k, int(int8)], np.int64)
    return args, (m * k if bits == 4 and not int8 else 0)


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
                     isa: int | None = None, act: str | None = None) -> np.ndarray:
    """``x @ dequantize(wq, scales, biases).T`` on numpy arrays with the native kernel.

    Eager (no graph): the building block the ``cpu`` backend's library op and the
    benchmark use. The result has x's dtype (computed in float32). ``num_threads``:
    default ``BRAZE_NUM_THREADS`` / all CPUs; ``isa``: cap the instruction set (0
    scalar, 1 AVX2, 2 AVX-512); ``act``: ``"int8"``, ``"float"`` or ``"auto"`` activations
    (default ``BRAZE_QMM_ACT``, else ``DEFAULT_ACT``; int8 runs only where the
    kernel has VNNI, and for more than ``INT8_MAX_M`` rows of x only at 4 bits with
    ``"int8"``: the GEMM). Raises BuildError when the
    kernel cannot be built.

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
                  num_threads or default_num_threads(), _isa_cap(isa), act)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


class QuantizedMatmul(NativeOp):
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

    op = "quantized_matmul"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 wq: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
        gs, bits = attrs["group_size"], attrs["bits"]
        try:
            out = _native(x if x.dtype == _F32 else x.astype(np.float32), wq, scales, biases,
                          gs, bits, self._num_threads(), _ENV_ISA, attrs.get("act"))
        except _build.BuildError as e:
            self._warn_build(e, f" (bits={bits}, group_size={gs})")
            self.calls["numpy"] += 1
            return reference_eval(QUANTIZED_MATMUL, attrs, out_dtype, x, wq, scales, biases)
        self.calls["native"] += 1
        return out if out.dtype == out_dtype else out.astype(out_dtype)

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """The op as a step of a replay program (no Python per call): the kernel over
        [x, wq, scales, biases, out, scratch], for contiguous inputs, float32 x and
        output, float16/float32 scales and biases; None otherwise (or if the kernel
        does not build: the Python call then warns and falls back)."""
        (xv, xd), (wv, wd), (sv, sd), (bv, bd) = inputs
        if xd != _F32 or out[1] != _F32 or sd != bd or sd not in (_F16, _F32) \
                or not all(v.offset == 0 and v.is_contiguous() for v in (xv, wv, sv, bv)):
            return None
        gs, bits = attrs["group_size"], attrs["bits"]
        n, k = wv.shape[0], xv.shape[-1]
        m = xv.size // k if k else 0
        if m == 0 or n == 0 or k == 0:
            return None
        half = sd == _F16
        try:
            e = _Weights((), _handle(bits, gs, half, _ENV_ISA),
                         _levels(bits, gs, half, _ENV_ISA)[1])
        except _build.BuildError:
            return None
        args, scratch_len = _launch_args(e, m, n, k, bits, self._num_threads(), attrs.get("act"))
        return NativeLibraryCall(e.h, args, (max(scratch_len, 1) * 4,))


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
