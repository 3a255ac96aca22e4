"""Convolutions, pooling, normalization and resizing against direct references.

The convolution reference here is written independently of the op record's im2col: a
loop over kernel taps with the input index ``o * stride + k * dilation - pad_lo`` mapped
back through the input dilation (``idx % input_dilation == 0``). Tolerances: float32
results within 1e-4 relative of a float64 computation (sums of up to a few hundred
products), float64 within 1e-10.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.graph.ops import CONV


def direct_conv(x, w, stride, padding, kdil, idil, groups, flip):
    """float64 convolution by taps (see the module docstring)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n = x.ndim - 2
    if flip:
        w = np.flip(w, axis=tuple(range(1, n + 1)))
    k = w.shape[1:-1]
    sizes = [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[1:-1], idil)]
    outs = [(sizes[i] + padding[i][0] + padding[i][1] - (k[i] - 1) * kdil[i] - 1) // stride[i]
            + 1 for i in range(n)]
    cg, og = x.shape[-1] // groups, w.shape[0] // groups
    out = np.zeros((x.shape[0], *outs, w.shape[0]))
    for taps in np.ndindex(*k):
        # input positions read by this tap for every output position, per dim
        idx, ok = [], []
        for i in range(n):
            pos = np.arange(outs[i]) * stride[i] + taps[i] * kdil[i] - padding[i][0]
            valid = (pos >= 0) & (pos < sizes[i]) & (pos % idil[i] == 0)
            idx.append(np.where(valid, pos // idil[i], 0))
            ok.append(valid)
        sub = x[(slice(None), *np.ix_(*idx), slice(None))]
        mask = np.ones(outs, bool)
        for i in range(n):
            mask = mask & ok[i].reshape([-1 if j == i else 1 for j in range(n)])
        sub = sub * mask[None, ..., None]
        for g in range(groups):
            wt = w[(slice(g * og, (g + 1) * og), *taps)]  # (og, cg)
            out[..., g * og:(g + 1) * og] += sub[..., g * cg:(g + 1) * cg] @ wt.T
    return out


@st.composite
def conv_cases(draw):
    n = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 3))
    og = draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    stride = [draw(st.integers(1, 3)) for _ in range(n)]
    kdil = [draw(st.integers(1, 2)) for _ in range(n)]
    idil = [draw(st.sampled_from([1, 1, 2])) for _ in range(n)]
    pad = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(n)]
    sizes = []
    for i in range(n):
        span = (k[i] - 1) * kdil[i] + 1
        lo = max(1, -(-(span - pad[i][0] - pad[i][1] - 1) // idil[i]) + 1)
        sizes.append(draw(st.integers(lo, lo + 4)))
    batch = draw(st.integers(0, 2))
    flip = draw(st.booleans())
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((batch, *sizes, groups * cg)).astype(dtype)
    w = rng.standard_normal((groups * og, *k, cg)).astype(dtype)
    return x, w, dict(stride=stride, padding=(tuple(p[0] for p in pad), tuple(p[1] for p in pad)),
                      kernel_dilation=kdil, input_dilation=idil, groups=groups, flip=flip)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(case=conv_cases())
def test_conv_general_matches_direct_reference(case):
    x, w, kw = case
    got = np.asarray(bz.conv_general(bz.asarray(x), bz.asarray(w), **kw))
    pads = list(zip(*kw["padding"]))
    want = direct_conv(x, w, kw["stride"], pads, kw["kernel_dilation"], kw["input_dilation"],
                       kw["groups"], kw["flip"])
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **_tol(x.dtype))


def test_conv_non_contiguous_inputs_and_low_precision():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)  # NCHW, read as NHWC view
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    xb = bz.permute_dims(bz.asarray(x), (0, 2, 3, 1))
    wb = bz.permute_dims(bz.asarray(w), (0, 2, 3, 1))
    want = direct_conv(x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), [2, 2],
                       [(1, 1), (1, 1)], [1, 1], [1, 1], 1, False)
    np.testing.assert_allclose(np.asarray(bz.conv2d(xb, wb, stride=2, padding=1)), want,
                               rtol=1e-4, atol=1e-4)
    half = bz.conv2d(bz.astype(xb, bz.bfloat16), bz.astype(wb, bz.bfloat16), padding=1)
    assert half.dtype == bz.bfloat16
    want = direct_conv(x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), [1, 1],
                       [(1, 1), (1, 1)], [1, 1], [1, 1], 1, False)
    np.testing.assert_allclose(np.asarray(half).astype(np.float32), want, rtol=0.05, atol=0.3)


def test_conv_against_scipy_correlate():
    scipy_signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((12, 10))
    k = rng.standard_normal((3, 4))
    got = bz.conv2d(bz.asarray(x[None, :, :, None]), bz.asarray(k[None, :, :, None]))
    np.testing.assert_allclose(np.asarray(got)[0, :, :, 0],
                               scipy_signal.correlate(x, k, mode="valid"), rtol=1e-10)
    full = bz.conv_general(bz.asarray(x[None, :, :, None]), bz.asarray(k[None, :, :, None]),
                           padding=([2, 3], [2, 3]), flip=True)
    np.testing.assert_allclose(np.asarray(full)[0, :, :, 0],
                               scipy_signal.convolve(x, k, mode="full"), rtol=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,output_padding,groups",
                         [(1, 0, 1, 0, 1), (2, 1, 1, 1, 1), (3, 2, 2, 1, 2), (2, 0, 1, 0, 2)])
def test_conv_transpose_is_the_adjoint_of_conv(n, stride, padding, dilation, output_padding,
                                               groups):
    # <conv(x, w), y> == <x, conv_transpose(y, w')> with w' the per-group channel swap
    rng = np.random.default_rng(n)
    k, cg, og = 3, 2, 3
    size = 7
    x = rng.standard_normal((2, *([size] * n), groups * cg))
    w = rng.standard_normal((groups * og, *([k] * n), cg))
    fn = {1: bz.conv1d, 2: bz.conv2d, 3: bz.conv3d}[n]
    tfn = {1: bz.conv_transpose1d, 2: bz.conv_transpose2d, 3: bz.conv_transpose3d}[n]
    y = fn(bz.asarray(x), bz.asarray(w), stride=stride, padding=padding, dilation=dilation,
           groups=groups)
    ct = rng.standard_normal(y.shape)
    # w' (groups * cg, *k, og): input channels of the transposed conv are conv's outputs
    wt = w.reshape(groups, og, *([k] * n), cg)
    wt = np.moveaxis(wt, (1, -1), (-1, 1)).reshape(groups * cg, *([k] * n), og)
    extra = (size + 2 * padding - dilation * (k - 1) - 1) % stride
    xt = tfn(bz.asarray(ct), bz.asarray(wt), stride=stride, padding=padding,
             dilation=dilation, output_padding=min(extra, max(stride, dilation) - 1),
             groups=groups)
    assert xt.shape == x.shape
    assert math.isclose(float(bz.sum(y * ct)), float(np.sum(x * np.asarray(xt))),
                        rel_tol=1e-9)
    del output_padding


