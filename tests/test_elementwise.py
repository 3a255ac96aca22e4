"""Elementwise ops against numpy: every elementwise row of the op table, every dtype of
its domain, operators (plain, reflected, in-place), ufunc dispatch, ``where``, ``clip``,
errors at the call and laziness.

The expected values never come from the op table's own reference functions: each op is
computed with numpy's function of the same name (or a definition written here) on the
inputs cast to the op's compute dtype (float16/bfloat16 computed in float32 and rounded
once; integer/bool inputs to floating functions computed in float32), then cast to the
result dtype. Expected dtypes come from the rules written here, not from the table,
except for rows this file does not know yet (those use their own declaration).
"""

from __future__ import annotations

import itertools
import operator
import re
import time
from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import braze as bz
from braze.arrays import elementwise as ew  # every generated function, internal ones too
from braze.graph import dtypes as dt
from braze.graph.ops import DOMAINS, OPS, OpDef

from .helpers import arrays, assert_matches, shapes, upcast

# ----------------------------------------------------------------------------- the op rows
EXCLUDED = ("cast", "bitcast", "where")
EW_OPS = [op for op in OPS.values() if op.kind == "elementwise" and op.name not in EXCLUDED]
UNARY = [op for op in EW_OPS if op.arity == 1]
BINARY = [op for op in EW_OPS if op.arity == 2]

