// Shared head of the dequantize-fused quantized matmul kernel (qmatmul.cc; the design is
// described in backends/cpu/qmatmul.py): the ISA level, prefetch, the scale type.
//
// Parameters (#defines the Python side puts before the source):
//   BZ_BITS     4 or 8: bits per weight code
//   BZ_GS       32, 64 or 128: weights per quantization group
//   BZ_HALF     1: scales and biases are float16 (read as raw 16-bit words), 0: float32
//   BZ_ISA_MAX  optional cap on the instruction set: 0 scalar, 1 AVX2+FMA, 2 AVX-512, 3 NEON
//               (AArch64: any cap below 3 is scalar)
#ifndef BZ_QMM_COMMON_H
#define BZ_QMM_COMMON_H
#if !defined(BZ_BITS) || !defined(BZ_GS) || !defined(BZ_HALF)
#error "qmatmul: define BZ_BITS, BZ_GS and BZ_HALF"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "dispatch.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

#if defined(__AVX512F__)
#define BZ_ISA_HOST 2
#elif defined(__AVX2__) && defined(__FMA__)
#define BZ_ISA_HOST 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define BZ_ISA_HOST 3
#else
#define BZ_ISA_HOST 0
#endif
#if defined(BZ_ISA_MAX) && BZ_ISA_MAX < BZ_ISA_HOST
#define BZ_ISA (BZ_ISA_HOST == 3 ? 0 : BZ_ISA_MAX)
#else
#define BZ_ISA BZ_ISA_HOST
#endif

#define BZ_INLINE inline __attribute__((always_inline))
/* Software prefetch of [p, p + n) into L2 (one hint per cache line): the weight rows a
   few passes ahead, so the next rows' codes and scales stream in while these compute. */
#ifndef BZ_PF_ROWS
#define BZ_PF_ROWS 8
#endif
static BZ_INLINE void bz_prefetch(const void* p, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
#else
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 3);
#endif
}
#define BZ_MB 4                         /* rows of x per unpacked weight vector */
#define BZ_GBYTES (BZ_GS * BZ_BITS / 8) /* packed bytes per group */

#if BZ_HALF
typedef uint16_t stype;
static BZ_INLINE float bz_h2f(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* subnormal: m * 2^-24 */
        uint32_t vb;
        memcpy(&vb, &v, 4);
        f = s | vb;
    } else if (e == 31) {
        f = s | 0x7f800000u | (m << 13);
    } else {
        f = s | ((e + 112u) << 23) | (m << 13);
    }
    float r;
    memcpy(&r, &f, 4);
    return r;
#endif
}
#else
typedef float stype;
#endif

#endif  // BZ_QMM_COMMON_H
