"""The fusion compiler: kernel counts, pass correctness on random graphs, memory plan,
schedule cache, view index maps.

Every optimized result is compared with the *unoptimized* op-by-op execution of the
same graph (``NumpyBackend(optimize=False)``), the ground truth. Tolerances: float64
1e-12, float32 1e-5 relative (fused kernels reduce over permuted strided views, so
summation order may differ), integers and bools exact.
"""

from __future__ import annotations

import os
import tracemalloc

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.backends.numpy_backend import NumpyBackend, run_schedule
from braze.graph.compiler import CACHE, compile_graph
from braze.graph.ir import Graph
from braze.graph.ops import OPS, reference_eval
from braze.graph.passes.fuse import fuse
from braze.graph.passes.memory import plan_memory
from braze.graph.passes.simplify import simplify
from braze.graph.view import View

REFERENCE = NumpyBackend(optimize=False)
RANDOM_GRAPH_EXAMPLES = int(os.environ.get("BRAZE_RANDOM_GRAPHS", "60"))


def kernels(*outs: bz.Array):
    schedule, _ = compile_graph([o._node for o in outs])
    return schedule


def gelu(h: bz.Array) -> bz.Array:
    return 0.5 * h * (1 + bz.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))


@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    return (bz.asarray(rng.standard_normal((64, 32)).astype(np.float32)),
            bz.asarray(rng.standard_normal((64, 32)).astype(np.float32)))


# ---------------------------------------------------------------- kernel counts
def test_elementwise_chain_is_one_kernel(xy) -> None:
    x, y = xy
    out = bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))
    assert kernels(out).num_kernels == 1


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_is_one_kernel(xy, axis) -> None:
    assert kernels(bz.softmax(xy[0], axis=axis)).num_kernels == 1


def test_layer_norm_with_weight_and_bias_is_one_kernel(xy) -> None:
    x, _ = xy
    w, b = bz.ones(32) * 1.5, bz.asarray(np.linspace(-1, 1, 32, dtype=np.float32))
    m = bz.mean(x, axis=-1, keepdims=True)
    v = bz.var(x, axis=-1, keepdims=True)
    assert kernels((x - m) / bz.sqrt(v + 1e-5) * w + b).num_kernels == 1


