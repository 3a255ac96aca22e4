"""Per-op dispatch and eval overhead on tiny arrays, side by side with numpy
(and torch / mlx when installed).

    .venv/bin/python benchmarks/dispatch.py

Workload: ``(x * y + 1.0).sum()`` on 8-element float32 arrays (3 ops), timed
as a median over many calls. For lazy libraries the time includes recording the
graph and evaluating it. Also: recording a 1000-op graph on a 10000x10000 array.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
from _timing import isa  # benchmarks/ is the script's directory

import braze as bz


def per_call_us(fn: Callable[[], object], number: int = 2000, repeat: int = 7) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs) * 1e6


def main() -> None:
    rows: list[tuple[str, float]] = []
    xn = np.ones(8, np.float32)
    yn = np.full(8, 2.0, np.float32)
    rows.append(("numpy eager", per_call_us(lambda: (xn * yn + 1.0).sum())))

    xb, yb = bz.asarray(xn), bz.asarray(yn)

    def braze_3op() -> None:
        bz.eval((xb * yb + 1.0).sum())

    rows.append((f"braze record + eval ({bz.backends.current().name})", per_call_us(braze_3op)))
    rows.append(("braze record only (3 ops)", per_call_us(lambda: (xb * yb + 1.0).sum())))

    try:
        import torch

        xt, yt = torch.from_numpy(xn), torch.from_numpy(yn)
        rows.append(("torch eager", per_call_us(lambda: (xt * yt + 1.0).sum())))
    except ImportError:
        pass
    try:
        import mlx.core as mx

        xm, ym = mx.array(xn), mx.array(yn)
        rows.append(("mlx eager", per_call_us(lambda: mx.eval((xm * ym + 1.0).sum()))))
        f = mx.compile(lambda a, b: (a * b + 1.0).sum())
        rows.append(("mx.compile", per_call_us(lambda: mx.eval(f(xm, ym)))))
    except ImportError:
        pass

    base = rows[0][1]
    print(f"tiny 3-op graph, (x * y + 1).sum() on 8 float32, median per call, {isa()}")
    print(f"{'library':40s} {'us/call':>9s} {'vs numpy':>9s}")
    for name, us in rows:
        print(f"{name:40s} {us:9.1f} {us / base:8.1f}x")

    big = bz.zeros((10000, 10000))
    t0 = time.perf_counter()
    a = big
    for i in range(1000):
        a = bz.exp(a) if i % 3 == 0 else a * 1.0001 + 0.5
    ms = (time.perf_counter() - t0) * 1e3
    print(f"\nrecord 1000+ ops on a 10000x10000 array: {ms:.1f} ms "
          f"({a._node.size * 4 / 1e6:.0f} MB per array, nothing allocated)")


if __name__ == "__main__":
    main()
