"""One schedule run with its values resident in MLX (``mx.array`` s from step to step).

:class:`MlxRun` mirrors the cuda backend's device run: every slot's value lives in MLX,
on the host (numpy), or both. Kernels lowered to mx ops (or launched as Metal) read and
write ``mx.array`` s without evaluating (MLX builds one lazy graph for the schedule and
evaluates it once, at the outputs); library ops run as MLX ops where MLX has them
(:mod:`.library`); a value crosses to the host only for what runs there (a library op
MLX lacks, a kernel that runs with the numpy executor, a schedule output) and into MLX
only when an MLX step reads what only the host has (inputs, host results). Every
crossing is counted in the backend's ``stats`` (``uploads`` / ``downloads``); inputs a
compiled function passes unchanged on every call (its trace's constants: an LLM's
weights) are converted once and held while the host array lives (``held``).

A slot written in parts (a concatenation's kernels) is updated functionally: a store
into a box of the slot becomes ``mx.slice_update``, any other partial store a scatter
through the flat indices of its view.

>>> import numpy as np, braze as bz
>>> be = bz.backends.get("mlx")
>>> lin = bz.nn.Linear(4, 4)
>>> f = bz.compile(lambda x: bz.tanh(lin(x)) + 1)
>>> x = bz.asarray(np.ones((2, 4), np.float32))
>>> with bz.backend("mlx"):
...     y0 = f(x)  # (the first call converts the weights and holds them)
...     before = dict(be.stats)
...     y = f(x)
>>> {k: be.stats[k] - before[k] for k in ("uploads", "held", "downloads")}
{'uploads': 1, 'held': 0, 'downloads': 1}
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import numpy as np

from ...graph.kernel import Kernel, KernelStep, LibraryStep, Schedule, Store, ViewStep
from ...graph.view import View
from .. import mirrors
from ..numpy_backend import library_result, strided
from ..numpy_backend import run_kernel as numpy_run_kernel
from .lower import MX_DTYPES, lower_stores, on_cpu_if_f64, to_mx, to_numpy

if TYPE_CHECKING:
    from . import MlxBackend

__all__ = ["HeldConstants", "MlxRun"]


class HeldConstants:
    """MLX copies of host arrays that a compiled function passes unchanged on every call,
    made once and dropped when the host array dies (keyed by identity: a trace's
    constants are the same objects at every replay).

    >>> h = HeldConstants()
    >>> a = np.ones(3, np.float32)
    >>> h.get(a) is h.get(a), len(h)
    (True, 1)
    >>> del a; len(h)
    0
    """

    def __init__(self) -> None:
        self._held: dict[int, tuple[weakref.ref[np.ndarray], mx.array]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def lookup(self, a: np.ndarray) -> mx.array | None:
        e = self._held.get(id(a))
        return e[1] if e is not None and e[0]() is a else None

    def _dropper(self, key: int) -> Callable[[object], None]:
        def drop(_: object) -> None:
            self._held.pop(key, None)

        return drop

    def get(self, a: np.ndarray) -> mx.array:
        held = self.lookup(a)
        if held is None:
            key = id(a)
            held = to_mx(np.ascontiguousarray(a))
            mx.eval(held)
            self._held[key] = (weakref.ref(a, self._dropper(key)), held)
        return held


class MlxRun:
    """One schedule run (see the module docstring); ``constants``: the input positions
    whose arrays are the same, unchanged, on every call."""

    def __init__(self, backend: MlxBackend, s: Schedule, constants: Collection[int] = (),
                 strict: bool = False) -> None:
        self.b, self.s = backend, s
        # strict: each step's results evaluated at once, so that an error MLX raises only
        # when evaluating is caught at the step that made it (and that step falls back)
        self.strict = strict
        self.host_failed = False  # a host step (numpy) raised: not MLX's failure
        self.constants = {s.input_slots[i] for i in constants if i < len(s.input_slots)}
        self.inputs = set(s.input_slots)
        self.host: list[np.ndarray | None] = [None] * len(s.slots)
        self.dev: list[mx.array | None] = [None] * len(s.slots)
        self.slots_of: dict[int, list[int]] = {}
        for slot, sid in s.storage.items():
            self.slots_of.setdefault(sid, []).append(slot)

    # -- where values are
    def has_value(self, slot: int) -> bool:
        return self.dev[slot] is not None or self.host[slot] is not None

    def on_mx(self, slot: int) -> mx.array:
        """The slot's value in MLX (shaped as the slot), uploading the host's copy once."""
        v = self.dev[slot]
        if v is None:
            host = self.host[slot]
            assert host is not None, f"slot {slot} has no value"
            m = mirrors.whole(host) if slot in self.inputs else None
            if slot in self.constants:
                held = self.b.held.lookup(host)
                if held is None:
                    self.b.stats["held"] += 1
                    held = self.b.held.get(host)
                v = held
            elif m is not None:  # (a KV cache: MLX's copy, brought up to date)
                v = self.b.mirror_value(m).reshape(host.shape)
            else:
                v = to_mx(np.ascontiguousarray(host))
                if host.size:
                    self.b.stats["uploads"] += 1
            self.dev[slot] = v
        return v

    def flat(self, slot: int) -> mx.array:
        """The slot's value in MLX as a flat row-contiguous array (what ``mx.as_strided``
        reads: a view's value is copied only where MLX's layout of it is not)."""
        return mx.contiguous(self.on_mx(slot).reshape(-1))

    def on_host(self, slot: int) -> np.ndarray:
        """The slot's value as numpy, evaluated and exported once."""
        host = self.host[slot]
        if host is None:
            v = self.dev[slot]
            assert v is not None, f"slot {slot} has no value"
            info = self.s.slots[slot]
            host = to_numpy(v).reshape(info.shape)
            if not host.flags.writeable or not host.flags.c_contiguous:
                host = np.array(host, order="C")
            if host.size:
                self.b.stats["downloads"] += 1
            self.host[slot] = host
        return host

    def set_mx(self, slot: int, v: mx.array) -> None:
        info = self.s.slots[slot]
        want = MX_DTYPES[info.dtype]
        self.dev[slot] = (v if v.dtype == want else v.astype(want)).reshape(info.shape)
        self.host[slot] = None

    def set_host(self, slot: int, v: np.ndarray) -> None:
        self.host[slot], self.dev[slot] = v, None

    # -- steps
    def execute(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        s = self.s
        for slot, arr in zip(s.input_slots, inputs):
            self.host[slot] = arr
        for slot, value in s.const_slots.items():
            d = s.slots[slot].dtype
            if d in MX_DTYPES:
                self.dev[slot] = mx.array(np.asarray(value, dtype=d), dtype=MX_DTYPES[d])
            else:  # (complex: MLX has no complex128; such values stay on the host)
                self.host[slot] = np.asarray(value, dtype=d)
        for t, step in enumerate(s.steps):
            if isinstance(step, KernelStep):
                self.kernel(step.kernel)
            elif isinstance(step, LibraryStep):
                self.library(step)
            else:
                self.view(step)
            for sid in s.frees[t]:  # drop what no later step reads (MLX frees it)
                for slot in self.slots_of.get(sid, ()):
                    if slot not in s.output_slots:
                        self.dev[slot] = self.host[slot] = None
        pending = [self.dev[o] for o in s.output_slots if self.host[o] is None]
        mx.eval(*[v for v in pending if v is not None])
        return [self.on_host(o) for o in s.output_slots]

    def view(self, step: ViewStep) -> None:
        """``mx.as_strided`` of the source in MLX (lazy, no copy; a host source crosses
        once, a held constant not at all); a numpy view of a value of a dtype MLX lacks."""
        v = step.view
        if self.s.slots[step.source].dtype not in MX_DTYPES:
            self.set_host(step.output, strided(self.on_host(step.source), v))
            return
        self.dev[step.output] = mx.as_strided(self.flat(step.source), v.shape, v.strides,
                                              v.offset)
        self.host[step.output] = None

    def library(self, step: LibraryStep) -> None:
        from .library import MLX_LIBRARY, Operands

        s, b = self.s, self.b
        impl = MLX_LIBRARY.get(step.op)
        out_dtype = s.slots[step.output].dtype
        if impl is not None:
            try:
                out = impl(step.attrs, out_dtype, Operands(self, step.inputs))
            except Exception as err:  # noqa: BLE001 - MLX raised: the reference runs
                b.warn_once(f"library op {step.op}",
                            "failed under MLX; it runs with numpy instead", err)
                out = None
            if out is not None and self.strict:
                try:
                    mx.eval(out)
                except Exception as err:  # noqa: BLE001
                    b.warn_once(f"library op {step.op}",
                                "failed under MLX; it runs with numpy instead", err)
                    out = None
            if out is not None:
                self.set_mx(step.output, out)
                b.stats["mlx_library"] += 1
                return
        ins = [self.on_host(i) for i in step.inputs]
        try:
            out_host = library_result(step.op, step.attrs, out_dtype, ins)
        except Exception:
            self.host_failed = True  # (the reference's own error: the caller's to see)
            raise
        self.set_host(step.output, out_host)
        b.stats["host_library"] += 1

    def kernel(self, k: Kernel) -> None:
        b = self.b
        mode, spec = b.kernel_mode(k)
        if mode == "metal" and any(self.s.slots[st.slot].shape != st.view.shape
                                   for st in k.stores):
            mode = "lower"  # a store into part of a slot: MLX outputs are whole buffers
        saved = [(st.slot, self.dev[st.slot], self.host[st.slot]) for st in k.stores]
        try:
            if mode == "metal":
                from .metal import launch_metal

                outs = launch_metal(spec, [self.on_mx(s).reshape(-1) for s in spec.input_slots],
                                    [self.s.slots[s] for s in spec.output_slots])
                for slot, o in zip(spec.output_slots, outs):
                    self.set_mx(slot, o)
            elif mode == "lower":
                with on_cpu_if_f64(*(np.dtype(i.dtype) for i in k.instrs)):
                    values = lower_stores(k, self.flat, b.stats)
                    for st, v in zip(k.stores, values):
                        self.store(st, v)
            else:
                self.numpy_kernel(k)
            if self.strict and mode != "numpy":
                mx.eval(*[self.dev[st.slot] for st in k.stores])
        except Exception as err:  # noqa: BLE001 - MLX raised: the reference runs instead
            if mode == "numpy":
                raise
            b.kernel_failed(k, mode, err)
            for slot, dev, host in saved:  # (stores made before the error are undone)
                self.dev[slot], self.host[slot] = dev, host
            self.numpy_kernel(k)
            mode = "numpy"
        b.stats[mode] += 1

    def store(self, st: Store, v: mx.array) -> None:
        """Write ``v`` (the store view's shape) into the slot: whole, a box, or scattered."""
        info = self.s.slots[st.slot]
        view = st.view
        if view.offset == 0 and view.shape == info.shape and view.is_contiguous():
            self.set_mx(st.slot, v)
            return
        want = MX_DTYPES[info.dtype]
        base = self.on_mx(st.slot) if self.has_value(st.slot) else mx.zeros(info.shape, want)
        v = v if v.dtype == want else v.astype(want)
        start = _box_start(view, info.shape)
        if start is not None:
            self.set_mx(st.slot, mx.slice_update(base, v.reshape(view.shape), mx.array(start),
                                                 list(range(len(start)))))
            return
        flat = base.reshape(-1)
        flat[_flat_indices(view)] = v.reshape(-1)
        self.set_mx(st.slot, flat)

    def numpy_kernel(self, k: Kernel) -> None:
        """The numpy executor on host copies of the kernel's slots."""
        bufs: list[Any] = [None] * len(self.s.slots)
        for ld in k.loads:
            bufs[ld.slot] = self.on_host(ld.slot)
        for st in k.stores:  # a slot other kernels wrote parts of keeps those parts
            if bufs[st.slot] is None or not bufs[st.slot].flags.writeable:
                info = self.s.slots[st.slot]
                bufs[st.slot] = (np.array(self.on_host(st.slot)) if self.has_value(st.slot)
                                 else np.empty(info.shape, info.dtype))
        try:
            numpy_run_kernel(k, bufs)
        except Exception:
            self.host_failed = True
            raise
        for st in k.stores:
            self.set_host(st.slot, bufs[st.slot])


def _box_start(view: View, shape: tuple[int, ...]) -> list[int] | None:
    """Start indices when ``view`` is a box of a row-major array of ``shape`` (its
    strides the array's own), else None."""
    if len(view.shape) != len(shape):
        return None
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    strides.reverse()
    if any(n > 1 and st != want for n, st, want in zip(view.shape, view.strides, strides)):
        return None
    start, rest = [], view.offset
    for n, st, d in zip(view.shape, strides, shape):
        i, rest = divmod(rest, st)
        if i + n > d:
            return None
        start.append(i)
    return start if rest == 0 else None


def _flat_indices(view: View) -> mx.array:
    """The flat element index of each element of ``view`` (in its order), as mx int32/64."""
    n = view.offset + sum((d - 1) * abs(s) for d, s in zip(view.shape, view.strides)) + 1
    base = np.arange(n, dtype=np.int64 if n >= 2**31 else np.int32)
    idx = np.ascontiguousarray(strided(base, view)).reshape(-1)
    return mx.array(idx)
