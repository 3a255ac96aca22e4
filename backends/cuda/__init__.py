"""The ``cuda`` backend: fused kernels as generated CUDA C, compiled by NVRTC, launched
through the CUDA driver API — all loaded at run time by ``braze._core`` (``dlopen``), so
braze builds and installs without CUDA.

Available when ``libcuda`` loads, ``cuInit`` succeeds, a device is present and NVRTC is
installed (``pip install nvidia-cuda-nvrtc``); ``bz.backends.available()`` lists it only
then. Each fused kernel is generated (:mod:`.codegen`), compiled for the device's
``sm_XX`` to CUBIN (cached on disk, see :mod:`.nvrtc`), loaded once, and launched on
device buffers from a caching allocator (:class:`DevicePool`). Values stay on the device
between kernels (:class:`_DeviceRun`: a planned storage is one device allocation):
inputs are uploaded once, outputs downloaded once, and a value crosses otherwise only
for what runs on the host: matmul runs on the device (:mod:`.library`), other library
ops -- sort, fft... -- with numpy in this landing. A kernel NVRTC rejects (or the
generator does not support) runs with the numpy executor, after **one** warning naming
it.

The device is reached through a *driver* (:class:`CudaDriver`: ``braze._core``'s
``dlopen``-ed CUDA driver API). :class:`~braze.backends.gpu_emulator.EmulatedDevice`
is another: it runs the same generated kernels on the host CPU, so that the whole
backend is tested where there is no GPU (CI).

>>> available() in (True, False)
True
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ... import _core
from ...graph.kernel import Kernel, KernelStep, LibraryStep, Schedule, ViewStep
from .. import mirrors
from ..numpy_backend import SMALL_BYTES, NumpyBackend, library_result, strided
from ..numpy_backend import run_kernel as numpy_run_kernel
from . import cublas, nvrtc
from .codegen import GpuKernel, Unsupported, generate, kernel_args
from .library import gemm_geometry, gemm_plan
from .llm import PLANS, Launch, Operands, strided_copy

__all__ = ["CudaBackend", "CudaDriver", "DevicePool", "available", "device_info"]

BLOCK = 256


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[int, str]:
    try:
        return tuple(_core.cuda_probe("libcuda.so.1"))
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

    def synchronize(self) -> None:
        _core.cuda_synchronize()

    def has_gemm(self) -> bool:
        """cuBLAS loads here (checked once)."""
        try:
            cublas.load()
        except cublas.CublasError:
            return False
        return True

    def gemm(self, is_double: bool, m: int, n: int, k: int, a: int, sa: int, b: int, sb: int,
             c: int, sc: int, batch: int) -> None:
        """Row-major ``C[i] = A[i] @ B[i]`` on device pointers (batch strides in elements,
        0 broadcasts) through cuBLAS."""
        _core.cublas_gemm(is_double, m, n, k, a, sa, b, sb, c, sc, batch)


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
        self.stats = {"cuda": 0, "numpy": 0, "uploads": 0, "downloads": 0, "cuda_library": 0,
                      "host_library": 0, "held": 0, "cublas": 0, "mirror_bytes": 0, "cuda_views": 0}
        # mirrored host buffers' device copies: pointer of the host buffer -> [Mirror,
        # device pointer, size class, version synced (None: not yet)]
        self._mirrored: dict[int, list[Any]] = {}
        # the driver's GEMM (cuBLAS; the emulator's stand-in) where it has one
        has = getattr(self.driver, "has_gemm", None)
        self.has_gemm = bool(has()) if has is not None else False
        self._library: dict[str, Any] = {}
        # compiled functions' constants (weights) on the device: (id(host), view or None)
        # -> (weakref to the host array, device pointer, size class); freed with the host
        self._held: dict[tuple[int, Any], tuple[Any, int, int]] = {}

    def run_schedule(self, schedule: Schedule, inputs: list[np.ndarray],
                     constants: Collection[int] = (),
                     donate: tuple[tuple[int, int], ...] = ()) -> list[np.ndarray]:
        """Run ``schedule`` with device-resident values; ``constants``: positions of inputs
        that are the same arrays, unchanged, at every call (uploaded once and held);
        ``donate`` is not used (results come back in new host buffers)."""
        with np.errstate(all="ignore"):
            with _DeviceRun(self, schedule, constants) as run:
                return run.execute(inputs)

    def mirror_pointer(self, m: mirrors.Mirror) -> int:
        """The device copy of a mirrored host buffer (:mod:`braze.backends.mirrors`), synced:
        uploaded whole the first time (or when too far behind), else the byte ranges
        written since the last sync."""
        base = m.base
        assert base is not None
        flat = base.reshape(-1).view(np.uint8)
        e = self._mirrored.get(m.ptr)
        if e is None or e[0] is not m:
            ptr, c = self.pool.alloc(max(1, m.nbytes))
            e = self._mirrored[m.ptr] = [m, ptr, c, None]
            weakref.finalize(base, self._drop_mirror, m)
        version, changes = m.sync(e[3])
        for o, n in changes if changes is not None else [(0, m.nbytes)]:
            if n:
                self.driver.upload(e[1] + o, flat[o:o + n])
                self.stats["mirror_bytes"] += n
        e[3] = version
        return int(e[1])

    def _drop_mirror(self, m: mirrors.Mirror) -> None:
        e = self._mirrored.get(m.ptr)
        if e is not None and e[0] is m:
            del self._mirrored[m.ptr]
            self.pool.release(e[1], e[2])

    def held_pointer(self, host: np.ndarray, view: Any = None) -> int:
        """The device copy of a held constant (or of a ``view`` of it, made row-major: a
        transposed weight), uploaded on first use."""
        key = (id(host), view)
        e = self._held.get(key)
        if e is not None and e[0]() is host:
            return e[1]
        data = host if view is None else np.ascontiguousarray(strided(host, view))
        ptr, c = self.pool.alloc(max(1, data.nbytes))
        if data.size:
            self.driver.upload(ptr, np.ascontiguousarray(data).reshape(-1).view(np.uint8))

        def drop(_: object) -> None:
            e = self._held.pop(key, None)
            if e is not None:
                self.pool.release(e[1], e[2])

        self._held[key] = (weakref.ref(host, drop), ptr, c)
        self.stats["held"] += 1
        return ptr

    def load(self, k: Kernel) -> _Loaded | None:
        """Generate, compile (cached) and load ``k``; None (after one warning) on failure."""
        e = self._kernels.get(id(k))
        if e is not None and e[0] is k:
            return e[1]
        loaded = None
        try:
            g = generate(k)
        except Unsupported:
            g = None
        except RuntimeError as err:  # a generator failure: as a build failure
            self._failed.add(k.name)
            _warn_fallback(f"kernel {k.name}", "it runs with the numpy executor instead", err)
            g = None
        if g is not None and g.symbol not in self._failed:
            handle = self._driver_load(g, f"kernel {k.name}",
                                       "it runs with the numpy executor instead")
            if handle is None:
                self._failed.add(g.symbol)
            else:
                loaded = _Loaded(handle, g, kernel_args(k))
        if len(self._kernels) > 8192:
            self._kernels.clear()
        self._kernels[id(k)] = (k, loaded)
        return loaded

    def load_library(self, g: GpuKernel) -> Any:
        """A launch handle for a library kernel (:mod:`.library`), or None -- after one
        warning -- when it does not build (the op then runs on the host)."""
        if g.symbol not in self._library:
            self._library[g.symbol] = self._driver_load(g, f"library kernel {g.symbol}",
                                                        "its ops run on the host")
        return self._library[g.symbol]

    def _driver_load(self, g: GpuKernel, what: str, instead: str) -> Any:
        """The driver's handle for ``g``, or None after one warning (NVRTC or the driver
        refused it)."""
        try:
            return self.driver.load(g, self.arch)
        except (nvrtc.NvrtcError, RuntimeError) as err:
            _warn_fallback(what, instead, err)
            return None

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

    def _run(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        with _DeviceRun(self, schedule) as run:
            return run.execute(inputs)


# library ops a model's hot path runs that have no device kernel yet: one warning each
_HOST_WARNED_OPS = frozenset({"conv", "conv_fused", "conv_concat"})
_HOST_WARNED: set[str] = set()


def _warn_fallback(what: str, instead: str, err: Exception) -> None:
    warnings.warn(f"braze cuda backend: {what} failed to compile or load; {instead}.\n{err}",
                  RuntimeWarning, stacklevel=4)


class _DeviceRun:
    """One schedule run with device-resident values: each slot's value lives on the
    device, on the host, or both. Kernels read and write device buffers (a planned
    storage is one device allocation, shared by the slots the memory plan puts in it);
    a value crosses to the host only when something there needs it -- a library op, a
    kernel that falls back to numpy, a view step, a schedule output -- and to the
    device only when a kernel reads what only the host has (inputs, library results).
    Device memory goes back to the pool when the plan frees its storage and at the end."""

    def __init__(self, backend: CudaBackend, s: Schedule, constants: Collection[int] = ()
                 ) -> None:
        self.b, self.s = backend, s
        self.constants = {s.input_slots[i] for i in constants if i < len(s.input_slots)}
        self.inputs = set(s.input_slots)
        self.host: list[np.ndarray | None] = [None] * len(s.slots)
        self.dev: list[int | None] = [None] * len(s.slots)
        self.storages: dict[int, tuple[int, int]] = {}  # storage id -> (ptr, size class)
        self.owned: dict[int, tuple[int, int]] = {}  # unplanned slot -> (ptr, size class)
        self.slots_of: dict[int, list[int]] = {}
        for slot, sid in s.storage.items():
            self.slots_of.setdefault(sid, []).append(slot)

    def __enter__(self) -> _DeviceRun:
        return self

    def __exit__(self, *exc: object) -> None:
        for ptr, c in [*self.storages.values(), *self.owned.values()]:
            self.b.pool.release(ptr, c)

    # -- where values are
    def _alloc(self, slot: int) -> int:
        info = self.s.slots[slot]
        sid = self.s.storage.get(slot)
        if sid is not None and info.nbytes >= SMALL_BYTES:
            if sid not in self.storages:
                self.storages[sid] = self.b.pool.alloc(self.s.storage_bytes[sid])
            ptr = self.storages[sid][0]
        else:
            if slot not in self.owned:
                self.owned[slot] = self.b.pool.alloc(max(1, info.nbytes))
            ptr = self.owned[slot][0]
        self.dev[slot] = ptr
        return ptr

    def has_value(self, slot: int) -> bool:
        """Something (all or part of the slot) was written, on either side."""
        return self.dev[slot] is not None or self.host[slot] is not None

    def on_device(self, slot: int) -> int:
        ptr = self.dev[slot]
        if ptr is None:
            host = self.host[slot]
            assert host is not None, f"slot {slot} has no value"
            if slot in self.constants:
                ptr = self.dev[slot] = self.b.held_pointer(host)
                return ptr
            m = mirrors.whole(host) if slot in self.inputs else None
            if m is not None:  # (a KV cache: the device copy, brought up to date)
                ptr = self.dev[slot] = self.b.mirror_pointer(m)
                return ptr
            ptr = self._alloc(slot)
            if host.size:
                self.b.driver.upload(ptr, np.ascontiguousarray(host).reshape(-1).view(np.uint8))
                self.b.stats["uploads"] += 1
        return ptr

    def on_host(self, slot: int) -> np.ndarray:
        host = self.host[slot]
        if host is None:
            info = self.s.slots[slot]
            host = np.empty(info.shape, info.dtype)
            ptr = self.dev[slot]
            assert ptr is not None, f"slot {slot} has no value"
            if host.size:
                self.b.driver.download(host.reshape(-1).view(np.uint8), ptr)
                self.b.stats["downloads"] += 1
            self.host[slot] = host
        return host

    def wrote_on_device(self, slot: int) -> None:
        self.host[slot] = None
        # the other slots of the same storage are dead (the plan reuses it only then)

    # -- steps
    def execute(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        s = self.s
        for slot, arr in zip(s.input_slots, inputs):
            self.host[slot] = arr if arr.flags.c_contiguous else np.array(arr, order="C")
        for slot, value in s.const_slots.items():
            self.host[slot] = np.asarray(value, dtype=s.slots[slot].dtype)
        for t, step in enumerate(s.steps):
            if isinstance(step, KernelStep):
                self.kernel(step.kernel)
            elif isinstance(step, LibraryStep):
                if not self.library_on_device(step):
                    self.library_on_host(step)
            else:
                self.view(step)
            for sid in s.frees[t]:
                mem = self.storages.pop(sid, None)
                if mem is not None:
                    self.b.pool.release(*mem)
                for slot in self.slots_of.get(sid, ()):
                    if slot not in s.output_slots:
                        self.dev[slot] = None
                        self.host[slot] = None
        return [self.on_host(o) for o in s.output_slots]

    def view(self, step: ViewStep) -> None:
        """A reshape-like view (row-major strides, any offset) of a device value is a
        pointer into it (the memory plan keeps the source alive while the view is read);
        another view of a device value is copied on the device (``bz_strided_copy``);
        views of host values are made on the host."""
        src, view, out = step.source, step.view, step.output
        if self.dev[src] is None and src in self.constants:
            host = self.host[src]
            assert host is not None
            if not replace(view, offset=0).is_contiguous():  # (a transposed weight: its
                self.host[out] = None  # row-major copy held on the device)
                self.dev[out] = self.b.held_pointer(host, view)
                return
            self.on_device(src)  # (a pointer into the held constant)
        src_host = self.host[src]
        if self.dev[src] is None and src in self.inputs and src_host is not None \
                and mirrors.whole(src_host) is not None:
            self.on_device(src)  # (a view of a KV cache: into its device copy)
        ptr = self.dev[src]
        on_dev = ptr is not None and replace(view, offset=0).is_contiguous()
        if ptr is not None and not on_dev and self.device_copy(src, view, out):
            return  # (on the device even where the host has the value: an upload saved)
        self.host[out] = (strided(self.on_host(src), view)
                          if self.host[src] is not None or not on_dev else None)
        self.dev[out] = (ptr + view.offset * self.s.slots[out].dtype.itemsize
                         if ptr is not None and on_dev else None)

    def device_copy(self, src: int, view: Any, out: int) -> bool:
        """Materialize a strided ``view`` of the device value of slot ``src`` into ``out``
        on the device (``bz_strided_copy``), instead of crossing to the host and back."""
        la = strided_copy(view, self.s.slots[out].dtype.itemsize, src, self.b.sms)
        return la is not None and self.launch([la], out, "cuda_views")

    def library_on_device(self, step: LibraryStep) -> bool:
        """A matmul the device GEMM takes (see :mod:`.library`), or an LLM op the device
        kernels of :mod:`.llm` take, run there."""
        s = self.s
        sid = s.storage.get(step.output)
        if sid is not None and any(s.storage.get(i) == sid for i in step.inputs):
            return False  # (an output planned over an operand's memory: the host's copy)
        if step.op == "matmul":
            return self.matmul_on_device(step)
        plan = PLANS.get(step.op)
        if plan is None:
            return False
        out = step.output
        ops = Operands(step.inputs, [s.slots[i].shape for i in step.inputs],
                       [s.slots[i].dtype for i in step.inputs], s.slots[out].shape,
                       s.slots[out].dtype, self.b.sms, self.on_host)
        launches = plan(dict(step.attrs), ops)
        return launches is not None and self.launch(launches, out)

    def launch(self, launches: list[Launch], out: int, counter: str = "cuda_library") -> bool:
        """Run library ``launches`` writing slot ``out`` (each launch's input pointers, then
        the output's), counted once in ``stats[counter]``; False, launching nothing, when
        a kernel does not load."""
        b = self.b
        handles = [b.load_library(la.kernel) for la in launches]
        if any(h is None for h in handles):
            return False
        dst = self.output_pointer(out)
        for la, h in zip(launches, handles):
            b.driver.launch(h, la.grid, la.block, [self.on_device(i) for i in la.inputs] + [dst],
                            la.args)
        self.wrote_on_device(out)
        b.stats[counter] += 1
        return True

    def output_pointer(self, slot: int) -> int:
        """Where a step writes ``slot`` on the device (its planned memory)."""
        ptr = self.dev[slot]
        return ptr if ptr is not None else self._alloc(slot)

    def matmul_on_device(self, step: LibraryStep) -> bool:
        """Through the driver's GEMM (cuBLAS) where it has one, else the tiled kernel."""
        s, b = self.s, self.b
        x, y = step.inputs
        out = step.output
        dtypes = {s.slots[i].dtype for i in (x, y, out)}
        geo = gemm_geometry(s.slots[x].shape, s.slots[y].shape, s.slots[out].dtype)
        if geo is None or len(dtypes) != 1:
            return False
        if b.has_gemm:
            ctype, batch, m, n, k, sa, sb = geo
            b.driver.gemm(ctype == "double", m, n, k, self.on_device(x), sa, self.on_device(y),
                          sb, self.output_pointer(out), m * n, batch)
            self.wrote_on_device(out)
            b.stats["cublas"] += 1
            return True
        plan = gemm_plan(s.slots[x].shape, s.slots[y].shape, s.slots[out].dtype, b.sms)
        assert plan is not None  # (gemm_geometry took it)
        g, args, grid = plan
        return self.launch([Launch(g, (x, y), grid, 256, args)], out)

    def library_on_host(self, step: LibraryStep) -> None:
        """Any other library op: numpy on host copies of its operands (a convolution, for
        which a device kernel is expected, after one warning per process)."""
        if step.op in _HOST_WARNED_OPS and step.op not in _HOST_WARNED:
            _HOST_WARNED.add(step.op)
            warnings.warn(f"braze cuda backend: {step.op} has no device kernel yet; it runs "
                          "with numpy on the host (its operands cross to the host and back)",
                          RuntimeWarning, stacklevel=2)
        ins = [self.on_host(i) for i in step.inputs]
        self.host[step.output] = library_result(step.op, step.attrs,
                                                self.s.slots[step.output].dtype, ins)
        self.dev[step.output] = None
        self.b.stats["host_library"] += 1

    def kernel(self, k: Kernel) -> None:
        b = self.b
        loaded = b.load(k)
        if loaded is None:  # the numpy executor, on host copies
            b.stats["numpy"] += 1
            bufs: list[Any] = [None] * len(self.s.slots)
            for ld in k.loads:
                bufs[ld.slot] = self.on_host(ld.slot)
            for st in k.stores:  # a slot other kernels wrote parts of keeps those parts
                if bufs[st.slot] is None:
                    info = self.s.slots[st.slot]
                    bufs[st.slot] = (self.on_host(st.slot) if self.has_value(st.slot)
                                     else np.empty(info.shape, info.dtype))
            numpy_run_kernel(k, bufs)
            for st in k.stores:
                self.host[st.slot] = bufs[st.slot]
                self.dev[st.slot] = None
            return
        g = loaded.gen
        stored = {st.slot for st in k.stores}
        ptrs = []
        for slot in g.slots:  # a stored slot the host holds (part of it) is uploaded too
            ptrs.append(self.on_device(slot) if self.has_value(slot) else self._alloc(slot))
        if not g.empty:
            grid, block = b.launch_config(g, k)
            b.driver.launch(loaded.fn, grid, block, ptrs, loaded.args)
        for slot in stored:
            self.wrote_on_device(slot)
        b.stats["cuda"] += 1
