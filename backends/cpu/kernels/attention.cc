// Float32 scaled dot-product attention with a KV cache read in place, for the cpu backend
// (backends/cpu/attention.py describes and builds it). Parameters: BZ_SYMBOL (the entry
// point's name); BZ_MVEC, 1 where glibc's libmvec has a SIMD expf.
#if !defined(BZ_SYMBOL) || !defined(BZ_MVEC)
#error "attention: define BZ_SYMBOL and BZ_MVEC"
#endif
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>
#include "dispatch.h"
#include "f16.h"
#ifndef BZ_PF_KEYS
#define BZ_PF_KEYS 32
#endif
#define BZ_TRANSPOSE_ROWS 8  // query rows per key head from which keys are transposed
extern "C" int omp_get_thread_num(void);
extern "C" {
#if BZ_MVEC
#pragma omp declare simd notinbranch
#endif
float expf(float);
}

/* One vector of floats of the widest ISA compiled: the dot products of queries and keys
   and the P V accumulation of a 64-wide head in registers (AVX-512 4, AVX2 8, NEON 16 of
   them); elsewhere the portable loops below (the compiler vectorizes their fixed lanes). */
#if defined(__AVX512F__)
#include <immintrin.h>
#define BZ_VL 16
typedef __m512 bzv;
static inline bzv bzv_load(const float* p) { return _mm512_loadu_ps(p); }
static inline void bzv_store(float* p, bzv v) { _mm512_storeu_ps(p, v); }
static inline bzv bzv_set1(float v) { return _mm512_set1_ps(v); }
static inline bzv bzv_zero() { return _mm512_setzero_ps(); }
static inline bzv bzv_fma(bzv a, bzv b, bzv c) { return _mm512_fmadd_ps(a, b, c); }
static inline bzv bzv_mul(bzv a, bzv b) { return _mm512_mul_ps(a, b); }
static inline bzv bzv_add(bzv a, bzv b) { return _mm512_add_ps(a, b); }
static inline float bzv_sum(bzv v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BZ_VL 8
typedef __m256 bzv;
static inline bzv bzv_load(const float* p) { return _mm256_loadu_ps(p); }
static inline void bzv_store(float* p, bzv v) { _mm256_storeu_ps(p, v); }
static inline bzv bzv_set1(float v) { return _mm256_set1_ps(v); }
static inline bzv bzv_zero() { return _mm256_setzero_ps(); }
static inline bzv bzv_fma(bzv a, bzv b, bzv c) { return _mm256_fmadd_ps(a, b, c); }
static inline bzv bzv_mul(bzv a, bzv b) { return _mm256_mul_ps(a, b); }
static inline bzv bzv_add(bzv a, bzv b) { return _mm256_add_ps(a, b); }
static inline float bzv_sum(bzv v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define BZ_VL 4
typedef float32x4_t bzv;
static inline bzv bzv_load(const float* p) { return vld1q_f32(p); }
static inline void bzv_store(float* p, bzv v) { vst1q_f32(p, v); }
static inline bzv bzv_set1(float v) { return vdupq_n_f32(v); }
static inline bzv bzv_zero() { return vdupq_n_f32(0.0f); }
static inline bzv bzv_fma(bzv a, bzv b, bzv c) { return vfmaq_f32(c, a, b); }
static inline bzv bzv_mul(bzv a, bzv b) { return vmulq_f32(a, b); }
static inline bzv bzv_add(bzv a, bzv b) { return vaddq_f32(a, b); }
static inline float bzv_sum(bzv v) { return vaddvq_f32(v); }
#endif

/* The past keys/values may be float16 (a KV cache at half the memory traffic): PT is
   float or uint16_t (float16 bits); bz_pf reads one element as float, bzv_loadp a vector. */
static inline float bz_pf(float x) { return x; }
static inline float bz_pf(uint16_t x) { return bz_h2f(x); }
/* Prefetch the n elements at p into L2 (locality 2): at 16 sequences a decode step's cache
   rows come from DRAM, and prefetches into L1 (locality 3) waited on L1's few miss buffers:
   the rows into L2 a phase ahead let the loads overlap the arithmetic. */
template <class PT>
static inline void bz_prefetch_l2(const PT* p, int64_t n) {
    for (int64_t c = 0; c < n * (int64_t)sizeof(PT); c += 64)
        __builtin_prefetch((const char*)p + c, 0, 2);
}
#ifdef BZ_VL
static inline bzv bzv_loadp(const float* p) { return bzv_load(p); }
static inline bzv bzv_loadp(const uint16_t* p) {
#if defined(__AVX512F__)
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
#elif defined(__AVX2__) && defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
#else  // (NEON: one element at a time)
    float t[BZ_VL];
    for (int i = 0; i < BZ_VL; ++i) t[i] = bz_h2f(p[i]);
    return bzv_load(t);
#endif
}
#endif

#ifdef BZ_VL
/* r[i] = the sum of a[i]'s lanes, for BZ_VL vectors at once (the scores of BZ_VL keys:
   adds and shuffles in a tree instead of one horizontal reduction per key), in two parts:
   bzv_part4 folds 4 keys' vectors into one (the tree's levels within those keys),
   bzv_fin the BZ_VL / 4 folds into the BZ_VL sums (the grouped decode scores fold each 4
   keys as they come: the same operations, the same bits). */
static inline bzv bzv_part4(bzv a0, bzv a1, bzv a2, bzv a3) {
#if defined(__AVX512F__)
    const __m512d x =
        _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1)));
    const __m512d y =
        _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3)));
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
#elif defined(__AVX2__)
    return _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
