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
static BZ_INLINE void bz_prefetch_l2(const void* p, int64_t n) {
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 2);
}
static BZ_INLINE void bz_prefetch(const void* p, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
#else
    const char* c = (const char*)p;
    for (int64_t i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 3);
#endif
}
/* [p, p + n) out of every cache level (x86: clflush per line; elsewhere nothing). */
static inline void bz_evict(const void* p, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
    const char* c = (const char*)((uintptr_t)p & ~(uintptr_t)63);
    for (const char* e = (const char*)p + n; c < e; c += 64) _mm_clflush(c);
    _mm_mfence();
#else
    (void)p;
    (void)n;
#endif
}
/* A thread's read of [next, end) prefetched a fixed distance ahead of where it computes,
   a few lines per step of its inner loop: one burst per tile (a tile of 16 rows at once)
   stalled the loop on the fill buffers while the memory sat idle during the compute. */
#ifndef BZ_PF_AHEAD
#define BZ_PF_AHEAD 16384 /* bytes */
#endif
struct BzStream {
    const char* next;
    const char* end;
    /* prefetch (into L2) up to cur + BZ_PF_AHEAD */
    BZ_INLINE void ahead(const void* cur) {
        const char* lim = (const char*)cur + BZ_PF_AHEAD;
        if (lim > end) lim = end;
        for (; next < lim; next += 64) __builtin_prefetch(next, 0, 2);
    }
};
#define BZ_MB 4                         /* rows of x per unpacked weight vector */
#define BZ_GBYTES (BZ_GS * BZ_BITS / 8) /* packed bytes per group */

#if BZ_HALF
typedef uint16_t stype;
#include "f16.h"
#else
typedef float stype;
#endif

#endif  // BZ_QMM_COMMON_H
