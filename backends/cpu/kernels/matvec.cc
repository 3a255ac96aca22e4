// Float32 x @ W.T (matrix-vector up to BZ_MAX_ROWS rows of x, an AVX-512 or AVX2 GEMM
// above) for the cpu backend's replay programs (backends/cpu/matvec.py describes and builds it).
// Parameters: BZ_SYMBOL (the entry point's name); BZ_ISA_MAX, optional cap on the
// instruction set (0 scalar, 1 AVX2+FMA, 2 AVX-512).
#ifndef BZ_SYMBOL
#error "matvec: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "dispatch.h"
#define BZ_MAX_ROWS 8
#ifndef BZ_ISA_MAX
#define BZ_ISA_MAX 2
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

static inline void bz_rows4(const float* x, const float* w, float* y, int64_t K, int64_t M,
                            int64_t N) {
    const float *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
    for (int64_t m = 0; m < M; ++m) {
        const float* xm = x + m * K;
        int64_t k = 0;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
#if defined(__AVX512F__) && BZ_ISA_MAX >= 2
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; k + 16 <= K; k += 16) {
            if (m == 0) {
                _mm_prefetch((const char*)(w0 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char*)(w1 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char*)(w2 + k + 4 * K), _MM_HINT_T0);
                _mm_prefetch((const char*)(w3 + k + 4 * K), _MM_HINT_T0);
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
        __m256* acc[4] = {&a0, &a1, &a2, &a3};
        float* out[4] = {&s0, &s1, &s2, &s3};
        for (int r = 0; r < 4; ++r) {
            _mm256_storeu_ps(t, *acc[r]);
            *out[r] = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
        }
#elif defined(__aarch64__) && defined(__ARM_NEON) && BZ_ISA_MAX >= 1
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (; k + 4 <= K; k += 4) {
            const float32x4_t xv = vld1q_f32(xm + k);
            a0 = vfmaq_f32(a0, vld1q_f32(w0 + k), xv);
            a1 = vfmaq_f32(a1, vld1q_f32(w1 + k), xv);
            a2 = vfmaq_f32(a2, vld1q_f32(w2 + k), xv);
            a3 = vfmaq_f32(a3, vld1q_f32(w3 + k), xv);
        }
        s0 = vaddvq_f32(a0), s1 = vaddvq_f32(a1), s2 = vaddvq_f32(a2), s3 = vaddvq_f32(a3);
#endif
        for (; k < K; ++k) {
            const float xk = xm[k];
            s0 += w0[k] * xk, s1 += w1[k] * xk, s2 += w2[k] * xk, s3 += w3[k] * xk;
        }
        float* ym = y + m * N;
        ym[0] = s0, ym[1] = s1, ym[2] = s2, ym[3] = s3;
    }
}

static inline void bz_row1(const float* x, const float* w, float* y, int64_t K, int64_t M,
                           int64_t N) {
    for (int64_t m = 0; m < M; ++m) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += w[k] * x[m * K + k];
        y[m * N] = s;
    }
}

#if (defined(__AVX512F__) && BZ_ISA_MAX >= 2) ||                  \
    (defined(__AVX2__) && defined(__FMA__) && BZ_ISA_MAX >= 1) || \
    (defined(__aarch64__) && defined(__ARM_NEON) && BZ_ISA_MAX >= 1)
#define BZ_GEMM 1
/* GEMM (M > MAX_ROWS), qmatmul's pre-fill scheme: out^T = W x^T with x transposed once per
   call into panels of BZ_WX_MV columns (bz_pack_panel). Chunks of <= 64 rows of W (~128 KiB, L2);
   per BZ_WX_MV rows of x, the chunk's BZ_WX_NW-row tiles (gemm_tile.h: 8 x 32 with AVX-512, 6 x 16
   with AVX2) with the accumulators in registers; per k, 2 (masked) loads of xT, BZ_WX_NW broadcasts
   of W, 2 * BZ_WX_NW FMAs -- one chain per output, summed over k in order. */
#if defined(__x86_64__) && BZ_ISA_MAX < 2
#define BZ_WX_ISA 1 /* capped below AVX-512 (else gemm_tile.h takes the best compiled) */
#endif
#include "gemm_tile.h"

/* Panel p of x (M x K, row stride ldx; tx: given transposed, K x M) packed for the tiles
   (gemm_tile.h) */
