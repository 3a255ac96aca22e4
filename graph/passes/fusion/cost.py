"""cost: the per-element cost of an elementwise op, as the fusion rules see it.

One function, :func:`op_cost`, is all that the fusion stages ask; it reads the op's
record (``OpDef.cost``: add 1, divide/sqrt 4, transcendental 8, logaddexp 16), the
same number the code generators use for their threading and row-cache rules.

>>> op_cost("exp"), op_cost("divide"), op_cost("add")
(8, 4, 1)
"""

from __future__ import annotations

from ...ops import OPS

_COSTS = {name: op.cost for name, op in OPS.items()}  # the records' costs, looked up per node


def op_cost(name: str) -> int:
    """Relative per-element cost of op ``name`` from its record (1 for a name without
    one; views cost nothing and are never asked about)."""
    return _COSTS.get(name, 1)
