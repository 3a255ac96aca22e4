// Convolution helpers for the cpu backend's ``conv`` library op (backends/cpu/conv.py
// describes and builds them), float32, channels-last x (N, D1, D2, D3, C) (fewer spatial
// dims padded with size-1 dims in front). Parameter: BZ_SYMBOL (the entry point's name).
//
// Mode 2, implicit GEMM (no im2col matrix): a register tile of kRows output positions x kVec
// SIMD vectors of output channels (gemm_tile.h's WX: 6 x 64 on AVX-512, 6 x 16 on AVX2, 8 x 8
// on NEON), per tap and input channel one broadcast of x (read in place through kRows row
// pointers, a zero row for a padded tap) against the weight packed in panels of kVec * L output
// channels; each output sums its taps and channels in one fixed order (the same bits at any thread
// count). The epilogue adds the bias, an optional residual and applies the activation before the
// one store. Mode 1, depthwise (groups == C, one output channel per group): out[n, o, c] = sum over
// taps of x[n, o*s + k*d - lo, c] * w[k, c], the taps in order (one chain per output:
// the same bits for any thread count), vectorized across channels.
#ifndef BZ_SYMBOL
#error "conv: define BZ_SYMBOL (the kernel's name)"
#endif
#include <cstdint>
#include <cstdlib>
#include <cstring>
extern "C" int omp_get_thread_num(void);
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)) || \
    (defined(__aarch64__) && defined(__ARM_NEON))
#include "gemm_tile.h"
#else
#define BZ_WX_ISA 0
// No SIMD FMA (x86-64 baseline): 4 lanes through GCC's vector extension, each multiply-add
// a fused one (fmaf) so that every tier sums and rounds alike.
struct WX {
    typedef float F __attribute__((vector_size(16)));
    typedef int K;
    enum { L = 4 };
    static inline K mask(int64_t n) { return (int)n; }
    static inline F load(K, const float* p) { return loadu(p); }
    static inline F loadu(const float* p) {
        F v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    static inline F set1(float v) { return F{v, v, v, v}; }
    static inline F fma(F a, F b, F c) {
        F r;
        for (int i = 0; i < 4; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
        return r;
    }
    static inline F zero() { return F{0.0f, 0.0f, 0.0f, 0.0f}; }
    static inline F add(F a, F b) { return a + b; }
    static inline F max(F a, F b) { return a > b ? a : b; }
    static inline F min(F a, F b) { return a < b ? a : b; }
    static inline void store(float* p, F v) { std::memcpy(p, &v, sizeof v); }
};
#include "dispatch.h"
#endif
#include "taps.h"
#include "work_split.h"

namespace {

struct Geometry {
    int64_t n, c, in[3], k[3], out[3], stride[3], dil[3], lo[3];
};

Geometry geometry(const int64_t* a) {
    Geometry g;
    g.n = a[2];
    g.c = a[3];
    for (int i = 0; i < 3; ++i) {
        g.in[i] = a[4 + i];
        g.k[i] = a[7 + i];
        g.out[i] = a[10 + i];
        g.stride[i] = a[13 + i];
        g.dil[i] = a[16 + i];
        g.lo[i] = a[19 + i];
    }
    return g;
}

// An output row's batch index and position (row-major over N, out[0], out[1], out[2]).
struct RowPos {
    int64_t b, o0, o1, o2;
};
inline RowPos row_pos(const Geometry& g, int64_t r) {
    RowPos q;
    q.o2 = r % g.out[2];
    r /= g.out[2];
    q.o1 = r % g.out[1];
    r /= g.out[1];
    q.o0 = r % g.out[0];
    q.b = r / g.out[0];
    return q;
}
// The next row's position (no divisions: a gather walks rows in order).
inline void next_row(const Geometry& g, RowPos& q) {
    if (++q.o2 < g.out[2]) return;
    q.o2 = 0;
    if (++q.o1 < g.out[1]) return;
    q.o1 = 0;
    if (++q.o0 < g.out[0]) return;
    q.o0 = 0;
    ++q.b;
}

// (the epilogue, declared here for depthwise; the implicit GEMM's tile applies its own)
struct Epilogue {
    int64_t cout;
    int64_t ldo;            // out's row stride (>= cout: a slice of a wider output)
    const float* bias;      // (C_out,) or null
    const float* residual;  // (rows, C_out) or null
    int64_t act;
    float lo, hi;
};

inline void epilogue_row(float* o, int64_t n, const float* bias, const float* res,
                         const Epilogue& ep) {  // simple loops (vectorized); NaN stays
    if (bias)
        for (int64_t j = 0; j < n; ++j) o[j] += bias[j];
    if (res)
        for (int64_t j = 0; j < n; ++j) o[j] += res[j];
    if (ep.act == 1)
        for (int64_t j = 0; j < n; ++j) o[j] = o[j] < 0.0f ? 0.0f : o[j];
    else if (ep.act == 2)
        for (int64_t j = 0; j < n; ++j) o[j] = o[j] < ep.lo ? ep.lo : (o[j] > ep.hi ? ep.hi : o[j]);
}

// w: (taps, C) when ``wt`` (the replay plan's derived copy), else (C, taps) as stored.
void depthwise(const Geometry& g, const float* x, const float* w, bool wt, float* out,
               const Epilogue& ep, int64_t threads) {
    const int64_t rows = g.n * g.out[0] * g.out[1] * g.out[2];
    const int64_t C = g.c, taps = g.k[0] * g.k[1] * g.k[2];
#pragma omp parallel for num_threads((int)threads) if (threads > 1) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const RowPos q = row_pos(g, r);
        const int64_t b = q.b, o0 = q.o0, o1 = q.o1, o2 = q.o2;
        float* dst = out + r * ep.ldo;
        for (int64_t c = 0; c < C; ++c) dst[c] = 0.0f;
        int64_t t = 0;
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
            const int64_t i0 = o0 * g.stride[0] + k0 * g.dil[0] - g.lo[0];
            for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                const int64_t i1 = o1 * g.stride[1] + k1 * g.dil[1] - g.lo[1];
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2, ++t) {
                    const int64_t i2 = o2 * g.stride[2] + k2 * g.dil[2] - g.lo[2];
                    if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 ||
                        i2 >= g.in[2])
                        continue;  // a padded tap adds +0.0f: skipping it keeps the bits
                    const float* src = x + (((b * g.in[0] + i0) * g.in[1] + i1) * g.in[2] + i2) * C;
                    if (wt) {
                        const float* wr = w + t * C;
#pragma omp simd
                        for (int64_t c = 0; c < C; ++c) dst[c] += src[c] * wr[c];
                    } else {
                        for (int64_t c = 0; c < C; ++c) dst[c] += src[c] * w[c * taps + t];
                    }
                }
            }
        }
        epilogue_row(dst, C, ep.bias, ep.residual ? ep.residual + r * C : nullptr, ep);
    }
}

