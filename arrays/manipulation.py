"""Shape manipulation: reshape, transpose, broadcast, concatenate, stack, flip.

These are *views* in the graph (index maps the fusion compiler folds into the
kernels that read them), except ``concat``, which moves data.

>>> import braze as bz
>>> x = bz.arange(6).reshape((2, 3))
>>> bz.permute_dims(x, (1, 0)).shape, bz.concat([x, x], axis=1).shape
((3, 2), (2, 6))
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import BROADCAST, CONCAT, OPS, PERMUTE, RESHAPE, SLICE
from ..graph.ops import broadcast_shapes as _broadcast_shapes
from .array import Array, _no_out, as_array, cast_node
from .creation import normalize_shape
from .reductions import normalize_axes

_ROLL = OPS["roll"]


def reshape(x: Array, /, shape: Sequence[int], *, copy: bool | None = None) -> Array:
    """Same data, new shape (one dimension may be -1).

    >>> import braze as bz
    >>> bz.reshape(bz.arange(6), (3, -1)).shape
    (3, 2)
    """
    x = as_array(x, "reshape")
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = [operator.index(d) for d in shape]
    except TypeError:
        raise TypeError(f"reshape: shape must be a sequence of ints, got {shape!r}") from None
    if dims.count(-1) > 1:
        raise ValueError(f"reshape: only one dimension can be -1, got {tuple(dims)}")
    if any(d < -1 for d in dims):
        raise ValueError(f"reshape: invalid dimension in {tuple(dims)}")
    if -1 in dims:
        known = 1
        for d in dims:
            if d != -1:
                known *= d
        if known == 0 or x.size % known:
            raise ValueError(f"reshape: cannot reshape array of shape {x.shape} "
                             f"(size {x.size}) into {tuple(dims)}")
        dims[dims.index(-1)] = x.size // known
    new = tuple(dims)
    size = 1
    for d in new:
        size *= d
    if size != x.size:
        raise ValueError(f"reshape: cannot reshape array of shape {x.shape} (size {x.size}) "
                         f"into shape {new}")
    if new == x.shape:
        return x
    node = x._node
    if node.op is RESHAPE:  # reshape of a reshape: one index map
        node = node.inputs[0] if node.inputs else node
    return Array(Node(RESHAPE, (node,), {"shape": new}, new, x.dtype))


def permute_dims(x: Array, /, axes: Sequence[int]) -> Array:
    """Reorder axes: output axis i is input axis ``axes[i]``.

    >>> import braze as bz
    >>> bz.permute_dims(bz.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    x = as_array(x, "permute_dims")
    try:
        ax = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise TypeError(f"permute_dims: axes must be a sequence of ints, got {axes!r}") from None
    if len(ax) != x.ndim:
        raise ValueError(f"permute_dims: axes {ax} do not match an array of {x.ndim} dims")
    norm = tuple(a % x.ndim if -x.ndim <= a < x.ndim else -1 for a in ax)
    if sorted(norm) != list(range(x.ndim)):
        raise ValueError(f"permute_dims: axes {ax} are not a permutation of {x.ndim} dims")
    if norm == tuple(range(x.ndim)):
        return x
    shape = tuple(x.shape[a] for a in norm)
    return Array(Node(PERMUTE, (x._node,), {"axes": norm}, shape, x.dtype))


def transpose(x: Array, /, axes: Sequence[int] | None = None) -> Array:
    """NumPy's transpose: reverse the axes, or permute them by ``axes``.

    >>> import braze as bz
    >>> bz.transpose(bz.zeros((2, 3))).shape
    (3, 2)
    """
    x = as_array(x, "transpose")
    return permute_dims(x, tuple(reversed(range(x.ndim))) if axes is None else axes)


def matrix_transpose(x: Array, /) -> Array:
    """Swap the last two axes.

    >>> import braze as bz
    >>> bz.matrix_transpose(bz.zeros((5, 2, 3))).shape
    (5, 3, 2)
    """
    return as_array(x, "matrix_transpose").mT


def expand_dims(x: Array, /, axis: int | tuple[int, ...] = 0) -> Array:
    """Insert size-1 axes at ``axis`` (positions in the result).

    >>> import braze as bz
    >>> bz.expand_dims(bz.zeros((2, 3)), axis=-1).shape
    (2, 3, 1)
    """
    x = as_array(x, "expand_dims")
    axes = axis if isinstance(axis, tuple) else (axis,)
    out_ndim = x.ndim + len(axes)
    try:
        pos = normalize_axes(axes, out_ndim, "expand_dims")
    except ValueError as e:  # the standard asks for IndexError here
        raise IndexError(str(e)) from None
    it = iter(x.shape)
    shape = tuple(1 if i in pos else next(it) for i in range(out_ndim))
    return reshape(x, shape)


def squeeze(x: Array, /, axis: int | tuple[int, ...] | None = None) -> Array:
    """Remove size-1 axes (``axis``: which ones; None: all of them).

    >>> import braze as bz
    >>> bz.squeeze(bz.zeros((1, 3, 1)), axis=0).shape
    (3, 1)
    """
    x = as_array(x, "squeeze")
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1 "
                                 f"(shape {x.shape})")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Array, /, shape: Sequence[int]) -> Array:
    """``x`` repeated (without copying) to ``shape`` by the broadcasting rules.

    >>> import braze as bz
    >>> bz.broadcast_to(bz.arange(3), (2, 3)).tolist()
    [[0, 1, 2], [0, 1, 2]]
    """
    x = as_array(x, "broadcast_to")
    shape = normalize_shape(shape, "broadcast_to")
    if len(shape) < x.ndim or _broadcast_shapes(x.shape, shape, op="broadcast_to") != shape:
        raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
    if shape == x.shape:
        return x
    return Array(Node(BROADCAST, (x._node,), {"shape": shape}, shape, x.dtype))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that ``shapes`` broadcast to (ValueError if they do not).

    >>> import braze as bz
    >>> bz.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    return _broadcast_shapes(*(normalize_shape(s, "broadcast_shapes") for s in shapes),
                             op="broadcast_shapes")


