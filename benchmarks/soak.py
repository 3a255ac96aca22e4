"""Soak: resident memory, open file descriptors and threads over many evaluations of
changing graphs on the cpu backend (issue 16's resource limits). Every evaluation builds a
graph that differs from the last in shape, scalar constants or structure (one of a few
dozen structures, so kernels are reused but schedules keep changing), evaluates it, and
checks one value against numpy; the series is printed every ``--every`` evaluations.

    .venv/bin/python benchmarks/soak.py [--evals 100000] [--every 10000]

Flat is the goal: caches (schedules, plans, kernels, tuning entries) are bounded.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time

import numpy as np
from _timing import isa  # benchmarks/ is the script's directory

import braze as bz


def rss_mb() -> float:
    """Current resident set size (MB), from /proc (peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def os_threads() -> int:
    """Threads of the process, native ones (OpenMP workers) included."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return threading.active_count()


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def one(i: int, rng: np.random.Generator) -> None:
    n = 64 + (i * 37) % 4000  # changing shapes
    x = bz.asarray(rng.standard_normal(n).astype(np.float32))
    c = float(i % 97) * 0.01
    kind = i % 6
    if kind == 0:
        out = bz.sum(bz.tanh(x * c) + 1.0)
        want = np.sum(np.tanh(np.asarray(x) * np.float32(c)) + 1.0, dtype=np.float64)
    elif kind == 1:
        out = bz.max(bz.exp(-x * x) * c)
        want = np.max(np.exp(-np.asarray(x) ** 2) * np.float32(c))
    elif kind == 2:
        m = bz.reshape(x[: (n // 8) * 8], (8, -1))
        out = bz.sum(bz.softmax(m, axis=-1)) - 8.0
        want = 0.0
    elif kind == 3:
        out = bz.mean(bz.where(x > c, x, -x))
        xn = np.asarray(x)
        want = np.mean(np.where(xn > c, xn, -xn))
    elif kind == 4:
        y = x[::2] * 2.0 + x[1::2][: x[::2].shape[0]]
        out = bz.sum(y)
        xn = np.asarray(x)
        want = np.sum(xn[::2] * 2 + xn[1::2][: xn[::2].shape[0]], dtype=np.float64)
    else:
        out = bz.sum(bz.cumsum(x) * c)
        want = np.sum(np.cumsum(np.asarray(x), dtype=np.float64) * c)
    got = float(out)
    if not np.isclose(got, want, rtol=1e-3, atol=1e-2 * max(1.0, abs(float(want)))):
        raise AssertionError(f"evaluation {i} (kind {kind}, n {n}): {got} != {want}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--evals", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=10_000)
    args = ap.parse_args()
    bz.set_backend("cpu")
    rng = np.random.default_rng(0)
    print(f"soak: {args.evals} evaluations of changing graphs, cpu backend, {isa()}")
    print(f"{'evals':>8} {'RSS MB':>8} {'fds':>5} {'threads':>8} {'evals/s':>8}")
    t0 = time.perf_counter()
    last = t0
    for i in range(1, args.evals + 1):
        one(i, rng)
        if i % args.every == 0 or i == 1:
            now = time.perf_counter()
            rate = (args.every if i > 1 else 1) / (now - last)
            last = now
            print(f"{i:>8} {rss_mb():>8.1f} {open_fds():>5} {os_threads():>8} "
                  f"{rate:>8.0f}", flush=True)
    print(f"{args.evals} evaluations in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
