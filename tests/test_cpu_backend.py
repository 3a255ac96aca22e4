"""The ``cpu`` backend: generated C++ kernels against the numpy executor.

Every result of ``CpuBackend`` is compared with the unoptimized op-by-op numpy
execution of the same graph (``NumpyBackend(optimize=False)``), the ground truth.

Tolerances (measured on 400k-800k inputs per function, wide and narrow ranges; the
stated bounds leave headroom):

* arithmetic, comparisons, casts, bitcasts, integer ops, sqrt, reciprocal, divide,
  hypot, logaddexp, min/max, rounding: **exact** (bit-identical incl. NaN and signed
  zeros: kernels are built with ``-ffp-contract=off``, no ``-ffast-math``);
* transcendentals (glibc libmvec vs numpy's own SIMD code), max ulp measured
  float32 / float64: exp 2/1, expm1 2/1, log 3/1, log1p 2/1, log2 2/1, log10 3/2,
  sin 1/0, cos 1/0, tan 3/1, asin 3/1, acos 2/1, atan 2/1, sinh 2/2, cosh 2/1,
  tanh 3/3, asinh 2/2, acosh 2/2, atanh 2/2, sigmoid 3/2, atan2 3/1, pow 1/1 ->
  tested at **4 ulp**; float16/bfloat16 results of them at **1 ulp** of the low dtype;
* reductions (sums in a different order: blocked SIMD partial sums vs numpy's pairwise
  summation): float64 1e-12, float32 1e-5, float16/bfloat16 2e-2 relative; integer
  and bool reductions, max/min, argmax/argmin exact;
* fused graphs mixing transcendentals and reductions: float32 1e-5 relative (plus 1e-6
  absolute where values cancel), float64 1e-12 unless float32 is involved.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import braze as bz
from braze.backends import cpu as cpu_mod
from braze.backends import csource
from braze.backends.cpu import CpuBackend, build, codegen
from braze.backends.numpy_backend import NumpyBackend
from braze.graph import dtypes as dt
from braze.graph.compiler import compile_graph
from braze.graph.node import Node, constant
from braze.graph.ops import OPS, PERMUTE, SLICE

from .helpers import elementwise_ops
from .test_compiler import RANDOM_GRAPH_EXAMPLES, build_program, programs

pytestmark = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")

REFERENCE = NumpyBackend(optimize=False)
# libm-computed ops (from their records) may differ from numpy's by a few ulp (libmvec)
TRANSCENDENTAL = {n for n, op in OPS.items() if op.libm} | {"sigmoid"}
ULP = 4
LOW = (dt.float16, dt.bfloat16)


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """This module tests the cpu backend itself: run it once, under cpu."""
    with bz.backend("cpu"):
        yield "cpu"


@pytest.fixture(scope="module")
def cpu() -> CpuBackend:
    return CpuBackend(skip_tiny=False)


# ---------------------------------------------------------------- comparison helpers
def _ordered(x: np.ndarray) -> np.ndarray:
    """Float bits mapped to integers that are consecutive in value order (ulp distance)."""
    if x.dtype in LOW:
        i = x.view(np.uint16).astype(np.int64)
        return np.where(i >= 0x8000, 0x8000 - i, i)
    it = np.int64 if x.dtype == np.float64 else np.int32
    i = x.view(it).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(it).min) - i, i)


def assert_same(got: np.ndarray, want: np.ndarray, what: str, ulp: int = 0) -> None:
    """Same dtype and shape; floats within ``ulp`` (NaN-ness and signed zeros exact when 0)."""
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind == "f" or got.dtype == dt.bfloat16:
        with np.errstate(invalid="ignore"):
            gn = np.isnan(got.astype(np.float64))
            wn = np.isnan(want.astype(np.float64))
        assert (gn == wn).all(), f"{what}: NaN at {np.where(gn != wn)[0][:5]}"
        ok = ~gn
        dist = np.abs(_ordered(got) - _ordered(want))[ok]
        if dist.size:
            worst = int(np.argmax(dist))
            assert dist.max() <= ulp, (f"{what}: {dist.max()} ulp at "
                                       f"{got[ok][worst]!r} vs {want[ok][worst]!r}")
    else:
        bad = got != want
        assert not bad.any(), f"{what}: {got[bad][:5]} != {want[bad][:5]}"


def run_both(make, backend: CpuBackend):
    """Evaluate the nodes ``make()`` builds on the cpu backend and on the reference."""
    a, b = make(), make()
    backend.evaluate(a)
    REFERENCE.evaluate(b)
    return [n.data for n in a], [n.data for n in b]


# ---------------------------------------------------------------- values
def edge_values(d: np.dtype) -> np.ndarray:
    if d == dt.bool_:
        return np.array([False, True])
    if d.kind in "iu":
        info = np.iinfo(d)
        bits = d.itemsize * 8
        v = {0, 1, 2, 3, 5, 7, bits - 1, bits, bits + 1, 100, info.max, info.max - 1, info.min,
             info.min + 1, -1, -2, -3, -7, -bits, -100}
        return np.array(sorted(x for x in v if info.min <= x <= info.max), dtype=d)
    f = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 0.1, 0.9, 100.0,
         -100.0, 1e-3, 20.0, -20.0, 88.0, -90.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-40,
         65504.0, 70000.0]
    with np.errstate(all="ignore"):
        return np.array(f, np.float64).astype(d)


def random_values(d: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if d == dt.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if d.kind in "iu":
        info = np.iinfo(d)
        return rng.integers(info.min, info.max, n, dtype=d, endpoint=True)
    r = rng.standard_normal(n) * np.exp(rng.uniform(-5, 5, n))
    with np.errstate(all="ignore"):
        return r.astype(np.float32).astype(d)


REAL_DTYPES = [d for d in dt.ALL if d.kind != "c"]


def _attrs(name: str, d: np.dtype) -> dict:
    return {"dtype": d} if name == "nextafter" else {}


# ---------------------------------------------------------------- (b) every elementwise op
@pytest.mark.parametrize("d", REAL_DTYPES, ids=str)
def test_every_elementwise_op_matches_numpy(cpu, d) -> None:
    """Each op of the table over every dtype of its domain, with edge values (NaN, inf,
    -0.0, denormals, INT_MIN/MAX, shifts past the width, division by zero, INT_MIN // -1)
    and random values; all unary ops are one multi-output kernel, all binary ops another
    (over every pair of edge values)."""
    ev = edge_values(d)
    xs = np.concatenate([ev, random_values(d, 600)])
    unary = elementwise_ops(1, d)
    a, b = run_both(lambda: _unary_nodes(xs, unary), cpu)
    for (name, _), g, w in zip(unary, a, b):
        assert_same(g, w, f"{name}[{d}]", _ulp(name, d))
    A, B = np.meshgrid(ev, ev, indexing="ij")
    r = random_values(d, 600, seed=1)
    xa, xb = np.concatenate([A.ravel(), r]), np.concatenate([B.ravel(), r[::-1]])
    binary = elementwise_ops(2, d)

    def nodes():
        x, y = constant(xa), constant(xb)
        return [Node(OPS[n], (x, y), _attrs(n, d), x.shape, res) for n, res in binary]

    a, b = run_both(nodes, cpu)
    for (name, _), g, w in zip(binary, a, b):
        assert_same(g, w, f"{name}[{d}]", _ulp(name, d))


def _unary_nodes(xs: np.ndarray, ops: list[tuple[str, np.dtype]]) -> list[Node]:
    x = constant(xs)
    return [Node(OPS[n], (x,), {}, xs.shape, r) for n, r in ops]


def _ulp(name: str, d: np.dtype) -> int:
    if name not in TRANSCENDENTAL:
        return 0
    return 1 if d in LOW else ULP


@pytest.mark.parametrize("d", [dt.float32, dt.int32, dt.float16, dt.uint8], ids=str)
def test_elementwise_ops_through_strided_views(cpu, d) -> None:
    """The nested (strided) loop shape: transposed and sliced operands."""
    vals = random_values(d, 24 * 41, seed=3).reshape(24, 41)
    vals[:2, :] = np.resize(edge_values(d), (2, 41))
    xt = vals.T[:40:2]  # non-contiguous
    yt = vals[::-1].T[1::2]
    ops = elementwise_ops(2, d)

    def nodes():
        x, y = constant(np.asarray(vals)), constant(np.asarray(vals[::-1].copy()))
        xv = Node(PERMUTE, (x,), {"axes": (1, 0)}, (41, 24), d)
        xv = Node(SLICE, (xv,), {"slices": ((0, 40, 2), (0, 24, 1))}, xt.shape, d)
        yv = Node(PERMUTE, (y,), {"axes": (1, 0)}, (41, 24), d)
        yv = Node(SLICE, (yv,), {"slices": ((1, 41, 2), (0, 24, 1))}, yt.shape, d)
        return [Node(OPS[n], (xv, yv), _attrs(n, d), xt.shape, r) for n, r in ops]

    a, b = run_both(nodes, cpu)
    for (name, _), g, w in zip(ops, a, b):
        assert_same(g, w, f"{name}[{d}] strided", _ulp(name, d))


def test_integer_edge_cases_are_numpys() -> None:
    imin = np.iinfo(np.int32).min
    a = bz.asarray(np.array([7, -7, imin, imin, 5, 0], np.int32))
    b = bz.asarray(np.array([0, 2, -1, 1, -2, 0], np.int32))

    @bz.compile
    def f(a, b):
        return (a // b, a % b, bz.bitwise_left_shift(a, b + 31),
                bz.bitwise_right_shift(a, b + 31))

    q, r, shl, shr = (np.asarray(v) for v in f(a, b))
    np.testing.assert_array_equal(q, [0, -4, imin, imin, -3, 0])  # x // 0 = 0, MIN // -1 = MIN
    np.testing.assert_array_equal(r, [0, 1, 0, 0, -1, 0])  # x % 0 = 0, sign of the divisor
    np.testing.assert_array_equal(shl, [imin, 0, 0, 0, -1610612736, 0])  # >= 32 bits: 0
    np.testing.assert_array_equal(shr, [0, -1, -2, -1, 0, 0])  # >= 32 bits: sign fill

    @bz.compile
    def g(p, e):
        return p ** e

    p = bz.asarray(np.array([2, -1, -1, 1, 0, 3, 0], np.int64))
    e = bz.asarray(np.array([-1, -3, -2, -5, -1, 40, 0], np.int64))
    wrapped = (3 ** 40) % 2 ** 64 - 2 ** 64  # int64 wraparound
    np.testing.assert_array_equal(np.asarray(g(p, e)), [0, -1, 1, 1, 0, wrapped, 1])


def test_casts_and_bitcasts_between_every_pair_of_dtypes(cpu) -> None:
    """Casts are exact, including float -> float16 (one rounding, also from float64) and
    -> bfloat16; float -> int only on values inside the target range (outside it, C and
    numpy are both implementation-defined)."""
    for src in REAL_DTYPES:
        xs = np.concatenate([edge_values(src), random_values(src, 500, seed=2)])
        if src.kind == "f" or src == dt.bfloat16:
            wide = np.random.default_rng(5).standard_normal(500) * 10.0 ** np.random.default_rng(
                6).uniform(-12, 12, 500)
            with np.errstate(all="ignore"):
                xs = np.concatenate([xs, wide.astype(src)])
        dsts = list(REAL_DTYPES)
        bits = [d for d in REAL_DTYPES if d.itemsize == src.itemsize and d != src]

        def nodes(xs=xs, dsts=dsts, bits=bits):
            x = constant(xs)
            return ([Node(OPS["cast"], (x,), {"dtype": d}, xs.shape, d) for d in dsts]
                    + [Node(OPS["bitcast"], (x,), {"dtype": d}, xs.shape, d) for d in bits])

        a, b = run_both(nodes, cpu)
        kinds = ["cast"] * len(dsts) + ["bitcast"] * len(bits)
        for kind, d, g, w in zip(kinds, dsts + bits, a, b):
            if kind == "cast" and d.kind in "iu" and (src.kind == "f" or src == dt.bfloat16):
                info = np.iinfo(d)
                f = xs.astype(np.float64)
                ok = np.isfinite(f) & (f > info.min - 1) & (f < info.max + 1)
                g, w = g[ok], w[ok]
            assert_same(g, w, f"{kind} {src} -> {d}")


# ---------------------------------------------------------------- (a) random graphs
@settings(max_examples=RANDOM_GRAPH_EXAMPLES, deadline=None, derandomize=True)
@given(programs())
def test_random_graphs_match_op_by_op_numpy(spec) -> None:
    cpu = CpuBackend(skip_tiny=False)
    outs = build_program(spec)
    cpu.evaluate([o._node for o in outs])
    ref = build_program(spec)
    REFERENCE.evaluate([o._node for o in ref])
    float32_inside = spec[0][0].dtype == np.float32 or any(s[0] == "softmax" for s in spec[1])
    for got, want in zip(outs, ref):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.dtype.kind == "f":
            tol = 1e-12 if got.dtype == np.float64 and not float32_inside else 1e-5
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)
    assert cpu.stats["numpy"] == 0  # every kernel ran as generated C++


# ---------------------------------------------------------------- (c) rows
def _softmax(x, axis):
    return bz.softmax(x, axis=axis)


def _layer_norm(x, axis):
    m = bz.mean(x, axis=axis, keepdims=True)
    v = bz.var(x, axis=axis, keepdims=True)
    return (x - m) / bz.sqrt(v + 1e-5) * 1.5 + 0.25


def _rms_norm(x, axis):
    return x / bz.sqrt(bz.mean(x * x, axis=axis, keepdims=True) + 1e-5)


def _logsumexp(x, axis):
    return bz.logsumexp(x, axis=axis)


def _argmax(x, axis):
    return bz.argmax(x, axis=axis)


def _argmin(x, axis):
    return bz.argmin(x, axis=axis)


ROW_FUNCS = [_softmax, _layer_norm, _rms_norm, _logsumexp, _argmax, _argmin]
ROW_TOL = {dt.float64: 1e-12, dt.float32: 1e-5, dt.float16: 2e-2, dt.bfloat16: 2e-2}


def _compare_rows(fn, data: np.ndarray, axis, dtype=None, min_native: int = 1) -> None:
    def make():
        x = bz.asarray(data)
        if dtype is not None:
            x = x.astype(dtype)
        return fn(x, axis)

    cpu = CpuBackend(skip_tiny=False)
    got = make()
    cpu.evaluate([got._node])
    want = make()
    REFERENCE.evaluate([want._node])
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    if g.dtype.kind in "iu":
        np.testing.assert_array_equal(g, w)
    else:
        tol = ROW_TOL[g.dtype]
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                   atol=tol * 0.1, equal_nan=True)
    assert cpu.stats["native"] >= min_native and cpu.stats["numpy"] == 0


@pytest.mark.parametrize("fn", ROW_FUNCS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "axis0"])
def test_row_kernels_match_numpy(fn, layout) -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((37, 53)).astype(np.float32) * 3
    base[3, 5] = base[3, 9]  # ties for argmax/argmin: the first index wins
    axis = -1
    if layout == "transposed":
        base = base.T
    elif layout == "strided":
        base = base[::2, 1::3]
    elif layout == "axis0":
        axis = 0
    _compare_rows(fn, base, axis)


@pytest.mark.parametrize("fn", ROW_FUNCS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("dtype", [bz.float64, bz.float16, bz.bfloat16], ids=str)
def test_row_kernels_in_other_float_dtypes(fn, dtype) -> None:
    data = np.random.default_rng(8).standard_normal((9, 130)).astype(np.float32)
    _compare_rows(fn, data, -1, dtype=dtype)


@pytest.mark.parametrize("fn", [_softmax, _logsumexp, _argmax], ids=lambda f: f.__name__)
def test_rows_with_nan_and_inf(fn) -> None:
    data = np.random.default_rng(9).standard_normal((6, 40)).astype(np.float32)
    data[1, 7] = np.nan
    data[2, 3] = np.inf
    data[3, :] = -np.inf
    data[4, 10] = np.nan
    data[4, 2] = np.nan
    _compare_rows(fn, data, -1)


def test_reductions_over_empty_and_0d_and_multiple_axes() -> None:
    cpu = CpuBackend(skip_tiny=False)
    rng = np.random.default_rng(10)
    cases = [
        (lambda x: bz.sum(x, axis=1), np.zeros((4, 0), np.float32)),  # 0 -> sum 0
        (lambda x: bz.mean(x, axis=1), np.zeros((4, 0), np.float32)),  # NaN
        (lambda x: bz.prod(x, axis=1), np.zeros((3, 0), np.int32)),  # 1
        (lambda x: bz.any(x, axis=1), np.zeros((3, 0), bool)),
        (lambda x: bz.all(x, axis=1), np.zeros((3, 0), bool)),
        (lambda x: bz.softmax(x, axis=1), np.zeros((0, 5), np.float32)),  # no rows
        (lambda x: bz.sum(x), np.float32(2.5).reshape(())),  # 0-d
        (lambda x: bz.max(x), np.float32(-1.5).reshape(())),
        (lambda x: bz.argmax(x), np.float32(3.0).reshape(())),
        (lambda x: bz.exp(x) + 1.0, np.float32(0.5).reshape(())),
        (lambda x: bz.sum(x, axis=(0, 2)), rng.standard_normal((5, 6, 7))),  # 2 reduced dims
        (lambda x: bz.max(x, axis=(0, 2), keepdims=True), rng.standard_normal((5, 6, 7))),
        (lambda x: bz.argmin(x), rng.standard_normal((5, 6, 7)).transpose(2, 0, 1)),
        (lambda x: bz.sum(x.astype(bz.int8), axis=0), rng.integers(-100, 100, (70, 3))),
        (lambda x: bz.prod(x, axis=-1), rng.integers(-3, 4, (4, 40)).astype(np.int64)),
        (lambda x: bz.max(x, axis=-1), rng.integers(0, 2, (4, 9)).astype(bool)),
        (lambda x: bz.min(x, axis=-1), rng.integers(0, 2, (4, 9)).astype(bool)),
        (lambda x: bz.max(x, axis=0), rng.integers(0, 255, (33, 5)).astype(np.uint8)),
        (lambda x: bz.sum(x, axis=-1), rng.integers(0, 2, (4, 9)).astype(bool)),
        (lambda x: bz.any(x > 0.5, axis=-1), rng.standard_normal((8, 16))),
        (lambda x: bz.logsumexp(x, axis=()), rng.standard_normal((3, 4))),  # over no axes
        (lambda x: bz.sum(x, axis=()) * 2.0, rng.integers(-5, 5, (3, 4)).astype(np.int16)),
        (lambda x: bz.max(x, axis=()) + bz.mean(x, axis=()), rng.standard_normal(7)),
    ]
    for i, (fn, data) in enumerate(cases):
        got = fn(bz.asarray(data))
        want = fn(bz.asarray(data))
        cpu.evaluate([got._node])
        REFERENCE.evaluate([want._node])
        g, w = np.asarray(got), np.asarray(want)
        assert g.dtype == w.dtype and g.shape == w.shape, i
        np.testing.assert_allclose(g, w, rtol=1e-12 if g.dtype == np.float64 else 1e-5,
                                   equal_nan=True, err_msg=f"case {i}")
    assert cpu.stats["numpy"] == 0


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 2100), cols=st.integers(1, 600), seed=st.integers(0, 99),
       case=st.sampled_from(["sum", "mean", "fused", "int", "f64", "view", "bcast", "epilogue"]))
@example(rows=1024, cols=2048, seed=0, case="sum")  # several lane blocks, 8 output blocks
@example(rows=2049, cols=257, seed=1, case="mean")  # a partial lane block, a 1-output tail
def test_column_sums_give_the_row_kernels_bits(rows, cols, seed, case) -> None:
    """A sum down columns (``x.sum(axis=0)``: the column kernel, up to 256 outputs at a
    time reading rows) gives exactly the reference tier's bits -- braze's blocked order --
    with fused element values, integer and float64 sums, a transposed view, a broadcast
    operand, and row-level values after the sum."""
    cpu = CpuBackend(skip_tiny=False)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    v = rng.standard_normal((rows, 1)).astype(np.float32)
    fns = {
        "sum": lambda a: bz.sum(a, axis=0),
        "mean": lambda a: bz.mean(a, axis=0),
        "fused": lambda a: bz.sum(bz.exp(a) * 2.0 - a, axis=0),
        "int": lambda a: bz.sum((a * 100.0).astype(bz.int32), axis=0),
        "f64": lambda a: bz.sum(a.astype(bz.float64) ** 2, axis=0),
        "view": lambda a: bz.sum(bz.asarray(np.ascontiguousarray(x.T)).T, axis=0),
        "bcast": lambda a: bz.sum(a * bz.asarray(v), axis=0),
        "epilogue": lambda a: bz.sqrt(bz.sum(a * a, axis=0) + 1.0) * 3.0,
    }
    got, want = fns[case](bz.asarray(x)), fns[case](bz.asarray(x))
    cpu.evaluate([got._node])
    REFERENCE.evaluate([want._node])
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_array_equal(g, w)
    assert cpu.stats["numpy"] == 0


@pytest.mark.parametrize("shape,axes", [((5, 6, 7), (0, 2)), ((300, 2, 300), (0, 2)),
                                        ((700, 600), None)], ids=str)
def test_rows_over_several_unmergeable_reduced_dims(shape, axes) -> None:
    """Reduced dims that strides cannot merge: nested reduce and element loops, with
    threads across rows or (a full reduction) inside the single row."""
    data = np.random.default_rng(12).standard_normal(shape).astype(np.float32)

    def view(x):
        return x[:, 1:301] if axes is None else x  # a slice: the two dims cannot merge

    def centered(x, _):
        return view(x) - bz.mean(view(x), axis=axes, keepdims=True)

    def total(x, _):
        return bz.sum(view(x), axis=axes)

    def extreme(x, _):
        return bz.argmax(view(x)) if axes is None else bz.max(view(x), axis=axes)

    for fn in (centered, total, extreme):
        _compare_rows(fn, data, None)
    x = bz.asarray(data)
    # (a reduction over a permuted space leaves the centering to an elementwise kernel)
    rows = [k for k in compile_graph([centered(x, None)._node])[0].kernels if k.n_red]
    assert rows and all(len(csource.normalize(k).red) == 2 for k in rows)


def test_big_single_row_and_many_rows_use_threads_and_agree() -> None:
    """One big row (threads inside the row) and many rows (threads across rows)."""
    rng = np.random.default_rng(11)
    big = rng.standard_normal(1 << 20).astype(np.float32)
    _compare_rows(lambda x, a: bz.sum(x, axis=a), big, 0)
    _compare_rows(_softmax, big.reshape(1, -1), -1)
    _compare_rows(_argmax, big, 0)
    _compare_rows(lambda x, a: bz.max(x, axis=a), big, 0)
    _compare_rows(_layer_norm, big.reshape(1024, 1024), -1)
    _compare_rows(_softmax, big[:100_000].reshape(1, -1), -1)  # one row, threads, row cache
    _compare_rows(_softmax, big[:5000].reshape(1, -1), -1)  # one small row, row cache
    for threads in (1, 3):
        cpu = CpuBackend(skip_tiny=False, num_threads=threads)
        x = bz.asarray(big.reshape(512, 2048))
        got = bz.softmax(x * 2.0, axis=-1)
        cpu.evaluate([got._node])
        want = np.exp(big.reshape(512, 2048) * 2.0 - (big.reshape(512, 2048) * 2.0).max(
            -1, keepdims=True))
        np.testing.assert_allclose(np.asarray(got), want / want.sum(-1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)


def test_large_outputs_use_streaming_stores_correctly() -> None:
    """Outputs above STREAM_BYTES take the non-temporal store path (unaligned heads/tails)."""
    n = codegen.STREAM_BYTES // 4 + 37
    x = np.linspace(-3, 3, n + 1, dtype=np.float32)[1:]  # a misaligned input view
    cpu = CpuBackend(skip_tiny=False)
    out = bz.tanh(bz.asarray(x)) * 0.5 + 1.0
    cpu.evaluate([out._node])
    np.testing.assert_allclose(np.asarray(out), np.tanh(x) * 0.5 + 1.0, rtol=1e-6)


def test_tiered_build_runs_cold_small_kernels_with_numpy_until_built(tmp_path,
                                                                     monkeypatch) -> None:
    """bz.eval with tiering: a small kernel no cache holds runs with the numpy executor
    while a background thread builds it, then natively; a large one builds at once;
    compiled functions never defer."""
    from braze.backends import cpu as cpu_mod

    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    cpu = CpuBackend(skip_tiny=False, tiered=True)
    x = np.linspace(-2, 2, 600, dtype=np.float32).reshape(20, 30)
    want = np.exp(x * 1.7 - (x * 1.7).max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)

    def run():
        out = bz.softmax(bz.asarray(x) * 1.7, axis=-1)
        cpu.evaluate([out._node])
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-7)

    run()
    assert cpu.stats == {"native": 0, "numpy": 1} and len(cpu._deferred) == 1
    for _, future in list(cpu._deferred.values()):
        assert isinstance(future.result(timeout=120), int)  # the background build's handle
    run()
    assert cpu.stats == {"native": 1, "numpy": 1} and not cpu._deferred
    big = bz.tanh(bz.asarray(np.ones(cpu_mod.COLD_ELEMENTS, np.float32))) * 3.0
    cpu.evaluate([big._node])
    assert cpu.stats["native"] == 2  # large: built at once
    np.testing.assert_allclose(np.asarray(big), np.tanh(1.0) * 3.0, rtol=1e-6)


# ---------------------------------------------------------------- (d) structural names
def test_same_structure_at_two_shapes_is_one_symbol_and_one_build(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    builds = []
    real = build.build

    def counting(source, symbol, force=False):
        builds.append(symbol)
        return real(source, symbol, force)

    monkeypatch.setattr(build, "build", counting)

    def kernel(shape, scale):
        x = bz.asarray(np.ones(shape, np.float32))
        out = bz.softmax(x * scale, axis=-1)
        s, _ = compile_graph([out._node])
        return out, s.kernels[0]

    out1, k1 = kernel((8, 16), 2.0)
    out2, k2 = kernel((64, 300), 3.0)  # another shape and another constant
    g1, g2 = codegen.generate(k1), codegen.generate(k2)
    assert g1.symbol == g2.symbol and g1.source == g2.source
    assert k1.shape != k2.shape
    cpu = CpuBackend(skip_tiny=False)
    cpu.evaluate([out1._node])
    cpu.evaluate([out2._node])
    builds = [b for b in builds if b != "bz_thread_ids"]  # (the worker placement's kernel)
    assert builds == [g1.symbol]  # built once, then loaded from the in-process table
    np.testing.assert_allclose(np.asarray(out2), np.full((64, 300), 1 / 300), rtol=1e-6)
    assert len([p for p in tmp_path.glob("*.so") if not p.name.startswith("bz_thread_ids")]) == 1


def test_generated_source_is_minimal_and_shape_free() -> None:
    x = bz.asarray(np.ones((1000, 3), np.float32))
    s, _ = compile_graph([bz.exp(x * 2.0)._node])
    g = codegen.generate(s.kernels[0])
    assert "#include <cstdint>" in g.source
    assert "<vector>" not in g.source and "<complex>" not in g.source
    body = g.source.split("(void** bufs, const int64_t* args) {")[1]
    assert "3000" not in body and "1000" not in body  # sizes are arguments
    assert "fast-math" not in " ".join(build.FLAGS)
    assert g.symbol.startswith("bz_") and f"void {g.symbol}(void** bufs" in g.source


@pytest.mark.parametrize("reduce", [None, 0, 1])
def test_values_the_same_at_every_element_are_computed_once_before_the_loops(reduce) -> None:
    """A broadcast scalar (a traced step count's power, as an optimizer's bias correction
    1 - 0.9 ** t) and the elementwise ops of it alone are computed once, before the loops,
    not per element (elementwise, row and column kernels); results equal numpy's (float32,
    rtol 1e-6)."""
    from braze.arrays.array import Array
    from braze.graph.node import Node
    from braze.graph.ops.leaves import PARAMETER

    xs = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)

    def f(x, t):
        y = x / (1.0 - 0.9 ** t)
        return y if reduce is None else bz.sum(y * y, axis=reduce)

    traced = Array(Node(PARAMETER, (), {"index": 0}, (), np.dtype(np.float32)))
    s, _ = compile_graph([f(bz.asarray(xs), traced)._node])
    (k,) = [k for k in s.kernels if "divide" in k.ops]
    body = codegen.generate(k).source.split("(void** bufs, const int64_t* args) {")[1]
    before, loops = body.split("for (", 1)
    subtract = re.compile(r"const float v\d+ = \(float\)\(v\d+ - v\d+\);")
    assert subtract.search(before) and not subtract.search(loops)
    cpu = CpuBackend(skip_tiny=False)
    out = f(bz.asarray(xs), bz.asarray(np.float32(3.0)))
    cpu.evaluate([out._node])
    want = xs / (np.float32(1) - np.float32(0.9) ** np.float32(3))
    np.testing.assert_allclose(np.asarray(out), want if reduce is None else
                               (want * want).sum(reduce), rtol=1e-6)
    assert cpu.stats["native"] >= 1 and cpu.stats["numpy"] == 0


def test_complex_kernels_are_unsupported_and_run_with_numpy() -> None:
    z = np.array([1 + 2j, 3 - 1j], np.complex64)
    x = bz.asarray(z)
    s, _ = compile_graph([(x * x + 1)._node])
    with pytest.raises(codegen.Unsupported):
        codegen.generate(s.kernels[0])
    cpu = CpuBackend(skip_tiny=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = x * x + 1
        cpu.evaluate([out._node])
    np.testing.assert_allclose(np.asarray(out), z * z + 1)
    assert cpu.stats["numpy"] == 1 and cpu.stats["native"] == 0



def test_an_op_listed_unsupported_is_refused_and_runs_with_numpy(monkeypatch) -> None:
    monkeypatch.setitem(csource.UNSUPPORTED, "exp", "listed by the test")
    x = bz.asarray(np.linspace(-1, 1, 64, dtype=np.float32))
    s, _ = compile_graph([(bz.exp(x) + 1)._node])
    with pytest.raises(codegen.Unsupported, match="exp: listed by the test"):
        codegen.generate(s.kernels[0])
    cpu = CpuBackend(skip_tiny=False)
    out = bz.exp(x) + 1
    cpu.evaluate([out._node])
    np.testing.assert_allclose(np.asarray(out), np.exp(np.asarray(x)) + 1, rtol=1e-6)
    assert cpu.stats["numpy"] == 1 and cpu.stats["native"] == 0

# ---------------------------------------------------------------- (e) the cache
def _chain_source(n: int = 64) -> codegen.GeneratedKernel:
    x = bz.asarray(np.linspace(-1, 1, n, dtype=np.float32))
    s, _ = compile_graph([(bz.tanh(x) * 0.5 + bz.exp(-x * x))._node])
    return codegen.generate(s.kernels[0])


def test_corrupt_or_foreign_cache_entries_are_rebuilt_never_loaded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    g = _chain_source()
    lib = build.build(g.source, g.symbol)
    good = lib.read_bytes()
    sidecar = lib.with_suffix(".sha256")
    # 1. garbage in place of the library (replaced, as another process would): rebuilt
    tmp = tmp_path / "garbage"
    tmp.write_bytes(b"\x7fELF not really a library")
    os.replace(tmp, lib)
    assert build.build(g.source, g.symbol).read_bytes() == good
    # 2. a library that does not match its sidecar (a foreign entry): rebuilt
    sidecar.write_text("0" * 64 + f" {g.symbol}\n")
    mtime = lib.stat().st_mtime_ns
    build.build(g.source, g.symbol)
    assert lib.stat().st_mtime_ns != mtime or lib.read_bytes() == good
    assert sidecar.read_text().split()[0] != "0" * 64
    # 3. no sidecar at all: rebuilt
    sidecar.unlink()
    build.build(g.source, g.symbol)
    assert sidecar.exists()
    # 3b. zero-length and truncated libraries (a crash mid-copy): rebuilt
    for data in (b"", good[: len(good) // 3]):
        lib.write_bytes(data)
        assert build.build(g.source, g.symbol).read_bytes() == good
    # 4. the loader path: a checksum-valid entry that does not load is rebuilt
    monkeypatch.setattr(build, "_loaded", {})
    tmp.write_bytes(b"junk")
    os.replace(tmp, lib)
    sidecar.write_text(build._checksum(lib) + f" {g.symbol}\n")  # checksum matches the junk
    h = build.load(g.source, g.symbol)
    assert isinstance(h, int) and lib.read_bytes() == good


def test_a_cache_that_fails_under_a_build_gives_a_private_build_with_one_warning(
        tmp_path, monkeypatch) -> None:
    """A full disk or a cache directory made read-only while running (simulated: every
    write into the cache raises ENOSPC), and one deleted while running: the kernels still
    build and load, once, with one warning."""
    import errno

    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_PRIVATE", None)
    g = _chain_source()
    build.build(g.source, g.symbol)
    shutil.rmtree(tmp_path / "cache")  # deleted while running: recreated
    assert build.build(g.source, g.symbol, force=True).exists()
    real = build._atomic_write

    def full(path, data):  # type: ignore[no-untyped-def]
        if str(path).startswith(str(tmp_path / "cache")):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(build, "_atomic_write", full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        libs = [build.build(g.source, g.symbol, force=True) for _ in range(2)]
    msgs = [str(w.message) for w in caught if "kernel cache failed" in str(w.message)]
    assert len(msgs) == 1 and "No space left" in msgs[0]
    assert all(p.exists() and not str(p).startswith(str(tmp_path)) for p in libs)
    monkeypatch.setattr(build, "_loaded", {})
    assert isinstance(build.load(g.source, g.symbol), int)


_CONCURRENT = textwrap.dedent("""
    import sys
    import numpy as np
    import braze as bz
    from braze.backends.cpu import CpuBackend
    x = bz.asarray(np.linspace(-1, 1, 4096, dtype=np.float32))
    out = bz.tanh(x) * 0.25 + bz.exp(-x * x) * float(sys.argv[1])
    CpuBackend(skip_tiny=False).evaluate([out._node])
    want = np.tanh(np.asarray(x)) * 0.25 + np.exp(-np.asarray(x) ** 2) * float(sys.argv[1])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    print("ok")
