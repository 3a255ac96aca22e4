"""``bz.onnx``: run an ONNX model with braze ops.

Data flow: :func:`load` reads a model (a path, bytes or an ``onnx.ModelProto``), resolves
its external data inside the model's directory only (:mod:`.external`), checks that
every node has a converter (:mod:`.ops`, :mod:`.ops_nn`) and folds every node whose
inputs are all constants (initializers, ``Constant`` nodes, earlier folds) into a
numpy value at once. What is left is the runtime graph: an :class:`OnnxModel`
interprets it node by node on braze arrays, traced once per input signature by
``bz.compile`` (later calls replay the schedule), or eagerly with ``compiled=False``.
Values in the interpreter are numpy arrays (known at trace time: constants, the
results of ``Shape``/``Size`` of braze arrays, whose shapes are static, and whatever
is computed from those alone) or lazy braze arrays; so shape arithmetic such as
Shape -> Gather -> Concat -> Reshape becomes Python ints in the trace.

>>> import numpy as np, braze as bz
>>> from onnx import TensorProto, helper
>>> g = helper.make_graph(
...     [helper.make_node("Relu", ["x"], ["y"])], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
>>> model = bz.onnx.load(helper.make_model(g))
>>> np.asarray(model(np.array([-1.0, 2.0], np.float32))[0]).tolist()
[0.0, 2.0]
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..array import Array
from ..creation import asarray
from . import ops_nn as _ops_nn  # noqa: F401  (registers the conv/pool/norm converters)
from .external import load_model_proto
from .fusions import RULES, fuse_conv
from .ops import (
    CHECKS,
    CONVERTERS,
    DYNAMIC,
    MAX_CONSTANT_BYTES,
    NO_FOLD,
    DataDependentError,
    NodeContext,
)
from .ops import fold as fold_node

__all__ = ["load", "OnnxModel", "supported_ops"]


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) that have a converter.

    >>> import braze as bz
    >>> "MatMul" in bz.onnx.supported_ops()
    True
    """
    return sorted(CONVERTERS)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as e:  # an optional dependency: say how to get it
        raise ImportError("bz.onnx needs the onnx package: pip install 'braze[onnx]'") from e
    return onnx


def _np_dtype(elem_type: int, what: str) -> np.dtype:
    """The numpy dtype of an ONNX TensorProto element type (NotImplementedError if braze
    has none: strings, float8, int4...)."""
    from .ops import onnx_dtype

    return onnx_dtype(elem_type, what)


class _Input:
    """A graph input's name, dtype and shape (None for a dimension that is symbolic)."""

    def __init__(self, name: str, dtype: np.dtype | None, shape: tuple[int | None, ...] | None):
        self.name, self.dtype, self.shape = name, dtype, shape

    def check(self, x: Any, copy: bool | None = None) -> Array:
        """``x`` as this input's array; ``copy=False``: a numpy buffer read in place (a
        compiled call reads it during the call only)."""
        x = self.checked(x)
        return x if isinstance(x, Array) else asarray(x, copy=copy)

    def checked(self, x: Any) -> Any:
        """``x`` (an Array, or else as a numpy array) after checking its dtype and shape."""
        if not isinstance(x, Array):
            is_array = isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "__array__")
            x = np.asarray(x) if is_array else np.asarray(x, dtype=self.dtype)
        if self.dtype is not None and x.dtype != self.dtype:
            raise TypeError(f"input {self.name!r}: expected dtype {self.dtype}, got {x.dtype}")
        if self.shape is not None:
            got = tuple(x.shape)
            if len(got) != len(self.shape) or any(
                    want is not None and want != have for want, have in zip(self.shape, got)):
                want_s = tuple("?" if d is None else d for d in self.shape)
                raise ValueError(f"input {self.name!r}: expected shape {want_s} "
                                 f"('?' any size), got {got}")
        return x


def _value_info(onnx: Any, vi: Any) -> _Input:
    t = vi.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        raise NotImplementedError(f"bz.onnx: input/output {vi.name!r} has type {kind}; "
                                  "only tensors are supported (no sequence/map/optional)")
    tt = t.tensor_type
    dtype = _np_dtype(tt.elem_type, f"input/output {vi.name!r}") if tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return _Input(vi.name, dtype, shape)


def _opset(model: Any) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


