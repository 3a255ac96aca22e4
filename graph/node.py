"""The graph IR: a node is one recorded op application.

A node holds its op declaration, input nodes, static attributes, and the shape
and dtype its shape/dtype rules computed at record time. ``data`` is None until
the node is evaluated; evaluation then drops ``inputs`` so intermediates can be
freed (see :mod:`braze.graph.evaluate`). ``depth`` bounds how far a pending graph has
grown (the recording layer evaluates at a bound: a loop's graph is cut into segments).

>>> import numpy as np
>>> n = constant(np.float32(2.0))
>>> n.shape, n.dtype, n.is_evaluated
((), dtype('float32'), True)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _core
from .dtypes import name as dtype_name


class Node(_core.NodeBase):
    """One op application in the lazy graph (or a leaf holding data). ``data`` lives in
    the native base, where the element fast paths of ``Array`` read it."""

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "weak", "pending_evals", "depth",
                 "__weakref__")
    data: Any

    def __init__(
        self,
        op: Any,
        inputs: tuple[Node, ...],
        attrs: dict[str, Any],
        shape: tuple[int, ...],
        dtype: np.dtype,
        data: Any = None,
        weak: bool = False,
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.data = data
        # A weakly typed value (a traced Python scalar, or arithmetic on such values
        # only): it takes the dtype of the arrays it meets, like a Python scalar.
        self.weak = weak
        # compiled evaluations that computed this node as an intermediate without keeping
        # it (see NumpyBackend.evaluate: the next one keeps it)
        self.pending_evals = 0
        # the longest chain of pending nodes ending here, as recorded (0: a leaf). An
        # input evaluated since counts as it was: an over-estimate, never an under one.
        # The recording layer cuts a graph whose depth crosses a bound (see
        # braze.graph.evaluate.cut_targets), so a loop that grows it stays bounded.
        if not inputs:
            self.depth: int = 0
            return
        n = len(inputs)
        if n == 1:  # the common cases spelled out: recording is a hot path
            a = inputs[0]
            self.depth = (a.depth if a.data is None else 0) + 1
        elif n == 2:
            a, b = inputs
            da = a.depth if a.data is None else 0
            db = b.depth if b.data is None else 0
            self.depth = (da if da > db else db) + 1
        else:
            self.depth = depth_over(inputs)

    @property
    def is_evaluated(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        state = "evaluated" if self.data is not None else f"{len(self.inputs)} inputs"
        return f"Node({self.op.name}, shape={self.shape}, dtype={dtype_name(self.dtype)}, {state})"


def depth_over(inputs: tuple[Node, ...]) -> int:
    """The depth of a node over ``inputs``: one more than the deepest pending one (an
    evaluated input counts 0). Node() spells its one- and two-input cases out (recording
    is a hot path); a cut recounts the nodes it left pending with it.

    >>> depth_over((constant(np.float32(1.0)),))
    1
    """
    return max([x.depth for x in inputs if x.data is None], default=0) + 1


def constant(value: np.ndarray | np.generic) -> Node:
    """A leaf node holding ``value`` (already a numpy array/scalar of a braze dtype)."""
    from .ops import CONSTANT

    arr = np.asarray(value)
    return Node(CONSTANT, (), {}, arr.shape, arr.dtype, arr)
