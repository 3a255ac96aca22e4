"""Native ``take_along_axis`` for the ``cpu`` backend's replay programs.

A cross-entropy loss picks each row's target logit with ``take_along_axis``; as a Python
step (numpy's ``np.take_along_axis``) it cut a training step's program in two, with
numpy's index arithmetic in between. As a program step (``kernels/take_along.cc``) the
gather runs in the segment: any dtype (elements copied by size), int32 / int64 indices,
up to 6 dims, x and the indices strided views broadcast to the output, the output
contiguous. Single-threaded: the gathers of a loss are a few hundred elements.

Indices are bounds-checked as numpy checks them (negative ones count from the end): the
first index outside ``[-n, n)`` stops the kernel with its value in the call's status
word, the program stops after the call, and the plan raises numpy's ``IndexError`` naming
the op (:attr:`~braze.backends.replay.NativeLibraryCall.error`).

``gather_call``: ``x[i]`` (the ``gather`` op with one index array on the first axis, the
rest whole: an embedding lookup, which at the head of an LLM decode step ran as the plan's
only Python steps) through the same kernel: x viewed as (1, ..., n, row) and the indices as
(i.shape, 1), gathered along the axis of n.

Args (int64): element bytes, index bytes, the axis' size, the output's 6 (padded) dims,
x's element offset, its 6 element strides (0 along the axis and broadcast dims), its
stride along the axis, the indices' element offset and 6 strides. Buffers: x, the
indices, the output, the status (2 int64: non-zero on a bad index, its value).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph.view import View
from ..replay import NativeLibraryCall
from .library import file_kernel

__all__ = ["MAX_DIMS", "gather_call", "native_call", "source"]

MAX_DIMS = 6
_INDEX = (np.dtype(np.int32), np.dtype(np.int64))

source, _KERNELS = file_kernel(__package__, "kernels/take_along.cc", "bz_take_along")


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
    """``take_along_axis`` as a replay-program step (up to 6 dims, int32 / int64 indices,
    elements of 1, 2, 4, 8 or 16 bytes); None otherwise (numpy's runs).

    >>> from braze.graph.view import View
    >>> f4, i8 = np.dtype(np.float32), np.dtype(np.int64)
    >>> call = native_call({"axis": 1}, [(View.contiguous((4, 10)), f4),
    ...                                  (View.contiguous((4, 1)), i8)], ((4, 1), f4))
    >>> call.scratch, str(call.error(np.array([1, 12])))[:53]
    ((16,), 'take_along_axis: index 12 is out of bounds for axis 1')
    """
    shape, dtype = out
    nd = len(shape)
    (xv, xd), (iv, idd) = inputs
    axis = attrs.get("axis")
    if not isinstance(axis, int) or set(attrs) != {"axis"} or not 0 <= axis < nd <= MAX_DIMS \
            or xd != dtype or dtype.hasobject or dtype.itemsize not in (1, 2, 4, 8, 16) \
            or idd not in _INDEX or len(xv.shape) != nd or len(iv.shape) != nd:
        return None
    h = _KERNELS.handle_or_none()
    if h is None:
        return None
    n = xv.shape[axis]
    x_strides = [0 if d == axis or (xv.shape[d] == 1 and shape[d] != 1) else xv.strides[d]
                 for d in range(nd)]
    i_strides = [0 if iv.shape[d] == 1 and shape[d] != 1 else iv.strides[d] for d in range(nd)]
    pad = MAX_DIMS - nd
    args = [dtype.itemsize, idd.itemsize, n, *((1,) * pad + tuple(shape)), xv.offset,
            *((0,) * pad + tuple(x_strides)), xv.strides[axis], iv.offset,
            *((0,) * pad + tuple(i_strides))]

    return NativeLibraryCall(h, np.array(args, np.int64), scratch=(16,), threads_arg=False,
                             error=_bounds_error("take_along_axis", axis, n))


def _bounds_error(op: str, axis: int, n: int) -> Any:
    """The IndexError of a bad index the kernel reported (status[1]), as numpy words it."""
    def error(status: np.ndarray) -> IndexError:
        return IndexError(f"{op}: index {int(status[1])} is out of bounds for axis {axis} with "
                          f"size {n} (integer index arrays are bounds-checked when they are "
                          "evaluated)")

    return error


def gather_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
    """``x[i]`` or ``x[i, :, ...]`` (``spec``: one int32 / int64 index array on x's first
    axis, whole slices after it; x contiguous, 1-5 index dims) as a replay-program step;
    None otherwise (numpy's runs).

    >>> from braze.graph.view import View
    >>> f4, i4 = np.dtype(np.float32), np.dtype(np.int32)
    >>> call = gather_call({"spec": (0,)}, [(View.contiguous((10, 4)), f4),
    ...                                     (View.contiguous((1, 3)), i4)], ((1, 3, 4), f4))
    >>> str(call.error(np.array([1, 12]))).split(" (")[0]
    'getitem/take: index 12 is out of bounds for axis 0 with size 10'
    """
    shape, dtype = out
    (xv, xd), (iv, idd) = inputs
    spec = tuple(attrs.get("spec", ()))
    whole = len(spec) <= len(xv.shape) and all(  # (start, stop, step): every element
        isinstance(sl, tuple) and len(sl) == 3 and sl[0] == 0 and sl[2] == 1
        and (sl[1] < 0 or sl[1] >= xv.shape[j]) for j, sl in enumerate(spec[1:], 1))
    if set(attrs) != {"spec"} or not spec or spec[0] != 0 or not whole \
            or not iv.shape or not xv.is_contiguous() \
            or tuple(shape) != tuple(iv.shape) + tuple(xv.shape[1:]):
        return None
    # (dtypes, element sizes and the number of dims: native_call's checks)
    k, n, row = len(iv.shape), xv.shape[0], int(np.prod(xv.shape[1:], dtype=np.int64))
    x = View((1,) * (k - 1) + (n, row), (0,) * (k - 1) + (row, 1), xv.offset)
    idx = View(tuple(iv.shape) + (1,), tuple(iv.strides) + (0,), iv.offset)
    call = native_call({"axis": k - 1}, [(x, xd), (idx, idd)], (tuple(iv.shape) + (row,), dtype))
    return None if call is None else NativeLibraryCall(
        call.handle, call.args, scratch=call.scratch, threads_arg=False,
        error=_bounds_error("getitem/take", 0, n))