#else
    return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
#endif
}
static inline bzv bzv_fin(const bzv (&c)[BZ_VL / 4]) {
#if defined(__AVX512F__)
    const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x44),
                                    _mm512_shuffle_f32x4(c[0], c[1], 0xEE));
    const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x44),
                                    _mm512_shuffle_f32x4(c[2], c[3], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xDD));
#elif defined(__AVX2__)
    return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20),
                         _mm256_permute2f128_ps(c[0], c[1], 0x31));
#else
    return c[0];
#endif
}
static inline bzv bzv_hsums(bzv (&a)[BZ_VL]) {
    bzv c[BZ_VL / 4];
    for (int m = 0; m < BZ_VL / 4; ++m)
        c[m] = bzv_part4(a[4 * m], a[4 * m + 1], a[4 * m + 2], a[4 * m + 3]);
    return bzv_fin(c);
}

/* The scores of keys [j, j + nk) (nk <= BZ_VL) into s[j..]: NV vectors per key. */
template <int NV, bool FULL, class PT>
static inline void bz_score_block(const bzv (&qv)[8], const PT* k0, int64_t kstride, int64_t j,
                                  int64_t nk, bzv sc, float* s) {
    bzv acc[BZ_VL];
#pragma GCC unroll 16
    for (int i = 0; i < BZ_VL; ++i) {
        if (!FULL && i >= nk) {
            acc[i] = bzv_zero();
            continue;
        }
        const PT* kr = k0 + (j + i) * kstride;
        if (FULL) /* the key BZ_PF_KEYS on (DRAM: strided rows the hardware misses) */
            bz_prefetch_l2(kr + BZ_PF_KEYS * kstride, NV * BZ_VL);
        acc[i] = bzv_mul(qv[0], bzv_loadp(kr));
#pragma GCC unroll 8
        for (int c = 1; c < NV; ++c) acc[i] = bzv_fma(qv[c], bzv_loadp(kr + c * BZ_VL), acc[i]);
    }
    if (FULL) {
        bzv_store(s + j, bzv_mul(bzv_hsums(acc), sc));
    } else {
        float t[BZ_VL];
        bzv_store(t, bzv_mul(bzv_hsums(acc), sc));
        for (int64_t i = 0; i < nk; ++i) s[j + i] = t[i];
    }
}

template <int NV, class PT>
static inline void bz_past_scores_nv(const bzv (&qv)[8], const PT* k0, int64_t kstride, int64_t L,
                                     bzv sc, float* s) {
    int64_t j = 0;
    for (; j + BZ_VL <= L; j += BZ_VL) bz_score_block<NV, true>(qv, k0, kstride, j, BZ_VL, sc, s);
    if (j < L) bz_score_block<NV, false>(qv, k0, kstride, j, L - j, sc, s);
}

/* s[j] = scale * q . key j for the first L past keys (decode): BZ_VL keys per step, each a
   chain of D / BZ_VL FMAs, their sums in one tree (a key's score the same bits wherever it
   falls: the last partial block's missing keys are zero vectors, their lanes not stored,
   and no key past L - 1 is read: its row may lie outside a compacted past).
   (q and the keys contiguous, D a multiple of the vector width up to 8 vectors.) */
