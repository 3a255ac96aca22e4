"""bz.nn layers, bz.fast building blocks and bz.load/bz.save against numpy.

Tolerances (float32): 1e-5 relative for norms and rope, 2e-5 for attention (a
softmax and two matrix products), 1e-6 absolute for activations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze import nn

RNG = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def kernel_count(fn, *args) -> int:
    return len(bz.explain(fn, *args).kernels)


# ---------------------------------------------------------------- fast
def np_rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def test_rms_norm_matches_numpy_in_one_kernel() -> None:
    x, w = randn(7, 33), randn(33)
    got = np.asarray(bz.fast.rms_norm(bz.asarray(x), bz.asarray(w), 1e-5))
    np.testing.assert_allclose(got, np_rms_norm(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    assert kernel_count(lambda a: bz.fast.rms_norm(a, bz.asarray(w), 1e-5), bz.asarray(x)) == 1


def test_layer_norm_matches_numpy_in_one_kernel() -> None:
    x, w, b = randn(5, 40), randn(40), randn(40)
    mu = x.mean(-1, keepdims=True)
    want = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
    got = np.asarray(bz.fast.layer_norm(bz.asarray(x), bz.asarray(w), bz.asarray(b), 1e-5))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert kernel_count(lambda a: bz.fast.layer_norm(a, None, None, 1e-5), bz.asarray(x)) == 1


def test_norms_reject_bad_weights_and_dtypes() -> None:
    x = bz.ones((2, 8))
    with pytest.raises(ValueError, match=r"rms_norm: weight of shape \(4,\)"):
        bz.fast.rms_norm(x, bz.ones(4), 1e-5)
    with pytest.raises(ValueError, match="layer_norm: bias of shape"):
        bz.fast.layer_norm(x, None, bz.ones(3), 1e-5)
    with pytest.raises(TypeError, match="rms_norm: expected a real floating array, got int32"):
        bz.fast.rms_norm(bz.ones((2, 8), dtype=bz.int32), None, 1e-5)
    with pytest.raises(ValueError, match="n_heads .6. must be a multiple of n_kv_heads .4."):
        nn.Attention(24, 6, n_kv_heads=4)


def np_rope(x, dims, traditional, base, offset, scale=1.0):
    t = x.shape[-2]
    half = dims // 2
    ang = (offset + np.arange(t))[:, None] * scale * base ** (-np.arange(half) * 2 / dims)
    c, s = np.cos(ang), np.sin(ang)
    out = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2], out[..., 1:dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        out[..., :half], out[..., half:dims] = a * c - b * s, a * s + b * c
    return out


@settings(max_examples=20)
@given(t=st.integers(1, 6), half=st.integers(1, 8), extra=st.sampled_from([0, 2, 4]),
       traditional=st.booleans(), offset=st.integers(0, 500))
def test_rope_matches_numpy(t, half, extra, traditional, offset) -> None:
    dims = 2 * half
    x = randn(2, t, dims + extra)
    got = np.asarray(bz.fast.rope(bz.asarray(x), dims, traditional=traditional, base=10000.0,
                                  offset=bz.asarray(np.int32(offset))))
    # angles are float32 (as in MLX): position * frequency rounds by up to pos * 2**-24
    np.testing.assert_allclose(got, np_rope(x, dims, traditional, 10000.0, offset),
                               rtol=1e-5, atol=2e-5 + np.abs(x).max() * (offset + t) * 2**-23)


@settings(max_examples=25, deadline=None)
@given(lead=st.sampled_from([(), (3,), (2, 3), (2, 1, 2)]), t=st.integers(1, 5),
       half=st.integers(1, 8), extra=st.sampled_from([0, 2]), traditional=st.booleans(),
       offset=st.integers(-3, 120), odtype=st.sampled_from([np.int32, np.int64, np.int8]),
       heads_view=st.booleans())
def test_rope_one_op_over_strided_heads(lead, t, half, extra, traditional, offset, odtype,
                                        heads_view) -> None:
    """Any leading dims, x as a permuted view of a (T, heads, D) buffer (the heads of a
    fused projection), offsets of any integer dtype (negative too): one op (one native
    kernel on cpu), eager and compiled (replayed as a program step)."""
    dims = 2 * half
    d = dims + extra
    x = randn(*lead, t, d)
    want = np_rope(x.astype(np.float64), dims, traditional, 10000.0, offset)
    if heads_view and lead:  # (..., T, D) seen as a permuted view of (..., T, H-last...)
        base = np.ascontiguousarray(np.moveaxis(x, -2, 0))
        arg = bz.moveaxis(bz.asarray(base), 0, -2)
    else:
        arg = bz.asarray(x)

    def f(x, off):
        return bz.fast.rope(x, dims, traditional=traditional, base=10000.0, offset=off)

    off = bz.asarray(odtype(offset))
    np.testing.assert_allclose(np.asarray(f(arg, off)), want, rtol=1e-5, atol=3e-5)
    step = bz.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(step(arg, off)), want, rtol=1e-5, atol=3e-5)
    assert kernel_count(f, arg, off) == 1


def test_rope_in_half_precision_rounds_once() -> None:
    x = randn(2, 4, 8)
    got = bz.fast.rope(bz.asarray(x.astype(np.float16)), 8, traditional=False, base=1e4,
                       offset=5)
    assert got.dtype == np.float16
    want = np_rope(x.astype(np.float16).astype(np.float64), 8, False, 1e4, 5)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_rope_rejects_bad_dims_and_offsets() -> None:
    x = bz.ones((2, 3, 8))
    with pytest.raises(ValueError, match="rope: .*even dims"):
        bz.fast.rope(x, 3, traditional=True, base=1e4)
    with pytest.raises(TypeError, match="rope: offset must be"):
        bz.fast.rope(x, 8, traditional=True, base=1e4, offset=bz.ones(2))


def np_sdpa(q, k, v, scale, mask):
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):  # a row that sees no key is NaN (as the op's)
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v


@settings(max_examples=25)
@given(b=st.integers(1, 2), hkv=st.integers(1, 3), rep=st.integers(1, 3),
       t=st.integers(1, 5), extra=st.integers(0, 4), d=st.sampled_from([1, 4, 8, 64]),
       kind=st.sampled_from(["none", "causal", "bool"]))
def test_sdpa_matches_numpy_with_grouped_heads(b, hkv, rep, t, extra, d, kind) -> None:
    s = t + extra
    q, k, v = randn(b, hkv * rep, t, d), randn(b, hkv, s, d), randn(b, hkv, s, d)
    if kind == "causal":
        mask = np.arange(s)[None, :] <= np.arange(t)[:, None] + (s - t)
        arg: object = "causal"
    elif kind == "bool":
        mask = RNG.random((t, s)) < 0.7
        mask[:, 0] = True  # every row sees a key
        arg = bz.asarray(mask)
    else:
        mask, arg = None, None
    got = np.asarray(bz.fast.scaled_dot_product_attention(
        bz.asarray(q), bz.asarray(k), bz.asarray(v), scale=0.3, mask=arg))
    np.testing.assert_allclose(got, np_sdpa(q, k, v, 0.3, mask), rtol=2e-5, atol=2e-5)


def np_sdpa_past(q, k, v, pk, pv, n, scale, causal):
    """Keys/values = the first n (clamped) past rows, then the new ones; new key j is
    visible to query i when j <= i (causal)."""
    n = min(max(n, 0), pk.shape[2])
    t, s = q.shape[2], k.shape[2]
    keys, vals = np.concatenate([pk[:, :, :n], k], 2), np.concatenate([pv[:, :, :n], v], 2)
    mask = None
    if causal:
        cols = np.arange(n + s)[None, :]
        mask = (cols < n) | (cols - n <= np.arange(t)[:, None])
    return np_sdpa(q, keys, vals, scale, mask)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 2), hkv=st.integers(1, 3), rep=st.integers(1, 3),
       t=st.integers(1, 4), s_extra=st.integers(0, 2), p=st.integers(0, 9),
       n=st.integers(-2, 11), d=st.sampled_from([1, 5, 16, 33, 64]),
       dv=st.sampled_from([3, 16, 64]),
       causal=st.booleans(), permuted=st.booleans(),
       ndtype=st.sampled_from([np.int32, np.int64, np.int16]))
def test_sdpa_over_a_cached_prefix_matches_numpy(b, hkv, rep, t, s_extra, p, n, d, dv, causal,
                                                 permuted, ndtype) -> None:
    """One op (one kernel on cpu) reading the past rows in place, for any past length
    (clamped to [0, P]), grouped heads, and q/k/v given as strided views."""
    s = t + s_extra
    q, k, v = randn(b, hkv * rep, t, d), randn(b, hkv, s, d), randn(b, hkv, s, dv)
    pk, pv = randn(b, hkv, p, d), randn(b, hkv, p, dv)
    want = np_sdpa_past(q, k, v, pk, pv, n, 0.4, causal)

    def heads(a):  # (B, H, T, D) as a permuted view of a (B, T, H, D) buffer
        if not permuted:
            return bz.asarray(a)
        return bz.permute_dims(bz.asarray(np.ascontiguousarray(a.transpose(0, 2, 1, 3))),
                               (0, 2, 1, 3))

    def f(q, k, v, pk, pv, n):
        return bz.fast.scaled_dot_product_attention(q, k, v, scale=0.4,
                                                    mask="causal" if causal else None,
                                                    past=(pk, pv), past_length=n)

    args = (heads(q), heads(k), heads(v), bz.asarray(pk), bz.asarray(pv),
            bz.asarray(ndtype(n)))
    np.testing.assert_allclose(np.asarray(f(*args)), want, rtol=2e-5, atol=2e-5)
    step = bz.compile(f)
    for _ in range(2):  # traced, then replayed (on cpu: a native program step)
        np.testing.assert_allclose(np.asarray(step(*args)), want, rtol=2e-5, atol=2e-5)
    assert kernel_count(f, *args) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_sdpa_in_other_float_dtypes(dtype) -> None:
    """float16 is computed in float32 and rounded once; float64 stays float64."""
    q, k, v = randn(1, 4, 3, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8)
    got = bz.fast.scaled_dot_product_attention(*(bz.asarray(a.astype(dtype)) for a in (q, k, v)),
                                               scale=0.5, mask="causal")
    assert got.dtype == dtype
    m = np.arange(5)[None, :] <= np.arange(3)[:, None] + 2
    want = np_sdpa(*(a.astype(dtype).astype(np.float64) for a in (q, k, v)), 0.5, m)
    tol = 2e-3 if dtype == np.float16 else 1e-12
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol, atol=tol)


def test_sdpa_row_that_sees_no_key_is_nan_and_empty_shapes_work() -> None:
    q, k = randn(1, 1, 3, 4), randn(1, 1, 1, 4)  # causal, T > S: rows 0, 1 see nothing
    got = np.asarray(bz.fast.scaled_dot_product_attention(bz.asarray(q), bz.asarray(k),
                                                          bz.asarray(k), scale=1.0,
                                                          mask="causal"))
    assert np.isnan(got[0, 0, :2]).all() and np.isfinite(got[0, 0, 2]).all()
    empty = bz.fast.scaled_dot_product_attention(bz.zeros((1, 2, 0, 4)), bz.zeros((1, 1, 3, 4)),
                                                 bz.zeros((1, 1, 3, 4)), scale=1.0)
    assert np.asarray(empty).shape == (1, 2, 0, 4)


@pytest.mark.parametrize("which", ["attention", "rope"])
def test_native_kernel_build_failure_falls_back_with_one_warning(backend_name, monkeypatch,
                                                                 which) -> None:
    if backend_name != "cpu":
        pytest.skip("the cpu backend's native kernels")
    import warnings

    from braze.backends.cpu import attention, build, rope
    from braze.backends.cpu.library import KernelFamily

    def fail(source: str, symbol: str) -> int:
        raise build.BuildError(f"simulated failure of {symbol}")

    mod = attention if which == "attention" else rope
    monkeypatch.setattr(build, "load", fail)
    monkeypatch.setattr(mod, "_KERNELS", KernelFamily(lambda _: mod.source()))
    q = randn(1, 2, 3, 8)
    if which == "attention":
        impl, attrs, args = attention.ScaledDotProductAttention(), {"scale": 0.5,
                                                                  "causal": True}, (q, q, q)
        want = np_sdpa(q, q, q, 0.5, np.arange(3)[None, :] <= np.arange(3)[:, None])
    else:
        impl, args = rope.Rope(), (q, np.array(2))
        attrs = {"dims": 8, "traditional": True, "base": 1e4, "scale": 1.0}
        want = np_rope(q, 8, True, 1e4, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [impl(attrs, np.dtype(np.float32), *args) for _ in range(2)]
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "numpy reference" in msgs[0] and impl.op in msgs[0]
    assert impl.calls == {"native": 0, "numpy": 2}
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)


def test_sdpa_rejects_bad_past() -> None:
    q = bz.ones((1, 2, 1, 4))
    with pytest.raises(ValueError, match="do not match"):
        bz.fast.scaled_dot_product_attention(q, q, q, scale=1.0, past=(bz.ones((1, 2, 5, 3)),
                                             bz.ones((1, 2, 5, 4))), past_length=1)
    with pytest.raises(TypeError, match="0-d integer"):
        bz.fast.scaled_dot_product_attention(q, q, q, scale=1.0, past=(q, q),
                                             past_length=bz.asarray(1.0))
    with pytest.raises(ValueError, match="past_length / past_index without past"):
        bz.fast.scaled_dot_product_attention(q, q, q, scale=1.0, past_length=1)
    with pytest.raises(ValueError, match="need mask None or 'causal'"):
        bz.fast.scaled_dot_product_attention(q, q, q, scale=1.0, past=(q, q), past_length=1,
                                             mask=bz.ones((1, 1), dtype=bz.bool))


def test_masked_decode_attention_is_two_matmuls_around_one_softmax_kernel() -> None:
    q, k = bz.asarray(randn(1, 9, 1, 64)), bz.asarray(randn(1, 3, 65, 64))
    mask = bz.asarray(np.arange(65)[None, :] < 40)

    def f(q, k, m):
        return bz.fast.scaled_dot_product_attention(q, k, k, scale=0.125, mask=m)

    report = bz.explain(f, q, k, mask)
    assert [k.name if k.kind == "library" else k.kind for k in report.kernels] == \
        ["matmul", report.kernels[1].kind, "matmul"]
    assert report.kernels[1].kind != "library" and "exp" in report.kernels[1].ops


def test_sdpa_rejects_mismatched_heads() -> None:
    with pytest.raises(ValueError, match="Hq a multiple of Hkv"):
        bz.fast.scaled_dot_product_attention(bz.ones((1, 3, 2, 4)), bz.ones((1, 2, 2, 4)),
                                             bz.ones((1, 2, 2, 4)), scale=1.0)


# ---------------------------------------------------------------- activations
def test_activations_match_numpy() -> None:
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    bx = bz.asarray(x)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(np.asarray(nn.gelu(bx)), 0.5 * x * (1 + erf(x / math.sqrt(2))),
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.silu(bx)), x / (1 + np.exp(-x)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.relu(bx)), np.maximum(x, 0))
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(np.asarray(nn.gelu_approx(bx)), tanh_gelu, atol=1e-6)


# ---------------------------------------------------------------- modules
def test_module_parameters_and_load_weights() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = [nn.Linear(3, 4), nn.Linear(4, 2, bias=False)]
            self.norm = nn.RMSNorm(2)

    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "norm.weight"]
    assert set(net.parameters()) == {"layers", "norm"}
    w = {n: bz.ones(p.shape) for n, p in net.named_parameters()}
    net.load_weights(w)
    assert np.asarray(net.layers[1].weight).sum() == 8
    with pytest.raises(ValueError, match=r"missing \['norm.weight'\]"):
        net.load_weights({k: v for k, v in w.items() if k != "norm.weight"})
    with pytest.raises(ValueError, match="layers.0.weight: expected shape"):
        net.load_weights({**w, "layers.0.weight": bz.ones((3, 3))})
    net.freeze()
    assert net.trainable_parameters() == {}
    net.unfreeze()
    assert len(nn.names_from_tree(net.trainable_parameters())) == 4


def test_linear_quantized_linear_and_concat() -> None:
    lin = nn.Linear(64, 24)
    x = randn(3, 64)
    want = x @ np.asarray(lin.weight).T + np.asarray(lin.bias)
    np.testing.assert_allclose(np.asarray(lin(bz.asarray(x))), want, rtol=1e-5, atol=1e-5)
    q = nn.QuantizedLinear.from_linear(lin, group_size=32, bits=8)
    wq = np.asarray(bz.dequantize(q.weight, q.scales, q.biases, group_size=32, bits=8))
    np.testing.assert_allclose(np.asarray(q(bz.asarray(x))), x @ wq.T + np.asarray(lin.bias),
                               rtol=1e-4, atol=1e-4)
    other = nn.Linear(64, 8)
    both = nn.concat_linears([lin, other])
    got = np.asarray(both(bz.asarray(x)))
    np.testing.assert_allclose(got[:, :24], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="concat_linears"):
        nn.concat_linears([lin, q])


def test_quantized_matmul_act_is_an_op_attribute(backend_name) -> None:
    w = randn(64, 128)
    wq, sc, bi = bz.quantize(bz.asarray(w), bits=4)
    x = randn(20, 128)
    exact = x @ np.asarray(bz.dequantize(wq, sc, bi, bits=4)).T
    got = {a: np.asarray(bz.quantized_matmul(bz.asarray(x), wq, sc, bi, act=a))
           for a in ("float", "int8")}
    np.testing.assert_allclose(got["float"], exact, rtol=1e-5, atol=1e-4)
    # int8 activations: about 1 % of the output scale at most (the kernel's stated bound
    # is per element; this is a loose summary of it)
    assert np.abs(got["int8"] - exact).max() <= 0.02 * np.abs(exact).max()
    with pytest.raises(ValueError, match="act must be"):
        bz.quantized_matmul(bz.asarray(x), wq, sc, bi, act="int4")


def test_embeddings_and_tied_output() -> None:
    emb = nn.Embedding(50, 32)
    ids = np.array([[3, 7, 49]])
    table = np.asarray(emb.weight)
    np.testing.assert_array_equal(np.asarray(emb(bz.asarray(ids))), table[ids])
    q = nn.QuantizedEmbedding.from_embedding(emb, bits=8)
    deq = np.asarray(bz.dequantize(q.weight, q.scales, q.biases, bits=8))
    np.testing.assert_allclose(np.asarray(q(bz.asarray(ids))), deq[ids], rtol=1e-6)
    x = randn(2, 32)
    np.testing.assert_allclose(np.asarray(q.as_linear(bz.asarray(x))), x @ deq.T,
                               rtol=1e-4, atol=1e-4)


def test_attention_with_a_cache_equals_attention_over_the_whole_sequence() -> None:
    att = nn.Attention(32, 4, n_kv_heads=2, rope_traditional=True)
    x = randn(1, 6, 32)
    full, _ = att(bz.asarray(x), 0)
    first, (k, v) = att(bz.asarray(x[:, :4]), 0)
    # a fixed-size cache of 8 rows, the first 4 valid, the rest garbage (masked out)
    pad = bz.asarray(np.full((1, 2, 4, 8), 7.0, np.float32))
    past = (bz.concat([k, pad], axis=2), bz.concat([v, pad], axis=2))
    rest, _ = att(bz.asarray(x[:, 4:]), bz.asarray(np.int32(4)), past)
    np.testing.assert_allclose(np.asarray(rest), np.asarray(full)[:, 4:], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(first), np.asarray(full)[:, :4], rtol=1e-5, atol=1e-6)
    att.fuse_qkv()
    fused, _ = att(bz.asarray(x), 0)
    np.testing.assert_allclose(np.asarray(fused), np.asarray(full), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- load / save
@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_load_round_trip(tmp_path, ext) -> None:
    arrays = {"a": bz.asarray(randn(3, 4)), "b": bz.arange(5, dtype=bz.int32),
              "c": bz.asarray(randn(2).astype(np.float16)),
              "d": bz.astype(bz.asarray(randn(3)), bz.bfloat16)}
    path = str(tmp_path / f"w.{ext}")
    bz.save(path, arrays)
    back = bz.load(path)
    assert set(back) == set(arrays)
    for k in arrays:
        assert back[k].dtype == arrays[k].dtype
        np.testing.assert_array_equal(np.asarray(back[k]), np.asarray(arrays[k]))


def test_safetensors_metadata_and_format_errors(tmp_path) -> None:
    path = str(tmp_path / "m.safetensors")
    bz.save(path, {"x": bz.zeros(2)}, metadata={"format": "braze"})
    _, meta = bz.load(path, return_metadata=True)
    assert meta["format"] == "braze"
    with pytest.raises(ValueError, match="unknown format"):
        bz.save(str(tmp_path / "m.bin"), {"x": bz.zeros(2)})
    (tmp_path / "junk.bin").write_bytes(b"junk")
    with pytest.raises(ValueError, match="unknown format"):
        bz.load(str(tmp_path / "junk.bin"))
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        bz.load(str(tmp_path / "bad.safetensors"))


@pytest.mark.parametrize("rep", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_decode_rows_of_64_match_numpy(rep: int, causal: bool) -> None:
    """The decode shape (one query row per head, D = Dv = 64, a cached prefix read in
    place), every grouping of query heads per key head from 1 to 5."""
    hkv, p, n = 3, 40, 29
    q, k, v = randn(1, hkv * rep, 1, 64), randn(1, hkv, 1, 64), randn(1, hkv, 1, 64)
    pk, pv = randn(1, hkv, p, 64), randn(1, hkv, p, 64)
    want = np_sdpa_past(q, k, v, pk, pv, n, 0.125, causal)
    got = bz.fast.scaled_dot_product_attention(
        bz.asarray(q), bz.asarray(k), bz.asarray(v), scale=0.125,
        mask="causal" if causal else None, past=(bz.asarray(pk), bz.asarray(pv)),
        past_length=bz.asarray(np.int32(n)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)


# ---------------------------------------------------------------- batched decoding
@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 4), hkv=st.integers(1, 2), rep=st.integers(1, 3), t=st.integers(1, 3),
       slots=st.integers(1, 5), p=st.integers(1, 9), d=st.sampled_from([5, 16, 64]),
       seed=st.integers(0, 2**16), indexed=st.booleans(),
       ndtype=st.sampled_from([np.int32, np.int64]))
def test_sdpa_per_row_lengths_and_past_index_match_rows_alone(b, hkv, rep, t, slots, p, d, seed,
                                                              indexed, ndtype) -> None:
    """Batched decoding: each batch row attends to its own number of cached rows, read from
    the cache slot its past index names (clamped into the cache), in place; the result of a
    row is that row computed alone (the reference, and the one-length op of that row)."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(sh).astype(np.float32)
               for sh in ((b, hkv * rep, t, d), (b, hkv, t, d), (b, hkv, t, d)))
    nslots = slots if indexed else b
    pk, pv = (rng.standard_normal((nslots, hkv, p, d)).astype(np.float32) for _ in range(2))
    lens = rng.integers(-1, p + 2, b).astype(ndtype)
    idx = rng.integers(-1, nslots + 1, b).astype(ndtype)
    _check_per_row_sdpa(q, k, v, pk, pv, lens, idx if indexed else None, 0.3)


