// The int8-activation path of the quantized matmul kernel: x quantized to int8 per block
// of 32, integer dot products against the codes with AVX-512 VNNI, AVX-VNNI or, on AVX2
// without VNNI, vpmaddubsw + vpmaddwd (4-bit codes only) -- the matvec path for few rows of
// x, the tiled GEMM below; BZ_VNNI is 0 where none is compiled.
// Parameters: see qmatmul_common.h.
#ifndef BZ_QMM_INT8_H
#define BZ_QMM_INT8_H
#include "qmatmul_common.h"

/* ---------------------------------------------------------------- int8-activation path
   x quantized once per call to int8 per block of 32 (dx = max|x| / 127, q = rint(x / dx)),
   integer dot products against the unsigned codes with VNNI (u8 x s8 -> int32), then per
   output y = sum_blocks s * dx * idot + sum_groups b * sum(x). */
#if BZ_ISA == 2 && defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define BZ_VNNI 2
#elif BZ_ISA >= 1 && defined(__AVXVNNI__)
#define BZ_VNNI 1
#elif BZ_ISA == 1 || BZ_ISA == 2
/* AVX2 (Zen 2/3, Haswell..Skylake client): u8 x s8 pairs to int16 with vpmaddubsw, then
   int16 pairs to int32 with vpmaddwd against ones. vpmaddubsw saturates at 2^15; a 4-bit
   code (<= 15) times |q| <= 127, two per lane, four per lane after the one int16 add of
   dot2, stays below 7,620. 8-bit codes would saturate: the matvec path is 4 bits only
   (BZ_I8_MATVEC), the GEMM splits them into nibbles. */
#define BZ_VNNI 3
#elif BZ_ISA == 3 && defined(__ARM_FEATURE_DOTPROD)
/* AArch64 with the dot-product extension (Apple M1 on, Neoverse, Cortex-A76 on): sdot,
   s8 x s8 -> int32, 16 products per instruction; the codes shifted to signed (c - Z). */
#define BZ_VNNI 4
#elif BZ_ISA == 3
/* AArch64 without it (Cortex-A53/A72): smull / smlal2 to int16 (two products per lane:
   |c - Z| <= 128 times |q| <= 127, twice, stays below 32,512), sadalp to int32. */
#define BZ_VNNI 5
#else
#define BZ_VNNI 0
#endif

/* the int8 matvec path (QV, bz_i8_part): everywhere int8 is but AVX2 at 8 bits */
#define BZ_I8_MATVEC (BZ_VNNI && (BZ_VNNI != 3 || BZ_BITS == 4))
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
        const __m512i iota =
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
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
#elif BZ_VNNI <= 3
/* AVX-VNNI or AVX2 (no AVX-512 VNNI): 32 elements (one block) per step. */
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
#if BZ_VNNI == 1
        const __m256i a = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, ql);
        return _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(a, hi, qh));
#else
        const __m256i p =
            _mm256_add_epi16(_mm256_maddubs_epi16(lo, ql), _mm256_maddubs_epi16(hi, qh));
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
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
    static BZ_INLINE I w4t(const uint8_t* p) { return w4(p); } /* never called */
    static BZ_INLINE I w8t(const uint8_t* p) { return w8(p); }
    static BZ_INLINE I qload(const int8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
    static BZ_INLINE F dot(I w, I q) {
#if BZ_VNNI == 1
        return _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, q));
#else
        const __m256i p = _mm256_maddubs_epi16(w, q);
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
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
        const __m256i i =
            _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), BZ_GS == 64 ? 1 : 2);
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
#else
/* NEON: 32 elements (one block, two registers) per step, codes in natural order and
   shifted to signed (c - Z), so that the centring term is Z * sum(x) (bz_quant_row). No
   de-interleaved chunks (C = 0). */
struct QV {
    typedef float32x4_t F;
    struct I {
        int8x16_t a, b;
    };
    enum { E = 32, L = 4, C = 0 };
    static BZ_INLINE I w4(const uint8_t* p) {
        const uint8x16_t v = vld1q_u8(p), f = vdupq_n_u8(15);
        const uint8x16_t lo = vandq_u8(v, f), hi = vshrq_n_u8(v, 4);
        const int8x16_t z = vdupq_n_s8(8);
        return {vsubq_s8(vreinterpretq_s8_u8(vzip1q_u8(lo, hi)), z),
                vsubq_s8(vreinterpretq_s8_u8(vzip2q_u8(lo, hi)), z)};
    }
    static BZ_INLINE I w8(const uint8_t* p) {
        const uint8x16_t t = vdupq_n_u8(0x80);
        return {vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), t)),
                vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16), t))};
    }
    static BZ_INLINE I w4t(const uint8_t* p) { return w4(p); } /* never called (E = 32) */
    static BZ_INLINE I w8t(const uint8_t* p) { return w8(p); }
    static BZ_INLINE void w4c(const uint8_t* p, I& lo, I& hi) { lo = hi = w4(p); } /* C = 0 */
    static BZ_INLINE I qload(const int8_t* p) { return {vld1q_s8(p), vld1q_s8(p + 16)}; }
    static BZ_INLINE int32x4_t idot(I w, I q) {
#if BZ_VNNI == 4
        return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w.a, q.a), w.b, q.b);
#else
        const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w.a), vget_low_s8(q.a)), w.a, q.a);
        const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w.b), vget_low_s8(q.b)), w.b, q.b);
        return vpadalq_s16(vpaddlq_s16(p0), p1);
#endif
    }
    static BZ_INLINE F dot(I w, I q) { return vcvtq_f32_s32(idot(w, q)); }
    static BZ_INLINE F dot2(I lo, I ql, I hi, I qh) { return vaddq_f32(dot(lo, ql), dot(hi, qh)); }
    static BZ_INLINE F spat(const float* cs) { return vdupq_n_f32(*cs); }
    static BZ_INLINE F spatc(const float* cs) { return spat(cs); }
    static BZ_INLINE F lds(const stype* p, int64_t n) {
        stype t[4] = {0, 0, 0, 0};
        memcpy(t, p, sizeof(stype) * (size_t)(n < 4 ? n : 4));
#if BZ_HALF
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(t)));
#else
        return vld1q_f32(t);
#endif
    }
    static BZ_INLINE F expand(F v) { /* lane i <- lane i * 32 / BZ_GS */
        return BZ_GS == 64 ? vzip1q_f32(v, v) : vdupq_laneq_f32(v, 0);
    }
    static BZ_INLINE F load(const float* p) { return vld1q_f32(p); }
    static BZ_INLINE void store(float* p, F v) { vst1q_f32(p, v); }
    static BZ_INLINE F zero() { return vdupq_n_f32(0.0f); }
    static BZ_INLINE F add(F a, F b) { return vaddq_f32(a, b); }
    static BZ_INLINE F mul(F a, F b) { return vmulq_f32(a, b); }
    static BZ_INLINE F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
    static BZ_INLINE float hsum(F v) { return vaddvq_f32(v); }
};
#endif

#define BZ_ZC (BZ_BITS == 4 ? 8.0f : 128.0f) /* the centre of the code range */
#if BZ_VNNI >= 4
/* One x row (K floats) -> q (int8 per block of 32, natural order, zero padded to Kp), dx
   (one per block, zero padded to a multiple of 16), ez = Z * sum of the block's x (the
   codes are shifted by Z: see QV), sx (sum of x over each weight group). NEON. */
