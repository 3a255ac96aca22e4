// The C++ dialect of the generated kernels (backends/cpu/codegen.py): every CPU kernel starts
// with this text. It defines the vocabulary the shared helper headers of this folder are
// written in (cuda_prelude.h and metal_prelude.h define the same names for CUDA C and MSL).
#include <cstdint>
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);
extern "C" void* malloc(__SIZE_TYPE__);
extern "C" void free(void*);
#define BZ_FN static inline
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
template <class T>
BZ_FN bool bz_isinf(T x) {
    return __builtin_isinf(x);
}
// the math of the helpers, overloaded on float and double (GCC builtins: they vectorize
// through libmvec where the kernel declares the libm function `omp declare simd`)
#define BZ_LIBM_F(name) __builtin_##name##f
#define BZ_LIBM_D(name) __builtin_##name
#include "prelude.h"
BZ_LIBM_1(log1p)