def test_conv_bad_input_is_refused_at_the_call():
    x, w = bz.ones((1, 5, 5, 4)), bz.ones((6, 3, 3, 2))
    with pytest.raises(ValueError, match=r"conv2d: x \(1, 5, 5, 4\) has 4 channels"):
        bz.conv2d(x, w)  # groups=1 but weight takes 2 channels
    with pytest.raises(ValueError, match="conv2d: expected x"):
        bz.conv2d(bz.ones((5, 5, 4)), w)
    with pytest.raises(TypeError, match="conv2d: x and weight must be real floating"):
        bz.conv2d(bz.ones((1, 5, 5, 2), dtype=bz.int32), w)
    with pytest.raises(ValueError, match="conv2d: stride must be >= 1"):
        bz.conv2d(bz.ones((1, 5, 5, 2)), w, stride=0)
    with pytest.raises(ValueError, match="leaves no output position"):
        bz.conv2d(bz.ones((1, 2, 2, 2)), w)
    with pytest.raises(ValueError, match="output_padding"):
        bz.conv_transpose2d(bz.ones((1, 4, 4, 2)), w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="conv: padding must be"):
        bz.conv_general(bz.ones((1, 5, 2)), bz.ones((1, 3, 2)), padding=(1, 2, 3))


def test_conv_is_one_library_node_and_fuses_its_epilogue():
    x, w, b = bz.ones((1, 8, 8, 3)), bz.ones((4, 3, 3, 3)), bz.ones((4,))
    y = bz.maximum(bz.conv2d(x, w, padding=1) + b, 0.0)
    assert y._node.inputs[0].inputs[0].op is CONV
    report = bz.explain(lambda x, w, b: bz.maximum(bz.conv2d(x, w, padding=1) + b, 0.0), x, w, b)
    # the bias + ReLU epilogue fused into the convolution (the conv_epilogue pass)
    assert report.num_kernels == 1 and report.kernels[0].name == "conv_fused"
    assert float(y[0, 3, 3, 0]) == 28.0


# ------------------------------------------------------------------------- pooling
def direct_pool(x, k, s, pads, d, ceil, kind, include_pad=True):
    n = x.ndim - 2
    outs = []
    for i in range(n):
        total = x.shape[1 + i] + pads[i][0] + pads[i][1] - d[i] * (k[i] - 1) - 1
        o = (-(-total // s[i]) if ceil else total // s[i]) + 1
        if ceil and (o - 1) * s[i] >= x.shape[1 + i] + pads[i][0]:
            o -= 1
        outs.append(o)
    out = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for pos in np.ndindex(*outs):
        vals, count = [], 0
        for taps in np.ndindex(*k):
            idx = [pos[i] * s[i] + taps[i] * d[i] - pads[i][0] for i in range(n)]
            inside = all(0 <= idx[i] < x.shape[1 + i] for i in range(n))
            in_pad = all(-pads[i][0] <= idx[i] < x.shape[1 + i] + pads[i][1] for i in range(n))
            if inside:
                vals.append(x[(slice(None), *idx)])
            count += inside or (include_pad and in_pad)
        stack = np.stack(vals)
        out[(slice(None), *pos)] = stack.max(0) if kind == "max" else stack.sum(0) / count
    return out


@st.composite
def pool_cases(draw):
    n = draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    s = [draw(st.integers(1, 3)) for _ in range(n)]
    d = [draw(st.integers(1, 2)) for _ in range(n)]
    pads = [(draw(st.integers(0, (k[i] - 1) * d[i])), draw(st.integers(0, (k[i] - 1) * d[i])))
            for i in range(n)]
    sizes = [draw(st.integers((k[i] - 1) * d[i] + 1, (k[i] - 1) * d[i] + 5)) for i in range(n)]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 2)), *sizes, draw(st.integers(1, 3))))
    return x, k, s, d, pads, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(case=pool_cases())
def test_pools_match_direct_reference(case):
    x, k, s, d, pads, ceil, include = case
    padding = (tuple(p[0] for p in pads), tuple(p[1] for p in pads))
    xb = bz.asarray(x.astype(np.float32))
    mx = bz.nn.max_pool(xb, tuple(k), s, padding, d, ceil)
    av = bz.nn.avg_pool(xb, tuple(k), s, padding, ceil, include, d)
    np.testing.assert_allclose(np.asarray(mx), direct_pool(x, k, s, pads, d, ceil, "max"),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(av), direct_pool(x, k, s, pads, d, ceil, "avg", include),
                               rtol=1e-5, atol=1e-6)


def test_tiled_pool_is_one_reduction_and_int_max_pool():
    x = bz.reshape(bz.arange(32, dtype=bz.int32), (1, 4, 4, 2))
    got = np.asarray(bz.nn.max_pool(x, (2, 2), padding=0))
    want = np.arange(32).reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))
    np.testing.assert_array_equal(got, want)
    got = np.asarray(bz.nn.max_pool(x, (3, 3), stride=1, padding=1))
    assert got.dtype == np.int32 and got[0, 0, 0, 0] == 10
    report = bz.explain(lambda x: bz.nn.avg_pool(x, (2, 2)), bz.ones((1, 8, 8, 3)))
    assert report.num_kernels == 1
    # a padded average pool: the window sums (one op), then the reciprocals' product
    report = bz.explain(lambda x: bz.nn.avg_pool(x, (3, 3), stride=2, padding=1),
                        bz.ones((1, 9, 9, 3)))
    assert [k.name for k in report.kernels][0] == "window_sum" and report.num_kernels == 2
    report = bz.explain(lambda x: bz.nn.max_pool(x, (3, 3), stride=2, padding=1),
                        bz.ones((1, 9, 9, 3)))
    # one max_pool op (a native kernel on cpu reads the windows in place, no padded copy)
    assert [k.name for k in report.kernels] == ["max_pool"]