def _check_per_row_sdpa(q, k, v, pk, pv, lens, idx, scale) -> None:  # type: ignore[no-untyped-def]
    """Per-row attention (eager, traced, replayed; one op) == each row alone over its own
    slot of the past converted to float32 (2e-5)."""
    b = q.shape[0]
    rows = np.clip(idx, 0, pk.shape[0] - 1) if idx is not None else np.arange(b)
    want = np.concatenate([np_sdpa_past(q[i:i + 1], k[i:i + 1], v[i:i + 1],
                                        pk[rows[i]:rows[i] + 1].astype(np.float32),
                                        pv[rows[i]:rows[i] + 1].astype(np.float32),
                                        int(lens[i]), scale, True) for i in range(b)])

    def f(q, k, v, pk, pv, n, *ix):
        return bz.fast.scaled_dot_product_attention(
            q, k, v, scale=scale, mask="causal", past=(pk, pv), past_length=n,
            past_index=ix[0] if ix else None)

    args = [bz.asarray(a) for a in (q, k, v, pk, pv, lens)] + \
        ([bz.asarray(idx)] if idx is not None else [])
    got = f(*args)
    assert got.dtype == bz.float32
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)
    step = bz.compile(f)
    for _ in range(2):  # traced, then replayed (cpu: the native kernel as a program step)
        np.testing.assert_allclose(np.asarray(step(*args)), want, rtol=2e-5, atol=2e-5)
    assert kernel_count(f, *args) == 1


