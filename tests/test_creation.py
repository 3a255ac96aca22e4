"""Array creation, matmul and the Array object's Python protocol, compared with numpy.

Creation: asarray / array (dtype inference, zero-copy, ``copy=``), zeros / ones / full /
empty and their ``_like`` forms, arange, linspace, eye, tril / triu, meshgrid,
from_dlpack. Matmul: 1-d / 2-d / batched broadcast shapes, int / float / complex
dtypes, promotion, errors. Array object: read-only ``np.asarray`` results, ``len``,
``float`` / ``int`` / ``bool`` / ``complex``, ``item``, ``tolist``, ``repr``.

Tolerances: creation results are exact except float ranges: arange and linspace are
compared with numpy's float64 values rounded to the result dtype, within
rtol 2e-6 (float32) / 1e-12 (float64) of max(|start|, |stop|, |step|). Integer matmul is
exact (wrapping like numpy); float matmul is compared with a float64/complex128
reference within (RTOL + k*U) * (|a| @ |b|) + ATOL, k being the contraction length
(U the unit roundoff of the accumulation dtype; RTOL float32/complex64 1e-5, float64/
complex128 1e-12, float16 2e-3, bfloat16 1.6e-2).
"""

from __future__ import annotations

import math
import sys

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import ALL_DTYPES, ATOL, INT_DTYPES, REAL_FLOAT_DTYPES, RTOL, U, shapes, upcast
from .helpers import finite_complex_arrays as arrays


def assert_same(got: bz.Array, expected, dtype=None) -> None:
    g = np.asarray(got)
    expected = np.asarray(expected)
    want = expected.dtype if dtype is None else dt.to_dtype(dtype)
    assert got.dtype == want and g.dtype == want, f"dtype {g.dtype} != {want}"
    assert got.shape == expected.shape and g.shape == expected.shape, \
        f"shape {g.shape} != {expected.shape}"
    np.testing.assert_array_equal(upcast(g), upcast(expected.astype(want)))


# ---------------------------------------------------------------- asarray / array
def check_from_list(a: np.ndarray, want: np.dtype) -> None:
    """bz.asarray(a.tolist()) against numpy's reading of the same Python data. An empty
    list has no element to infer from: it gets the default float dtype."""
    data = a.tolist()  # nested lists of Python scalars (a Python scalar for 0-d)
    x = bz.asarray(data)
    expected = np.asarray(data)
    want = want if expected.size else dt.float32
    with np.errstate(over="ignore"):
        assert_same(x, expected.astype(want), want)


@given(a=hnp.arrays(np.float64, shapes(max_dims=3), elements=st.floats(allow_nan=False)))
def test_asarray_python_floats_become_float32(a) -> None:
    check_from_list(a, dt.float32)


@given(a=hnp.arrays(np.int64, shapes(max_dims=3)))
def test_asarray_python_ints_become_int64(a) -> None:
    check_from_list(a, dt.int64)


@given(a=hnp.arrays(np.bool_, shapes(max_dims=3)))
def test_asarray_python_bools_stay_bool(a) -> None:
    check_from_list(a, dt.bool_)


@given(a=hnp.arrays(np.complex128, shapes(max_dims=2),
                    elements=st.complex_numbers(max_magnitude=1e30)))
def test_asarray_python_complex_become_complex64(a) -> None:
    check_from_list(a, dt.complex64)


def test_asarray_scalars_and_mixed_lists() -> None:
    cases = [(1.5, dt.float32), (2, dt.int64), (True, dt.bool_), (1j, dt.complex64),
             ([1, 2.5], dt.float32), ([True, 2], dt.int64), ([True, 1.5], dt.float32),
             ([[1], [2]], dt.int64), ([], dt.float32), ([[], []], dt.float32),
             ([1, 2j], dt.complex64)]
    for obj, want in cases:
        x = bz.asarray(obj)
        assert x.dtype == want, (obj, x.dtype)
        expected = np.asarray(obj).astype(want)
        assert x.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(x), expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dt.name)
def test_asarray_list_with_dtype(dtype) -> None:
    vals = [[0, 1, 2], [3, 4, 5]]
    x = bz.asarray(vals, dtype=dtype)
    assert_same(x, np.asarray(vals).astype(dtype), dtype)
    assert_same(bz.array(vals, dtype=dtype), np.asarray(vals).astype(dtype), dtype)


