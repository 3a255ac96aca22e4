"""Tactics and their autotuner: an op declares candidate implementations, the tuner times
the valid ones on the real shapes and keeps the fastest, per machine.

A :class:`Tactic` is a named implementation choice with the parameters that select it (a
compile-time variant of a kernel, a thread count) and a validity predicate over the
problem. :func:`select` picks one for a problem key:

* ``BRAZE_AUTOTUNE=0``: the op's heuristic default, always (nothing timed or stored).
* ``1`` (default): a stored winner if there is one; else the valid *cheap* tactics (those
  that need no new kernel build) are timed on the call's own operands within a budget
  (``BUDGET_S`` per key, and never more than ``BUDGET_RUNS`` times the default's time),
  so a first call stays fast.
* ``max``: every valid tactic, building the variants it needs, within ``MAX_BUDGET_S``.

Each candidate runs once against the default and must give the *same bits* (an exception
or a different answer excludes it, with the reason kept: the tactics of one op are
arithmetic-preserving -- thread splits and blockings that keep one summation chain per
output -- so tuning never changes a result). Timing: the valid tactics run interleaved,
``REPEATS`` to ``MAX_ROUNDS`` rounds as the budget allows, median per tactic; a candidate
replaces the default only if it is faster by more than ``MARGIN`` in that race and again
in a second race of the two (timings of this host vary by several percent run to run: a
coin-flip winner would make results of different processes differ in speed for nothing).
A result measured while other processes load the cores is kept for this process only.

Persistence: ``<kernel cache dir>/<name>.json`` holds ``{"machine": fingerprint,
"entries": {...}}``; the fingerprint hashes the CPU model, its ISA features, the build
target (``BRAZE_ISA``), the compiler, the versions of braze, numpy and of this tuner's
method (``TUNER_VERSION``: entries timed by an older method are tuned again), so a cache
directory shared between machines (an NFS home) never hands one machine another's
choices. A corrupt, truncated or foreign file is ignored with one warning and rewritten
on the next save; writes are atomic (a temporary file renamed into place).

>>> t = Tactic("threads=1", {"threads": 1})
>>> t.name, t.cheap
('threads=1', True)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Tactic", "TuningFile", "bucket", "mode", "report", "select", "stored"]

REPEATS = 5  # rounds of a race at least (each tactic runs once a round)
MAX_ROUNDS = 15
TUNER_VERSION = 2  # 2: interleaved races and a confirmation (1: runs in turn)
MARGIN = 0.03  # a candidate must beat the default by 3 % (median against median)
BUDGET_S = 0.05  # per key under BRAZE_AUTOTUNE=1
BUDGET_RUNS = 40  # ... and at most this many default-run times
MAX_BUDGET_S = 5.0  # per key under max (builds not counted)
MODES = ("0", "1", "max")
MAX_ENTRIES = 4096  # per file (hypothesis-drawn shapes in tests would grow it without end)


@dataclass(frozen=True)
class Tactic:
    """One implementation choice: ``params`` select it (the op reads them), ``cheap`` says
    it needs no kernel build beyond what is loaded or cached, ``valid`` whether it applies
    to a problem (a dict of the op's sizes)."""

    name: str
    params: Mapping[str, Any]
    cheap: bool = True
    valid: Callable[[Mapping[str, int]], bool] = field(default=lambda problem: True,
                                                       compare=False, repr=False)


def _env_mode() -> str:
    m = os.environ.get("BRAZE_AUTOTUNE", "1").strip().lower() or "1"
    if m not in MODES:
        raise ValueError(f"BRAZE_AUTOTUNE must be 0, 1 or max, got {m!r}")
    return m


def mode() -> str:
    """``BRAZE_AUTOTUNE``: '0', '1' (default) or 'max' (read at each tuning decision: a
    decision is made once per kernel and problem, so the lookup costs nothing that repeats).

    >>> mode() in MODES
    True
    """
    return _env_mode()


def bucket(m: int) -> int:
    """The power of two at or above ``m`` (problems tuned per bucket along the token /
    batch dimension, as TensorRT-LLM does).

    >>> [bucket(m) for m in (1, 2, 3, 8, 9, 104)]
    [1, 2, 4, 8, 16, 128]
    """
    return 1 if m <= 1 else 1 << (m - 1).bit_length()


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """This machine and software, as tuning results depend on them."""
    import platform

    import numpy as np

    from ... import _core
    from . import build

    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "CPU part")):
                model = line.split(":", 1)[1].strip()
                break
    try:
        cxx = build.compiler_version(tuple(build.compiler() or ["c++"]))
    except build.BuildError:
        cxx = "none"
    try:
        from importlib.metadata import version

        braze_version = version("braze")
    except Exception:  # noqa: BLE001 - an uninstalled checkout
        braze_version = "dev"
    parts = [model, ",".join(_core.cpu_features()), build.target(), cxx, braze_version,
             np.__version__, str(os.cpu_count()), f"tuner{TUNER_VERSION}"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class TuningFile:
    """``<cache dir>/<name>.json``: this machine's tuning results (see the module text);
    ``directory`` overrides the kernel cache directory.

    >>> import tempfile
    >>> f = TuningFile("doctest", tempfile.mkdtemp())
    >>> f.put("k", {"chosen": "a"}); f.get("k")
    {'chosen': 'a'}
    """

    def __init__(self, name: str, directory: str | None = None) -> None:
        self.name = name
        self.directory = directory
        self._lock = threading.Lock()
        self._entries: dict[str, Any] | None = None
        self._dir: str | None = None

    def path(self) -> Path:
        from .build import cache_dir

        return (Path(self.directory) if self.directory else cache_dir()) / f"{self.name}.json"

    def _load(self) -> dict[str, Any]:
        d = str(self.path().parent)
        if self._entries is not None and self._dir == d:
            return self._entries
        self._dir, entries = d, {}
        path = self.path()
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None  # none yet
        if raw is not None:
            try:
                doc = json.loads(raw)
                if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
                    raise ValueError("not a tuning file")
                if doc.get("machine") != fingerprint():
                    warnings.warn(f"braze: {path} was tuned on another machine or software "
                                  f"(its fingerprint differs): ignored, tuning again here",
                                  RuntimeWarning, stacklevel=4)
                else:
                    entries = doc["entries"]
            except ValueError as e:  # (json.JSONDecodeError and UnicodeDecodeError too)
                warnings.warn(f"braze: {path} is corrupt ({e}): ignored, tuning again",
                              RuntimeWarning, stacklevel=4)
        self._entries = entries
        return entries

    def get(self, key: str) -> Any:
        with self._lock:
            return self._load().get(key)

    def put(self, key: str, value: Any, persist: bool = True) -> None:
        """Record ``value``; written to disk (atomically) unless ``persist`` is False."""
        from .build import _atomic_write

        with self._lock:
            entries = self._load()
            entries.pop(key, None)
            entries[key] = value
            while len(entries) > MAX_ENTRIES:  # the oldest first (dicts keep insertion order)
                del entries[next(iter(entries))]
            if not persist:
                return
            with contextlib.suppress(OSError):
                path = self.path()
                path.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(path, json.dumps({"machine": fingerprint(), "entries": entries},
                                               sort_keys=True).encode())

    def forget(self, key: str) -> None:
        """Drop ``key`` (in this process; the file keeps it until the next save)."""
        with self._lock:
            self._load().pop(key, None)

    def reset(self) -> None:
        """Forget the in-process copy (tests; a changed cache directory)."""
        with self._lock:
            self._entries = None


TACTICS = TuningFile("tactics")


def busy() -> bool:
    """Are other processes loading the cores (so timings would mislead)?"""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    return load > cores / 2


def _race(runs: Mapping[str, Callable[[], Any]], rounds: int,
          prepare: Callable[[], Any] | None = None) -> dict[str, float]:
    """The median time of each of ``runs`` over ``rounds`` rounds of one run each, in an
    order that rotates every round: a disturbance of a few milliseconds (another thread or
    process waking up, a frequency change) falls on every tactic alike, where timing one
    tactic's runs, then the next one's, charged it all to whichever ran then.

    >>> sorted(_race({"a": lambda: None, "b": lambda: None}, 3))
    ['a', 'b']
    """
    names = list(runs)
    ts: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            if prepare is not None:
                prepare()
            t0 = time.perf_counter()
            runs[n]()
            ts[n].append(time.perf_counter() - t0)
    return {n: statistics.median(v) for n, v in ts.items()}


def select(key: str, tactics: Sequence[Tactic], default: Tactic, problem: Mapping[str, int],
           run: Callable[[Tactic], Any]) -> Tactic:
    """The tactic for ``key`` (see the module text): stored, tuned now, or ``default``.
    ``run(t)`` computes the problem with tactic ``t`` and returns its result (an array);
    ``run.prepare()``, where it exists, runs untimed before each timed run (e.g. evicts
    the operands from the caches, so that a memory-bound op is timed as a model runs it).

    The valid candidates and the default are timed interleaved (:func:`_race`); a winner
    other than the default must win a second race against it, each by ``MARGIN``: a
    disturbed round (on 2 cores a two-thread kernel suffers most from any other thread)
    once stored a one-thread choice 1.8x slower than the default for a decode GEMM."""
    tune_mode = mode()
    if tune_mode == "0":
        return default
    if TACTICS.get(key) is not None:
        return stored(key, tactics, default, problem)
    by_name = {t.name: t for t in tactics}
    candidates = [t for t in tactics if t is not default and t.valid(problem)
                  and (t.cheap or tune_mode == "max")]
    if not candidates:
        return default
    import numpy as np

    prepare = getattr(run, "prepare", None)
    if prepare is not None:
        prepare()
    t0 = time.perf_counter()
    ref = np.array(run(default), copy=True)  # first run: warms caches, builds nothing new
    t_default = max(time.perf_counter() - t0, 1e-7)
    budget = MAX_BUDGET_S if tune_mode == "max" else min(BUDGET_S, BUDGET_RUNS * t_default)
    # tactics (the default among them) the budget lets run REPEATS times twice over (the
    # race and the confirmation); one candidate at least
    allowed = max(2, int(budget / t_default) // (2 * REPEATS))
    excluded: dict[str, str] = {}
    runs: dict[str, Callable[[], Any]] = {default.name: functools.partial(run, default)}
    for t in candidates:
        try:
            out = run(t)
            if not np.array_equal(np.asarray(out), ref, equal_nan=True):
                excluded[t.name] = "result differs from the default's"
            elif len(runs) >= allowed:
                excluded[t.name] = "over the tuning budget"
            else:
                runs[t.name] = functools.partial(run, t)
        except Exception as e:  # noqa: BLE001 - a failing tactic is excluded, never chosen
            excluded[t.name] = f"{type(e).__name__}: {e}"
    rounds = max(REPEATS, min(MAX_ROUNDS, int(budget / t_default) // (2 * len(runs))))
    timings = _race(runs, rounds, prepare) if len(runs) > 1 else {default.name: t_default}
    best = min(timings, key=lambda n: timings[n])
    chosen, entry = default.name, {}
    if best != default.name and timings[best] < timings[default.name] * (1 - MARGIN):
        again = _race({default.name: runs[default.name], best: runs[best]}, rounds, prepare)
        entry["confirmation_us"] = {n: round(v * 1e6, 2) for n, v in again.items()}
        if again[best] < again[default.name] * (1 - MARGIN):
            chosen = best
    TACTICS.put(key, {"chosen": chosen, "default": default.name,
                      "timings_us": {n: round(v * 1e6, 2) for n, v in timings.items()},
                      "excluded": excluded, **entry}, persist=not busy())
    return by_name[chosen] if chosen in by_name else default


def stored(key: str, tactics: Sequence[Tactic], default: Tactic, problem: Mapping[str, int]
           ) -> Tactic:
    """The stored winner for ``key`` where it applies (no timing: for a replay plan's
    preparation, which has no operands to run), else ``default``.

    >>> t = Tactic("a", {})
    >>> stored("no such key", [t], t, {}) is t
    True
    """
    tune_mode = mode()
    if tune_mode == "0":
        return default
    known = TACTICS.get(key)
    if known is not None:
        for t in tactics:
            if t.name == known.get("chosen") and t.valid(problem) and \
                    (t.cheap or tune_mode == "max"):
                return t
    return default


def report(key: str) -> dict[str, Any] | None:
    """What tuning found for ``key`` (chosen, default, timings in µs, excluded with
    reasons), or None where it has not run.

    >>> report("no such key") is None
    True
    """
    return TACTICS.get(key)
