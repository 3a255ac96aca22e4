"""Native float32 max pooling for the ``cpu`` backend (the ``max_pool`` op), eager and as
a replay-program step.

Before this op, ``bz.nn.max_pool`` padded x with -inf (a full array and a slice update:
a copy of the whole input, run as a Python step between two native segments) and
combined the padded input's window views in one fused kernel. ``kernels/max_pool.cc``
reads the windows of x in place instead, skipping the taps that fall in the padding,
channels vectorized (any element strides; contiguous channels vectorize), output
positions split between the threads; the taps are combined in the reference's order
with numpy's ``maximum`` (NaN propagates): the same bits. Other dtypes, more than 3
spatial dims and hosts where the kernel does not build run the numpy reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import OPS, reference_eval
from ...graph.view import View
from ..replay import NativeLibraryCall
from .library import NativeOp, file_kernel

__all__ = ["MaxPool", "native_call", "source"]

_F32 = np.dtype(np.float32)
MAX_SPATIAL = 3

source, _KERNELS = file_kernel(__package__, "kernels/max_pool.cc", "bz_max_pool_f32")


def _args(attrs: dict[str, Any], x: View, out_shape: tuple[int, ...], threads: int
          ) -> np.ndarray | None:
    """The kernel's args for x (a View over its buffer), or None where it does not apply."""
    n = len(out_shape) - 2
    if not 1 <= n <= MAX_SPATIAL or len(x.shape) != n + 2 or 0 in out_shape or 0 in x.shape:
        return None
    pad = 3 - n

    def p3(v: Any, fill: int) -> list[int]:
        return [fill] * pad + [int(e) for e in v]

    st = x.strides
    return np.array([threads, x.shape[0], x.shape[-1], *p3(x.shape[1:-1], 1),
                     *p3(attrs["kernel_size"], 1), *p3(out_shape[1:-1], 1),
                     *p3(attrs["stride"], 1), *p3(attrs["dilation"], 1),
                     *p3([lo for lo, _ in attrs["padding"]], 0), x.offset,
                     st[0], *p3(st[1:-1], 0), st[-1]], np.int64)


def native_call(attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype], threads: int) -> NativeLibraryCall | None:
    """``max_pool`` as a replay-program step (float32, 1-3 spatial dims, x any strided
    view); None otherwise (the numpy reference runs).

    >>> from braze.graph.view import View
    >>> f4 = np.dtype(np.float32)
    >>> attrs = {"kernel_size": (3, 3), "stride": (2, 2), "dilation": (1, 1),
    ...          "padding": ((1, 1), (1, 1))}
    >>> native_call(attrs, [(View.contiguous((1, 8, 8, 4)), f4)], ((1, 4, 4, 4), f4), 2
    ...             ) is not None
    True
    """
    ((view, d),) = inputs
    if d != _F32 or out[1] != _F32:
        return None
    args = _args(attrs, view, tuple(out[0]), threads)
    h = _KERNELS.handle_or_none() if args is not None else None
    if args is None or h is None:
        return None
    return NativeLibraryCall(h, args)


class MaxPool(NativeOp):
    """``library["max_pool"]`` for eager calls: the kernel for float32, numpy's reference
    otherwise.

    >>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> attrs = {"kernel_size": (3, 3), "stride": (2, 2), "dilation": (1, 1),
    ...          "padding": ((1, 0), (1, 0))}
    >>> MaxPool()(attrs, np.dtype(np.float32), x)[0, :, :, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
    """

    op = "max_pool"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray
                 ) -> np.ndarray:
        op = OPS["max_pool"]
        shape = op.infer((x.shape,), (x.dtype,), attrs)[0]  # type: ignore[misc]
        args = None
        if x.dtype == _F32 and out_dtype == _F32:
            x = np.ascontiguousarray(x)
            args = _args(attrs, View.contiguous(x.shape), shape, self._num_threads())
        h = self._kernel(_KERNELS.handle) if args is not None else None
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(op, attrs, out_dtype, x)
        self.calls["native"] += 1
        out = np.empty(shape, _F32)
        _core.launch(h, [x, out], args)
        return out
