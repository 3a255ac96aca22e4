"""Prepared replay of a compiled schedule: the per-call Python reduced to binding data.

``bz.compile`` runs the same :class:`~braze.graph.kernel.Schedule` again and again;
:func:`~braze.backends.numpy_backend.run_schedule` re-derives everything on every
call (slot arrays, views, library dispatch, frees). A :class:`ReplayPlan` does that
work once:

* an *arena*: every storage of the memory plan allocated once, each slot an ndarray
  view of its storage, each view step of a persistent slot a persistent view (in-place
  plans hold by construction: slots sharing a storage share its memory);
* per step, a prebound call: a library ``matmul`` or ``concat`` writes into its
  planned slot (``np.matmul(..., out=...)``), other library ops run their implementation (the
  result is copied into the arena when later kernels reuse its storage, else bound
  as it is), kernels the native backend built run as :class:`braze._core.Program`
  calls — consecutive ones as one *segment*, one Python -> C++ transition with the
  GIL released;
* per call only the *dynamic* slots are bound: graph inputs, the outputs (a fresh
  buffer each call, so results never alias the arena or each other across calls),
  library results bound as they are, and the views of those.

A plan serves one call at a time; :class:`PlanCache` keeps a few idle plans per
schedule, so two threads replaying one schedule each get their own.
"""

from __future__ import annotations

import operator
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..graph.kernel import Kernel, KernelStep, LibraryStep, Schedule, ViewStep
from ..graph.ops import OPS
from ..graph.passes.memory import donatable_pairs
from ..graph.view import View
from .governor import ThreadGovernor
from .numpy_backend import (
    SMALL_BYTES,
    LibraryImpl,
    allocation_error,
    library_result,
    library_value,
    strided,
)

_LOW = (np.dtype(np.float16), np.dtype("bfloat16"))
MAX_IDLE_PLANS = 4  # per schedule: concurrent replays beyond this build throwaway plans
# plans with multi-threaded native calls fall back to one thread while the cores are busy
GOVERN_THREADS = os.environ.get("BRAZE_GOVERN_THREADS", "1") != "0"
_MATMUL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
                  np.dtype(np.complex128))


@dataclass(frozen=True)
class NativeCall:
    """A built kernel as a :class:`braze._core.Program` call: the kernel handle, the
    schedule slot of each of its buffers, its int64 args."""

    handle: int
    slots: tuple[int, ...]
    args: np.ndarray
    threads_arg: bool = True  # args[0] is the kernel's thread count (see governor.py)
    status: int = -1  # the slot of the call's status word (NativeLibraryCall.error), or -1


# kernel -> its native call, None (run it with ``run_kernel``), or "skip" (nothing to do)
NativeOf = Callable[[Kernel], "NativeCall | str | None"]


@dataclass(frozen=True)
class NativeLibraryCall:
    """A library op as a program step, from a :data:`NativeLibrary` factory
    ``(attrs, inputs, out)`` (``inputs``: (View over the buffer owning its memory,
    dtype) per input; ``out``: (shape, dtype)): the kernel ``handle`` runs over the
    buffers [inputs..., output, scratch...] with ``args``; ``scratch``: the byte size
    of each scratch buffer (the plan owns them). Views' offsets and strides are the
    factory's to encode in ``args``: the program passes each input's owning buffer."""

    handle: int
    args: np.ndarray
    scratch: tuple[int, ...] = ()
    threads_arg: bool = True  # args[0] is the kernel's thread count (see governor.py)
    # a buffer derived from some of the inputs (a weight repacked for the kernel: ONNX
    # Runtime's pre-packing), passed after the scratch buffers: (function of those input
    # arrays -> the buffer, their positions among the inputs, the args index that says
    # the buffer is there). The plan computes it when one of those inputs changes (a
    # compiled function's weights: once) or, when they are not inputs or constants of the
    # schedule, passes a placeholder with that arg set to 0 (the kernel then does without).
    derived: tuple[Callable[..., np.ndarray], tuple[int, ...], int] | None = None
    # a kernel that checks its input (indices in range): the first scratch buffer is its
    # status, int64 [non-zero when the input is bad, what was bad]; the program stops
    # after a call that reports so, and the plan raises error(status as int64s)
    error: Callable[[np.ndarray], Exception] | None = None


