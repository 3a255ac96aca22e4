"""The ``mlx`` backend: schedules run through MLX (``pip install 'braze[mlx]'``).

Available when ``import mlx.core`` works (Apple silicon, or MLX's CPU build on Linux:
``mlx[cpu]``). Pending graphs go through the same compiler as every backend; the
schedule then runs *resident* in MLX (:class:`~.resident.MlxRun`): values stay
``mx.array`` s from the first step to the last, MLX evaluates the schedule's graph once at
its outputs, inputs cross into MLX once and outputs out once (counted in
``stats["uploads"]`` / ``stats["downloads"]``), and a compiled function's constants (its
weights) are converted on its first call and held (``stats["held"]``). Each fused
kernel runs one of three ways, chosen once per kernel (:meth:`MlxBackend.mode`):

* ``"metal"`` — on a Metal device: the kernel's generated MSL
  (:mod:`braze.backends.metal.codegen`) launched with ``mx.fast.metal_kernel``
  (:mod:`.metal`);
* ``"lower"`` — elsewhere (Linux, CI), and for kernels the Metal path does not take
  (float64, in-place or partial stores): lowered to ``mlx.core`` ops instruction by
  instruction (:mod:`.lower`); float64 kernels run on MLX's CPU stream;
* ``"numpy"`` — kernels with a dtype MLX lacks (complex) or empty ones: the numpy
  executor on host copies, as is any kernel MLX raises on (after **one** warning naming
  it; an error MLX raises only while evaluating reruns the schedule step by step to find
  the step).

Library ops run as MLX ops where MLX has them (:mod:`.library`: matmul, quantized
matmul, rope, attention, convolution), the others with their numpy reference on host
copies. ``use_metal`` (default: a Metal device is there; environment
``BRAZE_MLX_METAL=0|1``) picks the Metal path.

>>> import braze as bz
>>> ("mlx" in bz.backends.available()) == available()
True
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
import weakref
from collections.abc import Collection
from typing import Any

import numpy as np

from ...graph.kernel import Kernel, Schedule
from ..numpy_backend import NumpyBackend

__all__ = ["MlxBackend", "available", "metal_available"]

MODES = ("metal", "lower", "numpy")


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Does ``mlx.core`` import here? (checked once per process)"""
    try:
        import mlx.core  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install means "not available"
        return False
    return True


@functools.lru_cache(maxsize=1)
def metal_available() -> bool:
    """Does MLX have a Metal device here (macOS on Apple silicon)?"""
    if not available():
        return False
    import mlx.core as mx

    try:
        return bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001
        return False


def _use_metal_default() -> bool:
    env = os.environ.get("BRAZE_MLX_METAL")
    if env in ("0", "1"):
        return env == "1"
    if env:
        raise ValueError(f"BRAZE_MLX_METAL must be 0 or 1, got {env!r}")
    return metal_available()


