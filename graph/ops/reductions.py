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


# braze's order for float sums and products, in every tier (the generated kernels:
# backends/cpu/codegen.py): the reduced axes flattened row-major into one index q, cut into
# blocks of SUM_BLOCK; in a block, element q goes to lane q % SUM_LANES (lanes start at the
# identity and fold their elements in order), the lanes then fold by a halving tree (lane l
# with lane l + 32, then l + 16...); the block partials fold in order from the identity.
# Independent of the memory layout, the ISA's vector width and the thread count.
SUM_BLOCK = 1024
SUM_LANES = 64


def blocked_reduce(x: np.ndarray, axes: tuple[int, ...], keepdims: bool, acc: np.dtype,
                   prod: bool = False) -> np.ndarray:
    """sum (or product) of ``x`` over ``axes`` in braze's order (above), accumulated in the
    float dtype ``acc``.

    >>> x = np.float32([1e8] + [1.0] * 31 + [-1e8] + [1.0] * 31)
    >>> float(blocked_reduce(x, (0,), False, np.dtype(np.float32)))  # the tree: lanes 0 + 32
    62.0
    """
    axes = tuple(sorted(a % x.ndim for a in axes))
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    n = 1
    for a in axes:
        n *= x.shape[a]
    flat = np.transpose(x, kept + list(axes)).reshape(out_shape + (n,)).astype(acc, copy=False)
    ident = acc.type(1 if prod else 0)
    nb = max(1, -(-n // SUM_BLOCK))
    if nb * SUM_BLOCK != n:
        pad = np.full(out_shape + (nb * SUM_BLOCK - n,), ident, acc)
        flat = np.concatenate([flat, pad], axis=-1)
    blocks = flat.reshape(out_shape + (nb, SUM_BLOCK // SUM_LANES, SUM_LANES))
    # accumulate: sequential along its axis (never numpy's pairwise summation)
    fold = np.multiply.accumulate if prod else np.add.accumulate
    lanes = fold(blocks, axis=-2)[..., -1, :]
    if not prod:
        lanes = lanes + ident  # the lanes start at +0: an all -0 lane is +0, as in the kernel
    w = SUM_LANES // 2
    while w:
        lanes = lanes[..., :w] * lanes[..., w:2 * w] if prod else \
            lanes[..., :w] + lanes[..., w:2 * w]
        w //= 2
    parts = lanes[..., 0]
    total = fold(parts, axis=-1)[..., -1]
    if not prod:
        total = total + ident
    if keepdims:
        total = total.reshape(tuple(1 if d in axes else x.shape[d] for d in range(x.ndim)))
    return np.asarray(total)


def _sum_ref(x, *, axes, keepdims):
    d = sum_dtype(x.dtype)
    if d.kind == "f":
        return blocked_reduce(x, axes, keepdims, d)
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=d)


def _prod_ref(x, *, axes, keepdims):
    d = sum_dtype(x.dtype)
    if d.kind == "f":
        return blocked_reduce(x, axes, keepdims, d, prod=True)
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=d)


_reduce("sum", _sum_ref, "any", sum_dtype,
        identity="0", combine="+")
_reduce("prod", _prod_ref, "any", sum_dtype,
        identity="1", combine="*")
def mean_ref(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """sum / count (an empty reduction gives NaN, without numpy's warning)."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    total = blocked_reduce(x, axes, keepdims, x.dtype) if x.dtype.kind == "f" else \
        np.sum(x, axis=axes, keepdims=keepdims)
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
