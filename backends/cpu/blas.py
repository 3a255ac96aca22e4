"""numpy's BLAS beside the ``cpu`` backend's OpenMP threads: small matmuls run on one
BLAS thread.

A matmul the native kernels do not cover runs numpy's (OpenBLAS, MKL...). OpenBLAS's
worker threads spin after each call until ``OPENBLAS_THREAD_TIMEOUT`` (which braze can
only shorten when it is imported before numpy), and OpenMP's spin too: on a machine with
few cores, a small matmul between two fused kernels leaves one pool's threads spinning on
the cores the other pool needs next, and each step waits for a core. A gradient-descent
loop (``X @ w`` on 100,000 x 16) ran 3-4x slower than with one BLAS thread. A matmul of
fewer than ``SERIAL_FLOPS`` floating-point operations therefore runs with numpy's BLAS
limited to one thread (through :mod:`threadpoolctl`; its workers stay asleep); larger
ones, where the threads pay for themselves, keep them all. A float32 matrix-vector
product whose matrix is row-major (``M @ v``, ``x @ W.T``: a few rows of x, or more where
the kernel has its GEMM path, as in replay plans) runs the native matvec kernel instead
(:mod:`.matvec`: OpenMP threads, no BLAS pool at all), and so does ``X.T @ v`` /
``v @ X`` (the vecmat kernel: a gradient's product). A first evaluation that woke
OpenBLAS's workers left them spinning beside the plans' kernels that followed: a
cosine-similarity GEMM took 5.5 ms instead of 1.4 in every other call.

>>> import numpy as np
>>> mm = matmul_for(lambda: 2)
>>> a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
>>> mm({}, np.dtype(np.float32), a, b).tolist()
[[3.0, 3.0], [3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
>>> mm({}, np.dtype(np.float32), a, np.ones(3, np.float32)).tolist()  # the native matvec
[3.0, 3.0, 3.0, 3.0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...graph.ops import OPS, reference_eval

__all__ = ["SERIAL_FLOPS", "matmul", "matmul_for"]

SERIAL_FLOPS = 1 << 26  # ~1 ms on one core: below it a second BLAS thread gains little

_CONTROLLERS: list[Any] = []  # threadpoolctl's BLAS controllers, found on first use
_FOUND = threading.Event()
_LOCK = threading.Lock()  # the BLAS thread count is process-wide: one limiter at a time


def _blas() -> list[Any]:
    """The loaded BLAS libraries' controllers ([] without threadpoolctl or a BLAS)."""
    if not _FOUND.is_set():
        with _LOCK:
            if not _FOUND.is_set():
                try:
                    from threadpoolctl import ThreadpoolController

                    _CONTROLLERS.extend(ThreadpoolController().select(
                        user_api="blas").lib_controllers)
                except Exception:  # noqa: BLE001 - no control: BLAS keeps its threads
                    pass
                _FOUND.set()
    return _CONTROLLERS


