// float16 storage for the hand-written cpu kernels: bz_h2f turns IEEE binary16 bits into a
// float (exactly: every float16 is a float), with F16C where the target has it.
#ifndef BZ_F16_H
#define BZ_F16_H
#include <cstdint>
#include <cstring>
#if defined(__F16C__)
#include <immintrin.h>
#endif
static inline __attribute__((always_inline)) float bz_h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* subnormal: m * 2^-24 */
        uint32_t vb;
        memcpy(&vb, &v, 4);
        f = s | vb;
    } else if (e == 31) {
        f = s | 0x7f800000u | (m << 13);
    } else {
        f = s | ((e + 112u) << 23) | (m << 13);
    }
    float r;
    memcpy(&r, &f, 4);
    return r;
#endif
}
#endif  // BZ_F16_H
