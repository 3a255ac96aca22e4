"""ONNX shape, indexing and creation ops: Reshape ... ScatterND (see :mod:`.ops`).

Shapes are static in braze, so ``Shape``/``Size``/``EyeLike`` return numpy constants and
the shape arithmetic behind a ``Reshape`` folds to Python ints when a model is traced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import arrays as _arrays
from ..array import Array
from .ops import NodeContext, _axis, _cast, onnx_dtype, op

bz: Any = _arrays  # typed loosely: mypy cannot see the star-imported names


def _axes(n: NodeContext, input_index: int, attr_opset: int) -> list[int] | None:
    """Axes given as an attribute before ``attr_opset``, as an optional input from then."""
    if n.opset < attr_opset:
        v = n.attr("axes")
        return None if v is None else [int(a) for a in v]
    return n.ints(input_index)


@op("Shape")
def _shape(n: NodeContext, x: Array) -> np.ndarray:
    shape = np.asarray(x.shape, dtype=np.int64)
    if n.opset >= 15:
        r = len(shape)
        start = n.attr("start", 0)
        end = n.attr("end", r)
        shape = shape[max(0, min(r, _axis(start, r))):max(0, min(r, _axis(end, r)))]
    return shape


@op("Size")
def _size(n: NodeContext, x: Array) -> np.ndarray:
    return np.asarray(int(np.prod(x.shape, dtype=np.int64)), dtype=np.int64)


@op("Reshape")
def _reshape(n: NodeContext, x: Array, shape: Any = None) -> Array:
    target = n.attr("shape") if n.opset < 5 else n.ints(1)
    target = list(target)
    if not n.attr("allowzero", 0):
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return bz.reshape(x, tuple(target))


@op("Flatten")
def _flatten(n: NodeContext, x: Array) -> Array:
    axis = _axis(n.attr("axis", 1), x.ndim)
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    cols = int(np.prod(x.shape[axis:], dtype=np.int64))
    return bz.reshape(x, (rows, cols))


@op("Squeeze")
def _squeeze(n: NodeContext, x: Array, axes: Any = None) -> Array:
    ax = _axes(n, 1, 13)
    if ax is None:
        ax = [i for i, d in enumerate(x.shape) if d == 1]
    return bz.reshape(x, tuple(d for i, d in enumerate(x.shape)
                               if i not in {_axis(a, x.ndim) for a in ax}))


@op("Unsqueeze")
def _unsqueeze(n: NodeContext, x: Array, axes: Any = None) -> Array:
    ax = _axes(n, 1, 13) or []
    r = x.ndim + len(ax)
    where = sorted(_axis(a, r) for a in ax)
    shape = list(x.shape)
    for a in where:
        shape.insert(a, 1)
    return bz.reshape(x, tuple(shape))


@op("Transpose")
def _transpose(n: NodeContext, x: Array) -> Array:
    perm = n.attr("perm")
    return bz.permute_dims(x, tuple(perm) if perm is not None else
                           tuple(range(x.ndim - 1, -1, -1)))


@op("Concat")
def _concat(n: NodeContext, *xs: Array) -> Array:
    xs_ = [x for x in xs if x is not None]
    return bz.concat(xs_, axis=n.attr("axis", 0))


@op("Split")
def _split(n: NodeContext, x: Array, split: Any = None) -> list[Array]:
    axis = _axis(n.attr("axis", 0), x.ndim)
    sizes = n.attr("split") if n.opset < 13 else n.ints(1)
    if sizes is None:
        parts = n.attr("num_outputs", n.num_outputs)
        each = -(-x.shape[axis] // parts)
        sizes = [min(each, x.shape[axis] - i * each) for i in range(parts)]
    bounds = np.cumsum([0] + list(sizes))
    key = [slice(None)] * x.ndim
    outs = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key[axis] = slice(int(lo), int(hi))
        outs.append(x[tuple(key)])
    return outs


@op("Slice")
def _slice(n: NodeContext, x: Array, *rest: Any) -> Array:
    if n.opset < 10:
        starts, ends, axes, steps = n.attr("starts"), n.attr("ends"), n.attr("axes"), None
    else:
        starts, ends, axes, steps = n.ints(1), n.ints(2), n.ints(3), n.ints(4)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    key = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        key[_axis(int(a), x.ndim)] = slice(int(s), int(e), int(st))  # Python's clamping
    return x[tuple(key)]


def _wrap(idx: Array, size: int, raw: Any) -> Array:
    """Negative indices count from the end."""
    if isinstance(raw, np.ndarray):
        return bz.asarray(np.where(raw < 0, raw + size, raw).astype(np.int64))
    return bz.where(idx < 0, idx + size, idx)


@op("Gather")
def _gather(n: NodeContext, x: Array, idx: Array) -> Array:
    axis = _axis(n.attr("axis", 0), x.ndim)
    i = _wrap(idx, x.shape[axis], n._raw[1])
    if i.ndim <= 1:
        return bz.take(x, i, axis=axis)
    # bz.take takes 0-d/1-d indices: gather them flat, then restore the index shape
    y = bz.take(x, bz.reshape(i, (-1,)), axis=axis)
    return bz.reshape(y, x.shape[:axis] + i.shape + x.shape[axis + 1:])


@op("GatherElements")
def _gather_elements(n: NodeContext, x: Array, idx: Array) -> Array:
    axis = _axis(n.attr("axis", 0), x.ndim)
    return bz.take_along_axis(x, _wrap(idx, x.shape[axis], n._raw[1]), axis=axis)


@op("GatherND")
def _gather_nd(n: NodeContext, x: Array, idx: Array) -> Array:
    b = n.attr("batch_dims", 0)
    k = idx.shape[-1]
    batch, inner, rest = x.shape[:b], x.shape[b:b + k], x.shape[b + k:]
    nb, ni = int(np.prod(batch, dtype=np.int64)), int(np.prod(inner, dtype=np.int64))
    strides = np.cumprod((list(inner[1:]) + [1])[::-1])[::-1].astype(np.int64)
    i = _cast(idx, np.int64)
    i = bz.where(i < 0, i + bz.asarray(np.asarray(inner, np.int64)), i)
    lin = bz.sum(i * bz.asarray(strides), axis=-1)  # batch + I
    lin = bz.reshape(lin, (nb, -1)) + bz.reshape(bz.arange(nb, dtype=bz.int64) * ni, (nb, 1))
    flat = bz.reshape(x, (nb * ni,) + tuple(rest))
    out = bz.take(flat, bz.reshape(lin, (-1,)), axis=0)
    return bz.reshape(out, tuple(idx.shape[:-1]) + tuple(rest))


def _scatter_check(n: NodeContext) -> str | None:
    r = n.attr("reduction", "none")
    return None if r == "none" else f"reduction={r!r} (only 'none': braze has no scatter-add)"


@op("ScatterElements", "Scatter", check=_scatter_check)
def _scatter_elements(n: NodeContext, x: Array, idx: Array, upd: Array) -> Array:
    axis = _axis(n.attr("axis", 0), x.ndim)
    i = _wrap(_cast(idx, np.int64), x.shape[axis], n._raw[1])
    key = []
    for d in range(x.ndim):
        if d == axis:
            key.append(i)
        else:
            shape = [1] * x.ndim
            shape[d] = idx.shape[d]
            key.append(bz.broadcast_to(bz.reshape(bz.arange(idx.shape[d]), shape), idx.shape))
    y = bz.astype(x, x.dtype, copy=True)
    y[tuple(key)] = upd
    return y


@op("ScatterND", check=_scatter_check)
def _scatter_nd(n: NodeContext, x: Array, idx: Array, upd: Array) -> Array:
    i = _cast(idx, np.int64)
    k = idx.shape[-1]
    key = tuple(_wrap(i[..., j], x.shape[j], None) for j in range(k))
    y = bz.astype(x, x.dtype, copy=True)
    y[key] = upd
    return y


@op("Expand")
def _expand(n: NodeContext, x: Array, shape: Any) -> Array:
    target = bz.broadcast_shapes(tuple(x.shape), tuple(n.ints(1)))
    return bz.broadcast_to(x, target)


@op("Tile")
def _tile(n: NodeContext, x: Array, reps: Any) -> Array:
    return bz.tile(x, tuple(n.ints(1)))


@op("Pad")
def _pad(n: NodeContext, x: Array, *rest: Any) -> Array:
    mode = n.attr("mode", "constant")
    if n.opset < 11:
        pads, value, axes = n.attr("pads", n.attr("paddings")), n.attr("value", 0.0), None
    else:
        pads, axes = n.ints(1), n.ints(3)
        v = n.const(2)
        value = v.reshape(-1)[0].item() if v is not None and v.size else 0
    axes = list(range(x.ndim)) if axes is None else [_axis(a, x.ndim) for a in axes]
    m = len(axes)
    width = [[0, 0] for _ in range(x.ndim)]
    for j, a in enumerate(axes):
        width[a] = [int(pads[j]), int(pads[j + m])]
    # negative pads crop
    key = tuple(slice(max(0, -lo), x.shape[d] - max(0, -hi)) for d, (lo, hi) in enumerate(width))
    if any(lo < 0 or hi < 0 for lo, hi in width):
        x = x[key]
        width = [[max(0, lo), max(0, hi)] for lo, hi in width]
    if mode == "constant":
        return bz.pad(x, width, constant_values=value)
    return bz.pad(x, width, mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode])


@op("ConstantOfShape")
def _constant_of_shape(n: NodeContext, shape: Any) -> Array:
    v = n.attr("value")
    value = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
    shp = tuple(n.ints(0))
    return bz.full(shp, value[0].item(), dtype=value.dtype)


@op("Range")
def _range(n: NodeContext, *xs: Any) -> np.ndarray:
    start, limit, delta = (n.const(i) for i in range(3))
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + np.arange(count) * delta).astype(start.dtype)


@op("EyeLike")
def _eye_like(n: NodeContext, x: Array) -> np.ndarray:
    d = onnx_dtype(n.attr("dtype"), n.label) if n.attr("dtype") else x.dtype
    return np.eye(x.shape[0], x.shape[1], k=n.attr("k", 0), dtype=d)


@op("OneHot")
def _one_hot(n: NodeContext, idx: Array, depth: Any, values: Array) -> Array:
    d = int(np.asarray(n.const(1)).reshape(-1)[0])
    axis = _axis(n.attr("axis", -1), idx.ndim + 1)
    i = bz.astype(idx, np.int64) if idx.dtype != np.int64 else idx
    if not bz.isdtype(idx.dtype, "integral"):
        i = bz.astype(bz.trunc(idx), np.int64)
    i = bz.where(i < 0, i + d, i)
    i = bz.expand_dims(i, axis=axis)
    pos = bz.reshape(bz.arange(d, dtype=bz.int64), (-1,) + (1,) * (idx.ndim - axis))
    return bz.where(i == pos, values[1], values[0])


@op("Trilu")
def _trilu(n: NodeContext, x: Array, k: Any = None) -> Array:
    kk = int(n.const(1).reshape(-1)[0]) if n.has(1) else 0
    rows, cols = x.shape[-2], x.shape[-1]
    keep = np.triu(np.ones((rows, cols), bool), kk) if n.attr("upper", 1) else \
        np.tril(np.ones((rows, cols), bool), kk)
    return bz.where(bz.asarray(keep), x, bz.zeros((), dtype=x.dtype))


@op("DepthToSpace")
def _depth_to_space(n: NodeContext, x: Array) -> Array:
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    if n.attr("mode", "DCR") == "DCR":
        y = bz.permute_dims(bz.reshape(x, (N, b, b, C // (b * b), H, W)), (0, 3, 4, 1, 5, 2))
    else:
        y = bz.permute_dims(bz.reshape(x, (N, C // (b * b), b, b, H, W)), (0, 1, 4, 2, 5, 3))
    return bz.reshape(y, (N, C // (b * b), H * b, W * b))


@op("SpaceToDepth")
def _space_to_depth(n: NodeContext, x: Array) -> Array:
    b = n.attr("blocksize")
    N, C, H, W = x.shape
    perm = (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = bz.permute_dims(bz.reshape(x, (N, C, H // b, b, W // b, b)), perm)
    return bz.reshape(y, (N, C * b * b, H // b, W // b))


@op("NonZero", dynamic=True)
def _nonzero(n: NodeContext, x: Array) -> np.ndarray:
    return np.asarray(np.nonzero(n.const(0)), dtype=np.int64).reshape(x.ndim, -1)


@op("Compress", dynamic=True)
def _compress(n: NodeContext, x: Array, cond: Any) -> Array:
    keep = np.nonzero(n.const(1).reshape(-1))[0].astype(np.int64)
    axis = n.attr("axis")
    if axis is None:
        return bz.take(bz.reshape(x, (-1,)), bz.asarray(keep))
    return bz.take(x, bz.asarray(keep), axis=_axis(axis, x.ndim))


@op("ReverseSequence")
def _reverse_sequence(n: NodeContext, x: Array, lens: Any) -> Array:
    b_ax, t_ax = n.attr("batch_axis", 1), n.attr("time_axis", 0)
    T, B = x.shape[t_ax], x.shape[b_ax]
    seq = bz.reshape(_cast(lens, np.int64), (1, B))
    t = bz.reshape(bz.arange(T, dtype=bz.int64), (T, 1))
    src = bz.where(t < seq, seq - 1 - t, t)  # (T, B)
    if (t_ax, b_ax) == (1, 0):
        src = bz.permute_dims(src, (1, 0))
    shape = [1] * x.ndim
    shape[t_ax], shape[b_ax] = T, B
    src = bz.broadcast_to(bz.reshape(src, tuple(shape)), x.shape)
    return bz.take_along_axis(x, src, axis=t_ax)
