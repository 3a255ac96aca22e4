"""The cuda backend's device kernels for an LLM (backends/cuda/llm.py, kernels/llm.cu), run
on the CPU emulator of the CUDA execution model: quantized matmul, rotary embedding,
attention with and without a key/value cache (batched decoding's per-row lengths and cache
slots, float16 caches), row gathers and concatenation, each against the numpy reference
through compiled functions on ``cuda-emulator`` (asserting the op ran on the device, not on
the host); a compiled function's weights uploaded once and held; and a decode step of
SmolLM2 on the emulator against the numpy reference.

Tolerances: float32 results within 2e-5 relative to the largest |reference| (another
summation order; the quantized matmul dequantizes per group in registers); the LLM's logits
within 1e-4 of the logit scale, with the same greedy token.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.backends.cpu.build import compiler

pytestmark = pytest.mark.skipif(compiler() is None or "cuda-emulator" not in
                                bz.backends.available(), reason="no C++ compiler")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """These tests pick the emulated backend themselves: run once."""
    yield "none"


def _emu():
    return bz.backends.get("cuda-emulator")


def _on_device(fn, *args, tol: float = 2e-5) -> dict[str, int]:
    """fn(*args) compiled on cuda-emulator against the numpy reference; returns the
    backend's stats of that call."""
    be = _emu()
    with bz.backend("numpy"):
        want = [np.asarray(v) for v in _tuple(fn(*[bz.asarray(a) for a in args]))]
    before = dict(be.stats)
    with bz.backend("cuda-emulator"):
        got = [np.asarray(v) for v in _tuple(bz.compile(fn)(*[bz.asarray(a) for a in args]))]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale)
    return {k: v - before.get(k, 0) for k, v in be.stats.items()}


def _tuple(v):
    return v if isinstance(v, tuple) else (v,)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("scales", ["float16", "float32"])
@pytest.mark.parametrize("rows", [1, 5])
def test_quantized_matmul_on_the_device(bits, scales, rows) -> None:
    rng = np.random.default_rng(bits * 10 + rows)
    w = rng.standard_normal((40, 128)).astype(np.float32)
    wq, s, b = (np.asarray(a) for a in bz.quantize(bz.asarray(w), group_size=32, bits=bits))
    s, b = s.astype(scales), b.astype(scales)
    x = rng.standard_normal((rows, 128)).astype(np.float32)
    d = _on_device(lambda x, wq, s, b: bz.quantized_matmul(x, wq, s, b, group_size=32,
                                                           bits=bits), x, wq, s, b)
    assert d["cuda_library"] == 1 and d["host_library"] == 0


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("offset", ["int32", "int64", "per_row"])
def test_rope_on_the_device(traditional, offset) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 2, 5, 24)).astype(np.float32)
    off = np.array([0, 9, 300], np.int32) if offset == "per_row" else np.asarray(17, offset)
    d = _on_device(lambda x, o: bz.fast.rope(x, 16, traditional=traditional, base=10000.0,
                                             scale=0.5, offset=o), x, off, tol=1e-5)
    assert d["cuda_library"] == 1 and d["host_library"] == 0


@pytest.mark.parametrize("mask", [None, "causal"])
def test_attention_without_a_cache_on_the_device(mask) -> None:
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 7, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, 7, 6)).astype(np.float32)
    d = _on_device(lambda q, k, v: bz.fast.scaled_dot_product_attention(
        q, k, v, scale=0.4, mask=mask), q, k, v)
    assert d["cuda_library"] == 1 and d["host_library"] == 0


