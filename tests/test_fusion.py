"""The fusion stages (graph/passes/fusion/): why values are realized and kernels kept
apart (FusionDecisions, the ``braze.fusion`` logger, ``BRAZE_LOG=fusion``), and a stored
value's same-space consumers computed by the kernel that stores it.

Results are compared with numpy: float32 1e-5 relative (fused reductions may sum in a
different order), 1e-6 absolute.
"""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import braze as bz
from braze.graph.ir import Graph
from braze.graph.passes import fusion
from braze.graph.passes.fuse import (
    MAX_INLINE_ROOTS,
    RECOMPUTE_LIMIT,
    STENCIL_LIMIT,
    FusionDecision,
    fuse,
)
from braze.graph.passes.simplify import simplify


def decisions(*outs: bz.Array) -> tuple[int, list[FusionDecision]]:
    """(launches, decisions) of fusing the graph behind ``outs``."""
    g = simplify(Graph.from_nodes([o._node for o in outs])[0])
    out: list[FusionDecision] = []
    return fuse(g, out).num_kernels, out


def reasons(ds: list[FusionDecision], action: str) -> set[str]:
    return {d.reason for d in ds if d.action == action}


@pytest.fixture
def x() -> bz.Array:
    return bz.asarray(np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32))


def close(a: bz.Array, b: np.ndarray) -> None:
    np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)


