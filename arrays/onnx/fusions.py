"""Import-time Conv fusions: a BatchNormalization, Mul or Add by constants after a Conv is
folded into the Conv's weights and bias (ONNX Runtime's conv_bn_fusion, conv_mul_fusion
and conv_add_fusion, applied to the ONNX node list before it becomes braze ops).

Data flow: :class:`~braze.arrays.onnx.OnnxModel` calls :func:`fuse_conv` on its runtime
nodes after constant folding (so a parameter computed from constants, a ``Constant`` or
``ConstantOfShape`` node, counts as a constant) with the constants by name and the graph
outputs; it returns the new node list, writes the new weights and biases into the
constants (fresh names), and says what fired and what was refused.

Preconditions shared by the three rules (ORT's), for a Conv ``c`` and the node ``m`` after it:

* ``c``'s weight W (and bias B, if present) is a constant of a floating dtype;
* ``c``'s output is not a graph output and ``m`` is its only consumer, reading it once;
* the parameters of ``m`` are constants of W's dtype.

Per rule:

=========  ==================================================================
conv_bn    ``m`` is BatchNormalization reading ``c`` as X, in inference mode
           (``training_mode`` 0, ``spatial`` 1 where the opset has it) with one
           output; scale, B, mean and var of shape (C_out,). W' = W * s, B' =
           (B - mean) * s + beta, s = scale / sqrt(var + epsilon)
conv_mul   ``m`` is Mul of ``c`` (either side) by a constant holding one value per
           output channel: shape (C, 1, .., 1) or (1, C, 1, .., 1) of the output's
           rank (ORT's two forms), or a single value. W' = W * k, B' = B * k
conv_add   ``m`` is Add of ``c`` (either side) and such a constant. B' = B + k
=========  ==================================================================

The arithmetic is in float64, cast to W's dtype once. A Conv absorbs a chain (Conv ->
BN -> Mul -> Add) one rule at a time. A rule whose node matched but whose preconditions
did not hold is listed with its reason (``OnnxModel.fusion_refusals``).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from .ops import NodeContext

RULES = ("conv_bn", "conv_mul", "conv_add")
_FLOAT_KINDS = "f"  # float16/32/64 (bfloat16 is a numpy 'V' kind: left unfused)


def _per_channel(k: np.ndarray, cout: int, rank: int) -> np.ndarray | None:
    """``k`` as (C_out,) when it broadcasts as one value per output channel onto a
    (N, C_out, *spatial) result of rank ``rank`` without changing its shape, else None."""
    if k.size == 1 and k.ndim <= rank:
        return np.full(cout, k.reshape(()), k.dtype)
    if k.ndim == rank - 1:
        axis = 0  # (C, 1, .., 1)
    elif k.ndim == rank:
        axis = 1  # (1, C, 1, .., 1)
    else:
        return None
    if k.shape[axis] != cout or any(d != 1 for i, d in enumerate(k.shape) if i != axis):
        return None
    return k.reshape(cout)


def _f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


class _Fuser:
    def __init__(self, nodes: list[NodeContext], consts: dict[str, Any], outputs: set[str]):
        self.nodes: list[NodeContext | None] = list(nodes)
        self.consts, self.outputs = consts, outputs
        self.counts: Counter[str] = Counter()
        self.refusals: list[str] = []
        self.names = set(consts) | outputs | {o for n in nodes for o in n.output_names} | \
            {i for n in nodes for i in n.input_names}
        # value name -> the indices of the nodes reading it (once per read); a fusion
        # removes a node whose output only the Conv read, and renames nothing else
        self.readers: dict[str, list[int]] = {}
        for j, n in enumerate(nodes):
            for i in n.input_names:
                self.readers.setdefault(i, []).append(j)

    def consumers(self, name: str) -> list[int]:
        return [j for j in self.readers.get(name, []) if self.nodes[j] is not None]

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def conv_params(self, c: NodeContext) -> str | tuple[np.ndarray, np.ndarray]:
        """(W, B) of Conv ``c`` (B zeros when absent), or why they do not qualify."""
        w = self.consts.get(c.input_names[1])
        if not isinstance(w, np.ndarray):
            return "the Conv's weight is not a constant"
        if w.dtype.kind not in _FLOAT_KINDS or w.ndim < 3:
            return f"the Conv's weight is {w.dtype} of rank {w.ndim} (float, rank >= 3 only)"
        if c.has(2):
            b = self.consts.get(c.input_names[2])
            if not isinstance(b, np.ndarray):
                return "the Conv's bias is not a constant"
            if b.shape != (w.shape[0],) or b.dtype != w.dtype:
                return f"the Conv's bias is {b.dtype} {b.shape}"
            return w, b
        return w, np.zeros(w.shape[0], w.dtype)

    def rule_for(self, m: NodeContext) -> Callable[..., Any] | None:
        return {"BatchNormalization": self.bn, "Mul": self.mul,
                "Add": self.add}.get(m.op_type) if m.domain in ("", "ai.onnx") else None

    def const_operand(self, m: NodeContext, y: str, w: np.ndarray) -> str | np.ndarray:
        """The other operand of binary ``m`` (``y`` is the Conv's output) as (C_out,)."""
        other = m.input_names[1] if m.input_names[0] == y else m.input_names[0]
        k = self.consts.get(other)
        if not isinstance(k, np.ndarray):
            return f"{m.op_type}'s other input {other!r} is not a constant"
        if k.dtype != w.dtype:
            return f"{m.op_type}'s constant is {k.dtype}, the weight {w.dtype}"
        v = _per_channel(k, w.shape[0], w.ndim)
        if v is None:
            return (f"{m.op_type}'s constant of shape {k.shape} is not one value per output "
                    f"channel ({w.shape[0]}, 1, ..) / (1, {w.shape[0]}, 1, ..)")
        return v

    # each rule: (W, B) -> (W', B') in float64, or why it does not apply
    def bn(self, m: NodeContext, y: str, w: np.ndarray, b: np.ndarray) -> Any:
        if m.input_names[0] != y:
            return "the Conv's output is not the BatchNormalization's X"
        if m.attr("training_mode", 0) or any(m.wants(i) for i in range(1, len(m.output_names))):
            return "BatchNormalization in training mode (more than one output)"
        if not m.attr("spatial", 1):
            return "BatchNormalization with spatial=0"
        params = [p for p in (self.consts.get(i) for i in m.input_names[1:5])
                  if isinstance(p, np.ndarray)]
        if len(params) != 4:
            return "a BatchNormalization parameter is not a constant"
        if any(p.shape != (w.shape[0],) or p.dtype != w.dtype for p in params):
            return (f"BatchNormalization parameters of shapes {[p.shape for p in params]}, "
                    f"not ({w.shape[0]},) {w.dtype}")
        scale, beta, mean, var = (p.astype(np.float64) for p in params)
        s = scale / np.sqrt(var + float(m.attr("epsilon", 1e-5)))
        return _f64(w) * s.reshape((-1,) + (1,) * (w.ndim - 1)), (_f64(b) - mean) * s + beta

    def mul(self, m: NodeContext, y: str, w: np.ndarray, b: np.ndarray) -> Any:
        k = self.const_operand(m, y, w)
        if isinstance(k, str):
            return k
        k = k.astype(np.float64)
        return _f64(w) * k.reshape((-1,) + (1,) * (w.ndim - 1)), _f64(b) * k

    def add(self, m: NodeContext, y: str, w: np.ndarray, b: np.ndarray) -> Any:
        k = self.const_operand(m, y, w)
        if isinstance(k, str):
            return k
        return _f64(w), _f64(b) + k.astype(np.float64)

    def step(self, ci: int) -> bool:
        """Fold the node after Conv ``nodes[ci]`` into it; whether one was folded."""
        c = self.nodes[ci]
        assert c is not None
        y = c.output_names[0]
        users = self.consumers(y)
        if len(users) != 1:
            return False
        m = self.nodes[users[0]]
        assert m is not None
        rule = self.rule_for(m)
        if rule is None:
            return False
        name = {"BatchNormalization": "conv_bn", "Mul": "conv_mul", "Add": "conv_add"}[m.op_type]
        why: Any = "the Conv's output is a graph output" if y in self.outputs else None
        params = self.conv_params(c) if why is None else why
        if isinstance(params, str):
            why = params
        else:
            w, b = params
            got = rule(m, y, w, b)
            if isinstance(got, str):
                why = got
        if why is not None:
            self.refusals.append(f"{name}: {c.label} -> {m.label}: {why}")
            return False
        w2, b2 = (np.ascontiguousarray(a.astype(w.dtype)) for a in got)
        fused = copy.copy(c)
        fused.attrs = dict(c.attrs)
        stem = c.name or y
        wn, bn = self.fresh(f"{stem}/W_{name}"), self.fresh(f"{stem}/B_{name}")
        self.consts[wn], self.consts[bn] = w2, b2
        fused.input_names = [c.input_names[0], wn, bn]
        fused.output_names = [m.output_names[0]]
        self.nodes[ci] = fused
        self.nodes[users[0]] = None
        self.counts[name] += 1
        return True


def fuse_conv(nodes: list[NodeContext], consts: dict[str, Any], outputs: set[str]
              ) -> tuple[list[NodeContext], dict[str, int], list[str]]:
    """``nodes`` with the Conv fusions applied (``consts`` receives the new weights and
    biases); the count per rule (every rule listed) and the refusals with their reasons."""
    f = _Fuser(nodes, consts, outputs)
    for i in range(len(f.nodes)):
        n = f.nodes[i]
        if n is not None and n.op_type == "Conv" and n.domain in ("", "ai.onnx") \
                and len(n.input_names) >= 2:
            while f.step(i):
                pass
    counts = {r: f.counts[r] for r in RULES}
    return [n for n in f.nodes if n is not None], counts, f.refusals