@settings(max_examples=30, deadline=None)
@given(case=pool_cases(), nan=st.booleans())
def test_pool_ops_match_reference_bits_in_place_and_compiled(case, nan):
    """The max_pool and window_sum ops (native kernels on cpu, eager and in a replay
    program) give the numpy reference's bits on contiguous x and on a channels-last view of
    an NCHW array (strided channels), NaN propagating; max pooling equals the direct
    reference exactly."""
    x, k, s, d, pads, ceil, include = case
    x = x.astype(np.float32)
    if nan:
        x.reshape(-1)[len(x.reshape(-1)) // 2] = np.nan
    padding = (tuple(p[0] for p in pads), tuple(p[1] for p in pads))

    def pools(a):
        return (bz.nn.max_pool(a, tuple(k), s, padding, d, ceil),
                bz.nn.avg_pool(a, tuple(k), s, padding, ceil, include, d))

    with bz.backend("numpy"):
        want = [np.asarray(v) for v in pools(bz.asarray(x))]
    np.testing.assert_array_equal(
        want[0], direct_pool(x.astype(np.float64), k, s, pads, d, ceil, "max").astype(np.float32))
    for got, w in zip(pools(bz.asarray(x)), want):
        np.testing.assert_array_equal(np.asarray(got), w)
    nchw = np.ascontiguousarray(np.moveaxis(x, -1, 1))
    moved = bz.compile(lambda a: pools(bz.moveaxis(a, 1, -1)))
    # (mlx's compiled average sums in its own order and divides where the reference
    # multiplies by the reciprocal: within an ulp of the result, or, where the taps cancel,
    # a few ulps of the largest tap)
    mlx = bz.backends.current().name == "mlx"
    ulp = 2.5e-7 if mlx else 0.0
    big = float(np.nanmax(np.abs(x), initial=0.0)) if x.size else 0.0
    atol = 4 * float(np.finfo(np.float32).eps) * big if mlx else 0.0
    for _ in range(2):  # the trace, then the replay
        got = moved(nchw)
        np.testing.assert_array_equal(np.asarray(got[0]), want[0])
        np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=ulp, atol=atol)


@settings(max_examples=25, deadline=None)
@given(channels=st.sampled_from([16, 64, 83, 128]), pad=st.integers(0, 1),
       specials=st.lists(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]), max_size=6),
       seed=st.integers(0, 2**16))