# Each (op, dtype) case gets a share of the profile's examples (5 in the default profile of
# 40, 50 in "thorough"); the deterministic edge-value grids below cover NaN/inf/-0 and
# integer extremes for every case regardless.
FEW = max(4, settings().max_examples // 8)


def domain(op: OpDef) -> list[np.dtype]:
    return [d for d in dt.ALL if DOMAINS[op.domain][1](d)]


def plain_dtype(op: OpDef) -> np.dtype:
    """A dtype the op surely accepts (float32, else int32, else its first), for tests of
    something else than dtypes."""
    dom = domain(op)
    return next((d for d in (dt.float32, dt.int32) if d in dom), dom[0])


def _case_id(v: Any) -> str:
    if isinstance(v, OpDef):
        return v.name
    if isinstance(v, np.dtype):
        return dt.name(v)
    return str(v)


UNARY_CASES = [(op, d) for op in UNARY for d in domain(op)]
BINARY_CASES = [(op, d) for op in BINARY for d in domain(op)]

# ----------------------------------------------------------------------------- dtype rules
# The standard's (and braze's documented) result-dtype rules, written out independently of
# the op table. Rows not listed here fall back to their own declaration.
FLOAT_FUNCS = {
    "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "reciprocal", "sigmoid",
    "divide", "atan2", "hypot", "copysign", "nextafter", "logaddexp", "signbit",
}
BOOL_INPUT = {"logical_not", "logical_and", "logical_or", "logical_xor"}
BOOL_RESULT = {"isnan", "isinf", "isfinite", "signbit", "equal", "not_equal", "less",
               "less_equal", "greater", "greater_equal"} | BOOL_INPUT
REAL_RESULT = {"abs", "real", "imag"}
SAME_RESULT = {
    "negative", "positive", "square", "sign", "round", "ceil", "floor", "trunc", "conj",
    "bitwise_invert", "add", "subtract", "multiply", "floor_divide", "remainder", "pow",
    "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift",
}
KNOWN = FLOAT_FUNCS | BOOL_RESULT | REAL_RESULT | SAME_RESULT
_REAL_OF = {dt.complex64: dt.float32, dt.complex128: dt.float64}


def expected_dtypes(op: OpDef, common: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(compute dtype, result dtype) of ``op`` on inputs promoted to ``common``."""
    if op.name in KNOWN:
        float_in, bool_in = op.name in FLOAT_FUNCS, op.name in BOOL_INPUT
        rule = "bool" if op.name in BOOL_RESULT else "real" if op.name in REAL_RESULT else "same"
    else:
        float_in, bool_in, rule = op.cast_inputs == "float", op.cast_inputs == "bool", op.result
    if float_in:
        compute = common if dt.is_floating(common) else dt.float32
    elif bool_in:
        compute = dt.bool_
    else:
        compute = common
    if rule == "bool":
        return compute, dt.bool_
    if rule == "real":
        return compute, _REAL_OF.get(compute, compute)
    return compute, compute


# ----------------------------------------------------------------------------- references
def _sigmoid_ref(x: np.ndarray) -> np.ndarray:
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    return 1 / (1 + np.exp(-x.astype(wide)))


def _sign_ref(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "c":
        return np.sign(x)
    # The standard: x / |x|, 0 at 0, special cases by the rules of complex division.
    # Divide the parts by the (overflow-free) magnitude: exact for subnormal inputs too.
    z = x.astype(np.complex128)
    mag = np.abs(z)
    safe = np.where(mag == 0, 1, mag)
    return np.where(mag == 0, 0, z.real / safe + 1j * (z.imag / safe))


def _wrap(v: int, dtype: np.dtype) -> int:
    bits = dtype.itemsize * 8
    v %= 1 << bits
    if dtype.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _pow_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind not in "iu":
        return np.power(x, y)
    # Integers, exactly (Python ints, wrapped to the dtype). A negative exponent gives
    # 1 / x**|y| truncated: 1 for x == 1, +-1 for x == -1, else 0 (braze's documented rule;
    # numpy raises instead).
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, x.dtype)
    bits = x.dtype.itemsize * 8
    for i in np.ndindex(x.shape):
        a, b = int(x[i]), int(y[i])
        if b < 0:
            r = 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
        else:
            r = pow(a, b, 1 << bits)
        out[i] = _wrap(r, x.dtype)
    return out


def _floor_divide_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The standard's special cases where numpy differs: +-inf // finite is a signed inf
    # (numpy: NaN), finite // +-inf a signed zero (numpy: -1 when the signs differ).
    out = np.floor_divide(x, y)
    if out.dtype.kind != "f":
        return out
    x, y = np.broadcast_arrays(x, y)
    sign = np.copysign(1.0, x) * np.copysign(1.0, y)
    out = np.where(np.isinf(x) & np.isfinite(y), np.inf * sign, out)
    out = np.where(np.isfinite(x) & np.isinf(y), 0.0 * sign, out)
    return out.astype(x.dtype)


def _expm1_ref(x: np.ndarray) -> np.ndarray:
    """expm1; complex: exp(z) - 1 in complex128 for finite parts, and the standard's
    table, row by row, where a part is infinite or NaN or both parts are zero."""
    if x.dtype.kind != "c":
        return np.expm1(x)
    out = np.exp(x.astype(np.complex128)) - 1
    inf, nan = np.inf, np.nan
    for i, z in enumerate(x.astype(np.complex128).flat):
        a, b = z.real, z.imag
        if a == 0 and b == 0:
            row = complex(0.0, b)
        elif np.isfinite(a) and not np.isfinite(b):
            row = complex(nan, nan)
        elif a == inf and b == 0:
            row = complex(inf, b)
        elif a == -inf and np.isfinite(b):
            row = complex(-1.0, 0.0 * np.sin(b))
        elif a == inf and np.isfinite(b):
            row = complex(inf * np.cos(b), inf * np.sin(b))
        elif a == -inf:  # b infinite or NaN: -1 + 0j (sign of the zero unspecified)
            row = complex(-1.0, 0.0)
        elif a == inf:  # b infinite or NaN
            row = complex(inf, nan)
        elif np.isnan(a):
            row = complex(nan, b) if b == 0 else complex(nan, nan)
        else:
            continue
        out.flat[i] = row
    return out


def _tanh_ref(x: np.ndarray) -> np.ndarray:
    """tanh; complex ``±inf + bj`` with finite b is ``±1 + 0j``, the zero signed like b
    (the standard's table; numpy's zero takes the sign of sin(2b))."""
    out = np.tanh(x)
    if x.dtype.kind == "c":
        for i, z in enumerate(x.flat):
            if np.isinf(z.real) and np.isfinite(z.imag):
                out.flat[i] = complex(np.sign(z.real), np.copysign(0.0, z.imag))
    return out


SPECIAL_REFS: dict[str, Callable[..., Any]] = {
    "sigmoid": _sigmoid_ref, "sign": _sign_ref, "pow": _pow_ref,
    "floor_divide": _floor_divide_ref, "expm1": _expm1_ref, "tanh": _tanh_ref,
}
# The next representable value is a property of the dtype itself: no float32 detour.
NATIVE_PRECISION = {"nextafter"}


def reference(op: OpDef) -> Callable[..., Any]:
    f = SPECIAL_REFS.get(op.name) or getattr(np, op.name, None)
    return f if f is not None else op.reference  # a brand-new row without a numpy twin


def expected(op: OpDef, *xs: Any, common: np.dtype | None = None) -> tuple[np.ndarray, np.dtype]:
    """numpy's value of ``op(*xs)`` under braze's dtype rules, and its result dtype."""
    arrs = [np.asarray(x) for x in xs]
    if common is None:
        common = dt.result_type(*[a.dtype for a in arrs])
    compute, out = expected_dtypes(op, common)
    ins = []
    with np.errstate(all="ignore"):
        for a in arrs:
            a = a.astype(common)
            a = (a != 0) if compute == dt.bool_ else a.astype(compute)
            ins.append(a if op.name in NATIVE_PRECISION else upcast(a))
        r = np.asarray(reference(op)(*ins)).astype(out)
    return r, out


def check(op: OpDef, got: Any, *xs: Any, common: np.dtype | None = None) -> None:
    assert isinstance(got, bz.Array), f"{op.name} returned {type(got).__name__}"
    want, out = expected(op, *xs, common=common)
    assert got.dtype == out, f"{op.name}: dtype {got.dtype} != {out}"
    assert_matches(got, want, out)


# ----------------------------------------------------------------------------- inputs
_FLOAT_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 3.0,
                1e-3, 100.0, -100.0]
# 1e-40: subnormal in float32
_COMPLEX_PARTS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e-40]


def _finfo(d: np.dtype) -> Any:
    return ml_dtypes.finfo(d) if d == dt.bfloat16 else np.finfo(d)


def edge_values(d: np.dtype) -> np.ndarray:
    """Every interesting value of a dtype: NaN, +-inf, +-0, extremes, subnormals."""
    if d == dt.bool_:
        return np.array([False, True])
    if dt.is_integer(d):
        info = np.iinfo(d)
        bits = d.itemsize * 8
        vals = {info.min, info.min + 1, -2, -1, 0, 1, 2, 3, 7, bits - 1, bits,
                info.max - 1, info.max}
        return np.array(sorted(v for v in vals if info.min <= v <= info.max), dtype=d)
    if dt.is_complex(d):
        parts = list(itertools.product(_COMPLEX_PARTS, repeat=2))
        out = np.empty(len(parts), d)
        out.real = [p[0] for p in parts]
        out.imag = [p[1] for p in parts]
        return out
    fi = _finfo(d)
    extra = [float(fi.max), -float(fi.max), float(fi.smallest_subnormal),
             -float(fi.smallest_subnormal), float(fi.smallest_normal)]
    with np.errstate(all="ignore"):
        return np.array(_FLOAT_EDGES + extra, dtype=np.float64).astype(d)


def values(dtype: np.dtype, shape: Any = None) -> st.SearchStrategy[np.ndarray]:
    """A numpy array of ``dtype`` (NaN/inf/-0 included for floats), sometimes a view."""
    return arrays(dtype, shapes(max_dims=3) if shape is None else shape)


@st.composite
def to_braze(draw: Any, x: np.ndarray) -> bz.Array:
    """``x`` as a braze Array: shared from numpy, or a braze-side strided/transposed view."""
    how = draw(st.sampled_from(["asarray", "strided", "transposed"]))
    if how == "strided" and x.ndim >= 1:
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1] + 1,), x.dtype)
        big[..., 1::2] = x
        return bz.asarray(big)[..., 1::2]
    if how == "transposed" and x.ndim >= 2:
        axes = tuple(reversed(range(x.ndim)))
        return bz.permute_dims(bz.asarray(np.ascontiguousarray(np.transpose(x))), axes)
    return bz.asarray(x)


@st.composite
def shapes_broadcasting_to(draw: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape`` (a suffix of it, some dims set to 1)."""
    n = draw(st.integers(0, len(shape)))
    return tuple(draw(st.sampled_from([d, 1])) for d in shape[len(shape) - n:])


def two_shapes() -> st.SearchStrategy[Any]:
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                             max_side=4)


# ----------------------------------------------------------------------------- table coverage
def test_table_has_the_standard_elementwise_ops() -> None:
    """The row list these tests iterate over is the real one (not silently empty)."""
    names = {op.name for op in EW_OPS}
    assert {"add", "exp", "equal", "bitwise_and", "logical_not", "nextafter"} <= names
    assert not names & set(EXCLUDED)


@pytest.mark.parametrize("op", EW_OPS, ids=_case_id)
def test_every_row_has_a_public_function(op: OpDef) -> None:
    from braze.arrays import elementwise as ew

    fn = getattr(bz if op.public else ew, op.name, None)
    assert callable(fn), f"bz.{op.name} missing"
    assert fn.__name__ == op.name


# ----------------------------------------------------------------------------- unary values
@pytest.mark.parametrize(("op", "dtype"), UNARY_CASES, ids=_case_id)
@settings(max_examples=FEW)
@given(data=st.data())
def test_unary_matches_numpy(op: OpDef, dtype: np.dtype, data: st.DataObject) -> None:
    x = data.draw(values(dtype), label="x")
    got = getattr(ew, op.name)(data.draw(to_braze(x), label="bx"))
    assert got.shape == x.shape
    check(op, got, x)


# Ops whose sign of zero the standard (IEEE 754) fixes.
SIGNED_ZERO_OPS = {
    "negative", "positive", "abs", "sqrt", "sin", "tan", "asin", "atan", "sinh", "tanh",
    "asinh", "atanh", "expm1", "log1p", "ceil", "floor", "trunc", "round", "add", "subtract",
    "multiply", "divide", "copysign",
}


def _assert_zero_signs(op: OpDef, got: bz.Array, want: np.ndarray) -> None:
    if op.name not in SIGNED_ZERO_OPS or not dt.is_real_floating(got.dtype):
        return
    g = np.asarray(got).astype(np.float64)
    w = want.astype(np.float64)
    zero = w == 0
    np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]),
                                  err_msg=f"{op.name}: sign of zero")