// w (C_out, taps * cg) as stored, packed per group into panels of kCols output channels
// (see implicit_gemm); the replay plan's derived buffer, or made per call without one.
template <int Cols>
void pack_panels(const float* w, int64_t groups, int64_t og, int64_t kk, float* panels,
                 int64_t threads) {
    const int64_t nb = (og + Cols - 1) / Cols;
#pragma omp parallel for num_threads((int)threads) if (threads > 1) schedule(static)
    for (int64_t pb = 0; pb < groups * nb; ++pb) {
        const int64_t gi = pb / nb, j0 = (pb % nb) * Cols;
        float* dst = panels + pb * kk * Cols;
        for (int64_t q = 0; q < kk; ++q)
            for (int64_t jj = 0; jj < Cols; ++jj)
                dst[q * Cols + jj] = j0 + jj < og ? w[(gi * og + j0 + jj) * kk + q] : 0.0f;
    }
}

// The register tile: kRows output rows x kVec vectors of output channels. AVX-512: 6 x 4
// (24 of its 32 registers; per channel 4 loads + 6 broadcasts for 24 FMAs: full FMA rate in
// an L1-resident loop, where 12 x 2 -- 14 loads -- reached 95 %); AVX2 6 x 2 (12 of 16).
#if BZ_WX_ISA == 2
constexpr int kRows = 6, kVec = 4;
#elif BZ_WX_ISA == 3
constexpr int kRows = 8, kVec = 2;
#elif BZ_WX_ISA == 1
constexpr int kRows = 6, kVec = 2;
#else
constexpr int kRows = 4, kVec = 2;
#endif
constexpr int kCols = kVec * WX::L;
// k per chunk: a 256 KiB slice of a panel (L2; the tile streams it through L1 well: chunks of
// an L1-sized 24 KiB slice re-read and re-stored every tile's partial sums per chunk, 8 % slower
// over ResNet-50's shapes)
constexpr int64_t kChunk = 256 * 1024 / (kCols * 4);

// The element of x (element strides st: batch, d0, d1, d2, channel) where output row r's taps
// start, taps in order, or -1 (padding): the row's coordinates once, then one addition per tap
// and dim.
inline void tap_offsets(const Geometry& g, const int64_t* st, const RowPos& q, int64_t* offs) {
    const int64_t s0 = q.o0 * g.stride[0] - g.lo[0], s1 = q.o1 * g.stride[1] - g.lo[1];
    const int64_t s2 = q.o2 * g.stride[2] - g.lo[2];
    for (int64_t k0 = 0, i0 = s0; k0 < g.k[0]; ++k0, i0 += g.dil[0])
        for (int64_t k1 = 0, i1 = s1; k1 < g.k[1]; ++k1, i1 += g.dil[1])
            for (int64_t k2 = 0, i2 = s2; k2 < g.k[2]; ++k2, i2 += g.dil[2]) {
                const bool in =
                    i0 >= 0 && i0 < g.in[0] && i1 >= 0 && i1 < g.in[1] && i2 >= 0 && i2 < g.in[2];
                *offs++ = in ? q.b * st[0] + i0 * st[1] + i1 * st[2] + i2 * st[3] : -1;
            }
}

// Tap offsets of a band's rows: a row whose taps all fall inside x (most of them) is its first
// tap's element plus each tap's constant distance from it (one addition per tap); a row near
// the border takes tap_offsets. Geometry in locals: the int64 stores to the offsets may alias
// g and st, which the compiler would otherwise reload after each one.
struct TapTable {
    int64_t taps, b0, st1, st2, st3, str0, str1, str2, lo0, lo1, lo2, hi0, hi1, hi2;
    int64_t* delta;  // (taps,): each tap's distance from the first

    TapTable(const Geometry& g, const int64_t* st, int64_t* scratch) : delta(scratch) {
        taps = g.k[0] * g.k[1] * g.k[2];
        b0 = st[0];
        st1 = st[1];
        st2 = st[2];
        st3 = st[3];
        str0 = g.stride[0];
        str1 = g.stride[1];
        str2 = g.stride[2];
        lo0 = g.lo[0];
        lo1 = g.lo[1];
        lo2 = g.lo[2];
        // a row is inside when its first tap's coordinates lie in [0, in - span]
        hi0 = g.in[0] - (g.k[0] - 1) * g.dil[0];
        hi1 = g.in[1] - (g.k[1] - 1) * g.dil[1];
        hi2 = g.in[2] - (g.k[2] - 1) * g.dil[2];
        int64_t t = 0;
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
            for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2)
                    delta[t++] = k0 * g.dil[0] * st1 + k1 * g.dil[1] * st2 + k2 * g.dil[2] * st3;
    }
    void row(const Geometry& g, const int64_t* st, const RowPos& q, int64_t* offs) const {
        const int64_t s0 = q.o0 * str0 - lo0, s1 = q.o1 * str1 - lo1, s2 = q.o2 * str2 - lo2;
        if (s0 < 0 || s0 >= hi0 || s1 < 0 || s1 >= hi1 || s2 < 0 || s2 >= hi2) {
            tap_offsets(g, st, q, offs);
            return;
        }
        const int64_t o = q.b * b0 + s0 * st1 + s1 * st2 + s2 * st3, n = taps;
        const int64_t* d = delta;
        for (int64_t t = 0; t < n; ++t) offs[t] = o + d[t];
    }
};

// Row r of the im2col matrix (taps * C floats, taps in order) from channels-last x (contiguous
// channels, position stride st[3]): the k2 taps of a kernel row that fall inside x are one
// contiguous run of k2 * C floats (no dilation along the last dim); padded taps are zeros.
inline void im2col_row(const Geometry& g, const float* x, const int64_t* st, const RowPos& q,
                       float* dst) {
    const int64_t c = g.c, s2 = q.o2 * g.stride[2] - g.lo[2];
    const bool runs = g.dil[2] == 1 && st[3] == c && s2 >= 0 && s2 + g.k[2] <= g.in[2];
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
        const int64_t i0 = q.o0 * g.stride[0] + k0 * g.dil[0] - g.lo[0];
        for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
            const int64_t i1 = q.o1 * g.stride[1] + k1 * g.dil[1] - g.lo[1];
            const bool inside = i0 >= 0 && i0 < g.in[0] && i1 >= 0 && i1 < g.in[1];
            const float* base = x + q.b * st[0] + i0 * st[1] + i1 * st[2];
            if (inside && runs) {
                const float* src = base + s2 * st[3];  // (a loop: a call of memcpy costs more
                for (int64_t j = 0, n = g.k[2] * c; j < n; ++j) dst[j] = src[j];  // than 9 floats)
                dst += g.k[2] * c;
                continue;
            }
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2, dst += c) {
                const int64_t i2 = s2 + k2 * g.dil[2];
                if (!inside || i2 < 0 || i2 >= g.in[2])
                    for (int64_t j = 0; j < c; ++j) dst[j] = 0.0f;
                else
                    for (int64_t j = 0; j < c; ++j) dst[j] = base[i2 * st[3] + j];
            }
        }
    }
}

// Epilogue (struct Epilogue above): act 0 none, 1 ReLU, 2 clip to [lo, hi], after bias +
// residual.