def test_pool_vector_blocks_match_reference_bits(channels, pad, specials, seed):
    """Wide channels (the kernel's blocks of 64 and 16 channels, then single ones): max
    pooling assumes numbers and redoes a block that held a NaN or an infinity exactly, so
    NaN, +-inf and ties of -0.0 / +0.0 anywhere (interior or border windows) keep the
    reference's bits."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 7, 8, channels)).astype(np.float32)
    x[..., ::5] = np.float32(0.0)  # ties of zeros...
    x[:, ::2, :, ::5] = np.float32(-0.0)  # ...of both signs
    for v in specials:
        x[0, rng.integers(7), rng.integers(8), rng.integers(channels)] = v

    def pools(a):
        return (bz.nn.max_pool(a, (3, 3), 2, pad), bz.nn.avg_pool(a, (3, 3), 2, pad))

    with bz.backend("numpy"):
        want = [np.asarray(v) for v in pools(bz.asarray(x))]
    for got, w in zip(pools(bz.asarray(x)), want):
        np.testing.assert_array_equal(np.asarray(got).view(np.int32), w.view(np.int32))


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_pools_run_natively_on_cpu(op):
    if bz.backends.current().name != "cpu":
        pytest.skip("the native kernel is the cpu backend's")
    pool = getattr(bz.nn, op)
    impl = bz.backends.current().library["max_pool" if op == "max_pool" else "window_sum"]
    before = impl.calls["native"]
    x = np.random.default_rng(0).standard_normal((1, 9, 9, 20)).astype(np.float32)
    np.asarray(pool(x, (3, 3), stride=2, padding=1))
    assert impl.calls["native"] == before + 1
    f = bz.compile(lambda a: pool(a, (3, 3), stride=2, padding=1) + 1.0)
    for _ in range(3):  # (the first calls may run it eagerly, before the replay plan)
        np.asarray(f(x))
    warm = impl.calls["native"]
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(f(x)))
    assert impl.calls["native"] == warm  # replays run it as a program step, no Python


@settings(max_examples=20, deadline=None)
@given(case=pool_cases())
def test_avg_pool_gradient(case):
    """Against central differences (average pooling is linear: exact up to rounding)."""
    x, k, s, d, pads, ceil, include = case
    padding = (tuple(p[0] for p in pads), tuple(p[1] for p in pads))
    ct = np.random.default_rng(1).standard_normal(
        bz.nn.avg_pool(bz.asarray(x), tuple(k), s, padding, ceil, include, d).shape)

    def f(a):
        return bz.sum(bz.nn.avg_pool(a, tuple(k), s, padding, ceil, include, d) * ct)

    g = np.asarray(bz.grad(f)(bz.asarray(x)))
    direction = np.random.default_rng(2).standard_normal(x.shape)
    up, down = (float(f(bz.asarray(x + e * 1e-3 * direction))) for e in (1, -1))
    assert math.isclose(float(np.sum(g * direction)), (up - down) / 2e-3, rel_tol=1e-7,
                        abs_tol=1e-9)


@settings(max_examples=20, deadline=None)
@given(case=pool_cases())
def test_max_pool_gradient(case):
    """Against central differences (no ties: distinct random values), and equal to the
    gradient of the chain of maximums it replaced (ties halved) on an input full of ties."""
    x, k, s, d, pads, ceil, _ = case
    padding = (tuple(p[0] for p in pads), tuple(p[1] for p in pads))
    ct = np.random.default_rng(1).standard_normal(
        bz.nn.max_pool(bz.asarray(x), tuple(k), s, padding, d, ceil).shape)

    def f(a):
        return bz.sum(bz.nn.max_pool(a, tuple(k), s, padding, d, ceil) * ct)

    g = np.asarray(bz.grad(f)(bz.asarray(x)))
    direction = np.random.default_rng(2).standard_normal(x.shape)
    h = 1e-6  # max pooling is piecewise linear: exact away from ties
    up, down = (float(f(bz.asarray(x + e * h * direction))) for e in (1, -1))
    fd = (up - down) / (2 * h)
    assert math.isclose(float(np.sum(g * direction)), fd, rel_tol=1e-6, abs_tol=1e-6)

    ties = np.round(x)  # many equal values in each window
    names = [r.name for r in bz.explain(lambda a: bz.nn.max_pool(
        a, tuple(k), s, padding, d, ceil), bz.asarray(ties)).kernels]
    if "max_pool" not in names:
        return  # (windows that tile x: a max reduction, with that reduction's tie rule)

    def chain(a):
        from braze.graph.ops import pool_fill, pool_windows
        geo = bz.nn.max_pool(a, tuple(k), s, padding, d, ceil).shape[1:-1]
        lo = [p[0] for p in pads]
        hi = [(o - 1) * s_ + (k_ - 1) * d_ + 1 - n - l for o, s_, k_, d_, n, l
              in zip(geo, s, k, d, a.shape[1:-1], lo)]
        crop = a[(slice(None),) + tuple(slice(0, n + min(h_, 0))
                                        for n, h_ in zip(a.shape[1:-1], hi))]
        z = bz.full((a.shape[0], *[c + l + max(h_, 0) for c, l, h_
                                   in zip(crop.shape[1:-1], lo, hi)], a.shape[-1]),
                    pool_fill(a.dtype), dtype=a.dtype)
        z[(slice(None),) + tuple(slice(l, l + c) for l, c in zip(lo, crop.shape[1:-1]))] = crop
        views = pool_windows(z, k, s, d, geo)
        out = views[0]
        for v in views[1:]:
            out = bz.maximum(out, v)
        return bz.sum(out * ct)

    np.testing.assert_allclose(np.asarray(bz.grad(f)(bz.asarray(ties))),
                               np.asarray(bz.grad(chain)(bz.asarray(ties))), rtol=1e-12,
                               atol=1e-12)


def test_max_pool_vmap_folds_the_batch():
    x = np.random.default_rng(0).standard_normal((3, 2, 7, 7, 4)).astype(np.float32)

    def f(a):
        return bz.nn.max_pool(a, (3, 3), stride=2, padding=1)

    want = np.stack([np.asarray(f(bz.asarray(e))) for e in x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no per-example fallback
        np.testing.assert_array_equal(np.asarray(bz.vmap(f)(bz.asarray(x))), want)


def test_pool_bad_input():
    with pytest.raises(ValueError, match="max_pool: expected x"):
        bz.nn.max_pool(bz.ones((4, 4)), (2, 2))
    with pytest.raises(ValueError, match="avg_pool: padding must be"):
        bz.nn.avg_pool(bz.ones((1, 4, 4, 1)), (2, 2), padding=2)
    with pytest.raises(TypeError, match="avg_pool: expected a real floating"):
        bz.nn.avg_pool(bz.ones((1, 4, 4, 1), dtype=bz.int32), (2, 2))


# ------------------------------------------------------------- norms and resizing
def test_batch_group_instance_norm():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 5, 6)).astype(np.float32)
    m, v = rng.standard_normal(6).astype(np.float32), rng.uniform(0.5, 2, 6).astype(np.float32)
    g, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    got = bz.nn.batch_norm(bz.asarray(x), m, v, g, b, eps=1e-3)
    np.testing.assert_allclose(np.asarray(got), (x - m) / np.sqrt(v + 1e-3) * g + b,
                               rtol=1e-5, atol=1e-5)
    got = bz.nn.group_norm(bz.asarray(x), 3, g, b, eps=1e-5)
    xg = x.reshape(2, 25, 3, 2).astype(np.float64)
    want = ((xg - xg.mean((1, 3), keepdims=True)) /
            np.sqrt(xg.var((1, 3), keepdims=True) + 1e-5)).reshape(x.shape) * g + b
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    inst = bz.nn.InstanceNorm(6)(bz.asarray(x))
    want = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(inst), want, rtol=1e-4, atol=1e-4)
    bn = bz.nn.BatchNorm(6)
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    y = bn(bz.asarray(x))  # training: batch statistics, running ones updated
    np.testing.assert_allclose(np.asarray(y), (x - x.mean((0, 1, 2))) /
                               np.sqrt(x.var((0, 1, 2)) + 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(bn.running_mean), 0.1 * x.mean((0, 1, 2)),
                               rtol=1e-4, atol=1e-6)
    bn.unfreeze()
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    with pytest.raises(ValueError, match="batch_norm: mean of shape"):
        bz.nn.batch_norm(bz.asarray(x), m[:3], v)


@pytest.mark.parametrize("align", [False, True])
def test_upsample_against_torch_conventions(align):
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)
    near = np.asarray(bz.nn.upsample(bz.asarray(x), 2))
    np.testing.assert_array_equal(near, x.repeat(2, 1).repeat(2, 2))
    lin = np.asarray(bz.nn.upsample(bz.asarray(x), (2, 1), mode="linear", align_corners=align))
    col = x[0, :, 0, 0]
    if align:
        src = np.arange(6) * (2 / 5)
    else:
        src = np.maximum((np.arange(6) + 0.5) / 2 - 0.5, 0)
    np.testing.assert_allclose(lin[0, :, 0, 0], np.interp(src, np.arange(3), col), rtol=1e-6)


def test_conv_layers_shapes_and_parameters():
    conv = bz.nn.Conv2d(4, 8, 3, padding=1, groups=2)
    assert conv.weight.shape == (8, 3, 3, 2)
    assert set(conv.parameters()) == {"weight", "bias"}
    assert conv(bz.ones((1, 5, 5, 4))).shape == (1, 5, 5, 8)
    with pytest.raises(ValueError, match="multiples of groups"):
        bz.nn.Conv2d(3, 8, 3, groups=2)


@settings(max_examples=25, deadline=None)
@given(case=conv_cases())
def test_conv_gradients_against_finite_differences(case):
    x, w, kw = case
    if x.shape[0] == 0:
        return
    x, w = x.astype(np.float64), w.astype(np.float64)
    rng = np.random.default_rng(0)
    ct = None

    def f(a, b):
        nonlocal ct
        y = bz.conv_general(a, b, **kw)
        if ct is None:
            ct = rng.standard_normal(y.shape)
        return bz.sum(y * ct)

    gx, gw = bz.grad(f, argnums=(0, 1))(bz.asarray(x), bz.asarray(w))
    # the convolution is bilinear: directional derivatives by central differences are exact
    # up to rounding (tolerance 1e-7 relative of float64 sums)
    for arr, gr, idx in ((x, gx, 0), (w, gw, 1)):
        d = rng.standard_normal(arr.shape)
        args = [x, w]
        plus, minus = list(args), list(args)
        plus[idx], minus[idx] = arr + 1e-3 * d, arr - 1e-3 * d
        fd = (float(f(*map(bz.asarray, plus))) - float(f(*map(bz.asarray, minus)))) / 2e-3
        assert math.isclose(float(np.sum(np.asarray(gr) * d)), fd, rel_tol=1e-7, abs_tol=1e-7)


@pytest.mark.parametrize("shape,kw", [
    ((2, 7, 7, 8), dict(w=(16, 1, 1, 8))),  # 1x1: a GEMM over x as it is
    ((2, 9, 9, 6), dict(w=(6, 3, 3, 1), groups=6, stride=2, padding=1)),  # depthwise
    ((1, 10, 11, 5), dict(w=(7, 3, 2, 5), padding=([1, 0], [2, 1]), dilation=(2, 1))),
    ((2, 12, 12, 6), dict(w=(4, 3, 3, 3), groups=2, stride=(1, 2))),  # grouped
    ((3, 100, 4), dict(w=(5, 4, 4), stride=3)),  # 1-d
    ((1, 8, 9, 6, 2), dict(w=(3, 2, 2, 2, 2), padding=1)),  # 3-d
])
def test_cpu_conv_tactics_match_the_reference(backend_name, shape, kw):
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(kw.pop("w")).astype(np.float32)
    fn = {3: bz.conv1d, 4: bz.conv2d, 5: bz.conv3d}[x.ndim]
    impl = bz.backends.get("cpu").library["conv"]
    before = dict(impl.calls)
    got = np.asarray(fn(bz.asarray(x), bz.asarray(w), **kw))
    with bz.backend("numpy"):
        want = np.asarray(fn(bz.asarray(x), bz.asarray(w), **kw))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    native = ("implicit", "depthwise", "im2col")
    assert impl.calls["numpy"] == before["numpy"]  # a native tactic ran
    assert sum(impl.calls[k] for k in native) > sum(before[k] for k in native)
    # the same bits with one thread
    backend = bz.backends.get("cpu")
    threads, backend.num_threads = backend.num_threads, 1
    try:
        one = np.asarray(fn(bz.asarray(x), bz.asarray(w), **kw))
    finally:
        backend.num_threads = threads
    np.testing.assert_array_equal(one, got)


@st.composite
def implicit_gemm_cases(draw):
    """One-group convolutions the implicit GEMM runs (1-d or 2-d; 16+ channels unless 1x1)."""
    n = draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    cin = draw(st.integers(1, 40)) if math.prod(k) == 1 else draw(st.integers(16, 40))
    cout = draw(st.integers(1, 40))
    stride = [draw(st.integers(1, 2)) for _ in range(n)]
    pad = [draw(st.integers(0, 1)) for _ in range(n)]
    sizes = [draw(st.integers(max(1, k[i] - 2 * pad[i]), 14)) for i in range(n)]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 2)), *sizes, cin)).astype(np.float32)
    w = rng.standard_normal((cout, *k, cin)).astype(np.float32)
    return x, w, stride, pad


@settings(max_examples=40, deadline=None)
@given(case=implicit_gemm_cases(), epilogue=st.booleans())
def test_cpu_conv_packed_rows_give_the_in_place_bits(backend_name, case, epilogue):
    """The implicit GEMM over x's rows packed first (conv.ALIAS_BYTES / ALIAS_ROWS: forced
    on every call here) gives the bits of the GEMM reading x in place."""
    if backend_name != "cpu":
        return
    from braze.backends.cpu import conv as cpu_conv
    from braze.graph.ops import conv_attrs

    x, w, stride, pad = case
    n = x.ndim - 2
    attrs = conv_attrs(n, stride=stride, padding=(tuple(pad), tuple(pad)),
                       kernel_dilation=[1] * n, input_dilation=[1] * n, groups=1, flip=False)
    extra = []
    if epilogue:  # bias, residual and ReLU in the store
        attrs = {**attrs, "bias": True, "residual": True, "act": "clip", "clip": (0.0, math.inf)}
        shape = CONV.infer((x.shape, w.shape), (x.dtype, w.dtype), attrs)[0]
        extra = [np.ones(w.shape[0], np.float32), np.full(shape, -0.5, np.float32)]
    impl = bz.backends.get("cpu").library["conv"]
    saved = cpu_conv.ALIAS_BYTES, cpu_conv.ALIAS_ROWS
    try:
        cpu_conv.ALIAS_BYTES = 1 << 62  # never
        in_place = impl(attrs, np.dtype(np.float32), x, w, *extra)
        # always (every C_in * 4 bytes is a multiple, any tile)
        cpu_conv.ALIAS_BYTES, cpu_conv.ALIAS_ROWS = 4, 0
        packed = impl(attrs, np.dtype(np.float32), x, w, *extra)
    finally:
        cpu_conv.ALIAS_BYTES, cpu_conv.ALIAS_ROWS = saved
    np.testing.assert_array_equal(packed, in_place)


@st.composite
def banded_cases(draw):
    """Convolutions of every implicit-GEMM tactic: in place, rows of runs or gathered (few
    channels) or packed (rows 4 KiB apart: 1024 channels; the test lowers ALIAS_ROWS), with
    enough rows for several bands."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(["in_place", "few_channels", "packed"]))
    cin = {"in_place": 48, "few_channels": 3, "packed": 1024}[kind]
    k = 1 if kind == "packed" else draw(st.integers(1, 3))
    size = draw(st.integers(k, 12))
    x = rng.standard_normal((draw(st.integers(1, 3)), size, size + 1, cin)).astype(np.float32)
    w = rng.standard_normal((draw(st.integers(1, 40)), k, k, cin)).astype(np.float32)
    return x, w, draw(st.integers(1, 2)), draw(st.integers(0, k // 2))


@settings(max_examples=30, deadline=None)
@given(case=banded_cases(), threads=st.sampled_from([1, 2, 3, 7]))
def test_cpu_conv_bands_of_rows_give_the_bits_of_one_band(backend_name, case, threads):
    """The implicit GEMM's work in bands of rows (conv.BAND_BYTES: one block of rows per band
    here, then one band for all) gives the same bits at any thread count: each output sums
    its taps and channels in one order whatever the band or thread (7 threads on fewer cores:
    threads descheduled mid-region, their items taken by the others)."""
    if backend_name != "cpu":
        return
    from braze.backends.cpu import conv as cpu_conv
    from braze.graph.ops import conv_attrs

    x, w, stride, pad = case
    attrs = conv_attrs(2, stride=[stride] * 2, padding=((pad, pad), (pad, pad)),
                       kernel_dilation=[1, 1], input_dilation=[1, 1], groups=1, flip=False)
    impl = bz.backends.get("cpu").library["conv"]
    saved, saved_threads, saved_rows = cpu_conv.BAND_BYTES, impl._num_threads, cpu_conv.ALIAS_ROWS
    try:
        cpu_conv.ALIAS_ROWS = 0  # rows 4 KiB apart packed whatever the tile
        cpu_conv.BAND_BYTES = 1  # a band per block of rows
        impl._num_threads = lambda: threads
        banded = impl(attrs, np.dtype(np.float32), x, w)
        cpu_conv.BAND_BYTES = 1 << 62  # one band
        impl._num_threads = lambda: 1
        whole = impl(attrs, np.dtype(np.float32), x, w)
    finally:
        cpu_conv.BAND_BYTES, impl._num_threads = saved, saved_threads
        cpu_conv.ALIAS_ROWS = saved_rows
    np.testing.assert_array_equal(banded, whole)
    with bz.backend("numpy"):
        want = np.asarray(bz.conv2d(bz.asarray(x), bz.asarray(w), stride=stride,
                                    padding=pad))
    np.testing.assert_allclose(banded, want, rtol=1e-4, atol=1e-4 * math.sqrt(w[0].size))


@pytest.mark.parametrize("shape,w,kw", [
    ((1, 6, 7, 1024), (40, 1, 1, 1024), {}),  # rows 4 KiB apart
    ((2, 9, 9, 512), (24, 3, 3, 512), dict(stride=2, padding=1)),  # 2 x 2 KiB apart
])
def test_cpu_conv_with_rows_4k_apart_matches_the_reference(backend_name, shape, w, kw):
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    ww = rng.standard_normal(w).astype(np.float32) / 16
    got = np.asarray(bz.conv2d(bz.asarray(x), bz.asarray(ww), **kw))
    with bz.backend("numpy"):
        want = np.asarray(bz.conv2d(bz.asarray(x), bz.asarray(ww), **kw))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(6, 16), w=st.integers(6, 16),
       cin=st.sampled_from([16, 20, 33, 64, 130]), cout=st.sampled_from([16, 20, 70, 130]),
       pads=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
       epilogue=st.sampled_from(["none", "bias_relu", "bias_residual_clip"]),
       seed=st.integers(0, 2**16))
def test_cpu_conv_winograd_matches_direct_and_reference(backend_name, n, h, w, cin, cout, pads,
                                                        epilogue, seed):
    """3x3 convolutions at stride 1 (mode 7, Winograd F(2x2, 3x3)): odd and even sizes
    (tiles past the edge), any padding, channel counts off the vector width, each epilogue;
    against the direct convolution (mode 2 on the same call: 1e-5 of the largest output) and
    the float64 reference (1e-4), and the same bits on one thread and on two."""
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    from braze import _core
    from braze.backends.cpu import conv as cpu_conv
    from braze.graph.ops import conv_attrs

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, cin)).astype(np.float32)
    wt = (rng.standard_normal((cout, 3, 3, cin)) / math.sqrt(9 * cin)).astype(np.float32)
    padding = ((pads[0], pads[1]), (pads[2], pads[3]))
    attrs = conv_attrs(2, stride=(1, 1), padding=tuple(zip(*padding)), kernel_dilation=(1, 1),
                       input_dilation=(1, 1), groups=1, flip=False)
    shape = CONV.infer((x.shape, wt.shape), (x.dtype, wt.dtype), attrs)[0]
    extra = []
    if epilogue != "none":
        attrs = {**attrs, "bias": True, "act": "clip",
                 "clip": (0.0, math.inf) if epilogue == "bias_relu" else (-0.5, 0.5)}
        extra.append(rng.standard_normal(cout).astype(np.float32))
        if epilogue == "bias_residual_clip":
            attrs["residual"] = True
            extra.append(rng.standard_normal(shape).astype(np.float32))
    if min(shape[1:3]) < cpu_conv.WINOGRAD_SIZE:
        return  # (too small an output for mode 7)

    def launch(winograd, threads):
        cpu_conv.WINOGRAD, before = winograd, cpu_conv.WINOGRAD
        try:
            mode, args, scratch = cpu_conv._launch(attrs, x.shape, wt.shape, shape, threads)
        finally:
            cpu_conv.WINOGRAD = before
        assert (mode == 7) == winograd
        out = np.empty(shape, np.float32)
        _core.launch(cpu_conv._KERNELS.handle(),
                     [x, wt, *extra, out, *(np.empty(b, np.uint8) for b in scratch),
                      cpu_conv._prepacked(mode, 1, wt)], args)
        return out

    got = launch(True, 2)
    np.testing.assert_array_equal(launch(True, 1), got)
    direct = launch(False, 2)
    scale = max(float(np.abs(direct).max()), 1.0)
    np.testing.assert_allclose(got, direct, rtol=0, atol=1e-5 * scale)
    want = direct_conv(x, wt, (1, 1), list(padding), (1, 1), (1, 1), 1, False)
    if epilogue != "none":
        want = want + extra[0].astype(np.float64)
        if epilogue == "bias_residual_clip":
            want = np.clip(want + extra[1], -0.5, 0.5)
        else:
            want = np.maximum(want, 0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale)