@pytest.mark.parametrize(("op", "dtype"), UNARY_CASES, ids=_case_id)
def test_unary_edge_values(op: OpDef, dtype: np.dtype) -> None:
    x = edge_values(dtype)
    got = getattr(ew, op.name)(bz.asarray(x))
    check(op, got, x)
    _assert_zero_signs(op, got, expected(op, x)[0])


# ----------------------------------------------------------------------------- binary values
@pytest.mark.parametrize(("op", "dtype"), BINARY_CASES, ids=_case_id)
@settings(max_examples=FEW)
@given(data=st.data(), shp=two_shapes())
def test_binary_matches_numpy(op: OpDef, dtype: np.dtype, data: st.DataObject,
                              shp: Any) -> None:
    s1, s2 = shp.input_shapes
    x = data.draw(values(dtype, s1), label="x")
    y = data.draw(values(dtype, s2), label="y")
    got = getattr(ew, op.name)(data.draw(to_braze(x), label="bx"),
                               data.draw(to_braze(y), label="by"))
    assert got.shape == shp.result_shape
    check(op, got, x, y)


@pytest.mark.parametrize(("op", "dtype"), BINARY_CASES, ids=_case_id)
def test_binary_edge_values(op: OpDef, dtype: np.dtype) -> None:
    v = edge_values(dtype)
    x, y = v[:, None], v[None, :]  # every pair, through (n, 1) x (1, n) broadcasting
    got = getattr(ew, op.name)(bz.asarray(x), bz.asarray(y))
    assert got.shape == (v.size, v.size)
    check(op, got, x, y)
    _assert_zero_signs(op, got, expected(op, x, y)[0])


