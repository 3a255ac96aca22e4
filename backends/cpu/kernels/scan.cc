// Cumulative sum along one axis of a contiguous array, for the cpu backend's
// ``cumulative_sum`` library op (backends/cpu/scan.py describes and builds it).
// Parameter: BZ_SYMBOL (the entry point's name).
//
// The array is (outer, n, inner) around the axis. inner > 1: each column strip is summed
// in order along the axis, vectorized across the strip (numpy's order: its values bit
// for bit). inner == 1: a row is split into fixed blocks of BZ_BLOCK elements; the
// blocks' totals are summed in parallel, prefixed in order, then each block is scanned
// from its offset, 8 elements at a time with an in-register prefix (3 shift-and-add
// steps) and one carry. float32 rows are summed in float64 and each sum rounded once:
// the error of every element is independent of the block it is in (a moving average as
// c[i + w] - c[i] is as accurate across a block edge as inside one). The blocks and the
// vector order are fixed by the shape alone, so any thread count gives the same bits.
#ifndef BZ_SYMBOL
#error "scan: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define BZ_BLOCK (int64_t(1) << 15)

typedef double vd __attribute__((vector_size(64)));   // 8 lanes
typedef int64_t vl __attribute__((vector_size(64)));  // 8 lanes (-fwrapv: wrapping sums)

// inclusive prefix sums within one vector of 8 lanes
template <typename V>
static inline V prefix(V x) {
    const V z = {};
    x += __builtin_shufflevector(x, z, 8, 0, 1, 2, 3, 4, 5, 6);
    x += __builtin_shufflevector(x, z, 8, 9, 0, 1, 2, 3, 4, 5);
    x += __builtin_shufflevector(x, z, 8, 9, 10, 11, 0, 1, 2, 3);
    return x;
}

// 8 elements of In as the accumulator's vector V, and back to Out
template <typename V, typename In>
static inline V load8(const In* p) {
    typedef In vin __attribute__((vector_size(8 * sizeof(In))));
    vin v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, V);
}
template <typename Out, typename V>
static inline void store8(Out* p, V v) {
    typedef Out vout __attribute__((vector_size(8 * sizeof(Out))));
    const vout o = __builtin_convertvector(v, vout);
    std::memcpy(p, &o, sizeof o);
}

// y[i] = carry + x[0] + ... + x[i] for i < n, summed in Acc (V: 8 of them) and rounded
// once to Out; returns the last sum (carry when n == 0)
template <typename V, typename Acc, typename Out, typename In>
static Acc scan_run(const In* x, Out* y, int64_t n, Acc carry) {
    int64_t i = 0;
    V c = (V){} + carry;
    for (; i + 8 <= n; i += 8) {
        const V v = prefix(load8<V>(x + i)) + c;
        store8(y + i, v);
        c = (V){} + v[7];
    }
    Acc acc = c[0];
    for (; i < n; ++i) {
        acc += (Acc)x[i];
        y[i] = (Out)acc;
    }
    return acc;
}

template <typename V, typename Acc, typename In>
static Acc total(const In* x, int64_t n) {
    V a0 = {}, a1 = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 += load8<V>(x + i);
        a1 += load8<V>(x + i + 8);
    }
    for (; i + 8 <= n; i += 8) a0 += load8<V>(x + i);
    a0 += a1;
    Acc s = 0;
    for (int k = 0; k < 8; ++k) s += a0[k];
    for (; i < n; ++i) s += (Acc)x[i];
    return s;
}

template <typename V, typename Acc, typename Out, typename In>
static void scan(const In* x, Out* y, int64_t nt, int64_t outer, int64_t n, int64_t inner,
                 int64_t initial) {
    const int64_t ny = n + initial;  // output length along the axis
    if (inner > 1) {
        const int64_t strip = 256, strips = (inner + strip - 1) / strip;
#pragma omp parallel for num_threads((int)nt) if (nt > 1 && outer * n * inner >= (1 << 16)) \
    schedule(static)
        for (int64_t t = 0; t < outer * strips; ++t) {
            const int64_t o = t / strips, j0 = (t % strips) * strip;
            const int64_t w = inner - j0 < strip ? inner - j0 : strip;
            const In* xs = x + o * n * inner + j0;
            Out* ys = y + o * ny * inner + j0;
            if (initial) {
                for (int64_t j = 0; j < w; ++j) ys[j] = 0;
                ys += inner;
            }
            if (n == 0) continue;
            for (int64_t j = 0; j < w; ++j) ys[j] = (Out)xs[j];
            for (int64_t i = 1; i < n; ++i) {
                const In* xr = xs + i * inner;
                const Out* prev = ys + (i - 1) * inner;
                Out* yr = ys + i * inner;
                for (int64_t j = 0; j < w; ++j) yr[j] = prev[j] + (Out)xr[j];
            }
        }
        return;
    }
    if (n <= BZ_BLOCK) {  // rows in parallel, each one run
#pragma omp parallel for num_threads((int)nt) if (nt > 1 && outer > 1 && outer * n >= (1 << 16)) \
    schedule(static)
        for (int64_t o = 0; o < outer; ++o) {
            Out* yr = y + o * ny;
            if (initial) *yr++ = 0;
            scan_run<V>(x + o * n, yr, n, (Acc)0);
        }
        return;
    }
    const int64_t nb = (n + BZ_BLOCK - 1) / BZ_BLOCK;
    Acc* off = (Acc*)std::malloc(sizeof(Acc) * nb);
    for (int64_t o = 0; o < outer; ++o) {
        const In* xr = x + o * n;
        Out* yr = y + o * ny;
        if (initial) *yr++ = 0;
#pragma omp parallel for num_threads((int)nt) if (nt > 1) schedule(static)
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t lo = b * BZ_BLOCK, len = n - lo < BZ_BLOCK ? n - lo : BZ_BLOCK;
            off[b] = total<V, Acc>(xr + lo, len);
        }
        Acc run = 0;  // the blocks' totals, prefixed in order (exclusive)
        for (int64_t b = 0; b < nb; ++b) {
            const Acc s = off[b];
            off[b] = run;
            run += s;
        }
#pragma omp parallel for num_threads((int)nt) if (nt > 1) schedule(static)
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t lo = b * BZ_BLOCK, len = n - lo < BZ_BLOCK ? n - lo : BZ_BLOCK;
            scan_run<V>(xr + lo, yr + lo, len, off[b]);
        }
    }
    std::free(off);
}

// Args (int64): threads, dtype (0 float32, 1 float64, 2 int64, 3 int32 -> int64), outer,
// n, inner, include_initial (a 0 first along the axis). Buffers: x, out.
extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t nt = a[0], code = a[1], outer = a[2], n = a[3], inner = a[4], init = a[5];
    switch (code) {
        case 0:  // float32 summed in float64 along rows, rounded once per element
            scan<vd, double>((const float*)bufs[0], (float*)bufs[1], nt, outer, n, inner, init);
            break;
        case 1:
            scan<vd, double>((const double*)bufs[0], (double*)bufs[1], nt, outer, n, inner, init);
            break;
        case 2:
            scan<vl, int64_t>((const int64_t*)bufs[0], (int64_t*)bufs[1], nt, outer, n, inner,
                              init);
            break;
        case 3:
            scan<vl, int64_t>((const int32_t*)bufs[0], (int64_t*)bufs[1], nt, outer, n, inner,
                              init);
            break;
    }
}
