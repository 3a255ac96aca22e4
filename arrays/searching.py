"""Sorting, searching and set functions.

``sort``/``argsort``/``searchsorted`` are lazy library ops. ``nonzero`` and the
``unique_*`` functions have *data-dependent* output shapes: they evaluate their
input (only it, not unrelated pending work) and return arrays holding the result.
``count_nonzero`` stays lazy (it is a sum).

>>> import braze as bz
>>> x = bz.asarray([3, 1, 2, 1])
>>> bz.sort(x).tolist(), bz.argsort(x, descending=True).tolist()
([1, 1, 2, 3], [0, 2, 1, 3])
"""

from __future__ import annotations

import builtins
import contextlib
import operator
from typing import Any, NamedTuple

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import OPS, check_domain
from . import indexing as _ix
from .array import Array, _ew_op, as_array, astype, promote_operands
from .creation import _constant
from .reductions import normalize_axes


def _sort_op(name: str, x: Any, axis: int, descending: bool, stable: bool) -> Array:
    x = as_array(x, name)
    op = OPS[name]
    if dt.is_complex(x.dtype):
        raise TypeError(f"{name}: unsupported dtype {dt.name(x.dtype)}; expected a real dtype")
    if x.ndim == 0:
        raise ValueError(f"{name}: needs at least 1 dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, name)
    attrs = {"axis": ax, "descending": bool(descending)}
    shape, dtype = op.infer((x.shape,), (x.dtype,), attrs)  # type: ignore[misc]
    return Array(Node(op, (x._node,), attrs, shape, dtype))


def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True
         ) -> Array:
    """Sorted copy of ``x`` along ``axis`` (always stable; NaNs sort last ascending).

    >>> import braze as bz
    >>> bz.sort(bz.asarray([[3, 1], [0, 2]]), axis=0, descending=True).tolist()
    [[3, 2], [0, 1]]
    """
    return _sort_op("sort", x, axis, descending, stable)


def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True
            ) -> Array:
    """Indices that sort ``x`` along ``axis`` (stable: ties keep their order, also when
    ``descending``); int64.

    >>> import braze as bz
    >>> bz.argsort(bz.asarray([2.0, 1.0, 2.0])).tolist()
    [1, 0, 2]
    """
    return _sort_op("argsort", x, axis, descending, stable)