def _promotable(d1: np.dtype, d2: np.dtype) -> bool:
    return not ({d1, d2} & {dt.uint64} and {d1, d2} & set(dt.SIGNED))


@pytest.mark.parametrize("op", BINARY, ids=_case_id)
@settings(max_examples=2 * FEW)
@given(data=st.data(), shp=two_shapes())
def test_binary_mixed_dtypes(op: OpDef, data: st.DataObject, shp: Any) -> None:
    d1 = data.draw(st.sampled_from(domain(op)), label="d1")
    d2 = data.draw(st.sampled_from([d for d in domain(op) if _promotable(d1, d)]), label="d2")
    common = dt.promote(d1, d2)
    assume(DOMAINS[op.domain][1](common))
    s1, s2 = shp.input_shapes
    x = data.draw(values(d1, s1), label="x")
    y = data.draw(values(d2, s2), label="y")
    got = getattr(ew, op.name)(bz.asarray(x), bz.asarray(y))
    check(op, got, x, y, common=common)


# ----------------------------------------------------------------------------- Python scalars
def weak_dtype(value: Any, d: np.dtype) -> np.dtype:
    """The dtype a Python scalar takes next to an array of dtype ``d`` (scalars are weak)."""
    if isinstance(value, bool):
        return d
    if isinstance(value, int):
        return dt.int64 if d == dt.bool_ else d
    if isinstance(value, float):
        return d if dt.is_floating(d) else dt.float32
    if dt.is_complex(d):
        return d
    return dt.complex128 if d == dt.float64 else dt.complex64


def scalars(d: np.dtype) -> st.SearchStrategy[Any]:
    """Python scalars of every kind that can meet an array of dtype ``d`` without overflow."""
    ints = (st.integers(int(np.iinfo(d).min), int(np.iinfo(d).max)) if dt.is_integer(d)
            else st.integers(-10**6, 10**6))
    return st.one_of(st.booleans(), ints, st.floats(), st.complex_numbers())


@pytest.mark.parametrize("op", BINARY, ids=_case_id)
@settings(max_examples=2 * FEW)
@given(data=st.data())
def test_binary_with_python_scalar(op: OpDef, data: st.DataObject) -> None:
    d = data.draw(st.sampled_from(domain(op)), label="dtype")
    x = data.draw(values(d), label="x")
    s = data.draw(scalars(d), label="scalar")
    scalar_left = data.draw(st.booleans(), label="scalar_left")
    common = dt.promote(d, weak_dtype(s, d))
    fn = getattr(ew, op.name)
    args = (s, bz.asarray(x)) if scalar_left else (bz.asarray(x), s)
    if not DOMAINS[op.domain][1](common):
        with pytest.raises(TypeError, match=op.name):
            fn(*args)
        return
    got = fn(*args)
    assert got.shape == x.shape
    with np.errstate(all="ignore"):
        sv = np.asarray(s).astype(common)
    check(op, got, *((sv, x) if scalar_left else (x, sv)), common=common)


# ----------------------------------------------------------------------------- operators
BINARY_OPERATORS = {
    "+": ("add", operator.add), "-": ("subtract", operator.sub), "*": ("multiply", operator.mul),
    "/": ("divide", operator.truediv), "//": ("floor_divide", operator.floordiv),
    "%": ("remainder", operator.mod), "**": ("pow", operator.pow),
    "&": ("bitwise_and", operator.and_), "|": ("bitwise_or", operator.or_),
    "^": ("bitwise_xor", operator.xor), "<<": ("bitwise_left_shift", operator.lshift),
    ">>": ("bitwise_right_shift", operator.rshift), "==": ("equal", operator.eq),
    "!=": ("not_equal", operator.ne), "<": ("less", operator.lt),
    "<=": ("less_equal", operator.le), ">": ("greater", operator.gt),
    ">=": ("greater_equal", operator.ge),
}
INPLACE_OPERATORS = {
    "+=": ("add", operator.iadd), "-=": ("subtract", operator.isub),
    "*=": ("multiply", operator.imul), "/=": ("divide", operator.itruediv),
    "//=": ("floor_divide", operator.ifloordiv), "%=": ("remainder", operator.imod),
    "**=": ("pow", operator.ipow), "&=": ("bitwise_and", operator.iand),
    "|=": ("bitwise_or", operator.ior), "^=": ("bitwise_xor", operator.ixor),
    "<<=": ("bitwise_left_shift", operator.ilshift),
    ">>=": ("bitwise_right_shift", operator.irshift),
}
# Python evaluates ``scalar < x`` as ``x > scalar``: errors name the mirrored op.
MIRRORED = {"less": "greater", "less_equal": "greater_equal", "greater": "less",
            "greater_equal": "less_equal"}
