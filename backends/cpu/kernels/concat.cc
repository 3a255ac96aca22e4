// Concatenation of up to 4-d strided inputs of any dtype into a contiguous output, for the
// cpu backend's replay programs (backends/cpu/concat.py describes and builds it).
// Parameter: BZ_SYMBOL (the entry point's name).
#ifndef BZ_SYMBOL
#error "concat: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstring>

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t n = a[0], es = a[1], ax = a[2];
    const int64_t O[4] = {a[3], a[4], a[5], a[6]};
    const int64_t os[4] = {O[1] * O[2] * O[3], O[2] * O[3], O[3], 1};
    char* out = (char*)bufs[n];
    int64_t at = 0;  // where this input starts along the axis
    for (int64_t i = 0; i < n; ++i) {
        const int64_t* p = a + 7 + i * 6;
        const int64_t* st = p + 1;  // the input's element strides
        const char* src = (const char*)bufs[i] + es * p[0];
        int64_t S[4] = {O[0], O[1], O[2], O[3]};
        S[ax] = p[5];
        char* dst = out + es * at * os[ax];
        at += p[5];
        // One memcpy per block contiguous in both: the trailing dims merge while the
        // input's stride and the output's both equal the block so far (a roll's halves
        // along the first axis are one copy each, not one per row).
        int64_t run = 1;  // elements per memcpy
        int d = 3;        // dims 0..d stay loops
        while (d >= 0 && (S[d] == 1 || (st[d] == run && os[d] == run))) {
            run *= S[d];
            --d;
        }
        if (S[0] * S[1] * S[2] * S[3] == 0) continue;
        const size_t bytes = (size_t)(es * run);
        int64_t idx[4] = {0, 0, 0, 0};
        for (;;) {
            int64_t so = 0, doff = 0;
            for (int k = 0; k <= d; ++k) {
                so += idx[k] * st[k];
                doff += idx[k] * os[k];
            }
            std::memcpy(dst + es * doff, src + es * so, bytes);
            int k = d;  // the next block: an odometer over dims 0..d
            while (k >= 0 && ++idx[k] == S[k]) idx[k--] = 0;
            if (k < 0) break;
        }
    }
}