def test_rms_norm_is_one_kernel(xy) -> None:
    x, _ = xy
    w = bz.asarray(np.linspace(0.5, 1.5, 32, dtype=np.float32))
    out = x / bz.sqrt(bz.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w
    assert kernels(out).num_kernels == 1


def test_logsumexp_is_one_kernel(xy) -> None:
    assert kernels(bz.logsumexp(xy[0], axis=1)).num_kernels == 1


def test_matmul_epilogue_is_one_kernel_after_the_library_call(xy) -> None:
    x, _ = xy
    w = bz.asarray(np.ones((32, 16), np.float32))
    b = bz.asarray(np.arange(16, dtype=np.float32))
    s = kernels(gelu(x @ w + b))
    assert s.num_kernels == 2
    assert [type(step).__name__ for step in s.steps] == ["LibraryStep", "KernelStep"]


def test_siblings_around_a_library_call_are_not_fused_into_a_cycle(xy) -> None:
    """x*2 feeds a matmul whose result is added to x: both read x, but grouping them
    into one kernel would make it wait for its own output (regression: a hang)."""
    x, _ = xy
    w = bz.asarray(np.eye(32, dtype=np.float32))
    out = x + (x * 2) @ w
    s = kernels(out)
    assert [type(step).__name__ for step in s.steps] == ["KernelStep", "LibraryStep",
                                                         "KernelStep"]
    np.testing.assert_allclose(np.asarray(out), np.asarray(x) * 3, rtol=1e-6)


def test_row_fusion_does_not_skip_a_library_call_in_between(xy) -> None:
    """s = sum(x) feeds a matmul and an add that also reads the matmul: fusing the add
    into the reduction's kernel would need the matmul before that kernel ran."""
    x, _ = xy
    s = bz.sum(x, axis=1)
    out = s + (bz.reshape(s, (1, 64)) @ bz.asarray(np.eye(64, dtype=np.float32)))[0]
    assert kernels(out).num_kernels == 3  # reduce, matmul, add
    np.testing.assert_allclose(np.asarray(out), np.asarray(x).sum(axis=1) * 2, rtol=1e-5)


def test_a_broadcast_transcendental_is_computed_once_per_own_element(xy) -> None:
    """cos of a (64, 1) value read under (64, 32): computed in its own kernel (64 cos),
    not once per element of the consumer (2048). Below a reduction (a row kernel's
    epilogue) it stays in the row kernel; a same-shape exp stays inlined."""
    x, y = xy
    t = y[:, :1] + 1.0
    s = kernels(x * bz.cos(t))
    assert s.num_kernels == 2
    assert [k.ops.count("cos") for k in s.kernels] == [1, 0]
    np.testing.assert_allclose(np.asarray(x * bz.cos(t)),
                               np.asarray(x) * np.cos(np.asarray(y)[:, :1] + 1.0),
                               rtol=1e-6, atol=1e-6)
    assert kernels(x * bz.cos(bz.sum(y, axis=1, keepdims=True))).num_kernels == 1
    assert kernels(x * bz.exp(y)).num_kernels == 1


def test_a_running_value_read_by_many_kernels_is_realized(xy, uncut) -> None:
    """Inline-width rule: ``a = softmax(a) + a`` threaded 40 times. Without it every
    reduction would inline the whole running chain back to x (quadratic analysis); with
    it no node is inlined into MAX_INLINE_ROOTS or more roots, and values are unchanged."""
    from braze.graph.passes.fuse import MAX_INLINE_ROOTS, Fuser

    x, _ = xy
    a, want = x, np.asarray(x).astype(np.float64)
    for _ in range(40):
        a = bz.softmax(a * 1.5, axis=-1) + a
        e = np.exp(want * 1.5 - (want * 1.5).max(axis=-1, keepdims=True))
        want = e / e.sum(axis=-1, keepdims=True) + want
    g = simplify(Graph.from_nodes([a._node])[0])
    f = Fuser(g)
    f.realize_widely_inlined()
    f.analyze()
    assert max(len(roots) for roots in f.members.values()) < MAX_INLINE_ROOTS
    np.testing.assert_allclose(np.asarray(a), want, rtol=1e-4, atol=1e-6)  # float32, 40 steps


def test_common_subexpressions_are_computed_once(xy) -> None:
    x, _ = xy
    s = kernels(bz.sin(x) + bz.sin(x))
    assert s.num_kernels == 1 and s.kernels[0].ops.count("sin") == 1


def test_constant_expressions_fold_to_a_constant() -> None:
    s = kernels(bz.ones(3) * 2 + 1)
    assert s.num_kernels == 0  # a broadcast view of the folded scalar 3.0
    assert (bz.ones(3) * 2 + 1).tolist() == [3.0, 3.0, 3.0]


def test_sibling_reductions_share_one_kernel(xy) -> None:
    x, _ = xy
    s = kernels(bz.sum(x, axis=1), bz.max(x, axis=1))
    assert s.num_kernels == 1 and len(s.kernels[0].stores) == 2


def test_views_are_index_maps_not_copies(xy) -> None:
    x, y = xy
    out = bz.exp(x.T[::2, 1:]) + y[1:, ::2].T
    s = kernels(out)
    assert s.num_kernels == 1
    np.testing.assert_allclose(np.asarray(out), np.exp(np.asarray(x).T[::2, 1:])
                               + np.asarray(y)[1:, ::2].T, rtol=1e-5, atol=1e-6)


def test_a_reshape_strides_cannot_express_copies_once(xy) -> None:
    x, _ = xy
    out = bz.exp(x.T.reshape((-1,)))  # flattening a transpose needs a contiguous copy
    np.testing.assert_allclose(np.asarray(out), np.exp(np.asarray(x).T.reshape(-1)), rtol=1e-6)


# ---------------------------------------------------------------- simplify
def _ops_after_simplify(out: bz.Array) -> list[str]:
    g, _ = Graph.from_nodes([out._node])
    return [n.op for n in simplify(g).nodes]


def test_algebraic_identities_are_applied_only_where_exact() -> None:
    x = bz.asarray(np.array([1.0, -0.0], np.float32))
    assert _ops_after_simplify(x * 1.0) == ["input"]
    assert _ops_after_simplify(x - 0.0) == ["input"]
    assert _ops_after_simplify(bz.negative(bz.negative(x))) == ["input"]
    assert "add" in _ops_after_simplify(x + 0.0)  # -0.0 + 0.0 is +0.0: not an identity
    assert np.signbit(np.asarray(x + 0.0))[1] == np.False_
    assert _ops_after_simplify(x + -0.0) == ["input"]
    assert "exp" in _ops_after_simplify(bz.exp(bz.log(x)))  # not exact in floating point
    i = bz.asarray(np.array([1, 2], np.int32))
    assert _ops_after_simplify(i + 0) == ["input"]
    assert _ops_after_simplify(i.astype(bz.int64).astype(bz.int32)) == ["input"]
    assert "cast" in _ops_after_simplify(x.astype(bz.float16).astype(bz.float32))


def test_dead_code_is_removed() -> None:
    x = bz.asarray(np.ones(3, np.float32))
    _unused = bz.exp(x)
    assert _ops_after_simplify(x * 2.0) == ["input", "const", "multiply"]


# ---------------------------------------------------------------- random graphs
@st.composite
def programs(draw):
    """A random DAG program: inputs, then steps over earlier values; returns a spec."""
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    base = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    n_in = draw(st.integers(1, 3))
    inputs = []
    for _ in range(n_in):
        shape = draw(hnp.broadcastable_shapes(base, min_dims=0, max_dims=len(base)))
        arr = draw(hnp.arrays(dtype, shape, elements=st.integers(-4, 4).map(float)
                              if dtype != np.int32 else st.integers(-4, 4)))
        inputs.append(arr)
    steps = []
    n_vals = n_in
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "view", "softmax",
                                     "scalar", "library"]))
        a = draw(st.integers(0, n_vals - 1))
        b = draw(st.integers(0, n_vals - 1))
        steps.append((kind, a, b, draw(st.integers(0, 1000))))
        n_vals += 1
    outs = sorted(set(draw(st.lists(st.integers(0, n_vals - 1), min_size=1, max_size=3)))
                  | {n_vals - 1})
    return inputs, steps, outs


