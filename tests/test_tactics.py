"""The tactic autotuner (backends/cpu/tactics.py) and the quantized matmul's tactics: a
tactic that errors or gives other bits is excluded, never chosen; BRAZE_AUTOTUNE=0 times
nothing; winners persist per machine and a corrupt or foreign tuning file is ignored with
one warning; every tactic (kernel variant x threads) of the quantized matmul gives the
default's bits on hypothesis-drawn shapes, tails and tiny sizes included."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braze.arrays.quantized import pack
from braze.backends import cpu as cpu_mod
from braze.backends.cpu import tactics

from .test_quantized import check_qmm


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Backend-independent: the tuner and the kernels are called directly."""
    yield "none"


@pytest.fixture
def tuning_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tactics, "busy", lambda: False)
    tactics.TACTICS.reset()
    yield tmp_path
    tactics.TACTICS.reset()


def _problem(slow: float = 0.0):  # type: ignore[no-untyped-def]
    """Three tactics over one answer: 'good' fast, 'bad' wrong, 'boom' raising."""
    calls: list[str] = []
    ts = {n: tactics.Tactic(n, {}) for n in ("default", "good", "bad", "boom")}

    def run(t: tactics.Tactic) -> np.ndarray:
        calls.append(t.name)
        if t.name == "boom":
            raise RuntimeError("no such kernel")
        if t.name == "default":
            x = np.arange(200_000.0)
            for _ in range(3):
                x = np.sqrt(x + 1.0)  # measurably slower than 'good'
        return np.array([1.0, 2.0]) if t.name != "bad" else np.array([1.0, 2.5])

    return ts, run, calls


def test_errors_and_wrong_answers_are_excluded_and_the_fastest_kept(tuning_dir) -> None:
    ts, run, calls = _problem()
    got = tactics.select("k1", list(ts.values()), ts["default"], {}, run)
    assert got.name == "good"
    rep = tactics.report("k1")
    assert rep["chosen"] == "good" and rep["default"] == "default"
    assert "differs" in rep["excluded"]["bad"] and "RuntimeError" in rep["excluded"]["boom"]
    assert set(rep["timings_us"]) == {"default", "good"}
    n = len(calls)
    assert tactics.select("k1", list(ts.values()), ts["default"], {}, run).name == "good"
    assert len(calls) == n  # remembered: nothing runs again
    doc = json.loads((tuning_dir / "tactics.json").read_text())
    assert doc["machine"] == tactics.fingerprint() and "k1" in doc["entries"]


def test_autotune_0_times_nothing_and_invalid_tactics_never_run(tuning_dir, monkeypatch) -> None:
    ts, run, calls = _problem()
    monkeypatch.setenv("BRAZE_AUTOTUNE", "0")
    assert tactics.select("k2", list(ts.values()), ts["default"], {}, run) is ts["default"]
    assert calls == [] and tactics.report("k2") is None
    monkeypatch.setenv("BRAZE_AUTOTUNE", "1")
    only = [ts["default"], tactics.Tactic("good", {}, valid=lambda p: p["m"] > 4)]
    assert tactics.select("k3", only, ts["default"], {"m": 2}, run) is ts["default"]
    assert "good" not in calls
    monkeypatch.setenv("BRAZE_AUTOTUNE", "fast")
    with pytest.raises(ValueError, match="BRAZE_AUTOTUNE must be 0, 1 or max"):
        tactics.select("k4", list(ts.values()), ts["default"], {}, run)


def test_expensive_tactics_wait_for_max(tuning_dir, monkeypatch) -> None:
    ts, run, calls = _problem()
    costly = [ts["default"], tactics.Tactic("good", {}, cheap=False)]
    assert tactics.select("k5", costly, ts["default"], {}, run) is ts["default"]
    assert "good" not in calls
    monkeypatch.setenv("BRAZE_AUTOTUNE", "max")
    assert tactics.select("k6", costly, ts["default"], {}, run).name == "good"


@pytest.mark.parametrize("content", [b"", b"{not json", b"\xff\xfe\x00", b"[1, 2]",
                                     b'{"machine": "elsewhere", "entries": {"k": {}}}'])