template <class PT>
static inline bool bz_past_scores(const float* q, const PT* k0, int64_t kstride, int64_t L,
                                  int64_t D, float scale, float* s) {
    if (D <= 0 || D % BZ_VL || D > 8 * BZ_VL) return false;
    const int64_t nv = D / BZ_VL;
    bzv qv[8];
    for (int64_t c = 0; c < nv; ++c) qv[c] = bzv_load(q + c * BZ_VL);
    const bzv sc = bzv_set1(scale);
    bz_dispatch<8>(
        nv, [&](auto v) { bz_past_scores_nv<decltype(v)::value>(qv, k0, kstride, L, sc, s); });
    return true;
}

/* The scores of R query heads (q + r * qstride) of one key head against keys [j, j + nk)
   (nk <= BZ_VL) into s + r * sstride: each key loaded (float16: converted) once for the R
   heads, each score the operations of bz_score_block (the same bits); each key's value
   row (v0, 64 wide) prefetched for bz_pv_g. */
template <int NV, int R, bool FULL, class PT>
static inline void bz_score_block_g(const float* q, int64_t qstride, const PT* k0, int64_t kstride,
                                    int64_t j, int64_t nk, bzv sc, float* s, int64_t sstride,
                                    const PT* v0, int64_t vstride) {
    bzv part[R][BZ_VL / 4];
#pragma GCC unroll 4
    for (int m = 0; m < BZ_VL / 4; ++m) {
        bzv acc[R][4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
            const int64_t key = 4 * m + i;
            if (!FULL && key >= nk) {
#pragma GCC unroll 3
                for (int r = 0; r < R; ++r) acc[r][i] = bzv_zero();
                continue;
            }
            const PT* kr = k0 + (j + key) * kstride;
            if (FULL) bz_prefetch_l2(kr + BZ_PF_KEYS * kstride, NV * BZ_VL);
            bz_prefetch_l2(v0 + (j + key) * vstride, 64);
            bzv kv[NV];
#pragma GCC unroll 8
            for (int c = 0; c < NV; ++c) kv[c] = bzv_loadp(kr + c * BZ_VL);
#pragma GCC unroll 3
            for (int r = 0; r < R; ++r) {
                const float* qr = q + r * qstride;
                acc[r][i] = bzv_mul(bzv_load(qr), kv[0]);
#pragma GCC unroll 8
                for (int c = 1; c < NV; ++c)
                    acc[r][i] = bzv_fma(bzv_load(qr + c * BZ_VL), kv[c], acc[r][i]);
            }
        }
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r)
            part[r][m] = bzv_part4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
        float* sr = s + r * sstride;
        if (FULL) {
            bzv_store(sr + j, bzv_mul(bzv_fin(part[r]), sc));
        } else {
            float t[BZ_VL];
            bzv_store(t, bzv_mul(bzv_fin(part[r]), sc));
            for (int64_t i = 0; i < nk; ++i) sr[j + i] = t[i];
        }
    }
}

/* bz_past_scores for R query heads of one key head at once (bz_score_block_g). */
template <int NV, int R, class PT>
static inline void bz_past_scores_g(const float* q, int64_t qstride, const PT* k0, int64_t kstride,
                                    int64_t L, float scale, float* s, int64_t sstride, const PT* v0,
                                    int64_t vstride) {
    const bzv sc = bzv_set1(scale);
    int64_t j = 0;
    for (; j + BZ_VL <= L; j += BZ_VL)
        bz_score_block_g<NV, R, true>(q, qstride, k0, kstride, j, BZ_VL, sc, s, sstride, v0,
                                      vstride);
    if (j < L)
        bz_score_block_g<NV, R, false>(q, qstride, k0, kstride, j, L - j, sc, s, sstride, v0,
                                       vstride);
}

/* o_r = sum_j p_r[j] v_j / (the row's sum) for R query heads (p_r = s + r * sstride, inv_r
   its reciprocal sum) over L past values (PT) and n - L new ones (float), 64 wide: each
   value loaded once for the R heads; per head the even / odd keys' two chains of the
   single-head loop (the same bits). The first nL keys of the thread's next unit (nk, D
   wide) are prefetched meanwhile, two per two values. */
