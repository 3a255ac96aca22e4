"""Reductions, scans and row functions compared with numpy.

Covered: sum, prod, max, min, any, all, argmax, argmin, mean, var, std, logsumexp,
softmax, cumulative_sum; axis None / int / negative int / tuple, keepdims both ways,
0-d, empty, size-1 dims and non-contiguous inputs, result dtypes, special values and
errors raised at the call.

Tolerances. Integer and bool results, max/min/argmax/argmin/any/all, and prod over
exactly representable values ({0, +-1/2, +-1, +-2}) are compared exactly. Other
floating results are compared with a float64 (complex128) numpy reference computed
from the same input values, with a bound that scales with what was reduced::

    |got - ref| <= (RTOL[dtype] + n * U[dtype]) * mag + ATOL[dtype]

``n`` is the number of reduced elements; ``U`` the unit roundoff of the dtype the
backend accumulates in (float32 for float16/bfloat16), so ``n * U`` is the classical
worst-case bound of a sum in any order; ``mag`` is the same reduction over ``|x|``
(sum |x| for sum, mean |x| for mean, ...). RTOL covers the final roundings:
float64/complex128 1e-12, float32/complex64 1e-5, float16 2e-3, bfloat16 1.6e-2.
var/std, logsumexp and softmax state their own bounds next to their tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import ALL_DTYPES, ATOL, INT_DTYPES, REAL_FLOAT_DTYPES, RTOL, U, shapes, upcast
from .helpers import finite_complex_arrays as arrays

REAL_DTYPES = [dt.bool_, *INT_DTYPES, *REAL_FLOAT_DTYPES]
FLOAT_DTYPES = [*REAL_FLOAT_DTYPES, dt.complex64, dt.complex128]


# sum / prod / cumulative_sum result dtypes (the standard's rule with int64 default)
SUM_DTYPE = {d: d for d in FLOAT_DTYPES}
SUM_DTYPE.update({d: dt.int64 for d in (dt.bool_, dt.int8, dt.int16, dt.int32, dt.int64)})
SUM_DTYPE.update({d: dt.uint64 for d in (dt.uint8, dt.uint16, dt.uint32, dt.uint64)})


# ---------------------------------------------------------------- helpers


@st.composite
def axes(draw, ndim: int, allow_tuple: bool = True):
    """None, an int (maybe negative) or a tuple of distinct axes (maybe negative, any order)."""
    kinds = ["none"] + (["int"] if ndim else []) + (["tuple"] if allow_tuple else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    picked = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if draw(st.booleans()) else a for a in picked)


@st.composite
def braze_inputs(draw, a: np.ndarray) -> bz.Array:
    """``a`` as a braze array: the constant itself, or the same values behind braze views
    (a double flip, a permutation and its inverse) so fused kernels read through views."""
    x = bz.asarray(a)
    kind = draw(st.sampled_from(["plain", "flips", "permute"]))
    if kind == "flips" and a.ndim:
        return bz.flip(bz.flip(x, axis=0), axis=0)
    if kind == "permute" and a.ndim >= 2:
        perm = draw(st.permutations(range(a.ndim)))
        inverse = tuple(int(i) for i in np.argsort(perm))
        return bz.permute_dims(bz.permute_dims(x, tuple(perm)), inverse)
    return x


def norm_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis))


def count(shape, axis) -> int:
    return math.prod(shape[a] for a in norm_axes(axis, len(shape)))


def wide(a: np.ndarray) -> np.ndarray:
    """The values of ``a`` in float64 (complex128 for complex, float64 for ints/bools)."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def shrink(a: np.ndarray, factor: float) -> np.ndarray:
    """Scale float16 values down in place (keeps the view's strides) so sums stay finite."""
    if a.dtype == dt.float16:
        a[...] = (a.astype(np.float32) / factor).astype(np.float16)
    return a