// One tile over the flattened k = t * cg + c in [k0, k1) (row r's element c of tap t at
// ptrs[t * kRows + r][c * S]: S = 1 reading x in place, kRows from packed rows): ``first`` starts
// from zero, else from the partial sums the previous chunk stored in out (float32 in memory is the
// register value: the same bits as one chain); ``last`` applies the epilogue, else stores the sums.
template <int R, int S, int V>
void tile(const float** ptrs, int64_t cg, int64_t k0, int64_t k1, const float* panel, int64_t nv,
          float* out, const float* res, int64_t ldo, const float* bias, const Epilogue& ep,
          bool first, bool last) {
    WX::F acc[R][V];
    alignas(64) float buf[R][kCols];  // every index constant: acc stays in registers
    const bool whole = nv == V * WX::L;
    if (last) {  // the lines the epilogue reads (residual) and writes: fetched while the tile
        // sums (a residual computed several layers back is out of L2: 2-9 % on ResNet-50's
        // residual 1x1s with cold caches; a prefetch never faults)
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) {
                if (res) __builtin_prefetch(res + r * ep.cout + v * WX::L, 0, 3);
                __builtin_prefetch(out + r * ldo + v * WX::L, 1, 3);
            }
    }
    if (first) {
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) acc[r][v] = WX::zero();
    } else if (whole) {
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) acc[r][v] = WX::loadu(out + r * ldo + v * WX::L);
    } else {
        for (int r = 0; r < R; ++r)
            for (int64_t j = 0; j < V * WX::L; ++j) buf[r][j] = j < nv ? out[r * ldo + j] : 0.0f;
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) acc[r][v] = WX::loadu(buf[r] + v * WX::L);
    }
    for (int64_t t = k0 / cg; t * cg < k1; ++t) {
        const float* p[R];
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) p[r] = ptrs[t * kRows + r];
        const int64_t cs = k0 > t * cg ? k0 - t * cg : 0, ce = k1 - t * cg < cg ? k1 - t * cg : cg;
        const float* bp = panel + (t * cg + cs) * kCols;
        for (int64_t c = cs; c < ce; ++c, bp += kCols) {
            WX::F b[V];
            for (int v = 0; v < V; ++v) b[v] = WX::loadu(bp + v * WX::L);
#pragma GCC unroll 12
            for (int r = 0; r < R; ++r) {
                const WX::F a = WX::set1(p[r][c * S]);
                for (int v = 0; v < V; ++v) acc[r][v] = WX::fma(a, b[v], acc[r][v]);
            }
        }
    }
    if (!last) {  // partial sums: stored as they are
        if (whole) {
#pragma GCC unroll 12
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v) WX::store(out + r * ldo + v * WX::L, acc[r][v]);
            return;
        }
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) WX::store(buf[r] + v * WX::L, acc[r][v]);
        for (int r = 0; r < R; ++r)
            for (int64_t j = 0; j < nv; ++j) out[r * ldo + j] = buf[r][j];
        return;
    }
    if (whole) {  // a whole panel: the epilogue on the registers, then the stores
        // (ep's fields as locals: a float store may alias ep.lo / ep.hi, so the compiler
        // would reload every field after each store)
        const WX::F lo = WX::set1(ep.lo), hi = WX::set1(ep.hi);
        const int64_t act = ep.act, lr = ep.cout;
        WX::F bb[V];
        for (int v = 0; v < V; ++v) bb[v] = bias ? WX::loadu(bias + v * WX::L) : WX::zero();
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) {
                WX::F y = acc[r][v];
                if (bias) y = WX::add(y, bb[v]);
                if (res) y = WX::add(y, WX::loadu(res + r * lr + v * WX::L));
                if (act == 1)  // (max/min return their second operand for a NaN: it stays)
                    y = WX::max(WX::zero(), y);
                else if (act == 2)
                    y = WX::min(hi, WX::max(lo, y));
                WX::store(out + r * ldo + v * WX::L, y);
            }
        return;
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) WX::store(buf[r] + v * WX::L, acc[r][v]);
    for (int r = 0; r < R; ++r) {  // simple loops (vectorized): copy, + bias, + residual, act
        float* o = out + r * ldo;
        const float* y = buf[r];
        for (int64_t j = 0; j < nv; ++j) o[j] = y[j];
        if (bias)
            for (int64_t j = 0; j < nv; ++j) o[j] += bias[j];
        if (res)
            for (int64_t j = 0; j < nv; ++j) o[j] += res[r * ep.cout + j];
        if (ep.act == 1)
            for (int64_t j = 0; j < nv; ++j) o[j] = o[j] < 0.0f ? 0.0f : o[j];  // NaN stays
        else if (ep.act == 2)
            for (int64_t j = 0; j < nv; ++j)
                o[j] = o[j] < ep.lo ? ep.lo : (o[j] > ep.hi ? ep.hi : o[j]);  // NaN stays
    }
}

