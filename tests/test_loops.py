"""Loops that build graphs: cut into repeating segments, in-place assignment, scalar steps.

The cases of issue 14: a Jacobi stencil with in-place slice updates, ``trace +=
tanh(a[i, i])`` over a diagonal, 2,000 scalar assignments. Each gives numpy's values;
structurally, a loop's pending graph stays bounded and its segments hit the schedule
cache; assignment into a buffer only the array holds writes in place, and everything
that shares the buffer (views, numpy callers, pending graphs, other handles) still sees
numpy's value semantics; ``bz.compile`` tracing is never cut. Timings are in
benchmarks/numpy_programs.py, not here. Float tolerances: float32, 1e-5 relative.
"""

from __future__ import annotations

import inspect
import sys
import weakref

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.graph.compiler import CACHE
from braze.graph.evaluate import cut_targets, iteration_boundary, topo_order

_array = sys.modules["braze.arrays.array"]


def _evaluated(np_array: np.ndarray) -> bz.Array:
    return bz.asarray(np_array.copy())


def _jacobi(xp, A, B, steps):
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return A, B


# ---------------------------------------------------------------- the cases
def test_jacobi_stencil_updates_in_place_and_matches_numpy() -> None:
    a0 = np.random.default_rng(0).random((40, 40), dtype=np.float32)
    want_a, want_b = _jacobi(np, a0.copy(), a0.copy(), 30)
    A, B = _evaluated(a0), _evaluated(a0)
    bufs = (id(A._node.data), id(B._node.data))  # (holding them would share them)
    CACHE.clear()
    got_a, got_b = _jacobi(bz, A, B, 30)
    np.testing.assert_allclose(np.asarray(got_a), want_a, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_b), want_b, rtol=1e-5)
    # every update was written into the arrays' own buffers: no graph, no copy
    assert (id(A._node.data), id(B._node.data)) == bufs
    # the two update expressions are two schedules, built once, hit every later step
    assert CACHE.misses <= 2 and CACHE.hits >= 2 * 30 - 2


def test_jacobi_on_arrays_that_share_a_node_keeps_values() -> None:
    """B starts as another handle on A's node (arrays are values): the first updates
    cannot go in place; they are recorded, cut, and then go in place."""
    a0 = np.random.default_rng(1).random((24, 24), dtype=np.float32)
    want_a, want_b = _jacobi(np, a0.copy(), a0.copy(), 40)
    A = _evaluated(a0)
    B = bz.astype(A, A.dtype)  # a "copy": a new handle on the same node
    got_a, got_b = _jacobi(bz, A, B, 40)
    np.testing.assert_allclose(np.asarray(got_a), want_a, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_b), want_b, rtol=1e-5)


def test_diagonal_trace_loop_builds_no_graph() -> None:
    """An element of an evaluated array is a numpy scalar (as numpy gives), and braze's
    functions on numpy scalars give numpy scalars: the loop builds no graph and computes
    numpy's own values, bit for bit."""
    a = np.random.default_rng(2).random((300, 300), dtype=np.float32)
    want = 0.0
    for i in range(a.shape[0]):
        want += np.tanh(a[i, i])
    x = _evaluated(a)
    for xp in (np, bz):  # numpy's function on braze's element, and braze's own
        trace = 0.0
        for i in range(x.shape[0]):
            trace += xp.tanh(x[i, i])
        assert type(trace) is np.float32
        assert trace == want


