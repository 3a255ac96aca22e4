// The GEMM register tile shared by the float32 pre-fill GEMM (matvec.cc) and the 4-bit one
// (qmatmul.cc, on dequantized rows): y[m * N + j] = w row j . x row m for the nw <=
// BZ_WX_NW rows of w (row stride K) and mv <= BZ_WX_MV rows of x, given transposed (xT[k *
// ld + m]). A BZ_WX_NW x BZ_WX_MV block of out^T in registers: per k, 2 (masked) loads of
// xT, BZ_WX_NW broadcasts of w, 2 * BZ_WX_NW FMAs, no horizontal sums; one chain per
// output, summed over k in order; the block goes to y through a stack buffer (scattered
// stores with stride N touch a page per lane and were slower).
// BZ_WX_ISA (set by the includer, default: the best compiled): 2 AVX-512F, 8 x 32 in 16 of
// its 32 registers; 1 AVX2+FMA, 6 x 16 in 12 of its 16 (BLIS's Haswell shape: 2 loads + 1
// broadcast register left); 3 NEON, 8 x 8 in 16 of its 32.
#ifndef BZ_GEMM_TILE_H
#define BZ_GEMM_TILE_H
#include <cstdint>
#include "dispatch.h"
#ifndef BZ_WX_ISA
#if defined(__AVX512F__)
#define BZ_WX_ISA 2
#elif defined(__aarch64__)
#define BZ_WX_ISA 3
#else
#define BZ_WX_ISA 1
#endif
#endif
#if BZ_WX_ISA == 3
#include <arm_neon.h>
#else
#include <immintrin.h>
#endif
#if BZ_WX_ISA == 2 && !defined(__AVX512F__)
#error "gemm_tile.h: BZ_WX_ISA 2 needs AVX-512F"
#endif
#if BZ_WX_ISA == 1 && !(defined(__AVX2__) && defined(__FMA__))
#error "gemm_tile.h: BZ_WX_ISA 1 needs AVX2 and FMA"
#endif
#if BZ_WX_ISA == 3 && !defined(__ARM_NEON)
#error "gemm_tile.h: BZ_WX_ISA 3 needs NEON"
#endif

struct WX {
#if BZ_WX_ISA == 2
    typedef __m512 F;
    typedef __mmask16 K;
    enum { L = 16, NW = 8 };
    static inline K mask(int64_t n) {
        return n >= 16 ? (K)0xFFFF : n <= 0 ? (K)0 : (K)((1u << n) - 1u);
    }
    static inline F load(K k, const float* p) { return _mm512_maskz_loadu_ps(k, p); }
    static inline F set1(float v) { return _mm512_set1_ps(v); }
    static inline F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static inline F zero() { return _mm512_setzero_ps(); }
    static inline void store(float* p, F v) { _mm512_storeu_ps(p, v); }
#elif BZ_WX_ISA == 3
    typedef float32x4_t F;
    typedef uint32x4_t K;
    enum { L = 4, NW = 8 };
    static inline K mask(int64_t n) { /* lane i on iff i < n */
        const uint32_t c = n <= 0 ? 0u : n >= 4 ? 4u : (uint32_t)n;
        const uint32_t iota[4] = {0, 1, 2, 3};
        return vcltq_u32(vld1q_u32(iota), vdupq_n_u32(c));
    }
    static inline F load(K k, const float* p) { /* the masked-off lanes are never read */
        if (vminvq_u32(k)) return vld1q_f32(p);
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const uint32_t n = vaddvq_u32(vandq_u32(k, vdupq_n_u32(1)));
        for (uint32_t i = 0; i < n; ++i) t[i] = p[i];
        return vld1q_f32(t);
    }
    static inline F set1(float v) { return vdupq_n_f32(v); }
    static inline F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
    static inline F zero() { return vdupq_n_f32(0.0f); }
    static inline void store(float* p, F v) { vst1q_f32(p, v); }
#else
    typedef __m256 F;
    typedef __m256i K;
    enum { L = 8, NW = 6 };
    static inline K mask(int64_t n) { /* lane i on iff i < n; masked lanes are never read */
        const int c = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static inline F load(K k, const float* p) { return _mm256_maskload_ps(p, k); }
    static inline F set1(float v) { return _mm256_set1_ps(v); }
    static inline F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static inline F zero() { return _mm256_setzero_ps(); }
    static inline void store(float* p, F v) { _mm256_storeu_ps(p, v); }
#endif
};
#define BZ_WX_NW ((int)WX::NW)
#define BZ_WX_MV (2 * (int)WX::L)

template <int NW>
static void bz_wx_tile(const float* w, int64_t K, const float* xT, int64_t ld, int64_t mv, float* y,
                       int64_t N) {
    WX::F acc[NW][2]; /* unrolled: registers, not memory */
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) acc[r][0] = acc[r][1] = WX::zero();
    const WX::K k0 = WX::mask(mv), k1 = WX::mask(mv - WX::L);
    for (int64_t k = 0; k < K; ++k) {
        const WX::F x0 = WX::load(k0, xT + k * ld);
        const WX::F x1 = WX::load(k1, xT + k * ld + WX::L);
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r) {
            const WX::F wv = WX::set1(w[r * K + k]);
            acc[r][0] = WX::fma(wv, x0, acc[r][0]);
            acc[r][1] = WX::fma(wv, x1, acc[r][1]);
        }
    }
    float blk[NW][BZ_WX_MV];
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) {
        WX::store(blk[r], acc[r][0]);
        WX::store(blk[r] + WX::L, acc[r][1]);
    }
    for (int64_t m = 0; m < mv; ++m)
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r) y[m * N + r] = blk[r][m];
}

static inline void bz_wx_tiles(const float* w, int64_t nw, int64_t K, const float* xT, int64_t ld,
                               int64_t mv, float* y, int64_t N) {
    bz_dispatch<WX::NW>(nw,
                        [&](auto r) { bz_wx_tile<decltype(r)::value>(w, K, xT, ld, mv, y, N); });
}
#endif  // BZ_GEMM_TILE_H
