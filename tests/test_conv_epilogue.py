"""The conv_epilogue pass: bias, residual and activation fused into the convolution,
results equal to the unfused graph (float32: within 1e-5 relative, the epilogue adds in
the same order as the elementwise kernel), kernel counts asserted, preconditions held."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 6, 6, 4)).astype(np.float32)
W = RNG.standard_normal((5, 3, 3, 4)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)
R = RNG.standard_normal((2, 6, 6, 5)).astype(np.float32)


def _chain(steps):
    def f(x, w, b, r):
        y = bz.conv2d(x, w, padding=1)
        for s in steps:
            if s == "bias":
                y = y + b
            elif s == "bias_nd":
                y = y + bz.reshape(b, (1, 1, 1, 5))
            elif s == "residual":
                y = y + r
            elif s == "relu":
                y = bz.maximum(y, 0.0)
            elif s == "relu6":
                y = bz.clip(y, 0.0, 6.0)
            elif s == "max_lo":
                y = bz.maximum(y, -0.5)
            elif s == "min_hi":
                y = bz.minimum(y, 1.5)
            elif s == "scale":
                y = y * 2.0
        return y
    return f


STEPS = ["bias", "bias_nd", "residual", "relu", "relu6", "max_lo", "min_hi", "scale"]


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.sampled_from(STEPS), max_size=4))
def test_fused_chains_equal_the_unfused_graph(steps):
    f = _chain(steps)
    args = [bz.asarray(a) for a in (X, W, B, R)]
    got = np.asarray(bz.compile(f)(*args))
    ref = np.asarray(bz.compile(f, disable_passes="conv_epilogue")(*args))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("steps,kernels,fired", [
    (["bias", "relu"], 1, {"conv + bias", "conv + relu"}),
    (["bias_nd", "residual", "relu"], 1, {"conv + bias", "conv + residual add", "conv + relu"}),
    (["bias", "relu6"], 1, {"conv + bias", "conv + clip"}),
    (["relu", "bias"], 2, {"conv + relu"}),  # bias after the activation: not the kernel's order
    (["scale", "relu"], 2, set()),
    (["residual", "bias"], 1, {"conv + residual add"}),  # b, (6,6,5)-broadcast: a 2nd add
])
def test_kernel_counts_and_what_fired(steps, kernels, fired):
    f = _chain(steps)
    args = [bz.asarray(a) for a in (X, W, B, R)]
    report = bz.explain(f, *args)
    assert report.num_kernels == kernels + (steps == ["residual", "bias"])
    text = str(report)
    for name in fired:
        assert name in text
    if not fired:
        assert "no epilogues fused" in text


def test_a_conv_used_twice_is_not_fused():
    def f(x, w, b):
        y = bz.conv2d(x, w, padding=1)
        return bz.maximum(y + b, 0.0), y
    args = [bz.asarray(a) for a in (X, W, B)]
    report = bz.explain(f, *args)
    assert "no epilogues fused" in str(report)
    out = [np.asarray(a) for a in f(*args)]
    np.testing.assert_allclose(out[0], np.maximum(out[1] + B, 0), rtol=1e-6)


def test_nan_propagates_through_the_fused_activation():
    x = X.copy()
    x[0, 2, 2, 0] = np.nan
    y = np.asarray(bz.compile(_chain(["bias", "relu6"]))(*[bz.asarray(a) for a in (x, W, B, R)]))
    assert np.isnan(y[0, 1:4, 1:4]).all() and not np.isnan(y[1]).any()


def test_float64_fuses_and_float16_does_not():
    for dtype, fused in ((np.float64, True), (np.float16, False)):
        args = [bz.asarray(a.astype(dtype)) for a in (X, W, B, R)]
        text = str(bz.explain(_chain(["bias", "relu"]), *args))
        assert ("no epilogues fused" not in text) == fused
    assert math.isfinite(float(bz.sum(_chain(["bias", "relu"])(*[bz.asarray(a) for a in
                                                               (X, W, B, R)]))))


def test_a_matmul_written_as_a_1x1_convolution_fuses_through_its_reshape():
    """bz.onnx runs x @ W (a constant W, many rows) as a 1x1 convolution over the rows,
    reshaped back: bias, residual and ReLU still join the convolution's store."""
    rng = np.random.default_rng(5)
    x = bz.asarray(rng.standard_normal((2, 24, 16)).astype(np.float32))
    w = bz.asarray(rng.standard_normal((12, 1, 1, 16)).astype(np.float32))
    b = bz.asarray(rng.standard_normal(12).astype(np.float32))
    r = bz.asarray(rng.standard_normal((2, 24, 12)).astype(np.float32))

    def f(x, w, b, r):
        y = bz.reshape(bz.conv2d(bz.reshape(x, (1, 48, 1, 16)), w), (2, 24, 12))
        return bz.maximum(y + b + r, 0.0)

    report = bz.explain(f, x, w, b, r)
    text = str(report)
    assert "conv + bias" in text and "conv + residual add" in text and "conv + relu" in text
    assert report.num_kernels == 1
    want = np.maximum(np.asarray(x).reshape(48, 16) @ np.asarray(w).reshape(12, 16).T
                      + np.asarray(b) + np.asarray(r).reshape(48, 12), 0).reshape(2, 24, 12)
    np.testing.assert_allclose(np.asarray(bz.compile(f)(x, w, b, r)), want, rtol=1e-5,
                               atol=1e-5)