static void bz_quant_row(const float* x, int64_t K, int64_t Kp, int8_t* q, float* dx, float* ez,
                         float* sx, int64_t = 0) {
    const int64_t G32 = K / 32, G = K / BZ_GS;
    for (int64_t g = 0; g < G32; ++g) {
        const float* xg = x + g * 32;
        float32x4_t v[8];
        for (int i = 0; i < 8; ++i) v[i] = vld1q_f32(xg + 4 * i);
        float32x4_t a = vabsq_f32(v[0]), t = v[0];
        for (int i = 1; i < 8; ++i) {
            a = vmaxq_f32(a, vabsq_f32(v[i]));
            t = vaddq_f32(t, v[i]);
        }
        const float amax = vmaxvq_f32(a);
        const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int16x8_t h[4];
        for (int i = 0; i < 4; ++i) /* vcvtnq: round to nearest even, as cvtps on x86 */
            h[i] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i], id))),
                                vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i + 1], id))));
        vst1q_s8(q + g * 32, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
        vst1q_s8(q + g * 32 + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
        dx[g] = d;
        ez[g] = BZ_ZC * vaddvq_f32(t);
    }
    for (int64_t k = K; k < Kp; ++k) q[k] = 0;
    for (int64_t g = G32; g < bz_pad16(G32); ++g) dx[g] = ez[g] = 0.0f;
    for (int64_t g = 0; g < G; ++g) {
        float32x4_t t = vdupq_n_f32(0.0f);
        for (int j = 0; j < BZ_GS; j += 4) t = vaddq_f32(t, vld1q_f32(x + g * BZ_GS + j));
        sx[g] = vaddvq_f32(t);
    }
    for (int64_t g = G; g < bz_pad16(G); ++g) sx[g] = 0.0f;
}
#else
/* One x row (K floats) -> q (int8, zero padded to Kp), dx (one per block of 32, zero
   padded to a multiple of 16), sx (sum of x over each weight group, zero padded). AVX2.
   blk > 0: the GEMM's layout (QXB) among blk rows: block g's 32 bytes (its 16 even
   elements, then the odd ones) at q + g * blk * 32, dx, ez at [g * blk], sx at [g * blk];
   no padding; only weight groups [ga, gb) (threads split a block's rows by groups: split by
   rows, they wrote the same cache lines of dx, ez and sx -- ~20 us a call lost to false
   sharing at 16 rows). q2 (the GEMM's 16-bit activations, BZ_Q16): x / dx rounded to 16-bit
   integers v (|v| <= BZ_Q16), stored as two int8 planes, hi = floor((v + 128) / 256) in q and
   lo = v - 256 hi (-128..127) in q2 at the same places. */
#define BZ_Q16 32639 /* 127 * 256 + 127: hi stays within -127..127 */
static void bz_quant_row(const float* x, int64_t K, int64_t Kp, int8_t* q, float* dx, float* ez,
                         float* sx, int64_t blk = 0, int64_t ga = 0, int64_t gb = -1,
                         int8_t* q2 = nullptr) {
    const int64_t ss = blk ? blk : 1; /* stride of a row's per-block (per-group) values */
    if (gb < 0) gb = K / BZ_GS;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i deint = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                           2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const int64_t G32 = K / 32, G = K / BZ_GS;
    for (int64_t g = ga * (BZ_GS / 32); g < gb * (BZ_GS / 32); ++g) {
        const float* xg = x + g * 32;
        const __m256 v0 = _mm256_loadu_ps(xg), v1 = _mm256_loadu_ps(xg + 8),
                     v2 = _mm256_loadu_ps(xg + 16), v3 = _mm256_loadu_ps(xg + 24);
        const __m256 a =
            _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                          _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const float top = q2 ? (float)BZ_Q16 : 127.0f;
        const float d = amax / top, id = amax > 0.0f ? top / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        /* cvtps rounds to nearest even; |x * id| <= top (+ rounding): no saturation */
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
        { /* ez = Z * (sum of the block's x - dx * sum of its q): centres the codes */
            const __m256i qs = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(qs), _mm256_extracti128_si256(qs, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
            const __m256 xs = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));
            __m128 u = _mm_add_ps(_mm256_castps256_ps128(xs), _mm256_extractf128_ps(xs, 1));
            u = _mm_add_ps(u, _mm_movehl_ps(u, u));
            u = _mm_add_ss(u, _mm_movehdup_ps(u));
            ez[g * ss] = BZ_ZC * (_mm_cvtss_f32(u) - d * (float)_mm_cvtsi128_si32(t));
        }
        /* the 32 values as int8 in q's layout at dst */
        auto put = [&](int8_t* dst, __m256i a0, __m256i a1, __m256i a2, __m256i a3) {
            a0 = _mm256_packs_epi32(a0, a1);
            a2 = _mm256_packs_epi32(a2, a3);
            a0 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a0, a2), perm);
            const int64_t c = g / (QV::C / 32);
            if (BZ_BITS == 4 && blk) { /* GEMM layout: each block's 16 even elements, then odd */
                a0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a0, deint), 0xD8);
                _mm256_storeu_si256((__m256i*)(dst + g * ss * 32), a0);
            } else if (BZ_BITS == 4 && c < K / QV::C) {
                /* chunk of C elements: the even elements of its blocks, then the odd ones */
                a0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a0, deint), 0xD8);
                int8_t* qc = dst + c * QV::C + (g % (QV::C / 32)) * 16;
                _mm_storeu_si128((__m128i*)qc, _mm256_castsi256_si128(a0));
                _mm_storeu_si128((__m128i*)(qc + QV::C / 2), _mm256_extracti128_si256(a0, 1));
            } else {
                _mm256_storeu_si256((__m256i*)(dst + g * ss * 32), a0);
            }
        };
        if (q2) { /* hi = floor((v + 128) / 256), lo = v - 256 hi */
            auto hi = [](__m256i v) {
                return _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(128)), 8);
            };
            auto lo = [](__m256i v, __m256i h) {
                return _mm256_sub_epi32(v, _mm256_slli_epi32(h, 8));
            };
            const __m256i h0 = hi(i0), h1 = hi(i1), h2 = hi(i2), h3 = hi(i3);
            put(q2, lo(i0, h0), lo(i1, h1), lo(i2, h2), lo(i3, h3));
            put(q, h0, h1, h2, h3);
        } else {
            put(q, i0, i1, i2, i3);
        }
        dx[g * ss] = d;
    }
    for (int64_t g = ga; g < gb; ++g) {
        __m256 s = _mm256_setzero_ps();
        for (int j = 0; j < BZ_GS; j += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + g * BZ_GS + j));
        __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        t = _mm_add_ps(t, _mm_movehl_ps(t, t));
        t = _mm_add_ss(t, _mm_movehdup_ps(t));
        sx[g * ss] = _mm_cvtss_f32(t);
    }
    if (blk) return;
    for (int64_t k = K; k < Kp; ++k) q[k] = 0;
    for (int64_t g = G32; g < bz_pad16(G32); ++g) dx[g] = ez[g] = 0.0f;
    for (int64_t g = G; g < bz_pad16(G); ++g) sx[g] = 0.0f;
}
#endif

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

/* One block of QV::E codes at k of R weight rows against MB rows of x (bz_i8_rows' names), in
   natural order, into acc; LOAD4 / LOAD8 load R's codes for BZ_BITS 4 / 8 (QV::w4t / w8t: the
   last block, of 32 codes). A macro rather than a function, so that the compiler sees the loops
   as written here (a function changes its register allocation of bz_i8_rows). */
