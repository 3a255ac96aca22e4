"""The elementwise ops added as single records (exp2, sinc, logaddexp2, heaviside): their
edge values against numpy on every backend, one fused kernel with their neighbours, and
their expression in every generated dialect. (test_elementwise's hypothesis tests and
the kernel corpus cover them as every other record; this file holds what is special.)

Tolerance: float32 results within rtol 1e-6 (libm's and libmvec's exp2/log1p/sin are
within a few ulp of numpy's), float64 within 1e-12; special values exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import braze as bz

INF, NAN = np.inf, np.nan
RTOL = {np.float32: 1e-6, np.float64: 1e-12}
UNARY_EDGES = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 3.0, 2.5, 1e-20, -1e-20, 100.0, -150.0,
               1000.0, INF, -INF, NAN]
BINARY_EDGES = [(1.0, 1.0), (INF, INF), (-INF, -INF), (INF, -INF), (-INF, 3.0), (2.0, NAN),
                (NAN, NAN), (-0.0, 0.0), (0.0, -0.0), (-2000.0, 1.0), (127.0, 127.5),
                (-1.0, 0.5), (0.0, 0.25), (-0.0, 0.75), (5.0, -3.0)]


def _check(got: bz.Array, want: np.ndarray) -> None:
    g = np.asarray(got)
    assert g.dtype == want.dtype
    assert np.array_equal(np.isnan(g), np.isnan(want))
    assert np.array_equal(np.isinf(g), np.isinf(want)) and np.all(g[np.isinf(g)] == want[np.isinf(
        want)])
    fin = np.isfinite(want)
    np.testing.assert_allclose(g[fin], want[fin], rtol=RTOL[want.dtype.type], atol=0)


@pytest.mark.parametrize("name", ["exp2", "sinc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_edges(name: str, dtype: type) -> None:
    x = np.array(UNARY_EDGES * 3, dtype)  # > 32 elements: a vector body and a tail
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
    _check(getattr(bz, name)(bz.asarray(x)), want)


@pytest.mark.parametrize("name", ["logaddexp2", "heaviside"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_edges(name: str, dtype: type) -> None:
    a = np.array([p[0] for p in BINARY_EDGES] * 3, dtype)
    b = np.array([p[1] for p in BINARY_EDGES] * 3, dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(a, b)
    _check(getattr(bz, name)(bz.asarray(a), bz.asarray(b)), want)
    if name == "heaviside":  # exact: it selects
        assert np.array_equal(np.asarray(bz.heaviside(bz.asarray(a), bz.asarray(b))), want,
                              equal_nan=True)


def test_integer_inputs_compute_in_float32() -> None:
    x = np.arange(-3, 4, dtype=np.int32)
    got = bz.exp2(bz.asarray(x))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), np.exp2(x.astype(np.float32)))
    assert np.all(np.asarray(bz.sinc(bz.asarray(x)))[x != 0] == pytest.approx(0, abs=1e-6))


def test_bad_input_names_the_op() -> None:
    with pytest.raises(TypeError, match="logaddexp2: unsupported dtype complex64"):
        bz.logaddexp2(bz.asarray(np.ones(2, np.complex64)), 1.0)
    with pytest.raises(ValueError, match="heaviside"):
        bz.heaviside(bz.ones(3), bz.ones(4))


def test_one_kernel_with_their_neighbours() -> None:
    x = bz.asarray(np.linspace(-4, 4, 1000, dtype=np.float32))
    f = lambda x: bz.logaddexp2(x, 1.0) * bz.sinc(x) + bz.heaviside(x, 0.5) - bz.exp2(x)  # noqa: E731
    report = bz.explain(f, x)
    assert report.num_kernels == 1
    xs = np.asarray(x)
    want = np.logaddexp2(xs, 1.0) * np.sinc(xs) + np.heaviside(xs, 0.5) - np.exp2(xs)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["cpu", "cuda", "metal"])
def test_every_dialect_emits_them(target: str) -> None:
    x = bz.asarray(np.ones(64, np.float32))
    k = bz.explain(lambda x: bz.logaddexp2(x, bz.exp2(x)) + bz.sinc(x), x).kernels[0]
    src = k.source(target)
    if target == "metal":  # overloaded names; log1p from the prelude
        assert "exp2(" in src and "bz_log1p(" in src and "sin(" in src
    elif target == "cpu":  # braze's own float functions (kernels/bzmath.h)
        assert "bzm_exp2(" in src and "bzm_log1p(" in src and "bzm_sin(" in src
    else:
        assert "exp2f(" in src and "log1pf(" in src and "sinf(" in src
