// One window's taps combined per channel, the way kernels/pool.cc's max_pool / window_sum and
// kernels/conv.cc's fused max pool (the conv_pool pass) combine them: 16 * B channels with their
// accumulators in registers across the taps (B independent chains: one chain's compare and
// blend latency per tap would bound a 16-channel loop).
#ifndef BZ_TAPS_H
#define BZ_TAPS_H
#include <cstdint>
#include <cstring>

namespace {

// 16 floats (GCC's vector extension: one AVX-512 register, two AVX2 or four NEON ones)
typedef float V16 __attribute__((vector_size(64)));
inline V16 load16(const float* p) {
    V16 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// whether every lane of v is +-0.0 (a NaN lane is not): its bits ORed 64 at a time (a lane
// by lane compare is 16 scalar compares and branches)
inline bool all_zero(V16 v) {
    uint64_t w[8];
    std::memcpy(w, &v, sizeof w);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= w[i];
    return (bits & 0x7FFFFFFF7FFFFFFFull) == 0;
}

struct Max {
    static float init() { return -__builtin_inff(); }
    // numpy's maximum(m, v): a NaN stays, and of two equal values (-0.0 and +0.0) v wins
    static float add(float m, float v) { return m > v || m != m ? m : v; }
    static V16 add(V16 m, V16 v) { return (m > v) | (m != m) ? m : v; }
    // add() where no NaN comes: one max instruction (x86's max(m, v) is m > v ? m : v);
    // the NaNs are looked for apart (see tap_block)
    static V16 add_number(V16 m, V16 v) { return m > v ? m : v; }
    static constexpr bool kPadded = false;  // padded taps change nothing: skipped
    static constexpr bool kNumbers = true;
};
struct Sum {
    static float init() { return -0.0f; }
    static float add(float m, float v) { return m + v; }
    static V16 add(V16 m, V16 v) { return m + v; }
    static V16 add_number(V16 m, V16 v) { return m + v; }
    static constexpr bool kPadded = true;  // a padded tap adds +0.0
    static constexpr bool kNumbers = false;
};

// m[0, 16 B) = Op::init() combined with the nt taps in order, tap t's channels at tap(t)
// (nullptr: a padded tap, only where Op::kPadded). Max first assumes numbers (add_number)
// while summing v - v per lane (0 for a finite v, NaN for a NaN or an infinity, and a NaN
// stays): a block where that sum is not 0 is done again with add.
template <class Op, int B, class Tap>
inline void tap_block(float* m, const Tap& tap, int64_t nt) {
    V16 acc[B];
    if (Op::kNumbers) {
        V16 bad[B];
        for (int i = 0; i < B; ++i) acc[i] = V16{} + Op::init();
        for (int i = 0; i < B; ++i) bad[i] = V16{};
        for (int64_t t = 0; t < nt; ++t) {
            const float* v = tap(t);  // (no padded taps: kPadded is false)
            for (int i = 0; i < B; ++i) {
                const V16 u = load16(v + 16 * i);
                acc[i] = Op::add_number(acc[i], u);
                bad[i] += u - u;
            }
        }
        V16 any = bad[0];
        for (int i = 1; i < B; ++i) any += bad[i];
        if (all_zero(any)) {
            for (int i = 0; i < B; ++i) std::memcpy(m + 16 * i, &acc[i], sizeof acc[i]);
            return;
        }
    }
    for (int i = 0; i < B; ++i) acc[i] = V16{} + Op::init();
    for (int64_t t = 0; t < nt; ++t) {
        const float* v = tap(t);
        if (Op::kPadded && v == nullptr) {
            for (int i = 0; i < B; ++i) acc[i] = Op::add(acc[i], V16{});
            continue;
        }
        for (int i = 0; i < B; ++i) acc[i] = Op::add(acc[i], load16(v + 16 * i));
    }
    for (int i = 0; i < B; ++i) std::memcpy(m + 16 * i, &acc[i], sizeof acc[i]);
}

}  // namespace

#endif  // BZ_TAPS_H