""")


@pytest.mark.parametrize("n", [2, 6])
def test_processes_building_the_same_kernel_all_succeed(tmp_path, n: int) -> None:
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(i + 2)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    libs = [p for p in (tmp_path / "cache").glob("*.so")
            if not p.name.startswith("bz_thread_ids")]  # (the worker placement's kernel)
    assert len(libs) == 1  # one entry, complete
    assert not list((tmp_path / "cache").glob(".tmp-*"))
    assert build._entry_ok(libs[0], libs[0].with_suffix(".sha256"))


_EXIT_MID_BUILD = textwrap.dedent("""
    import threading, time
    from braze.backends.cpu import build
    src = "".join(f"int g{i}(int x) {{ return x * {i}; }}\\n" for i in range(30000))
    threading.Thread(target=lambda: build.build(src, "bz_exit_test"), daemon=True).start()
    while not build._running:
        time.sleep(0.01)
    print(next(iter(build._running)).pid)
""")


def test_a_process_exiting_mid_build_leaves_no_compiler_and_no_temporary(tmp_path) -> None:
    """A kernel still building in a background thread when the interpreter exits: its
    compiler (driver, cc1plus and all: their own process group) is stopped and its
    temporary output removed (it once stayed behind as .tmp-*.so)."""
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", _EXIT_MID_BUILD], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pgid = int(r.stdout.split()[-1])
    for _ in range(100):  # the kill is asynchronous: give the kernel a moment to reap
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the compiler's process group {pgid} outlived its process")
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_a_cache_directory_that_cannot_exist_is_replaced_with_one_warning(tmp_path) -> None:
    """BRAZE_CACHE_DIR under a regular file (it once raised NotADirectoryError from the
    first evaluation): one warning, a private directory for the process, right answers."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code = textwrap.dedent("""
        import warnings
        import numpy as np
        import braze as bz
        from braze.backends.cpu import CpuBackend, build
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = bz.asarray(np.linspace(-1, 1, 4096, dtype=np.float32))
            out = bz.tanh(x) * 0.5 + 2.0
            CpuBackend(skip_tiny=False).evaluate([out._node])
            y = bz.exp(x) - 1.0
            CpuBackend(skip_tiny=False).evaluate([y._node])
        np.testing.assert_allclose(np.asarray(out), np.tanh(np.asarray(x)) * 0.5 + 2.0,
                                   rtol=1e-6)
        msgs = [str(w.message) for w in caught if "cannot be used" in str(w.message)]
        assert len(msgs) == 1, msgs
        assert build.cache_dir().is_dir() and "braze-kernels-" in str(build.cache_dir())
        print("ok", build.cache_dir())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, BRAZE_CACHE_DIR=str(blocker / "kernels")))
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    assert not Path(r.stdout.split()[1]).exists()  # removed at exit


