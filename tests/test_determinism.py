"""Determinism: the same program on the same inputs gives the same bits whatever executes
it. A reduction over one big row (a full sum, a mean, the max and the sum of a softmax over
millions of elements) is shared by the threads block by block and its block partials are
combined by one thread in block order (``backends/cpu/codegen.py``), exactly as one thread
does; rows of a many-row reduction each belong to one thread. Float sums follow braze's
order (``graph/ops/reductions.blocked_reduce``) and transcendental functions braze's math
(``graph/ops/libm.py``) in every tier: a small graph's first sight op by op, the numpy
executor while a kernel builds, compiled kernels, replay plans, the numpy backend. Compared
bit for bit at 1, 2 and 4 threads, with the thread governor in either mode, against 1
thread in a new process, and tier against tier. And two resource limits of the same issue:
an impossible allocation is a MemoryError naming the op; several Python threads may
evaluate at once."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import braze as bz
from braze.backends import cpu as cpu_mod

pytestmark = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """The cpu backend is built here, at each thread count: run once."""
    yield "cpu"


def _programs(x: bz.Array, m: bz.Array) -> dict[str, bz.Array]:
    return {
        "sum": bz.sum(x * 1.5),
        "mean": bz.mean(x),
        "max": bz.max(x),
        "min_of_3d": bz.min(bz.reshape(x, (64, 128, -1)), axis=(0, 1, 2)),
        "sum_2axes": bz.sum(bz.reshape(x, (16, -1))[::2], axis=(0, 1)),
        "logsumexp": bz.logsumexp(x, axis=0),
        "softmax_row": bz.softmax(x, axis=0)[:5],
        "norm": bz.sqrt(bz.sum(x * x)),
        "rows": bz.sum(m, axis=1),
        "rms_rows": m * (1.0 / bz.sqrt(bz.mean(m * m, axis=-1, keepdims=True) + 1e-6)),
        "normal": bz.random.normal((1 << 20,), key=bz.random.key(7)),  # log, cos, sqrt
        "chain": bz.mean(bz.tanh(x) * bz.exp(-x * x) + bz.log1p(bz.abs(x)) * bz.sin(x)),
    }


def _evaluate(threads: int, backend=None) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    x = bz.asarray(rng.standard_normal(1 << 21).astype(np.float32))
    m = bz.asarray(rng.standard_normal((3000, 700)).astype(np.float32))
    if backend is None:
        backend = cpu_mod.CpuBackend(num_threads=threads, skip_tiny=False)
    progs = _programs(x, m)
    values = backend.evaluate([p._node for p in progs.values()])
    return {name: np.asarray(v) for name, v in zip(progs, values)}


def test_reductions_give_the_same_bits_at_1_2_and_4_threads() -> None:
    one = _evaluate(1)
    for threads in (2, 4):
        got = _evaluate(threads)
        for name, want in one.items():
            assert got[name].tobytes() == want.tobytes(), f"{name} at {threads} threads"
    from braze.backends.numpy_backend import NumpyBackend

    ref = _evaluate(1, NumpyBackend())  # the reference backend: braze's order and math too
    for name, want in one.items():
        assert ref[name].tobytes() == want.tobytes(), f"{name}: the numpy backend"
    x = np.random.default_rng(0).standard_normal(1 << 21).astype(np.float32)
    np.testing.assert_allclose(one["sum"], np.sum(x.astype(np.float64) * 1.5), rtol=1e-5)
    np.testing.assert_allclose(one["max"], x.max())


_CHILD = """
import numpy as np
from tests.test_determinism import _evaluate
for name, v in _evaluate(2).items():
    print(name, v.tobytes().hex()[:64], v.sum().tobytes().hex())