def test_element_reads_are_numpy_scalars_only_of_evaluated_arrays() -> None:
    x = _evaluated(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert type(x[1, -1]) is np.int16 and x[1, -1] == 5
    assert type(x[1]) is bz.Array  # a row stays an array
    lazy = x * 2
    assert type(lazy[1, 2]) is bz.Array and lazy[1, 2].tolist() == 10  # no evaluation
    with pytest.raises(IndexError, match="getitem"):
        x[2, 0]
    with pytest.raises(IndexError, match="getitem"):
        _evaluated(np.zeros(3))[3]

    @bz.compile
    def f(a):
        return a + x[0, 1]  # a captured array's element stays in the traced graph

    assert f(bz.asarray(1)).tolist() == 2
    x[0, 1] = 10
    assert f(bz.asarray(1)).tolist() == 11


def test_functions_on_numpy_scalars_follow_numpy() -> None:
    s = np.float32(0.5)
    # numpy's types; the value of braze's own tanh, which an array gives too (numpy's float32
    # tanh(0.5) is 1 ulp above the correctly rounded 0.46211717)
    tanh_s = np.asarray(bz.tanh(bz.asarray(np.array([s]))))[0]
    assert tanh_s == np.float32(np.tanh(np.float64(s)))
    for got, want in ((bz.tanh(s), tanh_s), (bz.add(s, 1.5), s + 1.5),
                      (bz.multiply(s, s), s * s), (bz.greater(s, 0.25), s > 0.25),
                      (bz.sqrt(np.float64(2)), np.sqrt(np.float64(2)))):
        assert type(got) is type(want) and got == want
    # braze's dtype rule where it differs from numpy's: an array result, as before
    assert bz.sqrt(np.int64(4)).dtype == bz.float32
    assert bz.exp(np.float16(1)).dtype == bz.float16  # computed in float32, rounded once
    with pytest.raises(TypeError, match="bitwise_and"):
        bz.bitwise_and(np.float32(1), np.float32(2))


def test_functions_answer_numpy_scalars_natively_after_the_first_call() -> None:
    """braze's elementwise functions are native ElementwiseFunction objects: a call whose
    operand types an entry serves goes to that entry's function, every other call (other
    types, keywords, a wrong count) to the Python function, with the same arguments."""
    from braze import _core

    seen: list[tuple] = []

    def general(*args, **kwargs):
        seen.append((args, kwargs))
        return "general"

    f = _core.ElementwiseFunction(general, 2)
    assert f._register((np.float32, float), lambda a, b: ("entry", a, b)) is True
    assert f(np.float32(1), 2.0) == ("entry", np.float32(1), 2.0) and not seen
    assert f(2.0, np.float32(1)) == "general" and f(np.float32(1), 2.0, 3) == "general"
    assert f(np.float32(1), x2=2.0) == "general" and len(seen) == 3
    assert all(f._register((t, t), general) for t in (int, bool, complex, str, bytes, list, dict))
    assert f._register((tuple, tuple), general) is False  # entries full: the general one
    with pytest.raises(TypeError, match="tuple of 2 types"):
        f._register((int,), general)
    tanh = bz.tanh
    assert tanh(np.float64(0.5)) == np.tanh(np.float64(0.5))  # (registers float64)
    assert type(tanh(np.float64(0.5))) is np.float64 and tanh._general.__name__ == "tanh"
    assert inspect.signature(tanh) == inspect.signature(tanh._general)
    assert repr(tanh) == "<braze function tanh>" and tanh.__doc__.startswith("Elementwise")


def test_2000_scalar_assignments_match_numpy_and_go_in_place() -> None:
    xs = np.random.default_rng(3).random(2000, dtype=np.float32)
    want = np.zeros(2000, np.float32)
    m = xs[0]
    for i in range(2000):
        if xs[i] > m:
            m = xs[i]
        want[i] = m
    x = _evaluated(xs)
    out = bz.zeros(2000, dtype=bz.float32)  # lazy, and its data a read-only broadcast
    m = x[0]
    held = out[:]  # an earlier value: the first store copies, this keeps the zeros
    for i in range(2000):
        if x[i] > m:
            m = x[i]
        out[i] = m
        if i == 0:
            buf = id(out._node.data)  # the first store evaluated and copied it
    assert id(out._node.data) == buf  # every later store went in place
    np.testing.assert_array_equal(np.asarray(out), want)
    np.testing.assert_array_equal(np.asarray(held), np.zeros(2000, np.float32))


# ---------------------------------------------------------------- native element paths
def _armed(values: np.ndarray) -> bz.Array:
    """An evaluated 1-d array whose node the native store path serves: one in-place store
    of an element of its own dtype armed it."""
    x = bz.asarray(values)  # (a copy: braze's own buffer, held by x alone)
    x[0] = values.dtype.type(values[0])
    assert x._node._store_type is values.dtype.type
    return x


def test_native_element_stores_keep_value_semantics() -> None:
    """Stores the native path serves write in place; with any other holder of the node
    or buffer (a view, a pending graph, numpy's array, the same node under another
    handle) they copy first, as the Python path does."""
    base = np.arange(6, dtype=np.float32)
    x = _armed(base)
    buf = weakref.ref(x._node.data)  # (a weak reference: the buffer stays x's alone)
    x[1] = np.float32(10)
    assert buf() is x._node.data and x[1] == 10  # in place
    view, doubled, seen = x[:3], x * 2, np.asarray(x)
    x[2] = np.float32(-1)
    assert view.tolist() == [0, 10, 2] and doubled.tolist() == [0, 20, 4, 6, 8, 10]
    assert seen.tolist() == [0, 10, 2, 3, 4, 5]
    assert x.tolist() == [0, 10, -1, 3, 4, 5]
    y = _armed(base)
    alias = bz.Array(y._node)  # another handle on the same node
    y[3] = np.float32(7)
    assert alias.tolist() == [0, 1, 2, 3, 4, 5] and y.tolist() == [0, 1, 2, 7, 4, 5]


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16, np.float16, np.float64,
                                   np.complex64, np.bool_])
