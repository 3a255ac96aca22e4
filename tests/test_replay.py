"""Prepared replay plans (braze/backends/replay.py): bz.compile's second call on."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.backends.numpy_backend import NumpyBackend, run_schedule
from braze.backends.numpy_backend import run_kernel as numpy_run_kernel
from braze.backends.replay import ReplayPlan
from braze.graph.compiler import compile_graph
from braze.graph.kernel import KernelStep, LibraryStep

from .test_compiler import RANDOM_GRAPH_EXAMPLES, assert_close_lists, build_program, programs


def data(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _plans(fn) -> list[ReplayPlan]:
    """The idle plans of a compiled function's schedules on the current backend."""
    b = bz.backends.current()
    scheds = [s for e in fn._entries.values() for s in e.schedules.values()]
    return [p for s in scheds for p in b._replays._idle.get(id(s), (None, []))[1]]


def _uses_plans() -> bool:
    return getattr(bz.backends.current(), "fast_replay", False)


@pytest.mark.parametrize("n", [16, 1 << 16])  # unplanned small buffers, planned storage
def test_outputs_never_alias_between_calls(n: int) -> None:
    f = bz.compile(lambda x: bz.exp(x * 0.5) + 1.0)
    x1, x2, x3 = data(n), data(n, seed=1), data(n, seed=2)
    first = f(bz.asarray(x1))
    keep = np.asarray(first).copy()
    second = f(bz.asarray(x2))
    third = f(bz.asarray(x3))
    np.testing.assert_allclose(np.asarray(first), keep)  # untouched by the later calls
    np.testing.assert_allclose(np.asarray(second), np.exp(x2 * 0.5) + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(third), np.exp(x3 * 0.5) + 1, rtol=1e-6)
    assert not np.may_share_memory(np.asarray(second), np.asarray(third))
    if _uses_plans():
        assert _plans(f), "the replays did not go through a prepared plan"


def test_view_and_input_outputs() -> None:
    """Outputs that are views of intermediates, inputs themselves, or constants."""
    @bz.compile
    def f(x):
        y = bz.tanh(x) * 2
        return bz.permute_dims(y, (1, 0)), bz.reshape(y, (-1,))[3:9], x, bz.asarray(7.0)

    xs = [data(300, 70, seed=i) for i in range(3)]
    outs = [f(bz.asarray(x)) for x in xs]
    for x, (t, r, same, c) in zip(xs, outs):
        y = np.tanh(x) * 2
        np.testing.assert_allclose(np.asarray(t), y.T, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(r), y.reshape(-1)[3:9], rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(same), x)
        assert float(c) == 7.0


def test_native_and_view_plans_skip_the_errstate_switch() -> None:
    """A plan of native calls and views runs without numpy's errstate context (nothing in
    it raises numpy warnings); one with a Python-run step switches warnings off."""
    if not _uses_plans() or bz.backends.current().name != "cpu":
        pytest.skip("native replay plans: cpu backend")
    f = bz.compile(lambda x: bz.reshape(bz.tanh(x) * 2, (-1,))[3:9])
    x = bz.asarray(data(30, 7))
    for _ in range(3):
        out = f(x)
    np.testing.assert_allclose(np.asarray(out), (np.tanh(data(30, 7)) * 2).reshape(-1)[3:9],
                               rtol=1e-6)
    (plan,) = _plans(f)
    assert plan.n_python_kernels == 0 and not plan._errstate


def test_writing_into_a_result_does_not_change_the_next_call() -> None:
    @bz.compile
    def f(x):
        c = bz.broadcast_to(bz.asarray(7.0, dtype=bz.float32), (3, 4))
        return c, c + x, bz.permute_dims(x * 2, (1, 0)), bz.sum(x, axis=0)

    x = data(3, 4)
    want = [np.full((3, 4), 7.0, np.float32), 7.0 + x, (x * 2).T, x.sum(0)]
    for _ in range(3):
        outs = [np.asarray(o) for o in f(bz.asarray(x))]
        for got, expect in zip(outs, want):
            np.testing.assert_allclose(got, expect, rtol=1e-6)
            if got.flags.writeable:
                got[...] = -1  # scribble over what the caller was handed


