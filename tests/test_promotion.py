"""Result dtypes of elementwise ops: array/array promotion (the Array API 2024.12 table
within a kind, braze's documented rules across kinds), weakly typed Python scalars,
OverflowError for out-of-range Python ints, and TypeError for dtypes outside an op's
domain, raised at the call and naming the op.

The expected dtypes are written out here from the rules, not read from braze's table.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest

import braze as bz
from braze.arrays import elementwise as ew  # every generated function, internal ones too
from braze.graph import dtypes as dt
from braze.graph.ops import DOMAINS, OPS, OpDef

from .helpers import assert_matches, upcast
from .test_elementwise import BINARY, EW_OPS, UNARY, expected_dtypes

ALL = list(dt.ALL)
PAIRS = list(itertools.product(ALL, ALL))
REAL_FLOATS = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
_FLOAT_BITS = {dt.float16: 16, dt.bfloat16: 16, dt.float32: 32, dt.float64: 64}


def _bits(d: np.dtype) -> int:
    return d.itemsize * 8


def _signed(bits: int) -> np.dtype:
    return np.dtype(f"int{bits}")


def expected_promotion(a: np.dtype, b: np.dtype) -> np.dtype | None:
    """The promoted dtype of two arrays, or None where there is no promotion.

    Within a kind (and signed/unsigned, real/complex floating) this is the Array API
    table; across kinds bool/int with a floating dtype gives that floating dtype;
    bfloat16 meets float16 at float32; uint64 with a signed int has no promotion.
    """
    if a == b:
        return a
    if a == dt.bool_ or b == dt.bool_:
        return b if a == dt.bool_ else a
    ai, bi = dt.is_integer(a), dt.is_integer(b)
    if ai and bi:
        if a.kind == b.kind:
            return a if _bits(a) > _bits(b) else b
        s, u = (a, b) if a.kind == "i" else (b, a)
        if _bits(u) == 64:
            return None
        return _signed(max(_bits(s), 2 * _bits(u)))
    if ai or bi:  # an integer with a floating dtype: the floating one
        return b if ai else a
    if dt.is_complex(a) or dt.is_complex(b):
        parts = [_FLOAT_BITS.get(d, _bits(d) // 2) for d in (a, b)]
        return dt.complex128 if max(parts) == 64 else dt.complex64
    if {a, b} == {dt.float16, dt.bfloat16}:
        return dt.float32
    return a if _FLOAT_BITS[a] > _FLOAT_BITS[b] else b


def in_domain(op: OpDef, d: np.dtype) -> bool:
    return DOMAINS[op.domain][1](d)


def _named(name: str) -> str:
    return rf"\b{re.escape(name)}\b"


# ----------------------------------------------------------------------------- the table
# values straight from the Array API promotion tables: (a, b, promote(a, b))
SPOT_VALUES = [
    (dt.int8, dt.uint8, dt.int16),
    (dt.int16, dt.uint16, dt.int32),
    (dt.int32, dt.uint32, dt.int64),
    (dt.int8, dt.uint32, dt.int64),
    (dt.int64, dt.uint8, dt.int64),
    (dt.uint8, dt.uint16, dt.uint16),
    (dt.bool_, dt.bool_, dt.bool_),
    (dt.float32, dt.float64, dt.float64),
    (dt.float32, dt.complex64, dt.complex64),
    (dt.float32, dt.complex128, dt.complex128),
    (dt.float64, dt.complex64, dt.complex128),
    (dt.complex64, dt.complex128, dt.complex128),
]


def test_standard_table_spot_values() -> None:
    """Values straight from the Array API promotion tables."""
    for a, b, want in SPOT_VALUES:
        assert dt.promote(a, b) == want, (a, b)


def test_promote_matches_the_rules_for_every_pair() -> None:
    bad = []
    for a, b in PAIRS:
        want = expected_promotion(a, b)
        try:
            got = dt.promote(a, b)
        except TypeError:
            got = None
        if got != want:
            bad.append(f"{dt.name(a)}+{dt.name(b)}: {got} != {want}")
    assert not bad, bad


def test_promote_is_symmetric() -> None:
    for a, b in PAIRS:
        try:
            ab = dt.promote(a, b)
        except TypeError:
            with pytest.raises(TypeError):
                dt.promote(b, a)
            continue
        assert ab == dt.promote(b, a), (a, b)


def _standard_kind(d: np.dtype) -> str | None:
    """The standard's promotion lattices (None: outside them, e.g. bfloat16)."""
    if d == dt.bool_:
        return "bool"
    if dt.is_integer(d):
        return "integer"
    if d in (dt.float16, dt.float32, dt.float64, dt.complex64, dt.complex128):
        return "floating"
    return None


