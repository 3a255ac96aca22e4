// float16 for the generated kernels: values are float32 in flight, stored as their uint16 bits
// and rounded to float16 after every op (bz_rh); bz_d2h rounds a double once. Written in the
// vocabulary of a dialect prelude (cpu_prelude.h, cuda_prelude.h, metal_prelude.h).
#if BZ_NATIVE_HALF
BZ_FN float bz_h2f(uint16_t h) { return (float)BZ_BITCAST(_Float16, h); }
BZ_FN uint16_t bz_f2h(float f) { return BZ_BITCAST(uint16_t, (_Float16)f); }
BZ_FN uint16_t bz_d2h(double d) { return BZ_BITCAST(uint16_t, (_Float16)d); }
#else
BZ_FN float bz_h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0)
        u = bz_fbits((float)m * 5.9604644775390625e-08f);
    else if (e == 31)
        u = 0x7f800000u | (m << 13);
    else
        u = ((e + 112u) << 23) | (m << 13);
    return bz_ffrom(u | s);
}
BZ_FN uint16_t bz_f2h(float f) {
    uint32_t x = bz_fbits(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu, r;
    if (ax > 0x7f800000u) {
        r = 0x7e00u | ((ax >> 13) & 0x3ffu);
    } else if (ax >= 0x477ff000u) {
        r = 0x7c00u;
    } else if (ax >= 0x38800000u) {
        uint32_t t = ax - 0x38000000u;
        t += 0xfffu + ((t >> 13) & 1u);
        r = t >> 13;
    } else {
        r = (uint32_t)BZ_RINTF(bz_ffrom(ax) * 16777216.0f);
    }
    return (uint16_t)(r | sign);
}
#if BZ_HAS_DOUBLE
BZ_FN uint16_t bz_d2h(double d) {
    uint64_t x = bz_dbits(d);
    uint64_t sign = (x >> 48) & 0x8000u, ax = x & 0x7fffffffffffffffull, r;
    if (ax > 0x7ff0000000000000ull) {
        r = 0x7e00u | ((ax >> 42) & 0x3ffu);
    } else if (ax >= 0x40effe0000000000ull) {
        r = 0x7c00u;
    } else if (ax >= 0x3f10000000000000ull) {
        uint64_t t = ax - 0x3f00000000000000ull;
        t += 0x1ffffffffffull + ((t >> 42) & 1u);
        r = t >> 42;
    } else {
        r = (uint64_t)BZ_RINT(bz_dfrom(ax) * 16777216.0);
    }
    return (uint16_t)(r | sign);
}
#endif
#endif
BZ_FN float bz_rh(float x) { return bz_h2f(bz_f2h(x)); }
BZ_NEXTAFTER16(bz_nextafter_h, bz_f2h, bz_h2f, x)  // numpy's npy_half_nextafter