def broadcast_arrays(*arrays: Array) -> list[Array]:
    """Broadcast arrays against each other.

    >>> import braze as bz
    >>> [a.shape for a in bz.broadcast_arrays(bz.zeros((2, 1)), bz.zeros(3))]
    [(2, 3), (2, 3)]
    """
    arrays = tuple(as_array(a, "broadcast_arrays") for a in arrays)
    shape = _broadcast_shapes(*(a.shape for a in arrays), op="broadcast_arrays")
    return [broadcast_to(a, shape) for a in arrays]


def concat(arrays: Sequence[Array], /, *, axis: int | None = 0) -> Array:
    """Join arrays along an existing axis (``axis=None``: flatten first). Dtypes promote.

    >>> import braze as bz
    >>> bz.concat([bz.zeros(2), bz.ones(1)]).tolist()
    [0.0, 0.0, 1.0]
    """
    if isinstance(arrays, Array) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"concat: expected a list or tuple of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError("concat: need at least one array")
    xs = [as_array(a, "concat") for a in arrays]
    if axis is None:
        xs = [reshape(a, (-1,)) for a in xs]
        axis = 0
    ndim = xs[0].ndim
    if ndim == 0:
        raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
    for a in xs:
        if a.ndim != ndim:
            raise ValueError(f"concat: all arrays need {ndim} dimensions; got shapes "
                             f"{[b.shape for b in xs]}")
    (ax,) = normalize_axes(axis, ndim, "concat")
    for a in xs:
        if any(d != e for i, (d, e) in enumerate(zip(a.shape, xs[0].shape)) if i != ax):
            raise ValueError(f"concat: shapes {[b.shape for b in xs]} differ off axis {ax}")
    dtype = dt.result_type(*(a.dtype for a in xs))
    if len(xs) == 1:
        return xs[0] if xs[0].dtype == dtype else Array(cast_node(xs[0]._node, dtype))
    shape, _ = CONCAT.infer(tuple(a.shape for a in xs), (dtype,), {"axis": ax})  # type: ignore[misc]
    nodes = tuple(cast_node(a._node, dtype) for a in xs)
    return Array(Node(CONCAT, nodes, {"axis": ax}, shape, dtype))


