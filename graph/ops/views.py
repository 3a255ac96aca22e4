"""Views and data movement: reshape, permute, broadcast, slice, concat."""

from __future__ import annotations

import numpy as np

from .record import OpDef, declare


# ---- gradient rules (see OpDef.vjp)
def _permute_vjp(ad, g, y, x, *, axes):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return (ad.permute_dims(g, tuple(inv)),)


def _slice_vjp(ad, g, y, x, *, slices):
    return (ad.apply("slice_update", ad.zeros(x.shape, dtype=g.dtype), g, slices=slices),)


def _slice_update_vjp(ad, g, y, x, v, *, slices):
    return (ad.apply("slice_update", g, ad.zeros(v.shape, dtype=g.dtype), slices=slices),
            ad.apply("slice", g, slices=slices))


def _concat_vjp(ad, g, y, *xs, axis):
    out, start = [], 0
    for x in xs:
        n = x.shape[axis]
        out.append(ad.apply("slice", g, slices=tuple(
            (start, start + n, 1) if a == axis else (0, g.shape[a], 1) for a in range(g.ndim))))
        start += n
    return tuple(out)


def _reshape_infer(shapes, dtypes, attrs):
    return attrs["shape"], dtypes[0]


def _permute_infer(shapes, dtypes, attrs):
    return tuple(shapes[0][a] for a in attrs["axes"]), dtypes[0]


def _slice_infer(shapes, dtypes, attrs):
    return tuple(len(range(*s)) for s in attrs["slices"]), dtypes[0]


def _slice_ref(x, *, slices):
    # normalized (start, stop, step); a negative stop means "past the front"
    return x[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in slices)]


def _concat_infer(shapes, dtypes, attrs):
    axis = attrs["axis"]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out), dtypes[0]


RESHAPE = declare(OpDef("reshape", "view", 1, lambda x, *, shape: x.reshape(shape),
                        infer=_reshape_infer,
                        vjp=lambda ad, g, y, x, *, shape: (ad.reshape(g, x.shape),)))
PERMUTE = declare(OpDef("permute_dims", "view", 1, lambda x, *, axes: np.transpose(x, axes),
                        infer=_permute_infer, vjp=_permute_vjp))
BROADCAST = declare(OpDef("broadcast_to", "view", 1,
                          lambda x, *, shape: np.broadcast_to(x, shape),
                          infer=_reshape_infer,
                          vjp=lambda ad, g, y, x, *, shape: (g,)))  # (summed down to x)
SLICE = declare(OpDef("slice", "view", 1, _slice_ref, infer=_slice_infer, vjp=_slice_vjp))
def _slice_update_ref(x, v, *, slices):
    out = np.array(x, copy=True)
    out[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in slices)] = v
    return out


SLICE_UPDATE = declare(OpDef(
    "slice_update", "view", 2, _slice_update_ref,
    infer=lambda shapes, dtypes, attrs: (shapes[0], dtypes[0]),
    doc="x with the region attrs['slices'] replaced by v (v has the region's shape).",
    vjp=_slice_update_vjp,
))
CONCAT = declare(OpDef("concat", "view", -1,
                       lambda *xs, axis: np.concatenate(xs, axis=axis), infer=_concat_infer,
                       vjp=_concat_vjp))
