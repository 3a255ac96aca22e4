"""The math functions of the op records' numpy references, computed as the kernels do.

The elementwise records' references call these instead of numpy's ufuncs for the libm
functions (exp, log, sin, arctan2...): real float32/float64 operands go to
``braze._core.vmath_apply``, which runs braze's own functions (``backends/kernels/bzmath.h``:
every one of float32; exp, expm1, log, log1p, tanh of float64; :data:`FUNCTIONS` says
which) or the C library's scalar ones, the very code the generated CPU kernels call. A
program therefore gives the same bits on its first sight (op by op with numpy), in a
compiled kernel, in the numpy backend and at any thread count. Complex operands
keep numpy's functions (the kernels do not compute complex values); integer operands are
computed in float32, braze's rule for them.

>>> import numpy as np
>>> float(exp(np.float64(1.0)))
2.718281828459045
>>> exp(np.array([0.0, -np.inf], np.float32))
array([1., 0.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _core

# name -> (arity, the dtypes braze's own bzmath.h computes; the C library the others)
FUNCTIONS: dict[str, tuple[int, list[str]]] = dict(_core.vmath_functions())
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _compute_dtype(xs: tuple[np.ndarray, ...]) -> np.dtype | None:
    """float64 if an operand is, else float32 (integers, float16, bfloat16 included); None
    for a complex operand (numpy's function answers)."""
    out = np.dtype(np.float32)
    for x in xs:
        k = x.dtype.kind
        if k == "c":
            return None
        if x.dtype == np.float64:
            out = x.dtype
        elif k not in "biuf" and x.dtype.name != "bfloat16":
            return None
    return out


def apply(name: str, fallback: Callable[..., Any], *operands: Any) -> Any:
    """``name(*operands)`` elementwise with broadcasting, through the kernels' code; numpy
    ``fallback`` for complex operands. A numpy scalar for 0-d operands, as numpy gives.

    >>> import numpy as np
    >>> apply("atan2", np.arctan2, np.float32(1.0), np.float32(1.0))
    np.float32(0.7853982)
    """
    xs = tuple(np.asarray(x) for x in operands)
    d = _compute_dtype(xs)
    if d is None:
        return fallback(*operands)
    shape = xs[0].shape if len(xs) == 1 else np.broadcast_shapes(*(x.shape for x in xs))
    args = [np.ascontiguousarray(np.broadcast_to(x, shape) if x.shape != shape else x, d)
            for x in xs]
    out = np.empty(shape, d)
    _core.vmath_apply(name, args, out)
    return out[()] if out.ndim == 0 else out  # (as a ufunc answers 0-d operands)


def _unary(name: str, fallback: Callable[..., Any]) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        return apply(name, fallback, x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``{name}`` elementwise as the CPU kernels compute it (see the module)."
    return f


def _binary(name: str, fallback: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    def f(x: Any, y: Any) -> Any:
        return apply(name, fallback, x, y)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``{name}`` elementwise as the CPU kernels compute it (see the module)."
    return f


exp = _unary("exp", np.exp)
expm1 = _unary("expm1", np.expm1)
exp2 = _unary("exp2", np.exp2)
log = _unary("log", np.log)
log1p = _unary("log1p", np.log1p)
log2 = _unary("log2", np.log2)
log10 = _unary("log10", np.log10)
sin = _unary("sin", np.sin)
cos = _unary("cos", np.cos)
tan = _unary("tan", np.tan)
asin = _unary("asin", np.arcsin)
acos = _unary("acos", np.arccos)
atan = _unary("atan", np.arctan)
sinh = _unary("sinh", np.sinh)
cosh = _unary("cosh", np.cosh)
tanh = _unary("tanh", np.tanh)
asinh = _unary("asinh", np.arcsinh)
acosh = _unary("acosh", np.arccosh)
atanh = _unary("atanh", np.arctanh)
atan2 = _binary("atan2", np.arctan2)
hypot = _binary("hypot", np.hypot)
pow = _binary("pow", np.power)  # noqa: A001  (libm's name)
