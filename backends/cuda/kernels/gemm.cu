// The cuda backend's device matmul (backends/cuda/library.py describes and builds it): C =
// A @ B for C-contiguous operands, 16x16 tiles through shared memory, one output element per
// thread, a grid-stride loop over batch x row-tile x column-tile; 256 threads per block.
// Follows the CUDA prelude (bz_args, int64_t). Parameter: BZ_GEMM_DOUBLE, 1 for the double
// kernel bz_gemm_double, 0 for the float one bz_gemm_float.
#ifndef BZ_GEMM_DOUBLE
#error "gemm.cu: define BZ_GEMM_DOUBLE (0: float, 1: double)"
#endif

// args: (unused), batch, M, N, K, batch stride of A, of B (0: broadcast), tiles of M, of N
template <class T>
static __device__ __forceinline__ void bz_gemm_tiles(const T* __restrict__ b0,
                                                     const T* __restrict__ b1, T* b2,
                                                     const bz_args<9> bz_a) {
    __shared__ T As[16][17];
    __shared__ T Bs[16][17];
    const int64_t batch = bz_a.a[1], M = bz_a.a[2], N = bz_a.a[3], K = bz_a.a[4];
    const int64_t sa = bz_a.a[5], sb = bz_a.a[6], tm = bz_a.a[7], tn = bz_a.a[8];
    const int tx = (int)(threadIdx.x % 16), ty = (int)(threadIdx.x / 16);
    for (int64_t tile = blockIdx.x; tile < batch * tm * tn; tile += gridDim.x) {
        const int64_t bi = tile / (tm * tn), r = tile % (tm * tn);
        const int64_t i = r / tn * 16 + ty, j = r % tn * 16 + tx;
        const T* A = b0 + bi * sa;
        const T* B = b1 + bi * sb;
        T acc = 0;
        for (int64_t k0 = 0; k0 < K; k0 += 16) {
            As[ty][tx] = (i < M && k0 + tx < K) ? A[i * K + k0 + tx] : (T)0;
            Bs[ty][tx] = (k0 + ty < K && j < N) ? B[(k0 + ty) * N + j] : (T)0;
            __syncthreads();
            for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
        if (i < M && j < N) b2[bi * M * N + i * N + j] = acc;
    }
}

#if BZ_GEMM_DOUBLE
extern "C" __global__ void __launch_bounds__(256)
    bz_gemm_double(const double* __restrict__ b0, const double* __restrict__ b1, double* b2,
                   const bz_args<9> bz_a) {
    bz_gemm_tiles<double>(b0, b1, b2, bz_a);
}
#else
extern "C" __global__ void __launch_bounds__(256)
    bz_gemm_float(const float* __restrict__ b0, const float* __restrict__ b1, float* b2,
                  const bz_args<9> bz_a) {
    bz_gemm_tiles<float>(b0, b1, b2, bz_a);
}
#endif
