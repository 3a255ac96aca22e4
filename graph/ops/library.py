"""Library ops: matmul, sorting, searching, gather/scatter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, Shape, declare, library_op, zero_vjp
from .shapes import broadcast_shapes, matmul_shape


def _weight_cotangent(ad, a2, g2, b):
    """``a2.T @ g2``, b's cotangent; for b = W.T (a layer's weight) computed as
    ``(g2.T @ a2).T``, the same sums, so that W's cotangent comes out in W's own layout
    (contiguous: the optimizer's kernel then reads it in order, not strided)."""
    if ad.is_transpose(b):
        return ad.matrix_transpose(ad.matmul(ad.matrix_transpose(g2), a2))
    return ad.matmul(ad.matrix_transpose(a2), g2)


def _matmul_vjp(ad, g, y, a, b):
    if a.ndim > 2 and b.ndim == 2:
        # x (..., k) @ W (k, n), a layer's product: the batch folded into the rows, so
        # W's cotangent is one GEMM over all of them (not a batch of GEMMs summed)
        k, n = b.shape
        a2, g2 = ad.reshape(a, (-1, k)), ad.reshape(g, (-1, n))
        return (ad.reshape(ad.matmul(g2, ad.matrix_transpose(b)), a.shape),
                _weight_cotangent(ad, a2, g2, b))
    # 1-d operands as numpy promotes them: a (k,) -> (1, k), b (k,) -> (k, 1)
    a2 = ad.reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = ad.reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    g2 = ad.reshape(g, ad.matmul(a2, b2).shape)
    ga = ad.sum_to(ad.matmul(g2, ad.matrix_transpose(b2)), a2.shape)
    gb = ad.sum_to(_weight_cotangent(ad, a2, g2, b) if b.ndim == 2 and a.ndim == 2 else
                   ad.matmul(ad.matrix_transpose(a2), g2), b2.shape)
    return ad.reshape(ga, a.shape), ad.reshape(gb, b.shape)


MATMUL = declare(OpDef(
    "matmul", "library", 2, np.matmul, "numeric",
    infer=lambda shapes, dtypes, attrs: (matmul_shape(*shapes), dtypes[0]), vjp=_matmul_vjp,
))


def _scatter_add(ad, g, positions, size, shape):
    """The transpose of reading x's flat ``positions``: g summed into each position."""
    flat = ad.apply("bincount", ad.reshape(positions, (-1,)), ad.reshape(g, (-1,)),
                    length=size)
    return ad.reshape(flat, shape)


def _positions(ad, x):
    return ad.reshape(ad.arange(x.size), x.shape)


def _take_along_vjp(ad, g, x, idx, axis):
    if idx.shape[axis] == 1 and x.ndim == idx.ndim:
        # one index per lane (a cross-entropy's pick): g where the index points, as one
        # elementwise kernel (no scatter)
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        iota = ad.reshape(ad.arange(x.shape[axis]), tuple(shape))
        n = x.shape[axis]
        hit = iota == ad.where(idx < 0, idx + n, idx)
        return ad.where(hit, ad.broadcast_to(g, ad.broadcast_shapes(g.shape, x.shape)), 0.0)
    pos = ad.take_along_axis(_positions(ad, x), idx, axis=axis)
    return _scatter_add(ad, g, pos, x.size, x.shape)


def _same_infer(shapes, dtypes, attrs):
    return shapes[0], dtypes[0]


def _sort_ref(x, *, axis, descending):
    if not descending:
        return np.sort(x, axis=axis, kind="stable")
    return np.flip(np.sort(np.flip(x, axis), axis=axis, kind="stable"), axis)


def argsort_ref(x, *, axis, descending):
    """Stable argsort; descending keeps equal elements in their original order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    a = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return (n - 1 - a).astype(np.int64)


def _sort_vjp(ad, g, y, x, *, axis, descending):
    # y = take_along_axis(x, perm): x's cotangent takes g back through the inverse perm
    perm = ad.argsort(x, axis=axis, descending=descending, stable=True)
    return (ad.take_along_axis(g, ad.argsort(perm, axis=axis), axis=axis),)


library_op("sort", _sort_ref, _same_infer, "real", doc="Stable sort along attrs['axis'].",
           vjp=_sort_vjp)
library_op("argsort", argsort_ref, lambda s, d, a: (s[0], dt.DEFAULT_INDEX), "real",
         doc="Indices of a stable sort along attrs['axis'].", vjp=zero_vjp)


def _searchsorted_ref(x1, x2, *sorter, side):
    return np.searchsorted(x1, x2, side=side, sorter=sorter[0] if sorter else None)


library_op("searchsorted", _searchsorted_ref, lambda s, d, a: (s[1], dt.DEFAULT_INDEX), "real",
         doc="Insertion indices of x2 into sorted 1-d x1 (optional sorter input).",
         vjp=zero_vjp)


def index_key(spec: tuple[Any, ...], arrays: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    """The numpy index described by ``spec`` (slices as (start, stop, step), ``None`` for a
    new axis, an int ``i`` for the i-th index array)."""
    out: list[Any] = []
    for s in spec:
        if s is None:
            out.append(None)
        elif isinstance(s, tuple):
            a, b, c = s
            out.append(slice(a, b if b >= 0 else None, c))
        else:
            out.append(arrays[s])
    return tuple(out)


def _checked(op: str, f: Callable[[], Any]) -> Any:
    """Run ``f``; an out-of-range index array (only detectable once its values exist)
    raises an IndexError naming the op."""
    try:
        return f()
    except IndexError as e:
        raise IndexError(f"{op}: {e} (integer index arrays are bounds-checked when they are "
                         "evaluated)") from None


def _gather_ref(x, *idx, spec):
    return _checked("getitem/take", lambda: x[index_key(spec, idx)])


def index_shape(shape: Shape, idx_shapes: tuple[Shape, ...], spec: tuple[Any, ...]) -> Shape:
    """Result shape of numpy advanced indexing, from shapes only (zero-stride dummies)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, (0,) * len(shape))
    idx = tuple(np.lib.stride_tricks.as_strided(np.zeros(1, np.intp), s, (0,) * len(s))
                for s in idx_shapes)
    return dummy[index_key(spec, idx)].shape


