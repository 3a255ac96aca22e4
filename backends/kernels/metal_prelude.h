#include <metal_stdlib>
using namespace metal;
// The MSL dialect of the generated kernels (backends/gpusource.py, backends/metal/): every
// Metal kernel starts with this text. It defines the vocabulary the shared helper headers of
// this folder are written in (cpu_prelude.h and cuda_prelude.h define the same names) and
// the libm functions MSL lacks (bz_expm1, bz_log1p, bz_hypot, bz_nextafter). Metal has no
// double.
#define BZ_FN static inline
#define BZ_I2F_ZERO 0  // (cpu_prelude.h: a zero GCC cannot fold)
#define BZ_SHARED threadgroup
#define BZ_DEV
#define BZ_THREAD thread
#define BZ_BARRIER threadgroup_barrier(mem_flags::mem_threadgroup);
#define BZ_HAS_DOUBLE 0
#define BZ_NATIVE_HALF 0
#define BZ_RINTF rint
#define BZ_BITCAST(D, s) as_type<D>(s)
BZ_FN uint32_t bz_fbits(float f) { return as_type<uint32_t>(f); }
BZ_FN float bz_ffrom(uint32_t u) { return as_type<float>(u); }
BZ_FN float bz_inf() { return as_type<float>(0x7f800000u); }
BZ_FN float bz_nanf() { return as_type<float>(0x7fc00000u); }
template <class T>
BZ_FN bool bz_isinf(T x) {
    return x == (T)bz_inf() || x == -(T)bz_inf();
}
BZ_FN float bz_expm1(float x) {
    if (fabs(x) < 1e-5f) return x + 0.5f * x * x;
    const float u = exp(x);
    if (u == 1.0f || u == bz_inf()) return u == 1.0f ? x : u;
    const float um1 = u - 1.0f;
    if (um1 == -1.0f) return -1.0f;
    return um1 * x / log(u);
}
BZ_FN float bz_log1p(float x) {
    const float u = 1.0f + x;
    if (u == bz_inf()) return u;  // inf * x / inf would be NaN
    return u == 1.0f ? x : log(u) * x / (u - 1.0f);
}
BZ_FN float bz_hypot(float x, float y) {
    const float a = fabs(x), b = fabs(y), m = max(a, b), n = min(a, b);
    if (bz_isinf(a) || bz_isinf(b)) return bz_inf();
    if (m == 0.0f || m != m) return m + n;
    const float r = n / m;
    return m * sqrt(1.0f + r * r);
}
BZ_FN float bz_nextafter(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return y;
    if (x == 0.0f) return as_type<float>((y < 0.0f ? 0x80000000u : 0u) | 1u);
    const uint32_t u = as_type<uint32_t>(x);
    return as_type<float>((x < y) == (x > 0.0f) ? u + 1u : u - 1u);
}
// the math of the helpers (float only, MSL's overloads; bz_log1p is above)
#define BZ_LIBM_F(name) name
#include "prelude.h"
// simdgroup shuffles of every reduction type (32-bit at most: 64-bit ones in two halves)
template <class T>
BZ_FN T bz_shfl(T v, int o) {
    return (T)simd_shuffle_xor((int)v, (ushort)o);
}
BZ_FN float bz_shfl(float v, int o) { return simd_shuffle_xor(v, (ushort)o); }
BZ_FN uint32_t bz_shfl(uint32_t v, int o) { return simd_shuffle_xor(v, (ushort)o); }
BZ_FN int64_t bz_shfl(int64_t v, int o) {
    const uint32_t lo = simd_shuffle_xor((uint32_t)v, (ushort)o);
    const uint32_t hi = simd_shuffle_xor((uint32_t)((uint64_t)v >> 32), (ushort)o);
    return (int64_t)(((uint64_t)hi << 32) | lo);
}
BZ_FN uint64_t bz_shfl(uint64_t v, int o) { return (uint64_t)bz_shfl((int64_t)v, o); }