def top_k(x: Array, k: int, /, *, axis: int = -1, mode: str = "largest"
          ) -> tuple[Array, Array]:
    """The ``k`` largest (``mode="largest"``) or smallest elements along ``axis`` and
    their indices (int64), best first, ties in index order (from the Array API's next
    revision). Lazy: one stable argsort, a slice, a gather.

    >>> import braze as bz
    >>> v, i = bz.top_k(bz.asarray([3.0, 1.0, 4.0, 1.0, 5.0]), 2)
    >>> v.tolist(), i.tolist()
    ([5.0, 4.0], [4, 2])
    """
    x = as_array(x, "top_k")
    if mode not in ("largest", "smallest"):
        raise ValueError(f"top_k: mode must be 'largest' or 'smallest', got {mode!r}")
    if x.ndim == 0:
        raise ValueError("top_k: needs at least 1 dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, "top_k")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"top_k: k must be an int, got {k!r}") from None
    if not 0 <= k <= x.shape[ax]:
        raise ValueError(f"top_k: k must be in [0, {x.shape[ax]}] (axis {ax} of shape "
                         f"{x.shape}), got {k}")
    order = argsort(x, axis=ax, descending=mode == "largest")
    idx = order[(slice(None),) * ax + (slice(0, k),)]
    return _ix.take_along_axis(x, idx, axis=ax), idx


def searchsorted(x1: Array, x2: Array | int | float, /, *, side: str = "left",
                 sorter: Array | None = None) -> Array:
    """Indices where ``x2``'s elements would be inserted in sorted 1-d ``x1``; int64.

    >>> import braze as bz
    >>> bz.searchsorted(bz.asarray([1, 3, 5]), bz.asarray([3, 6]), side="right").tolist()
    [2, 3]
    """
    a = as_array(x1, "searchsorted")
    if isinstance(x2, (bool, int, float)):
        from .creation import asarray

        x2 = asarray(x2, dtype=dt.promote(a.dtype, dt.scalar_dtype(x2, a.dtype, "searchsorted"),
                                          "searchsorted"))
    b = as_array(x2, "searchsorted")
    if a.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-d, got shape {a.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    op = OPS["searchsorted"]
    common = dt.promote(a.dtype, b.dtype, "searchsorted")
    check_domain(op, common)
    nodes = [astype(a, common)._node, astype(b, common)._node]
    if sorter is not None:
        s = as_array(sorter, "searchsorted")
        if not dt.is_integer(s.dtype) or s.shape != a.shape:
            raise ValueError(f"searchsorted: sorter must be integer with x1's shape {a.shape}, "
                             f"got {dt.name(s.dtype)} {s.shape}")
        nodes.append(s._node)
    attrs = {"side": side}
    shape, dtype = op.infer((a.shape, b.shape), (common, common), attrs)  # type: ignore[misc]
    return Array(Node(op, tuple(nodes), attrs, shape, dtype))


def data_dependent(x: Array, op: str) -> np.ndarray:
    """The value of ``x``, which ``op`` needs now because its result shape depends on it."""
    try:
        return x._value()
    except TypeError as e:
        if "traced by bz.compile" not in str(e):
            raise
        raise TypeError(f"{op}: the result shape depends on the values of an array of shape "
                        f"{x.shape} ({dt.name(x.dtype)}), which are not known while "
                        "bz.compile traces; do this step outside the compiled function") \
            from None


def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Indices of the non-zero elements, one int64 array per axis.

    Data-dependent shape: evaluates ``x`` (only ``x``) at the call.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.nonzero(bz.asarray([[0, 1], [2, 0]]))]
    [[0, 1], [1, 0]]
    """
    x = as_array(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero: 0-d arrays are not supported; use at least 1 dimension")
    data = data_dependent(x, "nonzero")
    return tuple(_constant(i, np.int64) for i in np.nonzero(data))


def count_nonzero(x: Array, /, *, axis: int | tuple[int, ...] | None = None,
                  keepdims: bool = False) -> Array:
    """Number of non-zero elements over ``axis``; int64; lazy.

    >>> import braze as bz
    >>> bz.count_nonzero(bz.asarray([[0, 1], [2, 3]]), axis=1).tolist()
    [1, 2]
    """
    from .reductions import sum as _sum

    x = as_array(x, "count_nonzero")
    nz = astype(x, dt.bool_)
    return astype(_sum(nz, axis=axis, keepdims=keepdims), dt.DEFAULT_INDEX)


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


def _unique(x: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = as_array(x, name)
    data = data_dependent(x, name)
    if dt.is_low_precision(data.dtype):
        up = data.astype(np.float32)
    else:
        up = data
    r = np.unique_all(up)  # NaNs are distinct, as the standard asks
    values = r.values.astype(data.dtype)
    inverse = r.inverse_indices.reshape(x.shape)
    return values, r.indices.astype(np.int64), inverse.astype(np.int64), \
        r.counts.astype(np.int64)


def unique_all(x: Array, /) -> UniqueAllResult:
    """Unique values with first-occurrence indices, inverse indices (x's shape) and counts.

    Data-dependent shape: evaluates ``x`` at the call. NaNs count as distinct.

    >>> import braze as bz
    >>> r = bz.unique_all(bz.asarray([2, 1, 2]))
    >>> r.values.tolist(), r.indices.tolist(), r.inverse_indices.tolist(), r.counts.tolist()
    ([1, 2], [1, 0], [1, 0, 1], [1, 2])
    """
    return UniqueAllResult(*map(_constant, _unique(x, "unique_all")))


def unique_counts(x: Array, /) -> UniqueCountsResult:
    """Unique values and how often each occurs (evaluates ``x``).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unique_counts(bz.asarray([3, 3, 1]))]
    [[1, 3], [1, 2]]
    """
    v, _, _, c = _unique(x, "unique_counts")
    return UniqueCountsResult(*map(_constant, (v, c)))


def unique_inverse(x: Array, /) -> UniqueInverseResult:
    """Unique values and, for each element of ``x``, the index of its value (evaluates ``x``).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unique_inverse(bz.asarray([3, 3, 1]))]
    [[1, 3], [1, 1, 0]]
    """
    v, _, inv, _ = _unique(x, "unique_inverse")
    return UniqueInverseResult(*map(_constant, (v, inv)))


def unique_values(x: Array, /) -> Array:
    """Sorted unique values of ``x`` (evaluates ``x``; NaNs are distinct).

    >>> import braze as bz
    >>> bz.unique_values(bz.asarray([3, 3, 1])).tolist()
    [1, 3]
    """
    v, _, _, _ = _unique(x, "unique_values")
    return _constant(v)



def isin(x1: Array, x2: Array, /, *, invert: bool = False) -> Array:
    """Whether each element of ``x1`` occurs in ``x2`` (lazy: a broadcast compare and an
    ``any`` over ``x2``'s elements).

    >>> import braze as bz
    >>> bz.isin(bz.asarray([1, 2, 3]), bz.asarray([3, 1])).tolist()
    [True, False, True]
    """
    from .reductions import any as _any

    (a, b), _, _ = promote_operands("isin", (x1, x2))
    a = as_array(a, "isin") if not isinstance(a, Array) else a
    if not isinstance(b, Array):
        from .creation import asarray

        b = asarray(b)
    flat = b.reshape((1,) * a.ndim + (b.size,))
    hit = _any(_ew_op("equal", a.reshape(a.shape + (1,)), flat), axis=-1)
    return _ew_op("logical_not", hit) if invert else hit


# ---------------------------------------------------------------- NumPy's names
def argwhere(a: Array, /) -> Array:
    """Indices of the non-zero elements, one row per element (int64, shape (N, ndim)).

    Data-dependent shape: evaluates ``a`` (only it) at the call.

    >>> import braze as bz
    >>> bz.argwhere(bz.asarray([[0, 1], [2, 0]])).tolist()
    [[0, 1], [1, 0]]
    """
    x = as_array(a, "argwhere")
    return _constant(np.argwhere(data_dependent(x, "argwhere")), np.int64)


def flatnonzero(a: Array, /) -> Array:
    """Flat indices of the non-zero elements (int64; evaluates ``a``).

    >>> import braze as bz
    >>> bz.flatnonzero(bz.asarray([[0, 1], [2, 0]])).tolist()
    [1, 2]
    """
    x = as_array(a, "flatnonzero")
    return _constant(np.flatnonzero(data_dependent(x, "flatnonzero")), np.int64)


def extract(condition: Any, arr: Array, /) -> Array:
    """The elements of flattened ``arr`` where flattened ``condition`` is non-zero
    (evaluates ``condition`` only).

    >>> import braze as bz
    >>> x = bz.arange(6)
    >>> bz.extract(x % 2 == 0, x * 10).tolist()
    [0, 20, 40]
    """
    from .creation import asarray

    c, x = asarray(condition), as_array(arr, "extract")
    idx = np.flatnonzero(data_dependent(c, "extract"))
    if idx.size and idx[-1] >= x.size:
        raise ValueError(f"extract: condition of shape {c.shape} is true past arr's {x.size} "
                         "elements")
    return _ix.take(x.reshape((-1,)), _constant(idx, np.int64))


def partition(a: Array, kth: Any, axis: int | None = -1) -> Array:
    """An array whose ``kth`` elements are where a sort puts them, smaller ones before,
    larger after: braze returns the full sort (a valid partition; lazy).

    >>> import braze as bz
    >>> bz.partition(bz.asarray([3, 1, 2]), 1).tolist()
    [1, 2, 3]
    """
    x, axis = _partition_operand(a, kth, axis, "partition")
    return sort(x, axis=axis)


def argpartition(a: Array, kth: Any, axis: int | None = -1) -> Array:
    """Indices that :func:`partition` ``a`` (a stable argsort; lazy).

    >>> import braze as bz
    >>> bz.argpartition(bz.asarray([3, 1, 2]), 1).tolist()
    [1, 2, 0]
    """
    x, axis = _partition_operand(a, kth, axis, "argpartition")
    return argsort(x, axis=axis)


def _partition_operand(a: Array, kth: Any, axis: int | None, op: str) -> tuple[Array, int]:
    """The array (flattened for axis=None) and axis a partition sorts, ``kth`` checked."""
    x = as_array(a, op)
    if axis is None:
        x, axis = x.reshape((-1,)), 0
    _check_kth(x, kth, axis, op)
    return x, axis


def _check_kth(x: Array, kth: Any, axis: int, name: str) -> None:
    if x.ndim == 0:
        raise ValueError(f"{name}: needs at least 1 dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, name)
    n = x.shape[ax]
    for k in np.atleast_1d(np.asarray(kth)).tolist():
        if not -n <= operator.index(k) < n:
            raise ValueError(f"{name}: kth {k} is out of bounds for axis {ax} of size {n}")


def lexsort(keys: Any, axis: int = -1) -> Array:
    """Indices sorting by several keys, the **last** key primary (lazy: one stable
    argsort per key).

    >>> import braze as bz
    >>> bz.lexsort([bz.asarray([1, 2, 0]), bz.asarray([0, 0, 1])]).tolist()
    [0, 1, 2]
    """
    from .creation import asarray

    ks = [asarray(k) for k in keys] if isinstance(keys, (list, tuple)) else \
        list(_ix_rows(asarray(keys)))
    if not ks:
        raise ValueError("lexsort: need at least one key")
    if len({k.shape for k in ks}) != 1:
        raise ValueError(f"lexsort: keys must share one shape, got {[k.shape for k in ks]}")
    order = argsort(ks[0], axis=axis)
    for k in ks[1:]:
        step = argsort(_ix.take_along_axis(k, order, axis=axis), axis=axis)
        order = _ix.take_along_axis(order, step, axis=axis)
    return order


def _ix_rows(x: Array) -> tuple[Array, ...]:
    if x.ndim < 2:
        raise ValueError(f"lexsort: an array of keys needs at least 2 dimensions, got "
                         f"{x.shape}")
    return tuple(x[i] for i in range(x.shape[0]))


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True
           ) -> Any:
    """NumPy's ``unique`` (sorted unique values; optional first indices, inverse,
    counts). Data-dependent shape: evaluates ``ar``.

    >>> import braze as bz
    >>> bz.unique(bz.asarray([3, 1, 3])).tolist()
    [1, 3]
    """
    from .creation import asarray

    data = data_dependent(asarray(ar), "unique")
    up = data.astype(np.float32) if dt.is_low_precision(data.dtype) else data
    kw: dict[str, Any] = {"return_index": return_index, "return_inverse": return_inverse,
                          "return_counts": return_counts, "axis": axis, "equal_nan": equal_nan}
    r = np.unique(up, **kw)
    if not isinstance(r, tuple):
        return _constant(r, data.dtype)
    return (_constant(r[0], data.dtype),) + tuple(_constant(v, np.int64) for v in r[1:])


def _set_op(name: str, *arrays: Any, **kw: Any) -> Array:
    from .creation import asarray

    xs = [asarray(a) for a in arrays]
    datas = [data_dependent(x, name) for x in xs]
    r = getattr(np, name)(*datas, **kw)
    if isinstance(r, tuple):
        return tuple(_constant(v) for v in r)  # type: ignore[return-value]
    return _constant(r)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False
                ) -> Any:
    """Sorted values in both arrays (evaluates them).

    >>> import braze as bz
    >>> bz.intersect1d(bz.asarray([1, 3, 4]), bz.asarray([3, 1, 2])).tolist()
    [1, 3]
    """
    return _set_op("intersect1d", ar1, ar2, assume_unique=assume_unique,
                   return_indices=return_indices)


def union1d(ar1: Any, ar2: Any) -> Array:
    """Sorted values in either array (evaluates them).

    >>> import braze as bz
    >>> bz.union1d(bz.asarray([1, 3]), bz.asarray([2, 1])).tolist()
    [1, 2, 3]
    """
    return _set_op("union1d", ar1, ar2)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Array:
    """Sorted unique values of ``ar1`` not in ``ar2`` (evaluates them).

    >>> import braze as bz
    >>> bz.setdiff1d(bz.asarray([1, 2, 3]), bz.asarray([2])).tolist()
    [1, 3]
    """
    return _set_op("setdiff1d", ar1, ar2, assume_unique=assume_unique)


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Array:
    """Sorted values in exactly one of the arrays (evaluates them).

    >>> import braze as bz
    >>> bz.setxor1d(bz.asarray([1, 2]), bz.asarray([2, 3])).tolist()
    [1, 3]
    """
    return _set_op("setxor1d", ar1, ar2, assume_unique=assume_unique)


def digitize(x: Any, bins: Any, right: bool = False) -> Array:
    """Index of the bin of each ``x`` (``bins`` monotonic, 1-d; ``right``: bins include
    their right edge). Lazy: a searchsorted (``bins`` is read to learn its direction).

    >>> import braze as bz
    >>> bz.digitize(bz.asarray([0.5, 1.0, 2.5]), bz.asarray([1.0, 2.0])).tolist()
    [0, 1, 2]
    """
    from .creation import asarray
    from .manipulation import flip

    xa, b = asarray(x), asarray(bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got shape {b.shape}")
    if dt.is_complex(xa.dtype) or dt.is_complex(b.dtype):
        raise TypeError("digitize: complex input is not supported")
    bv = data_dependent(b, "digitize")
    d = np.diff(bv)
    inc = bool((d >= 0).all())
    if not inc and not (d <= 0).all():
        raise ValueError("digitize: bins must be monotonically increasing or decreasing")
    flat = xa.reshape((-1,))
    if inc:
        r = searchsorted(b, flat, side="left" if right else "right")
    else:
        r = b.shape[0] - searchsorted(flip(b), flat, side="left" if right else "right")
    return r.reshape(xa.shape)


def _count_into(idx: Array, length: int, weights: Array | None) -> Array:
    """``out[j] = sum(weights[idx == j])`` (counts without weights) over flat ``idx``,
    indices outside ``0..length-1`` ignored: the ``bincount`` library op (one pass,
    O(len(idx)); the bin indices before it are a fused kernel)."""
    ins = (idx._node,) if weights is None else (idx._node, weights._node)
    op = OPS["bincount"]
    shape, dtype = op.infer(tuple(n.shape for n in ins), tuple(n.dtype for n in ins),
                            {"length": length})  # type: ignore[misc]
    return Array(Node(op, ins, {"length": length}, shape, dtype))


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Array:
    """Occurrences of each value ``0..max(x)`` in non-negative 1-d integer ``x``
    (``weights``: their sums). The length depends on the data: evaluates ``x``; the
    weighted sums stay lazy.

    >>> import braze as bz
    >>> bz.bincount(bz.asarray([0, 1, 1, 3])).tolist()
    [1, 2, 0, 1]
    """
    from .creation import asarray

    xa = asarray(x)
    if xa.ndim != 1 or not (dt.is_integer(xa.dtype) or xa.dtype == dt.bool_):
        raise TypeError(f"bincount: x must be a 1-d integer array, got {dt.name(xa.dtype)} of "
                        f"shape {xa.shape}")
    data = data_dependent(xa, "bincount").astype(np.int64)
    if (data < 0).any():
        raise ValueError("bincount: x must be non-negative")
    if operator.index(minlength) < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    length = builtins.max(int(data.max()) + 1 if data.size else 0, minlength)
    if weights is None:
        return _constant(np.bincount(data, minlength=length), np.int64)
    w = asarray(weights)
    if w.shape != xa.shape:
        raise ValueError(f"bincount: weights of shape {w.shape} do not match x {xa.shape}")
    if not dt.is_floating(w.dtype):
        w = astype(w, dt.float64)
    return _count_into(_constant(data), length, w)


def _static_range(name: str, range_: Any) -> tuple[Any, Any]:
    """``range=(lo, hi)`` checked, as the ends of its even bins (an empty range widened by
    a half on each side, as numpy does). The values keep their types: numpy's linspace
    computes the edges in their precision (float32 ends: float32 edges)."""
    lo, hi = range_
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ValueError(f"{name}: range must be finite with min <= max, got {range_!r}")
    return (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)


def _edges(name: str, x: Array, bins: Any, range_: Any) -> Array:
    """Bin edges as numpy computes them: given, or ``bins + 1`` evenly spaced from the
    range (static) or from the data's min and max (lazy)."""
    from .creation import arange, asarray

    ed = dt.float64 if not dt.is_floating(x.dtype) else x.dtype
    if not isinstance(bins, (int, np.integer)):
        e = asarray(bins)
        if e.ndim != 1 or e.shape[0] < 2:
            raise ValueError(f"{name}: bins must be an int or a 1-d array of >= 2 edges, got "
                             f"shape {e.shape}")
        return e
    n = operator.index(bins)
    if n < 1:
        raise ValueError(f"{name}: bins must be a positive int, got {n}")
    if range_ is not None:
        lo, hi = _static_range(name, range_)
        # numpy's bin type: the ends' and the data's (float32 ends over float16 data:
        # float32 edges), an integer one made floating
        # numpy's bin type: the data's and the ends' (Python numbers are weak), made
        # floating; braze's promotion where numpy has none (bfloat16)
        strong = [np.asarray(v).dtype for v in (lo, hi) if type(v) not in (int, float)]
        try:
            bt = np.result_type(x.dtype, *strong)
        except TypeError:  # (numpy's DTypePromotionError)
            bt = x.dtype
            for d in strong:
                bt = dt.promote(bt, d, name)
        bt = bt if dt.is_floating(bt) else dt.float64
        return _constant(np.linspace(lo, hi, n + 1, dtype=bt))
    from .elementwise import where
    from .reductions import max as _max
    from .reductions import min as _min

    if x.size == 0:
        return _constant(np.linspace(0.0, 1.0, n + 1, dtype=ed))
    lo_, hi_ = astype(_min(x), ed), astype(_max(x), ed)
    same = _ew_op("equal", lo_, hi_)
    lo_, hi_ = where(same, lo_ - 0.5, lo_), where(same, hi_ + 0.5, hi_)
    step = (hi_ - lo_) / float(n)
    grid = arange(n + 1, dtype=ed) * step + lo_
    from .manipulation import concat

    return concat([grid[:n], hi_.reshape((1,))])