def test_promote_equals_numpy_within_a_kind() -> None:
    """Where the standard has a table (within bool, integers, floating incl. complex) braze
    and numpy agree with it; only uint64 with a signed int (numpy: float64) is refused."""
    bad = []
    for a, b in PAIRS:
        ka, kb = _standard_kind(a), _standard_kind(b)
        if ka is None or ka != kb:
            continue
        if ka == "integer" and {a, b} & {dt.uint64} and {a, b} & set(dt.SIGNED):
            continue
        got = (bz.ones(2, dtype=a) + bz.ones(2, dtype=b)).dtype
        if got != np.result_type(a, b):
            bad.append(f"{dt.name(a)}+{dt.name(b)}: {got} != {np.result_type(a, b)}")
    assert not bad, bad


def test_add_result_dtype_for_every_pair() -> None:
    bad = []
    for a, b in PAIRS:
        want = expected_promotion(a, b)
        x, y = bz.ones(2, dtype=a), bz.ones(2, dtype=b)
        if want is None:
            with pytest.raises(TypeError, match=_named("add")) as info:
                x + y
            assert dt.name(a) in str(info.value) and dt.name(b) in str(info.value)
            continue
        r = x + y
        if r.dtype != want or r.dtype != dt.promote(a, b):
            bad.append(f"{dt.name(a)}+{dt.name(b)}: {r.dtype} != {want}")
        elif np.asarray(r).dtype != want:  # the computed data has the declared dtype
            bad.append(f"{dt.name(a)}+{dt.name(b)}: computed {np.asarray(r).dtype}")
    assert not bad, bad


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.name)
def test_binary_result_dtype_for_every_pair(op: OpDef) -> None:
    """Every binary op: promote, then the op's domain, compute and result rules."""
    fn = getattr(ew, op.name)
    bad = []
    for a, b in PAIRS:
        common = expected_promotion(a, b)
        x, y = bz.ones((1, 2), dtype=a), bz.ones((2,), dtype=b)
        if common is None or not in_domain(op, common):
            with pytest.raises(TypeError, match=_named(op.name)):
                fn(x, y)
            continue
        r = fn(x, y)
        want = expected_dtypes(op, common)[1]
        if r.dtype != want or r.shape != (1, 2):
            bad.append(f"{dt.name(a)},{dt.name(b)}: {r.dtype}{r.shape} != {want}")
        elif np.asarray(r).dtype != want:
            bad.append(f"{dt.name(a)},{dt.name(b)}: computed {np.asarray(r).dtype} != {want}")
    assert not bad, bad


@pytest.mark.parametrize("op", UNARY, ids=lambda op: op.name)
def test_unary_result_dtype_for_every_dtype(op: OpDef) -> None:
    fn = getattr(ew, op.name)
    for d in ALL:
        x = bz.ones(3, dtype=d)
        if not in_domain(op, d):
            with pytest.raises(TypeError, match=_named(op.name)):
                fn(x)
            continue
        r = fn(x)
        want = expected_dtypes(op, d)[1]
        assert r.dtype == want, (dt.name(d), r.dtype, want)
        assert np.asarray(r).dtype == want


def test_mixed_signedness_uint64_refused_everywhere() -> None:
    u = bz.ones(2, dtype=bz.uint64)
    for s in dt.SIGNED:
        i = bz.ones(2, dtype=s)
        with pytest.raises(TypeError, match=_named("add")):
            u + i
        with pytest.raises(TypeError, match=_named("multiply")):
            i * u
        with pytest.raises(TypeError, match=_named("less")):
            bz.less(i, u)
        with pytest.raises(TypeError, match=_named("where")):
            bz.where(bz.ones(2, dtype=bz.bool), u, i)
    # but a Python int of either sign is fine when it fits
    assert (u + 1).dtype == bz.uint64
    assert (bz.ones(2, dtype=bz.int64) + (2**63 - 1)).dtype == bz.int64


