// The CUDA C dialect of the generated kernels (backends/gpusource.py, backends/cuda/): every
// CUDA kernel starts with this text. NVRTC compiles without any header: the fixed-width
// integer types are defined here. It defines the vocabulary the shared helper headers of this
// folder are written in (cpu_prelude.h and metal_prelude.h define the same names).
#if defined(__CUDACC_RTC__) || !defined(__CUDACC__)  // NVRTC, the GPU emulator
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else  // nvcc (offline checks): the host's types
#include <stdint.h>
#endif
#define BZ_FN static __device__ __forceinline__
#define BZ_I2F_ZERO 0  // (cpu_prelude.h: a zero GCC cannot fold)
#define BZ_SHARED
#define BZ_DEV __device__
#define BZ_THREAD
#define BZ_BARRIER __syncthreads();
#define BZ_HAS_DOUBLE 1
#define BZ_NATIVE_HALF 0
#define BZ_RINTF rintf
#define BZ_RINT rint
#define BZ_BITCAST(D, s) bz_bitcast<D>(s)
template <int N>
struct bz_args {
    int64_t a[N];
};
// N elements of T in one aligned (vector) load or store
template <class T, int N>
struct alignas(sizeof(T) * N) bz_vec {
    T v[N];
};
BZ_FN uint32_t bz_fbits(float f) { return __float_as_uint(f); }
BZ_FN float bz_ffrom(uint32_t u) { return __uint_as_float(u); }
BZ_FN uint64_t bz_dbits(double d) { return (uint64_t)__double_as_longlong(d); }
BZ_FN double bz_dfrom(uint64_t u) { return __longlong_as_double((long long)u); }
BZ_FN float bz_inf() { return __uint_as_float(0x7f800000u); }
BZ_FN float bz_nanf() { return __uint_as_float(0x7fc00000u); }
BZ_FN double bz_nan() { return __longlong_as_double(0x7ff8000000000000ll); }
template <class T>
BZ_FN bool bz_isinf(T x) {
    return x == (T)bz_inf() || x == -(T)bz_inf();
}
template <class D, class S>
BZ_FN D bz_bitcast(S s) {
    union {
        S s;
        D d;
    } u;
    u.s = s;
    return u.d;
}
// the math of the helpers, overloaded on float and double
#define BZ_LIBM_F(name) name##f
#define BZ_LIBM_D(name) name
#include "prelude.h"
BZ_LIBM_1(log1p)
// warp shuffles of every reduction type
template <class T>
BZ_FN T bz_shfl(T v, int o) {
    return (T)__shfl_xor_sync(0xffffffffu, (int)v, o);
}
BZ_FN float bz_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
BZ_FN double bz_shfl(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
BZ_FN int64_t bz_shfl(int64_t v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
BZ_FN uint64_t bz_shfl(uint64_t v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
BZ_FN uint32_t bz_shfl(uint32_t v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
