"""Leaf ops: constants, traced parameters and generated ranges."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare


def _no_reference(*args: Any, **kw: Any) -> Any:
    raise RuntimeError("constant nodes carry their data; they are never executed")


CONSTANT = declare(OpDef("constant", "leaf", 0, _no_reference, doc="A leaf holding data."))
# A 0-d constant's value is part of the graph's structure (it folds and inlines); a 0-d
# VALUE is bound at run time, as an array leaf is: a numpy scalar, an element read in a
# loop (graphs on x[i] are one for every i, each a schedule-cache hit)
VALUE = declare(OpDef("value", "leaf", 0, _no_reference,
                      doc="A leaf holding a value bound at run time, never inlined."))


def _unbound_parameter(*args: Any, **kw: Any) -> Any:
    raise TypeError("the value of an array traced by bz.compile (or differentiated by "
                    "bz.grad, bz.vjp, bz.jvp) is not known while tracing: reading it (item(), "
                    "bool(), np.asarray, printing...) inside a compiled or transformed "
                    "function is not supported; compute it outside, or pass it as an argument")


PARAMETER = declare(OpDef("parameter", "leaf", 0, _unbound_parameter,
                          doc="An input of a traced function, bound at each call."))


def _arange_ref(*, start: Any, step: Any, num: int, dtype: np.dtype) -> np.ndarray:
    if dt.is_integer(dtype):
        return (int(start) + np.arange(num, dtype=np.int64) * int(step)).astype(dtype)
    return (start + np.arange(num, dtype=np.float64) * step).astype(dtype)


def _leaf_infer(shapes, dtypes, attrs):
    return attrs["shape"], attrs["dtype"]


declare(OpDef("arange", "leaf", 0,
              lambda **a: _arange_ref(**{k: a[k] for k in ("start", "step", "num", "dtype")}),
              infer=_leaf_infer, doc="start + step * [0, 1, ..., num-1]."))
declare(OpDef("linspace", "leaf", 0,
              lambda *, start, stop, num, endpoint, dtype, shape: np.linspace(
                  start, stop, num, endpoint=endpoint, dtype=np.float64).astype(dtype),
              infer=_leaf_infer, doc="Evenly spaced values over an interval."))