template <int R, class PT>
static inline void bz_pv_g(const float* s, int64_t sstride, const float* inv, const PT* pv,
                           int64_t pvstride, int64_t L, const float* vn, int64_t vnstride,
                           int64_t n, float* o, int64_t ostride, const PT* nk, int64_t nkstride,
                           int64_t nL, int64_t D) {
    constexpr int NV = 64 / BZ_VL;
    bzv y[R][2][NV];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int i = 0; i < NV; ++i) y[r][0][i] = y[r][1][i] = bzv_zero();
    auto acc = [&](int e, int64_t jj, auto load) {
        bzv v[NV];
#pragma GCC unroll 16
        for (int i = 0; i < NV; ++i) v[i] = load(i);
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) {
            const bzv p = bzv_set1(s[r * sstride + jj]);
#pragma GCC unroll 16
            for (int i = 0; i < NV; ++i) y[r][e][i] = bzv_fma(p, v[i], y[r][e][i]);
        }
    };
    int64_t jj = 0;
    for (; jj + 2 <= L; jj += 2) {
        const PT* vr = pv + jj * pvstride;
        if (jj < nL) {
            bz_prefetch_l2(nk + jj * nkstride, D);
            bz_prefetch_l2(nk + (jj + 1) * nkstride, D);
        }
        acc(0, jj, [&](int i) { return bzv_loadp(vr + i * BZ_VL); });
        acc(1, jj + 1, [&](int i) { return bzv_loadp(vr + pvstride + i * BZ_VL); });
    }
    for (; jj < L; ++jj) {
        const PT* vr = pv + jj * pvstride;
        acc(0, jj, [&](int i) { return bzv_loadp(vr + i * BZ_VL); });
    }
    for (; jj < n; ++jj) {
        const float* vr = vn + (jj - L) * vnstride;
        acc(1, jj, [&](int i) { return bzv_load(vr + i * BZ_VL); });
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
        const bzv iv = bzv_set1(inv[r]);
#pragma GCC unroll 16
        for (int i = 0; i < NV; ++i)
            bzv_store(o + r * ostride + i * BZ_VL, bzv_mul(bzv_add(y[r][0][i], y[r][1][i]), iv));
    }
}
#endif

/* max(-inf, s[0..n)) (NaNs skipped, as a scalar s[j] > m ? s[j] : m chain would: the
   lanes' maxima, then theirs; max is exact in any order) */
static inline float bz_max(const float* s, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    int64_t j = 0;
#if defined(__AVX512F__)
    __m512 mv = _mm512_set1_ps(m);
    for (; j + 16 <= n; j += 16) mv = _mm512_max_ps(_mm512_loadu_ps(s + j), mv);
    m = _mm512_reduce_max_ps(mv);
#endif
    for (; j < n; ++j) m = s[j] > m ? s[j] : m;
    return m;
}

/* exp(s[j] - max) in place over s[0..n) (n >= 1); the reciprocal of their sum (16 lanes
   of partial sums, then a tree). */
static inline float bz_softmax_row(float* s, int64_t n) {
    const float m = bz_max(s, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] = expf(s[j] - m);
    float part[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
#pragma omp simd
        for (int l = 0; l < 16; ++l) part[l] += s[j + l];
    }
    for (int l = 0; j < n; ++j, ++l) part[l] += s[j];
    for (int w = 8; w; w >>= 1)
        for (int l = 0; l < w; ++l) part[l] += part[l + w];
    return 1.0f / part[0];
}

template <class PT>
static inline float bz_dot(const float* a, int64_t sa, const PT* b, int64_t sb, int64_t n) {
#ifdef BZ_VL
    if (sa == 1 && sb == 1 && n % BZ_VL == 0) {
        bzv acc = bzv_zero();  // one register of partial sums
        for (int64_t i = 0; i < n; i += BZ_VL)
            acc = bzv_fma(bzv_load(a + i), bzv_loadp(b + i), acc);
        return bzv_sum(acc);
    }
#endif
    if (sa == 1 && sb == 1) {
        float acc[16] = {0};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
#pragma omp simd
            for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * bz_pf(b[i + l]);
        }
        for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * bz_pf(b[i]);
        for (int w = 8; w; w >>= 1)
            for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
        return acc[0];
    }
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i * sa] * bz_pf(b[i * sb]);
    return s;
}

