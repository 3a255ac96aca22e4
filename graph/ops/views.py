"""Views and data movement: reshape, permute, broadcast, slice, concat."""

from __future__ import annotations

import numpy as np

from .record import OpDef, declare


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
                        infer=_reshape_infer))
PERMUTE = declare(OpDef("permute_dims", "view", 1, lambda x, *, axes: np.transpose(x, axes),
                        infer=_permute_infer))
BROADCAST = declare(OpDef("broadcast_to", "view", 1,
                          lambda x, *, shape: np.broadcast_to(x, shape),
                          infer=_reshape_infer))
SLICE = declare(OpDef("slice", "view", 1, _slice_ref, infer=_slice_infer))
def _slice_update_ref(x, v, *, slices):
    out = np.array(x, copy=True)
    out[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in slices)] = v
    return out


SLICE_UPDATE = declare(OpDef(
    "slice_update", "view", 2, _slice_update_ref,
    infer=lambda shapes, dtypes, attrs: (shapes[0], dtypes[0]),
    doc="x with the region attrs['slices'] replaced by v (v has the region's shape).",
))
CONCAT = declare(OpDef("concat", "view", -1,
                       lambda *xs, axis: np.concatenate(xs, axis=axis), infer=_concat_infer))
