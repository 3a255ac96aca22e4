// Float32 v @ A (A.T @ v) for a row-major A (N, K): out[k] = sum_i v[i] * A[i, k], for the
// cpu backend's matmul (backends/cpu/matvec.py describes and builds it).
// Parameter: BZ_SYMBOL (the entry point's name).
//
// The rows are split into fixed chunks of BZ_CHUNK; each chunk sums its rows into a
// partial K-vector, column tiles of 8 vectors held in registers while the chunk's rows
// stream past; the partials are then added in chunk order. The chunks depend on the
// shape alone: any thread count gives the same bits.
#ifndef BZ_SYMBOL
#error "vecmat: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define BZ_CHUNK 1024

typedef float v16 __attribute__((vector_size(64)));

// p[0:w] = sum over rows i of v[i] * a[i * K + 0:w], for w <= 128 columns
static void tile(const float* v, const float* a, int64_t rows, int64_t K, int64_t w, float* p) {
    v16 acc[8] = {};
    const int64_t nv = w / 16;
    for (int64_t i = 0; i < rows; ++i) {
        const float* row = a + i * K;
        const v16 vi = (v16){} + v[i];
        for (int64_t j = 0; j < nv; ++j) {
            v16 x;
            std::memcpy(&x, row + 16 * j, sizeof x);
            acc[j] += vi * x;
        }
    }
    for (int64_t j = 0; j < nv; ++j) std::memcpy(p + 16 * j, &acc[j], sizeof acc[j]);
    for (int64_t c = 16 * nv; c < w; ++c) {  // the last < 16 columns
        float s = 0.f;
        for (int64_t i = 0; i < rows; ++i) s += v[i] * a[i * K + c];
        p[c] = s;
    }
}

// Args (int64): threads, N, K, swap. Buffers: v (N), A (N, K), out (K); swap: A first (a
// program step's X.T @ v).
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], N = a[1], K = a[2];
    const int sw = a[3] != 0;
    const float* v = (const float*)bufs[sw];
    const float* A = (const float*)bufs[1 - sw];
    float* out = (float*)bufs[2];
    const int64_t chunks = (N + BZ_CHUNK - 1) / BZ_CHUNK;
    if (chunks == 0) {
        for (int64_t k = 0; k < K; ++k) out[k] = 0.f;
        return;
    }
    float* part = chunks == 1 ? out : (float*)std::malloc(sizeof(float) * chunks * K);
#pragma omp parallel for num_threads((int)nt) if (nt > 1) schedule(static) collapse(2)
    for (int64_t c = 0; c < chunks; ++c)
        for (int64_t k0 = 0; k0 < K; k0 += 128) {
            const int64_t lo = c * BZ_CHUNK, rows = N - lo < BZ_CHUNK ? N - lo : BZ_CHUNK;
            const int64_t w = K - k0 < 128 ? K - k0 : 128;
            tile(v + lo, A + lo * K + k0, rows, K, w, part + c * K + k0);
        }
    if (chunks == 1) return;
    std::memcpy(out, part, sizeof(float) * K);
    for (int64_t c = 1; c < chunks; ++c) {  // in chunk order
        const float* p = part + c * K;
        for (int64_t k = 0; k < K; ++k) out[k] += p[k];
    }
    std::free(part);
}