// out (rows, C_out) = conv(x, w) (+ bias, residual, activation), the weight given packed per
// group into panels of kCols output channels (backends/cpu/conv.py packs them once per
// weight): panel p = group * nb + block holds (t * cg + c, j) at (t * cg + c) * kCols + j,
// zeros past the group's og channels.
//
// Work order: ``nbands`` bands of row blocks (kRows output rows each; sizes differing by at most
// one block), and per band every panel (items (band, panel), band-major, split evenly between
// the threads): a band's rows of x stay in L2 while all the output channels are computed from
// them (x is read from memory once, not once per panel), and per (band, panel) the K range in
// chunks whose slice of the panel stays in L2 across the band's row blocks. Each thread makes
// what its band needs once, in its own scratch: the tap offsets (band * kRows * taps), and with
// ``pack`` (one group) the band's rows (band * kRows * K floats): ``rowwise`` (few input
// channels) each row's taps as one row of K floats (im2col_row), else each block of kRows rows
// as (K, kRows) read through any element strides (rows a multiple of 4 KiB apart), the tile
// then broadcasting from one contiguous block. Without ``pack`` x is read in place (channels
// contiguous) through per-tap row pointers. All sum each output's k = t * cg + c in order: the
// same bits.
void implicit_gemm(const Geometry& g, const float* x, const int64_t* st, const float* panels,
                   float* out, int64_t groups, const Epilogue& ep, int64_t* offs_all, float* zeros,
                   float* pack_all, bool rowwise, int64_t nbands, int64_t threads) {
    const int64_t taps = g.k[0] * g.k[1] * g.k[2];
    const int64_t rows = g.n * g.out[0] * g.out[1] * g.out[2];
    const int64_t cg = g.c / groups;
    const int64_t og = ep.cout / groups, nb = (og + kCols - 1) / kCols;
    const int64_t nrb = (rows + kRows - 1) / kRows;
    const int64_t panel = taps * cg * kCols;
    const int64_t K = taps * cg;
    if (nbands > nrb) nbands = nrb;
    const int64_t band = (nrb + nbands - 1) / nbands, per_band = groups * nb;  // (at most)
    const int64_t total = nbands * per_band;
    const int64_t kc = K <= kChunk * 3 / 2 ? K : kChunk;
    for (int64_t c = 0; c < cg; ++c) zeros[c] = 0.0f;
    WorkSplit work(total, threads);
#pragma omp parallel num_threads((int)threads) if (threads > 1)
    {
        const int tid = omp_get_thread_num();
        int64_t* offs = offs_all + tid * band * kRows * taps;
        float* pack = pack_all ? pack_all + tid * band * kRows * K : nullptr;
        const float** ptrs = (const float**)std::malloc((size_t)(taps * kRows) * sizeof(float*));
        int64_t* delta = (int64_t*)std::malloc((size_t)taps * sizeof(int64_t));
        const TapTable table(g, st, delta);
        int64_t cur = -1;
        for (int64_t item; (item = work.next(tid)) >= 0;) {
            const int64_t bi = item / per_band, pb = item % per_band;
            const int64_t rb0 = bi * nrb / nbands, rb1 = (bi + 1) * nrb / nbands;
            if (bi != cur && rowwise) {  // this thread's first item of the band: its rows
                cur = bi;
                const int64_t r1 = rb1 * kRows < rows ? rb1 * kRows : rows;
                RowPos q = row_pos(g, rb0 * kRows);
                for (int64_t r = rb0 * kRows; r < r1; ++r, next_row(g, q))
                    im2col_row(g, x, st, q, pack + (r - rb0 * kRows) * K);
            } else if (bi != cur) {  // its offsets (and gathered rows)
                cur = bi;
                RowPos q = row_pos(g, rb0 * kRows);
                for (int64_t r = rb0 * kRows; r < rb1 * kRows; ++r, next_row(g, q)) {
                    int64_t* o = offs + (r - rb0 * kRows) * taps;
                    if (r < rows)
                        table.row(g, st, q, o);
                    else
                        for (int64_t t = 0; t < taps; ++t) o[t] = -1;
                }
                if (pack)  // per block, tap and row: cg floats to (c, row) of the (K, kRows) block
                    for (int64_t i = 0; i < rb1 - rb0; ++i) {
                        const int64_t* ob = offs + i * kRows * taps;
                        float* d = pack + i * kRows * K;
                        const int64_t s4 = st[4];
                        for (int64_t t = 0; t < taps; ++t, d += cg * kRows)
                            for (int64_t r = 0; r < kRows; ++r) {
                                const int64_t v = ob[r * taps + t];
                                if (v < 0) {
                                    for (int64_t c = 0; c < cg; ++c) d[c * kRows + r] = 0.0f;
                                    continue;
                                }
                                const float* src = x + v;
                                for (int64_t c = 0; c < cg; ++c) d[c * kRows + r] = src[c * s4];
                            }
                    }
            }
            const int64_t gi = pb / nb, j0 = (pb % nb) * kCols;
            const int64_t col = gi * og + j0, nv = og - j0 < kCols ? og - j0 : kCols;
            const float* bias = ep.bias ? ep.bias + col : nullptr;
            for (int64_t k0 = 0; k0 < K; k0 += kc) {
                const int64_t k1 = k0 + kc < K ? k0 + kc : K;
                const int64_t t0 = k0 / cg, t1 = (k1 - 1) / cg + 1;
                for (int64_t rb = rb0; rb < rb1; ++rb) {
                    const int64_t r0 = rb * kRows, R = rows - r0 < kRows ? rows - r0 : kRows;
                    float* o = out + r0 * ep.ldo + col;
                    const float* res = ep.residual ? ep.residual + r0 * ep.cout + col : nullptr;
                    if (pack) {  // one block of K: a single run of k (the same order)
                        for (int64_t r = 0; r < kRows; ++r)
                            ptrs[r] = pack + (rb - rb0) * kRows * K + r * (rowwise ? K : 1);
                    } else {
                        const int64_t* ob = offs + (rb - rb0) * kRows * taps;
                        for (int64_t t = t0; t < t1; ++t)
                            for (int64_t r = 0; r < kRows; ++r) {
                                const int64_t v = r < R ? ob[r * taps + t] : -1;
                                ptrs[t * kRows + r] = v < 0 ? zeros : x + v + gi * cg;
                            }
                    }
                    // the panel's vectors that hold channels (a narrow last panel: no FMAs
                    // on the padding; the same sums in the same order)
                    const int64_t nvec = (nv + WX::L - 1) / WX::L;
                    bz_dispatch<kRows>(R, [&](auto rc) {
                        constexpr int RC = decltype(rc)::value;
                        const float* pn = panels + pb * panel;
                        const bool f = k0 == 0, l = k1 == K;
                        bz_dispatch<kVec>(nvec, [&](auto vc) {
                            constexpr int VC = decltype(vc)::value;
                            if (pack && !rowwise)
                                tile<RC, kRows, VC>(ptrs, K, k0, k1, pn, nv, o, res, ep.ldo, bias,
                                                    ep, f, l);
                            else
                                tile<RC, 1, VC>(ptrs, rowwise ? K : cg, k0, k1, pn, nv, o, res,
                                                ep.ldo, bias, ep, f, l);
                        });
                    });
                }
            }
        }
        std::free(ptrs);
        std::free(delta);
    }
}

// m[c] = numpy's maximum of the nt taps' channel c, in order (NaN stays; -inf for no tap):
// 64 then 16 channels at a time (taps.h), the last few one by one
inline void max_taps(const float* const* tap, int64_t nt, int64_t O, float* m) {
    int64_t c = 0;
    const auto at = [&](int64_t t) { return tap[t] + c; };
    for (; c + 64 <= O; c += 64) tap_block<Max, 4>(m + c, at, nt);
    for (; c + 16 <= O; c += 16) tap_block<Max, 1>(m + c, at, nt);
    for (; c < O; ++c) {
        float a = Max::init();
        for (int64_t t = 0; t < nt; ++t) a = Max::add(a, tap[t][c]);
        m[c] = a;
    }
}

// Pooled line py of batch b (pool args pa as conv_pool's) from the convolution's lines, each
// line_floats long: a ring (wrap: its floats; line y at slot y % lines in it) or the whole
// result (wrap 0; batch b's lines base_b apart); each channel's taps in row-major order as
// kernels/pool.cc combines them (numpy's maximum, NaN staying; taps outside skipped); tap: the
// caller's room for one window's tap pointers and its rows' lines (kernel[0] * (kernel[1] + 1)).
inline void pool_line(const float* lines, int64_t wrap, int64_t base_b, int64_t line_floats,
                      int64_t OH, int64_t OW, int64_t O, const int64_t* pa, int64_t b, int64_t py,
                      float* out, const float** tap) {
    const int64_t pk0 = pa[0], pk1 = pa[1], ps0 = pa[2], ps1 = pa[3], pd0 = pa[4], pd1 = pa[5];
    const int64_t plo0 = pa[6], plo1 = pa[7], POH = pa[8], POW = pa[9];
    const int64_t ring_lines = wrap ? wrap / line_floats : 0;
    const float** row = tap + pk0 * pk1;  // the window rows' lines (the same for every px)
    int64_t nr = 0;
    for (int64_t i = 0; i < pk0; ++i) {
        const int64_t cy = py * ps0 - plo0 + i * pd0;
        if (cy >= 0 && cy < OH)
            row[nr++] = wrap ? lines + (cy % ring_lines) * line_floats
                             : lines + b * base_b + cy * line_floats;
    }
    for (int64_t px = 0; px < POW; ++px) {
        int64_t nt = 0;
        for (int64_t i = 0; i < nr; ++i)
            for (int64_t j = 0; j < pk1; ++j) {
                const int64_t cx = px * ps1 - plo1 + j * pd1;
                if (cx >= 0 && cx < OW) tap[nt++] = row[i] + cx * O;
            }
        max_taps(tap, nt, O, out + ((b * POH + py) * POW + px) * O);
    }
}