UNARY_OPERATORS = {"-": ("negative", operator.neg), "+": ("positive", operator.pos),
                   "~": ("bitwise_invert", operator.invert), "abs": ("abs", abs)}


@pytest.mark.parametrize("sym", list(BINARY_OPERATORS))
@settings(max_examples=2 * FEW)
@given(data=st.data(), shp=two_shapes())
def test_binary_operator(sym: str, data: st.DataObject, shp: Any) -> None:
    name, fn = BINARY_OPERATORS[sym]
    op = OPS[name]
    d = data.draw(st.sampled_from(domain(op)), label="dtype")
    s1, s2 = shp.input_shapes
    x = data.draw(values(d, s1), label="x")
    y = data.draw(values(d, s2), label="y")
    bx, by = data.draw(to_braze(x), label="bx"), data.draw(to_braze(y), label="by")
    check(op, fn(bx, by), x, y)
    # a numpy array on either side gives a lazy braze array with braze's semantics
    check(op, fn(x, by), x, y)
    check(op, fn(bx, y), x, y)


@pytest.mark.parametrize("sym", list(BINARY_OPERATORS))
@settings(max_examples=2 * FEW)
@given(data=st.data())
def test_binary_operator_python_scalar_both_sides(sym: str, data: st.DataObject) -> None:
    name, fn = BINARY_OPERATORS[sym]
    op = OPS[name]
    d = data.draw(st.sampled_from(domain(op)), label="dtype")
    x = data.draw(values(d), label="x")
    s = data.draw(scalars(d), label="scalar")
    common = dt.promote(d, weak_dtype(s, d))
    bx = bz.asarray(x)
    if not DOMAINS[op.domain][1](common):
        with pytest.raises(TypeError, match=op.name):
            fn(bx, s)
        with pytest.raises(TypeError, match=MIRRORED.get(name, name)):
            fn(s, bx)
        return
    with np.errstate(all="ignore"):
        sv = np.asarray(s).astype(common)
    check(op, fn(bx, s), x, sv, common=common)
    # reflected: Python's scalar.__op__ gives way to Array.__rop__ (or the mirrored
    # comparison), which must compute scalar OP x, not x OP scalar
    check(op, fn(s, bx), sv, x, common=common)


@pytest.mark.parametrize("sym", list(UNARY_OPERATORS))
@pytest.mark.parametrize("dtype", dt.ALL, ids=_case_id)
def test_unary_operator(sym: str, dtype: np.dtype) -> None:
    name, fn = UNARY_OPERATORS[sym]
    op = OPS[name]
    x = edge_values(dtype)
    if dtype not in domain(op):
        with pytest.raises(TypeError, match=name):
            fn(bz.asarray(x))
        return
    check(op, fn(bz.asarray(x)), x)


@pytest.mark.parametrize("sym", list(INPLACE_OPERATORS))
@settings(max_examples=2 * FEW)
@given(data=st.data())
def test_inplace_operator(sym: str, data: st.DataObject) -> None:
    name, fn = INPLACE_OPERATORS[sym]
    op = OPS[name]
    d = data.draw(st.sampled_from(domain(op)), label="dtype")
    x = data.draw(values(d), label="x")
    y_shape = data.draw(shapes_broadcasting_to(x.shape), label="y_shape")
    y = data.draw(values(d, y_shape), label="y")
    x_before = x.copy()
    a = bz.asarray(x)
    want, out = expected(op, x, y)
    if out != d:  # e.g. int /= int: in-place ops keep the dtype
        with pytest.raises(TypeError, match=re.escape(sym)):
            fn(a, bz.asarray(y))
        assert a.dtype == d
        return
    res = fn(a, bz.asarray(y))
    assert res is a
    assert a.dtype == d and a.shape == x.shape
    assert_matches(a, want, d)
    assert x.tobytes() == x_before.tobytes()  # the numpy input is not written to


@pytest.mark.parametrize("dtype", [dt.int8, dt.int64, dt.uint8, dt.float16, dt.float32,
                                   dt.complex64], ids=_case_id)
def test_inplace_python_scalar_keeps_dtype(dtype: np.dtype) -> None:
    x = edge_values(dtype)
    a = bz.asarray(x)
    a += 1
    a *= 3
    assert a.dtype == dtype
    with np.errstate(all="ignore"):
        want = (upcast(x) + upcast(np.asarray(1, dtype))).astype(dtype)
        want = (upcast(want) * upcast(np.asarray(3, dtype))).astype(dtype)
    assert_matches(a, want, dtype)


