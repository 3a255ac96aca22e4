"""Indexing: basic (ints, slices, ``...``, ``None``) and advanced (integer arrays,
boolean masks), ``take`` and ``take_along_axis``.

``x[key]`` with a basic key records one strided ``slice`` view (plus a reshape that
drops integer-indexed axes and inserts ``None`` axes). Integer-array keys record a
lazy ``gather`` library op (NumPy's advanced-indexing semantics; negative indices
count from the end; out-of-range indices raise at eval). A boolean mask has a
data-dependent result shape: the mask (only the mask) is evaluated at the call and
turned into integer indices.

``x[key] = v`` has value semantics for every key: views taken earlier keep the old
value. It rebinds ``x`` to a new node (``slice_update`` or ``scatter``), except where
nobody could tell the difference: with a basic key into an evaluated ``x`` whose buffer
only ``x`` holds (no other array, view, pending graph or numpy caller shares it), the
value is evaluated and written into that buffer in place, as numpy does (a loop of
``B[1:-1] = f(A)`` then copies one region per step, not the whole array).

A scalar read of an evaluated array (``x[i, j]``, all integer indices) is a copy of the
element with no graph node; arithmetic on such values runs at once (see
``braze.arrays.array``), so a loop of scalar steps builds no graph.

>>> import braze as bz
>>> x = bz.arange(12).reshape((3, 4))
>>> x[1, ::-2].tolist(), x[..., None, 0].shape
([7, 5], (3, 1))
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _core
from ..backends import current as _current_backend
from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import BROADCAST, GATHER, OPS, SCATTER, SLICE, SLICE_UPDATE, index_shape
from . import array as _array
from .array import _SCALARS, TRACING, Array, as_array, cast_node

Slices = tuple[tuple[int, int, int], ...]


def _normalize(x: Array, key: Any, op: str) -> tuple[Slices, tuple[int, ...], tuple[int, ...]]:
    """(per-axis (start, stop, step), sliced shape, final shape) for a basic index."""
    shape = x._node.shape
    if type(key) is tuple and len(key) <= len(shape) or type(key) is slice and shape:
        fast = _slices_only(key if type(key) is tuple else (key,), shape)
        if fast is not None:
            return fast
    items = key if isinstance(key, tuple) else (key,)
    n_ellipsis = sum(1 for k in items if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    n_axes = sum(1 for k in items if k is not None and k is not Ellipsis)
    if n_axes > x.ndim:
        raise IndexError(f"{op}: too many indices for an array of shape {x.shape}: "
                         f"{n_axes} were indexed")
    if n_ellipsis:
        i = next(j for j, k in enumerate(items) if k is Ellipsis)
        items = items[:i] + (slice(None),) * (x.ndim - n_axes) + items[i + 1:]
    else:
        items = items + (slice(None),) * (x.ndim - n_axes)
    slices: list[tuple[int, int, int]] = []
    sliced: list[int] = []
    final: list[int] = []
    axis = 0
    for k in items:
        if k is None:
            final.append(1)
            continue
        n = x.shape[axis]
        if isinstance(k, slice):
            try:
                start, stop, step = k.indices(n)
            except (TypeError, ValueError) as e:
                raise IndexError(f"{op}: invalid slice {k} for axis {axis}: {e}") from None
            length = len(range(start, stop, step))
            if length == 0:  # canonical empty slice (a start of -1 would mean "last")
                start, stop, step = 0, 0, 1
            slices.append((start, stop, step))
            sliced.append(length)
            final.append(length)
        else:
            if isinstance(k, bool) or (isinstance(k, Array) and k.dtype == dt.bool_):
                raise IndexError(f"{op}: boolean-mask indexing is not supported yet (basic "
                                 "indexing only: ints, slices, ..., None)")
            if isinstance(k, Array) and k.ndim != 0:
                raise IndexError(f"{op}: integer-array indexing is not supported yet (basic "
                                 "indexing only: ints, slices, ..., None)")
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(f"{op}: only integers, slices, '...' and None are valid "
                                 f"indices, got {type(k).__name__}") from None
            if not -n <= i < n:
                raise IndexError(f"{op}: index {i} is out of bounds for axis {axis} with "
                                 f"size {n}")
            i %= n
            slices.append((i, i + 1, 1))
            sliced.append(1)
        axis += 1
    return tuple(slices), tuple(sliced), tuple(final)


def _slices_only(key: tuple[Any, ...], shape: tuple[int, ...]
                 ) -> tuple[Slices, tuple[int, ...], tuple[int, ...]] | None:
    """:func:`_normalize` of a key of plain slices only (a stencil's ``A[1:-1, :-2]``),
    without its general machinery; None for any other key."""
    slices: list[tuple[int, int, int]] = []
    lengths: list[int] = []
    for k, n in zip(key, shape):
        if type(k) is not slice or not _plain(k):
            return None
        start, stop, step = k.indices(n)
        length = len(range(start, stop, step))
        if length == 0:  # canonical empty slice, as _normalize writes it
            start, stop, step = 0, 0, 1
        slices.append((start, stop, step))
        lengths.append(length)
    for n in shape[len(key):]:
        slices.append((0, n, 1))
        lengths.append(n)
    out = tuple(lengths)
    return tuple(slices), out, out


def _int_key(key: Any, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """``key`` as in-range non-negative indices when it is one Python int per axis, else
    None (the general path decides, and raises with its messages)."""
    if type(key) is int:
        key = (key,)
    elif type(key) is not tuple:
        return None
    if len(key) != len(shape):
        return None
    out = []
    for k, n in zip(key, shape):
        if type(k) is not int or not -n <= k < n:
            return None
        out.append(k + n if k < 0 else k)
    return tuple(out)


def _plain(k: slice) -> bool:
    """A slice of Python ints and Nones, step not 0 (numpy reads it as braze does)."""
    return (k.start is None or type(k.start) is int) and (
        k.stop is None or type(k.stop) is int) and (
        k.step is None or (type(k.step) is int and k.step != 0))


def getitem(x: Array, key: Any) -> Any:
    """``x[key]`` (see the module docstring)."""
    data = x._node.data
    if type(data) is np.ndarray and not TRACING.get():
        if type(key) is int or type(key) is tuple:
            ints = _int_key(key, data.shape)
            if ints is not None:
                # an element of an evaluated array is a numpy scalar, as numpy gives: a copy
                # (no view keeps x's buffer shared), and a scalar loop runs at numpy speed
                return data[ints]
        if type(key) is slice and data.ndim and _plain(key):
            view = data[key]  # (the contiguous case of the general path below, sooner)
            if view.flags.c_contiguous:
                return Array(constant(view))
    if _is_advanced(key):
        x2, spec, idx = _advanced(x, key, "getitem")
        return Array(Node(GATHER, (x2._node, *(i._node for i in idx)), {"spec": spec},
                          _shape(x2, spec, idx, "getitem"), x.dtype))
    slices, sliced, final = _normalize(x, key, "getitem")
    node = x._node
    if node.data is not None and isinstance(node.data, np.ndarray) and not TRACING.get():
        # A contiguous part of an evaluated array (x[i], x[i:j]...) is a numpy view of its
        # data, a new leaf. As a SLICE node the index would be part of every graph built
        # on it, so a loop over x[i] would optimize a new graph per i; as a leaf, the
        # graphs are one. (A strided part stays a SLICE: kernels read it in place, where
        # a leaf would be copied to row-major first.)
        view = node.data[tuple(slice(a, b if b >= 0 or c > 0 else None, c)
                               for a, b, c in slices)]
        if view.flags.c_contiguous:
            return Array(constant(view.reshape(final)))
    if any(s != (0, n, 1) for s, n in zip(slices, x.shape)):
        node = Node(SLICE, (node,), {"slices": slices}, sliced, x.dtype)
    out = Array(node)
    if final != sliced:
        out = out.reshape(final)
    return out


def _assigned_value(x: Array, value: Any, region: tuple[int, ...]) -> Array:
    """``value`` of an assignment into ``x``: a scalar or array broadcast to ``region``
    (cast to ``x.dtype`` by the caller; complex into a real array is refused)."""
    v = _assigned(x, value)
    from .manipulation import broadcast_to

    try:
        return broadcast_to(v, region)
    except ValueError:
        raise ValueError(f"setitem: value of shape {v.shape} cannot be broadcast to the "
                         f"indexed region of shape {region}") from None


def _assigned(x: Array, value: Any) -> Array:
    """``value`` of an assignment into ``x`` as an array, not yet broadcast or cast."""
    if isinstance(value, _SCALARS):
        from .creation import full

        v = full((), value, dtype=x.dtype) if not isinstance(value, bool) or \
            x.dtype == dt.bool_ else full((), value).astype(x.dtype)
    else:
        v = as_array(value, "setitem")
        if dt.is_complex(v.dtype) and not dt.is_complex(x.dtype):
            raise TypeError(f"setitem: cannot store complex values in a {dt.name(x.dtype)} array")
    return v


def setitem(x: Array, key: Any, value: Any) -> None:
    """``x[key] = value``: value broadcasts to the region and is cast to ``x.dtype``."""
    if (type(key) is int or type(key) is tuple) and not TRACING.get():
        ints = _int_key(key, x._node.shape)
        if ints is not None and _scalar_store(x, ints, value):
            return
    evaluated = x._node.data is not None  # (holding the data here would share it)
    if _is_advanced(key):
        return _advanced_setitem(x, key, value)
    slices, sliced, final = _normalize(x, key, "setitem")
    if evaluated and not TRACING.get():
        v = _assigned(x, value)
        if _store(x, key, v, final):
            return
        value = v
    v = _assigned_value(x, value, final)
    v = v.reshape(sliced)
    node = cast_node(v._node, x.dtype)
    x._node = Node(SLICE_UPDATE, (x._node, node), {"slices": slices}, x.shape, x.dtype)
    if x._node.depth >= _array.CUT_DEPTH:
        _array.cut(x._node, itself=True)


# ---------------------------------------------------------------- assignment in place
def _owned(x: Array, counts: bool = False,
           pooled: Callable[[np.ndarray], bool] | None = None) -> Any:
    """``x``'s buffer, when ``x`` alone holds it (no other Array or pending graph holds
    its node; no view, numpy caller or cache holds its data), else None; it may still be
    read-only (the caller's write finds out). (``counts``: the references as seen here,
    for :data:`_SOLE`.) ``pooled(base)``: whether the data's base is a buffer of the
    backend's pool (one more reference to it, the pool's own; its memory may be a
    mapping the pool made)."""
    node = x._node
    data = node.data
    if type(data) is not np.ndarray:
        return None
    base = data.base
    pool_ref = int(base is not None and pooled is not None and type(base) is np.ndarray
                   and pooled(base))
    if not pool_ref and base is not None and (type(base) is not np.ndarray or
                                              base.base is not None):
        return None  # memory braze does not own (a buffer exported by someone else)
    # references to the node, to its data and to the data's base, compared with those of
    # an array nobody shares (read by this same code, so the frame's own ones cancel)
    refs = (sys.getrefcount(node), sys.getrefcount(data),
            0 if base is None else sys.getrefcount(base) - pool_ref)
    if counts:
        return refs
    sole = _SOLE
    if refs[0] > sole[0] or refs[1] > sole[1] or (refs[2] and refs[2] > sole[2]):
        return None
    return data


def _calibrate() -> tuple[int, int, int]:
    a = Array(constant(np.zeros(2, np.float32)))
    n, d, _ = _owned(a, counts=True)
    del a
    storage = np.zeros(8, np.uint8)
    b = Array(Node(SLICE, (), {}, (2,), np.dtype(np.float32), storage.view(np.float32)))
    del storage
    return n, d, _owned(b, counts=True)[2]


_SOLE = _calibrate()


def _enable_native_elements() -> None:
    """Let ``Array``'s native base answer element reads and stores (``csrc/elements.cpp``)
    once numpy's object layout checks out, with the reference counts of a sole holder
    as it reads them (the same two arrays :func:`_calibrate` reads)."""
    from ..backends.replay import register_numpy_layout

    if not register_numpy_layout():
        return
    a = Array(constant(np.zeros(2, np.float32)))
    node, data, _ = _core.element_refs(a)
    del a
    storage = np.zeros(8, np.uint8)
    b = Array(Node(SLICE, (), {}, (2,), np.dtype(np.float32), storage.view(np.float32)))
    del storage
    _core.element_access(Node, node, data, _core.element_refs(b)[2])
    for t in _DIRECT_ELEMENTS:
        d = np.dtype(t)
        probe = np.array([-3.25 - 0.5j if d.kind == "c" else 0x5A], d)  # (bytes not all equal)
        s = probe[0]
        value = probe.tobytes()
        boxed = _core.scalar_box(t, value)
        if type(s) is t and t.__basicsize__ >= object.__basicsize__ + d.itemsize and \
                _core.scalar_bytes(s, d.itemsize) == value and type(boxed) is t and \
                np.array([boxed], d).tobytes() == value and np.dtype(t) is probe.dtype:
            _core.element_type(d, t, d.itemsize, 8 * d.itemsize if d.kind == "f" and
                               d.itemsize >= 4 else 0)


# dtypes whose elements the native paths read and write in the buffer itself (numpy's
# bool scalars are two singletons, so bool goes through numpy's subscript)
_DIRECT_ELEMENTS = (np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8,
                    np.uint16, np.uint32, np.uint64, np.float16, np.complex64, np.complex128)


_enable_native_elements()


def _scalar_store(x: Array, ints: int | tuple[int, ...], value: Any) -> bool:
    """``x[i, j, ...] = value`` written into ``x``'s own buffer (a pending ``x`` is
    evaluated first: a loop of element stores then runs in place, as numpy's does);
    False: not possible here (the general path decides, raising as it does)."""
    t = type(value)
    kind = x._node.dtype.kind
    if t is float or isinstance(value, np.floating):
        if kind != "f":
            return False
        v = value
    elif t is Array:
        v = value._node.data
        if v is None or value.ndim != 0 or value.dtype != x.dtype:
            return False
    elif isinstance(value, np.generic):
        if value.dtype != x.dtype:
            return False
        v = value
    elif t is int:
        if kind not in "iu" or not _int_fits(value, x.dtype):
            return False
        v = value
    else:
        return False
    if x._node.data is None:
        _evaluate(x._node)
    data = _owned(x)  # (no local may hold x's node or data here: it counts references)
    if data is not None:
        try:
            data[ints] = v
        except ValueError:
            pass  # read-only memory (a broadcast constant, a buffer braze was lent)
        else:
            if data.ndim == 1 and t is not Array:
                x._node._arm_store(t)  # the next stores of this type: the native path
            return True
    # copy on write: x's old buffer stays with whatever else holds it, the new one is
    # x's alone (its next stores go in place, as numpy's do)
    node = x._node
    if type(node.data) is not np.ndarray:
        return False
    data = np.array(node.data, copy=True)
    data[ints] = v
    x._node = Node(SLICE_UPDATE, (), {}, node.shape, node.dtype, data)
    return True


def _evaluate(node: Node) -> None:
    """Evaluate ``node`` for element stores; ``bz.zeros`` / ``bz.full`` (a broadcast
    scalar, as a loop of stores starts) by numpy's fill, without the compiler."""
    src = node.inputs[0] if node.op is BROADCAST else None
    if src is not None and src.data is not None and not src.shape:
        node.data = np.full(node.shape, src.data, node.dtype)
        node.inputs, node.depth = (), 0
    else:
        _current_backend().evaluate([node])