_KILLED_MID_BUILD = textwrap.dedent("""
    import threading, time
    from braze.backends.cpu import build
    src = "".join(f"int g{i}(int x) {{ return x * {i}; }}\\n" for i in range(200000))
    threading.Thread(target=lambda: build.build(src, "bz_killed_test"), daemon=True).start()
    while not build._running:
        time.sleep(0.01)
    print(next(iter(build._running)).pid, flush=True)
    time.sleep(600)
""")


def _group_gone(pgid: int, seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_build_dies_with_the_process_that_started_it_even_by_sigkill(tmp_path) -> None:
    """SIGKILL leaves no atexit: the build's watcher sees its parent gone and kills the
    compiler's whole process group (driver, cc1plus) within about a second."""
    import signal

    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.Popen([sys.executable, "-c", _KILLED_MID_BUILD], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(p.stdout.readline())
        time.sleep(0.3)
        os.killpg(pgid, 0)  # compiling now
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert _group_gone(pgid, 10), f"the compiler's group {pgid} outlived its SIGKILLed parent"


def test_a_build_over_its_time_or_memory_bound_fails_cleanly(tmp_path, monkeypatch) -> None:
    """BRAZE_BUILD_TIMEOUT: the compiler's group is killed and a BuildError names the
    bound; BRAZE_BUILD_MEMORY_MB: the compiler runs out of address space and the error
    names the variable (the cpu backend then runs numpy's executor, with one warning)."""
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path / "cache"))
    slow = tmp_path / "slow-cxx"
    slow.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo slow 1.0; exit 0; fi\n"
                    "sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setenv("BRAZE_CXX", str(slow))
    monkeypatch.setenv("BRAZE_BUILD_TIMEOUT", "1")
    t0 = time.perf_counter()
    with pytest.raises(build.BuildError, match="took over 1 s .BRAZE_BUILD_TIMEOUT"):
        build.build('extern "C" int f() { return 1; }', "bz_slow_test")
    assert time.perf_counter() - t0 < 30
    monkeypatch.delenv("BRAZE_CXX")
    monkeypatch.delenv("BRAZE_BUILD_TIMEOUT")
    if build.compiler() is None:
        return
    monkeypatch.setenv("BRAZE_BUILD_MEMORY_MB", "16")
    with pytest.raises(build.BuildError, match="BRAZE_BUILD_MEMORY_MB"):
        build.build('extern "C" int f() { return 2; }', "bz_small_memory_test")
    monkeypatch.setenv("BRAZE_BUILD_MEMORY_MB", "x")
    with pytest.raises(build.BuildError, match="must be numbers"):
        build.build('extern "C" int f() { return 3; }', "bz_bad_limit_test")


