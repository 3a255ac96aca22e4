"""cse (level 1): common-subexpression elimination.

Two nodes with the same op, attributes, shape, dtype and (already merged) inputs compute
the same value: the later one is replaced by the earlier. Constants are compared by
their exact value (``0.0`` and ``-0.0`` are different constants); inputs are never
merged (each is its own runtime buffer). It runs as the pattern rewriter's
deduplication (:func:`~braze.graph.passes.rewrite.rewrite` with ``dedup``), inside the
same sweep as the rule passes around it; unused nodes stay until ``dce``.

>>> import braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray([1.0, 2.0])
>>> g, _ = Graph.from_nodes([(bz.sin(x) + bz.sin(x))._node])
>>> out = cse(g)
>>> [n.op for n in out.nodes], out.nodes[-1].inputs
(['input', 'sin', 'add'], (1, 1))
"""

from __future__ import annotations

from collections import Counter

from ..ir import Graph
from .registry import Pass, register
from .rewrite import rewrite

NAME = "cse"


def _summary(c: Counter[str]) -> str:
    n = c["merged"]
    return f"{n} node{'s' if n != 1 else ''} merged" if n else "nothing to merge"


PASS = register(Pass(NAME, 1, 30, "common-subexpression elimination", dedup=True,
                     summary=_summary))


def cse(g: Graph, changes: dict[str, Counter[str]] | None = None) -> Graph:
    """``g`` with identical nodes merged (unused nodes stay: see ``dce``)."""
    return rewrite(g, None, changes, dedup=True, dedup_pass=NAME)
