// The AVX-512 GEMM register tile shared by the float32 pre-fill GEMM (matvec.cc) and the
// 4-bit one (qmatmul.cc, on dequantized rows): y[m * N + j] = w row j . x row m for the
// nw <= 8 rows of w (row stride K) and mv <= 32 rows of x, given transposed (xT[k * ld +
// m]). An 8 x 32 block of out^T in 16 registers: per k, 2 (masked) loads of xT, 8
// broadcasts of w, 16 FMAs, no horizontal sums; one chain per output, summed over k in
// order; the block goes to y through a stack buffer (scattered stores with stride N
// touch a page per lane and were slower). Needs AVX-512F.
#ifndef BZ_GEMM_TILE_H
#define BZ_GEMM_TILE_H
#ifndef __AVX512F__
#error "gemm_tile.h needs AVX-512F"
#endif
#include <cstdint>
#include <immintrin.h>
#include "dispatch.h"
template <int NW>
static void bz_wx_tile(const float* w, int64_t K, const float* xT, int64_t ld, int64_t mv, float* y,
                       int64_t N) {
    __m512 acc[NW][2]; /* unrolled: registers, not memory */
#pragma GCC unroll 8
    for (int r = 0; r < NW; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const __mmask16 k0 = mv >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << mv) - 1u);
    const __mmask16 k1 = mv >= 32   ? (__mmask16)0xFFFF
                         : mv <= 16 ? (__mmask16)0
                                    : (__mmask16)((1u << (mv - 16)) - 1u);
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

static inline void bz_wx_tiles(const float* w, int64_t nw, int64_t K, const float* xT, int64_t ld,
                               int64_t mv, float* y, int64_t N) {
    bz_dispatch<8>(nw, [&](auto r) { bz_wx_tile<decltype(r)::value>(w, K, xT, ld, mv, y, N); });
}
#endif  // BZ_GEMM_TILE_H
