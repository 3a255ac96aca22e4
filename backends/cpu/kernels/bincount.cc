// Counts of each index 0..length-1 (others ignored) of int32/int64 indices, for the cpu
// backend's ``bincount`` library op (backends/cpu/bincount.py describes and builds it).
// Parameter: BZ_SYMBOL (the entry point's name).
//
// Each thread counts its share of the indices into a private table (with one spare slot
// for the indices outside the range: no branch per index), then the tables are added.
// Integer counts: any split gives the same result.
#ifndef BZ_SYMBOL
#error "bincount: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

template <typename I>
static void count(const I* idx, int64_t lo, int64_t hi, int64_t length, int64_t* table) {
    const uint64_t len = (uint64_t)length;
    for (int64_t i = lo; i < hi; ++i) {
        const uint64_t j = (uint64_t)(int64_t)idx[i];  // negative -> huge: the spare slot
        table[j < len ? j : len] += 1;
    }
}

// Args (int64): threads, n, length, index bytes (4 or 8). Buffers: idx (n), out (length).
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], n = a[1], length = a[2], bytes = a[3];
    int64_t* out = (int64_t*)bufs[1];
    const int64_t T = nt > 1 ? nt : 1, stride = length + 1;
    int64_t* tables = (int64_t*)std::calloc((size_t)(T * stride), sizeof(int64_t));
#pragma omp parallel num_threads((int)T) if (T > 1)
    {
        const int64_t t = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t lo = n * t / nth, hi = n * (t + 1) / nth;
        int64_t* table = tables + t * stride;
        if (bytes == 4)
            count((const int32_t*)bufs[0], lo, hi, length, table);
        else
            count((const int64_t*)bufs[0], lo, hi, length, table);
    }
    for (int64_t j = 0; j < length; ++j) {
        int64_t s = 0;
        for (int64_t t = 0; t < T; ++t) s += tables[t * stride + j];
        out[j] = s;
    }
    std::free(tables);
}