#define BZ_I8_BLOCK(LOAD4, LOAD8)                                                                \
    do {                                                                                         \
        I w[R];                                                                                  \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {                                    \
            const uint8_t* wp = wrow + r * rowbytes + k * BZ_BITS / 8;                           \
            w[r] = BZ_BITS == 4 ? LOAD4(wp) : LOAD8(wp);                                         \
        }                                                                                        \
        _Pragma("GCC unroll 8") for (int m = 0; m < MB; ++m) {                                   \
            const I qv = QV::qload(q0 + m * qx.Kp + k);                                          \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) acc[m][r] =                      \
                QV::fma(QV::dot(w[r], qv), QV::spat(cs + (m * R + r) * Gp + k / 32), acc[m][r]); \
        }                                                                                        \
    } while (0)

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
    if (BZ_BITS == 4 && QV::C > 0) { /* chunks of C elements, x de-interleaved per chunk */
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
    for (; k + QV::E <= K; k += QV::E) BZ_I8_BLOCK(QV::w4, QV::w8); /* natural order */
    if (QV::E == 64 && k < K) /* the last block of 32 (cs is zero past it) */
        BZ_I8_BLOCK(QV::w4t, QV::w8t);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
            out[m * N + r] = QV::hsum(QV::add(acc[m][r], QV::load(bb + (m * R + r) * QV::L)));
}

#ifndef BZ_I8_RB
#define BZ_I8_RB 4 /* weight rows per pass */
#endif

/* floats of bz_i8_part's scratch (a thread's, reused across its calls) */
static int64_t bz_i8_scratch_floats(const QX& qx) {
    return 4 * BZ_I8_RB * (qx.Gp + QV::L) + 4 * BZ_I8_RB * QV::L;
}

/* Rows [n0, n1) of the output for every row of x (M <= BZ_I8_MMAX); scratch: see above. The
   prefetch runs ahead up to row N (past n1: the rows a thread's next item or another thread
   reads). */
