"""fuse: lower a simplified Graph to a Schedule of fused kernels and library calls.

The pass runs the stages of :mod:`braze.graph.passes.fusion`: decide what to realize
(:mod:`~.fusion.realize`), group kernel roots into kernels (:mod:`~.fusion.group`) --
these two repeat until the recompute-cost rule realizes nothing new; the stencil
rule bounds the work a kernel repeats while the analysis walks it -- then lower each
group to kernel IR and order the steps (:mod:`~.fusion.lower`, :mod:`~.fusion.order`).

``fuse(g, decisions=[])`` also fills the list with a
:class:`~.fusion.log.FusionDecision` per value realized and per merge made or refused;
``BRAZE_LOG=fusion`` prints them (logger ``braze.fusion``).

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray(np.ones((4, 8), np.float32))
>>> y = bz.exp(x)
>>> g, _ = Graph.from_nodes([y._node, bz.sum(y, axis=-1)._node])
>>> why: list = []
>>> fuse(g, why).num_kernels
1
>>> for d in why:
...     print(d)
realize #1 exp (4, 8) float32: output
realize #2 sum (4,) float32: output (output, reduction)
merge kernel[#1 exp] over (4, 8) + kernel[#2 sum] over (4, 8) reduce last 1: stored value
"""

from __future__ import annotations

from ..ir import Graph
from ..kernel import Schedule
from .fusion.cost import op_cost
from .fusion.group import Groups
from .fusion.log import FusionDecision, collector, emit
from .fusion.lower import lower
from .fusion.realize import (
    BROADCAST_REALIZE,
    MAX_INLINE_ROOTS,
    RECOMPUTE_LIMIT,
    STENCIL_LIMIT,
    Fuser,
)

__all__ = ["fuse", "Fuser", "FusionDecision", "op_cost", "RECOMPUTE_LIMIT",
           "BROADCAST_REALIZE", "MAX_INLINE_ROOTS", "STENCIL_LIMIT"]


def fuse(g: Graph, decisions: list[FusionDecision] | None = None) -> Schedule:
    """Lower ``g`` to a schedule (see the module docstring); ``decisions``, when given,
    receives why each value was realized and each merge was made or refused."""
    log = collector(g, decisions)
    f = Fuser(g, log)
    f.realize_widely_inlined()
    while True:
        f.analyze()
        groups = Groups(f, f.roots()).build()
        group_of = {r: gi for gi, grp in enumerate(groups) for r in grp}
        if not f.realize_costly_shared(group_of):
            break
    s = lower(f, groups)
    emit(log, f"fuse: {len(g.nodes)} nodes -> {s.num_kernels} launches")
    return s