def stack(arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
    """Join same-shape arrays along a new axis.

    >>> import braze as bz
    >>> bz.stack([bz.zeros(2), bz.ones(2)], axis=1).shape
    (2, 2)
    """
    if isinstance(arrays, Array) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"stack: expected a list or tuple of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError("stack: need at least one array")
    xs = [as_array(a, "stack") for a in arrays]
    if len({a.shape for a in xs}) != 1:
        raise ValueError(f"stack: all arrays need one shape; got {[a.shape for a in xs]}")
    (ax,) = normalize_axes(axis, xs[0].ndim + 1, "stack")
    return concat([expand_dims(a, axis=ax) for a in xs], axis=ax)


def flip(x: Array, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """Reverse the order of elements along ``axis`` (all axes by default).

    >>> import braze as bz
    >>> bz.flip(bz.arange(3)).tolist()
    [2, 1, 0]
    """
    x = as_array(x, "flip")
    axes = normalize_axes(axis, x.ndim, "flip")
    if not axes or x.size == 0:
        return x
    slices = tuple((n - 1, -1, -1) if i in axes else (0, n, 1) for i, n in enumerate(x.shape))
    return Array(Node(SLICE, (x._node,), {"slices": slices}, x.shape, x.dtype))


def moveaxis(x: Array, source: int | Sequence[int], destination: int | Sequence[int], /
             ) -> Array:
    """Move axes to new positions; the others keep their order.

    >>> import braze as bz
    >>> bz.moveaxis(bz.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    x = as_array(x, "moveaxis")
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} differ in "
                         "length")
    s = [normalize_axes(a, x.ndim, "moveaxis")[0] for a in src]
    d = [normalize_axes(a, x.ndim, "moveaxis")[0] for a in dst]
    if len(set(s)) != len(s) or len(set(d)) != len(d):
        raise ValueError("moveaxis: repeated axis")
    order = [a for a in range(x.ndim) if a not in s]
    for dest, srcax in sorted(zip(d, s)):
        order.insert(dest, srcax)
    return permute_dims(x, tuple(order))


def _slice_axis(x: Array, axis: int, start: int, stop: int) -> Array:
    slices = tuple((start, stop, 1) if i == axis else (0, n, 1) for i, n in enumerate(x.shape))
    shape = tuple(stop - start if i == axis else n for i, n in enumerate(x.shape))
    return Array(Node(SLICE, (x._node,), {"slices": slices}, shape, x.dtype))


def roll(x: Array, /, shift: int | tuple[int, ...],
         axis: int | tuple[int, ...] | None = None) -> Array:
    """Shift elements along ``axis`` cyclically (``axis=None``: over the flattened array).
    ``axis`` may be passed positionally, as NumPy programs do (``roll(x, 1, 0)``).

    Lazy: one ``roll`` node (a roll of a pending roll merges into it).

    >>> import braze as bz
    >>> bz.roll(bz.arange(5), 2).tolist()
    [3, 4, 0, 1, 2]
    """
    if type(x) is Array and type(shift) is int and type(axis) is int and \
            -x.ndim <= axis < x.ndim:  # roll(x, s, axis), as loops call it: checked cheaply
        total = {axis % x.ndim: shift}
    else:
        x = as_array(x, "roll")
        total = _roll_shifts(x, shift, axis)
        if axis is None:
            return reshape(roll(reshape(x, (-1,)), total[0], axis=0), x.shape)
    node = x._node
    if node.op is _ROLL and node.data is None:  # a roll of a roll: one node
        for ax, s in zip(node.attrs["axes"], node.attrs["shifts"]):
            total[ax] = total.get(ax, 0) + s
        node = node.inputs[0]
    axes = tuple(sorted(ax for ax, s in total.items() if x.shape[ax] and s % x.shape[ax]))
    if not axes:
        return Array(node) if node is not x._node else x
    shifts = tuple(total[ax] % x.shape[ax] for ax in axes)
    return Array(Node(_ROLL, (node,), {"shifts": shifts, "axes": axes}, x.shape, x.dtype))


def _roll_shifts(x: Array, shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None
                 ) -> dict[int, int]:
    """``roll``'s arguments checked and summed per axis (axis None: {0: shift}, over the
    flattened array)."""
    if axis is None:
        if not isinstance(shift, int):
            raise TypeError(f"roll: shift must be an int when axis is None, got {shift!r}")
        return {0: shift}
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) != len(axes):
        if len(shifts) == 1:
            shifts = tuple(shifts) * len(axes)
        else:
            raise ValueError(f"roll: shift {shift} and axis {axis} differ in length")
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes):
        (ax,) = normalize_axes(a, x.ndim, "roll")
        total[ax] = total.get(ax, 0) + operator.index(s)
    return total


def tile(x: Array, repetitions: tuple[int, ...], /) -> Array:
    """``x`` repeated ``repetitions[i]`` times along each axis (lazy: broadcast + reshape).

    >>> import braze as bz
    >>> bz.tile(bz.asarray([1, 2]), (2, 2)).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    x = as_array(x, "tile")
    reps = normalize_shape(repetitions, "tile")
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for r, d in zip(reps, shape) for v in (1, d))
    big = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    return reshape(broadcast_to(reshape(x, inter), big), tuple(r * d for r, d in zip(reps, shape)))


def repeat(x: Array, repeats: int | Array, /, *, axis: int | None = None) -> Array:
    """Repeat each element ``repeats`` times along ``axis`` (``None``: flattened).

    An int ``repeats`` is lazy (broadcast + reshape). An array ``repeats`` gives a
    data-dependent shape: it (only it) is evaluated at the call.

    >>> import braze as bz
    >>> bz.repeat(bz.asarray([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    >>> bz.repeat(bz.asarray([1, 2]), bz.asarray([0, 3])).tolist()
    [2, 2, 2]
    """
    x = as_array(x, "repeat")
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    (ax,) = normalize_axes(axis, x.ndim, "repeat")
    n = x.shape[ax]
    if isinstance(repeats, Array):
        if not dt.is_integer(repeats.dtype) or repeats.ndim > 1:
            raise TypeError(f"repeat: repeats must be an int or a 1-d integer array, got "
                            f"{dt.name(repeats.dtype)} of shape {repeats.shape}")
        from .searching import data_dependent

        r = data_dependent(repeats, "repeat").astype(np.int64)
        if r.size == 1:
            r = np.broadcast_to(r.reshape(()), (n,))
        if r.shape != (n,):
            raise ValueError(f"repeat: repeats of shape {repeats.shape} do not match axis {ax} "
                             f"of size {n}")
        if (r < 0).any():
            raise ValueError("repeat: repeats must be non-negative")
        from .indexing import take

        return take(x, Array(constant(np.repeat(np.arange(n, dtype=np.int64), r))), axis=ax)
    k = operator.index(repeats)
    if k < 0:
        raise ValueError(f"repeat: repeats must be non-negative, got {k}")
    expanded = reshape(x, x.shape[:ax + 1] + (1,) + x.shape[ax + 1:])
    big = broadcast_to(expanded, x.shape[:ax + 1] + (k,) + x.shape[ax + 1:])
    return reshape(big, x.shape[:ax] + (n * k,) + x.shape[ax + 1:])


