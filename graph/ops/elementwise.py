"""Elementwise op records: every fact about each elementwise op, in one place.

One ``_ew(...)`` call per op: its numpy reference and dtype rules, the public
summary and a doctest example (``braze.arrays.elementwise`` generates the function),
the cost, the C-family expression (``c``, by operand kind; see :class:`OpDef`), the
``bz_*`` helpers and libm functions it calls, its Metal and MLX facts. Adding an op is
one call here plus its tests.

>>> OPS["hypot"].c["f"], OPS["hypot"].cost, OPS["hypot"].msl_native
('hypot{f}({0}, {1})', 8, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import dtypes as dt
from . import libm as lm
from .record import OPS, OpDef, declare, zero_vjp  # noqa: F401  (OPS: doctest)

# costs (see OpDef.cost): one scale for fusion and the generators
ARITH, MEDIUM, TRANSCENDENTAL = 1, 4, 8


# ---------------------------------------------------------------- gradient rules
# vjp(ad, g, y, *xs) -> one cotangent per input (see OpDef.vjp), by op name: each record
# below takes its rule from here. Inputs arrive in the compute dtype; a cotangent may keep
# the broadcast shape. Ties of maximum/minimum split the cotangent in half, as JAX does.
_LN2, _LN10, _PI = 0.6931471805599453, 2.302585092994046, 3.141592653589793


def _pick_rule() -> Callable[..., Any]:
    """maximum/minimum: g to the operand picked, halved between tied ones."""
    def rule(ad: Any, g: Any, y: Any, a: Any, b: Any) -> tuple[Any, Any]:
        half = ad.where(a == b, 0.5, 1.0)
        wa = ad.where(a == y, half, 0.0)
        wb = ad.where(b == y, half, 0.0)
        return g * wa, g * wb
    return rule


_VJP: dict[str, Callable[..., Any]] = {
    "exp": lambda ad, g, y, x: (g * y,),
    "expm1": lambda ad, g, y, x: (g * (y + 1.0),),
    "exp2": lambda ad, g, y, x: (g * y * _LN2,),
    "log": lambda ad, g, y, x: (g / x,),
    "log1p": lambda ad, g, y, x: (g / (x + 1.0),),
    "log2": lambda ad, g, y, x: (g / (x * _LN2),),
    "log10": lambda ad, g, y, x: (g / (x * _LN10),),
    "sqrt": lambda ad, g, y, x: (g * 0.5 / y,),
    "sin": lambda ad, g, y, x: (g * ad.cos(x),),
    "cos": lambda ad, g, y, x: (-(g * ad.sin(x)),),
    "tan": lambda ad, g, y, x: (g * (y * y + 1.0),),
    "asin": lambda ad, g, y, x: (g / ad.sqrt(1.0 - x * x),),
    "acos": lambda ad, g, y, x: (-(g / ad.sqrt(1.0 - x * x)),),
    "atan": lambda ad, g, y, x: (g / (x * x + 1.0),),
    "sinh": lambda ad, g, y, x: (g * ad.cosh(x),),
    "cosh": lambda ad, g, y, x: (g * ad.sinh(x),),
    "tanh": lambda ad, g, y, x: (g * (1.0 - y * y),),
    "asinh": lambda ad, g, y, x: (g / ad.sqrt(x * x + 1.0),),
    "acosh": lambda ad, g, y, x: (g / ad.sqrt(x * x - 1.0),),
    "atanh": lambda ad, g, y, x: (g / (1.0 - x * x),),
    "reciprocal": lambda ad, g, y, x: (-(g * y * y),),
    "sigmoid": lambda ad, g, y, x: (g * y * (1.0 - y),),
    "negative": lambda ad, g, y, x: (-g,),
    "positive": lambda ad, g, y, x: (g,),
    "square": lambda ad, g, y, x: (g * x * 2.0,),
    "abs": lambda ad, g, y, x: (g * ad.sign(x),),
    "real": lambda ad, g, y, x: (g,),
    "conj": lambda ad, g, y, x: (g,),
    "add": lambda ad, g, y, a, b: (g, g),
    "subtract": lambda ad, g, y, a, b: (g, -g),
    "multiply": lambda ad, g, y, a, b: (g * b, g * a),
    "divide": lambda ad, g, y, a, b: (g / b, -(g * y / b)),
    "remainder": lambda ad, g, y, a, b: (g, -(g * ad.floor_divide(a, b))),
    "fmod": lambda ad, g, y, a, b: (g, -(g * ad.trunc(a / b))),
    # d/da a**b = b a**(b-1) (0 where b == 0); d/db = a**b log a (0 where a == 0)
    "pow": lambda ad, g, y, a, b: (
        g * ad.where(b == 0.0, 0.0, b * ad.pow(a, b - 1.0)),
        g * ad.where(a == 0.0, 0.0, y * ad.log(ad.where(a == 0.0, 1.0, a)))),
    "maximum": _pick_rule(),
    "minimum": _pick_rule(),
    "fmax": _pick_rule(),
    "fmin": _pick_rule(),
    "atan2": lambda ad, g, y, a, b: (g * b / (a * a + b * b), -(g * a / (a * a + b * b))),
    "hypot": lambda ad, g, y, a, b: (g * a / y, g * b / y),
    "copysign": lambda ad, g, y, a, b: (g * ad.where(ad.signbit(a) == ad.signbit(y), 1.0,
                                                     -1.0), None),
    "logaddexp": lambda ad, g, y, a, b: (g * ad.exp(a - y), g * ad.exp(b - y)),
    "logaddexp2": lambda ad, g, y, a, b: (g * ad.exp2(a - y), g * ad.exp2(b - y)),
    "sinc": lambda ad, g, y, x: (g * ad.where(
        x == 0.0, 0.0, (ad.cos(x * _PI) - y) / ad.where(x == 0.0, 1.0, x)),),
    "deg2rad": lambda ad, g, y, x: (g * (_PI / 180.0),),
    "rad2deg": lambda ad, g, y, x: (g * (180.0 / _PI),),
    "where": lambda ad, g, y, c, a, b: (None, ad.where(c, g, 0.0), ad.where(c, 0.0, g)),
    "cast": lambda ad, g, y, x, dtype: (g,),
}
for _name in ("sign round ceil floor trunc imag bitwise_invert logical_not isnan isinf "
              "isfinite signbit floor_divide nextafter bitwise_and bitwise_or bitwise_xor "
              "bitwise_left_shift bitwise_right_shift logical_and logical_or logical_xor "
              "equal not_equal less less_equal greater greater_equal heaviside bitcast "
              ).split():
    _VJP[_name] = zero_vjp


def _ew(name: str, arity: int, ref: Callable[..., Any], domain: str = "numeric",
        cast: str | None = None, result: str = "same", *, summary: str,
        c: Mapping[str, str], example: tuple[str, str] | None = None, cost: int = ARITH,
        helpers: tuple[str, ...] = (), libm: tuple[tuple[str, int], ...] = (),
        exact_on_low: bool = False, msl_native: bool = True,
        mlx: Callable[..., Any] | None = None, mlx_bridge: str = "never",
        exact_dtype: bool = False, real_ref: Callable[..., Any] | None = None) -> OpDef:
    return declare(OpDef(name, "elementwise", arity, ref, domain, cast, result,
                         exact_dtype=exact_dtype, real_reference=real_ref, summary=summary,
                         example=example, cost=cost, c=c, helpers=helpers, libm=libm,
                         exact_on_low=exact_on_low, msl_native=msl_native, mlx=mlx,
                         mlx_bridge=mlx_bridge, vjp=_VJP.get(name)))


def _lm(name: str, arity: int = 1) -> tuple[tuple[str, int], ...]:
    """The libm function ``name`` (called with the ``{f}`` suffix) of ``arity`` operands."""
    return ((name, arity),)


# ---- MLX lowerings: mlx(mx, *operands); MLX is imported by the backend, not here
def _mx_bool_or(f: str, g: str) -> Callable[..., Any]:
    """``mx.g`` on bool operands (add -> logical_or...), ``mx.f`` otherwise."""
    return lambda mx, x, y: getattr(mx, g)(x, y) if x.dtype == mx.bool_ else getattr(mx, f)(x, y)


def _mx_float_only(f: str) -> Callable[..., Any]:
    """Rounding ops: ``mx.f`` on floats, the identity on integers and bools."""
    return lambda mx, x: getattr(mx, f)(x) if mx.issubdtype(x.dtype, mx.floating) else x


def _mx(f: str) -> Callable[..., Any]:
    return lambda mx, *xs: getattr(mx, f)(*xs)


def _mx_sigmoid(mx: Any, x: Any) -> Any:
    e = mx.exp(-mx.abs(x))  # the reference's two-branch form: exact 0/1 at the ends
    return mx.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _mx_signbit(mx: Any, x: Any) -> Any:
    return x.view(mx.int64 if x.dtype == mx.float64 else mx.int32) < 0


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y: floats as float_ops.h's bz_fpow; integers without numpy's error on negative
    exponents (result 0, or +-1)."""
    if x.dtype.kind == "f":  # float_ops.h's bz_fpow
        x, y = _typed(x, y)
        one = np.ones((), x.dtype)
        return np.where(y == 0, one, np.where(y == 2, x * x, np.where(y == -1, one / x,
                                                                       lm.pow(x, y))))
    if not dt.is_integer(x.dtype) or not np.any(y < 0):
        return np.power(x, y)
    neg = y < 0
    out = np.power(x, np.where(neg, 0, y).astype(y.dtype))
    one = np.ones_like(x)
    at_neg = np.where(x == 1, one, np.where(x == -1, np.where(y % 2 == 0, one, -one), 0))
    return np.where(neg, at_neg, out).astype(x.dtype)


