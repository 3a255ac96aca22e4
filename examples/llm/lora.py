"""LoRA fine-tuning of the embedded SmolLM2-135M-Instruct on a small JSONL of chats.

The 4-bit base model stays frozen; low-rank adapters on every block's fused q/k/v and
output projections (LoRALinear over QuantizedLinear) learn from the assistant turns of
``data/lora_zephyria.jsonl`` (facts about a fictional country: no base model knows its
capital is Lumenport). One ``bz.compile``d step (forward, backward through the packed
weights, clipping, AdamW) replays per batch; the adapters are saved as safetensors:

    python examples/llm/lora.py --steps 60 --out build/lora/adapters.safetensors
    python examples/llm/chat.py --adapter build/lora/adapters.safetensors \\
        --prompt "What is the capital of Zephyria?"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import llama  # noqa: E402

import braze as bz  # noqa: E402

nn, optim = bz.nn, bz.optimizers

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lora_zephyria.jsonl")
TARGETS = ("qkv_proj", "o_proj")


def apply_lora(model: llama.Llama, rank: int = 8, scale: float = 2.0,
               targets: tuple[str, ...] = TARGETS) -> llama.Llama:
    """Freeze ``model`` and wrap the ``targets`` projections of every block's attention in
    LoRALinear adapters (the only trainable parameters afterwards)."""
    model.freeze()
    for block in model.layers:
        for name in targets:
            base = getattr(block.attention, name)
            setattr(block.attention, name, nn.LoRALinear(base, rank=rank, scale=scale))
    return model


def adapter_weights(model: llama.Llama) -> dict[str, bz.Array]:
    return dict(nn.names_from_tree(model.trainable_parameters()))


def save_adapter(model: llama.Llama, path: str, rank: int, scale: float) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    meta = {"rank": str(rank), "scale": str(scale), "targets": ",".join(TARGETS)}
    bz.save(path, adapter_weights(model), metadata=meta)


def load_adapter(model: llama.Llama, path: str) -> llama.Llama:
    """Wrap ``model`` as the adapter file says and load its weights (shapes checked)."""
    weights, meta = bz.load(path, return_metadata=True)
    apply_lora(model, int(meta["rank"]), float(meta["scale"]),
               tuple(meta["targets"].split(",")))
    missing = set(adapter_weights(model)) - set(weights)
    if missing:
        raise ValueError(f"{path}: not an adapter for this model (missing {sorted(missing)[:3]})")
    model.load_weights(list(weights.items()), strict=False)
    return model


def train_step(model: llama.Llama, opt: optim.Optimizer, clip: float | None = 1.0) -> Any:
    """One compiled training step ``step(ids, mask) -> loss``: next-token cross-entropy at
    the positions ``mask`` marks, the gradient of the trainable parameters (clipped to
    global norm ``clip``), the optimizer's update; the model and optimizer are its
    implicit state."""
    def loss_fn(x: bz.Array, mask: bz.Array) -> bz.Array:
        h, _, _ = model._body(x, bz.asarray(np.int32(0)), ())
        logits = model._logits(h)[:, :-1]
        return nn.losses.cross_entropy(logits, x[:, 1:], weights=mask[:, :-1])

    value_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model, opt]

    @bz.compile(inputs=state, outputs=state)
    def step(x: bz.Array, mask: bz.Array) -> bz.Array:
        loss, grads = value_and_grad(x, mask)
        if clip is not None:
            grads, _ = optim.clip_grad_norm(grads, clip)
        opt.update(model, grads)
        return loss

    return step


def load_examples(path: str, tok: Any, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (N, length) of each chat and the mask (N, length) of the positions
    whose next token is the assistant's (the loss is taken there only)."""
    ids, masks = [], []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                msgs = json.loads(line)["messages"]
                user = next(m["content"] for m in msgs if m["role"] == "user")
                answer = next(m["content"] for m in msgs if m["role"] == "assistant")
            except (ValueError, KeyError, StopIteration, TypeError):
                raise ValueError(f"{path}:{line_no}: expected {{\"messages\": [user, "
                                 "assistant]}}") from None
            prompt = tok.encode(llama.chat_prompt(user)).ids
            reply = tok.encode(answer + "<|im_end|>").ids
            seq = (prompt + reply)[:length]
            row = np.zeros(length, np.int32)
            row[:len(seq)] = seq
            m = np.zeros(length, np.float32)
            m[len(prompt) - 1:len(seq) - 1] = 1.0  # predicting each reply token
            ids.append(row)
            masks.append(m)
    return np.stack(ids), np.stack(masks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--model", help="a Llama-architecture .gguf (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--length", type=int, default=64, help="tokens per example (padded)")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--scale", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="build/lora/adapters.safetensors")
    ap.add_argument("--prompt", default="What is the capital of Zephyria?",
                    help="asked before and after training")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    model, tok = llama.load(args.model)
    ids, masks = load_examples(args.data, tok, args.length)
    print(f"[{len(ids)} examples from {os.path.basename(args.data)}]", file=sys.stderr)
    before = "".join(llama.generate(model, tok, llama.chat_prompt(args.prompt), 24))
    apply_lora(model, args.rank, args.scale)
    n_train = sum(p.size for _, p in adapter_weights(model).items())
    print(f"[LoRA rank {args.rank} on {', '.join(TARGETS)}: {n_train:,} trainable parameters]",
          file=sys.stderr)
    opt = optim.AdamW(optim.join_schedules(
        [optim.linear_schedule(0.0, args.lr, 5), optim.cosine_decay(args.lr, args.steps)], [5]),
        weight_decay=0.0).init(model.trainable_parameters())

    step = train_step(model, opt, clip=1.0)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    bar = tqdm(range(args.steps), desc="lora", unit="step")
    for i in bar:
        pick = rng.choice(len(ids), args.batch, replace=False)
        loss = float(step(bz.asarray(ids[pick]), bz.asarray(masks[pick])))
        bar.set_postfix(loss=f"{loss:.3f}")
        if i % 10 == 0 or i == args.steps - 1:
            tqdm.write(f"step {i + 1:4d}  loss {loss:.4f}")
    elapsed = time.perf_counter() - t0
    save_adapter(model, args.out, args.rank, args.scale)
    print(f"[{args.steps} steps in {elapsed:.0f} s; adapters saved to {args.out}]",
          file=sys.stderr)
    fresh, tok = llama.load(args.model)  # (a new model: its decode steps trace the adapters)
    load_adapter(fresh, args.out)
    after = "".join(llama.generate(fresh, tok, llama.chat_prompt(args.prompt), 24))
    print(f"Q: {args.prompt}\nbefore: {before.strip()}\nafter:  {after.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
