"""Training-step speed and memory: braze against torch (eager and torch.compile), jax.jit
and MLX (its CPU build on Linux), float32, one process per framework.

Two steps, the same model and data in every framework:
  mlp: 784-512-512-10 with ReLU, batch 256, cross-entropy, Adam
  lm:  a 4-layer pre-norm transformer LM (d 256, 4 heads, GELU MLP 4x, vocab 2048,
       causal attention), sequence 128, batch 8, cross-entropy, AdamW
  lora: LoRA (rank 8 on every block's q/k/v and output projections) on the embedded
       SmolLM2-135M, sequence 128, batch 4, AdamW: braze on its 4-bit weights (the
       model `make train` fine-tunes); torch eager on the same weights dequantized to
       float32 (peft-style adapters in plain torch; torch has no 4-bit CPU matmul)
braze's step is one bz.compile(inputs=[model, opt], outputs=[model, opt]) function;
torch.compile compiles the model's forward+backward (the optimizer step stays eager);
jax.jit jits the whole step (jax-jit-donate: with donate_argnums for the training state,
as braze's compiled step donates the old state's buffers); MLX mx.compiles it with its
state. Reported: steps/s
(median of 5 timed runs of N steps, or 1 s worth, after warm-up; the frameworks' workers, all warmed
up first, take turns -- run 1 of each, run 2 of each..., who goes first rotating -- so
that every framework sees the same drift of a noisy machine) and the peak RSS above the
resident set before the timed steps (VmHWM reset through /proc/self/clear_refs); "vs
braze" is the median over the turns of each turn's speed ratio to braze's run of that
turn; "loss 1->4" the losses of steps 1 and 4 (the same data and initial weights in
every framework: they agree to a few digits). Peers run under $PEERS_PYTHON (default:
this interpreter) where installed.

    .venv/bin/python benchmarks/train.py [--only braze,torch-eager] [--models mlp,lm]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import Worker  # noqa: E402

FRAMEWORKS = ["braze", "torch-eager", "torch-compile", "jax-jit", "jax-jit-donate", "mlx"]
RUN_SECONDS = 1.0  # a timed run's least duration (more steps than --steps when fast)
LORA = dict(batch=4, seq=128, rank=8, scale=2.0, lr=1e-4)
LORA_WEIGHTS = os.path.join(os.environ.get("TMPDIR", "/tmp"), "braze_bench_smollm2_f32.npz")
MLP = dict(d_in=784, hidden=512, classes=10, batch=256, lr=1e-3)
LM = dict(vocab=2048, d=256, heads=4, layers=4, seq=128, batch=8, lr=3e-4, wd=0.01)


def _rss() -> tuple[int, int]:
    """(current, peak) resident set in bytes (Linux /proc)."""
    cur = peak = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return cur, peak


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _data(model: str):
    import numpy as np

    rng = np.random.default_rng(0)
    if model == "mlp":
        x = rng.standard_normal((MLP["batch"], MLP["d_in"])).astype(np.float32)
        y = rng.integers(0, MLP["classes"], MLP["batch"]).astype(np.int32)
        return x, y
    if model == "lora":
        ids = rng.integers(0, 49152, (LORA["batch"], LORA["seq"])).astype(np.int32)
        return ids, np.ones(ids.shape, np.float32)
    ids = rng.integers(0, LM["vocab"], (LM["batch"], LM["seq"] + 1)).astype(np.int32)
    return ids[:, :-1].copy(), ids[:, 1:].copy()


def _init(model: str):
    """The initial weights, shared by every framework (numpy, float32)."""
    import numpy as np

    rng = np.random.default_rng(1)

    def lin(i, o):
        b = 1.0 / np.sqrt(i)
        return rng.uniform(-b, b, (o, i)).astype(np.float32), np.zeros(o, np.float32)

    if model == "mlp":
        return {"l1": lin(784, 512), "l2": lin(512, 512), "l3": lin(512, 10)}
    d, v = LM["d"], LM["vocab"]
    w = {"emb": (rng.standard_normal((v, d)) * 0.02).astype(np.float32)}
    for i in range(LM["layers"]):
        w[f"b{i}.qkv"] = lin(d, 3 * d)
        w[f"b{i}.o"] = lin(d, d)
        w[f"b{i}.up"] = lin(d, 4 * d)
        w[f"b{i}.down"] = lin(4 * d, d)
    w["head"] = lin(d, v)
    return w


# ---------------------------------------------------------------- braze
def run_braze(model: str):
    import braze as bz

    if model == "lora":
        return _braze_lora()
    nn, optim = bz.nn, bz.optimizers
    w0 = _init(model)

    def linear(i, o, name):
        m = nn.Linear(i, o)
        m.weight, m.bias = bz.asarray(w0[name][0]), bz.asarray(w0[name][1])
        return m

    if model == "mlp":
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.l1, self.l2 = linear(784, 512, "l1"), linear(512, 512, "l2")
                self.l3 = linear(512, 10, "l3")

            def __call__(self, x):
                return self.l3(nn.relu(self.l2(nn.relu(self.l1(x)))))
        net = Net()
        opt = optim.Adam(MLP["lr"])
    else:
        d, h = LM["d"], LM["heads"]

        class Block(nn.Module):
            def __init__(self, i):
                super().__init__()
                self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.qkv, self.o = linear(d, 3 * d, f"b{i}.qkv"), linear(d, d, f"b{i}.o")
                self.up, self.down = linear(d, 4 * d, f"b{i}.up"), linear(4 * d, d, f"b{i}.down")

            def __call__(self, x):
                b, t, _ = x.shape
                qkv = bz.reshape(self.qkv(self.n1(x)), (b, t, 3, h, d // h))
                q, k, v = (bz.permute_dims(qkv[:, :, j], (0, 2, 1, 3)) for j in range(3))
                a = bz.fast.scaled_dot_product_attention(q, k, v, scale=(d // h) ** -0.5,
                                                         mask="causal")
                x = x + self.o(bz.reshape(bz.permute_dims(a, (0, 2, 1, 3)), (b, t, d)))
                return x + self.down(nn.gelu_approx(self.up(self.n2(x))))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(LM["vocab"], d)
                self.emb.weight = bz.asarray(w0["emb"])
                self.blocks = [Block(i) for i in range(LM["layers"])]
                self.norm = nn.LayerNorm(d)
                self.head = linear(d, LM["vocab"], "head")

            def __call__(self, ids):
                x = self.emb(ids)
                for blk in self.blocks:
                    x = blk(x)
                return self.head(self.norm(x))
        net = Net()
        opt = optim.AdamW(LM["lr"], weight_decay=LM["wd"])
    opt.init(net.trainable_parameters())
    vg = nn.value_and_grad(net, lambda x, y: nn.losses.cross_entropy(net(x), y))
    state = [net, opt]

    @bz.compile(inputs=state, outputs=state)
    def step(x, y):
        loss, grads = vg(x, y)
        opt.update(net, grads)
        return loss

    x, y = (bz.asarray(a) for a in _data(model))
    return lambda: step(x, y), lambda out: float(out)


def _braze_lora():
    import braze as bz

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "llm"))
    import llama
    import lora

    model, _ = llama.load()
    lora.apply_lora(model, LORA["rank"], LORA["scale"])
    opt = bz.optimizers.AdamW(LORA["lr"], weight_decay=0.0).init(model.trainable_parameters())
    step = lora.train_step(model, opt, clip=None)
    x, m = (bz.asarray(a) for a in _data("lora"))
    return lambda: step(x, m), lambda out: float(out)


def export_lora_weights() -> None:
    """The embedded model's weights dequantized to float32, for the torch worker (which
    runs without braze)."""
    if os.path.exists(LORA_WEIGHTS):
        return
    import numpy as np

    import braze as bz

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "llm"))
    import llama

    weights, meta = bz.load(llama.default_model_path(), return_metadata=True, dequantize=True)
    cfg = llama.LlamaConfig.from_gguf(meta, "")
    arrays = {k: np.asarray(v, np.float32) for k, v in weights.items()}
    arrays["config"] = np.array([cfg.n_layers, cfg.dim, cfg.n_heads, cfg.n_kv_heads,
                                 cfg.hidden, cfg.eps, cfg.rope_base], np.float64)
    np.savez(LORA_WEIGHTS, **arrays)


def run_torch_lora():
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(os.cpu_count() or 1)
    z = np.load(LORA_WEIGHTS)
    n_layers, dim, nh, nkv, hidden, eps, base = z["config"]
    n_layers, dim, nh, nkv, hidden = (int(v) for v in (n_layers, dim, nh, nkv, hidden))
    hd = dim // nh
    t = {k: torch.from_numpy(z[k]) for k in z.files if k != "config"}
    r, scale = LORA["rank"], LORA["scale"]
    gen = torch.Generator().manual_seed(0)

    def adapter(i, o):
        b = 1.0 / i ** 0.5
        a = (torch.rand(i, r, generator=gen) * 2 - 1) * b
        return a.requires_grad_(), torch.zeros(r, o, requires_grad=True)

    layers = []
    for i in range(n_layers):
        p = f"blk.{i}."
        wqkv = torch.cat([t[p + "attn_q.weight"], t[p + "attn_k.weight"], t[p + "attn_v.weight"]])
        layers.append(dict(
            n1=t[p + "attn_norm.weight"], n2=t[p + "ffn_norm.weight"], qkv=wqkv,
            o=t[p + "attn_output.weight"], gate=t[p + "ffn_gate.weight"],
            up=t[p + "ffn_up.weight"], down=t[p + "ffn_down.weight"],
            la=adapter(dim, wqkv.shape[0]), lo=adapter(dim, dim)))
    emb, norm = t["token_embd.weight"], t["output_norm.weight"]
    params = [x for lay in layers for ab in (lay["la"], lay["lo"]) for x in ab]
    opt = torch.optim.AdamW(params, lr=LORA["lr"], weight_decay=0.0)
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def rope(x, pos):  # interleaved pairs (GGUF's layout): (x0, x1) rotated together
        th = pos[:, None] * inv[None, :]
        c, s = torch.cos(th), torch.sin(th)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)

    def loss_fn(ids, mask):
        bsz, T = ids.shape
        pos = torch.arange(T, dtype=torch.float32)
        x = emb[ids]
        for lay in layers:
            h = rms(x, lay["n1"])
            qkv = h @ lay["qkv"].T + (h @ lay["la"][0]) @ lay["la"][1] * scale
            q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], -1)
            q = rope(q.view(bsz, T, nh, hd).transpose(1, 2), pos)
            k = rope(k.view(bsz, T, nkv, hd).transpose(1, 2), pos)
            v = v.view(bsz, T, nkv, hd).transpose(1, 2)
            k, v = (z.repeat_interleave(nh // nkv, 1) for z in (k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = a.transpose(1, 2).reshape(bsz, T, dim)
            x = x + a @ lay["o"].T + (a @ lay["lo"][0]) @ lay["lo"][1] * scale
            h = rms(x, lay["n2"])
            x = x + (F.silu(h @ lay["gate"].T) * (h @ lay["up"].T)) @ lay["down"].T
        logits = rms(x, norm) @ emb.T
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                             ids[:, 1:].reshape(-1).long(), reduction="none")
        w = mask[:, :-1].reshape(-1)
        return (ce * w).sum() / w.sum()

    ids, mask = (torch.from_numpy(a) for a in _data("lora"))
    return _torch_step(opt, loss_fn, ids, mask)


# ---------------------------------------------------------------- torch
def _torch_step(opt, loss_fn, *batch):
    """A torch training step (eager loss and backward, then the optimizer) and its reader."""

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(*batch)
        loss.backward()
        opt.step()
        return loss

    return step, lambda out: float(out.detach())


def _torch_net(model: str):
    import torch
    import torch.nn.functional as F
    from torch import nn

    w0 = _init(model)

    def linear(name):
        wt, b = w0[name]
        m = nn.Linear(wt.shape[1], wt.shape[0])
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(wt))
            m.bias.copy_(torch.from_numpy(b))
        return m

    if model == "mlp":
        return nn.Sequential(linear("l1"), nn.ReLU(), linear("l2"), nn.ReLU(), linear("l3"))
    d, h = LM["d"], LM["heads"]

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.o = linear(f"b{i}.qkv"), linear(f"b{i}.o")
            self.up, self.down = linear(f"b{i}.up"), linear(f"b{i}.down")

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.n2(x)), approximate="tanh"))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(LM["vocab"], d)
            with torch.no_grad():
                self.emb.weight.copy_(torch.from_numpy(w0["emb"]))
            self.blocks = nn.ModuleList([Block(i) for i in range(LM["layers"])])
            self.norm = nn.LayerNorm(d)
            self.head = linear("head")

        def forward(self, ids):
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x))
    return Net()


def run_torch(model: str, compiled: bool):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(os.cpu_count() or 1)
    net = _torch_net(model)
    opt = torch.optim.Adam(net.parameters(), lr=MLP["lr"]) if model == "mlp" else \
        torch.optim.AdamW(net.parameters(), lr=LM["lr"], weight_decay=LM["wd"])
    x, y = _data(model)
    x = torch.from_numpy(x)
    y = torch.from_numpy(y).long()
    if model == "lm":
        x = x.long()

    def loss_fn(x, y):
        out = net(x)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    return _torch_step(opt, torch.compile(loss_fn) if compiled else loss_fn, x, y)


# ---------------------------------------------------------------- jax
def run_jax(model: str, donate: bool = False):
    import jax
    import jax.numpy as jnp

    w0 = _init(model)
    params = {k: ((jnp.asarray(v[0]), jnp.asarray(v[1])) if isinstance(v, tuple)
                  else jnp.asarray(v)) for k, v in w0.items()}

    def lin(p, x):
        return x @ p[0].T + p[1]

    def ln(x):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5)

    def forward(p, x):
        if model == "mlp":
            return lin(p["l3"], jax.nn.relu(lin(p["l2"], jax.nn.relu(lin(p["l1"], x)))))
        d, h = LM["d"], LM["heads"]
        x = p["emb"][x]
        b, t, _ = x.shape
        mask = jnp.tril(jnp.ones((t, t), bool))
        for i in range(LM["layers"]):
            q, k, v = jnp.moveaxis(lin(p[f"b{i}.qkv"], ln(x)).reshape(b, t, 3, h, d // h),
                                   2, 0).transpose(0, 1, 3, 2, 4)
            s = jnp.where(mask, q @ k.swapaxes(-1, -2) * (d // h) ** -0.5, -jnp.inf)
            a = jax.nn.softmax(s, -1) @ v
            x = x + lin(p[f"b{i}.o"], a.transpose(0, 2, 1, 3).reshape(b, t, d))
            x = x + lin(p[f"b{i}.down"], jax.nn.gelu(lin(p[f"b{i}.up"], ln(x)),
                                                     approximate=True))
        return lin(p["head"], ln(x))

    def loss_fn(p, x, y):
        logits = forward(p, x)
        lse = jax.nn.logsumexp(logits, -1)
        picked = jnp.take_along_axis(logits, y[..., None], -1)[..., 0]
        return (lse - picked).mean()

    lr = MLP["lr"] if model == "mlp" else LM["lr"]
    wd = 0.0 if model == "mlp" else LM["wd"]
    b1, b2, eps = 0.9, 0.999, 1e-8
    def zeros():  # (two trees: a donated buffer is given up once)
        return jax.tree_util.tree_map(jnp.zeros_like, params)
    state = (params, zeros(), zeros(), jnp.zeros((), jnp.int32))

    @functools.partial(jax.jit, donate_argnums=(0,) if donate else ())
    def step(state, x, y):
        p, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree_util.tree_map(
            lambda p, m, v: p * (1 - lr * wd) - lr * (m / c1) / (jnp.sqrt(v / c2) + eps),
            p, m, v)
        return (p, m, v, t), loss

    x, y = (jnp.asarray(a) for a in _data(model))
    box = [state]

    def run():
        box[0], loss = step(box[0], x, y)
        return loss

    return run, lambda out: float(out)


# ---------------------------------------------------------------- mlx
def run_mlx(model: str):
    from functools import partial

    import mlx.core as mx
    import mlx.nn as mnn
    import mlx.optimizers as mopt

    w0 = _init(model)

    def linear(name):
        wt, b = w0[name]
        m = mnn.Linear(wt.shape[1], wt.shape[0])
        m.weight, m.bias = mx.array(wt), mx.array(b)
        return m

    if model == "mlp":
        class Net(mnn.Module):
            def __init__(self):
                super().__init__()
                self.l1, self.l2, self.l3 = linear("l1"), linear("l2"), linear("l3")

            def __call__(self, x):
                return self.l3(mnn.relu(self.l2(mnn.relu(self.l1(x)))))
        # (MLX skips the bias correction by default; the other frameworks apply it)
        opt = mopt.Adam(MLP["lr"], bias_correction=True)
    else:
        d, h = LM["d"], LM["heads"]

        class Block(mnn.Module):
            def __init__(self, i):
                super().__init__()
                self.n1, self.n2 = mnn.LayerNorm(d), mnn.LayerNorm(d)
                self.qkv, self.o = linear(f"b{i}.qkv"), linear(f"b{i}.o")
                self.up, self.down = linear(f"b{i}.up"), linear(f"b{i}.down")

            def __call__(self, x):
                b, t, _ = x.shape
                q, k, v = mx.split(self.qkv(self.n1(x)).reshape(b, t, 3, h, d // h), 3, 2)
                q, k, v = (z.squeeze(2).transpose(0, 2, 1, 3) for z in (q, k, v))
                a = mx.fast.scaled_dot_product_attention(q, k, v, scale=(d // h) ** -0.5,
                                                         mask="causal")
                x = x + self.o(a.transpose(0, 2, 1, 3).reshape(b, t, d))
                return x + self.down(mnn.gelu_approx(self.up(self.n2(x))))

        class Net(mnn.Module):
            def __init__(self):
                super().__init__()
                self.emb = mnn.Embedding(LM["vocab"], d)
                self.emb.weight = mx.array(w0["emb"])
                self.blocks = [Block(i) for i in range(LM["layers"])]
                self.norm = mnn.LayerNorm(d)
                self.head = linear("head")

            def __call__(self, ids):
                x = self.emb(ids)
                for blk in self.blocks:
                    x = blk(x)
                return self.head(self.norm(x))
        opt = mopt.AdamW(LM["lr"], weight_decay=LM["wd"], bias_correction=True)
    net = Net()
    mx.eval(net.parameters())
    x, y = (mx.array(a) for a in _data(model))

    def loss_fn(x, y):
        return mnn.losses.cross_entropy(net(x), y, reduction="mean")

    vg = mnn.value_and_grad(net, loss_fn)
    state = [net.state, opt.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = vg(x, y)
        opt.update(net, grads)
        return loss

    def run():
        loss = step(x, y)
        mx.eval(state, loss)
        return loss

    return run, lambda out: float(out.item())


# ---------------------------------------------------------------- worker / driver
def worker(framework: str, model: str, steps: int) -> dict:
    if framework == "braze":
        step, value = run_braze(model)
    elif model == "lora" and framework == "torch-eager":
        step, value = run_torch_lora()
    elif model == "lora":
        raise SystemExit(f"{framework}: the LoRA step is compared with torch eager only")
    elif framework in ("torch-eager", "torch-compile"):
        step, value = run_torch(model, framework == "torch-compile")
    elif framework in ("jax-jit", "jax-jit-donate"):
        step, value = run_jax(model, donate=framework == "jax-jit-donate")
    else:
        step, value = run_mlx(model)
    t0 = time.perf_counter()
    first = value(step())
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(3):
        fourth = value(step())  # the loss of step 4, the same in every framework
    # a timed run lasts a second at least: shorter ones measure the machine's moods
    steps = max(steps, int(RUN_SECONDS / ((time.perf_counter() - t0) / 3)) + 1)
    base, _ = _rss()
    _reset_peak()
    # interleaved with the other frameworks' workers: one timed run per "run" line on
    # stdin (the driver takes turns, so every framework sees the same machine noise)
    print(json.dumps({"ready": True}), flush=True)
    times = []
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t0 = time.perf_counter()
        for _ in range(steps):
            out = step()
        value(out)
        times.append((time.perf_counter() - t0) / steps)
        print(json.dumps({"s": times[-1]}), flush=True)
    _, peak = _rss()
    return {"steps_per_s": 1.0 / statistics.median(times), "first_s": warm,
            "first_loss": first, "last_loss": fourth, "peak_mb": (peak - base) / 2**20,
            "rss_mb": peak / 2**20}


class _Worker(Worker):
    """A framework's worker process, warmed up and waiting for its turns."""

    def __init__(self, py: str, fw: str, model: str, steps: int) -> None:
        super().__init__(fw, [py, os.path.abspath(__file__), "--worker", f"{fw}:{model}",
                              "--steps", str(steps)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(FRAMEWORKS))
    ap.add_argument("--models", default="mlp,lm,lora")
    ap.add_argument("--steps", type=int, default=0, help="steps per timed run (0: per model)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        fw, model = args.worker.split(":")
        print(json.dumps(worker(fw, model, args.steps)), flush=True)
        return 0
    sys.path.insert(0, HERE)
    from _timing import isa

    peers_py = os.environ.get("PEERS_PYTHON", sys.executable)
    print(f"training steps, float32, {os.cpu_count()} cpus, {isa()}; median of {args.runs} "
          f"runs; peak = RSS above the pre-step resident set")
    for model in args.models.split(","):
        steps = args.steps or {"mlp": 20, "lm": 5, "lora": 2}[model]
        desc = {"mlp": "MLP 784-512-512-10, batch 256, Adam",
                "lm": "LM 4x(d256, 4 heads), seq 128, batch 8, AdamW",
                "lora": "LoRA rank 8 on SmolLM2-135M (qkv, o), seq 128, batch 4, AdamW"}[model]
        if model == "lora" and "torch-eager" in args.only:
            export_lora_weights()
        print(f"\n{desc}")
        print(f"{'framework':15s} {'steps/s':>9s} {'vs braze':>9s} {'peak MB':>9s} "
              f"{'RSS MB':>8s} {'first s':>8s} {'loss 1->4':>14s}")
        workers = []
        for fw in args.only.split(","):
            if model == "lora" and fw not in ("braze", "torch-eager"):
                continue
            py = sys.executable if fw in ("braze", "mlx") else peers_py
            workers.append(_Worker(py, fw, model, steps))  # warm-ups one at a time
        runs: dict[str, list[float]] = {w.fw: [] for w in workers}  # seconds per step
        for turn in range(args.runs):  # turns: run 1 of each, run 2 of each, ...
            k = turn % len(workers)  # who goes first rotates (after a long run, the
            for w in workers[k:] + workers[:k]:  # next one may find the clocks lowered)
                if w.error is None:
                    time.sleep(0.5)  # the last worker's spinning thread pools go idle
                    r = w.send("run")
                    if r is not None:
                        runs[w.fw].append(r["s"])
        ref = runs.get("braze", [])
        for w in workers:
            r = w.send("end") if w.error is None else None
            if r is None:
                print(f"{w.fw:15s} {w.error}")
                continue
            # the ratio of each turn (this framework's run against braze's, minutes apart
            # at most), then their median: the machine's drift cancels out
            pairs = [b / t for t, b in zip(runs[w.fw], ref)]
            ratio = f"{statistics.median(pairs):.2f}x" if pairs else "-"
            print(f"{w.fw:15s} {r['steps_per_s']:9.1f} {ratio:>9s} {r['peak_mb']:9.1f} "
                  f"{r['rss_mb']:8.0f} {r['first_s']:8.1f} "
                  f"{r['first_loss']:6.3f}->{r['last_loss']:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
