"""conv_concat (level 2): convolutions concatenated along their channels become one
``conv_concat`` node, which a backend runs as the convolutions each writing its channel
slice of the one result: the concatenation's copy (a read and a write of the whole
result, right after the convolutions wrote it) disappears. SqueezeNet's fire modules
(a 1x1 and a 3x3 expand side by side), Inception's branches and GoogLeNet's are such
concatenations; TensorRT and OpenVINO remove them the same way (concat in place).

Rule, on ``concat(c_1, ..., c_k, axis=-1)`` (the channels of channels-last results):

* k >= 2, each ``c_i`` a ``conv`` or ``conv_fused`` whose only consumer is the
  concatenation (not a graph output, not read twice by it);
* the result float32 or float64, every ``c_i`` of its dtype (as ``conv_epilogue``).

Branches keep their inputs, attributes and epilogues; the convolutions' batch and spatial
dims agree (the concatenation required it). ``conv_epilogue`` runs first, so each
branch's bias and activation are already in it. ``bz.explain`` counts what fired.

>>> import braze as bz
>>> x = bz.ones((1, 5, 5, 3))
>>> w1, w3 = bz.ones((4, 1, 1, 3)), bz.ones((4, 3, 3, 3))
>>> f = lambda x: bz.concatenate([bz.conv2d(x, w1), bz.conv2d(x, w3, padding=1)], axis=-1)
>>> [k.name for k in bz.explain(f, x).kernels]
['conv_concat']
"""

from __future__ import annotations

from collections import Counter

from .. import dtypes as dt
from ..ir import GNode, Graph
from .conv_epilogue import fused_attrs
from .registry import Pass, fused_summary, rebuild, register

NAME = "conv_concat"
_CONV = ("conv", "conv_fused")
_FLOATS = (dt.float32, dt.float64)


def _branches(g: Graph, n: GNode, uses: list[int]) -> list[GNode] | None:
    """The convolutions ``n`` concatenates along their channels, or None (no rule)."""
    if n.op != "concat" or len(n.inputs) < 2 or n.dtype not in _FLOATS or len(n.shape) < 3 \
            or n.attrs.get("axis", 0) % len(n.shape) != len(n.shape) - 1:
        return None
    convs = [g.nodes[i] for i in n.inputs]
    if any(c.op not in _CONV or c.dtype != n.dtype for c in convs) or \
            any(uses[i] != 1 for i in n.inputs):
        return None
    return convs


def conv_concat(g: Graph, changes: Counter[str] | None = None) -> Graph:
    """``g`` with concatenations of convolutions as ``conv_concat`` nodes (the replaced
    nodes stay: see ``dce``)."""
    uses = g.live_uses()

    def replace(n: GNode, remap: list[int]) -> GNode | None:
        convs = _branches(g, n, uses)
        if convs is None:
            return None
        ins: list[int] = []
        branches = []
        for c in convs:
            own = c.inputs if c.op == "conv_fused" else c.inputs[:2]
            ins += [remap[j] for j in own]
            branches.append((len(own), tuple(sorted(fused_attrs(c).items()))))
        if changes is not None:
            changes[f"concat of {len(convs)} convolutions"] += 1
        return GNode("conv_concat", tuple(ins), {"branches": tuple(branches)}, n.shape,
                     n.dtype)

    return rebuild(g, replace)


PASS = register(Pass(NAME, 2, 125, "convolutions concatenated along their channels write "
                     "their slices of one result", run=conv_concat,
                     summary=fused_summary("no concatenations of convolutions")))