def _gather_infer(shapes, dtypes, attrs):
    return index_shape(shapes[0], tuple(shapes[1:]), attrs["spec"]), dtypes[0]


def _scatter_ref(x, v, *idx, spec):
    out = np.array(x, copy=True)
    _checked("setitem", lambda: out.__setitem__(index_key(spec, idx), v))
    return out


def _gather_vjp(ad, g, y, x, *idx, spec):
    # which flat position of x each element of y read, then g summed into those
    pos = ad.apply("gather", _positions(ad, x), *idx, spec=spec)
    return (_scatter_add(ad, g, pos, x.size, x.shape), *(None,) * len(idx))


def _scatter_vjp(ad, g, y, x, v, *idx, spec):
    # x's cotangent: g where no write landed; v's: g at the places written
    gx = ad.apply("scatter", g, ad.zeros(v.shape, dtype=g.dtype), *idx, spec=spec)
    gv = ad.apply("gather", g, *idx, spec=spec)
    return (gx, ad.broadcast_to(gv, v.shape) if gv.shape != v.shape else gv,
            *(None,) * len(idx))


GATHER = library_op("gather", _gather_ref, _gather_infer, moves_data=True,
                  doc="x[key] with integer index arrays (numpy advanced indexing).",
                  vjp=_gather_vjp)
SCATTER = library_op("scatter", _scatter_ref, lambda s, d, a: (s[0], d[0]), moves_data=True,
                   doc="x with x[key] = v (integer index arrays; last write wins).",
                   vjp=_scatter_vjp)


def _bincount_ref(idx, *weights, length, block=1 << 16):
    # in cache-sized blocks, as numpy's histogram does: the index casts and masks of a
    # block stay in cache; an index outside 0..length-1 counts into a spare last bin.
    # (int64 or float64 sums: reference_eval rounds them once to the inferred dtype)
    flat = idx.reshape(-1)
    w = weights[0].reshape(-1) if weights else None
    exact = w is not None and w.dtype.kind in "biu"  # integer sums: np.add.at, no float64
    out = np.zeros(length + 1, np.int64 if w is None or exact else np.float64)
    for s in range(0, flat.size, block):
        c = flat[s:s + block].astype(np.intp, copy=False)
        c = np.where((c >= 0) & (c < length), c, length)
        if exact:
            np.add.at(out, c, w[s:s + block].astype(np.int64))
        else:
            out += np.bincount(c, None if w is None else w[s:s + block],
                               minlength=length + 1)
    return out[:length]


def _bincount_infer(shapes, dtypes, attrs):
    # counts are int64; sums of weights keep the weights' dtype, as np.histogram's do
    if len(dtypes) == 1 or dt.is_bool(dtypes[1]):
        return (attrs["length"],), dt.int64
    return (attrs["length"],), dtypes[1]


# out[j] = count (or weights' sum) of idx == j for j < length; other indices are ignored
def _bincount_vjp(ad, g, y, idx, *weights, length, block=1 << 16):
    if not weights:
        return (None,)
    # each weight's cotangent is g at its bin (0 for an index outside 0..length-1)
    flat = ad.reshape(idx, (-1,))
    inside = (flat >= 0) & (flat < length)
    padded = ad.concat([g, ad.zeros((1,), dtype=g.dtype)])
    gw = ad.take(padded, ad.where(inside, flat, length))
    return (None, ad.reshape(gw, weights[0].shape))


BINCOUNT = library_op("bincount", _bincount_ref, _bincount_infer,
                      doc="Counts (weights' sums) of each index 0..length-1 of flat idx; "
                          "others ignored.", vjp=_bincount_vjp)


def _roll_ref(x, *, shifts, axes):
    return np.roll(x, shifts, axis=axes)


# x shifted cyclically by shifts[i] (0 < shift < n) along axes[i]: one node however many
# axes (a game of life's np.roll(np.roll(b, i, 0), j, 1) is one copy, not two concats)
library_op("roll", _roll_ref, lambda s, d, a: (s[0], d[0]),
           doc="x rolled by attrs['shifts'] along attrs['axes'].", moves_data=True,
           vjp=lambda ad, g, y, x, *, shifts, axes: (
               ad.roll(g, tuple(-s for s in shifts), axis=tuple(axes)),))


def _take_along_ref(x, idx, *, axis):
    return _checked("take_along_axis", lambda: np.take_along_axis(x, idx, axis=axis))


library_op("take_along_axis", _take_along_ref,
         lambda s, d, a: (broadcast_shapes(s[0][:a["axis"]] + (s[1][a["axis"]],)
                                           + s[0][a["axis"] + 1:], s[1],
                                           op="take_along_axis"), d[0]),
         doc="Elements of x at idx along attrs['axis'].", moves_data=True,
         vjp=lambda ad, g, y, x, idx, *, axis: (_take_along_vjp(ad, g, x, idx, axis), None))
