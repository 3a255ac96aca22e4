"""The training examples end to end (on the default cpu backend): examples/train_mlp.py
reaches its stated accuracy on scikit-learn's digits, and examples/llm/lora.py's pieces
(adapters on the embedded SmolLM2, one compiled training step through the 4-bit
weights, saving and loading the adapters) work and change what the model computes."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import braze as bz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def cpu_only(backend_name):
    if backend_name != "cpu" and "cpu" in bz.backends.available():
        pytest.skip("the examples run on the default (cpu) backend; the ops they use are "
                    "compared with the reference in test_autodiff / test_training")


def test_train_mlp_reaches_stated_accuracy() -> None:
    pytest.importorskip("sklearn")
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import train_mlp

    assert train_mlp.main(["--epochs", "12"]) >= 0.95


def test_lora_step_save_and_load(tmp_path) -> None:
    pytest.importorskip("gguf")
    sys.path.insert(0, os.path.join(ROOT, "examples", "llm"))
    try:
        import llama
        import lora

        model, tok = llama.load()
    except (ImportError, OSError, FileNotFoundError) as e:
        pytest.skip(f"the embedded model is not installed: {e}")
    ids, masks = lora.load_examples(lora.DATA, tok, 48)
    assert ids.shape == (36, 48) and masks.sum() > 36  # every reply counted
    prompt = bz.asarray(ids[:1, :16])
    h0 = np.asarray(model._body(prompt, bz.asarray(np.int32(0)), ())[0])
    lora.apply_lora(model, rank=4, scale=2.0)
    names = [n for n, _ in bz.nn.names_from_tree(model.trainable_parameters())]
    assert names and all(n.split(".")[-1] in ("lora_a", "lora_b") for n in names)
    opt = bz.optimizers.Adam(1e-2).init(model.trainable_parameters())
    step = lora.train_step(model, opt)
    losses = [float(step(bz.asarray(ids[:2]), bz.asarray(masks[:2]))) for _ in range(2)]
    assert all(np.isfinite(losses)) and losses[1] < losses[0]
    path = str(tmp_path / "a.safetensors")
    lora.save_adapter(model, path, 4, 2.0)
    h1 = np.asarray(model._body(prompt, bz.asarray(np.int32(0)), ())[0])
    assert not np.allclose(h0, h1)  # the adapters moved the model
    fresh, _ = llama.load()
    lora.load_adapter(fresh, path)
    h2 = np.asarray(fresh._body(prompt, bz.asarray(np.int32(0)), ())[0])
    assert np.allclose(h1, h2, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="not an adapter for this model"):
        bz.save(str(tmp_path / "b.safetensors"), {"x": bz.ones(2)},
                metadata={"rank": "4", "scale": "2.0", "targets": "qkv_proj,o_proj"})
        lora.load_adapter(llama.load()[0], str(tmp_path / "b.safetensors"))
