"""Basic indexing compared with numpy: ints (negative too), slices with any step
(negative, out-of-range bounds), ``...`` and ``None``; IndexError cases; functional
``__setitem__`` (scalar and broadcast values, cast to the target dtype, earlier views
keep the old value); ``len`` and iteration.

Indexing moves data without arithmetic: every comparison is exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import ALL_DTYPES, INT_DTYPES, assert_same, shapes, upcast
from .helpers import finite_complex_arrays as arrays

SMALL_DTYPES = [dt.bool_, dt.int8, dt.uint16, dt.int64, dt.float16, dt.bfloat16, dt.float32,
                dt.float64, dt.complex64]





@st.composite
def axis_index(draw, size: int):
    """An int (if the axis is non-empty) or a slice with bounds possibly out of range."""
    if size and draw(st.booleans()):
        return draw(st.integers(-size, size - 1))
    edges = [-2 * size - 2, -size - 1, -size, -1, 0, 1, size - 1, size, size + 1]
    bound = st.none() | st.sampled_from(edges) | st.integers(-2 * size - 2, 2 * size + 2)
    step = st.none() | st.integers(-3, 3).filter(bool)
    return slice(draw(bound), draw(bound), draw(step))


@st.composite
def basic_indices(draw, shape):
    """A basic index for ``shape``: leading items, maybe ``...`` then trailing items,
    with ``None`` sprinkled anywhere; sometimes a bare (non-tuple) item."""
    n = len(shape)
    n_pre = draw(st.integers(0, n))
    use_ellipsis = draw(st.booleans())
    n_post = draw(st.integers(0, n - n_pre)) if use_ellipsis else 0
    items = [draw(axis_index(shape[i])) for i in range(n_pre)]
    if use_ellipsis:
        items.append(Ellipsis)
    items += [draw(axis_index(shape[n - n_post + i])) for i in range(n_post)]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@given(data=st.data(), dtype=st.sampled_from(SMALL_DTYPES))
def test_getitem_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    key = data.draw(basic_indices(a.shape))
    assert_same(bz.asarray(a)[key], a[key])


@given(data=st.data())
def test_getitem_of_getitem_matches_numpy(data) -> None:
    a = data.draw(arrays(dt.int32, shape=shapes(min_dims=1)))
    k1 = data.draw(basic_indices(a.shape))
    b = a[k1]
    k2 = data.draw(basic_indices(b.shape))
    assert_same(bz.asarray(a)[k1][k2], b[k2])


@pytest.mark.parametrize(("key", "expected"), [
    (np.s_[-10::-1], []), (np.s_[10:], []), (np.s_[:-10], []), (np.s_[::-1], [4, 3, 2, 1, 0]),
    (np.s_[-10:10], [0, 1, 2, 3, 4]), (np.s_[10:-10:-2], [4, 2, 0]), (np.s_[-1:-10:-1],
                                                                       [4, 3, 2, 1, 0]),
    (np.s_[3:1:-1], [3, 2]), (np.s_[-6::-2], []), (np.s_[1:1], []), (np.s_[::7], [0]),
])
def test_slices_with_out_of_range_bounds(key, expected) -> None:
    x = bz.arange(5)
    assert np.arange(5)[key].tolist() == expected  # the reference itself
    got = x[key]
    assert got.shape == (len(expected),)
    assert got.tolist() == expected


def test_index_with_numpy_ints_and_0d_arrays() -> None:
    a = np.arange(12).reshape(3, 4)
    x = bz.asarray(a)
    assert x[np.int64(-1), np.int32(2)].item() == a[-1, 2]
    assert x[bz.asarray(1)].tolist() == a[1].tolist()
    assert x[()].tolist() == a.tolist()
    assert x[...].shape == (3, 4)
    assert x[None, ..., None].shape == (1, 3, 4, 1)
    s = bz.asarray(5.0)
    assert s[()].item() == 5.0 and s[...].shape == () and s[None].shape == (1,)


@pytest.mark.parametrize("key", [3, -4, (0, 4), (0, -5), (slice(None), 9), (..., 4),
                                 (None, 3)])
def test_out_of_bounds_int_raises_index_error(key) -> None:
    _read_and_write_raise(key, IndexError)
    with pytest.raises(IndexError):
        bz.zeros((0,))[0]  # noqa: B018


def _read_and_write_raise(key, error: type) -> None:
    """Reading and assigning ``x[key]`` of a (3, 4) array both raise ``error``."""
    x = bz.zeros((3, 4))
    with pytest.raises(error):
        x[key]  # noqa: B018
    with pytest.raises(error):
        x[key] = 1.0


@pytest.mark.parametrize("key", [(0, 0, 0), (slice(None),) * 3, (0, ..., 0, 0), (None, 0, 0, 0)])
def test_too_many_indices_raise_index_error(key) -> None:
    _read_and_write_raise(key, IndexError)
    with pytest.raises(IndexError):
        bz.asarray(1.0)[0]  # noqa: B018


@pytest.mark.parametrize("key", [(..., ...), (0, ..., None, ...)])
def test_two_ellipses_raise_index_error(key) -> None:
    _read_and_write_raise(key, IndexError)


@pytest.mark.parametrize("key", [1.0, "a", (0, 1.5)])
def test_non_basic_indices_rejected(key) -> None:
    with pytest.raises(IndexError):
        bz.zeros((3, 4))[key]  # noqa: B018


def test_getitem_is_lazy_and_shapes_are_known() -> None:
    x = bz.arange(24).reshape((2, 3, 4)) * 2
    y = x[1, ::-1, None, 1:3]
    assert y.shape == (3, 1, 2)
    assert not y._node.is_evaluated
    assert y.tolist() == (np.arange(24).reshape(2, 3, 4) * 2)[1, ::-1, None, 1:3].tolist()


# ---------------------------------------------------------------- setitem
@st.composite
def broadcastable_to(draw, shape):
    """A shape that broadcasts to ``shape`` (trailing dims, some set to 1)."""
    k = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - k:]
    return tuple(1 if draw(st.booleans()) else d for d in tail)


def scalar_for(dtype) -> st.SearchStrategy:
    if dtype == dt.bool_:
        return st.booleans()
    if dt.is_integer(dtype):
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max)) | st.booleans()
    if dt.is_complex(dtype):
        return st.complex_numbers(max_magnitude=1e4) | st.floats(-1e4, 1e4) | st.integers(-9, 9)
    return st.floats(-1e4, 1e4) | st.integers(-100, 100) | st.booleans()


def value_dtypes_for(dtype) -> list[np.dtype]:
    """Value dtypes whose values numpy and the standard cast into ``dtype`` unambiguously."""
    if dtype == dt.bool_:
        return [dt.bool_]
    if dt.is_integer(dtype):
        return [dt.bool_, dt.int8, dtype] if dtype.kind == "i" else [dt.bool_, dt.uint8, dtype]
    if dt.is_complex(dtype):
        return [dt.int8, dt.float32, dt.complex64, dtype]
    return [dt.bool_, dt.int8, dt.float16, dt.float32, dtype]


@given(data=st.data(), dtype=st.sampled_from(SMALL_DTYPES))
def test_setitem_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype, finite=True))
    key = data.draw(basic_indices(a.shape))
    region = a[key].shape
    if data.draw(st.booleans()):
        value = data.draw(scalar_for(dtype))
        bz_value = value
    else:
        vdtype = data.draw(st.sampled_from(value_dtypes_for(dtype)))
        value = data.draw(arrays(vdtype, shape=broadcastable_to(region), finite=True))
        bz_value = bz.asarray(value)
    original = a.copy()
    x = bz.asarray(a)  # shares a's memory: setitem must not write into it
    before_full = x[...]
    before_region = x[key]
    derived = x + 0 if dtype != dt.bool_ else x | False
    expected = a.copy()
    with np.errstate(all="ignore"):
        expected[key] = upcast(value) if isinstance(value, np.ndarray) else value
    x[key] = bz_value
    assert_same(x, expected)
    assert_same(x[key], expected[key])
    # functional semantics: what was taken before keeps the old value
    assert_same(before_full, original)
    assert_same(before_region, original[key])
    assert_same(derived, original)
    np.testing.assert_array_equal(upcast(a), upcast(original))  # the numpy input is untouched


def test_setitem_views_and_later_reads() -> None:
    x = bz.zeros((3, 4), dtype=bz.int32)
    row = x[1]
    x[1, ::2] = 7
    x[:, -1] = bz.asarray([1, 2, 3], dtype=bz.int8)  # broadcast + cast
    assert row.tolist() == [0, 0, 0, 0]
    assert x.tolist() == [[0, 0, 0, 1], [7, 0, 7, 2], [0, 0, 0, 3]]
    x[...] = bz.asarray([9, 8, 7, 6], dtype=bz.int64)
    assert x.dtype == bz.int32
    assert x.tolist() == [[9, 8, 7, 6]] * 3
    assert row.tolist() == [0, 0, 0, 0]
    y = bz.asarray(1.5)
    y[()] = 2
    assert y.item() == 2.0 and y.dtype == bz.float32
    z = bz.arange(5)
    z[-10::-1] = 42  # an empty region: nothing changes
    assert z.tolist() == [0, 1, 2, 3, 4]
    z[::-2] = bz.asarray([10, 20, 30])
    assert z.tolist() == [30, 1, 20, 3, 10]


def test_setitem_casts_values_to_the_target_dtype() -> None:
    x = bz.zeros(3, dtype=bz.int16)
    x[0] = 2.9
    x[1] = True
    x[2:] = bz.asarray([-1.7])
    assert x.dtype == bz.int16 and x.tolist() == [2, 1, -1]
    f = bz.zeros(2, dtype=bz.float16)
    f[0] = 1 / 3
    assert f.tolist()[0] == float(np.float16(1 / 3))
    b = bz.zeros(2, dtype=bz.bool_)
    b[0] = 5
    assert b.dtype == bz.bool_ and b.tolist() == [True, False]


def test_setitem_errors() -> None:
    x = bz.zeros((3, 4))
    with pytest.raises(ValueError, match=r"^setitem\b"):
        x[0] = bz.zeros((3,))
    with pytest.raises(ValueError, match=r"^setitem\b"):
        x[:, 0] = bz.zeros((2, 3))
    with pytest.raises(TypeError):
        x[0, 0] = 1j
    with pytest.raises(TypeError):
        x[0] = bz.zeros(4, dtype=bz.complex64)
    with pytest.raises(OverflowError):
        bz.zeros(2, dtype=bz.int8)[0] = 300
    assert x.tolist() == [[0.0] * 4] * 3  # failed assignments change nothing


# ---------------------------------------------------------------- len / iteration
@given(a=arrays(st.sampled_from(ALL_DTYPES), shape=shapes(min_dims=1, max_dims=3)))
def test_len_and_iteration(a) -> None:
    x = bz.asarray(a)
    assert len(x) == len(a)
    rows = list(x)
    assert len(rows) == len(a)
    for r, e in zip(rows, a):
        assert_same(r, e)


def test_len_and_iteration_of_0d_raise() -> None:
    x = bz.asarray(3)
    with pytest.raises(TypeError):
        len(x)
    with pytest.raises(TypeError):
        iter(x).__next__()


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=dt.name)
def test_integer_array_as_index(dtype) -> None:
    a = np.arange(10)
    x = bz.asarray(a)
    i = bz.asarray(np.asarray(3, dtype=dtype))
    assert x[i].item() == 3
    assert x[i:].tolist() == a[3:].tolist()


def test_indexing_an_evaluated_array_is_a_view_not_a_new_graph() -> None:
    """x[i] (a contiguous part) of an evaluated array is a numpy view of its data (a new
    leaf): the graphs built on x[i] for every i are one graph, optimized once (as a SLICE
    node, the index was part of each graph's key). Strided parts stay lazy slices."""
    from braze.graph.compiler import CACHE

    data = np.arange(600 * 300, dtype=np.float32).reshape(600, 300)
    x = bz.asarray(data)
    bz.eval(x)
    for i in range(3):  # warm: the small-graph rule compiles from the second sighting
        float((x[i] * 2.0 + 1.0).sum())
    misses = CACHE.misses
    for i in range(3, 40):
        got = float((x[i] * 2.0 + 1.0).sum())
        assert got == pytest.approx(float((data[i] * 2 + 1).sum()), rel=1e-6)
    assert CACHE.misses == misses
    for key in [(slice(None, None, -1), 3), (Ellipsis, slice(7, 2, -2)), (5, None), (-1, -1)]:
        np.testing.assert_array_equal(np.asarray(x[key]), data[key])
    assert x[:, 3]._node.op.name != "constant" and x[3]._node.op.name == "constant"
    y = x[4]
    x[4] = 0.0  # functional: the view keeps the old values
    np.testing.assert_array_equal(np.asarray(y), data[4])
    np.testing.assert_array_equal(np.asarray(x[4]), np.zeros(300, np.float32))