def assert_close(got: bz.Array, ref, mag, dtype, n: int, rtol: float | None = None) -> None:
    """|got - ref| <= (rtol + n*U) * mag + ATOL, with identical non-finite results allowed."""
    g = np.asarray(got)
    assert g.dtype == dtype, f"dtype {g.dtype} != {dtype}"
    ref, mag = np.asarray(ref), np.asarray(mag)
    assert g.shape == ref.shape, f"shape {g.shape} != {ref.shape}"
    g64 = wide(g)
    r = RTOL[dtype] if rtol is None else rtol
    bound = (r + n * U[dtype]) * mag + ATOL[dtype]
    with np.errstate(invalid="ignore"):
        err = np.abs(g64 - ref)
        ok = (err <= bound) | (g64 == ref) | (np.isnan(g64) & np.isnan(ref))
    bound = np.broadcast_to(bound, ok.shape)
    assert ok.all(), f"got {g64[~ok]} want {ref[~ok]} (bound {bound[~ok]})"


def assert_exact(got: bz.Array, expected, dtype) -> None:
    g = np.asarray(got)
    assert g.dtype == dtype, f"dtype {g.dtype} != {dtype}"
    expected = np.asarray(expected)
    assert g.shape == expected.shape, f"shape {g.shape} != {expected.shape}"
    np.testing.assert_array_equal(upcast(g), upcast(expected.astype(dtype)))


# ---------------------------------------------------------------- sum / prod
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), keepdims=st.booleans())
def test_sum_matches_numpy(data, dtype, keepdims) -> None:
    a = shrink(data.draw(arrays(dtype, finite=True)), 1024.0)
    axis = data.draw(axes(a.ndim))
    got = bz.sum(data.draw(braze_inputs(a)), axis=axis, keepdims=keepdims)
    out = SUM_DTYPE[dtype]
    assert got.dtype == out
    if dt.is_floating(out):
        w = wide(a)
        assert_close(got, np.sum(w, axis=axis, keepdims=keepdims),
                     np.sum(np.abs(w), axis=axis, keepdims=keepdims), out, count(a.shape, axis))
    else:
        assert_exact(got, np.sum(a, axis=axis, keepdims=keepdims, dtype=out), out)


_EXACT_REAL = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]
_EXACT_COMPLEX = [1, -1, 1j, -1j, 0.5, 2j, 0]


@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), keepdims=st.booleans())
def test_prod_matches_numpy(data, dtype, keepdims) -> None:
    a = data.draw(arrays(dtype, shape=shapes(max_dims=3, max_side=4)))
    if dt.is_floating(dtype):  # products of these values are exact in every float dtype
        vals = _EXACT_COMPLEX if dt.is_complex(dtype) else _EXACT_REAL
        idx = data.draw(st.lists(st.integers(0, len(vals) - 1), min_size=a.size,
                                 max_size=a.size))
        a[...] = np.asarray([vals[i] for i in idx], dtype=np.complex128 if
                            dt.is_complex(dtype) else np.float64).reshape(a.shape).astype(dtype)
    axis = data.draw(axes(a.ndim))
    got = bz.prod(data.draw(braze_inputs(a)), axis=axis, keepdims=keepdims)
    out = SUM_DTYPE[dtype]
    assert got.dtype == out
    if dt.is_floating(out):
        with np.errstate(all="ignore"):
            expected = np.prod(wide(a), axis=axis, keepdims=keepdims).astype(out)
        assert_exact(got, expected, out)
    else:
        assert_exact(got, np.prod(a, axis=axis, keepdims=keepdims, dtype=out), out)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dt.name)
