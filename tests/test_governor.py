"""The thread governor (backends/governor.py): its policy on synthetic call times, and
on the cpu backend a replay plan whose multi-threaded native calls it switches between
their tuned thread counts and one thread, with equal results in both modes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import braze as bz
from braze.backends import governor
from braze.backends.governor import MAX_PROBE_EVERY, PROBE_EVERY, ThreadGovernor

from .test_replay import _plans, data


def run(g: ThreadGovernor, tuned: float, serial: float | None = None) -> bool:
    """One call in whichever mode the governor picks for it, taking ``tuned`` seconds at
    the tuned thread counts and ``serial`` (default: the same) at one thread; returns
    whether that call ran serial."""
    g.before()
    mode = g._written
    g.after(serial if mode and serial is not None else tuned)
    return mode


def test_busy_cores_switch_to_one_thread_and_free_cores_switch_back() -> None:
    args = [np.array([2, 5], np.int64), np.array([3, 5], np.int64)]
    g = ThreadGovernor(args)
    tuned, serial = 0.0045, 0.0088
    for _ in range(PROBE_EVERY):  # no probe before PROBE_EVERY calls
        assert run(g, tuned, serial) is False
    assert run(g, tuned, serial) is True  # a periodic probe of one thread, which loses
    assert g.serial is False and [a[0] for a in args] == [1, 1]
    for _ in range(10):
        assert run(g, tuned, serial) is False
    assert [a[0] for a in args] == [2, 3] and [a[1] for a in args] == [5, 5]
    # another process takes a core: parallel calls wait for their second thread
    busy = 0.060
    assert run(g, busy) is False and run(g, busy) is False  # two slow calls...
    assert run(g, serial) is True and g.serial  # ...then a probe, which wins
    assert run(g, busy) is False and g.serial  # confirmed: the tuned counts, still slow
    for _ in range(PROBE_EVERY - 1):  # serial until the next periodic probe
        assert run(g, serial) is True
    # the core is free again: the next periodic probe finds the tuned counts faster
    modes = [run(g, tuned, serial) for _ in range(2 * PROBE_EVERY)]
    assert False in modes and g.serial is False
    assert [a[0] for a in args] == [2, 3]


def test_a_passing_hiccup_does_not_keep_one_thread() -> None:
    """Two slow calls (another program's threads winding down) make one thread win its
    probe against the inflated recent time; the next call re-measures the tuned counts,
    fast again, and keeps them."""
    g = ThreadGovernor([np.array([2], np.int64)])
    tuned, serial = 0.00015, 0.00022
    for _ in range(10):
        run(g, tuned, serial)
    assert run(g, 0.00045) is False and run(g, 0.00065) is False  # the hiccup
    assert run(g, tuned, serial) is True and g.serial  # one thread wins against 0.47 ms
    assert run(g, tuned, serial) is False and not g.serial  # confirmation: tuned again
    assert all(run(g, tuned, serial) is False for _ in range(PROBE_EVERY - 1))


def test_probes_back_off_while_they_lose() -> None:
    g = ThreadGovernor([np.array([2], np.int64)])
    at = [i for i in range(4 * MAX_PROBE_EVERY) if run(g, 0.002, 0.004)]  # probes lose
    gaps = [b - a - 1 for a, b in zip(at, at[1:])]  # calls between probes
    assert g.serial is False and at[0] == PROBE_EVERY
    growing = [PROBE_EVERY * 4 ** i for i in range(1, 8) if PROBE_EVERY * 4 ** i
               < MAX_PROBE_EVERY]
    assert growing and gaps[:len(growing)] == growing
    assert set(gaps[len(growing):]) == {MAX_PROBE_EVERY}


def test_a_replay_plan_governs_its_parallel_native_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if bz.backends.current().name != "cpu" or bz.backends.current().num_threads < 2:
        pytest.skip("needs the cpu backend with 2+ threads")
    w = data(4096, 256, seed=1)  # a matvec large enough to run on every thread

    @bz.compile
    def f(x, w):
        return bz.tanh(x @ w.T) * 2.0

    xs = [data(1, 256, seed=2 + i) for i in range(4)]
    wb = bz.asarray(w)
    for x in xs[:2]:  # traced, then its plan built
        f(bz.asarray(x), wb)
    plan = _plans(f)[0]
    g = plan.governor
    assert g is not None and g._tuned and all(n > 1 for n in g._tuned)
    want = [np.tanh(x @ w.T) * 2.0 for x in xs]
    # no probe in between: neither a periodic one nor one after two slow calls (a loaded
    # CI machine makes consecutive call times vary by more than SLOW)
    monkeypatch.setattr(governor, "SLOW", math.inf)
    for serial in (False, True, False):
        g._time, g._probe_every, g._slow_calls = [1.0, 1.0], 10**9, 0
        g.serial = serial
        for x, y in zip(xs, want):
            np.testing.assert_allclose(np.asarray(f(bz.asarray(x), wb)), y, rtol=1e-4,
                                       atol=1e-4)
        assert all((a[0] == 1) == serial for a in g._args)
    # the factory's own args (shared caches) are never edited: the plan owns copies
    assert all(a.base is None for a in g._args)