def test_every_stage_is_a_short_module() -> None:
    folder = pathlib.Path(fusion.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert {"realize.py", "group.py", "order.py", "lower.py", "cost.py"} <= set(sizes)
    assert max(sizes.values()) < 320, sizes


# ---------------------------------------------------------------- why a value is realized
def test_realize_reasons_name_the_rule(x) -> None:
    w = bz.asarray(np.ones((32, 8), np.float32))
    _, ds = decisions(bz.exp(x) @ w, bz.sum(x, axis=-1))
    why = {d.reason: d for d in ds if d.action == "realize"}
    assert {"output", "library input"} <= set(why)
    assert "matmul" in why["library input"].detail
    assert "exp (16, 32) float32" in why["library input"].subject


def test_recompute_cost_is_logged_with_its_numbers(x) -> None:
    t = bz.tanh(bz.exp(bz.sin(x)) * bz.cos(x))  # cost 8 * 4 + 1 > RECOMPUTE_LIMIT
    _, ds = decisions(bz.sum(t, axis=-1), bz.max(t, axis=0))  # two kernels inline t
    costly = [d for d in ds if d.reason == "recompute cost" and d.action == "realize"]
    assert costly and f"> limit {RECOMPUTE_LIMIT}" in costly[0].detail
    assert "inlined into 2 kernels" in costly[0].detail


def test_broadcast_costly_and_inline_width_are_logged(x, uncut) -> None:
    angles = bz.asarray(np.ones((16, 1), np.float32))
    feats = bz.asarray(np.ones((4, 16, 32), np.float32))
    _, ds = decisions(feats * bz.cos(angles * 3.0) + feats * bz.sin(angles * 3.0))
    assert "broadcast costly" in reasons(ds, "realize")
    a = x
    for _ in range(MAX_INLINE_ROOTS + 2):
        a = bz.softmax(a * 1.5, axis=-1) + a
    _, ds = decisions(a)
    wide = [d for d in ds if d.reason == "inline width"]
    assert wide and f"limit {MAX_INLINE_ROOTS}" in wide[0].detail


# ---------------------------------------------------------------- why two kernels
def test_refused_merges_say_why(x) -> None:
    y = bz.exp(x)
    n, ds = decisions(y, y.T + 1.0)  # read transposed: not where y is computed
    assert n == 2 and "iteration spaces" in reasons(ds, "no_merge")
    n, ds = decisions(y, y[:, ::-1] + 1.0)  # same space, another element
    assert n == 2 and "cross read" in reasons(ds, "no_merge")
    refusal = next(d for d in ds if d.reason == "cross read")
    assert "stored value" in refusal.subject and "exp" in refusal.subject
    assert len(refusal.nodes) == 2


def test_a_chain_of_row_kernels_stays_a_chain(x) -> None:
    """Every reduce loop of a row kernel recomputes the element values it needs: a stored
    softmax feeding another softmax is not merged into it (recompute cost)."""
    a = bz.softmax(x * 1.5, axis=-1) + x
    b = bz.softmax(a * 1.5, axis=-1)
    n, ds = decisions(a, b)
    assert n == 2 and "recompute cost" in reasons(ds, "no_merge")


def test_the_logger_prints_decisions(x, caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="braze.fusion"):
        decisions(bz.exp(x), bz.exp(x).T * 2.0)
        fuse(simplify(Graph.from_nodes([bz.sum(x * 3.0, axis=0)._node])[0]))
    text = caplog.text
    assert "fuse: " in text and "realize #" in text and "output" in text


def test_braze_log_fusion_turns_the_logger_on() -> None:
    code = ("import numpy as np, braze as bz\n"
            "x = bz.asarray(np.ones((8, 8), np.float32))\n"
            "bz.explain(lambda x: (bz.exp(x), bz.exp(x).T + 1.0), x)\n")
    env = {**os.environ, "BRAZE_LOG": "fusion", "BRAZE_BACKEND": "numpy"}
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stderr
    assert "braze.fusion: fuse:" in err and "no_merge" in err and "cross read" in err


def test_nothing_is_recorded_when_no_one_asks(x) -> None:
    log = fusion.log.collector(simplify(Graph.from_nodes([bz.exp(x)._node])[0]), None)
    assert not log.on or logging.getLogger("braze.fusion").isEnabledFor(logging.DEBUG)


# ---------------------------------------------------------------- stored-value consumers
def test_a_stored_value_and_its_elementwise_consumers_are_one_kernel(x) -> None:
    y = bz.exp(x)
    n, ds = decisions(y, y * 2.0 + 1.0)
    assert n == 1 and "stored value" in reasons(ds, "merge")
    xn = np.asarray(x)
    a, b = bz.exp(x), bz.exp(x) * 2.0 + 1.0
    bz.eval(a, b)
    close(a, np.exp(xn))
    close(b, np.exp(xn) * 2.0 + 1.0)
    v = bz.asarray(np.arange(32, dtype=np.float32))
    assert decisions(y, y + v, y * 3.0)[0] == 1  # broadcasting an input is fine
    z = y * 3.0
    assert decisions(y, z, bz.max(z, axis=-1))[0] == 1


@pytest.mark.parametrize("case", ["softmax", "sum", "sum0", "norm", "library"])
def test_a_stored_value_and_its_row_consumers_are_one_kernel(x, case) -> None:
    xn = np.asarray(x).astype(np.float64)
    w = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    if case == "softmax":
        y = bz.exp(x)
        outs = (y, bz.softmax(y, axis=-1))
        e = np.exp(np.exp(xn) - np.exp(xn).max(-1, keepdims=True))
        want = (np.exp(xn), e / e.sum(-1, keepdims=True))
        launches = 1
    elif case == "sum":
        y = x * 2.0 + 1.0
        outs, want, launches = (y, bz.sum(y, axis=-1)), (xn * 2 + 1, (xn * 2 + 1).sum(-1)), 1
    elif case == "sum0":
        y = bz.exp(x)
        outs, want, launches = (y, bz.sum(y, axis=0)), (np.exp(xn), np.exp(xn).sum(0)), 1
    elif case == "norm":
        d = x - bz.mean(x, axis=-1, keepdims=True)
        dn = xn - xn.mean(-1, keepdims=True)
        outs = (d, d / bz.sqrt(bz.mean(d * d, axis=-1, keepdims=True) + 1e-5))
        want, launches = (dn, dn / np.sqrt((dn * dn).mean(-1, keepdims=True) + 1e-5)), 1
    else:  # matmul + bias stored; its activation in the same kernel (matmul: a library op)
        h = x @ bz.asarray(w) + 1.0
        hn = xn @ w + 1.0
        outs, want, launches = (h, bz.tanh(h)), (hn, np.tanh(hn)), 2
    n, _ = decisions(*outs)
    assert n == launches
    bz.eval(*outs)
    for o, ref in zip(outs, want):
        np.testing.assert_allclose(np.asarray(o), ref, rtol=1e-5, atol=1e-5)


def test_a_value_only_its_own_kernel_reads_gets_no_buffer(x) -> None:
    """Realized by the cost rule (two kernels would inline it), then both readers join
    its kernel: it is computed once per element and never written."""
    t = bz.tanh(bz.exp(bz.sin(x)) * bz.cos(x) + bz.log(bz.abs(x) + 1.0))
    s = bz.explain(lambda x: (t + 1.0, bz.sum(t, axis=-1)), x)
    assert s.num_kernels == 1
    assert [shape for shape, _ in s.kernels[0].outputs] == [(16, 32), (16,)]


# ---------------------------------------------------------------- recomputation bound (stencils)
def blurs(img: bz.Array, passes: int) -> bz.Array:
    """Chained 3x3 box blurs written with slices (NumPy's way): each pass reads the
    previous one at 9 offsets."""
    for _ in range(passes):
        img = (img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:] + img[1:-1, :-2] + img[1:-1, 1:-1]
               + img[1:-1, 2:] + img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]) / 9.0
    return img