def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """Split ``x`` into views along ``axis``.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.unstack(bz.asarray([[1, 2], [3, 4]]), axis=1)]
    [[1, 3], [2, 4]]
    """
    x = as_array(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack: needs at least 1 dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, "unstack")
    rest = x.shape[:ax] + x.shape[ax + 1:]
    return tuple(reshape(_slice_axis(x, ax, i, i + 1), rest) for i in range(x.shape[ax]))


def diff(x: Array, /, *, axis: int = -1, n: int = 1, prepend: Array | None = None,
         append: Array | None = None) -> Array:
    """n-th forward difference along ``axis`` (bool: ``!=``), with optional ``prepend`` /
    ``append`` arrays joined first. Lazy.

    >>> import braze as bz
    >>> bz.diff(bz.asarray([1, 4, 9, 16]), n=2).tolist()
    [2, 2]
    """
    x = as_array(x, "diff")
    if x.ndim == 0:
        raise ValueError("diff: needs at least 1 dimension, got a 0-d array")
    if isinstance(n, builtins.bool) or operator.index(n) < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    (ax,) = normalize_axes(axis, x.ndim, "diff")
    parts = [as_array(p, "diff") for p in (prepend,) if p is not None] + [x] + \
        [as_array(p, "diff") for p in (append,) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis=ax)
    from ..graph.ops import OPS
    from .array import elementwise

    op = OPS["not_equal" if x.dtype == dt.bool_ else "subtract"]
    for _ in range(operator.index(n)):
        m = x.shape[ax]
        if m == 0:
            break
        x = elementwise(op, _slice_axis(x, ax, 1, m), _slice_axis(x, ax, 0, m - 1))
    return x


# ---------------------------------------------------------------- NumPy's names
def _np_take(x: Array, idx: np.ndarray, axis: int) -> Array:
    """``x`` at the static indices ``idx`` along ``axis``: a view when they are a range."""
    idx = np.asarray(idx, np.int64)
    n = idx.size
    if n and (n == 1 or (np.diff(idx) == 1).all()):
        return _slice_axis(x, axis, int(idx[0]), int(idx[0]) + n)
    from .indexing import take

    return take(x, Array(constant(idx)), axis=axis)


