"""Shape manipulation compared with numpy: reshape, permute_dims, transpose,
matrix_transpose (and ``.T`` / ``.mT``), expand_dims, squeeze, broadcast_to,
broadcast_arrays, concat, stack, flip, moveaxis.

These move data without arithmetic, so every comparison is exact (values, shape and
dtype); casts done by concat/stack promotion are compared with numpy's ``astype`` of
the same inputs.
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import ALL_DTYPES, assert_same, shapes, upcast
from .helpers import finite_complex_arrays as arrays

# concat/stack dtypes: uint64 is left out here (uint64 with a signed int is an error)
JOIN_DTYPES = [d for d in ALL_DTYPES if d != dt.uint64]




any_dtype = st.sampled_from(ALL_DTYPES)



def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


@st.composite
def same_size_shapes(draw, shape):
    """A shape with the same number of elements as ``shape``, maybe with one -1."""
    size = math.prod(shape)
    if size == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
        dims[draw(st.integers(0, len(dims) - 1))] = 0
    else:
        k = draw(st.integers(0 if size == 1 else 1, 5))
        dims = [1] * k
        for p in _factors(size):
            dims[draw(st.integers(0, k - 1))] *= p
    if dims and draw(st.booleans()):
        i = draw(st.integers(0, len(dims) - 1))
        if math.prod(dims[:i] + dims[i + 1:]) != 0:
            dims[i] = -1
    return tuple(dims)


# ---------------------------------------------------------------- reshape
@given(data=st.data(), dtype=any_dtype)
def test_reshape_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    target = data.draw(same_size_shapes(a.shape))
    expected = np.reshape(a, target)
    x = bz.asarray(a)
    assert_same(bz.reshape(x, target), expected)
    assert_same(x.reshape(target), expected)
    if target:
        assert_same(x.reshape(*target), expected)
    # a reshape of a reshape composes
    assert_same(bz.reshape(bz.reshape(x, (-1,)), target), expected)


@given(data=st.data())
def test_reshape_wrong_size_raises_naming_shapes(data) -> None:
    a = data.draw(arrays(st.sampled_from([dt.float32, dt.int8])))
    target = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6)
                       .filter(lambda s: math.prod(s) != a.size))
    with pytest.raises(ValueError, match=r"^reshape\b") as e:
        bz.reshape(bz.asarray(a), target)
    assert str(a.shape) in str(e.value) and str(target) in str(e.value)


@pytest.mark.parametrize("target", [(-1, -1), (2, -2), (-1, 0), (5, -1)])
def test_reshape_invalid_shapes(target) -> None:
    with pytest.raises(ValueError, match=r"^reshape\b"):
        bz.reshape(bz.zeros((2, 3)), target)


def test_reshape_minus_one_and_zero_size() -> None:
    assert bz.reshape(bz.zeros((0, 3)), (-1, 3)).shape == (0, 3)
    assert bz.reshape(bz.zeros((0, 3)), (3, 0, 5)).shape == (3, 0, 5)
    with pytest.raises(ValueError, match=r"^reshape\b"):
        bz.reshape(bz.zeros((0, 3)), (0, -1))  # ambiguous, as in numpy
    assert bz.reshape(bz.asarray(5), (1, 1, -1)).tolist() == [[[5]]]
    assert bz.reshape(bz.asarray([[7]]), ()).tolist() == 7


# ---------------------------------------------------------------- permute_dims / transpose
@given(data=st.data(), dtype=any_dtype)
def test_permute_dims_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    perm = data.draw(st.permutations(range(a.ndim)))
    perm = tuple(p - a.ndim if data.draw(st.booleans()) else p for p in perm)
    x = bz.asarray(a)
    expected = np.transpose(a, perm)
    assert_same(bz.permute_dims(x, perm), expected)
    assert_same(bz.transpose(x, perm), expected)
    assert_same(x.transpose(perm), expected)
    assert_same(bz.transpose(x), np.transpose(a))
    assert_same(x.transpose(), np.transpose(a))


@pytest.mark.parametrize("axes", [(0, 1), (0, 1, 1), (0, 1, 3), (0, 1, -4), (0, 1, 2, 3),
                                  (-1, 2, 0)])
def test_permute_dims_invalid_axes(axes) -> None:
    with pytest.raises(ValueError, match=r"^permute_dims\b"):
        bz.permute_dims(bz.zeros((2, 3, 4)), axes)


@given(a=arrays(any_dtype, shape=shapes(min_dims=2)))
def test_matrix_transpose_and_mT(a) -> None:
    x = bz.asarray(a)
    expected = np.swapaxes(a, -1, -2)
    assert_same(bz.matrix_transpose(x), expected)
    assert_same(x.mT, expected)
    assert_same(bz.linalg.matrix_transpose(x), expected)
    assert_same(x.T, a.T)  # every rank: all axes reversed, as numpy and MLX


@pytest.mark.parametrize("shape", [(), (3,)])
def test_matrix_transposes_need_two_dims(shape) -> None:
    x = bz.zeros(shape)
    with pytest.raises(ValueError):
        x.mT  # noqa: B018
    assert x.T.shape == shape  # numpy: .T of a 0-d or 1-d array is the array
    with pytest.raises(ValueError, match="matrix_transpose|mT"):
        bz.matrix_transpose(x)


# ---------------------------------------------------------------- expand_dims / squeeze
@given(data=st.data(), dtype=any_dtype)
def test_expand_dims_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    axis = data.draw(st.integers(-a.ndim - 1, a.ndim))
    assert_same(bz.expand_dims(bz.asarray(a), axis=axis), np.expand_dims(a, axis))


def test_expand_dims_invalid_axis_raises_index_error() -> None:
    # The standard: "If provided an invalid axis position, an IndexError should be raised."
    for axis in (3, -4, 10):
        with pytest.raises(IndexError, match=r"^expand_dims\b"):
            bz.expand_dims(bz.zeros((2, 3)), axis=axis)


@given(data=st.data(), dtype=any_dtype)
def test_squeeze_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype, shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=1,
                                                        max_side=3)))
    ones = [i for i, d in enumerate(a.shape) if d == 1]
    x = bz.asarray(a)
    assert_same(bz.squeeze(x), np.squeeze(a))  # axis None: every size-1 axis
    if ones:
        picked = data.draw(st.lists(st.sampled_from(ones), unique=True, min_size=1))
        picked = [p - a.ndim if data.draw(st.booleans()) else p for p in picked]
        axis = picked[0] if len(picked) == 1 and data.draw(st.booleans()) else tuple(picked)
        assert_same(bz.squeeze(x, axis=axis), np.squeeze(a, axis=axis))
    others = [i for i, d in enumerate(a.shape) if d != 1]
    if others:
        bad = data.draw(st.sampled_from(others))
        with pytest.raises(ValueError, match=r"^squeeze\b"):
            bz.squeeze(x, axis=bad)
        with pytest.raises(ValueError, match=r"^squeeze\b"):
            bz.squeeze(x, axis=(bad, *ones))


def test_squeeze_errors() -> None:
    x = bz.zeros((1, 3, 1))
    with pytest.raises(ValueError, match=r"^squeeze\b"):
        bz.squeeze(x, axis=1)
    with pytest.raises(ValueError, match=r"^squeeze\b"):
        bz.squeeze(x, axis=3)
    with pytest.raises(ValueError, match=r"^squeeze\b"):
        bz.squeeze(x, axis=(0, 0))
    assert bz.squeeze(x, axis=(0, -1)).shape == (3,)
    assert bz.squeeze(bz.zeros((0, 1)), axis=1).shape == (0,)


# ---------------------------------------------------------------- broadcasting
@st.composite
def broadcast_targets(draw, shape):
    lead = draw(st.lists(st.integers(0, 3), max_size=2))
    tail = [draw(st.integers(0, 3)) if d == 1 else d for d in shape]
    return tuple(lead + tail)


@given(data=st.data(), dtype=any_dtype)
def test_broadcast_to_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    target = data.draw(broadcast_targets(a.shape))
    assert_same(bz.broadcast_to(bz.asarray(a), target), np.broadcast_to(a, target))


@given(data=st.data())
def test_broadcast_to_invalid(data) -> None:
    a = data.draw(arrays(dt.float32, shape=shapes(min_dims=1)))
    target = list(data.draw(broadcast_targets(a.shape)))
    x = bz.asarray(a)
    non_one = [i for i, d in enumerate(a.shape) if d != 1]
    if non_one:
        i = data.draw(st.sampled_from(non_one))
        off = len(target) - a.ndim
        target[off + i] = a.shape[i] + data.draw(st.integers(1, 3))
        with pytest.raises(ValueError, match=r"^broadcast_to\b"):
            bz.broadcast_to(x, tuple(target))
    with pytest.raises(ValueError, match=r"^broadcast_to\b"):
        bz.broadcast_to(x, a.shape[1:])  # fewer dimensions than x
    with pytest.raises(ValueError, match=r"^broadcast_to\b"):
        bz.broadcast_to(x, (-1, *a.shape))


@given(data=st.data(), dtype=any_dtype)
def test_broadcast_arrays_matches_numpy(data, dtype) -> None:
    sh = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_side=0, max_side=3))
    arrs = [data.draw(arrays(dtype, shape=s)) for s in sh.input_shapes]
    got = bz.broadcast_arrays(*[bz.asarray(a) for a in arrs])
    expected = np.broadcast_arrays(*arrs)
    assert len(got) == 3
    for g, e in zip(got, expected):
        assert_same(g, e)


def test_broadcast_arrays_mismatch() -> None:
    with pytest.raises(ValueError, match=r"^broadcast_arrays\b"):
        bz.broadcast_arrays(bz.zeros((2,)), bz.zeros((3,)))
    with pytest.raises(ValueError, match=r"^broadcast_arrays\b"):
        bz.broadcast_arrays(bz.zeros((2, 1)), bz.zeros((1, 3)), bz.zeros((4, 1)))


# ---------------------------------------------------------------- concat / stack
def cast_like_numpy(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype == dt.bool_:
            return a != 0
        return upcast(a).astype(dtype)


@given(data=st.data())
def test_concat_matches_numpy_with_promotion(data) -> None:
    ndim = data.draw(st.integers(1, 3))
    base = list(data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=0,
                                           max_side=3)))
    axis = data.draw(st.integers(-ndim, ndim - 1))
    n = data.draw(st.integers(1, 3))
    arrs = []
    for _ in range(n):
        shape = list(base)
        shape[axis] = data.draw(st.integers(0, 3))
        arrs.append(data.draw(arrays(st.sampled_from(JOIN_DTYPES), shape=tuple(shape))))
    want = dt.result_type(*(a.dtype for a in arrs))
    expected = np.concatenate([cast_like_numpy(a, want) for a in arrs], axis=axis)
    got = bz.concat([bz.asarray(a) for a in arrs], axis=axis)
    assert_same(got, expected, want)
    got = bz.concat(tuple(bz.asarray(a) for a in arrs), axis=axis)  # tuples work too
    assert_same(got, expected, want)


@given(data=st.data())
def test_concat_axis_none_flattens(data) -> None:
    n = data.draw(st.integers(1, 3))
    arrs = [data.draw(arrays(st.sampled_from(JOIN_DTYPES))) for _ in range(n)]
    want = dt.result_type(*(a.dtype for a in arrs))
    expected = np.concatenate([cast_like_numpy(a, want).reshape(-1) for a in arrs])
    assert_same(bz.concat([bz.asarray(a) for a in arrs], axis=None), expected, want)


@pytest.mark.parametrize(("d1", "d2", "want"), [
    (dt.int8, dt.uint8, dt.int16), (dt.int8, dt.int16, dt.int16),
    (dt.uint8, dt.uint32, dt.uint32), (dt.float32, dt.float64, dt.float64),
    (dt.bool_, dt.bool_, dt.bool_), (dt.complex64, dt.float64, dt.complex128),
    (dt.float16, dt.float32, dt.float32), (dt.int32, dt.int64, dt.int64),
])
def test_concat_and_stack_standard_promotion(d1, d2, want) -> None:
    a, b = np.ones((2, 2), d1), np.zeros((2, 2), d2)
    got = bz.concat([bz.asarray(a), bz.asarray(b)], axis=1)
    assert_same(got, np.concatenate([a.astype(want), b.astype(want)], axis=1), want)
    got = bz.stack([bz.asarray(a), bz.asarray(b)], axis=-1)
    assert_same(got, np.stack([a.astype(want), b.astype(want)], axis=-1), want)


def test_concat_errors() -> None:
    with pytest.raises(ValueError, match=r"^concat\b") as e:
        bz.concat([bz.zeros((2, 3)), bz.zeros((3, 3))], axis=1)
    assert "(2, 3)" in str(e.value) and "(3, 3)" in str(e.value)
    with pytest.raises(ValueError, match=r"^concat\b"):
        bz.concat([bz.zeros((2, 3)), bz.zeros((2,))])
    with pytest.raises(ValueError, match=r"^concat\b"):
        bz.concat([bz.zeros(()), bz.zeros(())])
    with pytest.raises(ValueError, match=r"^concat\b"):
        bz.concat([])
    with pytest.raises(ValueError, match=r"^concat\b"):
        bz.concat([bz.zeros((2, 3)), bz.zeros((2, 3))], axis=2)
    with pytest.raises(TypeError, match=r"^concat\b"):
        bz.concat(bz.zeros((2, 3)))
    with pytest.raises(TypeError):
        bz.concat([bz.zeros(2, dtype=bz.uint64), bz.zeros(2, dtype=bz.int64)])
    assert bz.concat([bz.zeros(()), bz.ones(())], axis=None).tolist() == [0.0, 1.0]


@given(data=st.data())
def test_stack_matches_numpy(data) -> None:
    shape = data.draw(shapes(max_dims=3))
    n = data.draw(st.integers(1, 3))
    arrs = [data.draw(arrays(st.sampled_from(JOIN_DTYPES), shape=shape)) for _ in range(n)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    want = dt.result_type(*(a.dtype for a in arrs))
    expected = np.stack([cast_like_numpy(a, want) for a in arrs], axis=axis)
    assert_same(bz.stack([bz.asarray(a) for a in arrs], axis=axis), expected, want)


def test_stack_errors() -> None:
    with pytest.raises(ValueError, match=r"^stack\b"):
        bz.stack([bz.zeros((2,)), bz.zeros((3,))])
    with pytest.raises(ValueError, match=r"^stack\b"):
        bz.stack([bz.zeros((2,)), bz.zeros((2,))], axis=2)
    with pytest.raises(ValueError, match=r"^stack\b"):
        bz.stack([])


# ---------------------------------------------------------------- flip / moveaxis
@given(data=st.data(), dtype=any_dtype)
def test_flip_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype))
    kind = data.draw(st.sampled_from(["none", "int", "tuple"]) if a.ndim else st.just("none"))
    if kind == "none":
        axis = None
    elif kind == "int":
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    else:
        axis = tuple(data.draw(st.lists(st.integers(0, a.ndim - 1), unique=True)))
    assert_same(bz.flip(bz.asarray(a), axis=axis), np.flip(a, axis=axis))


def test_flip_bad_axis() -> None:
    with pytest.raises(ValueError, match=r"^flip\b"):
        bz.flip(bz.zeros((2, 3)), axis=2)
    with pytest.raises(ValueError, match=r"^flip\b"):
        bz.flip(bz.zeros((2, 3)), axis=(0, 0))


@given(data=st.data(), dtype=st.sampled_from([dt.float32, dt.int16, dt.bool_]))
def test_moveaxis_matches_numpy(data, dtype) -> None:
    a = data.draw(arrays(dtype, shape=shapes(min_dims=1)))
    k = data.draw(st.integers(1, a.ndim))
    src = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=k, max_size=k,
                             unique_by=lambda i: i % a.ndim))
    dst = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=k, max_size=k,
                             unique_by=lambda i: i % a.ndim))
    x = bz.asarray(a)
    assert_same(bz.moveaxis(x, tuple(src), tuple(dst)), np.moveaxis(a, src, dst))
    assert_same(bz.moveaxis(x, src[0], dst[0]), np.moveaxis(a, src[0], dst[0]))


def test_moveaxis_errors() -> None:
    x = bz.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=r"^moveaxis\b"):
        bz.moveaxis(x, (0, 1), (2,))
    with pytest.raises(ValueError, match=r"^moveaxis\b"):
        bz.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(ValueError, match=r"^moveaxis\b"):
        bz.moveaxis(x, 3, 0)
    assert bz.moveaxis(x, 0, -1).shape == (3, 4, 2)


# ---------------------------------------------------------------- views keep laziness honest
def test_views_of_views_compose() -> None:
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    x = bz.asarray(a)
    y = bz.flip(bz.permute_dims(bz.reshape(x, (4, 6)), (1, 0)), axis=0)[1:, ::2]
    expected = np.flip(a.reshape(4, 6).T, axis=0)[1:, ::2]
    assert_same(y, expected)
    z = bz.broadcast_to(bz.expand_dims(bz.squeeze(x[:1], axis=0), axis=0), (3, 3, 4))
    assert_same(z, np.broadcast_to(a[:1], (3, 3, 4)))
