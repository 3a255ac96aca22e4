// np.take_along_axis of an up to 6-d strided input of any dtype by int32 / int64 indices
// (both broadcast to the output), into a contiguous output, for the cpu backend's replay
// programs (backends/cpu/take_along.py describes and builds it), bounds-checked: an index
// outside [-n, n) stops the kernel with its value in the status word (the program then
// stops, and Python raises numpy's IndexError). Parameter: BZ_SYMBOL (the entry point's
// name).
#ifndef BZ_SYMBOL
#error "take_along: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstring>

#define BZ_TAKE_DIMS 6

/* index i in [-n, n) as a position, else -1 with its value in the status word */
template <typename I>
static inline int64_t bz_take_index(I i, int64_t n, int64_t* status) {
    int64_t v = (int64_t)i;
    if (v < 0) v += n;
    if (v < 0 || v >= n) {
        status[0] = 1;
        status[1] = (int64_t)i;
        return -1;
    }
    return v;
}

template <typename E, typename I>
static bool bz_take_along(const E* x, const I* idx, E* out, const int64_t* O, const int64_t* xs,
                          int64_t xa, const int64_t* is, int64_t n, int64_t* status) {
    constexpr int D = BZ_TAKE_DIMS;
    int64_t pos[D] = {0, 0, 0, 0, 0, 0};
    const int64_t inner = O[D - 1], xi = xs[D - 1], ii = is[D - 1];
    for (;;) {
        int64_t xo = 0, io = 0;
        for (int d = 0; d < D - 1; ++d) xo += pos[d] * xs[d], io += pos[d] * is[d];
        const E* xr = x + xo;
        const I* ir = idx + io;
        if (ii == 0 && xi == 1) {  // one index per contiguous row (a row gather): one copy
            const int64_t v = bz_take_index(ir[0], n, status);
            if (v < 0) return false;
            std::memcpy(out, xr + v * xa, (size_t)inner * sizeof(E));
            out += inner;
        } else {
            for (int64_t j = 0; j < inner; ++j) {
                const int64_t v = bz_take_index(ir[j * ii], n, status);
                if (v < 0) return false;
                *out++ = xr[j * xi + v * xa];
            }
        }
        int d = D - 2;  // the next row: an odometer over the outer dims
        while (d >= 0 && ++pos[d] == O[d]) pos[d--] = 0;
        if (d < 0) return true;
    }
}

template <typename E>
static void bz_take_along_e(void** bufs, const int64_t* a) {
    const int64_t* O = a + 3;
    const E* x = (const E*)bufs[0] + a[9];
    int64_t* status = (int64_t*)bufs[3];
    if (a[1] == 4)
        bz_take_along<E, int32_t>(x, (const int32_t*)bufs[1] + a[17], (E*)bufs[2], O, a + 10, a[16],
                                  a + 18, a[2], status);
    else
        bz_take_along<E, int64_t>(x, (const int64_t*)bufs[1] + a[17], (E*)bufs[2], O, a + 10, a[16],
                                  a + 18, a[2], status);
}

struct bz_b16 {
    uint64_t w[2];
};

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    // a: element bytes, index bytes, the axis' size n, the output's 6 (padded) dims, x's
    // element offset, x's 6 element strides (0 along the axis and broadcast dims), x's
    // stride along the axis, the indices' element offset, their 6 strides (0: broadcast).
    // Buffers: x, indices, out, status (2 int64: non-zero on a bad index, its value).
    int64_t* status = (int64_t*)bufs[3];
    status[0] = 0;
    for (int d = 0; d < BZ_TAKE_DIMS; ++d)
        if (a[3 + d] == 0) return;
    switch (a[0]) {
        case 1: bz_take_along_e<uint8_t>(bufs, a); break;
        case 2: bz_take_along_e<uint16_t>(bufs, a); break;
        case 4: bz_take_along_e<uint32_t>(bufs, a); break;
        case 8: bz_take_along_e<uint64_t>(bufs, a); break;
        case 16: bz_take_along_e<bz_b16>(bufs, a); break;
        default: status[0] = 2;  // (never asked: the caller checks the element size)
    }
}
