"""Determinism: the same program on the same inputs gives the same bits whatever the thread
count. A reduction over one big row (a full sum, a mean, the max and the sum of a softmax
over millions of elements) is shared by the threads block by block and its block partials
are combined by one thread in block order (``backends/cpu/codegen.py``), exactly as one
thread does; rows of a many-row reduction each belong to one thread. Compared bit for bit
at 1, 2 and 4 threads, and against 1 thread in a new process. And two resource limits of
the same issue: an impossible allocation is a MemoryError naming the op; several Python
threads may evaluate at once."""

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
    }


def _evaluate(threads: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = bz.asarray(rng.standard_normal(1 << 21).astype(np.float32))
    m = bz.asarray(rng.standard_normal((3000, 700)).astype(np.float32))
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
