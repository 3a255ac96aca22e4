// The dequantize-fused quantized matmul kernel of the cpu backend: y = x @ dequantize(wq,
// scales, biases).T (backends/cpu/qmatmul.py describes the design and builds it).
// Parameters: see qmatmul_common.h; BZ_SYMBOL is the entry point's name.
#ifndef BZ_SYMBOL
#error "qmatmul: define BZ_SYMBOL (the kernel's name)"
#endif
#include "qmatmul_common.h"
#include "qmatmul_float.h"
#include "qmatmul_int8.h"
#include "work_split.h"

#define BZ_I8_MMAX 8
/* weight rows per item of a matvec path's work split (a multiple of BZ_I8_RB: whole passes) */
#define BZ_ITEM_ROWS 32

/* bufs: x (M, K) float32, wq (N, K*bits/8 bytes), scales (N, G), biases (N, G),
   out (M, N) float32, scratch (M, K) float32 (the de-interleaved x at 4 bits).
   args: threads, M, N, K, act (0: float; 1: int8 activations where compiled -- the matvec
   path up to BZ_I8_MMAX rows, then at 4 bits the GEMM (AVX2 at 8 bits: the GEMM); 2: batch
   invariant -- int8 where compiled, through one path at every M (the GEMM with AVX-512 VNNI, else
   the matvec path), else the float path untiled with the same accumulators at every M: a row's
   result never depends on the other rows or their number; 3: 16-bit activations -- x per
   block of 32 as 16-bit integers in two int8 planes (bz_quant_row's q2) through the GEMM at
   every M, where compiled (AVX-512 VNNI; AVX2 at 4 bits), else the float path: one chain
   per output whatever M, as act 2).
   args[5]: 1 when bufs[6] holds the weight's GEMM tiles repacked beforehand (M == -2 writes
   them): acts 2 and 3 then read them instead of repacking, and act 0 at BZ_TILE_M+ rows runs float
   x against them (bz_gemm_part_f32). args[6]: 1 lets the GEMMs use AMX where the CPU and the OS
   allow it (qmatmul_amx.h): the int8 GEMM's blocks of 16 rows of x (the same bits), and float x
   against the prepacked tiles (bz_gemm_part_bf16 instead of bz_gemm_part_f32: other bits, a smaller
   error). M == -1: write the compiled ISA level, VNNI level (0 none, 1 AVX-VNNI, 2 AVX-512 VNNI,
   3 AVX2, 4-5 NEON: BZ_VNNI)
   and whether the GEMM can use AMX (compiled, and the OS granted the tile state) to
   ((int64_t*)bufs[0])[0], [1] and [2]. M == -3: write the size in bytes of N x K
   repacked tiles to ((int64_t*)bufs[0])[0] (0: this build has no GEMM). M == -2: repack
   wq, scales, biases (N rows of K) into bufs[6]. M == -4: evict the weight (and with args[5]
   its args[7] bytes of tiles in bufs[6]) from the caches (x86; elsewhere nothing).
   M < BZ_TILE_M: fused (codes unpacked in registers against up to 4 rows of x);
   else a tile of weight rows is dequantized into an L1/L2-sized float buffer and
   multiplied by every row of x with a register-blocked micro-kernel. */