class OnnxModel:
    """An ONNX model imported into braze (made by :func:`load`).

    Call it with the inputs positionally (``model.input_names`` order) or by name; it
    returns a list of braze arrays (``model.output_names`` order).

    >>> import numpy as np, braze as bz
    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph(
    ...     [helper.make_node("Add", ["a", "b"], ["c"])], "g",
    ...     [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "ab"],
    ...     [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    >>> m = bz.onnx.load(helper.make_model(g))
    >>> m.input_names, m.output_names
    (['a', 'b'], ['c'])
    >>> one = np.ones(2, np.float32)
    >>> np.asarray(m(a=one, b=one)[0]).tolist()
    [2.0, 2.0]
    """

    def __init__(self, model: Any, *, backend: str | None = None, compiled: bool = True,
                 opt_level: int | str | None = None, fold: bool = True):
        onnx = _onnx()
        self.proto = model
        graph = model.graph
        self.opset = _opset(model)
        self.backend = backend
        self.ir_version = int(model.ir_version)
        consts: dict[str, Any] = {}
        for init in graph.initializer:
            consts[init.name] = _tensor_value(onnx, init, f"initializer {init.name!r}")
        for sp in graph.sparse_initializer:
            raise NotImplementedError(f"bz.onnx: sparse initializer {sp.values.name!r} "
                                      "is not supported")
        # IR < 4 lists initializers among the inputs too (as defaults): the caller feeds
        # only the others
        self._inputs = [_value_info(onnx, vi) for vi in graph.input if vi.name not in consts]
        self.input_names = [i.name for i in self._inputs]
        self.output_names = [o.name for o in graph.output]
        for o in graph.output:
            _value_info(onnx, o)  # refuses non-tensor outputs at load
        self._nodes = [NodeContext(n, self.opset, onnx) for n in graph.node]
        self._check_supported(model)
        self.compiled = compiled and not any(n.op_type in DYNAMIC for n in self._nodes)
        # fold what is constant now; the rest is the runtime graph
        known = set(consts) | set(self.input_names) | {""}
        self._runtime: list[NodeContext] = []
        refused: list[str] = []
        for n in self._nodes:
            missing = [i for i in n.input_names if i not in known]
            if missing:
                raise ValueError(f"bz.onnx: node {n.label} reads {missing}, which no "
                                 "earlier node, input or initializer defines")
            known.update(n.output_names)
            check = CHECKS.get(n.op_type)
            if check is not None:
                n._raw = [consts.get(i) for i in n.input_names]  # what is known at load
                why = check(n)
                if why:
                    refused.append(f"{n.label}: {why}")
                    continue
            if n.op_type not in NO_FOLD and all(i in consts or i == "" for i in n.input_names):
                raw = [consts[i] if i else None for i in n.input_names]
                for name, v in zip(n.output_names, fold_node(n, raw)):
                    if name:
                        consts[name] = v
            else:
                self._runtime.append(n)
        if refused:
            raise NotImplementedError("bz.onnx: unsupported node configurations: "
                                      + "; ".join(refused))
        for name in self.output_names:
            if name not in known:
                raise ValueError(f"bz.onnx: output {name!r} is never computed")
        # import-time fusions (level 2, like the graph's pattern fusions)
        self.opt_level = opt_level
        self.fusions: dict[str, int] = dict.fromkeys(RULES, 0)
        self.fusion_refusals: list[str] = []
        level = _level(opt_level)
        if fold and level >= 2:
            self._runtime, self.fusions, self.fusion_refusals = fuse_conv(
                self._runtime, consts, set(self.output_names))
        needed = {i for n in self._runtime for i in n.input_names} | set(self.output_names)
        self._consts = {k: _read_only(v) for k, v in consts.items() if k in needed}
        # constants the runtime graph reads become braze arrays once, not per call; read-only
        # buffers, shared (a backend may cache what it derives from them: packed weights)
        self._arrays = {k: asarray(v, copy=False) for k, v in self._consts.items()}
        self._fn = self._run
        self._replay_numpy: Callable[[Sequence[Any]], Any] | None = None
        if self.compiled:
            from ..compile import compile as _compile

            run = self._run

            def traced(*xs: Array) -> list[Array]:
                # (bz.compile looks for captured arrays in the closure and in the globals
                # the code names at every call: here one cell, no names)
                return run(*xs)

            replayed = _compile(traced, opt_level=None if opt_level is None else level)
            self._fn, self._replay_numpy = replayed, replayed.replay_numpy

    def _check_supported(self, model: Any) -> None:
        missing: dict[str, list[str]] = {}
        for n in self._nodes:
            if n.domain not in ("", "ai.onnx") or n.op_type not in CONVERTERS:
                key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                missing.setdefault(key, []).append(n.name or "(unnamed)")
        if missing:
            ops = "; ".join(f"{op} (nodes {', '.join(map(repr, names[:3]))}"
                            f"{', ...' if len(names) > 3 else ''})"
                            for op, names in sorted(missing.items()))
            raise NotImplementedError(f"bz.onnx: unsupported op types at opset {self.opset}: "
                                      f"{ops}")

    # ------------------------------------------------------------ running
    def _run(self, *xs: Array) -> list[Array]:
        env: dict[str, Any] = dict(self._consts)
        env.update(zip(self.input_names, xs))
        for n in self._runtime:
            raw = [env[i] if i else None for i in n.input_names]
            if all(isinstance(v, np.ndarray) or v is None for v in raw) \
                    and n.op_type not in NO_FOLD:
                outs = fold_node(n, raw)  # Shape arithmetic: numpy values known at trace time
            else:
                args = [self._arrays[i] if i in self._arrays else
                        asarray(v) if isinstance(v, np.ndarray) else v
                        for i, v in zip(n.input_names, raw)]
                outs = n.convert(args, raw)
            for name, v in zip(n.output_names, outs):
                if name:
                    env[name] = v
        return [self._arrays[o] if o in self._arrays else
                asarray(env[o]) if isinstance(env[o], np.ndarray) else env[o]
                for o in self.output_names]

    def __call__(self, *inputs: Any, **named: Any) -> list[Array]:
        """Run the model: inputs positionally or by name; a list of braze arrays."""
        raw = self._bind(inputs, named)
        if self.backend is None:
            return self._call(raw)
        from ...backends import backend as _backend

        with _backend(self.backend):
            return self._call(raw)

    def _call(self, raw: list[Any]) -> list[Array]:
        if self.compiled:
            # the replay reads numpy inputs during the call only: no copy of them (a
            # fresh read-only view each call), and an output that is a view of one (a
            # model that only reshapes) copied, so a later write to the input never shows
            vals = [spec.checked(x) for spec, x in zip(self._inputs, raw)]
            if self._replay_numpy and not any(isinstance(v, Array) for v in vals):
                # numpy in: straight to a replay for these shapes (no braze arrays made)
                outs = self._replay_numpy([_read_only_view(v) for v in vals])
                if outs is not None:
                    return _unshared(outs, raw)
            xs = [v if isinstance(v, Array) else asarray(v, copy=False) for v in vals]
            try:
                outs = self._fn(*xs)
            except DataDependentError as e:
                # a shape read from data: cannot be traced; this model runs eagerly from now on
                warnings.warn(f"bz.onnx: {e}; running the model eagerly (no bz.compile)",
                              RuntimeWarning, stacklevel=3)
                self.compiled = False
            else:
                return _unshared(outs, raw)
        return self._run(*[spec.check(x) for spec, x in zip(self._inputs, raw)])

    def _bind(self, inputs: Sequence[Any], named: dict[str, Any]) -> list[Any]:
        """The inputs in ``input_names`` order (as given)."""
        if inputs and named:
            raise TypeError("bz.onnx model: pass the inputs either positionally or by name")
        if named:
            unknown = sorted(set(named) - set(self.input_names))
            if unknown:
                raise ValueError(f"bz.onnx model: unknown inputs {unknown}; "
                                 f"the model's inputs are {self.input_names}")
            absent = [n for n in self.input_names if n not in named]
            if absent:
                raise ValueError(f"bz.onnx model: missing inputs {absent}")
            inputs = [named[n] for n in self.input_names]
        if len(inputs) != len(self._inputs):
            raise ValueError(f"bz.onnx model: expected {len(self._inputs)} inputs "
                             f"{self.input_names}, got {len(inputs)}")
        return list(inputs)

    def __repr__(self) -> str:
        return (f"OnnxModel(inputs={self.input_names}, outputs={self.output_names}, "
                f"opset={self.opset}, nodes={len(self._nodes)}, "
                f"runtime_nodes={len(self._runtime)}, compiled={self.compiled})")