def _int_fits(v: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return info.min <= v <= info.max


def _store(x: Array, key: Any, v: Array, region: tuple[int, ...]) -> bool:
    """``x[key] = v`` (a basic key) written into ``x``'s own buffer: ``v`` is evaluated
    first (its graph may read ``x``: only then does ``x`` hold its buffer alone), then
    copied into the region. False: ``x`` shares its buffer (or the key is not one numpy
    reads alike); ``v`` may be evaluated by then, which the caller keeps."""
    try:
        shape = np.broadcast_shapes(v.shape, region)
    except ValueError:
        shape = None
    if shape != region:
        raise ValueError(f"setitem: value of shape {v.shape} cannot be broadcast to the "
                         f"indexed region of shape {region}")
    items = key if isinstance(key, tuple) else (key,)
    np_key: list[Any] = []
    for k in items:
        if k is None or k is Ellipsis:
            np_key.append(k)
        elif isinstance(k, slice):
            if not _plain(k):
                return False
            np_key.append(k)
        else:
            np_key.append(operator.index(k))
    if v.dtype != x.dtype:
        v = Array(cast_node(v._node, x.dtype))
    vdata = v._value()
    data = _owned(x)
    if data is None or not data.flags.writeable:
        return False
    _current_backend().assign(data, tuple(np_key), vdata)
    return True


def _is_advanced(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, Array):
            if k.ndim != 0 or k.dtype == dt.bool_:
                return True
        elif isinstance(k, (list, np.ndarray, bool, np.bool_)):
            return True
    return False


def _advanced(x: Array, key: Any, op: str) -> tuple[Array, tuple[Any, ...], list[Array]]:
    """(x, possibly with new axes for 0-d masks; index spec; index arrays)."""
    from .creation import asarray

    items = list(key) if isinstance(key, tuple) else [key]
    for i, k in enumerate(items):
        if isinstance(k, (list, np.ndarray, bool, np.bool_)):
            items[i] = asarray(k)
            if items[i].size == 0 and isinstance(k, list):
                items[i] = items[i].astype(dt.DEFAULT_INDEX)
    # masks cover mask.ndim axes; 0-d masks add one
    n_axes = 0
    for k in items:
        if isinstance(k, Array) and k.dtype == dt.bool_:
            n_axes += k.ndim
        elif k is not None and k is not Ellipsis:
            n_axes += 1
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if n_axes > x.ndim:
        raise IndexError(f"{op}: too many indices for an array of shape {x.shape}: "
                         f"{n_axes} were indexed")
    if Ellipsis in [k for k in items if not isinstance(k, Array)]:
        j = next(i for i, k in enumerate(items) if not isinstance(k, Array) and k is Ellipsis)
        items[j:j + 1] = [slice(None)] * (x.ndim - n_axes)
    else:
        items += [slice(None)] * (x.ndim - n_axes)
    spec: list[Any] = []
    idx: list[Array] = []
    axis = 0
    for k in items:
        if k is None:
            spec.append(None)
            continue
        if isinstance(k, Array) and k.dtype == dt.bool_:
            if k.ndim == 0:  # a 0-d mask adds an axis of length 1 (True) or 0 (False)
                x = x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])
                spec.append(len(idx))
                from .searching import data_dependent

                n = int(bool(data_dependent(k, f"{op} (boolean mask)")))
                idx.append(asarray(np.arange(n, dtype=np.int64), copy=False))
                axis += 1
                continue
            axes = x.shape[axis:axis + k.ndim]
            if len(axes) != k.ndim or any(m not in (a, 0) for m, a in zip(k.shape, axes)):
                raise IndexError(f"{op}: boolean mask of shape {k.shape} does not match the "
                                 f"indexed axes {axes} of shape {x.shape}")
            from .searching import data_dependent

            # (a mask with a zero-size dimension selects nothing, whatever the axis size:
            # the conformance suite's reading of the standard; numpy raises)
            nonzero = np.nonzero(data_dependent(k, f"{op} (boolean mask)")) if k.shape == axes \
                else [np.zeros(0, np.int64)] * k.ndim
            for nz in nonzero:  # the mask only
                spec.append(len(idx))
                idx.append(Array(constant(nz.astype(np.int64))))
            axis += k.ndim
            continue
        n = x.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if len(range(start, stop, step)) == 0:
                start, stop, step = 0, 0, 1
            spec.append((start, stop, step))
        elif isinstance(k, Array):
            if not dt.is_integer(k.dtype):
                raise IndexError(f"{op}: index arrays must be integer or bool, got "
                                 f"{dt.name(k.dtype)}")
            spec.append(len(idx))
            idx.append(k)
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(f"{op}: only integers, slices, '...', None, integer arrays "
                                 f"and boolean masks are valid indices, got "
                                 f"{type(k).__name__}") from None
            if not -n <= i < n:
                raise IndexError(f"{op}: index {i} is out of bounds for axis {axis} with "
                                 f"size {n}")
            spec.append(len(idx))
            idx.append(asarray(np.asarray(i % n, dtype=np.int64), copy=False))
        axis += 1
    return x, tuple(spec), idx