def test_native_element_stores_of_other_types_follow_the_general_rules(dtype) -> None:
    """A value of another type than the armed one goes the general way (casts and
    errors as before); out of range, read-only and out-of-bounds stores too."""
    values = np.arange(4).astype(dtype)
    x = _armed(values)
    want = values.copy()
    for v in (values.dtype.type(1), 1.0, 1, True, np.float64(0.0)):
        try:
            want[2] = v
        except (TypeError, OverflowError):
            continue
        try:
            x[2] = v
        except (TypeError, OverflowError):
            continue  # braze is stricter than numpy for some mixes (see _scalar_store)
        np.testing.assert_array_equal(np.asarray(x), want)
    with pytest.raises(IndexError, match="out of bounds"):
        x[4] = values.dtype.type(0)
    with pytest.raises(IndexError, match="getitem"):
        x[-5]
    with pytest.raises(TypeError, match="deletion"):
        del x[0]
    if values.dtype.kind in "iu":
        with pytest.raises(OverflowError):
            x[0] = 1 << 70
    np.testing.assert_array_equal(np.asarray(x), want)


@given(values=hnp.arrays(st.sampled_from([np.float32, np.float64, np.int8, np.int64, np.uint16,
                                            np.float16, np.complex64, np.bool_]),
                         hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)),
       order=st.sampled_from(["C", "F"]), data=st.data())
@settings(max_examples=80, deadline=None)
def test_element_reads_and_stores_match_numpy_on_any_layout(values, order, data) -> None:
    """Element reads (the native path reads registered dtypes in the buffer itself) and
    stores of every dtype and layout (a Fortran-ordered buffer: other strides)
    give numpy's values and scalar types, exactly."""
    ref = np.array(values, order=order)
    x = bz.asarray(ref)
    for _ in range(4):
        key = tuple(data.draw(st.integers(-n, n - 1)) for n in ref.shape)
        got, want = x[key], ref[key]
        assert type(got) is type(want)
        np.testing.assert_array_equal(got, want)
        if ref.ndim == 1:
            v = ref.dtype.type(data.draw(st.integers(0, 100)))
            x[key[0]] = v
            ref[key[0]] = v
    np.testing.assert_array_equal(np.asarray(x), ref)


