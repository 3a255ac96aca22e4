"""conv_epilogue (level 2): a convolution's bias, residual add and activation become its
epilogue (``conv_fused``): one native call writes the final values, instead of the
convolution's result being written, then read again by an elementwise kernel.

Rules, each applied to a ``conv`` / ``conv_fused`` node ``c`` whose only consumer is the
matched node (its value is needed nowhere else), both of the same dtype:

==================================  ============================================
``add(c, b)``, b of shape (C_out,)   ``+ bias`` (also (1, .., 1, C_out), a
or broadcast from it                 ``broadcast_to`` of one); before any residual
                                     or activation
``add(c, r)``, r of c's shape        ``+ residual``; before any activation
``maximum(c, 0)``                    ReLU: clip to (0, inf); clip bounds tighten
``minimum(c, hi)`` after a clip      clip to (lo, min(hi, hi')) (ReLU6 = Clip(0, 6))
``maximum(c, lo)`` (any lo)          clip to (max(lo, lo'), hi)
==================================  ============================================

Each also through a ``reshape`` of ``c`` that keeps its channels last and is ``c``'s only
consumer (a 1x1 convolution standing for a matmul over rows: ``bz.onnx`` runs a product
with a constant weight so), the fused node then reshaped the same way.

Preconditions written out (ONNX Runtime's conv_activation_fusion / conv_add_fusion
conditions): one consumer; not a graph output; epilogue operations only in the order
the kernel applies them (bias, residual, clip); float32 / float64 results only (a
float16 / bfloat16 convolution computes in float32 and rounds once: an epilogue would
move where it rounds). NaN propagates as through ``maximum`` / ``minimum``.
``bz.explain`` counts what fired.

>>> import braze as bz
>>> x, w, b = bz.ones((1, 5, 5, 3)), bz.ones((4, 3, 3, 3)), bz.ones(4)
>>> report = bz.explain(lambda x: bz.maximum(bz.conv2d(x, w) + b, 0.0), x)
>>> [k.name for k in report.kernels]
['conv_fused']
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..ir import GNode, Graph
from .registry import Pass, fused_summary, register

NAME = "conv_epilogue"
_CONV = ("conv", "conv_fused")
_FLOATS = (dt.float32, dt.float64)


def fused_attrs(n: GNode) -> dict[str, Any]:
    """c's attributes as a conv_fused's (a plain conv: no epilogue yet)."""
    if n.op == "conv_fused":
        return dict(n.attrs)
    return {**n.attrs, "bias": False, "residual": False, "act": "none",
            "clip": (-math.inf, math.inf)}


def _const(g: Graph, i: int) -> float | None:
    """The value of a scalar constant (bare or broadcast), else None."""
    n = g.nodes[i]
    if n.op == "broadcast_to":
        n = g.nodes[n.inputs[0]]
    if n.op == "const" and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
        return float(n.value)
    return None


def _bias_source(g: Graph, i: int, cout: int) -> int | None:
    """The node giving one value per output channel that ``i`` broadcasts, or None."""
    for _ in range(2):
        n = g.nodes[i]
        if n.shape and n.shape[-1] == cout and math.prod(n.shape) == cout:
            return i
        if n.op != "broadcast_to":
            break
        i = n.inputs[0]
    return None


def conv_epilogue(g: Graph, changes: Counter[str] | None = None) -> Graph:
    """``g`` with convolution epilogues fused (unused nodes stay: see ``dce``)."""
    uses = g.live_uses()  # (earlier passes leave the nodes they replaced behind)
    out = Graph(n_inputs=g.n_inputs)
    remap: list[int] = []
    out_uses: dict[int, int] = {}  # consumers of the output graph's nodes (as in g)
    for i, n in enumerate(g.nodes):
        ins = tuple(remap[j] for j in n.inputs)
        new = GNode(n.op, ins, n.attrs, n.shape, n.dtype, n.value)
        fused = _fuse(out, n, ins, out_uses, changes)
        remap.append(out.add(fused if fused is not None else new))
        out_uses[remap[-1]] = uses[i]
    out.outputs = [remap[i] for i in g.outputs]
    return out


def _fuse(g: Graph, n: GNode, ins: tuple[int, ...], uses: dict[int, int],
          changes: Counter[str] | None) -> GNode | None:
    if n.op not in ("add", "maximum", "minimum") or len(ins) != 2 or n.dtype not in _FLOATS:
        return None
    for k in (0, 1):
        ci, oi = ins[k], ins[1 - k]
        c = g.nodes[ci]
        view = None  # a reshape of the convolution keeping its channels last (a 1x1
        # convolution standing for a matmul over rows): fused beneath the reshape
        if c.op == "reshape" and uses.get(ci) == 1 and g.nodes[c.inputs[0]].op in _CONV \
                and g.nodes[c.inputs[0]].shape[-1:] == c.shape[-1:]:
            view, ci = c, c.inputs[0]
            c = g.nodes[ci]
        if c.op not in _CONV or uses.get(ci) != 1 or c.dtype != n.dtype or \
                (view or c).shape != n.shape:
            continue
        a = fused_attrs(c)
        extra: list[int] = []
        what = ""
        if n.op == "add":
            other = g.nodes[oi]
            if other.dtype != n.dtype or a["act"] != "none" or a["residual"]:
                continue
            src = _bias_source(g, oi, c.shape[-1])
            if src is not None and not a["bias"]:
                if g.nodes[src].shape != (c.shape[-1],):
                    src = g.add(GNode("reshape", (src,), {"shape": (c.shape[-1],)},
                                      (c.shape[-1],), n.dtype))
                a["bias"], what = True, "bias"
                extra = [src]
            elif other.shape == n.shape:
                a["residual"], what = True, "residual add"
                if view is not None:
                    oi = g.add(GNode("reshape", (oi,), {"shape": c.shape}, c.shape, n.dtype))
                extra = [oi]
            else:
                continue
        else:
            v = _const(g, oi)
            if v is None or np.isnan(v):
                continue
            lo, hi = a["clip"]
            if n.op == "maximum":
                lo = max(lo, v)
            else:
                if a["act"] == "none":
                    continue  # a bare min: no lower bound (a plain clip kernel could take it)
                hi = min(hi, v)
            a["act"], a["clip"] = "clip", (lo, hi)
            what = "relu" if (lo, hi) == (0.0, math.inf) else "clip"
        base_ins = c.inputs if c.op == "conv_fused" else c.inputs[:2]
        if c.op == "conv_fused":
            # keep the existing epilogue inputs in their order: bias, then residual
            kept = list(base_ins[2:])
            if what == "bias":
                kept = extra + kept
            else:
                kept = kept + extra
            new_ins = tuple(base_ins[:2]) + tuple(kept)
        else:
            new_ins = tuple(base_ins) + tuple(extra)
        if changes is not None:
            changes[f"conv + {what}"] += 1
        fused = GNode("conv_fused", new_ins, a, c.shape, c.dtype)
        if view is None:
            return fused
        j = g.add(fused)
        uses[j] = 1
        return GNode("reshape", (j,), dict(view.attrs), view.shape, view.dtype)
    return None


PASS = register(Pass(NAME, 2, 120, "a convolution's bias, residual add and activation as "
                     "its epilogue", run=conv_epilogue,
                     summary=fused_summary("no epilogues fused")))