@pytest.mark.parametrize("cache", ["float32", "float16"])
def test_attention_over_a_cache_on_the_device(cache) -> None:
    rng = np.random.default_rng(9)
    q = rng.standard_normal((1, 6, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    pk = rng.standard_normal((1, 2, 20, 8)).astype(cache)
    pv = rng.standard_normal((1, 2, 20, 8)).astype(cache)
    for n in (0, 11, 20, 99):  # (lengths past the cache are clamped to it)
        d = _on_device(lambda q, k, v, pk, pv, n: bz.fast.scaled_dot_product_attention(
            q, k, v, scale=0.3, mask="causal", past=(pk, pv), past_length=n),
            q, k, v, pk, pv, np.int32(n))
        assert d["cuda_library"] == 1 and d["host_library"] == 0


def test_batched_decode_attention_on_the_device() -> None:
    """One query row per sequence, each at its own length in its own float16 cache slot."""
    rng = np.random.default_rng(10)
    b, slots, cap = 4, 6, 16
    q = rng.standard_normal((b, 6, 1, 8)).astype(np.float32)
    k = rng.standard_normal((b, 2, 1, 8)).astype(np.float32)
    v = rng.standard_normal((b, 2, 1, 8)).astype(np.float32)
    pk = rng.standard_normal((slots, 2, cap, 8)).astype(np.float16)
    pv = rng.standard_normal((slots, 2, cap, 8)).astype(np.float16)
    for dtype in (np.int32, np.int64):
        lens = np.array([0, 5, 16, 3], dtype)
        idx = np.array([5, 0, 2, 7], dtype)  # (7: clamped to the last slot)
        d = _on_device(lambda q, k, v, pk, pv, n, i: bz.fast.scaled_dot_product_attention(
            q, k, v, scale=0.35, mask="causal", past=(pk, pv), past_length=n,
            past_index=i), q, k, v, pk, pv, lens, idx)
        assert d["cuda_library"] == 1 and d["host_library"] == 0


@settings(max_examples=15)
@given(st.data())
def test_row_gathers_and_concatenation_on_the_device(data) -> None:
    rows = data.draw(st.integers(1, 9))
    x = np.arange(rows * 6, dtype=np.float32).reshape(rows, 2, 3) - 7
    dtype = data.draw(st.sampled_from([np.int32, np.int64]))
    i = np.asarray(data.draw(st.lists(st.integers(-rows, rows - 1), min_size=1, max_size=5)),
                   dtype)
    axis = data.draw(st.integers(-3, 2))
    d = _on_device(lambda x, i: (x[i] * 2.0, bz.concatenate([x, x + 1.0, x * 3.0], axis=axis)),
                   x, i, tol=0)
    assert d["cuda_library"] >= 1 and d["host_library"] == 0


def test_a_gather_out_of_range_raises_the_reference_error() -> None:
    x = bz.asarray(np.ones((4, 3), np.float32))
    with bz.backend("cuda-emulator"), pytest.raises(IndexError, match="getitem/take"):
        bz.compile(lambda x, i: x[i] * 2.0)(x, bz.asarray(np.array([1, 4], np.int32)))


def test_weights_are_uploaded_once_and_held() -> None:
    rng = np.random.default_rng(11)
    lin = bz.nn.Linear(32, 16)
    lin.weight = bz.asarray(rng.standard_normal((16, 32)).astype(np.float32))
    lin.bias = bz.asarray(rng.standard_normal(16).astype(np.float32))
    f = bz.compile(lambda x: bz.nn.gelu(lin(x)))
    x = bz.asarray(rng.standard_normal((3, 32)).astype(np.float32))
    be = _emu()
    with bz.backend("cuda-emulator"):
        before = dict(be.stats)
        f(x)
        first = {k: v - before[k] for k, v in be.stats.items()}
        before = dict(be.stats)
        y = f(x)
        second = {k: v - before[k] for k, v in be.stats.items()}
    with bz.backend("numpy"):
        np.testing.assert_allclose(np.asarray(y), np.asarray(bz.nn.gelu(lin(x))), rtol=1e-5,
                                   atol=1e-6)
    assert first["held"] == 2 and second["held"] == 0
    assert second["uploads"] == 1 and second["downloads"] == 1  # x in, the result out


def test_a_smollm2_decode_runs_on_the_device_and_matches_the_reference() -> None:
    """Decode steps on the emulated device against the numpy reference; in the steady
    state a decode step uploads only its token and position,
    the KV cache's device copy takes only the rows the previous step wrote (mirrors), and
    the weights stay on the device."""
    pytest.importorskip("gguf")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "llm"))
    import llama

    try:
        model, tok = llama.load(quantized=True)
    except FileNotFoundError as e:  # pragma: no cover - `make test` installs the model
        pytest.skip(str(e))
    ids = np.asarray([tok.encode(llama.chat_prompt("What is the capital of France?")).ids],
                     np.int32)
    steps = 2
    with bz.backend("numpy"):
        cache = model.make_cache(64)
        want = [np.asarray(model(ids, cache, last_only=True))[0, -1]]
        for _ in range(steps):
            token = np.array([[int(want[-1].argmax())]], np.int32)
            want.append(np.asarray(model(token, cache, last_only=True))[0, -1])
    be = _emu()
    cache = model.make_cache(64)
    # the pre-fill on the numpy backend (forty rows of every matmul on the emulator's fibers
    # take minutes), its cache writes reported: the device copy syncs from them
    with bz.backend("numpy"):
        got = [np.asarray(model(ids, cache, last_only=True))[0, -1]]
    with bz.backend("cuda-emulator"):
        for _ in range(steps):
            before = dict(be.stats)
            token = np.array([[int(got[-1].argmax())]], np.int32)
            got.append(np.asarray(model(token, cache, last_only=True))[0, -1])
            d = {k: v - before[k] for k, v in be.stats.items()}
    for g, w in zip(got, want):
        assert np.abs(g - w).max() <= 1e-4 * np.abs(w).max()
        assert g.argmax() == w.argmax()
    cfg = model.cfg
    assert d["numpy"] == 0  # every fused kernel ran on the device
    # the quantized matmuls, rope, attention, gathers, concatenations and the position
    # table on the device: no library op on the host
    assert d["cuda_library"] >= 200 and d["host_library"] == 0
    assert d["held"] == 0 and d["uploads"] <= 2 and d["downloads"] <= 3
    row = cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * cache.keys.itemsize  # one position
    assert d["mirror_bytes"] == 2 * row  # keys and values: the row the last step wrote


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((2, 4, 6), (6, 5)), ((3, 2, 4), (3, 4, 2)),
                                    ((4,), (4, 3))])
