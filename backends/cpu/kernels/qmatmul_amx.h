// Intel AMX (Sapphire Rapids on) for the quantized matmul's GEMMs (qmatmul_int8.h):
// * int8 (bz_amx_block): one tdpbsud multiplies 16 rows of quantized x (int8, one block of
//   32 per row) by the same block of 16 weight rows' codes (u8) into a 16 x 16 int32 tile --
//   the 128 vpdpbusd of bz_gemm_block's 16-row block;
// * exact float x (bz_gemm_part_bf16): x split exactly into three bfloat16 parts
//   (x = hi + mid + lo: truncations, so no rounding), the codes (integers below 256: exact in
//   bfloat16) converted per tile, three tdpbf16ps per block accumulate sum(code * x) in
//   float32 -- no approximation of x or the weights, as the AVX-512 float path.
// Here: the OS permission, the tile configurations, the products of one block, and the codes
// unpacked as tdpbsud / tdpbf16ps read them. BZ_AMX is 0 where the compiler targets no
// AMX-INT8 and AMX-BF16.
#ifndef BZ_QMM_AMX_H
#define BZ_QMM_AMX_H
#include "qmatmul_common.h"
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__) && \
    defined(__AVX512BW__) && defined(__linux__)
#define BZ_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

/* Linux hands out the 8 KiB tile state only to processes that ask (arch_prctl
   ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, since 5.16); once per process, from any
   thread. False: the kernel refused (an older kernel, or a VM without AMX state). */
static bool bz_amx_ready() {
    static const bool ok = [] {
        const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
        return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }();
    return ok;
}

/* Tile palette 1: tmm0-3 the int32 products (16 rows of x x 16 weight rows), tmm4/5 rows
   of x (16 x 32 bytes: one block of q per row), tmm6/7 the codes (8 rows of 64 bytes: row j
   holds dword j of the block for each of the 16 weight rows, the VNNI layout). */
struct alignas(64) BzTileConfig {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static BZ_INLINE void bz_amx_config() {
    BzTileConfig c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; ++i) c.colsb[i] = 64, c.rows[i] = 16; /* int32 products */
    for (int i = 4; i < 6; ++i) c.colsb[i] = 32, c.rows[i] = 16; /* rows of x */
    for (int i = 6; i < 8; ++i) c.colsb[i] = 64, c.rows[i] = 8;  /* codes */
    _tile_loadconfig(&c);
}

/* Products of block b into tmm(b % 4): q, 16 rows of 32 int8 at a stride of 32 bytes; codes,
   8 rows of 64 bytes. Issued ahead of their store (tile registers are not renamed: the
   slack hides the loads' and tdpbsud's latency). */
static BZ_INLINE void bz_amx_products(int64_t b, const int8_t* q, const uint8_t* codes) {
#define BZ_AMX_DP(C, A, B)         \
    do {                           \
        _tile_loadd(A, q, 32);     \
        _tile_loadd(B, codes, 64); \
        _tile_zero(C);             \
        _tile_dpbsud(C, A, B);     \
    } while (0)
    switch (b & 3) {
        case 0: BZ_AMX_DP(0, 4, 6); break;
        case 1: BZ_AMX_DP(1, 5, 7); break;
        case 2: BZ_AMX_DP(2, 4, 6); break;
        default: BZ_AMX_DP(3, 5, 7); break;
    }
#undef BZ_AMX_DP
}
/* The products of block b (bz_amx_products) as 16 rows of 16 int32 at p. */
static BZ_INLINE void bz_amx_store(int64_t b, int32_t* p) {
    switch (b & 3) {
        case 0: _tile_stored(0, p, 64); break;
        case 1: _tile_stored(1, p, 64); break;
        case 2: _tile_stored(2, p, 64); break;
        default: _tile_stored(3, p, 64); break;
    }
}
/* 4-bit codes, per block 4 vectors of 16 dwords (8 nibbles each, one dword per weight row),
   as tdpbsud's operand: per block 8 rows of 64 bytes (512 bytes), the low nibbles (the
   block's even elements, as x's q is de-interleaved) then the high ones. */
static BZ_INLINE void bz_amx_unpack4(const uint32_t* w, int64_t blocks, uint8_t* buf) {
    const __m512i f = _mm512_set1_epi8(15);
    for (int64_t blk = 0; blk < blocks; ++blk) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m512i v = _mm512_loadu_si512((const void*)(w + (blk * 4 + j) * 16));
            _mm512_store_si512((void*)(buf + blk * 512 + j * 64), _mm512_and_si512(v, f));
            _mm512_store_si512((void*)(buf + blk * 512 + (4 + j) * 64),
                               _mm512_and_si512(_mm512_srli_epi16(v, 4), f));
        }
    }
}

/* Palette 1 for the float path: tmm0 float32 products of 16 rows of x, tmm1 of 8 rows;
   tmm2-4 x's three bfloat16 parts (16 rows x 32 elements), tmm6 one part of 8 rows (the
   three loaded in turn); tmm5 the codes as bfloat16 pairs (16 rows of 64 bytes). */
static BZ_INLINE void bz_amx_config_bf16() {
    BzTileConfig c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; ++i) c.colsb[i] = 64, c.rows[i] = 16;
    c.rows[1] = c.rows[6] = 8;
    _tile_loadconfig(&c);
}
/* Rows [m0, m1) of x (M x K float32; rows at or past M are zeros) as three bfloat16 parts
   hi, mid, lo with hi + mid + lo == x exactly (each the top 16 bits of what the previous
   parts leave), block-major: part p, block b, row m at planes + ((p * G32 + b) * Mp + m) * 32;
   sx[g * Mp + m]: the sum of row m over weight group g (float32, in element order). */
