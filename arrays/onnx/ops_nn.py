"""ONNX convolution, pooling, normalization and resizing ops (see :mod:`.ops`).

ONNX is channels-first (N, C, *spatial; conv weights (Cout, Cin/g, *k)); braze's
convolution is channels-last like MLX's (input (N, *spatial, C), weights
(Cout, *k, Cin/g)), so a Conv is transposed in and out (a layout pass removes the pairs
between consecutive convs). MaxPool / AveragePool run ``bz.nn.max_pool`` / ``avg_pool`` on
the channels-last data (transposed in and out like a Conv); LpPool, and pads as large as
the window, are composed here from padded strided slices (one per kernel offset) and
elementwise max/add, which the fusion compiler turns into one kernel (average pooling
divides by a count computed in numpy). Resize builds a per-axis
interpolation matrix in numpy (nearest: a gather instead).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ... import arrays as _arrays
from ..array import Array
from ..conv import avg_pool as _avg_pool_cl
from ..conv import max_pool as _max_pool_cl
from .ops import NodeContext, _axis, _cast, op

bz: Any = _arrays  # typed loosely: mypy cannot see the star-imported names


# ---------------------------------------------------------------- geometry
def _pads(n: NodeContext, sizes: tuple[int, ...], k: list[int], s: list[int],
          d: list[int]) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial dim from ``pads``/``auto_pad``."""
    nd = len(sizes)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        lo, hi = [], []
        for i in range(nd):
            out = -(-sizes[i] // s[i])
            total = max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - sizes[i])
            small = total // 2
            lo.append(small if auto == "SAME_UPPER" else total - small)
            hi.append(total - lo[-1])
        return lo, hi
    if auto == "VALID":
        return [0] * nd, [0] * nd
    p = list(n.attr("pads", [0] * (2 * nd)))
    return p[:nd], p[nd:]


def _geometry(n: NodeContext, x: Array, k: list[int] | None = None) -> Any:
    nd = x.ndim - 2
    k = list(k if k is not None else n.attr("kernel_shape"))
    s = list(n.attr("strides", [1] * nd))
    d = list(n.attr("dilations", [1] * nd))
    lo, hi = _pads(n, tuple(x.shape[2:]), k, s, d)
    return nd, k, s, d, lo, hi


def _out_size(size: int, k: int, s: int, d: int, lo: int, hi: int, ceil: bool) -> int:
    span = size + lo + hi - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + lo:  # the last window must start inside
        out -= 1
    return out