#define BZ_TILE_M 16
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* args) {
    const int64_t nt = args[0], M = args[1], N = args[2], K = args[3], act = args[4];
    if (M == -1) {
        ((int64_t*)bufs[0])[0] = BZ_ISA;
        ((int64_t*)bufs[0])[1] = BZ_VNNI;
#if BZ_VNNI && BZ_GEMM
        ((int64_t*)bufs[0])[2] = BZ_AMX && bz_amx_ready();
#else
        ((int64_t*)bufs[0])[2] = 0;
#endif
        return;
    }
    if (M == -3) {
#if BZ_VNNI && BZ_GEMM
        ((int64_t*)bufs[0])[0] = (N + BZ_GT - 1) / BZ_GT * bz_tile_words(K) * 4;
#else
        ((int64_t*)bufs[0])[0] = 0;
#endif
        return;
    }
    if (M == -4) { /* bufs[1..3] (and bufs[6] with args[5]) out of every cache level: the
                      autotuner times a decode step's matvec as the model runs it, its weight
                      streamed from memory (hot, one thread won where two win in the model) */
        const int64_t G = K / BZ_GS;
        const int64_t bytes[4] = {N * K * BZ_BITS / 8, N * G * (int64_t)sizeof(stype),
                                  N * G * (int64_t)sizeof(stype), args[5] == 1 ? args[7] : 0};
        const char* bases[4] = {(const char*)bufs[1], (const char*)bufs[2], (const char*)bufs[3],
                                args[5] == 1 ? (const char*)bufs[6] : nullptr};
        for (int i = 0; i < 4; ++i) bz_evict(bases[i], bytes[i]);
        return;
    }
    if (M == -2) {
#if BZ_VNNI && BZ_GEMM
        const int64_t NT = (N + BZ_GT - 1) / BZ_GT;
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            bz_gemm_prepack((const uint8_t*)bufs[1], (const stype*)bufs[2], (const stype*)bufs[3],
                            N, K, NT * t / T, NT * (t + 1) / T, (uint32_t*)bufs[6]);
        }
#endif
        return;
    }
    const float* x = (const float*)bufs[0];
    const uint8_t* wq = (const uint8_t*)bufs[1];
    const stype* sc = (const stype*)bufs[2];
    const stype* bi = (const stype*)bufs[3];
    float* out = (float*)bufs[4];
    float* scratch = (float*)bufs[5];
    const int64_t G = K / BZ_GS, rowbytes = K * BZ_BITS / 8;
    const float* xp = BZ_PERMUTE ? scratch : x;
    const bool inv = act == 2;
    const bool tiled = BZ_TILED && M >= BZ_TILE_M && !inv;
#if BZ_VNNI
#if BZ_GEMM
    const bool x16 = act == 3 && (BZ_VNNI == 2 || BZ_BITS == 4);
    /* int8 at 4 bits: the matvec path up to BZ_I8_MMAX rows (act 1); at 8 bits on AVX2 (no
       matvec path there) the GEMM */
    if (act == 2 || x16 || (act == 1 && ((M > BZ_I8_MMAX && BZ_BITS == 4) || !BZ_I8_MATVEC))) {
        const int64_t G32 = K / 32;
        /* x quantized, block-major (QXB); 16-bit: a second plane */
        int8_t* qt = (int8_t*)malloc((size_t)(M * K * (x16 ? 2 : 1)));
        int8_t* qt2 = x16 ? qt + M * K : nullptr;
        float* dt = (float*)malloc(sizeof(float) * (size_t)(M * (2 * G32 + G) + 1));
        const QXB qx = {qt, dt, dt + M * G32, dt + 2 * M * G32, M, qt2};
        const int64_t NT = (N + BZ_GT - 1) / BZ_GT;
        const uint32_t* packed =
            (act == 2 || x16) && args[5] == 1 ? (const uint32_t*)bufs[6] : nullptr;
        const bool amx = args[6] != 0 && M >= 16 && !x16 && bz_amx_ready();
        auto quantize = [&](int64_t ga,
                            int64_t gb) { /* weight groups [ga, gb) of every row */
                                          for (int64_t m = 0; m < M; ++m)
                                              bz_quant_row(x + m * K, K, K, qt + m * 32, dt + m,
                                                           dt + M * G32 + m, dt + 2 * M * G32 + m,
                                                           M, ga, gb, x16 ? qt2 + m * 32 : nullptr);
        };
        /* a few rows (decode) are quantized before the region: no barrier inside it */
        const bool before = M <= BZ_I8_MMAX;
        if (before) quantize(0, G);
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            if (!before) {
                quantize(G * t / T, G * (t + 1) / T); /* each thread its groups */
#pragma omp barrier
            }
            bz_gemm_part(wq, sc, bi, qx, M, N, K, NT * t / T, NT * (t + 1) / T, out, packed, amx);
        }
        free(qt);
        free(dt);
        return;
    }