# op name -> factory(attrs, inputs, out) -> NativeLibraryCall, or None (run it in Python)
NativeLibrary = Mapping[str, Callable[..., "NativeLibraryCall | None"]]


def _empty_bytes(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, np.uint8)


class ReplayPlan:
    """One schedule prepared for replay (see the module docstring)."""

    def __init__(self, s: Schedule, run_kernel: Callable[[Kernel, list[Any]], None],
                 native_of: NativeOf | None = None,
                 library: Mapping[str, LibraryImpl] | None = None,
                 alloc: Callable[[int], np.ndarray] | None = None,
                 program_factory: Callable[[int], Any] | None = None,
                 stats: dict[str, int] | None = None,
                 native_library: NativeLibrary | None = None) -> None:
        self.schedule = s
        self._stats = stats
        self._alloc = alloc or _empty_bytes
        n = len(s.slots)
        self.bufs: list[Any] = [None] * n
        root = list(range(n))  # a view step's output -> the slot owning its memory
        written: set[int] = set()
        sid_slots: dict[int, list[int]] = {}
        for slot, storage_id in s.storage.items():
            sid_slots.setdefault(storage_id, []).append(slot)
        outs = set(s.output_slots)
        # fixed leaves (arange: the iota of a one-hot gradient) that own their memory and
        # are no output: computed here, once, then bound as constants are (no step)
        self._once = {t for t, step in enumerate(s.steps)
                      if isinstance(step, LibraryStep) and not step.inputs and
                      step.op in _FIXED_LEAVES and step.output not in outs and
                      sid_slots.get(s.storage.get(step.output, -1), [step.output])
                      == [step.output]}
        for t, step in enumerate(s.steps):
            if isinstance(step, ViewStep):
                root[step.output] = root[step.source]
            elif isinstance(step, KernelStep):
                written.update(st.slot for st in step.kernel.stores)
            elif t in self._once:
                info = s.slots[step.output]
                self.bufs[step.output] = library_result(step.op, step.attrs, info.dtype, ())
            else:
                written.add(step.output)
        # slots that get new arrays every call
        fresh = {root[o] for o in s.output_slots if root[o] in written}
        dynamic = set(s.input_slots) | fresh
        # library steps whose implementation runs as a program step: (call, its slots)
        lib_native = self._library_calls(s, native_library, root) if native_of is not None \
            else {}
        bound_library: set[int] = set()  # library results bound as they are
        for t, step in enumerate(s.steps):
            if isinstance(step, LibraryStep) and step.output not in fresh and \
                    t not in lib_native and t not in self._once and \
                    not self._writes_into(s, step, library) and \
                    sid_slots.get(s.storage.get(step.output, -1), [step.output]) == [step.output]:
                bound_library.add(step.output)
        dynamic |= bound_library
        for step in s.steps:
            if isinstance(step, ViewStep) and step.source in dynamic:
                dynamic.add(step.output)
        self.fresh = sorted(fresh)
        self.dynamic = sorted(dynamic)

        # ---- the arena: storages once, slot views of them
        storages: dict[int, np.ndarray] = {}
        self.arena_bytes = 0  # memory this plan holds between calls
        for slot, value in s.const_slots.items():
            self.bufs[slot] = np.asarray(value, dtype=s.slots[slot].dtype)
        for slot in sorted(written - dynamic):
            info = s.slots[slot]
            sid = s.storage.get(slot)
            if sid is None:
                self.bufs[slot] = np.empty(info.shape, info.dtype)
                self.arena_bytes += info.nbytes
                continue
            mem = storages.get(sid)
            if mem is None:
                size = s.storage_bytes[sid]
                try:
                    mem = storages[sid] = (np.empty(size, np.uint8) if size < SMALL_BYTES
                                           else self._alloc(size))
                except MemoryError as e:
                    raise allocation_error(s, slot, e) from None
                self.arena_bytes += size
            self.bufs[slot] = mem[:info.nbytes].view(info.dtype).reshape(info.shape)

        # ---- the steps
        read = set(s.output_slots)  # slots something other than a native library call reads
        for t, step in enumerate(s.steps):
            if isinstance(step, KernelStep):
                read.update(ld.slot for ld in step.kernel.loads)
            elif isinstance(step, LibraryStep) and t not in lib_native:
                read.update(step.inputs)
        for step in reversed(s.steps):
            if isinstance(step, ViewStep) and step.output in read:
                read.add(step.source)
        native_slots: set[int] = set()
        self.program: Any = None  # a braze._core.Program once there are native calls
        self.governor: ThreadGovernor | None = None
        calls: list[tuple[NativeCall, int]] = []  # (call, step index)
        kinds: list[Any] = []
        self._scratch: list[np.ndarray] = []  # library calls' scratch, slots n, n+1, ...
        # checked calls (NativeLibraryCall.error): call index -> (error, status words)
        self._errors: dict[int, tuple[Callable[[np.ndarray], Exception], np.ndarray]] = {}
        # derived buffers (NativeLibraryCall.derived): (scratch index, function, source slots)
        self._derived: list[tuple[int, Callable[..., np.ndarray], tuple[int, ...]]] = []
        input_slots = set(s.input_slots)
        for t, step in enumerate(s.steps):
            if t in lib_native:
                lc, slots = lib_native[t]
                extra = []
                for nbytes in lc.scratch:
                    extra.append(n + len(self._scratch))
                    self._scratch.append(np.empty(max(nbytes, 1), np.uint8))
                args = lc.args
                if lc.derived is not None:
                    fn, positions, flag = lc.derived
                    sources = tuple(slots[i] for i in positions)
                    extra.append(n + len(self._scratch))
                    if all(root[x] in input_slots or root[x] in s.const_slots
                           for x in sources):
                        self._derived.append((len(self._scratch), fn, sources))
                    else:
                        args = args.copy()
                        args[flag] = 0
                    self._scratch.append(np.empty(1, np.uint8))
                status = -1
                if lc.error is not None:
                    status = extra[0]
                    self._errors[len(calls)] = (lc.error, self._scratch[status - n].view(np.int64))
                nat = NativeCall(lc.handle, (*slots, *extra), args, lc.threads_arg, status)
                calls.append((nat, t))
                native_slots.update(slots)
                kinds.append(("native", len(calls) - 1))
            elif isinstance(step, KernelStep):
                built = native_of(step.kernel) if native_of is not None else None
                if built == "skip":
                    continue
                if isinstance(built, NativeCall):
                    calls.append((built, t))
                    native_slots.update(built.slots)
                    kinds.append(("native", len(calls) - 1))
                else:
                    kinds.append(("kernel", step.kernel))
            elif isinstance(step, LibraryStep):
                if t not in self._once:
                    kinds.append(("library", step))
            elif step.output in dynamic:
                if step.output in read:
                    kinds.append(("view", step))
                # else: only native library calls read it (through its buffer): no op
            else:  # a persistent view: made once
                self.bufs[step.output] = strided(self.bufs[step.source], step.view)
        # bound at the start of a call (inputs only when they change, see run); library
        # results and their views are bound as made
        self._bind_native = [d for d in sorted(fresh) if d in native_slots]
        self._native_input = [slot in native_slots for slot in s.input_slots]
        if calls:
            factory = program_factory
            if factory is None:
                factory = _program_factory()
            self.program = factory(n + len(self._scratch))
            parallel: list[np.ndarray] = []  # the plan's own copies: the governor edits them
            for nat, _ in calls:
                args = nat.args
                if nat.threads_arg and args.size and args[0] > 1:
                    args = args.copy()
                    parallel.append(args)
                self.program.add(nat.handle, list(nat.slots), args, nat.status)
            if parallel and GOVERN_THREADS:
                self.governor = ThreadGovernor(parallel)
            for slot in native_slots - dynamic:
                self.program.set(slot, self.bufs[slot])
            for j, buf in enumerate(self._scratch):
                self.program.set(n + j, buf)
            self.program.set_bound(self._bind_native)
        self._derived_done = False
        self._derived_sources = {x for _, _, sources in self._derived for x in sources}
        self.n_native = len(calls)
        self.call_steps = [t for _, t in calls]  # schedule step of each program call
        self._timings: list[Any] = [None]  # run_profiled: [(call, ns)] while it runs
        self._call_names: list[str] | None = None
        self.n_python_kernels = sum(1 for k in kinds if k[0] == "kernel")
        self._inputs = [(slot, s.slots[slot].shape, s.slots[slot].dtype)
                        for slot in s.input_slots]
        # Inputs that come back as the same object call after call (a compiled function's
        # weights: hundreds per LLM step) stay validated and bound: an identity check
        # instead of shape/dtype checks and a rebind. An input is held from its second
        # call in a row in the same position (a weak reference spots that), so a one-off
        # array is never kept alive by an idle plan.
        self._held: list[Any] = [None] * len(self._inputs)
        self._last: list[Any] = [None] * len(self._inputs)  # weakrefs of last call's inputs
        # the held positions, as one C-level identity check per call (itemgetter + map):
        # (getter of the held inputs, their objects, the positions not held) or None
        self._held_check: tuple[Any, tuple[Any, ...], list[int]] | None = None
        self._clear = list(self.dynamic)  # slots unbound after every call
        self._fresh = [(slot, s.slots[slot].shape, s.slots[slot].dtype, s.slots[slot].nbytes)
                       for slot in self.fresh]
        # donation (run(donate=)): per requested pairs, (the fresh slots still allocated,
        # [(output slot, input slot)] written in place); donated inputs are never held
        # (their contents change under the same object: rebound, derived buffers redone)
        self._donations: dict[tuple[tuple[int, int], ...], tuple[list[Any], list[Any]]] = {}
        self._no_hold: set[int] = set()
        # constants (and views of them) are the plan's: handed out as copies
        self._const_outputs = [j for j, o in enumerate(s.output_slots)
                               if root[o] in s.const_slots]
        # numpy floating-point warnings are off while replaying, as in run_schedule; a plan
        # of native kernels, matmuls and views only skips the (measurable) context switch
        self._errstate = any(k[0] not in ("native", "view") and not (
            k[0] == "library" and self._writes_into(s, k[1], library)) for k in kinds)
        self.ops = self._ops(kinds, run_kernel, library, native_slots, dynamic)

    # ------------------------------------------------------------ building
    @staticmethod
    def _library_calls(s: Schedule, library: NativeLibrary | None, root: list[int]
                       ) -> dict[int, tuple[NativeLibraryCall, tuple[int, ...]]]:
        """Step index -> (native call, buffer slots) for each library step whose op has a
        native factory that accepts these inputs: every input a buffer or a view of one
        (its View passed along), never a constant."""
        if not library:
            return {}
        views: dict[int, View] = {}  # view output -> its View over root[output]
        for step in s.steps:
            if not isinstance(step, ViewStep):
                continue
            if root[step.source] == step.source:  # a view of a buffer
                views[step.output] = step.view
                continue
            # a view of a view indexes the inner one's row-major elements: it composes
            # (offsets add) when the inner one is row-major from some offset
            src = views.get(step.source)
            if src is not None and src.canonical().strides == \
                    View.contiguous(src.shape).canonical().strides:
                v = step.view
                views[step.output] = View(v.shape, v.strides, v.offset + src.offset)
        out: dict[int, tuple[NativeLibraryCall, tuple[int, ...]]] = {}
        for t, step in enumerate(s.steps):
            if not isinstance(step, LibraryStep):
                continue
            make = library.get(step.op)
            if make is None:
                continue
            ins = []
            for i in step.inputs:
                if root[i] in s.const_slots or (root[i] != i and i not in views):
                    break
                ins.append((views[i] if i in views else View.contiguous(s.slots[i].shape),
                            s.slots[i].dtype))
            else:
                o = s.slots[step.output]
                call = make(step.attrs, ins, (o.shape, o.dtype))
                if call is not None:
                    out[t] = (call, (*(root[i] for i in step.inputs), step.output))
        return out

    @staticmethod
    def _writes_into(s: Schedule, step: LibraryStep, library: Mapping[str, Any] | None) -> bool:
        """Can this library step write straight into its planned slot (``out=``)?
        matmul (BLAS dtypes) and concat, when no native implementation replaces them and
        every input already has the result's dtype (no casts, no low precision)."""
        if library and step.op in library:
            return False
        d = s.slots[step.output].dtype
        if any(s.slots[i].dtype != d for i in step.inputs):
            return False
        if step.op == "matmul":
            return not step.attrs and d in _MATMUL_DTYPES
        return step.op == "concat" and set(step.attrs) == {"axis"} and d not in _LOW

    def _ops(self, kinds: list[Any], run_kernel: Callable[[Kernel, list[Any]], None],
             library: Mapping[str, LibraryImpl] | None, native_slots: set[int],
             dynamic: set[int]) -> list[Callable[[], object]]:
        s, bufs, prog = self.schedule, self.bufs, self.program
        ops: list[Callable[[], object]] = []
        # what each op runs, for run_profiled (None: a segment, timed per native call)
        self._op_names: list[str | None] = []
        i = 0
        while i < len(kinds):
            kind, what = kinds[i]
            if kind == "native":  # a segment: this call and the native ones right after
                j = i
                while j + 1 < len(kinds) and kinds[j + 1][0] == "native":
                    j += 1
                ops.append(_segment(prog, what, kinds[j][1] + 1, self._timings, self._errors))
                self._op_names.append(None)
                i = j + 1
                continue
            self._op_names.append(f"{what.name} (python)" if kind == "kernel" else "view"
                                  if kind == "view" else f"{what.op} (python)")
            if kind == "kernel":
                ops.append(_kernel_op(run_kernel, what, bufs))
            elif kind == "view":
                ops.append(_view_op(bufs, what, prog if what.output in native_slots else None))
            else:
                step: LibraryStep = what
                out = step.output
                bind = prog if out in native_slots else None
                if self._writes_into(s, step, library) and out not in dynamic:
                    ops.append(_matmul_op(bufs, step.inputs, bufs[out]) if step.op == "matmul"
                               else _concat_op(bufs, step.inputs, step.attrs["axis"], bufs[out]))
                else:
                    impl = library.get(step.op) if library else None
                    ops.append(_library_op(bufs, step, s.slots[out].dtype, impl,
                                           None if out in dynamic else bufs[out], bind))
            i += 1
        return ops

    # ------------------------------------------------------------ running
    def run(self, inputs: list[np.ndarray], donate: tuple[tuple[int, int], ...] = ()
            ) -> list[np.ndarray] | None:
        """Execute on ``inputs``; returns fresh outputs, or None (nothing run) when the
        inputs' shapes or dtypes are not the ones the plan was built for. ``donate``:
        (output position, input position) pairs whose input buffer the caller gives up:
        the output is written into it where the schedule allows
        (:func:`~braze.graph.passes.memory.donatable`) and returned as that same array."""
        bufs = self.bufs
        fresh, donated = self._fresh, None
        if donate:
            fresh, donated = self._donated(donate)
        if len(inputs) != len(self._inputs):
            return None
        held = self._held
        changed = []
        check = self._held_check
        positions: Any = range(len(inputs))
        if check is not None and all(map(operator.is_, check[0](inputs), check[1])):
            positions = check[2]  # every held input is back: look at the others only
        try:
            for i in positions:
                a = inputs[i]
                if a is held[i]:
                    continue
                slot, shape, dtype = self._inputs[i]
                if a.shape != shape or a.dtype != dtype:
                    raise TypeError
                bufs[slot] = a if a.flags.c_contiguous else np.array(a, order="C")
                changed.append(i)
        except (TypeError, AttributeError):  # not the arrays this plan was built for
            self._forget()
            return None
        if changed:
            self._note_inputs(inputs, changed)
        if self._derived:
            self._update_derived(changed)
        try:
            for slot, shape, dtype, nbytes in fresh:
                try:
                    if nbytes < SMALL_BYTES:
                        bufs[slot] = np.empty(shape, dtype)
                    else:
                        bufs[slot] = self._alloc(nbytes)[:nbytes].view(dtype).reshape(shape)
                except MemoryError as e:
                    raise allocation_error(self.schedule, slot, e) from None
            if donated:
                for out, inp in donated:
                    bufs[out] = bufs[inp]
            if self._bind_native:
                self.program.bind([bufs[d] for d in self._bind_native])
            governor = self.governor
            if governor is not None:
                governor.before()
            if self._timings[0] is not None:  # run_profiled: every op timed
                with np.errstate(all="ignore"):
                    self._run_timed_ops()
            elif self._errstate:
                with np.errstate(all="ignore"):
                    for op in self.ops:
                        op()
            else:
                for op in self.ops:
                    op()
            if governor is not None:
                governor.after()
            if self._stats is not None and self.n_native:
                self._stats["native"] += self.n_native
            outs = [bufs[o] for o in self.schedule.output_slots]
            if self._const_outputs:
                for j in self._const_outputs:
                    outs[j] = np.array(outs[j])  # the plan's constant stays the plan's
            return outs
        finally:
            for d in self._clear:
                bufs[d] = None

    def _donated(self, donate: tuple[tuple[int, int], ...]) -> tuple[list[Any], list[Any]]:
        """(fresh slots to allocate, [(output slot, input slot)]) for these donations."""
        got = self._donations.get(donate)
        if got is None:
            s = self.schedule
            pairs = donatable_pairs(s, list(donate))
            outs = {s.output_slots[o] for o, _ in pairs}
            got = ([f for f in self._fresh if f[0] not in outs],
                   [(s.output_slots[o], s.input_slots[i]) for o, i in pairs])
            positions = {i for _, i in pairs}
            if not positions <= self._no_hold:
                self._no_hold |= positions
                if any(self._held[i] is not None for i in positions):
                    self._forget()
            self._donations[donate] = got
        return got

    def _update_derived(self, changed: list[int]) -> None:
        """Recompute the derived buffers whose sources changed (all of them on the first
        call) and bind them."""
        first = not self._derived_done
        if not first:
            slots = {self._inputs[i][0] for i in changed}
            if slots.isdisjoint(self._derived_sources):  # (the usual call: weights held)
                return
        n = len(self.schedule.slots)
        for j, fn, sources in self._derived:
            if first or not slots.isdisjoint(sources):
                buf = self._scratch[j] = fn(*(self.bufs[x] for x in sources))
                self.program.set(n + j, buf)
        self._derived_done = True

    def run_profiled(self, inputs: list[np.ndarray], into: list[tuple[str, float]],
                     donate: tuple[tuple[int, int], ...] = ()) -> list[np.ndarray] | None:
        """:meth:`run`, appending to ``into`` each step's (what it runs, seconds) in order:
        a native program call's kernel structural name or library op name; a step run in
        Python (a library op through numpy, a kernel without a native build) with
        " (python)" after its name. A call that raises appends the steps that ran."""
        timed: list[tuple[Any, int]] = []
        self._timings[0] = timed
        try:
            return self.run(inputs, donate)
        finally:
            self._timings[0] = None
            names = self._call_names
            if names is None:  # (a kernel's structural name is hashed from its IR: once)
                steps = cast("list[KernelStep | LibraryStep]",  # program calls: no views
                             [self.schedule.steps[t] for t in self.call_steps])
                names = self._call_names = [st.kernel.name if isinstance(st, KernelStep)
                                            else st.op for st in steps]
            into.extend((names[c] if isinstance(c, int) else c, ns * 1e-9) for c, ns in timed)

    def _run_timed_ops(self) -> None:
        """The ops of a call, each Python-run one timed (segments time their own calls)."""
        timed, clock = self._timings[0], time.perf_counter_ns
        for op, name in zip(self.ops, self._op_names):
            if name is None:
                op()
            else:
                t = clock()
                op()
                timed.append((name, clock() - t))

    def _note_inputs(self, inputs: list[np.ndarray], changed: list[int]) -> None:
        """Bind the inputs that changed; hold those seen twice in a row (see __init__)."""
        held, last, prog = self._held, self._last, self.program
        moved = False
        for i in changed:
            a = inputs[i]
            slot = self._inputs[i][0]
            if prog is not None and self._native_input[i]:
                prog.set(slot, self.bufs[slot])
            ref = last[i]
            if ref is not None and ref() is a and self.bufs[slot] is a and \
                    i not in self._no_hold:
                # from now on: an identity check, no rebind, not unbound (never a
                # row-major copy of a strided input: it would miss in-place writes)
                held[i] = a
                moved = True
                continue
            if held[i] is not None:
                held[i] = None
                moved = True
            try:
                last[i] = weakref.ref(a)
            except TypeError:
                last[i] = None
        if moved:
            kept = {self._inputs[i][0] for i, h in enumerate(held) if h is not None}
            self._clear = [d for d in self.dynamic if d not in kept]
            self._index_held()

    def _index_held(self) -> None:
        held = self._held
        idx = [i for i, h in enumerate(held) if h is not None]
        if len(idx) < 2:  # (itemgetter of one position returns the item, not a tuple)
            self._held_check = None
            return
        self._held_check = (operator.itemgetter(*idx), tuple(held[i] for i in idx),
                            [i for i, h in enumerate(held) if h is None])

    def _forget(self) -> None:
        """Drop every held input and unbind every dynamic slot."""
        self._held = [None] * len(self._inputs)
        self._last = [None] * len(self._inputs)
        self._held_check = None
        self._clear = list(self.dynamic)
        for d in self.dynamic:
            self.bufs[d] = None


