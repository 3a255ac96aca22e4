"""identities (level 1): exact algebraic identities, one rewrite rule each.

Only rewrites that give the *same bits* as the original op for every input, NaN,
infinities and signed zeros included (checked against numpy in tests/test_passes.py):

* ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1`` -> ``x``;
* ``x - 0`` -> ``x`` (floats: only ``+0.0``; ``-0.0 - -0.0`` is ``+0.0``);
* ``x + (-0.0)`` -> ``x`` for floats, ``x + 0`` for integers and bools (``x + 0.0`` is
  *not* exact: ``-0.0 + 0.0`` is ``+0.0``);
* ``--x``, ``conj(conj(x))``, ``~~x``, ``not not x`` (bool x), ``+x`` -> ``x``;
* a widening cast followed by the narrowing back -> ``x``;
* a reshape or broadcast to the shape it already has -> its input; two reshapes (two
  broadcasts) in a row -> one;
* constant powers (real floats and integers; complex ``pow`` is left alone):
  ``x ** 2`` -> ``x * x`` (numpy's ``pow(x, 2)`` is correctly rounded: bit-identical in
  float32 and float64, and float16/bfloat16 compute in float32), ``x ** 0`` -> ``1``
  (numpy gives 1 for every x, NaN and 0 included), ``x ** -1`` -> ``reciprocal(x)``
  (floats only: integer ``x ** -1`` is 0 or +-1).

Deliberately *not* rewritten: ``exp(log(x))`` (not exact in floating point);
``x ** 0.5`` -> ``sqrt(x)``: numpy's own ``pow`` answers differently at ``-0.0`` and
``-inf`` depending on whether the exponent is a scalar (its fast path: ``sqrt``,
``-0.0`` and NaN) or an array (C ``pow``: ``+0.0`` and ``+inf``, what the Array API
standard and the C/CUDA backends give), so no single rewrite is exact against both;
``x ** 3`` -> ``x * x * x``: two roundings, up to 2 ulp from numpy's float32 ``pow``
(1 ulp in float64) on random inputs.

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray(np.array([1.0, -0.0], np.float32))
>>> g, _ = Graph.from_nodes([((x * 1.0) ** 2)._node])
>>> out = identities(g)
>>> [out.nodes[i].op for i in out.outputs], out.nodes[out.nodes[out.outputs[0]].inputs[0]].op
(['multiply'], 'input')
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .. import dtypes as dt
from ..ir import GNode, Graph
from .registry import Pass, register
from .rewrite import Const, Match, Pat, Rule, RuleSet, negative_zero, positive_zero, rewrite

NAME = "identities"
X = Pat(name="x")


def _float(n: GNode) -> bool:
    return dt.is_floating(n.dtype) and not dt.is_complex(n.dtype)


def _int_or_bool(n: GNode) -> bool:
    return not dt.is_floating(n.dtype)


def _real(n: GNode) -> bool:
    return not dt.is_complex(n.dtype)


def _keep(m: Match) -> int | None:
    return m.keep("x")


_INVOLUTIONS = {"negative": "--x -> x", "conj": "conj(conj(x)) -> x",
                "bitwise_invert": "~~x -> x", "logical_not": "not not x -> x"}


def _involution(op: str) -> Rule:
    inner = Pat(name="x", where=lambda n: n.dtype == dt.bool_) if op == "logical_not" else X
    return Rule(_INVOLUTIONS[op], Pat(op, Pat(op, inner)), _keep)


def _cast_round_trip(m: Match) -> int | None:
    x, inner = m.node("x"), m.node("inner")
    if x.dtype == m.root.dtype and np.can_cast(x.dtype, inner.dtype, "safe"):
        return m.keep("x")
    return None


def _same_shape(m: Match) -> int | None:
    return m["x"] if m.node("x").shape == m.root.shape else None


def _view_of_view(m: Match) -> int | None:
    r = m.root
    return m.emit(r.op, m["x"], attrs=r.attrs)


def _square(m: Match) -> int | None:
    x = m.keep("x")
    return None if x is None else m.emit("multiply", x, x)


def _one(m: Match) -> int | None:
    return m.constant(1)


def _reciprocal(m: Match) -> int | None:
    x = m.keep("x")
    return None if x is None else m.emit("reciprocal", x)


RULES = RuleSet(NAME, [
    Rule("x*1 -> x", Pat("multiply", X, Const(1), commutative=True), _keep),
    Rule("x/1 -> x", Pat("divide", X, Const(1)), _keep),
    Rule("x**1 -> x", Pat("pow", X, Const(1)), _keep),
    Rule("x-0 -> x", Pat("subtract", X, Const(test=positive_zero)), _keep),
    Rule("x+(-0.0) -> x", Pat("add", Pat(name="x", where=_float), Const(test=negative_zero),
                              commutative=True), _keep),
    Rule("x+0 -> x", Pat("add", Pat(name="x", where=_int_or_bool), Const(0),
                         commutative=True), _keep),
    *(_involution(op) for op in _INVOLUTIONS),
    Rule("+x -> x", Pat("positive", X), _keep),
    Rule("widening cast and back -> x", Pat("cast", Pat("cast", X, name="inner")),
         _cast_round_trip),
    Rule("view to its own shape -> x", Pat(("reshape", "broadcast_to"), X), _same_shape),
    Rule("reshape of reshape -> reshape", Pat("reshape", Pat("reshape", X)), _view_of_view),
    Rule("broadcast of broadcast -> broadcast", Pat("broadcast_to", Pat("broadcast_to", X)),
         _view_of_view),
    # constant powers (see the module docstring for what is exact and what is not)
    Rule("x**2 -> x*x", Pat("pow", Pat(name="x", where=_real), Const(2)), _square),
    Rule("x**0 -> 1", Pat("pow", Pat(name="x", where=_real), Const(0)), _one),
    Rule("x**-1 -> 1/x", Pat("pow", Pat(name="x", where=_float), Const(-1)), _reciprocal),
])

PASS = register(Pass(NAME, 1, 20, "exact algebraic identities (x*1, --x, x**2 -> x*x, ...)",
                     rules=RULES))


def identities(g: Graph, changes: dict[str, Counter[str]] | None = None) -> Graph:
    """``g`` with the exact identities applied (unused nodes stay: see ``dce``)."""
    return rewrite(g, RULES, changes)
