"""braze quickstart: NumPy-style code, recorded lazily, computed on demand.

Run with ``make run``. Prints a few results, checks them against NumPy, and
times the same script in both.
"""

from __future__ import annotations

import time

import numpy as np

import braze as bz


def layer(x, w, b):
    """One dense layer + GELU-ish activation + softmax, written as with NumPy."""
    h = x @ w + b
    h = h * bz.sigmoid(1.702 * h)
    return bz.softmax(h, axis=-1)


def layer_np(x, w, b):
    h = x @ w + b
    h = h * (1 / (1 + np.exp(-1.702 * h)))
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def chain(x, y):
    """An elementwise chain (the kind the fusion compiler turns into one kernel)."""
    return bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))


def chain_np(x, y):
    return np.tanh(x) * 0.5 + 1 / (1 + np.exp(-y)) * x - np.exp(-x * x) + np.sqrt(np.abs(y))


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print(f"braze {bz.__version__}  backend={bz.backends.current().name}  "
          f"available={bz.backends.available()}")
    key = bz.random.key(0)
    kx, kw, ky = bz.random.split(key, 3)

    # 1. Lazy: nothing below is computed until a value is needed.
    x = bz.random.normal((256, 512), key=kx)
    w = bz.random.normal((512, 128), key=kw) * 0.05
    b = bz.zeros(128)
    probs = layer(x, w, b)
    print(f"recorded a {probs.shape} softmax layer; computed yet? {probs._node.is_evaluated}")
    row_sums = probs.sum(axis=-1)
    print(f"row sums (first 4): {np.round(np.asarray(row_sums[:4]), 6).tolist()}")
    print(f"argmax of the first row: {bz.argmax(probs[0]).item()}")

    # 2. Same answers as NumPy.
    xn, wn, bn = np.asarray(x), np.asarray(w), np.asarray(b)
    err = np.max(np.abs(np.asarray(probs) - layer_np(xn, wn, bn)))
    print(f"max |braze - numpy| on the layer: {err:.2e}")

    # 3. Errors at the call that made them, not later.
    try:
        bz.ones((2, 3)) + bz.ones((4,))
    except ValueError as e:
        print(f"bad broadcast caught at the call: {e}")

    # 4. What the compiler makes of it: fused kernels, not one pass per op.
    report = bz.explain(layer, x, w, b)
    print(f"the layer compiles to {report.num_kernels} launches:")
    for k in report.kernels:
        print(f"  {k.kind:8s} {k.name}: {' '.join(k.ops)}")

    # 5. @bz.compile traces once, then replays the optimized schedule.
    fast_layer = bz.compile(layer)
    for _ in range(3):
        fast_layer(x, w, b)
    print(f"bz.compile traced the layer {fast_layer.trace_count} time(s) for 3 calls")

    # 6. Timing: an elementwise chain over 2^22 float32 values, braze vs NumPy.
    n = 1 << 22
    yn = np.asarray(bz.random.normal((n,), key=ky))
    xn2 = np.asarray(bz.random.uniform(-2, 2, (n,), key=kx))
    xb, yb = bz.asarray(xn2), bz.asarray(yn)
    t_np = best_of(lambda: chain_np(xn2, yn))
    t_bz = best_of(lambda: bz.eval(chain(xb, yb)))
    err = np.max(np.abs(np.asarray(chain(xb, yb)) - chain_np(xn2, yn)))
    print(f"chain over 2^22 float32: numpy {t_np * 1e3:.1f} ms, braze "
          f"({bz.backends.current().name}) {t_bz * 1e3:.1f} ms -> {t_np / t_bz:.2f}x numpy; "
          f"max error {err:.1e}")


if __name__ == "__main__":
    main()
