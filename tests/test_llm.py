"""The LLM example (examples/llm) against an independent numpy forward pass.

The reference (examples/llm/numpy_llama.py) reads the GGUF with the ``gguf`` package,
dequantizes every tensor with ``gguf.quants`` and runs a plain float32 numpy Llama
(interleaved RoPE, grouped-query attention, SwiGLU, tied embeddings): nothing of
braze's loader or layers.
Tolerances: float32 logits within 1e-3 of the logit scale (max |logit|); the 4-bit
path within QUANT_BOUND of the float32 path, and the same greedy answers.
"""

from __future__ import annotations

import os
import struct
import sys

import numpy as np
import pytest

import braze as bz

gguf = pytest.importorskip("gguf")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "llm"))
import llama  # noqa: E402
from numpy_llama import NumpyLlama  # noqa: E402

try:
    MODEL = llama.default_model_path()
except FileNotFoundError as e:  # pragma: no cover - `make test` installs it
    pytest.skip(str(e), allow_module_level=True)

PROMPT = llama.chat_prompt("What is the capital of France?")
QUANT_BOUND = 0.15  # max |logit difference| of the 4-bit path / logit scale, measured 0.04-0.06


@pytest.fixture(scope="module")
def models(backend_name):
    if backend_name != "cpu" and backend_name in bz.backends.available() \
            and "cpu" in bz.backends.available():
        pytest.skip("the model tests run on the default (cpu) backend; the numpy reference "
                    "backend is compared op by op elsewhere")
    f32, tok = llama.load(quantized=False)
    q4, _ = llama.load(quantized=True)
    return f32, q4, tok


@pytest.fixture(scope="module")
def reference():
    return NumpyLlama(MODEL)


def test_float32_logits_match_an_independent_numpy_forward(models, reference) -> None:
    f32, _, tok = models
    ids = tok.encode(PROMPT).ids
    want = reference(ids)
    got = np.asarray(f32(np.asarray([ids], np.int32)))[0]
    assert got.shape == (len(ids), 49152)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-3 * scale


def test_prefill_then_decode_equals_one_long_forward(models, reference) -> None:
    """The KV cache path (prefill, then one token at a time) gives the same logits."""
    f32, _, tok = models
    ids = tok.encode(PROMPT).ids
    want = reference(ids)
    cache = f32.make_cache(128)
    first = np.asarray(f32(np.asarray([ids[:-3]], np.int32), cache))[0]
    rows = [first[-1]]
    for t in ids[-3:]:
        rows.append(np.asarray(f32(np.asarray([[t]], np.int32), cache, last_only=True))[0, 0])
    scale = np.abs(want).max()
    np.testing.assert_allclose(first, want[:-3], atol=1e-3 * scale)
    np.testing.assert_allclose(np.stack(rows), want[-4:], atol=1e-3 * scale)
    assert cache.offset == len(ids)


def test_decoding_across_cache_lengths_and_turns_traces_once(models, reference) -> None:
    """Pre-fill 250 tokens, decode past 256 cached rows, then pre-fill a second turn on
    top of the cache: logits match one long forward, and the decode step traced once
    (the whole fixed-size cache is passed; its filled length is a runtime input)."""
    f32, _, tok = models
    ids = (tok.encode(PROMPT).ids * 8)[:250] + [28, 29, 30, 31, 32, 33, 34, 35]
    turn2 = tok.encode("<|im_end|>\n<|im_start|>user\nAnd Germany?<|im_end|>\n").ids
    want = reference(ids + turn2)
    scale = np.abs(want).max()
    cache = f32.make_cache(512)
    f32(np.asarray([ids[:250]], np.int32), cache, last_only=True)
    traces = f32._step_last.trace_count
    for i, t in enumerate(ids[250:]):
        row = np.asarray(f32(np.asarray([[t]], np.int32), cache, last_only=True))[0, 0]
        np.testing.assert_allclose(row, want[250 + i], atol=1e-3 * scale)
    assert f32._step_last.trace_count - traces <= 1  # at most the first decode step
    second = np.asarray(f32(np.asarray([turn2], np.int32), cache))[0]
    np.testing.assert_allclose(second, want[len(ids):], atol=1e-3 * scale)
    assert cache.offset == len(ids) + len(turn2)