# ----------------------------------------------------------------------------- Python scalars
WEAK_CASES = [
    (dt.int8, 1, dt.int8), (dt.int8, -128, dt.int8), (dt.uint8, 255, dt.uint8),
    (dt.int16, True, dt.int16), (dt.int32, 1.5, dt.float32), (dt.uint64, 2.0, dt.float32),
    (dt.int64, 1j, dt.complex64), (dt.uint64, 2**64 - 1, dt.uint64),
    (dt.int64, -2**63, dt.int64),
    (dt.float16, 1, dt.float16), (dt.float16, 1.5, dt.float16), (dt.float16, 1e10, dt.float16),
    (dt.bfloat16, 2.5, dt.bfloat16), (dt.bfloat16, 3, dt.bfloat16),
    (dt.float32, 1.5, dt.float32), (dt.float64, 1.5, dt.float64), (dt.float64, 7, dt.float64),
    (dt.float16, 1j, dt.complex64), (dt.bfloat16, 1j, dt.complex64),
    (dt.float32, 1j, dt.complex64), (dt.float64, 1j, dt.complex128),
    (dt.complex64, 1.5, dt.complex64), (dt.complex128, 1, dt.complex128),
    (dt.complex64, 2j, dt.complex64),
    (dt.bool_, True, dt.bool_), (dt.bool_, 1, dt.int64), (dt.bool_, 1.5, dt.float32),
    (dt.bool_, 1j, dt.complex64),
]


@pytest.mark.parametrize(("dtype", "scalar", "want"), WEAK_CASES,
                         ids=lambda v: dt.name(v) if isinstance(v, np.dtype) else repr(v))
def test_python_scalar_is_weak(dtype: np.dtype, scalar: Any, want: np.dtype) -> None:
    x = bz.ones(3, dtype=dtype)
    for r in (x + scalar, scalar + x, bz.add(x, scalar), bz.add(scalar, x),
              x * scalar, scalar * x, bz.multiply(scalar, x)):
        assert r.dtype == want
        assert np.asarray(r).dtype == want
    assert (x == scalar).dtype == bz.bool
    with np.errstate(all="ignore"):
        s = np.asarray(scalar).astype(want)
        want_sum = (upcast(np.ones(3, want)) + upcast(s)).astype(want)
    assert_matches(x + scalar, want_sum, want)
    assert_matches(scalar + x, want_sum, want)


def test_python_scalar_values_stay_in_the_array_dtype() -> None:
    i8 = bz.asarray(np.array([100, -100], np.int8))
    assert (i8 + 100).tolist() == [-56, 0]  # wraps in int8, not computed in int64
    assert (i8 * 2).dtype == bz.int8 and (i8 * 2).tolist() == [-56, 56]
    u8 = bz.asarray(np.array([200], np.uint8))
    assert (u8 * 2).tolist() == [144]
    h = bz.asarray(np.array([1.0], np.float16))
    # the scalar is rounded to float16 first; the sum computed in float32, rounded once
    assert np.asarray(h + 0.1).dtype == np.float16
    assert np.asarray(h + 0.1)[0] == np.float16(1.0) + np.float16(0.1)
    assert np.isinf(np.asarray(h * 1e10)[0])  # float16 overflow, not a float32 result
    f = bz.asarray(np.array([16777217], np.int64))
    assert (f + 0.0).dtype == bz.float32  # int with a Python float: float32


def test_all_python_scalars_use_default_dtypes() -> None:
    assert bz.add(1, 2).dtype == bz.int64 and bz.add(1, 2).item() == 3
    assert bz.add(1.5, 2).dtype == bz.float32
    assert bz.multiply(True, False).dtype == bz.bool
    assert bz.add(1j, 1).dtype == bz.complex64


