// Intel AMX (Sapphire Rapids on) for the quantized matmul's int8 GEMM (qmatmul_int8.h,
// bz_amx_block): one tdpbsud multiplies 16 rows of quantized x (int8, one block of 32 per
// row) by the same block of 16 weight rows' codes (u8) into a 16 x 16 int32 tile -- the 128
// vpdpbusd of bz_gemm_block's 16-row block. Here: the OS permission, the tile
// configuration, the products of one block into one of 4 tiles, and the 4-bit codes
// unpacked as tdpbsud reads them. BZ_AMX is 0 where the compiler targets no AMX-INT8.
#ifndef BZ_QMM_AMX_H
#define BZ_QMM_AMX_H
#include "qmatmul_common.h"
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__)
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
#else
#define BZ_AMX 0
static inline bool bz_amx_ready() { return false; }
#endif
#endif  // BZ_QMM_AMX_H
