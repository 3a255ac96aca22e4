"""Autotuning: time the plausible variants of a kernel once, on its real shapes, and
keep the fastest in a per-machine cache.

Today's variant axis is the thread count (1 vs all): the generated code already picks
vector widths itself, and small-to-medium kernels are often faster on one thread than
paying the OpenMP fork/join. The default heuristic (threads above a work threshold) is
what runs until a kernel has been tuned and what runs with ``BRAZE_AUTOTUNE=0``.

A kernel is tuned the first time it runs with at least ``MIN_ELEMENTS`` iterations,
unless one of its outputs shares memory with one of its inputs (an in-place kernel is
not idempotent: running it twice would be wrong). A result measured while other
processes keep the cores busy (1-minute load average above half the cores) is used by
this process only: such timings favour one thread, and persisting them made a 4096²
softmax 2.3x slower in every later process. Results persist in
``<kernel cache dir>/autotune.json``, keyed by kernel symbol and argument vector (the
cache directory is per machine: its key includes the CPU).

>>> choose([(1, 2.0e-3), (2, 1.1e-3)])
2
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIN_ELEMENTS = 1 << 16
_lock = threading.Lock()
_memory: dict[str, int] | None = None


def enabled() -> bool:
    """``BRAZE_AUTOTUNE`` (default 1)."""
    return os.environ.get("BRAZE_AUTOTUNE", "1") != "0"


def _path() -> Path:
    from .build import cache_dir

    return cache_dir() / "autotune.json"


def _table() -> dict[str, int]:
    global _memory
    if _memory is None:
        import json

        try:
            _memory = {str(k): int(v) for k, v in json.loads(_path().read_text()).items()}
        except (OSError, ValueError, AttributeError):
            _memory = {}  # missing or corrupt: start over
    return _memory


def key(symbol: str, args: Any) -> str:
    return f"{symbol}:{','.join(str(int(a)) for a in args[1:])}"  # args[0] is the thread count


def lookup(symbol: str, args: Any) -> int | None:
    """The tuned thread count of this kernel at these arguments, if known."""
    with _lock:
        return _table().get(key(symbol, args))


def choose(timings: list[tuple[int, float]]) -> int:
    """The variant with the smallest time (ties: the first, i.e. the fewest threads)."""
    return min(timings, key=lambda t: t[1])[0]


def tune(symbol: str, args: Any, variants: list[int], run: Callable[[int], None],
         repeats: int = 2) -> int:
    """Time ``run(threads)`` for each variant (best of ``repeats``), record the winner."""
    timings = []
    for threads in variants:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(threads)
            best = min(best, time.perf_counter() - t0)
        timings.append((threads, best))
    winner = choose(timings)
    with _lock:
        table = _table()
        table[key(symbol, args)] = winner
        if busy():
            return winner  # this process only (see the module docstring)
        path = _path()
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            import json

            tmp.write_text(json.dumps(table))
            os.replace(tmp, path)  # atomic: concurrent processes never read half a file
    return winner


def busy() -> bool:
    """Are other processes loading the cores (so timings would mislead)?"""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    return load > cores / 2


def reset_memory() -> None:
    """Forget the in-process copy (tests; a changed cache directory)."""
    global _memory
    with _lock:
        _memory = None