def test_cpu_conv_picks_winograd_for_3x3_stride_1(backend_name):
    """bz.conv2d's 3x3 convolutions at stride 1 with enough channels run as mode 7 (eager
    and in a replay plan); strided, dilated, grouped or narrow ones stay direct."""
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    impl = bz.backends.get("cpu").library["conv"]
    rng = np.random.default_rng(3)
    x = bz.asarray(rng.standard_normal((1, 12, 12, 32)).astype(np.float32))
    w = bz.asarray(rng.standard_normal((48, 3, 3, 32)).astype(np.float32) / 17)
    before = impl.calls["winograd"]
    y = np.asarray(bz.conv2d(x, w, padding=1))
    assert impl.calls["winograd"] == before + 1
    f = bz.compile(lambda a: bz.maximum(bz.conv2d(a, w, padding=1), 0.0))
    for _ in range(3):  # trace, then replays: the same bits as eager
        np.testing.assert_array_equal(np.asarray(f(x)), np.maximum(y, 0.0))
    before = impl.calls["winograd"]
    for kw in (dict(stride=2, padding=1), dict(dilation=2, padding=2), dict(groups=2)):
        ww = w if "groups" not in kw else bz.asarray(rng.standard_normal((48, 3, 3, 16))
                                                     .astype(np.float32))
        np.asarray(bz.conv2d(x, ww, **kw))
    np.asarray(bz.conv2d(bz.asarray(rng.standard_normal((1, 12, 12, 8)).astype(np.float32)),
                         bz.asarray(rng.standard_normal((48, 3, 3, 8)).astype(np.float32))))
    assert impl.calls["winograd"] == before


