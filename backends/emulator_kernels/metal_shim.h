// braze Metal emulator shim (kernel side)
// The Metal kernel translation unit starts with this instead of cuda_shim.h: the subset of
// the Metal standard library generated MSL uses, with real semantics (float math on the
// host's libm; Metal has no double). Address spaces are erased; kernel-scope threadgroup
// arrays become function statics (one copy per threadgroup) by a rewrite of their
// declarations (backends/gpu_emulator.py).
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;
#define device
#define constant
#define thread
#define threadgroup
#define kernel
#include "runtime_api.h"
struct uint3 {
    uint x, y, z;
};
struct bz_emu_16 {
    uint16_t bits;
};  // half / bfloat as buffer element types (MLX's form)
typedef bz_emu_16 half;
typedef bz_emu_16 float16_t;
struct bz_emu_b16 {
    uint16_t bits;
};
typedef bz_emu_b16 bfloat16_t;
namespace metal {
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2 };
static inline void threadgroup_barrier(mem_flags) { bz_emu_syncthreads(); }
template <class To, class From>
static inline To as_type(From f) {
    static_assert(sizeof(To) == sizeof(From), "as_type: size mismatch");
    To t;
    __builtin_memcpy(&t, &f, sizeof(To));
    return t;
}
template <class T>
static inline T simd_shuffle_xor(T v, ushort o) {
    static_assert(sizeof(T) <= 4, "Metal shuffles 32-bit values at most");
    bz_emu_shuffle_xor(&v, sizeof(T), o);
    return v;
}
#define BZ_M1(name) \
    static inline float name(float x) { return __builtin_##name##f(x); }
BZ_M1(exp)
BZ_M1(exp2)
BZ_M1(log)
BZ_M1(log2)
BZ_M1(log10)
BZ_M1(sqrt)
BZ_M1(fabs)
BZ_M1(sin)
BZ_M1(cos)
BZ_M1(tan)
BZ_M1(asin)
BZ_M1(acos)
BZ_M1(atan)
BZ_M1(sinh)
BZ_M1(cosh)
BZ_M1(tanh)
BZ_M1(asinh)
BZ_M1(acosh)
BZ_M1(atanh)
BZ_M1(floor)
BZ_M1(ceil)
BZ_M1(rint)
BZ_M1(trunc)
BZ_M1(round)
#undef BZ_M1
#define BZ_M2(name) \
    static inline float name(float x, float y) { return __builtin_##name##f(x, y); }
BZ_M2(pow)
BZ_M2(fmod)
BZ_M2(atan2)
BZ_M2(copysign)
BZ_M2(fmin)
BZ_M2(fmax)
#undef BZ_M2
template <class T>
static inline T max(T a, T b) {
    return a < b ? b : a;
}
template <class T>
static inline T min(T a, T b) {
    return b < a ? b : a;
}
template <class T>
static inline T abs(T a) {
    return a < T(0) ? T(-a) : a;
}
static inline float abs(float a) { return __builtin_fabsf(a); }
template <class T>
static inline T clamp(T x, T lo, T hi) {
    return min(max(x, lo), hi);
}
template <class T>
static inline T select(T a, T b, bool c) {
    return c ? b : a;
}
static inline bool isnan(float x) { return x != x; }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
}  // namespace metal
