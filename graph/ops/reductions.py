"""Reductions and scans."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare, zero_vjp
from .shapes import reduced_shape


def sum_dtype(d: np.dtype) -> np.dtype:
    """Accumulator/result dtype of sum and prod: ints widen to 64 bits of their kind."""
    if dt.is_bool(d) or (dt.is_integer(d) and not dt.is_unsigned(d)):
        return dt.int64
    if dt.is_unsigned(d):
        return dt.uint64
    return d


def _reduce(name: str, ref: Callable[..., Any], domain: str, out: Callable[[np.dtype], np.dtype],
            needs_nonempty: bool = False, *, identity: str, combine: str,
            vjp: Callable[..., Any] | None = zero_vjp) -> OpDef:
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
                         combine=combine, vjp=vjp))


# ---- gradient rules (see OpDef.vjp): the cotangent broadcast back over the reduced axes
def _sum_vjp(ad, g, y, x, *, axes, keepdims):
    return (ad.unreduce(g, x.shape, axes, keepdims),)


def _mean_vjp(ad, g, y, x, *, axes, keepdims):
    n = 1
    for a in axes:
        n *= x.shape[a]
    return (ad.unreduce(g, x.shape, axes, keepdims) / float(max(n, 1)),)


def _extremum_vjp(ad, g, y, x, *, axes, keepdims):
    # ties share the cotangent equally (JAX's rule)
    hit = x == ad.unreduce(y, x.shape, axes, keepdims)
    count = ad.sum(hit, axis=axes, keepdims=True).astype(x.dtype)
    return (ad.where(hit, ad.unreduce(g, x.shape, axes, keepdims) / count, 0.0),)


def _prod_vjp(ad, g, y, x, *, axes, keepdims):
    # the product of the other elements, as exclusive cumulative products from both ends
    # along the reduced axes moved last and flattened: exact with zeros in x
    kept = [a for a in range(x.ndim) if a not in axes]
    perm = (*kept, *axes)
    t = ad.permute_dims(x, perm)
    lead = t.shape[:len(kept)]
    n = 1
    for a in axes:
        n *= x.shape[a]
    flat = ad.reshape(t, (*lead, n))
    left = ad.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    right = ad.flip(ad.cumulative_prod(ad.flip(flat, axis=-1), axis=-1,
                                       include_initial=True)[..., :-1], axis=-1)
    others = ad.reshape(left * right, t.shape)
    inv = [0] * x.ndim
    for i, p in enumerate(perm):
        inv[p] = i
    others = ad.permute_dims(others, tuple(inv))
    return (ad.unreduce(g, x.shape, axes, keepdims) * others,)


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
        identity="0", combine="+", vjp=_sum_vjp)
_reduce("prod", _prod_ref, "any", sum_dtype,
        identity="1", combine="*", vjp=_prod_vjp)
def mean_ref(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """sum / count (an empty reduction gives NaN, without numpy's warning)."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    total = blocked_reduce(x, axes, keepdims, x.dtype) if x.dtype.kind == "f" else \
        np.sum(x, axis=axes, keepdims=keepdims)
    return total / np.asarray(n, dtype=total.real.dtype)


_reduce("mean", mean_ref, "numeric", lambda d: d,
        identity="0", combine="+", vjp=_mean_vjp)
_reduce("max", lambda x, *, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True,
        identity="lowest", combine="max", vjp=_extremum_vjp)
_reduce("min", lambda x, *, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True,
        identity="highest", combine="min", vjp=_extremum_vjp)
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


def _cumsum_vjp(ad, g, y, x, *, axis, include_initial):
    # the reversed cumulative sum of the cotangent
    if include_initial:
        g = ad.apply("slice", g, slices=tuple((1, g.shape[a], 1) if a == axis else
                                              (0, g.shape[a], 1) for a in range(g.ndim)))
    return (ad.flip(ad.cumulative_sum(ad.flip(g, axis=axis), axis=axis), axis=axis),)


declare(OpDef("cumulative_sum", "scan", 1, _cumsum_ref, "any", infer=_cumsum_infer,
              vjp=_cumsum_vjp))


def _cumprod_ref(x, *, axis, include_initial):
    out = np.cumprod(x, axis=axis, dtype=sum_dtype(x.dtype))
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        out = np.concatenate([np.ones(shape, out.dtype), out], axis=axis)
    return out


def _cumprod_vjp(ad, g, y, x, *, axis, include_initial):
    # d y_j / d x_i = prod_{k <= j, k != i} x_k, so the cotangent of x_i is
    # sum_{j >= i} g_j y_j / x_i: a reversed cumulative sum. Where x_i == 0 that quotient
    # is undefined: along axes of up to 64 elements the explicit products serve there;
    # longer ones give inf/NaN at zeros of x (the recurrence needs a general scan op)
    if include_initial:
        sl = tuple((1, g.shape[a], 1) if a == axis else (0, g.shape[a], 1)
                   for a in range(g.ndim))
        g = ad.apply("slice", g, slices=sl)
        y = ad.apply("slice", y, slices=sl)
    rev = ad.flip(ad.cumulative_sum(ad.flip(g * y, axis=axis), axis=axis), axis=axis)
    if x.shape[axis] > 64:
        return (rev / x,)
    safe = ad.where(x == 0.0, 1.0, x)
    return (ad.where(x == 0.0, _cumprod_zero_grad(ad, g, x, axis), rev / safe),)


def _cumprod_zero_grad(ad, g, x, axis):
    # where x_i == 0: sum_{j>=i} g_j prod_{k<=j, k!=i} x_k, by x_i replaced with 1
    n = x.shape[axis]
    out = []
    for i in range(n):
        sl = tuple((i, i + 1, 1) if a == axis else (0, x.shape[a], 1) for a in range(x.ndim))
        xi1 = ad.apply("slice_update", x, ad.ones_like(ad.apply("slice", x, slices=sl)),
                       slices=sl)
        p = ad.cumulative_prod(xi1, axis=axis)
        tail = tuple((i, x.shape[a], 1) if a == axis else (0, x.shape[a], 1)
                     for a in range(x.ndim))
        out.append(ad.sum(ad.apply("slice", g * p, slices=tail), axis=axis, keepdims=True))
    return ad.concat(out, axis=axis) if out else ad.zeros_like(x)


declare(OpDef("cumulative_prod", "scan", 1, _cumprod_ref, "any", infer=_cumsum_infer,
              vjp=_cumprod_vjp))