class MlxBackend(NumpyBackend):
    """MLX execution of fused schedules (see the module docstring).

    >>> MlxBackend(use_metal=False).use_metal
    False
    """

    name = "mlx"
    compile_small_graphs_at_once = True  # (MLX's float32 libm is not numpy's)

    def __init__(self, optimize: bool | None = None, skip_tiny: bool = True,
                 use_metal: bool | None = None) -> None:
        # (no host replay plans: a compiled function's replays run resident in MLX too)
        super().__init__(optimize, skip_tiny, fast_replay=False)
        self.use_metal = _use_metal_default() if use_metal is None else use_metal
        self._modes: dict[int, tuple[Kernel, str, Any]] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self.stats = {"metal": 0, "lower": 0, "numpy": 0, "bridged": 0, "uploads": 0,
                      "downloads": 0, "held": 0, "mlx_library": 0, "host_library": 0,
                      "mirror_bytes": 0}
        self._held: Any = None
        # mirrored host buffers' MLX copies: pointer -> [Mirror, flat mx.array, version]
        self._mirrored: dict[int, list[Any]] = {}

    @property
    def held(self) -> Any:
        """The :class:`~.resident.HeldConstants` of this backend (compiled functions'
        constants converted once)."""
        if self._held is None:
            from .resident import HeldConstants

            self._held = HeldConstants()
        return self._held

    def mirror_value(self, m: Any) -> Any:
        """MLX's flat copy of a mirrored host buffer (:mod:`braze.backends.mirrors`), synced:
        converted whole the first time (or when too far behind), else the ranges written
        since the last sync replaced."""
        import mlx.core as mx

        from .lower import to_mx

        base = m.base
        flat = base.reshape(-1)
        e = self._mirrored.get(m.ptr)
        if e is None or e[0] is not m:
            e = self._mirrored[m.ptr] = [m, None, None]
            weakref.finalize(base, self._mirrored.pop, m.ptr, None)
        version, changes = m.sync(e[2])
        item = flat.itemsize
        if changes is None or any(o % item or n % item for o, n in changes):
            e[1] = to_mx(flat)
            self.stats["mirror_bytes"] += m.nbytes
        else:
            v = e[1]
            for o, n in changes:
                lo, hi = o // item, (o + n) // item
                v = mx.slice_update(v, to_mx(flat[lo:hi]), mx.array([lo]), [0])
                self.stats["mirror_bytes"] += n
            e[1] = v
        mx.eval(e[1])
        e[2] = version
        return e[1]

    def run_schedule(self, schedule: Schedule, inputs: list[np.ndarray],
                     constants: Collection[int] = (),
                     donate: tuple[tuple[int, int], ...] = ()) -> list[np.ndarray]:
        """Run ``schedule`` resident in MLX; ``constants``: positions of inputs that are
        the same arrays, unchanged, at every call (held in MLX across calls); ``donate``
        is not used (results come back from MLX in new host buffers)."""
        with np.errstate(all="ignore"):
            return self._run(schedule, inputs, constants)

    def _run(self, schedule: Schedule, inputs: list[np.ndarray],
             constants: Collection[int] = ()) -> list[np.ndarray]:
        from .resident import MlxRun

        run = MlxRun(self, schedule, constants)
        try:
            return run.execute(inputs)
        except Exception as err:  # noqa: BLE001 - found only when MLX evaluated the graph
            if run.host_failed:
                raise  # (numpy's reference raised: an error of the call, e.g. an index)
            self.warn_once(f"schedule of {len(schedule.steps)} steps",
                           "failed when MLX evaluated it; it runs again step by step, a "
                           "failing step with numpy", err)
            return MlxRun(self, schedule, constants, strict=True).execute(inputs)

    def mode(self, k: Kernel) -> str:
        """How ``k`` runs here: ``"metal"``, ``"lower"`` or ``"numpy"`` (cached per kernel;
        a softmax in float32 is ``"metal"`` with ``use_metal``, ``"lower"`` without)."""
        return self._entry(k)[1]

    def kernel_mode(self, k: Kernel) -> tuple[str, Any]:
        """``(mode, metal spec or None)`` of ``k`` (see :meth:`mode`)."""
        e = self._entry(k)
        return e[1], e[2]

    def _entry(self, k: Kernel) -> tuple[Kernel, str, Any]:
        e = self._modes.get(id(k))
        if e is not None and e[0] is k:
            return e
        from .lower import lowerable

        e = (k, "numpy", None)
        if self.use_metal:
            from .metal import Unsupported, metal_spec

            with contextlib.suppress(Unsupported):
                e = (k, "metal", metal_spec(k))
        if e[1] == "numpy" and lowerable(k):
            e = (k, "lower", None)
        with self._lock:
            if len(self._modes) > 8192:
                self._modes.clear()
            self._modes[id(k)] = e
        return e

    def kernel_failed(self, k: Kernel, mode: str, err: Exception) -> None:
        """``k`` raised under MLX: one warning naming it; it runs with numpy from now on."""
        self.warn_once(f"kernel {k.name}", f"failed under MLX ({mode}); it runs with the "
                       "numpy executor instead", err)
        with self._lock:
            self._modes[id(k)] = (k, "numpy", None)

    def warn_once(self, what: str, instead: str, err: Exception) -> None:
        if what in self._warned:
            return
        self._warned.add(what)
        warnings.warn(f"braze mlx backend: {what}: {instead}.\n{err}", RuntimeWarning,
                      stacklevel=4)