def test_python_floats_stored_natively_round_as_numpy_and_overflow_warns() -> None:
    x = _armed(np.zeros(3, np.float32))
    x[1] = 0.1  # rounded to float32 as numpy rounds it
    assert x[1] == np.float32(0.1)
    ref = np.zeros(3, np.float32)
    with pytest.warns(RuntimeWarning, match="overflow"):
        ref[2] = 1e300
    with pytest.warns(RuntimeWarning, match="overflow"):
        x[2] = 1e300  # (out of float32's range: numpy's store, and its warning)
    x[0] = float("-inf")
    assert x.tolist() == [-np.inf, np.float32(0.1), np.inf]
    y = _armed(np.zeros(2, np.float64))
    y[0] = 0.1
    assert y[0] == 0.1 and type(y[0]) is np.float64


def test_copies_and_pickles_are_values_under_native_stores() -> None:
    """copy.copy / copy.deepcopy give a new handle on the same node (a store into either
    copies first); pickle round-trips the evaluated value."""
    import copy
    import pickle

    x = _armed(np.arange(4, dtype=np.float32))
    shallow, deep = copy.copy(x), copy.deepcopy(x)
    assert shallow._node is x._node and deep._node is x._node
    x[0] = np.float32(9)
    assert x.tolist() == [9, 1, 2, 3]
    assert shallow.tolist() == deep.tolist() == [0, 1, 2, 3]
    back = pickle.loads(pickle.dumps(x * 2))
    assert type(back) is bz.Array and back.tolist() == [18, 2, 4, 6]


def test_native_element_paths_step_aside_while_tracing_and_after_data_changes() -> None:
    x = _armed(np.arange(4, dtype=np.float32))
    with _array.tracing():
        x[1] = np.float32(5)  # recorded: a new pending node
        assert type(x[0]) is bz.Array and x._node.data is None
    assert x.tolist() == [0, 5, 2, 3]
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    y = _armed(np.arange(4, dtype=np.float32))
    y._node.data = frozen  # a new buffer disarms (and this one is read-only)
    assert y._node._store_type is None
    y[0] = np.float32(9)
    assert frozen.tolist() == [0, 0, 0, 0] and y.tolist() == [9, 0, 0, 0]


@given(ops=st.lists(st.tuples(st.sampled_from(["store", "read", "view", "scale"]),
                              st.integers(-6, 5), st.floats(-1e3, 1e3, width=32)),
                    max_size=30))
@settings(max_examples=60, deadline=None)
def test_element_loops_match_numpy(ops) -> None:
    """Random loops of element stores and reads, views taken and arithmetic between them,
    against numpy (exact: float32 values stored and read back)."""
    ref = np.zeros(6, np.float32)
    x = bz.zeros(6, dtype=bz.float32)
    views = []
    for kind, i, v in ops:
        if kind == "store":
            ref[i] = np.float32(v)
            x[i] = np.float32(v)
        elif kind == "read":
            assert x[i] == ref[i]
        elif kind == "view":
            views.append((x[1:4], ref[1:4].copy()))
        else:
            x = x * 2
            ref = ref * 2
        np.testing.assert_array_equal(np.asarray(x), ref)
    for got, want in views:
        np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- the cut
def _grow(w, x, steps):
    for _ in range(steps):
        w = w * 0.5 + bz.tanh(x - w) * 0.25
    return w


def test_a_growing_loop_is_cut_into_segments_that_hit_the_cache() -> None:
    rng = np.random.default_rng(4)
    x = _evaluated(rng.random(1000, dtype=np.float32))  # above the tiny-graph size
    w = _evaluated(np.zeros(1000, np.float32))
    CACHE.clear()
    w = _grow(w, x, 100)
    misses = CACHE.stats().misses
    hits = CACHE.stats().hits
    for _ in range(300):  # three times as long: only hits
        w = _grow(w, x, 1)
        assert len(topo_order([w._node])) <= 4 * _array.CUT_DEPTH  # the pending graph
    assert CACHE.stats().misses == misses
    assert CACHE.stats().hits >= hits + 300 * 4 // _array.CUT_DEPTH
    want = np.zeros(1000, np.float32)
    xn = np.asarray(x)
    for _ in range(400):
        want = want * np.float32(0.5) + np.tanh(xn - want) * np.float32(0.25)
    np.testing.assert_allclose(np.asarray(w), want, rtol=1e-5)


