"""small_reductions (level 2): a reduction over at most ``MAX_TERMS`` (7) elements becomes
an elementwise chain over slices.

``(xy ** 2).sum(axis=1)`` of (N, 2) points is a row kernel with rows of 2 elements: a
loop over N rows, each summing 2 elements, which vectorizes nothing (the random-points
kernel it fused with ran ~10x slower than the same kernel written elementwise). As
``xy[:, 0] ** 2 + xy[:, 1] ** 2`` it is an elementwise kernel over N, SIMD across rows
with strided loads. The chain adds in numpy's order (its pairwise sum is sequential
below 8 elements, a tree from 8 on): the same bits as numpy's reduction.

Only where there are at least ``MIN_ROWS`` results (fewer: the row kernel costs little,
and keeps a softmax over a short axis one kernel). Rewritten: ``sum``, ``prod``, ``max``,
``min``, ``mean`` of float32 / float64 (and ``sum`` / ``prod`` / ``max`` / ``min`` of
int64, ``any`` / ``all`` of bool). Left alone:
float16 / bfloat16 (a reduction computes in float32 and rounds once; a chain would round
per step), integers narrower than 64 bits (their sums widen), argmax / argmin, empty
reductions.

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray(np.ones((1 << 14, 2), np.float32))
>>> g, _ = Graph.from_nodes([(x * x).sum(axis=1)._node])
>>> sorted(n.op for n in small_reductions(g).nodes if n.op != "input")
['add', 'multiply', 'reshape', 'reshape', 'slice', 'slice']
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np

from .. import dtypes as dt
from ..ir import Graph
from .registry import Pass, register
from .rewrite import Match, Pat, Rule, RuleSet, rewrite

NAME = "small_reductions"
MAX_TERMS = 7  # numpy's pairwise summation adds sequentially below 8 elements
MIN_ROWS = 1 << 14  # fewer results: the row kernel's per-row loop costs little

_COMBINE = {"sum": "add", "mean": "add", "prod": "multiply", "max": "maximum",
            "min": "minimum", "any": "logical_or", "all": "logical_and"}
_F = (dt.float32, dt.float64)
_DTYPES = {"sum": (*_F, dt.int64), "prod": (*_F, dt.int64), "max": (*_F, dt.int64),
           "min": (*_F, dt.int64), "mean": _F, "any": (dt.bool_,), "all": (dt.bool_,)}


def _unroll(m: Match) -> int | None:
    r = m.root
    x = m.node("x")
    axes = tuple(r.attrs["axes"])
    if x.dtype not in _DTYPES[r.op] or r.dtype != x.dtype:
        return None
    terms = math.prod(x.shape[a] for a in axes)
    if not 1 <= terms <= MAX_TERMS or not axes or math.prod(r.shape) < MIN_ROWS:
        return None
    kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    acc = None
    for idx in itertools.product(*(range(x.shape[a]) for a in axes)):
        at = dict(zip(axes, idx))
        slices = tuple((at[d], at[d] + 1, 1) if d in at else (0, n, 1)
                       for d, n in enumerate(x.shape))
        part = m.emit("slice", m["x"], attrs={"slices": slices}, shape=kept)
        part = m.emit("reshape", part, attrs={"shape": r.shape})
        acc = part if acc is None else m.emit(_COMBINE[r.op], acc, part)
    assert acc is not None
    if r.op == "mean":
        acc = m.emit("divide", acc, m.constant(np.asarray(terms, r.dtype).item()))
    return acc


RULES = RuleSet(NAME, [
    Rule("reduction of <= 7 elements -> elementwise chain",
         Pat(tuple(_COMBINE), Pat(name="x")), _unroll),
])

PASS = register(Pass(NAME, 2, 110, "reductions of at most 7 elements as elementwise chains",
                     rules=RULES))


def small_reductions(g: Graph, changes: dict[str, Counter[str]] | None = None) -> Graph:
    """``g`` with its small reductions unrolled (unused nodes stay: see ``dce``)."""
    return rewrite(g, RULES, changes)