@pytest.mark.parametrize("rep", [2, 3, 4, 5])
def test_grouped_decode_heads_give_each_row_its_bits_alone(rep) -> None:
    """A batched decode step over a float16 cache (the cpu kernel runs the query heads of a
    key head in groups of up to 3, each key loaded once for them): every row matches
    numpy (2e-5) and equals, bit for bit, that row computed alone (one head at a time)."""
    rng = np.random.default_rng(rep)
    b, hkv, p, d = 8, 3, 45, 64
    q, k, v = (rng.standard_normal(sh).astype(np.float32)
               for sh in ((b, hkv * rep, 1, d), (b, hkv, 1, d), (b, hkv, 1, d)))
    pk, pv = (rng.standard_normal((b + 2, hkv, p, d)).astype(np.float16) for _ in range(2))
    lens = np.array([0, 1, 15, 16, 17, 33, 44, 45], np.int32)
    idx = np.array([9, 0, 3, 2, 5, 4, 7, 1], np.int32)
    step = bz.compile(lambda q, k, v, pk, pv, n, ix: bz.fast.scaled_dot_product_attention(
        q, k, v, scale=0.125, mask="causal", past=(pk, pv), past_length=n, past_index=ix))
    got = np.asarray(step(*(bz.asarray(a) for a in (q, k, v, pk, pv, lens, idx))))
    for i in range(b):
        want = np_sdpa_past(q[i:i + 1], k[i:i + 1], v[i:i + 1],
                            pk[idx[i]:idx[i] + 1].astype(np.float32),
                            pv[idx[i]:idx[i] + 1].astype(np.float32), int(lens[i]), 0.125,
                            True)
        np.testing.assert_allclose(got[i:i + 1], want, rtol=2e-5, atol=2e-5)
        alone = step(*(bz.asarray(a) for a in (q[i:i + 1], k[i:i + 1], v[i:i + 1], pk, pv,
                                                lens[i:i + 1], idx[i:i + 1])))
        np.testing.assert_array_equal(np.asarray(alone), got[i:i + 1])