def test_in_place_plans_and_library_steps() -> None:
    """Kernels running in place over matmul results (library outputs that become
    planned storage), a concat, several replays with new data."""
    @bz.compile
    def f(x, w1, w2):
        h = x @ w1
        a = bz.tanh(h) + 1.0  # in place over h's storage
        b = a @ w2
        c = bz.concat([b * 2.0, b - 1.0], axis=0)
        return bz.exp(-c * c) + c

    def want(x, w1, w2):
        b = (np.tanh(x @ w1) + 1.0) @ w2
        c = np.concatenate([b * 2.0, b - 1.0], axis=0)
        return np.exp(-c * c) + c

    shapes = [(128, 96), (96, 160), (160, 128)]  # results above SMALL_BYTES: planned storage
    results = []
    for i in range(4):
        args = [data(*s, seed=10 * i + j) for j, s in enumerate(shapes)]
        results.append((f(*[bz.asarray(a) for a in args]), want(*args)))
    for got, expect in results:  # every result still holds its own values
        np.testing.assert_allclose(np.asarray(got), expect, rtol=2e-4, atol=2e-4)

    s = next(iter(f._entries.values())).schedules[None]
    assert any(isinstance(st, LibraryStep) for st in s.steps)
    lib_storage = {s.storage[st.output] for st in s.steps if isinstance(st, LibraryStep)}
    kernel_out = {s.storage[st.slot] for st_ in s.steps if isinstance(st_, KernelStep)
                  for st in st_.kernel.stores}
    assert lib_storage & kernel_out, "no kernel reuses a library result's storage"


def test_two_threads_replay_one_compiled_function() -> None:
    f = bz.compile(lambda x, w: bz.softmax((x @ w) * 0.25, axis=-1) + x[:, :1])
    w = data(64, 64, seed=99)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for i in range(30):
                x = data(128, 64, seed=seed * 1000 + i)
                z = (x @ w) * 0.25
                e = np.exp(z - z.max(-1, keepdims=True))
                expect = e / e.sum(-1, keepdims=True) + x[:, :1]
                np.testing.assert_allclose(np.asarray(f(bz.asarray(x), bz.asarray(w))), expect,
                                           rtol=1e-4, atol=1e-5)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    f(bz.asarray(data(128, 64)), bz.asarray(w))  # trace and build once, first
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_general_executor_still_used_when_disabled() -> None:
    b = bz.backends.current()
    if not hasattr(b, "fast_replay"):
        pytest.skip("backend without replay plans")
    f = bz.compile(lambda x: x * 3 + 1)
    x = bz.asarray(data(1000))
    old = b.fast_replay
    b.fast_replay = False
    try:
        for _ in range(3):
            np.testing.assert_allclose(np.asarray(f(x)), np.asarray(x) * 3 + 1, rtol=1e-6)
        assert not _plans(f)
    finally:
        b.fast_replay = old


@settings(max_examples=RANDOM_GRAPH_EXAMPLES, deadline=None, derandomize=True)
@given(programs())
def test_random_graphs_replay_like_run_schedule(spec) -> None:
    """A plan gives run_schedule's values, twice in a row, and results never alias."""
    outs = build_program(spec)
    schedule, leaves = compile_graph([o._node for o in outs])
    inputs = [leaf.data for leaf in leaves]
    with np.errstate(all="ignore"):
        want = run_schedule(schedule, inputs)
    want = [np.array(w) for w in want]
    plan = ReplayPlan(schedule, numpy_run_kernel)
    first = plan.run(inputs)
    kept = [np.array(a) for a in first]
    second = plan.run(inputs)
    assert_close_lists(first, want)
    assert_close_lists(second, want)
    assert_close_lists(first, kept)  # the second run did not write into the first's outputs
    for a, b in zip(first, second):
        if a is b:  # an input or one shared constant returned as it is
            continue
        computed = not any(np.may_share_memory(a, x) for x in inputs)
        assert not (computed and np.may_share_memory(a, b))
    backend = bz.backends.current()
    if isinstance(backend, NumpyBackend) and backend.fast_replay:
        for _ in range(3):  # the backend's own plans (native kernels on cpu)
            assert_close_lists(backend.run_schedule(schedule, inputs), want)