def test_reduction_result_dtypes(dtype) -> None:
    x = bz.ones((2, 3), dtype=dtype)
    for axis in (None, 0, (0, 1)):
        assert bz.sum(x, axis=axis).dtype == SUM_DTYPE[dtype]
        assert bz.prod(x, axis=axis).dtype == SUM_DTYPE[dtype]
        assert bz.any(x, axis=axis).dtype == dt.bool_
        assert bz.all(x, axis=axis).dtype == dt.bool_
    assert bz.cumulative_sum(x, axis=1).dtype == SUM_DTYPE[dtype]
    # values are computed with those dtypes too (not just declared)
    assert np.asarray(bz.sum(x)).dtype == SUM_DTYPE[dtype]
    assert np.asarray(bz.sum(x)).item() == 6
    if dtype == dt.bool_ or dt.is_integer(dtype):
        want_float = dt.float32
    else:
        want_float = dtype
    for f in (bz.mean, bz.var, bz.std):
        want = dt.real_dtype(want_float) if f is not bz.mean else want_float
        assert f(x).dtype == want, f.__name__
        assert np.asarray(f(x, axis=0)).dtype == want, f.__name__
    if not dt.is_complex(dtype):
        assert bz.max(x).dtype == dtype and bz.min(x, axis=1).dtype == dtype
        assert bz.argmax(x).dtype == dt.int64 and bz.argmin(x, axis=0).dtype == dt.int64
        assert np.asarray(bz.argmax(x, axis=1)).dtype == dt.int64


@pytest.mark.parametrize(("src", "dtype"), [
    (dt.int8, dt.int8), (dt.int8, dt.int16), (dt.int32, dt.float32), (dt.float32, dt.float64),
    (dt.uint8, dt.uint8), (dt.float16, dt.float32), (dt.int64, dt.float64),
])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_sum_prod_dtype_argument(src, dtype, name) -> None:
    rng = np.random.default_rng(0)
    a = (rng.integers(-3, 4, size=(3, 50)) if dt.is_integer(src) and src.kind == "i"
         else rng.integers(0, 4, size=(3, 50))).astype(src)
    got = getattr(bz, name)(bz.asarray(a), axis=1, dtype=dtype)
    assert got.dtype == dtype
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a.astype(dtype), axis=1, dtype=dtype)
    if dt.is_floating(dtype):  # small integers: exact unless the product overflows float
        np.testing.assert_allclose(np.asarray(got).astype(np.float64), expected, rtol=1e-5)
    else:
        assert_exact(got, expected, dtype)  # wraps like numpy for narrow dtypes


def test_a_real_accumulation_dtype_for_complex_input_takes_the_real_parts() -> None:
    """sum/prod/trace(complex x, dtype=real): numpy's cast (the real parts), which the
    conformance suite's trace test relies on; astype itself refuses complex -> real."""
    a = np.array([[1 + 2j, 3 - 1j], [4 + 0.5j, 5 - 1j]], np.complex64)
    x = bz.asarray(a)
    assert bz.sum(x, dtype=bz.float32).tolist() == 13.0
    assert bz.prod(x, axis=1, dtype=bz.float64).tolist() == [3.0, 20.0]
    got = bz.linalg.trace(x, dtype=bz.uint8)
    assert got.dtype == bz.uint8 and got.tolist() == 6
    with pytest.raises(TypeError, match="^astype"):
        bz.astype(x, bz.float32)


# ---------------------------------------------------------------- max / min
@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), keepdims=st.booleans(),
       name=st.sampled_from(["max", "min"]))
def test_max_min_match_numpy(data, dtype, keepdims, name) -> None:
    a = data.draw(arrays(dtype))  # NaN and +-inf included: NaN propagates as in numpy
    axis = data.draw(axes(a.ndim))
    f = getattr(bz, name)
    x = data.draw(braze_inputs(a))
    if any(a.shape[i] == 0 for i in norm_axes(axis, a.ndim)):
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            f(x, axis=axis, keepdims=keepdims)
        return
    got = f(x, axis=axis, keepdims=keepdims)
    assert got.dtype == dtype
    assert_exact(got, getattr(np, name)(upcast(a), axis=axis, keepdims=keepdims), dtype)


@pytest.mark.parametrize("dtype", REAL_FLOAT_DTYPES, ids=dt.name)
def test_max_min_propagate_nan(dtype) -> None:
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -np.inf], [np.inf, 0.0, 2.0]]).astype(dtype)
    x = bz.asarray(a)
    for f in (bz.max, bz.min):
        assert math.isnan(f(x).item())
        np.testing.assert_array_equal(upcast(np.asarray(f(x, axis=1))),
                                      getattr(np, f.__name__)(upcast(a), axis=1))
        np.testing.assert_array_equal(upcast(np.asarray(f(x, axis=0))),
                                      getattr(np, f.__name__)(upcast(a), axis=0))
    assert bz.max(x, axis=0).tolist()[1] != bz.max(x, axis=0).tolist()[1]  # NaN
    assert bz.max(x, axis=1).tolist()[2] == math.inf
    assert bz.min(x, axis=1).tolist()[1] == -math.inf


