"""The fusion compiler's own costs and the fused workloads, side by side with numpy
(and torch / mlx when installed).

    .venv/bin/python benchmarks/compiler.py

* optimize: simplify + fuse + memory plan of four ~1,000-node graphs (cold), the
  time to record each, and the schedule-cache lookup of a rebuilt graph beyond
  recording it (hashing its structure);
* workloads (float32, medians): the elementwise chain
  ``tanh(x)*0.5 + 1/(1+exp(-y))*x - exp(-x*x) + sqrt(abs(y))`` at 2^24 and softmax
  over the last axis of 4096x4096, reported in ms, GB/s (inputs + output bytes over
  time) and ratio to numpy. On the ``numpy`` backend each fused kernel still runs op
  by op (in cache-sized blocks); generated kernels arrive with the cpu backend.
"""

from __future__ import annotations

import os

# The optimizer is measured on whole ~1,000-node graphs: the recording layer's loop cut
# (which evaluates a graph in segments once it is 32 pending nodes deep) stays off here.
os.environ.setdefault("BRAZE_CUT_DEPTH", "0")

from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
from _timing import isa, median_seconds  # noqa: E402  # benchmarks/ is the script's directory

import braze as bz  # noqa: E402
from braze.graph.compiler import CACHE, optimize  # noqa: E402
from braze.graph.ir import Graph, trace  # noqa: E402


def median_s(fn: Callable[[], object], repeat: int = 7) -> float:
    return median_seconds(fn, repeat)


def chain_bz(x, y):
    return bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))


def chain_np(x, y):
    return np.tanh(x) * 0.5 + 1 / (1 + np.exp(-y)) * x - np.exp(-x * x) + np.sqrt(np.abs(y))


def softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _graphs() -> dict[str, Callable[[], bz.Array]]:
    """Graphs of ~1,000 nodes: the shapes that stress the fusion analysis."""
    x = bz.asarray(np.ones((64, 256), np.float32))
    w = bz.asarray(np.ones((256, 256), np.float32))
    b = bz.asarray(np.ones(256, np.float32))

    def row_chain():  # 250 row reductions threaded through one running value
        a = x
        for i in range(250):
            m = bz.mean(a, axis=-1, keepdims=True)
            a = bz.tanh(a - m) * 0.5 + 1.0 if i % 2 else bz.exp(-a * a)
        return a

    def softmaxes():  # 100 x (softmax + residual)
        a = x
        for _ in range(100):
            a = bz.softmax(a * 1.5, axis=-1) + a
        return a

    def mlp():  # 60 x (layer norm, matmul + bias, tanh-gelu, residual)
        a = x
        for _ in range(60):
            h = bz.fast.layer_norm(a, b, b, 1e-5) @ w + b
            a = a + 0.5 * h * (1 + bz.tanh(0.79788456 * (h + 0.044715 * h * h * h)))
        return a

    def chain():  # 1,000 elementwise ops
        a = x
        for i in range(1000):
            a = bz.exp(a) if i % 3 == 0 else a * 1.0001 + 0.5
        return a

    return {"250 chained row reductions": row_chain, "100 softmax + residual": softmaxes,
            "60 layer-norm/matmul/gelu blocks": mlp, "1,000-op elementwise chain": chain}


def compiler_costs() -> None:
    print(isa())
    print(f"{'graph':34s} {'nodes':>6s} {'optimize (cold)':>16s} {'record':>8s} "
          f"{'cache hit':>10s}")
    for name, build in _graphs().items():
        out = build()
        g, _ = Graph.from_nodes([out._node])
        t_opt = median_s(lambda g=g: optimize(g), repeat=5)
        CACHE.get_or_build(trace([out._node]).key, lambda g=g: g)
        t_build = median_s(build)
        t_key = median_s(lambda g=g, build=build: CACHE.get_or_build(
            trace([build()._node]).key, lambda: g))
        print(f"{name:34s} {len(g.nodes):6d} {t_opt * 1e3:13.1f} ms {t_build * 1e3:5.2f} ms "
              f"{(t_key - t_build) * 1e3:7.2f} ms")
    x = bz.asarray(np.ones((32, 32), np.float32))
    g, _ = Graph.from_nodes([bz.softmax(x * 3.0, axis=-1)._node])
    CACHE.get_or_build(trace([bz.softmax(x * 3.0, axis=-1)._node]).key, lambda: g)
    t_small = median_s(lambda: CACHE.get_or_build(
        trace([bz.softmax(x * 3.0, axis=-1)._node]).key, lambda: g), repeat=51)
    t_rec = median_s(lambda: bz.softmax(x * 3.0, axis=-1), repeat=51)
    print(f"softmax graph: schedule-cache hit {(t_small - t_rec) * 1e6:.0f} us beyond recording")


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