// attrs['pool'] (the conv_pool pass), modes 2 (x in place) and 5 (rows of runs), two spatial
// dims, one group: out = max_pool(conv(x)), pooled lines split between the threads; each
// computes the convolution's lines its windows read (the tile and epilogue of implicit_gemm,
// row by row the same bits) into a ring of lines in its scratch, in cache, and pools them
// there: the convolution's result is never written whole (a line at a thread's first pooled
// line may be computed by both threads). Pool args pa: kernel[2], stride[2], dilation[2],
// pad lo[2], pooled out[2]; the taps combined as kernels/pool.cc does (numpy's maximum).
void conv_pool(const Geometry& g, const float* x, const int64_t* st, const float* panels,
               float* out, const Epilogue& ep, const int64_t* pa, int64_t* offs_all, float* zeros,
               float* ring_all, int64_t threads) {
    const int64_t taps = g.k[0] * g.k[1] * g.k[2], cg = g.c, K = taps * cg;
    const int64_t O = ep.cout, nb = (O + kCols - 1) / kCols, panel = K * kCols;
    const int64_t OH = g.out[1], OW = g.out[2], owr = (OW + kRows - 1) / kRows * kRows;
    const int64_t pk0 = pa[0], pk1 = pa[1], ps0 = pa[2], ps1 = pa[3], pd0 = pa[4], pd1 = pa[5];
    const int64_t plo0 = pa[6], plo1 = pa[7], POH = pa[8], POW = pa[9];
    const int64_t R = (pk0 - 1) * pd0 + 1, lines = g.n * POH;  // ring lines; pooled lines
    const int64_t kc = K <= kChunk * 3 / 2 ? K : kChunk;
    for (int64_t c = 0; c < cg; ++c) zeros[c] = 0.0f;
    WorkSplit work(lines, threads);
#pragma omp parallel num_threads((int)threads) if (threads > 1)
    {
        const int tid = omp_get_thread_num();
        int64_t* offs = offs_all + tid * owr * taps;
        float* ring = ring_all + tid * R * OW * O;
        const float** ptrs = (const float**)std::malloc((size_t)(taps * kRows) * sizeof(float*));
        int64_t* delta = (int64_t*)std::malloc((size_t)(taps + R) * sizeof(int64_t));
        int64_t* held = delta + taps;  // the convolution line (b * OH + y) each ring line holds
        for (int64_t i = 0; i < R; ++i) held[i] = -1;
        const float** tap = (const float**)std::malloc((size_t)(pk0 * (pk1 + 1)) * sizeof(float*));
        const TapTable table(g, st, delta);
        for (int64_t l; (l = work.next(tid)) >= 0;) {
            const int64_t b = l / POH, py = l % POH;
            for (int64_t i = 0; i < pk0; ++i) {  // the convolution's lines the windows read
                const int64_t cy = py * ps0 - plo0 + i * pd0;
                if (cy < 0 || cy >= OH || held[cy % R] == b * OH + cy) continue;
                held[cy % R] = b * OH + cy;
                float* line = ring + (cy % R) * OW * O;
                RowPos q = row_pos(g, (b * OH + cy) * OW);
                for (int64_t r = 0; r < owr; ++r) {
                    int64_t* o = offs + r * taps;
                    if (r < OW) {
                        table.row(g, st, q, o);
                        next_row(g, q);
                    } else {
                        for (int64_t t = 0; t < taps; ++t) o[t] = -1;
                    }
                }
                for (int64_t p = 0; p < nb; ++p) {
                    const int64_t j0 = p * kCols, nv = O - j0 < kCols ? O - j0 : kCols;
                    const int64_t nvec = (nv + WX::L - 1) / WX::L;
                    const float* bias = ep.bias ? ep.bias + j0 : nullptr;
                    for (int64_t k0 = 0; k0 < K; k0 += kc) {
                        const int64_t k1 = k0 + kc < K ? k0 + kc : K;
                        const int64_t t0 = k0 / cg, t1 = (k1 - 1) / cg + 1;
                        for (int64_t r0 = 0; r0 < OW; r0 += kRows) {
                            const int64_t RR = OW - r0 < kRows ? OW - r0 : kRows;
                            const int64_t* ob = offs + r0 * taps;
                            for (int64_t t = t0; t < t1; ++t)
                                for (int64_t r = 0; r < kRows; ++r) {
                                    const int64_t v = r < RR ? ob[r * taps + t] : -1;
                                    ptrs[t * kRows + r] = v < 0 ? zeros : x + v;
                                }
                            float* o = line + r0 * O + j0;
                            const bool f = k0 == 0, last = k1 == K;
                            bz_dispatch<kRows>(RR, [&](auto rc) {
                                constexpr int RC = decltype(rc)::value;
                                bz_dispatch<kVec>(nvec, [&](auto vc) {
                                    constexpr int VC = decltype(vc)::value;
                                    tile<RC, 1, VC>(ptrs, cg, k0, k1, panels + p * panel, nv, o,
                                                    nullptr, O, bias, ep, f, last);
                                });
                            });
                        }
                    }
                }
            }
            pool_line(ring, R * OW * O, 0, OW * O, OH, OW, O, pa, b, py, out, tap);
        }
        std::free(ptrs);
        std::free(delta);
        std::free(tap);
    }
}

// One vector (T = WX::F) or one float (the last channels) of Winograd's transforms: the same
// additions in the same order either way.
template <class T>
inline T wino_ld(const float* p) {
    if constexpr (sizeof(T) == sizeof(float))
        return *p;
    else
        return WX::loadu(p);
}
template <class T>
inline void wino_st(float* p, T v) {
    if constexpr (sizeof(T) == sizeof(float))
        *p = v;
    else
        WX::store(p, v);
}
// V = B^T d B for channels [c, c + |T|) of the patch's 16 rows d (zeros outside x), xi's
// values sx apart
template <class T>
inline void wino_in(const float* const* d, int64_t c, float* v, int64_t sx) {
    T e[4][4];
    for (int q = 0; q < 4; ++q) {  // B^T d
        const T d0 = wino_ld<T>(d[q] + c), d1 = wino_ld<T>(d[4 + q] + c);
        const T d2 = wino_ld<T>(d[8 + q] + c), d3 = wino_ld<T>(d[12 + q] + c);
        e[0][q] = d0 - d2;
        e[1][q] = d1 + d2;
        e[2][q] = d2 - d1;
        e[3][q] = d1 - d3;
    }
    for (int r = 0; r < 4; ++r) {  // (B^T d) B
        wino_st<T>(v + (4 * r + 0) * sx + c, e[r][0] - e[r][2]);
        wino_st<T>(v + (4 * r + 1) * sx + c, e[r][1] + e[r][2]);
        wino_st<T>(v + (4 * r + 2) * sx + c, e[r][2] - e[r][1]);
        wino_st<T>(v + (4 * r + 3) * sx + c, e[r][1] - e[r][3]);
    }
}
struct WinoOut {
    const Epilogue& ep;
    const float* const* res;  // the 4 outputs' residual rows (null: none)
    float* const* y;          // the 4 outputs' rows
    bool right, below;        // whether the tile's second column / row exists
};
// Y = A^T M A for channels [c, c + |T|) (M's 16 values sx apart), + bias, + residual, the
// activation (as the tile's epilogue: NaN stays), stored
template <class T>
inline void wino_out(const float* m, int64_t sx, int64_t c, const WinoOut& w) {
    T s[2][4];
    for (int q = 0; q < 4; ++q) {  // A^T M
        const T u0 = wino_ld<T>(m + q * sx + c), u1 = wino_ld<T>(m + (4 + q) * sx + c);
        const T u2 = wino_ld<T>(m + (8 + q) * sx + c), u3 = wino_ld<T>(m + (12 + q) * sx + c);
        s[0][q] = u0 + u1 + u2;
        s[1][q] = u1 - u2 - u3;
    }
    T a[4];
    for (int r = 0; r < 2; ++r) {  // (A^T M) A
        a[2 * r] = s[r][0] + s[r][1] + s[r][2];
        a[2 * r + 1] = s[r][1] - s[r][2] - s[r][3];
    }
    const Epilogue& ep = w.ep;
    for (int k = 0; k < 4; ++k) {
        if (((k & 1) && !w.right) || ((k >> 1) && !w.below)) continue;
        T o = a[k];
        if (ep.bias) o = o + wino_ld<T>(ep.bias + c);
        if (w.res[k]) o = o + wino_ld<T>(w.res[k] + c);
        if constexpr (sizeof(T) == sizeof(float)) {
            if (ep.act == 1)
                o = o < 0.0f ? 0.0f : o;
            else if (ep.act == 2)
                o = o < ep.lo ? ep.lo : (o > ep.hi ? ep.hi : o);
        } else {
            if (ep.act == 1)
                o = WX::max(WX::zero(), o);
            else if (ep.act == 2)
                o = WX::min(WX::set1(ep.hi), WX::max(WX::set1(ep.lo), o));
        }
        wino_st<T>(w.y[k] + c, o);
    }
}