def test_asarray_python_floats_with_float64_dtype_keep_full_precision() -> None:
    # Python floats are float64 values: asking for float64 must not round them through
    # float32 on the way.
    vals = [0.1, 1 / 3, 1e300, 1e-300]
    x = bz.asarray(vals, dtype=bz.float64)
    assert x.dtype == dt.float64
    assert x.tolist() == vals
    assert bz.asarray(0.1, dtype=bz.float64).item() == 0.1
    assert bz.asarray([0.1 + 0.2j], dtype=bz.complex128).tolist() == [0.1 + 0.2j]
    assert bz.asarray([2**60 + 1], dtype=bz.int64).item() == 2**60 + 1


@given(a=arrays(st.sampled_from(ALL_DTYPES)))
def test_asarray_numpy_keeps_dtype_and_shares_only_what_cannot_change(a) -> None:
    """A writeable source is copied by default (a later write to it must never change a
    lazily computed answer); copy=False and read-only sources are shared."""
    x = bz.asarray(a)
    assert_same(x, a)
    if a.size:
        assert not np.shares_memory(np.asarray(x), a)
        assert np.shares_memory(np.asarray(bz.asarray(a, copy=False)), a)
        ro = a.view()
        ro.flags.writeable = False
        assert np.shares_memory(np.asarray(bz.asarray(ro)), a)
    assert_same(bz.asarray(a, copy=False), a)
    assert_same(bz.asarray(a, dtype=a.dtype, copy=False), a)


def test_a_later_write_to_the_source_never_changes_an_answer() -> None:
    a = np.zeros(3, np.float32)
    y = bz.asarray(a) * 1
    a[0] = 42
    assert y.tolist() == [0.0, 0.0, 0.0]
    b = np.zeros(3, np.float32)
    z = bz.asarray(b, copy=False) * 1  # zero-copy asked for: the caller's promise
    b[0] = 42
    assert z.tolist() == [42.0, 0.0, 0.0]


def test_a_fresh_array_only_the_call_holds_is_taken_without_a_copy() -> None:
    """``bz.asarray(a.copy())``: nothing else holds the argument, so nothing can write it
    later; it is taken as it is. Any other holder (a variable, a list, a view's base,
    a read-only flag, a subclass) keeps the copy."""
    creation = sys.modules["braze.arrays.creation"]
    if creation._TEMPORARY_REFS is None:
        pytest.skip("this interpreter's reference counts do not tell a temporary apart")
    src = np.arange(6, dtype=np.float32)
    taken = bz.asarray(src.copy())
    assert taken._node.data.base is None and taken._node.data.flags.writeable
    held = src.copy()
    copied = bz.asarray(held)
    held[0] = 42
    listed = [src.copy()]
    from_list = bz.asarray(listed[0])
    listed[0][1] = 42
    view = bz.asarray(src.copy()[1:])  # a view: its base is the temporary's buffer
    src[2] = 42
    assert copied.tolist() == from_list.tolist() == taken.tolist() == [0, 1, 2, 3, 4, 5]
    assert view.tolist() == [1, 2, 3, 4, 5]
    assert not np.shares_memory(np.asarray(copied), held)
    taken[0] = 7.0  # its buffer is braze's now: stores go in place
    assert taken.tolist() == [7, 1, 2, 3, 4, 5]


@given(a=arrays(st.sampled_from(ALL_DTYPES), shape=shapes(min_side=1)))
def test_copies_do_not_share_memory(a) -> None:
    original = a.copy()
    copies = [bz.asarray(a, copy=True), bz.array(a), bz.array(a, dtype=a.dtype)]
    for c in copies:
        assert not np.shares_memory(np.asarray(c), a)
    default, shared = bz.asarray(a), bz.asarray(a, copy=False)
    a[...] = np.zeros((), a.dtype) if a.dtype != dt.bool_ else ~original
    for c in [*copies, default]:
        assert_same(c, original)  # unaffected by writes to the source
    if not np.array_equal(upcast(original), upcast(a), equal_nan=True):
        assert_same(shared, a)  # zero-copy asked for: sees them (like np.asarray)


