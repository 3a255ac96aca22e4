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
#include <type_traits>
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
    static inline F loadu(const float* p) { return _mm512_loadu_ps(p); }
    static inline F set1(float v) { return _mm512_set1_ps(v); }
    static inline F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static inline F zero() { return _mm512_setzero_ps(); }
    static inline F add(F a, F b) { return _mm512_add_ps(a, b); }
    static inline F max(F a, F b) { return _mm512_max_ps(a, b); }
    static inline F min(F a, F b) { return _mm512_min_ps(a, b); }
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
    static inline F loadu(const float* p) { return vld1q_f32(p); }
    static inline F set1(float v) { return vdupq_n_f32(v); }
    static inline F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
    static inline F zero() { return vdupq_n_f32(0.0f); }
    static inline F add(F a, F b) { return vaddq_f32(a, b); }
    static inline F max(F a, F b) { return vmaxq_f32(a, b); }
    static inline F min(F a, F b) { return vminq_f32(a, b); }
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
    static inline F loadu(const float* p) { return _mm256_loadu_ps(p); }
    static inline F set1(float v) { return _mm256_set1_ps(v); }
    static inline F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static inline F zero() { return _mm256_setzero_ps(); }
    static inline F add(F a, F b) { return _mm256_add_ps(a, b); }
    static inline F max(F a, F b) { return _mm256_max_ps(a, b); }
    static inline F min(F a, F b) { return _mm256_min_ps(a, b); }
    static inline void store(float* p, F v) { _mm256_storeu_ps(p, v); }
#endif
};
#define BZ_WX_NW ((int)WX::NW)
#define BZ_WX_MV (2 * (int)WX::L)

/* x packed for the tiles: panels of BZ_WX_MV columns of x^T, each K x BZ_WX_MV and
   contiguous, so a tile streams its panel (one or two cache lines per k, not rows of x^T
   a whole row of x apart); element (k, m) at bz_panel_at(m, k, K). The last panel's
   columns past M stay unset (the tiles mask them off). */
static inline int64_t bz_panel_at(int64_t m, int64_t k, int64_t K) {
    return (m / BZ_WX_MV) * K * BZ_WX_MV + k * BZ_WX_MV + m % BZ_WX_MV;
}
static inline int64_t bz_panel_floats(int64_t M, int64_t K) {
    return (M + BZ_WX_MV - 1) / BZ_WX_MV * BZ_WX_MV * K;
}

/* The BZ_WX_TB x BZ_WX_TB block at a (row stride ld) into t (row stride ldt), transposed
   in registers (AVX-512, AVX2: unpacks of 32- and 64-bit pairs, then 128-bit lane
   shuffles), element by element elsewhere. */
