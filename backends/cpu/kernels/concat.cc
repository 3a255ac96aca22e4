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
        const char* src = (const char*)bufs[i];
        int64_t S[4] = {O[0], O[1], O[2], O[3]};
        S[ax] = p[5];
        const int64_t shift = at * os[ax];
        for (int64_t i0 = 0; i0 < S[0]; ++i0)
            for (int64_t i1 = 0; i1 < S[1]; ++i1)
                for (int64_t i2 = 0; i2 < S[2]; ++i2) {
                    char* d = out + es * (i0 * os[0] + i1 * os[1] + i2 * os[2] + shift);
                    const char* s = src + es * (p[0] + i0 * p[1] + i1 * p[2] + i2 * p[3]);
                    if (p[4] == 1 || S[3] == 1) {
                        std::memcpy(d, s, (size_t)(es * S[3]));
                    } else {
                        for (int64_t i3 = 0; i3 < S[3]; ++i3)
                            std::memcpy(d + es * i3, s + es * i3 * p[4], (size_t)es);
                    }
                }
        at += p[5];
    }
}
