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

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import BROADCAST, CONCAT, PERMUTE, RESHAPE, SLICE
from ..graph.ops import broadcast_shapes as _broadcast_shapes
from .array import Array, as_array, cast_node
from .creation import normalize_shape
from .reductions import normalize_axes


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


def roll(x: Array, /, shift: int | tuple[int, ...], *,
         axis: int | tuple[int, ...] | None = None) -> Array:
    """Shift elements along ``axis`` cyclically (``axis=None``: over the flattened array).

    Lazy: two slices and a concat per axis.

    >>> import braze as bz
    >>> bz.roll(bz.arange(5), 2).tolist()
    [3, 4, 0, 1, 2]
    """
    x = as_array(x, "roll")
    if axis is None:
        if not isinstance(shift, int):
            raise TypeError(f"roll: shift must be an int when axis is None, got {shift!r}")
        return reshape(roll(reshape(x, (-1,)), shift, axis=0), x.shape)
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
    out = x
    for ax, s in total.items():
        n = x.shape[ax]
        if n == 0 or s % n == 0:
            continue
        k = s % n
        out = concat([_slice_axis(out, ax, n - k, n), _slice_axis(out, ax, 0, n - k)], axis=ax)
    return out


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


__all__ = ["reshape", "permute_dims", "transpose", "matrix_transpose", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "broadcast_shapes", "concat", "stack", "flip",
           "moveaxis", "roll", "tile", "repeat", "unstack", "diff"]

