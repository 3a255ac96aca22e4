// The C++ dialect of the generated kernels (backends/cpu/codegen.py): every CPU kernel starts
// with this text. It defines the vocabulary the shared helper headers of this folder are
// written in (cuda_prelude.h and metal_prelude.h define the same names for CUDA C and MSL).
#include <cstdint>
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);
extern "C" void* malloc(__SIZE_TYPE__);
extern "C" void free(void*);
#define BZ_FN static inline
// an integer 0 the compiler cannot see through (each kernel defines bz_z = 0 from its
// arguments): csource.cast_expr adds it before an integer -> float conversion
#define BZ_I2F_ZERO bz_z
#define BZ_HAS_DOUBLE 1
// float16 conversions by the compiler (F16C, AVX-512 FP16, NEON) where it has _Float16 in
// C++ (GCC for AArch64 defines __FLT16_MAX__ but takes _Float16 in C++ only from GCC 13)
#if defined(__FLT16_MAX__) && !defined(BZ_SOFT_HALF) && \
    !(defined(__aarch64__) && !defined(__clang__) && defined(__GNUC__) && __GNUC__ < 13)
#define BZ_NATIVE_HALF 1
#else
#define BZ_NATIVE_HALF 0
#endif
#define BZ_RINTF __builtin_rintf
#define BZ_RINT __builtin_rint
#define BZ_BITCAST(D, s) bz_bitcast<D>(s)
#include "cpu_bits.h"
template <class T>
BZ_FN bool bz_isinf(T x) {
    return __builtin_isinf(x);
}
// braze's own exp, expm1, log, log1p, tanh and float pow (the same bits in every tier); the other
// math of the helpers, overloaded on float and double, is GCC's builtins
#include "bzmath.h"
#define BZ_OWN_EXP 1
BZ_FN float bz_exp(float x) { return bzm_exp(x); }
BZ_FN double bz_exp(double x) { return bzm_exp(x); }
BZ_FN float bz_log1p(float x) { return bzm_log1p(x); }
BZ_FN double bz_log1p(double x) { return bzm_log1p(x); }
#define BZ_OWN_POW 1
BZ_FN float bz_pow(float x, float y) { return bzm_pow(x, y); }
BZ_FN double bz_pow(double x, double y) { return __builtin_pow(x, y); }
#define BZ_LIBM_F(name) __builtin_##name##f
#define BZ_LIBM_D(name) __builtin_##name
#include "prelude.h"
