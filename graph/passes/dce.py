"""dce (level 1): dead-code elimination.

Keeps only the nodes the graph's outputs depend on, renumbered in the same
topological order (the other passes leave the nodes they replace behind; this one
drops them). Runs last among the passes. Input nodes the outputs do not read are
dropped too; the runtime input slots (``n_inputs``) stay as they are.

>>> import braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray([1.0, 2.0])
>>> g, _ = Graph.from_nodes([bz.exp(x)._node])
>>> g.outputs = [0]  # only the input is wanted now: exp is dead
>>> [n.op for n in dce(g).nodes]
['input']
"""

from __future__ import annotations

from collections import Counter

from ..ir import GNode, Graph
from .registry import Pass, register

NAME = "dce"


def dce(g: Graph, changes: Counter[str] | None = None) -> Graph:
    """``g`` without the nodes its outputs do not depend on (``g`` itself if none)."""
    live = g.live()
    nodes = g.nodes
    removed = len(live) - sum(live)
    if changes is not None:
        changes["removed"] += removed
    if not removed:
        return g
    out = Graph(n_inputs=g.n_inputs)
    remap: dict[int, int] = {}
    for i, n in enumerate(nodes):
        if live[i]:
            remap[i] = out.add(GNode(n.op, tuple([remap[j] for j in n.inputs]), n.attrs,
                                     n.shape, n.dtype, n.value))
    out.outputs = [remap[i] for i in g.outputs]
    return out


def _summary(c: Counter[str]) -> str:
    n = c["removed"]
    return f"{n} node{'s' if n != 1 else ''} removed" if n else "nothing to remove"


PASS = register(Pass(NAME, 1, 1000, "dead-code elimination", run=dce, summary=_summary))
