// One window's taps combined per channel, the way kernels/pool.cc's max_pool / window_sum and
// kernels/conv.cc's fused max pool (the conv_pool pass) combine them: 16 * B channels with their
// accumulators in registers across the taps (16 B / kLanes independent chains: one chain's
// compare and blend latency per tap would bound a one-register loop).
#ifndef BZ_TAPS_H
#define BZ_TAPS_H
#include <cstdint>
#include <cstring>

namespace {

// One register of floats (GCC's vector extension at the target's width: 16 lanes with AVX-512,
// 8 with AVX, 4 with SSE or NEON). A wider extension vector than the target's registers is
// split lane by lane by GCC 12 for the compares and selects below (scalar code: 15x slower
// max pools at x86-64-v3).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float VN __attribute__((vector_size(kLanes * sizeof(float))));
inline VN load_vn(const float* p) {
    VN v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// whether every lane of v is +-0.0 (a NaN lane is not): its bits ORed 64 at a time (a lane
// by lane compare is a scalar compare and branch per lane)
inline bool all_zero(VN v) {
    uint64_t w[kLanes / 2];
    std::memcpy(w, &v, sizeof w);
    uint64_t bits = 0;
    for (int i = 0; i < kLanes / 2; ++i) bits |= w[i];
    return (bits & 0x7FFFFFFF7FFFFFFFull) == 0;
}

struct Max {
    static float init() { return -__builtin_inff(); }
    // numpy's maximum(m, v): a NaN stays, and of two equal values (-0.0 and +0.0) v wins
    static float add(float m, float v) { return m > v || m != m ? m : v; }
    static VN add(VN m, VN v) { return (m > v) | (m != m) ? m : v; }
    // add() where no NaN comes: one max instruction (x86's max(m, v) is m > v ? m : v);
    // the NaNs are looked for apart (see tap_block)
    static VN add_number(VN m, VN v) { return m > v ? m : v; }
    static constexpr bool kPadded = false;  // padded taps change nothing: skipped
    static constexpr bool kNumbers = true;
};
struct Sum {
    static float init() { return -0.0f; }
    static float add(float m, float v) { return m + v; }
    static VN add(VN m, VN v) { return m + v; }
    static VN add_number(VN m, VN v) { return m + v; }
    static constexpr bool kPadded = true;  // a padded tap adds +0.0
    static constexpr bool kNumbers = false;
};

// m[0, 16 B) = Op::init() combined with the nt taps in order, tap t's channels at tap(t)
// (nullptr: a padded tap, only where Op::kPadded). Max first assumes numbers (add_number)
// while summing v - v per lane (0 for a finite v, NaN for a NaN or an infinity, and a NaN
// stays): a block where that sum is not 0 is done again with add.
template <class Op, int B, class Tap>
inline void tap_block(float* m, const Tap& tap, int64_t nt) {
    constexpr int R = 16 * B / kLanes;  // registers
    VN acc[R];
    if (Op::kNumbers) {
        VN bad[R];
        for (int i = 0; i < R; ++i) acc[i] = VN{} + Op::init();
        for (int i = 0; i < R; ++i) bad[i] = VN{};
        for (int64_t t = 0; t < nt; ++t) {
            const float* v = tap(t);  // (no padded taps: kPadded is false)
            for (int i = 0; i < R; ++i) {
                const VN u = load_vn(v + kLanes * i);
                acc[i] = Op::add_number(acc[i], u);
                bad[i] += u - u;
            }
        }
        VN any = bad[0];
        for (int i = 1; i < R; ++i) any += bad[i];
        if (all_zero(any)) {
            for (int i = 0; i < R; ++i) std::memcpy(m + kLanes * i, &acc[i], sizeof acc[i]);
            return;
        }
    }
    for (int i = 0; i < R; ++i) acc[i] = VN{} + Op::init();
    for (int64_t t = 0; t < nt; ++t) {
        const float* v = tap(t);
        if (Op::kPadded && v == nullptr) {
            for (int i = 0; i < R; ++i) acc[i] = Op::add(acc[i], VN{});
            continue;
        }
        for (int i = 0; i < R; ++i) acc[i] = Op::add(acc[i], load_vn(v + kLanes * i));
    }
    for (int i = 0; i < R; ++i) std::memcpy(m + kLanes * i, &acc[i], sizeof acc[i]);
}

}  // namespace

#endif  // BZ_TAPS_H