def build_program(spec) -> list[bz.Array]:
    """The program's output arrays, recorded (not evaluated)."""
    inputs, steps, outs = spec
    vals = [bz.asarray(a) for a in inputs]
    for kind, a, b, r in steps:
        x, y = vals[a], vals[b]
        if kind == "unary":
            f = [bz.exp, bz.tanh, bz.abs, bz.negative, bz.sqrt, bz.sin, bz.square][r % 7]
            v = f(bz.clip(x, -3, 3)) if f in (bz.exp,) else f(x)
        elif kind == "binary":
            try:
                bz.broadcast_shapes(x.shape, y.shape)
            except ValueError:
                y = y.sum()
            v = [bz.add, bz.subtract, bz.multiply, bz.maximum, bz.where][r % 5](
                *(x > y, x, y) if r % 5 == 4 else (x, y))
        elif kind == "scalar":
            v = [x * 0.5, x + 1, 2 - x, x * 1, x + 0][r % 5]
        elif kind == "reduce":
            if x.ndim == 0:
                v = x + 1
            else:
                axis = r % x.ndim
                keep = bool(r & 1)
                v = [bz.sum, bz.max, bz.mean, bz.min][r % 4](x, axis=axis, keepdims=keep)
        elif kind == "library":  # a matmul between kernels: a dependency the fuser must see
            n = x.shape[-1] if x.ndim else 1
            m = np.arange(n * n).reshape(n, n) % 3 - 1
            v = bz.reshape(x, (1,)) @ bz.asarray(m.astype(x.dtype)) if x.ndim == 0 \
                else x @ bz.asarray(m.astype(x.dtype))
        elif kind == "softmax":
            v = bz.softmax(x.astype(bz.float32), axis=r % x.ndim) if x.ndim else x
        else:  # views
            if x.ndim == 0:
                v = bz.broadcast_to(x, (2,))
            else:
                choice = r % 5
                if choice == 0:
                    v = bz.permute_dims(x, tuple(reversed(range(x.ndim))))
                elif choice == 1:
                    v = x[..., ::-1] if r & 2 else x[::2]
                elif choice == 2:
                    v = bz.reshape(x, (-1,))
                elif choice == 3:
                    v = bz.expand_dims(x, axis=0)
                else:
                    v = bz.broadcast_to(x, (2,) + x.shape)
        vals.append(v)
    return [vals[i] for i in outs]


