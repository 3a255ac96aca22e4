"""Library ops on the device for the ``cuda`` backend: matmul as a tiled CUDA kernel.

A schedule's ``matmul`` steps would otherwise cross to the host and back (numpy). This
first device matmul is a 16x16-tiled kernel through shared memory (one output element
per thread, a grid-stride loop over batch x row-tile x column-tile), float32 and float64,
operands C-contiguous on the device with batch dimensions either matching the result's
or absent (broadcast). Anything else -- other dtypes, partial batch broadcasting --
stays on the host. It is correct (run on the emulator in CI) but not tuned: cuBLAS-class
speed needs register tiling and tensor cores, or cuBLAS itself.

>>> g = gemm_kernel("float")
>>> g.symbol, "__syncthreads" in g.source
('bz_gemm_float', True)
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...graph.ops import matmul_shape
from ..gpusource import GpuKernel
from .codegen import PRELUDE

__all__ = ["gemm_kernel", "gemm_plan"]

TILE = 16
N_ARGS = 9
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

_GEMM = r"""
extern "C" __global__ void __launch_bounds__(256) bz_gemm_{T}(const {T}* __restrict__ b0,
    const {T}* __restrict__ b1, {T}* b2, const bz_args<9> bz_a) {
  // args: (unused), batch, M, N, K, batch stride of A, of B (0: broadcast), tiles of M, of N
  __shared__ {T} As[16][17];
  __shared__ {T} Bs[16][17];
  const int64_t batch = bz_a.a[1], M = bz_a.a[2], N = bz_a.a[3], K = bz_a.a[4];
  const int64_t sa = bz_a.a[5], sb = bz_a.a[6], tm = bz_a.a[7], tn = bz_a.a[8];
  const int tx = (int)(threadIdx.x % 16), ty = (int)(threadIdx.x / 16);
  for (int64_t tile = blockIdx.x; tile < batch * tm * tn; tile += gridDim.x) {
    const int64_t bi = tile / (tm * tn), r = tile % (tm * tn);
    const int64_t i = r / tn * 16 + ty, j = r % tn * 16 + tx;
    const {T}* A = b0 + bi * sa;
    const {T}* B = b1 + bi * sb;
    {T} acc = 0;
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      As[ty][tx] = (i < M && k0 + tx < K) ? A[i * K + k0 + tx] : ({T})0;
      Bs[ty][tx] = (k0 + ty < K && j < N) ? B[(k0 + ty) * N + j] : ({T})0;
      __syncthreads();
      for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
      __syncthreads();
    }
    if (i < M && j < N) b2[bi * M * N + i * N + j] = acc;
  }
}
"""


@functools.lru_cache(maxsize=4)
def gemm_kernel(ctype: str) -> GpuKernel:
    """The tiled matmul kernel for ``ctype`` ('float' or 'double'), as a GpuKernel (its
    buffers: A, B, C; launched with 256 threads per block)."""
    return GpuKernel(PRELUDE + _GEMM.replace("{T}", ctype), f"bz_gemm_{ctype}", (0, 1, 2),
                     N_ARGS, "tiles", 1, False)


def gemm_plan(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: Any,
              sms: int) -> tuple[GpuKernel, np.ndarray, int] | None:
    """(kernel, int64 args, grid) for ``a @ b`` on C-contiguous operands, or None when the
    device matmul does not take it (dtype, batch broadcasting it does not do)."""
    ctype = _CTYPE.get(np.dtype(dtype))
    if ctype is None or not a_shape or not b_shape:
        return None
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    matmul_shape(a_shape, b_shape)  # raises on operands that do not multiply
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = int(np.prod(np.broadcast_shapes(a2[:-2], b2[:-2]), dtype=np.int64))

    def stride(x2: tuple[int, ...], rows: int, cols: int) -> int | None:
        own = int(np.prod(x2[:-2])) if x2[:-2] else 1
        if own == batch:
            return rows * cols
        return 0 if own == 1 else None

    sa, sb = stride(a2, m, k), stride(b2, k, n)
    if sa is None or sb is None or m * n * batch == 0:
        return None
    tm, tn = -(-m // TILE), -(-n // TILE)
    args = np.array([1, batch, m, n, k, sa, sb, tm, tn], np.int64)
    return gemm_kernel(ctype), args, max(1, min(batch * tm * tn, sms * 32))