def test_copy_of_a_braze_array_is_independent_of_its_numpy_source() -> None:
    a = np.arange(4.0)
    x = bz.asarray(a)
    for c in (bz.asarray(x, copy=True), bz.array(x)):
        assert not np.shares_memory(np.asarray(c), a)
    y = bz.asarray(x, copy=True)
    a[0] = 99.0
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("obj", [[1, 2], [[1.0]], 1.5, 3, True])
def test_asarray_copy_false_raises_when_a_copy_is_needed(obj) -> None:
    # The standard: copy=False must never copy, and raise ValueError when it would have to.
    with pytest.raises(ValueError):
        bz.asarray(obj, copy=False)


def test_asarray_copy_false_with_dtype_change_raises() -> None:
    a = np.arange(3, dtype=np.int32)
    with pytest.raises(ValueError, match=r"^asarray\b"):
        bz.asarray(a, dtype=bz.int64, copy=False)
    with pytest.raises(ValueError, match=r"^asarray\b"):
        bz.asarray(bz.asarray(a), dtype=bz.float32, copy=False)
    x = bz.asarray(a)
    assert bz.asarray(x) is x or np.shares_memory(np.asarray(bz.asarray(x)), a)
    assert_same(bz.asarray(x, dtype=bz.float64), a.astype(np.float64))