def run_program(spec, backend) -> list[np.ndarray]:
    results = build_program(spec)
    backend.evaluate([o._node for o in results])
    return [np.asarray(o) for o in results]


def interpret(g: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Execute an optimizer graph op by op (the reference for single passes)."""
    vals: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for n in g.nodes:
            if n.op == "input":
                vals.append(inputs[n.value])
            elif n.op == "const":
                vals.append(np.asarray(n.value, dtype=n.dtype))
            else:
                vals.append(reference_eval(OPS[n.op], n.attrs, n.dtype,
                                           *[vals[i] for i in n.inputs]))
    return [vals[o] for o in g.outputs]


def assert_close_lists(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype.kind == "f":
            tol = 1e-12 if a.dtype == np.float64 else 1e-5
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


@settings(max_examples=RANDOM_GRAPH_EXAMPLES, deadline=None, derandomize=True)
@given(programs())
def test_each_pass_preserves_values(spec) -> None:
    """simplify alone, then fuse + plan_memory alone, each against op-by-op execution."""
    outs = build_program(spec)
    g, leaves = Graph.from_nodes([o._node for o in outs])
    inputs = [leaf.data for leaf in leaves]
    reference = interpret(g, inputs)
    simplified = simplify(g)
    assert_close_lists(interpret(simplified, inputs), reference)
    with np.errstate(all="ignore"):
        scheduled = run_schedule(plan_memory(fuse(g)), inputs)
    assert_close_lists(scheduled, reference)


@settings(max_examples=RANDOM_GRAPH_EXAMPLES, deadline=None, derandomize=True)
@given(programs())
def test_optimized_schedules_match_op_by_op_execution(spec) -> None:
    optimized = run_program(spec, NumpyBackend(optimize=True, skip_tiny=False))
    assert_close_lists(optimized, run_program(spec, REFERENCE))


@pytest.mark.parametrize("dtype", [bz.float16, bz.bfloat16])
def test_low_precision_chains_stay_close_to_op_by_op(dtype) -> None:
    data = np.linspace(-2, 2, 257, dtype=np.float32)

    def program():
        x = bz.asarray(data).astype(dtype)
        return bz.softmax(bz.tanh(x) * 0.5 + x * x, axis=0), bz.exp(-x * x) + 1

    fused = program()
    NumpyBackend(skip_tiny=False).evaluate([a._node for a in fused])
    ref = program()
    REFERENCE.evaluate([a._node for a in ref])
    for a, b in zip(fused, ref):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(np.asarray(a).astype(np.float32),
                                   np.asarray(b).astype(np.float32), rtol=2e-2, atol=1e-3)


# ---------------------------------------------------------------- memory plan
def test_chain_of_20_ops_plans_inputs_plus_output_plus_at_most_one_temporary() -> None:
    n = 1 << 21  # 8 MB per float32 array
    x = bz.asarray(np.linspace(-1, 1, n, dtype=np.float32))
    y = x
    for i in range(20):
        y = bz.tanh(y) * 0.9 + 0.1 if i % 2 else y * y - 0.5
    s = kernels(y)
    nbytes = 4 * n
    assert s.peak_bytes <= 3 * nbytes
    tracemalloc.start()
    bz.eval(y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= s.peak_bytes - nbytes + nbytes // 4, (peak, s.peak_bytes)  # input not traced


def test_dead_buffers_are_reused_in_place() -> None:
    x = bz.asarray(np.ones((256, 256), np.float32))
    a = bz.exp(x @ x * (1 / 256))  # the matmul result dies into the exp kernel
    b = a @ x
    c = bz.tanh(b)  # b dies here: tanh runs in place over it
    s = kernels(c)
    mm1, exp_k, mm2, tanh_k = s.steps
    assert s.storage[exp_k.kernel.stores[0].slot] == s.storage[mm1.output]
    assert s.storage[tanh_k.kernel.stores[0].slot] == s.storage[mm2.output]
    assert len(s.storage_bytes) == 2 and s.peak_bytes <= 3 * 256 * 256 * 4
    want = np.tanh(np.exp(np.ones((256, 256)) @ np.ones((256, 256)) / 256) @ np.ones((256, 256)))
    np.testing.assert_allclose(np.asarray(c), want, rtol=1e-6)


# ---------------------------------------------------------------- cache
def test_rebuilding_the_same_graph_hits_the_schedule_cache() -> None:
    x = bz.asarray(np.ones((32, 32), np.float32))  # above the tiny-graph threshold
    before = CACHE.stats()
    for _ in range(5):
        bz.eval(bz.softmax(x * 3.0, axis=-1))
    after = CACHE.stats()
    assert after.misses - before.misses <= 1
    assert after.hits - before.hits >= 4


def test_small_graphs_compile_only_when_they_come_back() -> None:
    """A graph of 9-64 nodes on tiny arrays runs op by op the first time (the optimizer
    costs ~1 ms, op by op a few us per node) and is compiled and cached when it comes
    back: ``x[i]`` arithmetic in a loop over new i no longer optimizes every time."""
    backend = NumpyBackend()
    x = bz.asarray(np.linspace(-1, 1, 6, dtype=np.float32))

    def graph(i):  # (x[i] itself is a scalar read: arithmetic on it runs at once)
        y = x[i:i + 1] * 2.0
        for _ in range(6):
            y = bz.tanh(y) + x[i + 1:i + 2] * 0.5
        return y

    def reference(i):
        xn = np.linspace(-1, 1, 6, dtype=np.float32)
        y = xn[i:i + 1] * np.float32(2.0)
        for _ in range(6):
            y = np.tanh(y) + xn[i + 1:i + 2] * np.float32(0.5)
        return y

    CACHE.clear()
    for i, (hits, misses) in enumerate([(0, 0), (0, 1), (1, 1)]):
        out = graph(1)
        backend.evaluate([out._node])
        assert (CACHE.hits, CACHE.misses) == (hits, misses), i
        np.testing.assert_allclose(np.asarray(out), reference(1), rtol=1e-6)


def test_different_shapes_or_constants_miss_the_cache() -> None:
    a = compile_graph([(bz.ones((3, 3)) * bz.asarray(np.ones(3, np.float32)))._node])[0]
    b = compile_graph([(bz.ones((4, 3)) * bz.asarray(np.ones(3, np.float32)))._node])[0]
    assert a is not b
    x = bz.asarray(np.ones(3, np.float32))
    c = compile_graph([(x * 2.0)._node])[0]
    d = compile_graph([(x * -2.0)._node])[0]
    assert c is not d


# ---------------------------------------------------------------- views
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_view_index_maps_agree_with_numpy(data) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4))
    base = np.arange(int(np.prod(shape)))
    arr, view = base.reshape(shape), View.contiguous(shape)
    for _ in range(data.draw(st.integers(1, 5))):
        op = data.draw(st.sampled_from(["permute", "slice", "reshape", "broadcast"]))
        if op == "permute":
            axes = tuple(data.draw(st.permutations(range(arr.ndim))))
            arr, view = arr.transpose(axes), view.permute(axes)
        elif op == "slice":
            sl = tuple(slice(None, None, data.draw(st.sampled_from([-2, -1, 1, 2]))).indices(n)
                       for n in arr.shape)
            arr = arr[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in sl)]
            view = view.slice(sl)
        elif op == "reshape":
            new = (arr.size,) if data.draw(st.booleans()) else (1,) + arr.shape
            v = view.reshape(new)
            if v is None:  # not expressible: must be because numpy would copy
                assert not np.shares_memory(arr.reshape(new), base) or arr.size <= 1
                continue
            arr, view = arr.reshape(new), v
        else:
            arr, view = np.broadcast_to(arr, (2,) + arr.shape), view.broadcast((2,) + arr.shape)
        from braze.backends.numpy_backend import strided

        np.testing.assert_array_equal(strided(base, view), arr)
