// Streaming (non-temporal) stores of the CPU kernels (backends/cpu/codegen.py): a tile of
// contiguous outputs is copied out by bz_put, with non-temporal stores when `nt` (outputs
// that do not fit in cache: no read-for-ownership traffic); bz_sfence orders them. C++ only.
#if defined(__AVX512F__)
typedef long long bz_vnt __attribute__((vector_size(64)));
#define BZ_NT(p, v) __builtin_ia32_movntdq512((bz_vnt*)(p), v)
#elif defined(__AVX__)
typedef long long bz_vnt __attribute__((vector_size(32)));
#define BZ_NT(p, v) __builtin_ia32_movntdq256((bz_vnt*)(p), v)
#elif defined(__SSE2__)
typedef long long bz_vnt __attribute__((vector_size(16)));
#define BZ_NT(p, v) __builtin_ia32_movntdq((bz_vnt*)(p), v)
#endif
#ifdef BZ_NT
static inline void bz_sfence() { __builtin_ia32_sfence(); }
#else
static inline void bz_sfence() {}
#endif
template <class T>
static inline void bz_put(T* __restrict d, const T* __restrict s, int64_t n, bool nt) {
    char* dc = (char*)d;
    const char* sc = (const char*)s;
    int64_t nb = n * (int64_t)sizeof(T);
#ifdef BZ_NT
    if (nt) {
        const int64_t w = (int64_t)sizeof(bz_vnt);
        int64_t head = (int64_t)((w - (int64_t)((uintptr_t)dc & (uintptr_t)(w - 1))) & (w - 1));
        if (head > nb) head = nb;
        __builtin_memcpy(dc, sc, head);
        int64_t i = head;
        for (; i + w <= nb; i += w) {
            bz_vnt v;
            __builtin_memcpy(&v, sc + i, w);
            BZ_NT(dc + i, v);
        }
        __builtin_memcpy(dc + i, sc + i, nb - i);
        return;
    }
#endif
    (void)nt;
    __builtin_memcpy(dc, sc, nb);
}