def test_asarray_errors() -> None:
    with pytest.raises(ValueError, match=r"^asarray\b"):
        bz.asarray([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"^asarray\b"):
        bz.asarray(["a", "b"])
    with pytest.raises(TypeError, match=r"^asarray\b"):
        bz.asarray(object())
    with pytest.raises(TypeError):
        bz.asarray([1, 2], dtype="float128")
    with pytest.raises(TypeError, match=r"^asarray\b"):
        bz.asarray(np.array(["x"]))


# ---------------------------------------------------------------- read-only numpy views
@given(a=arrays(st.sampled_from(ALL_DTYPES)))
def test_np_asarray_of_a_braze_array_is_read_only(a) -> None:
    x = bz.asarray(a)
    for out in (np.asarray(x), np.asarray(x * 1 if a.dtype != dt.bool_ else x & True)):
        assert out.flags.writeable is False
        with pytest.raises(ValueError):
            out[...] = 0
    assert_same(x, a)
    assert a.flags.writeable  # the caller's own array stays writable
    c = np.array(x)  # an explicit copy is the caller's to mutate
    c[...] = 0


# ---------------------------------------------------------------- fills
fill_dtypes = st.sampled_from(ALL_DTYPES)


@given(shape=shapes(), dtype=fill_dtypes)
def test_zeros_ones_empty(shape, dtype) -> None:
    assert_same(bz.zeros(shape, dtype=dtype), np.zeros(shape, dtype))
    assert_same(bz.ones(shape, dtype=dtype), np.ones(shape, dtype))
    e = bz.empty(shape, dtype=dtype)
    assert e.shape == shape and e.dtype == dtype and np.asarray(e).shape == shape
    assert bz.zeros(shape).dtype == dt.float32 and bz.ones(shape).dtype == dt.float32
    assert bz.empty(shape).dtype == dt.float32


@pytest.mark.parametrize("n", [0, 1, 4])
def test_fills_accept_an_int_shape(n) -> None:
    assert_same(bz.zeros(n), np.zeros(n, np.float32))
    assert_same(bz.ones(n, dtype=bz.int8), np.ones(n, np.int8))
    assert_same(bz.full(n, 2), np.full(n, 2, np.int64))
    assert bz.empty(n).shape == (n,)


def fill_value_for(dtype) -> st.SearchStrategy:
    if dtype == dt.bool_:
        return st.booleans()
    if dt.is_integer(dtype):
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    if dt.is_complex(dtype):
        return st.complex_numbers(max_magnitude=1e30)
    return st.floats(-6e4, 6e4) | st.integers(-1000, 1000)


@given(data=st.data(), shape=shapes(), dtype=fill_dtypes)
def test_full_matches_numpy(data, shape, dtype) -> None:
    v = data.draw(fill_value_for(dtype))
    assert_same(bz.full(shape, v, dtype=dtype), np.full(shape, v, dtype=dtype))


@pytest.mark.parametrize(("value", "want"), [(1, dt.int64), (1.5, dt.float32), (True, dt.bool_),
                                             (1 + 2j, dt.complex64), (-(2**63), dt.int64)])
def test_full_infers_default_dtypes(value, want) -> None:
    x = bz.full((2, 3), value)
    assert_same(x, np.full((2, 3), value, want), want)


@given(a=arrays(st.sampled_from(ALL_DTYPES), views=True), dtype=st.none() | fill_dtypes)
def test_like_functions(a, dtype) -> None:
    x = bz.asarray(a)
    want = a.dtype if dtype is None else dtype
    assert_same(bz.zeros_like(x, dtype=dtype), np.zeros(a.shape, want))
    assert_same(bz.ones_like(x, dtype=dtype), np.ones(a.shape, want))
    assert_same(bz.full_like(x, 1, dtype=dtype), np.full(a.shape, 1, want))
    e = bz.empty_like(x, dtype=dtype)
    assert e.shape == a.shape and e.dtype == want
    assert_same(bz.zeros_like(a), np.zeros_like(a))  # numpy input works too


def test_full_like_casts_fill_to_the_dtype_of_x() -> None:
    assert_same(bz.full_like(bz.zeros(3, dtype=bz.int16), 7), np.full(3, 7, np.int16))
    assert_same(bz.full_like(bz.zeros(2), 2), np.full(2, 2.0, np.float32))
    assert_same(bz.full_like(bz.zeros(2, dtype=bz.bool_), 1), np.ones(2, bool))


@pytest.mark.parametrize("f", [bz.zeros, bz.ones, bz.empty])
def test_fills_reject_bad_shapes(f) -> None:
    with pytest.raises(ValueError, match=rf"^(zeros|ones|full|{f.__name__})\b"):
        f((2, -1))
    with pytest.raises(ValueError):
        f(-3)
    with pytest.raises(TypeError):
        f((2.5,))
    with pytest.raises(TypeError):
        f("3")


def test_full_rejects_bad_fill_values() -> None:
    with pytest.raises(TypeError, match=r"^full\b"):
        bz.full((2,), "a")
    with pytest.raises(TypeError, match=r"^full\b"):
        bz.full((2,), None)
    with pytest.raises(TypeError, match=r"^full\b"):
        bz.full((2,), [1, 2])
    with pytest.raises(TypeError, match=r"^full\b"):
        bz.full((2,), 1j, dtype=bz.float32)
    with pytest.raises(OverflowError, match=r"^full\b"):
        bz.full((2,), 300, dtype=bz.int8)
    with pytest.raises(OverflowError, match=r"^full\b"):
        bz.full((2,), -1, dtype=bz.uint32)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match=r"^full\b"):
            bz.full((2,), bad, dtype=bz.int32)
    with pytest.raises(OverflowError):
        bz.full((2,), 2**64)
    with pytest.raises(ValueError, match=r"^full\b"):
        bz.full((2, -2), 1.0)
    with pytest.raises(ValueError, match=r"^full\b"):
        bz.full((2,), bz.zeros(2))
    assert_same(bz.full((2,), bz.asarray(3, dtype=bz.int8)), np.full(2, 3, np.int8))


# ---------------------------------------------------------------- arange / linspace
@given(start=st.integers(-50, 50), stop=st.none() | st.integers(-50, 50),
       step=st.integers(-7, 7).filter(bool))
def test_arange_ints_match_numpy(start, stop, step) -> None:
    if stop is None:
        assert_same(bz.arange(start), np.arange(start, dtype=np.int64), dt.int64)
        return
    assert_same(bz.arange(start, stop, step), np.arange(start, stop, step, dtype=np.int64),
                dt.int64)
    assert_same(bz.arange(start, stop), np.arange(start, stop, dtype=np.int64), dt.int64)


finite = st.floats(-100, 100, allow_nan=False)


@given(start=finite, stop=finite, step=st.floats(0.05, 10) | st.floats(-10, -0.05),
       dtype=st.sampled_from([None, dt.float32, dt.float64]))
