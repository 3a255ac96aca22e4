"""Train an MLP classifier on scikit-learn's handwritten digits with braze.

A two-layer network (64-256-10, ReLU, dropout) trained with AdamW on 80 % of the 1,797
8x8 digits (mini-batches of 64) and evaluated on the held-out 20 %. The training step
(forward, backward, gradient clipping and the optimizer update) is one ``bz.compile``d
function with the model and optimizer as implicit state: after the first call it
replays one schedule (the optimizer's state is created up front: one trace).

    python examples/train_mlp.py --epochs 20     # reaches >= 95 % test accuracy
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import braze as bz

nn, optim = bz.nn, bz.optimizers


class MLP(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int, dropout: float) -> None:
        super().__init__()
        self.hidden = nn.Linear(d_in, d_hidden)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(d_hidden, d_out)

    def __call__(self, x: bz.Array, key: bz.Array | None = None) -> bz.Array:
        return self.out(self.drop(nn.relu(self.hidden(x)), key=key))


def load_digits(seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits as sk_digits

    x, y = sk_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order].astype(np.int32)
    cut = int(0.8 * len(x))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    x_train, y_train, x_test, y_test = load_digits(args.seed)
    model = MLP(64, 256, 10, dropout=0.1)
    steps = args.epochs * (len(x_train) // args.batch)
    opt = optim.AdamW(optim.join_schedules(
        [optim.linear_schedule(0.0, args.lr, 20), optim.cosine_decay(args.lr, steps)], [20]),
        weight_decay=1e-4).init(model.trainable_parameters())

    def loss_fn(x: bz.Array, y: bz.Array, key: bz.Array) -> bz.Array:
        return nn.losses.cross_entropy(model(x, key), y, label_smoothing=0.05)

    value_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model, opt]

    @bz.compile(inputs=state, outputs=state)
    def step(x: bz.Array, y: bz.Array, key: bz.Array) -> bz.Array:
        loss, grads = value_and_grad(x, y, key)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(model, grads)
        return loss

    rng = np.random.default_rng(args.seed)
    keys = bz.random.split(bz.random.key(args.seed), steps + 1)
    t0, k = time.perf_counter(), 0
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for i in range(0, len(order) - args.batch + 1, args.batch):
            b = order[i:i + args.batch]
            losses.append(step(bz.asarray(x_train[b]), bz.asarray(y_train[b]), keys[k]))
            k += 1
        if epoch % 5 == 4 or epoch == args.epochs - 1:
            print(f"epoch {epoch + 1:3d}  loss {np.mean([float(v) for v in losses]):.4f}")
    elapsed = time.perf_counter() - t0
    model.eval()
    pred = np.asarray(bz.argmax(model(bz.asarray(x_test)), axis=1))
    acc = float(np.mean(pred == y_test))
    print(f"test accuracy {acc:.3f} ({len(y_test)} digits); {k} steps in {elapsed:.1f} s "
          f"({k / elapsed:.0f} steps/s)")
    return acc


if __name__ == "__main__":
    main()
