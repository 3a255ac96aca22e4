"""Advanced indexing compared with numpy: integer index arrays (negative, broadcast, mixed
with slices / ints / None / ``...``), boolean masks (n-d, 0-d), ``take``,
``take_along_axis``, and functional ``__setitem__`` with those keys (earlier views keep the
old value). Laziness: integer indexing records a node; a mask evaluates only the mask.

Indexing moves data without arithmetic: comparisons are exact.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import arrays, shapes, upcast

DTYPES = st.sampled_from([dt.bool_, dt.int8, dt.int64, dt.uint32, dt.float16, dt.float32,
                          dt.float64])


def same(got: bz.Array, expected: np.ndarray) -> None:
    g = np.asarray(got)
    assert got.shape == expected.shape == g.shape, f"{g.shape} != {expected.shape}"
    assert g.dtype == expected.dtype
    np.testing.assert_array_equal(upcast(g), upcast(expected))


@st.composite
def fancy_keys(draw, shape):
    """A key mixing integer arrays (broadcastable shapes), ints, slices, None and ..."""
    items = []
    idx_shape = draw(shapes(max_dims=2, max_side=3))
    for n in shape:
        kind = draw(st.sampled_from(["array", "slice", "int", "none"] if n else ["slice"]))
        if kind == "array":
            sub = idx_shape[len(idx_shape) - draw(st.integers(0, len(idx_shape))):]
            items.append(np.asarray(draw(arrays(np.dtype(np.int64), sub, views=False)))
                         % (2 * n) - n)
        elif kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            items.append(slice(draw(st.none() | st.integers(-n - 1, n + 1)), None,
                               draw(st.sampled_from([None, 1, 2, -1]))))
        else:
            items.append(None)
            items.append(slice(None))
    if not any(isinstance(k, np.ndarray) for k in items) and shape[0]:
        items[0] = np.zeros(idx_shape, np.int64)  # always at least one index array
    return tuple(items)


@given(st.data())
def test_integer_array_getitem_matches_numpy(data):
    x = data.draw(arrays(DTYPES, shapes(min_dims=1, max_dims=3, min_side=1)))
    key = data.draw(fancy_keys(x.shape))
    try:
        want = x[key]
    except IndexError:
        with pytest.raises(IndexError):
            bz.asarray(x)[tuple(bz.asarray(k) if isinstance(k, np.ndarray) else k
                                for k in key)]
        return
    bkey = tuple(bz.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    same(bz.asarray(x)[bkey], want)


@given(st.data())
def test_boolean_mask_getitem_matches_numpy(data):
    x = data.draw(arrays(DTYPES, shapes(min_dims=1, max_dims=3)))
    k = data.draw(st.integers(1, x.ndim))
    mask = data.draw(arrays(np.dtype(bool), x.shape[:k], views=False))
    same(bz.asarray(x)[bz.asarray(mask)], x[mask])
    same(bz.asarray(x)[..., None][bz.asarray(mask)], x[..., None][mask])


def test_zero_d_masks_and_lists():
    x = np.arange(6).reshape(2, 3)
    same(bz.asarray(x)[bz.asarray(True)], x[np.True_])
    same(bz.asarray(x)[bz.asarray(False)], x[np.False_])
    same(bz.asarray(x)[[1, 0], [2, 2]], x[[1, 0], [2, 2]])
    same(bz.asarray(x)[:, []], x[:, np.zeros(0, int)])
    # a mask with a zero-size dimension selects nothing (the conformance suite's reading;
    # numpy raises); other mismatches raise
    for m in (np.zeros((0,), bool), np.zeros((2, 0), bool), np.zeros((0, 3), bool)):
        got = bz.asarray(x)[bz.asarray(m)]
        assert got.shape == (0,) + x.shape[m.ndim:] and got.dtype == bz.int64
    with pytest.raises(IndexError, match="^getitem: boolean mask of shape"):
        bz.asarray(x)[bz.asarray(np.zeros((3,), bool))]


@given(st.data())
def test_setitem_with_index_arrays_and_masks(data):
    x = data.draw(arrays(st.sampled_from([dt.int32, dt.float32, dt.float64]),
                         shapes(min_dims=1, max_dims=3, min_side=1)))
    a = bz.asarray(x, copy=True)
    view = a[...]
    ref = x.copy()
    if data.draw(st.booleans()):
        mask = x.real > 0 if x.dtype.kind != "b" else x
        a[bz.asarray(mask)] = 7
        ref[mask] = 7
    else:
        idx = data.draw(st.lists(st.integers(0, x.shape[0] - 1), min_size=1, max_size=4,
                                 unique=True))
        val = np.arange(len(idx) * int(np.prod(x.shape[1:]))).reshape((len(idx),) + x.shape[1:])
        a[bz.asarray(np.asarray(idx))] = bz.asarray(val.astype(x.dtype))
        ref[idx] = val
    same(a, ref)
    same(view, x)  # views of the old value keep it


def test_setitem_value_broadcast_and_errors():
    a = bz.zeros((3, 4), dtype=bz.int32)
    a[bz.asarray([0, 2]), 1:3] = bz.asarray([5, 6], dtype=bz.int32)
    ref = np.zeros((3, 4), np.int32)
    ref[[0, 2], 1:3] = [5, 6]
    same(a, ref)
    with pytest.raises(ValueError, match="setitem.*broadcast"):
        a[bz.asarray([0, 1])] = bz.ones(3)
    with pytest.raises(IndexError, match="getitem.*float32"):
        a[bz.asarray([0.0])]
    with pytest.raises(IndexError, match="mask of shape"):
        a[bz.asarray([True, False])]


@given(st.data())
def test_take_and_take_along_axis(data):
    x = data.draw(arrays(DTYPES, shapes(min_dims=1, max_dims=3, min_side=1)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    idx = np.asarray(data.draw(st.lists(st.integers(-n, n - 1), max_size=5)), np.int64)
    same(bz.take(bz.asarray(x), bz.asarray(idx), axis=axis), np.take(x, idx, axis=axis))
    order = np.argsort(upcast(x), axis=axis, kind="stable")
    same(bz.take_along_axis(bz.asarray(x), bz.asarray(order), axis=axis),
         np.take_along_axis(x, order, axis=axis))


def test_take_errors_and_laziness():
    x = bz.arange(6).reshape((2, 3))
    with pytest.raises(ValueError, match="take: axis is required"):
        bz.take(x, bz.asarray([0]))
    with pytest.raises(TypeError, match="take: indices must be"):
        bz.take(x, bz.asarray([0.5]), axis=0)
    y = x * 2
    g = y[bz.asarray([1, 0])]
    assert y._node.data is None and g._node.data is None  # integer indexing records
    pending = x + 1
    m = (x > 2)
    r = pending[m]
    assert m._node.data is not None  # the mask was evaluated (data-dependent shape) ...
    assert r._node.data is None and pending._node.data is None  # ... nothing else
    assert r.tolist() == [4, 5, 6]


def test_data_dependent_shapes_inside_compile_fail_clearly():
    x = bz.asarray([1.0, -1.0])
    for fn, op in ((lambda v: v[v > 0], "getitem (boolean mask)"), (bz.nonzero, "nonzero"),
                   (bz.unique_values, "unique_values"),
                   (lambda v: bz.repeat(v, bz.astype(v > 0, bz.int64)), "repeat")):
        with pytest.raises(TypeError, match=re.escape(op) + ".*bz.compile"):
            bz.compile(fn)(x)
    assert bz.compile(lambda v: bz.repeat(v, bz.asarray([1, 2])))(x).tolist() == [1.0, -1.0, -1.0]


def test_out_of_range_index_arrays_raise_at_eval_naming_the_op():
    x = bz.arange(3)
    y = x[bz.asarray([0, 5])]  # values are unknown until evaluated: recorded
    with pytest.raises(IndexError, match="getitem/take: index 5 is out of bounds"):
        y.tolist()
    with pytest.raises(IndexError, match="take_along_axis"):
        bz.take_along_axis(x, bz.asarray([7]), axis=0).tolist()
    x[bz.asarray([9])] = 1
    with pytest.raises(IndexError, match="setitem"):
        x.tolist()
    with pytest.raises(IndexError, match="getitem: index 3 is out of bounds"):
        bz.ones((2, 3))[bz.asarray([0]), 3]  # Python ints are checked at the call


def test_zero_d_mask_setitem():
    for key in (True, False, bz.asarray(True), bz.asarray(False)):
        x = bz.zeros((2, 2), dtype=bz.int8)
        ref = np.zeros((2, 2), np.int8)
        x[key] = 3
        ref[np.asarray(bool(key))] = 3
        same(x, ref)