def test_arange_floats_match_numpy(start, stop, step, dtype) -> None:
    got = bz.arange(start, stop, step, dtype=dtype)
    want = dt.float32 if dtype is None else dtype
    expected = np.arange(start, stop, step, dtype=np.float64)
    assert got.dtype == want and got.shape == expected.shape
    rtol = 2e-6 if want == dt.float32 else 1e-12
    scale = max(abs(start), abs(stop), abs(step))
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), expected, rtol=rtol,
                               atol=rtol * scale)


def test_arange_special_cases() -> None:
    assert_same(bz.arange(5, 0), np.zeros(0, np.int64))
    assert_same(bz.arange(0, 5, -1), np.zeros(0, np.int64))
    assert_same(bz.arange(5, 0, -2), np.array([5, 3, 1]))
    assert_same(bz.arange(10, dtype=bz.int8), np.arange(10, dtype=np.int8))
    assert_same(bz.arange(0, 10, 3, dtype=bz.float64), np.arange(0, 10, 3, dtype=np.float64))
    assert_same(bz.arange(3.0), np.arange(3, dtype=np.float32))
    assert_same(bz.arange(0, 1, 0.25), np.arange(0, 1, 0.25).astype(np.float32))
    assert_same(bz.arange(1.0, 0.0, -0.5), np.array([1.0, 0.5], np.float32))
    assert bz.arange(0.0, 1.0, 0.1).shape == np.arange(0.0, 1.0, 0.1).shape
    assert bz.arange(2.0, 2.0).shape == (0,)
    for args in [(0, 5, 0), (0.0, 1.0, 0.0), (5, 1, 0)]:
        with pytest.raises(ValueError, match=r"^arange\b"):
            bz.arange(*args)
    with pytest.raises(ValueError, match=r"^arange\b"):
        bz.arange(0.0, math.inf)
    with pytest.raises(TypeError, match=r"^arange\b"):
        bz.arange(0, 3, dtype=bz.bool_)


@given(start=st.floats(-1e3, 1e3), stop=st.floats(-1e3, 1e3), num=st.integers(0, 50),
       endpoint=st.booleans(), dtype=st.sampled_from([None, dt.float32, dt.float64]))
def test_linspace_matches_numpy(start, stop, num, endpoint, dtype) -> None:
    got = bz.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    want = dt.float32 if dtype is None else dtype
    expected = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)
    assert got.dtype == want and got.shape == (num,)
    rtol = 2e-6 if want == dt.float32 else 1e-12
    tiny = 1e-37 if want == dt.float32 else 0.0  # below float32's range values flush to 0
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), expected, rtol=rtol,
                               atol=rtol * max(abs(start), abs(stop)) + tiny)
    if num >= 1:
        assert np.asarray(got)[0] == np.asarray(start, want)
    if num >= 2 and endpoint:
        assert np.asarray(got)[-1] == np.asarray(stop, want)


def test_linspace_special_cases_and_errors() -> None:
    assert bz.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert bz.linspace(0, 1, 4, endpoint=False).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert bz.linspace(2, 3, 1).tolist() == [2.0]
    assert bz.linspace(2, 3, 0).shape == (0,)
    assert bz.linspace(0, 1, 3, dtype=bz.float16).dtype == dt.float16
    with pytest.raises(ValueError, match=r"^linspace\b"):
        bz.linspace(0, 1, -1)
    with pytest.raises(ValueError, match=r"^linspace\b"):
        bz.linspace(0, math.nan, 3)
    with pytest.raises(TypeError, match=r"^linspace\b"):
        bz.linspace(0, 1, 3, dtype=bz.int32)
    with pytest.raises(TypeError, match=r"^linspace\b"):
        bz.linspace(0, 1, math.nan)


# ---------------------------------------------------------------- eye / tril / triu / meshgrid
@given(n=st.integers(0, 6), m=st.none() | st.integers(0, 6), k=st.integers(-7, 7),
       dtype=st.none() | st.sampled_from(ALL_DTYPES))
def test_eye_matches_numpy(n, m, k, dtype) -> None:
    want = dt.float32 if dtype is None else dtype
    assert_same(bz.eye(n, m, k=k, dtype=dtype), np.eye(n, m, k=k, dtype=want), want)


