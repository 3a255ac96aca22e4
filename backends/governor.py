"""Thread governor: a replay plan's multi-threaded native calls fall back to one thread
while other processes hold the cores, and go back when they are free.

Every OpenMP region of a native kernel splits its work statically and waits for all
of its threads. When another process keeps a core busy, the second thread of each
region waits for the OS to schedule it (milliseconds), and a SmolLM2 decode step of
~120 such regions went from 4.5 ms to 60 ms on 2 cores, where one thread takes 9 ms.

The governor times each call of its plan and keeps a recent time per mode (all calls at
their tuned thread counts, or all at one thread). It runs one call in the other mode —
a *probe* — when two calls in a row took over ``SLOW`` times the recent time, and after
every ``PROBE_EVERY`` calls (times 4, up to ``MAX_PROBE_EVERY``, each time a probe loses;
reset when it wins); after a probe the faster mode is kept. A probe that wins is
confirmed by re-measuring the mode it left on the next call (without backing off): the
recent time that lost may have been a passing hiccup's (another program's threads
winding down), and a plan kept at one thread for 64 calls ran at 0.6x. A losing probe
costs one call about twice as slow: ~1 % of the first 64 decode steps, then less. (No probe right
at the start: a plan called a few times — a prompt's pre-fill — would spend a call at
one thread.) The thread count is element 0 of each call's int64 args, which the program
reads on every call: switching rewrites those elements (the plan owns copies of them).

Results stay the same across modes for every kernel whose threads split independent
outputs (elementwise, row reductions, matmuls, attention); a reduction of a whole array
into one value sums per-thread partials, whose rounding depends on the split.

>>> import numpy as np
>>> args = [np.array([2, 7], np.int64)]
>>> g = ThreadGovernor(args)
>>> for seconds in (0.005, 0.060, 0.060):  # another process takes a core
...     g.before(); g.after(seconds)
>>> g.before(); args[0].tolist()  # two slow calls: the next one probes one thread
[1, 7]
>>> g.after(0.009); g.serial
True
"""

from __future__ import annotations

import math
import time

import numpy as np

SLOW = 1.5
PROBE_EVERY = 64
MAX_PROBE_EVERY = 4096


class ThreadGovernor:
    """Chooses between the tuned thread counts and one thread for a plan's calls."""

    def __init__(self, args: list[np.ndarray]) -> None:
        self._args = args
        self._tuned = [int(a[0]) for a in args]
        self.serial = False  # the mode kept (probes aside)
        self._written = False  # the mode the args hold, so this call's (False: tuned)
        self._time = [math.inf, math.inf]  # recent seconds per call: [tuned, serial]
        self._probe_every = PROBE_EVERY
        self._since_probe = 0
        self._slow_calls = 0
        self._probing = False
        self._confirm = False  # the next probe re-measures the mode a probe just left
        self._t0 = 0.0

    def _write(self, serial: bool) -> None:
        if serial != self._written:
            for a, n in zip(self._args, self._tuned):
                a[0] = 1 if serial else n
            self._written = serial

    def before(self) -> None:
        """Called before each replay: picks this call's mode and starts its clock."""
        self._probing = self._slow_calls >= 2 or self._since_probe >= self._probe_every
        self._write((not self.serial) if self._probing else self.serial)
        self._t0 = time.perf_counter()

    def after(self, seconds: float | None = None) -> None:
        """Called after each replay (``seconds``: the call's time, measured if None)."""
        dt = time.perf_counter() - self._t0 if seconds is None else seconds
        m = self._written
        if self._probing:
            self._time[m] = dt
            self._since_probe = self._slow_calls = 0
            confirming, self._confirm = self._confirm, False
            if self._time[m] < self._time[self.serial]:
                self.serial = m
                self._probe_every = PROBE_EVERY
                if not confirming:  # the next call re-measures the mode just left, once
                    self._confirm = True
                    self._since_probe = self._probe_every
            elif not confirming:
                self._probe_every = min(4 * self._probe_every, MAX_PROBE_EVERY)
            return
        recent = self._time[m]
        self._slow_calls = self._slow_calls + 1 if dt > SLOW * recent else 0
        # down at once, up halfway: one slow call does not erase a good estimate
        self._time[m] = dt if dt < recent else 0.5 * (recent + dt)
        self._since_probe += 1
