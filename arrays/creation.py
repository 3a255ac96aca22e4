"""Array creation: from data, constant fills, ranges, identity and triangles.

Fills are lazy and free: ``zeros((10000, 10000))`` records a broadcast of one
scalar, so nothing is allocated, not even at eval on the numpy backend.

>>> import braze as bz
>>> bz.full((2, 2), 7).tolist()
[[7, 7], [7, 7]]
"""

from __future__ import annotations

import builtins
import math
import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import BROADCAST, OPS, VALUE
from .array import _SCALARS, Array, _ew_op, as_array

ShapeLike = int | Sequence[int]


def normalize_shape(shape: Any, op: str) -> tuple[int, ...]:
    """A shape argument as a tuple of non-negative ints; clear errors otherwise."""
    if isinstance(shape, (builtins.int, np.integer)) and not isinstance(shape, builtins.bool):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got {shape!r}") \
            from None
    if any(d < 0 for d in out):
        raise ValueError(f"{op}: negative dimensions are not allowed, got shape {out}")
    return out


def _dtype_of_scalar(value: Any) -> np.dtype:
    if isinstance(value, builtins.bool):
        return dt.bool_
    if isinstance(value, builtins.int):
        return dt.DEFAULT_INT
    if isinstance(value, builtins.float):
        return dt.DEFAULT_FLOAT
    if isinstance(value, builtins.complex):
        return dt.DEFAULT_COMPLEX
    raise TypeError(f"expected a Python scalar, got {type(value).__name__}")


def _from_numpy(a: np.ndarray, op: str) -> np.ndarray:
    if a.dtype not in dt.ALL:
        raise TypeError(f"{op}: unsupported dtype {a.dtype} (braze supports "
                        f"{[dt.name(d) for d in dt.ALL]})")
    return a