template <class PT>
static void bz_sdpa(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], B = a[1], Hq = a[2], Hkv = a[3], T = a[4], S = a[5];
    const int64_t has_past = a[6], P = a[7], D = a[8], Dv = a[9], causal = a[10];
    double scale_d;
    std::memcpy(&scale_d, &a[11], sizeof scale_d);
    const float scale = (float)scale_d;
    const int64_t *qs = a + 13, *ks = a + 18, *vs = a + 23, *pks = a + 28, *pvs = a + 33;
    const float* Q = (const float*)bufs[0] + qs[0];
    const float* K = (const float*)bufs[1] + ks[0];
    const float* V = (const float*)bufs[2] + vs[0];
    const PT *PK = nullptr, *PV = nullptr;
    // per batch row: its valid past rows and the past batch row it reads (a[39]: the past
    // lengths' element stride, 0 for one length; a[40]: 1 with a past index buffer, its
    // element size a[41], offset a[42] and stride a[43]; a[44]: the past's batch size)
    const int64_t lstride = a[39], has_index = a[40], PB = a[44];
    std::vector<int64_t> Lb((size_t)B + 1, 0), pb((size_t)B + 1, 0);
    int64_t Lmax = 0;
    float* O;
    if (has_past) {
        PK = (const PT*)bufs[3] + pks[0];
        PV = (const PT*)bufs[4] + pvs[0];
        const void* lens = bufs[5];
        const void* idx = has_index ? bufs[6] : nullptr;
        for (int64_t b = 0; b < B; ++b) {
            const int64_t at = a[38] + b * lstride;
            int64_t L =
                a[12] == 4 ? (int64_t)((const int32_t*)lens)[at] : ((const int64_t*)lens)[at];
            Lb[b] = L < 0 ? 0 : (L > P ? P : L);
            Lmax = Lb[b] > Lmax ? Lb[b] : Lmax;
            int64_t p = b;
            if (has_index) {  // clamped: an index out of range never reads outside the past
                const int64_t ia = a[42] + b * a[43];
                p = a[41] == 4 ? (int64_t)((const int32_t*)idx)[ia] : ((const int64_t*)idx)[ia];
                p = p < 0 ? 0 : (p >= PB ? PB - 1 : p);
            }
            pb[b] = p;
        }
        O = (float*)bufs[has_index ? 7 : 6];
    } else {
        O = (float*)bufs[3];
    }
    const int64_t rep = Hq / Hkv, rows = B * Hq * T;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t ld = (Lmax + S + 15) / 16 * 16;  // keys per row of the transposed block
    const bool transpose = rep * T >= BZ_TRANSPOSE_ROWS;
    // decode (one query row per head, 64-wide values, contiguous rows): the query heads of
    // a key head in groups of up to 3 share each key's and value's load and conversion
    // (bz_score_block_g, bz_pv_g: the bits of one head at a time); one head per unit where
    // groups would leave the threads fewer than 4 units each (a single sequence's step)
    int64_t RG = 1;
#ifdef BZ_VL
    if (has_past && !transpose && T == 1 && rep > 1 && Dv == 64 && D > 0 && D % BZ_VL == 0 &&
        D <= 8 * BZ_VL && qs[4] == 1 && ks[4] == 1 && vs[4] == 1 && pks[4] == 1 && pvs[4] == 1)
        RG = rep < 3 ? rep : 3;
#endif
    const int64_t chunks = (rep + RG - 1) / RG;
    if (B * Hkv * chunks < 4 * nt) RG = 1;
    const int64_t units = RG > 1 ? B * Hkv * chunks : 0;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        std::vector<float> sc((size_t)(ld + 16) * (size_t)RG), acc((size_t)Dv + 1);