@pytest.mark.parametrize("which", [0, 1])
def test_a_decode_step_is_one_native_program_call(models, which) -> None:
    """On cpu, every kernel and library op of a decode step (4-bit and float32) runs in
    the compiled step's native program: one call from Python (plus the embedding
    lookup that starts it), no Python-run kernels."""
    if bz.backends.current().name != "cpu":
        pytest.skip("native programs are the cpu backend's")
    model, tok = models[which], models[2]
    cache = model.make_cache(64)
    model([tok.encode(PROMPT).ids], cache, last_only=True)
    for t in (28, 29, 30):  # traced, then replayed through a prepared plan
        model([[t]], cache, last_only=True)
    b = bz.backends.current()
    entries = list(model._step_last._entries.values())
    plans = [p for e in entries for s in e.schedules.values()
             for p in b._replays._idle.get(id(s), (None, []))[1]]
    decode = [p for p in plans if p.schedule.slots[p.schedule.input_slots[0]].shape == (1, 1)]
    assert decode, "the decode step did not replay through a plan"
    plan = decode[0]
    assert plan.n_python_kernels == 0
    # the embedding lookup included (a native row gather): one native call
    kinds = ["native" if hasattr(op, "calls") else "python" for op in plan.ops]
    assert kinds == ["native"], kinds
    assert plan.ops[-1].calls == plan.n_native, (kinds, plan.ops[-1].calls, plan.n_native)


def test_the_reference_decodes_with_its_cache_like_one_forward(reference, models) -> None:
    ids = models[2].encode(PROMPT).ids
    full = reference(ids)
    reference.reset()
    part = reference.step(ids[:-2])
    rows = [reference.step([t])[0] for t in ids[-2:]]
    np.testing.assert_allclose(np.vstack([part, *rows]), full, rtol=1e-4, atol=1e-4)


def test_quantized_logits_stay_within_the_documented_bound(models) -> None:
    f32, q4, tok = models
    ids = np.asarray([tok.encode(PROMPT).ids], np.int32)
    a, b = np.asarray(f32(ids)), np.asarray(q4(ids))
    assert np.abs(a - b).max() <= QUANT_BOUND * np.abs(a).max()


@pytest.mark.parametrize("question", ["What is the capital of France?",
                                      "How many days are in a week?", "Name a primary color."])
def test_quantized_and_float32_greedy_answers_agree(models, question) -> None:
    f32, q4, tok = models
    prompt = llama.chat_prompt(question)
    a = "".join(llama.generate(f32, tok, prompt, max_tokens=12))
    b = "".join(llama.generate(q4, tok, prompt, max_tokens=12))
    assert a and a == b


@pytest.mark.skipif("mlx" not in bz.backends.available(), reason="mlx not installed")
def test_the_mlx_backend_gives_the_cpu_backends_greedy_answers(models) -> None:
    """The 4-bit model run resident in MLX (mx.quantized_matmul, mx.fast.rope and
    attention, weights held across steps) answers as the cpu backend does."""
    f32, q4, tok = models
    mlx = bz.backends.get("mlx")
    ids = np.asarray([tok.encode(PROMPT).ids], np.int32)
    with bz.backend("mlx"):
        got = np.asarray(q4(ids))
    want = np.asarray(f32(ids))  # the float32 model (cpu backend)
    assert np.abs(got - want).max() <= QUANT_BOUND * np.abs(want).max()
    for question in ("What is the capital of France?", "How many days are in a week?",
                     "Name a primary color."):
        prompt = llama.chat_prompt(question)
        want = "".join(llama.generate(q4, tok, prompt, max_tokens=12))
        before = dict(mlx.stats)
        with bz.backend("mlx"):
            got = "".join(llama.generate(q4, tok, prompt, max_tokens=12))
        assert got and got == want
        assert mlx.stats["mlx_library"] > before["mlx_library"]
        assert mlx.stats["numpy"] == before["numpy"]  # (no kernel fell back)