# ---------------------------------------------------------------- any / all
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), keepdims=st.booleans(),
       name=st.sampled_from(["any", "all"]))
def test_any_all_match_numpy(data, dtype, keepdims, name) -> None:
    a = data.draw(arrays(dtype))
    if data.draw(st.booleans()) and a.size:  # make zeros common
        a[...] = (upcast(a) != 0) & data.draw(st.booleans())
    axis = data.draw(axes(a.ndim))
    got = getattr(bz, name)(data.draw(braze_inputs(a)), axis=axis, keepdims=keepdims)
    assert_exact(got, getattr(np, name)(upcast(a), axis=axis, keepdims=keepdims), dt.bool_)


# ---------------------------------------------------------------- argmax / argmin
@given(data=st.data(), dtype=st.sampled_from(REAL_DTYPES), keepdims=st.booleans(),
       name=st.sampled_from(["argmax", "argmin"]))
def test_argmax_argmin_match_numpy(data, dtype, keepdims, name) -> None:
    a = data.draw(arrays(dtype, finite=True))
    if data.draw(st.booleans()) and a.size:  # many ties: the first occurrence wins
        a[...] = np.round(upcast(a).astype(np.float64) / 1e4).astype(dtype)
    axis = data.draw(axes(a.ndim, allow_tuple=False))
    f = getattr(bz, name)
    x = data.draw(braze_inputs(a))
    if (a.size == 0 if axis is None else a.shape[axis] == 0):
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            f(x, axis=axis, keepdims=keepdims)
        return
    got = f(x, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(upcast(a), axis=axis, keepdims=keepdims)
    assert_exact(got, expected, dt.int64)


def test_argmax_argmin_first_occurrence_and_flat_index() -> None:
    x = bz.asarray([1, 3, 3, 0, 0])
    assert bz.argmax(x).item() == 1
    assert bz.argmin(x).item() == 3
    m = bz.asarray([[1.0, 5.0, 5.0], [5.0, 0.0, 0.0]])
    assert bz.argmax(m).item() == 1  # flat index, first of the three 5s
    assert bz.argmin(m).item() == 4
    assert bz.argmax(m, axis=0).tolist() == [1, 0, 0]
    assert bz.argmin(m, axis=-1).tolist() == [0, 1]
    k = bz.argmax(m, keepdims=True)
    assert k.shape == (1, 1) and k.tolist() == [[1]]
    assert bz.argmax(m, axis=1, keepdims=True).shape == (2, 1)
    assert bz.argmax(bz.asarray(7.0)).item() == 0
    assert isinstance(bz.argmax(x).item(), int)


# ---------------------------------------------------------------- mean / var / std
MEAN_DTYPES = [dt.bool_, *INT_DTYPES, *FLOAT_DTYPES]


def float_result(dtype):
    return dtype if dt.is_floating(dtype) else dt.float32


@given(data=st.data(), dtype=st.sampled_from(MEAN_DTYPES), keepdims=st.booleans())
def test_mean_matches_numpy(data, dtype, keepdims) -> None:
    a = shrink(data.draw(arrays(dtype, finite=True)), 1024.0)
    axis = data.draw(axes(a.ndim))
    got = bz.mean(data.draw(braze_inputs(a)), axis=axis, keepdims=keepdims)
    out = float_result(dtype)
    w = wide(a)
    n = count(a.shape, axis)
    with np.errstate(all="ignore"):
        ref = np.sum(w, axis=axis, keepdims=keepdims) / n
        mag = np.sum(np.abs(w), axis=axis, keepdims=keepdims) / n
    if n == 0:
        assert np.isnan(np.asarray(got)).all()
    # integer inputs are rounded to float32 first: one more U per element, inside n*U
    assert_close(got, ref, mag, out, n + 2)


VAR_RTOL = {dt.float64: 1e-12, dt.complex128: 1e-12, dt.float32: 1e-5, dt.complex64: 1e-5,
            dt.float16: 1e-2, dt.bfloat16: 6e-2}
VAR_DTYPES = [dt.bool_, dt.int8, dt.int16, dt.int32, dt.uint8, dt.uint16, dt.uint32,
              *FLOAT_DTYPES]


@given(data=st.data(), dtype=st.sampled_from(VAR_DTYPES), keepdims=st.booleans(),
       name=st.sampled_from(["var", "std"]))
def test_var_std_match_numpy(data, dtype, keepdims, name) -> None:
    """Bound for var: (VAR_RTOL + n*U) * sum((|x| + |mean|)**2) / (N - c), i.e. a few
    roundings of each squared deviation (float16 8 ulps: 1e-2, bfloat16 6e-2); std:
    the square root of the var bound (|sqrt a - sqrt b| <= sqrt|a - b|) plus RTOL*|std|.
    N - correction <= 0 gives NaN (the standard's special case)."""
    a = shrink(data.draw(arrays(dtype, finite=True)), 8192.0)
    axis = data.draw(axes(a.ndim))
    n = count(a.shape, axis)
    correction = data.draw(st.sampled_from([0, 1, 0.5, 2, 1.5, 0.0, n, n + 0.5]))
    f = getattr(bz, name)
    got = f(data.draw(braze_inputs(a)), axis=axis, correction=correction, keepdims=keepdims)
    out = dt.real_dtype(float_result(dtype))
    assert got.dtype == out
    g = np.asarray(got)
    if n - correction <= 0:
        assert g.shape == np.sum(np.zeros(a.shape), axis=axis, keepdims=keepdims).shape
        assert np.isnan(g).all(), f"{name} with N - correction <= 0 must be NaN, got {g}"
        return
    w = wide(a)
    m = np.mean(w, axis=axis, keepdims=True)
    ref = np.var(w, axis=axis, ddof=correction, keepdims=keepdims)
    mag = np.sum((np.abs(w) + np.abs(m)) ** 2, axis=axis, keepdims=keepdims) / (n - correction)
    bound = (VAR_RTOL[out] + n * U[out]) * mag + ATOL[out]
    if name == "std":
        ref = np.sqrt(ref)
        bound = np.sqrt(bound) + RTOL[out] * ref
    assert g.shape == ref.shape
    err = np.abs(g.astype(np.float64) - ref)
    assert (err <= bound).all(), f"got {g} want {ref} (bound {bound})"


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_correction(name) -> None:
    x = bz.asarray([1.0, 2.0, 3.0, 4.0])
    f = getattr(bz, name)
    for c in (0, 1, 1.5, 3):
        want = np.var([1.0, 2.0, 3.0, 4.0], ddof=c)
        want = math.sqrt(want) if name == "std" else want
        assert f(x, correction=c).item() == pytest.approx(want, rel=1e-6)
    # N - correction <= 0: NaN per the standard (not inf, not an error)
    assert math.isnan(f(x, correction=4).item())
    assert math.isnan(f(x, correction=5).item())
    assert math.isnan(f(bz.asarray([[1.0, 2.0]]), axis=0, correction=1).tolist()[1])
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        f(x, correction=-1)


def test_mean_var_empty_and_nan() -> None:
    e = bz.zeros((0,))
    assert math.isnan(bz.mean(e).item()) and bz.mean(e).dtype == dt.float32
    assert np.isnan(np.asarray(bz.mean(bz.zeros((2, 0)), axis=1))).all()
    assert bz.mean(bz.zeros((0, 3)), axis=1).shape == (0,)
    assert math.isnan(bz.var(e).item()) and math.isnan(bz.std(e).item())
    x = bz.asarray([1.0, float("nan"), 2.0])
    for f in (bz.sum, bz.mean, bz.var, bz.std, bz.prod):
        assert math.isnan(f(x).item()), f.__name__
    assert bz.mean(bz.asarray([1, 2], dtype=bz.int8)).item() == 1.5


# ---------------------------------------------------------------- empty reductions
@pytest.mark.parametrize("dtype", [dt.float32, dt.int32, dt.uint8, dt.bool_, dt.complex64],
                         ids=dt.name)
def test_empty_reductions(dtype) -> None:
    e = bz.zeros((2, 0), dtype=dtype)
    assert bz.sum(e).item() == 0 and bz.sum(e).dtype == SUM_DTYPE[dtype]
    assert bz.prod(e).item() == 1
    assert bz.sum(e, axis=1).tolist() == [0, 0]
    assert bz.prod(e, axis=1, keepdims=True).tolist() == [[1], [1]]
    assert bz.sum(e, axis=0).shape == (0,)
    assert bz.any(e).item() is False and bz.all(e).item() is True
    assert bz.any(e, axis=1).tolist() == [False, False]
    assert bz.all(e, axis=1).tolist() == [True, True]
    assert bz.cumulative_sum(e, axis=1).shape == (2, 0)
    assert bz.cumulative_sum(e, axis=1, include_initial=True).tolist() == [[0], [0]]


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_empty_axis_raises_at_the_call(name) -> None:
    f = getattr(bz, name)
    e = bz.zeros((2, 0))
    for kw in ({}, {"axis": 1}, {"axis": -1}, {"axis": 1, "keepdims": True}):
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            f(e, **kw)  # at the call: no np.asarray needed
    assert f(e, axis=0).shape == (0,)  # reducing a non-empty axis of an empty array is fine


# ---------------------------------------------------------------- logsumexp
LSE_DTYPES = [*REAL_FLOAT_DTYPES, dt.int16, dt.int32, dt.bool_]


def lse_ref(w: np.ndarray, axis, keepdims: bool):
    ax = norm_axes(axis, w.ndim)
    if count(w.shape, axis) == 0:
        return np.full(np.sum(w, axis=axis, keepdims=keepdims).shape, -np.inf), 0.0
    m = np.max(w, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(w - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out, m = np.squeeze(out, axis=ax), np.squeeze(m, axis=ax)
    return out, m


@given(data=st.data(), dtype=st.sampled_from(LSE_DTYPES), keepdims=st.booleans())
def test_logsumexp_matches_float64_reference(data, dtype, keepdims) -> None:
    """Bound: (RTOL + n*U) * (|ref| + |max| + 1): the max is subtracted exactly enough,
    log(sum) is accurate to a few ulps, and the result is rounded once."""
    a = data.draw(arrays(dtype, finite=True))
    axis = data.draw(axes(a.ndim))
    got = bz.logsumexp(data.draw(braze_inputs(a)), axis=axis, keepdims=keepdims)
    out = float_result(dtype)
    ref, m = lse_ref(wide(a), axis, keepdims)
    n = count(a.shape, axis)
    assert_close(got, ref, np.abs(ref) + np.abs(m) + 1, out, n + 4,
                 rtol=4 * RTOL[out])


@pytest.mark.parametrize("dtype", [dt.float32, dt.float64, dt.float16, dt.bfloat16], ids=dt.name)
def test_logsumexp_stability_and_special_values(dtype) -> None:
    big = 1000.0 if dtype != dt.float16 else 60000.0
    x = bz.asarray(np.array([big, big], dtype=dtype))
    assert bz.logsumexp(x).item() == pytest.approx(big + math.log(2), rel=RTOL[dtype])
    x = bz.asarray(np.array([-big, -big], dtype=dtype))
    assert bz.logsumexp(x).item() == pytest.approx(-big + math.log(2), rel=RTOL[dtype])
    inf = np.inf
    rows = np.array([[-inf, -inf], [0.0, -inf], [inf, 0.0], [inf, inf], [inf, -inf],
                     [np.nan, 0.0]], dtype=dtype)
    got = np.asarray(bz.logsumexp(bz.asarray(rows), axis=1)).astype(np.float64)
    assert got[0] == -inf  # all -inf: -inf, not NaN
    assert got[1] == 0.0
    assert got[2] == inf and got[3] == inf and got[4] == inf
    assert np.isnan(got[5])
    assert bz.logsumexp(bz.asarray(rows[:2]), axis=1, keepdims=True).shape == (2, 1)
    empty = bz.zeros((3, 0), dtype=dtype)
    assert np.asarray(bz.logsumexp(empty, axis=1)).astype(np.float64).tolist() == [-inf] * 3
    assert bz.logsumexp(empty).item() == -inf
    huge = bz.asarray(np.array([1e300, 1e300]))
    assert bz.logsumexp(huge).item() == pytest.approx(1e300, rel=1e-12)


# ---------------------------------------------------------------- softmax
SOFTMAX_ATOL = {dt.float64: 1e-12, dt.float32: 1e-5, dt.float16: 4e-3, dt.bfloat16: 3e-2}


@given(data=st.data(), dtype=st.sampled_from([*REAL_FLOAT_DTYPES, dt.int32, dt.int8]))
def test_softmax_matches_float64_reference(data, dtype) -> None:
    """|got - ref| <= SOFTMAX_ATOL + RTOL*ref (float32 1e-5, float64 1e-12, float16 4e-3,
    bfloat16 3e-2: x - max rounded in the input dtype, then exp/sum/divide roundings);
    every row sums to 1 within 4*SOFTMAX_ATOL."""
    a = data.draw(arrays(dtype, shape=shapes(min_dims=1), finite=True))
    axis = data.draw(st.one_of(st.just(-1), axes(a.ndim)))
    x = data.draw(braze_inputs(a))
    got = bz.softmax(x) if axis == -1 and data.draw(st.booleans()) else bz.softmax(x, axis=axis)
    out = float_result(dtype)
    g = np.asarray(got)
    assert g.dtype == out and g.shape == a.shape
    w = wide(a.astype(out))  # integers compute in float32: the values softmax sees
    if a.size == 0:
        return
    e = np.exp(w - np.max(w, axis=axis, keepdims=True))
    ref = e / np.sum(e, axis=axis, keepdims=True)
    g64 = g.astype(np.float64)
    assert np.isfinite(g64).all()
    atol = SOFTMAX_ATOL[out]
    np.testing.assert_allclose(g64, ref, rtol=RTOL[out], atol=atol)
    np.testing.assert_allclose(np.sum(g64, axis=axis), 1.0, rtol=0, atol=4 * atol)


def test_softmax_large_values_and_axes() -> None:
    x = bz.asarray([[1000.0, 1000.0], [1e4, 0.0], [-1e4, -1e4]])
    got = np.asarray(bz.softmax(x))
    np.testing.assert_allclose(got, [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]], atol=1e-7)
    y = bz.asarray([[0.0, 1.0], [2.0, 3.0]])
    col = np.asarray(bz.softmax(y, axis=0))
    np.testing.assert_allclose(col.sum(axis=0), [1.0, 1.0], rtol=1e-6)
    whole = np.asarray(bz.softmax(y, axis=None))
    assert whole.sum() == pytest.approx(1.0, rel=1e-6)
    assert bz.softmax(bz.asarray([1, 2, 3])).dtype == dt.float32
    assert bz.softmax(bz.zeros((2, 0))).shape == (2, 0)


# ---------------------------------------------------------------- cumulative_sum
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), include_initial=st.booleans())
def test_cumulative_sum_matches_numpy(data, dtype, include_initial) -> None:
    a = shrink(data.draw(arrays(dtype, shape=shapes(min_dims=1), finite=True)), 1024.0)
    if a.ndim == 1 and data.draw(st.booleans()):
        x = data.draw(braze_inputs(a))
        axis, got = 0, bz.cumulative_sum(x, include_initial=include_initial)
    else:
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
        got = bz.cumulative_sum(data.draw(braze_inputs(a)), axis=axis,
                                include_initial=include_initial)
    out = SUM_DTYPE[dtype]
    pad = [(0, 0)] * a.ndim
    pad[axis] = (1 if include_initial else 0, 0)
    if dt.is_floating(out):
        w = wide(a)
        ref = np.pad(np.cumsum(w, axis=axis), pad)
        mag = np.pad(np.cumsum(np.abs(w), axis=axis), pad)
        assert_close(got, ref, mag, out, a.shape[axis])
    else:
        assert_exact(got, np.pad(np.cumsum(a, axis=axis, dtype=out), pad), out)