#ifdef BZ_VL
#pragma omp for schedule(static) nowait  // (the region's end waits)
        for (int64_t u = 0; u < units; ++u) {
            const int64_t b = u / (Hkv * chunks), g = (u / chunks) % Hkv,
                          h0 = g * rep + u % chunks * RG;
            const int64_t R = rep - (h0 - g * rep) < RG ? rep - (h0 - g * rep) : RG;
            const int64_t L = Lb[b], ss = ld + 16;
            const PT* PKb = PK + pb[b] * pks[1] + g * pks[2];
            const PT* PVb = PV + pb[b] * pvs[1] + g * pvs[2];
            const float* q = Q + b * qs[1] + h0 * qs[2];
            float* o = O + (b * Hq + h0) * Dv;
            const int64_t lim = causal ? 0 : S - 1;  // (T == 1, a past: the row's own key)
            const int64_t n_new = lim >= S ? S : lim + 1, n = L + n_new;
            if (n == 0) {
                for (int64_t i = 0; i < R * Dv; ++i) o[i] = nan;
                continue;
            }
            float* s = sc.data();
            const int64_t nv = D / BZ_VL;
            bz_dispatch<3>(R, [&](auto r) {
                bz_dispatch<8>(nv, [&](auto v) {
                    bz_past_scores_g<decltype(v)::value, decltype(r)::value>(
                        q, qs[2], PKb, pks[3], L, scale, s, ss, PVb, pvs[3]);
                });
            });
            float inv[3];
            for (int64_t r = 0; r < R; ++r) {
                float* sr = s + r * ss;
                for (int64_t j = 0; j < n_new; ++j)
                    sr[L + j] =
                        bz_dot(q + r * qs[2], 1, K + b * ks[1] + g * ks[2] + j * ks[3], 1, D) *
                        scale;
                inv[r] = bz_softmax_row(sr, n);
            }
            const float* vn = V + b * vs[1] + g * vs[2];
            // the next unit's keys, prefetched while this one's values are summed (each
            // phase's rows requested a phase ahead: ~25 % off a 16-sequence step's attention
            // from DRAM)
            const int64_t un = u + 1, bn = un / (Hkv * chunks), gn = (un / chunks) % Hkv;
            const int64_t nL = un < units ? Lb[bn] : 0;
            const PT* nk = PK + pb[un < units ? bn : b] * pks[1] + gn * pks[2];
            bz_dispatch<3>(R, [&](auto r) {
                bz_pv_g<decltype(r)::value>(s, ss, inv, PVb, pvs[3], L, vn, vs[3], n, o, Dv, nk,
                                            pks[3], nL, D);
            });
        }
#endif
        // this thread's (b, g) keys, d-major
        std::vector<float> kt(transpose ? (size_t)(D * ld) + 1 : 1);
        int64_t cur = -1;
