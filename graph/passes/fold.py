"""constant_folding (level 1): elementwise ops on constants become constants.

Two rules for the pattern rewriter (:mod:`braze.graph.passes.rewrite`):

* ``fold``: an elementwise op (``bitcast`` excepted) whose every input is a scalar
  constant, bare or broadcast, is computed now with the op's numpy reference (braze's
  semantics: float16/bfloat16 in float32, rounded once) and replaced by that scalar,
  broadcast to the op's shape;
* ``view of a constant``: ``reshape``/``permute_dims``/``broadcast_to`` of a broadcast
  scalar is that scalar broadcast to the view's shape.

Constants are 0-d values (Python scalars in the graph's structure); an array leaf is a
runtime input and never folds.

>>> import braze as bz
>>> from braze.graph.ir import Graph
>>> g, _ = Graph.from_nodes([(bz.ones(3) * 2 + 1)._node])
>>> out = constant_folding(g)
>>> [n.op for n in out.nodes if n.op != "const"], out.nodes[out.outputs[0]].op
(['broadcast_to', 'broadcast_to', 'broadcast_to'], 'broadcast_to')
>>> out.nodes[out.nodes[out.outputs[0]].inputs[0]].value
3.0
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..ir import GNode, Graph
from ..ops import OPS, reference_eval
from .registry import Pass, register
from .rewrite import Const, Match, Pat, Rule, RuleSet, rewrite

NAME = "constant_folding"


ELEMENTWISE = frozenset(name for name, op in OPS.items()
                        if op.kind == "elementwise" and name != "bitcast")


def _has_inputs(n: GNode) -> bool:
    return bool(n.inputs)


def _fold(m: Match) -> int | None:
    r = m.root
    g = m.graph
    values = []
    for i in r.inputs:
        c = g.nodes[i]
        if c.op == "broadcast_to":
            c = g.nodes[c.inputs[0]]
        values.append(np.asarray(c.value, dtype=c.dtype))
    with np.errstate(all="ignore"):
        v = reference_eval(OPS[r.op], r.attrs, r.dtype, *values)
    return m.broadcast(m.emit("const", shape=(), value=v.reshape(()).item()))


def _view_of_constant(m: Match) -> int | None:
    r = m.root
    src = m.node("c")
    if r.op == "broadcast_to" and src.op == "const":
        return None  # already the normal form
    return m.broadcast(m.scalar("c"))


RULES = RuleSet(NAME, [
    Rule("fold", Pat(ELEMENTWISE, where=_has_inputs, each=Const()), _fold),
    Rule("view of a constant",
         Pat(("reshape", "permute_dims", "broadcast_to"), Const(name="c")), _view_of_constant),
])


def _summary(c: Counter[str]) -> str:
    n, v = c["fold"], c["view of a constant"]
    if not n and not v:
        return "nothing to fold"
    return f"{n} constant{'s' if n != 1 else ''} folded" + (
        f", {v} view{'s' if v != 1 else ''} of constants" if v else "")


PASS = register(Pass(NAME, 1, 10, "elementwise ops on constants computed at compile time",
                     rules=RULES, summary=_summary))


def constant_folding(g: Graph, changes: dict[str, Counter[str]] | None = None) -> Graph:
    """``g`` with constant expressions folded (unused nodes stay: see ``dce``)."""
    return rewrite(g, RULES, changes)
