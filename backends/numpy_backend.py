"""The reference backend: runs a graph op by op through each op's numpy reference.

Every other backend is tested against this one. float16/bfloat16 are computed
in float32 and rounded once, exactly as the generated kernels will.

>>> import numpy as np
>>> from braze.graph.node import constant
>>> NumpyBackend().evaluate([constant(np.int8(3))])
[array(3, dtype=int8)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.evaluate import evaluate
from ..graph.node import Node

_UPCAST_KINDS = ("elementwise", "reduce", "scan", "library")
_LOW = (dt.float16, dt.bfloat16)


def upcast(x: np.ndarray) -> np.ndarray:
    """float16/bfloat16 -> float32 (the compute dtype of low-precision floats)."""
    return x.astype(np.float32) if x.dtype in _LOW else x


class NumpyBackend:
    """Op-by-op numpy execution of pending graphs."""

    name = "numpy"

    def evaluate(self, targets: Sequence[Node]) -> list[Any]:
        with np.errstate(all="ignore"):  # IEEE semantics: inf/nan results, no warnings
            return evaluate(targets, run_node)


def run_node(node: Node, *xs: np.ndarray) -> np.ndarray:
    """Compute one node from its inputs' values with the op's numpy reference."""
    op = node.op
    if op.kind in _UPCAST_KINDS and op.name != "bitcast":
        for x in xs:
            if x.dtype in _LOW:
                xs = tuple(upcast(x) for x in xs)
                break
    out = op.reference(*xs, **node.attrs)
    out = np.asarray(out)
    if out.dtype != node.dtype:
        out = out.astype(node.dtype)
    if out.shape != node.shape:  # a reference that disagrees with its shape rule is a bug
        raise AssertionError(f"{op.name}: reference gave shape {out.shape}, rule said {node.shape}")
    return out