def test_diagonals_past_the_corners_select_nothing() -> None:
    """k is any Python int (the conformance suite draws 2**63): clamped, never overflowing
    the int64 index arithmetic."""
    for k in (2**63, -2**70, 5, -4):
        assert_same(bz.eye(3, 4, k=k), np.eye(3, 4, k=max(-4, min(k, 5))), dt.float32)
        x = np.ones((2, 3), np.float32)
        assert_same(bz.tril(bz.asarray(x), k=k), np.tril(x, k=max(-3, min(k, 4))), dt.float32)
        assert_same(bz.triu(bz.asarray(x), k=k), np.triu(x, k=max(-3, min(k, 4))), dt.float32)


def test_eye_errors() -> None:
    with pytest.raises(ValueError, match=r"^eye\b"):
        bz.eye(-1)
    with pytest.raises(ValueError, match=r"^eye\b"):
        bz.eye(2, -3)


@given(a=arrays(st.sampled_from(ALL_DTYPES), shape=shapes(min_dims=2)), k=st.integers(-6, 6))
def test_tril_triu_match_numpy_on_batched_inputs(a, k) -> None:
    x = bz.asarray(a)
    assert_same(bz.tril(x, k=k), np.tril(a, k=k))
    assert_same(bz.triu(x, k=k), np.triu(a, k=k))
    if k == 0:
        assert_same(bz.tril(x), np.tril(a))
        assert_same(bz.triu(x), np.triu(a))


def test_tril_triu_need_two_dims() -> None:
    for f in (bz.tril, bz.triu):
        with pytest.raises(ValueError, match=rf"^{f.__name__}\b"):
            f(bz.zeros(3))
        with pytest.raises(ValueError, match=rf"^{f.__name__}\b"):
            f(bz.asarray(1.0))


@given(data=st.data(), n=st.integers(0, 3), indexing=st.sampled_from(["xy", "ij"]),
       dtype=st.sampled_from([dt.float32, dt.int64, dt.int8, dt.bool_]))
def test_meshgrid_matches_numpy(data, n, indexing, dtype) -> None:
    arrs = [data.draw(arrays(dtype, shape=st.tuples(st.integers(0, 4)))) for _ in range(n)]
    got = bz.meshgrid(*[bz.asarray(a) for a in arrs], indexing=indexing)
    expected = np.meshgrid(*arrs, indexing=indexing)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_same(g, e)


def test_meshgrid_errors() -> None:
    with pytest.raises(ValueError, match=r"^meshgrid\b"):
        bz.meshgrid(bz.zeros(2), indexing="xx")
    with pytest.raises(ValueError, match=r"^meshgrid\b"):
        bz.meshgrid(bz.zeros((2, 2)))


# ---------------------------------------------------------------- from_dlpack
@given(a=arrays(st.sampled_from([d for d in ALL_DTYPES if d != dt.bfloat16]),
                shape=shapes(min_side=1)))
def test_from_dlpack(a) -> None:
    x = bz.from_dlpack(a)
    assert_same(x, a)
    assert np.shares_memory(np.asarray(x), a)  # zero-copy
    y = bz.from_dlpack(bz.asarray(a) * 1 if a.dtype != dt.bool_ else bz.asarray(a) & True)
    assert_same(y, a)  # braze arrays export DLPack too
    c = bz.from_dlpack(a, copy=True)
    assert_same(c, a)
    assert not np.shares_memory(np.asarray(c), a)


def test_dlpack_export_cannot_mutate_a_braze_array() -> None:
    # Like np.asarray, a DLPack consumer must not get a writable alias of braze's value
    # (values are immutable: setitem rebinds). Either read-only, or a copy.
    x = bz.arange(3) * 2
    d = np.from_dlpack(x)
    if d.flags.writeable:
        d[...] = 7
    assert x.tolist() == [0, 2, 4]
    assert (x + 0).tolist() == [0, 2, 4]


# ---------------------------------------------------------------- matmul
MATMUL_DTYPES = [*INT_DTYPES, *REAL_FLOAT_DTYPES, dt.complex64, dt.complex128]

matmul_shapes = hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=3,
                                                  min_side=0, max_side=4)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