#if BZ_VNNI == 2
    if (act == 0 && args[5] == 1 && M >= BZ_TILE_M) { /* float x against the prepacked tiles */
        const int64_t NT = (N + BZ_GT - 1) / BZ_GT;
#if BZ_AMX
        if (args[6] != 0 && bz_amx_ready()) { /* on AMX: x split into bfloat16 parts */
            const int64_t Mp = (M + 7) / 8 * 8, MB = (Mp + 15) / 16; /* blocks of 16, 8 */
            uint16_t* planes = (uint16_t*)aligned_alloc(64, (size_t)(3 * Mp * K * 2 + 64));
            float* sxp = (float*)aligned_alloc(64, sizeof(float) * (size_t)((K / BZ_GS) * Mp + 16));
#pragma omp parallel num_threads((int)nt) if (nt > 1)
            {
                const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
                /* rows split in blocks of 16: a thread's sums fill whole cache lines */
                const int64_t r1 = MB * (t + 1) / T * 16;
                bz_amx_split_x(x, M, K, Mp, MB * t / T * 16, r1 < Mp ? r1 : Mp, BZ_GS, planes, sxp);
#pragma omp barrier
                bz_gemm_part_bf16((const uint32_t*)bufs[6], planes, sxp, M, Mp, N, K, NT * t / T,
                                  NT * (t + 1) / T, out);
            }
            free(planes);
            free(sxp);
            return;
        }
#endif
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            bz_gemm_part_f32((const uint32_t*)bufs[6], x, M, N, K, NT * t / T, NT * (t + 1) / T,
                             out);
        }
        return;
    }
#endif
#endif
#if BZ_I8_MATVEC
    if (act == 1 || act == 2) {
        const int64_t Kp = (K + 63) / 64 * 64, Gp = bz_pad16(K / 32);
        int8_t* qb = (int8_t*)malloc((size_t)(M * Kp));
        float* dx = (float*)malloc(sizeof(float) * (size_t)(3 * M * Gp));
        float* ez = dx + M * Gp;
        float* sx = ez + M * Gp;
        for (int64_t m = 0; m < M; ++m)
            bz_quant_row(x + m * K, K, Kp, qb + m * Kp, dx + m * Gp, ez + m * Gp, sx + m * Gp);
        const QX qx = {qb, dx, ez, sx, Kp, Gp, K / 32, K / BZ_GS};
        WorkSplit work(N, nt, BZ_ITEM_ROWS);
#pragma omp parallel num_threads((int)nt) if (nt > 1)
        {
            const int64_t t = omp_get_thread_num();
            float* scratch = (float*)malloc(sizeof(float) * (size_t)bz_i8_scratch_floats(qx));
            for (int64_t a, e; work.next(t, &a, &e);)
                bz_i8_part(wq, sc, bi, qx, M, N, K, a, e, out, scratch);
            free(scratch);
        }
        free(qb);
        free(dx);
        return;
    }
#endif
#else
    (void)act;
#endif
    float* bz_xT = nullptr; /* the pre-fill path's shared panels of x */
    (void)bz_xT;
    WorkSplit rows(N, nt, BZ_ITEM_ROWS); /* (the untiled path's items) */
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        if (BZ_PERMUTE) {
            for (int64_t m = M * t / T; m < M * (t + 1) / T; ++m)
                bz_permute(x + m * K, scratch + m * K, K);
#pragma omp barrier
        }
        const int64_t n0 = N * t / T, n1 = N * (t + 1) / T;
        float* sb = BZ_HALF ? (float*)malloc(sizeof(float) * (size_t)(2 * G + 1)) : nullptr;
        const float *s, *b;