# leaf ops whose value is a function of their attributes alone (not random, not bound)
_FIXED_LEAVES = frozenset({"arange", "linspace"})
_PROGRAM: list[Any] = []
_LAYOUT: list[bool] = []


def register_numpy_layout() -> bool:
    """Let the native extension read numpy.ndarray fields directly (data pointers of
    program slots, element fast paths) where its view of numpy's object layout checks
    out on probe arrays; whether it does (checked once)."""
    if not _LAYOUT:
        from .. import _core

        base = np.zeros((4, 6), np.float32)
        probes = [base, base[:, 1:], base.T, np.zeros((), np.int8), base[1:], np.zeros(0)]
        ok = all(_core.numpy_probe(a, np.ndarray) == (
            a.ctypes.data, a.flags.c_contiguous, a.ndim, 0 if a.base is None else id(a.base))
            for a in probes)
        if ok:
            _core.numpy_register(np.ndarray)
        _LAYOUT.append(ok)
    return _LAYOUT[0]


def _program_factory() -> Any:
    """``braze._core.Program``, reading numpy data pointers directly where it can."""
    if not _PROGRAM:
        from .. import _core

        register_numpy_layout()
        _PROGRAM.append(_core.Program)
    return _PROGRAM[0]


def _segment(prog: Any, lo: int, hi: int, timings: list[Any],
             errors: dict[int, tuple[Callable[[np.ndarray], Exception], np.ndarray]]
             ) -> Callable[[], None]:
    run = prog.run

    def segment() -> None:
        if timings[0] is None:
            failed = run(lo, hi)
        else:  # ReplayPlan.run_profiled: each call's time
            ns = prog.run_timed(lo, hi)
            timings[0].extend(zip(range(lo, hi), ns))
            failed = next((c for c in range(lo, lo + len(ns))
                           if c in errors and errors[c][1][0]), -1)
        if failed >= 0:  # a checked call found its input bad: the calls after it did not run
            error, status = errors[failed]
            raise error(status.copy())

    segment.calls = hi - lo  # type: ignore[attr-defined]  # (tests read how many it runs)
    return segment