def np_blurs(img: np.ndarray, passes: int) -> np.ndarray:
    for _ in range(passes):
        img = sum(img[i:img.shape[0] - 2 + i, j:img.shape[1] - 2 + j]
                  for i in range(3) for j in range(3)) / 9.0
    return img


@pytest.fixture
def img() -> bz.Array:
    return bz.asarray(np.random.default_rng(2).random((48, 40)).astype(np.float32))


def test_chained_blurs_are_one_kernel_per_blur(img, uncut) -> None:
    """A blur of a blur inlined would compute the inner blur at 9 offsets (8 extra x cost
    12 per element > STENCIL_LIMIT): each blur is realized, one kernel of 9 ops each."""
    assert STENCIL_LIMIT < 8 * 12
    n, ds = decisions(blurs(img, 5))
    assert n == 5
    stencil = [d for d in ds if d.reason == "recompute (stencil)"]
    assert len(stencil) == 4 and all(d.action == "realize" for d in stencil)
    assert "divide" in stencil[0].subject and "views x cost" in stencil[0].detail
    assert f"> limit {STENCIL_LIMIT}" in stencil[0].detail
    s = bz.explain(lambda x: blurs(x, 5), img)
    assert [len(k.ops) for k in s.kernels] == [9] * 5
    np.testing.assert_allclose(np.asarray(blurs(img, 5)), np_blurs(np.asarray(img), 5),
                               rtol=1e-5, atol=1e-6)


def test_compiled_chained_blurs_too(img, uncut) -> None:
    """A traced function is one graph (never cut): the bound splits it the same way."""
    f = bz.compile(lambda x: blurs(x, 4))
    assert bz.explain(f, img).num_kernels == 4  # explain runs it eagerly: uncut here
    np.testing.assert_allclose(np.asarray(f(img)), np_blurs(np.asarray(img), 4),
                               rtol=1e-5, atol=1e-6)


def test_kernel_size_grows_linearly_with_the_number_of_blurs(uncut) -> None:
    """The structural bound: instructions and loads per blur stay constant (the fused
    kernel used to grow 9 -> 90 -> 315 -> 756 -> 1485 ops), and so does the time to plan."""
    img = bz.asarray(np.random.default_rng(2).random((64, 64)).astype(np.float32))
    sizes = {}
    for passes in (5, 10, 20):
        s = bz.explain(lambda x, p=passes: blurs(x, p), img)
        sizes[passes] = (s.num_kernels, sum(len(k.ops) for k in s.kernels))
    assert sizes == {p: (p, 9 * p) for p in (5, 10, 20)}
    start = time.perf_counter()
    bz.explain(lambda x: blurs(x, 10), img)
    assert time.perf_counter() - start < 2.0  # was ~8 s for 5 blurs


def test_cheap_stencils_stay_fused(x) -> None:
    """Repeating a few flops per element is cheaper than a buffer: a difference of an exp,
    a blur of ``x * 2 + 1`` (8 extra views x cost 2 = 16 <= STENCIL_LIMIT) are one kernel."""
    xn = np.asarray(x)
    e = bz.exp(x)
    d = e[:, 1:] - e[:, :-1]
    assert decisions(d)[0] == 1
    close(d, np.exp(xn)[:, 1:] - np.exp(xn)[:, :-1])
    b = blurs(x * 2.0 + 1.0, 1)
    assert decisions(b)[0] == 1
    close(b, np_blurs(xn * 2 + 1, 1))


