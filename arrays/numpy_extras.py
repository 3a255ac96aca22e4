"""NumPy's everyday names that belong to no other family: order statistics (median,
percentile, quantile), covariance, comparisons of whole arrays, polynomials,
convolution and interpolation, calculus helpers, elementwise compositions
(``modf``, ``frexp``, ``nan_to_num``...), selection (``select``, ``choose``) and
NumPy's in-place writers (``put``, ``copyto``...), which rebind their target.

Everything is a composition of braze ops, so it stays lazy and fuses; order
statistics sort once (a library op) and gather at indices that are static, or
computed lazily from the NaN count for the ``nan*`` forms. ``compress`` and
``place`` need the values of their mask (a data-dependent shape or order): they
evaluate the mask, only it.

>>> import braze as bz
>>> x = bz.asarray([[1.0, 4.0], [2.0, 8.0]])
>>> bz.median(x, axis=0).tolist(), bz.polyval(bz.asarray([1.0, 0.0, -1.0]), 3.0).item()
([1.5, 6.0], 8.0)
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from .array import Array, _no_out, astype
from .creation import _constant, asarray, full, zeros, zeros_like
from .elementwise import _FUNCS as _GEN  # the generated elementwise functions, by name
from .elementwise import where
from .manipulation import (
    broadcast_to,
    concat,
    flip,
    moveaxis,
    pad,
    permute_dims,
    ravel,
    reshape,
)
from .reductions import _float_input, mean, normalize_axes
from .reductions import all as _all
from .reductions import sum as _sum

# ---------------------------------------------------------------- order statistics
_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _last_axis(x: Array, axis: Any, name: str) -> tuple[Array, tuple[int, ...]]:
    """``x`` with the reduced axes moved to the end and merged into one."""
    axes = normalize_axes(axis, x.ndim, name)
    rest = [i for i in range(x.ndim) if i not in axes]
    n = 1
    for a in axes:
        n *= x.shape[a]
    y = permute_dims(x, tuple(rest + list(axes)))
    return reshape(y, tuple(x.shape[i] for i in rest) + (n,)), axes


def _gather(s: Array, idx: Any) -> Array:
    from .indexing import take, take_along_axis

    if isinstance(idx, np.ndarray):
        return take(s, _constant(idx, np.int64), axis=-1)
    return take_along_axis(s, idx, axis=-1)


def _order_stat(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: bool,
                skip_nan: bool, median: bool = False) -> Array:
    x = _float_input(a, name)
    if dt.is_complex(x.dtype):
        raise TypeError(f"{name}: complex input is not supported")
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    qa = np.asarray(q, dtype=np.float64)
    if np.isnan(qa).any() or (qa < 0).any() or (qa > 1).any():
        raise ValueError(f"{name}: quantiles must be in [0, 1] (percentiles in [0, 100]), "
                         f"got {q!r}")
    xm, axes = _last_axis(x, axis, name)
    n = xm.shape[-1]
    flat = qa.reshape(-1)
    rest = xm.shape[:-1]
    if n == 0:
        res = full(rest + (flat.size,), float("nan"), dtype=x.dtype)
    else:
        from .searching import sort

        s = sort(xm, axis=-1)  # NaNs last
        if skip_nan:
            cnt = _sum(_GEN["logical_not"](_GEN["isnan"](xm)), axis=-1, keepdims=True)
            top = astype(_GEN["maximum"](cnt - 1, 0), dt.float64)
            vi: Any = top * _constant(flat)
        else:
            vi = flat * (n - 1)
        if median:
            lo = (cnt - 1) // 2 if skip_nan else np.full(1, (n - 1) // 2)
            hi = cnt // 2 if skip_nan else np.full(1, n // 2)
            if skip_nan:
                lo, hi = _GEN["maximum"](lo, 0), _GEN["maximum"](hi, 0)
            va, vb = _gather(s, lo), _gather(s, hi)
            res = va if not skip_nan and n % 2 else where(
                _GEN["equal"](lo, hi) if skip_nan else False, va, (va + vb) * 0.5)
        else:
            res = _interpolate(s, vi, n, method, cnt if skip_nan else None)
        if skip_nan:
            res = where(_GEN["equal"](cnt, 0), float("nan"), res)
        else:
            res = where(_GEN["isnan"](s[..., n - 1:]), float("nan"), res)
    res = moveaxis(res, -1, 0)
    if keepdims:
        rest = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return reshape(res, qa.shape + rest)


def _interpolate(s: Array, vi: Any, n: int, method: str, cnt: Array | None) -> Array:
    """Sorted ``s`` at virtual indices ``vi`` (static numpy floats, or a lazy array) by
    numpy's ``method``; the linear form is numpy's two-sided lerp."""
    lazy = not isinstance(vi, np.ndarray)
    fl = _GEN["floor"] if lazy else np.floor
    if method in ("lower", "nearest", "higher"):
        f = {"lower": fl, "higher": _GEN["ceil"] if lazy else np.ceil,
             "nearest": _GEN["round"] if lazy else np.round}[method]
        idx = f(vi)
        return _gather(s, astype(idx, dt.int64) if lazy else idx.astype(np.int64))
    lo = fl(vi)
    t = vi - lo
    if lazy:
        assert cnt is not None
        lo_i: Any = astype(lo, dt.int64)
        hi_i: Any = _GEN["minimum"](lo_i + 1, _GEN["maximum"](cnt - 1, 0))
    else:
        lo_i = lo.astype(np.int64)
        hi_i = np.minimum(lo_i + 1, n - 1)
    a, b = _gather(s, lo_i), _gather(s, hi_i)
    if method == "midpoint":
        t = where(_GEN["equal"](t, 0), 0.0, 0.5) if lazy else np.where(t == 0, 0.0, 0.5)
    # numpy's lerp computes in float64 (its weights' dtype) and rounds once: in float32
    # a + d * t cancels (-1745 + 8734 * 0.2 gives 1.80005)
    tt = astype(t, dt.float64) if lazy else _constant(t, dt.float64)
    a, b = astype(a, dt.float64), astype(b, dt.float64)
    d = b - a
    return astype(where(tt >= 0.5, b - d * (1 - tt), a + d * tt), s.dtype)


def quantile(a: Array, q: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False) -> Array:
    """The ``q`` quantiles (``q`` in [0, 1], a scalar or a sequence: its axes come first)
    over ``axis``; methods ``linear`` (default), ``lower``, ``higher``, ``nearest``,
    ``midpoint``. NaN where a slice holds a NaN. Integers compute in float32.

    >>> import braze as bz
    >>> bz.quantile(bz.asarray([1.0, 2.0, 3.0, 4.0]), [0.25, 0.5]).tolist()
    [1.75, 2.5]
    """
    _no_out("quantile", out)
    return _order_stat("quantile", a, q, axis, method, keepdims, False)


def percentile(a: Array, q: Any, axis: Any = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False) -> Array:
    """:func:`quantile` with ``q`` in percent.

    >>> import braze as bz
    >>> bz.percentile(bz.asarray([1.0, 2.0, 3.0, 4.0]), 50).item()
    2.5
    """
    _no_out("percentile", out)
    return _order_stat("percentile", a, np.true_divide(q, 100), axis, method, keepdims, False)


def nanquantile(a: Array, q: Any, axis: Any = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False) -> Array:
    """:func:`quantile` of the non-NaN elements (NaN for an all-NaN slice).

    >>> import braze as bz
    >>> bz.nanquantile(bz.asarray([1.0, float("nan"), 3.0]), 0.5).item()
    2.0
    """
    _no_out("nanquantile", out)
    return _order_stat("nanquantile", a, q, axis, method, keepdims, True)


def nanpercentile(a: Array, q: Any, axis: Any = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False) -> Array:
    """:func:`percentile` of the non-NaN elements.

    >>> import braze as bz
    >>> bz.nanpercentile(bz.asarray([1.0, float("nan"), 3.0]), 100).item()
    3.0
    """
    _no_out("nanpercentile", out)
    return _order_stat("nanpercentile", a, np.true_divide(q, 100), axis, method, keepdims, True)


def median(a: Array, axis: Any = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """Median over ``axis`` (the mean of the two middle values for an even count).

    >>> import braze as bz
    >>> bz.median(bz.asarray([3.0, 1.0, 4.0, 1.0])).item()
    2.0
    """
    _no_out("median", out)
    return _order_stat("median", a, 0.5, axis, "linear", keepdims, False, median=True)


def nanmedian(a: Array, axis: Any = None, out: None = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Array:
    """Median of the non-NaN elements.

    >>> import braze as bz
    >>> bz.nanmedian(bz.asarray([3.0, float("nan"), 1.0])).item()
    2.0
    """
    _no_out("nanmedian", out)
    return _order_stat("nanmedian", a, 0.5, axis, "linear", keepdims, True, median=True)


def cov(m: Array, y: Array | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, *, dtype: Any = None) -> Array:
    """Covariance matrix of the variables in the rows (``rowvar``) or columns of ``m``
    (and ``y``). Lazy: one centered matmul. Integers compute in float32.

    >>> import braze as bz
    >>> bz.cov(bz.asarray([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    from .manipulation import atleast_2d

    x = _float_input(m, "cov")
    if x.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions (shape {x.shape})")
    x = atleast_2d(x)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        yy = atleast_2d(_float_input(y, "cov"))
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        x = concat([x, astype(yy, dt.promote(x.dtype, yy.dtype, "cov"))], axis=0)
    if dtype is not None:
        x = astype(x, dt.to_dtype(dtype, "cov"))
    n = x.shape[1]
    dof = n - (ddof if ddof is not None else (0 if bias else 1))
    xc = x - mean(x, axis=1, keepdims=True)
    from .linalg import matmul

    c = matmul(xc, _GEN["conj"](xc).T) * (1.0 / dof if dof > 0 else float("inf"))
    return reshape(c, ()) if c.shape == (1, 1) else c


def corrcoef(x: Array, y: Array | None = None, rowvar: bool = True, *, dtype: Any = None
             ) -> Array:
    """Pearson correlation coefficients (the covariance normalized by the standard
    deviations), clipped to [-1, 1].

    >>> import braze as bz
    >>> bz.corrcoef(bz.asarray([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    from .manipulation import diagonal

    d = _GEN["sqrt"](_GEN["real"](diagonal(c)))
    c = c / reshape(d, (-1, 1)) / reshape(d, (1, -1))
    if dt.is_complex(c.dtype):
        return c
    return _GEN["maximum"](_GEN["minimum"](c, 1.0), -1.0)


# ---------------------------------------------------------------- whole-array comparisons
def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
            ) -> Array:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (infinities equal when they match).

    >>> import braze as bz
    >>> bz.isclose(bz.asarray([1.0, float("inf")]), bz.asarray([1.0 + 1e-9, float("inf")])).tolist()
    [True, True]
    """
    x, y = asarray(a), asarray(b)
    if not dt.is_floating(x.dtype) and not dt.is_floating(y.dtype):
        x = astype(x, dt.float64)
    common = dt.promote(x.dtype, y.dtype, "isclose")
    if not dt.is_floating(common):
        common = dt.DEFAULT_FLOAT
    x, y = astype(x, common), astype(y, common)
    close = _GEN["less_equal"](_GEN["abs"](x - y), atol + rtol * _GEN["abs"](y))
    out = _GEN["logical_or"](_GEN["logical_and"](close, _GEN["isfinite"](y)), _GEN["equal"](x, y))
    if equal_nan:
        out = _GEN["logical_or"](out, _GEN["logical_and"](_GEN["isnan"](x), _GEN["isnan"](y)))
    return out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
             ) -> bool:
    """Whether every element of ``a`` is :func:`isclose` to ``b``'s (evaluates).

    >>> import braze as bz
    >>> bz.allclose(bz.asarray([1.0, 2.0]), bz.asarray([1.0, 2.0 + 1e-7]))
    True
    """
    return builtins.bool(_all(isclose(a, b, rtol, atol, equal_nan)).item())


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> bool:
    """Whether two arrays have one shape and equal elements (evaluates).

    >>> import braze as bz
    >>> bz.array_equal(bz.asarray([1, 2]), [1, 2]), bz.array_equal(bz.ones(2), bz.ones(3))
    (True, False)
    """
    x, y = asarray(a1), asarray(a2)
    if x.shape != y.shape:
        return False
    eq = _GEN["equal"](x, y)
    if equal_nan and (dt.is_floating(x.dtype) or dt.is_floating(y.dtype)):
        eq = _GEN["logical_or"](eq, _GEN["logical_and"](_GEN["isnan"](x), _GEN["isnan"](y)))
    return builtins.bool(_all(eq).item())


def array_equiv(a1: Any, a2: Any) -> bool:
    """Whether two arrays broadcast together and are equal elementwise (evaluates).

    >>> import braze as bz
    >>> bz.array_equiv(bz.asarray([1, 2]), bz.asarray([[1, 2], [1, 2]]))
    True
    """
    x, y = asarray(a1), asarray(a2)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return False
    return builtins.bool(_all(_GEN["equal"](x, y)).item())


def outer(a: Any, b: Any, out: None = None) -> Array:
    """NumPy's outer product: of the flattened inputs (``bz.linalg.outer`` takes 1-d).

    >>> import braze as bz
    >>> bz.outer(bz.asarray([1, 2]), bz.asarray([[1, 10]])).tolist()
    [[1, 10], [2, 20]]
    """
    _no_out("outer", out)
    from .linalg import outer as _outer

    return _outer(ravel(asarray(a)), ravel(asarray(b)))


# ---------------------------------------------------------------- polynomials
def _poly(p: Any, name: str) -> Array:
    p = asarray(p)
    if p.ndim != 1:
        raise ValueError(f"{name}: coefficients must be 1-d, got shape {p.shape}")
    return p


def polyval(p: Any, x: Any) -> Array:
    """Evaluate the polynomial with coefficients ``p`` (highest power first) at ``x``
    (Horner's rule, as numpy: one fused kernel).

    >>> import braze as bz
    >>> bz.polyval(bz.asarray([3.0, 0.0, 1.0]), bz.asarray([1.0, 2.0])).tolist()
    [4.0, 13.0]
    """
    p = _poly(p, "polyval")
    xa = asarray(x)
    y: Array = zeros_like(xa, dtype=dt.promote(xa.dtype, p.dtype, "polyval"))
    for i in range(p.shape[0]):
        y = y * xa + p[i]
    return y


def _align(a1: Array, a2: Array) -> tuple[Array, Array]:
    n = builtins.max(a1.shape[0], a2.shape[0])
    return (pad(a1, (n - a1.shape[0], 0)), pad(a2, (n - a2.shape[0], 0)))


def polyadd(a1: Any, a2: Any) -> Array:
    """Sum of two polynomials.

    >>> import braze as bz
    >>> bz.polyadd(bz.asarray([1, 2]), bz.asarray([1, 0, 0])).tolist()
    [1, 1, 2]
    """
    x, y = _align(_poly(a1, "polyadd"), _poly(a2, "polyadd"))
    return x + y


def polysub(a1: Any, a2: Any) -> Array:
    """Difference of two polynomials.

    >>> import braze as bz
    >>> bz.polysub(bz.asarray([1, 2]), bz.asarray([1, 0, 0])).tolist()
    [-1, 1, 2]
    """
    x, y = _align(_poly(a1, "polysub"), _poly(a2, "polysub"))
    return x - y


def polymul(a1: Any, a2: Any) -> Array:
    """Product of two polynomials (their coefficients' convolution).

    >>> import braze as bz
    >>> bz.polymul(bz.asarray([1, 1]), bz.asarray([1, -1])).tolist()
    [1, 0, -1]
    """
    return convolve(_poly(a1, "polymul"), _poly(a2, "polymul"))


def polyder(p: Any, m: int = 1) -> Array:
    """The ``m``-th derivative of a polynomial.

    >>> import braze as bz
    >>> bz.polyder(bz.asarray([1, 2, 3])).tolist()
    [2, 2]
    """
    p = _poly(p, "polyder")
    if operator.index(m) < 0:
        raise ValueError(f"polyder: order m must be non-negative, got {m}")
    for _ in range(m):
        n = p.shape[0] - 1
        if n <= 0:
            return zeros((1,), dtype=p.dtype)
        p = p[:-1] * _constant(np.arange(n, 0, -1), p.dtype if not p.dtype == dt.bool_ else None)
    return p


def polyint(p: Any, m: int = 1, k: Any = None) -> Array:
    """The ``m``-th antiderivative of a polynomial (integration constants ``k``, zero by
    default).

    >>> import braze as bz
    >>> bz.polyint(bz.asarray([3.0, 2.0])).tolist()
    [1.5, 2.0, 0.0]
    """
    p = _float_input(_poly(p, "polyint"), "polyint")
    if operator.index(m) < 0:
        raise ValueError(f"polyint: order m must be non-negative, got {m}")
    ks = np.broadcast_to(np.asarray(0.0 if k is None else k, dtype=np.float64), (m,))
    for i in range(m):
        n = p.shape[0]
        p = concat([p / _constant(np.arange(n, 0, -1), p.dtype), full((1,), float(ks[i]),
                                                              dtype=p.dtype)])
    return p


def polydiv(u: Any, v: Any) -> tuple[Array, Array]:
    """Quotient and remainder of polynomial division (long division, unrolled: lazy).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.polydiv(bz.asarray([1.0, -3.0, 2.0]), bz.asarray([1.0, -1.0]))]
    [[1.0, -2.0], [0.0]]
    """
    un = _float_input(_poly(u, "polydiv"), "polydiv")
    vn = _float_input(_poly(v, "polydiv"), "polydiv")
    m, n = un.shape[0] - 1, vn.shape[0] - 1
    if m < n:
        return zeros((1,), dtype=un.dtype), un
    scale = 1.0 / vn[0]
    r = [un[i] for i in range(m + 1)]
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        for j in range(n + 1):
            r[k + j] = r[k + j] - d * vn[j]
    from .manipulation import stack

    rem = stack(r[m - n + 1:]) if n else zeros((1,), dtype=un.dtype)
    return stack(q), rem


def polyfit(x: Any, y: Any, deg: int) -> Array:
    """Least-squares polynomial fit of degree ``deg`` (highest power first), by the
    pseudo-inverse of the Vandermonde matrix.

    >>> import braze as bz
    >>> c = bz.polyfit(bz.asarray([0.0, 1.0, 2.0]), bz.asarray([1.0, 3.0, 5.0]), 1)
    >>> [f"{v:.4f}" for v in c.tolist()]
    ['2.0000', '1.0000']
    """
    from .creation import vander
    from .linalg import matmul
    from .linalg import pinv as _pinv

    xa, ya = _float_input(x, "polyfit"), _float_input(y, "polyfit")
    if xa.ndim != 1 or ya.ndim not in (1, 2) or ya.shape[0] != xa.shape[0]:
        raise ValueError(f"polyfit: x must be 1-d and y 1-d or 2-d of the same length, got "
                         f"{xa.shape} and {ya.shape}")
    deg = operator.index(deg)
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    v = vander(xa, deg + 1)
    norms = _GEN["sqrt"](_sum(v * v, axis=0))  # column scaling, as numpy
    norms = where(_GEN["equal"](norms, 0), 1.0, norms)
    c = matmul(_pinv(v / norms), ya)
    return c / (norms if ya.ndim == 1 else reshape(norms, (-1, 1)))


def poly(seq_of_zeros: Any) -> Array:
    """Coefficients of the monic polynomial with the given roots (1-d input).

    >>> import braze as bz
    >>> bz.poly(bz.asarray([1.0, 2.0])).tolist()
    [1.0, -3.0, 2.0]
    """
    r = asarray(seq_of_zeros)
    if r.ndim != 1:
        raise ValueError(f"poly: needs a 1-d array of roots, got shape {r.shape} (the "
                         "characteristic polynomial of a matrix needs eigvals, not in braze)")
    out = asarray([1.0], dtype=r.dtype if dt.is_floating(r.dtype) else dt.DEFAULT_FLOAT)
    for i in range(r.shape[0]):
        out = convolve(out, concat([asarray([1.0], dtype=out.dtype),
                                    reshape(-astype(r[i], out.dtype), (1,))]))
    return out


# ---------------------------------------------------------------- signals
def convolve(a: Any, v: Any, mode: str = "full") -> Array:
    """Discrete linear convolution of two 1-d arrays; modes ``full``, ``same``,
    ``valid``. Lazy: a gather of sliding windows and one matmul.

    >>> import braze as bz
    >>> bz.convolve(bz.asarray([1.0, 2.0, 3.0]), bz.asarray([0.0, 1.0, 0.5])).tolist()
    [0.0, 1.0, 2.5, 4.0, 1.5]
    """
    x, w = asarray(a), asarray(v)
    return _conv("convolve", x, w, mode)


def _conv(name: str, x: Array, w: Array, mode: str, late_same: bool = False) -> Array:
    """Full convolution of 1-d ``x`` and ``w`` cut to ``mode``; ``late_same``: the
    ``same`` window starts ``m // 2`` in (numpy's correlate of a shorter ``a``), not
    ``(m - 1) // 2``."""
    if x.ndim != 1 or w.ndim != 1:
        raise ValueError(f"{name}: needs 1-d arrays, got shapes {x.shape} and {w.shape}")
    if x.shape[0] == 0 or w.shape[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty (shapes {x.shape}, {w.shape})")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    if w.shape[0] > x.shape[0]:
        x, w = w, x
    dtype = dt.promote(x.dtype, w.dtype, name)
    if dtype == dt.bool_:
        dtype = dt.DEFAULT_INT
    x, w = astype(x, dtype), astype(w, dtype)
    n, m = x.shape[0], w.shape[0]
    xp = pad(x, (m - 1, m - 1))
    length = n + m - 1
    idx = (np.arange(length)[:, None] + np.arange(m)[None, :]).reshape(-1)
    from .indexing import take
    from .linalg import matmul

    windows = reshape(take(xp, _constant(idx, np.int64), axis=0), (length, m))
    # w reversed by a gather, not flip: the mlx backend's matmul refuses the negative
    # strides a flip view has on its numpy path (a backend issue, reported)
    full_ = matmul(windows, take(w, _constant(np.arange(m - 1, -1, -1), np.int64)))
    if mode == "full":
        return full_
    if mode == "same":
        start = m // 2 if late_same else (m - 1) // 2
        return full_[start:start + n]
    return full_[m - 1:n]


def correlate(a: Any, v: Any, mode: str = "valid") -> Array:
    """Cross-correlation of two 1-d arrays: ``c[k] = sum(a[n + k] * conj(v[n]))``
    (default mode ``valid``).

    >>> import braze as bz
    >>> bz.correlate(bz.asarray([1.0, 2.0, 3.0]), bz.asarray([0.0, 1.0, 0.5])).tolist()
    [3.5]
    """
    x, w = asarray(a), asarray(v)
    late = x.ndim == 1 and w.ndim == 1 and w.shape[0] > x.shape[0]
    if w.ndim == 1 and w.shape[0] > 0:
        w = flip(_GEN["conj"](w))
    return _conv("correlate", x, w, mode, late)


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: float | None = None) -> Array:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at
    ``x``; ``left``/``right`` beyond the ends (default the end values); ``period`` for
    angles. Lazy: a searchsorted and gathers. Computes in the inputs' float dtype.

    >>> import braze as bz
    >>> xp, fp = bz.asarray([0.0, 1.0, 2.0]), bz.asarray([0.0, 10.0, 0.0])
    >>> bz.interp(bz.asarray([0.5, 3.0]), xp, fp).tolist()
    [5.0, 0.0]
    """
    from .indexing import take
    from .searching import argsort, searchsorted

    xa, xpa, fpa = asarray(x), asarray(xp), asarray(fp)
    if xpa.ndim != 1 or fpa.shape != xpa.shape:
        raise ValueError(f"interp: xp and fp must be 1-d of one length, got {xpa.shape} and "
                         f"{fpa.shape}")
    if xpa.shape[0] == 0:
        raise ValueError("interp: xp and fp cannot be empty")
    if dt.is_complex(fpa.dtype):
        raise TypeError("interp: complex fp is not supported")
    d = dt.promote(xa.dtype, xpa.dtype, "interp")
    d = dt.promote(d, fpa.dtype, "interp")
    if not dt.is_floating(d):
        d = dt.DEFAULT_FLOAT
    xa, xpa, fpa = astype(xa, d), astype(xpa, d), astype(fpa, d)
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be non-zero")
        period = builtins.abs(period)
        xa, xpa = _GEN["remainder"](xa, period), _GEN["remainder"](xpa, period)
        order = argsort(xpa)
        xpa, fpa = take(xpa, order), take(fpa, order)
        xpa = concat([xpa[-1:] - period, xpa, xpa[0:1] + period])
        fpa = concat([fpa[-1:], fpa, fpa[0:1]])
        left = right = None
    n = xpa.shape[0]
    if n == 1:
        y = broadcast_to(fpa[0], xa.shape)
    else:
        j = searchsorted(xpa, ravel(xa), side="right") - 1
        i = _GEN["minimum"](_GEN["maximum"](j, 0), n - 2)
        x0, x1 = take(xpa, i), take(xpa, i + 1)
        y0, y1 = take(fpa, i), take(fpa, i + 1)
        slope = (y1 - y0) / (x1 - x0)
        xf = ravel(xa)
        y = slope * (xf - x0) + y0
        y = where(_GEN["isnan"](y), slope * (xf - x1) + y1, y)
        y = where(_GEN["logical_and"](_GEN["isnan"](y), _GEN["equal"](y0, y1)), y0, y)
        y = where(_GEN["equal"](xf, x0), y0, where(_GEN["equal"](xf, x1), y1, y))
        y = reshape(y, xa.shape)
    lo = fpa[0] if left is None else left
    hi = fpa[n - 1] if right is None else right
    y = where(xa < xpa[0], lo, y)
    return astype(where(xa > xpa[n - 1], hi, y), d)


# ---------------------------------------------------------------- calculus helpers
def gradient(f: Any, *varargs: float, axis: Any = None, edge_order: int = 1) -> Any:
    """Gradient by central differences inside and one-sided differences (order
    ``edge_order``: 1 or 2) at the ends; uniform scalar spacings ``varargs``. One array
    per axis (a single array for one axis).

    >>> import braze as bz
    >>> bz.gradient(bz.asarray([1.0, 2.0, 4.0, 7.0])).tolist()
    [1.0, 1.5, 2.5, 3.0]
    """
    x = _float_input(f, "gradient")
    axes = normalize_axes(axis, x.ndim, "gradient")
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    if not varargs:
        h = [1.0] * len(axes)
    elif len(varargs) == 1:
        h = [float(varargs[0])] * len(axes)
    elif len(varargs) == len(axes):
        h = [float(v) for v in varargs]
    else:
        raise TypeError(f"gradient: expected 0, 1 or {len(axes)} spacings, got {len(varargs)}")
    out = []
    for ax, dx in zip(axes, h):
        n = x.shape[ax]
        if n < edge_order + 1:
            raise ValueError(f"gradient: axis {ax} of shape {x.shape} needs at least "
                             f"{edge_order + 1} points")

        def sl(a: int, b: int | None, ax: int = ax) -> Array:
            return x[(slice(None),) * ax + (slice(a, b),)]
        mid = (sl(2, None) - sl(0, n - 2)) / (2 * dx)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / dx
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / dx
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / dx
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / dx
        out.append(concat([first, mid, last], axis=ax))
    return out[0] if len(out) == 1 else tuple(out)


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Array:
    """Integral of ``y`` along ``axis`` by the trapezoidal rule (sample points ``x``, or
    spacing ``dx``).

    >>> import braze as bz
    >>> bz.trapezoid(bz.asarray([1.0, 2.0, 3.0])).item()
    4.0
    """
    from .manipulation import diff

    ya = _float_input(y, "trapezoid")
    (ax,) = normalize_axes(axis, ya.ndim, "trapezoid")
    n = ya.shape[ax]
    if x is None:
        d: Any = dx
    else:
        xa = asarray(x)
        d = diff(xa, axis=-1 if xa.ndim == 1 else ax)
        if xa.ndim == 1:
            d = reshape(d, tuple(-1 if i == ax else 1 for i in range(ya.ndim)))
    hi = ya[(slice(None),) * ax + (slice(1, n),)]
    lo = ya[(slice(None),) * ax + (slice(0, builtins.max(n - 1, 0)),)]
    return _sum(d * (hi + lo) / 2.0, axis=ax)


def unwrap(p: Any, discont: float | None = None, axis: int = -1, *,
           period: float = 2 * math.pi) -> Array:
    """Unwrap phase angles: jumps larger than ``discont`` (default ``period / 2``) become
    their ``period`` complement. Lazy: a diff, a fused correction and a cumsum.

    >>> import braze as bz
    >>> [f"{v:.4f}" for v in bz.unwrap(bz.asarray([0.0, 3.0, 6.5])).tolist()]
    ['0.0000', '3.0000', '0.2168']
    """
    from .manipulation import diff
    from .reductions import cumulative_sum

    x = _float_input(p, "unwrap")
    (ax,) = normalize_axes(axis, x.ndim, "unwrap")
    dd = diff(x, axis=ax)
    disc = period / 2 if discont is None else builtins.max(discont, period / 2)
    half = period / 2
    ddmod = _GEN["remainder"](dd + half, period) - half
    ddmod = where(_GEN["logical_and"](_GEN["equal"](ddmod, -half), dd > 0), half, ddmod)
    corr = where(_GEN["abs"](dd) < disc, 0.0, ddmod - dd)
    head = x[(slice(None),) * ax + (slice(0, 1),)]
    if x.shape[ax] < 2:
        return x
    return concat([head, x[(slice(None),) * ax + (slice(1, None),)]
                   + cumulative_sum(corr, axis=ax)], axis=ax)


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Array:
    """Differences of consecutive elements of the flattened array, with optional
    values before and after.

    >>> import braze as bz
    >>> bz.ediff1d(bz.asarray([1, 2, 4, 7]), to_begin=bz.asarray([0])).tolist()
    [0, 1, 2, 3]
    """
    from .manipulation import diff

    x = ravel(asarray(ary))
    parts = [ravel(asarray(to_begin)).astype(x.dtype)] if to_begin is not None else []
    parts.append(diff(x))
    if to_end is not None:
        parts.append(ravel(asarray(to_end)).astype(x.dtype))
    return concat(parts) if len(parts) > 1 else parts[0]


# ---------------------------------------------------------------- elementwise compositions
def around(a: Any, decimals: int = 0, out: None = None) -> Array:
    """Round half to even to ``decimals`` places (numpy's scale, rint, unscale).

    >>> import braze as bz
    >>> bz.around(bz.asarray([1.234, 2.5, -0.5]), 1).tolist()
    [1.2000000476837158, 2.5, -0.5]
    """
    _no_out("around", out)
    x = asarray(a)
    decimals = operator.index(decimals)
    if decimals == 0 or x.dtype == dt.bool_:
        return _GEN["round"](x)
    if not dt.is_floating(x.dtype):
        if decimals >= 0:
            return x
        s = 10 ** (-decimals)
        return astype(_GEN["round"](astype(x, dt.float64) / s) * s, x.dtype)
    s = 10.0 ** decimals
    return _GEN["round"](x * s) / s if decimals > 0 else _GEN["round"](x / (1 / s)) * (1 / s)


# NumPy's other names of elementwise records (the record's function itself)
degrees, radians = _GEN["rad2deg"], _GEN["deg2rad"]
bitwise_not = _GEN["bitwise_invert"]
left_shift, right_shift = _GEN["bitwise_left_shift"], _GEN["bitwise_right_shift"]


def cbrt(x: Any, out: None = None) -> Array:
    """Elementwise real cube root (also of negative ``x``): ``2 ** (log2|x| / 3)`` and
    one Newton step, in float64, rounded once to x's float dtype (float32 for integers):
    float32 results correctly rounded, float64 within 1 ulp. (A composition until the
    Metal emulator's shim has cbrt, which an op record would need.)

    >>> import braze as bz
    >>> bz.cbrt(bz.asarray([8.0, -1000.0, 0.0])).tolist()
    [2.0, -10.0, 0.0]
    """
    _no_out("cbrt", out)
    xa = _float_input(x, "cbrt")
    if dt.is_complex(xa.dtype):
        raise TypeError(f"cbrt: unsupported dtype {dt.name(xa.dtype)}; expected a real dtype")
    w = astype(xa, dt.float64)
    a = _GEN["abs"](w)
    y = _GEN["exp2"](_GEN["log2"](a) * (1.0 / 3.0))
    newton = y - (y * y * y - a) / (3.0 * y * y)
    keep = _GEN["logical_or"](_GEN["equal"](a, 0.0), _GEN["logical_not"](_GEN["isfinite"](a)))
    return astype(_GEN["copysign"](where(keep, y, newton), w), xa.dtype)


def fix(x: Any, out: None = None) -> Array:
    """Round toward zero (numpy's name for :func:`trunc`).

    >>> import braze as bz
    >>> bz.fix(bz.asarray([2.7, -2.7])).tolist()
    [2.0, -2.0]
    """
    _no_out("fix", out)
    return _GEN["trunc"](asarray(x))


def rint(x: Any, out: None = None) -> Array:
    """Round to the nearest integer, half to even (numpy's name for :func:`round`).

    >>> import braze as bz
    >>> bz.rint(bz.asarray([0.5, 1.5])).tolist()
    [0.0, 2.0]
    """
    _no_out("rint", out)
    return _GEN["round"](asarray(x))


def fabs(x: Any, out: None = None) -> Array:
    """Absolute value as a float (integers in float32; complex is refused).

    >>> import braze as bz
    >>> bz.fabs(bz.asarray([-2, 3])).tolist()
    [2.0, 3.0]
    """
    _no_out("fabs", out)
    xa = _float_input(x, "fabs")
    if dt.is_complex(xa.dtype):
        raise TypeError(f"fabs: unsupported dtype {dt.name(xa.dtype)}; expected a real dtype")
    return _GEN["abs"](xa)


def float_power(x1: Any, x2: Any) -> Array:
    """``x1 ** x2`` computed in float64 (complex128 for complex input), as numpy.

    >>> import braze as bz
    >>> bz.float_power(bz.asarray([2, 3]), -1).tolist()
    [0.5, 0.3333333333333333]
    """
    a, b = asarray(x1), asarray(x2)
    d = dt.complex128 if dt.is_complex(a.dtype) or dt.is_complex(b.dtype) else dt.float64
    return _GEN["pow"](astype(a, d), astype(b, d))


def divmod(x1: Any, x2: Any) -> tuple[Array, Array]:  # noqa: A001 - numpy's name
    """``(x1 // x2, x1 % x2)``.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.divmod(bz.asarray([7, -7]), 2)]
    [[3, -4], [1, 1]]
    """
    return _GEN["floor_divide"](x1, x2), _GEN["remainder"](x1, x2)


def modf(x: Any) -> tuple[Array, Array]:
    """Fractional and integral parts, both with ``x``'s sign.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.modf(bz.asarray([2.5, -0.25]))]
    [[0.5, -0.25], [2.0, -0.0]]
    """
    xa = _float_input(x, "modf")
    ip = _GEN["trunc"](xa)
    frac = where(_GEN["isinf"](xa), 0.0, xa - ip)
    return _GEN["copysign"](frac, xa), ip


def ldexp(x1: Any, x2: Any) -> Array:
    """``x1 * 2 ** x2`` (integer ``x2``); float64 inside, rounded once to x1's float dtype.

    >>> import braze as bz
    >>> bz.ldexp(bz.asarray([1.5, 3.0]), bz.asarray([2, -1])).tolist()
    [6.0, 1.5]
    """
    a, e = _float_input(x1, "ldexp"), asarray(x2)
    if not dt.is_integer(e.dtype):
        raise TypeError(f"ldexp: exponents must be integers, got {dt.name(e.dtype)}")
    wide = astype(a, dt.float64) * _GEN["exp2"](astype(e, dt.float64))
    return astype(wide, a.dtype)


def frexp(x: Any) -> tuple[Array, Array]:
    """Mantissa in [0.5, 1) (with x's sign) and int32 exponent: ``x = m * 2 ** e``.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.frexp(bz.asarray([8.0, -3.0, 0.0]))]
    [[0.5, -0.75, 0.0], [4, 2, 0]]
    """
    xa = _float_input(x, "frexp")
    if dt.is_complex(xa.dtype):
        raise TypeError("frexp: complex input is not supported")
    w = astype(xa, dt.float64)
    mag = _GEN["abs"](w)
    special = _GEN["logical_or"](_GEN["equal"](mag, 0), _GEN["logical_not"](_GEN["isfinite"](w)))
    safe = where(special, 1.0, mag)
    def scale(e: Array) -> Array:  # safe * 2**-e in two steps: 2**1074 overflows
        h = _GEN["floor"](e * 0.5)
        return safe * _GEN["exp2"](-h) * _GEN["exp2"](h - e)

    e = _GEN["floor"](_GEN["log2"](safe)) + 1
    m = scale(e)
    e = where(m >= 1.0, e + 1, where(m < 0.5, e - 1, e))
    m = scale(e)
    mant = where(special, w, _GEN["copysign"](m, w))
    return astype(mant, xa.dtype), astype(where(special, 0.0, e), dt.int32)


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Array:
    """NaN to ``nan``, +-inf to ``posinf``/``neginf`` (default: the dtype's extremes).

    >>> import braze as bz
    >>> bz.nan_to_num(bz.asarray([float("nan"), float("-inf"), 1.0])).tolist()
    [0.0, -3.4028234663852886e+38, 1.0]
    """
    xa = asarray(x)
    if not dt.is_floating(xa.dtype):
        return xa
    if dt.is_complex(xa.dtype):
        re = nan_to_num(_GEN["real"](xa), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(_GEN["imag"](xa), nan=nan, posinf=posinf, neginf=neginf)
        return astype(re, xa.dtype) + astype(im, xa.dtype) * 1j
    info = np.finfo(xa.dtype)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    y = where(_GEN["isnan"](xa), nan, xa)
    big = where(xa > 0, asarray(hi, dtype=xa.dtype), asarray(lo, dtype=xa.dtype))
    return where(_GEN["isinf"](xa), big, y)


def angle(z: Any, deg: bool = False) -> Array:
    """Counterclockwise angle of complex ``z`` (radians, or degrees with ``deg``).

    >>> import braze as bz
    >>> bz.angle(bz.asarray([1j, -1.0]), deg=True).tolist()
    [90.0, 180.0]
    """
    za = _float_input(z, "angle")
    a = _GEN["atan2"](_GEN["imag"](za), _GEN["real"](za))
    return a * (180.0 / math.pi) if deg else a


def isposinf(x: Any, out: None = None) -> Array:
    """Elementwise ``x == +inf``.

    >>> import braze as bz
    >>> bz.isposinf(bz.asarray([float("inf"), -float("inf")])).tolist()
    [True, False]
    """
    _no_out("isposinf", out)
    xa = asarray(x)
    if not dt.is_floating(xa.dtype):
        return _GEN["logical_not"](_GEN["isfinite"](xa))
    return _GEN["logical_and"](_GEN["isinf"](xa), xa > 0)


def isneginf(x: Any, out: None = None) -> Array:
    """Elementwise ``x == -inf``.

    >>> import braze as bz
    >>> bz.isneginf(bz.asarray([float("inf"), -float("inf")])).tolist()
    [False, True]
    """
    _no_out("isneginf", out)
    xa = asarray(x)
    if not dt.is_floating(xa.dtype):
        return _GEN["logical_not"](_GEN["isfinite"](xa))
    return _GEN["logical_and"](_GEN["isinf"](xa), xa < 0)


def iscomplex(x: Any) -> Array:
    """Elementwise: the imaginary part is non-zero (False for real dtypes).

    >>> import braze as bz
    >>> bz.iscomplex(bz.asarray([1 + 1j, 2 + 0j])).tolist()
    [True, False]
    """
    xa = asarray(x)
    if not dt.is_complex(xa.dtype):
        return full(xa.shape, False)
    return _GEN["imag"](xa) != 0


def isreal(x: Any) -> Array:
    """Elementwise: the imaginary part is zero (True for real dtypes).

    >>> import braze as bz
    >>> bz.isreal(bz.asarray([1 + 1j, 2 + 0j])).tolist()
    [False, True]
    """
    return _GEN["logical_not"](iscomplex(x))


def iscomplexobj(x: Any) -> bool:
    """Whether ``x`` has a complex dtype.

    >>> import braze as bz
    >>> bz.iscomplexobj(bz.asarray([1j])), bz.iscomplexobj(bz.ones(2))
    (True, False)
    """
    return dt.is_complex(asarray(x).dtype)


def isrealobj(x: Any) -> bool:
    """Whether ``x`` does not have a complex dtype.

    >>> import braze as bz
    >>> bz.isrealobj(bz.ones(2))
    True
    """
    return not iscomplexobj(x)


def isscalar(element: Any) -> bool:
    """Whether ``element`` is a scalar (a Python or numpy number, str, bytes), not an
    array of any shape.

    >>> import braze as bz
    >>> bz.isscalar(3.0), bz.isscalar(bz.asarray(3.0))
    (True, False)
    """
    return not isinstance(element, Array) and np.isscalar(element)


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Whether dtype ``arg1`` is ``arg2`` or below it in NumPy's hierarchy (braze dtypes
    are numpy dtypes).

    >>> import braze as bz, numpy as np
    >>> bz.issubdtype(bz.float32, np.floating), bz.issubdtype(bz.int8, np.floating)
    (True, False)
    """
    return builtins.bool(np.issubdtype(arg1, arg2))


def promote_types(type1: Any, type2: Any) -> np.dtype:
    """The dtype both promote to under braze's rules (the Array API's table, which
    refuses mixed signed/unsigned 64-bit where numpy goes to float64).

    >>> import braze as bz
    >>> bz.promote_types(bz.int8, bz.uint8)
    dtype('int16')
    """
    return dt.promote(dt.to_dtype(type1, "promote_types"), dt.to_dtype(type2, "promote_types"),
                      "promote_types")


def unravel_index(indices: Any, shape: Sequence[int], order: str = "C") -> tuple[Array, ...]:
    """Flat indices as one index array per dimension of ``shape`` (lazy: divisions).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unravel_index(bz.asarray([5, 1]), (2, 3))]
    [[1, 0], [2, 1]]
    """
    from .creation import normalize_shape

    idx = asarray(indices)
    if not dt.is_integer(idx.dtype):
        raise TypeError(f"unravel_index: indices must be integer, got {dt.name(idx.dtype)}")
    dims = normalize_shape(shape, "unravel_index")
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    seq = list(reversed(dims)) if order == "C" else list(dims)
    out = []
    rest = astype(idx, dt.int64)
    for n in seq:
        out.append(_GEN["remainder"](rest, n) if n else rest * 0)
        rest = _GEN["floor_divide"](rest, n) if n else rest
    return tuple(reversed(out)) if order == "C" else tuple(out)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Array:
    """Flat indices of the index arrays ``multi_index`` into ``dims`` (``mode`` wrap or
    clip maps out-of-range indices; ``raise`` cannot check lazily and leaves them).

    >>> import braze as bz
    >>> bz.ravel_multi_index((bz.asarray([1, 0]), bz.asarray([2, 1])), (2, 3)).tolist()
    [5, 1]
    """
    from .creation import normalize_shape

    ds = normalize_shape(dims, "ravel_multi_index")
    if len(multi_index) != len(ds):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for "
                         f"{len(ds)} dims")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    strides = np.cumprod((1,) + tuple(reversed(ds))[:-1])[::-1] if order == "C" else \
        np.cumprod((1,) + ds[:-1])
    out: Any = 0
    for ix, n, st in zip(multi_index, ds, strides.tolist()):
        i = astype(asarray(ix), dt.int64)
        if mode == "wrap":
            i = _GEN["remainder"](i, n)
        elif mode == "clip":
            i = _GEN["minimum"](_GEN["maximum"](i, 0), n - 1)
        out = out + i * st
    return out if isinstance(out, Array) else asarray(out)


# ---------------------------------------------------------------- selection
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Array:
    """Elements from the first choice whose condition holds, else ``default``.

    >>> import braze as bz
    >>> x = bz.arange(5)
    >>> bz.select([x < 2, x > 3], [x, x * 10], default=-1).tolist()
    [0, 1, -1, -1, 40]
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist ({len(condlist)}) and choicelist "
                         f"({len(choicelist)}) differ in length")
    if not condlist:
        raise ValueError("select: condlist cannot be empty")
    out: Any = default
    for c, v in zip(reversed(condlist), reversed(choicelist)):
        ca = asarray(c)
        if ca.dtype != dt.bool_:
            raise TypeError(f"select: conditions must be bool, got {dt.name(ca.dtype)}")
        out = where(ca, v, out)
    return out if isinstance(out, Array) else asarray(out)


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Array:
    """Piecewise-defined function: ``funclist[i]`` (a callable or a value) where
    ``condlist[i]``; one extra function is the default. Each callable sees all of ``x``
    (lazy: where numpy calls it on the selected elements only).

    >>> import braze as bz
    >>> x = bz.asarray([-1.0, 2.0])
    >>> bz.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 2]).tolist()
    [1.0, 4.0]
    """
    xa = asarray(x)
    conds = [condlist] if isinstance(condlist, Array) and condlist.ndim == xa.ndim \
        and not isinstance(condlist, (list, tuple)) else list(condlist)
    funcs = list(funclist)
    if len(funcs) not in (len(conds), len(conds) + 1):
        raise ValueError(f"piecewise: {len(conds)} conditions need {len(conds)} or "
                         f"{len(conds) + 1} functions, got {len(funcs)}")

    def val(f: Any) -> Any:
        return f(xa, *args, **kw) if callable(f) else f

    out: Any = zeros_like(xa)
    if len(funcs) == len(conds) + 1:
        out = broadcast_to(astype(asarray(val(funcs[-1])), xa.dtype), xa.shape)
    for c, f in zip(conds, funcs):
        out = where(asarray(c), astype(asarray(val(f)), xa.dtype), out)
    return out


def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Array:
    """Element ``i`` of ``choices[a[i]]`` (all broadcast); ``mode`` ``wrap`` or ``clip``
    maps out-of-range indices (``raise``: they give the last choice, lazily).

    >>> import braze as bz
    >>> bz.choose(bz.asarray([0, 1, 1]), [bz.asarray([1, 2, 3]), bz.asarray([10, 20, 30])]).tolist()
    [1, 20, 30]
    """
    _no_out("choose", out)
    idx = asarray(a)
    if not dt.is_integer(idx.dtype):
        raise TypeError(f"choose: indices must be integer, got {dt.name(idx.dtype)}")
    n = len(choices)
    if n == 0:
        raise ValueError("choose: choices cannot be empty")
    if mode == "wrap":
        idx = _GEN["remainder"](idx, n)
    elif mode == "clip":
        idx = _GEN["minimum"](_GEN["maximum"](idx, 0), n - 1)
    elif mode != "raise":
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    out_: Any = choices[n - 1]
    for i in range(n - 2, -1, -1):
        out_ = where(_GEN["equal"](idx, i), choices[i], out_)
    return broadcast_to(asarray(out_), np.broadcast_shapes(idx.shape, asarray(out_).shape))


def compress(condition: Any, a: Any, axis: int | None = None, out: None = None) -> Array:
    """The slices of ``a`` along ``axis`` (None: flattened) where ``condition`` is true.

    Data-dependent shape: evaluates ``condition`` (only it) at the call.

    >>> import braze as bz
    >>> bz.compress([True, False, True], bz.asarray([1, 2, 3])).tolist()
    [1, 3]
    """
    _no_out("compress", out)
    from .indexing import take
    from .searching import data_dependent

    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), 0
    (ax,) = normalize_axes(axis, x.ndim, "compress")
    c = asarray(condition)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {c.shape}")
    keep = np.flatnonzero(data_dependent(c, "compress"))
    if keep.size and keep[-1] >= x.shape[ax]:
        raise IndexError(f"compress: condition of length {c.shape[0]} is longer than axis "
                         f"{ax} of shape {x.shape} where it is true")
    return take(x, _constant(keep, np.int64), axis=ax)


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any,
                     **kwargs: Any) -> Array:
    """``func1d`` applied to each 1-d slice along ``axis`` (a Python loop over the other
    axes; each call records lazy ops). Its results are stacked where the slice was.

    >>> import braze as bz
    >>> bz.apply_along_axis(lambda r: r[0] + r[-1], 1, bz.asarray([[1, 2], [3, 4]])).tolist()
    [3, 7]
    """
    from .manipulation import stack

    x = asarray(arr)
    (ax,) = normalize_axes(axis, x.ndim, "apply_along_axis")
    xm = moveaxis(x, ax, -1)
    outer = xm.shape[:-1]
    res = [asarray(func1d(xm[i], *args, **kwargs)) for i in np.ndindex(*outer)]
    if not res:
        raise ValueError(f"apply_along_axis: cannot apply to an empty outer shape {outer}")
    r = stack(res)
    r = reshape(r, outer + r.shape[1:])
    if r.ndim > len(outer):
        r = moveaxis(r, tuple(range(len(outer), r.ndim)),
                     tuple(range(ax, ax + r.ndim - len(outer))))
    return r


# ---------------------------------------------------------------- in-place writers
def _rebind(a: Any, value: Array, name: str) -> None:
    if not isinstance(a, Array):
        raise TypeError(f"{name}: the target must be a braze Array (it is rebound), got "
                        f"{type(a).__name__}")
    a[...] = value


def copyto(dst: Array, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``dst[...] = src`` where ``where`` holds (``dst`` is rebound; lazy).

    >>> import braze as bz
    >>> x = bz.zeros(3); bz.copyto(x, bz.ones(3), where=bz.asarray([True, False, True]))
    >>> x.tolist()
    [1.0, 0.0, 1.0]
    """
    if not isinstance(dst, Array):
        raise TypeError(f"copyto: dst must be a braze Array, got {type(dst).__name__}")
    s = broadcast_to(astype(asarray(src), dst.dtype), dst.shape)
    value = s if where is True else globals()["where"](asarray(where), s, dst)
    _rebind(dst, value, "copyto")


def putmask(a: Array, mask: Any, values: Any) -> None:
    """``a[mask] = values``, ``values`` repeated over the flat positions (rebinds ``a``).

    >>> import braze as bz
    >>> x = bz.arange(4); bz.putmask(x, x > 1, bz.asarray([7, 8]))
    >>> x.tolist()
    [0, 1, 7, 8]
    """
    from .manipulation import resize

    if not isinstance(a, Array):
        raise TypeError(f"putmask: a must be a braze Array, got {type(a).__name__}")
    v = resize(astype(asarray(values), a.dtype), a.shape)
    _rebind(a, where(asarray(mask), v, a), "putmask")


def place(arr: Array, mask: Any, vals: Any) -> None:
    """The true positions of ``mask`` (in order) get ``vals`` in turn, repeated (rebinds
    ``arr``). Evaluates ``mask``.

    >>> import braze as bz
    >>> x = bz.arange(5); bz.place(x, x > 2, bz.asarray([10, 20]))
    >>> x.tolist()
    [0, 1, 2, 10, 20]
    """
    from .searching import data_dependent

    if not isinstance(arr, Array):
        raise TypeError(f"place: arr must be a braze Array, got {type(arr).__name__}")
    m = asarray(mask)
    if m.shape != arr.shape:
        raise ValueError(f"place: mask of shape {m.shape} does not match arr {arr.shape}")
    idx = np.flatnonzero(data_dependent(m, "place"))
    if idx.size == 0:
        return
    v = ravel(asarray(vals))
    if v.size == 0:
        raise ValueError("place: cannot place from an empty vals array")
    put(arr, idx, v)


def put(a: Array, ind: Any, v: Any, mode: str = "raise") -> None:
    """``a.flat[ind] = v`` (``v`` repeated; ``mode`` wrap/clip maps out-of-range indices;
    rebinds ``a``). Lazy: a scatter.

    >>> import braze as bz
    >>> x = bz.zeros(4, dtype=bz.int64); bz.put(x, [0, 2], 5)
    >>> x.tolist()
    [5, 0, 5, 0]
    """
    from .manipulation import resize

    if not isinstance(a, Array):
        raise TypeError(f"put: a must be a braze Array, got {type(a).__name__}")
    idx = ravel(asarray(ind))
    if not dt.is_integer(idx.dtype):
        raise TypeError(f"put: indices must be integer, got {dt.name(idx.dtype)}")
    n = a.size
    if mode == "wrap":
        idx = _GEN["remainder"](idx, n)
    elif mode == "clip":
        idx = _GEN["minimum"](_GEN["maximum"](idx, 0), n - 1)
    elif mode != "raise":
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    flat = ravel(a)
    flat[idx] = resize(astype(asarray(v), a.dtype), (idx.size,))
    _rebind(a, reshape(flat, a.shape), "put")


def put_along_axis(arr: Array, indices: Any, values: Any, axis: int | None) -> None:
    """``arr`` at ``indices`` along ``axis`` (as ``take_along_axis``) set to ``values``
    (rebinds ``arr``). Lazy: a scatter.

    >>> import braze as bz
    >>> x = bz.zeros((2, 2)); bz.put_along_axis(x, bz.asarray([[1], [0]]), 5.0, axis=1)
    >>> x.tolist()
    [[0.0, 5.0], [5.0, 0.0]]
    """
    if not isinstance(arr, Array):
        raise TypeError(f"put_along_axis: arr must be a braze Array, got {type(arr).__name__}")
    idx = asarray(indices)
    if axis is None:
        flat = ravel(arr)
        put_along_axis(flat, ravel(idx), values, 0)
        _rebind(arr, reshape(flat, arr.shape), "put_along_axis")
        return
    if idx.ndim != arr.ndim:
        raise ValueError(f"put_along_axis: arr {arr.shape} and indices {idx.shape} need the "
                         "same number of dimensions")
    (ax,) = normalize_axes(axis, arr.ndim, "put_along_axis")
    shape = np.broadcast_shapes(idx.shape, tuple(1 if i == ax else d
                                                 for i, d in enumerate(arr.shape)))
    key = []
    for i in range(arr.ndim):
        if i == ax:
            key.append(broadcast_to(idx, shape))
        else:
            r = np.arange(shape[i]).reshape(tuple(-1 if j == i else 1 for j in range(arr.ndim)))
            key.append(_constant(np.broadcast_to(r, shape), np.int64))
    arr[tuple(key)] = broadcast_to(astype(asarray(values), arr.dtype), shape)


def fill_diagonal(a: Array, val: Any, wrap: bool = False) -> None:
    """Set the main diagonal (all indices equal) of ``a`` to ``val`` (rebinds ``a``).

    >>> import braze as bz
    >>> x = bz.zeros((2, 2)); bz.fill_diagonal(x, 3.0)
    >>> x.tolist()
    [[3.0, 0.0], [0.0, 3.0]]
    """
    if not isinstance(a, Array):
        raise TypeError(f"fill_diagonal: a must be a braze Array, got {type(a).__name__}")
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: needs at least 2 dimensions, got shape {a.shape}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(f"fill_diagonal: all dimensions must be equal, got shape {a.shape}")
    data = np.zeros(a.shape, dtype=bool)
    flat = data.reshape(-1)
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = None if wrap else a.shape[1] * a.shape[1]
    else:
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = None
    pos = np.arange(0, flat.size if end is None else builtins.min(end, flat.size), step)
    flat[pos] = True
    n = int(pos.size)
    vals = np.zeros(a.size, dtype=np.int64)
    vals[pos] = np.arange(n)
    from .manipulation import resize

    v = ravel(asarray(val))
    if v.size == 1:
        new = where(_constant(data), reshape(astype(v, a.dtype), ()), a)
    else:
        from .indexing import take

        cyc = resize(astype(v, a.dtype), (builtins.max(n, 1),))
        picks = take(cyc, _constant(vals.reshape(-1) % builtins.max(n, 1)))
        new = where(_constant(data), reshape(picks, a.shape), a)
    _rebind(a, new, "fill_diagonal")


__all__ = ["quantile", "percentile", "nanquantile", "nanpercentile", "median", "nanmedian",
           "cov", "corrcoef", "outer", "isclose", "allclose", "array_equal", "array_equiv",
           "polyval",
           "polyadd", "polysub", "polymul", "polyder", "polyint", "polydiv", "polyfit", "poly",
           "convolve", "correlate", "interp", "gradient", "trapezoid", "unwrap", "ediff1d",
           "around", "cbrt", "degrees", "radians", "bitwise_not", "left_shift", "right_shift",
           "fix", "rint", "fabs", "float_power", "divmod", "modf", "ldexp",
           "frexp", "nan_to_num", "angle", "isposinf", "isneginf", "iscomplex", "isreal",
           "iscomplexobj", "isrealobj", "isscalar", "issubdtype", "promote_types",
           "unravel_index", "ravel_multi_index", "select", "piecewise", "choose", "compress",
           "apply_along_axis", "copyto", "putmask", "place", "put", "put_along_axis",
           "fill_diagonal"]