static inline void bz_pack_panel(const float* x, int64_t M, int64_t K, int64_t ldx, int tx,
                                 float* xp, int64_t p) {
    constexpr int64_t MV = BZ_WX_MV;
    const int64_t m0 = p * MV, w = M - m0 < MV ? M - m0 : MV;
    if (tx) {
        for (int64_t k = 0; k < K; ++k)
            memcpy(xp + (p * K + k) * MV, x + k * ldx + m0, sizeof(float) * (size_t)w);
    } else {
        bz_pack_rows(x, m0, m0 + w, K, ldx, xp);
    }
}

/* Per-thread scratch for the operands a GEMM packs on every call: a fresh large
   allocation is fresh pages (a page fault per 4 KiB, every call); each thread keeps its
   buffers up to BZ_SCRATCH_KEEP bytes (larger ones are allocated and freed per call). */
#define BZ_SCRATCH_KEEP ((size_t)16 << 20)
struct BzScratch {
    void* p = nullptr;
    size_t cap = 0;
    ~BzScratch() { free(p); }
};
struct BzBuf {
    float* p;
    bool owned; /* the caller frees it */
};
static inline BzBuf bz_scratch(int slot, size_t floats) {
    thread_local BzScratch kept[2];
    const size_t bytes = (sizeof(float) * floats + 63) / 64 * 64;
    if (bytes > BZ_SCRATCH_KEEP) return {(float*)aligned_alloc(64, bytes ? bytes : 64), true};
    BzScratch& s = kept[slot];
    if (s.cap < bytes) {
        free(s.p);
        s.p = aligned_alloc(64, bytes);
        s.cap = bytes;
    }
    return {(float*)s.p, false};
}

/* y = x W^T with y[m * ym + n * yn]: bz_gemm below, given the roles it chose */
static void bz_gemm_roles(const float* x, const float* W, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t nt, int tx, int tw, int64_t ldx, int64_t ldw, int64_t ym,
                          int64_t yn) {
    constexpr int64_t NW = BZ_WX_NW, MV = BZ_WX_MV;
    const BzBuf xbuf = bz_scratch(0, (size_t)bz_panel_floats(M, K));
    float* xp = xbuf.p;
    BzBuf wbuf = {nullptr, false};
    if (!tw && ldw != K) { /* a strided (N x K) W -> its rows packed */
        wbuf = bz_scratch(1, (size_t)(N * K));
        float* Wt = wbuf.p;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) Wt[n * K + k] = W[n * ldw + k];
        W = Wt;
    }
    const int64_t wk = tw ? ldw : 0; /* W (K x N) is read in place, k-major */
    int64_t NC = (32768 / K) / NW * NW;
    NC = NC < NW ? NW : (NC > 64 / NW * NW ? 64 / NW * NW : NC);
    const int64_t blocks = (N + NW - 1) / NW, panels = (M + MV - 1) / MV;
    /* few blocks of W rows for the threads (a narrow result: a classifier's 10 columns):
       the threads share x's panels instead; each output is one tile's either way */
    const int by_panels = nt > 1 && blocks < 2 * nt && panels >= nt;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t n0 = by_panels ? 0 : NW * (blocks * t / T);
        const int64_t n1 = by_panels ? N : NW * (blocks * (t + 1) / T), ne = n1 < N ? n1 : N;
        const int64_t p0 = by_panels ? MV * (panels * t / T) : 0;
        const int64_t p1 = by_panels ? MV * (panels * (t + 1) / T) : M, pe = p1 < M ? p1 : M;
        /* x packed in the region: by panels, each thread packs the panels it reads; else
           the threads share the packing, then wait for the whole of it */
        if (by_panels) {
            for (int64_t p = p0 / MV; p * MV < pe; ++p) bz_pack_panel(x, M, K, ldx, tx, xp, p);
        } else {
            for (int64_t p = panels * t / T; p < panels * (t + 1) / T; ++p)
                bz_pack_panel(x, M, K, ldx, tx, xp, p);
#pragma omp barrier
        }
        for (int64_t h0 = n0; h0 < ne; h0 += NC) {
            const int64_t nh = ne - h0 < NC ? ne - h0 : NC;
            for (int64_t m0 = p0; m0 < pe; m0 += MV) {
                const int64_t mv = M - m0 < MV ? M - m0 : MV;
                for (int64_t j0 = 0; j0 < nh; j0 += NW)
                    bz_wx_tiles(W + (h0 + j0) * (tw ? 1 : K), nh - j0 < NW ? nh - j0 : NW, K,
                                xp + m0 * K, MV, mv, y + m0 * ym + (h0 + j0) * yn, ym, yn, wk);
            }
        }
    }
    if (xbuf.owned) free(xbuf.p);
    if (wbuf.owned) free(wbuf.p);
}

