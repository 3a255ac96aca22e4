"""The layout pass: transposes around channels-last convolutions sink through
elementwise ops, reductions and concatenations until they cancel. Exact (bit-identical
to the graph without the pass); reorder and kernel counts asserted."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz

RNG = np.random.default_rng(0)
W1 = bz.asarray(RNG.standard_normal((6, 3, 3, 4)).astype(np.float32))
W2 = bz.asarray(RNG.standard_normal((6, 1, 1, 6)).astype(np.float32))
SCALE = bz.asarray(RNG.standard_normal((6, 1, 1)).astype(np.float32))
SHIFT = bz.asarray(RNG.standard_normal((1, 6, 1, 1)).astype(np.float32))
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def conv_nchw(x, w, padding=0):
    """An ONNX-style convolution: NCHW in and out around braze's channels-last conv."""
    y = bz.conv2d(bz.permute_dims(x, TO_NHWC), w, padding=padding)
    return bz.permute_dims(y, TO_NCHW)


def block(x, steps):
    y = conv_nchw(x, W1, padding=1)
    skip = y
    for s in steps:
        if s == "bn":
            y = y * SCALE + SHIFT
        elif s == "relu":
            y = bz.maximum(y, 0.0)
        elif s == "conv":
            y = conv_nchw(y, W2)
        elif s == "residual":
            y = y + skip
        elif s == "concat":
            y = bz.concat([y, skip], axis=1)[:, :6]
        elif s == "gap":
            y = y * bz.mean(y, axis=(2, 3), keepdims=True)
        elif s == "sum_c":
            y = y + bz.sum(y, axis=1)[:, None]
    return y


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.sampled_from(["bn", "relu", "conv", "residual", "concat", "gap",
                                       "sum_c"]), max_size=6))
def test_layout_is_exact(steps):
    x = bz.asarray(RNG.standard_normal((2, 4, 7, 7)).astype(np.float32))
    f = bz.compile(lambda x: block(x, steps), disable_passes="conv_epilogue")
    ref = bz.compile(lambda x: block(x, steps), disable_passes=("conv_epilogue", "layout"))
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(ref(x)))
    # with the epilogue fused the sums round differently: within 1e-5 of the largest value
    # (chains of products and channel sums grow values and cancel)
    with_all = np.asarray(bz.compile(lambda x: block(x, steps))(x))
    want = np.asarray(ref(x))
    np.testing.assert_allclose(with_all, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))


def _count(report, what):
    return sum(1 for line in str(report).splitlines() if what in line)


def test_a_resnet_block_keeps_channels_last_between_its_convolutions():
    def resnet_block(x):
        y = bz.maximum(conv_nchw(x, W1, padding=1) * SCALE + SHIFT, 0.0)
        z = conv_nchw(y, W2) + SHIFT
        return bz.maximum(z + y, 0.0)

    x = bz.ones((1, 4, 8, 8))
    on = bz.explain(resnet_block, x)
    off = bz.explain(bz.compile(resnet_block, disable_passes="layout"), x)
    # with the pass: the conv chain runs channels-last, the second convolution's shift,
    # residual add and ReLU are its epilogue; one reorder in (a view the first conv reads)
    # and one out. Without it: every conv reads a transposed copy.
    assert on.num_kernels < off.num_kernels
    assert _count(on, "conv_fused") == 1 and "layout:" in str(on)
    assert on.num_kernels == 3  # conv, its scale-shift-ReLU kernel, conv_fused
    np.testing.assert_allclose(np.asarray(bz.compile(resnet_block)(x)),
                               np.asarray(resnet_block(x)), rtol=1e-5)


def test_graphs_without_a_convolution_keep_their_layout():
    f = lambda x: bz.permute_dims(x, (1, 0)) * 2.0 + 1.0  # noqa: E731
    r = bz.explain(f, bz.ones((4, 5)))
    assert "layout: no rewrites" in str(r) or "layout:" not in str(r)
    r2 = bz.explain(lambda x: bz.sum(bz.permute_dims(x, (1, 0)), axis=0), bz.ones((4, 5)))
    assert "reduction of a permute" not in str(r2)


def test_reduction_without_keepdims_and_double_permute():
    x = bz.asarray(RNG.standard_normal((2, 4, 5, 5)).astype(np.float32))

    def f(x):
        y = conv_nchw(x, W1, padding=1)  # (2, 6, 5, 5)
        return bz.sum(y, axis=2) + bz.max(bz.permute_dims(y, (0, 1, 3, 2)), axis=3)

    got = np.asarray(bz.compile(f)(x))
    ref = np.asarray(bz.compile(f, disable_passes=("layout", "conv_epilogue"))(x))
    np.testing.assert_array_equal(got, ref)