def _constant(value: Any, dtype: Any = None) -> Array:
    """A constant of static data braze made itself (indices, weights, numpy's fresh
    result; never a buffer the caller holds): wrapped as it is, not copied."""
    return Array(constant(np.asarray(value, dtype=dtype)))


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None,
            copy: builtins.bool | None = None) -> Array:
    """Convert ``obj`` (an Array, a numpy array, nested sequences, a scalar, any
    ``__array__`` / ``__dlpack__`` object) to an Array.

    Results are computed lazily, so an array that shares a writeable buffer would change
    its answer when the buffer is written later: a writeable numpy array (or a buffer
    exported by another library) is copied unless ``copy=False`` asks for zero-copy (the
    caller then promises not to write it while braze may read it), or it is a fresh array
    only this call holds (``bz.asarray(rng.random(n))``: nothing else can write it).
    Read-only buffers (memory-mapped model files, ``np.asarray`` of a braze array) are
    shared as they are.

    Python floats become float32 and ints int64 (braze's defaults); numpy arrays keep
    their dtype.

    >>> import numpy as np, braze as bz
    >>> bz.asarray([1.5, 2]).dtype, bz.asarray(np.arange(3)).dtype
    (dtype('float32'), dtype('int64'))
    >>> a = np.zeros(3, np.float32); y = bz.asarray(a) * 1; a[0] = 42
    >>> y.tolist()
    [0.0, 0.0, 0.0]
    """
    want = None if dtype is None else dt.to_dtype(dtype, "asarray")
    if device not in (None, "cpu") and getattr(device, "name", None) != "cpu":
        raise ValueError(f"asarray: unknown device {device!r}")
    if isinstance(obj, Array):
        if want is not None and want != obj.dtype and copy is False:
            raise ValueError("asarray: a dtype change needs a copy, but copy=False")
        node = obj._node if want is None else _cast(obj._node, want)
        if copy:  # a snapshot: later writes to a numpy buffer it reads must not show
            return Array(constant(np.array(Array(node)._value(), copy=True)))
        return Array(node) if node is not obj._node else obj
    shared = False  # does data share a buffer with obj?
    if isinstance(obj, (np.ndarray, np.generic)):
        data = _from_numpy(np.asarray(obj), "asarray")
        shared = isinstance(obj, np.ndarray)
    elif type(obj) in _SCALARS:
        if copy is False:
            raise ValueError("asarray: building an array from a Python scalar copies, but "
                             "copy=False")
        with np.errstate(all="ignore"):
            data = np.asarray(obj, dtype=want or _dtype_of_scalar(obj))
    elif hasattr(obj, "__array__") or hasattr(obj, "__array_interface__"):
        data = _from_numpy(np.asarray(obj), "asarray")
        shared = True
    elif hasattr(obj, "__dlpack__"):
        data = _from_numpy(np.from_dlpack(obj), "asarray")
        shared = True
    elif isinstance(obj, (list, tuple)):
        if copy is False:
            raise ValueError("asarray: building an array from a Python sequence copies, but "
                             "copy=False")
        try:
            with np.errstate(all="ignore"):
                data = np.asarray(obj) if want is None else np.asarray(obj, dtype=want)
        except ValueError as e:
            raise ValueError(f"asarray: cannot build an array from ragged or mixed data: {e}") \
                from None
        if data.dtype == np.float64 and want is None:
            with np.errstate(all="ignore"):
                data = data.astype(dt.DEFAULT_FLOAT)
        elif data.dtype == np.complex128 and want is None:
            with np.errstate(all="ignore"):
                data = data.astype(dt.DEFAULT_COMPLEX)
        elif data.dtype.kind in "iu" and data.dtype != dt.DEFAULT_INT and data.size == 0:
            data = data.astype(dt.DEFAULT_INT)
        elif data.dtype.kind == "O" or data.dtype.kind in "SUV" and data.dtype not in dt.ALL:
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} of non-numeric "
                            "elements")
        if data.size == 0 and data.dtype == np.float64:
            data = data.astype(dt.DEFAULT_FLOAT)
        data = _from_numpy(data, "asarray")
    else:
        raise TypeError(f"asarray: cannot convert {type(obj).__name__} to an array")
    if want is not None and data.dtype != want:
        if copy is False:
            raise ValueError("asarray: a dtype change needs a copy, but copy=False")
        with np.errstate(all="ignore"):
            data = data.astype(want)
    elif copy is None and shared and data is obj and type(obj) is np.ndarray and \
            obj.base is None and _temporary(sys.getrefcount(obj)) and data.flags.writeable:
        pass  # a fresh array only this call holds (bz.asarray(rng.random(n))): nobody else
        # can write it later, so it is taken as it is (as numpy's temporary elision does)
    elif copy or (copy is None and shared and data.flags.writeable):
        data = np.array(data, copy=True)  # a snapshot: later writes to the source never show
    elif shared and data.flags.writeable:  # copy=False: zero-copy, read through a view
        data = data.view()  # that braze never writes (in-place updates copy first)
        data.flags.writeable = False
    if isinstance(obj, np.generic):  # a numpy scalar is data (bound at run time): graphs
        return Array(Node(VALUE, (), {}, (), data.dtype, data))  # on x[i] are one for all i
    return Array(constant(data))


# The references asarray sees to a numpy array that only its call holds (an argument
# made in the call: ``bz.asarray(a.copy())``), calibrated below by calling asarray on one
# such array and on one a variable holds; None where the two look alike (an interpreter
# that lends its frames' references): every writeable array is then copied.
_TEMPORARY_REFS: int | None = None
_CALIBRATING: list[int] = []


def _temporary(refs: int) -> bool:
    if _CALIBRATING:
        _CALIBRATING.append(refs)
        return False
    return _TEMPORARY_REFS is not None and refs <= _TEMPORARY_REFS


def _calibrate_temporaries() -> int | None:
    _CALIBRATING.append(0)
    try:
        asarray(np.zeros(2, np.float32))
        held = np.zeros(2, np.float32)
        asarray(held)
        temporary, variable = _CALIBRATING[1:3]
    finally:
        _CALIBRATING.clear()
    return temporary if temporary < variable else None


def _cast(node: Node, dtype: np.dtype) -> Node:
    from .array import cast_node

    return cast_node(node, dtype)


