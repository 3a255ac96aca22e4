"""``@bz.compile``: trace a function once per input signature, replay its schedule.

The first call with a new *signature* (the tree structure of the arguments, each
array's shape and dtype, each static argument's value) runs the Python function on
placeholder arrays, which records a graph; the compiler turns it into a schedule,
stored in a hash map under that signature. Later calls with the same signature
bind the new data to the schedule's inputs and run it: no Python op dispatch, no
graph building, no optimization.

* Python ``float``/``complex`` arguments (and ``int``/``bool`` ones, unless the
  function needs them as concrete values: axes, shapes, indices, Python ``if``) are
  *runtime inputs*: a changing temperature or offset does not retrace. They stay
  weakly typed, as in eager code.
* Arrays the function reads from its closure or module globals are inputs too,
  read fresh at every call (``w += 1`` outside is seen inside).
* ``shapeless=True`` reuses one trace for new shapes of the same ranks and dtypes
  when every op's shape rule can be re-run on them; ops whose attributes hold sizes
  (reshape, broadcast_to, slicing, concat, arange, random, ``var`` with a correction)
  make it retrace instead.
* After ``RETRACE_WARNING`` traces of one function (``retrace_warning=``: another count,
  or None for a function that buckets its shapes on purpose), a warning suggests why.
* ``opt_level=`` and ``disable_passes=`` choose the optimization passes of this
  function (see :mod:`braze.graph.passes`): the level replaces ``BRAZE_OPT_LEVEL``,
  the names are disabled on top of ``BRAZE_DISABLE_PASSES``; unknown names raise
  ValueError at the decorator. The schedule cache keeps each configuration apart.

>>> import braze as bz
>>> @bz.compile
... def f(x, scale):
...     return bz.softmax(x * scale, axis=-1)
>>> f(bz.ones((2, 3)), 2.0).shape, f(bz.ones((2, 3)), 3.0).shape, f.trace_count
((2, 3), (2, 3), 1)
"""

from __future__ import annotations

import builtins
import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends import current as _current_backend
from ..graph import compiler as _compiler
from ..graph import dtypes as dt
from ..graph.compiler import CACHE
from ..graph.ir import trace
from ..graph.kernel import Schedule
from ..graph.node import Node
from ..graph.ops import CONSTANT, OPS, PARAMETER, broadcast_shapes
from ..graph.passes.registry import PassConfig, make_config
from .array import TRACING, Array, tracing
from .array import eval as _eval

RETRACE_WARNING = 10
_RUNTIME_SCALARS = (builtins.float, builtins.complex)
_MAYBE_RUNTIME = (builtins.int, builtins.bool)


# ---------------------------------------------------------------- pytrees
def flatten(tree: Any) -> tuple[list[Any], Any]:
    """Leaves of nested tuples/lists/dicts (dict keys sorted) and a hashable structure."""
    leaves: list[Any] = []
    return leaves, _flatten_into(tree, leaves)


def _flatten_into(x: Any, leaves: list[Any]) -> Any:
    # a module-level recursion: a recursive closure would be a reference cycle that
    # keeps every leaf (e.g. a 64 MB output) alive until the cycle collector runs
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(_flatten_into(v, leaves) for v in x))
    if isinstance(x, dict):
        keys = sorted(x)
        return ("dict", tuple(keys), tuple(_flatten_into(x[k], leaves) for k in keys))
    leaves.append(x)
    return None


def unflatten(struct: Any, leaves: list[Any]) -> Any:
    """Inverse of :func:`flatten`."""
    return _unflatten_from(struct, iter(leaves))


def _unflatten_from(s: Any, it: Any) -> Any:
    if s is None:
        return next(it)
    if s[0] == "dict":
        return {k: _unflatten_from(v, it) for k, v in zip(s[1], s[2])}
    items = [_unflatten_from(v, it) for v in s[1]]
    return tuple(items) if s[0] == "tuple" else items


class _NeedsStaticInts(Exception):
    pass


def _static_key(x: Any) -> Any:
    try:
        hash(x)
        return ("static", type(x).__name__, x)
    except TypeError:
        return ("static", type(x).__name__, repr(x))


