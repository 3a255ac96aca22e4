"""Convolution: one ``conv`` record for every convolution, MLX's ``conv_general``.

Channels-last, MLX's convention: x (N, *spatial, C_in), weight (C_out, *kernel,
C_in / groups), result (N, *out, C_out). Attributes (tuples, one entry per spatial
dim): ``stride``, ``padding`` ((lo, hi) per dim; negative crops), ``kernel_dilation``,
``input_dilation`` (zeros between input elements: a transposed convolution is a
convolution of the input-dilated x with the flipped kernel), ``groups`` and ``flip``
(convolution proper instead of cross-correlation). Max pooling of floating x is one
``max_pool`` record, average pooling a ``window_sum`` record times the window sizes'
reciprocals (native kernels read each window in place; padding x first cost a copy of the
input); batch / group norm and resizing are compositions of other ops
(``braze.arrays.conv``).

The reference lowers to im2col: per kernel offset, a strided view of the padded input
is copied into a (N*out, kernel, C_in/groups) matrix per group, then one batched
matmul over the groups, in the compute dtype (float16/bfloat16 in float32).

>>> x = np.arange(5, dtype=np.float32).reshape(1, 5, 1)
>>> w = np.ones((1, 3, 1), np.float32)
>>> conv_ref(x, w, **conv_attrs(1, stride=1, padding=0)).reshape(-1).tolist()
[3.0, 6.0, 9.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare
from .shapes import Shape

__all__ = ["CONV", "CONV_CONCAT", "CONV_FUSED", "MAX_POOL", "WINDOW_SUM", "concat_branches",
           "conv_attrs", "conv_out_size", "conv_ref", "dilate_and_pad", "pool_fill",
           "pool_outs", "pool_windows"]


def _per_dim(name: str, v: Any, n: int, lo: int) -> tuple[int, ...]:
    """``v`` (an int or one int per spatial dim) as an n-tuple of ints >= ``lo``."""
    vals = (v,) * n if isinstance(v, (int, np.integer)) else tuple(v)
    if len(vals) != n or not all(isinstance(x, (int, np.integer)) for x in vals):
        raise ValueError(f"conv: {name} must be an int or {n} ints (one per spatial dim), "
                         f"got {v!r}")
    if any(x < lo for x in vals):
        raise ValueError(f"conv: {name} must be >= {lo}, got {v!r}")
    return tuple(int(x) for x in vals)


def conv_attrs(n: int, *, stride: Any = 1, padding: Any = 0, kernel_dilation: Any = 1,
               input_dilation: Any = 1, groups: int = 1, flip: bool = False
               ) -> dict[str, Any]:
    """The ``conv`` record's attributes for ``n`` spatial dims from MLX-style arguments:
    ``padding`` an int, one int per dim (symmetric), or a pair ``(lo, hi)`` of per-dim
    sequences (asymmetric, ONNX's ``pads``).

    >>> conv_attrs(2, stride=2, padding=([0, 1], [1, 1]))["padding"]
    ((0, 1), (1, 1))
    """
    if isinstance(padding, (int, np.integer)) or (
            len(padding) == n and all(isinstance(p, (int, np.integer)) for p in padding)):
        lo = hi = _per_dim("padding", padding, n, -(1 << 62))
    else:
        if len(padding) != 2:
            raise ValueError(f"conv: padding must be an int, {n} ints or a pair (lo, hi) of "
                             f"{n} ints each, got {padding!r}")
        lo = _per_dim("padding", padding[0], n, -(1 << 62))
        hi = _per_dim("padding", padding[1], n, -(1 << 62))
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"conv: groups must be a positive int, got {groups!r}")
    return {"stride": _per_dim("stride", stride, n, 1),
            "padding": tuple(zip(lo, hi)),
            "kernel_dilation": _per_dim("kernel_dilation", kernel_dilation, n, 1),
            "input_dilation": _per_dim("input_dilation", input_dilation, n, 1),
            "groups": int(groups), "flip": bool(flip)}


def conv_out_size(size: int, k: int, stride: int, pad: tuple[int, int], kdil: int,
                  idil: int) -> int:
    """Output length of one spatial dim (may be <= 0: the caller reports it).

    >>> conv_out_size(224, 7, 2, (3, 3), 1, 1)
    112
    """
    dilated = (size - 1) * idil + 1 if size else 0
    span = (k - 1) * kdil + 1
    return (dilated + pad[0] + pad[1] - span) // stride + 1


def _conv_infer(shapes: tuple[Shape, ...], dtypes: tuple[np.dtype, ...],
                attrs: dict[str, Any]) -> tuple[Shape, np.dtype]:
    x, w = shapes
    n = len(attrs["stride"])
    g = attrs["groups"]
    if len(x) != n + 2 or len(w) != n + 2:
        raise ValueError(f"conv: expected x (N, *spatial, C_in) and weight (C_out, *kernel, "
                         f"C_in/groups) with {n} spatial dims, got shapes {x} and {w}")
    if x[-1] != w[-1] * g or w[0] % g:
        raise ValueError(f"conv: x {x} has {x[-1]} channels and weight {w} takes {w[-1]} per "
                         f"group with groups={g} (C_in must be groups * {w[-1]} and C_out "
                         f"{w[0]} a multiple of groups)")
    for d in dtypes:
        if not dt.is_real_floating(d):
            raise TypeError(f"conv: x and weight must be real floating, got "
                            f"{dt.name(dtypes[0])} and {dt.name(dtypes[1])}")
    out = []
    for i in range(n):
        o = conv_out_size(x[1 + i], w[1 + i], attrs["stride"][i], attrs["padding"][i],
                          attrs["kernel_dilation"][i], attrs["input_dilation"][i])
        if o < 1 or w[1 + i] < 1:
            raise ValueError(f"conv: spatial dim {i} of x {x} with kernel {w[1:-1]}, padding "
                             f"{attrs['padding'][i]}, dilation {attrs['kernel_dilation'][i]} "
                             f"and stride {attrs['stride'][i]} leaves no output position")
        out.append(o)
    return (x[0], *out, w[0]), dt.result_type(*dtypes)


def dilate_and_pad(x: np.ndarray, padding: Sequence[tuple[int, int]],
                   input_dilation: Sequence[int], fill: Any = 0) -> np.ndarray:
    """x (N, *spatial, C) with zeros between elements (input dilation), then padded (a
    negative pad crops) with ``fill`` on every spatial dim.

    >>> dilate_and_pad(np.ones((1, 2, 1)), [(1, -1)], [2]).reshape(-1).tolist()
    [0.0, 1.0, 0.0]
    """
    n = len(padding)
    if any(d > 1 for d in input_dilation):
        shape = (x.shape[0], *[(s - 1) * d + 1 if s else 0
                               for s, d in zip(x.shape[1:-1], input_dilation)], x.shape[-1])
        y = np.zeros(shape, x.dtype)
        y[(slice(None),) + tuple([slice(None, None, d) for d in input_dilation])] = x
        x = y
    widths = [(0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding] + [(0, 0)]
    if any(w != (0, 0) for w in widths[1:1 + n]):
        x = np.pad(x, widths, constant_values=fill)
    # then negative pads crop (after padding: a crop may reach into the other side's pad)
    crop = tuple(slice(max(-lo, 0), x.shape[1 + i] - max(-hi, 0))
                 for i, (lo, hi) in enumerate(padding))
    x = x[(slice(None),) + crop]
    return x


def conv_ref(x: np.ndarray, w: np.ndarray, *, stride, padding, kernel_dilation,
             input_dilation, groups, flip) -> np.ndarray:
    """The convolution by im2col and one batched matmul over the groups (module doc)."""
    ct = np.result_type(x.dtype, w.dtype)
    n = len(stride)
    if flip:
        w = np.flip(w, axis=tuple(range(1, n + 1)))
    xp = dilate_and_pad(x.astype(ct, copy=False), padding, input_dilation)
    k = w.shape[1:-1]
    outs = [(xp.shape[1 + i] - ((k[i] - 1) * kernel_dilation[i] + 1)) // stride[i] + 1
            for i in range(n)]
    batch, cin, cout = x.shape[0], x.shape[-1], w.shape[0]
    cols = np.empty((batch, *outs, math.prod(k), cin), ct)
    for j, offs in enumerate(np.ndindex(*k)):
        cols[..., j, :] = xp[(slice(None),) + tuple([
            slice(o * kernel_dilation[i], o * kernel_dilation[i] + (outs[i] - 1) * stride[i] + 1,
                  stride[i]) for i, o in enumerate(offs)])]
    g, cg, og = groups, cin // groups, cout // groups
    p = batch * math.prod(outs)
    kk = math.prod(k)
    a = cols.reshape(p, kk, g, cg).transpose(2, 0, 1, 3).reshape(g, p, kk * cg)  # (G, P, K*cg)
    b = w.astype(ct, copy=False).reshape(g, og, -1).transpose(0, 2, 1)  # (G, K*cg, og)
    out = np.matmul(a, b)  # (G, P, og)
    return out.transpose(1, 0, 2).reshape(batch, *outs, cout)


def _padded(ad: Any, x: Any, padding, input_dilation, fill: Any = 0) -> Any:
    """x dilated and padded (with ``fill``; a negative pad crops) as the convolution or a
    pool reads it, recorded with ``ad``'s ops."""
    if any(d > 1 for d in input_dilation):
        z = ad.zeros((x.shape[0], *[(s - 1) * d + 1 for s, d in zip(x.shape[1:-1],
                                                                    input_dilation)],
                      x.shape[-1]), dtype=x.dtype)
        z[(slice(None),) + tuple([slice(None, None, d) for d in input_dilation])] = x
        x = z
    if any(lo > 0 or hi > 0 for lo, hi in padding):
        z = ad.full((x.shape[0], *[s + max(lo, 0) + max(hi, 0) for s, (lo, hi)
                                   in zip(x.shape[1:-1], padding)], x.shape[-1]), fill,
                    dtype=x.dtype)
        z[(slice(None),) + tuple([slice(max(lo, 0), max(lo, 0) + s) for s, (lo, _)
                          in zip(x.shape[1:-1], padding)])] = x
        x = z
    x = x[(slice(None),) + tuple([slice(max(-lo, 0), x.shape[1 + i] - max(-hi, 0))
                          for i, (lo, hi) in enumerate(padding)])]
    return x


def _conv_vjp(ad, g, y, x, w, *, stride, padding, kernel_dilation, input_dilation, groups,
              flip):
    n = len(stride)
    k = w.shape[1:-1]
    cg, og = x.shape[-1] // groups, w.shape[0] // groups
    outs = g.shape[1:-1]
    # x's cotangent: the transposed convolution of g (dilated by the stride, the kernel's
    # channels swapped per group and its taps reversed), cut back to x's positions
    wt = ad.reshape(w, (groups, og, *k, cg))
    wt = ad.reshape(ad.moveaxis(wt, (1, n + 2), (n + 2, 1)), (groups * cg, *k, og))
    sd = [(s - 1) * d + 1 for s, d in zip(x.shape[1:-1], input_dilation)]
    pads = tuple((kd * (kk - 1) - lo, sdi - 1 - (o - 1) * st + lo)
                 for kd, kk, (lo, _), sdi, o, st in zip(kernel_dilation, k, padding, sd, outs,
                                                        stride))
    gx = ad.apply("conv", g, wt, stride=(1,) * n, padding=pads,
                  kernel_dilation=kernel_dilation, input_dilation=stride, groups=groups,
                  flip=not flip)
    if any(d > 1 for d in input_dilation):
        gx = gx[(slice(None),) + tuple([slice(None, None, d) for d in input_dilation])]
    # w's cotangent: per kernel tap, the strided view of the padded x it read against g,
    # one batched matmul over the groups
    xp = _padded(ad, x, padding, input_dilation)
    p = g.size // max(g.shape[-1], 1)
    gg = ad.permute_dims(ad.reshape(g, (p, groups, og)), (1, 2, 0))  # (G, og, P)
    taps = []
    for t in np.ndindex(*k):
        v = xp[(slice(None),) + tuple([slice(i * kd, i * kd + (o - 1) * st + 1, st)
                               for i, kd, o, st in zip(t, kernel_dilation, outs, stride)])]
        v = ad.permute_dims(ad.reshape(v, (p, groups, cg)), (1, 0, 2))  # (G, P, cg)
        taps.append(ad.matmul(gg, v))  # (G, og, cg)
    gw = ad.reshape(ad.stack(taps, axis=2), w.shape)
    if flip:
        gw = ad.flip(gw, axis=tuple(range(1, n + 1)))
    return gx, gw


CONV = declare(OpDef(
    "conv", "library", 2, conv_ref, "real_floating", infer=_conv_infer, vjp=_conv_vjp,
    doc="N-d convolution (cross-correlation unless flip) of channels-last x with weight "
        "(C_out, *kernel, C_in/groups): stride, padding (lo, hi), kernel and input dilation, "
        "groups (MLX's conv_general).",
))


# ---------------------------------------------------------------- with its epilogue
def _fused_ref(x, w, *rest, stride, padding, kernel_dilation, input_dilation, groups, flip,
               bias, residual, act, clip, pool=None):
    out = conv_ref(x, w, stride=stride, padding=padding, kernel_dilation=kernel_dilation,
                   input_dilation=input_dilation, groups=groups, flip=flip)
    rest = list(rest)
    if bias:
        out = out + rest.pop(0).astype(out.dtype, copy=False)
    if residual:
        out = out + rest.pop(0).astype(out.dtype, copy=False)
    if act == "clip":
        lo, hi = (out.dtype.type(v) for v in clip)
        out = np.minimum(np.maximum(out, lo), hi)
    if pool:  # a max pool of the result (the conv_pool pass)
        out = _max_pool_ref(out, **dict(pool))
    return out


def _fused_infer(shapes, dtypes, attrs):
    shape, dtype = _conv_infer(shapes[:2], dtypes[:2], attrs)
    want = [(shape[-1],)] * attrs["bias"] + [shape] * attrs["residual"]
    if list(shapes[2:]) != want or any(d != dtype for d in dtypes[2:]):
        raise ValueError(f"conv_fused: epilogue inputs {shapes[2:]} ({dtypes[2:]}) do not "
                         f"match bias {attrs['bias']} / residual {attrs['residual']} of a "
                         f"{shape} {dtype} result")
    if attrs.get("pool"):
        p = dict(attrs["pool"])
        outs = pool_outs(shape, p["kernel_size"], p["stride"], p["dilation"], p["padding"])
        shape = (shape[0], *outs, shape[-1])
    return shape, dtype


CONV_FUSED = declare(OpDef(
    "conv_fused", "library", -1, _fused_ref, "real_floating", infer=_fused_infer,
    public=False,
    doc="conv with its epilogue, made by the conv_epilogue pass (never recorded by users): "
        "+ bias (C_out,), + residual (the result's shape), then clip to attrs['clip'] "
        "(ReLU: (0, inf)) when attrs['act'] == 'clip'; attrs['pool'] (the conv_pool pass: "
        "max_pool's attributes as sorted items), when set, max-pools that result.",
))


# ---------------------------------------------------------------- several, concatenated
def concat_branches(attrs: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """A ``conv_concat``'s branches: (number of inputs, its ``conv_fused`` attributes) each.

    >>> concat_branches({"branches": ((2, (("groups", 1),)),)})
    [(2, {'groups': 1})]
    """
    return [(n, dict(items)) for n, items in attrs["branches"]]


def _concat_ref(*xs, branches):
    outs, i = [], 0
    for n, a in concat_branches({"branches": branches}):
        outs.append(_fused_ref(*xs[i:i + n], **a))
        i += n
    return np.concatenate(outs, axis=-1)


def _concat_infer(shapes, dtypes, attrs):
    outs, i = [], 0
    for n, a in concat_branches(attrs):
        outs.append(_fused_infer(shapes[i:i + n], dtypes[i:i + n], a))
        i += n
    if i != len(shapes) or not outs:
        raise ValueError(f"conv_concat: {len(shapes)} inputs for branches taking {i}")
    lead, dtype = outs[0][0][:-1], outs[0][1]
    if any(s[:-1] != lead or d != dtype for s, d in outs):
        raise ValueError(f"conv_concat: branch results {[s for s, _ in outs]} "
                         f"({[str(d) for _, d in outs]}) differ before the channel axis")
    return (*lead, sum(s[-1] for s, _ in outs)), dtype


CONV_CONCAT = declare(OpDef(
    "conv_concat", "library", -1, _concat_ref, "real_floating", infer=_concat_infer,
    public=False,
    doc="conv_fused branches concatenated along the channel (last) axis, made by the "
        "conv_concat pass: attrs['branches'] holds (number of inputs, conv_fused attributes "
        "as sorted items) per branch; a backend may write each branch into its channel slice "
        "of the one result (no concatenation copy).",
))


# ---------------------------------------------------------------- max pooling
def pool_fill(dtype: np.dtype) -> Any:
    """The value padded positions hold in a max pool: they never win.

    >>> pool_fill(np.dtype(np.float32)), pool_fill(np.dtype(np.int8))
    (-inf, -128)
    """
    if dt.is_floating(dtype):
        return -math.inf
    if dt.is_bool(dtype):
        return False
    return int(np.iinfo(dtype).min)


def _window_keys(kernel_size, stride, dilation, outs) -> list[tuple[slice, ...]]:
    """Per kernel offset (row-major), the index of its strided view of a padded input."""
    return [(slice(None),) + tuple([slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, s, m
                                    in zip(offs, dilation, stride, outs)])
            for offs in np.ndindex(*kernel_size)]


def pool_windows(xp: Any, kernel_size, stride, dilation, outs) -> list[Any]:
    """One strided view of the padded input ``xp`` per kernel offset (row-major offsets):
    works on numpy and braze arrays alike."""
    return [xp[key] for key in _window_keys(kernel_size, stride, dilation, outs)]


def pool_outs(shape: Shape, kernel_size, stride, dilation, padding) -> list[int]:
    """The output sizes of a pool over channels-last ``shape``'s spatial dims.

    >>> pool_outs((1, 111, 111, 64), (3, 3), (2, 2), (1, 1), ((0, 0), (0, 0)))
    [55, 55]
    """
    return [(size + lo + hi - ((k - 1) * d + 1)) // s + 1 for size, k, s, d, (lo, hi)
            in zip(shape[1:-1], kernel_size, stride, dilation, padding)]


def _max_pool_ref(x, *, kernel_size, stride, dilation, padding):
    xp = dilate_and_pad(x, padding, (1,) * len(stride), fill=pool_fill(x.dtype))
    outs = pool_outs(x.shape, kernel_size, stride, dilation, padding)
    views = pool_windows(xp, kernel_size, stride, dilation, outs)
    out = views[0].copy()
    for v in views[1:]:
        np.maximum(out, v, out=out)  # the taps in order, NaN propagating
    return out


def _pool_infer(op: str) -> Any:
    """The shape rule of pooling op ``op`` (its errors name it)."""
    def infer(shapes, dtypes, attrs):
        (x,), n = shapes, len(attrs["kernel_size"])
        if len(x) != n + 2:
            raise ValueError(f"{op}: expected x (N, *spatial, C) with {n} spatial dims, got "
                             f"shape {x}")
        outs = pool_outs(x, attrs["kernel_size"], attrs["stride"], attrs["dilation"],
                          attrs["padding"])
        if any(o < 1 for o in outs):
            raise ValueError(f"{op}: x {x} with kernel {attrs['kernel_size']} and padding "
                             f"{attrs['padding']} leaves no output position")
        return (x[0], *outs, x[-1]), dtypes[0]
    return infer


def _max_pool_vjp(ad, g, y, x, *, kernel_size, stride, dilation, padding):
    # the gradient of the chain max(...max(max(v0, v1), v2)..., vK) of the padded input's
    # window views (what bz.nn.max_pool recorded before this op): each maximum gives g to
    # the operand that won, halved between tied ones (the elementwise rule); the views'
    # cotangents are added into the padded input's, which is then cut back to x
    xp = _padded(ad, x, padding, (1,) * len(stride), pool_fill(x.dtype))
    views = pool_windows(xp, kernel_size, stride, dilation, y.shape[1:-1])
    partial = [views[0]]
    for v in views[1:-1]:
        partial.append(ad.maximum(partial[-1], v))
    gv = [None] * len(views)
    for k in range(len(views) - 1, 0, -1):
        a, b, yk = partial[k - 1], views[k], (partial[k] if k < len(partial) else y)
        half = ad.where(a == b, 0.5, 1.0)
        gv[k] = g * ad.where(b == yk, half, 0.0)
        g = g * ad.where(a == yk, half, 0.0)
    gv[0] = g
    return (_windows_transpose(ad, x, gv, kernel_size, stride, dilation, padding,
                               y.shape[1:-1]),)


def _windows_transpose(ad: Any, x: Any, gv: list[Any], kernel_size, stride, dilation,
                       padding, outs) -> Any:
    """x's cotangent from the cotangents ``gv`` of its padded windows' views (one per tap,
    row-major): each added into the padded input's cotangent at its positions, which is then
    cut back to x (a crop's end gets zeros)."""
    n = len(stride)
    grow = [(lo, max(hi, 0)) for lo, hi in padding]
    kept = [x.shape[1 + i] + min(hi, 0) for i, (_, hi) in enumerate(padding)]
    gp = ad.zeros((x.shape[0], *[s + lo + hi for s, (lo, hi) in zip(kept, grow)], x.shape[-1]),
                  dtype=gv[0].dtype)
    for key, gk in zip(_window_keys(kernel_size, stride, dilation, outs), gv):
        gp[key] = gp[key] + gk
    gx = gp[(slice(None),) + tuple([slice(lo, lo + k) for (lo, _), k in zip(grow, kept)])]
    if any(hi < 0 for _, hi in padding):
        z = ad.zeros(x.shape, dtype=gx.dtype)
        z[(slice(None),) + tuple([slice(0, s) for s in gx.shape[1:1 + n]])] = gx
        gx = z
    return gx


MAX_POOL = declare(OpDef(
    "max_pool", "library", 1, _max_pool_ref, "real", infer=_pool_infer("max_pool"),
    vjp=_max_pool_vjp, public=False, moves_data=True,
    doc="Max pooling of channels-last x (N, *spatial, C): attrs kernel_size, stride, "
        "dilation, padding ((lo, hi) per dim, a negative hi crops; padded positions never "
        "win); the taps combined in row-major order, NaN propagating. bz.nn.max_pool records "
        "it for floating x.",
))


# ---------------------------------------------------------------- window sums (average pooling)
def _window_sum_ref(x, *, kernel_size, stride, dilation, padding):
    xp = dilate_and_pad(x, padding, (1,) * len(stride), fill=0)
    outs = pool_outs(x.shape, kernel_size, stride, dilation, padding)
    views = pool_windows(xp, kernel_size, stride, dilation, outs)
    out = views[0].copy()
    for v in views[1:]:
        out += v  # the taps in order, padded ones adding +0.0
    return out


def _window_sum_vjp(ad, g, y, x, *, kernel_size, stride, dilation, padding):
    # each window view of the zero-padded input gets g
    taps = math.prod(kernel_size)
    return (_windows_transpose(ad, x, [g] * taps, kernel_size, stride, dilation, padding,
                               y.shape[1:-1]),)


WINDOW_SUM = declare(OpDef(
    "window_sum", "library", 1, _window_sum_ref, "real_floating",
    infer=_pool_infer("window_sum"),
    vjp=_window_sum_vjp, public=False,
    doc="The sum of each pooling window of channels-last x (N, *spatial, C) (attrs as "
        "max_pool's; padded positions add +0.0), the taps in row-major order: "
        "bz.nn.avg_pool records it, then multiplies by the window sizes' reciprocals.",
))
