"""simplify: constant folding, algebraic identities, CSE and dead-code elimination.

One forward sweep in topological order rebuilds the graph: each node's inputs are
first replaced by their simplified versions, then the node is folded (all inputs
constant, possibly broadcast), rewritten by an exact identity, or deduplicated
against an identical earlier node. Unreachable nodes are dropped at the end.

Identities are applied only where they are exact in IEEE arithmetic: ``x * 1``,
``x / 1``, ``x - 0``, ``x + (-0.0)`` (``x + 0.0`` is *not* exact: -0.0 + 0.0 = +0.0;
for integers ``x + 0`` is), ``--x``, ``x ** 1``, a widening cast followed by the
narrowing back. ``exp(log(x))`` is not exact in floating point and is left alone.

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> g, _ = Graph.from_nodes([(bz.ones(3) * 2 + 1)._node])
>>> out = simplify(g)
>>> [n.op for n in out.nodes], out.nodes[0].value
(['const', 'broadcast_to'], 3.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from ..ir import GNode, Graph
from ..ops import OPS, reference_eval


def simplify(g: Graph) -> Graph:
    """Fold, rewrite, deduplicate and prune ``g`` (returns a new graph)."""
    out = Graph(n_inputs=g.n_inputs)
    remap: list[int] = []
    seen: dict[tuple[Any, ...], int] = {}

    def emit(node: GNode) -> int:
        sig = node.signature()
        j = seen.get(sig)
        if j is None:
            j = seen[sig] = out.add(node)
        return j

    for n in g.nodes:
        node = GNode(n.op, tuple(remap[i] for i in n.inputs), n.attrs, n.shape, n.dtype, n.value)
        remap.append(_rewrite(out, node, emit))
    out.outputs = [remap[i] for i in g.outputs]
    return prune(out)


def _rewrite(g: Graph, n: GNode, emit: Any) -> int:
    op = OPS.get(n.op)
    if op is None:  # input / const
        return emit(n)
    ins = [g.nodes[i] for i in n.inputs]
    if op.kind == "elementwise" and n.op != "bitcast":
        folded = _fold(g, n, ins, emit)
        if folded is not None:
            return folded
        same = _identity(g, n, ins)
        if same is not None:
            return same
    if op.kind == "view" and n.op in ("reshape", "permute_dims", "broadcast_to") and ins:
        src = ins[0]
        base = _broadcast_const(g, n.inputs[0])
        if base is not None:  # a view of a broadcast scalar is a broadcast scalar
            return _broadcast_of(base, n, emit)
        if src.shape == n.shape and n.op != "permute_dims":
            return n.inputs[0]
        if src.op == n.op == "reshape" or (src.op == "broadcast_to" and n.op == "broadcast_to"):
            return emit(GNode(n.op, src.inputs, n.attrs, n.shape, n.dtype))
    return emit(n)


def _broadcast_const(g: Graph, i: int) -> int | None:
    """Index of the 0-d const that node i broadcasts (or is), else None."""
    n = g.nodes[i]
    if n.op == "const":
        return i
    if n.op == "broadcast_to" and g.nodes[n.inputs[0]].op == "const":
        return n.inputs[0]
    return None


def _broadcast_of(const: int, n: GNode, emit: Any) -> int:
    if n.shape == ():
        return const
    return emit(GNode("broadcast_to", (const,), {"shape": n.shape}, n.shape, n.dtype))


def _fold(g: Graph, n: GNode, ins: list[GNode], emit: Any) -> int | None:
    consts = [_broadcast_const(g, i) for i in n.inputs]
    if not ins or any(c is None for c in consts):
        return None
    values = [np.asarray(g.nodes[c].value, dtype=g.nodes[c].dtype) for c in consts]  # type: ignore[index]
    with np.errstate(all="ignore"):
        v = reference_eval(OPS[n.op], n.attrs, n.dtype, *values)
    const = emit(GNode("const", (), {}, (), n.dtype, v.reshape(()).item()))
    return _broadcast_of(const, n, emit)


def _is_const(g: Graph, i: int, value: float, sign_matters: bool = False) -> bool:
    c = _broadcast_const(g, i)
    if c is None:
        return False
    v = g.nodes[c].value
    if isinstance(v, complex) or v != value:
        return False
    return not sign_matters or np.signbit(v) == np.signbit(value)


def _identity(g: Graph, n: GNode, ins: list[GNode]) -> int | None:
    """An input that ``n`` provably equals (same shape and dtype), else None."""
    def keep(i: int) -> int | None:
        x = g.nodes[i]
        return i if x.shape == n.shape and x.dtype == n.dtype else None

    a = n.inputs
    if n.op == "multiply":
        if _is_const(g, a[1], 1):
            return keep(a[0])
        if _is_const(g, a[0], 1):
            return keep(a[1])
    elif n.op in ("divide", "pow") and _is_const(g, a[1], 1):
        return keep(a[0])
    elif n.op == "subtract" and _is_const(g, a[1], 0):
        return keep(a[0])
    elif n.op == "add":
        exact_zero = not dt.is_floating(n.dtype)  # floats: only -0.0 is an exact identity
        for x, y in ((a[0], a[1]), (a[1], a[0])):
            if _is_const(g, y, -0.0 if not exact_zero else 0, sign_matters=not exact_zero):
                return keep(x)
    elif n.op in ("negative", "conj", "bitwise_invert", "logical_not") and ins[0].op == n.op:
        if n.op != "logical_not" or g.nodes[ins[0].inputs[0]].dtype == dt.bool_:
            return keep(ins[0].inputs[0])
    elif n.op == "positive":
        return keep(a[0])
    elif n.op == "cast" and ins[0].op == "cast":
        inner = g.nodes[ins[0].inputs[0]]
        if inner.dtype == n.dtype and np.can_cast(inner.dtype, ins[0].dtype, "safe"):
            return keep(ins[0].inputs[0])
    return None


def prune(g: Graph) -> Graph:
    """Dead-code elimination: keep only nodes the outputs depend on (renumbered)."""
    live = [False] * len(g.nodes)
    stack = list(g.outputs)
    while stack:
        i = stack.pop()
        if not live[i]:
            live[i] = True
            stack.extend(g.nodes[i].inputs)
    if all(live):
        return g
    out = Graph(n_inputs=g.n_inputs)
    remap: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        if live[i]:
            remap[i] = out.add(GNode(n.op, tuple(remap[j] for j in n.inputs), n.attrs, n.shape,
                                     n.dtype, n.value))
    out.outputs = [remap[i] for i in g.outputs]
    return out