def matmul(attrs: dict[str, Any], dtype: np.dtype, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's matmul (the op's reference), on one BLAS thread when it is small."""
    n = b.shape[-1] if b.ndim > 1 else 1
    if 2 * a.size * n >= SERIAL_FLOPS:
        return reference_eval(OPS["matmul"], attrs, dtype, a, b)
    libs = _blas()
    if not libs or not _LOCK.acquire(blocking=False):  # (another thread is limiting)
        return reference_eval(OPS["matmul"], attrs, dtype, a, b)
    try:
        before = [lib.num_threads for lib in libs]
        for lib in libs:
            if lib.num_threads != 1:
                lib.set_num_threads(1)
        try:
            return reference_eval(OPS["matmul"], attrs, dtype, a, b)
        finally:
            for lib, k in zip(libs, before):
                if k != 1:
                    lib.set_num_threads(k)
    finally:
        _LOCK.release()


_F32 = np.dtype(np.float32)


def matmul_for(num_threads: Callable[[], int]) -> Callable[..., np.ndarray]:
    """The cpu backend's ``library["matmul"]``: the native matvec / GEMM where it applies
    (with ``num_threads()`` threads; batched and strided float32 products as a stack of
    GEMMs), else :func:`matmul`."""
    from . import matvec as _mv

    def run(attrs: dict[str, Any], dtype: np.dtype, a: np.ndarray, b: np.ndarray
            ) -> np.ndarray:
        if not attrs and dtype == _F32 and a.dtype == _F32 and b.dtype == _F32 and \
                a.ndim == 2 and a.size and b.size:
            if b.ndim == 1 and not b.flags.c_contiguous:  # (a broadcast ones(n): copy it,
                b = np.ascontiguousarray(b)  # the vector is small; numpy's way is slower)
            x = w = None
            tx = tw = False
            if b.ndim == 1 and a.flags.c_contiguous and b.flags.c_contiguous:
                x, w = b.reshape(1, -1), a  # M @ v: v against every row of M
            elif b.ndim == 2 and a.flags.c_contiguous and b.T.flags.c_contiguous and \
                    (a.shape[0] <= _mv.MAX_ROWS or _gemm()):
                x, w = a, b.T  # x @ W.T (the GEMM path above MAX_ROWS rows, as in plans)
            elif b.ndim == 2 and a.shape[0] > _mv.MAX_ROWS and \
                    (a.flags.c_contiguous or a.T.flags.c_contiguous) and \
                    (b.flags.c_contiguous or b.T.flags.c_contiguous) and _gemm():
                # X.T @ g and g @ W (a backward pass's products through a layer): the GEMM
                # transposes them in blocks itself, rather than numpy's BLAS, whose
                # spinning pool would slow the kernels that follow (module docstring)
                tx, tw = not a.flags.c_contiguous, not b.T.flags.c_contiguous
                x, w = a.T if tx else a, b if tw else b.T
            if x is not None and w is not None:
                threads = 1 if w.size < _mv.PARALLEL_WEIGHTS else num_threads()
                try:
                    out = _mv.matvec(x, w, threads, tx=tx, tw=tw)
                except Exception:  # noqa: BLE001 - no kernel here: numpy's matmul
                    return matmul(attrs, dtype, a, b)
                return out.reshape(-1) if b.ndim == 1 else out
            if b.ndim == 1 and a.T.flags.c_contiguous and b.flags.c_contiguous:
                return _vecmat(b, a.T, attrs, dtype, a, b)  # X.T @ r of a row-major X
        elif not attrs and dtype == _F32 and a.dtype == _F32 and b.dtype == _F32 and \
                a.ndim == 1 and b.ndim == 2 and a.size and b.size and b.flags.c_contiguous:
            return _vecmat(np.ascontiguousarray(a), b, attrs, dtype, a, b)  # r @ X
        if not attrs and dtype == _F32 and a.ndim >= 2 and b.ndim >= 2 and \
                a.dtype == _F32 and b.dtype == _F32:
            # batched products (attention's q k^T and its backward) and slices of wider
            # matrices: a stack of native GEMMs over the operands in place
            try:
                stacked = _mv.matmul_strided(a, b, num_threads())
            except Exception:  # noqa: BLE001 - no kernel here: numpy's matmul
                stacked = None
            if stacked is not None:
                return stacked
        return matmul(attrs, dtype, a, b)

    def _gemm() -> bool:
        try:
            return _mv.gemm_available()
        except Exception:  # noqa: BLE001 - no kernel here: numpy's matmul
            return False

    def _vecmat(v: np.ndarray, m: np.ndarray, attrs: dict[str, Any], dtype: np.dtype,
                a: np.ndarray, b: np.ndarray) -> np.ndarray:
        threads = 1 if m.size < _mv.PARALLEL_WEIGHTS else num_threads()
        try:
            return _mv.vecmat(v, m, threads)
        except Exception:  # noqa: BLE001 - no kernel here: numpy's matmul
            return matmul(attrs, dtype, a, b)

    return run