_TIER_PROBE = """
import hashlib, numpy as np, braze as bz
rng = np.random.default_rng(0)
for shape, w, kw in [((1, 9, 9, 16), (24, 3, 3, 16), dict(padding=1)),
                     ((2, 7, 7, 8), (16, 1, 1, 8), {}),
                     ((1, 15, 15, 3), (8, 5, 5, 3), dict(stride=2, padding=2)),
                     ((1, 8, 8, 8), (8, 3, 3, 4), dict(groups=2)),
                     ((2, 9, 10, 20), (70, 3, 3, 20), dict(padding=1))]:  # Winograd, tails
    x = rng.standard_normal(shape).astype(np.float32)
    ww = rng.standard_normal(w).astype(np.float32)
    y = np.asarray(bz.conv2d(bz.asarray(x), bz.asarray(ww), **kw))
    print(hashlib.sha256(y.tobytes()).hexdigest()[:16])
img = rng.standard_normal((1, 3, 21, 21)).astype(np.float32).transpose(0, 2, 3, 1)  # NCHW planes
w3 = bz.asarray(rng.standard_normal((64, 3, 3, 3)).astype(np.float32))
stem = bz.compile(lambda a: bz.nn.max_pool(bz.maximum(bz.conv2d(a, w3, stride=2), 0.0), (3, 3),
                                           (2, 2)))  # conv_pool: its pooled lines in a ring
for y in (bz.conv2d(bz.asarray(img), w3, stride=2), stem(bz.asarray(img))):
    print(hashlib.sha256(np.asarray(y).tobytes()).hexdigest()[:16])
p = rng.standard_normal((2, 9, 9, 83)).astype(np.float32)
p[0, 3, 4, 70] = p[1, 0, 0, 5] = np.nan
y = np.asarray(bz.nn.max_pool(bz.asarray(p), (3, 3), (2, 2), padding=1))
print(hashlib.sha256(y.tobytes()).hexdigest()[:16])
"""


