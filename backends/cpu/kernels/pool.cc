// Window pooling of a channels-last float32 x (N, D0, D1, D2, C) (fewer spatial dims padded with
// size-1 dims in front) for the cpu backend's ``max_pool`` and ``window_sum`` ops
// (backends/cpu/pooling.py describes and builds it). Parameter: BZ_SYMBOL (the entry point's
// name).
//
// Per output position its channels combine the taps in row-major tap order, the windows read in
// place (no padded copy of x): max (mode 0) starts at -inf and takes each tap inside x as
// m = m > v || m != m ? m : v, numpy's maximum (NaN propagates; of two equal values, -0.0 and
// +0.0, the later tap's stays; a padded tap holds -inf and changes nothing, so it is skipped;
// a block of channels first assumes no NaN: see tap_block in taps.h); sum (mode 1) starts at
// -0.0 (x + -0.0 = x for every x) and adds each tap, +0.0 for a padded one (the reference sums
// a zero-padded input: a -0.0 sum becomes +0.0 there). The reference's bits. Blocks of 64 (then
// 16) channels keep their accumulators in registers across the taps; output positions are split
// between the threads in chunks, with stealing (work_split.h).
//
// Args (int64): threads, N, C, in[3], k[3], out[3], stride[3], dilation[3], pad_lo[3], x's
// element offset, x's element strides (batch, d0, d1, d2, channel), mode. Buffers: x, out
// (contiguous).
#ifndef BZ_SYMBOL
#error "pool: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "taps.h"
#include "work_split.h"

extern "C" int omp_get_thread_num(void);

namespace {

template <class Op>
void pool(const int64_t* a, const float* x, float* y) {
    const int64_t threads = a[0] > 1 ? a[0] : 1, N = a[1], C = a[2];
    const int64_t *in = a + 3, *k = a + 6, *out = a + 9, *stride = a + 12, *dil = a + 15;
    const int64_t *lo = a + 18, *st = a + 22;
    const int64_t rows = N * out[0] * out[1] * out[2], taps = k[0] * k[1] * k[2];
    const bool parallel = threads > 1 && rows > 1 && rows * C * taps > (1 << 16);
    // items of kChunk rows (a few microseconds each: the stealing's one atomic per item is
    // nothing beside them)
    constexpr int64_t kChunk = 8;
    WorkSplit work(rows, parallel ? threads : 1, kChunk);
#pragma omp parallel num_threads((int)threads) if (parallel)
    {
        const int64_t tid = omp_get_thread_num();
        int64_t* offs = (int64_t*)std::malloc((size_t)(2 * taps) * sizeof(int64_t));
        int64_t* delta = offs + taps;  // each tap's distance from the first
        {
            int64_t t = 0;
            for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                    for (int64_t k2 = 0; k2 < k[2]; ++k2)
                        delta[t++] =
                            k0 * dil[0] * st[1] + k1 * dil[1] * st[2] + k2 * dil[2] * st[3];
        }
        // a window lies inside x when its first tap's coordinates lie in [0, hi)
        const int64_t hi0 = in[0] - (k[0] - 1) * dil[0], hi1 = in[1] - (k[1] - 1) * dil[1];
        const int64_t hi2 = in[2] - (k[2] - 1) * dil[2];
        for (int64_t r0, r1; work.next(tid, &r0, &r1);)
            for (int64_t r = r0; r < r1; ++r) {
                int64_t q = r;
                const int64_t o2 = q % out[2];
                q /= out[2];
                const int64_t o1 = q % out[1];
                q /= out[1];
                const int64_t o0 = q % out[0], b = q / out[0];
                const int64_t s0 = o0 * stride[0] - lo[0], s1 = o1 * stride[1] - lo[1];
                const int64_t s2 = o2 * stride[2] - lo[2];
                int64_t nt = 0;  // the taps in order (padded ones only when they count)
                if (s0 >= 0 && s0 < hi0 && s1 >= 0 && s1 < hi1 && s2 >= 0 && s2 < hi2) {
                    const int64_t first = b * st[0] + s0 * st[1] + s1 * st[2] + s2 * st[3];
                    for (; nt < taps; ++nt) offs[nt] = first + delta[nt];
                } else {  // a window at the border
                    for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                        const int64_t i0 = o0 * stride[0] + k0 * dil[0] - lo[0];
                        const bool in0 = i0 >= 0 && i0 < in[0];
                        for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                            const int64_t i1 = o1 * stride[1] + k1 * dil[1] - lo[1];
                            const bool in01 = in0 && i1 >= 0 && i1 < in[1];
                            const int64_t line = b * st[0] + i0 * st[1] + i1 * st[2];
                            for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                                const int64_t i2 = o2 * stride[2] + k2 * dil[2] - lo[2];
                                if (in01 && i2 >= 0 && i2 < in[2])
                                    offs[nt++] = line + i2 * st[3];
                                else if (Op::kPadded)
                                    offs[nt++] = -1;
                            }
                        }
                    }
                }
                float* m = y + r * C;
                int64_t c = 0;
                if (st[4] == 1) {
                    const auto tap = [&](int64_t t) -> const float* {
                        if (Op::kPadded && offs[t] < 0) return nullptr;
                        return x + c + offs[t];
                    };
                    for (; c + 64 <= C; c += 64) tap_block<Op, 4>(m + c, tap, nt);
                    for (; c + 16 <= C; c += 16) tap_block<Op, 1>(m + c, tap, nt);
                }
                for (int64_t j = c; j < C; ++j) {  // (strided channels, or the last few)
                    float v = Op::init();
                    for (int64_t t = 0; t < nt; ++t)
                        v = Op::add(v, offs[t] < 0 ? 0.0f : x[offs[t] + j * st[4]]);
                    m[j] = v;
                }
            }
        std::free(offs);
    }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const float* x = (const float*)bufs[0] + a[21];
    float* y = (float*)bufs[1];
    if (a[27] == 1)
        pool<Sum>(a, x, y);
    else
        pool<Max>(a, x, y);
}
