"""Native ``x[region] = v`` for the ``cpu`` backend: a slice store into a buffer that
only ``x`` holds, on every thread.

A loop of slice updates (``u[1:-1] = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])``)
computes the value, then copies it into the region; numpy's copy runs on one thread and
took about as long as the kernel that computed the value. Here the region's rows (or,
for one contiguous run, chunks of it) are split between OpenMP threads, one ``memcpy``
per run contiguous in both. Below ``MIN_BYTES`` numpy's copy stays: a 1 MB region of
rows copied as fast on one thread as on two, and this path's Python costs microseconds.

Any dtype of the buffer's (elements copied by size), a region of up to 4 dims; the value
a strided array of the same dtype (a broadcast one: stride 0).

Args (int64): threads, element bytes, the region's 4 dims, the destination's element
offset and 4 element strides, the value's element offset and 4 element strides.
Buffers: the destination buffer (C-contiguous), the buffer the value views (C-contiguous).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from .library import file_kernel

__all__ = ["MIN_BYTES", "assign", "source"]

MIN_BYTES = 1 << 21  # smaller regions: numpy's copy (a launch and threads cost more)
MAX_DIMS = 4

source, _KERNELS = file_kernel(__package__, "kernels/assign.cc", "bz_assign")


def _layout(a: np.ndarray, base: np.ndarray) -> tuple[int, list[int]] | None:
    """(offset, strides) of ``a`` within the buffer of ``base``, in elements of ``a``'s
    dtype (``base`` may be raw bytes: a pooled buffer)."""
    item = a.dtype.itemsize
    off = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if off % item or any(s % item for s in a.strides):
        return None
    return off // item, [s // item for s in a.strides]


def assign(dst: np.ndarray, key: tuple[Any, ...], value: np.ndarray, num_threads: int,
           min_bytes: int = MIN_BYTES) -> None:
    """``dst[key] = value`` (``key`` basic: slices, ints, None, ...), natively for a
    C-contiguous ``dst`` and a region of at least ``min_bytes`` and at most 4 dims of
    ``dst``'s dtype that the value does not overlap, else numpy's store.

    >>> x = np.zeros((3, 4), np.float32)
    >>> assign(x, (slice(1, None), slice(None, 2)), np.ones((2, 2), np.float32), 2)
    >>> x.sum()
    np.float32(4.0)
    """
    region = dst[key]
    if region.nbytes < min_bytes or region.ndim > MAX_DIMS or not dst.flags.c_contiguous \
            or value.dtype != dst.dtype or dst.dtype.hasobject or region.ndim == 0 or \
            np.may_share_memory(region, value):  # (an overlap: numpy buffers it)
        dst[key] = value
        return
    if value.shape != region.shape:
        value = np.broadcast_to(value, region.shape)
    base = value
    while isinstance(base.base, np.ndarray):
        base = base.base
    d, s = _layout(region, dst), _layout(value, base) if base.flags.c_contiguous else None
    h = _KERNELS.handle_or_none() if d is not None and s is not None else None
    if h is None or d is None or s is None:
        dst[key] = value
        return
    pad = MAX_DIMS - region.ndim
    args = [num_threads, dst.dtype.itemsize, *((1,) * pad + region.shape), d[0],
            *((0,) * pad + tuple(d[1])), s[0], *((0,) * pad + tuple(s[1]))]
    _core.launch(h, [dst, base], np.array(args, np.int64))