# ---------------------------------------------------------------- compiled functions
class _Entry:
    """One traced signature: its schedule (per shape, if shapeless) and input bindings."""

    def __init__(self, rows: Any, outputs: list[int], leaves: list[Node], bindings: list[Any],
                 out_struct: Any, out_kinds: list[Any], schedule: Schedule) -> None:
        self.rows = rows
        self.outputs = outputs
        self.leaves = leaves
        self.bindings = bindings
        self.out_struct = out_struct
        self.out_kinds = out_kinds
        self.schedules: dict[Any, Schedule] = {None: schedule}
        self.struct: Any = None
        self.state_out: Any = None  # the outputs= state's structure (bz.compile(outputs=))
        # (output position, input position, state leaf) of each state array the call may
        # update in place, when no one else holds the old one (buffer donation)
        self.donations: list[tuple[int, int, int]] = []
        # the inputs list with the trace's constants in place (an LLM step has hundreds of
        # weights): a call copies it and fills in the rest
        self.template = [ref if kind == "data" else None for kind, ref, _ in bindings]
        self.varying = [(i, kind, ref, dtype) for i, (kind, ref, dtype) in enumerate(bindings)
                        if kind != "data"]
        # positions of those constants: a backend with its own memory (mlx) holds its copy
        self.constants = frozenset(i for i, (kind, _, _) in enumerate(bindings)
                                   if kind == "data")


