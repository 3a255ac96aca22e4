"""@bz.compile and bz.explain."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import braze as bz

compile_module = importlib.import_module("braze.arrays.compile")


def data(*shape, seed=0):
    return bz.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_side_effects_run_once_per_signature_and_results_match_eager() -> None:
    calls = []

    @bz.compile
    def f(x, y):
        calls.append(1)
        return bz.tanh(x) * 0.5 + bz.exp(-y * y)

    x, y = data(4, 5), data(4, 5, seed=1)
    want = np.tanh(np.asarray(x)) * 0.5 + np.exp(-np.asarray(y) ** 2)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x, y)), want, rtol=1e-6)
    assert len(calls) == 1 and f.trace_count == 1
    f(data(2, 5), data(2, 5))  # a new shape retraces
    assert len(calls) == 2
    f(x.astype(bz.float64), y.astype(bz.float64))  # so does a new dtype
    assert len(calls) == 3


def test_python_scalars_are_runtime_inputs_not_constants() -> None:
    @bz.compile
    def scaled_softmax(x, temperature, offset):
        return bz.softmax(x / temperature, axis=-1) + offset

    x = data(3, 7)
    for t, o in [(1.0, 0), (0.5, 2), (2.0, -1)]:
        got = np.asarray(scaled_softmax(x, t, o))
        z = np.asarray(x) / t
        e = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True) + o, rtol=1e-5)
    assert scaled_softmax.trace_count == 1


def test_traced_scalars_stay_weakly_typed() -> None:
    mul = bz.compile(lambda x, s: x * s)
    assert mul(bz.ones(3, dtype=bz.int8), 3).dtype == bz.int8
    assert mul(bz.ones(3, dtype=bz.float16), 2.5).dtype == bz.float16
    assert mul(bz.ones(3, dtype=bz.int32), 2.5).dtype == bz.float32  # as eager: default float
    assert mul(bz.ones(3, dtype=bz.float16), 2.5).tolist() == [2.5, 2.5, 2.5]


def test_ints_used_as_static_values_become_static() -> None:
    @bz.compile
    def total(x, axis):
        return bz.sum(x, axis=axis)

    x = data(3, 4)
    np.testing.assert_allclose(np.asarray(total(x, 0)), np.asarray(x).sum(0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total(x, 1)), np.asarray(x).sum(1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total(x, 0)), np.asarray(x).sum(0), rtol=1e-6)
    assert total.trace_count == 2  # one per axis value


def test_closures_and_globals_are_read_fresh() -> None:
    w = bz.ones(3)

    @bz.compile
    def f(x):
        return x * w

    assert f(bz.ones(3)).tolist() == [1.0, 1.0, 1.0]
    w += 1  # rebinds w's value: the compiled function must see it
    assert f(bz.ones(3)).tolist() == [2.0, 2.0, 2.0]
    w[0] = 10.0
    assert f(bz.ones(3)).tolist() == [10.0, 2.0, 2.0]
    assert f.trace_count == 1


def test_nested_outputs_and_static_values() -> None:
    @bz.compile
    def f(d):
        return {"sum": bz.sum(d["a"]), "pair": (d["a"] * 2, [d["b"] + 1]), "name": "ok"}

    out = f({"a": bz.arange(3), "b": bz.ones(2)})
    assert out["sum"].item() == 3 and out["pair"][0].tolist() == [0, 2, 4]
    assert out["pair"][1][0].tolist() == [2.0, 2.0] and out["name"] == "ok"


def test_retracing_warns_after_the_limit() -> None:
    assert bz.compile(lambda x: x).retrace_warning == compile_module.RETRACE_WARNING
    f = bz.compile(lambda x: x + 1, retrace_warning=3)
    quiet = bz.compile(lambda x: x + 1, retrace_warning=None)  # bucketed shapes on purpose
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 6):
            f(bz.ones(n))
            quiet(bz.ones(n))
    assert sum("traced 4 times" in str(w.message) for w in caught) == 1
    assert sum("traced" in str(w.message) for w in caught) == 1
    with pytest.raises(ValueError, match="retrace_warning must be a positive int or None"):
        bz.compile(lambda x: x, retrace_warning=0)


def test_shapeless_reuses_one_trace_across_shapes() -> None:
    calls = []

    @bz.compile(shapeless=True)
    def f(x):
        calls.append(1)
        return bz.exp(x).sum(axis=-1) + bz.mean(x, axis=-1) + bz.max(x, axis=0, keepdims=True).T

    for shape in [(2, 3), (4, 3), (2, 6)]:
        x = data(*shape)
        xn = np.asarray(x)
        want = np.exp(xn).sum(-1) + xn.mean(-1) + xn.max(0, keepdims=True).T if shape[0] == \
            shape[1] else None
        got = f(x) if want is None else f(x)
        if want is not None:
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert len(calls) == 1


def test_shapeless_retraces_when_sizes_are_baked_in() -> None:
    calls = []

    @bz.compile(shapeless=True)
    def f(x):
        calls.append(1)
        return x.reshape((-1,)) * 2

    assert f(bz.ones((2, 3))).shape == (6,)
    assert f(bz.ones((4, 3))).shape == (12,)
    assert len(calls) == 2


def test_reading_traced_values_is_a_clear_error() -> None:
    @bz.compile
    def f(x):
        if x.sum() > 0:  # data-dependent Python control flow
            return x
        return -x

    with pytest.raises(TypeError, match="bz.compile"):
        f(bz.ones(3))


def test_explain_reports_kernels_ops_peak_and_dot() -> None:
    x = data(8, 16)
    w = data(16, 4)

    def mlp(x, w):
        h = x @ w + 1.0
        return bz.softmax(h * bz.sigmoid(h), axis=-1)

    for fn in (mlp, bz.compile(mlp)):
        r = bz.explain(fn, x, w)
        assert r.num_kernels == 2
        assert r.kernels[0].kind == "library" and r.kernels[0].ops == ["matmul"]
        assert {"sigmoid", "max", "exp", "sum", "divide"} <= set(r.kernels[1].ops)
        assert r.kernels[1].outputs == [((8, 4), "float32")]
        assert r.peak_bytes >= 8 * 16 * 4
        assert "kernel" in str(r) and r.to_dot().startswith("digraph")
        assert "__global__" in r.kernels[1].source("cuda")
        with pytest.raises(NotImplementedError, match="generator"):
            r.kernels[1].source("vulkan")
        if "cpu" in bz.backends.available():
            assert "extern \"C\"" in r.kernels[1].source("cpu")


def test_braze_log_fusion_prints_schedules() -> None:
    code = ("import braze as bz, numpy as np\n"
            "x = bz.asarray(np.ones((64, 64), np.float32))\n"
            "bz.eval(bz.softmax(x, axis=-1))\n")
    env = dict(os.environ, BRAZE_LOG="fusion")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "1 launches" in r.stderr and "max subtract exp sum divide" in r.stderr


def test_compiled_outputs_are_freed_without_the_cycle_collector() -> None:
    import gc
    import weakref

    f = bz.compile(lambda x: {"y": (x * 2.0,)})
    x = data(64, 64)
    f(x)
    gc.disable()
    try:
        out = f(x)
        ref = weakref.ref(out["y"][0]._node)
        del out
        assert ref() is None, "a reference cycle keeps compiled outputs alive"
    finally:
        gc.enable()


def test_a_captured_array_indexed_inside_follows_its_rebinding() -> None:
    """Indexing an evaluated array outside bz.compile is an eager view (a new leaf); while
    tracing it stays in the graph, so a captured array rebound between calls is read
    anew rather than baked into the trace."""
    table = bz.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    bz.eval(table)

    @bz.compile
    def row_times_two(i):
        return table[1] * 2.0 + i

    one = bz.asarray(np.float32(1))
    np.testing.assert_array_equal(np.asarray(row_times_two(one)), [7, 9, 11])
    table = bz.asarray(np.full((4, 3), 5, dtype=np.float32))  # noqa: F841 (read by f)
    bz.eval(table)
    np.testing.assert_array_equal(np.asarray(row_times_two(one)), [11, 11, 11])


def test_replay_numpy_serves_traced_shapes_only():
    """replay_numpy replays a trace made for the arrays' shapes and dtypes (read in place:
    a write between calls shows), and answers None where there is none."""
    f = bz.compile(lambda a, b: a * b + 1)
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.full(3, 2, np.float32)
    assert f.replay_numpy([x, y]) is None
    np.testing.assert_array_equal(np.asarray(f(bz.asarray(x), bz.asarray(y))), x * y + 1)
    np.testing.assert_array_equal(np.asarray(f.replay_numpy([x, y])), x * y + 1)
    x += 1
    np.testing.assert_array_equal(np.asarray(f.replay_numpy([x, y])), x * y + 1)
    assert f.replay_numpy([x[:1], y]) is None  # (another shape)
    assert f.replay_numpy([x.astype(np.float64), y]) is None  # (another dtype)
    assert f.trace_count == 1
    g = bz.compile(lambda a: a * 2)
    np.testing.assert_array_equal(np.asarray(g(x)), x * 2)  # numpy in: the entry serves both
    np.testing.assert_array_equal(np.asarray(g.replay_numpy([x])), x * 2)