# ---------------------------------------------------------------- (f) build failures
def test_build_failure_falls_back_to_numpy_with_exactly_one_warning(tmp_path, monkeypatch):
    fake = tmp_path / "fake-cxx"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake-cxx 1.0; exit 0; fi\n"
                    "echo 'fake-cxx: error: this compiler always fails' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BRAZE_CXX", str(fake))
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path / "cache"))
    cpu = CpuBackend(skip_tiny=False)
    data = np.linspace(-2, 2, 300, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = []
        for scale in (2.0, 3.0, 4.0):  # new schedules each time, one kernel structure
            x = bz.asarray(data)
            out = bz.tanh(x * scale) + 1.0
            cpu.evaluate([out._node])
            results.append(np.asarray(out))
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    assert "failed to build" in msgs[0] and "this compiler always fails" in msgs[0]
    x = bz.asarray(data)
    s, _ = compile_graph([(bz.tanh(x * 2.0) + 1.0)._node])
    assert s.kernels[0].name in msgs[0]
    for scale, r in zip((2.0, 3.0, 4.0), results):
        # tanh within 1 ulp of its value near -1 (numpy's float32 tanh is 1 ulp off for some
        # of these inputs; braze's is correctly rounded there), which the +1 cancels
        np.testing.assert_allclose(r, np.tanh(data * scale) + 1.0, rtol=1e-6, atol=2**-24)
    assert cpu.stats["native"] == 0 and cpu.stats["numpy"] == 3


def test_missing_compiler_is_a_build_error(monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_CXX", "/nonexistent/c++")
    assert build.compiler() is None
    with pytest.raises(build.BuildError, match="no C\\+\\+ compiler"):
        build.build("int x;", "bz_x")


# ---------------------------------------------------------------- the native launcher
def test_launcher_refuses_what_it_cannot_use_without_copying(tmp_path, monkeypatch) -> None:
    from braze import _core

    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    g = _chain_source(16)
    h = build.load(g.source, g.symbol)
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    out = np.empty(16, np.float32)
    x16 = np.ascontiguousarray(x[::2])
    xb = bz.asarray(x16)
    (k,) = compile_graph([(bz.tanh(xb) * 0.5 + bz.exp(-xb * xb))._node])[0].kernels
    assert codegen.generate(k).symbol == g.symbol
    args = codegen.kernel_args(k, num_threads=1)
    slots = codegen.kernel_slots(k)
    assert len(slots) == 2
    _core.launch(h, [x16, out], args)
    np.testing.assert_allclose(out, np.tanh(x16) * 0.5 + np.exp(-x16 * x16), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.launch(h, [x[::2], out], args)  # never silently copied
    with pytest.raises((IndexError, ValueError)):
        _core.launch(10 ** 6, [x16, out], args)
    with pytest.raises(RuntimeError, match="no symbol"):
        _core.load_kernel(str(build.build(g.source, g.symbol)), "bz_nope")
    with pytest.raises(RuntimeError, match="cannot load"):
        _core.load_kernel(str(tmp_path / "missing.so"), g.symbol)


def test_num_threads_setting(monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_NUM_THREADS", "3")
    assert cpu_mod.default_num_threads() == 3
    assert CpuBackend().num_threads == 3
    monkeypatch.setenv("BRAZE_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="BRAZE_NUM_THREADS"):
        cpu_mod.default_num_threads()


def test_cpu_is_the_default_backend_where_a_compiler_exists() -> None:
    env = dict(os.environ)
    env.pop("BRAZE_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", "import braze as bz; print(bz.backends.current()"
                        ".name, bz.backends.available())"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "cpu" and "'numpy', 'cpu'" in r.stdout


def test_buffer_pool_reuses_idle_buffers_only() -> None:
    from braze.backends.cpu.pool import BufferPool

    pool = BufferPool(64 << 20)
    a = pool.alloc(4 << 20)
    b = pool.alloc(4 << 20)
    assert a.base is not b.base
    view = a.view(np.float32)[10:20]
    del a
    c = pool.alloc(4 << 20)  # a's buffer is still referenced through `view`
    assert c.base is not view.base and c.base is not b.base
    del view, c
    d = pool.alloc(4 << 20)
    assert pool.hits == 1 and d.nbytes == 4 << 20
    small = pool.alloc(100)
    assert small.base is None  # small requests are plain allocations
    pool.clear()
    assert pool.held_bytes <= 2 * (4 << 20)  # b and d are still in use
    del b, d
    pool.clear()
    assert pool.held_bytes == 0


def test_source_file_of_each_entry_is_kept_for_reading(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    g = _chain_source(8)
    lib = build.build(g.source, g.symbol)
    assert Path(lib.with_suffix(".cpp")).read_text() == g.source


_FORK = textwrap.dedent("""
    import os
    import numpy as np
    import braze as bz
    x = bz.asarray(np.linspace(-1, 1, 1 << 20, dtype=np.float32))
    bz.eval(bz.sum(bz.tanh(x) * 2.0))  # OpenMP threads started in the parent
    pid = os.fork()
    if pid == 0:
        y = np.linspace(0, 1, 1 << 20, dtype=np.float32)
        got = float(bz.sum(bz.tanh(bz.asarray(y)) * 2.0))
        want = float(np.sum(np.tanh(y) * 2.0, dtype=np.float64))
        ok = abs(got - want) <= 1e-4 * abs(want)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_kernels_run_in_a_forked_child() -> None:
    """libgomp's thread pool does not survive fork(): children run kernels on one thread."""
    env = dict(os.environ, BRAZE_BACKEND="cpu")
    r = subprocess.run([sys.executable, "-c", _FORK], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stderr


def test_kernel_cache_evicts_least_recently_used(tmp_path, monkeypatch) -> None:
    import time

    from braze.backends.cpu import build as cpu_build

    if cpu_build.compiler() is None:
        pytest.skip("no C++ compiler")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("BRAZE_CACHE_MAX_ENTRIES", "4")
    paths = []
    for i in range(4):
        src = f'#include <cstdint>\nextern "C" void bz_evict{i}(void**, const int64_t*) {{}}\n'
        paths.append(cpu_build.build(src, f"bz_evict{i}"))
        t = time.time() - 100 + i  # distinct, increasing "last used" times
        os.utime(paths[-1], (t, t))
    src0 = '#include <cstdint>\nextern "C" void bz_evict0(void**, const int64_t*) {}\n'
    cpu_build.build(src0, "bz_evict0")  # a hit: kernel 0 becomes the most recently used
    src = '#include <cstdint>\nextern "C" void bz_evict9(void**, const int64_t*) {}\n'
    cpu_build.build(src, "bz_evict9")  # the 5th entry: over the limit, evict down to 3
    left = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.so"))
    assert left == ["bz_evict0", "bz_evict3", "bz_evict9"]
    assert not list(tmp_path.glob("bz_evict1-*"))  # its checksum and source went too


def test_compiler_version_is_remembered_per_binary(tmp_path, monkeypatch) -> None:
    """A new process that only loads cached kernels never runs ``c++ --version``: the
    version line is kept in the cache under the binary's path, size and mtime, and a
    changed binary (another mtime) runs it again."""
    if build.compiler() is None:
        pytest.skip("no C++ compiler")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    fake = tmp_path / "fakecxx"
    fake.write_text("#!/bin/sh\necho 'fake c++ 1.0'\necho second line\n")
    fake.chmod(0o755)
    cmd = (str(fake),)
    build.compiler_version.cache_clear()
    assert build.compiler_version(cmd) == "fake c++ 1.0"
    assert "fake c++ 1.0" in (tmp_path / "compilers.txt").read_text()
    build.compiler_version.cache_clear()

    def no_run(*a, **k):
        raise AssertionError("the compiler ran although its version was remembered")

    monkeypatch.setattr(subprocess, "run", no_run)
    assert build.compiler_version(cmd) == "fake c++ 1.0"  # from compilers.txt
    monkeypatch.undo()
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    fake.write_text("#!/bin/sh\necho 'fake c++ 2.0'\n")
    os.utime(fake, ns=(1, 10**18))  # a new binary: another size and mtime
    build.compiler_version.cache_clear()
    assert build.compiler_version(cmd) == "fake c++ 2.0"
    (tmp_path / "compilers.txt").write_bytes(b"\xff\xfe garbage")  # corrupt: ignored
    build.compiler_version.cache_clear()
    assert build.compiler_version(cmd) == "fake c++ 2.0"
    build.compiler_version.cache_clear()


def test_autotuning_times_thread_counts_once_and_remembers(tmp_path, monkeypatch) -> None:
    from braze.backends.cpu import CpuBackend, autotune
    from braze.backends.cpu import build as cpu_build

    if cpu_build.compiler() is None:
        pytest.skip("no C++ compiler")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "busy", lambda: False)  # an idle machine
    autotune.reset_memory()
    try:
        b = CpuBackend(num_threads=2)
        x = np.linspace(-3, 3, 1 << 17, dtype=np.float32)

        def run(backend):
            out = bz.tanh(bz.asarray(x)) * 0.5 + 1.0
            backend.evaluate([out._node])
            return np.asarray(out)

        np.testing.assert_allclose(run(b), np.tanh(x) * 0.5 + 1.0, rtol=1e-6)
        table = json.loads((tmp_path / "autotune.json").read_text())["entries"]
        assert len(table) == 1 and list(table.values())[0] in (1, 2)
        calls = []
        monkeypatch.setattr(autotune, "tune", lambda *a, **k: calls.append(a) or 1)
        run(CpuBackend(num_threads=2))  # a new backend instance: the choice is remembered
        assert calls == []
        monkeypatch.setenv("BRAZE_AUTOTUNE", "0")
        autotune.reset_memory()
        (tmp_path / "autotune.json").unlink()
        np.testing.assert_allclose(run(CpuBackend(num_threads=2)), np.tanh(x) * 0.5 + 1.0,
                                   rtol=1e-6)
        assert calls == [] and not (tmp_path / "autotune.json").exists()
    finally:
        autotune.reset_memory()


def test_autotuning_on_a_busy_machine_is_not_persisted(tmp_path, monkeypatch) -> None:
    from braze.backends.cpu import autotune

    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "busy", lambda: True)
    autotune.reset_memory()
    try:
        assert autotune.tune("bz_k", [2, 7], [1, 2], lambda threads: None) in (1, 2)
        assert autotune.lookup("bz_k", [2, 7]) is not None  # this process remembers it
        assert not (tmp_path / "autotune.json").exists()
    finally:
        autotune.reset_memory()


# ---------------------------------------------------------------- native library kernels
@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(0, 70), n=st.integers(1, 21), isa=st.sampled_from(
    [0, 1, 2, None]), threads=st.sampled_from([1, 2]))
@example(m=60, k=0, n=27, isa=None, threads=2)  # the GEMM path's empty sums (was SIGFPE)
@example(m=104, k=70, n=21, isa=None, threads=2)
def test_matvec_kernel_every_isa_matches_numpy(m, k, n, isa, threads) -> None:
    """The replay programs' float32 x @ W.T on each instruction-set path (capped at build
    time; AVX2/AVX-512 need the host): the streaming matvec up to 8 rows, the GEMM above
    (AVX-512 and AVX2; the matvec loop elsewhere), any K (tails of the 16/8-lane loops),
    M (of the 32- and 16-row blocks) and N (of the 4-, 6- and 8-row blocks), 1 or 2
    threads: within
    K * 1e-6 of float64 (unit normals)."""
    from braze.backends.cpu import matvec

    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k)))
    got = matvec.matvec(x, w, threads, isa)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-5, atol=max(k, 1) * 1e-6)
    if threads == 2:  # one chain per output whatever the split: identical on 1 thread
        np.testing.assert_array_equal(got, matvec.matvec(x, w, 1, isa))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(9, 90), k=st.integers(0, 70), n=st.integers(1, 40),
       isa=st.sampled_from([1, 2, None]), threads=st.sampled_from([1, 2]))
@example(m=48, k=37, n=19, isa=None, threads=2)  # x.T of whole 16-float rows: read in place
@example(m=10, k=37, n=40, isa=None, threads=2)  # few rows of x: W's rows in panels, y^T
@example(m=70, k=20, n=10, isa=None, threads=2)  # few rows of W: the threads share x's panels
def test_gemm_takes_transposed_operands_with_the_same_bits(m, k, n, isa, threads) -> None:
    """The GEMM path given x as x.T (K, M) and/or W as W.T (K, N) (a backward pass's
    ``X.T @ g`` and ``g @ W``): it transposes them in blocks itself and sums every output
    in the same order, so each layout gives the bits of the plain one; so do the swapped
    roles (W's rows in panels when x has few rows) and any thread count, within K * 1e-6
    of float64."""
    from braze.backends.cpu import matvec

    if not matvec.gemm_available(isa):
        pytest.skip("no GEMM path at this ISA here")
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k)))
    plain = matvec.matvec(x, w, threads, isa)
    np.testing.assert_allclose(plain, x.astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-5, atol=max(k, 1) * 1e-6)
    np.testing.assert_array_equal(matvec.matvec(x, w, 1, isa), plain)
    xt, wt = np.ascontiguousarray(x.T), np.ascontiguousarray(w.T)
    for a, b, tx, tw in [(xt, w, True, False), (x, wt, False, True), (xt, wt, True, True)]:
        np.testing.assert_array_equal(matvec.matvec(a, b, threads, isa, tx=tx, tw=tw), plain)
    with pytest.raises(ValueError, match="transposed operands need the GEMM path"):
        matvec.matvec(np.ones((4, 3), np.float32), np.ones((5, 4), np.float32), tx=True)


