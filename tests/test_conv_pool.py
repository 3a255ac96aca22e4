"""The conv_pool pass: a max pool of a convolution's result becomes the convolution's last
step (``conv_fused`` with ``attrs['pool']``; the cpu backend pools each line of the
convolution while it is in cache, or -- Winograd, gathered rows, groups -- pools the whole
result inside the same call). Results equal the graph without the pass (the same bits on
the cpu backend: the same tile arithmetic, the pool's taps in the same order, NaN and ties
as numpy's maximum) and the numpy reference (float32: within 1e-4 relative), kernel counts
asserted, preconditions held."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz

RNG = np.random.default_rng(0)
X = RNG.standard_normal((1, 11, 12, 3)).astype(np.float32)
W = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(8).astype(np.float32)


def _stem(x, w, b):
    return bz.nn.max_pool(bz.maximum(bz.conv2d(x, w, stride=2) + b, 0.0), (3, 3), 2, 1)


def _args():
    return [bz.asarray(a) for a in (X, W, B)]


def test_a_stem_and_its_pool_are_one_kernel():
    report = bz.explain(_stem, *_args())
    assert [k.name for k in report.kernels] == ["conv_fused"]
    assert "max pool of a convolution: 1" in str(report)
    off = bz.explain(bz.compile(_stem, disable_passes="conv_pool"), *_args())
    assert [k.name for k in off.kernels] == ["conv_fused", "max_pool"]


@pytest.mark.parametrize("name,f", [
    ("the convolution used elsewhere", lambda x, w, b: (
        lambda c: bz.nn.max_pool(c, (3, 3), 2) + bz.sum(c))(bz.conv2d(x, w))),
    ("an average pool", lambda x, w, b: bz.nn.avg_pool(bz.conv2d(x, w), (3, 3), 2, 1)),
    ("a residual before the pool", lambda x, w, b: bz.nn.max_pool(
        bz.conv2d(x, w, padding=1) + bz.asarray(np.ones((1, 11, 12, 8), np.float32)),
        (3, 3), 2)),
    ("a one-dimensional convolution", lambda x, w, b: bz.nn.max_pool(
        bz.conv1d(x[0], w[:, 0]), (3,), 2)),
])
def test_preconditions(name, f):
    report = bz.explain(f, *_args())
    assert "max pool of a convolution" not in str(report), name
    assert any(k.name in ("max_pool", "window_sum") for k in report.kernels), name


@st.composite
def pool_cases(draw):
    cin = draw(st.sampled_from([3, 8, 20, 32]))
    k = draw(st.sampled_from([1, 3, 7] if cin == 3 else [1, 3]))
    stride = draw(st.integers(1, 2))
    pad = draw(st.integers(0, k // 2))
    groups = draw(st.sampled_from([1, 2])) if cin % 2 == 0 and k == 3 else 1
    cout = draw(st.sampled_from([8, 16, 70]))
    h, w = draw(st.integers(k + 4, 20)), draw(st.integers(k + 4, 20))
    pk, ps, pp = draw(st.sampled_from([(3, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 0)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 2)), h, w, cin)).astype(np.float32)
    if draw(st.booleans()):
        x[0, rng.integers(h), rng.integers(w), rng.integers(cin)] = np.nan
    wt = (rng.standard_normal((cout, k, k, cin // groups)) / math.sqrt(k * k * cin)
          ).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    return x, wt, bias, stride, pad, groups, (pk, ps, pp), draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(case=pool_cases())
def test_pooled_convolutions_equal_the_graph_without_the_pass(backend_name, case):
    """Every kind of convolution the cpu backend has (an image's few channels as runs, x in
    place, Winograd, groups: pooled in the kernel's lines or after it), NaN included."""
    x, wt, bias, stride, pad, groups, (pk, ps, pp), relu = case

    def f(x, w, b):
        y = bz.conv2d(x, w, stride=stride, padding=pad, groups=groups) + b
        return bz.nn.max_pool(bz.maximum(y, 0.0) if relu else y, (pk, pk), ps, pp)

    args = [bz.asarray(a) for a in (x, wt, bias)]
    on, off = bz.compile(f), bz.compile(f, disable_passes="conv_pool")
    for _ in range(3):  # trace, then the replays (the cpu backend's native program step)
        got, plain = np.asarray(on(*args)), np.asarray(off(*args))
        if backend_name == "cpu":
            np.testing.assert_array_equal(got, plain)
        else:  # (another summation order: within 1e-5 of the largest output)
            scale = max(float(np.nanmax(np.abs(plain))), 1.0)
            np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5 * scale)
    with bz.backend("numpy"):
        want = np.asarray(f(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if pk > ps or pp:  # (a tiled pool stays a reduction, no max_pool op)
        assert [k.name for k in bz.explain(f, *args).kernels] == ["conv_fused"]
    if backend_name == "cpu":  # one native program step, no Python one
        with bz.backends.profile() as calls:
            on(*args)
        assert [name for name, _ in calls] == ["conv_fused"]


def test_pooled_lines_give_the_same_bits_on_one_thread_and_more(backend_name):
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    from braze import _core
    from braze.backends.cpu import conv as cpu_conv
    from braze.graph.ops import OPS, conv_attrs

    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 57, 61, 3)).astype(np.float32)
    w = rng.standard_normal((64, 7, 7, 3)).astype(np.float32) / 12
    pool = (("dilation", (1, 1)), ("kernel_size", (3, 3)), ("padding", ((1, 1), (1, 1))),
            ("stride", (2, 2)))
    attrs = {**conv_attrs(2, stride=(2, 2), padding=((3, 3), (3, 3)), kernel_dilation=(1, 1),
                          input_dilation=(1, 1), groups=1, flip=False),
             "bias": False, "residual": False, "act": "clip", "clip": (0.0, math.inf),
             "pool": pool}
    conv_shape = OPS["conv_fused"].infer((x.shape, w.shape), (x.dtype, w.dtype),
                                         {k: v for k, v in attrs.items() if k != "pool"})[0]
    shape = OPS["conv_fused"].infer((x.shape, w.shape), (x.dtype, w.dtype), attrs)[0]
    outs = []
    for threads in (1, 2, 5):  # (5: more than the cores; lines taken over from late threads)
        mode, args, scratch = cpu_conv._launch(attrs, x.shape, w.shape, conv_shape, threads)
        assert mode == 5 and args[40] == 3 and args[50] == -1  # pooled in the lines
        out = np.empty(shape, np.float32)
        _core.launch(cpu_conv._KERNELS.handle(), [x, w, out, *(np.empty(b, np.uint8)
                                                               for b in scratch),
                                                  cpu_conv._prepacked(mode, 1, w)], args)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    y = bz.nn.max_pool(bz.maximum(bz.conv2d(bz.asarray(x), bz.asarray(w), stride=2,
                                            padding=3), 0.0), (3, 3), 2, 1)
    np.testing.assert_array_equal(outs[0], np.asarray(y))