#if BZ_WXT
        if (tiled) {
            /* x's panels are shared: the rows of x split between threads, then each
               thread's weight rows */
#pragma omp single
            bz_xT = (float*)malloc(sizeof(float) * (size_t)bz_panel_floats(M, K));
            bz_pack_rows(xp, M * t / T, M * (t + 1) / T, K, K, bz_xT);
#pragma omp barrier
            /* chunks of NC weight rows dequantized at once; per block of BZ_WX_MV rows of
               x, the chunk's BZ_NW-row tiles in order: each row of out gets BZ_NC consecutive
               floats (rows of out a multiple of 4 KiB apart alias in L1 otherwise) */
            int64_t NC = (BZ_CHUNK_FLOATS / K) / BZ_NW * BZ_NW;
            NC = NC < BZ_NW ? BZ_NW : (NC > BZ_NC ? BZ_NC : NC);
            /* zeroed: the tail kernel reads whole VT::NR-row groups past a last chunk */
            float* tile = (float*)calloc((size_t)(NC * K), sizeof(float));
            for (int64_t h0 = n0; h0 < n1; h0 += NC) {
                const int64_t nh = n1 - h0 < NC ? n1 - h0 : NC;
                bz_dequant_rows(wq, sc, bi, sb, h0, nh, G, K, tile);
                for (int64_t m0 = 0; m0 < M; m0 += BZ_WX_MV) {
                    const int64_t mv = M - m0 < BZ_WX_MV ? M - m0 : BZ_WX_MV;
                    if (mv <= BZ_WX_MV / 2) { /* a short last block: dot products */
                        bz_tile_rows(xp + m0 * K, mv, K, tile, nh, out + m0 * N + h0, N);
                        continue;
                    }
                    const float* panel = bz_xT + m0 * K;
                    for (int64_t j0 = 0; j0 < nh; j0 += BZ_NW)
                        bz_wx_tiles(tile + j0 * K, nh - j0 < BZ_NW ? nh - j0 : BZ_NW, K, panel,
                                    BZ_WX_MV, mv, out + m0 * N + h0 + j0, N);
                }
            }
            free(tile);
#pragma omp barrier
#pragma omp single
            free(bz_xT);
        } else
#elif BZ_TILED
        if (tiled) {
            constexpr int NR = VT::NR;
            int64_t NT = ((int64_t)(64 * 1024 / 4) / K) / NR * NR; /* tile rows: ~64 KiB */
            if (NT < NR) NT = NR;
            if (NT > 64) NT = 64;
            float* tile = (float*)calloc((size_t)(NT * K), sizeof(float));
            for (int64_t c0 = n0; c0 < n1; c0 += NT) {
                const int64_t nc = n1 - c0 < NT ? n1 - c0 : NT;
                bz_dequant_rows(wq, sc, bi, sb, c0, nc, G, K, tile);
                for (int64_t m0 = 0; m0 < M; m0 += 4) /* 4 rows of x in L1, the tile swept */
                    bz_tile_rows(xp + m0 * K, M - m0 < 4 ? M - m0 : 4, K, tile, nc,
                                 out + m0 * N + c0, N);
            }
            free(tile);
        } else
#endif
        { /* items of BZ_ITEM_ROWS weight rows, stolen by a thread done with its own; the
             prefetch runs ahead up to row N */
            for (int64_t i0, i1; rows.next(t, &i0, &i1);)
                for (int64_t m0 = 0; m0 < M; m0 += BZ_MB) {
                    const int64_t mb = M - m0 < BZ_MB ? M - m0 : BZ_MB;
                    const float* xm = xp + m0 * K;
                    for (int64_t n = i0; n < i1; ++n) {
                        if (n + BZ_PF_ROWS < N) {
                            bz_prefetch(wq + (n + BZ_PF_ROWS) * rowbytes, rowbytes);
                            bz_prefetch(sc + (n + BZ_PF_ROWS) * G, G * (int64_t)sizeof(stype));
                            bz_prefetch(bi + (n + BZ_PF_ROWS) * G, G * (int64_t)sizeof(stype));
                        }
                        bz_row_sb(sc, bi, n, G, sb, &s, &b);
                        const uint8_t* wrow = wq + n * rowbytes;
                        float* o = out + m0 * N + n;
                        bz_dispatch<4>(mb, [&](auto r) {
                            if (inv)
                                bz_rows<decltype(r)::value, true>(wrow, s, b, xm, K, G, o, N);
                            else
                                bz_rows<decltype(r)::value, false>(wrow, s, b, xm, K, G, o, N);
                        });
                    }
                }
        }
        free(sb);
    }
}