@pytest.mark.parametrize("dtype", dt.INTEGER, ids=_case_id)
def test_inplace_float_into_int_raises(dtype: np.dtype) -> None:
    a = bz.ones(3, dtype=dtype)
    with pytest.raises(TypeError, match=r"\+="):
        a += bz.ones(3, dtype=bz.float32)
    with pytest.raises(TypeError, match=r"\+="):
        a += 1.5
    with pytest.raises(TypeError, match="/="):
        a /= 2
    # a failed in-place op leaves the array as it was
    assert a.dtype == dtype
    assert a.tolist() == [1, 1, 1]


def test_inplace_wider_dtype_raises() -> None:
    a = bz.ones(3, dtype=bz.int8)
    with pytest.raises(TypeError, match=r"\+="):
        a += bz.ones(3, dtype=bz.int16)
    b = bz.ones(3, dtype=bz.float32)
    with pytest.raises(TypeError, match=r"\*="):
        b *= bz.ones(3, dtype=bz.float64)
    assert a.dtype == bz.int8 and b.dtype == bz.float32


@pytest.mark.parametrize(("x_shape", "y_shape"), [((3,), (2, 3)), ((1,), (4,)), ((), (2,)),
                                                  ((2, 1), (1, 3))])
def test_inplace_shape_change_raises(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> None:
    a = bz.ones(x_shape)
    with pytest.raises(ValueError, match=r"\+="):
        a += bz.ones(y_shape)
    assert a.shape == x_shape
    assert np.asarray(a).tolist() == np.ones(x_shape).tolist()


def test_inplace_overflowing_python_int_raises() -> None:
    a = bz.ones(3, dtype=bz.uint8)
    with pytest.raises(OverflowError):
        a -= -1
    with pytest.raises(OverflowError):
        a += 256
    assert a.tolist() == [1, 1, 1]


# ----------------------------------------------------------------------------- ufunc dispatch
UFUNC_OPS = [op for op in EW_OPS if isinstance(getattr(np, op.name, None), np.ufunc)]


@pytest.mark.parametrize("op", UFUNC_OPS, ids=_case_id)
def test_numpy_ufunc_dispatch(op: OpDef) -> None:
    """np.<ufunc>(bz_array) records the braze op (lazily) and follows braze's dtype rules."""
    ufunc = getattr(np, op.name)
    for d in domain(op):
        x = edge_values(d)
        if op.arity == 1:
            got = ufunc(bz.asarray(x))
            args: tuple[Any, ...] = (x,)
        else:
            x, y = x[:, None], x[None, :]
            got = ufunc(x, bz.asarray(y))  # the braze array in the second slot
            args = (x, y)
        assert isinstance(got, bz.Array), f"np.{op.name} gave {type(got).__name__}"
        assert got._node.data is None  # recorded, not computed
        check(op, got, *args)


def test_numpy_ufunc_dispatch_examples() -> None:
    x = bz.asarray(np.array([0, 1, 2], np.int32))
    e = np.exp(x)
    assert isinstance(e, bz.Array) and e.dtype == bz.float32  # braze's rule, not numpy's
    assert_matches(e, np.exp(np.array([0, 1, 2], np.float32)), bz.float32)
    m = np.maximum(np.array([5, -1, 3], np.int8), bz.asarray(np.array([1, 2, 3], np.int8)))
    assert isinstance(m, bz.Array)
    assert m.dtype == bz.int8 and m.tolist() == [5, 2, 3]


# ----------------------------------------------------------------------------- where
@settings(max_examples=2 * FEW)
@given(data=st.data(),
       shp=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0,
                                                 max_side=4))
def test_where_arrays(data: st.DataObject, shp: Any) -> None:
    sc, s1, s2 = shp.input_shapes
    # non-bool conditions are tested for != 0 (complex ones: test_where_complex_condition)
    cd = data.draw(st.sampled_from([d for d in dt.ALL if not dt.is_complex(d)]),
                   label="cond dtype")
    d1 = data.draw(st.sampled_from(dt.ALL), label="d1")
    d2 = data.draw(st.sampled_from([d for d in dt.ALL if _promotable(d1, d)]), label="d2")
    c = data.draw(values(cd, sc), label="cond")
    x = data.draw(values(d1, s1), label="x")
    y = data.draw(values(d2, s2), label="y")
    got = bz.where(data.draw(to_braze(c)), data.draw(to_braze(x)), data.draw(to_braze(y)))
    common = dt.promote(d1, d2)
    assert got.shape == shp.result_shape and got.dtype == common
    with np.errstate(all="ignore"):
        want = np.where(c != 0, x.astype(common), y.astype(common))
    assert_matches(got, want, common)