def test_a_corrupt_or_foreign_tuning_file_is_ignored_with_one_warning(tuning_dir,
                                                                      content) -> None:
    (tuning_dir / "tactics.json").write_bytes(content)
    ts, run, _ = _problem()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tactics.select("k", list(ts.values()), ts["default"], {}, run).name == "good"
        tactics.select("k7", list(ts.values()), ts["default"], {}, run)
    msgs = [str(w.message) for w in caught if "tactics.json" in str(w.message)]
    if content:
        assert len(msgs) == 1 and ("corrupt" in msgs[0] or "another machine" in msgs[0])
    else:
        assert len(msgs) == 1  # an empty file is corrupt too
    doc = json.loads((tuning_dir / "tactics.json").read_text())  # rewritten, this machine's
    assert doc["machine"] == tactics.fingerprint() and set(doc["entries"]) == {"k", "k7"}


def test_bucket_and_the_entry_bound(tuning_dir, monkeypatch) -> None:
    assert [tactics.bucket(m) for m in (0, 1, 5, 16, 17)] == [1, 1, 8, 16, 32]
    monkeypatch.setattr(tactics, "MAX_ENTRIES", 3)
    f = tactics.TuningFile("bounded")
    for i in range(5):
        f.put(f"k{i}", i)
    assert f.get("k0") is None and f.get("k4") == 4
    assert len(json.loads(f.path().read_text())["entries"]) == 3


# ---------------------------------------------------------------- quantized matmul tactics
needs_cpu = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


