// Items [0, n) (n < 2^32) of a parallel region split between its threads with stealing, for the
// hand-written kernels (conv.cc, pool.cc): thread t owns [n t / T, n (t + 1) / T) and takes its
// items from the front, in order (a thread keeps the rows it made in the previous kernel: its
// cache); when its own run out it takes the other threads' remaining items from their backs, one
// at a time. A thread that starts late (woken from sleep: tens of microseconds in a virtual
// machine) or runs slower (a sibling hyperthread busy, colder caches) then hands work over
// instead of holding the others at the region's end, where a static split waits for it.
// Which thread computes an item never changes the item's result.
#ifndef BZ_WORK_SPLIT_H
#define BZ_WORK_SPLIT_H
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

class WorkSplit {
public:
    // before the region; ``threads``: the most threads it may run (fewer take the rest by
    // stealing: with one, thread 0 takes every range in turn); items of ``chunk`` consecutive
    // indices of [0, n) (the last one shorter)
    WorkSplit(int64_t n, int64_t threads, int64_t chunk = 1)
        : threads_(threads > 1 ? threads : 1), n_(n), chunk_(chunk) {
        const int64_t items = (n + chunk - 1) / chunk;
        ranges_ = (Range*)std::aligned_alloc(sizeof(Range), sizeof(Range) * (size_t)threads_);
        for (int64_t t = 0; t < threads_; ++t) {
            const uint64_t lo = (uint64_t)(items * t / threads_),
                           hi = (uint64_t)(items * (t + 1) / threads_);
            new (&ranges_[t].fb) std::atomic<uint64_t>(lo << 32 | hi);
        }
    }
    ~WorkSplit() { std::free(ranges_); }
    WorkSplit(const WorkSplit&) = delete;
    WorkSplit& operator=(const WorkSplit&) = delete;

    // the next item for thread ``tid``, or -1 when every range is empty
    int64_t next(int64_t tid) {
        if (tid < threads_) {
            const int64_t i = take(ranges_[tid], true);
            if (i >= 0) return i;
        }
        for (int64_t k = 1; k < threads_; ++k) {
            const int64_t i = take(ranges_[(tid + k) % threads_], false);
            if (i >= 0) return i;
        }
        return -1;
    }
    // the next item's indices [*lo, *hi) for thread ``tid``; false when none is left
    bool next(int64_t tid, int64_t* lo, int64_t* hi) {
        const int64_t i = next(tid);
        if (i < 0) return false;
        *lo = i * chunk_;
        *hi = *lo + chunk_ < n_ ? *lo + chunk_ : n_;
        return true;
    }

private:
    // a range [front, back) in one word (front high, back low): the owner's and a thief's
    // takes of its last item exclude each other
    struct alignas(64) Range {
        std::atomic<uint64_t> fb;
    };
    static int64_t take(Range& r, bool front) {
        uint64_t v = r.fb.load(std::memory_order_relaxed);
        for (;;) {
            const uint64_t f = v >> 32, b = v & 0xFFFFFFFFull;
            if (f >= b) return -1;
            const uint64_t w = front ? ((f + 1) << 32 | b) : (f << 32 | (b - 1));
            if (r.fb.compare_exchange_weak(v, w, std::memory_order_relaxed))
                return (int64_t)(front ? f : b - 1);
        }
    }
    int64_t threads_, n_, chunk_;
    Range* ranges_;
};

}  // namespace

#endif  // BZ_WORK_SPLIT_H