def _read_only_view(x: np.ndarray) -> np.ndarray:
    """``x`` read in place by a compiled call: a writeable buffer through a fresh read-only
    view (what ``asarray(x, copy=False)`` wraps), so the replay never holds it from one call
    to the next."""
    if not x.flags.writeable:
        return x
    v = x.view()
    v.flags.writeable = False
    return v


def _unshared(outs: list[Array], inputs: list[Any]) -> list[Array]:
    """``outs``, each one that may share memory with a numpy array of ``inputs`` copied
    (an output's data as it is: nothing evaluated or moved off a device)."""
    held = [x for x in inputs if isinstance(x, np.ndarray)]
    if not held:
        return outs
    return [asarray(np.array(v)) if isinstance(v, np.ndarray) and
            any(np.may_share_memory(v, x) for x in held) else o
            for o, v in ((o, o._node.data) for o in outs)]


def _level(opt_level: int | str | None) -> int:
    """The optimization level a model loaded with ``opt_level`` compiles at."""
    from ...graph import compiler
    from ...graph.passes.registry import make_config

    return make_config(opt_level, base=compiler.CONFIG).level


def _read_only(v: Any) -> Any:
    """A constant as a contiguous read-only array."""
    if not isinstance(v, np.ndarray):
        return v
    t = v if v.flags.c_contiguous else np.ascontiguousarray(v)  # (keeps 0-d arrays 0-d)
    t.flags.writeable = False
    return t


