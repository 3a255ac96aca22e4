// bfloat16 for the generated kernels: values are float32 in flight, stored as their uint16
// bits and rounded to bfloat16 (to nearest even, NaN kept quiet) after every op (bz_rb).
// Written in the vocabulary of a dialect prelude (cpu_prelude.h, cuda_prelude.h, ...).
BZ_FN float bz_b2f(uint16_t b) { return bz_ffrom((uint32_t)b << 16); }
BZ_FN uint16_t bz_f2b(float f) {
    uint32_t u = bz_fbits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
BZ_FN float bz_rb(float x) { return bz_b2f(bz_f2b(x)); }
BZ_NEXTAFTER16(bz_nextafter_b, bz_f2b, bz_b2f, y)  // ml_dtypes' nextafter
