"""Native ``roll`` for the ``cpu`` backend's replay programs.

A loop of cyclic shifts (a game of life's eight ``np.roll(np.roll(b, i, 0), j, 1)`` per
step) ran each roll as a Python step between native segments, numpy's ``np.roll``
slicing a copy per axis. As a program step one copy runs in the segment: per output row,
two ``memcpy`` of the shifted halves where the input's rows are contiguous (an element
at a time otherwise), the leading dims' rows read from their wrapped positions.

Any dtype (elements copied by size), up to 4 dims, the input a strided view (offset and
element strides), the output contiguous. Single-threaded: a copy of a board is a few
microseconds.

Args (int64): element bytes, the output's 4 dims, the shift of each (in [0, dim)), the
input's element offset and 4 element strides. Buffers: the input, the output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph.view import View
from ..replay import NativeLibraryCall
from .library import file_kernel

__all__ = ["native_call", "source"]

MAX_DIMS = 4


source, _KERNELS = file_kernel(__package__, "kernels/roll.cc", "bz_roll")


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
    """``roll`` as a replay-program step (at most 4 dims); None otherwise (numpy's
    ``np.roll`` runs).

    >>> from braze.graph.view import View
    >>> f4 = np.dtype(np.float32)
    >>> attrs = {"shifts": (1, 2), "axes": (0, 1)}
    >>> native_call(attrs, [(View.contiguous((3, 4)), f4)], ((3, 4), f4)) is not None
    True
    """
    shape, dtype = out
    nd = len(shape)
    ((view, d),) = inputs
    if set(attrs) != {"shifts", "axes"} or nd > MAX_DIMS or nd == 0 or 0 in shape or \
            d != dtype or dtype.hasobject or view.shape != tuple(shape):
        return None
    h = _KERNELS.handle_or_none()
    if h is None:
        return None
    pad = MAX_DIMS - nd
    shifts = [0] * MAX_DIMS
    for ax, s in zip(attrs["axes"], attrs["shifts"]):
        shifts[ax % nd + pad] = s % shape[ax % nd]
    args = [dtype.itemsize, *((1,) * pad + tuple(shape)), *shifts, view.offset,
            *((0,) * pad + tuple(view.strides))]
    return NativeLibraryCall(h, np.array(args, np.int64), threads_arg=False)