@pytest.mark.parametrize(("src", "dtype"), [
    (dt.int8, dt.int8), (dt.int32, dt.float64), (dt.float32, dt.float64), (dt.uint8, dt.int16),
    (dt.bool_, dt.int32), (dt.float64, dt.float32),
])
def test_cumulative_sum_dtype_argument(src, dtype) -> None:
    a = (np.arange(40).reshape(2, 20) % 7 * 20).astype(src)
    for include_initial in (False, True):
        got = bz.cumulative_sum(bz.asarray(a), axis=1, dtype=dtype,
                                include_initial=include_initial)
        assert got.dtype == dtype
        expected = np.cumsum(a.astype(dtype), axis=1, dtype=dtype)
        if include_initial:
            expected = np.concatenate([np.zeros((2, 1), dtype), expected], axis=1)
        assert_exact(got, expected, dtype)


def test_cumulative_sum_errors_and_basics() -> None:
    assert bz.cumulative_sum(bz.asarray([1, 2, 3]), include_initial=True).tolist() == [0, 1, 3, 6]
    assert bz.cumulative_sum(bz.asarray([True, True, False])).tolist() == [1, 2, 2]
    with pytest.raises(ValueError, match=r"^cumulative_sum\b"):
        bz.cumulative_sum(bz.asarray(3))
    with pytest.raises(ValueError, match=r"^cumulative_sum\b"):
        bz.cumulative_sum(bz.ones((2, 2)))  # axis required for n-d input