def test_sdpa_rejects_bad_per_row_lengths_and_index() -> None:
    q = k = v = bz.ones((2, 1, 1, 4))
    past = (bz.ones((3, 1, 5, 4)), bz.ones((3, 1, 5, 4)))
    with pytest.raises(TypeError, match="one per batch row"):
        bz.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask="causal", past=past,
                                             past_length=bz.ones((3,), dtype=bz.int32),
                                             past_index=bz.zeros((2,), dtype=bz.int32))
    with pytest.raises(TypeError, match="past index"):
        bz.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask="causal", past=past,
                                             past_length=1,
                                             past_index=bz.zeros((2,), dtype=bz.float32))
    with pytest.raises(ValueError, match="same batch unless"):  # 3 slots, no index
        bz.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask="causal", past=past,
                                             past_length=1)
    with pytest.raises(ValueError, match="without past"):
        bz.fast.scaled_dot_product_attention(q, k, v, scale=1.0, past_index=[0, 0])


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 4), h=st.integers(1, 3), t=st.integers(1, 3), half=st.integers(1, 8),
       traditional=st.booleans(), seed=st.integers(0, 2**16), heads_view=st.booleans())
def test_rope_per_row_offsets_match_rows_alone(b, h, t, half, traditional, seed,
                                               heads_view) -> None:
    """One offset per sequence (x's first axis): each row rotated as alone, eager and
    compiled, x given as a strided view of the heads of a fused projection too."""
    rng = np.random.default_rng(seed)
    dims = 2 * half
    x = rng.standard_normal((b, h, t, dims + 2)).astype(np.float32)
    offs = rng.integers(0, 300, b).astype(np.int32)
    want = np.stack([np_rope(x[i].astype(np.float64), dims, traditional, 10000.0, int(offs[i]))
                     for i in range(b)])
    arg = bz.permute_dims(bz.asarray(np.ascontiguousarray(x.transpose(0, 2, 1, 3))),
                          (0, 2, 1, 3)) if heads_view else bz.asarray(x)

    def f(x, off):
        return bz.fast.rope(x, dims, traditional=traditional, base=10000.0, offset=off)

    np.testing.assert_allclose(np.asarray(f(arg, bz.asarray(offs))), want, rtol=1e-5,
                               atol=3e-5)
    step = bz.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(step(arg, bz.asarray(offs))), want, rtol=1e-5,
                                   atol=3e-5)
    with pytest.raises(TypeError, match="one per entry"):
        f(arg, bz.asarray(np.zeros(b + 1, np.int32)))