"""


def test_a_new_process_gives_the_same_bits() -> None:
    mine = _evaluate(1)
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                       timeout=600, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr[-3000:]
    for line in r.stdout.splitlines():
        name, head, total = line.split()
        v = mine[name]
        assert (head, total) == (v.tobytes().hex()[:64], v.sum().tobytes().hex()), name


def test_an_impossible_allocation_is_a_memory_error_naming_size_and_op() -> None:
    """A 4 TiB output: a MemoryError at the call, naming the size, the shape and the
    kernel -- eagerly, and from a compiled function's first call and its replay plan --
    never an abort; the process goes on evaluating."""
    x = bz.asarray(np.ones(1 << 20, np.float32))
    f = bz.compile(lambda x: bz.broadcast_to(x, (1 << 20, 1 << 20)) * 2.0)
    with bz.backend("cpu"):
        with pytest.raises(MemoryError, match=r"4\.00 TiB for the output \(1048576, 1048576\) "
                                              r"float32 of kernel ew_multiply"):
            bz.eval(bz.broadcast_to(x, (1 << 20, 1 << 20)) * 3.0)
        for _ in range(3):
            with pytest.raises(MemoryError, match=r"4\.00 TiB .* of kernel ew_multiply"):
                f(x)
        assert float(bz.sum(x * 2.0)) == 2.0 * (1 << 20)


def test_evaluations_from_several_threads_at_once_are_right() -> None:
    """bz.eval from 4 Python threads at once, over changing shapes and two structures."""
    import threading

    errors: list[object] = []

    def worker(k: int) -> None:
        try:
            rng = np.random.default_rng(k)
            for i in range(60):
                x = rng.standard_normal(100 + (i * 13 + k) % 5000).astype(np.float32)
                a = bz.asarray(x)
                if i % 2:
                    got = float(bz.sum(bz.tanh(a * 0.5) + a * float(k + 1)))
                    want = np.sum(np.tanh(x * 0.5) + x * np.float32(k + 1), dtype=np.float64)
                else:
                    got, want = float(bz.max(bz.exp(-a * a))), float(np.max(np.exp(-x * x)))
                if not np.isclose(got, want, rtol=1e-4, atol=1e-3):
                    errors.append((k, i, got, want))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((k, repr(e)))

    with bz.backend("cpu"):
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors[:3]


def _small_programs(a: bz.Array) -> dict[str, bz.Array]:
    """More than TINY_NODES nodes on at most TINY_ELEMENTS elements: op by op on first sight,
    compiled when it comes back."""
    y = (a * 1.5 + 0.25) * a - a * 0.5
    m = bz.reshape(y, (8, -1))
    return {
        "sum": bz.sum(y * 0.75 + a),
        "mean_axes": bz.mean(bz.reshape(y, (4, 8, -1)) * 2.0, axis=(0, 2)),
        "softmax": bz.softmax(m * 0.5 + 1.0, axis=-1),
        "norm": m * (1.0 / bz.sqrt(bz.mean(m * m, axis=-1, keepdims=True) + 1e-6)),
        "chain": bz.tanh(y) * bz.exp(-y * y) + bz.log1p(bz.abs(y)) + bz.expm1(y * 0.1)
        + bz.sigmoid(y) + bz.logaddexp(y, 0.5) + bz.sin(y) * bz.atan2(y, 2.0),
        "prod": bz.prod(y * 0.01 + 1.0),
        "logsumexp": bz.logsumexp(m * 3.0, axis=0),
    }


@pytest.mark.parametrize("n", [256, 4096])
def test_every_tier_gives_the_same_bits(n: int, tmp_path, monkeypatch) -> None:
    """First sight op by op (256 elements) or the numpy executor while the kernels build
    in the background (4096: a cold cache), then the compiled kernels, then a replay plan,
    a bz.compile function and the numpy backend: one answer."""
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    runs = []
    backend = cpu_mod.CpuBackend(tiered=True)  # (the test suite turns tiered builds off)
    for _ in range(4):
        progs = _small_programs(bz.asarray(x))
        values = backend.evaluate([p._node for p in progs.values()])
        runs.append({k: np.asarray(v).tobytes() for k, v in zip(progs, values)})
        backend.wait_for_builds()
    with bz.backend("cpu"):
        f = bz.compile(lambda a: tuple(_small_programs(a).values()))
        for _ in range(3):
            runs.append(dict(zip(runs[0], (np.asarray(v).tobytes() for v in f(bz.asarray(x))))))
    with bz.backend("numpy"):
        runs.append({k: np.asarray(v).tobytes() for k, v in _small_programs(bz.asarray(x)).items()})
    for r in runs[1:]:
        for k, v in r.items():
            assert v == runs[0][k], k
    if n == 4096:
        assert backend.stats["numpy"] > 0  # the numpy executor did run a kernel


def test_random_streams_are_the_same_on_first_sight_and_compiled() -> None:
    """The issue's example: bz.random.normal evaluated twice (op by op, then the kernel)."""
    k = bz.random.key(0)
    with bz.backend("cpu"):
        draws = [np.asarray(bz.random.normal((4,), key=k)).tobytes() for _ in range(3)]
        big = [np.asarray(bz.random.normal((3000,), key=k)).tobytes() for _ in range(3)]
    with bz.backend("numpy"):
        draws.append(np.asarray(bz.random.normal((4,), key=k)).tobytes())
    assert len(set(draws)) == 1 and len(set(big)) == 1


def test_the_governor_in_either_mode_gives_the_same_bits(monkeypatch) -> None:
    """A replay plan whose governor switches between the tuned thread counts and one
    thread: reductions of one big row, softmax and a transcendental chain keep their bits."""
    from braze.backends import governor
    from tests.test_replay import _plans

    backend = bz.backends.current()
    if backend.name != "cpu" or backend.num_threads < 2:
        pytest.skip("needs the cpu backend with 2+ threads")
    x = np.random.default_rng(5).standard_normal(1 << 20).astype(np.float32)

    @bz.compile
    def f(a):
        return bz.sum(a * 1.5), bz.softmax(a, axis=0)[:8], bz.mean(bz.tanh(a) * bz.exp(-a * a))

    xa = bz.asarray(x)
    want = [np.asarray(v).tobytes() for v in f(xa)]
    f(xa)
    g = _plans(f)[0].governor
    if g is None:
        pytest.skip("no governor on this plan (one thread)")
    monkeypatch.setattr(governor, "SLOW", float("inf"))
    for serial in (True, False, True):
        g._time, g._probe_every, g._slow_calls = [1.0, 1.0], 10**9, 0
        g.serial = serial
        assert [np.asarray(v).tobytes() for v in f(xa)] == want, serial