def concatenate(arrays: Sequence[Array], /, axis: int | None = 0, out: None = None, *,
                dtype: object = None) -> Array:
    """NumPy's name for :func:`concat` (``dtype=``: the result's dtype).

    >>> import braze as bz
    >>> bz.concatenate([bz.zeros((1, 2)), bz.ones((1, 2))], axis=None).tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    _no_out("concatenate", out)
    r = concat(arrays, axis=axis)
    return r if dtype is None else r.astype(dt.to_dtype(dtype, "concatenate"))


def ravel(x: Array, /) -> Array:
    """The flattened array (C order); a view.

    >>> import braze as bz
    >>> bz.ravel(bz.asarray([[1, 2], [3, 4]])).tolist()
    [1, 2, 3, 4]
    """
    return reshape(as_array(x, "ravel"), (-1,))


def swapaxes(x: Array, axis1: int, axis2: int, /) -> Array:
    """Interchange two axes; a view.

    >>> import braze as bz
    >>> bz.swapaxes(bz.zeros((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    x = as_array(x, "swapaxes")
    (a,) = normalize_axes(axis1, x.ndim, "swapaxes")
    (b,) = normalize_axes(axis2, x.ndim, "swapaxes")
    order = list(range(x.ndim))
    order[a], order[b] = b, a
    return permute_dims(x, tuple(order))


def rollaxis(x: Array, axis: int, start: int = 0) -> Array:
    """Roll ``axis`` backwards until it lies before position ``start`` (NumPy's older
    :func:`moveaxis`).

    >>> import braze as bz
    >>> bz.rollaxis(bz.zeros((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    x = as_array(x, "rollaxis")
    (a,) = normalize_axes(axis, x.ndim, "rollaxis")
    if not -x.ndim <= start <= x.ndim:
        raise ValueError(f"rollaxis: start {start} is out of range for {x.ndim} dims")
    start %= x.ndim + 1
    if a < start:
        start -= 1
    return moveaxis(x, a, start) if a != start else x


def flipud(x: Array, /) -> Array:
    """Reverse the first axis.

    >>> import braze as bz
    >>> bz.flipud(bz.asarray([[1, 2], [3, 4]])).tolist()
    [[3, 4], [1, 2]]
    """
    x = as_array(x, "flipud")
    if x.ndim < 1:
        raise ValueError("flipud: needs at least 1 dimension, got a 0-d array")
    return flip(x, axis=0)


def fliplr(x: Array, /) -> Array:
    """Reverse the second axis.

    >>> import braze as bz
    >>> bz.fliplr(bz.asarray([[1, 2], [3, 4]])).tolist()
    [[2, 1], [4, 3]]
    """
    x = as_array(x, "fliplr")
    if x.ndim < 2:
        raise ValueError(f"fliplr: needs at least 2 dimensions, got shape {x.shape}")
    return flip(x, axis=1)


def rot90(x: Array, /, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """Rotate by 90 degrees ``k`` times in the plane of ``axes`` (first toward second).

    >>> import braze as bz
    >>> bz.rot90(bz.asarray([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    x = as_array(x, "rot90")
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must be two axes, got {axes!r}")
    a, b = (normalize_axes(v, x.ndim, "rot90")[0] for v in axes)
    if a == b:
        raise ValueError(f"rot90: axes {axes} must differ")
    k = operator.index(k) % 4
    if k == 0:
        return x
    if k == 2:
        return flip(x, axis=(a, b))
    if k == 1:
        return swapaxes(flip(x, axis=b), a, b)
    return flip(swapaxes(x, a, b), axis=b)


def _atleast(n: int, name: str, arys: tuple[Any, ...]) -> Any:
    from .creation import asarray

    out = []
    for a in arys:
        a = asarray(a)
        if a.ndim < n:
            if n == 3 and a.ndim == 2:
                a = reshape(a, a.shape + (1,))
            elif n == 3 and a.ndim == 1:
                a = reshape(a, (1,) + a.shape + (1,))
            else:
                a = reshape(a, (1,) * (n - a.ndim) + a.shape)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys: Any) -> Any:
    """Each input as an array of at least 1 dimension (one array for one input).

    >>> import braze as bz
    >>> bz.atleast_1d(3.0).shape
    (1,)
    """
    return _atleast(1, "atleast_1d", arys)


def atleast_2d(*arys: Any) -> Any:
    """Each input with at least 2 dimensions (new axes in front).

    >>> import braze as bz
    >>> bz.atleast_2d(bz.arange(3)).shape
    (1, 3)
    """
    return _atleast(2, "atleast_2d", arys)


def atleast_3d(*arys: Any) -> Any:
    """Each input with at least 3 dimensions (1-d ``(n,)`` becomes ``(1, n, 1)``).

    >>> import braze as bz
    >>> bz.atleast_3d(bz.arange(3)).shape
    (1, 3, 1)
    """
    return _atleast(3, "atleast_3d", arys)


def _seq(tup: Any, name: str) -> list[Any]:
    if isinstance(tup, Array) or not isinstance(tup, (list, tuple)):
        raise TypeError(f"{name}: expected a list or tuple of arrays, got {type(tup).__name__}")
    if not tup:
        raise ValueError(f"{name}: need at least one array")
    return list(tup)


def hstack(tup: Sequence[Array], /) -> Array:
    """Join along the second axis (the first for 1-d arrays).

    >>> import braze as bz
    >>> bz.hstack([bz.arange(2), bz.arange(3)]).tolist()
    [0, 1, 0, 1, 2]
    """
    xs = [atleast_1d(a) for a in _seq(tup, "hstack")]
    return concat(xs, axis=0 if xs[0].ndim == 1 else 1)


def vstack(tup: Sequence[Array], /) -> Array:
    """Join along the first axis, 1-d arrays as rows.

    >>> import braze as bz
    >>> bz.vstack([bz.arange(2), bz.arange(2)]).shape
    (2, 2)
    """
    return concat([atleast_2d(a) for a in _seq(tup, "vstack")], axis=0)


def dstack(tup: Sequence[Array], /) -> Array:
    """Join along the third axis (inputs made at least 3-d).

    >>> import braze as bz
    >>> bz.dstack([bz.arange(2), bz.arange(2)]).shape
    (1, 2, 2)
    """
    return concat([atleast_3d(a) for a in _seq(tup, "dstack")], axis=2)


def column_stack(tup: Sequence[Array], /) -> Array:
    """1-d arrays as columns of a 2-d array (2-d arrays joined as they are).

    >>> import braze as bz
    >>> bz.column_stack([bz.arange(2), bz.arange(2)]).tolist()
    [[0, 0], [1, 1]]
    """
    from .creation import asarray

    xs = [asarray(a) for a in _seq(tup, "column_stack")]
    return concat([reshape(a, (-1, 1)) if a.ndim < 2 else a for a in xs], axis=1)


def _split_points(n: int, sections: Any, name: str, even: bool) -> list[int]:
    if isinstance(sections, (builtins.int, np.integer)) and not isinstance(sections,
                                                                           builtins.bool):
        k = operator.index(sections)
        if k <= 0:
            raise ValueError(f"{name}: number of sections must be positive, got {k}")
        if even and n % k:
            raise ValueError(f"{name}: an axis of size {n} does not divide into {k} equal "
                             "sections (array_split allows that)")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return [builtins.sum(sizes[:i]) for i in range(k + 1)]
    try:
        cuts = [operator.index(i) for i in sections]
    except TypeError:
        raise TypeError(f"{name}: indices_or_sections must be an int or a sequence of ints, "
                        f"got {sections!r}") from None
    return [0] + cuts + [n]


def _split(x: Any, sections: Any, axis: int, name: str, even: bool) -> list[Array]:
    x = as_array(x, name)
    if x.ndim == 0:
        raise ValueError(f"{name}: needs at least 1 dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, name)
    n = x.shape[ax]
    pts = _split_points(n, sections, name, even)
    out = []
    for lo, hi in zip(pts[:-1], pts[1:]):
        lo, hi = (builtins.min(builtins.max(v + n if v < 0 else v, 0), n) for v in (lo, hi))
        out.append(_slice_axis(x, ax, lo, builtins.max(lo, hi)))
    return out


def split(x: Array, indices_or_sections: int | Sequence[int], /, axis: int = 0) -> list[Array]:
    """Split into equal sections (an int) or at indices (a sequence); views.

    >>> import braze as bz
    >>> [a.tolist() for a in bz.split(bz.arange(5), [2, 3])]
    [[0, 1], [2], [3, 4]]
    """
    return _split(x, indices_or_sections, axis, "split", True)


def array_split(x: Array, indices_or_sections: int | Sequence[int], /, axis: int = 0
                ) -> list[Array]:
    """:func:`split` allowing unequal sections (the first ones one longer).

    >>> import braze as bz
    >>> [a.tolist() for a in bz.array_split(bz.arange(5), 3)]
    [[0, 1], [2, 3], [4]]
    """
    return _split(x, indices_or_sections, axis, "array_split", False)


def hsplit(x: Array, indices_or_sections: int | Sequence[int], /) -> list[Array]:
    """:func:`split` along the second axis (the first for 1-d arrays).

    >>> import braze as bz
    >>> [a.shape for a in bz.hsplit(bz.zeros((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    x = as_array(x, "hsplit")
    if x.ndim == 0:
        raise ValueError("hsplit: needs at least 1 dimension, got a 0-d array")
    return _split(x, indices_or_sections, 1 if x.ndim > 1 else 0, "hsplit", True)


def vsplit(x: Array, indices_or_sections: int | Sequence[int], /) -> list[Array]:
    """:func:`split` along the first axis of an array of at least 2 dimensions.

    >>> import braze as bz
    >>> [a.shape for a in bz.vsplit(bz.zeros((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    x = as_array(x, "vsplit")
    if x.ndim < 2:
        raise ValueError(f"vsplit: needs at least 2 dimensions, got shape {x.shape}")
    return _split(x, indices_or_sections, 0, "vsplit", True)


def dsplit(x: Array, indices_or_sections: int | Sequence[int], /) -> list[Array]:
    """:func:`split` along the third axis of an array of at least 3 dimensions.

    >>> import braze as bz
    >>> [a.shape for a in bz.dsplit(bz.zeros((1, 1, 4)), 2)]
    [(1, 1, 2), (1, 1, 2)]
    """
    x = as_array(x, "dsplit")
    if x.ndim < 3:
        raise ValueError(f"dsplit: needs at least 3 dimensions, got shape {x.shape}")
    return _split(x, indices_or_sections, 2, "dsplit", True)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def pad(x: Array, pad_width: Any, mode: str = "constant", *, constant_values: Any = 0
        ) -> Array:
    """Pad each axis by ``pad_width`` (an int, ``(before, after)``, or one pair per axis);
    modes ``constant``, ``edge``, ``reflect``, ``symmetric``, ``wrap``. Lazy: a fill and
    a concat (constant), a gather of static indices (the others).

    >>> import braze as bz
    >>> bz.pad(bz.asarray([1, 2, 3]), (1, 2), mode="reflect").tolist()
    [2, 1, 2, 3, 2, 1]
    """
    x = as_array(x, "pad")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    except (ValueError, TypeError):
        raise ValueError(f"pad: pad_width {pad_width!r} does not fit an array of shape "
                         f"{x.shape}") from None
    if (widths < 0).any():
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r}")
    cv = np.broadcast_to(np.asarray(constant_values), (x.ndim, 2)) if mode == "constant" \
        else None
    from .creation import full

    out = x
    for ax, (lo, hi) in enumerate(widths.tolist()):
        if lo == 0 and hi == 0:
            continue
        n = out.shape[ax]
        if mode == "constant" and cv is not None:
            parts = []
            for w, v in ((lo, cv[ax, 0]), (0, None), (hi, cv[ax, 1])):
                if v is None:
                    parts.append(out)
                elif w:
                    shape = out.shape[:ax] + (w,) + out.shape[ax + 1:]
                    parts.append(full(shape, v.item(), dtype=out.dtype))
            out = concat(parts, axis=ax)
            continue
        if n == 0:
            raise ValueError(f"pad: can't extend the empty axis {ax} (shape {x.shape}) with "
                             f"mode {mode!r}")
        out = _np_take(out, np.pad(np.arange(n), (lo, hi), mode=mode), ax)  # type: ignore[call-overload]
    return out


def append(x: Array, values: Any, /, axis: int | None = None) -> Array:
    """``x`` with ``values`` joined at the end (``axis=None``: both flattened).

    >>> import braze as bz
    >>> bz.append(bz.asarray([1, 2]), bz.asarray([[3]])).tolist()
    [1, 2, 3]
    """
    from .creation import asarray

    x, v = as_array(x, "append"), asarray(values)
    if axis is None:
        return concat([ravel(x), ravel(v)], axis=0)
    return concat([x, v], axis=axis)


def _flat_or(x: Array, axis: int | None, name: str) -> tuple[Array, int]:
    if axis is None:
        return ravel(x), 0
    return x, normalize_axes(axis, x.ndim, name)[0]


def delete(x: Array, obj: Any, /, axis: int | None = None) -> Array:
    """``x`` without the entries ``obj`` (an int, a slice, ints or a bool mask) along
    ``axis`` (None: flattened). Lazy: the kept indices are static.

    >>> import braze as bz
    >>> bz.delete(bz.arange(5), [0, 3]).tolist()
    [1, 2, 4]
    """
    x, ax = _flat_or(as_array(x, "delete"), axis, "delete")
    if isinstance(obj, Array):
        obj = np.asarray(obj)
    try:
        keep = np.delete(np.arange(x.shape[ax]), obj)
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"delete: {e} (axis {ax} of shape {x.shape})") from None
    return _np_take(x, keep, ax) if keep.size else _slice_axis(x, ax, 0, 0)


def insert(x: Array, obj: Any, values: Any, /, axis: int | None = None) -> Array:
    """``x`` with ``values`` inserted before index (or indices) ``obj`` along ``axis``
    (None: flattened). Lazy: a concat and a gather of static indices.

    >>> import braze as bz
    >>> bz.insert(bz.asarray([1, 2, 3]), 1, bz.asarray([9, 8])).tolist()
    [1, 9, 8, 2, 3]
    """
    from .creation import asarray

    x, ax = _flat_or(as_array(x, "insert"), axis, "insert")
    v = asarray(values).astype(x.dtype)
    n = x.shape[ax]
    if isinstance(obj, slice):
        obj = np.arange(*obj.indices(n))
    scalar = np.ndim(obj) == 0
    pos = np.atleast_1d(np.asarray(obj, dtype=np.int64))
    if ((pos < -n) | (pos > n)).any():
        raise IndexError(f"insert: index {obj} is out of bounds for axis {ax} with size {n}")
    if scalar:
        if v.ndim < x.ndim:
            v = reshape(v, (1,) * (x.ndim - v.ndim) + v.shape)
        v = moveaxis(v, 0, ax) if v.ndim == x.ndim and x.ndim else v
        m = v.shape[ax] if v.ndim == x.ndim and x.ndim else 1
        pos = np.repeat(pos, m)
    m = pos.size
    target = x.shape[:ax] + (m,) + x.shape[ax + 1:]
    try:
        v = broadcast_to(v, target)
    except ValueError:
        raise ValueError(f"insert: values of shape {v.shape} do not fit the inserted region "
                         f"{target}") from None
    order = np.insert(np.arange(n), pos, np.arange(n, n + m))
    return _np_take(concat([x, v], axis=ax), order, ax)


def resize(x: Array, new_shape: Any, /) -> Array:
    """An array of ``new_shape`` filled with ``x``'s elements repeated (C order).

    >>> import braze as bz
    >>> bz.resize(bz.asarray([1, 2, 3]), (2, 4)).tolist()
    [[1, 2, 3, 1], [2, 3, 1, 2]]
    """
    x = ravel(as_array(x, "resize"))
    shape = normalize_shape(new_shape, "resize")
    total = int(np.prod(shape))
    if x.size == 0 or total == 0:
        from .creation import zeros

        return zeros(shape, dtype=x.dtype)
    reps = -(-total // x.size)
    return reshape(_slice_axis(tile(x, (reps,)), 0, 0, total), shape)


def trim_zeros(x: Array, /, trim: str = "fb") -> Array:
    """1-d ``x`` without its leading (``f``) and/or trailing (``b``) zeros.

    Data-dependent shape: evaluates ``x`` (only it) at the call.

    >>> import braze as bz
    >>> bz.trim_zeros(bz.asarray([0, 1, 0, 2, 0])).tolist()
    [1, 0, 2]
    """
    x = as_array(x, "trim_zeros")
    if x.ndim != 1:
        raise ValueError(f"trim_zeros: needs a 1-d array, got shape {x.shape}")
    from .searching import data_dependent

    nz = np.flatnonzero(data_dependent(x, "trim_zeros"))
    if nz.size == 0:
        return _slice_axis(x, 0, 0, 0)
    lo = int(nz[0]) if "f" in trim.lower() else 0
    hi = int(nz[-1]) + 1 if "b" in trim.lower() else x.shape[0]
    return _slice_axis(x, 0, lo, hi)


def block(arrays: Any, /) -> Array:
    """Assemble an array from nested lists of blocks (the innermost joined along the
    last axis).

    >>> import braze as bz
    >>> bz.block([[bz.zeros((1, 1)), bz.ones((1, 2))], [bz.ones((1, 3))]]).tolist()
    [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    from .creation import asarray

    def depth(a: Any) -> int:
        if isinstance(a, list):
            if not a:
                raise ValueError("block: lists cannot be empty")
            ds = {depth(b) for b in a}
            if len(ds) != 1:
                raise ValueError("block: list nesting depths differ")
            return 1 + ds.pop()
        if isinstance(a, tuple):
            raise TypeError("block: blocks are nested lists, not tuples")
        return 0

    d = depth(arrays)
    leaves: list[Array] = []

    def collect(a: Any) -> None:
        if isinstance(a, list):
            for b in a:
                collect(b)
        else:
            leaves.append(asarray(a))

    collect(arrays)
    nd = builtins.max([d] + [a.ndim for a in leaves])

    def build(a: Any, level: int) -> Array:
        if not isinstance(a, list):
            b = asarray(a)
            return reshape(b, (1,) * (nd - b.ndim) + b.shape)
        return concat([build(b, level + 1) for b in a], axis=-(d - level))

    return build(arrays, 0)


def diagonal(x: Array, /, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """NumPy's diagonal: the ``offset`` diagonal of the planes ``(axis1, axis2)``,
    appended as the last axis (:func:`braze.linalg.diagonal` uses the last two axes).

    >>> import braze as bz
    >>> bz.diagonal(bz.asarray([[1, 2], [3, 4]])).tolist()
    [1, 4]
    """
    x = as_array(x, "diagonal")
    if x.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 dimensions, got shape {x.shape}")
    a, b = (normalize_axes(v, x.ndim, "diagonal")[0] for v in (axis1, axis2))
    if a == b:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    from .linalg import diagonal as _diag

    return _diag(moveaxis(x, (a, b), (-2, -1)), offset=offset)


def diag(v: Array, /, k: int = 0) -> Array:
    """The ``k`` diagonal of a 2-d array, or a 2-d array with 1-d ``v`` on its ``k``
    diagonal (zeros elsewhere). Lazy.

    >>> import braze as bz
    >>> bz.diag(bz.asarray([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    from .creation import asarray, eye

    v = asarray(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, offset=k)
    if v.ndim != 1:
        raise ValueError(f"diag: needs a 1-d or 2-d array, got shape {v.shape}")
    n = v.shape[0] + builtins.abs(k)
    from .creation import zeros
    from .elementwise import where

    vv = concat([v, zeros((builtins.abs(k),), dtype=v.dtype)]) if k else v
    vv = reshape(vv, (n, 1) if k >= 0 else (1, n))
    return where(eye(n, n, k=k, dtype=dt.bool_), vv, zeros((), dtype=v.dtype))


def diagflat(v: Array, /, k: int = 0) -> Array:
    """2-d array with the flattened input on its ``k`` diagonal.

    >>> import braze as bz
    >>> bz.diagflat(bz.asarray([[1, 2]]), k=1).tolist()
    [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    """
    from .creation import asarray

    return diag(ravel(asarray(v)), k=k)


def shape(x: Any, /) -> tuple[int, ...]:
    """The shape of an array (or of anything :func:`asarray` takes).

    >>> import braze as bz
    >>> bz.shape([[1, 2, 3]])
    (1, 3)
    """
    from .creation import asarray

    return asarray(x).shape


def ndim(x: Any, /) -> int:
    """The number of dimensions.

    >>> import braze as bz
    >>> bz.ndim(bz.zeros((2, 3)))
    2
    """
    from .creation import asarray

    return asarray(x).ndim


def size(x: Any, /, axis: int | None = None) -> int:
    """The number of elements (along ``axis``, or in all).

    >>> import braze as bz
    >>> bz.size(bz.zeros((2, 3))), bz.size(bz.zeros((2, 3)), 1)
    (6, 3)
    """
    from .creation import asarray

    a = asarray(x)
    return a.size if axis is None else a.shape[normalize_axes(axis, a.ndim, "size")[0]]


__all__ = ["reshape", "permute_dims", "transpose", "matrix_transpose", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "broadcast_shapes", "concat", "stack", "flip",
           "moveaxis", "roll", "tile", "repeat", "unstack", "diff",
           "concatenate", "ravel", "swapaxes", "rollaxis", "flipud", "fliplr", "rot90",
           "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "dstack",
           "column_stack", "split", "array_split", "hsplit", "vsplit", "dsplit", "pad", "append",
           "delete", "insert", "resize", "trim_zeros", "block", "diagonal", "diag", "diagflat",
           "shape", "ndim", "size"]
