"""Reductions, scans and the row functions built from them (softmax, logsumexp).

``sum``/``prod``/``max``/``min``/``any``/``all``/``argmax``/``argmin`` are single
reduce nodes; ``mean``, ``var``, ``std``, ``logsumexp`` and ``softmax`` are written
as reduce -> broadcast -> elementwise compositions, the shape the fusion compiler
turns into one row kernel.

>>> import braze as bz
>>> x = bz.asarray([[1.0, 2.0], [3.0, 4.0]])
>>> bz.sum(x, axis=0).tolist(), bz.mean(x).item()
([4.0, 6.0], 2.5)
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import OPS, check_domain
from .array import Array, _ew_op, _no_out, as_array, astype
from .autodiff import stop_gradient

Axis = int | tuple[int, ...] | None


def normalize_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:  # the common case, on every reduction
        return (axis % ndim,)
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"{op}: axis must be an int, a tuple of ints or None, got {axis!r}") \
                from None
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of bounds for an array of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _reduce(name: str, x: Any, axis: Any, keepdims: bool) -> Array:
    x = as_array(x, name)
    op = OPS[name]
    check_domain(op, x.dtype)
    axes = normalize_axes(axis, x.ndim, name)
    attrs = {"axes": axes, "keepdims": bool(keepdims)}
    shape, dtype = op.infer((x.shape,), (x.dtype,), attrs)  # type: ignore[misc]
    return Array(Node(op, (x._node,), attrs, shape, dtype))


def sum(x: Array, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Sum over ``axis`` (all axes by default). Integers accumulate in 64 bits.

    >>> import braze as bz
    >>> bz.sum(bz.ones((2, 3), dtype=bz.int8), axis=1).tolist()
    [3, 3]
    """
    return _with_dtype("sum", x, axis, dtype, keepdims)


