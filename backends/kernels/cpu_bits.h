// The bit moves of the C++ dialect (cpu_prelude.h; also braze._core's csrc/vmath.cpp, which
// computes bzmath.h's functions for the numpy tier): a value's bits as another type.
// Needs BZ_FN (static inline).
template <class D, class S>
BZ_FN D bz_bitcast(S s) {
    D d;
    __builtin_memcpy(&d, &s, sizeof d);
    return d;
}
BZ_FN uint32_t bz_fbits(float f) { return bz_bitcast<uint32_t>(f); }
BZ_FN float bz_ffrom(uint32_t u) { return bz_bitcast<float>(u); }
BZ_FN uint64_t bz_dbits(double d) { return bz_bitcast<uint64_t>(d); }
BZ_FN double bz_dfrom(uint64_t u) { return bz_bitcast<double>(u); }