static void bz_i8_part(const uint8_t* wq, const stype* sc, const stype* bi, const QX& qx, int64_t M,
                       int64_t N, int64_t K, int64_t n0, int64_t n1, float* out, float* scratch) {
    const int64_t rowbytes = K * BZ_BITS / 8;
    float* cs = scratch;
    float* bb = scratch + 4 * BZ_I8_RB * (qx.Gp + QV::L);
    for (int64_t n = n0; n < n1;) {
        const int R = n1 - n >= BZ_I8_RB ? BZ_I8_RB : 1;
        const uint8_t* wrow = wq + n * rowbytes;
        if (n + BZ_PF_ROWS + R <= N) {
            bz_prefetch(wrow + BZ_PF_ROWS * rowbytes, R * rowbytes);
            bz_prefetch(sc + (n + BZ_PF_ROWS) * qx.G, R * qx.G * (int64_t)sizeof(stype));
            bz_prefetch(bi + (n + BZ_PF_ROWS) * qx.G, R * qx.G * (int64_t)sizeof(stype));
        }
        for (int64_t m0 = 0; m0 < M; m0 += 4) {
            const int64_t mb = M - m0 < 4 ? M - m0 : 4;
            float* o = out + m0 * N + n;
#define BZ_I8_CASE(MBV)                                                                    \
    case MBV:                                                                              \
        if (R == BZ_I8_RB)                                                                 \
            bz_i8_rows<MBV, BZ_I8_RB>(wrow, rowbytes, sc, bi, n, qx, m0, K, cs, bb, o, N); \
        else                                                                               \
            bz_i8_rows<MBV, 1>(wrow, rowbytes, sc, bi, n, qx, m0, K, cs, bb, o, N);        \
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
}

#if BZ_VNNI == 2 || BZ_VNNI == 3
/* ------------------------------------------------ int8 GEMM: what every ISA's shares */
/* x quantized for the GEMM, block-major: the M rows' 32 bytes of block blk at q + (blk * M +
   m) * 32, their dx and ez at [blk * M + m], sx at [g * M + m] -- a row block's data of one
   block is contiguous (one base pointer and immediate offsets: with rows M * K bytes
   apart, each row's pointers took a register and were reloaded from the stack) */
struct QXB {
    const int8_t* q;
    const float* dx;
    const float* ez;
    const float* sx;
    int64_t M;
    const int8_t* q2; /* 16-bit activations: the low plane (q the high one); else null */
};
/* Rows m0.. of block blk of a QXB: their 32 bytes each, dx, ez, and sx of the block's group. */
struct QXRows {
    const int8_t* q;
    const float* dx;
    const float* ez;
    const float* sx;
    const int8_t* q2;
};
static BZ_INLINE QXRows bz_qx_rows(const QXB& qx, int64_t blk, int64_t m0) {
    const int64_t g = blk / (BZ_GS / 32);
    return {qx.q + (blk * qx.M + m0) * 32, qx.dx + blk * qx.M + m0, qx.ez + blk * qx.M + m0,
            qx.sx + g * qx.M + m0, qx.q2 ? qx.q2 + (blk * qx.M + m0) * 32 : nullptr};
}
#define BZ_GT 16       /* weight rows per tile (lanes) */
#define BZ_GDW BZ_BITS /* dwords of codes per block of 32 per row */
struct GT { /* one repacked tile: w[blk][j][lane] dwords, s[blk][lane], b[g][lane] (scales and
              biases in the weight's own type: float16 ones stay 16-bit, a sixth less to read) */
    uint32_t* w;
    stype* s;
    stype* b;
};
/* 32-bit words of one repacked tile (codes, block scales, group biases). */
static BZ_INLINE int64_t bz_tile_words(int64_t K) {
    return K / 32 * BZ_GDW * BZ_GT + (K / 32 + K / BZ_GS) * BZ_GT * (int64_t)sizeof(stype) / 4;
}
static BZ_INLINE GT bz_tile_at(uint32_t* base, int64_t K) {
    GT t;
    t.w = base;
    t.s = (stype*)(base + K / 32 * BZ_GDW * BZ_GT);
    t.b = t.s + K / 32 * BZ_GT;
    return t;
}
/* block(m0, r) over M rows of x: blocks of MB rows, then the last 1..MB-1 (r: the block's
   rows as a compile-time constant, r.value) */
template <int MB, class F>
static BZ_INLINE void bz_row_blocks(int64_t M, F&& block) {
    int64_t m0 = 0;
    for (; m0 + MB <= M; m0 += MB) block(m0, std::integral_constant<int, MB>{});
    if (M > m0) bz_dispatch<MB - 1>(M - m0, [&](auto r) { block(m0, r); });
}
#endif

#if BZ_VNNI == 2
/* ------------------------------------------------ int8 GEMM (4 and 8 bits, AVX-512 VNNI)
   The output's 16 lanes are 16 weight rows (a tile): the tile's codes are repacked per
   call, per block of 32, as DW vectors of one dword per row (4 bits: 8 codes, DW = 4;
   8 bits: 4 codes, DW = 8) with 16x16 dword transposes in registers, so one vpdpbusd
   against a broadcast dword of q gives 4 products for 16 outputs (4 bits: the dword's
   low nibbles pair with 4 even elements of x, its high ones with 4 odd ones -- the block
   de-interleaved at quantization; 8 bits: natural order). Per block and x row: 8
   vpdpbusd into an int32 chain, then t = idot * dx + ez and acc += t * s (+ b * sum(x)
   at each group's first block): every output is one chain over the blocks, whatever
   the tile, the row block, the thread or the number of rows M -- so act == 2 (batch
   invariant) runs this path at every M. */
/* 16 scales or biases (one per lane) as float32 */
#define BZ_GM 16 /* rows of x per register block (8 before the block-major x: 16 was slower) */
static BZ_INLINE __m512 bz_ld16(const stype* p) {
#if BZ_HALF
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
#else
    return _mm512_loadu_ps(p);
#endif
}
static BZ_INLINE void bz_st16(stype* p, __m512i v) { /* (float16: exact, they came from it) */
#if BZ_HALF
    _mm256_storeu_si256((__m256i*)p,
                        _mm512_cvtps_ph(_mm512_castsi512_ps(v), _MM_FROUND_TO_NEAREST_INT));
#else
    _mm512_storeu_si512((void*)p, v);
#endif
}
/* r[i][j] -> r[j][i] for a 16x16 matrix of dwords: 32-bit, then 64-bit unpacks within
   128-bit lanes, then a 4x4 transpose of the 128-bit lanes. */
static BZ_INLINE void bz_tr16(__m512i (&r)[16]) {
    __m512i a[16], b[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) { /* b[4g + c]: 128-bit lane L = column 4L + c, rows 4g.. */
        b[4 * g] = _mm512_unpacklo_epi64(a[4 * g], a[4 * g + 2]);
        b[4 * g + 1] = _mm512_unpackhi_epi64(a[4 * g], a[4 * g + 2]);
        b[4 * g + 2] = _mm512_unpacklo_epi64(a[4 * g + 1], a[4 * g + 3]);
        b[4 * g + 3] = _mm512_unpackhi_epi64(a[4 * g + 1], a[4 * g + 3]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        const __m512i u0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44);
        const __m512i u1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
        const __m512i u2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
        const __m512i u3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
        r[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
        r[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
    }
}
/* A zero vector as a zeroing idiom (no execution port) for every use: gcc otherwise keeps
   one zero register and copies it into each vpdpbusd chain's accumulator. */
static BZ_INLINE __m512i bz_zero_idiom() {
    __m512i z;
    __asm__ volatile("vpxord %0, %0, %0" : "=v"(z));
    return z;
}
static BZ_INLINE __mmask16 bz_mask16(int64_t n) {
    return (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
}
/* store(i, v) with v's lane r = row(r)[i] for i < n: 16-dword chunks of each row (row r < nr,
   zero above) transposed; row(r, i0, cnt) loads dwords [i0, i0 + cnt) of row r (zero filled). */
template <class ROW, class STORE>
static BZ_INLINE void bz_pack_cols(int64_t nr, int64_t n, ROW&& row, STORE&& store) {
    for (int64_t i0 = 0; i0 < n; i0 += 16) {
        const int64_t cnt = n - i0 < 16 ? n - i0 : 16;
        __m512i r[16];
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) r[k] = k < nr ? row(k, i0, cnt) : _mm512_setzero_si512();
        bz_tr16(r);
        for (int64_t j = 0; j < cnt; ++j) store(i0 + j, r[j]);
    }
}
static void bz_gemm_pack(const uint8_t* wq, const stype* sc, const stype* bi, int64_t n0,
                         int64_t nr, int64_t K, GT& t) {
    const int64_t G32 = K / 32, G = K / BZ_GS, rowbytes = K * BZ_BITS / 8;
    bz_pack_cols(
        nr, G32 * BZ_GDW,
        [&](int64_t r, int64_t i0, int64_t cnt) {
            return _mm512_maskz_loadu_epi32(bz_mask16(cnt), wq + (n0 + r) * rowbytes + i0 * 4);
        },
        [&](int64_t i, __m512i v) { _mm512_storeu_si512((void*)(t.w + i * BZ_GT), v); });
    bz_pack_cols(
        nr, G32,
        [&](int64_t r, int64_t i0,
            int64_t cnt) { /* block -> its group's scale */
                           const stype* s = sc + (n0 + r) * G;
                           const __m512 v =
                               BZ_GS == 32
                                   ? QV::lds(s + i0, cnt)
                                   : QV::expand(QV::lds(s + i0 * 32 / BZ_GS, G - i0 * 32 / BZ_GS));
                           return _mm512_castps_si512(v);
        },
        [&](int64_t i, __m512i v) { bz_st16(t.s + i * BZ_GT, v); });
    bz_pack_cols(
        nr, G,
        [&](int64_t r, int64_t g0, int64_t cnt) {
            return _mm512_castps_si512(QV::lds(bi + (n0 + r) * G + g0, cnt));
        },
        [&](int64_t i, __m512i v) { bz_st16(t.b + i * BZ_GT, v); });
}
/* One (row of x, block) of the int8 GEMM into acc, 16 weight rows at once: t = idot * dx + ez,
   acc += t * s, + b * sum(x over the group) at a group's first block. Shared by the AVX-512
   block and the AMX one: the same operations, so the same bits whichever computed idot. */
static BZ_INLINE __m512 bz_i8_epilogue(__m512i idot, float dx, float ez, __m512 sv, bool gfirst,
                                       __m512 bv, float sx, __m512 acc) {
    const __m512 tv =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), _mm512_set1_ps(dx), _mm512_set1_ps(ez));
    acc = _mm512_fmadd_ps(tv, sv, acc);
    return gfirst ? _mm512_fmadd_ps(bv, _mm512_set1_ps(sx), acc) : acc;
}
/* pf: the thread's prefetch stream (or null), advanced to the tile's block blk (the tile at
   tb, bpb bytes per block on average) */
template <int MB, bool X16 = false>
static BZ_INLINE void bz_gemm_block(const GT& t, const QXB& qx, int64_t m0, int64_t K, float* out,
                                    int64_t N, __mmask16 mask, BzStream* pf = nullptr,
                                    const char* tb = nullptr, int64_t bpb = 0) {
    const int64_t G32 = K / 32;
    constexpr int64_t BPG = BZ_GS / 32; /* blocks per group */
    __m512 acc[MB];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t blk = 0; blk < G32; ++blk) {
        if (pf) pf->ahead(tb + blk * bpb);
        __m512i w[8]; /* 4 bits: the low nibbles of 4 dwords, then the high ones */
#pragma GCC unroll 8
        for (int j = 0; j < BZ_GDW; ++j)
            w[j] = _mm512_loadu_si512((const void*)(t.w + (blk * BZ_GDW + j) * BZ_GT));
        if (BZ_BITS == 4) {
            const __m512i f = _mm512_set1_epi8(15);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                w[4 + j] = _mm512_and_si512(_mm512_srli_epi16(w[j], 4), f);
                w[j] = _mm512_and_si512(w[j], f);
            }
        }
        const __m512 sv = bz_ld16(t.s + blk * BZ_GT);
        __m512 bv = _mm512_setzero_ps();
        const bool gfirst = blk % BPG == 0;
        if (gfirst) bv = bz_ld16(t.b + blk / BPG * BZ_GT);
        const QXRows xr = bz_qx_rows(qx, blk, m0);
        const int8_t* qb = xr.q;
        const float *dxb = xr.dx, *ezb = xr.ez, *sxb = xr.sx;
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
            const int32_t* qm = (const int32_t*)(qb + m * 32);
            /* two chains of 4 (even, odd elements) and one add where 4+ rows of x run side
               by side (one chain of 8 left the rows' chains latency-bound: ~25 % slower
               at 16 rows); below 4 rows, 4 chains of 2 and 3 adds (integer sums: any
               order gives the same bits) */
            __m512i ia;
            if constexpr (X16) { /* hi and lo planes, two chains each: 256 * hi + lo */
                const int32_t* qm2 = (const int32_t*)(xr.q2 + m * 32);
                __m512i ha = bz_zero_idiom(), hb = bz_zero_idiom(), la = bz_zero_idiom(),
                        lb = bz_zero_idiom();
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    ha = _mm512_dpbusd_epi32(ha, w[j], _mm512_set1_epi32(qm[j]));
                    hb = _mm512_dpbusd_epi32(hb, w[4 + j], _mm512_set1_epi32(qm[4 + j]));
                    la = _mm512_dpbusd_epi32(la, w[j], _mm512_set1_epi32(qm2[j]));
                    lb = _mm512_dpbusd_epi32(lb, w[4 + j], _mm512_set1_epi32(qm2[4 + j]));
                }
                ia = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(ha, hb), 8),
                                      _mm512_add_epi32(la, lb));
            } else if constexpr (MB >= 4) {
                __m512i ib = bz_zero_idiom();
                ia = bz_zero_idiom();
#pragma GCC unroll 4
                for (int j = 0; j < 4;
                     ++j) { /* (4 bits: q's dword j = 4 even elements, 4 + j odd) */
                    ia = _mm512_dpbusd_epi32(ia, w[j], _mm512_set1_epi32(qm[j]));
                    ib = _mm512_dpbusd_epi32(ib, w[4 + j], _mm512_set1_epi32(qm[4 + j]));
                }
                ia = _mm512_add_epi32(ia, ib);
            } else {
                __m512i ic[4];
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    ic[j] =
                        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], _mm512_set1_epi32(qm[j]));
                    ic[j] = _mm512_dpbusd_epi32(ic[j], w[4 + j], _mm512_set1_epi32(qm[4 + j]));
                }
                ia = _mm512_add_epi32(_mm512_add_epi32(ic[0], ic[1]),
                                      _mm512_add_epi32(ic[2], ic[3]));
            }
            acc[m] = bz_i8_epilogue(ia, dxb[m], ezb[m], sv, gfirst, bv, sxb[m], acc[m]);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) _mm512_mask_storeu_ps(out + (m0 + m) * N, mask, acc[m]);
}
/* Float activations against the same tiles (the exact pre-fill path wherever the tiles
   exist): per element k of a block, the 16 lanes' codes become float32 weights fma(code, s,
   b) in a register, then one FMA per row of x (x[m][k] broadcast from memory). Every output
   is one float32 chain over k in natural order (a dword's codes are consecutive elements)
   whatever M, the row block, the tile or the thread -- batch invariant -- and no
   dequantized copy of the weight goes through memory: per k, 4 operations of dequantizing
   serve BZ_GMF rows of x. */
