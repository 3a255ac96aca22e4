"""The fusion compiler's own costs and the fused workloads, side by side with numpy
(and torch / mlx when installed).

    .venv/bin/python benchmarks/compiler.py

* optimize: simplify + fuse + memory plan of a 1,000-node graph (cold), and the
  schedule-cache lookup of a rebuilt graph (warm);
* workloads (float32, medians): the elementwise chain
  ``tanh(x)*0.5 + 1/(1+exp(-y))*x - exp(-x*x) + sqrt(abs(y))`` at 2^24 and softmax
  over the last axis of 4096x4096, reported in ms, GB/s (inputs + output bytes over
  time) and ratio to numpy. On the ``numpy`` backend each fused kernel still runs op
  by op (in cache-sized blocks); generated kernels arrive with the cpu backend.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from _timing import median_seconds  # benchmarks/ is the script's directory

import braze as bz
from braze.graph.compiler import CACHE, optimize
from braze.graph.ir import Graph, trace


def median_s(fn: Callable[[], object], repeat: int = 7) -> float:
    return median_seconds(fn, repeat)


def chain_bz(x, y):
    return bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))


def chain_np(x, y):
    return np.tanh(x) * 0.5 + 1 / (1 + np.exp(-y)) * x - np.exp(-x * x) + np.sqrt(np.abs(y))


def softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def compiler_costs() -> None:
    x = bz.asarray(np.ones((64, 64), np.float32))

    def build():
        a = x
        for i in range(250):
            m = bz.mean(a, axis=-1, keepdims=True)
            a = bz.tanh(a - m) * 0.5 + 1.0 if i % 2 else bz.exp(-a * a)
        return a

    out = build()
    g, _ = Graph.from_nodes([out._node])
    t_opt = median_s(lambda: optimize(g), repeat=5)
    CACHE.get_or_build(trace([out._node]).key, lambda: g)
    t_key = median_s(lambda: CACHE.get_or_build(trace([build()._node]).key, lambda: g))
    t_build = median_s(build)
    print(f"optimize a {len(g.nodes)}-node graph (cold): {t_opt * 1e3:.1f} ms")
    print(f"rebuild the same graph: {t_build * 1e3:.2f} ms record; "
          f"cache lookup incl. record: {t_key * 1e3:.2f} ms")


def workloads() -> None:
    rows = []
    n = 1 << 24
    rng = np.random.default_rng(0)
    xn = rng.uniform(-2, 2, n).astype(np.float32)
    yn = rng.standard_normal(n).astype(np.float32)
    xb, yb = bz.asarray(xn), bz.asarray(yn)
    chain_c = bz.compile(chain_bz)
    nbytes = 3 * 4 * n
    rows.append(("chain 2^24", "numpy", median_s(lambda: chain_np(xn, yn)), nbytes))
    rows.append(("chain 2^24", "braze eval", median_s(lambda: bz.eval(chain_bz(xb, yb))), nbytes))
    rows.append(("chain 2^24", "braze compile", median_s(lambda: chain_c(xb, yb)), nbytes))
    s = rng.standard_normal((4096, 4096)).astype(np.float32)
    sb = bz.asarray(s)
    nbytes = 2 * 4 * s.size
    rows.append(("softmax 4096^2", "numpy", median_s(lambda: softmax_np(s)), nbytes))
    rows.append(("softmax 4096^2", "braze eval",
                 median_s(lambda: bz.eval(bz.softmax(sb, axis=-1))), nbytes))
    try:
        import torch

        xt, yt, st = torch.from_numpy(xn), torch.from_numpy(yn), torch.from_numpy(s)
        rows.append(("chain 2^24", "torch eager", median_s(lambda: (
            torch.tanh(xt) * 0.5 + 1 / (1 + torch.exp(-yt)) * xt - torch.exp(-xt * xt)
            + torch.sqrt(torch.abs(yt)))), 3 * 4 * n))
        rows.append(("softmax 4096^2", "torch eager",
                     median_s(lambda: torch.softmax(st, dim=-1)), nbytes))
    except ImportError:
        pass
    print(f"\n{'workload':16s} {'library':14s} {'ms':>8s} {'GB/s':>7s} {'vs numpy':>9s}")
    base: dict[str, float] = {}
    for work, lib, t, nb in rows:
        base.setdefault(work, t)
        print(f"{work:16s} {lib:14s} {t * 1e3:8.1f} {nb / t / 1e9:7.2f} {base[work] / t:8.2f}x")


if __name__ == "__main__":
    print(f"braze backend: {bz.backends.current().name}")
    compiler_costs()
    workloads()
