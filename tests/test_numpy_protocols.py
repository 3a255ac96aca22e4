"""NumPy's protocols on braze arrays (issue 14, item 5): numpy functions stay lazy and
accept numpy's keywords, formatting and rounding, numpy-style str/repr, Python lists and
scalars as operands, ``.T`` over every rank, and numpy's everyday methods. Values are
compared with numpy's exactly unless a tolerance is stated."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz

from .helpers import shapes


def test_the_cases_from_the_issue() -> None:
    b = bz.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    assert isinstance(np.sum(b), bz.Array) and float(np.sum(b)) == 66.0
    np.testing.assert_array_equal(np.asarray(np.mean(b, axis=0)), np.arange(12.0).reshape(3, 4)
                                  .mean(axis=0))
    x = bz.asarray(2.0) / 3
    assert f"{x:.2f}" == "0.67" and round(x, 2).item() == pytest.approx(0.67)
    assert str(bz.asarray([0, 1, 2])) == "[0 1 2]"
    a = bz.arange(4)
    assert (a + [1, 2, 3, 4]).tolist() == [1, 3, 5, 7]
    assert bz.sqrt(4).item() == 2.0
    assert bz.zeros((2, 3, 4)).T.shape == (4, 3, 2)


@given(shape=shapes(min_dims=1, max_dims=3, min_side=1), axis=st.integers(0, 2))
def test_numpy_functions_dispatch_to_braze_and_stay_lazy(shape, axis) -> None:
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x = bz.asarray(a)
    axis = axis % len(shape)
    for name in ("sum", "mean", "max", "min", "prod"):
        got = getattr(np, name)(x, axis=axis, keepdims=True)
        assert isinstance(got, bz.Array), name  # braze's function ran: lazy
        np.testing.assert_allclose(np.asarray(got), getattr(np, name)(a, axis=axis,
                                                                      keepdims=True),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(np.exp(x)), np.exp(a), rtol=1e-6)
    assert isinstance(np.transpose(x), bz.Array)
    np.testing.assert_array_equal(np.asarray(np.transpose(x)), a.T)


def test_out_must_be_none() -> None:
    x = bz.ones(3)
    assert float(np.sum(x, out=None)) == 3.0
    with pytest.raises(TypeError, match="out= is not supported"):
        np.sum(x, out=np.zeros(()))
    with pytest.raises(TypeError, match="sum: out="):
        x.sum(out=np.zeros(()))


def test_a_function_braze_lacks_runs_numpys() -> None:
    assert not hasattr(bz, "packbits")  # (a name braze does not have)
    bits = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], np.uint8)
    got = np.packbits(bz.asarray(bits))
    assert type(got) is np.ndarray  # numpy's own function ran, on the values
    np.testing.assert_array_equal(got, np.packbits(bits))
    x = bz.asarray([3.0, 1.0, 2.0])
    assert isinstance(np.ptp(x), bz.Array) and float(np.ptp(x)) == 2.0  # braze has ptp


def test_methods_take_numpys_keywords() -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = bz.asarray(a)
    assert x.sum(axis=1, dtype=bz.int64).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(x.sum(0, None, None, True)), a.sum(0, keepdims=True))
    np.testing.assert_allclose(np.asarray(x.var(ddof=1)), a.var(ddof=1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x.std(axis=0, ddof=1)), a.std(axis=0, ddof=1),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x.mean(dtype=bz.float64)), a.mean(), rtol=1e-12)


@given(shape=shapes(min_dims=0, max_dims=3))
def test_everyday_methods(shape) -> None:
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x = bz.asarray(a)
    np.testing.assert_array_equal(np.asarray(x.copy()), a)
    np.testing.assert_array_equal(np.asarray(x.clip(-0.5, 0.5)), a.clip(-0.5, 0.5))
    np.testing.assert_array_equal(np.asarray(x.round(2)), a.round(2))
    np.testing.assert_array_equal(np.asarray(x.squeeze()), a.squeeze())
    np.testing.assert_array_equal(np.asarray(x.ravel()), a.ravel())
    np.testing.assert_allclose(np.asarray(x.cumsum()), a.cumsum(), rtol=1e-5, atol=1e-5)
    assert x.nbytes == a.nbytes and x.itemsize == a.itemsize
    np.testing.assert_array_equal(np.asarray(x.T), a.T)
    if a.ndim >= 2:
        np.testing.assert_array_equal(np.asarray(x.swapaxes(0, -1)), a.swapaxes(0, -1))
        np.testing.assert_allclose(np.asarray(x.cumsum(axis=1)), a.cumsum(axis=1), rtol=1e-5,
                                   atol=1e-5)


def test_copy_is_independent() -> None:
    a = bz.arange(4)
    b = a.copy()
    b[0] = 10
    a[1] = 20
    assert a.tolist() == [0, 20, 2, 3] and b.tolist() == [10, 1, 2, 3]


def test_scalars_and_lists_where_numpy_takes_them() -> None:
    assert bz.exp(0).item() == 1.0 and bz.maximum([1, 5], 3).tolist() == [3, 5]
    assert ([1.0, 2.0] * bz.ones(2)).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="exp: expected an array, got None"):
        bz.exp(None)
    with pytest.raises(ValueError, match="ragged"):
        bz.ones(2) + [[1, 2], [3]]


def test_a_roll_of_a_roll_is_one_node_and_a_life_step_one_kernel_after_the_rolls() -> None:
    """The game of life's np.roll(np.roll(board, i, 0), j, 1): one roll node (the shifts
    merged), the neighbour count and the rule one fused kernel after the 8 rolls."""
    a = (np.random.default_rng(0).random((16, 16)) < 0.3).astype(np.int8)
    b = bz.asarray(a)
    r = bz.roll(bz.roll(b, -1, 0), 1, 1)
    assert r._node.op.name == "roll" and r._node.inputs[0] is b._node
    assert r._node.attrs == {"shifts": (15, 1), "axes": (0, 1)}
    np.testing.assert_array_equal(np.asarray(r), np.roll(np.roll(a, -1, 0), 1, 1))
    assert bz.roll(bz.roll(b, 3, 1), -3, 1)._node is b._node  # shifts that cancel: b

    def step(board):
        n = sum(bz.roll(bz.roll(board, i, 0), j, 1)
                for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
        return ((n == 3) | ((board == 1) & (n == 2))).astype(board.dtype)

    rep = bz.explain(step, b)
    assert [k.kind for k in rep.kernels].count("library") == 8 and rep.num_kernels == 9
    n = sum(np.roll(np.roll(a, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1)
            if (i, j) != (0, 0))
    np.testing.assert_array_equal(np.asarray(step(b)), ((n == 3) | ((a == 1) & (n == 2))))


def test_roll_takes_numpys_positional_axis() -> None:
    a = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(bz.roll(bz.asarray(a), 1, 0)), np.roll(a, 1, 0))
    np.testing.assert_array_equal(np.asarray(bz.roll(bz.asarray(a), -1, axis=1)),
                                  np.roll(a, -1, axis=1))
