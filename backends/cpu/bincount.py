"""Native ``bincount`` (counts, no weights) for the ``cpu`` backend: ``np.histogram``'s and
``bz.bincount``'s last step.

numpy counts one block of indices after another on one thread; the kernel
(``kernels/bincount.cc``) gives each thread a private table of ``length + 1`` counts
(the spare one takes the indices outside the range), then adds the tables. int32 and
int64 indices up to ``MAX_LENGTH`` bins; weights, other index dtypes and longer tables
run the numpy reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import OPS, reference_eval
from .library import NativeOp, file_kernel

__all__ = ["Bincount", "source"]

MAX_LENGTH = 1 << 16  # private tables beyond this cost more than they save
PARALLEL_ELEMENTS = 1 << 16
_INDEX = (np.dtype(np.int32), np.dtype(np.int64))


source, _KERNELS = file_kernel(__package__, "kernels/bincount.cc", "bz_bincount")


class Bincount(NativeOp):
    """The ``cpu`` backend's ``library["bincount"]`` (see the module docstring).

    >>> Bincount()({"length": 3}, np.dtype(np.int64), np.array([0, 2, 2, 7, -1])).tolist()
    [1, 0, 2]
    """

    op = "bincount"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, idx: np.ndarray,
                 *weights: np.ndarray) -> np.ndarray:
        length = attrs["length"]
        h = None
        if not weights and idx.dtype in _INDEX and 0 < length <= MAX_LENGTH and \
                out_dtype == np.int64:
            h = self._kernel(_KERNELS.handle)
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(OPS["bincount"], attrs, out_dtype, idx, *weights)
        flat = np.ascontiguousarray(idx).reshape(-1)
        out = np.empty(length, np.int64)
        threads = 1 if flat.size < PARALLEL_ELEMENTS else self._num_threads()
        _core.launch(h, [flat, out], np.array([threads, flat.size, length, idx.itemsize],
                                              np.int64))
        self.calls["native"] += 1
        return out