/* y (M x N, row stride N) = x W^T. tx: x is given transposed (K x M: a matmul's X.T
   operand); tw: W is given transposed (K x N: a row-major right operand); ldx, ldw: the
   row strides of x and W as given (a slice of a wider matrix: q of a fused qkv). The
   tiles read one operand's panels of BZ_WX_MV rows and broadcast the other's rows, BZ_WX_NW
   at a time: x's rows in panels, or W's when that pads less (a few rows of x: a
   gradient's g^T x with 10 classes), y^T = W x^T stored transposed. Either way each
   output is the same products summed over k in order (fma(a, b, c) = fma(b, a, c)). */
static void bz_gemm(const float* x, const float* W, float* y, int64_t M, int64_t N, int64_t K,
                    int64_t nt, int tx, int tw, int64_t ldx, int64_t ldw) {
    if (K == 0) { /* empty sums */
        for (int64_t i = 0; i < M * N; ++i) y[i] = 0.f;
        return;
    }
    constexpr int64_t NW = BZ_WX_NW, MV = BZ_WX_MV;
    const int64_t padded = (M + MV - 1) / MV * MV * ((N + NW - 1) / NW * NW);
    const int64_t swapped = (N + MV - 1) / MV * MV * ((M + NW - 1) / NW * NW);
    if (swapped < padded)
        bz_gemm_roles(W, x, y, N, M, K, nt, tw, tx, ldw, ldx, 1, N);
    else
        bz_gemm_roles(x, W, y, M, N, K, nt, tx, tw, ldx, ldw, N, 1);
}

/* A stack of GEMMs (a batched matmul: attention's q k^T and its backward): a[5..] = ldx,
   ldw, x offset, W offset, the number of batch dims, then per dim (size, x stride, W
   stride) in elements (stride 0: broadcast); y holds the products one after another.
   Many small products: the threads share the stack (one thread per product, the same
   bits as any thread count); few: one after another, the threads sharing each. */
static void bz_gemm_batched(const float* x, const float* W, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t nt, int tx, int tw, const int64_t* a) {
    const int64_t ldx = a[0], ldw = a[1], nbd = a[4];
    const int64_t* dims = a + 5;
    int64_t B = 1;
    for (int64_t d = 0; d < nbd; ++d) B *= dims[3 * d];
    const int64_t inner = B >= nt ? 1 : nt, outer = B >= nt ? nt : 1;
#pragma omp parallel for num_threads((int)outer) if (outer > 1) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        int64_t ox = a[2], ow = a[3], rest = b;
        for (int64_t d = nbd - 1; d >= 0; --d) {
            const int64_t i = rest % dims[3 * d];
            rest /= dims[3 * d];
            ox += i * dims[3 * d + 1];
            ow += i * dims[3 * d + 2];
        }
        bz_gemm(x + ox, W + ow, y + b * M * N, M, N, K, inner, tx, tw, ldx, ldw);
    }
}
#else
#define BZ_GEMM 0
#endif

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], M = a[1], N = a[2], K = a[3];
    // a[4] bit 0: W in bufs[0], x in bufs[1] (a program step's M @ v); bits 1, 2: x, W
    // given transposed (the GEMM path only: M > BZ_MAX_ROWS); bit 3: a stack of strided
    // GEMMs described by a[5..] (bz_gemm_batched; any M)
    const int sw = (a[4] & 1) != 0, tx = (a[4] & 2) != 0, tw = (a[4] & 4) != 0;
    const float *x = (const float*)bufs[sw], *W = (const float*)bufs[1 - sw];
    float* y = (float*)bufs[2];
    if (M < 0) { /* query: does this build have the GEMM path? */
        y[0] = (float)BZ_GEMM;
        return;
    }
#if BZ_GEMM
    if (a[4] & 8) {
        bz_gemm_batched(x, W, y, M, N, K, nt, tx, tw, a + 5);
        return;
    }
    if (M > BZ_MAX_ROWS) {
        bz_gemm(x, W, y, M, N, K, nt, tx, tw, tx ? M : K, tw ? N : K);
        return;
    }
#endif
    if (tx || tw || (a[4] & 8)) return; /* (never asked: the caller checks M and the GEMM path) */
    const int64_t blocks = N / 4;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = blocks * t / T, hi = blocks * (t + 1) / T;
        for (int64_t b = lo; b < hi; ++b) bz_rows4(x, W + 4 * b * K, y + 4 * b, K, M, N);
        if (t == T - 1)
            for (int64_t n = 4 * blocks; n < N; ++n) bz_row1(x, W + n * K, y + n, K, M, N);
    }
}