def test_plan_cache_memory_budget() -> None:
    """Plans larger than the budget run once and are dropped; within it they are kept
    and the oldest schedules' plans make room."""
    from braze.backends.replay import PlanCache

    scheds = []
    for i in range(3):
        x, w = data(64, 128, seed=i), data(128, 128, seed=i + 10)
        out = bz.tanh(bz.asarray(x) @ bz.asarray(w)) * (i + 2)  # x @ w: in the arena
        schedule, leaves = compile_graph([out._node])
        scheds.append((schedule, [leaf.data for leaf in leaves], np.tanh(x @ w) * (i + 2)))
    build = lambda s: ReplayPlan(s, numpy_run_kernel)  # noqa: E731
    arena = build(scheds[0][0]).arena_bytes
    assert arena > 0
    for budget, kept in [(0, 0), (arena, 1), (10 * arena, 3)]:
        cache = PlanCache(build, max_bytes=budget)
        for _ in range(3):
            for s, inputs, want in scheds:
                out = cache.run(s, inputs)
                if out is not None:
                    np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=1e-6)
        assert cache.held_bytes == kept * arena
        assert sum(len(p) for _, p in cache._idle.values()) == kept
        cache.clear()
        assert cache.held_bytes == 0


def test_native_library_ops_run_inside_the_program() -> None:
    """On cpu, quantized_matmul and attention (library ops with ``native_call``) become
    steps of the replay program: a decode-like step of norm -> qmm -> attention over a
    strided cache view -> qmm -> residual runs as one native segment, matching numpy."""
    w1, w2 = data(96, 32, seed=1), data(32, 32, seed=2)
    q1, q2 = (bz.quantize(bz.asarray(w), group_size=32, bits=4) for w in (w1, w2))
    cache = data(1, 40, 2, 16, seed=3)  # (B, S, H, D): heads are a strided view

    @bz.compile
    def f(x, pk, n):
        h = bz.quantized_matmul(bz.fast.rms_norm(x, None, 1e-5), *q1, bits=4, group_size=32,
                               act="float")
        q, k, v = (bz.reshape(h[..., i * 32:(i + 1) * 32], (1, 1, 2, 16)) for i in range(3))
        q, k, v = (bz.permute_dims(a, (0, 2, 1, 3)) for a in (q, k, v))
        pkv = bz.permute_dims(pk, (0, 2, 1, 3))
        a = bz.fast.scaled_dot_product_attention(q, k, v, scale=0.35, mask="causal",
                                                 past=(pkv, pkv), past_length=n)
        a = bz.reshape(bz.permute_dims(a, (0, 2, 1, 3)), (1, 1, 32))
        return x + bz.quantized_matmul(a, *q2, bits=4, group_size=32, act="float")

    x = data(1, 1, 32, seed=4)
    for n in (33, 33, 7):  # traced, replayed, replayed with another past length
        args = (bz.asarray(x), bz.asarray(cache), bz.asarray(np.int32(n)))
        got = np.asarray(f(*args))
        with bz.backend("numpy"):
            want = np.asarray(f(*args))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if bz.backends.current().name == "cpu":
        plans = _plans(f)
        assert plans and plans[0].n_python_kernels == 0
        assert plans[0].n_native == len(plans[0].schedule.steps) - sum(
            1 for st in plans[0].schedule.steps if not isinstance(st, (KernelStep, LibraryStep)))


@pytest.mark.parametrize("m,k,n", [(1, 576, 960), (3, 37, 13), (8, 16, 4), (1, 5, 3), (9, 32, 8),
                                   (104, 576, 963), (33, 70, 17), (40, 1, 9)])
def test_matvec_steps_match_numpy(m, k, n) -> None:
    """``x @ W.T``: on cpu a native step of the replay program -- the streaming matvec up
    to 8 rows of x, the GEMM above (AVX-512 hosts; BLAS elsewhere) -- any K and N (tails
    of the 16-lane, 32-row and 8-row blocks), float32 against numpy's BLAS within K * 1e-6
    (another summation order of K products of unit normals)."""
    w = data(n, k, seed=5)

    @bz.compile
    def f(x, w):
        return bz.tanh(x @ w.T) * 2.0

    for i in range(3):
        x = data(m, k, seed=6 + i)
        np.testing.assert_allclose(np.asarray(f(bz.asarray(x), bz.asarray(w))),
                                   np.tanh(x @ w.T) * 2.0, rtol=1e-5, atol=k * 1e-6)
    if bz.backends.current().name == "cpu":
        from braze.backends.cpu import matvec

        plan = _plans(f)[0]
        launches = plan.schedule.num_kernels  # the matmul and the tanh kernel
        native = m <= 8 or matvec.gemm_available()
        assert plan.n_native == (launches if native else launches - 1)