// Mode 7, Winograd F(2x2, 3x3) (a 3x3 kernel at stride 1, one group, x contiguous
// channels-last): each 2x2 block of outputs ("tile") reads the 4x4 patch of x around it (zeros
// outside x); V = B^T d B per channel, then for each of the 16 positions xi of the 4x4 the
// products M[xi] = V[xi] (tiles x C_in) . U[xi] (C_in x C_out) through the implicit GEMM's
// register tile, U = G g G^T the weight transformed (by backends/cpu/conv.py, packed in panels
// per xi), and the outputs Y = A^T M A + bias (+ residual), then the activation: 4 multiplies
// where the direct convolution does 9, at the price of the transforms' additions and float
// sums in another order (a few ulps from the direct convolution's; the same bits at any thread
// count and ISA: the transforms are additions in a fixed order, the products the tile's FMA
// chains). Tiles in bands of ``band`` (V and M of a band in the thread's scratch, in L2),
// the bands split between the threads.
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]
void winograd(const Geometry& g, const float* __restrict x, float* zeros, const float* U,
              float* out, const Epilogue& ep, float* scratch_all, int64_t band, int64_t threads) {
    const int64_t C = g.c, O = ep.cout, H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
    const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, tiles = g.n * TH * TW;
    const int64_t nb = (O + kCols - 1) / kCols, nbands = (tiles + band - 1) / band;
    // V and M of a band: (16, band, C) and (16, band, O) (the tile reads rows C apart and
    // writes rows O apart), or (band, 16, C) and (band, 16, O)
    const int64_t vC = band * C, mO = band * O;
    // V and M by tile (a tile's 16 values side by side) from 128 channels on: faster there
    // (28x28x128: 0.77x the time), slower below (56x56x64: 1.10x)
    const bool by_tile = C >= 128;
    const int64_t sxv = by_tile ? C : vC, siv = by_tile ? 16 * C : C;
    const int64_t sxm = by_tile ? O : mO, sim = by_tile ? 16 * O : O;
    Epilogue plain = ep;  // the products: stored as they are
    plain.bias = nullptr;
    plain.residual = nullptr;
    plain.act = 0;
    for (int64_t c = 0; c < C; ++c) zeros[c] = 0.0f;  // (a tap outside x)
    WorkSplit work(nbands, threads);
#pragma omp parallel num_threads((int)threads) if (threads > 1)
    {
        const int tid = omp_get_thread_num();
        float* V = scratch_all + tid * 16 * (vC + mO);
        float* M = V + 16 * vC;
        const float* ptrs[kRows];
        for (int64_t bi; (bi = work.next(tid)) >= 0;) {
            const int64_t t0 = bi * band, nt = tiles - t0 < band ? tiles - t0 : band;
            for (int64_t i = 0; i < nt; ++i) {  // the input transform
                const int64_t t = t0 + i, tx = t % TW, ty = t / TW % TH, b = t / TW / TH;
                const float* d[16];
                for (int r = 0; r < 4; ++r)
                    for (int q = 0; q < 4; ++q) {
                        const int64_t iy = 2 * ty + r - g.lo[1], ix = 2 * tx + q - g.lo[2];
                        d[4 * r + q] = iy >= 0 && iy < H && ix >= 0 && ix < W
                                           ? x + ((b * H + iy) * W + ix) * C
                                           : zeros;
                    }
                float* v = V + i * siv;
                int64_t c = 0;
                for (; c + WX::L <= C; c += WX::L) wino_in<WX::F>(d, c, v, sxv);
                for (; c < C; ++c) wino_in<float>(d, c, v, sxv);
            }
            for (int64_t xi = 0; xi < 16; ++xi)  // the 16 products, kRows tiles at a time
                for (int64_t p = 0; p < nb; ++p) {
                    const int64_t j0 = p * kCols, nv = O - j0 < kCols ? O - j0 : kCols;
                    const int64_t nvec = (nv + WX::L - 1) / WX::L;
                    const float* pn = U + (xi * nb + p) * C * kCols;
                    for (int64_t r0 = 0; r0 < nt; r0 += kRows) {
                        const int64_t R = nt - r0 < kRows ? nt - r0 : kRows;
                        for (int64_t r = 0; r < kRows; ++r)
                            ptrs[r] = V + xi * sxv + (r0 + (r < R ? r : 0)) * siv;
                        float* o = M + xi * sxm + r0 * sim + j0;
                        bz_dispatch<kRows>(R, [&](auto rc) {
                            constexpr int RC = decltype(rc)::value;
                            bz_dispatch<kVec>(nvec, [&](auto vc) {
                                constexpr int VC = decltype(vc)::value;
                                tile<RC, 1, VC>(ptrs, C, 0, C, pn, nv, o, nullptr, sim, nullptr,
                                                plain, true, true);
                            });
                        });
                    }
                }
            for (int64_t i = 0; i < nt; ++i) {  // the output transform and the epilogue
                const int64_t t = t0 + i, tx = t % TW, ty = t / TW % TH, b = t / TW / TH;
                const float* __restrict m = M + i * sim;
                const bool right = 2 * tx + 1 < OW, below = 2 * ty + 1 < OH;
                const int64_t row = (b * OH + 2 * ty) * OW + 2 * tx;  // the tile's first output
                float* y[4] = {out + row * ep.ldo, out + (row + 1) * ep.ldo,
                               out + (row + OW) * ep.ldo, out + (row + OW + 1) * ep.ldo};
                const float* res[4] = {nullptr, nullptr, nullptr, nullptr};
                if (ep.residual)
                    for (int k = 0; k < 4; ++k)
                        res[k] = ep.residual + (row + (k & 1) + (k >> 1) * OW) * O;
                const WinoOut wo{ep, res, y, right, below};
                int64_t c = 0;
                for (; c + WX::L <= O; c += WX::L) wino_out<WX::F>(m, sxm, c, wo);
                for (; c < O; ++c) wino_out<float>(m, sxm, c, wo);
            }
        }
    }
}

