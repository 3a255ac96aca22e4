// braze CUDA emulator shim (kernel side)
// The CUDA kernel translation unit starts with this (then the CUDA prelude, then the
// kernels). -nostdinc++ makes <math.h> glibc's C header, which (unlike the C++ one)
// defines no int64_t: the CUDA prelude's own typedefs (int64_t = long long, as NVRTC has
// it) stay valid.
#include <math.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static /* one copy per block: blocks run one after another */
#include "runtime_api.h"
#define threadIdx bz_emu_tidx
#define blockIdx bz_emu_bidx
#define blockDim bz_emu_bdim
#define gridDim bz_emu_gdim
#define __syncthreads() bz_emu_syncthreads()
// CUDA's bit casts: one memcpy template under their four names
template <class To, class From>
static inline To bz_emu_bit_cast(From x) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast between types of different sizes");
    To y;
    __builtin_memcpy(&y, &x, sizeof y);
    return y;
}
static inline unsigned int __float_as_uint(float f) { return bz_emu_bit_cast<unsigned int>(f); }
static inline float __uint_as_float(unsigned int u) { return bz_emu_bit_cast<float>(u); }
static inline long long __double_as_longlong(double d) { return bz_emu_bit_cast<long long>(d); }
static inline double __longlong_as_double(long long u) { return bz_emu_bit_cast<double>(u); }
template <class T>
static inline T __shfl_xor_sync(unsigned int, T v, int o) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    bz_emu_shuffle_xor(&v, sizeof(T), o);
    return v;
}
