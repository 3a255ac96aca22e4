"""braze.backends: where pending graphs run.

A backend turns a list of target nodes into values. ``numpy`` (the reference)
executes fused schedules (or the graph op by op) with numpy; ``cpu`` runs the fused
kernels as generated C++ and is the default wherever a C++ compiler exists; the
other generated-kernel backends (cuda, mlx) register here as they land.

The active backend: ``set_backend(name)``, ``with backend(name): ...``, or the
``BRAZE_BACKEND`` environment variable (read at import).

>>> "numpy" in available()
True
>>> with backend("numpy"):
...     current().name
'numpy'
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Protocol

from ..graph.kernel import SOURCE_GENERATORS
from ..graph.node import Node
from . import mirrors  # (host buffers a device backend keeps a copy of: a KV cache)


class Backend(Protocol):
    """What a backend provides: a name and a way to compute nodes' values."""

    name: str

    def evaluate(self, targets: Sequence[Node]) -> list[Any]:
        """Compute (and store on each node) the values of ``targets``."""
        ...

    def run_schedule(self, schedule: Any, inputs: list[Any],
                     constants: Collection[int] = (),
                     donate: tuple[tuple[int, int], ...] = ()) -> list[Any]:
        """Run an optimized schedule on bound input buffers (``bz.compile`` replay);
        ``constants``: positions of inputs that are the same, unchanged, at every call;
        ``donate``: (output position, input position) pairs whose input buffers the
        caller gives up (a backend may write those outputs into them)."""
        ...

    def assign(self, dst: Any, key: tuple[Any, ...], value: Any) -> None:
        """``dst[key] = value`` into a host buffer only one array holds (a slice store)."""
        ...


_FACTORIES: dict[str, tuple[Callable[[], Backend], Callable[[], bool]]] = {}
_INSTANCES: dict[str, Backend] = {}


def register(name: str, factory: Callable[[], Backend], is_available: Callable[[], bool]) -> None:
    """Register a backend under ``name`` (its factory runs on first use)."""
    _FACTORIES[name] = (factory, is_available)


def available() -> list[str]:
    """Names of the backends usable on this machine, the reference first.

    >>> available()[0]
    'numpy'
    """
    return [n for n, (_, ok) in _FACTORIES.items() if ok()]


def get(name: str) -> Backend:
    """The backend instance called ``name``; ValueError lists the valid names."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown backend {name!r}; registered: {sorted(_FACTORIES)}")
    factory, ok = _FACTORIES[name]
    if not ok():
        raise ValueError(f"backend {name!r} is not available here; available: {available()}")
    inst = _INSTANCES.get(name)
    if inst is None:
        inst = _INSTANCES[name] = factory()
    return inst


def _default_name() -> str:
    env = os.environ.get("BRAZE_BACKEND")
    if env:
        get(env)  # fail at import with the list of valid names, not at the first eval
        return env
    return "cpu" if _cpu_available() else "numpy"  # (not available(): it probes every GPU)


def _numpy_factory() -> Backend:
    from .numpy_backend import NumpyBackend

    return NumpyBackend()


def _cpu_factory() -> Backend:
    from .cpu import CpuBackend

    return CpuBackend()


_cpu_ok: list[bool] = []


def _cpu_available() -> bool:
    """A C++ compiler is there (checked once per process)."""
    if not _cpu_ok:
        from .cpu.build import compiler

        _cpu_ok.append(compiler() is not None)
    return _cpu_ok[0]


def _cuda_factory() -> Backend:
    from .cuda import CudaBackend

    return CudaBackend()


def _cuda_available() -> bool:
    """libcuda loads, a device is present and NVRTC is installed (probed once)."""
    from .cuda import available as cuda_available

    return cuda_available()


def _cuda_emulator_factory() -> Backend:
    from .cuda import CudaBackend
    from .gpu_emulator import EmulatedDevice

    return CudaBackend(skip_tiny=False, driver=EmulatedDevice())  # every graph as kernels


def _mlx_factory() -> Backend:
    from .mlx import MlxBackend

    return MlxBackend()


def _mlx_available() -> bool:
    """``mlx.core`` imports (probed once)."""
    from .mlx import available as mlx_available

    return mlx_available()


register("numpy", _numpy_factory, lambda: True)
register("cpu", _cpu_factory, _cpu_available)
register("cuda", _cuda_factory, _cuda_available)
register("mlx", _mlx_factory, _mlx_available)
# The cuda backend with its device emulated on the host CPU (generated CUDA C compiled as
# C++, blocks of threads as fibers): slow, for testing the CUDA generator without a GPU.
register("cuda-emulator", _cuda_emulator_factory, _cpu_available)


def _generator(module: str) -> Callable[[Any], str]:
    """``Kernel.source(target)`` through ``module``'s ``generate``, imported on first use
    (the GPU generators are not loaded by ``import braze``)."""

    def source(kernel: Any) -> str:
        return str(importlib.import_module(module, __name__).generate(kernel).source)

    return source


# Kernel.source("cpu" | "cuda" | "metal") works on any machine
SOURCE_GENERATORS.update(cpu=_generator(".cpu.codegen"), cuda=_generator(".cuda.codegen"),
                         metal=_generator(".metal.codegen"))

_DEFAULT = _default_name()
_current: contextvars.ContextVar[str] = contextvars.ContextVar("braze_backend", default=_DEFAULT)


def current() -> Backend:
    """The active backend (per thread / async context)."""
    return get(_current.get())


def set_backend(name: str) -> None:
    """Make ``name`` the active backend for this context.

    >>> set_backend("numpy")
    """
    get(name)
    _current.set(name)


@contextlib.contextmanager
def backend(name: str) -> Iterator[Backend]:
    """Run a block with ``name`` as the active backend.

    >>> with backend("numpy") as b:
    ...     b.name
    'numpy'
    """
    b = get(name)
    token = _current.set(name)
    try:
        yield b
    finally:
        _current.reset(token)


@contextlib.contextmanager
def profile() -> Iterator[list[tuple[str, float]]]:
    """Time the steps of the compiled-function replays run in the block (on the active
    backend, where it replays through prepared plans): yields a list that fills with
    (what ran, seconds) -- a native call by its fused kernel's structural name or its
    library op, a step run in Python (a numpy library op, a kernel without a native
    build) by its name and " (python)".

    >>> import braze as bz, numpy as np
    >>> f = bz.compile(lambda x: bz.softmax(x * 2.0, axis=-1))
    >>> x = bz.asarray(np.ones((4, 8), np.float32))
    >>> _ = f(x), f(x)  # trace, then prepare the replay
    >>> with profile() as calls:
    ...     _ = f(x)
    >>> all(isinstance(name, str) and t >= 0 for name, t in calls)
    True
    """
    cache = getattr(current(), "_replays", None)
    records: list[tuple[str, float]] = []
    if cache is None:
        yield records
        return
    previous, cache.profiling = cache.profiling, records
    try:
        yield records
    finally:
        cache.profiling = previous


__all__ = ["Backend", "available", "backend", "current", "get", "mirrors", "profile",
           "register", "set_backend"]