def _shape(x: Array, spec: tuple[Any, ...], idx: list[Array], op: str) -> tuple[int, ...]:
    try:
        return index_shape(x.shape, tuple(i.shape for i in idx), spec)
    except IndexError as e:
        raise IndexError(f"{op}: cannot index an array of shape {x.shape} with index arrays "
                         f"of shapes {[i.shape for i in idx]}: {e}") from None


def _advanced_setitem(x: Array, key: Any, value: Any) -> None:
    if isinstance(key, (bool, np.bool_)) or (isinstance(key, Array) and key.ndim == 0):
        # a 0-d mask: x[True] = v writes everywhere, x[False] = v nowhere
        from .searching import data_dependent

        on = bool(key) if not isinstance(key, Array) else bool(data_dependent(key, "setitem"))
        if on:
            setitem(x, Ellipsis, value)
        return
    x2, spec, idx = _advanced(x, key, "setitem")
    if x2.shape != x.shape:
        raise IndexError("setitem: 0-d boolean masks are not supported in assignments")
    region = _shape(x, spec, idx, "setitem")
    v = _assigned_value(x, value, region)
    node = cast_node(v._node, x.dtype)
    x._node = Node(SCATTER, (x._node, node, *(i._node for i in idx)), {"spec": spec},
                   x.shape, x.dtype)


