// A cyclic shift (np.roll) of an up to 4-d strided input of any dtype into a contiguous
// output, for the cpu backend's replay programs (backends/cpu/roll.py describes and
// builds it). Parameter: BZ_SYMBOL (the entry point's name).
#ifndef BZ_SYMBOL
#error "roll: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstring>

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t es = a[0];
    const int64_t* O = a + 1;   // the 4 (padded) dims
    const int64_t* sh = a + 5;  // shift per dim, in [0, dim)
    const int64_t off = a[9];
    const int64_t* st = a + 10;  // the input's element strides
    const char* in = (const char*)bufs[0] + es * off;
    char* out = (char*)bufs[1];
    if (O[0] * O[1] * O[2] * O[3] == 0) return;
    // Trailing unshifted dims that are contiguous in the input are one block (bytes bb);
    // dim d, the last one left, is the row: with a unit-block stride, its two halves are
    // one memcpy each.
    int64_t block = 1;
    int d = 3;
    while (d >= 0 && sh[d] == 0 && (O[d] == 1 || st[d] == block)) {
        block *= O[d];
        --d;
    }
    const size_t bb = (size_t)(es * block);
    if (d < 0) {
        std::memcpy(out, in, bb);
        return;
    }
    const int64_t n = O[d], s = sh[d], sd = st[d];
    int64_t idx[4] = {0, 0, 0, 0};
    for (char* dst = out;; dst += bb * n) {
        const char* src = in;
        for (int k = 0; k < d; ++k) src += es * st[k] * ((idx[k] - sh[k] + O[k]) % O[k]);
        if (sd == block) {
            std::memcpy(dst + bb * s, src, bb * (size_t)(n - s));
            std::memcpy(dst, src + bb * (size_t)(n - s), bb * (size_t)s);
        } else {
            for (int64_t j = 0; j < n; ++j)
                std::memcpy(dst + bb * j, src + es * sd * ((j - s + n) % n), bb);
        }
        int k = d - 1;  // the next row: an odometer over dims 0..d-1
        while (k >= 0 && ++idx[k] == O[k]) idx[k--] = 0;
        if (k < 0) break;
    }
}