def test_cpu_conv_gives_the_same_bits_on_every_isa_level(backend_name):
    import os
    import subprocess
    import sys

    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    outs = {}
    for level in ("native", "avx2", "scalar"):
        r = subprocess.run([sys.executable, "-c", _TIER_PROBE], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "BRAZE_ISA": level})
        if level == "avx2" and r.returncode and "BRAZE_ISA" in r.stderr:
            continue  # this CPU has no AVX2
        assert r.returncode == 0, r.stderr[-2000:]
        outs[level] = r.stdout.split()
    assert len(outs["native"]) == 8
    assert all(v == outs["native"] for v in outs.values()), outs


@pytest.mark.parametrize("padding,dilation", [
    (((3, 3), (3, 3)), (1, 1)),    # a ResNet stem: runs of k * C floats read in place
    (((2, -1), (-2, 2)), (1, 1)),  # negative lo / hi: crops
    (((0, 0), (-38, 40)), (1, 1)),  # cropped past x's end: lines of zeros only
    (((0, 4), (1, 0)), (2, 1)),    # dilated first dim only: still runs
    (((1, 1), (2, 2)), (1, 2)),    # dilated last dim: each row's taps gathered
])
def test_cpu_conv_few_input_channels_pads_crops_and_dilations(backend_name, padding, dilation):
    """Few input channels (mode 5): without a dilated last dim x is copied channels-last
    (an NHWC line as one run, an NCHW image's three planes interleaved) with its padding as
    zeros and a kernel row's taps read as one run, with one each row's
    taps are gathered; against the direct reference (1e-4), against the in-place implicit
    GEMM on the channels padded with zeros to 48 (the same sums: 1e-5), and bit for bit
    with x strided as an NCHW image."""
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    from braze import _core
    from braze.backends.cpu import conv as cpu_conv
    from braze.graph.ops import conv_attrs

    rng = np.random.default_rng(5)
    # 37 positions a line: an NCHW image's planes interleave 16 at a time, then one by one
    x = rng.standard_normal((2, 13, 37, 3)).astype(np.float32)
    w = rng.standard_normal((70, 5, 4, 3)).astype(np.float32)
    attrs = conv_attrs(2, stride=(2, 1), padding=tuple(zip(*padding)),
                       kernel_dilation=dilation, input_dilation=(1, 1), groups=1, flip=False)
    impl = bz.backends.get("cpu").library["conv"]
    before = impl.calls["im2col"]
    got = impl(attrs, np.dtype(np.float32), x, w)
    assert impl.calls["im2col"] == before + 1
    want = direct_conv(x, w, (2, 1), list(padding), dilation, (1, 1), 1, False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    xw = np.concatenate([x, np.zeros(x.shape[:-1] + (45,), np.float32)], axis=-1)
    ww = np.concatenate([w, np.zeros(w.shape[:-1] + (45,), np.float32)], axis=-1)
    before = impl.calls["implicit"]
    np.testing.assert_allclose(impl(attrs, np.dtype(np.float32), xw, ww), got, rtol=1e-5,
                               atol=1e-5)
    assert impl.calls["implicit"] == before + 1
    # x strided as an NCHW image (a replay plan passes such views): the same bits
    xt = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
    shape = CONV.infer((x.shape, w.shape), (x.dtype, w.dtype), attrs)[0]
    mode, args, scratch = cpu_conv._launch(attrs, x.shape, w.shape, shape, 2,
                                           x_strides=tuple(s // 4 for s in xt.strides))
    assert mode == 5
    out = np.empty(shape, np.float32)
    bufs = [xt.base, w, out, *(np.empty(b, np.uint8) for b in scratch),
            cpu_conv._prepacked(mode, 1, w)]
    _core.launch(cpu_conv._KERNELS.handle(), bufs, args)
    np.testing.assert_array_equal(out, got)


def test_cpu_conv_long_k_in_chunks_with_a_narrow_last_panel(backend_name):
    """K = 9 * 200 taps x channels: walked in chunks (partial sums stored in out between
    them), a last panel of 6 of its 64 (AVX-512) channels, the epilogue after the last."""
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native convolution")
    from braze.graph.ops import conv_attrs

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 6, 7, 200)).astype(np.float32)
    w = rng.standard_normal((70, 3, 3, 200)).astype(np.float32)
    bias = rng.standard_normal(70).astype(np.float32)
    res = rng.standard_normal((1, 6, 7, 70)).astype(np.float32)
    attrs = {**conv_attrs(2, stride=1, padding=1, kernel_dilation=1, input_dilation=1,
                          groups=1, flip=False),
             "bias": True, "residual": True, "act": "clip", "clip": (0.0, math.inf)}
    impl = bz.backends.get("cpu").library["conv"]
    got = impl(attrs, np.dtype(np.float32), x, w, bias, res)
    want = np.maximum(direct_conv(x, w, (1, 1), [(1, 1), (1, 1)], (1, 1), (1, 1), 1, False)
                      + bias + res, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@settings(max_examples=80, deadline=None)
@given(case=conv_cases(), epilogue=st.sampled_from([None, "bias", "bias+residual+relu",
                                                    "clip"]))
def test_cpu_conv_kernel_matches_direct_reference_on_drawn_cases(backend_name, case, epilogue):
    """The native tactics called directly (the eager path sends tiny graphs to numpy)."""
    if backend_name != "cpu":
        return
    from braze.graph.ops import conv_attrs

    x, w, kw = case
    if x.dtype != np.float32:
        return
    n = x.ndim - 2
    attrs = conv_attrs(n, stride=kw["stride"], padding=kw["padding"],
                       kernel_dilation=kw["kernel_dilation"],
                       input_dilation=kw["input_dilation"], groups=kw["groups"], flip=kw["flip"])
    want = direct_conv(x, w, kw["stride"], list(zip(*kw["padding"])), kw["kernel_dilation"],
                       kw["input_dilation"], kw["groups"], kw["flip"])
    impl = bz.backends.get("cpu").library["conv"]
    extra = []
    if epilogue:
        rng = np.random.default_rng(1)
        bias = rng.standard_normal(w.shape[0]).astype(np.float32)
        attrs = {**attrs, "bias": "bias" in epilogue, "residual": "residual" in epilogue,
                 "act": "clip" if epilogue != "bias" else "none",
                 "clip": (0.0, math.inf) if "relu" in epilogue else (-0.5, 0.75)}
        if "bias" in epilogue:
            extra.append(bias)
            want = want + bias
        if "residual" in epilogue:
            res = rng.standard_normal(want.shape).astype(np.float32)
            extra.append(res)
            want = want + res
        if attrs["act"] == "clip":
            want = np.clip(want, *attrs["clip"])
    got = impl(attrs, np.dtype(np.float32), x, w, *extra)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["nchw_stem", "implicit_epilogue", "depthwise_epilogue",
                                  "grouped"])
def test_compiled_convolutions_replay_as_native_steps(backend_name, case):
    """The second call of a compiled function replays through a prepared plan: the conv is
    a native program step there (x read strided by the im2col gather for an NCHW input; the
    packed weight a derived buffer) and gives the first call's results."""
    rng = np.random.default_rng(7)
    if case == "nchw_stem":
        x = rng.standard_normal((2, 3, 33, 33)).astype(np.float32)
        w = rng.standard_normal((16, 7, 7, 3)).astype(np.float32)

        def f(x, w, b):
            return bz.maximum(bz.conv2d(bz.permute_dims(x, (0, 2, 3, 1)), w, stride=2,
                                        padding=3) + b, 0.0)
    elif case == "implicit_epilogue":
        x = rng.standard_normal((2, 15, 15, 24)).astype(np.float32)
        w = rng.standard_normal((16, 3, 3, 24)).astype(np.float32)

        def f(x, w, b):
            y = bz.conv2d(x, w, padding=1)
            return bz.clip(y + b + bz.conv2d(x, w, padding=1) * 0.5, 0.0, 6.0)
    elif case == "depthwise_epilogue":
        x = rng.standard_normal((2, 15, 15, 16)).astype(np.float32)
        w = rng.standard_normal((16, 3, 3, 1)).astype(np.float32)

        def f(x, w, b):
            return bz.maximum(bz.conv2d(x, w, padding=1, groups=16) + b, 0.0)
    else:
        x = rng.standard_normal((2, 15, 15, 24)).astype(np.float32)
        w = rng.standard_normal((16, 3, 3, 6)).astype(np.float32)

        def f(x, w, b):
            return bz.conv2d(x, w, stride=2, groups=4) + b
    b = rng.standard_normal(16).astype(np.float32)
    args = [bz.asarray(a) for a in (x, w, b)]
    g = bz.compile(f)
    first, second = np.asarray(g(*args)), np.asarray(g(*args))
    with bz.backend("numpy"):
        want = np.asarray(f(*args))
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)
    if backend_name == "mlx":  # (MLX's own convolution: its algorithm may differ per layout)
        np.testing.assert_allclose(second, first, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(second, first)
    if backend_name == "cpu":
        with bz.backends.profile() as calls:
            np.asarray(g(*args))
        convs = [name for name, _ in calls if name.startswith("conv")]
        assert convs and not any(name.endswith("(python)") for name in convs), calls
    w2 = bz.asarray(w * 2)  # a new weight: the plan's packed copy is remade
    with bz.backend("numpy"):
        want2 = np.asarray(f(args[0], w2, args[2]))
    np.testing.assert_allclose(np.asarray(g(args[0], w2, args[2])), want2, rtol=1e-4,
                               atol=1e-4)


def test_cuda_emulator_runs_convolutions_on_the_host_after_one_warning(backend_name):
    if backend_name != "numpy":
        pytest.skip("once, beside the numpy backend's run")
    import warnings

    from braze.backends import cuda as cuda_backend

    try:
        bz.backends.get("cuda-emulator")
    except Exception as e:  # noqa: BLE001 - no emulator here (no C++ compiler)
        pytest.skip(f"no cuda emulator: {e}")
    cuda_backend._HOST_WARNED.discard("conv")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 12, 12, 4)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 4)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bz.backend("cuda-emulator"):
            got = [np.asarray(bz.conv2d(bz.asarray(x), bz.asarray(w), padding=1))
                   for _ in range(2)]
    want = direct_conv(x, w, [1, 1], [(1, 1), (1, 1)], [1, 1], [1, 1], 1, False)
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
    assert sum("conv has no device kernel" in str(c.message) for c in caught) == 1