def test_chat_answers_paris(models, capsys) -> None:
    import chat

    assert chat.main(["--prompt", "What is the capital of France?", "--max-tokens", "24"]) == 0
    out = capsys.readouterr()
    assert "Paris" in out.out
    assert "decode:" in out.err and "tok/s" in out.err


def test_an_over_long_prompt_is_refused_with_a_message(models) -> None:
    _, q4, tok = models
    cache = q4.make_cache(64)
    with pytest.raises(ValueError, match="only 63 fit in the context"):
        next(llama.generate(q4, tok, "hello " * 100, cache=cache))
    assert chat_main_error(["--prompt", "hello " * 3000, "--context", "64"]) == 1


def chat_main_error(argv: list[str]) -> int:
    import chat

    return chat.main(argv)


def test_sampling_is_reproducible_with_a_seed(models) -> None:
    _, q4, tok = models
    prompt = llama.chat_prompt("Tell me a story.")
    runs = ["".join(llama.generate(q4, tok, prompt, 8, temperature=0.9, top_p=0.9, seed=3))
            for _ in range(2)]
    assert runs[0] == runs[1] and runs[0]


def test_tokenizer_round_trips_and_knows_chatml(models) -> None:
    _, _, tok = models
    text = "Hello, world! 12345 ünïcödé"
    assert tok.decode(tok.encode(text).ids) == text
    assert tok.encode("<|im_start|>user").ids[0] == 1
    assert [tok.decode([i]) for i in tok.encode("123").ids] == ["1", "2", "3"]


def test_the_model_cache_gives_the_same_tensors_and_metadata(backend_name, monkeypatch,
                                                            tmp_path) -> None:
    if backend_name != "numpy":
        pytest.skip("the model cache does not depend on the backend: run once")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    first, meta1 = bz.load(MODEL, return_metadata=True)  # parses the GGUF, writes the cache
    assert (tmp_path / "models").is_dir()
    cached, meta2 = bz.load(MODEL, return_metadata=True)  # memory-mapped from the cache
    monkeypatch.setenv("BRAZE_MODEL_CACHE", "0")
    fresh, meta3 = bz.load(MODEL, return_metadata=True)
    assert set(cached) == set(fresh) == set(first)
    for name in ("token_embd.weight", "token_embd.scales", "blk.3.ffn_down.weight",
                 "blk.29.attn_norm.weight"):
        assert cached[name].dtype == fresh[name].dtype
        np.testing.assert_array_equal(np.asarray(cached[name]), np.asarray(fresh[name]))
    assert meta2["quantization"] == meta3["quantization"]
    assert meta2["tokenizer.ggml.tokens"] == meta3["tokenizer.ggml.tokens"]
    assert meta2["llama.rope.freq_base"] == meta3["llama.rope.freq_base"]


def _damage_truncate(entry) -> None:
    f = sorted(entry.glob("*.npy"))[3]
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _damage_flip(entry) -> None:  # a bit flipped in a tensor's data: same size, wrong bytes
    f = sorted(entry.glob("*.npy"))[5]
    b = bytearray(f.read_bytes())
    b[-7] ^= 0x10
    f.write_bytes(bytes(b))


def _damage_zero_index(entry) -> None:
    (entry / "index.json").write_bytes(b"")


def _damage_delete_tensor(entry) -> None:
    sorted(entry.glob("*.npy"))[0].unlink()


def test_a_damaged_model_cache_entry_is_rebuilt_with_one_warning(backend_name, monkeypatch,
                                                                 tmp_path) -> None:
    """Truncated, bit-flipped, zero-length index, a tensor file deleted: the load checks
    each file's size and CRC-32, warns once, rebuilds the entry and gives the right
    tensors; the next load uses the rebuilt entry silently. (Backend-independent: once.)"""
    import shutil
    import warnings

    if backend_name != "numpy":
        pytest.skip("the model cache does not depend on the backend: run once")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    want = bz.load(MODEL)
    (entry,) = (tmp_path / "models").iterdir()
    good = tmp_path / "good"
    shutil.copytree(entry, good)
    for damage in (_damage_truncate, _damage_flip, _damage_zero_index, _damage_delete_tensor):
        shutil.rmtree(entry)
        shutil.copytree(good, entry)
        damage(entry)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = bz.load(MODEL)
            again = bz.load(MODEL)
        msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(msgs) == 1 and "damaged" in msgs[0] and str(entry) in msgs[0], (damage, msgs)
        for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.3.ffn_down.weight",
                     "output_norm.weight"):
            if name in want:
                np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]))
                np.testing.assert_array_equal(np.asarray(again[name]), np.asarray(want[name]))


