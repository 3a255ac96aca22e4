"""The ``cuda`` backend: fused kernels as generated CUDA C, compiled by NVRTC, launched
through the CUDA driver API — all loaded at run time by ``braze._core`` (``dlopen``), so
braze builds and installs without CUDA.

Available when ``libcuda`` loads, ``cuInit`` succeeds, a device is present and NVRTC is
installed (``pip install nvidia-cuda-nvrtc``); ``bz.backends.available()`` lists it only
then. Schedules run through the shared executor
(:func:`braze.backends.numpy_backend.run_schedule`): each fused kernel is generated
(:mod:`.codegen`), compiled for the device's ``sm_XX`` to CUBIN (cached on disk, see
:mod:`.nvrtc`), loaded once, and launched on device buffers from a caching allocator
(:class:`DevicePool`). Buffers live on the host between steps in this first landing:
inputs are uploaded and outputs downloaded around each launch (library ops stay
numpy). A kernel NVRTC rejects (or the generator does not support) runs with the
numpy executor, after **one** warning naming it.

The device is reached through a *driver* (:class:`CudaDriver`: ``braze._core``'s
``dlopen``-ed CUDA driver API). :class:`~braze.backends.cuda.emulator.EmulatedDevice`
is another: it runs the same generated kernels on the host CPU, so that the whole
backend is tested where there is no GPU (CI).

>>> available() in (True, False)
True
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import _core
from ...graph.kernel import Kernel, Schedule
from ..numpy_backend import NumpyBackend, run_schedule
from ..numpy_backend import run_kernel as numpy_run_kernel
from . import nvrtc
from .codegen import GpuKernel, Unsupported, generate, kernel_args

__all__ = ["CudaBackend", "CudaDriver", "DevicePool", "available", "device_info"]

BLOCK = 256


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[int, str]:
    try:
        return tuple(_core.cuda_probe("libcuda.so.1"))  # type: ignore[return-value]
    except Exception as e:  # noqa: BLE001 - a broken driver means "not available"
        return 0, str(e)


def available() -> bool:
    """A CUDA device and NVRTC are both there (checked once per process)."""
    return _probe()[0] > 0 and nvrtc.available()


@functools.lru_cache(maxsize=1)
def device_info() -> dict[str, Any]:
    """Device 0: name, compute capability, SMs, driver version (needs a device)."""
    name, major, minor, sms, driver = _core.cuda_device()
    return {"name": name, "cc": (major, minor), "sms": sms, "driver": driver}


class CudaDriver:
    """The real device: NVRTC to CUBIN for its ``sm_XX``, the driver API through
    ``braze._core`` (what :class:`CudaBackend` asks of any driver)."""

    def info(self) -> dict[str, Any]:
        return device_info()

    def malloc(self, nbytes: int) -> int:
        return _core.cuda_malloc(nbytes)

    def upload(self, ptr: int, host: np.ndarray) -> None:
        _core.cuda_upload(ptr, host)

    def download(self, host: np.ndarray, ptr: int) -> None:
        _core.cuda_download(host, ptr)

    def load(self, g: GpuKernel, arch: str) -> int:
        image = nvrtc.compile_source(g.source, g.symbol, arch=arch, cubin=True)
        return _core.cuda_load(image, g.symbol)

    def launch(self, handle: int, grid: int, block: int, ptrs: list[int],
               args: np.ndarray) -> None:
        _core.cuda_launch(handle, grid, block, ptrs, args, True)


class DevicePool:
    """Caching device allocator: freed blocks are kept by size class and reused.

    >>> DevicePool.size_class(1000)
    1024
    """

    def __init__(self, malloc: Any = None) -> None:
        self.free: dict[int, list[int]] = {}
        self.lock = threading.Lock()
        self.malloc = malloc or _core.cuda_malloc

    @staticmethod
    def size_class(n: int) -> int:
        return max(256, 1 << max(0, (n - 1).bit_length()))

    def alloc(self, nbytes: int) -> tuple[int, int]:
        c = self.size_class(nbytes)
        with self.lock:
            lst = self.free.get(c)
            if lst:
                return lst.pop(), c
        return self.malloc(c), c

    def release(self, ptr: int, c: int) -> None:
        with self.lock:
            self.free.setdefault(c, []).append(ptr)


@dataclass
class _Loaded:
    fn: Any
    gen: GpuKernel
    args: np.ndarray


class CudaBackend(NumpyBackend):
    """Generated-CUDA execution of fused kernels (see the module docstring)."""

    name = "cuda"

    def __init__(self, optimize: bool | None = None, skip_tiny: bool = True,
                 driver: Any = None) -> None:
        super().__init__(optimize, skip_tiny, fast_replay=False)  # host plans: not yet
        self.driver = driver if driver is not None else CudaDriver()
        info = self.driver.info()
        self.arch = f"sm_{info['cc'][0]}{info['cc'][1]}"
        self.sms = info["sms"]
        self.pool = DevicePool(self.driver.malloc)
        self._kernels: dict[int, tuple[Kernel, _Loaded | None]] = {}
        self._failed: set[str] = set()
        self.stats = {"cuda": 0, "numpy": 0}

    def _run(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return run_schedule(schedule, inputs, run_kernel=self._run_kernel)

    def load(self, k: Kernel) -> _Loaded | None:
        """Generate, compile (cached) and load ``k``; None (after one warning) on failure."""
        e = self._kernels.get(id(k))
        if e is not None and e[0] is k:
            return e[1]
        loaded = None
        try:
            g = generate(k)
            if g.symbol not in self._failed:
                loaded = _Loaded(self.driver.load(g, self.arch), g, kernel_args(k))
        except Unsupported:
            pass
        except (nvrtc.NvrtcError, RuntimeError) as err:
            self._failed.add(getattr(locals().get("g"), "symbol", k.name))
            warnings.warn(f"braze cuda backend: kernel {k.name} failed to compile or load; "
                          f"it runs with the numpy executor instead.\n{err}", RuntimeWarning,
                          stacklevel=3)
        if len(self._kernels) > 8192:
            self._kernels.clear()
        self._kernels[id(k)] = (k, loaded)
        return loaded

    def launch_config(self, g: GpuKernel, k: Kernel) -> tuple[int, int]:
        """(grid, block): rows get one block each (a warp for short rows); elementwise
        kernels a grid that covers the data up to 32 blocks per SM (they grid-stride)."""
        if g.mode == "rows":
            n_red = int(np.prod(k.shape[len(k.shape) - k.n_red:])) if k.n_red else 1
            rows = int(np.prod(k.outer_shape)) if k.outer_shape else 1
            block = 32 if n_red <= 64 else (128 if n_red <= 1024 else 512)
            return max(1, min(rows, 65535 * 16)), block
        n = int(np.prod(k.shape)) if k.shape else 1
        per_block = BLOCK * g.vec
        return max(1, min((n + per_block - 1) // per_block, self.sms * 32)), BLOCK

    def _run_kernel(self, k: Kernel, bufs: list[Any]) -> None:
        loaded = self.load(k)
        if loaded is None:
            self.stats["numpy"] += 1
            numpy_run_kernel(k, bufs)
            return
        g = loaded.gen
        if g.empty:
            return
        stored = {st.slot for st in k.stores}
        held, ptrs = [], []
        try:
            for slot in g.slots:
                host = np.ascontiguousarray(bufs[slot])
                ptr, c = self.pool.alloc(host.nbytes)
                held.append((ptr, c))
                ptrs.append(ptr)
                if slot in {ld.slot for ld in k.loads} or slot in stored:
                    self.driver.upload(ptr, host.reshape(-1).view(np.uint8) if host.size else
                                       np.zeros(1, np.uint8))
            grid, block = self.launch_config(g, k)
            self.driver.launch(loaded.fn, grid, block, ptrs, loaded.args)
            for slot, ptr in zip(g.slots, ptrs):
                if slot in stored:
                    out = bufs[slot]
                    if out.size:
                        self.driver.download(out.reshape(-1).view(np.uint8), ptr)
        finally:
            for ptr, c in held:
                self.pool.release(ptr, c)
        self.stats["cuda"] += 1