@given(data=st.data(), dtype=st.sampled_from(MATMUL_DTYPES), use_operator=st.booleans())
def test_matmul_matches_numpy(data, dtype, use_operator) -> None:
    sh = data.draw(matmul_shapes)
    a_shape, b_shape = sh.input_shapes
    a = data.draw(arrays(dtype, shape=a_shape, finite=True))
    b = data.draw(arrays(dtype, shape=b_shape, finite=True))
    if dtype == dt.float16:  # keep products and sums inside float16's range
        a[...] = (a.astype(np.float32) / 64).astype(np.float16)
        b[...] = (b.astype(np.float32) / 64).astype(np.float16)
    x, y = bz.asarray(a), bz.asarray(b)
    got = x @ y if use_operator else bz.matmul(x, y)
    assert got.dtype == dtype
    assert got.shape == sh.result_shape
    if not dt.is_floating(dtype):
        assert_same(got, np.matmul(a, b))  # wraps like numpy
        return
    k = a.shape[-1]
    ref = np.matmul(wide(a), wide(b))
    mag = np.matmul(np.abs(wide(a)), np.abs(wide(b)))
    g = np.asarray(got)
    assert g.shape == ref.shape
    bound = (RTOL[dtype] + (k + 1) * U[dtype]) * mag + ATOL[dtype]
    err = np.abs(wide(g) - ref)
    assert (err <= bound).all(), f"got {g} want {ref}"


@pytest.mark.parametrize(("d1", "d2", "want"), [
    (dt.int8, dt.uint8, dt.int16), (dt.int32, dt.int64, dt.int64),
    (dt.float32, dt.float64, dt.float64), (dt.int8, dt.float32, dt.float32),
    (dt.float32, dt.complex64, dt.complex64), (dt.float64, dt.complex64, dt.complex128),
])
def test_matmul_promotes(d1, d2, want) -> None:
    a = (np.arange(6).reshape(2, 3) % 4).astype(d1)
    b = (np.arange(12).reshape(3, 4) % 5).astype(d2)
    got = bz.matmul(bz.asarray(a), bz.asarray(b))
    assert_same(got, np.matmul(a.astype(want), b.astype(want)), want)


@pytest.mark.parametrize(("s1", "s2"), [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)),
                                        ((5, 2, 3), (4, 2)), ((3,), (2, 4, 5))])
def test_matmul_contraction_mismatch_names_both_shapes(s1, s2) -> None:
    with pytest.raises(ValueError, match=r"^matmul\b") as e:
        bz.matmul(bz.zeros(s1), bz.zeros(s2))
    assert str(s1) in str(e.value) and str(s2) in str(e.value)
    with pytest.raises(ValueError, match=r"^matmul\b"):
        bz.zeros(s1) @ bz.zeros(s2)


def test_matmul_other_errors() -> None:
    with pytest.raises(ValueError, match=r"^matmul\b"):
        bz.matmul(bz.asarray(1.0), bz.zeros(3))
    with pytest.raises(ValueError, match=r"^matmul\b"):
        bz.matmul(bz.zeros((2, 3, 4)), bz.zeros((5, 4, 6)))  # batch dims do not broadcast
    with pytest.raises(TypeError, match=r"^matmul\b"):
        bz.matmul(bz.ones((2, 2), dtype=bz.bool_), bz.ones((2, 2), dtype=bz.bool_))
    with pytest.raises(TypeError):
        bz.matmul(bz.ones((2, 2), dtype=bz.uint64), bz.ones((2, 2), dtype=bz.int64))


def test_matmul_with_empty_contraction_is_zero() -> None:
    got = bz.matmul(bz.ones((2, 0)), bz.ones((0, 3)))
    assert_same(got, np.zeros((2, 3), np.float32))
    assert bz.matmul(bz.ones(0), bz.ones(0)).item() == 0.0