def test_blur_then_sobel_is_two_kernels(img) -> None:
    """The Sobel gradient reads the blur at 8 offsets (7 extra x cost 12 > limit)."""
    b = blurs(img, 1)
    gx = (b[:-2, 2:] + 2 * b[1:-1, 2:] + b[2:, 2:]) - (b[:-2, :-2] + 2 * b[1:-1, :-2] + b[2:, :-2])
    gy = (b[2:, :-2] + 2 * b[2:, 1:-1] + b[2:, 2:]) - (b[:-2, :-2] + 2 * b[:-2, 1:-1] + b[:-2, 2:])
    out = bz.sqrt(gx * gx + gy * gy)
    assert decisions(out)[0] == 2
    bn = np_blurs(np.asarray(img).astype(np.float64), 1)
    gxn = (bn[:-2, 2:] + 2 * bn[1:-1, 2:] + bn[2:, 2:]) - (bn[:-2, :-2] + 2 * bn[1:-1, :-2]
                                                            + bn[2:, :-2])
    gyn = (bn[2:, :-2] + 2 * bn[2:, 1:-1] + bn[2:, 2:]) - (bn[:-2, :-2] + 2 * bn[:-2, 1:-1]
                                                            + bn[:-2, 2:])
    np.testing.assert_allclose(np.asarray(out), np.sqrt(gxn**2 + gyn**2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("levels", [12, 48])
def test_a_value_read_by_many_views_of_itself(levels, uncut) -> None:
    """``y = y[1:] + y[:-1]`` (Pascal's triangle): level k below the top is read at k + 1
    offsets, so the repeated work grows as levels^2 and paths of views as 2^levels. The
    bound cuts the chain every few levels (each kernel repeats <= STENCIL_LIMIT per
    element) and planning stays linear."""
    xn = np.random.default_rng(3).random(256).astype(np.float32)
    y, yn = bz.asarray(xn), xn.astype(np.float64)
    for _ in range(levels):
        y, yn = y[1:] + y[:-1], yn[1:] + yn[:-1]
    start = time.perf_counter()
    s = bz.explain(lambda: y)
    assert time.perf_counter() - start < 2.0
    assert levels // 12 <= s.num_kernels <= levels // 4 + 1
    assert sum(len(k.ops) for k in s.kernels) <= 8 * levels  # not levels^2
    np.testing.assert_allclose(np.asarray(y), yn, rtol=1e-5)


def test_paths_of_views_to_the_same_elements_are_one_value(uncut) -> None:
    """``y[::-1][::-1]`` is ``y``: 40 levels of ``y * 0.5 + y[::-1][::-1]`` reach the input
    through 2^40 paths but at one index map -- one kernel of 2 ops per level."""
    xn = np.random.default_rng(4).random(64).astype(np.float32)
    y = bz.asarray(xn)
    yn = xn.astype(np.float64)
    for _ in range(40):
        y, yn = y * 0.5 + y[::-1][::-1], yn * 0.5 + yn
    s = bz.explain(lambda: y)
    assert s.num_kernels == 1 and len(s.kernels[0].ops) == 2 * 40
    np.testing.assert_allclose(np.asarray(y), yn, rtol=1e-5)


def test_column_statistics_keep_their_elementwise_epilogue_contiguous() -> None:
    """``(x - x.mean(0)) / x.std(0)`` of a tall table: the reductions iterate (8, N) (a
    permuted space); the epilogue would store through it with a stride of 8 elements, so
    it is its own contiguous kernel ("strided stores"); a small table stays one kernel.
    float32 within 1e-5 of numpy."""
    def zscore(x):
        return (x - x.mean(axis=0)) / x.std(axis=0)

    rng = np.random.default_rng(3)
    for rows, kernels in ((fusion.group.STRIDED_STORES, 2), (64, 1)):
        xn = rng.standard_normal((rows, 8)).astype(np.float32)
        r = bz.explain(zscore, bz.asarray(xn))
        assert r.num_kernels == kernels
        if kernels == 2:
            assert r.kernels[0].name.startswith("row_") and r.kernels[1].name.startswith("ew_")
        np.testing.assert_allclose(np.asarray(zscore(bz.asarray(xn))),
                                   (xn - xn.mean(axis=0)) / xn.std(axis=0), rtol=1e-5,
                                   atol=1e-5)
