// x[region] = v for an up to 4-d region of a buffer and a strided value of the same dtype
// (any: elements are copied by size), on OpenMP threads, for the cpu backend's element
// and slice stores (backends/cpu/assign.py describes and builds it).
// Parameter: BZ_SYMBOL (the entry point's name).
#ifndef BZ_SYMBOL
#error "assign: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstring>

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], es = a[1];
    const int64_t* O = a + 2;  // the region's 4 (padded) dims
    const int64_t doff = a[6], soff = a[11];
    const int64_t* ds = a + 7;   // the destination's element strides
    const int64_t* ss = a + 12;  // the value's element strides
    char* dst = (char*)bufs[0] + es * doff;
    const char* src = (const char*)bufs[1] + es * soff;
    const int64_t total = O[0] * O[1] * O[2] * O[3];
    if (total == 0) return;
    // Trailing dims contiguous in both merge into one run (one memcpy each).
    int64_t run = 1;
    int d = 3;
    while (d >= 0 && (O[d] == 1 || (ds[d] == run && ss[d] == run))) {
        run *= O[d];
        --d;
    }
    if (d < 0) {  // one run: split between the threads
        const int64_t chunk = (run + nt - 1) / nt;
#pragma omp parallel for num_threads((int)nt) if (nt > 1) schedule(static)
        for (int64_t t = 0; t < nt; ++t) {
            const int64_t lo = t * chunk, hi = lo + chunk < run ? lo + chunk : run;
            if (lo < hi) std::memcpy(dst + es * lo, src + es * lo, (size_t)(es * (hi - lo)));
        }
        return;
    }
    const int64_t rows = total / run;
    const size_t bytes = (size_t)(es * run);
#pragma omp parallel for num_threads((int)nt) if (nt > 1) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        int64_t rest = r, so = 0, dof = 0;
        for (int k = d; k >= 0; --k) {  // the row's index, innermost dim first
            const int64_t i = rest % O[k];
            rest /= O[k];
            so += i * ss[k];
            dof += i * ds[k];
        }
        std::memcpy(dst + es * dof, src + es * so, bytes);
    }
}
