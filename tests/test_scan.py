"""The ``cpu`` backend's native cumulative sum (``backends/cpu/kernels/scan.cc``).

Against numpy over shapes, axes, dtypes, ``include_initial``, non-contiguous and empty
inputs. Tolerances: integer sums exact (int64 wrapping as numpy's); along an axis with
elements after it (columns) the kernel adds in numpy's order: exact; along a row it
associates differently (vectors and fixed blocks; float32 summed in float64, each
element within 1 ulp of the exact sum), so it is compared with the float64 sum at
``1e-6 * sqrt(n)`` (float32) or ``1e-14 * sqrt(n)`` (float64) relative to the running sum
of magnitudes. Any thread count gives the same bits (the blocks depend on the
shape alone).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.backends import cpu as cpu_mod

pytestmark = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """This module tests the cpu backend's kernel: run it once, under cpu."""
    with bz.backend("cpu"):
        yield "cpu"


def _impl(threads: int = 2):
    from braze.backends.cpu.scan import CumulativeSum

    impl = CumulativeSum()
    impl._num_threads = lambda: threads  # type: ignore[method-assign]
    return impl


def _check(x: np.ndarray, axis: int, initial: bool, threads: int = 2) -> np.ndarray:
    out_dtype = np.dtype(np.int64) if x.dtype.kind in "iu" else x.dtype
    impl = _impl(threads)
    got = impl({"axis": axis, "include_initial": initial}, out_dtype, x)
    assert impl.calls["native"] == 1 or x.size == 0
    wide = np.int64 if x.dtype.kind in "iu" else np.float64
    want = np.cumsum(x.astype(wide), axis=axis)
    if initial:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        want = np.pad(want, pad)
    assert got.dtype == out_dtype and got.shape == want.shape
    if x.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        n = max(x.shape[axis], 1)
        scale = np.cumsum(np.abs(x.astype(np.float64)), axis=axis)
        if initial:
            scale = np.pad(scale, pad)
        tol = (1e-6 if x.dtype == np.float32 else 1e-14) * np.sqrt(n)
        assert np.all(np.abs(got - want) <= tol * scale + 1e-30)
    return got


@given(shape=st.lists(st.integers(0, 9), min_size=1, max_size=3), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64, np.int64, np.int32]),
       initial=st.booleans())
def test_small_shapes_every_axis_and_dtype(shape, data, dtype, initial) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1))
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 50).astype(dtype)
    _check(x, axis, initial)


@pytest.mark.parametrize("n", [15, 16, 17, 1000, (1 << 15) - 1, 1 << 15, (1 << 15) + 5,
                               300_001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_long_rows_across_vector_and_block_edges(n, dtype) -> None:
    rng = np.random.default_rng(n)
    x = (rng.random(n) * 100).astype(dtype)
    got = _check(x, 0, False)
    # the blocks depend on the shape alone: one thread gives the same bits as two
    np.testing.assert_array_equal(_check(x, 0, False, threads=1), got)
    if dtype == np.float32:  # summed in float64, each element rounded once
        exact = np.cumsum(x.astype(np.float64))
        assert np.all(np.abs(got - exact) <= np.spacing(got))


def test_rows_columns_and_strided_inputs() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 70_000)).astype(np.float32)
    _check(x, 1, True)
    cols = _check(x[:, ::7].T.copy(), 0, False)  # columns: numpy's order, exact
    np.testing.assert_array_equal(cols, np.cumsum(x[:, ::7].T, axis=0))
    _check(x[:, ::3], 1, False)  # a strided view: copied to row-major first
    i = rng.integers(-2**62, 2**62, (5, 40_000))
    np.testing.assert_array_equal(_check(i, 1, False), np.cumsum(i, axis=1))  # wraps


def test_cumsum_runs_native_lazily_and_matches_numpy() -> None:
    x = np.random.default_rng(2).random(200_000).astype(np.float32)
    impl = bz.backends.current().library["cumulative_sum"]
    before = impl.calls["native"]
    c = bz.cumsum(bz.asarray(x))
    got = np.asarray((c[50:] - c[:-50]) / 50)
    assert impl.calls["native"] == before + 1
    want = (np.cumsum(x, dtype=np.float64)[50:] - np.cumsum(x, dtype=np.float64)[:-50]) / 50
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.sqrt(x.size) * x.sum() / 50)
    # float16 and bool: the numpy reference
    h = bz.cumsum(bz.asarray(np.ones(10, np.float16)))
    assert h.dtype == bz.float16 and h.tolist()[-1] == 10.0
    assert bz.cumsum(bz.asarray(np.ones(4, bool))).tolist() == [1, 2, 3, 4]
