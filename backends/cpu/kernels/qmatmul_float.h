// The exact float32 path of the quantized matmul kernel: codes unpacked in registers
// against up to 4 rows of x (decode), or weight rows dequantized into a float tile and
// multiplied by every row of x (pre-fill); the AVX-512, AVX2 and portable scalar
// variants. Parameters: see qmatmul_common.h.
#ifndef BZ_QMM_FLOAT_H
#define BZ_QMM_FLOAT_H
#include "qmatmul_common.h"

#if BZ_ISA == 2
struct VT {
    typedef __m512 F;
    typedef __m512i I;
    enum { L = 16, BB = 16, NR = 4 }; /* lanes; packed bytes per block; tile micro-kernel cols */
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
#elif BZ_ISA == 3
struct VT { /* NEON: a block is 4 packed bytes (8 codes at 4 bits, 4 at 8) */
    typedef float32x4_t F;
    typedef int32x4_t I;
    enum { L = 4, BB = 4, NR = 4 };
    static BZ_INLINE F zero() { return vdupq_n_f32(0.0f); }
    static BZ_INLINE F set1(float v) { return vdupq_n_f32(v); }
    static BZ_INLINE F load(const float* p) { return vld1q_f32(p); }
    static BZ_INLINE void store(float* p, F v) { vst1q_f32(p, v); }
    static BZ_INLINE F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
    static BZ_INLINE F add(F a, F b) { return vaddq_f32(a, b); }
    static BZ_INLINE float hsum(F v) { return vaddvq_f32(v); }
    static BZ_INLINE I bytes(const uint8_t* p) {
        uint32_t w;
        memcpy(&w, p, 4);
        const uint16x8_t h = vmovl_u8(vcreate_u8((uint64_t)w));
        return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
    }
    static BZ_INLINE I shr4(I v) { return vshrq_n_s32(v, 4); }
    static BZ_INLINE F cvt(I v) { return vcvtq_f32_s32(v); }
    static BZ_INLINE F cvt4(I v) { return cvt(vandq_s32(v, vdupq_n_s32(15))); }
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
    BZ_INLINE F deq8(const uint8_t*) const { return T; } /* never called at 4 bits */
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

/* out[m * N] = dot(x row m, w row) for MB consecutive rows of x (stride K). INV (batch
   invariant): the same accumulators whatever MB, so a row's result does not depend on
   how many rows run with it. */
template <int MB, bool INV>
static void bz_rows(const uint8_t* wrow, const float* s, const float* b, const float* xp, int64_t K,
                    int64_t G, float* out, int64_t N) {
    typedef VT::F F;
    constexpr int A = MB <= 2 && !INV ? 4 : 2;                       /* accumulators per row */
    constexpr int GU = BZ_BPG * BZ_P >= A ? 1 : A / (BZ_BPG * BZ_P); /* groups per iteration */
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
            bz_dispatch<4>(M - m0,
                           [&](auto r) { bz_micro<decltype(r)::value>(xm, wt, K, o, N, nv); });
        }
    }
}

#if BZ_ISA >= 1
/* Pre-fill: out^T = W x^T. A tile of BZ_NW dequantized weight rows (row major, as
   dequantized) against BZ_WX_MV rows of x transposed (once per call into gemm_tile.h's
   panels: M*K elements against M*N*K multiply-adds) with the block of out^T in registers
   (gemm_tile.h: 8 x 32 with AVX-512, 6 x 16 with AVX2): per k, 2 loads of xT, BZ_NW
   broadcasts of weights, 2 * BZ_NW FMAs, no horizontal sums and no transposition of
   weights; the block goes to out through a stack buffer. */
#define BZ_WX_ISA BZ_ISA
#include "gemm_tile.h"
#define BZ_NW BZ_WX_NW
#define BZ_NC (64 / BZ_NW * BZ_NW) /* at most this many weight rows dequantized per chunk, */
#define BZ_CHUNK_FLOATS 32768      /* about this many floats (128 KiB: L2 keeps x^T too) */
#define BZ_WXT 1
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
/* Portable scalar path: elements in natural order (one chain per row whatever MB). */
template <int MB, bool INV>
static void bz_rows(const uint8_t* wrow, const float* s, const float* b, const float* xp, int64_t K,
                    int64_t G, float* out, int64_t N) {
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
#if BZ_ISA == 3
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
#endif
    for (; i < n; ++i) dst[i] = bz_h2f(src[i]);
}
#endif

/* Scales and biases of weight row n as float32 (converted into sb at float16). */
static BZ_INLINE void bz_row_sb(const stype* sc, const stype* bi, int64_t n, int64_t G, float* sb,
                                const float** s, const float** b) {
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
#endif  // BZ_QMM_FLOAT_H
