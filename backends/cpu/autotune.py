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
``<kernel cache dir>/autotune.json``, keyed by kernel symbol and argument vector, in the
machine-fingerprinted format of :mod:`.tactics` (a file from another machine, or a
corrupt one, is ignored with one warning). The library ops' implementation choices
(tactics: kernel variants x threads) are tuned by :mod:`.tactics` itself.

>>> choose([(1, 2.0e-3), (2, 1.1e-3)])
2
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import tactics

MIN_ELEMENTS = 1 << 16
_FILE = tactics.TuningFile("autotune")
busy = tactics.busy  # (tests replace it)


def enabled() -> bool:
    """``BRAZE_AUTOTUNE`` is not 0."""
    return tactics.mode() != "0"


def key(symbol: str, args: Any) -> str:
    return f"{symbol}:{','.join(str(int(a)) for a in args[1:])}"  # args[0] is the thread count


def lookup(symbol: str, args: Any) -> int | None:
    """The tuned thread count of this kernel at these arguments, if known."""
    v = _FILE.get(key(symbol, args))
    return int(v) if isinstance(v, int) else None


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
    _FILE.put(key(symbol, args), winner, persist=not busy())  # busy: this process only
    return winner


def reset_memory() -> None:
    """Forget the in-process copy (tests; a changed cache directory)."""
    _FILE.reset()