def take(x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
    """Elements of ``x`` at integer ``indices`` along ``axis`` (optional for 1-d ``x``).
    Lazy; negative indices count from the end.

    >>> import braze as bz
    >>> bz.take(bz.asarray([[1, 2], [3, 4]]), bz.asarray([1, 1]), axis=1).tolist()
    [[2, 2], [4, 4]]
    """
    from .reductions import normalize_axes

    x = as_array(x, "take")
    ind = as_array(indices, "take")
    if not dt.is_integer(ind.dtype) or ind.ndim > 1:
        raise TypeError(f"take: indices must be a 0-d or 1-d integer array, got "
                        f"{dt.name(ind.dtype)} of shape {ind.shape}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for {x.ndim}-d input (shape {x.shape})")
        axis = 0
    (ax,) = normalize_axes(axis, x.ndim, "take")
    spec = tuple(0 if i == ax else (0, n, 1) for i, n in enumerate(x.shape))
    return Array(Node(GATHER, (x._node, ind._node), {"spec": spec},
                      _shape(x, spec, [ind], "take"), x.dtype))


def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Array:
    """Elements of ``x`` at ``indices`` along ``axis``; other axes broadcast (as
    ``np.take_along_axis``). Lazy.

    >>> import braze as bz
    >>> x = bz.asarray([[10, 30, 20]])
    >>> bz.take_along_axis(x, bz.argsort(x), axis=1).tolist()
    [[10, 20, 30]]
    """
    from .reductions import normalize_axes

    x = as_array(x, "take_along_axis")
    ind = as_array(indices, "take_along_axis")
    if not dt.is_integer(ind.dtype):
        raise TypeError(f"take_along_axis: indices must be integer, got {dt.name(ind.dtype)}")
    if ind.ndim != x.ndim:
        raise ValueError(f"take_along_axis: x {x.shape} and indices {ind.shape} need the same "
                         "number of dimensions")
    (ax,) = normalize_axes(axis, x.ndim, "take_along_axis")
    op = OPS["take_along_axis"]
    attrs = {"axis": ax}
    shape, dtype = op.infer((x.shape, ind.shape), (x.dtype, ind.dtype), attrs)  # type: ignore[misc]
    return Array(Node(op, (x._node, ind._node), attrs, shape, dtype))
