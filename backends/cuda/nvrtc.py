"""NVRTC through ``braze._core``: CUDA C -> PTX/CUBIN in process, cached on disk.

``libnvrtc`` is found at run time, never at build time: ``BRAZE_NVRTC`` (a path), else
the PyPI package ``nvidia-cuda-nvrtc`` (``nvidia/cu13/lib/libnvrtc.so.13``, or the cu12
layout ``nvidia/cuda_nvrtc/lib/libnvrtc.so.12``), else ``libnvrtc.so`` on the loader
path. Compiled images live beside the CPU kernels (``BRAZE_CACHE_DIR``), keyed by the
source, the architecture, the options and the NVRTC version, with a checksum sidecar:
a corrupt entry is recompiled, never loaded.

>>> src = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] *= 2.0f; }'
>>> available() is False or b".entry k" in compile_source(src, "k")
True
"""

from __future__ import annotations

import contextlib
import functools
import hashlib

from ... import _core
from ..cpu.build import _atomic_write, cache_dir
from . import wheels

__all__ = ["NvrtcError", "available", "compile_source", "library_path", "version"]

DEFAULT_ARCH = "compute_75"  # the oldest architecture NVRTC 13 accepts: PTX JITs forward


class NvrtcError(RuntimeError):
    """NVRTC rejected a kernel (the message carries its log) or is not installed."""


def library_path() -> str | None:
    """Where libnvrtc is: ``BRAZE_NVRTC``, the ``nvidia-cuda-nvrtc`` wheel, or None."""
    return wheels.find("BRAZE_NVRTC", ("cu*/lib/libnvrtc.so.*", "cuda_nvrtc/lib/libnvrtc.so.*"),
                       exclude="builtins")


@functools.lru_cache(maxsize=1)
def _load() -> str:
    path = library_path()
    errors = []
    for candidate in ([path] if path else []) + ["libnvrtc.so"]:
        try:
            return _core.nvrtc_load(candidate)
        except RuntimeError as e:
            errors.append(str(e))
    raise NvrtcError("NVRTC is not available (pip install nvidia-cuda-nvrtc, or set "
                     "BRAZE_NVRTC): " + "; ".join(errors))


def available() -> bool:
    """Can NVRTC be loaded here (no GPU needed)?"""
    try:
        _load()
    except NvrtcError:
        return False
    return True


def version() -> str:
    """NVRTC's version, e.g. '13.0' (raises NvrtcError when it is not installed)."""
    return _load()


def compile_source(source: str, name: str, arch: str = DEFAULT_ARCH, cubin: bool = False,
                   cache: bool = True) -> bytes:
    """PTX (``arch='compute_XX'``) or CUBIN (``'sm_XX'``, ``cubin=True``) of ``source``.

    Raises :class:`NvrtcError` with NVRTC's log when the source does not compile."""
    ver = _load()
    key = hashlib.sha256("\0".join([source, arch, str(cubin), ver]).encode()).hexdigest()[:32]
    ext = ".cubin" if cubin else ".ptx"
    path = cache_dir() / f"{name}-{key}{ext}"
    side = path.with_suffix(ext + ".sha256")
    if cache:
        with contextlib.suppress(OSError):
            data = path.read_bytes()
            if side.read_text().split()[0] == hashlib.sha256(data).hexdigest():
                return data
    try:
        data = _core.nvrtc_compile(source, name, arch, cubin, ["-w"])
    except RuntimeError as e:
        raise NvrtcError(str(e)) from None
    if cache:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, data)
            _atomic_write(side, f"{hashlib.sha256(data).hexdigest()} {name}\n".encode())
    return data