def _kernel_op(run_kernel: Callable[[Kernel, list[Any]], None], k: Kernel,
               bufs: list[Any]) -> Callable[[], None]:
    return lambda: run_kernel(k, bufs)


def _view_op(bufs: list[Any], step: ViewStep, prog: Any) -> Callable[[], None]:
    src, out, view = step.source, step.output, step.view
    shape, ndarray = view.shape, np.ndarray
    fast = view.size > 0

    def op() -> None:
        b = bufs[src]
        v = None
        if fast and b.flags.c_contiguous:  # ~10x cheaper than as_strided; numpy checks bounds
            item = b.dtype.itemsize
            try:
                v = ndarray(shape, b.dtype, b, view.offset * item,
                            [x * item for x in view.strides])
            except (TypeError, ValueError):  # a dtype without the buffer protocol
                v = None
        if v is None:
            v = strided(b, view)
        bufs[out] = v
        if prog is not None:
            prog.set(out, v)
    return op


def _matmul_op(bufs: list[Any], inputs: tuple[int, ...], out: np.ndarray
               ) -> Callable[[], object]:
    a, b = inputs
    matmul = np.matmul
    return lambda: matmul(bufs[a], bufs[b], out=out)


def _concat_op(bufs: list[Any], inputs: tuple[int, ...], axis: int,
               out: np.ndarray) -> Callable[[], object]:
    concatenate = np.concatenate
    return lambda: concatenate([bufs[i] for i in inputs], axis=axis, out=out)