@settings(max_examples=2 * FEW)
@given(data=st.data())
def test_where_python_scalar_branch(data: st.DataObject) -> None:
    d = data.draw(st.sampled_from(dt.ALL), label="dtype")
    x = data.draw(values(d), label="x")
    c = data.draw(arrays(dt.bool_, x.shape), label="cond")
    s = data.draw(scalars(d), label="scalar")
    scalar_first = data.draw(st.booleans(), label="scalar_first")
    common = dt.promote(d, weak_dtype(s, d))
    with np.errstate(all="ignore"):
        sv = np.asarray(s).astype(common)
    if scalar_first:
        got, want = bz.where(bz.asarray(c), s, bz.asarray(x)), np.where(c, sv, x.astype(common))
    else:
        got, want = bz.where(bz.asarray(c), bz.asarray(x), s), np.where(c, x.astype(common), sv)
    assert got.dtype == common
    assert_matches(got, want, common)


@pytest.mark.parametrize("dtype", [dt.complex64, dt.complex128], ids=_case_id)
def test_where_complex_condition(dtype: np.dtype) -> None:
    c = edge_values(dtype)  # NaN parts count as non-zero
    got = bz.where(bz.asarray(c), 1, bz.zeros(c.shape, dtype=bz.int8))
    assert got.dtype == bz.int8
    assert_matches(got, np.where(c != 0, 1, 0).astype(np.int8), bz.int8)


def test_where_examples() -> None:
    c = bz.asarray([True, False, True])
    assert bz.where(c, bz.ones(3, dtype=bz.int8), 5).dtype == bz.int8
    assert bz.where(c, bz.ones(3, dtype=bz.int8), 1.5).dtype == bz.float32
    assert bz.where(c, bz.ones(3, dtype=bz.float16), 2).dtype == bz.float16
    assert bz.where(c, 1.0, bz.zeros(3, dtype=bz.float64)).tolist() == [1.0, 0.0, 1.0]
    # condition broadcast against both branches: (2, 1) x (3,) x ()
    got = bz.where(bz.asarray(np.array([[1], [0]])), bz.arange(3), -1)
    assert got.shape == (2, 3)
    assert got.tolist() == [[0, 1, 2], [-1, -1, -1]]
    # NaN is non-zero: true
    assert bz.where(bz.asarray([np.nan, 0.0]), 1, 2).tolist() == [1, 2]


def test_where_errors() -> None:
    c = bz.asarray([True, False])
    with pytest.raises(OverflowError, match="where"):
        bz.where(c, bz.ones(2, dtype=bz.int8), 300)
    with pytest.raises(ValueError, match="where"):
        bz.where(bz.ones((2, 3), dtype=bz.bool), bz.ones(4), 0.0)
    with pytest.raises(TypeError, match="where"):
        bz.where(c, bz.ones(2, dtype=bz.uint64), bz.ones(2, dtype=bz.int8))
    with pytest.raises(TypeError, match="where"):
        bz.where(object(), bz.ones(2), bz.ones(2))
    with pytest.raises(TypeError, match="where"):
        bz.where(c, object(), bz.ones(2))


# ----------------------------------------------------------------------------- clip
REAL_DTYPES = [d for d in dt.ALL if not dt.is_complex(d) and d != dt.bool_]


def _exact_clip(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    """clip of an integer array with exact (Python int) bounds, saturated into x's dtype."""
    out = np.asarray(x.astype(object))
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(object))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(object))
    info = np.iinfo(x.dtype)
    return np.asarray(np.clip(out, int(info.min), int(info.max))).astype(x.dtype)


@settings(max_examples=4 * FEW)
@given(data=st.data())
def test_clip(data: st.DataObject) -> None:
    d = data.draw(st.sampled_from(REAL_DTYPES), label="dtype")
    x = data.draw(values(d), label="x")

    def bound() -> Any:
        kind = data.draw(st.sampled_from(["none", "scalar", "array"]))
        if kind == "none":
            return None
        if kind == "array":
            shape = data.draw(shapes_broadcasting_to(x.shape))
            return data.draw(values(d, shape))
        if dt.is_integer(d):  # Python ints, also outside the dtype's range
            return data.draw(st.integers(-2**70, 2**70) | st.integers(-300, 300))
        return data.draw(st.floats(allow_nan=False) | st.integers(-1000, 1000))

    lo, hi = bound(), bound()
    args = [bz.asarray(b) if isinstance(b, np.ndarray) else b for b in (lo, hi)]
    got = bz.clip(bz.asarray(x), *args)
    assert got.shape == x.shape and got.dtype == d
    if dt.is_integer(d):
        want = _exact_clip(x, lo, hi)
    else:
        with np.errstate(all="ignore"):
            want = upcast(x)
            if lo is not None:  # NaN (in x or a bound) propagates
                want = np.maximum(want, upcast(np.asarray(lo).astype(d)))
            if hi is not None:
                want = np.minimum(want, upcast(np.asarray(hi).astype(d)))
    assert_matches(got, want, d)


def test_clip_examples() -> None:
    x = bz.asarray(np.array([np.nan, -2.0, 0.5, 7.0], np.float32))
    out = bz.clip(x, -1.0, 3.0)
    assert out.dtype == bz.float32
    np.testing.assert_array_equal(np.asarray(out), [np.nan, -1.0, 0.5, 3.0])
    i8 = bz.asarray(np.array([-128, 0, 127], np.int8))
    assert bz.clip(i8, -1000, 1000).tolist() == [-128, 0, 127]  # out-of-range bounds: no-op
    assert bz.clip(i8, 1000).tolist() == [127, 127, 127]  # saturates, never wraps
    assert bz.clip(i8, -5, 5).dtype == bz.int8
    assert bz.clip(i8, None, None).tolist() == [-128, 0, 127]


