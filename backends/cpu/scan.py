"""Native cumulative sums for the ``cpu`` backend (the ``cumulative_sum`` library op).

numpy's ``cumsum`` adds one element after another (a dependency chain: ~3 ns per
element on one core). The kernel (``kernels/scan.cc``) scans a row in fixed blocks on
every thread (block totals first, then each block from its offset, 16 float32 lanes at
a time with an in-register prefix), and an axis with elements after it column strip by
column strip in numpy's own order. The blocks depend on the shape alone: every thread
count gives the same bits. Along a row the sums associate differently from numpy's
sequential ones (pairwise within vectors and blocks; as accurate or more).

float32, float64, int64 and int32 (summed in int64, braze's and numpy's result dtype);
other dtypes run the numpy reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import OPS, reference_eval
from .library import NativeOp, file_kernel

__all__ = ["CumulativeSum", "source"]

PARALLEL_ELEMENTS = 1 << 16  # below this one thread
_CODES = {(np.dtype(np.float32), np.dtype(np.float32)): 0,
          (np.dtype(np.float64), np.dtype(np.float64)): 1,
          (np.dtype(np.int64), np.dtype(np.int64)): 2,
          (np.dtype(np.int32), np.dtype(np.int64)): 3}


source, _KERNELS = file_kernel(__package__, "kernels/scan.cc", "bz_cumsum")


class CumulativeSum(NativeOp):
    """The ``cpu`` backend's ``library["cumulative_sum"]`` (see the module docstring).

    >>> impl = CumulativeSum()
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> impl({"axis": 1, "include_initial": True}, np.dtype(np.float32), x).tolist()
    [[0.0, 0.0, 1.0, 3.0], [0.0, 3.0, 7.0, 12.0]]
    """

    op = "cumulative_sum"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray
                 ) -> np.ndarray:
        code = _CODES.get((x.dtype, out_dtype))
        h = self._kernel(_KERNELS.handle) if code is not None and x.size else None
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(OPS["cumulative_sum"], attrs, out_dtype, x)
        ax, initial = attrs["axis"], int(attrs["include_initial"])
        x = np.ascontiguousarray(x)
        shape = list(x.shape)
        shape[ax] += initial
        out = np.empty(shape, out_dtype)
        threads = 1 if x.size < PARALLEL_ELEMENTS else self._num_threads()
        _core.launch(h, [x, out], np.array([threads, code, math.prod(x.shape[:ax]),
                                            x.shape[ax], math.prod(x.shape[ax + 1:]),
                                            initial], np.int64))
        self.calls["native"] += 1
        return out