def test_rope_tables_kept_between_calls_follow_offsets_base_and_scale() -> None:
    """The cpu kernel keeps its last cos/sin table (a decode step ropes every layer at the
    same positions): calls alternating offsets, bases and scales at one shape each get
    their own angles."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 1, 16)).astype(np.float32)
    calls = [([5, 9, 0, 300], 1e4, 1.0), ([5, 9, 0, 301], 1e4, 1.0), ([5, 9, 0, 300], 1e4, 1.0),
             ([5, 9, 0, 300], 5e5, 1.0), ([5, 9, 0, 300], 1e4, 0.5), ([5, 9, 0, 300], 1e4, 1.0)]
    steps = {(b, s): bz.compile(lambda x, o, b=b, s=s: bz.fast.rope(
        x, 16, traditional=False, base=b, scale=s, offset=o)) for _, b, s in calls}
    for offs, base, scale in calls:  # (compiled: the native kernel runs every call)
        got = np.asarray(steps[base, scale](bz.asarray(x), bz.asarray(np.int32(offs))))
        want = np.stack([np_rope(x[i].astype(np.float64), 16, False, base, offs[i], scale)
                         for i in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=3e-5)


@pytest.mark.parametrize("indexed", [False, True])
def test_sdpa_reads_a_float16_past_as_it_is(indexed) -> None:
    """A float16 KV cache (float32 q, k, v): read in place, each element widened exactly,
    so the result equals attention over the cache converted to float32 (2e-5); one op."""
    rng = np.random.default_rng(3)
    b, hkv, rep, p, d = 3, 2, 3, 37, 64
    q, k, v = (rng.standard_normal(sh).astype(np.float32)
               for sh in ((b, hkv * rep, 1, d), (b, hkv, 1, d), (b, hkv, 1, d)))
    pk, pv = (rng.standard_normal((b, hkv, p, d)).astype(np.float16) for _ in range(2))
    lens = np.array([37, 5, 0], np.int32)
    idx = np.array([2, 0, 1], np.int32)
    _check_per_row_sdpa(q, k, v, pk, pv, lens, idx if indexed else None, 0.125)


@settings(max_examples=12, deadline=None)
@given(lens=st.lists(st.integers(1, 5), min_size=1, max_size=4), fused=st.booleans(),
       seed=st.integers(0, 2**16))
def test_ragged_rows_match_the_padded_batch(lens, fused, seed) -> None:
    """Attention over packed rows (nn.Ragged: sequences of different lengths, no padding
    rows, plus filler rows) matches the padded (B, T) batch at every valid row (2e-5):
    output, and the new keys/values at the valid positions; over a cache at per-sequence
    positions (past_index) as a batched pre-fill runs it."""
    rng = np.random.default_rng(seed)
    b, t, dims, hkv, hd = len(lens), max(lens), 16, 2, 4
    att = nn.Attention(dims, 4, n_kv_heads=hkv)
    if fused:
        att.fuse_qkv()
    x = rng.standard_normal((b, t, dims)).astype(np.float32)
    pos = rng.integers(0, 4, b).astype(np.int32)
    past = tuple(bz.asarray(rng.standard_normal((b + 1, hkv, 12, hd)).astype(np.float32))
                 for _ in range(2))
    idx = bz.asarray(rng.permutation(b + 1)[:b].astype(np.int32))
    want, (wk, wv) = att(bz.asarray(x), bz.asarray(pos), past, idx)
    valid = [(j, i) for j in range(b) for i in range(lens[j])]
    filler = 3  # packed rows past the last token (a GEMM's whole blocks of rows)
    to_padded = np.zeros(b * t, np.int32)
    for r, (j, i) in enumerate(valid):
        to_padded[j * t + i] = r
    to_packed = np.array([j * t + i for j, i in valid] + [0] * filler, np.int32)
    rows = np.concatenate([x[j, i][None] for j, i in valid] + [np.zeros((filler, dims),
                                                                        np.float32)])
    ragged = nn.Ragged(bz.asarray(to_padded), bz.asarray(to_packed), b, t)
    got, (gk, gv) = att(bz.asarray(rows), bz.asarray(pos), past, idx, ragged=ragged)
    assert got.shape == (len(valid) + filler, dims) and gk.shape == wk.shape
    want, wk, wv, got, gk, gv = (np.asarray(a) for a in (want, wk, wv, got, gk, gv))
    for r, (j, i) in enumerate(valid):
        np.testing.assert_allclose(got[r], want[j, i], rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(gk[j, :, i], wk[j, :, i], rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(gv[j, :, i], wv[j, :, i], rtol=2e-5, atol=2e-5)
    with pytest.raises(ValueError, match="ragged rows need x of shape"):
        att(bz.asarray(x), bz.asarray(pos), past, idx, ragged=ragged)
    with pytest.raises(ValueError, match="ragged needs to_padded of shape"):
        att(bz.asarray(rows[:-1]), bz.asarray(pos), past, idx, ragged=ragged)
    with pytest.raises(ValueError, match="ragged needs to_padded of shape"):
        att(bz.asarray(rows), bz.asarray(pos), past, idx,
            ragged=nn.Ragged(ragged.to_padded, ragged.to_packed, b, t + 1))