def _nbody(pos, vel, steps):
    for _ in range(steps):  # 13 levels of pending nodes a step: a 32-deep cut drifts
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d ** 2).sum(axis=-1) + 0.01
        inv = r2 ** -1.5
        acc = (d * inv[:, :, None]).sum(axis=1)
        vel = vel + 0.01 * acc
        pos = pos + 0.01 * vel
    return pos, vel


def test_cuts_fall_where_an_iteration_starts_so_segments_repeat(monkeypatch) -> None:
    """A loop whose body is not a divisor of the cut depth: cut at the last start of an
    iteration, every segment after the first is one schedule (a cut at the depth alone
    makes most segments new, and every new one means new kernels to build); the values
    are numpy's (float32, 1e-4 relative)."""
    rng = np.random.default_rng(6)
    p0, v0 = rng.standard_normal((48, 3), dtype=np.float32), rng.standard_normal(
        (48, 3), dtype=np.float32)

    def schedules(aligned: bool) -> tuple[int, np.ndarray]:
        if not aligned:
            monkeypatch.setattr(_array, "iteration_boundary", lambda roots: None)
        CACHE.clear()
        pos, vel = _nbody(_evaluated(p0), _evaluated(v0), 24)
        bz.eval(pos, vel)
        monkeypatch.undo()
        return CACHE.stats().misses, np.asarray(pos)

    aligned, got = schedules(True)
    drifting, _ = schedules(False)
    assert aligned <= 3 < drifting, (aligned, drifting)
    want, vel = _nbody(p0, v0, 24)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_iteration_boundaries_skip_a_prologue_and_repetitions_inside_the_body() -> None:
    b = bz.asarray(np.zeros((6, 6), np.int8)) + 0  # (pending: a prologue node)
    for _ in range(3):  # a body that repeats itself inside: roll, add, roll, add...
        n = sum(bz.roll(b, i, 0) for i in (-1, 1, 2))
        b = (n == 1).astype(b.dtype)
    head, tail = iteration_boundary([b._node])
    ops = [x.op.name for x in sorted(tail, key=lambda x: x._seq)]
    assert ops == ["roll", "add", "roll", "add", "roll", "add", "equal", "cast"]
    assert [x.op.name for x in head] == ["cast"]  # the second iteration's board
    assert iteration_boundary([(bz.ones(3) + 1)._node]) is None  # nothing repeats


def test_a_cut_leaves_views_of_evaluated_data_pending() -> None:
    """A gradient-descent loop's ``X.T @ r``: the cut evaluates r, not ``X.T`` (a strided
    view that every later segment would copy to row-major), and the loop matches numpy."""
    rng = np.random.default_rng(5)
    xn, yn = rng.standard_normal((500, 4), dtype=np.float32), rng.standard_normal(
        500, dtype=np.float32)
    X, y = _evaluated(xn), _evaluated(yn)
    r = X @ bz.ones(4) - y
    xt = X.T
    assert cut_targets([xt._node, r._node]) == [r._node]
    w, want = bz.zeros(4), np.zeros(4, np.float32)
    for _ in range(3 * _array.CUT_DEPTH):
        w = w - 0.001 * (X.T @ (X @ w - y))
        want = want - np.float32(0.001) * (xn.T @ (xn @ want - yn))
        leaves = [x for n in topo_order([w._node]) for x in n.inputs if x.data is not None]
        assert leaves and all(x.data.flags.c_contiguous for x in leaves)
    np.testing.assert_allclose(np.asarray(w), want, rtol=1e-4, atol=1e-5)