// Three planes' first n floats interleaved into dst (p0[0], p1[0], p2[0], p0[1], ...), one
// register (kLanes positions, taps.h) at a time (two two-vector shuffles per register written);
// returns the positions done (a multiple of kLanes).
inline int64_t interleave3(const float* p0, const float* p1, const float* p2, int64_t n,
                           float* dst) {
    constexpr int L = kLanes;
    typedef int I __attribute__((vector_size(L * sizeof(int))));
    // out k's lane j holds element e = L k + j of the stream: plane e % 3, position e / 3;
    // the first shuffle takes planes 0 and 1, the second puts plane 2's in
    I ab[3], c2[3];
    for (int k = 0; k < 3; ++k)
        for (int j = 0; j < L; ++j) {
            const int e = L * k + j, pos = e / 3, pl = e % 3;
            ab[k][j] = pl == 0 ? pos : pl == 1 ? L + pos : 0;
            c2[k][j] = pl == 2 ? L + pos : j;
        }
    int64_t i = 0;
    for (; i + L <= n; i += L, dst += 3 * L) {
        const VN a = load_vn(p0 + i), b = load_vn(p1 + i), c = load_vn(p2 + i);
        for (int k = 0; k < 3; ++k) {
            const VN o = __builtin_shuffle(__builtin_shuffle(a, b, ab[k]), c, c2[k]);
            std::memcpy(dst + L * k, &o, sizeof o);
        }
    }
    return i;
}

// x (element strides st: batch, d0, d1, d2, channel) copied channels-last into dst with each
// spatial dim i P[i] positions long, x's position 0 at lo[i] and zeros around it (a negative lo
// crops); dst's element strides to cl. Lines (b, p0, p1) split between the threads (no divisions
// per pixel), per line and channel a strided store of contiguous reads (no test per element).
void channels_last(const Geometry& g, const float* x, const int64_t* st, const int64_t* P,
                   const int64_t* lo, float* dst_all, int64_t* cl, int64_t threads) {
    const int64_t C = g.c, lines = g.n * P[0] * P[1];
#pragma omp parallel for num_threads((int)threads) if (threads > 1) schedule(static)
    for (int64_t l = 0; l < lines; ++l) {
        const int64_t bb = l / (P[0] * P[1]), i0 = l / P[1] % P[0] - lo[0], i1 = l % P[1] - lo[1];
        float* dst = dst_all + l * P[2] * C;
        if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1]) {
            for (int64_t j = 0; j < P[2] * C; ++j) dst[j] = 0.0f;
            continue;
        }
        const float* src = x + bb * st[0] + i0 * st[1] + i1 * st[2];
        // positions [a, e) of the line hold x, the rest zeros
        const int64_t a = lo[2] > 0 ? lo[2] : 0;
        int64_t e = lo[2] + g.in[2] < P[2] ? lo[2] + g.in[2] : P[2];
        if (e < a) e = a;  // (cropped past x's end: a line of zeros)
        for (int64_t j = 0; j < a * C; ++j) dst[j] = 0.0f;
        for (int64_t j = e * C; j < P[2] * C; ++j) dst[j] = 0.0f;
        if (st[4] == 1 && st[3] == C) {  // already channels-last: one run
            std::memcpy(dst + a * C, src + (a - lo[2]) * C, (size_t)((e - a) * C) * sizeof(float));
            continue;
        }
        if (C == 3 && st[3] == 1) {  // an RGB image's planes (NCHW): 16 positions at a time
            const float* s0 = src + (a - lo[2]);
            int64_t p2 = interleave3(s0, s0 + st[4], s0 + 2 * st[4], e - a, dst + a * C);
            for (; p2 < e - a; ++p2)
                for (int64_t c = 0; c < 3; ++c) dst[(a + p2) * 3 + c] = s0[c * st[4] + p2];
            continue;
        }
        for (int64_t c = 0; c < C; ++c) {
            const float* sc = src + c * st[4] + (a - lo[2]) * st[3];
            float* dc = dst + a * C + c;
            for (int64_t p2 = 0; p2 < e - a; ++p2) dc[p2 * C] = sc[p2 * st[3]];
        }
    }
    cl[4] = 1;
    cl[3] = C;
    cl[2] = C * P[2];
    cl[1] = cl[2] * P[1];
    cl[0] = cl[1] * P[0];
}

// Mode 5 (few input channels: an image's 3 would make each tap 3 floats) with a kernel wider than
// 1 and not dilated along the last dim: x is copied channels-last with its padding written as
// zeros, so that a kernel row's k[2] taps are always one run of k[2] * C floats, and the implicit
// GEMM reads those runs in place as the taps of a convolution with k[2] = 1 and C' = k[2] * C (the
// same k order: the same bits as gathering each row's taps first, which mode 5 still does
// otherwise).
//
// Args (int64): threads, mode (1 depthwise, 2 implicit GEMM, 5 the implicit GEMM over gathered
// rows: few input channels, 3 tile query), N, C, in[3], k[3], out[3], stride[3], dilation[3],
// pad_lo[3], groups, C_out, activation (0 none, 1 ReLU, 2 clip), clip lo and hi (float64 bits),
// has bias, has residual, element offsets of x, bias and residual in their buffers, whether the
// packed weight is given (a replay plan's derived buffer; 0: packed here, per call), x's element
// strides (batch, d0, d1, d2, channel: gathered rows read any; in place needs x contiguous),
// whether mode 2 gathers its rows (one group), the number of bands of rows (see implicit_gemm;
// mode 7: tiles per band), a max pool of the result (kernel[2], stride[2], dilation[2], pad
// lo[2], pooled out[2]: see conv_pool; kernel[0] = 0: none; then -1, or the float offset in the
// gathered-rows scratch where the whole result goes first: run_conv_then_pool), out's row
// stride (0: C_out; more: the call writes channels of a wider output) and the element offset
// of its first channel there.
// Buffers: x, w (C_out, taps, C_in/groups), [bias (C_out)], [residual (rows, C_out)], out
// (rows, C_out or that stride), then scratch (band: the largest band's row blocks): tap offsets
// (threads * band * kRows * taps int64), a zero row (C_in/groups + 16 floats; mode 5 k[2] * C_in +
// 16), gathered rows (threads * band * kRows * taps * C_in floats; mode 5: then x channels-last
// when its channels are strided; without a dilated last dim only x padded channels-last), then the
// packed weight (implicit GEMM: panels; depthwise: w as (taps, C)). Query: buffer 0 gets (rows,
// output channels).
//
// Mode 6, several convolutions writing channel slices of one output (``conv_concat``: no concat
// copy), one after another: threads, 6, the number of convolutions m, the number of input
// buffers n, whether the packed weights are given (one derived buffer, each convolution's at a
// float offset), then per convolution kConcatArgs args: its own args as above (out's row stride
// and offset set), the buffer index of its x (its w, bias and residual follow), the float offset
// of its packed weight. Buffers: the n inputs, out, the three scratch buffers (each as large as
// the largest convolution's), the packed weights.
constexpr int64_t kConvArgs = 53, kConcatArgs = kConvArgs + 2;

