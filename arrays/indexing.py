"""Basic indexing: ints, slices (any step, negative), ``...`` and ``None``.

``x[key]`` records one strided ``slice`` view (plus a reshape that drops integer-
indexed axes and inserts ``None`` axes). ``x[key] = v`` is functional: it rebinds
``x`` to a new ``slice_update`` node, so views taken earlier keep the old value.

>>> import braze as bz
>>> x = bz.arange(12).reshape((3, 4))
>>> x[1, ::-2].tolist(), x[..., None, 0].shape
([7, 5], (3, 1))
"""

from __future__ import annotations

import operator
from typing import Any

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import SLICE, SLICE_UPDATE
from .array import _SCALARS, Array, as_array, cast_node

Slices = tuple[tuple[int, int, int], ...]


def _normalize(x: Array, key: Any, op: str) -> tuple[Slices, tuple[int, ...], tuple[int, ...]]:
    """(per-axis (start, stop, step), sliced shape, final shape) for a basic index."""
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


def getitem(x: Array, key: Any) -> Array:
    """``x[key]`` for basic indices (see the module docstring)."""
    slices, sliced, final = _normalize(x, key, "getitem")
    node = x._node
    if any(s != (0, n, 1) for s, n in zip(slices, x.shape)):
        node = Node(SLICE, (node,), {"slices": slices}, sliced, x.dtype)
    out = Array(node)
    if final != sliced:
        out = out.reshape(final)
    return out


def setitem(x: Array, key: Any, value: Any) -> None:
    """``x[key] = value``: value broadcasts to the region and is cast to ``x.dtype``."""
    slices, sliced, final = _normalize(x, key, "setitem")
    if isinstance(value, _SCALARS):
        from .creation import full

        v = full((), value, dtype=x.dtype) if not isinstance(value, bool) or \
            x.dtype == dt.bool_ else full((), value).astype(x.dtype)
    else:
        v = as_array(value, "setitem")
        if dt.is_complex(v.dtype) and not dt.is_complex(x.dtype):
            raise TypeError(f"setitem: cannot store complex values in a {dt.name(x.dtype)} array")
    from .manipulation import broadcast_to

    try:
        v = broadcast_to(v, final)
    except ValueError:
        raise ValueError(f"setitem: value of shape {v.shape} cannot be broadcast to the "
                         f"indexed region of shape {final}") from None
    v = v.reshape(sliced)
    node = cast_node(v._node, x.dtype)
    x._node = Node(SLICE_UPDATE, (x._node, node), {"slices": slices}, x.shape, x.dtype)