def test_a_cut_evaluates_held_intermediates_once() -> None:
    """A pending value Python still holds is computed in the cut's schedule and kept:
    nothing behind it is computed again when it is read."""
    x = _evaluated(np.arange(1000, dtype=np.float32))
    w = x
    held = []
    for i in range(3 * _array.CUT_DEPTH):
        w = w + 1.0
        if i % 10 == 5:
            held.append(w)
    assert all(h._node.data is not None for h in held[:-1])  # kept by the cuts
    for k, h in zip(range(5, 10**6, 10), held):
        np.testing.assert_array_equal(np.asarray(h), np.arange(1000) + k + 1)


def test_cut_targets_are_the_roots_and_what_outside_holds() -> None:
    x = _evaluated(np.ones(3, np.float32))
    a = x + 1
    b = a * 2
    c = b - 1
    assert len(cut_targets([c._node])) == 3
    del a
    assert len(cut_targets([c._node])) == 2
    del b
    assert cut_targets([c._node]) == [c._node]


def test_huge_arrays_are_not_cut() -> None:
    big = bz.zeros((4096, 4096))  # over CUT_ELEMENTS: one fused kernel is worth more
    a = big
    for _ in range(3 * _array.CUT_DEPTH):
        a = a * 1.0001 + 0.5
    assert big._node.data is None and a._node.data is None


# ---------------------------------------------------------------- value semantics
@pytest.fixture
def x() -> bz.Array:
    return _evaluated(np.arange(12, dtype=np.float32).reshape(3, 4))


def test_a_view_taken_before_keeps_its_value(x) -> None:
    old, row, col = x[:], x[1], x[:, 2]
    x[1, 1:3] = -1.0
    x[0, 0] = 99.0
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(old), want)
    np.testing.assert_array_equal(np.asarray(row), want[1])
    np.testing.assert_array_equal(np.asarray(col), want[:, 2])
    want[1, 1:3] = -1
    want[0, 0] = 99
    np.testing.assert_array_equal(np.asarray(x), want)


def test_writing_a_view_leaves_its_source_alone(x) -> None:
    row = x[1]
    row[0] = 42.0
    assert row.tolist() == [42.0, 5.0, 6.0, 7.0]
    assert x[1].tolist() == [4.0, 5.0, 6.0, 7.0]


def test_numpy_readers_pending_graphs_and_other_handles_keep_values(x) -> None:
    seen = np.asarray(x)
    doubled = x * 2  # pending: reads x's node
    other = bz.astype(x, x.dtype)  # another handle on x's node
    x[...] = 0.0
    x[2, 3] = 1.0
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(seen, want)
    np.testing.assert_array_equal(np.asarray(doubled), want * 2)
    np.testing.assert_array_equal(np.asarray(other), want)
    assert np.asarray(x).sum() == 1.0


def test_memory_braze_does_not_own_is_never_written() -> None:
    src = np.arange(4, dtype=np.float32)
    shared = bz.asarray(src, copy=False)
    shared[0] = 10.0
    frozen = np.arange(4, dtype=np.float32)
    frozen.flags.writeable = False
    ro = bz.asarray(frozen)
    ro[1:3] = 5.0
    assert src.tolist() == [0, 1, 2, 3] and frozen.tolist() == [0, 1, 2, 3]
    assert shared.tolist() == [10, 1, 2, 3] and ro.tolist() == [0, 5, 5, 3]