def prod(x: Array, /, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:
    """Product over ``axis`` (all axes by default).

    >>> import braze as bz
    >>> bz.prod(bz.asarray([2, 3, 4])).item()
    24
    """
    return _with_dtype("prod", x, axis, dtype, keepdims)


def _with_dtype(name: str, x: Any, axis: Any, dtype: Any, keepdims: bool) -> Array:
    if dtype is None:
        return _reduce(name, x, axis, keepdims)
    d = dt.to_dtype(dtype, name)
    x = as_array(x, name)
    if dt.is_complex(x.dtype) and not dt.is_complex(d):
        # an explicit real accumulation dtype for complex input: the real parts (numpy's
        # cast; astype itself refuses complex -> real)
        x = _ew_op("real", x)
    x = astype(x, d)
    out = _reduce(name, x, axis, keepdims)
    return astype(out, d)


def max(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Largest element over ``axis``; NaN propagates. Empty axes are an error.

    >>> import braze as bz
    >>> bz.max(bz.asarray([[1, 5], [7, 2]]), axis=1).tolist()
    [5, 7]
    """
    return _reduce("max", x, axis, keepdims)


def min(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Smallest element over ``axis``; NaN propagates. Empty axes are an error.

    >>> import braze as bz
    >>> bz.min(bz.asarray([3.0, -1.0])).item()
    -1.0
    """
    return _reduce("min", x, axis, keepdims)


def any(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether any element over ``axis`` is non-zero.

    >>> import braze as bz
    >>> bz.any(bz.asarray([0, 2])).item()
    True
    """
    return _reduce("any", x, axis, keepdims)


def all(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether every element over ``axis`` is non-zero.

    >>> import braze as bz
    >>> bz.all(bz.asarray([0, 2])).item()
    False
    """
    return _reduce("all", x, axis, keepdims)


def _arg(name: str, x: Any, axis: Any, keepdims: bool) -> Array:
    x = as_array(x, name)
    if axis is not None and not isinstance(axis, (builtins.int, np.integer)):
        raise TypeError(f"{name}: axis must be an int or None, got {axis!r}")
    if x.ndim == 0:
        return _reduce(name, x.reshape((1,)), 0, False).reshape(())
    return _reduce(name, x, axis, keepdims)


def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the first largest element (flat index when ``axis`` is None); int64.

    >>> import braze as bz
    >>> bz.argmax(bz.asarray([[1, 9], [8, 2]]), axis=1).tolist()
    [1, 0]
    """
    return _arg("argmax", x, axis, keepdims)


def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the first smallest element (flat index when ``axis`` is None); int64.

    >>> import braze as bz
    >>> bz.argmin(bz.asarray([4, 1, 1])).item()
    1
    """
    return _arg("argmin", x, axis, keepdims)


def _count(x: Array, axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _float_input(x: Any, name: str) -> Array:
    x = as_array(x, name)
    if not dt.is_floating(x.dtype):
        if not dt.is_numeric(x.dtype) and x.dtype != dt.bool_:
            raise TypeError(f"{name}: unsupported dtype {dt.name(x.dtype)}")
        x = astype(x, dt.DEFAULT_FLOAT)
    return x


def mean(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """Arithmetic mean over ``axis``; integer input gives float32. Empty -> NaN.

    >>> import braze as bz
    >>> bz.mean(bz.asarray([1, 2]), keepdims=True).tolist()
    [1.5]
    """
    x = _float_input(x, "mean")
    return _reduce("mean", x, axis, keepdims)  # one op: no size baked into the graph


def var(x: Array, /, *, axis: Axis = None, correction: int | float = 0.0,
        keepdims: bool = False, _op: str = "var") -> Array:
    """Variance over ``axis`` with ``correction`` degrees of freedom (1 = sample variance).

    >>> import braze as bz
    >>> round(bz.var(bz.asarray([1.0, 2.0, 3.0, 4.0]), correction=1).item(), 4)
    1.6667
    """
    x = _float_input(x, _op)
    if isinstance(correction, builtins.bool) or not isinstance(
            correction, (builtins.int, builtins.float)) or correction < 0:
        raise ValueError(f"{_op}: correction must be a non-negative number, got {correction!r}")
    axes = normalize_axes(axis, x.ndim, _op)
    m = mean(x, axis=axes, keepdims=True)
    d = x - m
    sq = (d * _ew_op("conj", d)).__abs__() if dt.is_complex(x.dtype) else d * d
    out = _reduce("mean", sq, axes, keepdims)
    if correction == 0:
        return out
    n = _count(x, axes)
    dof = builtins.max(n - correction, 0)
    # n / (n - correction) depends on the shape: tagged so shapeless compile retraces
    factor = constant(np.asarray(n / dof if dof > 0 else np.nan, dtype=out.dtype))
    factor.attrs = {"size_dependent": True}
    return out * Array(factor)


def std(x: Array, /, *, axis: Axis = None, correction: int | float = 0.0,
        keepdims: bool = False) -> Array:
    """Standard deviation: ``sqrt(var(x, ...))``.

    >>> import braze as bz
    >>> bz.std(bz.asarray([1.0, 3.0])).item()
    1.0
    """
    return _ew_op("sqrt", var(x, axis=axis, correction=correction, keepdims=keepdims,
                                        _op="std"))


def logsumexp(x: Array, /, *, axis: Axis = None, keepdims: bool = False) -> Array:
    """``log(sum(exp(x)))`` over ``axis``, computed stably (max subtracted first).

    >>> import braze as bz
    >>> round(bz.logsumexp(bz.asarray([1000.0, 1000.0])).item(), 2)
    1000.69
    """
    x = _float_input(x, "logsumexp")
    if dt.is_complex(x.dtype):
        raise TypeError("logsumexp: complex input is not supported")
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    if builtins.any(x.shape[a] == 0 for a in axes):  # empty: log(0) = -inf
        return _ew_op("log", _reduce("sum", x, axes, keepdims))
    # (the max only shifts for stability: no gradient flows through it)
    m = stop_gradient(_reduce("max", x, axes, True))
    from .elementwise import where

    m = where(_ew_op("isfinite", m), m, 0.0)  # all -inf (or inf) rows stay exact
    s = _reduce("sum", _ew_op("exp", x - m), axes, keepdims)
    if not keepdims:
        m = m.reshape(tuple(d for i, d in enumerate(m.shape) if i not in axes))
    return _ew_op("log", s) + m


def softmax(x: Array, /, axis: Axis = -1) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (default: last), computed stably.

    >>> import braze as bz
    >>> bz.softmax(bz.asarray([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """
    x = _float_input(x, "softmax")
    if dt.is_complex(x.dtype):
        raise TypeError("softmax: complex input is not supported")
    axes = normalize_axes(axis, x.ndim, "softmax")
    if x.size == 0:
        return x
    e = _ew_op("exp", x - stop_gradient(_reduce("max", x, axes, True)))
    return e / _reduce("sum", e, axes, True)


def cumulative_sum(x: Array, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Array:
    """Running sum along ``axis`` (optional for 1-d input); ``include_initial`` prepends 0.

    >>> import braze as bz
    >>> bz.cumulative_sum(bz.asarray([1, 2, 3]), include_initial=True).tolist()
    [0, 1, 3, 6]
    """
    return _scan("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x: Array, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Array:
    """Running product along ``axis`` (optional for 1-d input); ``include_initial``
    prepends 1. Integers accumulate in 64 bits, like ``prod``.

    >>> import braze as bz
    >>> bz.cumulative_prod(bz.asarray([1, 2, 3]), include_initial=True).tolist()
    [1, 1, 2, 6]
    """
    return _scan("cumulative_prod", x, axis, dtype, include_initial)


def _scan(name: str, x: Any, axis: Any, dtype: Any, include_initial: bool) -> Array:
    x = as_array(x, name)
    if x.ndim == 0:
        raise ValueError(f"{name}: requires at least 1 dimension, got a 0-d array")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{name}: axis is required for {x.ndim}-d input")
        axis = 0
    (ax,) = normalize_axes(axis, x.ndim, name)
    if dtype is not None:
        x = astype(x, dt.to_dtype(dtype, name))
    op = OPS[name]
    attrs = {"axis": ax, "include_initial": bool(include_initial)}
    shape, out_dtype = op.infer((x.shape,), (x.dtype,), attrs)  # type: ignore[misc]
    out = Array(Node(op, (x._node,), attrs, shape, out_dtype))
    return out if dtype is None else astype(out, x.dtype)


# ---------------------------------------------------------------- NumPy's names
def cumsum(a: Array, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
    """NumPy's running sum (``axis=None``: over the flattened array).

    >>> import braze as bz
    >>> bz.cumsum(bz.asarray([[1, 2], [3, 4]])).tolist()
    [1, 3, 6, 10]
    """
    _no_out("cumsum", out)
    a = as_array(a, "cumsum")
    if axis is None:
        a, axis = a.reshape((-1,)), 0
    return cumulative_sum(a, axis=axis, dtype=dtype)


def cumprod(a: Array, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
    """NumPy's running product (``axis=None``: over the flattened array).

    >>> import braze as bz
    >>> bz.cumprod(bz.asarray([1, 2, 3])).tolist()
    [1, 2, 6]
    """
    _no_out("cumprod", out)
    a = as_array(a, "cumprod")
    if axis is None:
        a, axis = a.reshape((-1,)), 0
    return cumulative_prod(a, axis=axis, dtype=dtype)


def amax(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """NumPy's alias of :func:`max`.

    >>> import braze as bz
    >>> bz.amax(bz.asarray([[1, 5], [7, 2]]), 0).tolist()
    [7, 5]
    """
    _no_out("amax", out)
    return _reduce("max", a, axis, keepdims)


def amin(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """NumPy's alias of :func:`min`.

    >>> import braze as bz
    >>> bz.amin(bz.asarray([[1, 5], [7, 2]]), 1).tolist()
    [1, 2]
    """
    _no_out("amin", out)
    return _reduce("min", a, axis, keepdims)


def ptp(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """Range (``max - min``) over ``axis``.

    >>> import braze as bz
    >>> bz.ptp(bz.asarray([4, 9, 2])).item()
    7
    """
    _no_out("ptp", out)
    return _reduce("max", a, axis, keepdims) - _reduce("min", a, axis, keepdims)


def average(a: Array, axis: Axis = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Any:
    """Weighted mean over ``axis`` (``weights`` of ``a``'s shape, or 1-d along one axis);
    ``returned``: also the sum of the weights.

    >>> import braze as bz
    >>> bz.average(bz.asarray([1.0, 2.0, 3.0]), weights=bz.asarray([3.0, 1.0, 0.0])).item()
    1.25
    """
    x = _float_input(a, "average")
    axes = normalize_axes(axis, x.ndim, "average")
    if weights is None:
        avg = mean(x, axis=axes, keepdims=keepdims)
        if not returned:
            return avg
        n = _count(x, axes)
        return avg, Array(constant(np.full(avg.shape, n, dtype=avg.dtype)))
    from .creation import asarray

    w = asarray(weights)
    if w.shape != x.shape:
        if w.ndim != 1 or len(axes) != 1 or w.shape[0] != x.shape[axes[0]]:
            raise ValueError(f"average: weights of shape {w.shape} do not fit a of shape "
                             f"{x.shape} along axis {axis}")
        w = w.reshape(tuple(-1 if i == axes[0] else 1 for i in range(x.ndim)))
    wt = astype(w, dt.promote(x.dtype, w.dtype, "average") if dt.is_floating(w.dtype)
                else x.dtype)
    from .manipulation import broadcast_to

    scl = _reduce("sum", broadcast_to(wt, x.shape), axes, keepdims)
    avg = _reduce("sum", x * wt, axes, keepdims) / scl
    return (avg, astype(scl, avg.dtype)) if returned else avg


def _nan_to(x: Array, value: float) -> Array:
    from .elementwise import where

    return where(_ew_op("isnan", x), value, x) if dt.is_floating(x.dtype) else x


def nansum(a: Array, axis: Axis = None, dtype: Any = None, out: None = None,
           keepdims: bool = False) -> Array:
    """Sum treating NaN as zero.

    >>> import braze as bz
    >>> bz.nansum(bz.asarray([1.0, float("nan"), 2.0])).item()
    3.0
    """
    _no_out("nansum", out)
    return sum(_nan_to(as_array(a, "nansum"), 0.0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a: Array, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False) -> Array:
    """Product treating NaN as one.

    >>> import braze as bz
    >>> bz.nanprod(bz.asarray([2.0, float("nan"), 3.0])).item()
    6.0
    """
    _no_out("nanprod", out)
    return prod(_nan_to(as_array(a, "nanprod"), 1.0), axis=axis, dtype=dtype, keepdims=keepdims)


def _valid_count(x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
    ok = _ew_op("logical_not", _ew_op("isnan", x))
    return astype(_reduce("sum", ok, axes, keepdims), x.dtype)


def nanmean(a: Array, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False) -> Array:
    """Mean of the non-NaN elements (NaN where there are none).

    >>> import braze as bz
    >>> bz.nanmean(bz.asarray([1.0, float("nan"), 2.0])).item()
    1.5
    """
    _no_out("nanmean", out)
    x = _float_input(a, "nanmean")
    if dtype is not None:
        x = astype(x, dt.to_dtype(dtype, "nanmean"))
    axes = normalize_axes(axis, x.ndim, "nanmean")
    return _reduce("sum", _nan_to(x, 0.0), axes, keepdims) / _valid_count(x, axes, keepdims)


def nanvar(a: Array, axis: Axis = None, dtype: Any = None, out: None = None, ddof: float = 0,
           keepdims: bool = False) -> Array:
    """Variance of the non-NaN elements with ``ddof`` degrees of freedom.

    >>> import braze as bz
    >>> bz.nanvar(bz.asarray([1.0, float("nan"), 3.0])).item()
    1.0
    """
    _no_out("nanvar", out)
    x = _float_input(a, "nanvar")
    if dtype is not None:
        x = astype(x, dt.to_dtype(dtype, "nanvar"))
    if dt.is_complex(x.dtype):
        raise TypeError("nanvar: complex input is not supported")
    axes = normalize_axes(axis, x.ndim, "nanvar")
    n = _valid_count(x, axes, True)
    m = _reduce("sum", _nan_to(x, 0.0), axes, True) / n
    d = _nan_to(x - m, 0.0)
    dof = _ew_op("maximum", n - float(ddof), 0.0)
    out_ = _reduce("sum", d * d, axes, True) / dof
    return out_ if keepdims else out_.reshape(tuple(
        v for i, v in enumerate(out_.shape) if i not in axes))


def nanstd(a: Array, axis: Axis = None, dtype: Any = None, out: None = None, ddof: float = 0,
           keepdims: bool = False) -> Array:
    """Standard deviation of the non-NaN elements.

    >>> import braze as bz
    >>> bz.nanstd(bz.asarray([1.0, float("nan"), 3.0])).item()
    1.0
    """
    return _ew_op("sqrt", nanvar(a, axis, dtype, out, ddof, keepdims))


def _nan_extreme(name: str, a: Any, axis: Any, keepdims: bool) -> Array:
    x = as_array(a, "nan" + name)
    if not dt.is_floating(x.dtype):
        return _reduce(name, x, axis, keepdims)
    from .elementwise import where

    fill = float("-inf") if name == "max" else float("inf")
    r = _reduce(name, _nan_to(x, fill), axis, keepdims)
    return where(_reduce("all", _ew_op("isnan", x), axis, keepdims), float("nan"), r)


def nanmax(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """Largest non-NaN element (NaN for an all-NaN slice).

    >>> import braze as bz
    >>> bz.nanmax(bz.asarray([1.0, float("nan"), 2.0])).item()
    2.0
    """
    _no_out("nanmax", out)
    return _nan_extreme("max", a, axis, keepdims)


def nanmin(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """Smallest non-NaN element (NaN for an all-NaN slice).

    >>> import braze as bz
    >>> bz.nanmin(bz.asarray([1.0, float("nan"), 2.0])).item()
    1.0
    """
    _no_out("nanmin", out)
    return _nan_extreme("min", a, axis, keepdims)


def nanargmax(a: Array, axis: int | None = None, out: None = None, *,
              keepdims: bool = False) -> Array:
    """Index of the largest non-NaN element (lazy: an all-NaN slice gives 0 where numpy
    raises).

    >>> import braze as bz
    >>> bz.nanargmax(bz.asarray([1.0, float("nan"), 2.0])).item()
    2
    """
    _no_out("nanargmax", out)
    return _arg("argmax", _nan_to(as_array(a, "nanargmax"), float("-inf")), axis, keepdims)


def nanargmin(a: Array, axis: int | None = None, out: None = None, *,
              keepdims: bool = False) -> Array:
    """Index of the smallest non-NaN element (an all-NaN slice gives 0).

    >>> import braze as bz
    >>> bz.nanargmin(bz.asarray([1.0, float("nan"), 0.5])).item()
    2
    """
    _no_out("nanargmin", out)
    return _arg("argmin", _nan_to(as_array(a, "nanargmin"), float("inf")), axis, keepdims)


def nancumsum(a: Array, axis: int | None = None, dtype: Any = None, out: None = None
              ) -> Array:
    """Running sum treating NaN as zero.

    >>> import braze as bz
    >>> bz.nancumsum(bz.asarray([1.0, float("nan"), 2.0])).tolist()
    [1.0, 1.0, 3.0]
    """
    return cumsum(_nan_to(as_array(a, "nancumsum"), 0.0), axis, dtype, out)


def nancumprod(a: Array, axis: int | None = None, dtype: Any = None, out: None = None
               ) -> Array:
    """Running product treating NaN as one.

    >>> import braze as bz
    >>> bz.nancumprod(bz.asarray([2.0, float("nan"), 3.0])).tolist()
    [2.0, 2.0, 6.0]
    """
    return cumprod(_nan_to(as_array(a, "nancumprod"), 1.0), axis, dtype, out)


def trace(a: Array, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Array:
    """NumPy's trace: sum of the ``offset`` diagonal of the planes ``(axis1, axis2)``.

    >>> import braze as bz
    >>> bz.trace(bz.asarray([[1, 2], [3, 4]])).item()
    5
    """
    _no_out("trace", out)
    from .manipulation import diagonal

    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


__all__ = ["sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean", "var", "std",
           "logsumexp", "softmax", "cumulative_sum", "cumulative_prod", "cumsum", "cumprod",
           "amax", "amin", "ptp", "average", "nansum", "nanprod", "nanmean", "nanvar", "nanstd",
           "nanmax", "nanmin", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "trace"]

