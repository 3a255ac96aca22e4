// bz_dispatch<N>(n, f): f(std::integral_constant<int, n>) for a runtime n in [1, N] (n >= N:
// N): one template instance per block size -- register-blocked kernels need compile-time
// sizes -- without a hand-written switch per kernel. Any ISA; C++17.
#ifndef BZ_DISPATCH_H
#define BZ_DISPATCH_H
#include <cstdint>
#include <type_traits>
template <int N, class F>
static inline __attribute__((always_inline)) void bz_dispatch(int64_t n, F&& f) {
    if constexpr (N > 1) {
        if (n < N) {
            bz_dispatch<N - 1>(n, f);
            return;
        }
    }
    f(std::integral_constant<int, N>{});
}
#endif  // BZ_DISPATCH_H