#define BZ_GMF 16 /* rows of x per register block (16 accumulators; 24 spilled) */
template <int MB>
static BZ_INLINE void bz_gemm_block_f32(const GT& t, const float* x, int64_t m0, int64_t K,
                                        float* out, int64_t N, __mmask16 mask) {
    const int64_t G32 = K / 32;
    constexpr int64_t BPG = BZ_GS / 32; /* blocks per group */
    constexpr int PER = 32 / BZ_BITS;   /* codes per dword */
    const __m512i cm = _mm512_set1_epi32((1 << BZ_BITS) - 1);
    __m512 acc[MB];
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) acc[m] = _mm512_setzero_ps();
    const float* xm = x + m0 * K;
    for (int64_t blk = 0; blk < G32; ++blk) {
        const __m512 sv = bz_ld16(t.s + blk * BZ_GT);
        const __m512 bv = bz_ld16(t.b + blk / BPG * BZ_GT);
        const float* xb = xm + blk * 32;
#pragma GCC unroll 1
        for (int j = 0; j < BZ_GDW; ++j) {
            const __m512i wj = _mm512_loadu_si512((const void*)(t.w + (blk * BZ_GDW + j) * BZ_GT));
#pragma GCC unroll 8
            for (int u = 0; u < PER; ++u) {
                const __m512i c = _mm512_and_si512(_mm512_srli_epi32(wj, u * BZ_BITS), cm);
                const __m512 wv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), sv, bv);
                const float* xe = xb + j * PER + u;
#pragma GCC unroll 16
                for (int m = 0; m < MB; ++m)
                    acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(xe[m * K]), wv, acc[m]);
            }
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m) _mm512_mask_storeu_ps(out + (m0 + m) * N, mask, acc[m]);
}
#include "qmatmul_amx.h"
#if BZ_AMX
/* 16 rows of x (from m0) against one tile: bz_gemm_block<16> with the dot products on AMX
   (qmatmul_amx.h) and its epilogue (bz_i8_epilogue): every output has the same bits whichever path
   computed it (batch invariance: rows past the last full 16 run bz_gemm_block). codes: the tile's
   codes in tdpbsud's layout, 512 bytes per block. */
static BZ_INLINE void bz_amx_block(const GT& t, const uint8_t* codes, const QXB& qx, int64_t m0,
                                   int64_t K, float* out, int64_t N, __mmask16 mask) {
    const int64_t G32 = K / 32;
    constexpr int64_t BPG = BZ_GS / 32; /* blocks per group */
    alignas(64) int32_t prod[4][256];
    __m512 acc[16];
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < 2 && b < G32; ++b)
        bz_amx_products(b, qx.q + (b * qx.M + m0) * 32, codes + b * 512);
    for (int64_t blk = 0; blk < G32; ++blk) {
        int32_t* p = prod[blk & 3];
        bz_amx_store(blk, p);
        if (blk + 2 < G32)
            bz_amx_products(blk + 2, qx.q + ((blk + 2) * qx.M + m0) * 32, codes + (blk + 2) * 512);
        const __m512 sv = bz_ld16(t.s + blk * BZ_GT);
        __m512 bv = _mm512_setzero_ps();
        const bool gfirst = blk % BPG == 0;
        if (gfirst) bv = bz_ld16(t.b + blk / BPG * BZ_GT);
        const QXRows xr = bz_qx_rows(qx, blk, m0);
        const float *dxb = xr.dx, *ezb = xr.ez, *sxb = xr.sx;
#pragma GCC unroll 16
        for (int m = 0; m < 16; ++m) {
            const __m512i ia = _mm512_load_si512((const void*)(p + m * 16));
            acc[m] = bz_i8_epilogue(ia, dxb[m], ezb[m], sv, gfirst, bv, sxb[m], acc[m]);
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) _mm512_mask_storeu_ps(out + (m0 + m) * N, mask, acc[m]);
}
#endif
/* Tiles [t0, t1) of BZ_GT weight rows against every row of x; packed: the weight's tiles
   repacked beforehand (bz_gemm_prepack), else each tile is repacked here. amx: blocks of 16
   rows of x run their dot products on AMX (bz_amx_block: the same bits), the rest here. */
