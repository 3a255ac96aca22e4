// The part of the three dialect preludes (cpu_prelude.h, cuda_prelude.h, metal_prelude.h) that is
// written once: each includes this file after it defines its vocabulary.
//
// The math the helper headers call (bz_exp, bz_log1p, bz_fabs, bz_floor, bz_fmod, bz_copysign):
// the prelude defines BZ_LIBM_F(name) and, where BZ_HAS_DOUBLE, BZ_LIBM_D(name): the dialect's
// float and double function of that name (C++: __builtin_expf / __builtin_exp; CUDA: expf /
// exp; MSL: exp). BZ_LIBM_1(name) / BZ_LIBM_2(name) define bz_<name> of one / two arguments.
#if !defined(BZ_LIBM_F) || (BZ_HAS_DOUBLE && !defined(BZ_LIBM_D))
#error "the prelude defines BZ_LIBM_F (and BZ_LIBM_D where BZ_HAS_DOUBLE) before prelude.h"
#endif
#if BZ_HAS_DOUBLE
#define BZ_LIBM_1(name)                                           \
    BZ_FN float bz_##name(float x) { return BZ_LIBM_F(name)(x); } \
    BZ_FN double bz_##name(double x) { return BZ_LIBM_D(name)(x); }
#define BZ_LIBM_2(name)                                                       \
    BZ_FN float bz_##name(float x, float y) { return BZ_LIBM_F(name)(x, y); } \
    BZ_FN double bz_##name(double x, double y) { return BZ_LIBM_D(name)(x, y); }
#else
#define BZ_LIBM_1(name) \
    BZ_FN float bz_##name(float x) { return BZ_LIBM_F(name)(x); }
#define BZ_LIBM_2(name) \
    BZ_FN float bz_##name(float x, float y) { return BZ_LIBM_F(name)(x, y); }
#endif
// (bz_log1p: the preludes with a libm log1p define it with BZ_LIBM_1; MSL has none, and
// metal_prelude.h writes its own)
#ifndef BZ_OWN_EXP  // (cpu_prelude.h: braze's own, bzmath.h)
BZ_LIBM_1(exp)
#endif
BZ_LIBM_1(fabs)
BZ_LIBM_1(floor)
BZ_LIBM_2(fmod)
BZ_LIBM_2(copysign)
#ifndef BZ_OWN_POW  // (cpu_prelude.h: braze's own float pow, bzmath.h)
BZ_LIBM_2(pow)
#endif
// BZ_NEXTAFTER16(name, to16, from16, same) defines float name(float x, float y): nextafter in a
// 16-bit float format (half.h's float16, bfloat16.h's bfloat16) whose bits to16(float) and
// from16(uint16_t) convert; `same` is what x == y returns (x: numpy's npy_half_nextafter;
// y: ml_dtypes', which keeps the sign of a zero y).
#define BZ_NEXTAFTER16(name, to16, from16, same)         \
    BZ_FN float name(float x, float y) {                 \
        if (x != x || y != y) return x + y;              \
        if (x == y) return same;                         \
        uint16_t h = to16(x);                            \
        if ((h & 0x7fffu) == 0)                          \
            h = (uint16_t)((y < 0 ? 0x8000u : 0u) | 1u); \
        else if ((x < y) == (x > 0))                     \
            h++;                                         \
        else                                             \
            h--;                                         \
        return from16(h);                                \
    }