def _strided_matrix(rng: np.random.Generator, batch: tuple[int, ...], rows: int, cols: int,
                    layout: str) -> np.ndarray:
    """A float32 (*batch, rows, cols) operand laid out as ``layout``: 'c' contiguous, 't'
    the transpose of a contiguous array, 's' a column slice of a wider matrix (row stride
    past the width), 'p' batch dims permuted (attention's heads of a fused projection)."""
    if layout == "t":
        return rng.standard_normal((*batch, cols, rows)).astype(np.float32).swapaxes(-1, -2)
    if layout == "s":
        return rng.standard_normal((*batch, rows, cols + 3)).astype(np.float32)[..., 1:cols + 1]
    if layout == "p" and len(batch) == 2:
        full = rng.standard_normal((batch[0], rows, batch[1], cols)).astype(np.float32)
        return full.transpose(0, 2, 1, 3)
    return rng.standard_normal((*batch, rows, cols)).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40),
       batch=st.sampled_from([(), (3,), (2, 3)]), bcast=st.sampled_from(["", "a", "b"]),
       la=st.sampled_from("ctsp"), lb=st.sampled_from("ctsp"), threads=st.sampled_from([1, 2]))
@example(m=33, k=17, n=40, batch=(2, 3), bcast="", la="p", lb="t", threads=2)
def test_strided_batched_gemm_matches_numpy(m, k, n, batch, bcast, la, lb, threads) -> None:
    """``a @ b`` as a stack of native GEMMs over the operands in place (batched attention
    products, slices of a fused projection): every matrix layout, broadcast batch dims
    (one operand without them), any M, K, N; within K * 1e-6 of float64 (unit normals),
    and the same bits on 1 and 2 threads (one chain per output)."""
    from braze.backends.cpu import matvec

    if not matvec.gemm_available():
        pytest.skip("no GEMM path here")
    rng = np.random.default_rng(m * 10000 + k * 100 + n)
    a = _strided_matrix(rng, () if bcast == "a" else batch, m, k, la)
    b = _strided_matrix(rng, () if bcast == "b" else batch, k, n, lb)
    got = matvec.matmul_strided(a, b, threads)
    assert got is not None
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=k * 1e-6)
    np.testing.assert_array_equal(got, matvec.matmul_strided(a, b, 3 - threads))
    every_other = np.ones((4, 6), np.float32)[::2, ::2]  # neither row-major nor transposed
    assert matvec.matmul_strided(every_other, np.ones((3, 2), np.float32)) is None