static void bz_gemm_part(const uint8_t* wq, const stype* sc, const stype* bi, const QXB& qx,
                         int64_t M, int64_t N, int64_t K, int64_t t0, int64_t t1, float* out,
                         const uint32_t* packed, bool amx) {
    const int64_t rowbytes = K * BZ_BITS / 8, words = bz_tile_words(K);
    uint32_t* own =
        packed ? nullptr : (uint32_t*)aligned_alloc(64, (size_t)((words * 4 + 63) / 64 * 64));
    /* rows AMX computes (int8 activations only) */
    const int64_t M16 = BZ_AMX && amx && !qx.q2 && t0 < t1 ? M / 16 * 16 : 0;
#if BZ_AMX
    uint8_t* codes = nullptr; /* a tile's codes unpacked as AMX reads them (4 bits) */
    if (M16) {
        bz_amx_config();
        if (BZ_BITS == 4) codes = (uint8_t*)aligned_alloc(64, (size_t)(K / 32 * 512 + 64));
    }
#endif
    /* prepacked: the thread's tiles stream into L2 a few blocks ahead, in the loop over the
       blocks of the first row block (a tile or two whole at once, into L1 or L2, stalled on
       the fill buffers) */
    BzStream pf = {(const char*)(packed + t0 * words), (const char*)(packed + t1 * words)};
    const int64_t bpb = words * 4 / (K / 32);
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t n0 = ti * BZ_GT, nr = N - n0 < BZ_GT ? N - n0 : BZ_GT;
        GT t;
        if (packed) {
            t = bz_tile_at((uint32_t*)packed + ti * words, K);
            if (M16 && ti + 2 < t1) bz_prefetch_l2(packed + (ti + 2) * words, words * 4);
        } else {
            if (ti + 1 < t1)
                bz_prefetch(wq + (n0 + BZ_GT) * rowbytes,
                            (N - n0 - BZ_GT < BZ_GT ? N - n0 - BZ_GT : BZ_GT) * rowbytes);
            t = bz_tile_at(own, K);
            bz_gemm_pack(wq, sc, bi, n0, nr, K, t);
        }
        const __mmask16 mask = bz_mask16(nr);
        float* o = out + n0;
#if BZ_AMX
        if (M16) {
            const uint8_t* b = (const uint8_t*)t.w; /* 8 bits: the layout already */
            if (BZ_BITS == 4) {
                bz_amx_unpack4(t.w, K / 32, codes);
                b = codes;
            }
            for (int64_t m0 = 0; m0 < M16; m0 += 16) bz_amx_block(t, b, qx, m0, K, o, N, mask);
        }
#endif
        const char* tb = (const char*)(packed + ti * words);
        bz_row_blocks<BZ_GM>(M - M16, [&](int64_t m0, auto r) {
            BzStream* p = packed && m0 == 0 ? &pf : nullptr;
            if (qx.q2)
                bz_gemm_block<decltype(r)::value, true>(t, qx, M16 + m0, K, o, N, mask, p, tb, bpb);
            else
                bz_gemm_block<decltype(r)::value>(t, qx, M16 + m0, K, o, N, mask, p, tb, bpb);
        });
    }
    free(own);
#if BZ_AMX
    if (M16) {
        free(codes);
        _tile_release();
    }
#endif
}
/* Tiles [t0, t1) of the prepacked weight against every row of float x (bz_gemm_block_f32). */
static void bz_gemm_part_f32(const uint32_t* packed, const float* x, int64_t M, int64_t N,
                             int64_t K, int64_t t0, int64_t t1, float* out) {
    const int64_t words = bz_tile_words(K);
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t n0 = ti * BZ_GT, nr = N - n0 < BZ_GT ? N - n0 : BZ_GT;
        const GT t = bz_tile_at((uint32_t*)packed + ti * words, K);
        if (ti + 1 < t1) bz_prefetch(packed + (ti + 1) * words, words * 4);
        const __mmask16 mask = bz_mask16(nr);
        float* o = out + n0;
        bz_row_blocks<BZ_GMF>(M, [&](int64_t m0, auto r) {
            bz_gemm_block_f32<decltype(r)::value>(t, x, m0, K, o, N, mask);
        });
    }
}
#if BZ_AMX
/* R (16 or 8) rows of x from m0 against one prepacked tile on AMX: per block, the products
   (bz_amx_block_bf16) and acc = fma(products, s, acc) (+ b * sum(x over the group) at a
   group's first block). */
template <int R>
static BZ_INLINE void bz_bf16_rows(const GT& t, const uint16_t* codes, const uint16_t* planes,
                                   const float* sxp, int64_t M, int64_t Mp, int64_t m0, int64_t K,
                                   float* out, int64_t N, __mmask16 mask) {
    const int64_t G32 = K / 32;
    constexpr int64_t BPG = BZ_GS / 32; /* blocks per group */
    alignas(64) float prod[256];
    __m512 acc[R];
#pragma GCC unroll 16
    for (int m = 0; m < R; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t blk = 0; blk < G32; ++blk) {
        bz_amx_block_bf16<R>(planes, G32, Mp, blk, m0, codes + blk * 512, prod);
        const __m512 sv = bz_ld16(t.s + blk * BZ_GT);
#pragma GCC unroll 16
        for (int m = 0; m < R; ++m)
            acc[m] = _mm512_fmadd_ps(_mm512_load_ps(prod + m * 16), sv, acc[m]);
        if (blk % BPG == 0) {
            const __m512 bv = bz_ld16(t.b + blk / BPG * BZ_GT);
            const float* sxb = sxp + blk / BPG * Mp + m0;
#pragma GCC unroll 16
            for (int m = 0; m < R; ++m)
                acc[m] = _mm512_fmadd_ps(bv, _mm512_set1_ps(sxb[m]), acc[m]);
        }
    }
    const int64_t rows = M - m0 < R ? M - m0 : R;
    for (int m = 0; m < rows; ++m) _mm512_mask_storeu_ps(out + (m0 + m) * N, mask, acc[m]);
}
/* Tiles [t0, t1) of the prepacked weight against x split into bfloat16 parts (bz_amx_split_x:
   Mp rows, a multiple of 8, zeros past M) on AMX: per tile, each block's codes converted once
   (bz_amx_codes_bf16), then blocks of 16 rows of x and a last one of 8 (bz_bf16_rows). A
   row's products do not depend on the tile's other rows: every row of x is computed alike
   whatever M (padded rows are zeros), on 1 or 2 threads. */
static void bz_gemm_part_bf16(const uint32_t* packed, const uint16_t* planes, const float* sxp,
                              int64_t M, int64_t Mp, int64_t N, int64_t K, int64_t t0, int64_t t1,
                              float* out) {
    if (t0 >= t1) return;
    const int64_t G32 = K / 32, words = bz_tile_words(K);
    uint16_t* codes = (uint16_t*)aligned_alloc(64, (size_t)(G32 * 1024 + 64));
    bz_amx_config_bf16();
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t n0 = ti * BZ_GT, nr = N - n0 < BZ_GT ? N - n0 : BZ_GT;
        const GT t = bz_tile_at((uint32_t*)packed + ti * words, K);
        if (ti + 1 < t1) bz_prefetch_l2(packed + (ti + 1) * words, words * 4);
        for (int64_t b = 0; b < G32; ++b)
            bz_amx_codes_bf16(t.w + b * BZ_GDW * BZ_GT, BZ_BITS, codes + b * 512);
        const __mmask16 mask = bz_mask16(nr);
        int64_t m0 = 0;
        for (; m0 + 16 <= Mp; m0 += 16)
            bz_bf16_rows<16>(t, codes, planes, sxp, M, Mp, m0, K, out + n0, N, mask);
        if (m0 < Mp) bz_bf16_rows<8>(t, codes, planes, sxp, M, Mp, m0, K, out + n0, N, mask);
    }
    _tile_release();
    free(codes);
}
#endif
#elif BZ_VNNI == 3
/* ------------------------------------------ int8 GEMM (4 and 8 bits, AVX2 without VNNI)
   The AVX-512 GEMM's tiles and arithmetic on 8-lane vectors: a pass takes a whole tile (two
   halves of 8 weight rows, A and B) against a few rows of x. Per dword column j of a block,
   its codes' low and high nibbles (4 vectors) serve every row of the pass: vpmaddubsw
   against broadcast dwords of q (a nibble <= 15 times |q| <= 128, two per int16 lane:
   <= 3,840) summed in int16 over the block (8 of them <= 30,720: no overflow), one vpmaddwd
   against ones to int32 -- the exact integer dot product vpdpbusd gives -- then the same
   epilogue (bz_i8_epilogue's operations): the same bits as the AVX-512 VNNI path, one chain
   per output over the blocks whatever M (batch invariant). 4 bits: per row two int16 sums
   (halves A and B; a dword's low nibbles pair with q's dword j, 4 even elements, its high
   ones with dword 4 + j, the odd ones). 8 bits: codes 16 * hi + lo, four sums per row (lo
   and hi of A and B) against q's dword j in natural order, idot = 16 * idot(hi) +
   idot(lo). 16-bit activations (4 bits): the high and low planes are two rows of the pass,
   idot = 256 * idot(hi) + idot(lo). */