@pytest.mark.parametrize("m,k,n", [(64, 48, 40), (20, 12, 17), (200, 33, 5)])
def test_backward_products_are_native_steps(m, k, n) -> None:
    """A layer's backward products ``X.T @ g`` and ``g @ W`` (W row-major): native GEMM
    steps of the replay program on AVX-512 / AVX2 hosts (no numpy BLAS between the
    kernels) when they have more than 8 rows (the GEMM path), float32 against numpy
    within K * 1e-6."""
    x, g, w = data(m, k, seed=1), data(m, n, seed=2), data(n, k, seed=3)

    @bz.compile
    def f(x, g, w):
        return bz.sin(x.T @ g), bz.cos(g @ w)

    a, b = f(bz.asarray(x), bz.asarray(g), bz.asarray(w))
    a, b = f(bz.asarray(x), bz.asarray(g), bz.asarray(w))
    np.testing.assert_allclose(np.asarray(a), np.sin(x.T @ g), rtol=1e-5, atol=m * 1e-6)
    np.testing.assert_allclose(np.asarray(b), np.cos(g @ w), rtol=1e-5, atol=n * 1e-6)
    if bz.backends.current().name == "cpu":
        from braze.backends.cpu import matvec

        plan = _plans(f)[0]
        if matvec.gemm_available():
            assert plan.n_native == plan.schedule.num_kernels


@pytest.mark.parametrize("n,k", [(1000, 1000), (7, 3), (1, 5), (5, 1), (3000, 17)])
def test_matrix_vector_steps_match_numpy(n, k) -> None:
    """``M @ v`` and ``X.T @ r`` (a power iteration's, a gradient's): on cpu native steps
    of the replay program (the matvec and vecmat kernels, their buffers in the matmul's
    operand order), float32 within K * 1e-6 of numpy's BLAS; a sliced matrix is no
    such step and keeps numpy's matmul."""
    m, v, r = data(n, k, seed=7), data(k, seed=8), data(n, seed=9)

    @bz.compile
    def f(m, v, r):
        return m @ v, m.T @ r, m[1:] @ v

    for i in range(2):
        got = f(bz.asarray(m), bz.asarray(v * (i + 1)), bz.asarray(r))
        for g, w in zip(got, (m @ (v * (i + 1)), m.T @ r, m[1:] @ (v * (i + 1)))):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=max(n, k) * 1e-6)
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        steps = [st for st in plan.schedule.steps if isinstance(st, LibraryStep)]
        assert len(steps) == 3 and plan.n_native == 2  # m[1:] starts past offset 0


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float16, np.int64, np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_steps_of_strided_views(dtype, axis) -> None:
    """concat of transposed / sliced / broadcast views (on cpu: a native program step,
    any dtype, up to 4 dims), replayed with new data, equals numpy's."""
    @bz.compile
    def f(a, b):
        parts = [bz.permute_dims(a, (1, 0, 2)), b[:, ::2], bz.broadcast_to(b[:, :1], (3, 2, 5))]
        if axis != 1:
            parts = [p[:, :2] for p in parts]
        return bz.concat(parts, axis=axis) if axis != -1 else bz.concat(
            [bz.reshape(p, (3, 2, 5)) for p in parts], axis=-1)

    def want(a, b):
        parts = [a.transpose(1, 0, 2), b[:, ::2], np.broadcast_to(b[:, :1], (3, 2, 5))]
        if axis != 1:
            parts = [p[:, :2] for p in parts]
        return np.concatenate(parts, axis=axis) if axis != -1 else np.concatenate(
            [p.reshape(3, 2, 5) for p in parts], axis=-1)

    for seed in range(3):
        rng = np.random.default_rng(seed)
        a = (rng.standard_normal((2, 3, 5)) * 50).astype(dtype)
        b = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(a), bz.asarray(b))), want(a, b))
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        assert plan.n_native == plan.schedule.num_kernels


