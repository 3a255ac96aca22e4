"""The ``cpu`` backend: fused kernels as generated C++, built at run time, cached on disk.

Pending graphs go through the same compiler as the ``numpy`` backend and the same
schedule executor (:func:`braze.backends.numpy_backend.run_schedule`); only the
fused kernels run differently: each is turned into C++ by :mod:`.codegen`, built
and cached by :mod:`.build`, loaded and launched (GIL released) by ``braze._core``.
Library steps (matmul...) stay numpy/BLAS. A kernel the generator does not support
(complex dtypes) silently runs with the numpy executor; a kernel whose build fails
does too, after **one** warning naming it. Tiny graphs on tiny arrays skip the
compiler, as on the numpy backend. Building is tiered for ``bz.eval``: a small kernel
whose code no cache holds is built in a background thread and runs with the numpy
executor until it is ready (one-off small work never waits for the C++ compiler);
compiled functions build every kernel on their first call.

Large planned buffers come from a :class:`~.pool.BufferPool` (reused across
evaluations once nothing refers to them: fresh pages cost a page fault each).

Threads: OpenMP inside the kernels, only for large work; ``BRAZE_NUM_THREADS`` (or
``CpuBackend(num_threads=...)``) sets the count (default: the CPUs this process may
run on).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _core
from ...graph import dtypes as dt
from ...graph.kernel import Kernel, KernelStep, Schedule
from ..numpy_backend import NumpyBackend, run_schedule
from ..numpy_backend import run_kernel as numpy_run_kernel
from ..replay import NativeCall, ReplayPlan
from . import assign as _assign
from . import autotune
from . import build as _build
from . import concat as _concat
from . import matvec as _matvec
from . import placement as _placement
from . import pooling as _pooling
from . import roll as _roll
from . import take_along as _take_along
from .codegen import GeneratedKernel, Unsupported, generate, kernel_args, kernel_slots
from .pool import BufferPool

if TYPE_CHECKING:  # concurrent.futures (and logging, which it imports) load on first use
    from concurrent.futures import Future

# bz.eval builds kernels of fewer elements that no cache holds in the background
COLD_ELEMENTS = 1 << 16
# a bz.eval schedule that comes back replays through a prepared plan when its planned
# memory is at most this (the plan keeps its arena between calls; above it, the work
# outweighs the per-step Python a plan saves)
EVAL_REPLAY_BYTES = 1 << 25

__all__ = ["CpuBackend", "available", "default_num_threads"]


def available() -> bool:
    """Is a C++ compiler there (the condition for registering ``cpu``)?"""
    return _build.compiler() is not None


def default_num_threads() -> int:
    env = os.environ.get("BRAZE_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"BRAZE_NUM_THREADS must be a positive integer, got {env!r}") \
                from None
        if n < 1:
            raise ValueError(f"BRAZE_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass
class _Native:
    handle: int
    slots: tuple[int, ...]
    args: np.ndarray
    u16: tuple[int, ...]  # bufs[] positions holding bfloat16 (passed as their uint16 bits)
    dtypes: tuple[np.dtype, ...]  # expected dtype of each buffer
    empty: bool
    symbol: str = ""
    checked: bool = False
    tuned: bool = False


class CpuBackend(NumpyBackend):
    """Generated-C++ execution of fused kernels (see the module docstring)."""

    name = "cpu"

    def __init__(self, optimize: bool | None = None, skip_tiny: bool = True,
                 num_threads: int | None = None, tiered: bool | None = None) -> None:
        super().__init__(optimize, skip_tiny)
        self.num_threads = num_threads or default_num_threads()
        # tiered building for bz.eval (see _run_eager); BRAZE_TIERED_BUILD=0 turns it off
        self.tiered = os.environ.get("BRAZE_TIERED_BUILD", "1") != "0" if tiered is None \
            else tiered
        self._kernels: dict[int, tuple[Kernel, _Native | None]] = {}
        self._schedules: dict[int, Schedule] = {}
        self._failed: dict[str, _build.BuildError] = {}  # symbol -> error (warned once)
        # tiered building (see _run_eager): id(kernel) -> (kernel, its background build)
        self._deferred: dict[int, tuple[Kernel, Future[Any]]] = {}
        self._building: dict[str, Future[Any]] = {}  # symbol -> its background build
        self._lock = threading.RLock()
        self.stats = {"native": 0, "numpy": 0}
        self.pool = BufferPool()
        # native library ops (op name -> impl(attrs, out_dtype, *inputs)); others run numpy's
        self.library: dict[str, Any] = {}
        from .qmatmul import QuantizedMatmul  # dequantize-fused kernels, built on first use

        self.library["quantized_matmul"] = QuantizedMatmul(self)
        from .attention import ScaledDotProductAttention  # one kernel per attention

        self.library["scaled_dot_product_attention"] = ScaledDotProductAttention(self)
        from .rope import Rope

        self.library["rope"] = Rope(self)
        from .scan import CumulativeSum

        self.library["cumulative_sum"] = CumulativeSum(self)
        from .bincount import Bincount

        self.library["bincount"] = Bincount(self)
        from .conv import Conv, ConvConcat  # implicit GEMM, gathered rows, depthwise

        self.library["conv"] = self.library["conv_fused"] = Conv(self)
        self.library["conv_concat"] = ConvConcat(self)
        for op in _pooling.MODES:  # windows read in place (no padded copy)
            self.library[op] = _pooling.Pool(self, op)
        from .blas import matmul_for  # native matvecs; numpy's, small ones on one BLAS thread

        self.library["matmul"] = matmul_for(lambda: self.num_threads)
        # library ops that replay programs run natively (no Python per call), when the
        # factory accepts the step's dtypes and layouts
        self.native_library: dict[str, Any] = {
            op: self.library[op].native_call
            for op in ("quantized_matmul", "scaled_dot_product_attention", "rope", "conv",
                       "conv_fused", "conv_concat")}
        self.native_library["matmul"] = lambda attrs, ins, out: _matvec.native_call(
            attrs, ins, out, self.num_threads)
        self.native_library["concat"] = _concat.native_call
        self.native_library["roll"] = _roll.native_call
        for op in _pooling.MODES:
            self.native_library[op] = functools.partial(self._pool_call, op)
        self.native_library["take_along_axis"] = _take_along.native_call
        self.native_library["gather"] = _take_along.gather_call
        _INSTANCES.add(self)

    def _pool_call(self, op: str, attrs: dict[str, Any], ins: Any, out: Any) -> Any:
        return _pooling.native_call(op, attrs, ins, out, self.num_threads)

    # ------------------------------------------------------------ execution
    def tactic_report(self, op: str, attrs: dict[str, Any],
                      inputs: list[tuple[tuple[int, ...], str]]) -> dict[str, Any] | None:
        """What autotuning chose and measured for library op ``op`` on these input
        (shape, dtype)s (``bz.explain`` shows it), or None."""
        impl = self.library.get(op)
        report = getattr(impl, "tactic_report", None)
        return report(attrs, inputs) if report is not None else None

    def assign(self, dst: np.ndarray, key: tuple[Any, ...], value: np.ndarray) -> None:
        """``dst[key] = value`` on every thread where the region is large (:mod:`.assign`)."""
        _assign.assign(dst, key, value, self.num_threads)

    def _build_plan(self, schedule: Schedule) -> ReplayPlan:
        """A replay plan whose built kernels run as ``_core.Program`` segments."""
        return ReplayPlan(schedule, self._run_kernel, self._native_call, self.library,
                          self.pool.alloc, stats=self.stats,
                          native_library=self.native_library)

    def _native_call(self, k: Kernel) -> NativeCall | str | None:
        """``k`` as a prepared native call; "skip" when empty; None: run it through
        ``_run_kernel`` (not built, numpy fallback, or not yet checked and tuned)."""
        entry = self._kernels.get(id(k))
        if entry is None or entry[0] is not k or entry[1] is None:
            return None
        native = entry[1]
        if native.empty:
            return "skip"
        if not (native.checked and native.tuned):
            return None
        return NativeCall(native.handle, native.slots, native.args)

    def _run(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self._schedules.get(id(schedule)) is not schedule:
            self.prepare(schedule)
        return run_schedule(schedule, inputs, run_kernel=self._run_kernel, alloc=self.pool.alloc,
                            library=self.library)

    def _run_eager(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Tiered building for ``bz.eval``: a small kernel (under ``COLD_ELEMENTS``) whose
        code is in no cache is built in a background thread and runs with the numpy
        executor until the build is done: one-off small work never waits ~0.2 s for the
        C++ compiler. Compiled functions build every kernel on their first call."""
        if not self.tiered:
            return self._run(schedule, inputs)
        if self._schedules.get(id(schedule)) is not schedule:
            self.prepare(schedule, defer_cold=True)
        elif self.fast_replay and schedule.peak_bytes <= EVAL_REPLAY_BYTES and \
                self._built(schedule):
            # a schedule that comes back (a loop's segment, the same eval in a loop):
            # replayed through a prepared plan as compiled functions are, not re-derived
            # step by step (its kernels all built: a plan would wait for a deferred one)
            outs = self._replays.run(schedule, inputs)
            if outs is not None:
                return outs
        return run_schedule(schedule, inputs, run_kernel=self._run_kernel_eager,
                            alloc=self.pool.alloc, library=self.library)

    def _built(self, schedule: Schedule) -> bool:
        """No kernel of ``schedule`` is still building in the background."""
        if not self._deferred:
            return True
        for step in schedule.steps:
            if isinstance(step, KernelStep):
                d = self._deferred.get(id(step.kernel))
                if d is not None and d[0] is step.kernel and not d[1].done():
                    return False
        return True

    def _run_kernel_eager(self, k: Kernel, bufs: list[Any]) -> None:
        d = self._deferred.get(id(k))
        if d is not None and d[0] is k:
            if not d[1].done():  # still building in the background: numpy's executor
                self.stats["numpy"] += 1
                numpy_run_kernel(k, bufs)
                return
            del self._deferred[id(k)]  # built (or failed): load it as usual
        self._run_kernel(k, bufs)

    def _run_kernel(self, k: Kernel, bufs: list[Any]) -> None:
        entry = self._kernels.get(id(k))
        if entry is None or entry[0] is not k:
            self._prepare_kernels([k])
            entry = self._kernels[id(k)]
        native = entry[1]
        if native is None:
            self.stats["numpy"] += 1
            numpy_run_kernel(k, bufs)
            return
        if native.empty:
            return
        arrays = [bufs[s] for s in native.slots]
        if not native.checked:
            if not self._check(k, native, arrays):
                self._kernels[id(k)] = (k, None)
                numpy_run_kernel(k, bufs)
                return
        for b in native.u16:
            arrays[b] = arrays[b].view(np.uint16)
        if not native.tuned:
            self._autotune(k, native, arrays)
        self.stats["native"] += 1
        _core.launch(native.handle, arrays, native.args)

    def _autotune(self, k: Kernel, native: _Native, arrays: list[Any]) -> None:
        """First launch: use (or find) the fastest thread count for this kernel's shapes."""
        native.tuned = True
        size = 1
        for d in k.shape:
            size *= d
        if not autotune.enabled() or self.num_threads <= 1 or size < autotune.MIN_ELEMENTS:
            return
        known = autotune.lookup(native.symbol, native.args)
        if known is None:
            outs = [arrays[native.slots.index(st.slot)] for st in k.stores]
            ins = [a for i, a in enumerate(arrays) if native.slots[i] not in
                   {st.slot for st in k.stores}]
            if any(np.may_share_memory(o, x) for o in outs for x in ins):
                return  # in place: running it more than once would be wrong

            def run(threads: int) -> None:
                args = native.args.copy()
                args[0] = threads
                _core.launch(native.handle, arrays, args)

            known = autotune.tune(native.symbol, native.args, [1, self.num_threads], run)
        if known != native.args[0]:
            native.args = native.args.copy()
            native.args[0] = known

    def _check(self, k: Kernel, native: _Native, arrays: list[Any]) -> bool:
        """First launch of a kernel object: buffers of the expected dtypes, views in bounds."""
        for a, want in zip(arrays, native.dtypes):
            if not isinstance(a, np.ndarray) or a.dtype != want or not a.flags.c_contiguous:
                warnings.warn(f"braze cpu backend: kernel {k.name} got a buffer of "
                              f"{getattr(a, 'dtype', type(a))} (expected {want}); running it "
                              "with the numpy executor", RuntimeWarning, stacklevel=2)
                return False
        kernel_args(k, arrays)  # raises on an out-of-bounds view: a compiler bug
        native.checked = True
        return True

    # ------------------------------------------------------------ preparation
    def wait_for_builds(self) -> int:
        """Wait until the kernels ``bz.eval`` handed to the background builder are built
        (or failed); returns how many were waited for. For timing the steady state: a
        build in flight takes a core from whatever runs beside it.

        >>> import braze as bz
        >>> bz.backends.get("cpu").wait_for_builds() >= 0
        True
        """
        pending = [f for f in list(self._building.values()) if not f.done()]
        for fut in pending:
            fut.exception()  # waits; a failure is reported where the kernel loads
        return len(pending)

    def prepare(self, schedule: Schedule, defer_cold: bool = False) -> None:
        """Generate, build (in parallel) and load every kernel of ``schedule`` (with
        ``defer_cold``, not the small ones no cache holds yet: see ``_run_eager``)."""
        with self._lock:
            self._prepare_kernels(schedule.kernels, defer_cold)
            self._schedules[id(schedule)] = schedule
            if len(self._schedules) > 4096:
                self._schedules.clear()

    def _prepare_kernels(self, kernels: list[Kernel], defer_cold: bool = False) -> None:
        if not _placement.PLACED:
            _place_workers(self.num_threads)
        with self._lock:
            todo: list[tuple[Kernel, GeneratedKernel]] = []
            for k in kernels:
                e = self._kernels.get(id(k))
                if e is not None and e[0] is k:
                    continue
                try:
                    g = generate(k)
                except Unsupported:
                    self._kernels[id(k)] = (k, None)
                    continue
                if g.symbol in self._failed:
                    self._kernels[id(k)] = (k, None)
                    continue
                if defer_cold and math.prod(k.shape) < COLD_ELEMENTS:
                    pending = self._building.get(g.symbol)
                    if pending is None and not _build.is_cached(g.source, g.symbol):
                        if len(self._building) > 8192:
                            self._building.clear()
                        pending = self._building[g.symbol] = _background_build(g.source,
                                                                               g.symbol)
                    if pending is not None and not pending.done():
                        if len(self._deferred) > 8192:
                            self._deferred.clear()
                        self._deferred[id(k)] = (k, pending)
                        continue
                todo.append((k, g))
            if not todo:
                return
            unique = list({g.symbol: (g.source, g.symbol) for _, g in todo}.values())
            results = dict(zip([sym for _, sym in unique], _build.load_many(unique)))
            if len(self._kernels) > 8192:
                self._kernels.clear()
            for k, g in todo:
                r = results[g.symbol]
                if isinstance(r, _build.BuildError):
                    if g.symbol not in self._failed:
                        self._failed[g.symbol] = r
                        warnings.warn(
                            f"braze cpu backend: kernel {k.name} ({g.symbol}) failed to build; "
                            f"it runs with the numpy executor instead.\n{r}",
                            RuntimeWarning, stacklevel=4)
                    self._kernels[id(k)] = (k, None)
                    continue
                self._kernels[id(k)] = (k, _native(k, g, r, self.num_threads))

    def generated(self, k: Kernel) -> GeneratedKernel:
        """The generated source of ``k`` (raises Unsupported)."""
        return generate(k)

    def _single_threaded(self) -> None:
        """In a forked child: libgomp's thread pool did not survive the fork, and a
        parallel region would wait for it forever; run every kernel on one thread."""
        self.num_threads = 1
        self._replays = self._plan_cache()  # plans hold the old args arrays
        for _, native in list(self._kernels.values()):
            if native is not None:
                native.args = native.args.copy()
                native.args[0] = 1