def _bin_index(x: Array, e: Array) -> Array:
    """Bin of each value of flat ``x`` against edges ``e``: -1 / len(e) - 1 outside (NaN
    too); the last bin includes its right edge."""
    from .elementwise import where

    n = e.shape[0] - 1
    common = dt.promote(x.dtype, e.dtype, "histogram")
    xc, ec = astype(x, common), astype(e, common)
    idx = searchsorted(ec, xc, side="right") - 1
    idx = where(_ew_op("equal", xc, ec[n]), n - 1, idx)
    return where(_ew_op("isnan", xc), n, idx) if dt.is_floating(common) else idx


def _uniform_bin_index(x: Array, lo: Any, hi: Any, n: int, edge_dtype: np.dtype) -> Array:
    """:func:`_bin_index` for the ``n`` even bins of a static range (edges
    ``np.linspace(lo, hi, n + 1, dtype=edge_dtype)``) as numpy computes it for even bins,
    in one elementwise kernel instead of a binary search: values outside ``[lo, hi]`` (each
    end compared in numpy's type for it: a Python number in the data's precision, a numpy
    scalar in the promoted one; NaN) get -1; inside, the bin from ``(x - lo) * n / (hi -
    lo)``, corrected by one against the exact edges as ``linspace`` computes them (``k *
    step + lo`` in the ends' type, the last edge ``hi``). Raises TypeError where numpy
    has no promotion for the dtypes (bfloat16): the caller searches the edges then."""
    from .elementwise import where

    lin = np.result_type(lo, hi, 1.0)  # linspace's computing type (NEP 50: Python numbers weak)
    # (an integer comparison widened to 64 bits: exact, as numpy's is for any Python int)
    cmp_lo, cmp_hi = (d if d.kind in "fc" else np.result_type(d, np.int64)
                      for d in (np.result_type(x.dtype, lo), np.result_type(x.dtype, hi)))
    common = dt.promote(x.dtype, edge_dtype, "histogram")
    xc = astype(x, common)
    xf = xc if dt.is_floating(common) and common.itemsize >= 4 else astype(x, dt.float64)
    start, step = lin.type(lo), (lin.type(hi) - lin.type(lo)) / lin.type(n)

    def edge(k: Array) -> Array:  # linspace's k-th edge, in the comparison dtype
        e = where(_ew_op("equal", k, n), _constant(np.asarray(hi).astype(lin)), _ew_op(
            "add", _ew_op("multiply", astype(k, lin), _constant(step)), _constant(start)))
        return astype(astype(e, edge_dtype), common)

    # the first guess may be off by one either way (rounding): the edges correct it
    f = _ew_op("floor", _ew_op("multiply", _ew_op("subtract", xf, float(lo)),
                               n / (float(hi) - float(lo))))
    k = astype(_ew_op("minimum", _ew_op("maximum", where(_ew_op("isnan", f), 0.0, f), 0.0),
                      float(n - 1)), dt.int32)
    k = _ew_op("subtract", k, astype(_ew_op("less", xc, edge(k)), dt.int32))
    up = _ew_op("logical_and", _ew_op("greater_equal", xc, edge(_ew_op("add", k, 1))),
                _ew_op("not_equal", k, n - 1))
    k = _ew_op("add", k, astype(up, dt.int32))
    inside = _ew_op("logical_and",
                    _ew_op("greater_equal", astype(x, cmp_lo), _constant(np.asarray(lo, cmp_lo))),
                    _ew_op("less_equal", astype(x, cmp_hi), _constant(np.asarray(hi, cmp_hi))))
    return where(inside, k, -1)