def test_in_place_assignment_follows_numpy(x) -> None:
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    x[0, 1:] = x[0, :-1]  # overlapping source and region (the source is a view of x)
    want[0, 1:] = want[0, :-1]
    np.testing.assert_array_equal(np.asarray(x), want)
    buf = id(x._node.data)
    for key, value in [((slice(None), 0), bz.asarray([7, 8, 9])),  # int64 into float32
                       ((Ellipsis, None, 3), 0.5),
                       ((1, slice(None, None, -2)), bz.asarray([1.5, 2.5])),
                       ((-1, -1), True)]:
        x[key] = value
        want[key] = np.asarray(value) if isinstance(value, bz.Array) else value
        np.testing.assert_array_equal(np.asarray(x), want)
    del value
    assert id(x._node.data) == buf
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x[0] = bz.ones(3)
    with pytest.raises(TypeError, match="complex"):
        x[0, 0] = 1j
    with pytest.raises(IndexError, match="out of bounds"):
        x[3, 0] = 1.0
    i8 = _evaluated(np.zeros(2, np.int8))
    with pytest.raises(OverflowError):
        i8[0] = 300
    np.testing.assert_array_equal(np.asarray(x), want)


def test_scalar_reads_are_copies_and_not_constants() -> None:
    """``x[i]`` holds no view of x (x keeps its buffer to itself) and enters graphs as
    data, not as a constant folded into the schedule: a loop over i builds one graph."""
    x = _evaluated(np.arange(8, dtype=np.float32))
    big = _evaluated(np.ones(1000, np.float32))
    v = x[3]
    x[3] = -1.0
    assert v.item() == 3.0 and x[3].item() == -1.0
    CACHE.clear()
    for i in range(6):
        np.testing.assert_array_equal(np.asarray(big * x[i]), np.full(1000, float(x[i])))
    assert CACHE.misses == 1


def test_element_arithmetic_is_numpys_and_traced_elements_stay_in_the_graph() -> None:
    """Elements of evaluated arrays are numpy scalars: their arithmetic is numpy's, type
    and value (NEP 50: an int32 element with a Python float is float64). While tracing,
    an element is a 0-d array of the graph and braze's rules apply (int32 with a Python
    float is float32); float elements agree."""
    ni, nf = np.arange(5, dtype=np.int32), np.linspace(0, 1, 5, dtype=np.float32)
    ints, floats = _evaluated(ni), _evaluated(nf)
    exprs = (lambda i, f: i[2] + 1.5, lambda i, f: i[1] * f[3], lambda i, f: f[4] > 0.5,
             lambda i, f: -i[3], lambda i, f: i[2] // 0, lambda i, f: f[0] / 0.0,
             lambda i, f: f[1] * 3.0 - f[2])
    with np.errstate(all="ignore"):
        for expr in exprs:
            got, want = expr(ints, floats), expr(ni, nf)
            assert type(got) is type(want)
            np.testing.assert_array_equal(got, want)
            with _array.tracing():  # (tracing records everything)
                recorded = expr(ints, floats)
            assert type(recorded) is bz.Array and recorded._node.data is None
            if want.dtype.kind in "bf" and want.dtype != np.float64:
                assert recorded.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(recorded), want, rtol=1e-6)


# ---------------------------------------------------------------- compile tracing
def test_compile_tracing_is_never_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = bz.backends.current()
    calls = []
    original = backend.evaluate
    monkeypatch.setattr(backend, "evaluate", lambda ts: calls.append(len(ts)) or original(ts))

    @bz.compile
    def step(w, x):
        for _ in range(4 * _array.CUT_DEPTH):
            w = w * 0.5 + x
        w[0] = 100.0  # functional while tracing: the caller's array is not written
        return w

    w = _evaluated(np.zeros(8, np.float32))
    x = _evaluated(np.ones(8, np.float32))
    out = step(w, x)
    assert calls == [] and step.trace_count == 1
    want = np.zeros(8, np.float32)
    for _ in range(4 * _array.CUT_DEPTH):
        want = want * np.float32(0.5) + np.float32(1)
    want[0] = 100
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert np.asarray(w).tolist() == [0.0] * 8
    out2 = step(w, x)
    np.testing.assert_allclose(np.asarray(out2), want, rtol=1e-6)
    assert step.trace_count == 1
