"""simplify: the level-1 passes in one call (kept for the code and tests that call it).

``simplify(g)`` is constant_folding -> identities -> cse (one rewrite sweep) -> dce,
as the compiler runs them at level 1 with nothing disabled; the passes themselves
live in :mod:`~braze.graph.passes.fold`, :mod:`~braze.graph.passes.identities`,
:mod:`~braze.graph.passes.cse` and :mod:`~braze.graph.passes.dce`. ``prune`` is
:func:`~braze.graph.passes.dce.dce`.

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> g, _ = Graph.from_nodes([(bz.ones(3) * 2 + 1)._node])
>>> out = simplify(g)
>>> [n.op for n in out.nodes], out.nodes[0].value
(['const', 'broadcast_to'], 3.0)
"""

from __future__ import annotations

from collections import Counter

from ..ir import Graph
from .registry import make_config

_BASIC = make_config(opt_level=1)

__all__ = ["simplify"]


def simplify(g: Graph, log: list[tuple[str, Counter[str]]] | None = None) -> Graph:
    """Fold, rewrite, deduplicate and prune ``g`` (returns a new graph)."""
    return _BASIC.run(g, log)
