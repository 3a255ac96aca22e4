"""Reductions and scans."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare
from .shapes import reduced_shape


def sum_dtype(d: np.dtype) -> np.dtype:
    """Accumulator/result dtype of sum and prod: ints widen to 64 bits of their kind."""
    if dt.is_bool(d) or (dt.is_integer(d) and not dt.is_unsigned(d)):
        return dt.int64
    if dt.is_unsigned(d):
        return dt.uint64
    return d


def _reduce(name: str, ref: Callable[..., Any], domain: str, out: Callable[[np.dtype], np.dtype],
            needs_nonempty: bool = False, *, identity: str, combine: str) -> OpDef:
    """A reduction: its accumulator starts at ``identity`` ("0", "1", "lowest" or "highest"
    value of the dtype) and folds elements with ``combine`` (a C operator, or max/min/
    argmax/argmin); every generator reads both."""
    def infer(shapes, dtypes, attrs):
        (shape,), (dtype,) = shapes, dtypes
        axes = attrs["axes"]
        if needs_nonempty and any(shape[a] == 0 for a in axes):
            raise ValueError(f"{name}: cannot reduce over a zero-size axis (shape {shape})")
        return reduced_shape(shape, axes, attrs["keepdims"]), out(dtype)

    return declare(OpDef(name, "reduce", 1, ref, domain, infer=infer, identity=identity,
                         combine=combine))


def _sum_ref(x, *, axes, keepdims):
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=sum_dtype(x.dtype))


def _prod_ref(x, *, axes, keepdims):
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=sum_dtype(x.dtype))


_reduce("sum", _sum_ref, "any", sum_dtype,
        identity="0", combine="+")
_reduce("prod", _prod_ref, "any", sum_dtype,
        identity="1", combine="*")
def mean_ref(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """sum / count (an empty reduction gives NaN, without numpy's warning)."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    total = np.sum(x, axis=axes, keepdims=keepdims)
    return total / np.asarray(n, dtype=total.real.dtype)


_reduce("mean", mean_ref, "numeric", lambda d: d,
        identity="0", combine="+")
_reduce("max", lambda x, *, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True,
        identity="lowest", combine="max")
_reduce("min", lambda x, *, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True,
        identity="highest", combine="min")
_reduce("any", lambda x, *, axes, keepdims: np.any(x, axis=axes, keepdims=keepdims),
        "any", lambda d: dt.bool_,
        identity="0", combine="|")
_reduce("all", lambda x, *, axes, keepdims: np.all(x, axis=axes, keepdims=keepdims),
        "any", lambda d: dt.bool_,
        identity="1", combine="&")


def _arg_ref(f: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x, *, axes, keepdims):
        if len(axes) == x.ndim and x.ndim != 1:  # axis=None: flat index
            r = f(x.reshape(-1), axis=0)
            return np.asarray(r).reshape((1,) * x.ndim if keepdims else ()).astype(np.int64)
        return np.asarray(f(x, axis=axes[0], keepdims=keepdims)).astype(np.int64)

    return ref


_reduce("argmax", _arg_ref(np.argmax), "real", lambda d: dt.DEFAULT_INDEX, needs_nonempty=True,
        identity="lowest", combine="argmax")
_reduce("argmin", _arg_ref(np.argmin), "real", lambda d: dt.DEFAULT_INDEX, needs_nonempty=True,
        identity="highest", combine="argmin")


def _cumsum_infer(shapes, dtypes, attrs):
    (shape,), (dtype,) = shapes, dtypes
    shape = list(shape)
    if attrs["include_initial"]:
        shape[attrs["axis"]] += 1
    return tuple(shape), sum_dtype(dtype)


def _cumsum_ref(x, *, axis, include_initial):
    out = np.cumsum(x, axis=axis, dtype=sum_dtype(x.dtype))
    if include_initial:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        out = np.pad(out, pad)
    return out


declare(OpDef("cumulative_sum", "scan", 1, _cumsum_ref, "any", infer=_cumsum_infer))


def _cumprod_ref(x, *, axis, include_initial):
    out = np.cumprod(x, axis=axis, dtype=sum_dtype(x.dtype))
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        out = np.concatenate([np.ones(shape, out.dtype), out], axis=axis)
    return out


declare(OpDef("cumulative_prod", "scan", 1, _cumprod_ref, "any", infer=_cumsum_infer))