def _view(a, xp, view: str):  # type: ignore[no-untyped-def]
    """``a`` itself, transposed (axes reversed) or every other element along each axis, in
    numpy (``xp`` np) or braze."""
    axes = tuple(reversed(range(a.ndim)))
    if view == "transposed":
        return np.transpose(a, axes) if xp is np else bz.permute_dims(a, axes)
    return a[tuple(slice(None, None, 2) for _ in range(a.ndim))] if view == "sliced" else a


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int8, np.float16, np.int64, np.bool_]),
       view=st.sampled_from(["plain", "transposed", "sliced"]))
@settings(max_examples=40, deadline=None)
def test_roll_steps_of_strided_views(shape, data, dtype, view) -> None:
    """roll over any axes of plain, transposed and sliced views (on cpu: a native program
    step, any dtype, up to 4 dims), replayed with new data, equals numpy's exactly."""
    nd = len(shape)
    axes = tuple(data.draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                    unique=True)))
    shifts = tuple(data.draw(st.integers(-7, 7)) for _ in axes)
    grow = [2 * n if view == "sliced" else n for n in shape]

    @bz.compile
    def f(a):
        return bz.roll(_view(a, bz, view) * 1, shifts, axes)  # (x * 1: a kernel feeds the roll)

    for seed in range(2):
        src = (np.random.default_rng(seed).standard_normal(
            tuple(reversed(grow)) if view == "transposed" else grow) * 50).astype(dtype)
        want = np.roll(_view(src, np, view) * np.ones((), dtype), shifts, axes)
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(src))), want)
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        assert plan.n_native == plan.schedule.num_kernels


@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int8, np.float16, np.int64, np.bool_,
                              np.complex128]),
       idx_dtype=st.sampled_from([np.int32, np.int64]),
       view=st.sampled_from(["plain", "transposed", "sliced"]))
@settings(max_examples=40, deadline=None)
def test_take_along_axis_steps_of_strided_views_and_broadcast_indices(
        shape, data, dtype, idx_dtype, view) -> None:
    """take_along_axis of plain, transposed and sliced views by int32 / int64 indices
    (negative ones too), x and the indices broadcast (on cpu: a native program step, any
    dtype, up to 6 dims), replayed with new data, equals numpy's exactly."""
    nd = len(shape)
    axis = data.draw(st.integers(0, nd - 1))
    shape[axis] = max(shape[axis], 1)
    picks = data.draw(st.integers(1, 3))
    ishape = tuple(picks if d == axis else data.draw(st.sampled_from([1, n]))
                   for d, n in enumerate(shape))
    xshape = tuple(n if d == axis or ishape[d] == 1 else data.draw(st.sampled_from([1, n]))
                   for d, n in enumerate(shape))
    grow = [2 * n if view == "sliced" else n for n in xshape]

    @bz.compile
    def f(a, i):  # (a + 0: a kernel's buffer, then the view the gather reads)
        return bz.take_along_axis(_view(a + bz.zeros((), dtype=dtype), bz, view), i, axis=axis)

    for seed in range(2):
        rng = np.random.default_rng(seed)
        src = (rng.standard_normal(tuple(reversed(grow)) if view == "transposed" else grow)
               * 50).astype(dtype)
        idx = rng.integers(-shape[axis], shape[axis], ishape).astype(idx_dtype)
        want = np.take_along_axis(_view(src, np, view), idx, axis)
        got = np.asarray(f(bz.asarray(src), bz.asarray(idx)))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        assert plan._errors and "take_along_axis (python)" not in plan._op_names  # native


@given(rows=st.integers(1, 6), row_shape=st.lists(st.integers(1, 4), max_size=2),
       ishape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float16, np.uint32, np.int8, np.complex64]),
       idx_dtype=st.sampled_from([np.int32, np.int64]), whole=st.booleans())
@settings(max_examples=40, deadline=None)
def test_row_gathers_are_program_steps(rows, row_shape, ishape, data, dtype, idx_dtype,
                                       whole) -> None:
    """x[i] and x[i, :, ...] (an embedding lookup: rows of a table by an index array of 1-3
    dims, negative indices too) as a compiled step equal numpy's exactly; on cpu a native
    program step (no Python step left in the plan)."""
    table = (np.random.default_rng(rows).standard_normal((rows, *row_shape)) * 50).astype(dtype)
    idx = np.asarray(data.draw(st.lists(st.integers(-rows, rows - 1), min_size=int(np.prod(
        ishape)), max_size=int(np.prod(ishape))))).reshape(ishape).astype(idx_dtype)
    key = (slice(None),) * len(row_shape) if whole else ()

    @bz.compile
    def f(t, i):
        return t[(i, *key)]

    for _ in range(2):  # traced, then replayed
        got = np.asarray(f(bz.asarray(table), bz.asarray(idx)))
        want = table[(idx, *key)]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        assert not [n for n in plan._op_names if n and "(python)" in n], plan._op_names


