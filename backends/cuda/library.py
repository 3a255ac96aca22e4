"""Library ops on the device for the ``cuda`` backend: matmul through cuBLAS, or a tiled
CUDA kernel where cuBLAS is not installed.

A schedule's ``matmul`` steps would otherwise cross to the host and back (numpy). Where
the driver has a GEMM (:mod:`.cublas`: ``cublasSgemmStridedBatched`` /
``cublasDgemmStridedBatched`` from the ``nvidia-cublas`` wheel, dlopened; the emulator
stands in for it with numpy) a matmul is one call on :func:`gemm_geometry`'s operands.
Otherwise the fallback device matmul (``kernels/gemm.cu``) is a 16x16-tiled kernel through
shared memory (one output element per thread, a grid-stride loop over batch x row-tile x
column-tile), float32 and float64, operands C-contiguous on the device with batch dimensions either
matching the result's or absent (broadcast). Anything else -- other dtypes, partial batch
broadcasting -- stays on the host. It is correct (run on the emulator in CI) but not tuned:
cuBLAS-class speed needs register tiling and tensor cores, or cuBLAS itself.

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
from ..kernel_sources import source as _kernel_source
from .codegen import PRELUDE

__all__ = ["gemm_geometry", "gemm_kernel", "gemm_plan"]

TILE = 16
N_ARGS = 9
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@functools.lru_cache(maxsize=4)
def gemm_kernel(ctype: str) -> GpuKernel:
    """The tiled matmul kernel for ``ctype`` ('float' or 'double'), as a GpuKernel (its
    buffers: A, B, C; launched with 256 threads per block)."""
    if ctype not in _CTYPE.values():
        raise ValueError(f"gemm_kernel: ctype must be 'float' or 'double', got {ctype!r}")
    text = _kernel_source(__package__, "kernels/gemm.cu",
                          {"BZ_GEMM_DOUBLE": int(ctype == "double")})
    return GpuKernel(PRELUDE + text, f"bz_gemm_{ctype}", (0, 1, 2), N_ARGS, "tiles", 1, False)


def gemm_geometry(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: Any
                  ) -> tuple[str, int, int, int, int, int, int] | None:
    """(C type, batch, M, N, K, batch stride of A, of B) of ``a @ b`` on C-contiguous
    operands (strides in elements, 0: broadcast), or None when a device GEMM does not take
    it (dtype, batch broadcasting other than all-or-nothing, an empty result).

    >>> gemm_geometry((2, 3, 4), (4, 5), np.float32)
    ('float', 2, 3, 5, 4, 12, 0)
    """
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
    return ctype, batch, m, n, k, sa, sb


def gemm_plan(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: Any,
              sms: int) -> tuple[GpuKernel, np.ndarray, int] | None:
    """(kernel, int64 args, grid) for ``a @ b`` on C-contiguous operands, or None when the
    device matmul does not take it (dtype, batch broadcasting it does not do)."""
    geo = gemm_geometry(a_shape, b_shape, dtype)
    if geo is None:
        return None
    ctype, batch, m, n, k, sa, sb = geo
    tm, tn = -(-m // TILE), -(-n // TILE)
    args = np.array([1, batch, m, n, k, sa, sb, tm, tn], np.int64)
    return gemm_kernel(ctype), args, max(1, min(batch * tm * tn, sms * 32))