def test_batched_matmuls_run_natively_in_replay_plans(cpu) -> None:
    """Attention's products over a fused qkv projection (q k^T, p v, and their backward's
    transposed forms) are program steps of a replay plan, not numpy matmuls in Python;
    the results match numpy's within float32 rounding."""
    from braze.backends import profile

    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((2, 16, 3, 2, 8)).astype(np.float32)
    p = rng.standard_normal((2, 2, 16, 16)).astype(np.float32)

    @bz.compile
    def f(qkv, p):
        q, k, v = (bz.permute_dims(qkv[:, :, j], (0, 2, 1, 3)) for j in range(3))
        s = q @ bz.swapaxes(k, -1, -2)
        return s, p @ v, bz.swapaxes(p, -1, -2) @ q, bz.swapaxes(v, -1, -2) @ p

    with bz.backend("cpu"):
        args = (bz.asarray(qkv), bz.asarray(p))
        f(*args), f(*args)
        with profile() as calls:
            got = [np.asarray(r) for r in f(*args)]
    q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
    want = [q @ k.swapaxes(-1, -2), p @ v, p.swapaxes(-1, -2) @ q, v.swapaxes(-1, -2) @ p]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    names = [name for name, _ in calls]
    assert names.count("matmul") == 4 and not any("python" in nm for nm in names), names