static void bz_amx_split_x(const float* x, int64_t M, int64_t K, int64_t Mp, int64_t m0, int64_t m1,
                           int64_t gs, uint16_t* planes, float* sx) {
    const int64_t G32 = K / 32;
    const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int64_t m = m0; m < m1; ++m) {
        for (int64_t b = 0; b < G32; ++b) {
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m512 v =
                    m < M ? _mm512_loadu_ps(x + m * K + b * 32 + 16 * h) : _mm512_setzero_ps();
                const __m512 hi =
                    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), top));
                const __m512 r1 = _mm512_sub_ps(v, hi);
                const __m512 mid =
                    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r1), top));
                const __m512 lo = _mm512_sub_ps(r1, mid);
                const __m512 parts[3] = {hi, mid, lo};
#pragma GCC unroll 3
                for (int p = 0; p < 3; ++p)
                    _mm256_storeu_si256((__m256i*)(planes + ((p * G32 + b) * Mp + m) * 32 + 16 * h),
                                        _mm512_cvtepi32_epi16(
                                            _mm512_srli_epi32(_mm512_castps_si512(parts[p]), 16)));
            }
        }
        for (int64_t g = 0; g < K / gs; ++g) {
            float t = 0.0f;
            if (m < M)
                for (int64_t k = 0; k < gs; ++k) t += x[m * K + g * gs + k];
            sx[g * Mp + m] = t;
        }
    }
}
/* One block's products for R (16 or 8) rows of x from m0, stored to p (R rows of 16 floats):
   the sum over x's three parts of part . codes, in float32. */
template <int R>
static BZ_INLINE void bz_amx_block_bf16(const uint16_t* planes, int64_t G32, int64_t Mp, int64_t b,
                                        int64_t m0, const uint16_t* codes, float* p) {
    const int64_t part = G32 * Mp * 32; /* elements between parts */
    const uint16_t* a = planes + (b * Mp + m0) * 32;
    _tile_loadd(5, codes, 64);
    if (R == 16) {
        _tile_zero(0);
        _tile_loadd(2, a, 64);
        _tile_loadd(3, a + part, 64);
        _tile_loadd(4, a + 2 * part, 64);
        _tile_dpbf16ps(0, 2, 5);
        _tile_dpbf16ps(0, 3, 5);
        _tile_dpbf16ps(0, 4, 5);
        _tile_stored(0, p, 64);
    } else {
        _tile_zero(1);
        _tile_loadd(6, a, 64);
        _tile_dpbf16ps(1, 6, 5);
        _tile_loadd(6, a + part, 64);
        _tile_dpbf16ps(1, 6, 5);
        _tile_loadd(6, a + 2 * part, 64);
        _tile_dpbf16ps(1, 6, 5);
        _tile_stored(1, p, 64);
    }
}
/* One block of a tile's codes (dwords w[j * 16 + lane]: 4 bits, 4 dwords of 8 codes; 8 bits,
   8 dwords of 4) as tdpbf16ps's operand: 16 rows of 64 bytes, row r holding elements 2r and
   2r + 1 of the 16 weight rows as bfloat16 pairs. */
static BZ_INLINE void bz_amx_codes_bf16(const uint32_t* w, int bits, uint16_t* out) {
    const __m512i sel = _mm512_set1_epi32((int)0xFFFF0000u);
    if (bits == 4) {
        /* bfloat16 of 0..15 in 16-bit lanes 0..15 (and again 16..31) */
        alignas(64) uint16_t tab[32];
        for (int v = 0; v < 32; ++v) {
            const float f = (float)(v & 15);
            uint32_t u;
            memcpy(&u, &f, 4);
            tab[v] = (uint16_t)(u >> 16);
        }
        const __m512i table = _mm512_load_si512((const void*)tab),
                      nib = _mm512_set1_epi32(0x000F000F);
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
            const __m512i d = _mm512_loadu_si512((const void*)(w + (r / 4) * 16));
            const __m512i t = _mm512_srli_epi32(d, 8 * (r % 4)); /* code 2r in bits 0-3 */
            /* 16-bit lanes (low nibble, high nibble) of t's low byte */
            const __m512i idx = _mm512_and_si512(
                _mm512_ternarylogic_epi32(sel, _mm512_slli_epi32(t, 12), t, 0xCA), nib);
            _mm512_store_si512((void*)(out + r * 32), _mm512_permutexvar_epi16(idx, table));
        }
    } else {
        const __m512i byte = _mm512_set1_epi32(0xFF);
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
            const __m512i d = _mm512_loadu_si512((const void*)(w + (r / 2) * 16));
            const __m512i t = _mm512_srli_epi32(d, 16 * (r % 2));
            const __m512i lo = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_and_si512(t, byte)));
            const __m512i hi = _mm512_castps_si512(
                _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(t, 8), byte)));
            _mm512_store_si512((void*)(out + r * 32),
                               _mm512_ternarylogic_epi32(sel, hi, _mm512_srli_epi32(lo, 16), 0xCA));
        }
    }
}
#else
#define BZ_AMX 0
static inline bool bz_amx_ready() { return false; }
#endif
#endif  // BZ_QMM_AMX_H
