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
static inline float bzv_sum(bzv v) { return vaddvq_f32(v); }
#endif

static inline float bz_dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n) {
#ifdef BZ_VL
    if (sa == 1 && sb == 1 && n % BZ_VL == 0) {  // one register of partial sums
        bzv acc = bzv_zero();
        for (int64_t i = 0; i < n; i += BZ_VL) acc = bzv_fma(bzv_load(a + i), bzv_load(b + i), acc);
        return bzv_sum(acc);
    }
#endif
    if (sa == 1 && sb == 1) {
        float acc[16] = {0};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
#pragma omp simd
            for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
        }
        for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
        for (int w = 8; w; w >>= 1)
            for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
        return acc[0];
    }
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i * sa] * b[i * sb];
    return s;
}

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], B = a[1], Hq = a[2], Hkv = a[3], T = a[4], S = a[5];
    const int64_t has_past = a[6], P = a[7], D = a[8], Dv = a[9], causal = a[10];
    double scale_d;
    std::memcpy(&scale_d, &a[11], sizeof scale_d);
    const float scale = (float)scale_d;
    const int64_t *qs = a + 13, *ks = a + 18, *vs = a + 23, *pks = a + 28, *pvs = a + 33;
    const float* Q = (const float*)bufs[0] + qs[0];
    const float* K = (const float*)bufs[1] + ks[0];
    const float* V = (const float*)bufs[2] + vs[0];
    const float *PK = nullptr, *PV = nullptr;
    // per batch row: its valid past rows and the past batch row it reads (a[39]: the past
    // lengths' element stride, 0 for one length; a[40]: 1 with a past index buffer, its
    // element size a[41], offset a[42] and stride a[43]; a[44]: the past's batch size)
    const int64_t lstride = a[39], has_index = a[40], PB = a[44];
    std::vector<int64_t> Lb((size_t)B + 1, 0), pb((size_t)B + 1, 0);
    int64_t Lmax = 0;
    float* O;
    if (has_past) {
        PK = (const float*)bufs[3] + pks[0];
        PV = (const float*)bufs[4] + pvs[0];
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
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        std::vector<float> sc((size_t)ld + 16), acc((size_t)Dv + 1);
        // this thread's (b, g) keys, d-major
        std::vector<float> kt(transpose ? (size_t)(D * ld) + 1 : 1);
        int64_t cur = -1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t ti = r % T, h = (r / T) % Hq, b = r / (T * Hq), g = h / rep;
            const int64_t L = Lb[b];
            const float* PKb = has_past ? PK + pb[b] * pks[1] : nullptr;  // this row's past
            const float* PVb = has_past ? PV + pb[b] * pvs[1] : nullptr;
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
                for (int64_t j = 0; j < L; ++j)
                    s[j] = bz_dot(q, qs[4], PKb + g * pks[2] + j * pks[3], pks[4], D) * scale;
                for (int64_t j = 0; j < n_new; ++j)
                    s[L + j] =
                        bz_dot(q, qs[4], K + b * ks[1] + g * ks[2] + j * ks[3], ks[4], D) * scale;
            } else if (b * Hkv + g != cur) {  // transpose this head's keys once: the
                cur = b * Hkv + g;            // scores of 16 keys are 16 lanes of D broadcast FMAs
                float* w = kt.data();
                for (int64_t j = 0; j < L + S; ++j) {
                    const float* kr = j < L ? PKb + g * pks[2] + j * pks[3]
                                            : K + b * ks[1] + g * ks[2] + (j - L) * ks[3];
                    const int64_t sk = j < L ? pks[4] : ks[4];
                    for (int64_t d = 0; d < D; ++d) w[d * ld + j] = kr[d * sk];
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
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
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
            const float inv = 1.0f / part[0];
            float* y = acc.data();
#ifdef BZ_VL
            if (Dv == 64 && (L == 0 || pvs[4] == 1) && vs[4] == 1) {  // y in registers
                constexpr int NV = 64 / BZ_VL;
                bzv yv[NV];
#pragma GCC unroll 16
                for (int i = 0; i < NV; ++i) yv[i] = bzv_zero();
                for (int64_t jj = 0; jj < n; ++jj) {
                    const bzv p = bzv_set1(s[jj]);
                    const float* vr = jj < L ? PVb + g * pvs[2] + jj * pvs[3]
                                             : V + b * vs[1] + g * vs[2] + (jj - L) * vs[3];
#pragma GCC unroll 16
                    for (int i = 0; i < NV; ++i)
                        yv[i] = bzv_fma(p, bzv_load(vr + i * BZ_VL), yv[i]);
                }
                const bzv iv = bzv_set1(inv);
#pragma GCC unroll 16
                for (int i = 0; i < NV; ++i) bzv_store(o + i * BZ_VL, bzv_mul(yv[i], iv));
                continue;
            }
#endif
            for (int64_t d = 0; d < Dv; ++d) y[d] = 0.0f;
            for (int64_t jj = 0; jj < n; ++jj) {
                const float p = s[jj];
                const float* vr = jj < L ? PVb + g * pvs[2] + jj * pvs[3]
                                         : V + b * vs[1] + g * vs[2] + (jj - L) * vs[3];
                const int64_t sv = jj < L ? pvs[4] : vs[4];
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
