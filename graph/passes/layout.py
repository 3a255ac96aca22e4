"""layout (level 3): transposes sink through layout-agnostic ops until they cancel, so a
convolution chain keeps its channels-last layout and reorders remain only at the
chain's boundaries.

A model written channels-first (ONNX's NCHW) calls each channels-last convolution
between two ``permute_dims``: NCHW -> NHWC before, NHWC -> NCHW after, with the
batch norms, activations, residual adds, concatenations and pools in between computed
on transposed views (each kernel writes its result in NCHW, the next convolution copies
it back). Rewrites, bottom-up:

=========================================  =============================================
``permute(permute(x, p), q)``               ``permute(x, p[q])``, or ``x`` when identity
``ew(permute(a, p), b...)``                 ``permute(ew(a, b'...), p)``: every b either
                                            permuted by the same p (then its source), or
                                            small (<= 1/8 of the result: a per-channel
                                            parameter; read through a permuted view), or
                                            0-d
``reduce(permute(a, p), axes)``             ``permute(reduce(a, p[axes]), q)``
``concat(permute(a_i, p)..., axis)``        ``permute(concat(a_i..., p[axis]), p)``
=========================================  =============================================

Exact: elementwise ops, concatenation and reductions (the same elements combined in the
same order; only where the reduced axes sit in memory moves) do not depend on the
layout: results are bit-identical (tested). The pass only acts on graphs that hold
a convolution (elsewhere a transposed NumPy expression keeps the layout its author
chose). It runs before the level-2 ``conv_epilogue`` pass, which then sees the
convolution's result directly under its bias and activation.

>>> import braze as bz
>>> w = bz.ones((4, 3, 3, 3))
>>> def nchw(x):  # conv in NHWC between transposes, then a bias and ReLU in NCHW
...     y = bz.permute_dims(bz.conv2d(bz.permute_dims(x, (0, 2, 3, 1)), w), (0, 3, 1, 2))
...     return bz.maximum(y + bz.ones((4, 1, 1)), 0.0)
>>> r = bz.explain(nchw, bz.ones((1, 3, 6, 6)))
>>> [k.name for k in r.kernels if k.kind != "view"]
['conv_fused']
"""

from __future__ import annotations

import math
from collections import Counter

from ..ir import Graph
from ..ops import OPS
from .registry import Pass, register
from .rewrite import Match, Pat, Rule, RuleSet, rewrite

NAME = "layout"
SMALL = 8  # an operand at most 1/SMALL of the result is read through a permuted view
_CONV = ("conv", "conv_fused")
_REDUCE = tuple(n for n, op in OPS.items() if op.kind == "reduce")
_ELEMENTWISE = tuple(n for n, op in OPS.items() if op.kind == "elementwise")


def _inverse(p: tuple[int, ...]) -> tuple[int, ...]:
    q = [0] * len(p)
    for i, j in enumerate(p):
        q[j] = i
    return tuple(q)


def _permute(m: Match, x: int, p: tuple[int, ...]) -> int:
    """``permute_dims(x, p)`` (x itself for the identity)."""
    if p == tuple(range(len(p))):
        return x
    n = m.graph.nodes[x]
    return m.emit("permute_dims", x, attrs={"axes": p}, shape=tuple(n.shape[i] for i in p),
                  dtype=n.dtype)


def _compose(m: Match) -> int | None:
    inner = m.node("inner")
    p, q = inner.attrs["axes"], m.root.attrs["axes"]
    return _permute(m, inner.inputs[0], tuple(p[i] for i in q))


def _sink_elementwise(m: Match) -> int | None:
    r = m.root
    n = len(r.shape)
    g = m.graph
    p = None
    for i in r.inputs:
        x = g.nodes[i]
        if x.op == "permute_dims" and len(x.shape) == n:
            if p is None:
                p = x.attrs["axes"]
            elif x.attrs["axes"] != p:
                return None
    if p is None:
        return None
    q = _inverse(p)
    ins = []
    for i in r.inputs:
        x = g.nodes[i]
        if x.op == "permute_dims" and x.attrs["axes"] == p:
            ins.append(x.inputs[0])
        elif x.shape == ():
            ins.append(i)
        elif SMALL * math.prod(x.shape) <= math.prod(r.shape):
            if len(x.shape) < n:
                x_shape = (1,) * (n - len(x.shape)) + x.shape
                i = m.emit("reshape", i, attrs={"shape": x_shape}, shape=x_shape, dtype=x.dtype)
            ins.append(_permute(m, i, q))
        else:
            return None  # a large operand in the root's layout: leave the choice as it is
    shape = tuple(r.shape[j] for j in q)
    y = m.emit(r.op, *ins, attrs=r.attrs, shape=shape)
    return _permute(m, y, p)


def _sink_reduce(m: Match) -> int | None:
    r = m.root
    a = m.node("inner")
    p = a.attrs["axes"]
    axes = tuple(sorted(p[i] for i in r.attrs["axes"]))
    src = m.graph.nodes[a.inputs[0]]
    keep = r.attrs.get("keepdims", False)
    shape = tuple(1 if j in axes else s for j, s in enumerate(src.shape)) if keep else \
        tuple(s for j, s in enumerate(src.shape) if j not in axes)
    y = m.emit(r.op, a.inputs[0], attrs={**r.attrs, "axes": axes}, shape=shape)
    if keep:
        return _permute(m, y, p)
    # the kept axes of x's source, in order, and where each of the root's axes sits there
    kept = [j for j in range(len(p)) if j not in axes]
    return _permute(m, y, tuple(kept.index(p[i]) for i in range(len(p))
                                if i not in r.attrs["axes"]))


def _sink_concat(m: Match) -> int | None:
    r = m.root
    g = m.graph
    p = None
    srcs = []
    for i in r.inputs:
        x = g.nodes[i]
        if x.op != "permute_dims" or (p is not None and x.attrs["axes"] != p):
            return None
        p = x.attrs["axes"]
        srcs.append(x.inputs[0])
    if p is None:
        return None
    axis = p[r.attrs["axis"]]
    shape = tuple(r.shape[j] for j in _inverse(p))
    y = m.emit("concat", *srcs, attrs={**r.attrs, "axis": axis}, shape=shape)
    return _permute(m, y, p)


RULES = RuleSet(NAME, [
    Rule("permute of permute -> one permute", Pat("permute_dims", Pat("permute_dims",
                                                                      name="inner")), _compose),
    Rule("elementwise of permuted operands -> permute of elementwise",
         Pat(_ELEMENTWISE), _sink_elementwise),
    Rule("reduction of a permute -> permute of a reduction",
         Pat(_REDUCE, Pat("permute_dims", name="inner"),
             where=lambda n: "axes" in n.attrs and n.attrs["axes"] is not None),
         _sink_reduce),
    Rule("concat of permutes -> permute of a concat", Pat("concat"), _sink_concat),
])


def layout(g: Graph, changes: Counter[str] | None = None) -> Graph:
    """``g`` with transposes sunk (only if it holds a convolution; module docstring)."""
    if not any(n.op in _CONV for n in g.nodes):
        return g
    counts: dict[str, Counter[str]] = {NAME: Counter()}
    out = rewrite(g, RULES, counts)
    if changes is not None:
        changes.update(counts[NAME])
    return out


PASS = register(Pass(NAME, 3, 105, "transposes sunk through layout-agnostic ops (convolution "
                     "chains keep channels-last)", run=layout))