def _tensor_value(onnx: Any, t: Any, what: str) -> np.ndarray:
    from .ops import tensor_to_numpy

    return tensor_to_numpy(t, what)


def load(model: Any, *, backend: str | None = None, compiled: bool = True,
         opt_level: int | str | None = None, fold: bool = True,
         max_constant_bytes: int | None = None) -> OnnxModel:
    """Import an ONNX model (a path, bytes or an ``onnx.ModelProto``) into braze.

    ``backend``: the braze backend its calls run on (None: the current one).
    ``compiled=False`` interprets the graph eagerly on every call (for debugging);
    by default each input signature is traced once by ``bz.compile`` and replayed.
    ``opt_level`` (0 none, 1 basic, 2 extended, 3 layout; None: ``BRAZE_OPT_LEVEL`` or
    the highest) is the compile's, and ``fold=True`` folds BatchNormalization / Mul /
    Add by constants into the Conv before them (:mod:`.fusions`) at level 2 and above;
    ``model.fusions`` counts what fired.
    External data is read only from files inside the model's directory. An op type
    without a converter raises ``NotImplementedError`` listing all of them. A malformed
    file (bad protobuf, sizes or offsets that do not fit, a value folded at load larger
    than ``max_constant_bytes``, default ``BRAZE_ONNX_MAX_CONSTANT_BYTES`` or 2 GiB) raises
    ``ValueError`` naming the file.

    >>> import numpy as np, braze as bz
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> w = numpy_helper.from_array(np.eye(2, dtype=np.float32), "w")
    >>> g = helper.make_graph(
    ...     [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])], [w])
    >>> m = bz.onnx.load(helper.make_model(g).SerializeToString())
    >>> np.asarray(m(np.ones((3, 2), np.float32))[0]).shape
    (3, 2)
    """
    source = repr(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else \
        type(model).__name__
    limit = MAX_CONSTANT_BYTES.set(_constant_limit(max_constant_bytes))
    try:
        proto = load_model_proto(model)
        return OnnxModel(proto, backend=backend, compiled=compiled, opt_level=opt_level,
                         fold=fold)
    except NotImplementedError as e:
        raise NotImplementedError(f"bz.onnx.load: {source}: {e}") from None
    except (FileNotFoundError, TypeError) as e:
        if isinstance(e, TypeError) and not str(e).startswith("bz.onnx"):
            raise ValueError(f"bz.onnx.load: {source}: malformed model: {e}") from None
        raise
    except ValueError as e:
        raise ValueError(f"bz.onnx.load: {source}: {e}") from None
    except Exception as e:  # noqa: BLE001 - a hostile file: protobuf, numpy, anything
        # (DecodeError, KeyError, IndexError, OverflowError, MemoryError...): one clean
        # error naming the file, never a crash or another exception type
        raise ValueError(f"bz.onnx.load: {source}: malformed model ({type(e).__name__}: "
                         f"{e})") from None
    finally:
        MAX_CONSTANT_BYTES.reset(limit)


def _constant_limit(given: int | None) -> int:
    if given is not None:
        return int(given)
    env = os.environ.get("BRAZE_ONNX_MAX_CONSTANT_BYTES")
    return int(env) if env else 1 << 31

