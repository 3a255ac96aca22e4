// Float32 rotary position embedding for the cpu backend (backends/cpu/rope.py describes
// and builds it). Parameters: BZ_SYMBOL (the entry point's name); BZ_MVEC, 1 where
// glibc's libmvec has SIMD cosf and sinf.
#if !defined(BZ_SYMBOL) || !defined(BZ_MVEC)
#error "rope: define BZ_SYMBOL and BZ_MVEC"
#endif
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
extern "C" {
#if BZ_MVEC
#pragma omp declare simd notinbranch
#endif
float cosf(float);
#if BZ_MVEC
#pragma omp declare simd notinbranch
#endif
float sinf(float);
double pow(double, double);
}

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], R0 = a[1], R1 = a[2], T = a[3], D = a[4], dims = a[5];
    const int64_t trad = a[6];
    double base, scale_d;
    std::memcpy(&base, &a[7], sizeof base);
    std::memcpy(&scale_d, &a[8], sizeof scale_d);
    const int64_t* xs = a + 10;
    const float* X = (const float*)bufs[0] + xs[0];
    // NB offsets (1, or one per batch entry: a[16]), each serving a[17] leading rows, a[18]
    // elements apart in the offset buffer
    const int64_t NB = a[16], bdiv = a[17], ostride = a[18];
    std::vector<int64_t> off((size_t)NB);
    for (int64_t b = 0; b < NB; ++b) {
        const int64_t at = a[15] + b * ostride;
        off[b] = a[9] == 4 ? (int64_t)((const int32_t*)bufs[1])[at] : ((const int64_t*)bufs[1])[at];
    }
    float* O = (float*)bufs[2];
    const int64_t half = dims / 2, rows = R0 * R1 * T;
    const float scale = (float)scale_d;
    std::vector<float> cs((size_t)(NB * T * half) + 1), sn((size_t)(NB * T * half) + 1);
    // the frequencies of the last (base, dims) this thread saw, kept (a pow per frequency took
    // most of a decode step's rope call; plain arrays: no destructor at thread exit, which
    // would outlive an unloaded kernel); the region reads them through invp
    constexpr int64_t kKept = 512;
    thread_local float kept[kKept];
    thread_local double kept_base = 0.0;
    thread_local int64_t kept_dims = -1;
    std::vector<float> own(half > kKept ? (size_t)half : 0);
    float* invp = half > kKept ? own.data() : kept;
    if (half > kKept || kept_dims != dims || kept_base != base) {
        for (int64_t i = 0; i < half; ++i) invp[i] = (float)pow(base, (-(double)i * 2.0) / dims);
        if (half <= kKept) {
            kept_base = base;
            kept_dims = dims;
        }
    }
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (int64_t bt = 0; bt < NB * T; ++bt) {
            const int64_t t = bt % T;
            const float pos = (float)(off[bt / T] + t) * scale;
            float *c = cs.data() + bt * half, *s = sn.data() + bt * half;
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
                const float th = pos * invp[i];
                c[i] = cosf(th);
                s[i] = sinf(th);
            }
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = r % T, r1 = (r / T) % R1, r0 = r / (T * R1);
            const int64_t bt = (NB > 1 ? (r / T) / bdiv * T : 0) + t;  // its table row
            const float* x = X + r0 * xs[1] + r1 * xs[2] + t * xs[3];
            const int64_t sd = xs[4];
            float* o = O + r * D;
            const float *c = cs.data() + bt * half, *s = sn.data() + bt * half;
            if (trad) {
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[(2 * i) * sd], x1 = x[(2 * i + 1) * sd];
                    o[2 * i] = x0 * c[i] + x1 * -s[i];
                    o[2 * i + 1] = x1 * c[i] + x0 * s[i];
                }
            } else if (sd == 1) {
#pragma omp simd
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[i], x1 = x[i + half];
                    o[i] = x0 * c[i] + x1 * -s[i];
                    o[i + half] = x1 * c[i] + x0 * s[i];
                }
            } else {
                for (int64_t i = 0; i < half; ++i) {
                    const float x0 = x[i * sd], x1 = x[(i + half) * sd];
                    o[i] = x0 * c[i] + x1 * -s[i];
                    o[i + half] = x1 * c[i] + x0 * s[i];
                }
            }
            for (int64_t d = dims; d < D; ++d) o[d] = x[d * sd];
        }
    }
}