def array(obj: Any, dtype: Any = None, *, copy: builtins.bool = True) -> Array:
    """Like :func:`asarray` but copies numpy input by default (NumPy's ``np.array``).

    >>> import braze as bz
    >>> bz.array([[1, 2]], dtype=bz.float16).dtype
    dtype('float16')
    """
    return asarray(obj, dtype=dtype, copy=copy)


def from_dlpack(x: Any, /, *, device: Any = None, copy: builtins.bool | None = None) -> Array:
    """An Array sharing memory with a DLPack producer (a torch tensor, a numpy array...):
    zero-copy is what DLPack is for, so unlike ``asarray`` it does not snapshot a writeable
    producer (don't write it while braze may read it; ``copy=True`` takes a snapshot).

    >>> import numpy as np, braze as bz
    >>> bz.from_dlpack(np.arange(2)).tolist()
    [0, 1]
    """
    if device not in (None, "cpu") and getattr(device, "name", None) != "cpu":
        raise ValueError(f"from_dlpack: unknown device {device!r}; braze arrays live on 'cpu'")
    if isinstance(x, Array):
        return asarray(x, copy=copy)
    return asarray(np.from_dlpack(x), copy=False if copy is None else copy)


def full(shape: ShapeLike, fill_value: Any, *, dtype: Any = None, device: Any = None,
         _op: str = "full") -> Array:
    """An array of ``shape`` filled with ``fill_value`` (lazy: one broadcast scalar).

    >>> import braze as bz
    >>> bz.full(2, 1.5).tolist()
    [1.5, 1.5]
    """
    shape = normalize_shape(shape, _op)
    if isinstance(fill_value, Array):
        if fill_value.ndim != 0:
            raise ValueError(f"full: fill_value must be a scalar, got shape {fill_value.shape}")
        value_node = fill_value._node
        d = dt.to_dtype(dtype, "full") if dtype is not None else fill_value.dtype
        value_node = _cast(value_node, d)
    else:
        if not isinstance(fill_value, _SCALARS):
            raise TypeError(f"full: fill_value must be a Python scalar, got "
                            f"{type(fill_value).__name__}")
        d = dt.to_dtype(dtype, "full") if dtype is not None else _dtype_of_scalar(fill_value)
        if dt.is_integer(d) and isinstance(fill_value, builtins.int) and not isinstance(
                fill_value, builtins.bool):
            info = np.iinfo(d)
            if not info.min <= fill_value <= info.max:
                raise OverflowError(f"full: {fill_value} is out of bounds for {dt.name(d)}")
        if dt.is_complex(np.asarray(fill_value).dtype) and not dt.is_complex(d):
            raise TypeError(f"full: complex fill_value for real dtype {dt.name(d)}")
        if dt.is_integer(d) and isinstance(fill_value, builtins.float) and \
                not math.isfinite(fill_value):
            raise ValueError(f"full: cannot fill an {dt.name(d)} array with {fill_value}")
        with np.errstate(all="ignore"):
            value_node = constant(np.asarray(fill_value, dtype=d))
    if shape == ():
        return Array(value_node)
    return Array(Node(BROADCAST, (value_node,), {"shape": shape}, shape, d))


def _float_or(dtype: Any, op: str) -> np.dtype:
    return dt.DEFAULT_FLOAT if dtype is None else dt.to_dtype(dtype, op)


