"""The ``small_reductions`` pass: reductions of at most 7 elements as elementwise chains.

Against numpy: the chain adds in numpy's order (sequential below 8 elements), so float
sums, products, means, max and min are compared **exactly** (bit for bit, NaN included);
kernel counts show the row kernel is gone; what the pass leaves alone (float16, int32
sums that widen, argmax, few rows, more than 8 terms) keeps its reduction.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph.ir import Graph
from braze.graph.passes import small_reductions as sr

ROWS = sr.MIN_ROWS


def _ops(fn, x) -> list[str]:
    g, _ = Graph.from_nodes([fn(bz.asarray(x))._node])
    return [n.op for n in sr.small_reductions(g).nodes]


@given(terms=st.sampled_from([(1,), (2,), (3,), (7,), (2, 3), (1, 7)]),
       op=st.sampled_from(["sum", "prod", "max", "min", "mean"]),
       dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       keepdims=st.booleans(), nan=st.booleans())
def test_chains_give_numpys_bits(terms, op, dtype, keepdims, nan) -> None:
    if op == "mean" and dtype == np.int64:
        dtype = np.float64
    rng = np.random.default_rng(len(terms) * 10 + sum(terms))
    shape = (ROWS // 4, 4, *terms)  # two kept axes around the reduced ones
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    if nan and dtype != np.int64:
        x.reshape(-1)[::97] = np.nan
    axes = tuple(range(2, 2 + len(terms)))
    got = getattr(bz, op)(bz.asarray(x), axis=axes, keepdims=keepdims)
    with np.errstate(all="ignore"):
        want = getattr(np, op)(x, axis=axes, keepdims=keepdims)
    assert "sum" not in _ops(lambda a: getattr(bz, op)(a, axis=axes, keepdims=keepdims), x)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.dtype == want.dtype


def test_points_inside_a_circle_are_one_elementwise_kernel() -> None:
    """The Monte-Carlo pattern: the sum over 2 coordinates is no row kernel."""
    xy = bz.asarray(np.random.default_rng(0).random((ROWS, 2), dtype=np.float32))
    r = bz.explain(lambda p: ((p ** 2).sum(axis=1) <= 1.0), xy)
    assert r.num_kernels == 1 and r.kernels[0].name.startswith("ew_")
    assert ("small_reductions", "1 rewrite (reduction of <= 7 elements -> elementwise chain)") \
        in r.passes
    xn = np.asarray(xy)
    np.testing.assert_array_equal(np.asarray((xy ** 2).sum(axis=1) <= 1.0),
                                  (xn ** 2).sum(axis=1) <= 1.0)
    off = bz.explain(bz.compile(lambda p: (p * p).sum(axis=1),
                                disable_passes="small_reductions"), xy)
    assert off.kernels[0].name.startswith("row_")


def test_any_all_of_bools() -> None:
    b = np.random.default_rng(1).random((ROWS, 3)) < 0.5
    for op in ("any", "all"):
        np.testing.assert_array_equal(np.asarray(getattr(bz, op)(bz.asarray(b), axis=1)),
                                      getattr(np, op)(b, axis=1))
        assert op not in _ops(lambda a, op=op: getattr(bz, op)(a, axis=1), b)


@pytest.mark.parametrize("case", ["float16", "int32 sum", "argmax", "few rows", "8 terms",
                                  "all axes"])
def test_what_it_leaves_alone(case) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((ROWS, 2)).astype(np.float32)
    fn = {"float16": lambda a: a.astype(bz.float16).sum(axis=1),
          "int32 sum": lambda a: a.astype(bz.int32).sum(axis=1),
          "argmax": lambda a: bz.argmax(a, axis=1),
          "few rows": lambda a: a[:100].sum(axis=1),
          "8 terms": lambda a: bz.broadcast_to(a[:, :1], (ROWS, 8)).sum(axis=1),
          "all axes": lambda a: a[:4, :2].sum()}[case]
    ops = _ops(fn, x)
    assert any(op in ("sum", "argmax") for op in ops) and "add" not in ops
    want = fn(bz.asarray(x))
    with bz.backend("numpy"):
        np.testing.assert_allclose(np.asarray(fn(bz.asarray(x))).astype(np.float64),
                                   np.asarray(want).astype(np.float64), rtol=1e-3)
