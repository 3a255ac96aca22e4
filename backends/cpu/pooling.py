"""Native float32 window pooling for the ``cpu`` backend (the ``max_pool`` and
``window_sum`` ops: max and average pooling), eager and as replay-program steps.

Before these ops, ``bz.nn.max_pool`` / ``avg_pool`` padded x (a full array and a slice
update: a copy of the whole input, run as a Python step between two native segments) and
combined the padded input's window views in one fused kernel. ``kernels/pool.cc`` reads
the windows of x in place instead, a padded tap skipped (max) or adding +0.0 (sum),
channels vectorized (any element strides; contiguous channels vectorize), output positions
split between the threads; the taps are combined in the reference's order (numpy's
``maximum``, NaN propagating; float32 additions): the same bits. Other dtypes, more than 3
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

__all__ = ["MODES", "Pool", "native_call", "source"]

_F32 = np.dtype(np.float32)
MAX_SPATIAL = 3
MODES = {"max_pool": 0, "window_sum": 1}  # the kernel's mode per op

source, _KERNELS = file_kernel(__package__, "kernels/pool.cc", "bz_pool_f32")


def _args(attrs: dict[str, Any], x: View, out_shape: tuple[int, ...], threads: int,
          mode: int) -> np.ndarray | None:
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
                     st[0], *p3(st[1:-1], 0), st[-1], mode], np.int64)


def native_call(op: str, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                out: tuple[tuple[int, ...], np.dtype], threads: int) -> NativeLibraryCall | None:
    """``max_pool`` / ``window_sum`` (``op``) as a replay-program step (float32, 1-3 spatial
    dims, x any strided view); None otherwise (the numpy reference runs).

    >>> from braze.graph.view import View
    >>> f4 = np.dtype(np.float32)
    >>> attrs = {"kernel_size": (3, 3), "stride": (2, 2), "dilation": (1, 1),
    ...          "padding": ((1, 1), (1, 1))}
    >>> native_call("max_pool", attrs, [(View.contiguous((1, 8, 8, 4)), f4)],
    ...             ((1, 4, 4, 4), f4), 2) is not None
    True
    """
    ((view, d),) = inputs
    if d != _F32 or out[1] != _F32:
        return None
    args = _args(attrs, view, tuple(out[0]), threads, MODES[op])
    h = _KERNELS.handle_or_none() if args is not None else None
    if args is None or h is None:
        return None
    return NativeLibraryCall(h, args)


class Pool(NativeOp):
    """``library["max_pool"]`` / ``library["window_sum"]`` for eager calls: the kernel for
    float32, numpy's reference otherwise.

    >>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> attrs = {"kernel_size": (3, 3), "stride": (2, 2), "dilation": (1, 1),
    ...          "padding": ((1, 0), (1, 0))}
    >>> Pool(op="max_pool")(attrs, np.dtype(np.float32), x)[0, :, :, 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
    >>> Pool(op="window_sum")(attrs, np.dtype(np.float32), x)[0, :, :, 0].tolist()
    [[10.0, 24.0], [51.0, 90.0]]
    """

    def __init__(self, backend: Any = None, op: str = "max_pool") -> None:
        super().__init__(backend)
        self.op = op

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray
                 ) -> np.ndarray:
        op = OPS[self.op]
        shape = op.infer((x.shape,), (x.dtype,), attrs)[0]  # type: ignore[misc]
        args = None
        if x.dtype == _F32 and out_dtype == _F32:
            x = np.ascontiguousarray(x)
            args = _args(attrs, View.contiguous(x.shape), shape, self._num_threads(),
                         MODES[self.op])
        h = self._kernel(_KERNELS.handle) if args is not None else None
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(op, attrs, out_dtype, x)
        self.calls["native"] += 1
        out = np.empty(shape, _F32)
        _core.launch(h, [x, out], args)
        return out
