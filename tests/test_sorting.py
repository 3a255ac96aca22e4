"""Sorting, searching and set functions compared with numpy: ``sort`` / ``argsort``
(stable, ascending and descending, NaN and signed zeros), ``searchsorted`` (sides,
sorter), ``nonzero``, ``count_nonzero``, ``unique_*`` (NaNs distinct, result dtypes and
shapes), ``isin``. Exact comparisons: nothing here does arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import arrays, shapes, upcast

REAL = st.sampled_from([dt.bool_, dt.int8, dt.uint8, dt.int64, dt.float16, dt.bfloat16,
                        dt.float32, dt.float64])


def same(got, expected) -> None:
    g = np.asarray(got)
    expected = np.asarray(expected)
    assert g.shape == expected.shape and got.shape == expected.shape
    assert g.dtype == expected.dtype, f"{g.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(upcast(g), upcast(expected))


@given(st.data())
def test_sort_and_argsort_match_numpy(data):
    x = data.draw(arrays(REAL, shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    b = bz.asarray(x)
    want = np.argsort(upcast(x), axis=axis, kind="stable")
    same(bz.argsort(b, axis=axis), want.astype(np.int64))
    # sorted as float32 for bfloat16 (ml_dtypes' own sort does not put NaNs last)
    same(bz.sort(b, axis=axis), np.sort(upcast(x), axis=axis, kind="stable").astype(x.dtype))
    if x.dtype.kind in "iub":  # no NaN/-0.0 ambiguity: exact stable descending order
        desc = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        desc = x.shape[axis] - 1 - desc
        same(bz.argsort(b, axis=axis, descending=True), desc.astype(np.int64))
    got = np.asarray(bz.sort(b, axis=axis, descending=True))
    ref = np.flip(np.sort(upcast(x), axis=axis), axis)
    np.testing.assert_array_equal(upcast(got), upcast(ref))


@given(st.data())
def test_top_k_matches_a_stable_sort(data):
    """top_k against numpy's stable argsort (largest: of the integers negated in int64, so
    ties keep index order) on integer dtypes, where the order is exact."""
    x = data.draw(arrays(st.sampled_from([dt.int8, dt.int16, dt.int32]),  # negated in int64
                         shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    k = data.draw(st.integers(0, x.shape[axis]))
    mode = data.draw(st.sampled_from(["largest", "smallest"]))
    key = -x.astype(np.int64) if mode == "largest" else x
    idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
    values, indices = bz.top_k(bz.asarray(x), k, axis=axis, mode=mode)
    same(indices, idx.astype(np.int64))
    same(values, np.take_along_axis(x, idx, axis=axis))


def test_top_k_errors():
    lo = np.iinfo(np.int64).min  # the extremes of int64 (a negating reference overflows)
    v, i = bz.top_k(bz.asarray(np.array([lo, 0, lo])), 2)
    assert v.tolist() == [0, lo] and i.tolist() == [1, 0]
    v, i = bz.top_k(bz.asarray(np.array([lo, 0, lo])), 2, mode="smallest")
    assert v.tolist() == [lo, lo] and i.tolist() == [0, 2]
    x = bz.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^top_k: k must be in \[0, 2\]"):
        bz.top_k(x, 3)
    with pytest.raises(ValueError, match="^top_k: mode"):
        bz.top_k(x, 1, mode="middle")
    with pytest.raises(ValueError, match="^top_k: needs"):
        bz.top_k(bz.asarray(1.0), 1)
    with pytest.raises(TypeError, match="^top_k: k must be an int"):
        bz.top_k(x, 1.5)


def test_descending_is_stable_and_lazy():
    x = bz.asarray([1, 3, 1, 3, 2])
    s = bz.argsort(x, descending=True)
    assert s._node.data is None
    assert s.tolist() == [1, 3, 4, 0, 2]
    assert np.isnan(bz.sort(bz.asarray([np.nan, 1.0, -np.inf])).tolist()[-1])  # NaN last
    assert bz.sort(bz.asarray([np.nan, 1.0, -np.inf])).tolist()[:2] == [-np.inf, 1.0]
    with pytest.raises(TypeError, match="sort.*complex64"):
        bz.sort(bz.asarray([1j]))
    with pytest.raises(ValueError, match="argsort.*0-d"):
        bz.argsort(bz.asarray(1.0))


@given(st.data())
def test_searchsorted(data):
    x1 = np.sort(data.draw(arrays(st.sampled_from([dt.int16, dt.float32]), shapes(1, 1))))
    x2 = data.draw(arrays(x1.dtype, shapes(0, 2)))
    side = data.draw(st.sampled_from(["left", "right"]))
    same(bz.searchsorted(bz.asarray(x1), bz.asarray(x2), side=side),
         np.searchsorted(x1, x2, side=side).astype(np.int64))
    perm = np.random.default_rng(0).permutation(x1.size)
    shuffled = x1[perm]
    sorter = np.argsort(shuffled, kind="stable")
    same(bz.searchsorted(bz.asarray(shuffled), bz.asarray(x2), side=side,
                         sorter=bz.asarray(sorter)),
         np.searchsorted(shuffled, x2, side=side, sorter=sorter).astype(np.int64))


@given(arrays(st.sampled_from([dt.bool_, dt.int32, dt.float32, dt.complex64]),
              shapes(min_dims=1, max_dims=3)))
def test_nonzero_and_count_nonzero(x):
    got = bz.nonzero(bz.asarray(x))
    want = np.nonzero(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w.astype(np.int64))
    same(bz.count_nonzero(bz.asarray(x)), np.asarray(np.count_nonzero(x), np.int64))
    same(bz.count_nonzero(bz.asarray(x), axis=-1, keepdims=True),
         np.count_nonzero(x, axis=-1, keepdims=True).astype(np.int64))


@given(arrays(st.sampled_from([dt.int8, dt.uint16, dt.float16, dt.float32, dt.float64]),
              shapes(max_dims=3)))
def test_unique_family_matches_numpy(x):
    b = bz.asarray(x)
    r = np.unique_all(upcast(x))
    got = bz.unique_all(b)
    same(got.values, r.values.astype(x.dtype))
    same(got.indices, r.indices.astype(np.int64))
    same(got.inverse_indices, r.inverse_indices.reshape(x.shape).astype(np.int64))
    same(got.counts, r.counts.astype(np.int64))
    same(bz.unique_values(b), r.values.astype(x.dtype))
    v, c = bz.unique_counts(b)
    same(c, r.counts.astype(np.int64))
    v, inv = bz.unique_inverse(b)
    same(inv, r.inverse_indices.reshape(x.shape).astype(np.int64))
    # values[inverse] rebuilds x
    np.testing.assert_array_equal(upcast(np.asarray(v)[np.asarray(inv)]), upcast(x))


def test_unique_nans_are_distinct():
    v = bz.unique_values(bz.asarray([np.nan, 1.0, np.nan]))
    assert v.shape == (3,)
    assert bz.unique_counts(bz.asarray([np.nan, np.nan])).counts.tolist() == [1, 1]


@given(st.data())
def test_isin(data):
    x1 = data.draw(arrays(dt.int16, shapes(max_dims=2)))
    x2 = data.draw(arrays(dt.int16, shapes(max_dims=2)))
    same(bz.isin(bz.asarray(x1), bz.asarray(x2)), np.isin(x1, x2))
    same(bz.isin(bz.asarray(x1), bz.asarray(x2), invert=True), np.isin(x1, x2, invert=True))