def test_matmul_through_the_drivers_gemm(dtype, shapes) -> None:
    """The cuBLAS path (its strided batched GEMM behind the driver interface; the emulator
    stands in for it): one GEMM call per matmul, row-major results equal to numpy's."""
    from braze.backends.cuda import CudaBackend
    from braze.backends.gpu_emulator import EmulatedDevice
    from braze.graph.compiler import compile_graph

    rng = np.random.default_rng(12)
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    be = CudaBackend(driver=EmulatedDevice(blas=True))
    assert be.has_gemm
    schedule, leaves = compile_graph([(bz.asarray(a) @ bz.asarray(b) + 1.0)._node])
    out, = be.run_schedule(schedule, [leaf.data for leaf in leaves])
    np.testing.assert_allclose(out, a @ b + 1.0, rtol=1e-5 if dtype == "float32" else 1e-12)
    assert be.stats["cublas"] == 1 and be.stats["cuda_library"] == 0


def test_without_cublas_the_real_driver_says_so() -> None:
    from braze.backends.cuda import CudaDriver, cublas

    if bz.backends.get("numpy") and "cuda" in bz.backends.available():
        pytest.skip("a CUDA device is here")
    assert CudaDriver().has_gemm() is False
    with pytest.raises(cublas.CublasError, match="cuBLAS is not available"):
        cublas.load()


@pytest.mark.parametrize("backend", ["cuda-emulator", "mlx"])
def test_a_mirrored_buffer_is_synced_by_the_rows_written(backend) -> None:
    """A host buffer declared mirrored (a KV cache) is read from the backend's copy;
    reported writes reach it as byte ranges, and results follow the host's values."""
    if backend not in bz.backends.available():
        pytest.skip(f"{backend} is not available")
    from braze.backends import mirrors

    be = bz.backends.get(backend)
    buf = np.zeros((2, 16, 8), np.float32)
    mirrors.declare(buf)
    f = bz.compile(lambda c, x: (c * x).sum(axis=(1, 2)))
    x = bz.asarray(np.ones((16, 8), np.float32))
    with bz.backend(backend):
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(buf, copy=False), x)), [0, 0])
        buf[:, 5] = 2.0
        mirrors.wrote(buf, (slice(None), 5))
        before = be.stats["mirror_bytes"]
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(buf, copy=False), x)), [16, 16])
        assert be.stats["mirror_bytes"] - before == 2 * 8 * 4  # one row of each layer
        before = be.stats["mirror_bytes"]
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(buf, copy=False), x)), [16, 16])
        assert be.stats["mirror_bytes"] == before  # nothing written: nothing crosses


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_arange_on_the_device(dtype) -> None:
    start, step = (3, 2) if dtype.startswith("int") else (0.5, 0.1)
    d = _on_device(lambda o: bz.arange(start, start + 40 * step, step, dtype=dtype)[:40] + o,
                   np.asarray(1, dtype), tol=0)
    assert d["cuda_library"] >= 1 and d["host_library"] == 0


@pytest.mark.parametrize("case", [((2, 9, 10, 5), (3, 3), (2, 2), 1, 1),
                                  ((1, 7, 6, 3), (2, 3), (1, 2), ((1, 0), (2, 1)), 2),
                                  ((2, 11, 4), (3,), (2,), 1, 1)])
def test_pools_on_the_device(case) -> None:
    """A convolutional network's max and average pools: the same bits as the reference
    (NaN included)."""
    shape, k, s, pad, d = case
    x = np.random.default_rng(12).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[7] = np.nan
    out = _on_device(lambda x: bz.nn.max_pool(x, k, s, pad, d), x, tol=0)
    assert out["cuda_library"] == 1 and out["host_library"] == 0
    for include in (True, False):  # window sums, then the reciprocals' product
        out = _on_device(lambda x, i=include: bz.nn.avg_pool(x, k, s, pad, False, i, d), x,
                         tol=0)
        assert out["cuda_library"] == 1 and out["host_library"] == 0