def test_matvec_kernel_refuses_operands_it_would_misread() -> None:
    from braze.backends.cpu import matvec

    x, w = np.ones((3, 4), np.float32), np.ones((5, 4), np.float32)
    for a, b in [(x, np.ones((5, 3), np.float32)), (x.astype(np.float64), w), (x.T, w.T),
                 (x[:, ::2], w[:, ::2])]:
        with pytest.raises(ValueError, match="matvec: expected"):
            matvec.matvec(a, b)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), k=st.integers(1, 300), threads=st.sampled_from([1, 2]))
@example(n=2049, k=16, threads=2)  # chunks of 1024 rows, one partial each, a short tail
@example(n=5, k=129, threads=2)  # a second column tile and 1 column past its vectors
def test_vecmat_kernel_matches_numpy_on_any_thread_count(n, k, threads) -> None:
    """``v @ A`` / ``A.T @ v`` (a gradient's product): within N * 1e-6 of float64 (unit
    normals); the row chunks depend on the shape alone, so 1 and 2 threads agree bit for
    bit. Operands it would misread are refused."""
    from braze.backends.cpu import matvec

    rng = np.random.default_rng(n * 300 + k)
    v, a = rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, k)).astype(
        np.float32)
    got = matvec.vecmat(v, a, threads)
    np.testing.assert_allclose(got, v.astype(np.float64) @ a.astype(np.float64), rtol=1e-5,
                               atol=max(n, 1) * 1e-6)
    np.testing.assert_array_equal(got, matvec.vecmat(v, a, 3 - threads))
    with pytest.raises(ValueError, match="vecmat: expected"):
        matvec.vecmat(v, a.astype(np.float64))
    with pytest.raises(ValueError, match="vecmat: expected"):
        matvec.vecmat(np.ones(n + 1, np.float32), a)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 200_000), length=st.integers(1, 300),
       dtype=st.sampled_from([np.int32, np.int64, np.uint8]), threads=st.sampled_from([1, 2]))
@example(n=100_000, length=1 << 16, dtype=np.int64, threads=2)  # the longest native table
def test_bincount_kernel_counts_as_numpy(n, length, dtype, threads) -> None:
    """Counts of 0..length-1, indices outside the range (negative too) ignored: exact, on
    one or two threads (uint8 indices run the numpy reference)."""
    from braze.backends.cpu.bincount import Bincount

    impl = Bincount()
    impl._num_threads = lambda: threads  # type: ignore[method-assign]
    lo = 0 if dtype == np.uint8 else -3
    idx = np.random.default_rng(n + length).integers(lo, min(length + 3, 255), n).astype(dtype)
    got = impl({"length": length}, np.dtype(np.int64), idx)
    inside = idx[(idx >= 0) & (idx < length)].astype(np.int64)
    np.testing.assert_array_equal(got, np.bincount(inside, minlength=length)[:length])
    assert got.dtype == np.int64 and impl.calls["native" if dtype != np.uint8 else "numpy"]


@given(m=st.integers(1, 12), k=st.integers(1, 40), n=st.integers(1, 40),
       form=st.sampled_from(["vec", "wT", "plain", "strided", "f64", "batch", "xT", "rX"]))
@settings(max_examples=40, deadline=None)
def test_cpu_matmul_library_matches_numpy(m: int, k: int, n: int, form: str) -> None:
    """The cpu backend's matmul step: the native matvec for ``M @ v`` and ``x @ W.T``,
    the vecmat kernel for ``X.T @ v`` and ``v @ X``, numpy's for the rest (float32 to 1e-5
    relative, other dtypes exact to numpy)."""
    from braze.backends.cpu.blas import matmul_for

    mm = matmul_for(lambda: 2)
    r = np.random.default_rng(m * 1000 + k * 40 + n)
    f32 = np.dtype(np.float32)
    a = r.standard_normal((m, k)).astype(np.float32)
    b = {"vec": lambda: r.standard_normal(k).astype(np.float32),
         "wT": lambda: r.standard_normal((n, k)).astype(np.float32).T,
         "plain": lambda: r.standard_normal((k, n)).astype(np.float32),
         "strided": lambda: r.standard_normal((k, 2 * n)).astype(np.float32)[:, ::2],
         "f64": lambda: r.standard_normal((k, n)),
         "batch": lambda: r.standard_normal((3, k, n)).astype(np.float32),
         "xT": lambda: r.standard_normal(k).astype(np.float32),
         "rX": lambda: r.standard_normal((m, n)).astype(np.float32)}[form]()
    if form == "f64":
        a = a.astype(np.float64)
    elif form == "xT":  # X.T @ r of a row-major X: the vecmat kernel
        a = r.standard_normal((k, m)).astype(np.float32).T
    elif form == "rX":  # r @ X
        a = a[:, 0].copy()
    want = a @ b
    got = mm({}, want.dtype, a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * k)
    assert (want.dtype == f32) or np.array_equal(got, want)


def test_eager_x_wt_of_many_rows_runs_the_native_gemm_not_blas(monkeypatch) -> None:
    """``U @ U.T`` of 2000 rows evaluated step by step runs the native GEMM, as its
    replay plan does: numpy's BLAS would leave its workers spinning beside the plan's
    kernels; so do matrix-vector products with a strided vector (copied first); float32
    to 1e-5 relative."""
    from braze.backends.cpu import blas, matvec

    if not matvec.gemm_available():
        pytest.skip("the matvec kernel has no GEMM path on this host (AVX-512 and AVX2 only)")
    called: list[int] = []
    real = blas.reference_eval
    monkeypatch.setattr(blas, "reference_eval", lambda *a: called.append(1) or real(*a))
    u = np.random.default_rng(0).standard_normal((200, 64)).astype(np.float32)
    got = blas.matmul_for(lambda: 2)({}, np.dtype(np.float32), u, u.T)
    np.testing.assert_allclose(got, u @ u.T, rtol=1e-5, atol=1e-4)
    ones = np.broadcast_to(np.float32(1), (64,))  # (a power iteration's first v: strided)
    got = blas.matmul_for(lambda: 2)({}, np.dtype(np.float32), u, ones)
    np.testing.assert_allclose(got, u @ np.ones(64, np.float32), rtol=1e-5, atol=1e-4)
    got = blas.matmul_for(lambda: 2)({}, np.dtype(np.float32), ones[::-1], u.T.copy())
    np.testing.assert_allclose(got, np.ones(64, np.float32) @ u.T, rtol=1e-5, atol=1e-4)
    assert not called


@given(shape=st.lists(st.integers(1, 70), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int8, np.float64, np.complex64, np.bool_]),
       threads=st.sampled_from([1, 2, 3]))
@settings(max_examples=60, deadline=None)
def test_native_slice_stores_match_numpy(shape, data, dtype, threads) -> None:
    """``x[key] = v`` by the native region copy (any dtype, up to 4 dims, strided and
    broadcast values, a value in a pooled byte buffer, any thread count) equals numpy's
    store exactly; a value overlapping the region goes through numpy's (it buffers)."""
    from braze.backends.cpu import assign

    key = []
    for n in shape:
        a, b = sorted(data.draw(st.tuples(st.integers(0, n), st.integers(0, n))))
        step = data.draw(st.sampled_from([1, 1, 2, -1]))
        key.append(slice(a, b, step) if step > 0 else slice(b - 1 if b else None,
                                                            a - 1 if a else None, -1))
    key = tuple(key)
    rng = np.random.default_rng(sum(shape))
    want = (rng.standard_normal(shape) * 9).astype(dtype)
    got = want.copy()
    region = want[key].shape
    form = data.draw(st.sampled_from(["plain", "broadcast", "pooled", "reversed"]))
    value = (rng.standard_normal(region) * 9).astype(dtype)
    if form == "broadcast" and region:
        value = np.broadcast_to(value[(slice(0, 1),) * len(region)], region)
    elif form == "pooled":
        raw = np.zeros(value.nbytes + 64, np.uint8)
        pooled = raw[64:].view(dtype).reshape(region)
        pooled[...] = value
        value = pooled
    elif form == "reversed" and region:
        value = value[(slice(None, None, -1),) * len(region)]
    want[key] = value
    assign.assign(got, key, value, threads, min_bytes=1)  # (small regions natively too)
    np.testing.assert_array_equal(got, want)
    overlap = got.copy()
    assign.assign(overlap, key, overlap[key][..., ::-1] if region else overlap[key], threads,
                  min_bytes=1)
    ref = got.copy()
    ref[key] = ref[key][..., ::-1] if region else ref[key]
    np.testing.assert_array_equal(overlap, ref)