def _library_op(bufs: list[Any], step: LibraryStep, dtype: np.dtype, impl: LibraryImpl | None,
                into: np.ndarray | None, prog: Any) -> Callable[[], None]:
    """A library op: its result is copied ``into`` the arena slot, or bound as it is. A
    deterministic leaf (``arange``, ``linspace``: no inputs, static attributes) is
    computed once, with the plan, and copied each call (a kernel may later reuse its
    buffer in place)."""
    ins, out, attrs, name = step.inputs, step.output, step.attrs, step.op
    if not ins and impl is None and OPS[name].kind == "leaf" and name in _FIXED_LEAVES:
        fixed = library_result(name, attrs, dtype, [])

        def leaf() -> None:
            if into is not None:
                np.copyto(into, fixed, casting="unsafe")
                return
            r = bufs[out] = fixed.copy()
            if prog is not None:
                prog.set(out, r)
        return leaf

    def op() -> None:
        xs = [bufs[i] for i in ins]
        if into is not None:
            np.copyto(into, library_value(name, attrs, dtype, xs, impl), casting="unsafe")
            return
        r = library_result(name, attrs, dtype, xs, impl)  # never aliases the inputs
        bufs[out] = r
        if prog is not None:
            prog.set(out, r)
    return op


class PlanCache:
    """Idle :class:`ReplayPlan` s per schedule (a plan serves one call at a time).

    Their arenas are memory held between calls: at most ``max_bytes`` of them are kept
    (``BRAZE_REPLAY_BYTES``, default 1 GiB; the oldest schedules' plans go first; a plan
    larger than that is used once and dropped), for at most ``max_schedules`` schedules."""

    def __init__(self, build: Callable[[Schedule], ReplayPlan], max_schedules: int = 64,
                 max_bytes: int | None = None) -> None:
        self._build = build
        self._max = max_schedules
        if max_bytes is None:
            max_bytes = int(os.environ.get("BRAZE_REPLAY_BYTES", 1 << 30))
        self.max_bytes = max_bytes
        self.held_bytes = 0
        self._idle: dict[int, tuple[Schedule, list[ReplayPlan]]] = {}
        self._lock = threading.Lock()
        # braze.backends.profile(): a list the replays append (call, seconds) to
        self.profiling: list[tuple[str, float]] | None = None

    def run(self, s: Schedule, inputs: list[np.ndarray],
            donate: tuple[tuple[int, int], ...] = ()) -> list[np.ndarray] | None:
        """Replay ``s`` on ``inputs`` with an idle plan (built if none is); None on the
        schedule's first call or when the inputs do not fit it (the caller then runs it
        the general way). ``donate``: as :meth:`ReplayPlan.run`."""
        e = self._idle.get(id(s))
        if e is None or e[0] is not s:  # first call: the general executor (it also builds,
            with self._lock:  # checks and tunes the kernels); plans from the second on
                self._idle[id(s)] = (s, [])
                while len(self._idle) > self._max:
                    self._drop_oldest()
            return None
        idle = e[1]
        try:
            plan = idle.pop()  # atomic: a plan serves one call at a time
            kept = True
        except IndexError:
            plan, kept = self._build(s), False
        try:
            if self.profiling is not None:
                return plan.run_profiled(inputs, self.profiling, donate)
            return plan.run(inputs, donate)
        finally:
            self._give_back(s, e, plan, kept)

    def _give_back(self, s: Schedule, e: tuple[Schedule, list[ReplayPlan]], plan: ReplayPlan,
                   kept: bool) -> None:
        with self._lock:
            if self._idle.get(id(s)) is not e:  # the schedule was dropped meanwhile
                if kept:
                    self.held_bytes -= plan.arena_bytes
                return
            if not kept:
                if len(e[1]) >= MAX_IDLE_PLANS or plan.arena_bytes > self.max_bytes:
                    return
                self.held_bytes += plan.arena_bytes
                while self.held_bytes > self.max_bytes and next(iter(self._idle)) != id(s):
                    self._drop_oldest()
                if self.held_bytes > self.max_bytes:  # only this schedule's plans are left
                    self.held_bytes -= plan.arena_bytes
                    return
            e[1].append(plan)

    def _drop_oldest(self) -> None:
        """Forget the oldest schedule's idle plans (under the lock); plans in use are
        uncounted when they come back."""
        key = next(iter(self._idle))
        self.held_bytes -= sum(p.arena_bytes for p in self._idle.pop(key)[1])

    def clear(self) -> None:
        """Forget every idle plan (their arenas go back to the allocator)."""
        with self._lock:
            while self._idle:
                self._drop_oldest()
