"""Timing shared by the benchmark scripts: medians of repeated runs after warm-up, and the
ISA line every benchmark prints (figures of one machine kind say which)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeat: int = 7, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs, after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def isa() -> str:
    """The CPU's vector ISA as braze's kernels use it here (``BRAZE_ISA`` included)."""
    try:
        from braze.backends.cpu import build
    except ImportError:  # a peer's process without braze
        import platform

        return platform.machine()
    return build.describe()