# ---------------------------------------------------------------- Python protocol
@given(a=arrays(st.sampled_from(ALL_DTYPES), shape=st.sampled_from([(), (1,), (1, 1)])))
def test_scalar_conversions(a) -> None:
    x = bz.asarray(a)
    v = a.reshape(()).item()
    if a.dtype == dt.bfloat16:
        v = float(np.float32(a.reshape(())))
    item = x.item()
    assert type(item) is type(v)
    assert item == v or (v != v and item != item)
    assert bool(x) is bool(v)
    if dt.is_complex(a.dtype):
        assert complex(x) == v or v != v
        with pytest.raises(TypeError):
            float(x)
        with pytest.raises(TypeError):
            int(x)
        return
    f = float(x)
    assert f == float(v) or (f != f and v != v)
    if math.isfinite(float(v)):
        assert int(x) == int(v)
    elif math.isnan(float(v)):
        with pytest.raises(ValueError):
            int(x)
    else:
        with pytest.raises(OverflowError):
            int(x)
    assert x.tolist() == (a.astype(np.float32) if a.dtype == dt.bfloat16 else a).tolist() or \
        v != v


@pytest.mark.parametrize("shape", [(2,), (2, 3), (0,)])
def test_scalar_conversions_of_larger_arrays_raise(shape) -> None:
    x = bz.ones(shape)
    if math.prod(shape) > 1:
        with pytest.raises(ValueError):
            bool(x)
    with pytest.raises(TypeError):
        float(x)
    with pytest.raises(TypeError):
        int(x)
    with pytest.raises(ValueError):
        x.item()


@given(a=arrays(st.sampled_from(ALL_DTYPES)))
def test_tolist_matches_numpy(a) -> None:
    got = bz.asarray(a).tolist()
    expected = (a.astype(np.float32) if a.dtype == dt.bfloat16 else a).tolist()
    np.testing.assert_equal(got, expected)  # nested lists; NaN equals NaN
    assert type(got) is type(expected)
    flat = got
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if not isinstance(flat, list):
        assert type(flat) is type(a.reshape(-1)[0].item() if a.dtype != dt.bfloat16 else 0.0)


def test_repr_and_str_are_numpys() -> None:
    for a in [np.array([1, 2]), np.array([[1.5, 2.0]], np.float32), np.array(True),
              np.zeros(2, dt.bfloat16), np.zeros((0, 2), np.uint8), np.arange(3.0)]:
        assert repr(bz.asarray(a)) == repr(a)
        assert str(bz.asarray(a)) == str(a)
    assert str(bz.arange(3)) == "[0 1 2]"  # print(x) shows what numpy shows
    lazy = bz.arange(3) * 2
    assert repr(lazy) == "array([0, 2, 4])"  # repr evaluates


def test_format_and_round() -> None:
    x = bz.asarray(2.0) / 3
    assert f"{x:.2f}" == "0.67" and f"{bz.asarray(7):>4d}" == "   7"
    assert f"{bz.arange(3)}" == "[0 1 2]"
    with pytest.raises(TypeError):
        f"{bz.arange(3):.2f}"  # as numpy: a format spec needs a single element
    assert round(bz.asarray(2.5)) == 2 and isinstance(round(bz.asarray(3.7)), int)
    r = round(bz.asarray([1.234, -5.678, 0.125], dtype=bz.float64), 2)
    np.testing.assert_array_equal(np.asarray(r), np.round(np.array([1.234, -5.678, 0.125]), 2))
    f = np.array([1.25, 2.5, -0.35, 1e6 + 0.5], np.float32)
    for d in (-2, 0, 1, 3):
        np.testing.assert_array_equal(np.asarray(bz.asarray(f).round(d)), np.round(f, d))
    i = np.array([15, 25, -35, 149])
    for d in (-1, 0, 2):
        np.testing.assert_array_equal(np.asarray(bz.asarray(i).round(d)), np.round(i, d))


@given(a=arrays(st.sampled_from(ALL_DTYPES), shape=shapes(max_dims=2, max_side=3)))
def test_repr_is_numpys_and_round_trips(a) -> None:
    r = repr(bz.asarray(a))
    assert r == repr(a) and str(bz.asarray(a)) == str(a)
    if a.dtype.kind in "iub" and a.size:  # numpy's repr evaluates back to the values
        names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
        values = eval(r, {"array": np.array, "True": True, "False": False,
                          **{n: getattr(np, n) for n in names}})
        assert np.array_equal(np.asarray(values, dtype=a.dtype), a)