@needs_cpu
@settings(max_examples=25, deadline=None)
@given(bits_gs=st.sampled_from([(4, 32, True), (8, 64, False)]),
       m=st.sampled_from([1, 2, 3, 7, 8, 9, 16, 33]), n=st.sampled_from([1, 3, 5, 9, 37]),
       kmul=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_every_quantized_matmul_tactic_gives_the_defaults_bits(bits_gs, m, n, kmul,
                                                                seed) -> None:
    """Each kernel variant and thread count against the default build on one problem: the
    same bits (one chain per output whatever the variant), within the exact path's bound."""
    from braze import _core
    from braze.backends.cpu import qmatmul

    bits, gs, half = bits_gs
    k = gs * kmul
    rng = np.random.default_rng(seed)
    wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
    sdt = np.float16 if half else np.float32
    s = (rng.random((n, k // gs)) * 0.1).astype(sdt)
    b = (rng.standard_normal((n, k // gs)) * 0.5).astype(sdt)
    x = rng.standard_normal((m, k)).astype(np.float32)
    for int8 in (0, 1):
        outs = {}
        for variant in qmatmul.VARIANTS:
            h = qmatmul._handle(bits, gs, half, None, variant)
            for threads in (1, 2):
                out = np.zeros((m, n), np.float32)
                scratch = np.zeros(max(m * k, 1), np.float32)
                _core.launch(h, [x, wq, s, b, out, scratch],  # (no prepacked tiles, no AMX)
                             np.array([threads, m, n, k, int8, 0, 0], np.int64))
                outs[(variant, threads)] = out
        ref = outs[(qmatmul.VARIANTS[0], 1)]
        for key, out in outs.items():
            np.testing.assert_array_equal(out, ref, err_msg=f"tactic {key}, int8={int8}")
        if not int8:
            check_qmm(ref, x, wq, s, b, bits, gs)


@needs_cpu
def test_quantized_matmul_tunes_once_per_problem_and_plans_use_the_winner(
        tuning_dir, monkeypatch) -> None:
    from braze.backends.cpu import qmatmul

    monkeypatch.setenv("BRAZE_AUTOTUNE", "max")  # the variants too (they build now)
    # the int8 matvec path (its variants are tactics; over the prepacked tiles none is)
    monkeypatch.setattr(qmatmul, "PREPACK", False)
    rng = np.random.default_rng(3)
    n, k = 256, 512
    wq = pack(rng.integers(0, 16, (n, k)), 4)
    s = (rng.random((n, k // 32)) * 0.1).astype(np.float16)
    b = s.copy()
    x = rng.standard_normal((1, k)).astype(np.float32)
    y = qmatmul.quantized_matmul(x, wq, s, b, group_size=32, bits=4, num_threads=2)
    rep = qmatmul.tactic_report((1, k), n, k, 4, 32, True, num_threads=2)
    assert rep is not None and rep["chosen"] in rep["timings_us"]
    # 4 variants on every thread (one thread is no tactic of a matvec streaming its weight)
    assert len(rep["timings_us"]) + len(rep["excluded"]) == 4
    assert all(name.endswith("-t2") for name in rep["timings_us"])
    assert not rep["excluded"]  # every variant builds and agrees
    np.testing.assert_array_equal(
        qmatmul.quantized_matmul(x, wq, s, b, group_size=32, bits=4, num_threads=2), y)
    monkeypatch.setenv("BRAZE_AUTOTUNE", "0")
    np.testing.assert_array_equal(  # the heuristic's choice gives the same bits
        qmatmul.quantized_matmul(x.copy(), wq.copy(), s, b, group_size=32, bits=4), y)


@needs_cpu
def test_explain_shows_the_chosen_tactic_and_the_measured_alternatives(tuning_dir) -> None:
    import braze as bz

    rng = np.random.default_rng(5)
    with bz.backend("cpu"):
        x = bz.asarray(rng.random((64, 256)).astype(np.float32))  # (threads are tactics)
        wq, s, b = bz.quantize(bz.asarray(rng.random((512, 256)).astype(np.float32)),
                               group_size=32, bits=4)

        def f(x):  # type: ignore[no-untyped-def]
            return bz.quantized_matmul(x, wq, s, b, group_size=32, bits=4)

        assert "tactics" not in str(bz.explain(f, x))  # not tuned yet
        np.asarray(f(x))
        rep = bz.explain(f, x)
        (k,) = rep.kernels
        assert k.tactic is not None and k.tactic["chosen"] in k.tactic["timings_us"]
        text = str(rep)
        assert "tactics (autotuned on this machine):" in text
        assert f"quantized_matmul: {k.tactic['chosen']} (heuristic: " in text


@needs_cpu
def test_matvec_tuning_evicts_the_weight_before_each_timed_run(tuning_dir) -> None:
    """A memory-bound problem (a few rows of x) is timed as a model runs it: the runner's
    ``prepare`` evicts the weight (and its prepacked tiles) from the caches, untimed, before
    every timed run; evicting changes no result."""
    from braze.backends.cpu import qmatmul

    rng = np.random.default_rng(9)
    n, k = 96, 256
    wq = pack(rng.integers(0, 16, (n, k)), 4)
    s = (rng.random((n, k // 32)) * 0.1).astype(np.float16)
    e = qmatmul._prepared(wq, s, s, 32, 4, None)
    for m in (1, 9):
        p = qmatmul._Problem(e, m, n, k, 4, 32, None, 2, None)
        run = p.runner((rng.standard_normal((m, k)).astype(np.float32), wq, s, s))
        assert hasattr(run, "prepare") == (m <= qmatmul.INT8_MAX_M)
        y = np.array(run(p.default), copy=True)
        if m <= qmatmul.INT8_MAX_M:
            run.prepare()
        np.testing.assert_array_equal(run(p.default), y)
    calls = []
    tactics._race({"run": lambda: calls.append("run")}, 3, lambda: calls.append("prepare"))
    assert calls == ["prepare", "run"] * 3


def test_races_interleave_the_tactics_in_rotating_order() -> None:
    """Each round runs every tactic once, the first one rotating: a slow stretch of the
    machine falls on all of them alike."""
    order: list[str] = []
    runs = {n: (lambda n=n: order.append(n)) for n in "abc"}
    times = tactics._race(runs, 3, prepare=lambda: order.append("p"))
    assert order == ["p", "a", "p", "b", "p", "c", "p", "b", "p", "c", "p", "a",
                     "p", "c", "p", "a", "p", "b"]
    assert set(times) == {"a", "b", "c"} and all(t >= 0 for t in times.values())


@pytest.mark.parametrize("second, chosen", [({"default": 2.0, "good": 1.0}, "good"),
                                            ({"default": 2.0, "good": 1.99}, "default")])
def test_a_winner_must_win_a_second_race(tuning_dir, monkeypatch, second, chosen) -> None:
    """A candidate that beat the default once but not by MARGIN in the confirming race
    (a disturbed first race) is not chosen; both races are reported."""
    races = iter([{"default": 2.0, "good": 1.0}, second])
    seen: list[set[str]] = []

    def race(runs, rounds, prepare=None):  # type: ignore[no-untyped-def]
        seen.append(set(runs))
        assert tactics.REPEATS <= rounds <= tactics.MAX_ROUNDS
        return next(races)

    monkeypatch.setattr(tactics, "_race", race)
    ts, run, _ = _problem()
    got = tactics.select("k-confirm", list(ts.values()), ts["default"], {}, run)
    assert got.name == chosen and seen == [{"default", "good"}] * 2
    rep = tactics.report("k-confirm")
    assert rep["chosen"] == chosen
    assert rep["confirmation_us"] == {n: v * 1e6 for n, v in second.items()}
