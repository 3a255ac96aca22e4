"""cuBLAS through ``braze._core``: found and loaded at run time, never at build time.

``BRAZE_CUBLAS`` (a path), else the PyPI package ``nvidia-cublas`` (``nvidia/cu13/lib/
libcublas.so.13``, or the cu12 layout ``nvidia/cublas/lib/libcublas.so.12``), else
``libcublas.so`` on the loader path. Loading it needs a device (its handle lives in the
device's primary context): :func:`load` is called by :class:`~braze.backends.cuda.CudaDriver`
on the first matmul, and a machine without it runs matmuls with the tiled kernel of
:mod:`.library` instead.

>>> library_path() is None or library_path().endswith(tuple("0123456789o"))
True
"""

from __future__ import annotations

import functools

from ... import _core
from . import wheels

__all__ = ["CublasError", "library_path", "load"]


class CublasError(RuntimeError):
    """cuBLAS is not installed or did not load (the message says why)."""


def library_path() -> str | None:
    """Where libcublas is: ``BRAZE_CUBLAS``, the ``nvidia-cublas`` wheel, or None."""
    return wheels.find("BRAZE_CUBLAS", ("cu*/lib/libcublas.so.*",
                                         "cublas/lib/libcublas.so.*"))


@functools.lru_cache(maxsize=1)
def load() -> int:
    """Load cuBLAS on device 0 (once); its version. Raises :class:`CublasError`."""
    path = library_path()
    errors = []
    for candidate in ([path] if path else []) + ["libcublas.so"]:
        try:
            return int(_core.cublas_load(candidate))
        except RuntimeError as e:
            errors.append(str(e))
    raise CublasError("cuBLAS is not available (pip install nvidia-cublas, or set "
                      "BRAZE_CUBLAS): " + "; ".join(errors))