class CompiledFunction:
    """A function traced once per signature and replayed (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], shapeless: bool = False,
                 opt_level: int | None = None, disable_passes: Any = None,
                 inputs: Any = None, outputs: Any = None,
                 retrace_warning: int | None = RETRACE_WARNING) -> None:
        if retrace_warning is not None and (not isinstance(retrace_warning, int)
                                            or retrace_warning < 1):
            raise ValueError(f"bz.compile: retrace_warning must be a positive int or None, "
                             f"got {retrace_warning!r}")
        self.fn = fn
        self.retrace_warning = retrace_warning
        self.shapeless = shapeless
        # implicit state (MLX's inputs=/outputs=): objects whose arrays the function reads
        # (bound at every call) and leaves new values in (written back after every call)
        self._state_in = _state_objects(inputs, "inputs")
        self._state_out = _state_objects(outputs, "outputs")
        # None: the configuration in force when a trace is compiled (graph.compiler.CONFIG)
        self.pass_config: PassConfig | None = None if opt_level is None and not disable_passes \
            else make_config(opt_level, disable_passes, base=_compiler.CONFIG)
        self.trace_count = 0
        self._entries: dict[Any, _Entry] = {}
        self._fast: dict[Any, _Entry] = {}  # positional-arrays-only calls: shapes/dtypes -> entry
        self._static_ints = False
        self._warned = False
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def _captured(self) -> list[tuple[Callable[[], Any], Array]]:
        """Arrays the function reads from its closure cells and module globals."""
        out: list[tuple[Callable[[], Any], Array]] = []
        fn = getattr(self.fn, "__wrapped__", self.fn)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, Array):
                out.append((functools.partial(getattr, cell, "cell_contents"), value))
        code = getattr(fn, "__code__", None)
        globs = getattr(fn, "__globals__", {})
        for name in code.co_names if code else ():
            value = globs.get(name)
            if isinstance(value, Array):
                out.append((functools.partial(globs.__getitem__, name), value))
        return out

    def _signature(self, leaves: list[Any], captured: list[Any]) -> tuple[Any, ...]:
        sig: list[tuple[Any, ...]] = []
        for x in leaves:
            if isinstance(x, Array):
                sig.append(("array", x.ndim if self.shapeless else x.shape, x.dtype))
            elif isinstance(x, _RUNTIME_SCALARS) or (
                    isinstance(x, _MAYBE_RUNTIME) and not self._static_ints):
                sig.append(("scalar", type(x)))
            elif isinstance(x, (np.ndarray, np.generic)):
                sig.append(("array", x.ndim if self.shapeless else x.shape, x.dtype))
            else:
                sig.append(_static_key(x))
        for _, arr in captured:
            sig.append(("captured", arr.shape, arr.dtype))
        return tuple(sig)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if TRACING.get():
            # inside another trace (bz.compile, bz.grad...): the function's ops join that
            # graph, as jax.jit's do under a transformation (a replay needs values)
            return self.fn(*args, **kwargs)
        if self._state_in or self._state_out:
            return self._call_with_state(args, kwargs)
        if not kwargs and not self.shapeless:  # fast path: positional arrays only
            fkey = []
            for a in args:
                if type(a) is not Array:
                    break
                node = a._node
                fkey.append((node.shape, node.dtype))
            else:
                captured = self._captured()
                entry = self._fast.get(_fast_key(fkey, captured))
                if entry is not None:
                    return self._replay(entry, list(args), captured)
        leaves, struct = flatten((args, kwargs))
        leaves = [Array(_np_leaf(x)) if isinstance(x, (np.ndarray, np.generic)) else x
                  for x in leaves]
        captured = self._captured()
        key = (struct, self._signature(leaves, captured), self._static_ints)
        entry = self._entries.get(key)
        if entry is None:
            try:
                entry = self._trace(leaves, struct, captured)
            except _NeedsStaticInts:
                self.trace_count -= 1  # that attempt does not count: ints become static
                self._static_ints = True
                return self(*args, **kwargs)
            self._entries[(struct, self._signature(leaves, captured), self._static_ints)] = entry
        if not kwargs and not self.shapeless and \
                all(type(a) is Array or type(a) is np.ndarray for a in args):
            # (the entry serves numpy arrays of these shapes and dtypes too: replay_numpy)
            fkey = [(a._node.shape, a._node.dtype) if type(a) is Array else (a.shape, a.dtype)
                    for a in args]
            self._fast[_fast_key(fkey, captured)] = entry
        return self._replay(entry, leaves, captured)

    def replay_numpy(self, arrays: Sequence[np.ndarray]) -> Any:
        """The function's result for positional numpy ``arrays`` (read in place during the
        call) replayed from a trace made for their shapes and dtypes, or None when there is
        none yet (or the function takes state or is shapeless): then call it. A shortcut
        for callers that hold numpy inputs (:func:`braze.onnx.load`'s models): no braze
        array is made for them.

        >>> import numpy as np, braze as bz
        >>> f = bz.compile(lambda x: x * 2)
        >>> x = np.ones(3, np.float32)
        >>> f.replay_numpy([x]) is None  # (no trace for these shapes yet)
        True
        >>> f(x).tolist(), f.replay_numpy([x]).tolist()
        ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])
        """
        if TRACING.get() or self._state_in or self._state_out or self.shapeless:
            return None
        captured = self._captured()
        entry = self._fast.get(_fast_key([(a.shape, a.dtype) for a in arrays], captured))
        if entry is None:
            return None
        return self._replay(entry, list(arrays), captured)

    # ------------------------------------------------------------ implicit state
    def _call_with_state(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        leaves, struct = flatten((args, kwargs))
        leaves = [Array(_np_leaf(x)) if isinstance(x, (np.ndarray, np.generic)) else x
                  for x in leaves]
        state, state_struct = flatten([_state_get(o) for o in self._state_in])
        bad = [x for x in state if not isinstance(x, Array)]  # (no loop variable left
        if bad:  # holding a state array in this frame: see _donations)
            raise TypeError(f"bz.compile: inputs= state holds a {type(bad[0]).__name__}; "
                            "only arrays (in modules, optimizers, lists, dicts)")
        captured = self._captured()
        key = (struct, state_struct, self._signature(leaves + state, captured),
               self._static_ints)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._trace(leaves, struct, captured, state_struct)
            self._entries[key] = entry
        donate = _donations(entry.donations, state) if entry.donations else ()
        outs = self._replay(entry, leaves + state, captured, donate)
        user, new_state = outs
        _state_write(self._state_out, entry.state_out, new_state)
        return user

    # ------------------------------------------------------------ trace
    def _trace(self, leaves: list[Any], struct: Any, captured: list[Any],
               state_struct: Any = None) -> _Entry:
        self.trace_count += 1
        if self.retrace_warning is not None and self.trace_count > self.retrace_warning \
                and not self._warned:
            self._warned = True
            warnings.warn(f"bz.compile: {getattr(self.fn, '__name__', 'function')} has been "
                          f"traced {self.trace_count} times: each new shape, dtype or static "
                          "argument value retraces (shapeless=True reuses traces across "
                          "shapes)", RuntimeWarning, stacklevel=3)
        _eval(*(arr for _, arr in captured))  # captured arrays become bound leaves
        placeholders: list[Any] = []
        for i, x in enumerate(leaves):
            if isinstance(x, Array):
                placeholders.append(Array(Node(PARAMETER, (), {"index": i}, x.shape, x.dtype)))
            elif isinstance(x, _RUNTIME_SCALARS) or (
                    isinstance(x, _MAYBE_RUNTIME) and not self._static_ints):
                d = {bool: dt.bool_, int: dt.int64, float: dt.float64,
                     complex: dt.complex128}[type(x)]
                placeholders.append(Array(Node(PARAMETER, (), {"index": i}, (), d, weak=True)))
            else:
                placeholders.append(x)
        args, kwargs = unflatten(struct, placeholders)
        # what the objects hold, to put back after the trace (a dict or list given as
        # state is itself the tree: its items are copied, not the container)
        saved = [dict(t) if isinstance(t, dict) else list(t) if isinstance(t, list) else t
                 for t in (_state_get(o) for o in self._state_in)]
        if state_struct is not None:
            state = flatten(saved)[0]
            held = [Array(Node(PARAMETER, (), {"index": len(leaves) + j}, x.shape, x.dtype))
                    for j, x in enumerate(state)]
            for o, tree in zip(self._state_in, unflatten(state_struct, held)):
                _state_set(o, tree)
        try:
            with tracing():
                out = self.fn(*args, **kwargs)
                if state_struct is not None:
                    new_state, new_struct = flatten([_state_get(o) for o in self._state_out])
                    out = (out, new_state)
        except TypeError as e:
            if "traced by bz.compile" in str(e) and not self._static_ints and any(
                    isinstance(x, _MAYBE_RUNTIME) for x in leaves):
                raise _NeedsStaticInts() from e
            raise
        finally:
            for o, tree in zip(self._state_in, saved):  # the objects hold their arrays again
                _state_set(o, tree)
        out_leaves, out_struct = flatten(out)
        targets = [o._node for o in out_leaves if isinstance(o, Array)]
        t = trace(targets)
        schedule = CACHE.get_or_build(t.key, t.build, self.pass_config)
        captured_ids = {id(arr._node): j for j, (_, arr) in enumerate(captured)}
        bindings: list[Any] = []
        for leaf in t.leaves:
            if leaf.op is PARAMETER:
                bindings.append(("arg", leaf.attrs["index"], leaf.dtype))
            elif id(leaf) in captured_ids:
                bindings.append(("captured", captured_ids[id(leaf)], leaf.dtype))
            else:
                bindings.append(("data", leaf.data, leaf.dtype))
        out_kinds = ["array" if isinstance(o, Array) else ("static", o) for o in out_leaves]
        entry = _Entry(t._rows, t._outputs, t.leaves, bindings, out_struct, out_kinds, schedule)
        entry.struct = struct
        if state_struct is not None:
            entry.state_out = new_struct
            if new_struct == state_struct and len(self._state_in) == len(self._state_out) \
                    and all(a is b for a, b in zip(self._state_in, self._state_out)):
                entry.donations = _donation_pairs(t.leaves, bindings, out_leaves,
                                                  len(out_leaves) - len(new_state),
                                                  len(leaves))
        return entry

    # ------------------------------------------------------------ replay
    def _replay(self, entry: _Entry, leaves: list[Any], captured: list[Any],
                donate: tuple[tuple[int, int], ...] = ()) -> Any:
        inputs: list[Any] = entry.template.copy()  # (None where a varying input goes)
        for i, kind, ref, dtype in entry.varying:
            if kind == "arg":
                x = leaves[ref]
                inputs[i] = x._value() if isinstance(x, Array) else np.asarray(x, dtype=dtype)
            else:  # captured
                inputs[i] = captured[ref][0]()._value()
        schedule: Schedule | None = entry.schedules[None]
        if self.shapeless:
            schedule = self._schedule_for_shapes(entry, inputs)
            if schedule is None:  # shape-specific ops: trace again for these shapes
                fresh = self._trace(leaves, entry.struct, captured)
                entry.schedules[tuple(a.shape for a in inputs)] = fresh.schedules[None]
                schedule = fresh.schedules[None]
        outs = _current_backend().run_schedule(schedule, inputs, entry.constants, donate)
        if entry.out_struct is None and entry.out_kinds[0] == "array":  # one array: no tree
            return Array(_np_leaf(outs[0]))
        it = iter(outs)
        result = [Array(_np_leaf(next(it))) if k == "array" else k[1] for k in entry.out_kinds]
        return unflatten(entry.out_struct, result)

    def _schedule_for_shapes(self, entry: _Entry, inputs: list[np.ndarray]) -> Schedule | None:
        shapes = tuple(a.shape for a in inputs)
        if shapes == tuple(leaf.shape for leaf in entry.leaves):
            return entry.schedules[None]
        s = entry.schedules.get(shapes)
        if s is not None:
            return s
        rows = _reinfer(entry.rows, shapes)
        if rows is None:
            return None
        from ..graph.ir import Trace

        sigs = tuple((r[0], r[3], r[4]) if r[0] in ("input",) else
                     (r[0], r[4], type(r[5]), repr(r[5])) if r[0] == "const" else
                     (r[0], r[1], _attrs_key(r[2]), r[3], r[4]) for r in rows)
        t = Trace((sigs, tuple(entry.outputs)), entry.leaves, rows, entry.outputs)
        s = entry.schedules[shapes] = CACHE.get_or_build(t.key, t.build, self.pass_config)
        return s


def _fast_key(args: list[tuple[Any, Any]], captured: list[tuple[Any, Array]]) -> Any:
    """The fast-path key of a call: its positional arrays' and the captured arrays' (shape,
    dtype) pairs."""
    return (tuple(args + [(arr.shape, arr.dtype) for _, arr in captured]), len(captured))


def _donation_pairs(trace_leaves: list[Node], bindings: list[Any], out_leaves: list[Any],
                    n_user: int, n_args: int) -> list[tuple[int, int, int]]:
    """(schedule output position, schedule input position, state leaf) of each state
    array that a compiled step reads and replaces with a new array of its shape: the
    candidates for an update in place (the schedule decides which it allows)."""
    out_pos: dict[int, int] = {}  # out leaf -> position among the array outputs
    for j, o in enumerate(out_leaves):
        if isinstance(o, Array):
            out_pos[j] = len(out_pos)
    in_pos = {ref: i for i, (kind, ref, _) in enumerate(bindings) if kind == "arg"}
    pairs = []
    for j in range(len(out_leaves) - n_user):
        o, i = out_pos.get(n_user + j), in_pos.get(n_args + j)
        if o is None or i is None:
            continue
        new, old = out_leaves[n_user + j]._node, trace_leaves[i]
        if new is not old and new.shape == old.shape and new.dtype == old.dtype:
            pairs.append((o, i, j))
    return pairs


def _donations(pairs: list[tuple[int, int, int]], state: list[Any]
               ) -> tuple[tuple[int, int], ...]:
    """The pairs whose old state array nothing else holds: not the user (another name,
    a numpy view, a slice), not another Array or pending graph; only the state object
    and this call (reference counts as :func:`_sole_state_counts` measures them)."""
    from .indexing import _owned

    pooled = getattr(getattr(_current_backend(), "pool", None), "holds", None)
    out = []
    for o, i, j in pairs:
        x = state[j]
        if sys.getrefcount(x) <= _SOLE_STATE:
            data = _owned(x, pooled=pooled)
            if data is not None and data.flags.writeable:
                out.append((o, i))
    return tuple(out)


def _sole_state_counts() -> int:
    """References to a state array held by its object alone, as :func:`_donations` sees
    them (its frame's own references included)."""
    holder = {"w": Array(_np_leaf(np.zeros(2, np.float32)))}
    state, _ = flatten([holder])
    x = state[0]
    return sys.getrefcount(x)


def _attrs_key(attrs: dict[str, Any]) -> Any:
    from ..graph.ir import attrs_key

    return attrs_key(attrs) if attrs else ()


_SHAPE_FREE = {"reduce", "scan"}


def _reinfer(rows: list[Any], input_shapes: tuple[tuple[int, ...], ...]) -> list[Any] | None:
    """The traced graph's rows with shapes re-derived for new input shapes, or None when
    an op's attributes depend on the old shapes."""
    out: list[Any] = []
    shapes: list[tuple[int, ...]] = []
    try:
        for op, ins, attrs, shape, dtype, value in rows:
            if op == "input":
                shape = input_shapes[value]
            elif op == "const":
                if attrs.get("size_dependent"):
                    return None
            else:
                opdef = OPS[op]
                in_shapes = tuple(shapes[i] for i in ins)
                if opdef.kind == "elementwise":
                    shape = broadcast_shapes(*in_shapes) if in_shapes else shape
                elif opdef.kind in _SHAPE_FREE or op in ("permute_dims", "matmul"):
                    shape, _ = opdef.infer(in_shapes, (dtype,) * len(ins), attrs)  # type: ignore
                else:
                    return None
            shapes.append(shape)
            out.append((op, ins, attrs, shape, dtype, value))
    except ValueError:
        return None
    return out


def _np_leaf(data: Any) -> Node:
    a = data if type(data) is np.ndarray else np.asarray(data)
    return Node(CONSTANT, (), {}, a.shape, a.dtype, a)


def compile(fn: Callable[..., Any] | None = None, *, shapeless: bool = False,  # noqa: A001
            opt_level: int | None = None, disable_passes: Any = None,
            inputs: Any = None, outputs: Any = None,
            retrace_warning: int | None = RETRACE_WARNING) -> Any:
    """Decorator: trace ``fn`` once per signature and replay the optimized schedule.

    ``opt_level`` (0 none, 1 basic, 2 extended, 3 layout) and ``disable_passes`` (pass
    names) choose this function's optimization passes (see :mod:`braze.graph.passes`).
    ``inputs`` / ``outputs`` (MLX's): objects -- modules, optimizers, lists and dicts
    of arrays -- whose arrays ``fn`` reads, and leaves new arrays in, without taking
    them as arguments: read at every call, written back after it (a training step
    that updates a model and its optimizer replays as one schedule).
    ``retrace_warning``: traces after which a warning says the function keeps retracing
    (None: never; for a function called with bucketed shapes on purpose).

    >>> import braze as bz
    >>> double = bz.compile(lambda x: x * 2)
    >>> double(bz.arange(3)).tolist()
    [0, 2, 4]
    >>> no_cse = bz.compile(lambda x: bz.sin(x) + bz.sin(x), disable_passes=("cse",))
    >>> [name for name, _ in bz.explain(no_cse, bz.asarray([1.0, 2.0])).passes]
    ['constant_folding', 'identities', 'layout', 'small_reductions', 'conv_epilogue',
     'conv_concat', 'conv_pool', 'dce', 'fuse', 'plan_memory']
    """
    if fn is None:
        if opt_level is not None or disable_passes:  # bad names or levels raise at the call,
            make_config(opt_level, disable_passes)  # not at decoration (CompiledFunction's)
        return lambda f: CompiledFunction(f, shapeless=shapeless, opt_level=opt_level,
                                          disable_passes=disable_passes, inputs=inputs,
                                          outputs=outputs, retrace_warning=retrace_warning)
    return CompiledFunction(fn, shapeless=shapeless, opt_level=opt_level,
                            disable_passes=disable_passes, inputs=inputs, outputs=outputs,
                            retrace_warning=retrace_warning)


# ---------------------------------------------------------------- implicit state
def _state_objects(objs: Any, what: str) -> list[Any]:
    if objs is None:
        return []
    items = list(objs) if isinstance(objs, (list, tuple)) else [objs]
    for o in items:
        if not (isinstance(o, (dict, list)) or hasattr(o, "parameters") and hasattr(o, "update")
                or hasattr(o, "state") and isinstance(o.state, dict)):
            raise TypeError(f"bz.compile: {what}= takes modules, optimizers, lists and dicts "
                            f"of arrays, got {type(o).__name__}")
    return items


def _state_get(o: Any) -> Any:
    """The tree of arrays an inputs=/outputs= object holds."""
    if isinstance(o, (dict, list)):
        return o
    if hasattr(o, "parameters") and hasattr(o, "update"):  # a bz.nn.Module
        return o.parameters()
    return o.state  # an optimizer


def _state_set(o: Any, tree: Any) -> None:
    if isinstance(o, dict):
        o.clear()
        o.update(tree)
    elif isinstance(o, list):
        o[:] = tree
    elif hasattr(o, "parameters") and hasattr(o, "update"):
        o.update(tree)
    else:
        o.state = tree


def _state_write(objs: list[Any], struct: Any, values: list[Any]) -> None:
    """Write the outputs= state a replay computed back into its objects."""
    for o, tree in zip(objs, unflatten(struct, list(values))):
        _state_set(o, tree)


_SOLE_STATE = _sole_state_counts()  # (defined last: it needs _np_leaf and flatten)
