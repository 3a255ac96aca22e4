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
    const int64_t half = dims / 2, rows = R0 * R1 * T, entries = NB * T * half;
    const float scale = (float)scale_d;
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
    // the last cos/sin table this thread made, kept with what it depends on: a decode step
    // ropes q and k of every layer at the same positions (60 calls, one table). Plain arrays
    // again; tables larger than kTable entries (long pre-fills) are made per call.
    constexpr int64_t kTable = 4096, kOffs = 64;
    thread_local float table_c[kTable], table_s[kTable];
    thread_local int64_t table_off[kOffs];
    thread_local int64_t table_nb = -1, table_t = -1, table_dims = -1;
    thread_local double table_base = 0.0, table_scale = 0.0;
    const bool keep = entries <= kTable && NB <= kOffs;
    bool hit = keep && table_nb == NB && table_t == T && table_dims == dims && table_base == base &&
               table_scale == scale_d;
    for (int64_t b = 0; hit && b < NB; ++b) hit = table_off[b] == off[b];
    std::vector<float> cs(keep ? 0 : (size_t)entries + 1), sn(keep ? 0 : (size_t)entries + 1);
    float* const ctab = keep ? table_c : cs.data();
    float* const stab = keep ? table_s : sn.data();
    if (keep && !hit) table_nb = -1; /* (valid again once filled, below) */
#pragma omp parallel num_threads((int)nt) if (nt > 1)
    {
        if (!hit) {
#pragma omp for schedule(static)
            for (int64_t bt = 0; bt < NB * T; ++bt) {
                const int64_t t = bt % T;
                const float pos = (float)(off[bt / T] + t) * scale;
                float *c = ctab + bt * half, *s = stab + bt * half;
                /* two loops: with cosf and sinf of one angle in one loop gcc calls the
                   scalar sincosf (no SIMD variant) instead of libmvec's vector cosf, sinf */
#pragma omp simd
                for (int64_t i = 0; i < half; ++i) c[i] = cosf(pos * invp[i]);
#pragma omp simd
                for (int64_t i = 0; i < half; ++i) s[i] = sinf(pos * invp[i]);
            }
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = r % T, r1 = (r / T) % R1, r0 = r / (T * R1);
            const int64_t bt = (NB > 1 ? (r / T) / bdiv * T : 0) + t;  // its table row
            const float* x = X + r0 * xs[1] + r1 * xs[2] + t * xs[3];
            const int64_t sd = xs[4];
            float* o = O + r * D;
            const float *c = ctab + bt * half, *s = stab + bt * half;
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
    if (keep && !hit) {
        for (int64_t b = 0; b < NB; ++b) table_off[b] = off[b];
        table_nb = NB;
        table_t = T;
        table_dims = dims;
        table_base = base;
        table_scale = scale_d;
    }
}