void run_conv(void** bufs, const int64_t* a, int64_t threads);

// A max-pooled call whose convolution cannot pool its lines in place (a[50]: the float offset
// of its whole result in the third scratch buffer): the convolution there, then the pool.
void run_conv_then_pool(void** bufs, const int64_t* a, int64_t threads) {
    int64_t c[kConvArgs];
    std::memcpy(c, a, sizeof c);
    c[40] = 0;  // (no pool)
    c[51] = c[52] = 0;
    const int b = 2 + (a[27] ? 1 : 0) + (a[28] ? 1 : 0);  // out's buffer
    void* sub[12];
    for (int i = 0; i < b + 5; ++i) sub[i] = bufs[i];
    float* conv = (float*)bufs[b + 3] + a[50];
    sub[b] = conv;
    run_conv(sub, c, threads);
    const Geometry g = geometry(a);
    const int64_t O = a[23], OH = g.out[1], OW = g.out[2], lines = g.n * a[48];
    float* out = (float*)bufs[b] + a[52];
    WorkSplit work(lines, threads);
#pragma omp parallel num_threads((int)threads) if (threads > 1)
    {
        const int tid = omp_get_thread_num();
        const float** tap =
            (const float**)std::malloc((size_t)(a[40] * (a[41] + 1)) * sizeof(float*));
        for (int64_t l; (l = work.next(tid)) >= 0;)
            pool_line(conv, 0, OH * OW * O, OW * O, OH, OW, O, a + 40, l / a[48], l % a[48], out,
                      tap);
        std::free(tap);
    }
}

void run_conv(void** bufs, const int64_t* a, int64_t threads) {
    const int64_t mode = a[1];
    if (a[40] > 0 && a[50] >= 0) {
        run_conv_then_pool(bufs, a, threads);
        return;
    }
    Geometry g = geometry(a);
    double lo, hi;
    std::memcpy(&lo, a + 25, sizeof lo);
    std::memcpy(&hi, a + 26, sizeof hi);
    int b = 2;
    Epilogue ep;
    ep.cout = a[23];
    ep.ldo = a[51] > 0 ? a[51] : a[23];
    ep.bias = a[27] ? (const float*)bufs[b++] + a[30] : nullptr;
    ep.residual = a[28] ? (const float*)bufs[b++] + a[31] : nullptr;
    ep.act = a[24];
    ep.lo = (float)lo;
    ep.hi = (float)hi;
    const float* x = (const float*)bufs[0] + a[29];
    const float* w = (const float*)bufs[1];
    float* out = (float*)bufs[b] + a[52];
    int64_t* offs = (int64_t*)bufs[b + 1];
    float* zeros = (float*)bufs[b + 2];
    float* cols = (float*)bufs[b + 3];
    const float* packed = a[32] ? (const float*)bufs[b + 4] : nullptr;
    const int64_t groups = a[22], taps = g.k[0] * g.k[1] * g.k[2];
    if (mode == 1) {
        depthwise(g, x, packed ? packed : w, packed != nullptr, out, ep, threads);
        return;
    }
    float* own = nullptr;
    if (!packed) {
        const int64_t og = ep.cout / groups, kk = taps * (g.c / groups);
        own = (float*)std::malloc(
            (size_t)(groups * ((og + kCols - 1) / kCols) * kk * kCols) * sizeof(float) + 64);
        pack_panels<kCols>(w, groups, og, kk, own, threads);
        packed = own;
    }
    const int64_t* st = a + 33;
    if (mode == 7 && a[32]) {  // Winograd (the transformed weight always given)
        winograd(g, x, zeros, packed, out, ep, cols, a[39], threads);
        std::free(own);
        return;
    }
    int64_t cl[5];
    bool rowwise = mode == 5;
    float* pack = mode == 5 || a[38] ? cols : nullptr;
    float* ring = cols;  // (a pooled call's ring of lines: after x's channels-last copy)
    if (mode == 5 && g.dil[2] == 1 && g.k[2] > 1) {  // few channels (an image): rows of runs
        int64_t P[3];
        for (int i = 0; i < 3; ++i) {
            const int64_t last = (g.out[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] - g.lo[i];
            P[i] = g.lo[i] + (last + 1 > g.in[i] ? last + 1 : g.in[i]);
        }
        channels_last(g, x, st, P, g.lo, cols, cl, threads);
        ring = cols + g.n * P[0] * P[1] * P[2] * g.c;
        for (int i = 0; i < 3; ++i) {
            g.in[i] = P[i];
            g.lo[i] = 0;
        }
        g.c *= g.k[2];  // a kernel row's taps: one run of k[2] * C floats
        g.k[2] = 1;
        x = cols;
        st = cl;
        rowwise = false;
        pack = nullptr;
    } else if (mode == 5 && st[4] != 1) {  // channels strided (an NCHW image): made
        // channels-last first (after the gathered rows in the same scratch), so that rows copy
        // runs of floats
        const int64_t rows = g.n * g.out[0] * g.out[1] * g.out[2];
        const int64_t nrb = (rows + kRows - 1) / kRows, nbands = a[39] < nrb ? a[39] : nrb;
        const int64_t band = (nrb + nbands - 1) / nbands;
        float* xc = cols + threads * band * kRows * taps * g.c;
        const int64_t none[3] = {0, 0, 0};
        channels_last(g, x, st, g.in, none, xc, cl, threads);
        x = xc;
        st = cl;
    }
    if (a[40] > 0 && !rowwise && !pack && groups == 1) {  // max-pooled (a[40..49])
        conv_pool(g, x, st, packed, out, ep, a + 40, offs, zeros, ring, threads);
        std::free(own);
        return;
    }
    implicit_gemm(g, x, st, packed, out, groups, ep, offs, zeros, pack, rowwise,
                  a[39] > 0 ? a[39] : 1, threads);
    std::free(own);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    const int64_t threads = a[0] > 1 ? a[0] : 1, mode = a[1];
    if (mode == 3) {  // the implicit GEMM's tile: rows, output channels per panel
        ((int64_t*)bufs[0])[0] = kRows;
        ((int64_t*)bufs[0])[1] = kCols;
        ((int64_t*)bufs[0])[2] = kConvArgs;
        ((int64_t*)bufs[0])[3] = kConcatArgs;
        return;
    }
    if (mode != 6) {
        run_conv(bufs, a, threads);
        return;
    }
    const int64_t m = a[2], n = a[3];
    for (int64_t i = 0; i < m; ++i) {
        const int64_t* c = a + 5 + i * kConcatArgs;
        void* sub[9];
        int k = 0;
        const int64_t x = c[kConvArgs];
        sub[k++] = bufs[x];
        sub[k++] = bufs[x + 1];
        for (int64_t e = 0; e < c[27] + c[28]; ++e) sub[k++] = bufs[x + 2 + e];
        for (int64_t j = 0; j < 4; ++j) sub[k++] = bufs[n + j];  // out, the three scratch buffers
        sub[k] = a[4] ? (void*)((float*)bufs[n + 4] + c[kConvArgs + 1]) : nullptr;
        // each convolution's own thread count (its scratch is sized for it), at most the call's
        run_conv(sub, c, c[0] < threads ? (c[0] > 1 ? c[0] : 1) : threads);
    }
}