#if BZ_WX_ISA == 2
#define BZ_WX_TB 16
static inline void bz_transpose_block(const float* a, int64_t ld, float* t, int64_t ldt) {
    __m512 r[16], u[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(a + i * ld);
    for (int i = 0; i < 8; ++i) { /* lane L: rows 2i, 2i+1 at columns 4L..4L+3, paired */
        u[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        u[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) { /* r[4i + j], lane L: rows 4i..4i+3 of column 4L + j */
        const __m512d a0 = _mm512_castps_pd(u[4 * i]), a1 = _mm512_castps_pd(u[4 * i + 1]);
        const __m512d a2 = _mm512_castps_pd(u[4 * i + 2]), a3 = _mm512_castps_pd(u[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int j = 0; j < 4; ++j) { /* column 4L + j: lane L of r[j], r[4 + j], r[8 + j], r[12 + j] */
        const __m512 s0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        const __m512 s1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        const __m512 s2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        const __m512 s3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        _mm512_storeu_ps(t + (0 + j) * ldt, _mm512_shuffle_f32x4(s0, s2, 0x88));
        _mm512_storeu_ps(t + (4 + j) * ldt, _mm512_shuffle_f32x4(s1, s3, 0x88));
        _mm512_storeu_ps(t + (8 + j) * ldt, _mm512_shuffle_f32x4(s0, s2, 0xDD));
        _mm512_storeu_ps(t + (12 + j) * ldt, _mm512_shuffle_f32x4(s1, s3, 0xDD));
    }
}
#elif BZ_WX_ISA == 1
#define BZ_WX_TB 8
static inline void bz_transpose_block(const float* a, int64_t ld, float* t, int64_t ldt) {
    __m256 r[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(a + i * ld);
    for (int i = 0; i < 4; ++i) {
        u[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        u[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) { /* r[4i + j], half h: rows 4i..4i+3 of column 4h + j */
        r[4 * i] = _mm256_shuffle_ps(u[4 * i], u[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(u[4 * i], u[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
        _mm256_storeu_ps(t + j * ldt, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
        _mm256_storeu_ps(t + (4 + j) * ldt, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
    }
}
#else
#define BZ_WX_TB 8
static inline void bz_transpose_block(const float* a, int64_t ld, float* t, int64_t ldt) {
    for (int c = 0; c < BZ_WX_TB; ++c)
        for (int r = 0; r < BZ_WX_TB; ++r) t[c * ldt + r] = a[r * ld + c];
}
#endif

/* Rows [r0, r1) of x (K columns, row stride ldx) into the panels at xp: whole aligned
   blocks of BZ_WX_TB rows (always inside one panel) transposed in registers, the rest
   element by element. */
static inline void bz_pack_rows(const float* x, int64_t r0, int64_t r1, int64_t K, int64_t ldx,
                                float* xp) {
    constexpr int64_t TB = BZ_WX_TB;
    static_assert(BZ_WX_MV % BZ_WX_TB == 0, "a block of rows lies in one panel");
    int64_t r = r0;
    while (r < r1) {
        if (r % TB || r + TB > r1) { /* a ragged row */
            for (int64_t c = 0; c < K; ++c) xp[bz_panel_at(r, c, K)] = x[r * ldx + c];
            ++r;
            continue;
        }
        float* t = xp + bz_panel_at(r, 0, K); /* (c, r + i) at t[c * MV + i] */
        int64_t c = 0;
        for (; c + TB <= K; c += TB)
            bz_transpose_block(x + r * ldx + c, ldx, t + c * BZ_WX_MV, BZ_WX_MV);
        for (; c < K; ++c)
            for (int64_t i = 0; i < TB; ++i) t[c * BZ_WX_MV + i] = x[(r + i) * ldx + c];
        r += TB;
    }
}

/* KM: w is k-major, row r's element k at w[k * wk + r] (W given transposed, read in
   place: the tile's NW broadcasts of a k share a cache line) */
template <int NW, bool KM>
static void bz_wx_tile(const float* w, int64_t K, const float* xT, int64_t ld, int64_t mv, float* y,
                       int64_t N, int64_t yr, int64_t wk) {
    WX::F acc[NW][2]; /* unrolled: registers, not memory */
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) acc[r][0] = acc[r][1] = WX::zero();
    /* a whole panel's columns: plain loads (a masked load keeps its mask in a register the
       tile needs, and AVX2's vmaskmovps costs more than a load) */
    auto sweep = [&](auto whole) {
        const WX::K k0 = WX::mask(mv), k1 = WX::mask(mv - WX::L);
        for (int64_t k = 0; k < K; ++k) {
            const WX::F x0 = whole ? WX::loadu(xT + k * ld) : WX::load(k0, xT + k * ld);
            const WX::F x1 =
                whole ? WX::loadu(xT + k * ld + WX::L) : WX::load(k1, xT + k * ld + WX::L);
#pragma GCC unroll 8
            for (int r = 0; r < NW; ++r) {
                const WX::F wv = WX::set1(KM ? w[k * wk + r] : w[r * K + k]);
                acc[r][0] = WX::fma(wv, x0, acc[r][0]);
                acc[r][1] = WX::fma(wv, x1, acc[r][1]);
            }
        }
    };
    if (mv == BZ_WX_MV)
        sweep(std::true_type());
    else
        sweep(std::false_type());
    float blk[NW][BZ_WX_MV];
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) {
        WX::store(blk[r], acc[r][0]);
        WX::store(blk[r] + WX::L, acc[r][1]);
    }
    if (yr == 1) {
        for (int64_t m = 0; m < mv; ++m)
#pragma GCC unroll 8
            for (int r = 0; r < NW; ++r) y[m * N + r] = blk[r][m];
    } else {
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r)
            for (int64_t m = 0; m < mv; ++m) y[m * N + r * yr] = blk[r][m];
    }
}

/* yr: y's stride between w's rows (1: y[m * N + r]; a transposed product stores its
   block with N = 1 and yr = the row stride of the result); wk > 0: w is k-major with
   row stride wk (rows r at w[k * wk + r]) */
static inline void bz_wx_tiles(const float* w, int64_t nw, int64_t K, const float* xT, int64_t ld,
                               int64_t mv, float* y, int64_t N, int64_t yr = 1, int64_t wk = 0) {
    if (wk > 0)
        bz_dispatch<WX::NW>(nw, [&](auto r) {
            bz_wx_tile<decltype(r)::value, true>(w, K, xT, ld, mv, y, N, yr, wk);
        });
    else
        bz_dispatch<WX::NW>(nw, [&](auto r) {
            bz_wx_tile<decltype(r)::value, false>(w, K, xT, ld, mv, y, N, yr, 0);
        });
}
#endif  // BZ_GEMM_TILE_H