def _allowed_cpus(tid: int) -> set[int]:
    text = open(f"/proc/self/task/{tid}/status").read()
    spec = text.split("Cpus_allowed_list:")[1].split()[0]
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _cpu_of(tid: int) -> int:
    return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[36])


def test_openmp_workers_are_kept_off_the_calling_threads_cpu() -> None:
    """After a native call, the workers of the caller's team may run on every CPU of the
    process but the one the caller ran on (an unplaced worker sometimes shared it)."""
    import os
    import threading

    from braze.backends.cpu import placement

    cpus = os.sched_getaffinity(0)
    be = bz.backends.current()
    if be.name != "cpu" or be.num_threads < 2 or not placement.enabled() or len(cpus) < 2:
        pytest.skip("worker placement is off here (not Linux, one CPU, or user placement)")
    x = bz.asarray(np.ones(1 << 18, np.float32))
    bz.eval(bz.exp(x) * 2.0)
    be.wait_for_builds()  # (a first sight may run numpy while its kernel builds: no native
    bz.eval(bz.exp(x) * 2.5)  # call, no placement; under load the next one could too)
    workers = placement.team_ids(be.num_threads)[1:]
    me = threading.get_native_id()
    assert workers and me not in workers
    before = _cpu_of(me)
    bz.eval(bz.exp(x) * 3.0)  # a native call: the check runs before it
    after = _cpu_of(me)
    for tid in workers:
        excluded = cpus - _allowed_cpus(tid)
        assert len(excluded) == 1  # every CPU of the process but one
        if before == after:  # (the caller stayed put: that one is its CPU)
            assert excluded == {before}


@pytest.mark.parametrize("first_alive", [True, False])
def test_a_second_calling_thread_is_warned_about_once(first_alive) -> None:
    """Kernels run from a second thread while the first thread that ran them is alive: one
    RuntimeWarning (two OpenMP pools on the cores: each parallel region wakes sleeping
    workers); none when the first thread has exited. A fresh process each (the warning is
    once per process)."""
    if not sys.platform.startswith("linux") or bz.backends.current().name != "cpu":
        pytest.skip("the check is the cpu backend's, on Linux")
    code = textwrap.dedent(f"""
        import threading, time, warnings, numpy as np, braze as bz
        x = bz.asarray(np.ones(1 << 18, np.float32))
        step = bz.compile(lambda x, k: bz.sum(bz.exp(x * k)))
        seen = []
        def work(k):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                for i in range(4):  # (a thread decides 50 ms after its first call)
                    float(step(x, bz.asarray(np.float32(k + i))))
                    time.sleep(0.03)
                seen.extend(str(m.message) for m in w if "second thread" in str(m.message))
        if {first_alive}:
            work(1)
        else:
            t = threading.Thread(target=work, args=(1,)); t.start(); t.join()
        for k in (2, 3):
            t = threading.Thread(target=work, args=(k,)); t.start(); t.join()
        print(len(seen))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == ("1" if first_alive else "0")


def test_small_matmuls_run_on_one_blas_thread_and_restore_it(monkeypatch) -> None:
    from braze.backends.cpu import blas

    libs = blas._blas()
    if not libs:
        pytest.skip("no controllable BLAS (threadpoolctl found none)")
    seen: list[list[int]] = []
    real = blas.reference_eval

    def spy(*args, **kwargs):
        seen.append([lib.num_threads for lib in libs])
        return real(*args, **kwargs)

    monkeypatch.setattr(blas, "reference_eval", spy)
    before = [lib.num_threads for lib in libs]
    small = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(blas.matmul({}, small.dtype, small, small), small @ small)
    assert seen[-1] == [1] * len(libs)  # ran on one BLAS thread...
    assert [lib.num_threads for lib in libs] == before  # ...and the count came back
    big = np.ones((512, 512), np.float32)  # 2 * 512^3 flops >= SERIAL_FLOPS: all threads
    blas.matmul({}, big.dtype, big, big)
    assert seen[-1] == before


def test_a_reduction_over_an_empty_axis_never_hosts_another_kernels_elements() -> None:
    """Found by tests/fuzz: ``~x`` (2, 1) fused as a sibling into ``mean(x | e, axis=2)``
    over (1, 2, 0), whose views are degenerate (every stride 0 in an empty space), stored
    ``~x[0]`` twice. Empty and non-empty iteration spaces no longer merge (2 kernels)."""
    x = np.array([[False], [True]])
    e = np.zeros((1, 1, 0), bool)

    def f(a, b):  # type: ignore[no-untyped-def]
        return bz.bitwise_invert(a), bz.mean(bz.add(a, b), axis=(2,))

    xa, ea = bz.asarray(x), bz.asarray(e)
    assert bz.explain(f, xa, ea).num_kernels == 2
    with bz.backend("cpu"):
        inv, m = f(bz.asarray(x), bz.asarray(e))
        CpuBackend(skip_tiny=False, tiered=False).evaluate([inv._node, m._node])
    np.testing.assert_array_equal(np.asarray(inv), ~x)
    assert np.asarray(m).shape == (1, 2) and np.isnan(np.asarray(m)).all()


@pytest.mark.parametrize("n", [3, 17, 3000])
def test_a_float_int_float_round_trip_of_a_negative_fraction_is_plus_zero(n: int) -> None:
    """Found by tests/fuzz (bit for bit against the reference): GCC 12 folded the scalar
    (float)(int)x into a truncation that keeps -0.0 for x in (-1, 0); numpy gives +0.0."""
    xs = np.tile(np.float32([0.25, -0.263672, 1.28125, -0.5]), n)[:n]
    for fdt in (np.float32, np.float64, np.float16, "bfloat16"):
        for mid in (np.int32, np.int64, np.int16):
            x = bz.asarray(xs.astype(fdt))
            out = bz.where(x, x.astype(mid), x)
            CpuBackend(skip_tiny=False, tiered=False).evaluate([out._node])
            got = np.asarray(out).astype(np.float32)
            want = np.where(xs != 0, xs.astype(fdt).astype(mid), xs).astype(np.float32)
            assert (np.signbit(got) == np.signbit(want)).all() and (got == want).all(), (fdt, mid)


def test_float_to_int_casts_of_nan_and_out_of_range_values_are_numpys() -> None:
    """Found by tests/fuzz: NaN cast to int32 and back to a float gave NaN (the bare C cast
    is undefined; GCC folded the round trip into a truncation); numpy on x86-64 gives the
    "integer indefinite" INT_MIN. The signed paths and uint8, fused with a cast back
    (float -> uint32/uint64 of NaN or a negative out-of-range value follows numpy's SIMD
    code there, which neither the int32 nor the int64 path reproduces: not asserted)."""
    x = np.array([1.7, -2.5, np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, 0.0], np.float32)
    for src in (np.float32, np.float64):
        for dst in (np.int8, np.int16, np.int32, np.int64, np.uint8):
            with np.errstate(invalid="ignore"):
                want = x.astype(src).astype(dst).astype(np.float64)
            with bz.backend("cpu"):
                a = bz.asarray(x.astype(src))
                out = a.astype(dst).astype(np.float64) + 0.0
                CpuBackend(skip_tiny=False, tiered=False).evaluate([out._node])
            np.testing.assert_array_equal(np.asarray(out), want + 0.0, err_msg=f"{src} -> {dst}")


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 5), n=st.integers(1, 70), kind=st.sampled_from(
    ["float32", "float64", "int8", "int32", "uint8"]), special=st.booleans(),
    axis=st.sampled_from([-1, 0, None]), seed=st.integers(0, 2**16))
def test_argmax_argmin_match_numpy_ties_nan_and_infinities(rows, n, kind, special, axis,
                                                          seed) -> None:
    """The native two-pass argmax / argmin (extremes in 16 lanes, then the first index
    holding one) equals numpy's exactly: ties (the first index), NaNs (the first NaN),
    rows of -inf / +inf, lengths around the 16-lane blocks, every axis, fused inputs."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (rows, n)).astype(kind)  # few values: many ties
    if special and x.dtype.kind == "f":
        x.flat[rng.integers(0, x.size, 3)] = [np.inf, -np.inf, np.nan]
        x[rng.integers(0, rows)] = -np.inf
    # compiled: the native kernel (eager calls this small may run numpy's)
    for f, ref in ((bz.argmax, np.argmax), (bz.argmin, np.argmin)):
        step = bz.compile(lambda a, f=f: f(a, axis=axis))
        np.testing.assert_array_equal(np.asarray(step(bz.asarray(x))), ref(x, axis=axis))
    if x.dtype.kind == "f":  # an element-wise producer fused into the reduction
        step = bz.compile(lambda a: bz.argmax(a * -2 + 1, axis=axis))
        np.testing.assert_array_equal(np.asarray(step(bz.asarray(x))),
                                      np.argmax(x * -2 + 1, axis=axis))