def test_clip_int_array_bound_of_wider_dtype_saturates() -> None:
    """An int64 bound array outside int8's range clamps like the same Python int would."""
    x = bz.asarray(np.array([0, 5, -7], np.int8))
    lo = bz.asarray(np.array([300, -300, -300], np.int64))
    hi = bz.asarray(np.array([1000, 1000, -200], np.int64))
    assert bz.clip(x, lo).tolist() == [127, 5, -7]
    assert bz.clip(x, lo, hi).tolist() == [127, 5, -128]


def test_clip_keeps_bool_dtype_or_refuses_it() -> None:
    x = bz.asarray([True, False])
    try:
        out = bz.clip(x, 0, 1)
    except TypeError as e:
        assert "clip" in str(e)
        return
    assert out.dtype == bz.bool  # "the result keeps x's dtype"


def test_clip_errors() -> None:
    with pytest.raises(TypeError, match="clip"):
        bz.clip(bz.ones(2, dtype=bz.complex64), 0.0, 1.0)
    with pytest.raises(TypeError, match="clip"):
        bz.clip(bz.ones(2, dtype=bz.int32), 0.5)
    with pytest.raises(TypeError, match="clip"):
        bz.clip(bz.ones(2), bz.ones(2, dtype=bz.complex64))
    with pytest.raises(ValueError, match="^maximum: shapes"):  # bounds must broadcast
        bz.clip(bz.ones(3), bz.zeros((2, 2)))
    with pytest.raises(TypeError, match="clip"):
        bz.clip("a", 0, 1)
    # bounds broadcast x (numpy's rule, and what the conformance suite expects)
    got = bz.clip(bz.asarray([1.0, 5.0]), bz.asarray([[0.0], [2.0]]), 3.0)
    assert got.shape == (2, 2) and got.tolist() == [[1.0, 3.0], [2.0, 3.0]]


# ----------------------------------------------------------------------------- errors at call
@pytest.mark.parametrize("op", BINARY, ids=_case_id)
def test_broadcast_error_names_op_and_shapes(op: OpDef) -> None:
    d = plain_dtype(op)
    x, y = bz.ones((2, 3), dtype=d), bz.ones((4,), dtype=d)
    with pytest.raises(ValueError, match=op.name) as info:
        getattr(ew, op.name)(x, y)
    assert "(2, 3)" in str(info.value) and "(4,)" in str(info.value)


def test_operator_broadcast_error() -> None:
    pending = bz.ones((2, 3)) * 2
    with pytest.raises(ValueError, match=r"add.*\(2, 3\).*\(4,\)"):
        pending + bz.ones((4,))
    assert pending._node.data is None  # raised at the call, nothing computed


@pytest.mark.parametrize("op", UNARY, ids=_case_id)
def test_unary_non_array_raises_type_error(op: OpDef) -> None:
    fn = getattr(ew, op.name)
    for bad in ("a", object(), None):  # a Python scalar is converted, as numpy does
        with pytest.raises(TypeError, match=op.name):
            fn(bad)


@pytest.mark.parametrize("op", BINARY, ids=_case_id)
def test_binary_non_array_raises_type_error(op: OpDef) -> None:
    fn = getattr(ew, op.name)
    x = bz.ones(2, dtype=plain_dtype(op))
    for bad in ("a", object(), None):
        with pytest.raises(TypeError, match=op.name):
            fn(x, bad)
        with pytest.raises(TypeError, match=op.name):
            fn(bad, x)


@pytest.mark.parametrize("op", EW_OPS, ids=_case_id)
def test_wrong_number_of_arguments(op: OpDef) -> None:
    with pytest.raises(TypeError):
        getattr(ew, op.name)(*([bz.ones(2)] * (op.arity + 1)))


# ----------------------------------------------------------------------------- laziness
HUGE = (10_000, 10_000)


def test_huge_elementwise_is_lazy() -> None:
    t0 = time.perf_counter()
    x = bz.ones(HUGE) * 2
    y = bz.exp(x) + x
    elapsed = time.perf_counter() - t0
    assert x.shape == HUGE and x.dtype == bz.float32
    assert y.shape == HUGE and y.dtype == bz.float32
    assert x._node.data is None and y._node.data is None
    assert elapsed < 1.0  # recording 400 MB of work must not do it


@pytest.mark.parametrize("op", EW_OPS, ids=_case_id)
def test_every_op_records_without_computing(op: OpDef) -> None:
    d = plain_dtype(op)
    a = bz.ones(HUGE, dtype=d)
    args = [a] * op.arity
    out = getattr(ew, op.name)(*args)
    assert out.shape == HUGE
    assert out.dtype == expected_dtypes(op, d)[1]
    assert out._node.data is None and a._node.data is None
