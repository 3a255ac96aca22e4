"""The conv_concat pass: convolutions concatenated along their channels become one
``conv_concat`` node (the cpu backend writes each branch into its channel slice: no
concatenation copy). Results equal the graph without the pass (the same bits on the cpu
backend: each branch runs the same kernel arithmetic) and the numpy reference (float32:
within 1e-4 relative), kernel counts asserted, preconditions held."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.graph.ops import OPS

RNG = np.random.default_rng(0)
X = RNG.standard_normal((1, 7, 7, 8)).astype(np.float32)
W1 = RNG.standard_normal((6, 1, 1, 8)).astype(np.float32)
W3 = RNG.standard_normal((5, 3, 3, 8)).astype(np.float32)
B1 = RNG.standard_normal(6).astype(np.float32)


def _fire(x, w1, w3, b1):
    e1 = bz.maximum(bz.conv2d(x, w1) + b1, 0.0)
    e3 = bz.maximum(bz.conv2d(x, w3, padding=1), 0.0)
    return bz.concatenate([e1, e3], axis=-1)


def _args():
    return [bz.asarray(a) for a in (X, W1, W3, B1)]


def test_a_fire_module_is_one_conv_concat():
    report = bz.explain(_fire, *_args())
    assert [k.name for k in report.kernels] == ["conv_concat"]
    assert "concat of 2 convolutions: 1" in str(report)
    off = bz.explain(bz.compile(_fire, disable_passes="conv_concat"), *_args())
    assert [k.name for k in off.kernels] == ["conv_fused", "conv_fused", "concat"]


@pytest.mark.parametrize("name,f", [
    ("a branch used elsewhere", lambda x, w1, w3, b1: (
        lambda c: bz.concatenate([c, bz.conv2d(x, w3, padding=1)], axis=-1) + bz.sum(c))(
        bz.conv2d(x, w1))),
    ("not the channel axis", lambda x, w1, w3, b1: bz.concatenate(
        [bz.conv2d(x, w1), bz.conv2d(x, w1)], axis=1)),
    ("a branch that is not a convolution", lambda x, w1, w3, b1: bz.concatenate(
        [bz.conv2d(x, w1), x], axis=-1)),
    ("the same convolution twice", lambda x, w1, w3, b1: (
        lambda c: bz.concatenate([c, c], axis=-1))(bz.conv2d(x, w1))),
    ("a scaled branch", lambda x, w1, w3, b1: bz.concatenate(
        [bz.conv2d(x, w1) * 2.0, bz.conv2d(x, w3, padding=1)], axis=-1)),
])
def test_preconditions(name, f):
    report = bz.explain(f, *_args())
    assert "conv_concat" not in [k.name for k in report.kernels], name
    assert "no concatenations of convolutions" in str(report)
    got = np.asarray(bz.compile(f)(*_args()))
    want = np.asarray(bz.compile(f, disable_passes="conv_concat")(*_args()))
    np.testing.assert_array_equal(got, want)


BRANCHES = ["1x1", "3x3", "5x5", "depthwise", "grouped"]


@st.composite
def concat_cases(draw):
    """2-3 branches of every tactic (1x1, 3x3 / 5x5 'same', depthwise, grouped) over one x
    (maybe a permuted view: an NCHW image), each with or without bias / residual / ReLU."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    c = draw(st.sampled_from([2, 3, 4, 8, 20]))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    stride = draw(st.integers(1, 2))
    out = (n, (h - 1) // stride + 1, (w - 1) // stride + 1)
    branches = []
    for kind in draw(st.lists(st.sampled_from(BRANCHES), min_size=2, max_size=3)):
        k = {"1x1": 1, "3x3": 3, "5x5": 5, "depthwise": 3, "grouped": 3}[kind]
        groups = {"depthwise": c, "grouped": 2 if c % 2 == 0 else 1}.get(kind, 1)
        cout = c if kind == "depthwise" else draw(st.integers(1, 40)) * groups
        weight = rng.standard_normal((cout, k, k, c // groups)).astype(np.float32)
        bias = rng.standard_normal(cout).astype(np.float32) if draw(st.booleans()) else None
        residual = rng.standard_normal((*out, cout)).astype(np.float32) \
            if draw(st.booleans()) else None
        branches.append((weight, k // 2, groups, bias, residual, draw(st.booleans())))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    return x, stride, branches, draw(st.booleans()), draw(st.booleans())


def _concat_fn(stride, branches, nchw, scaled):
    """f(x, *weights, *biases, *residuals) (those the branches have, in branch order)."""
    def f(x, *arrays):
        if nchw:
            x = bz.permute_dims(x, (0, 2, 3, 1))
        rest = list(arrays[len(branches):])
        outs = []
        for wt, (_, pad, groups, bias, residual, relu) in zip(arrays, branches):
            if scaled:  # weights made in the graph: no packed copy derived once
                wt = wt * 0.5
            y = bz.conv2d(x, wt, stride=stride, padding=pad, groups=groups)
            if bias is not None:
                y = y + rest.pop(0)
            if residual is not None:
                y = y + rest.pop(0)
            if relu:
                y = bz.maximum(y, 0.0)
            outs.append(y)
        return bz.concatenate(outs, axis=-1)
    return f


def _concat_args(x, branches):
    extra = [a for b in branches for a in (b[3], b[4]) if a is not None]
    return [bz.asarray(a) for a in (x, *(b[0] for b in branches), *extra)]


@settings(max_examples=40, deadline=None)
@given(case=concat_cases())
def test_concatenated_branches_equal_the_graph_without_the_pass(backend_name, case):
    x, stride, branches, nchw, scaled = case
    if not nchw:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    f = _concat_fn(stride, branches, nchw, scaled)
    args = _concat_args(x, branches)
    on, off = bz.compile(f), bz.compile(f, disable_passes="conv_concat")
    for _ in range(3):  # trace, then the replays (the cpu backend's native program step)
        got, plain = np.asarray(on(*args)), np.asarray(off(*args))
        if backend_name == "cpu":
            np.testing.assert_array_equal(got, plain)
        else:  # (another summation order: within 1e-5 of the largest output)
            scale = max(float(np.abs(plain).max()), 1.0)
            np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5 * scale)
    with bz.backend("numpy"):
        want = np.asarray(f(*args))
    k = max(b[0][0].size for b in branches)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * math.sqrt(k))
    assert "conv_concat" in [k.name for k in bz.explain(f, *args).kernels]
    if backend_name == "cpu" and not nchw:  # x contiguous: the native program step ran
        with bz.backends.profile() as calls:
            on(*args)
        assert "conv_concat" in [name for name, _ in calls]


def test_the_native_step_writes_only_its_slices(backend_name):
    """On the cpu backend the compiled replay runs the branches as one program step (no
    Python, no concatenation) and the result holds every branch's channels."""
    f = bz.compile(_fire)
    args = _args()
    for _ in range(3):
        got = np.asarray(f(*args))
    with bz.backend("numpy"):
        want = np.asarray(_fire(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if backend_name == "cpu":
        with bz.backends.profile() as calls:
            f(*args)
        assert [name for name, _ in calls] == ["conv_concat"]


def test_inconsistent_branches_are_refused():
    op = OPS["conv_concat"]
    a = dict(stride=(1, 1), padding=((0, 0), (0, 0)), kernel_dilation=(1, 1),
             input_dilation=(1, 1), groups=1, flip=False, bias=False, residual=False,
             act="none", clip=(0.0, 0.0))
    br = (2, tuple(sorted(a.items())))
    f4 = np.dtype(np.float32)
    assert op.infer(((1, 4, 4, 2), (3, 1, 1, 2), (1, 4, 4, 2), (5, 1, 1, 2)), (f4,) * 4,
                    {"branches": (br, br)})[0] == (1, 4, 4, 8)
    with pytest.raises(ValueError, match="conv_concat: branch results"):
        op.infer(((1, 4, 4, 2), (3, 1, 1, 2), (1, 5, 4, 2), (5, 1, 1, 2)), (f4,) * 4,
                 {"branches": (br, br)})
    with pytest.raises(ValueError, match="conv_concat: 3 inputs"):
        op.infer(((1, 4, 4, 2), (3, 1, 1, 2), (1, 4, 4, 2)), (f4,) * 3,
                 {"branches": (br,)})