_BUILDER: list[Any] = []  # the background build queue (its thread made on first use)


_PLACEMENT_BUILD: list[Future[Any]] = []


def _place_workers(num_threads: int) -> None:
    """Register this thread's OpenMP workers for placement (:mod:`.placement`), once per
    process, when its kernel is built (in the background on a cold cache: a first
    ``bz.eval`` never waits for it)."""
    if num_threads < 2 or not _placement.enabled():
        _placement.PLACED = True
        return
    src, sym = _placement.source()
    if not _PLACEMENT_BUILD:
        if _build.is_cached(src, sym):
            _placement.place_workers(num_threads)
            return
        _PLACEMENT_BUILD.append(_background_build(src, sym))
    elif _PLACEMENT_BUILD[0].done():
        _placement.place_workers(num_threads)


def _background_build(source: str, symbol: str) -> Future[Any]:
    """Build (and cache) a kernel in the background; its future's result is the handle
    or the BuildError (the regular build path warns about failures when it loads it).
    One daemon thread: exiting never waits for queued builds (a ThreadPoolExecutor's
    worker would run its whole queue first)."""
    if not _BUILDER:
        import queue

        q: queue.SimpleQueue[Any] = queue.SimpleQueue()

        def work() -> None:
            while True:
                fut, src, sym = q.get()
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    fut.set_result(_build.load(src, sym))
                except _build.BuildError as e:
                    fut.set_result(e)
                except BaseException as e:  # noqa: BLE001 - handed to whoever waits
                    fut.set_exception(e)

        threading.Thread(target=work, name="braze-build", daemon=True).start()
        _BUILDER.append(q)
    from concurrent.futures import Future

    fut: Future[Any] = Future()
    _BUILDER[0].put((fut, source, symbol))
    return fut


_INSTANCES: weakref.WeakSet[CpuBackend] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    _BUILDER.clear()  # its thread did not survive the fork (nor the builds it was running)
    for b in list(_INSTANCES):
        b._deferred.clear()
        b._building.clear()
        b._single_threaded()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _native(k: Kernel, g: GeneratedKernel, handle: int, threads: int) -> _Native:
    slots = kernel_slots(k)
    dtypes: list[np.dtype | None] = [None] * len(slots)
    for ld in k.loads:
        li = k.loads.index(ld)
        for ins in k.instrs:
            if ins.op == "load" and ins.attr("load") == li:
                dtypes[slots.index(ld.slot)] = ins.dtype
    for st in k.stores:
        dtypes[slots.index(st.slot)] = k.instrs[st.instr].dtype
    u16 = tuple(i for i, d in enumerate(dtypes) if d == dt.bfloat16)
    return _Native(handle, slots, kernel_args(k, num_threads=threads), u16,
                   tuple(dtypes), g.empty, g.symbol)  # type: ignore[arg-type]