#pragma omp for schedule(static) nowait  // (the region's end waits)
        for (int64_t r = 0; r < (units ? 0 : rows); ++r) {
            const int64_t ti = r % T, h = (r / T) % Hq, b = r / (T * Hq), g = h / rep;
            const int64_t L = Lb[b];
            const PT* PKb = has_past ? PK + pb[b] * pks[1] : nullptr;  // this row's past
            const PT* PVb = has_past ? PV + pb[b] * pvs[1] : nullptr;
            const float* q = Q + b * qs[1] + h * qs[2] + ti * qs[3];
            float* o = O + r * Dv;
            int64_t lim = causal ? (has_past ? ti : S - T + ti) : S - 1;  // last new key seen
            const int64_t n_new = lim < 0 ? 0 : (lim >= S ? S : lim + 1), n = L + n_new;
            if (n == 0) {
                for (int64_t d = 0; d < Dv; ++d) o[d] = nan;
                continue;
            }
            float* s = sc.data();
            if (!transpose) {  // few query rows per key head (decode): one dot per key
                bool done = false;
#ifdef BZ_VL
                if (qs[4] == 1 && pks[4] == 1)
                    done = bz_past_scores(q, PKb + g * pks[2], pks[3], L, D, scale, s);
#endif
                for (int64_t j = 0; !done && j < L; ++j)
                    s[j] = bz_dot(q, qs[4], PKb + g * pks[2] + j * pks[3], pks[4], D) * scale;
                for (int64_t j = 0; j < n_new; ++j)
                    s[L + j] =
                        bz_dot(q, qs[4], K + b * ks[1] + g * ks[2] + j * ks[3], ks[4], D) * scale;
            } else if (b * Hkv + g != cur) {  // transpose this head's keys once: the
                cur = b * Hkv + g;            // scores of 16 keys are 16 lanes of D broadcast FMAs
                float* w = kt.data();
                for (int64_t j = 0; j < L; ++j) {
                    const PT* kr = PKb + g * pks[2] + j * pks[3];
                    for (int64_t d = 0; d < D; ++d) w[d * ld + j] = bz_pf(kr[d * pks[4]]);
                }
                for (int64_t j = L; j < L + S; ++j) {
                    const float* kr = K + b * ks[1] + g * ks[2] + (j - L) * ks[3];
                    for (int64_t d = 0; d < D; ++d) w[d * ld + j] = kr[d * ks[4]];
                }
                for (int64_t d = 0; d < D; ++d)
                    for (int64_t j = L + S; j < ld; ++j) w[d * ld + j] = 0.0f;
            }
            const float* w = kt.data();
            for (int64_t j0 = 0; transpose && j0 < n; j0 += 16) {
                float part[16] = {0};
                for (int64_t d = 0; d < D; ++d) {
                    const float qd = q[d * qs[4]];
                    const float* wr = w + d * ld + j0;
#pragma omp simd
                    for (int l = 0; l < 16; ++l) part[l] += qd * wr[l];
                }
#pragma omp simd
                for (int l = 0; l < 16; ++l) s[j0 + l] = part[l] * scale;
            }
            const float inv = bz_softmax_row(s, n);
            float* y = acc.data();
#ifdef BZ_VL
            if (Dv == 64 && (L == 0 || pvs[4] == 1) && vs[4] == 1) {  // y in registers
                constexpr int NV = 64 / BZ_VL;
                bzv yv[2][NV];  // even and odd keys: two chains per vector, half the latency
#pragma GCC unroll 16
                for (int i = 0; i < NV; ++i) yv[0][i] = yv[1][i] = bzv_zero();
                int64_t jj = 0;
                for (; jj + 2 <= L; jj += 2) {
                    const PT* vr = PVb + g * pvs[2] + jj * pvs[3];
                    const bzv p0 = bzv_set1(s[jj]), p1 = bzv_set1(s[jj + 1]);
#pragma GCC unroll 16
                    for (int i = 0; i < NV; ++i) {
                        yv[0][i] = bzv_fma(p0, bzv_loadp(vr + i * BZ_VL), yv[0][i]);
                        yv[1][i] = bzv_fma(p1, bzv_loadp(vr + pvs[3] + i * BZ_VL), yv[1][i]);
                    }
                }
                for (; jj < L; ++jj) {
                    const bzv p = bzv_set1(s[jj]);
                    const PT* vr = PVb + g * pvs[2] + jj * pvs[3];
#pragma GCC unroll 16
                    for (int i = 0; i < NV; ++i)
                        yv[0][i] = bzv_fma(p, bzv_loadp(vr + i * BZ_VL), yv[0][i]);
                }
                for (; jj < n; ++jj) {
                    const bzv p = bzv_set1(s[jj]);
                    const float* vr = V + b * vs[1] + g * vs[2] + (jj - L) * vs[3];
#pragma GCC unroll 16
                    for (int i = 0; i < NV; ++i)
                        yv[1][i] = bzv_fma(p, bzv_load(vr + i * BZ_VL), yv[1][i]);
                }
                const bzv iv = bzv_set1(inv);
#pragma GCC unroll 16
                for (int i = 0; i < NV; ++i)
                    bzv_store(o + i * BZ_VL, bzv_mul(bzv_add(yv[0][i], yv[1][i]), iv));
                continue;
            }
#endif
            for (int64_t d = 0; d < Dv; ++d) y[d] = 0.0f;
            for (int64_t jj = 0; jj < L; ++jj) {
                const float p = s[jj];
                const PT* vr = PVb + g * pvs[2] + jj * pvs[3];
                const int64_t sv = pvs[4];
                if (sv == 1) {
#pragma omp simd
                    for (int64_t d = 0; d < Dv; ++d) y[d] += p * bz_pf(vr[d]);
                } else {
                    for (int64_t d = 0; d < Dv; ++d) y[d] += p * bz_pf(vr[d * sv]);
                }
            }
            for (int64_t jj = L; jj < n; ++jj) {
                const float p = s[jj];
                const float* vr = V + b * vs[1] + g * vs[2] + (jj - L) * vs[3];
                const int64_t sv = vs[4];
                if (sv == 1) {
#pragma omp simd
                    for (int64_t d = 0; d < Dv; ++d) y[d] += p * vr[d];
                } else {
                    for (int64_t d = 0; d < Dv; ++d) y[d] += p * vr[d * sv];
                }
            }
            for (int64_t d = 0; d < Dv; ++d) o[d] = y[d] * inv;
        }
    }
}

/* a[45]: the past keys/values' element type (0 float32, 1 float16). */
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    if (a[6] && a[45] == 1)
        bz_sdpa<uint16_t>(bufs, a);
    else
        bz_sdpa<float>(bufs, a);
}