def test_an_unwritable_model_cache_loads_uncached_with_one_warning(backend_name, monkeypatch,
                                                                   tmp_path) -> None:
    import warnings

    if backend_name != "numpy":
        pytest.skip("the model cache does not depend on the backend: run once")
    (tmp_path / "models").write_text("a file where the models directory should be")
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = bz.load(MODEL)
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "cannot write the model cache" in msgs[0], msgs
    assert "token_embd.weight" in got


@pytest.mark.parametrize("module", ["llama", "tokenizer", "numpy_llama", "chat", "batching"])
def test_example_docstrings(models, module) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0


# ---------------------------------------------------------------- bad model files
def test_missing_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        llama.load(str(tmp_path / "nope.gguf"))


def test_not_a_gguf_file(tmp_path) -> None:
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04 this is a zip")
    with pytest.raises(ValueError, match="not a GGUF file"):
        llama.load(str(p))


def test_truncated_gguf(tmp_path) -> None:
    p = tmp_path / "cut.gguf"
    with open(MODEL, "rb") as f:
        p.write_bytes(f.read(os.path.getsize(MODEL) // 2))
    with pytest.raises(ValueError, match=f"{p}: truncated"):
        llama.load(str(p))


def _write_gguf(path: str, arch: str, tensor_type: str = "F32") -> None:
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(1)
    if tensor_type == "F32":
        w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    else:  # raw Q5_0 blocks: 22 bytes per 32 values
        kind = gguf.GGMLQuantizationType[tensor_type]
        w.add_tensor("token_embd.weight", np.zeros((4, 22), np.uint8), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_unsupported_architecture(tmp_path) -> None:
    p = str(tmp_path / "gpt2.gguf")
    _write_gguf(p, "gpt2")
    with pytest.raises(ValueError, match="unsupported architecture 'gpt2'"):
        llama.load(p)


def test_unsupported_quantization_type(tmp_path) -> None:
    p = str(tmp_path / "q5.gguf")
    _write_gguf(p, "llama", "Q5_0")
    with pytest.raises(ValueError, match="quantization type Q5_0"):
        bz.load(p)
    assert bz.load(p, dequantize=True)["token_embd.weight"].shape == (4, 32)


def test_gguf_header_magic_is_checked_before_parsing(tmp_path) -> None:
    p = tmp_path / "bad.gguf"
    p.write_bytes(struct.pack("<4sI", b"GGUX", 3))
    with pytest.raises(ValueError, match="not a GGUF file"):
        bz.load(str(p))


def test_sampling_draws_what_a_full_sort_and_rng_choice_draw(backend_name) -> None:
    """llama.sample's partial sort and inverse-CDF draw give the tokens of the plain
    formulation (full descending sort for the nucleus, ``rng.choice`` over the vocabulary)
    for the same generator state: the speed-up changes no sampled text."""
    if backend_name != "numpy":
        pytest.skip("pure numpy: run once")

    def plain(logits, temperature, top_p, rng):
        z = logits.astype(np.float64) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            keep = order[:int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1]
            q = np.zeros_like(p)
            q[keep] = p[keep]
            p = q / q.sum()
        return int(rng.choice(len(p), p=p))

    for seed in range(400):
        g = np.random.default_rng(seed)
        n = int(g.integers(2, 3000)) if seed % 4 else 49152
        logits = (g.standard_normal(n) * g.uniform(0.5, 8)).astype(np.float32)
        t, top_p = float(g.uniform(0.1, 2)), float(g.choice([1.0, 0.99, 0.9, 0.5, 0.1]))
        assert llama.sample(logits, t, top_p, np.random.default_rng(seed)) == \
            plain(logits, t, top_p, np.random.default_rng(seed)), (seed, n, t, top_p)
