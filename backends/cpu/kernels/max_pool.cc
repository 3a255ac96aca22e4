// Max pooling of a channels-last float32 x (N, D0, D1, D2, C) (fewer spatial dims padded with
// size-1 dims in front) for the cpu backend's ``max_pool`` op (backends/cpu/max_pool.py
// describes and builds it). Parameter: BZ_SYMBOL (the entry point's name).
//
// Per output position, its channels start at -inf and take each tap inside x in row-major tap
// order (a padded tap holds -inf: skipping it changes nothing) as m = v > m || v != v ? v : m,
// numpy's maximum (NaN propagates; of two equal values the first stays): the reference's
// bits. The windows are read in place, no padded copy of x; blocks of 64 (then 16) channels
// keep their maxima in registers across the taps; output positions are split between the
// threads.
//
// Args (int64): threads, N, C, in[3], k[3], out[3], stride[3], dilation[3], pad_lo[3], x's
// element offset, x's element strides (batch, d0, d1, d2, channel). Buffers: x, out (contiguous).
#ifndef BZ_SYMBOL
#error "max_pool: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

namespace {

// numpy's maximum: the new value when larger or NaN, else the one held (NaN stays)
inline float pick(float m, float v) { return v > m || v != v ? v : m; }

// 16 floats (GCC's vector extension: one AVX-512 register, two AVX2 or four NEON ones)
typedef float V16 __attribute__((vector_size(64)));
inline V16 load16(const float* p) {
    V16 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline V16 pick16(V16 m, V16 v) { return (v > m) | (v != v) ? v : m; }

// W = 16 * B channels: the running maxima stay in registers across the taps
template <int B>
inline void block(float* m, const float* x, const int64_t* offs, int64_t nt) {
    V16 acc[B];
    for (int i = 0; i < B; ++i) acc[i] = V16{} - __builtin_inff();
    for (int64_t t = 0; t < nt; ++t) {
        const float* v = x + offs[t];
        for (int i = 0; i < B; ++i) acc[i] = pick16(acc[i], load16(v + 16 * i));
    }
    for (int i = 0; i < B; ++i) std::memcpy(m + 16 * i, &acc[i], sizeof acc[i]);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t threads = a[0] > 1 ? a[0] : 1, N = a[1], C = a[2];
    const int64_t *in = a + 3, *k = a + 6, *out = a + 9, *stride = a + 12, *dil = a + 15;
    const int64_t *lo = a + 18, *st = a + 22;
    const float* x = (const float*)bufs[0] + a[21];
    float* y = (float*)bufs[1];
    const int64_t rows = N * out[0] * out[1] * out[2], taps = k[0] * k[1] * k[2];
    const bool parallel = threads > 1 && rows > 1 && rows * C * taps > (1 << 16);
#pragma omp parallel num_threads((int)threads) if (parallel)
    {
        const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
        const int64_t r0 = rows * tid / nth, r1 = rows * (tid + 1) / nth;
        int64_t* offs = (int64_t*)std::malloc((size_t)taps * sizeof(int64_t));
        for (int64_t r = r0; r < r1; ++r) {
            int64_t q = r;
            const int64_t o2 = q % out[2];
            q /= out[2];
            const int64_t o1 = q % out[1];
            q /= out[1];
            const int64_t o0 = q % out[0], b = q / out[0];
            int64_t nt = 0;  // the taps inside x, in order: their first channel's element
            for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                const int64_t i0 = o0 * stride[0] + k0 * dil[0] - lo[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                    const int64_t i1 = o1 * stride[1] + k1 * dil[1] - lo[1];
                    if (i1 < 0 || i1 >= in[1]) continue;
                    const int64_t line = b * st[0] + i0 * st[1] + i1 * st[2];
                    for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                        const int64_t i2 = o2 * stride[2] + k2 * dil[2] - lo[2];
                        if (i2 >= 0 && i2 < in[2]) offs[nt++] = line + i2 * st[3];
                    }
                }
            }
            float* m = y + r * C;
            int64_t c = 0;
            if (st[4] == 1) {
                for (; c + 64 <= C; c += 64) block<4>(m + c, x + c, offs, nt);
                for (; c + 16 <= C; c += 16) block<1>(m + c, x + c, offs, nt);
            }
            for (int64_t j = c; j < C; ++j) {  // (strided channels, or the last few)
                float v = -__builtin_inff();
                for (int64_t t = 0; t < nt; ++t) v = pick(v, x[offs[t] + j * st[4]]);
                m[j] = v;
            }
        }
        std::free(offs);
    }
}