def _sign(x: np.ndarray) -> np.ndarray:
    if dt.is_complex(x.dtype):
        mag = np.abs(x)
        safe = np.where(mag == 0, 1, mag)  # parts divided separately: subnormals stay finite
        unit = (x.real / safe) + 1j * (x.imag / safe)
        return np.where(mag == 0, 0, unit).astype(x.dtype)
    return np.sign(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Two-branch form: never overflows exp, exact 0/1 at the ends (float_ops.h's bz_sigmoid)
    (x,) = _typed(x)
    e = lm.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _shift(f: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        bits = x.dtype.itemsize * 8
        big = (y < 0) | (y >= bits)  # C leaves these undefined; define them
        out = f(x, np.where(big, 0, y).astype(y.dtype))
        if f is np.right_shift:
            fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else 0
        else:
            fill = 0
        return np.where(big, fill, out).astype(x.dtype)

    return ref


def _expm1(x: np.ndarray) -> np.ndarray:
    """np.expm1, and for complex ``exp(z) - 1`` accurate near 0 (numpy's complex expm1
    is ``exp(z) - 1``) with the standard's special cases (infinite and NaN parts)."""
    if x.dtype.kind != "c":
        return np.expm1(x)
    a, b = x.real, x.imag
    re = np.expm1(a) * np.cos(b) - 2.0 * np.sin(b / 2) ** 2 + 0.0  # (+0: -0 - 0 is -0)
    im = np.where(b == 0, b, np.exp(a) * np.sin(b))
    bad_b = ~np.isfinite(b)
    re = np.where((a == -np.inf) & bad_b, -1.0, np.where((a == np.inf) & bad_b, np.inf, re))
    im = np.where((a == -np.inf) & bad_b, 0.0, np.where((a == np.inf) & bad_b, np.nan, im))
    return _complex(re, im, x.dtype)


def _complex(re: np.ndarray, im: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """re + im*j without arithmetic (which would turn an infinite part into NaNs)."""
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im
    return out


def _tanh(x: np.ndarray) -> np.ndarray:
    """np.tanh; for complex with an infinite real part and a finite imaginary one, the
    standard's ``±1 + 0j`` with the imaginary zero's sign from b (numpy's sign comes
    from sin(2b))."""
    out = np.tanh(x)
    if x.dtype.kind == "c":
        a, b = x.real, x.imag
        hit = np.isinf(a) & np.isfinite(b)
        if hit.any():
            out = np.where(hit, _complex(np.sign(a), np.copysign(0.0, b), x.dtype), out)
    return out


def _typed(*xs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Operands in their compute dtype (float64 if one is, else float32), as the kernels
    compute ``cast="float"`` ops."""
    d = np.float64 if any(x.dtype == np.float64 for x in xs) else np.float32
    return tuple(np.asarray(x, d) for x in xs)


def _logaddexp(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """float_ops.h's bz_logaddexp with the kernels' exp and log1p."""
    x, y = _typed(x, y)
    t = x - y
    ln2 = np.asarray(0.693147180559945309417232121458176568, x.dtype)
    return np.where(x == y, x + ln2, np.where(t > 0, x + lm.log1p(lm.exp(-t)), np.where(
        t <= 0, y + lm.log1p(lm.exp(t)), t)))


def _logaddexp2(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The C expression of logaddexp2 (_LOGADDEXP2: numpy's npy_logaddexp2) with the
    kernels' log1p and exp2."""
    x, y = _typed(x, y)
    t = x - y
    one, log2e = np.asarray(1, x.dtype), np.asarray(1.4426950408889634, x.dtype)
    return np.where(x == y, x + one, np.where(t > 0, x + log2e * lm.log1p(lm.exp2(-t)), np.where(
        t <= 0, y + log2e * lm.log1p(lm.exp2(t)), t)))


def _sinc(x: np.ndarray) -> np.ndarray:
    """The C expression of sinc: 1 at 0, else sin(pi x) / (pi x), with the kernels' sin."""
    (x,) = _typed(x)
    px = np.asarray(3.14159265358979323846, x.dtype) * x
    return np.where(x == 0, np.asarray(1, x.dtype), lm.sin(px) / px)


def _floor_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's floor_divide with the standard's infinity cases: inf // finite is a signed
    inf (numpy: NaN) and finite // inf is a signed zero (numpy: -1 for opposite signs)."""
    out = np.floor_divide(x, y)
    if x.dtype.kind != "f":
        return out
    special = np.isinf(x) != np.isinf(y)
    if special.any():
        out = np.where(special, np.where(np.isnan(x) | np.isnan(y), np.nan, x / y), out)
    return out.astype(x.dtype)


def _nextafter(x: np.ndarray, y: np.ndarray, *, dtype: np.dtype) -> np.ndarray:
    """C's nextafter in the exact dtype: y when x == y (numpy's float16 returns x, which
    gets nextafter(-0.0, +0.0) wrong)."""
    x, y = x.astype(dtype), y.astype(dtype)
    return np.where(x == y, y, np.nextafter(x, y))



def _float1(name: str, ref: Callable[..., Any], summary: str, example: tuple[str, str],
            cost: int = TRANSCENDENTAL, *, libm: bool = True, mlx: str | None = None,
            mlx_bridge: str = "never", msl_native: bool = True,
            c: Mapping[str, str] | None = None, real_ref: Callable[..., Any] | None = None
            ) -> OpDef:
    """A unary floating op computed by libm ``name{f}`` (integer inputs in float32); its
    reference computes real operands with the kernels' function (graph/ops/libm.py) and
    complex ones with ``ref``."""
    if libm:
        ref = _libm_ref(name, ref)
        real_ref = ref if real_ref is not None else None
    return _ew(name, 1, ref, "numeric", cast="float", summary=summary, example=example,
               cost=cost, c=c or {"f": f"{name}{{f}}({{0}})"}, libm=_lm(name) if libm else (),
               msl_native=msl_native, mlx=_mx(mlx or name), mlx_bridge=mlx_bridge,
               real_ref=real_ref)


def _libm_ref(name: str, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The reference of a libm op: :func:`libm.apply` (the kernels' math on real operands,
    ``fallback`` on complex ones)."""
    def ref(*xs: Any) -> Any:
        return lm.apply(name, fallback, *xs)

    ref.__name__ = ref.__qualname__ = name
    # (numpy scalars: arrays.array.numpy_scalar_fn calls the native function of this name)
    ref.libm_name = name  # type: ignore[attr-defined]
    return ref


# ---------------------------------------------------------------- unary, floating
_float1("exp", np.exp, "e raised to x", ("bz.exp(bz.asarray([0.0, -float('inf')]))", "[1.0, 0.0]"),
        mlx_bridge="float64")
_float1("expm1", _expm1, "exp(x) - 1, accurate near 0",
        ("bz.expm1(bz.asarray([0.0, 1e-10]))", "[0.0, 1.000000013351432e-10]"), msl_native=False,
        real_ref=np.expm1)
_float1("log", np.log, "natural logarithm", ("bz.log(bz.asarray([1.0, 0.0]))", "[0.0, -inf]"))
_float1("log1p", np.log1p, "log(1 + x), accurate near 0",
        ("bz.log1p(bz.asarray([0.0, -1.0]))", "[0.0, -inf]"), msl_native=False)
_float1("log2", np.log2, "base-2 logarithm", ("bz.log2(bz.asarray([1.0, 8.0]))", "[0.0, 3.0]"))
_float1("log10", np.log10, "base-10 logarithm",
        ("bz.log10(bz.asarray([1.0, 0.0]))", "[0.0, -inf]"))
_float1("sqrt", np.sqrt, "square root", ("bz.sqrt(bz.asarray([4.0, 2.25]))", "[2.0, 1.5]"),
        MEDIUM, libm=False, c={"f": "__builtin_sqrt{f}({0})"})
_float1("sin", np.sin, "sine", ("bz.sin(bz.asarray([0.0, -0.0]))", "[0.0, -0.0]"),
        mlx_bridge="float64")
_float1("cos", np.cos, "cosine", ("bz.cos(bz.asarray([0.0]))", "[1.0]"), mlx_bridge="float64")
_float1("tan", np.tan, "tangent", ("bz.tan(bz.asarray([0.0]))", "[0.0]"))
_float1("asin", np.arcsin, "inverse sine", ("bz.asin(bz.asarray([0.0, 2.0]))", "[0.0, nan]"),
        mlx="arcsin")
_float1("acos", np.arccos, "inverse cosine", ("bz.acos(bz.asarray([1.0]))", "[0.0]"),
        mlx="arccos")
_float1("atan", np.arctan, "inverse tangent", ("bz.atan(bz.asarray([0.0]))", "[0.0]"),
        mlx="arctan")
_float1("sinh", np.sinh, "hyperbolic sine", ("bz.sinh(bz.asarray([0.0]))", "[0.0]"))
_float1("cosh", np.cosh, "hyperbolic cosine", ("bz.cosh(bz.asarray([0.0]))", "[1.0]"))
_float1("tanh", _tanh, "hyperbolic tangent",
        ("bz.tanh(bz.asarray([0.0, float('inf')]))", "[0.0, 1.0]"), real_ref=np.tanh)
_float1("asinh", np.arcsinh, "inverse hyperbolic sine", ("bz.asinh(bz.asarray([0.0]))", "[0.0]"),
        mlx="arcsinh")
_float1("acosh", np.arccosh, "inverse hyperbolic cosine",
        ("bz.acosh(bz.asarray([1.0]))", "[0.0]"), mlx="arccosh")
_float1("atanh", np.arctanh, "inverse hyperbolic tangent",
        ("bz.atanh(bz.asarray([0.0, 1.0]))", "[0.0, inf]"), mlx="arctanh")
_float1("reciprocal", np.reciprocal, "1 / x",
        ("bz.reciprocal(bz.asarray([4.0, -0.0]))", "[0.25, -inf]"), MEDIUM, libm=False,
        c={"f": "(({T})1 / {0})"})
_ew("sigmoid", 1, _sigmoid, "real_floating", cast="float",
    summary="logistic sigmoid 1 / (1 + exp(-x))",
    example=("bz.sigmoid(bz.asarray([0.0, -1000.0]))", "[0.5, 0.0]"),
    cost=TRANSCENDENTAL, c={"f": "bz_sigmoid({0})"}, helpers=("bz_sigmoid",),
    mlx=_mx_sigmoid, mlx_bridge="float64")

# ---------------------------------------------------------------- unary, same dtype
_IDENTITY_ON_INTS = {"i": "{0}", "u": "{0}", "b": "{0}"}
_ew("negative", 1, np.negative, summary="-x", c={"*": "({T})(-{0})"}, exact_on_low=True,
    example=("bz.negative(bz.asarray([1, -2]))", "[-1, 2]"), mlx=_mx("negative"))
_ew("positive", 1, np.positive, summary="+x", c={"*": "{0}"}, exact_on_low=True,
    example=("bz.positive(bz.asarray([1, -2]))", "[1, -2]"), mlx=lambda mx, x: x)
_ew("square", 1, np.square, summary="x * x", c={"*": "({T})({0} * {0})"},
    example=("bz.square(bz.asarray([3, -2]))", "[9, 4]"), mlx=lambda mx, x: x * x)
_ew("sign", 1, _sign, summary="sign of x (x / |x| for complex)",
    c={"f": "bz_fsign({0})", "i": "({T})(({0} > 0) - ({0} < 0))", "u": "({T})({0} > 0)"},
    helpers=("bz_fsign",), exact_on_low=True,
    example=("bz.sign(bz.asarray([-3.0, 0.0, 2.0]))", "[-1.0, 0.0, 1.0]"),
    mlx=_mx("sign"), mlx_bridge="float")  # mx.sign(nan) is 0, the reference's NaN
_ew("round", 1, np.round, summary="round half to even",
    c={"f": "__builtin_rint{f}({0})", **_IDENTITY_ON_INTS}, exact_on_low=True,
    example=("bz.round(bz.asarray([0.5, 1.5, -2.5]))", "[0.0, 2.0, -2.0]"),
    mlx=_mx_float_only("round"))
for _name, _summary, _example in [
    ("ceil", "ceiling", "[2.0, -1.0]"), ("floor", "floor", "[1.0, -2.0]"),
    ("trunc", "round toward zero", "[1.0, -1.0]"),
]:
    _ew(_name, 1, getattr(np, _name), "real_numeric", summary=_summary,
        c={"f": f"__builtin_{_name}{{f}}({{0}})", **_IDENTITY_ON_INTS}, exact_on_low=True,
        example=(f"bz.{_name}(bz.asarray([1.5, -1.5]))", _example),
        mlx=_mx_float_only(_name))
_ew("abs", 1, np.abs, "numeric", result="real", summary="absolute value",
    c={"f": "__builtin_fabs{f}({0})", "i": "({T})({0} < 0 ? -{0} : {0})", "u": "{0}",
       "b": "{0}"}, exact_on_low=True,
    example=("bz.abs(bz.asarray([-1.5, 2.0]))", "[1.5, 2.0]"), mlx=_mx("abs"))
_ew("real", 1, np.real, "numeric", result="real", summary="real part", c={"*": "{0}"},
    exact_on_low=True, example=("bz.real(bz.asarray([1.5]))", "[1.5]"), mlx=lambda mx, x: x)
_ew("imag", 1, lambda x: np.imag(x) if dt.is_complex(x.dtype) else np.zeros_like(x),
    "numeric", result="real", summary="imaginary part", c={"*": "({T})0"}, exact_on_low=True,
    example=("bz.imag(bz.asarray([1.5]))", "[0.0]"), mlx=_mx("zeros_like"))
_ew("conj", 1, np.conj, "numeric", summary="complex conjugate", c={"*": "{0}"},
    exact_on_low=True, example=("bz.conj(bz.asarray([1.5]))", "[1.5]"), mlx=lambda mx, x: x)
_ew("bitwise_invert", 1, np.invert, "integer_or_bool", summary="bitwise NOT",
    c={"i": "({T})(~{0})", "u": "({T})(~{0})", "b": "(!{0})"},
    example=("bz.bitwise_invert(bz.asarray([0, 5]))", "[-1, -6]"),
    mlx=lambda mx, x: mx.logical_not(x) if x.dtype == mx.bool_ else mx.bitwise_invert(x))
_ew("logical_not", 1, np.logical_not, "any", cast="bool", summary="logical NOT",
    c={"*": "(!{0})"}, example=("bz.logical_not(bz.asarray([True, False]))", "[False, True]"),
    mlx=_mx("logical_not"))
_ew("isnan", 1, np.isnan, "numeric", result="bool", summary="x is NaN",
    c={"f": "({0} != {0})", "i": "false", "u": "false", "b": "false"},
    example=("bz.isnan(bz.asarray([1.0, float('nan')]))", "[False, True]"), mlx=_mx("isnan"))
_ew("isinf", 1, np.isinf, "numeric", result="bool", summary="x is +-inf",
    c={"f": "(__builtin_fabs{f}({0}) == ({T})__builtin_inf())", "i": "false", "u": "false",
       "b": "false"},
    example=("bz.isinf(bz.asarray([1.0, -float('inf')]))", "[False, True]"), mlx=_mx("isinf"))
_ew("isfinite", 1, np.isfinite, "numeric", result="bool", summary="x is finite",
    c={"f": "(__builtin_fabs{f}({0}) < ({T})__builtin_inf())", "i": "true", "u": "true",
       "b": "true"},
    example=("bz.isfinite(bz.asarray([1.0, float('nan')]))", "[True, False]"),
    mlx=_mx("isfinite"))
_ew("signbit", 1, np.signbit, "real_floating", cast="float", result="bool",
    summary="sign bit of x is set", c={"f": "bz_signbit({0})"}, helpers=("bz_signbit",),
    example=("bz.signbit(bz.asarray([-0.0, 0.0]))", "[True, False]"), mlx=_mx_signbit)

# ---------------------------------------------------------------- binary
_ew("add", 2, np.add, "any", summary="x1 + x2", c={"b": "({0} | {1})", "*": "({T})({0} + {1})"},
    example=("bz.add(bz.asarray([1, 2]), 10)", "[11, 12]"),
    mlx=_mx_bool_or("add", "logical_or"))
_ew("subtract", 2, np.subtract, summary="x1 - x2", c={"*": "({T})({0} - {1})"},
    example=("bz.subtract(bz.asarray([1, 2]), 10)", "[-9, -8]"), mlx=_mx("subtract"))
_ew("multiply", 2, np.multiply, "any", summary="x1 * x2",
    c={"b": "({0} & {1})", "*": "({T})({0} * {1})"},
    example=("bz.multiply(bz.asarray([1, 2]), 10)", "[10, 20]"),
    mlx=_mx_bool_or("multiply", "logical_and"))
_ew("divide", 2, np.true_divide, cast="float", summary="x1 / x2 (true division)",
    c={"f": "({0} / {1})"}, cost=MEDIUM,
    example=("bz.divide(bz.asarray([1, 3]), 2)", "[0.5, 1.5]"), mlx=_mx("divide"))
_ew("floor_divide", 2, _floor_divide, "real_numeric", summary="floor(x1 / x2)",
    c={"f": "bz_floordiv({0}, {1})", "i": "bz_idiv<{T}>({0}, {1})",
       "u": "({1} == 0 ? ({T})0 : ({T})({0} / {1}))"},
    helpers=("bz_floordiv", "bz_idiv"), cost=TRANSCENDENTAL,
    example=("bz.floor_divide(bz.asarray([7, -7]), 2)", "[3, -4]"), mlx_bridge="always")
_ew("remainder", 2, np.remainder, "real_numeric", summary="x1 mod x2 (sign of x2)",
    c={"f": "bz_pymod({0}, {1})", "i": "bz_irem<{T}>({0}, {1})",
       "u": "({1} == 0 ? ({T})0 : ({T})({0} % {1}))"},
    helpers=("bz_pymod", "bz_irem"), cost=TRANSCENDENTAL,
    example=("bz.remainder(bz.asarray([7, -7]), 3)", "[1, 2]"), mlx_bridge="always")
_ew("pow", 2, _power, summary="x1 ** x2",
    c={"f": "bz_fpow({0}, {1})", "i": "bz_ipow<{T}, {U}>({0}, {1})",
       "u": "bz_ipow<{T}, {U}>({0}, {1})"},
    helpers=("bz_ipow", "bz_fpow"), libm=_lm("pow", 2), cost=TRANSCENDENTAL,
    example=("bz.pow(bz.asarray([2, 3]), 3)", "[8, 27]"),
    mlx=_mx("power"), mlx_bridge="int")  # integer pow: negative exponents, overflow
_ew("maximum", 2, np.maximum, "real", summary="larger of x1, x2 (NaN propagates)",
    c={"f": "bz_fmax({0}, {1})", "b": "({0} | {1})", "*": "({0} > {1} ? {0} : {1})"},
    helpers=("bz_fmax",), exact_on_low=True,
    example=("bz.maximum(bz.asarray([1.0, float('nan')]), 2.0)", "[2.0, nan]"),
    mlx=_mx("maximum"))
_ew("minimum", 2, np.minimum, "real", summary="smaller of x1, x2 (NaN propagates)",
    c={"f": "bz_fmin({0}, {1})", "b": "({0} & {1})", "*": "({0} < {1} ? {0} : {1})"},
    helpers=("bz_fmin",), exact_on_low=True,
    example=("bz.minimum(bz.asarray([1.0, float('nan')]), 2.0)", "[1.0, nan]"),
    mlx=_mx("minimum"))
_ew("atan2", 2, lm.atan2, "real_floating", cast="float", summary="angle of (x2, x1)",
    c={"f": "atan2{f}({0}, {1})"}, libm=_lm("atan2", 2), cost=TRANSCENDENTAL,
    example=("bz.atan2(bz.asarray([0.0, -0.0]), 1.0)", "[0.0, -0.0]"), mlx=_mx("arctan2"))
_ew("hypot", 2, lm.hypot, "real_floating", cast="float",
    summary="sqrt(x1**2 + x2**2) without overflow", c={"f": "hypot{f}({0}, {1})"},
    libm=_lm("hypot", 2), cost=TRANSCENDENTAL, msl_native=False,
    example=("bz.hypot(bz.asarray([3.0, float('inf')]), 4.0)", "[5.0, inf]"),
    mlx_bridge="always")
_ew("copysign", 2, np.copysign, "real_floating", cast="float", summary="|x1| with the sign of x2",
    c={"f": "__builtin_copysign{f}({0}, {1})"}, exact_on_low=True,
    example=("bz.copysign(bz.asarray([1.0, 2.0]), -0.0)", "[-1.0, -2.0]"), mlx_bridge="always")
_ew("nextafter", 2, _nextafter, "real_floating", cast="float",
    summary="next float after x1 toward x2",
    c={"float16": "bz_nextafter_h({0}, {1})", "bfloat16": "bz_nextafter_b({0}, {1})",
       "f": "__builtin_nextafter{f}({0}, {1})"},
    exact_on_low=True, cost=MEDIUM, msl_native=False, exact_dtype=True,
    example=("bz.nextafter(bz.asarray([0.0]), 1.0)", "[1.401298464324817e-45]"),
    mlx_bridge="always")
_ew("logaddexp", 2, _logaddexp, "real_floating", cast="float",
    summary="log(exp(x1) + exp(x2))", c={"f": "bz_logaddexp({0}, {1})"},
    helpers=("bz_logaddexp",), cost=2 * TRANSCENDENTAL,
    example=("bz.logaddexp(bz.asarray([0.0, -1000.0]), 0.0)", "[0.6931471824645996, 0.0]"),
    mlx_bridge="always")
_ew("bitwise_and", 2, np.bitwise_and, "integer_or_bool", summary="x1 & x2",
    c={"*": "({T})({0} & {1})"}, example=("bz.bitwise_and(bz.asarray([12, 10]), 6)", "[4, 2]"),
    mlx=_mx_bool_or("bitwise_and", "logical_and"))
_ew("bitwise_or", 2, np.bitwise_or, "integer_or_bool", summary="x1 | x2",
    c={"*": "({T})({0} | {1})"}, example=("bz.bitwise_or(bz.asarray([12, 10]), 6)", "[14, 14]"),
    mlx=_mx_bool_or("bitwise_or", "logical_or"))
_ew("bitwise_xor", 2, np.bitwise_xor, "integer_or_bool", summary="x1 ^ x2",
    c={"*": "({T})({0} ^ {1})"}, example=("bz.bitwise_xor(bz.asarray([12, 10]), 6)", "[10, 12]"),
    mlx=_mx_bool_or("bitwise_xor", "not_equal"))
_ew("bitwise_left_shift", 2, _shift(np.left_shift), "integer", summary="x1 << x2",
    c={"i": "bz_shl<{T}, {U}>({0}, {1})", "u": "bz_shl<{T}, {U}>({0}, {1})"},
    helpers=("bz_shl",), example=("bz.bitwise_left_shift(bz.asarray([1, 3]), 2)", "[4, 12]"),
    mlx_bridge="always")
_ew("bitwise_right_shift", 2, _shift(np.right_shift), "integer",
    summary="x1 >> x2 (arithmetic)",
    c={"i": "bz_shr<{T}>({0}, {1})", "u": "bz_shr<{T}>({0}, {1})"}, helpers=("bz_shr",),
    example=("bz.bitwise_right_shift(bz.asarray([-8, 12]), 2)", "[-2, 3]"),
    mlx_bridge="always")
for _name, _c, _summary, _mlx in [
    ("logical_and", "({0} && {1})", "x1 and x2", "logical_and"),
    ("logical_or", "({0} || {1})", "x1 or x2", "logical_or"),
    ("logical_xor", "({0} != {1})", "x1 xor x2", "not_equal"),
]:
    _ew(_name, 2, getattr(np, _name), "any", cast="bool", summary=_summary, c={"*": _c},
        example=(f"bz.{_name}(bz.asarray([True, False]), True)",
                 str(getattr(np, _name)([True, False], True).tolist())), mlx=_mx(_mlx))
for _name, _c, _domain in [
    ("equal", "==", "any"), ("not_equal", "!=", "any"), ("less", "<", "real"),
    ("less_equal", "<=", "real"), ("greater", ">", "real"), ("greater_equal", ">=", "real"),
]:
    _ew(_name, 2, getattr(np, _name), _domain, result="bool", summary=f"x1 {_c} x2",
        c={"*": f"({{0}} {_c} {{1}})"},
        example=(f"bz.{_name}(bz.asarray([1, 2, 3]), 2)",
                 str(getattr(np, _name)([1, 2, 3], 2).tolist())), mlx=_mx(_name))

# ---------------------------------------------------------------- NumPy's everyday extras
# Each is this one record (plus its tests): the layers pick the facts up from here.
_float1("exp2", np.exp2, "2 raised to x", ("bz.exp2(bz.asarray([3.0, -1.0]))", "[8.0, 0.5]"),
        mlx_bridge="always")  # MLX has no exp2; power(2, x) rounds differently
_ew("sinc", 1, _sinc, "real_floating", cast="float",
    summary="normalized sinc: sin(pi x) / (pi x), 1 at 0",
    c={"f": "({0} == 0 ? ({T})1 : sin{f}(({T})3.14159265358979323846 * {0})"
            " / (({T})3.14159265358979323846 * {0}))"},
    libm=_lm("sin"), cost=TRANSCENDENTAL + MEDIUM,
    example=("bz.sinc(bz.asarray([0.0, 0.5]))", "[1.0, 0.6366197466850281]"),
    mlx=lambda mx, x: mx.where(x == 0, 1, mx.sin(3.14159265358979323846 * x)
                               / (3.14159265358979323846 * x)).astype(x.dtype),
    mlx_bridge="float64")
# numpy's npy_logaddexp2: log2(2**x1 + 2**x2) without overflow; log2(1 + t) = LOG2E log1p(t)
_LOGADDEXP2 = ("({0} == {1} ? {0} + ({T})1 : ({0} - {1} > 0 ? {0} + ({T})1.4426950408889634"
               " * log1p{f}(exp2{f}({1} - {0})) : ({0} - {1} <= 0 ? {1} + ({T})1.4426950408889634"
               " * log1p{f}(exp2{f}({0} - {1})) : {0} - {1})))")
_ew("logaddexp2", 2, _logaddexp2, "real_floating", cast="float",
    summary="log2(2**x1 + 2**x2) without overflow", c={"f": _LOGADDEXP2},
    libm=(("log1p", 1), ("exp2", 1)), cost=2 * TRANSCENDENTAL,
    example=("bz.logaddexp2(bz.asarray([1.0, -2000.0]), 1.0)", "[2.0, 1.0]"),
    mlx_bridge="always")
_ew("heaviside", 2, np.heaviside, "real_floating", cast="float",
    summary="step function: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0",
    c={"f": "({0} < 0 ? ({T})0 : ({0} > 0 ? ({T})1 : ({0} == 0 ? {1} : {0})))"},
    exact_on_low=True,
    example=("bz.heaviside(bz.asarray([-1.5, 0.0, 2.0]), 0.5)", "[0.0, 0.5, 1.0]"),
    mlx=lambda mx, x, y: mx.where(x < 0, mx.zeros_like(x), mx.where(
        x > 0, mx.ones_like(x), mx.where(x == 0, y, x))))

# degrees <-> radians: numpy's x * (pi / 180) and x * (180 / pi), the constant's quotient
# taken in the compute type (180.0f / pi_f for float32: a float64 constant rounded to
# float32 is 1 ulp off numpy)
_ew("deg2rad", 1, np.deg2rad, "real_floating", cast="float", summary="degrees to radians",
    c={"f": "({0} * (({T})3.141592653589793 / ({T})180))"},
    example=("bz.deg2rad(bz.asarray([180.0, -90.0]))", "[3.1415927410125732, -1.5707963705062866]"),
    mlx=lambda mx, x: x * (mx.array(3.141592653589793, x.dtype) / mx.array(180.0, x.dtype)))
_ew("rad2deg", 1, np.rad2deg, "real_floating", cast="float", summary="radians to degrees",
    c={"f": "({0} * (({T})180 / ({T})3.141592653589793))"},
    example=("bz.rad2deg(bz.asarray([0.5, -1.0]))", "[28.64788818359375, -57.2957763671875]"),
    mlx=lambda mx, x: x * (mx.array(180.0, x.dtype) / mx.array(3.141592653589793, x.dtype)))
_ew("fmod", 2, np.fmod, "real_numeric", summary="C remainder of x1 / x2 (sign of x1)",
    c={"f": "__builtin_fmod{f}({0}, {1})",  # a builtin: libmvec has no fmod variant
       "i": "({1} == 0 || {1} == -1 ? ({T})0 : ({T})({0} % {1}))",
       "u": "({1} == 0 ? ({T})0 : ({T})({0} % {1}))"}, cost=TRANSCENDENTAL,
    example=("bz.fmod(bz.asarray([7, -7]), 3)", "[1, -1]"), mlx_bridge="always")
# NaN-ignoring max/min (C's fmax/fmin); on equal operands (+-0) the pick numpy's makes
for _name, _which, _pick, _bool in [("fmax", "larger", "({0} > {1} ? {0} : {1})", "|"),
                                    ("fmin", "smaller", "({1} < {0} ? {1} : {0})", "&")]:
    _mx_pick = "maximum" if _name == "fmax" else "minimum"
    _ew(_name, 2, getattr(np, _name), "real", summary=f"{_which} of x1, x2, ignoring NaN",
        c={"f": f"({{0}} != {{0}} ? {{1}} : ({{1}} != {{1}} ? {{0}} : {_pick}))",
           "b": f"({{0}} {_bool} {{1}})", "*": _pick}, exact_on_low=True,
        example=(f"bz.{_name}(bz.asarray([1.0, float('nan')]), 2.0)",
                 "[2.0, 2.0]" if _name == "fmax" else "[1.0, 2.0]"),
        mlx=lambda mx, x, y, pick=_mx_pick: mx.where(
            mx.isnan(x), y, mx.where(mx.isnan(y), x, getattr(mx, pick)(x, y)))
        if mx.issubdtype(x.dtype, mx.floating) else getattr(mx, pick)(x, y))

# ternary: where(cond, x, y); cond is bool, x and y share the compute dtype
WHERE = _ew("where", 3, np.where, "any", summary="x1 where cond is true, else x2",
            c={"*": "({0} ? {1} : {2})"}, exact_on_low=True, mlx=_mx("where"))


def _cast_ref(x: np.ndarray, *, dtype: np.dtype) -> np.ndarray:
    if dt.is_bool(dtype):
        return x != 0
    return x.astype(dtype)


CAST = declare(OpDef("cast", "elementwise", 1, _cast_ref, doc="Convert to attrs['dtype'].",
                    vjp=_VJP["cast"]))
BITCAST = declare(OpDef("bitcast", "elementwise", 1, lambda x, *, dtype: x.view(dtype),
                        doc="Reinterpret the bits as attrs['dtype'] (same item size).",
                        vjp=zero_vjp))