OVERFLOW_OPS = ["add", "subtract", "multiply", "floor_divide", "remainder", "pow", "maximum",
                "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                "bitwise_right_shift", "equal", "not_equal", "less", "greater_equal"]


@pytest.mark.parametrize("dtype", dt.INTEGER, ids=dt.name)
def test_out_of_range_python_int_raises_overflow(dtype: np.dtype) -> None:
    info = np.iinfo(dtype)
    x = bz.ones(2, dtype=dtype)
    for name in OVERFLOW_OPS:
        fn = getattr(bz, name)
        for bad in (int(info.max) + 1, int(info.min) - 1, 2**100):
            with pytest.raises(OverflowError, match=_named(name)):
                fn(x, bad)
            with pytest.raises(OverflowError, match=_named(name)):
                fn(bad, x)
        for ok in (int(info.max), int(info.min)):  # the ends of the range are fine
            assert fn(x, ok).dtype == expected_dtypes(OPS[name], dtype)[1]
    with pytest.raises(OverflowError):
        x + (int(info.max) + 1)
    with pytest.raises(OverflowError):
        (int(info.min) - 1) - x
    with pytest.raises(OverflowError):
        _ = x < int(info.max) + 1


def test_out_of_range_python_int_with_bool_array_raises_overflow_naming_op() -> None:
    b = bz.asarray([True, False])
    with pytest.raises(OverflowError, match=_named("add")):
        b + 2**63  # a Python int next to bool is int64; 2**63 does not fit
    with pytest.raises(OverflowError, match=_named("multiply")):
        bz.multiply(-2**63 - 1, b)


def test_numpy_scalars_are_strong_like_0d_numpy_arrays() -> None:
    """A numpy scalar is a typed value (NEP 50), like a 0-d numpy array: np.float64(1)
    next to a float16 array gives float64, exactly as np.float32(1) gives float32."""
    h = bz.ones(2, dtype=bz.float16)
    i8 = bz.ones(2, dtype=bz.int8)
    for s in (np.float64(1.0), np.float32(1.0), np.int64(1), np.complex128(1), np.bool_(True),
              np.complex64(1)):
        for x in (h, i8):
            want = (x + np.asarray(s)).dtype
            assert (x + s).dtype == want, (type(s).__name__, x.dtype, (x + s).dtype, want)
            assert (s + x).dtype == want, (type(s).__name__, x.dtype, (s + x).dtype, want)
        if not isinstance(s, np.bool_):
            assert bz.exp(np.asarray(s)).dtype == bz.exp(s).dtype, type(s).__name__


# ----------------------------------------------------------------------------- domains
def test_every_out_of_domain_dtype_raises_naming_the_op() -> None:
    bad = []
    for op in EW_OPS:
        fn = getattr(ew, op.name)
        for d in ALL:
            if in_domain(op, d):
                continue
            x = bz.ones(2, dtype=d)
            try:
                fn(*([x] * op.arity))
            except TypeError as e:
                if not re.search(_named(op.name), str(e)):
                    bad.append(f"{op.name}({dt.name(d)}): message {e}")
            else:
                bad.append(f"{op.name}({dt.name(d)}): no TypeError")
    assert not bad, bad


FLOATING = [dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.complex64, dt.complex128]
COMPLEX = [dt.complex64, dt.complex128]
# (op, dtypes it must refuse): the standard's hard limits on data types
MUST_REFUSE = {
    "bitwise_and": FLOATING, "bitwise_or": FLOATING, "bitwise_xor": FLOATING,
    "bitwise_invert": FLOATING,
    "bitwise_left_shift": FLOATING + [dt.bool_], "bitwise_right_shift": FLOATING + [dt.bool_],
    "floor_divide": COMPLEX + [dt.bool_], "remainder": COMPLEX + [dt.bool_],
    "ceil": COMPLEX, "floor": COMPLEX, "trunc": COMPLEX,
    "maximum": COMPLEX, "minimum": COMPLEX,
    "less": COMPLEX, "less_equal": COMPLEX, "greater": COMPLEX, "greater_equal": COMPLEX,
    "atan2": COMPLEX, "hypot": COMPLEX, "copysign": COMPLEX, "nextafter": COMPLEX,
    "logaddexp": COMPLEX, "signbit": COMPLEX,
    "negative": [dt.bool_], "subtract": [dt.bool_],
}


@pytest.mark.parametrize("name", list(MUST_REFUSE))
def test_standard_refusals(name: str) -> None:
    fn = getattr(bz, name)
    for d in MUST_REFUSE[name]:
        x = bz.ones(2, dtype=d)
        with pytest.raises(TypeError, match=_named(name)):
            fn(*([x] * OPS[name].arity))


def test_refusals_through_operators_name_the_op() -> None:
    f = bz.ones(2)
    b = bz.asarray([True, False])
    c = bz.ones(2, dtype=bz.complex64)
    with pytest.raises(TypeError, match=_named("bitwise_and")):
        f & f
    with pytest.raises(TypeError, match=_named("bitwise_and")):
        bz.bitwise_and(f, f)
    with pytest.raises(TypeError, match=_named("bitwise_invert")):
        _ = ~f
    with pytest.raises(TypeError, match=_named("negative")):
        _ = -b
    with pytest.raises(TypeError, match=_named("subtract")):
        b - b
    with pytest.raises(TypeError, match=_named("subtract")):
        bz.subtract(b, True)
    with pytest.raises(TypeError, match=_named("floor_divide")):
        c // c
    with pytest.raises(TypeError, match=_named("floor_divide")):
        bz.floor_divide(c, 2)
    with pytest.raises(TypeError, match=_named("remainder")):
        c % 2
    with pytest.raises(TypeError, match=_named("less")):
        _ = c < c
    with pytest.raises(TypeError, match=_named("bitwise_left_shift")):
        f << 1
    with pytest.raises(TypeError, match=_named("bitwise_and")):
        bz.ones(2, dtype=bz.int8) & 1.5  # the float scalar makes it float32


def test_domain_error_is_raised_at_the_call() -> None:
    pending = bz.ones((3, 3)) * 2
    with pytest.raises(TypeError, match=_named("bitwise_xor")):
        pending ^ pending
    assert pending._node.data is None
