"""Timing shared by the benchmark scripts: medians of repeated runs after warm-up, the
ISA line every benchmark prints (figures of one machine kind say which), and the worker
process a peer framework runs in, taking its turns (one JSON line per request).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
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


class Worker:
    """A framework's worker process (``argv``), warmed up and waiting for its turns: it
    prints one JSON line when ready and one per line it is sent; a worker that dies is
    ``error`` (its last stderr line), never an exception in the caller."""

    def __init__(self, fw: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.fw = fw
        self.log = tempfile.TemporaryFile("w+")  # (a pipe could fill up and stall it)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env)
        self.ready = self._read()
        self.error = None if self.ready is not None else self._why()

    def _read(self) -> dict | None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return json.loads(line) if line.strip() else None

    def _why(self) -> str:
        self.proc.kill()
        self.proc.wait()
        self.log.seek(0)
        err = (self.log.read().strip().splitlines() or ["?"])[-1]
        return f"unavailable ({err[:90]})"

    def send(self, line: str) -> dict | None:
        """The worker's answer to ``line`` (None once it has failed)."""
        if self.error is not None:
            return None
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.error = self._why()
            return None
        r = self._read()
        if r is None:
            self.error = self._why()
        return r