# ---------------------------------------------------------------- bad axes
TUPLE_AXIS = ["sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "logsumexp",
              "softmax"]
INT_AXIS = [*TUPLE_AXIS, "argmax", "argmin", "cumulative_sum"]


@pytest.mark.parametrize("name", INT_AXIS)
@pytest.mark.parametrize("axis", [2, -3, 100])
def test_out_of_range_axis_raises_at_the_call(name, axis) -> None:
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        getattr(bz, name)(bz.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("name", TUPLE_AXIS)
@pytest.mark.parametrize("axis", [(0, 0), (1, -1), (0, 2)])
def test_repeated_or_bad_axis_tuple_raises_at_the_call(name, axis) -> None:
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        getattr(bz, name)(bz.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("name", INT_AXIS)
@pytest.mark.parametrize("axis", [1.0, "0"])
def test_non_integer_axis_raises_at_the_call(name, axis) -> None:
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        getattr(bz, name)(bz.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_reject_axis_tuples(name) -> None:
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        getattr(bz, name)(bz.ones((2, 3)), axis=(0, 1))


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_complex_rejected_by_ordering_reductions(name) -> None:
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        getattr(bz, name)(bz.ones((2,), dtype=bz.complex64))


# ---------------------------------------------------------------- methods
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "max", "min", "argmax",
                                  "argmin", "any", "all"])
def test_array_methods_match_functions(name) -> None:
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)[:, ::-1] % 5
    x = bz.asarray(a)
    for axis in (None, 1):
        via_method = getattr(x, name)(axis=axis, keepdims=True)
        via_function = getattr(bz, name)(x, axis=axis, keepdims=True)
        assert via_method.shape == via_function.shape
        np.testing.assert_array_equal(np.asarray(via_method), np.asarray(via_function))
        if name not in ("var", "std", "mean", "argmax", "argmin"):
            np.testing.assert_allclose(np.asarray(via_method),
                                       getattr(np, name)(a, axis=axis, keepdims=True), rtol=1e-6)