/* the broadcasts and products of a row are written in assembly: gcc's allocation of the
   intrinsics spilled the codes and sums of the pass (~1.35x slower) */
#define BZ_GM 4  /* rows of x per pass (4 bits; 8 bits and 16-bit activations: BZ_GM2) */
#define BZ_GM2 2 /* (4 int16 sums a row: 8 registers for 2 rows, as 4 rows at 4 bits) */
/* (no AMX in an AVX2 build: bz_amx_ready() is false) */
#include "qmatmul_amx.h"
static BZ_INLINE __m256 bz_ld8(const stype* p) {
#if BZ_HALF
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
#else
    return _mm256_loadu_ps(p);
#endif
}
/* The weight's rows [n0, n0 + nr) as one tile (rows past nr: zero codes and scales). */
static void bz_gemm_pack(const uint8_t* wq, const stype* sc, const stype* bi, int64_t n0,
                         int64_t nr, int64_t K, GT& t) {
    const int64_t G32 = K / 32, G = K / BZ_GS, rowbytes = K * BZ_BITS / 8;
    for (int64_t r = 0; r < BZ_GT; ++r) {
        const uint8_t* row = wq + (n0 + r) * rowbytes;
        for (int64_t i = 0; i < G32 * BZ_GDW; ++i) {
            uint32_t v = 0;
            if (r < nr) std::memcpy(&v, row + i * 4, 4);
            t.w[i * BZ_GT + r] = v;
        }
        for (int64_t blk = 0; blk < G32; ++blk)
            t.s[blk * BZ_GT + r] = r < nr ? sc[(n0 + r) * G + blk * 32 / BZ_GS] : stype(0);
        for (int64_t g = 0; g < G; ++g)
            t.b[g * BZ_GT + r] = r < nr ? bi[(n0 + r) * G + g] : stype(0);
    }
}
/* The nibbles of dword column j of a tile's block: lo[h], hi[h] for halves h = A, B. */
struct BzNibbles {
    __m256i loA, hiA, loB, hiB;
};
static BZ_INLINE BzNibbles bz_nibbles(const uint32_t* col) {
    const __m256i f = _mm256_set1_epi8(15);
    const __m256i a = _mm256_loadu_si256((const __m256i*)col);
    const __m256i b = _mm256_loadu_si256((const __m256i*)(col + 8));
    return {_mm256_and_si256(a, f), _mm256_and_si256(_mm256_srli_epi16(a, 4), f),
            _mm256_and_si256(b, f), _mm256_and_si256(_mm256_srli_epi16(b, 4), f)};
}
/* asm text: s = w * x (vpmaddubsw), s += w * x (through t) */
#define BZ_PMUL(x, w, s) "vpmaddubsw %[" x "], %[" w "], %[" s "]\n\t"
#define BZ_PMAC(x, w, s) BZ_PMUL(x, w, "t") "vpaddw %[t], %[" s "], %[" s "]\n\t"
#define BZ_BCAST(off, x) "vpbroadcastd " off "(%[q]), %[" x "]\n\t"
#define BZ_ROW_IN                                                               \
    [q] "r"(q), [loA] "x"(loA), [hiA] "x"(hiA), [loB] "x"(loB), [hiB] "x"(hiB), \
        "m"(*(const int8_t (*)[BZ_BITS == 4 ? 20 : 4]) q)
/* One row of x at q (its block's dword j) against a column's nibbles w, into its int16 sums
   s (FIRST: the block's first column sets them). 4 bits: s[0] += loA * q[j] + hiA * q[4 + j],
   s[1] likewise with B; 8 bits: s[0..3] += loA, hiA, loB, hiB * q[j]. The sums pass through
   locals (asm operands on the array's elements kept it in memory, stored at every row). */
template <bool FIRST>
static BZ_INLINE void bz_row(const int8_t* q, const BzNibbles& w, __m256i (&s)[4]) {
    __m256i s0, s1, s2, s3, x, y, t;
    if constexpr (!FIRST) {
        s0 = s[0];
        s1 = s[1];
        if constexpr (BZ_BITS == 8) {
            s2 = s[2];
            s3 = s[3];
        }
    }
    const __m256i loA = w.loA, hiA = w.hiA, loB = w.loB, hiB = w.hiB;
    /* (the "m" operand: the bytes read from q, 4 and 16 on at 4 bits) */
    if constexpr (BZ_BITS == 4 && FIRST)
        __asm__(BZ_BCAST("", "x") BZ_BCAST("16", "y") BZ_PMUL("x", "loA", "s0")
                    BZ_PMAC("y", "hiA", "s0") BZ_PMUL("x", "loB", "s1") BZ_PMAC("y", "hiB", "s1")
                : [s0] "=&x"(s0), [s1] "=&x"(s1), [x] "=&x"(x), [y] "=&x"(y), [t] "=&x"(t)
                : BZ_ROW_IN);
    else if constexpr (BZ_BITS == 4)
        __asm__(BZ_BCAST("", "x") BZ_BCAST("16", "y") BZ_PMAC("x", "loA", "s0")
                    BZ_PMAC("y", "hiA", "s0") BZ_PMAC("x", "loB", "s1") BZ_PMAC("y", "hiB", "s1")
                : [s0] "+x"(s0), [s1] "+x"(s1), [x] "=&x"(x), [y] "=&x"(y), [t] "=&x"(t)
                : BZ_ROW_IN);
    else if constexpr (FIRST)
        __asm__(BZ_BCAST("", "x") BZ_PMUL("x", "loA", "s0") BZ_PMUL("x", "hiA", "s1")
                    BZ_PMUL("x", "loB", "s2") BZ_PMUL("x", "hiB", "s3")
                : [s0] "=&x"(s0), [s1] "=&x"(s1), [s2] "=&x"(s2), [s3] "=&x"(s3), [x] "=&x"(x)
                : BZ_ROW_IN);
    else
        __asm__(
            BZ_BCAST("", "x") BZ_PMAC("x", "loA", "s0") BZ_PMAC("x", "hiA", "s1")
                BZ_PMAC("x", "loB", "s2") BZ_PMAC("x", "hiB", "s3")
            : [s0] "+x"(s0), [s1] "+x"(s1), [s2] "+x"(s2), [s3] "+x"(s3), [x] "=&x"(x), [t] "=&x"(t)
            : BZ_ROW_IN);
    s[0] = s0;
    s[1] = s1;
    if constexpr (BZ_BITS == 8) {
        s[2] = s2;
        s[3] = s3;
    }
}
#undef BZ_PMUL
#undef BZ_PMAC
#undef BZ_BCAST
#undef BZ_ROW_IN
/* MB rows of x from m0 against one tile, both halves (nr: the tile's weight rows). PF: pf is
   the thread's prefetch stream, advanced to the tile's block blk (the tile at tb, bpb bytes
   per block on average) -- a template parameter: the other passes without its code ran ~7 %
   faster. */
