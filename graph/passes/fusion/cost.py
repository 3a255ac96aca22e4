"""cost: the per-element cost of an elementwise op, as the fusion rules see it.

One function, :func:`op_cost`, is all that the fusion stages ask; the tables behind it
are a stand-in until each op's record carries its own cost.

>>> op_cost("exp"), op_cost("divide"), op_cost("add")
(8, 4, 1)
"""

from __future__ import annotations

_EXPENSIVE = {"exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "pow",
              "sigmoid", "atan2", "hypot", "logaddexp"}
_MEDIUM = {"divide", "sqrt", "reciprocal", "floor_divide", "remainder"}


def op_cost(name: str) -> int:
    """Relative per-element cost of an elementwise op: transcendental 8, divide/sqrt 4,
    other ops 1 (views cost nothing and are never asked about)."""
    if name in _EXPENSIVE:
        return 8
    if name in _MEDIUM:
        return 4
    return 1