def zeros(shape: ShapeLike, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of zeros (default dtype float32).

    >>> import braze as bz
    >>> bz.zeros((1, 2)).tolist()
    [[0.0, 0.0]]
    """
    return full(shape, 0, dtype=_float_or(dtype, "zeros"), _op="zeros")


def ones(shape: ShapeLike, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of ones (default dtype float32).

    >>> import braze as bz
    >>> bz.ones(2, dtype=bz.int8).tolist()
    [1, 1]
    """
    return full(shape, 1, dtype=_float_or(dtype, "ones"), _op="ones")


def empty(shape: ShapeLike, *, dtype: Any = None, device: Any = None) -> Array:
    """An array whose contents are unspecified (braze gives zeros: deterministic, free).

    >>> import braze as bz
    >>> bz.empty((2,)).shape
    (2,)
    """
    return zeros(shape, dtype=dtype)


def _like(x: Any, op: str) -> Array:
    return as_array(x, op)


def zeros_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """Zeros with the shape (and by default the dtype) of ``x``.

    >>> import braze as bz
    >>> bz.zeros_like(bz.ones(2, dtype=bz.int32)).dtype
    dtype('int32')
    """
    x = _like(x, "zeros_like")
    return full(x.shape, 0, dtype=dtype if dtype is not None else x.dtype)


def ones_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """Ones with the shape (and by default the dtype) of ``x``.

    >>> import braze as bz
    >>> bz.ones_like(bz.zeros(2)).tolist()
    [1.0, 1.0]
    """
    x = _like(x, "ones_like")
    return full(x.shape, 1, dtype=dtype if dtype is not None else x.dtype)


def empty_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """Like :func:`empty` with the shape (and by default the dtype) of ``x``.

    >>> import braze as bz
    >>> bz.empty_like(bz.zeros((3, 1))).shape
    (3, 1)
    """
    return zeros_like(x, dtype=dtype)


def full_like(x: Array, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """``fill_value`` with the shape (and by default the dtype) of ``x``.

    >>> import braze as bz
    >>> bz.full_like(bz.zeros(2), 3).tolist()
    [3.0, 3.0]
    """
    x = _like(x, "full_like")
    return full(x.shape, fill_value, dtype=dtype if dtype is not None else x.dtype)


Real = builtins.int | builtins.float


def arange(start: Real, /, stop: Real | None = None, step: Real = 1, *, dtype: Any = None,
           device: Any = None) -> Array:
    """Evenly spaced values in [start, stop).

    >>> import braze as bz
    >>> bz.arange(1, 7, 2).tolist()
    [1, 3, 5]
    """
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if not isinstance(v, (builtins.int, builtins.float, np.integer, np.floating)) or \
                isinstance(v, builtins.bool):
            raise TypeError(f"arange: start/stop/step must be real numbers, got {v!r}")
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if any(isinstance(v, (builtins.float, np.floating)) for v in (start, stop, step)):
        if not all(math.isfinite(v) for v in (start, stop, step)):
            raise ValueError(f"arange: start/stop/step must be finite, got {start}, {stop}, {step}")
        default = dt.DEFAULT_FLOAT
        num = max(math.ceil((stop - start) / step), 0)
    else:
        default = dt.DEFAULT_INT
        start, stop, step = builtins.int(start), builtins.int(stop), builtins.int(step)
        num = len(range(start, stop, step))
    d = default if dtype is None else dt.to_dtype(dtype, "arange")
    if d == dt.bool_ or dt.is_complex(d):
        raise TypeError(f"arange: unsupported dtype {dt.name(d)}")
    return Array(Node(OPS["arange"], (), {"start": start, "step": step, "num": num, "dtype": d,
                                          "shape": (num,)}, (num,), d))


def linspace(start: builtins.float, stop: builtins.float, /, num: builtins.int, *,
             dtype: Any = None, device: Any = None, endpoint: builtins.bool = True) -> Array:
    """``num`` evenly spaced values from start to stop (inclusive unless endpoint=False).

    >>> import braze as bz
    >>> bz.linspace(0, 1, 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"linspace: num must be an int, got {num!r}") from None
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    for v in (start, stop):
        if isinstance(v, builtins.complex) or not math.isfinite(v):
            raise ValueError(f"linspace: start and stop must be finite real numbers, got {v!r}")
    d = dt.DEFAULT_FLOAT if dtype is None else dt.to_dtype(dtype, "linspace")
    if not dt.is_real_floating(d):
        raise TypeError(f"linspace: dtype must be a real floating dtype, got {dt.name(d)}")
    return Array(Node(OPS["linspace"], (), {"start": start, "stop": stop, "num": num,
                                            "endpoint": endpoint, "dtype": d, "shape": (num,)},
                      (num,), d))


def _index_grid(n_rows: int, n_cols: int) -> tuple[Array, Array]:
    rows = arange(n_rows).reshape((n_rows, 1))
    cols = arange(n_cols).reshape((1, n_cols))
    return rows, cols


def eye(n_rows: builtins.int, n_cols: builtins.int | None = None, /, *, k: builtins.int = 0,
        dtype: Any = None, device: Any = None) -> Array:
    """Ones on the k-th diagonal, zeros elsewhere (lazy: a comparison of two ranges).

    >>> import braze as bz
    >>> bz.eye(2, dtype=bz.int8).tolist()
    [[1, 0], [0, 1]]
    """
    n_cols = n_rows if n_cols is None else n_cols
    shape = normalize_shape((n_rows, n_cols), "eye")
    d = _float_or(dtype, "eye")
    rows, cols = _index_grid(*shape)
    # a diagonal past the corners selects nothing: clamp k (any Python int is valid)
    k = builtins.max(-shape[0], builtins.min(operator.index(k), shape[1]))
    on = _ew_op("equal", cols - rows, k)
    from .elementwise import where

    return where(on, full((), 1, dtype=d), full((), 0, dtype=d))


def _triangle(x: Array, k: int, op: str, keep_lower: builtins.bool) -> Array:
    x = as_array(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: requires at least 2 dimensions, got shape {x.shape}")
    rows, cols = _index_grid(*x.shape[-2:])
    diff = cols - rows
    k = builtins.max(-x.shape[-2] - 1, builtins.min(operator.index(k), x.shape[-1] + 1))
    keep = diff <= k if keep_lower else diff >= k
    from .elementwise import where

    return where(keep, x, zeros((), dtype=x.dtype))


def tril(x: Array, /, *, k: builtins.int = 0) -> Array:
    """Lower triangle of the last two axes (elements above the k-th diagonal zeroed).

    >>> import braze as bz
    >>> bz.tril(bz.ones((2, 2), dtype=bz.int8)).tolist()
    [[1, 0], [1, 1]]
    """
    return _triangle(x, k, "tril", True)


def triu(x: Array, /, *, k: builtins.int = 0) -> Array:
    """Upper triangle of the last two axes (elements below the k-th diagonal zeroed).

    >>> import braze as bz
    >>> bz.triu(bz.ones((2, 2), dtype=bz.int8)).tolist()
    [[1, 1], [0, 1]]
    """
    return _triangle(x, k, "triu", False)


def meshgrid(*arrays: Array, indexing: str = "xy") -> list[Array]:
    """Coordinate grids from 1-d arrays (``indexing`` 'xy' or 'ij').

    >>> import braze as bz
    >>> [g.shape for g in bz.meshgrid(bz.arange(2), bz.arange(3))]
    [(3, 2), (3, 2)]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = tuple(as_array(a, "meshgrid") for a in arrays)
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"meshgrid: inputs must be 1-d, got shape {a.shape}")
    if len({a.dtype for a in arrays}) > 1:
        raise TypeError("meshgrid: inputs must share one dtype, got "
                        f"{[dt.name(a.dtype) for a in arrays]}")
    sizes = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    from .manipulation import broadcast_to

    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and len(arrays) >= 2 and i < 2:
            pos = 1 - i
        shape = [1] * len(arrays)
        shape[pos] = a.shape[0]
        out.append(broadcast_to(a.reshape(tuple(shape)), tuple(sizes)))
    return out


# ---------------------------------------------------------------- NumPy's names
def identity(n: builtins.int, dtype: Any = None) -> Array:
    """The ``n`` x ``n`` identity matrix.

    >>> import braze as bz
    >>> bz.identity(2).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return eye(n, dtype=dtype)


def copy(a: Any, order: str = "K", subok: builtins.bool = False) -> Array:
    """An array holding a copy of ``a`` (braze values never change: a snapshot of numpy
    input, the same value for an Array).

    >>> import braze as bz
    >>> bz.copy([1, 2]).tolist()
    [1, 2]
    """
    return asarray(a, copy=True)


def ascontiguousarray(a: Any, dtype: Any = None) -> Array:
    """``a`` as an array (braze arrays have no memory layout to choose); at least 1-d.

    >>> import braze as bz
    >>> bz.ascontiguousarray(3.0).shape
    (1,)
    """
    x = asarray(a, dtype=dtype)
    return x.reshape((1,)) if x.ndim == 0 else x


def asanyarray(a: Any, dtype: Any = None) -> Array:
    """NumPy's name for :func:`asarray` (braze has no array subclasses).

    >>> import braze as bz
    >>> bz.asanyarray([1.0]).dtype
    dtype('float32')
    """
    return asarray(a, dtype=dtype)


def asarray_chkfinite(a: Any, dtype: Any = None) -> Array:
    """:func:`asarray`, refusing NaN or infinite values (evaluates the input).

    >>> import braze as bz
    >>> bz.asarray_chkfinite([1.0, 2.0]).tolist()
    [1.0, 2.0]
    """
    x = asarray(a, dtype=dtype)
    data = x._value()
    if data.dtype.kind in "fc" and not np.isfinite(data).all():
        raise ValueError("asarray_chkfinite: array must not contain infs or NaNs")
    return x


def logspace(start: builtins.float, stop: builtins.float, num: builtins.int = 50,
             endpoint: builtins.bool = True, base: builtins.float = 10.0, dtype: Any = None
             ) -> Array:
    """``base ** linspace(start, stop, num)``.

    >>> import braze as bz
    >>> bz.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    d = _float_or(dtype, "logspace")
    y = linspace(start, stop, num, endpoint=endpoint, dtype=dt.float64)
    return _ew_op("pow", base, y).astype(d)


def geomspace(start: builtins.float, stop: builtins.float, num: builtins.int = 50,
              endpoint: builtins.bool = True, dtype: Any = None) -> Array:
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop`` (same sign;
    the ends exact).

    >>> import braze as bz
    >>> bz.geomspace(1, 1000, 4).tolist()
    [1.0, 10.0, 100.0, 1000.0]
    """
    if start == 0 or stop == 0:
        raise ValueError("geomspace: start and stop must be non-zero")
    if (start < 0) != (stop < 0):
        raise ValueError(f"geomspace: start {start} and stop {stop} must have one sign")
    d = _float_or(dtype, "geomspace")
    sign = -1.0 if start < 0 else 1.0
    lo, hi = math.log10(builtins.abs(start)), math.log10(builtins.abs(stop))
    y = _ew_op("pow", 10.0, linspace(lo, hi, num, endpoint=endpoint,
                                               dtype=dt.float64)) * sign
    if num > 0:
        from .manipulation import concat

        y = concat([full((1,), float(start), dtype=dt.float64), y[1:]]) if num > 1 else \
            full((1,), float(start), dtype=dt.float64)
        if endpoint and num > 1:
            y = concat([y[:-1], full((1,), float(stop), dtype=dt.float64)])
    return y.astype(d)


def tri(N: builtins.int, M: builtins.int | None = None, k: builtins.int = 0, dtype: Any = None
        ) -> Array:
    """Ones at and below the ``k`` diagonal.

    >>> import braze as bz
    >>> bz.tri(2, dtype=bz.int32).tolist()
    [[1, 0], [1, 1]]
    """
    M = N if M is None else M
    rows, cols = _index_grid(*normalize_shape((N, M), "tri"))
    return (cols - rows <= k).astype(_float_or(dtype, "tri"))


def indices(dimensions: Sequence[builtins.int], dtype: Any = None, sparse: builtins.bool = False
            ) -> Any:
    """The index grid of ``dimensions``: one array per axis, stacked (or a tuple of
    broadcastable arrays with ``sparse``).

    >>> import braze as bz
    >>> bz.indices((2, 3)).shape
    (2, 2, 3)
    """
    dims = normalize_shape(dimensions, "indices")
    d = dt.DEFAULT_INT if dtype is None else dt.to_dtype(dtype, "indices")
    from .manipulation import broadcast_to, stack

    parts = [arange(n, dtype=d).reshape(tuple(n if j == i else 1 for j in range(len(dims))))
             for i, n in enumerate(dims)]
    if sparse:
        return tuple(parts)
    if not dims:
        return zeros((0,), dtype=d)
    return stack([broadcast_to(p, dims) for p in parts])


def vander(x: Any, N: builtins.int | None = None, increasing: builtins.bool = False) -> Array:
    """The Vandermonde matrix of 1-d ``x``: columns ``x ** (N - 1) ... x ** 0`` (or
    increasing powers).

    >>> import braze as bz
    >>> bz.vander(bz.asarray([2, 3]), 3).tolist()
    [[4, 2, 1], [9, 3, 1]]
    """
    xa = asarray(x)
    if xa.ndim != 1:
        raise ValueError(f"vander: x must be 1-d, got shape {xa.shape}")
    n = xa.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    p = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    from .manipulation import concat

    if n == 0:
        return zeros((xa.shape[0], 0), dtype=xa.dtype)
    cols = [ones((xa.shape[0], 1), dtype=xa.dtype) if k == 0 else
            _ew_op("pow", xa, builtins.int(k)).reshape((-1, 1)) for k in p]
    return concat(cols, axis=1)


def tril_indices(n: builtins.int, k: builtins.int = 0, m: builtins.int | None = None
                 ) -> tuple[Array, ...]:
    """Row and column indices of the lower triangle (static arrays).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.tril_indices(2)]
    [[0, 1, 1], [0, 0, 1]]
    """
    return tuple(_constant(a, np.int64) for a in np.tril_indices(n, k, m))


def triu_indices(n: builtins.int, k: builtins.int = 0, m: builtins.int | None = None
                 ) -> tuple[Array, ...]:
    """Row and column indices of the upper triangle (static arrays).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.triu_indices(2)]
    [[0, 0, 1], [0, 1, 1]]
    """
    return tuple(_constant(a, np.int64) for a in np.triu_indices(n, k, m))


def diag_indices(n: builtins.int, ndim: builtins.int = 2) -> tuple[Array, ...]:
    """Indices of the main diagonal of an ``(n,) * ndim`` array.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.diag_indices(2)]
    [[0, 1], [0, 1]]
    """
    return tuple(_constant(a, np.int64) for a in np.diag_indices(n, ndim))


def _square_of(arr: Any, op: str) -> Array:
    a = asarray(arr)
    if a.ndim < 2:
        raise ValueError(f"{op}: needs at least 2 dimensions, got shape {a.shape}")
    return a


def tril_indices_from(arr: Any, k: builtins.int = 0) -> tuple[Array, ...]:
    """:func:`tril_indices` for the last two dims of ``arr``.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.tril_indices_from(bz.zeros((2, 2)))]
    [[0, 1, 1], [0, 0, 1]]
    """
    a = _square_of(arr, "tril_indices_from")
    return tril_indices(a.shape[-2], k, a.shape[-1])


def triu_indices_from(arr: Any, k: builtins.int = 0) -> tuple[Array, ...]:
    """:func:`triu_indices` for the last two dims of ``arr``.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.triu_indices_from(bz.zeros((2, 2)), 1)]
    [[0], [1]]
    """
    a = _square_of(arr, "triu_indices_from")
    return triu_indices(a.shape[-2], k, a.shape[-1])


def diag_indices_from(arr: Any) -> tuple[Array, ...]:
    """:func:`diag_indices` for an array with equal dimensions.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.diag_indices_from(bz.zeros((2, 2)))]
    [[0, 1], [0, 1]]
    """
    a = _square_of(arr, "diag_indices_from")
    if len(set(a.shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions must be equal, got {a.shape}")
    return diag_indices(a.shape[0], a.ndim)


def ix_(*args: Any) -> tuple[Array, ...]:
    """Open-mesh index arrays from 1-d sequences (bool ones are turned into indices).

    >>> import braze as bz
    >>> [a.shape for a in bz.ix_([0, 1], [2, 3, 4])]
    [(2, 1), (1, 3)]
    """
    out = []
    n = len(args)
    for i, a in enumerate(args):
        x = asarray(a)
        if x.ndim != 1:
            raise ValueError(f"ix_: inputs must be 1-d, got shape {x.shape}")
        if x.dtype == dt.bool_:
            x = _constant(np.flatnonzero(x._value()), np.int64)
        out.append(x.reshape(tuple(-1 if j == i else 1 for j in range(n))))
    return tuple(out)


def fromfunction(function: Any, shape: Sequence[builtins.int], *, dtype: Any = None,
                 **kwargs: Any) -> Any:
    """``function(*index_grids)``: it is called once with one (lazy) coordinate array
    per axis, as numpy does; dtype defaults to float32.

    >>> import braze as bz
    >>> bz.fromfunction(lambda i, j: i + 10 * j, (2, 2), dtype=bz.int64).tolist()
    [[0, 10], [1, 11]]
    """
    dims = normalize_shape(shape, "fromfunction")
    d = _float_or(dtype, "fromfunction") if dtype is None else dt.to_dtype(dtype, "fromfunction")
    from .manipulation import broadcast_to

    grids = [broadcast_to(arange(n, dtype=d).reshape(tuple(n if j == i else 1
                                                           for j in range(len(dims)))), dims)
             for i, n in enumerate(dims)]
    return function(*grids, **kwargs)


def frombuffer(buffer: Any, dtype: Any = float, count: builtins.int = -1,
               offset: builtins.int = 0) -> Array:
    """A 1-d array read from a bytes-like ``buffer`` (copied: braze owns its data).

    >>> import braze as bz
    >>> bz.frombuffer(b"\\x01\\x02", dtype=bz.uint8).tolist()
    [1, 2]
    """
    return asarray(np.frombuffer(buffer, dtype=dt.to_dtype(dtype, "frombuffer") if dtype
                                 is not float else np.float64, count=count, offset=offset),
                   copy=True)


def fromiter(iterable: Any, dtype: Any, count: builtins.int = -1) -> Array:
    """A 1-d array from an iterable of scalars.

    >>> import braze as bz
    >>> bz.fromiter((i * i for i in range(4)), dtype=bz.int32).tolist()
    [0, 1, 4, 9]
    """
    return asarray(np.fromiter(iterable, dtype=dt.to_dtype(dtype, "fromiter"), count=count),
                   copy=False)


def _window(name: str, M: builtins.int, *args: Any) -> Array:
    """A window function of static length: computed once by numpy, a constant."""
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"{name}: M must be an int, got {M!r}") from None
    return _constant(getattr(np, name)(M, *args), dt.DEFAULT_FLOAT)


def bartlett(M: builtins.int) -> Array:
    """The triangular (Bartlett) window of ``M`` points (float32).

    >>> import braze as bz
    >>> bz.bartlett(3).tolist()
    [0.0, 1.0, 0.0]
    """
    return _window("bartlett", M)


def blackman(M: builtins.int) -> Array:
    """The Blackman window of ``M`` points (float32).

    >>> import braze as bz
    >>> bz.blackman(3).tolist()
    [-1.3877787807814457e-17, 1.0, -1.3877787807814457e-17]
    """
    return _window("blackman", M)


def hamming(M: builtins.int) -> Array:
    """The Hamming window of ``M`` points (float32).

    >>> import braze as bz
    >>> [round(v, 4) for v in bz.hamming(3).tolist()]
    [0.08, 1.0, 0.08]
    """
    return _window("hamming", M)


def hanning(M: builtins.int) -> Array:
    """The Hann window of ``M`` points (float32).

    >>> import braze as bz
    >>> bz.hanning(3).tolist()
    [0.0, 1.0, 0.0]
    """
    return _window("hanning", M)


def kaiser(M: builtins.int, beta: builtins.float) -> Array:
    """The Kaiser window of ``M`` points and shape ``beta`` (float32).

    >>> import braze as bz
    >>> [round(v, 3) for v in bz.kaiser(3, 5.0).tolist()]
    [0.037, 1.0, 0.037]
    """
    return _window("kaiser", M, beta)


__all__ = ["arange", "array", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full",
           "full_like", "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros",
           "zeros_like", "identity", "copy", "ascontiguousarray", "asanyarray",
           "asarray_chkfinite", "logspace", "geomspace", "tri", "indices", "vander",
           "tril_indices", "triu_indices", "diag_indices", "tril_indices_from",
           "triu_indices_from", "diag_indices_from", "ix_", "fromfunction", "frombuffer",
           "fromiter", "bartlett", "blackman", "hamming", "hanning", "kaiser"]


_TEMPORARY_REFS = _calibrate_temporaries()