template <int MB, bool X16, bool PF>
static BZ_INLINE void bz_gemm_block(const GT& t, const QXB& qx, int64_t m0, int64_t K, float* out,
                                    int64_t N, int64_t nr, BzStream* pf, const char* tb,
                                    int64_t bpb) {
    constexpr int P = X16 ? 2 * MB : MB; /* rows of the pass (16-bit: hi, lo planes) */
    constexpr int64_t BPG = BZ_GS / 32;  /* blocks per group */
    const int64_t G32 = K / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MB][2];
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < G32; ++blk) {
        if constexpr (PF) pf->ahead(tb + blk * bpb);
        const QXRows xr = bz_qx_rows(qx, blk, m0);
        const int8_t* q[P];
#pragma GCC unroll 8
        for (int i = 0; i < P; ++i)
            q[i] = X16 ? (i % 2 ? xr.q2 : xr.q) + i / 2 * 32 : xr.q + i * 32;
        const uint32_t* wb = t.w + blk * BZ_GDW * BZ_GT;
        __m256i s[P][4]; /* int16 sums: A, B (4 bits); lo and hi of A, B (8 bits) */
#pragma GCC unroll 8
        for (int j = 0; j < BZ_GDW; ++j) { /* dword columns (4 bits: 4, 8 bits: 8) */
            const BzNibbles w = bz_nibbles(wb + j * BZ_GT);
#pragma GCC unroll 8
            for (int i = 0; i < P; ++i) {
                if (j == 0)
                    bz_row<true>(q[i], w, s[i]);
                else
                    bz_row<false>(q[i] + 4 * j, w, s[i]);
            }
        }
        const __m256 sv[2] = {bz_ld8(t.s + blk * BZ_GT), bz_ld8(t.s + blk * BZ_GT + 8)};
        const bool gfirst = blk % BPG == 0;
        __m256 bv[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        if (gfirst) {
            bv[0] = bz_ld8(t.b + blk / BPG * BZ_GT);
            bv[1] = bz_ld8(t.b + blk / BPG * BZ_GT + 8);
        }
        const float *dxb = xr.dx, *ezb = xr.ez, *sxb = xr.sx;
        __m256i d[P][2]; /* row i's int32 dot products, halves A and B */
#pragma GCC unroll 8
        for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h)
                d[i][h] = BZ_BITS == 4
                              ? _mm256_madd_epi16(s[i][h], ones)
                              : _mm256_add_epi32(/* 16 hi + lo */
                                                 _mm256_slli_epi32(
                                                     _mm256_madd_epi16(s[i][2 * h + 1], ones), 4),
                                                 _mm256_madd_epi16(s[i][2 * h], ones));
#pragma GCC unroll 4
        for (int m = 0; m < MB; ++m)
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m256i ia = X16 ? _mm256_add_epi32(_mm256_slli_epi32(d[2 * m][h], 8),
                                                          d[2 * m + 1][h]) /* 256 hi + lo */
                                       : d[m][h];
                const __m256 tv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia), _mm256_set1_ps(dxb[m]),
                                                  _mm256_set1_ps(ezb[m]));
                acc[m][h] = _mm256_fmadd_ps(tv, sv[h], acc[m][h]);
                if (gfirst) acc[m][h] = _mm256_fmadd_ps(bv[h], _mm256_set1_ps(sxb[m]), acc[m][h]);
            }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m)
        for (int h = 0; h < 2 && h * 8 < nr; ++h) {
            const int64_t n = nr - h * 8 < 8 ? nr - h * 8 : 8;
            float* o = out + (m0 + m) * N + h * 8;
            if (n == 8) {
                _mm256_storeu_ps(o, acc[m][h]);
            } else {
                alignas(32) float buf[8];
                _mm256_store_ps(buf, acc[m][h]);
                for (int64_t i = 0; i < n; ++i) o[i] = buf[i];
            }
        }
}
/* Tiles [t0, t1) of the weight (prepacked, or repacked here one by one) against every row. */
static void bz_gemm_part(const uint8_t* wq, const stype* sc, const stype* bi, const QXB& qx,
                         int64_t M, int64_t N, int64_t K, int64_t t0, int64_t t1, float* out,
                         const uint32_t* packed, bool) {
    const int64_t words = bz_tile_words(K);
    uint32_t* own =
        packed ? nullptr : (uint32_t*)aligned_alloc(64, (size_t)((words * 4 + 63) / 64 * 64));
    BzStream pf = {(const char*)(packed + t0 * words), (const char*)(packed + t1 * words)};
    const int64_t bpb = words * 4 / (K / 32);
    for (int64_t ti = t0; ti < t1; ++ti) {
        const int64_t n0 = ti * BZ_GT, nr = N - n0 < BZ_GT ? N - n0 : BZ_GT;
        GT t;
        if (packed) {
            t = bz_tile_at((uint32_t*)packed + ti * words, K);
        } else {
            t = bz_tile_at(own, K);
            bz_gemm_pack(wq, sc, bi, n0, nr, K, t);
        }
        const char* tb = (const char*)(packed + ti * words);
        /* one pass of R rows from m0 (16-bit activations: X); the first one prefetches */
        auto pass = [&](int64_t m0, auto r, auto x16) {
            constexpr int R = decltype(r)::value;
            constexpr bool X = decltype(x16)::value;
            if (packed && m0 == 0)
                bz_gemm_block<R, X, true>(t, qx, m0, K, out + n0, N, nr, &pf, tb, bpb);
            else
                bz_gemm_block<R, X, false>(t, qx, m0, K, out + n0, N, nr, &pf, tb, bpb);
        };
        if (qx.q2)
            bz_row_blocks<BZ_GM2>(
                M, [&](int64_t m0, auto r) { pass(m0, r, std::integral_constant<bool, true>{}); });
        else
            bz_row_blocks<BZ_BITS == 4 ? BZ_GM : BZ_GM2>(
                M, [&](int64_t m0, auto r) { pass(m0, r, std::integral_constant<bool, false>{}); });
    }
    free(own);
}
#endif
#if BZ_VNNI == 2 || BZ_VNNI == 3
/* Tiles [t0, t1) of the weight repacked into dst (tile ti at ti * bz_tile_words(K)): done
   once per weight, so the GEMM at few rows (decode) reads the tiles as they are. */
static void bz_gemm_prepack(const uint8_t* wq, const stype* sc, const stype* bi, int64_t N,
                            int64_t K, int64_t t0, int64_t t1, uint32_t* dst) {
    for (int64_t ti = t0; ti < t1; ++ti) {
        GT t = bz_tile_at(dst + ti * bz_tile_words(K), K);
        const int64_t n0 = ti * BZ_GT;
        bz_gemm_pack(wq, sc, bi, n0, N - n0 < BZ_GT ? N - n0 : BZ_GT, K, t);
    }
}
#define BZ_GEMM 1
#else
#define BZ_GEMM 0
#endif
#endif
#endif  // BZ_QMM_INT8_H
