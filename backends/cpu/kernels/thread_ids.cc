// The Linux thread ids of an OpenMP team of a0 threads started from the calling thread
// (index 0: the caller), for the cpu backend's worker placement (backends/cpu/__init__.py,
// csrc/core.cpp "thread placement"). Parameter: BZ_SYMBOL (the entry point's name).
#ifndef BZ_SYMBOL
#error "thread_ids: define BZ_SYMBOL (the kernel's name)"
#endif
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL(void** bufs, const int64_t* a) {
    int64_t* out = (int64_t*)bufs[0];
#pragma omp parallel num_threads((int)a[0])
    out[omp_get_thread_num()] = (int64_t)syscall(SYS_gettid);
}