def histogram(a: Any, bins: Any = 10, range: Any = None, density: bool = False,  # noqa: A002
              weights: Any = None) -> tuple[Array, Array]:
    """Counts (or ``weights`` sums; a density with ``density``) of ``a`` in ``bins``
    (a count: evenly spaced over ``range`` or the data's min..max; or edges), and the
    edges. Lazy: the bin count is fixed, so nothing is evaluated.

    >>> import braze as bz
    >>> h, e = bz.histogram(bz.asarray([1.0, 2.0, 2.0, 4.0]), bins=3)
    >>> h.tolist(), e.tolist()
    ([1, 2, 1], [1.0, 2.0, 3.0, 4.0])
    """
    from .creation import asarray

    x = asarray(a).reshape((-1,))
    if dt.is_complex(x.dtype):
        raise TypeError("histogram: complex input is not supported")
    e = _edges("histogram", x, bins, range)
    w = None if weights is None else asarray(weights).reshape((-1,))
    if w is not None and w.shape != x.shape:
        raise ValueError(f"histogram: weights of shape {w.shape} do not match a {x.shape}")
    idx = None
    if isinstance(bins, (int, np.integer)) and range is not None and \
            not dt.is_complex(e.dtype):
        with contextlib.suppress(TypeError):  # (no numpy promotion: bfloat16)
            idx = _uniform_bin_index(x, *_static_range("histogram", range), int(bins), e.dtype)
    if idx is None:
        idx = _bin_index(x, e)
    h = _count_into(idx, e.shape[0] - 1, w)
    if density:
        from .manipulation import diff
        from .reductions import sum as _sum

        hf = astype(h, dt.float64 if not dt.is_floating(h.dtype) else h.dtype)
        h = hf / astype(diff(e), hf.dtype) / _sum(hf)
    return h, e


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None,  # noqa: A002
                        weights: Any = None) -> Array:
    """The edges :func:`histogram` would use.

    >>> import braze as bz
    >>> bz.histogram_bin_edges(bz.asarray([0.0, 1.0]), bins=2).tolist()
    [0.0, 0.5, 1.0]
    """
    from .creation import asarray

    return _edges("histogram_bin_edges", asarray(a).reshape((-1,)), bins, range)


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, density: bool = False,  # noqa: A002
                weights: Any = None) -> tuple[Array, list[Array]]:
    """Multidimensional histogram of ``sample`` (N points of D coordinates, shape (N, D)).

    >>> import braze as bz
    >>> h, _ = bz.histogramdd(bz.asarray([[0.0, 0.0], [1.0, 1.0]]), bins=2)
    >>> h.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    from .creation import asarray
    from .elementwise import where

    s = asarray(sample)
    if s.ndim == 1:
        s = s.reshape((-1, 1))
    if s.ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape {s.shape}")
    d = s.shape[1]
    bl = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    rl = list(range) if range is not None else [None] * d
    if len(bl) != d or len(rl) != d:
        raise ValueError(f"histogramdd: bins and range need one entry per dimension ({d})")
    edges = [_edges("histogramdd", s[:, i], bl[i], rl[i]) for i in builtins.range(d)]
    sizes = [e.shape[0] - 1 for e in edges]
    flat: Any = 0
    ok: Any = True
    for i in builtins.range(d):
        idx = _bin_index(s[:, i], edges[i])
        inside = _ew_op("logical_and", idx >= 0, idx < sizes[i])
        ok = inside if ok is True else _ew_op("logical_and", ok, inside)
        flat = flat * sizes[i] + idx
    total = 1
    for n in sizes:
        total *= n
    flat = where(ok, flat, -1) if s.shape[0] else _constant(np.zeros(0, np.int64))
    w = None if weights is None else asarray(weights).reshape((-1,))
    h = _count_into(flat, total, w).reshape(tuple(sizes))
    if w is None:
        h = astype(h, dt.float64)  # numpy's histogramdd counts are floats
    if density:
        from .manipulation import diff
        from .reductions import sum as _sum

        hf = astype(h, dt.float64 if not dt.is_floating(h.dtype) else h.dtype)
        h = hf / _sum(hf)
        for i, e in enumerate(edges):
            h = h / astype(diff(e), hf.dtype).reshape(tuple(-1 if j == i else 1
                                                           for j in builtins.range(d)))
    return h, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, density: bool = False,  # noqa: A002
                weights: Any = None) -> tuple[Array, Array, Array]:
    """2-d histogram of the points ``(x, y)``: counts and the x and y edges.

    >>> import braze as bz
    >>> h, ex, ey = bz.histogram2d(bz.asarray([0.0, 1.0]), bz.asarray([0.0, 1.0]), bins=2)
    >>> h.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    from .creation import asarray
    from .manipulation import stack

    xa, ya = asarray(x), asarray(y)
    if xa.ndim != 1 or xa.shape != ya.shape:
        raise ValueError(f"histogram2d: x and y must be 1-d of one length, got {xa.shape} and "
                         f"{ya.shape}")
    common = dt.promote(xa.dtype, ya.dtype, "histogram2d")
    h, (ex, ey) = histogramdd(stack([astype(xa, common), astype(ya, common)], axis=1), bins,
                              range, density, weights)
    return h, ex, ey


__all__ = ["isin", "sort", "argsort", "top_k", "searchsorted", "nonzero", "count_nonzero",
           "unique_all", "unique_counts", "unique_inverse", "unique_values", "argwhere",
           "flatnonzero", "extract", "partition", "argpartition", "lexsort", "unique",
           "intersect1d", "union1d", "setdiff1d", "setxor1d", "digitize", "bincount",
           "histogram", "histogram_bin_edges", "histogramdd", "histogram2d"]