def _windows(x: Array, k: list[int], s: list[int], d: list[int], lo: list[int],
             hi: list[int], out: list[int], fill: Any, first: int = 2) -> list[Array]:
    """The strided slices of padded ``x`` (spatial dims from axis ``first``), one per
    kernel offset: reducing them elementwise pools."""
    nd = len(k)
    extra = [max(0, (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - (x.shape[first + i] + lo[i]
                                                                     + hi[i])) for i in range(nd)]
    width = [(0, 0)] * first + [(lo[i], hi[i] + extra[i]) for i in range(nd)] + \
        [(0, 0)] * (x.ndim - first - nd)
    if any(a or b for a, b in width):
        x = bz.pad(x, width, constant_values=fill)
    views = []
    for offs in itertools.product(*(range(ki) for ki in k)):
        key = [slice(None)] * x.ndim
        for i, o in enumerate(offs):
            key[first + i] = slice(o * d[i], o * d[i] + (out[i] - 1) * s[i] + 1, s[i])
        views.append(x[tuple(key)])
    return views


def _channels_last(x: Array) -> Array:
    return bz.permute_dims(x, (0, *range(2, x.ndim), 1))


def _channels_first(x: Array) -> Array:
    return bz.permute_dims(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


# ---------------------------------------------------------------- convolution
def _conv_nhwc(x: Array, w: Array, s: list[int], d: list[int], lo: list[int], hi: list[int],
               groups: int, input_dilation: Any = 1, flip: bool = False) -> Array:
    """Channels-last convolution: x (N, *sp, Cin), w (Cout, *k, Cin/g)."""
    return bz.conv_general(x, w, stride=s, padding=(lo, hi), kernel_dilation=d,
                           input_dilation=input_dilation, groups=groups, flip=flip)


def _weights_cl(n: NodeContext, w: Array, i: int) -> Array:
    """ONNX conv weights (Cout, Cin/g, *k) as braze's (Cout, *k, Cin/g)."""
    raw = n._raw[i]
    perm = (0, *range(2, w.ndim), 1)
    if isinstance(raw, np.ndarray):  # a constant: transposed once per model, read-only (the
        # cpu convolution keeps the panels it packs from a read-only weight)
        hit = getattr(n, "_weights", None)
        if hit is None or hit[0] is not raw:
            t = np.ascontiguousarray(np.transpose(raw, perm))
            t.flags.writeable = False
            hit = n._weights = (raw, t)  # type: ignore[attr-defined]
        return bz.asarray(hit[1], copy=False)
    return bz.permute_dims(w, perm)


@op("Conv")
def _conv(n: NodeContext, x: Array, w: Array, b: Array | None = None) -> Array:
    nd, k, s, d, lo, hi = _geometry(n, x, list(w.shape[2:]))
    y = _conv_nhwc(_channels_last(x), _weights_cl(n, w, 1), s, d, lo, hi, n.attr("group", 1))
    if b is not None:
        y = y + b
    return _channels_first(y)


@op("ConvTranspose")
def _conv_transpose(n: NodeContext, x: Array, w: Array, b: Array | None = None) -> Array:
    nd = x.ndim - 2
    g = n.attr("group", 1)
    cin, coutg, k = w.shape[0], w.shape[1], list(w.shape[2:])
    s = list(n.attr("strides", [1] * nd))
    d = list(n.attr("dilations", [1] * nd))
    op_ = list(n.attr("output_padding", [0] * nd))
    sizes = x.shape[2:]
    full = [s[i] * (sizes[i] - 1) + op_[i] + (k[i] - 1) * d[i] + 1 for i in range(nd)]
    auto = n.attr("auto_pad", "NOTSET")
    target = n.attr("output_shape")
    if target is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [sizes[i] * s[i] for i in range(nd)]
    if target is not None:
        target = list(target)[-nd:]
        total = [full[i] - target[i] for i in range(nd)]
        if auto == "SAME_UPPER":
            lo = [t // 2 for t in total]
        else:
            lo = [t - t // 2 for t in total]
        hi = [total[i] - lo[i] for i in range(nd)]
    else:
        p = list(n.attr("pads", [0] * (2 * nd)))
        lo, hi = p[:nd], p[nd:]
    # a stride-1 convolution of the stride-dilated input with the flipped kernel
    wt = bz.reshape(w, (g, cin // g, coutg, *k))
    wt = bz.permute_dims(wt, (0, 2, *range(3, 3 + nd), 1))  # (g, Cout/g, *k, Cin/g)
    wt = bz.reshape(wt, (g * coutg, *k, cin // g))
    xc = _channels_last(x)
    plo = [(k[i] - 1) * d[i] - lo[i] for i in range(nd)]
    phi = [(k[i] - 1) * d[i] - hi[i] + op_[i] for i in range(nd)]
    crop = [(max(0, -a), max(0, -c)) for a, c in zip(plo, phi)]
    y = _conv_nhwc(xc, wt, [1] * nd, d, [max(0, a) for a in plo], [max(0, c) for c in phi], g,
                   input_dilation=s, flip=True)
    if any(a or c for a, c in crop):
        key = [slice(None)] + [slice(a, y.shape[1 + i] - c) for i, (a, c) in enumerate(crop)]
        y = y[tuple(key + [slice(None)])]
    if b is not None:
        y = y + b
    return _channels_first(y)


# ---------------------------------------------------------------- pooling
def _pool_check(n: NodeContext) -> str | None:
    if n.op_type == "MaxPool" and n.wants(1):
        return "the Indices output of MaxPool"
    return None


def _nn_pool(n: NodeContext, x: Array, kind: str) -> Array | None:
    """MaxPool / AveragePool through ``bz.nn.max_pool`` / ``avg_pool`` on the channels-last
    data (auto_pad resolved to explicit pads; storage_order does not matter), or None
    where their preconditions do not hold (a pad as large as the dilated window)."""
    nd, k, s, d, lo, hi = _geometry(n, x)
    span = [(k[i] - 1) * d[i] + 1 for i in range(nd)]
    if nd < 1 or any(not 0 <= p < span[i] for i in range(nd) for p in (lo[i], hi[i])):
        return None
    ceil = bool(n.attr("ceil_mode", 0))
    if kind == "max":
        y = _max_pool_cl(_channels_last(x), tuple(k), stride=tuple(s), padding=(lo, hi),
                         dilation=tuple(d), ceil_mode=ceil)
    else:
        y = _avg_pool_cl(_channels_last(x), tuple(k), stride=tuple(s), padding=(lo, hi),
                         dilation=tuple(d), ceil_mode=ceil,
                         count_include_pad=bool(n.attr("count_include_pad", 0)))
    return _channels_first(y)


@op("MaxPool", check=_pool_check)
def _max_pool(n: NodeContext, x: Array) -> Array:
    y = _nn_pool(n, x, "max")
    if y is not None:
        return y
    nd, k, s, d, lo, hi = _geometry(n, x)
    ceil = bool(n.attr("ceil_mode", 0))
    out = [_out_size(x.shape[2 + i], k[i], s[i], d[i], lo[i], hi[i], ceil) for i in range(nd)]
    fill = -np.inf if bz.isdtype(x.dtype, "real floating") else np.iinfo(x.dtype).min
    views = _windows(x, k, s, d, lo, hi, out, fill)
    y = views[0]
    for v in views[1:]:
        y = bz.maximum(y, v)
    return y


@op("AveragePool", "LpPool")
def _avg_pool(n: NodeContext, x: Array) -> Array:
    lp = n.op_type == "LpPool"
    y = None if lp else _nn_pool(n, x, "avg")
    if y is not None:
        return y
    nd, k, s, d, lo, hi = _geometry(n, x)
    ceil = bool(n.attr("ceil_mode", 0))
    sizes = x.shape[2:]
    out = [_out_size(sizes[i], k[i], s[i], d[i], lo[i], hi[i], ceil) for i in range(nd)]
    p = n.attr("p", 2)
    src = bz.abs(x) ** p if lp else x
    views = _windows(src, k, s, d, lo, hi, out, 0)
    y = views[0]
    for v in views[1:]:
        y = y + v
    if lp:
        return _cast(y ** (1.0 / p), x.dtype)
    # the divisor: positions of each window inside the input (and its pads, if counted)
    include = bool(n.attr("count_include_pad", 0))
    mask = np.ones(sizes, np.float64)
    mask = np.pad(mask, [(a, b) for a, b in zip(lo, hi)], constant_values=1.0 if include
                  else 0.0)
    counts = _windows(bz.asarray(mask[None, None]), k, s, d, [0] * nd, [0] * nd, out, 0)
    with bz.backend("numpy"):
        count = np.asarray(sum(counts[1:], counts[0]))
    return y / bz.asarray(np.maximum(count, 1).astype(x.dtype))


@op("GlobalAveragePool")
def _global_avg(n: NodeContext, x: Array) -> Array:
    return bz.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalMaxPool")
def _global_max(n: NodeContext, x: Array) -> Array:
    return bz.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalLpPool")
def _global_lp(n: NodeContext, x: Array) -> Array:
    p = n.attr("p", 2)
    return _cast(bz.sum(bz.abs(x) ** p, axis=tuple(range(2, x.ndim)), keepdims=True)
                 ** (1.0 / p), x.dtype)


# ---------------------------------------------------------------- normalization
def _per_channel(v: Array, ndim: int) -> Array:
    return bz.reshape(v, (-1,) + (1,) * (ndim - 2))


def _bn_check(n: NodeContext) -> str | None:
    if n.attr("training_mode", 0) or any(n.wants(i) for i in range(1, 5)):
        return "training mode (only inference: one output, running statistics)"
    return None


@op("BatchNormalization", check=_bn_check)
def _batch_norm(n: NodeContext, x: Array, scale: Array, b: Array, mean: Array, var: Array
                ) -> Array:
    eps = n.attr("epsilon", 1e-5)
    inv = scale / bz.sqrt(var + eps)
    return x * _per_channel(inv, x.ndim) + _per_channel(b - mean * inv, x.ndim)


@op("InstanceNormalization")
def _instance_norm(n: NodeContext, x: Array, scale: Array, b: Array) -> Array:
    axes = tuple(range(2, x.ndim))
    m = bz.mean(x, axis=axes, keepdims=True)
    v = bz.mean((x - m) * (x - m), axis=axes, keepdims=True)
    y = (x - m) / bz.sqrt(v + n.attr("epsilon", 1e-5))
    return y * _per_channel(scale, x.ndim) + _per_channel(b, x.ndim)


@op("GroupNormalization")
def _group_norm(n: NodeContext, x: Array, scale: Array, b: Array) -> Array:
    g = n.attr("num_groups")
    N, C = x.shape[:2]
    xg = bz.reshape(x, (N, g, -1))
    m = bz.mean(xg, axis=2, keepdims=True)
    v = bz.mean((xg - m) * (xg - m), axis=2, keepdims=True)
    y = bz.reshape((xg - m) / bz.sqrt(v + n.attr("epsilon", 1e-5)), x.shape)
    if scale.shape[0] != C:  # opset 18: one scale per group
        scale, b = bz.repeat(scale, C // g), bz.repeat(b, C // g)
    return y * _per_channel(scale, x.ndim) + _per_channel(b, x.ndim)


@op("LRN")
def _lrn(n: NodeContext, x: Array) -> Array:
    size = n.attr("size")
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = bz.pad(x * x, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    C = x.shape[1]
    total = sq[:, 0:C]
    for i in range(1, size):
        total = total + sq[:, i:i + C]
    return x / (bias + (alpha / size) * total) ** beta


# ---------------------------------------------------------------- resize
def _source_coords(mode: str, out: int, size: int, scale: float, roi: tuple[float, float]
                   ) -> np.ndarray:
    i = np.arange(out, dtype=np.float64)
    length = scale * size  # ONNX's formulas use the unrounded output length
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjust = out / (scale * size)
        offset = size / 2 * (1 - adjust)
        return offset + (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if out > 1 else np.zeros(out)
    if mode == "align_corners":
        return i * (size - 1) / (length - 1) if out > 1 else np.zeros(out)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_crop_and_resize":
        a, b = roi
        if out > 1:
            return a * (size - 1) + i * (b - a) * (size - 1) / (length - 1)
        return np.full(out, 0.5 * (a + b) * (size - 1))
    raise NotImplementedError(f"Resize: coordinate_transformation_mode={mode!r}")


def _nearest(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if mode == "floor":
        return np.floor(x)
    if mode == "ceil":
        return np.ceil(x)
    return np.ceil(x - 0.5)  # round_prefer_floor


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def _interp_matrix(kind: str, coords: np.ndarray, size: int, a: float, exclude: bool
                   ) -> np.ndarray:
    m = np.zeros((len(coords), size))
    base = np.floor(coords)
    taps = [0, 1] if kind == "linear" else [-1, 0, 1, 2]
    for t in taps:
        src = base + t
        w = (1 - np.abs(coords - src)) if kind == "linear" else _cubic(coords - src, a)
        inside = (src >= 0) & (src <= size - 1)
        if exclude:
            w = np.where(inside, w, 0.0)
        idx = np.clip(src, 0, size - 1).astype(np.int64)
        np.add.at(m, (np.arange(len(coords)), idx), w)
    if exclude:
        m /= np.maximum(m.sum(axis=1, keepdims=True), 1e-12)
    return m


def _resize_check(n: NodeContext) -> str | None:
    if n.attr("antialias", 0):
        return "antialias=1"
    return None


@op("Resize", "Upsample", check=_resize_check)
def _resize(n: NodeContext, x: Array, *rest: Any) -> Array:
    r = x.ndim
    legacy = n.op_type == "Upsample" or n.opset < 11
    if n.op_type == "Upsample" and n.opset < 9:
        scales, sizes, roi = n.attr("scales"), None, None
    elif legacy:
        scales, sizes, roi = n.const(1), None, None
    else:
        roi, scales, sizes = n.const(1), n.const(2), n.const(3)
    axes = n.attr("axes")
    axes = list(range(r)) if axes is None else [_axis(a, r) for a in axes]
    scale = [1.0] * r
    out = list(x.shape)
    if sizes is not None and sizes.size:
        want = [int(v) for v in sizes]
        policy = n.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            f = (min if policy == "not_larger" else max)(
                want[j] / x.shape[a] for j, a in enumerate(axes))
            want = [int(math.floor(f * x.shape[a] + 0.5)) for a in axes]
            for a in axes:
                scale[a] = f
        for j, a in enumerate(axes):
            out[a] = want[j]
            if policy == "stretch":
                scale[a] = want[j] / x.shape[a]
    else:
        for j, a in enumerate(axes):
            scale[a] = float(scales[j])
            out[a] = int(math.floor(x.shape[a] * scale[a]))
    mode = n.attr("mode", "nearest")
    coord = "asymmetric" if legacy else n.attr("coordinate_transformation_mode", "half_pixel")
    nearest = "floor" if legacy else n.attr("nearest_mode", "round_prefer_floor")
    roi_v = None if roi is None or not roi.size else roi.astype(np.float64)
    extrap = n.attr("extrapolation_value", 0.0)
    y, outside = x, None
    for a in range(r):
        if out[a] == x.shape[a] and scale[a] == 1.0 and coord != "tf_crop_and_resize":
            continue
        k: int | None = axes.index(a) if a in axes else None
        bounds = (0.0, 1.0)
        if roi_v is not None and k is not None:
            bounds = (float(roi_v[k]), float(roi_v[k + len(axes)]))
        c = _source_coords(coord, out[a], x.shape[a], scale[a], bounds)
        if coord == "tf_crop_and_resize":
            off = (c < 0) | (c > x.shape[a] - 1)
            if off.any():
                shape = [1] * r
                shape[a] = out[a]
                o = bz.asarray(off.reshape(shape))
                outside = o if outside is None else outside | o
        if mode == "nearest":
            idx = np.clip(_nearest(c, nearest), 0, x.shape[a] - 1).astype(np.int64)
            y = bz.take(y, bz.asarray(idx), axis=a)
        else:
            kind = "linear" if mode == "linear" else "cubic"
            m = _interp_matrix(kind, c, x.shape[a], n.attr("cubic_coeff_a", -0.75),
                               bool(n.attr("exclude_outside", 0)))
            ym = bz.moveaxis(y, a, -1)
            ym = bz.matmul(_cast(ym, np.float32) if ym.dtype != np.float64 else ym,
                           bz.asarray(m.T.astype(np.float64 if ym.dtype == np.float64
                                                 else np.float32)))
            y = _cast(bz.moveaxis(ym, -1, a), x.dtype)
    if outside is not None:
        y = bz.where(outside, bz.asarray(np.asarray(extrap, dtype=x.dtype)), y)
    return y