def test_row_gather_out_of_range_raises_at_the_call() -> None:
    """An index outside [-n, n) of a native row gather raises numpy's IndexError naming the
    op when the compiled call runs; the next good call is right."""
    @bz.compile
    def f(t, i):
        return t[i] * 2.0

    table = data(5, 3)
    good = np.array([[0, 4, -5]], np.int32)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(f(bz.asarray(table), bz.asarray(good))),
                                      table[good] * 2.0)
    for bad in (5, -6):
        with pytest.raises(IndexError, match=f"getitem/take: index {bad} is out of bounds for "
                                             "axis 0 with size 5"):
            np.asarray(f(bz.asarray(table), bz.asarray(np.array([[0, bad, 1]], np.int32))))
    np.testing.assert_array_equal(np.asarray(f(bz.asarray(table), bz.asarray(good))),
                                  table[good] * 2.0)


def test_take_along_axis_out_of_range_stops_the_program_and_raises_at_the_call() -> None:
    """An index outside [-n, n) raises numpy's IndexError naming the op when the compiled
    call runs (the native gather's status stops its program: the kernels after it do not
    run, so no output of a bad call is ever written), profiled or not; the next good call
    is right."""
    ran = []

    @bz.compile
    def f(x, i):
        return bz.exp(bz.take_along_axis(x * 2.0, i, axis=1)) + 1.0

    x = data(4, 5)
    good = np.array([[0], [4], [-5], [2]])
    want = np.exp(np.take_along_axis(x * 2.0, good, 1)) + 1.0
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(bz.asarray(x), bz.asarray(good))), want,
                                   rtol=1e-6)
    for bad_value, profiled in ((5, False), (-6, False), (7, True)):
        bad = good.copy()
        bad[2, 0] = bad_value
        with pytest.raises(IndexError, match=f"take_along_axis: index {bad_value} is out of "
                                             "bounds for axis 1 with size 5"):
            if profiled:
                with bz.backends.profile() as calls:
                    np.asarray(f(bz.asarray(x), bz.asarray(bad)))
            else:
                np.asarray(f(bz.asarray(x), bz.asarray(bad)))
        if profiled:
            ran.append([name for name, _ in calls])
        np.testing.assert_allclose(np.asarray(f(bz.asarray(x), bz.asarray(good))), want,
                                   rtol=1e-6)
    if bz.backends.current().name == "cpu" and _uses_plans():
        (names,) = ran
        assert names[-1] == "take_along_axis"  # the exp kernel after it never ran
        assert _plans(f)[0].n_native == 3


def test_inputs_seen_twice_are_held_others_never() -> None:
    """A plan holds an input (identity check, no rebind) from its second call in a row
    in the same position -- a compiled function's constants, an LLM's weights -- never a
    one-off array; a held position still takes any other array of the right shape."""
    import gc
    import weakref

    x0, w0 = bz.asarray(data(64)), bz.asarray(data(64, seed=1))
    s, _ = compile_graph([(x0 * 2.0 + w0)._node])  # inputs in order: x, w
    plan = ReplayPlan(s, numpy_run_kernel)
    w = data(64, seed=1)
    xs = [data(64, seed=i) for i in range(2, 6)]
    one_off = data(64, seed=9)
    ref = weakref.ref(one_off)

    def call(x):
        return plan.run([x, w])[0]

    np.testing.assert_allclose(call(one_off), one_off * 2 + w, rtol=1e-6)
    del one_off
    gc.collect()
    assert ref() is None  # not kept alive by the plan
    for x in xs:  # w comes back each call: held from the second on
        np.testing.assert_allclose(call(x), x * 2 + w, rtol=1e-6)
    assert any(h is w for h in plan._held) and not any(h is xs[-1] for h in plan._held)
    w2 = data(64, seed=7)  # another array in w's position: checked, bound, used
    out = plan.run([xs[0], w2])[0]
    np.testing.assert_allclose(out, xs[0] * 2 + w2, rtol=1e-6)
    assert plan.run([xs[0], data(65)]) is None  # a wrong shape is still refused
    np.testing.assert_allclose(plan.run([xs[1], w])[0], xs[1] * 2 + w, rtol=1e-6)
    w[:] = 3.0  # held inputs are read in place: a write between calls is seen
    np.testing.assert_allclose(plan.run([xs[1], w])[0], xs[1] * 2 + 3.0, rtol=1e-6)
    ws = data(128, seed=8)[::2]  # strided: bound as a row-major copy, so never held
    for _ in range(3):
        plan.run([xs[2], ws])
    ws[:] = -1.0
    np.testing.assert_allclose(plan.run([xs[2], ws])[0], xs[2] * 2 - 1.0, rtol=1e-6)


