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

import operator
from typing import Any, NamedTuple

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import OPS, check_domain
from . import indexing as _ix
from .array import Array, as_array, astype, elementwise, promote_operands
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
    return tuple(Array(constant(i.astype(np.int64))) for i in np.nonzero(data))


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


def _wrap(*xs: np.ndarray) -> list[Array]:
    return [Array(constant(np.array(v, copy=True))) for v in xs]


def unique_all(x: Array, /) -> UniqueAllResult:
    """Unique values with first-occurrence indices, inverse indices (x's shape) and counts.

    Data-dependent shape: evaluates ``x`` at the call. NaNs count as distinct.

    >>> import braze as bz
    >>> r = bz.unique_all(bz.asarray([2, 1, 2]))
    >>> r.values.tolist(), r.indices.tolist(), r.inverse_indices.tolist(), r.counts.tolist()
    ([1, 2], [1, 0], [1, 0, 1], [1, 2])
    """
    return UniqueAllResult(*_wrap(*_unique(x, "unique_all")))


def unique_counts(x: Array, /) -> UniqueCountsResult:
    """Unique values and how often each occurs (evaluates ``x``).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unique_counts(bz.asarray([3, 3, 1]))]
    [[1, 3], [1, 2]]
    """
    v, _, _, c = _unique(x, "unique_counts")
    return UniqueCountsResult(*_wrap(v, c))


def unique_inverse(x: Array, /) -> UniqueInverseResult:
    """Unique values and, for each element of ``x``, the index of its value (evaluates ``x``).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unique_inverse(bz.asarray([3, 3, 1]))]
    [[1, 3], [1, 1, 0]]
    """
    v, _, inv, _ = _unique(x, "unique_inverse")
    return UniqueInverseResult(*_wrap(v, inv))


def unique_values(x: Array, /) -> Array:
    """Sorted unique values of ``x`` (evaluates ``x``; NaNs are distinct).

    >>> import braze as bz
    >>> bz.unique_values(bz.asarray([3, 3, 1])).tolist()
    [1, 3]
    """
    v, _, _, _ = _unique(x, "unique_values")
    return _wrap(v)[0]



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
    hit = _any(elementwise(OPS["equal"], a.reshape(a.shape + (1,)), flat), axis=-1)
    return elementwise(OPS["logical_not"], hit) if invert else hit


__all__ = ["isin", "sort", "argsort", "top_k", "searchsorted", "nonzero", "count_nonzero",
           "unique_all", "unique_counts", "unique_inverse", "unique_values"]
