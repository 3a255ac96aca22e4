"""Laziness: ops record nodes and compute nothing; eval computes once and frees as it goes."""

from __future__ import annotations

import gc
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import braze as bz
from braze.graph.evaluate import topo_order


def test_ops_record_nodes_without_data() -> None:
    x = bz.ones((3, 4))
    y = bz.exp(x * 2.0 + 1.0).sum(axis=1)
    assert y.shape == (3,) and y.dtype == bz.float32
    assert y._node.data is None
    assert y._node.op.name == "sum"
    assert y._node.inputs[0].op.name == "exp"


def test_building_1000_ops_on_a_huge_array_is_fast_and_allocates_nothing() -> None:
    big = bz.zeros((10000, 10000))  # 400 MB if it were materialized
    tracemalloc.start()
    t0 = time.perf_counter()
    a = big
    for i in range(1000):
        a = bz.exp(a) if i % 3 == 0 else a * 1.0001 + 0.5
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert a._node.data is None
    assert a.shape == (10000, 10000)
    assert peak < 5_000_000, f"building the graph allocated {peak} bytes"
    assert elapsed < 2.0  # generous: a correctness bound (milliseconds expected), not a benchmark


@pytest.mark.parametrize("trigger", [
    np.asarray, lambda a: a.tolist(), repr, lambda a: bz.eval(a),
    lambda a: a.sum().item(), lambda a: float(a.sum()), lambda a: bool(a.sum()),
    lambda a: a.__dlpack__(),
])
def test_everything_that_needs_data_evaluates(trigger) -> None:
    a = bz.arange(4) + 1
    assert a._node.data is None
    trigger(a)
    if a._node.data is None:  # triggers that reduce first evaluate the reduction
        assert trigger is not np.asarray
    np.testing.assert_array_equal(np.asarray(a), [1, 2, 3, 4])


def _count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the active backend to record how many nodes each evaluate() call computes."""
    b = bz.backends.current()
    original = b.evaluate
    calls: list[int] = []

    def counting(targets):
        calls.append(len(targets))
        return original(targets)

    monkeypatch.setattr(b, "evaluate", counting)
    return calls


def test_eval_twice_computes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    x = bz.arange(5) * 2
    calls = _count_evaluations(monkeypatch)
    bz.eval(x)
    bz.eval(x)
    np.asarray(x)
    x.tolist()
    repr(x)
    assert calls == [1]


def test_evaluated_nodes_drop_their_inputs() -> None:
    a = bz.arange(6)
    b = a + 1
    c = b * 2
    bz.eval(c)
    assert c._node.inputs == ()
    assert c._node.data is not None


def test_intermediates_nobody_holds_are_freed() -> None:
    a = bz.arange(1000) + 0
    bz.eval(a)
    tmp = a * 2
    ref = weakref.ref(tmp._node)
    out = (tmp + 1)
    del tmp
    bz.eval(out)
    gc.collect()
    assert ref() is None, "an intermediate nobody holds outlived the evaluation"


def test_a_held_intermediate_a_second_evaluation_needs_is_kept() -> None:
    """``y = stack(xs)`` then ``y[i]`` for every i: the first element evaluates the
    stack as an intermediate (fused, not kept); the second keeps it, so the rest only
    index it. Each evaluation here is large enough to go through the compiler."""
    xs = [bz.asarray(np.arange(400, dtype=np.float32) + i) for i in range(3)]
    y = bz.stack(xs) * 2.0
    first = y[0] + 1.0
    bz.eval(first)
    assert not y._node.is_evaluated or bz.backends.current().name == "numpy" and \
        not bz.backends.current().optimize
    second = y[1] + 1.0
    bz.eval(second)
    assert y._node.is_evaluated
    want = (np.arange(400, dtype=np.float32)[None] + np.arange(3)[:, None]) * 2.0
    np.testing.assert_array_equal(np.asarray(y), want)
    np.testing.assert_array_equal(np.asarray(second), want[1] + 1.0)
    np.testing.assert_array_equal(np.asarray(first), want[0] + 1.0)


def test_intermediates_a_user_holds_stay_correct() -> None:
    a = bz.arange(10)
    b = a * 3  # fused into c's kernel: b may stay lazy, but its value must be right
    c = b + 1
    bz.eval(c)
    np.testing.assert_array_equal(np.asarray(b), np.arange(10) * 3)
    np.testing.assert_array_equal(np.asarray(c), np.arange(10) * 3 + 1)


def test_intermediate_consumed_by_another_pending_graph_survives() -> None:
    a = bz.arange(4)
    b = a * 2
    pending = b - 1  # not evaluated yet, holds b
    c = b + 1
    del b
    bz.eval(c)
    np.testing.assert_array_equal(np.asarray(pending), [-1, 1, 3, 5])
    np.testing.assert_array_equal(np.asarray(c), [1, 3, 5, 7])


def test_long_chain_evaluates_without_recursion_limits(uncut: None) -> None:
    # one 20,000-deep chain (the loop cut is off: see the uncut fixture)
    x = bz.zeros(3)
    for _ in range(20000):
        x = x + 1.0
    assert len(topo_order([x._node])) == 20001  # the adds and the broadcast zeros
    np.testing.assert_array_equal(np.asarray(x), [20000.0] * 3)


def test_chain_frees_memory_as_it_goes() -> None:
    # 200 steps over 8 MB arrays: holding every intermediate would need 1.6 GB.
    x = bz.asarray(np.zeros(2_000_000, np.float32))
    for _ in range(200):
        x = x + 1.0
    tracemalloc.start()
    bz.eval(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 50_000_000, f"peak {peak / 1e6:.0f} MB: intermediates were not freed"
    assert float(x[0]) == 200.0


def test_shared_subexpression_is_computed_once() -> None:
    from braze.graph.compiler import compile_graph

    a = bz.exp(bz.arange(3).astype(bz.float32))
    b = a * a + a
    schedule, _ = compile_graph([b._node])
    assert sum(k.ops.count("exp") for k in schedule.kernels) == 1
    np.testing.assert_allclose(np.asarray(b), np.exp(np.arange(3)) ** 2 + np.exp(np.arange(3)),
                               rtol=1e-6)


def test_eval_accepts_nested_structures_and_rejects_junk() -> None:
    a, b = bz.ones(2) + 1, bz.ones(3) * 2
    bz.eval({"a": [a], "b": (b, None)})
    assert a._node.data is not None and b._node.data is not None
    with pytest.raises(TypeError, match="eval"):
        bz.eval(object())


def test_shape_errors_are_raised_at_the_call() -> None:
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        bz.ones((2, 3)) + bz.ones((4,))
    with pytest.raises(ValueError, match="matmul"):
        bz.ones((2, 3)) @ bz.ones((2, 3))
    with pytest.raises(ValueError, match="sum: axis 2 is out of bounds"):
        bz.sum(bz.ones((2, 3)), axis=2)


def test_numpy_view_of_a_result_is_read_only() -> None:
    a = bz.arange(3) + 0
    v = np.asarray(a)
    with pytest.raises(ValueError):
        v[0] = 7
    assert a.tolist() == [0, 1, 2]
    w = np.array(a)  # an explicit copy is writable
    w[0] = 7
    assert a.tolist() == [0, 1, 2]
