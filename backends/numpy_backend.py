"""The reference backend: numpy kernels for the compiler's schedules, or op by op.

By default a pending graph goes through the compiler (simplify, fuse, memory plan)
and each fused kernel of the schedule runs *op by op inside the kernel* with numpy,
over blocks of rows so its temporaries stay small. Tiny graphs on tiny arrays
(at most ``TINY_NODES`` nodes of at most ``TINY_ELEMENTS`` elements) skip the
compiler: there, its fixed cost exceeds anything fusion could save. ``BRAZE_OPTIMIZE=0`` (or
``NumpyBackend(optimize=False)``) runs the unoptimized graph op by op instead —
the ground truth every pass and every other backend is tested against.

float16/bfloat16 are computed in float32 and each op's result is rounded to its dtype,
both op by op and inside fused kernels (so fusion does not change low-precision results).

>>> import numpy as np
>>> from braze.graph.node import constant
>>> NumpyBackend().evaluate([constant(np.int8(3))])
[array(3, dtype=int8)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..graph.compiler import CACHE, compile_graph
from ..graph.evaluate import evaluate, topo_order
from ..graph.ir import trace
from ..graph.kernel import Kernel, KernelStep, LibraryStep, Schedule
from ..graph.node import Node
from ..graph.ops import OPS, PARAMETER, mean_ref, reference_eval
from ..graph.ops.reductions import blocked_reduce
from ..graph.view import View

# A native library-op implementation: (attrs, out_dtype, *inputs) -> result array.
LibraryImpl = Callable[..., np.ndarray]

_LOW = (np.dtype(np.float16), np.dtype("bfloat16"))
BLOCK_ELEMENTS = 1 << 16  # elements per block when a kernel runs in pieces
TINY_NODES = 8  # graphs this small on arrays this small skip the compiler (eval overhead)
TINY_ELEMENTS = 256
SMALL_NODES = 64  # such graphs on tiny arrays are compiled only when they come back
SMALL_BYTES = 1 << 16  # buffers below this are allocated directly (no planned storage)


class NumpyBackend:
    """numpy execution of pending graphs (fused schedules, or op by op)."""

    name = "numpy"
    # a small graph on tiny arrays is compiled at its first evaluation, not its second:
    # where compiled kernels' math differs from numpy's in the last bits (mlx), a graph
    # evaluated twice then gives the same bits both times
    compile_small_graphs_at_once = False

    def __init__(self, optimize: bool | None = None, skip_tiny: bool = True,
                 fast_replay: bool = True) -> None:
        if optimize is None:
            optimize = os.environ.get("BRAZE_OPTIMIZE", "1") != "0"
        self.optimize = optimize
        self.skip_tiny = skip_tiny
        # run_schedule replays through prepared plans (backends/replay.py) from a
        # schedule's second call on; False: always the general executor
        self.fast_replay = fast_replay
        self._replays = self._plan_cache()

    def _plan_cache(self) -> Any:
        from .replay import PlanCache

        return PlanCache(self._build_plan)

    def _build_plan(self, schedule: Schedule) -> Any:
        """A :class:`~braze.backends.replay.ReplayPlan` of ``schedule`` for this backend."""
        from .replay import ReplayPlan

        return ReplayPlan(schedule, _numpy_run_kernel)

    def evaluate(self, targets: Sequence[Node]) -> list[Any]:
        with np.errstate(all="ignore"):  # IEEE semantics: inf/nan results, no warnings
            if not self.optimize:
                return evaluate(targets, run_node)
            order = topo_order(targets)
            traced = None
            if self.skip_tiny and len(order) <= SMALL_NODES and all(
                    n.size <= TINY_ELEMENTS for n in order):
                # A tiny graph on tiny arrays: compiling costs more than fusion saves; a
                # small one too, unless it comes back (then it is compiled and cached).
                if len(order) <= TINY_NODES:
                    return _evaluate_tiny(targets, order)
                traced = trace(list(targets), order)
                if not CACHE.sighted(traced.key) and not self.compile_small_graphs_at_once:
                    return _evaluate_tiny(targets, order)
            asked = len(targets)
            targets = list(targets)
            # An intermediate that an earlier compiled evaluation computed and dropped is
            # held by someone (a user array, another pending graph): computed again now,
            # it is kept this time (``y = stack(xs)`` then ``y[i]`` for every i would
            # otherwise recompute the whole stack per element).
            wanted = {id(t) for t in targets}
            for n in order:
                if n.inputs and id(n) not in wanted:
                    if n.pending_evals:
                        targets.append(n)
                    else:
                        n.pending_evals = 1
            if traced is None or len(targets) != asked:
                traced = trace(targets, order)  # (the order covers the intermediates added)
            schedule, leaves = compile_graph(targets, traced)
            for leaf in leaves:
                if leaf.data is None:  # a bz.compile placeholder read while tracing
                    leaf.op.reference()
            values = self._run_eager(schedule, [leaf.data for leaf in leaves])
            for t, v in zip(targets, values):
                t.data = v
                t.inputs = ()
            return values[:asked]


    def assign(self, dst: np.ndarray, key: tuple[Any, ...], value: np.ndarray) -> None:
        """``dst[key] = value`` into a buffer only one array holds (a slice store that
        goes in place; ``key`` basic): numpy's store here, natively where a backend can."""
        dst[key] = value

    def run_schedule(self, schedule: Schedule, inputs: list[np.ndarray],
                     constants: Collection[int] = (),
                     donate: tuple[tuple[int, int], ...] = ()) -> list[np.ndarray]:
        """Run a compiled schedule on input arrays (``bz.compile`` replays through this).
        ``constants``: positions of inputs that are the same arrays, unchanged, at every
        call (a backend with its own memory may keep its copy of them; host backends
        read them in place). ``donate``: (output position, input position) pairs whose
        input buffers the caller gives up; a replay writes those outputs into them where
        the schedule allows (a training step's state updated in place).

        From a schedule's second call on, through a prepared plan (see
        :mod:`braze.backends.replay`): same results, far less Python per step."""
        if self.fast_replay:
            outs = self._replays.run(schedule, inputs, donate)
            if outs is not None:
                return outs
        with np.errstate(all="ignore"):
            return self._run(schedule, inputs)

    def _run(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Execute ``schedule``; subclasses plug in their own kernel executor here."""
        return run_schedule(schedule, inputs)

    def _run_eager(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Execute ``schedule`` for a ``bz.eval`` (not a compiled function's call): where
        building kernels costs time, a backend may run one-off small work differently."""
        return self._run(schedule, inputs)


def _evaluate_tiny(targets: Sequence[Node], order: list[Node]) -> list[Any]:
    """Op by op, without the bookkeeping that frees intermediates early (they are tiny
    and die with this call). A node drops its inputs only once its value is stored."""
    for n in order:
        if n.op is PARAMETER:
            n.op.reference()  # raises: a placeholder read outside its trace
    for n in order:
        n.data = run_node(n, *[x.data for x in n.inputs])
        n.inputs = ()
    return [t.data for t in targets]


def run_node(node: Node, *xs: np.ndarray) -> np.ndarray:
    """Compute one node from its inputs' values with the op's numpy reference."""
    out = reference_eval(node.op, node.attrs, node.dtype, *xs)
    if out.shape != node.shape:  # a reference that disagrees with its shape rule is a bug
        raise AssertionError(f"{node.op.name}: reference gave shape {out.shape}, rule said "
                             f"{node.shape}")
    return out


# ---------------------------------------------------------------- schedules
def strided(buf: np.ndarray, view: View) -> np.ndarray:
    """``buf`` (row-major) seen through ``view``."""
    if view.size == 0:
        return np.empty(view.shape, buf.dtype)
    flat = buf.reshape(-1)
    item = buf.dtype.itemsize
    return np.lib.stride_tricks.as_strided(flat[view.offset:], view.shape,
                                           tuple(s * item for s in view.strides))


def library_value(op: str, attrs: Any, dtype: np.dtype, ins: Sequence[np.ndarray],
                  impl: LibraryImpl | None = None) -> np.ndarray:
    """A library op's result: its native ``impl`` if given, else its numpy reference."""
    if impl is not None:
        return impl(attrs, dtype, *ins)
    return reference_eval(OPS[op], attrs, dtype, *ins)


def library_result(op: str, attrs: Any, dtype: np.dtype, ins: Sequence[np.ndarray],
                   impl: LibraryImpl | None = None) -> np.ndarray:
    """:func:`library_value` as a buffer a schedule can own: row-major, sharing no memory
    with its inputs (a kernel may later run in place over it)."""
    out = _c_order(library_value(op, attrs, dtype, ins, impl))
    return out.copy() if any(np.may_share_memory(out, x) for x in ins) else out


def run_schedule(s: Schedule, inputs: list[np.ndarray],
                 run_kernel: Callable[[Kernel, list[Any]], None] | None = None,
                 alloc: Callable[[int], np.ndarray] | None = None,
                 library: Mapping[str, LibraryImpl] | None = None) -> list[np.ndarray]:
    """Execute a schedule on input arrays; returns the output arrays.

    ``run_kernel(kernel, bufs)`` executes one fused kernel over the slot buffers
    (default: the numpy executor below); ``alloc(nbytes)`` returns a uint8 array for
    a planned storage (default: ``np.empty``); ``library[op](attrs, out_dtype, *inputs)``
    runs a library op natively (default and fallback: its numpy reference); view steps
    always run here."""
    if run_kernel is None:
        run_kernel = _numpy_run_kernel
    if alloc is None:
        alloc = _empty_bytes
    bufs: list[Any] = [None] * len(s.slots)
    for slot, arr in zip(s.input_slots, inputs):
        bufs[slot] = _c_order(arr)  # loads index row-major buffers
    for slot, value in s.const_slots.items():
        bufs[slot] = np.asarray(value, dtype=s.slots[slot].dtype)
    storages: dict[int, np.ndarray] = {}
    owners: dict[int, list[int]] = {}
    for t, step in enumerate(s.steps):
        if isinstance(step, KernelStep):
            for st in step.kernel.stores:
                try:
                    bufs[st.slot] = _slot_array(s, st.slot, storages, owners, alloc)
                except MemoryError as e:
                    raise allocation_error(s, st.slot, e) from None
            run_kernel(step.kernel, bufs)
        elif isinstance(step, LibraryStep):
            ins = [bufs[i] for i in step.inputs]
            out_slot = s.slots[step.output]
            impl = library.get(step.op) if library else None
            out = library_result(step.op, step.attrs, out_slot.dtype, ins, impl)
            bufs[step.output] = out
            sid = s.storage.get(step.output)
            if sid is not None and out.nbytes >= SMALL_BYTES:
                # the library allocated the result: it becomes the planned storage, so
                # the kernels planned to run in place over it do
                storages[sid] = out.reshape(-1).view(np.uint8)
                owners.setdefault(sid, []).append(step.output)
        else:
            bufs[step.output] = strided(bufs[step.source], step.view)
        for sid in s.frees[t]:  # storage whose last reader has run
            storages.pop(sid, None)
            for slot in owners.pop(sid, []):
                if slot not in s.output_slots:
                    bufs[slot] = None
    return [bufs[o] for o in s.output_slots]


def allocation_error(s: Schedule, slot: int, e: MemoryError) -> MemoryError:
    """A MemoryError naming the size, the slot's shape and dtype and the step that writes
    it (numpy's own names only a flat byte array)."""
    info = s.slots[slot]
    what = "an input"
    for step in s.steps:
        if isinstance(step, KernelStep) and any(st.slot == slot for st in step.kernel.stores):
            what = f"kernel {step.kernel.name} ({' '.join(step.kernel.ops) or 'copy'})"
        elif isinstance(step, LibraryStep) and step.output == slot:
            what = f"library op {step.op}"
    return MemoryError(f"braze: cannot allocate {_size(info.nbytes)} for the output "
                       f"{info.shape} {info.dtype} of {what}: {e}")


def _size(nbytes: int) -> str:
    """``nbytes`` for a reader: 4.00 TiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} bytes"


def _c_order(a: np.ndarray) -> np.ndarray:
    """``a`` as a row-major array (np.ascontiguousarray would turn 0-d into 1-d)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _empty_bytes(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, np.uint8)


def _slot_array(s: Schedule, slot: int, storages: dict[int, np.ndarray],
                owners: dict[int, list[int]],
                alloc: Callable[[int], np.ndarray] = _empty_bytes) -> np.ndarray:
    info = s.slots[slot]
    sid = s.storage.get(slot)
    if sid is None or info.nbytes < SMALL_BYTES:
        return np.empty(info.shape, info.dtype)
    mem = storages.get(sid)
    if mem is None:
        mem = storages[sid] = alloc(s.storage_bytes[sid])
    owners.setdefault(sid, []).append(slot)
    return mem[:info.nbytes].view(info.dtype).reshape(info.shape)


def run_kernel(k: Kernel, bufs: list[Any]) -> None:
    """Run one fused kernel op by op with numpy, in blocks of rows along the first dim."""
    plan = _plans.get(id(k))
    if plan is None or plan[0] is not k:
        plan = _plans[id(k)] = (k, _prepare(k))
        if len(_plans) > 4096:
            _plans.clear()
    steps = plan[1]
    n_outer = len(k.shape) - k.n_red
    size = 1
    for d in k.shape:
        size *= d
    if n_outer == 0 or size <= BLOCK_ELEMENTS or k.shape[0] <= 1:
        _run_block(k, steps, bufs, None)
        return
    per_row = size // k.shape[0]
    rows = max(1, BLOCK_ELEMENTS // max(per_row, 1))
    for lo in range(0, k.shape[0], rows):
        _run_block(k, steps, bufs, slice(lo, min(lo + rows, k.shape[0])))


_numpy_run_kernel = run_kernel  # the default of run_schedule(run_kernel=...)
_plans: dict[int, tuple[Kernel, list[Any]]] = {}


def _prepare(k: Kernel) -> list[Any]:
    """Per-instruction (kind, payload, args, dtype, values to drop afterwards)."""
    last_use = [0] * len(k.instrs)
    for i, ins in enumerate(k.instrs):
        for a in ins.args:
            last_use[a] = i
    for st in k.stores:
        last_use[st.instr] = len(k.instrs)
    steps = []
    for i, ins in enumerate(k.instrs):
        drop = tuple(a for a in set(ins.args) if last_use[a] == i)
        if ins.op == "load":
            ld = k.loads[ins.attr("load")]
            payload: Any = (ld.slot, ld.view, ld.view.is_contiguous())
            kind = "load"
        elif ins.op == "const":
            v = np.asarray(ins.attr("value"), dtype=ins.dtype)
            payload, kind = _compute(v), "const"
        elif OPS[ins.op].kind == "reduce":
            payload, kind = ins.op, "reduce"
        elif ins.op == "bitcast":
            payload, kind = k.instrs[ins.args[0]].dtype, "bitcast"
        else:
            payload, kind = (OPS[ins.op].reference, dict(ins.attrs), ins.op == "cast"), "op"
        steps.append((kind, payload, ins.args, ins.dtype, drop))
    n_outer = len(k.shape) - k.n_red  # row stores write through a view over the outer dims
    stores = [(st, st.view.is_contiguous(), bool(k.n_red and len(st.view.shape) == n_outer))
              for st in k.stores]
    return [steps, stores]


def _compute(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype in _LOW else x


def _run_block(k: Kernel, plan: list[Any], bufs: list[Any], rows: slice | None) -> None:
    steps, stores = plan
    n_outer = len(k.shape) - k.n_red
    block_shape = k.shape
    if rows is not None:
        block_shape = (len(range(*rows.indices(k.shape[0]))),) + k.shape[1:]
    red_axes = tuple(range(n_outer, len(k.shape)))
    vals: list[Any] = [None] * len(steps)
    for i, (kind, payload, args, dtype, drop) in enumerate(steps):
        if kind == "load":
            slot, view, contiguous = payload
            buf = bufs[slot]
            v = buf if contiguous and buf.shape == view.shape else strided(buf, view)
            if rows is not None:
                v = v[rows]
            out = v.astype(np.float32) if v.dtype in _LOW else v
        elif kind == "const":
            out = payload
        elif kind == "op":
            ref, attrs, is_cast = payload
            out = ref(*[vals[a] for a in args], **attrs) if attrs else ref(*[vals[a] for a in args])
            if is_cast or out.dtype != dtype:
                out = np.asarray(out).astype(dtype)  # rounds (a cast to float16, say) ...
                if dtype in _LOW:
                    out = out.astype(np.float32)  # ... then keeps computing in float32
        elif kind == "reduce":
            x = vals[args[0]]
            if x.shape != block_shape:
                x = np.broadcast_to(x, block_shape)
            out = _compute(_reduce(payload, x, red_axes, n_outer, dtype))
        else:  # bitcast: reinterpret the stored representation
            out = _compute(vals[args[0]].astype(payload).view(dtype))
        vals[i] = out
        for a in drop:
            vals[a] = None
    for st, contiguous, row in stores:
        dst = bufs[st.slot]
        if not (contiguous and dst.shape == st.view.shape):
            dst = strided(dst, st.view)
        if rows is not None:
            dst = dst[rows]
        v = vals[st.instr]
        if row:  # one value per row: drop the (constant) reduced dims
            if v.ndim == len(block_shape):
                v = v[(Ellipsis,) + (slice(0, 1),) * k.n_red]
            if v.size != dst.size:
                v = np.broadcast_to(v, block_shape[:n_outer] + (1,) * k.n_red)
            v = v.reshape(dst.shape)
        np.copyto(dst, v, casting="unsafe")


def _reduce(name: str, x: np.ndarray, axes: tuple[int, ...], n_outer: int,
            dtype: np.dtype) -> np.ndarray:
    if name in ("argmax", "argmin"):
        inner = 1
        for d in x.shape[n_outer:]:
            inner *= d
        flat = x.reshape(x.shape[:n_outer] + (inner,))
        f = np.argmax if name == "argmax" else np.argmin
        r = f(flat, axis=-1)
        return r.reshape(r.shape + (1,) * len(axes)).astype(dtype)
    acc = np.float32 if dtype in _LOW else dtype
    if name in ("sum", "prod") and np.dtype(acc).kind == "f":  # the kernels' order
        return blocked_reduce(x, axes, True, np.dtype(acc), prod=name == "prod")
    if name == "sum":
        # keepdims=True: always an array (numpy's stubs allow a scalar here)
        return np.sum(x, axis=axes, keepdims=True, dtype=acc)  # type: ignore[return-value]
    if name == "mean":
        return mean_ref(x.astype(acc, copy=False), axes=axes, keepdims=True)
    if name == "prod":
        return np.prod(x, axis=axes, keepdims=True, dtype=acc)
    if name == "max":
        return np.max(x, axis=axes, keepdims=True)
    if name == "min":
        return np.min(x, axis=axes, keepdims=True)
    if name == "any":
        return np.any(x, axis=axes, keepdims=True)
    if name == "all":
        return np.all(x, axis=axes, keepdims=True)
    raise NotImplementedError(f"reduction {name!r} has no numpy kernel")
