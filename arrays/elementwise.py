"""Elementwise functions: one public function per elementwise row of the op table.

Every function here is generated from its declaration in :mod:`braze.graph.ops`
(name, arity, accepted dtypes, result dtype), so the API and the backends cannot
drift apart. Arguments broadcast; Python scalars are weakly typed (``x + 1`` keeps
``x``'s dtype); integer inputs to floating functions compute in float32.

>>> import braze as bz
>>> bz.exp(bz.asarray([0.0])).tolist(), bz.add(bz.asarray([1], dtype=bz.int8), 2).dtype
([1.0], dtype('int8'))
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _core
from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import OPS, WHERE, OpDef
from .array import (
    Array,
    _ew_op,
    as_array,
    astype,
    elementwise,
    numpy_scalar_fn,
    operand_nodes,
    promote_operands,
)


def _make(op: OpDef) -> Callable[..., Array]:
    """The public function of elementwise record ``op``: its summary, domain and example
    (a doctest, collected through ``__test__``) come from the record. A native
    ``ElementwiseFunction`` (``csrc/functions.cpp``) in front of the Python one sends
    calls on numpy scalars of the types seen before straight to numpy's function."""
    name = op.name
    # operand types -> numpy_scalar_fn's function for them (False: the array path)
    scalar_fns: dict[Any, Any] = {}

    def scalar_fn(key: tuple[type, ...], args: tuple[Any, ...]) -> Any:
        f = scalar_fns.get(key)
        if f is None:
            f = scalar_fns[key] = numpy_scalar_fn(op, args)
            if f:
                public._register(key, f)  # (False: its entries are full; this one serves)
        return f

    if op.arity == 1:
        def fn(x: Array, /) -> Array:
            if type(x) is not Array:  # a numpy scalar in, one out, as numpy's function
                f = scalar_fn((type(x),), (x,))
                if f:
                    return f(x)
            return elementwise(op, as_array(x, name))
        sig = "x"
    else:
        def fn(x1: Array | complex, x2: Array | complex, /) -> Array:  # type: ignore[misc]
            if type(x1) is not Array and type(x2) is not Array:
                f = scalar_fn((type(x1), type(x2)), (x1, x2))
                if f:
                    return f(x1, x2)
            return elementwise(op, x1, x2)
        sig = "x1, x2 (arrays or Python scalars; they broadcast)"
    public = _core.ElementwiseFunction(fn, op.arity)
    for f in (fn, public):
        f.__name__ = f.__qualname__ = name
        f.__module__ = "braze"
    public.__wrapped__ = fn  # (inspect.signature reads the Python function's)
    assert op.example is not None
    call, result = op.example
    imports = ">>> import braze as bz\n"
    if not op.public:  # not in the braze namespace: import it from here
        imports += f">>> from braze.arrays.elementwise import {name}\n"
        call = call.replace(f"bz.{name}(", f"{name}(", 1)
    fn.__doc__ = public.__doc__ = (
        f"Elementwise {op.summary}, of {sig}.\n\n"
        f"Accepts {op.domain.replace('_', ' ')} dtypes; lazy.\n\n"
        f"{imports}>>> {call}.tolist()\n{result}\n")
    return public


# elementwise records without a generated function, and why
NOT_GENERATED = {
    "where": "hand-written below: a non-bool condition is tested for non-zero",
    "cast": "public as astype / Array.astype (takes a dtype, not an array)",
    "bitcast": "internal: reinterprets bits for random-number and float16 helpers",
}
_FUNCS = {n: _make(op) for n, op in OPS.items()
          if op.kind == "elementwise" and n not in NOT_GENERATED}
globals().update(_FUNCS)
# Aliases NumPy users reach for.
_ALIASES = {"absolute": "abs", "power": "pow", "arcsin": "asin", "arccos": "acos",
            "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh", "arccosh": "acosh",
            "arctanh": "atanh", "true_divide": "divide", "mod": "remainder",
            "conjugate": "conj", "invert": "bitwise_invert"}
globals().update({alias: _FUNCS[name] for alias, name in _ALIASES.items()})
__test__ = {name: fn.__doc__ for name, fn in _FUNCS.items()}  # doctest runs the examples


def where(condition: Any, x1: Any, x2: Any, /) -> Array:
    """Elements of ``x1`` where ``condition`` is true, else of ``x2`` (all broadcast).

    ``x1``/``x2`` may be Python scalars; a non-bool condition is tested for non-zero.

    >>> import braze as bz
    >>> bz.where(bz.asarray([True, False]), 1.0, bz.zeros(2)).tolist()
    [1.0, 0.0]
    """
    cond = as_array(condition, "where")
    if cond.dtype != dt.bool_:
        cond = astype(cond, dt.bool_)
    (a, b), common, _ = promote_operands("where", (x1, x2))
    nodes, _ = operand_nodes("where", (a, b), common)
    shapes = [cond.shape] + [v.shape for v in (a, b) if isinstance(v, Array)]
    from ..graph.ops import broadcast_shapes

    shape = broadcast_shapes(*shapes, op="where")
    return Array(Node(WHERE, (cond._node, *nodes), {}, shape, common))


def clip(x: Array, /, min: Any = None, max: Any = None) -> Array:  # noqa: A002 - standard names
    """Clamp ``x`` to [min, max]; bounds are scalars or arrays broadcast with x (the
    result has the broadcast shape, as in numpy and the conformance suite); the result
    keeps x's dtype; NaN in ``x`` stays NaN.

    >>> import braze as bz
    >>> bz.clip(bz.asarray([-2, 0, 5]), -1, 3).tolist()
    [-1, 0, 3]
    """
    x = as_array(x, "clip")
    if dt.is_complex(x.dtype) or x.dtype == dt.bool_:
        raise TypeError(f"clip: unsupported dtype {dt.name(x.dtype)}; expected a real numeric "
                        "dtype")
    out = x
    for bound, op in ((min, OPS["maximum"]), (max, OPS["minimum"])):
        if bound is None:
            continue
        if isinstance(bound, Array):
            if dt.is_complex(bound.dtype):
                raise TypeError("clip: complex bounds are not supported")
            if dt.is_integer(x.dtype) and bound.dtype != x.dtype:
                # saturate a wider bound to x's range before the cast (no wraparound)
                info = np.iinfo(x.dtype)
                wide = dt.promote(bound.dtype, x.dtype, "clip") if not dt.is_floating(
                    bound.dtype) else bound.dtype
                b = astype(bound, wide)
                b = _ew_op("minimum", _ew_op("maximum", b, int(info.min)
                                                            if dt.is_integer(wide) else
                                                            float(info.min)),
                                int(info.max) if dt.is_integer(wide) else float(info.max))
                bound = astype(b, x.dtype)
            else:
                bound = astype(bound, x.dtype)
        elif isinstance(bound, float) and dt.is_integer(x.dtype):
            raise TypeError(f"clip: float bound {bound} for integer array ({dt.name(x.dtype)})")
        elif isinstance(bound, int) and dt.is_integer(x.dtype):
            info = np.iinfo(x.dtype)  # a bound past the dtype's range clamps nothing
            bound = builtins.min(builtins.max(bound, int(info.min)), int(info.max))
        out = elementwise(op, out, bound)
    return out


# the braze namespace: public records (the threefry words are bz.random's building blocks)
__all__ = [*(n for n in _FUNCS if OPS[n].public), *_ALIASES, "where", "clip"]
