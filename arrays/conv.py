"""Convolutions, pooling, batch / group norm and resizing, channels-last (MLX's API).

Every convolution records one ``conv`` node (``conv_general`` is MLX's general form; the
transposed convolutions are convolutions of the input-dilated x with the flipped kernel).
Pooling, normalization and resizing are *compositions*: a max pool is the maximum of
``prod(kernel)`` strided views of the padded input, which the fusion compiler turns into
one elementwise kernel (and autodiff differentiates like any other chain); a pool whose
windows tile the input is a reshape and one reduction.

Layouts: x (N, *spatial, C); conv weights (C_out, *kernel, C_in / groups).

>>> import braze as bz
>>> x = bz.ones((1, 4, 4, 1))
>>> bz.conv2d(x, bz.ones((1, 3, 3, 1)), padding=1)[0, :, :, 0].tolist()[0]
[4.0, 6.0, 6.0, 4.0]
>>> bz.nn.max_pool(x, (2, 2)).shape
(1, 2, 2, 1)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import CONV, MAX_POOL, WINDOW_SUM, conv_attrs, pool_fill, pool_windows
from .array import Array, as_array, astype
from .creation import asarray, full
from .elementwise import maximum, sqrt  # type: ignore[attr-defined]  # generated (op records)
from .indexing import take
from .manipulation import reshape
from .reductions import max as _max
from .reductions import mean

__all__ = ["conv_general", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d"]
# bz.nn's functional forms (re-exported there)
NN_FUNCTIONS = ["max_pool", "avg_pool", "batch_norm", "group_norm", "upsample"]


def _operands(op: str, x: Any, w: Any, n: int | None) -> tuple[Array, Array, int]:
    x, w = as_array(x, op), as_array(w, op)
    for a in (x, w):
        if not dt.is_real_floating(a.dtype) or dt.is_integer(a.dtype) or dt.is_bool(a.dtype):
            raise TypeError(f"{op}: x and weight must be real floating, got "
                            f"{dt.name(x.dtype)} and {dt.name(w.dtype)}")
    nd = x.ndim - 2 if n is None else n
    if x.ndim != nd + 2 or w.ndim != nd + 2 or nd < 1:
        raise ValueError(f"{op}: expected x (N, *spatial, C_in) and weight (C_out, *kernel, "
                         f"C_in/groups) with {n if n else 'the same number of'} spatial "
                         f"dims, got shapes {x.shape} and {w.shape}")
    ct = dt.result_type(x.dtype, w.dtype)
    return astype(x, ct) if x.dtype != ct else x, astype(w, ct) if w.dtype != ct else w, nd


def _record(x: Array, w: Array, attrs: dict[str, Any]) -> Array:
    shape, dtype = CONV.infer((x.shape, w.shape), (x.dtype, w.dtype), attrs)  # type: ignore[misc]
    return Array(Node(CONV, (x._node, w._node), attrs, shape, dtype))


def conv_general(input: Any, weight: Any, stride: Any = 1, padding: Any = 0,
                 kernel_dilation: Any = 1, input_dilation: Any = 1, groups: int = 1,
                 flip: bool = False) -> Array:
    """N-d convolution (MLX's ``conv_general``): x (N, *spatial, C_in), weight (C_out,
    *kernel, C_in / groups). ``padding`` is an int, one int per spatial dim, or a pair
    ``(lo, hi)`` of per-dim sequences; ``flip`` convolves instead of correlating.

    >>> import braze as bz
    >>> x = bz.asarray([[[1.0], [2.0], [3.0]]])
    >>> bz.conv_general(x, bz.asarray([[[1.0], [10.0]]]), flip=True).reshape(-1).tolist()
    [12.0, 23.0]
    """
    x, w, n = _operands("conv_general", input, weight, None)
    return _record(x, w, conv_attrs(n, stride=stride, padding=padding,
                                     kernel_dilation=kernel_dilation,
                                     input_dilation=input_dilation, groups=groups, flip=flip))


@contextlib.contextmanager
def _named(op: str) -> Iterator[None]:
    """The conv record's ValueError / TypeError raised under the public function's name."""
    try:
        yield
    except (ValueError, TypeError) as e:
        raise type(e)(str(e).replace("conv:", f"{op}:", 1)) from None


def _conv(op: str, n: int, input: Any, weight: Any, stride: Any, padding: Any,
          dilation: Any, groups: int) -> Array:
    x, w, _ = _operands(op, input, weight, n)
    with _named(op):
        return _record(x, w, conv_attrs(n, stride=stride, padding=padding,
                                        kernel_dilation=dilation, groups=groups))


def conv1d(input: Any, weight: Any, stride: int = 1, padding: int = 0, dilation: int = 1,
           groups: int = 1) -> Array:
    """1-d convolution: x (N, L, C_in), weight (C_out, K, C_in / groups).

    >>> import braze as bz
    >>> bz.conv1d(bz.ones((2, 8, 4)), bz.ones((3, 3, 4)), stride=2).shape
    (2, 3, 3)
    """
    return _conv("conv1d", 1, input, weight, stride, padding, dilation, groups)


def conv2d(input: Any, weight: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Array:
    """2-d convolution: x (N, H, W, C_in), weight (C_out, KH, KW, C_in / groups).

    >>> import braze as bz
    >>> bz.conv2d(bz.ones((1, 8, 8, 4)), bz.ones((4, 3, 3, 1)), padding=1, groups=4).shape
    (1, 8, 8, 4)
    """
    return _conv("conv2d", 2, input, weight, stride, padding, dilation, groups)


def conv3d(input: Any, weight: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Array:
    """3-d convolution: x (N, D, H, W, C_in), weight (C_out, KD, KH, KW, C_in / groups).

    >>> import braze as bz
    >>> bz.conv3d(bz.ones((1, 4, 4, 4, 2)), bz.ones((5, 2, 2, 2, 2))).shape
    (1, 3, 3, 3, 5)
    """
    return _conv("conv3d", 3, input, weight, stride, padding, dilation, groups)


def _conv_transpose(op: str, n: int, input: Any, weight: Any, stride: Any, padding: Any,
                    dilation: Any, output_padding: Any, groups: int) -> Array:
    x, w, _ = _operands(op, input, weight, n)
    with _named(op):
        base = conv_attrs(n, stride=stride, padding=padding, kernel_dilation=dilation,
                          groups=groups)
        extra = conv_attrs(n, padding=output_padding)["padding"]
    k = w.shape[1:-1]
    lo, hi = [], []
    for i in range(n):
        s, d, (pl, ph), op_ = base["stride"][i], base["kernel_dilation"][i], \
            base["padding"][i], extra[i][0]
        if op_ < 0 or op_ >= max(s, d) or pl < 0 or ph < 0:
            raise ValueError(f"{op}: padding must be >= 0 and output_padding in [0, "
                             f"max(stride, dilation)), got padding {padding!r}, "
                             f"output_padding {output_padding!r}")
        lo.append(d * (k[i] - 1) - pl)
        hi.append(d * (k[i] - 1) - ph + op_)
    attrs = conv_attrs(n, stride=1, padding=(lo, hi), kernel_dilation=base["kernel_dilation"],
                       input_dilation=base["stride"], groups=groups, flip=True)
    with _named(op):
        return _record(x, w, attrs)


def conv_transpose1d(input: Any, weight: Any, stride: int = 1, padding: int = 0,
                     dilation: int = 1, output_padding: int = 0, groups: int = 1) -> Array:
    """1-d transposed convolution (MLX): x (N, L, C_in), weight (C_out, K, C_in / groups);
    output length ``(L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1``.

    >>> import braze as bz
    >>> bz.conv_transpose1d(bz.ones((1, 3, 1)), bz.ones((1, 2, 1)), stride=2).reshape(-1).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    return _conv_transpose("conv_transpose1d", 1, input, weight, stride, padding, dilation,
                           output_padding, groups)


def conv_transpose2d(input: Any, weight: Any, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1, output_padding: Any = 0, groups: int = 1) -> Array:
    """2-d transposed convolution (MLX): x (N, H, W, C_in), weight (C_out, KH, KW,
    C_in / groups).

    >>> import braze as bz
    >>> bz.conv_transpose2d(bz.ones((1, 4, 4, 3)), bz.ones((2, 3, 3, 3)), stride=2).shape
    (1, 9, 9, 2)
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, stride, padding, dilation,
                           output_padding, groups)


def conv_transpose3d(input: Any, weight: Any, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1, output_padding: Any = 0, groups: int = 1) -> Array:
    """3-d transposed convolution (MLX): x (N, D, H, W, C_in), weight (C_out, KD, KH, KW,
    C_in / groups).

    >>> import braze as bz
    >>> bz.conv_transpose3d(bz.ones((1, 2, 2, 2, 1)), bz.ones((1, 2, 2, 2, 1))).shape
    (1, 3, 3, 3, 1)
    """
    return _conv_transpose("conv_transpose3d", 3, input, weight, stride, padding, dilation,
                           output_padding, groups)


# ------------------------------------------------------------------------------ pooling
def _pool_geometry(op: str, x: Array, kernel_size: Any, stride: Any, padding: Any,
                   dilation: Any, ceil_mode: bool
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                              list[tuple[int, int]], list[int], list[tuple[int, int]]]:
    """(kernel, stride, dilation, (lo, hi) padding of the input incl. ceil mode's
    extension, output sizes, the requested (lo, hi)) of a pool; the pads' ``hi`` may be
    negative (a crop)."""
    ks = (kernel_size,) if isinstance(kernel_size, (int, np.integer)) else tuple(kernel_size)
    n = len(ks)
    if x.ndim != n + 2:
        raise ValueError(f"{op}: expected x (N, *spatial, C) with {n} spatial dims for "
                         f"kernel_size {kernel_size!r}, got shape {x.shape}")
    with _named(op):
        a = conv_attrs(n, stride=ks if stride is None else stride, padding=padding,
                       kernel_dilation=dilation)
        conv_attrs(n, stride=ks)  # (the kernel sizes: positive ints, one per dim)
    pads, outs, req = [], [], []
    for i in range(n):
        size, k, s, d = x.shape[1 + i], ks[i], a["stride"][i], a["kernel_dilation"][i]
        lo, hi = a["padding"][i]
        span = d * (k - 1) + 1
        if lo < 0 or hi < 0 or max(lo, hi) >= span:
            raise ValueError(f"{op}: padding must be >= 0 and smaller than the (dilated) "
                             f"window {span}, got {padding!r}")
        total = size + lo + hi - span
        o = (-(-total // s) if ceil_mode else total // s) + 1
        if ceil_mode and (o - 1) * s >= size + lo:  # the last window must start inside
            o -= 1
        if o < 1:
            raise ValueError(f"{op}: spatial dim {i} of size {size} with kernel {k}, padding "
                             f"{(lo, hi)}, dilation {d} leaves no output position")
        outs.append(o)
        pads.append((lo, (o - 1) * s + span - size - lo))
        req.append((lo, hi))
    return ks, a["stride"], a["kernel_dilation"], pads, outs, req


def _tiled(x: Array, ks: Sequence[int], strides: Sequence[int], dils: Sequence[int],
           pads: Sequence[tuple[int, int]], outs: Sequence[int]) -> Array | None:
    """x cropped and reshaped to (N, o1, k1, o2, k2, ..., C) when the windows tile it
    (stride == kernel, no dilation, no padding): a pool is then one reduction."""
    if any(s != k or d != 1 or lo != 0 or hi > 0 for k, s, d, (lo, hi)
           in zip(ks, strides, dils, pads)):
        return None
    crop = x[(slice(None),) + tuple([slice(0, o * k) for o, k in zip(outs, ks)])]
    return reshape(crop, (x.shape[0], *[v for o, k in zip(outs, ks) for v in (o, k)],
                          x.shape[-1]))


def _pad_spatial(x: Array, pads: Sequence[tuple[int, int]], fill: Any) -> Array:
    """x padded with ``fill`` (a negative ``hi`` crops): one fill and one slice update
    (two steps; a concat per padded dim would be one more each)."""
    crop = tuple(slice(0, x.shape[1 + i] + min(hi, 0)) for i, (_, hi) in enumerate(pads))
    if any(hi < 0 for _, hi in pads):
        x = x[(slice(None),) + crop]
    if all(lo == 0 and hi <= 0 for lo, hi in pads):
        return x
    shape = (x.shape[0], *[s + lo + max(hi, 0) for s, (lo, hi) in zip(x.shape[1:-1], pads)],
             x.shape[-1])
    out = full(shape, fill, dtype=x.dtype)
    out[(slice(None),) + tuple([slice(lo, lo + s) for s, (lo, _) in zip(x.shape[1:-1], pads)])] = x
    return out


def max_pool(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Array:
    """Max pooling over the spatial dims of x (N, *spatial, C) (one spatial dim per
    entry of ``kernel_size``); ``stride`` defaults to the kernel; ``padding`` an int, one
    int per dim or ``(lo, hi)`` sequences (padded positions never win).

    >>> import braze as bz
    >>> x = bz.reshape(bz.arange(16.0), (1, 4, 4, 1))
    >>> bz.nn.max_pool(x, (2, 2))[0, :, :, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
    """
    x = as_array(x, "max_pool")
    ks, st, dl, pads, outs, _ = _pool_geometry("max_pool", x, kernel_size, stride, padding,
                                            dilation, ceil_mode)
    tiled = _tiled(x, ks, st, dl, pads, outs)
    if tiled is not None:
        return _max(tiled, axis=tuple(range(2, 2 * len(ks) + 1, 2)))
    if dt.is_floating(x.dtype):  # one op: a native kernel reads the windows in place
        return Array(Node(MAX_POOL, (x._node,), {
            "kernel_size": tuple(ks), "stride": tuple(st), "dilation": tuple(dl),
            "padding": tuple(pads)}, (x.shape[0], *outs, x.shape[-1]), x.dtype))
    views = pool_windows(_pad_spatial(x, pads, pool_fill(x.dtype)), ks, st, dl, outs)
    out = views[0]
    for v in views[1:]:
        out = maximum(out, v)
    return out


def _counts(size: int, k: int, s: int, d: int, lo: int, o: int, lo_lim: int, hi_lim: int
            ) -> np.ndarray:
    """How many of each output position's window taps fall in [-lo_lim, size + hi_lim)."""
    taps = (np.arange(o) * s - lo)[:, None] + np.arange(k)[None, :] * d
    return ((taps >= -lo_lim) & (taps < size + hi_lim)).sum(1)


def avg_pool(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True,
             dilation: Any = 1) -> Array:
    """Average pooling over the spatial dims of x (N, *spatial, C); with
    ``count_include_pad`` the explicit padding counts in the divisor (ceil mode's
    extension never does), else only the input's own elements.

    >>> import braze as bz
    >>> x = bz.ones((1, 2, 2, 1))
    >>> bz.nn.avg_pool(x, (2, 2), stride=1, padding=1, count_include_pad=False).shape
    (1, 3, 3, 1)
    """
    x = as_array(x, "avg_pool")
    if not dt.is_floating(x.dtype) or dt.is_complex(x.dtype):
        raise TypeError(f"avg_pool: expected a real floating x, got {dt.name(x.dtype)}")
    ks, st, dl, pads, outs, req = _pool_geometry("avg_pool", x, kernel_size, stride, padding,
                                            dilation, ceil_mode)
    tiled = _tiled(x, ks, st, dl, pads, outs)
    if tiled is not None:
        return mean(tiled, axis=tuple(range(2, 2 * len(ks) + 1, 2)))
    # one op: a native kernel sums the windows in place (padded taps add +0.0)
    total = Array(Node(WINDOW_SUM, (x._node,), {
        "kernel_size": tuple(ks), "stride": tuple(st), "dilation": tuple(dl),
        "padding": tuple(pads)}, (x.shape[0], *outs, x.shape[-1]), x.dtype))
    # the divisor is static: per dim, the taps inside the input (and its explicit padding)
    inv = np.ones((), np.float64)
    for i in range(len(ks)):
        lo, hi = req[i] if count_include_pad else (0, 0)
        c = _counts(x.shape[1 + i], ks[i], st[i], dl[i], pads[i][0], outs[i], lo, hi)
        inv = np.multiply.outer(inv, 1.0 / c)
    scale = inv.reshape(1, *outs, 1).astype(np.float64 if x.dtype == dt.float64 else np.float32)
    return total * astype(asarray(scale), x.dtype)


# ------------------------------------------------------------------ normalization
def batch_norm(x: Any, mean: Any, var: Any, weight: Any | None = None, bias: Any | None = None,
               eps: float = 1e-5) -> Array:
    """Batch normalization with given statistics over the last (channel) axis:
    ``(x - mean) / sqrt(var + eps) * weight + bias`` (one fused elementwise kernel).

    >>> import braze as bz
    >>> bz.nn.batch_norm(bz.asarray([[2.0, 4.0]]), bz.asarray([1.0, 1.0]),
    ...                  bz.asarray([1.0, 4.0]), eps=0.0).tolist()
    [[1.0, 1.5]]
    """
    x = as_array(x, "batch_norm")
    c = x.shape[-1:] if x.ndim else ()
    stats = {"mean": mean, "var": var, "weight": weight, "bias": bias}
    for name, v in stats.items():
        if v is not None and as_array(v, "batch_norm").shape != c:
            raise ValueError(f"batch_norm: {name} of shape {as_array(v, 'batch_norm').shape} "
                             f"does not match the channels of x {x.shape} (last axis)")
    scale = 1.0 / sqrt(as_array(var, "batch_norm") + eps)
    if weight is not None:
        scale = scale * weight
    y = (x - mean) * scale
    return y if bias is None else y + bias


def group_norm(x: Any, num_groups: int, weight: Any | None = None, bias: Any | None = None,
               eps: float = 1e-5) -> Array:
    """Group normalization of x (N, *spatial, C): statistics over the spatial dims and
    the C / num_groups channels of each group (instance norm: num_groups = C; layer
    norm over all features: 1); then a per-channel ``weight`` and ``bias``.

    >>> import braze as bz
    >>> y = bz.nn.group_norm(bz.asarray([[[1.0, 3.0]]]), 1, eps=0.0)
    >>> y.reshape(-1).tolist()
    [-1.0, 1.0]
    """
    x = as_array(x, "group_norm")
    if x.ndim < 2 or not isinstance(num_groups, (int, np.integer)) or num_groups < 1 \
            or x.shape[-1] % num_groups:
        raise ValueError(f"group_norm: x (N, *spatial, C) with C a multiple of num_groups, "
                         f"got shape {x.shape} and num_groups={num_groups!r}")
    g = int(num_groups)
    xg = reshape(x, (x.shape[0], -1, g, x.shape[-1] // g))
    axes = (1, 3)
    mu = mean(xg, axis=axes, keepdims=True)
    c = xg - mu
    y = reshape(c * (1.0 / sqrt(mean(c * c, axis=axes, keepdims=True) + eps)), x.shape)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


# ------------------------------------------------------------------------ resizing
def _resize_taps(size: int, out: int, mode: str, align_corners: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, weight of the upper) per output position of one dim."""
    if mode == "nearest":
        i = np.minimum(np.floor(np.arange(out) * (size / out)).astype(np.int64), size - 1)
        return i, i, np.zeros(out)
    if align_corners and out > 1:
        src = np.arange(out) * ((size - 1) / (out - 1))
    else:
        src = np.maximum((np.arange(out) + 0.5) * (size / out) - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), size - 1)
    return lo, np.minimum(lo + 1, size - 1), src - lo


def upsample(x: Any, scale_factor: Any, mode: str = "nearest", align_corners: bool = False
             ) -> Array:
    """Resize the spatial dims of x (N, *spatial, C) by ``scale_factor`` (one per dim or
    one for all): ``nearest`` or ``linear`` (bilinear / trilinear: separable, one gather
    and one lerp per dim; PyTorch's half-pixel centers unless ``align_corners``).

    >>> import braze as bz
    >>> bz.nn.upsample(bz.asarray([[[1.0], [3.0]]]), 2, mode="linear").reshape(-1).tolist()
    [1.0, 1.5, 2.5, 3.0]
    """
    x = as_array(x, "upsample")
    n = x.ndim - 2
    if n < 1:
        raise ValueError(f"upsample: expected x (N, *spatial, C), got shape {x.shape}")
    if mode not in ("nearest", "linear"):
        raise ValueError(f"upsample: mode must be 'nearest' or 'linear', got {mode!r}")
    sf = (scale_factor,) * n if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
    if len(sf) != n or any(f <= 0 for f in sf):
        raise ValueError(f"upsample: scale_factor must be positive, one per spatial dim "
                         f"({n}) or one for all, got {scale_factor!r}")
    if mode == "linear" and (not dt.is_floating(x.dtype) or dt.is_complex(x.dtype)):
        raise TypeError(f"upsample: linear mode needs a real floating x, got "
                        f"{dt.name(x.dtype)}")
    y = x
    for i, f in enumerate(sf):
        size = x.shape[1 + i]
        out = int(math.floor(size * f))
        lo, hi, t = _resize_taps(size, out, mode, align_corners)
        a = take(y, asarray(lo), axis=1 + i)
        if mode == "nearest" or not t.any():
            y = a
            continue
        b = take(y, asarray(hi), axis=1 + i)
        w = asarray(t.reshape((out,) + (1,) * (n - i)).astype(
            np.float64 if x.dtype == dt.float64 else np.float32))
        y = a + (b - a) * astype(w, x.dtype)
    return y