def test_profile_times_each_native_call_of_a_replay() -> None:
    """bz.backends.profile(): one (name, seconds) per native program call of a replayed
    compiled function, and per step run in Python (named "... (python)"); nothing
    outside the block."""
    f = bz.compile(lambda x, w: bz.softmax(x @ w, axis=-1) * 2.0)
    x, w = bz.asarray(data(8, 64)), bz.asarray(data(64, 32, seed=1))
    want = np.asarray(f(x, w))
    f(x, w)  # the second call prepares the plan
    with bz.backends.profile() as calls:
        got = np.asarray(f(x, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # mlx: another matmul order
    n = len(calls)
    f(x, w)
    assert len(calls) == n  # the block is over
    if bz.backends.current().name == "cpu":
        plan = _plans(f)[0]
        native = [name for name, _ in calls if not name.endswith(" (python)")]
        assert len(native) == plan.n_native >= 1
        assert all(isinstance(name, str) and 0 <= t < 1 for name, t in calls)
        assert any(name.startswith("row_") for name in native)  # the fused softmax kernel
        assert n == len(native) + sum(1 for x in plan._op_names if x is not None)


def test_a_fixed_leaf_is_computed_once_per_plan_and_copied_each_call(monkeypatch) -> None:
    """``bz.arange`` inside a compiled function (a library step without inputs): its value
    depends on its attributes alone, so a replay plan computes it once; a kernel that then
    runs in place over its buffer never corrupts the next call."""
    import sys

    import braze as bz

    leaves = sys.modules["braze.graph.ops.leaves"]
    calls = []
    real = leaves._arange_ref

    def counting(**kw):  # type: ignore[no-untyped-def]
        calls.append(kw)
        return real(**kw)

    monkeypatch.setattr(leaves, "_arange_ref", counting)

    @bz.compile
    def f(x):  # type: ignore[no-untyped-def]
        r = bz.arange(64, dtype=bz.float32)
        return (r * x + 1.0) * 2.0, r

    x = np.linspace(0, 1, 64, dtype=np.float32)
    with bz.backend("cpu"):
        for i in range(5):
            y, r = f(bz.asarray(x + i))
            np.testing.assert_array_equal(np.asarray(r), np.arange(64, dtype=np.float32))
            np.testing.assert_allclose(np.asarray(y), (np.arange(64) * (x + i) + 1.0) * 2.0,
                                       rtol=1e-6)
    assert len(calls) <= 3  # the trace's first call, the plan's build: not once per call


def test_a_fixed_leaf_that_owns_its_buffer_is_no_step_of_the_plan() -> None:
    """A fixed leaf no kernel reuses in place and no caller receives (a cross-entropy
    gradient's iota) is a constant of the plan: no step runs for it, the results hold."""
    @bz.compile
    def f(x, i):  # type: ignore[no-untyped-def]
        hit = bz.reshape(bz.arange(x.shape[1]), (1, -1)) == i[:, None]
        return bz.sum(bz.where(hit, x, 0.0), axis=1)

    x = data(6, 10)
    with bz.backend("cpu"):
        for j in range(4):
            idx = np.arange(6) % (7 - j)
            got = np.asarray(f(bz.asarray(x + j), bz.asarray(idx)))
            np.testing.assert_array_equal(got, (x + j)[np.arange(6), idx])
        if _uses_plans():
            (plan,) = _plans(f)
            assert [plan.schedule.steps[t].op for t in plan._once] == ["arange"]
            assert not any(name and "arange" in name for name in plan._op_names)
