"""ONNX reductions, arg-reductions, TopK, CumSum and normalizations along axes (see
:mod:`.ops`). Reductions take their axes as an attribute up to opset 17 (ReduceSum: 12)
and as an optional input from then on; an empty reduction gives the op's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import arrays as _arrays
from ..array import Array
from .ops import NodeContext, _axis, _cast, op

bz: Any = _arrays  # typed loosely: mypy cannot see the star-imported names


def _sum(x: Array, axis: tuple[int, ...], keepdims: bool) -> Array:
    return bz.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _sumsq(x: Array, axis: tuple[int, ...], keepdims: bool) -> Array:
    return _sum(x * x, axis, keepdims)


# name -> (reduce(x, axis, keepdims), value of an empty reduction)
_REDUCE: dict[str, tuple[Callable[[Array, tuple[int, ...], bool], Array], float]] = {
    "ReduceSum": (_sum, 0.0),
    "ReduceMean": (lambda x, a, k: bz.mean(x, axis=a, keepdims=k), float("nan")),
    "ReduceMax": (lambda x, a, k: bz.max(x, axis=a, keepdims=k), -np.inf),
    "ReduceMin": (lambda x, a, k: bz.min(x, axis=a, keepdims=k), np.inf),
    "ReduceProd": (lambda x, a, k: bz.prod(x, axis=a, keepdims=k, dtype=x.dtype), 1.0),
    "ReduceL1": (lambda x, a, k: _sum(bz.abs(x), a, k), 0.0),
    "ReduceL2": (lambda x, a, k: bz.sqrt(_sumsq(x, a, k)), 0.0),
    "ReduceSumSquare": (_sumsq, 0.0),
    "ReduceLogSum": (lambda x, a, k: bz.log(_sum(x, a, k)), -np.inf),
    "ReduceLogSumExp": (lambda x, a, k: bz.logsumexp(x, axis=a, keepdims=k), -np.inf),
}


def _reduce(name: str) -> Callable[..., Array]:
    fn, empty = _REDUCE[name]
    axes_input_from = 13 if name == "ReduceSum" else 18

    def convert(n: NodeContext, x: Array, axes: Any = None) -> Array:
        keep = bool(n.attr("keepdims", 1))
        if n.opset < axes_input_from:
            ax = n.attr("axes")
        else:
            ax = n.ints(1)
        if not ax:  # None or empty
            if n.attr("noop_with_empty_axes", 0):
                return x
            ax = list(range(x.ndim))
        axis = tuple(sorted({_axis(int(a), x.ndim) for a in ax}))
        if any(x.shape[a] == 0 for a in axis):
            shape = tuple(1 if i in axis else d for i, d in enumerate(x.shape) if keep or
                          i not in axis)
            value: Any = empty
            if x.dtype == np.bool_:
                value = empty > 0
            elif bz.isdtype(x.dtype, "integral") and not np.isfinite(empty):
                info = np.iinfo(x.dtype)
                value = info.min if empty < 0 else info.max
            return bz.full(shape, value, dtype=x.dtype)
        return _cast(fn(x, axis, keep), x.dtype)
    return convert


for _name in _REDUCE:
    op(_name)(_reduce(_name))


def _arg(descending: bool) -> Callable[..., Array]:
    def convert(n: NodeContext, x: Array) -> Array:
        axis = _axis(n.attr("axis", 0), x.ndim)
        keep = bool(n.attr("keepdims", 1))
        fn = bz.argmax if descending else bz.argmin
        if n.attr("select_last_index", 0):
            i = fn(bz.flip(x, axis=axis), axis=axis, keepdims=keep)
            return _cast(x.shape[axis] - 1 - i, np.int64)
        return _cast(fn(x, axis=axis, keepdims=keep), np.int64)
    return convert


op("ArgMax")(_arg(True))
op("ArgMin")(_arg(False))


@op("TopK")
def _topk(n: NodeContext, x: Array, k: Any = None) -> tuple[Array, Array]:
    kk = n.attr("k") if n.opset < 10 else int(n.const(1).reshape(-1)[0])
    axis = _axis(n.attr("axis", -1), x.ndim)
    largest = n.attr("largest", 1)
    v, i = bz.top_k(x, kk, axis=axis, mode="largest" if largest else "smallest")
    return v, _cast(i, np.int64)


@op("CumSum")
def _cumsum(n: NodeContext, x: Array, axis: Any) -> Array:
    a = _axis(int(n.const(1).reshape(-1)[0]), x.ndim)
    rev = n.attr("reverse", 0)
    y = bz.flip(x, axis=a) if rev else x
    if n.attr("exclusive", 0):
        y = bz.cumulative_sum(y, axis=a, dtype=x.dtype, include_initial=True)
        key = [slice(None)] * x.ndim
        key[a] = slice(0, x.shape[a])
        y = y[tuple(key)]
    else:
        y = bz.cumulative_sum(y, axis=a, dtype=x.dtype)
    return bz.flip(y, axis=a) if rev else y


@op("LpNormalization")
def _lp_normalization(n: NodeContext, x: Array) -> Array:
    axis = _axis(n.attr("axis", -1), x.ndim)
    p = n.attr("p", 2)
    norm = bz.sum(bz.abs(x), axis=axis, keepdims=True) if p == 1 else \
        bz.sqrt(bz.sum(x * x, axis=axis, keepdims=True))
    return _cast(bz.where(norm == 0, 0, x / bz.where(norm == 0, 1, norm)), x.dtype)


@op("MeanVarianceNormalization")
def _mvn(n: NodeContext, x: Array) -> Array:
    axes = tuple(_axis(a, x.ndim) for a in n.attr("axes", [0, 2, 3]))
    m = bz.mean(x, axis=axes, keepdims=True)
    v = bz.mean((x - m) * (x - m), axis=axes, keepdims=True)
    return (x - m) / (bz.sqrt(v) + 1e-9)


@op("LayerNormalization")
def _layer_norm(n: NodeContext, x: Array, scale: Array, bias: Array | None = None) -> Any:
    axis = _axis(n.attr("axis", -1), x.ndim)
    eps = n.attr("epsilon", 1e-5)
    axes = tuple(range(axis, x.ndim))
    xf = _cast(x, np.float32) if x.dtype in (np.float16, bz.bfloat16) else x
    m = bz.mean(xf, axis=axes, keepdims=True)
    d = xf - m
    inv = 1 / bz.sqrt(bz.mean(d * d, axis=axes, keepdims=True) + eps)
    y = _cast(d * inv, x.dtype) * scale
    if bias is not None:
        y = y + bias
    outs: list[Any] = [y]
    if n.wants(1) or n.wants(2):
        outs += [m, inv]
    return outs


@op("RMSNormalization")
def _rms_norm(n: NodeContext, x: Array, scale: Array) -> Array:
    axis = _axis(n.attr("axis", -1), x.ndim)
    eps = n.attr("epsilon", 1e-5)
    axes = tuple(range(axis, x.ndim))
    xf = _cast(x, np.float32) if x.dtype in (np.float16, bz.bfloat16) else x
    inv = 1 / bz.sqrt(bz.mean(xf * xf, axis=axes, keepdims=True) + eps)
    return _cast(xf * inv, x.dtype) * scale
