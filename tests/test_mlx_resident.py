"""The ``mlx`` backend's resident execution (backends/mlx/resident.py, library.py):
values stay ``mx.array`` s through a schedule, crossings are counted and asserted, a
compiled function's constants are held across calls, slots written in parts (boxes and
scatters) and the MLX library ops match the numpy reference.

Tolerances: float32 results within rtol 1e-5 / atol 1e-5 of the reference (MLX's
matmul and attention sum in another order); the quantized matmul within 1e-4 relative
to the row's scale (the reference dequantizes then multiplies in float32)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.backends import mlx as mlx_backend

pytestmark = pytest.mark.skipif(not mlx_backend.available(), reason="mlx not installed")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """These tests choose their backends themselves: run the module once."""
    yield "none"


@pytest.fixture
def be():
    return bz.backends.get("mlx")


def _delta(be, before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in be.stats.items() if v != before.get(k, 0)}


def _mlp():
    rng = np.random.default_rng(0)
    layers = [bz.nn.Linear(16, 32), bz.nn.Linear(32, 32), bz.nn.Linear(32, 8)]
    for m in layers:
        m.weight = bz.asarray(rng.standard_normal(m.weight.shape).astype(np.float32) * 0.3)
        m.bias = bz.asarray(rng.standard_normal(m.weight.shape[0]).astype(np.float32))

    def f(x):
        for m in layers[:-1]:
            x = bz.nn.relu(m(x))
        return bz.softmax(layers[-1](x), axis=-1)

    return f


def test_a_compiled_mlp_crosses_once_each_way_and_holds_its_weights(be) -> None:
    f = _mlp()
    g = bz.compile(f)
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    with bz.backend("numpy"):
        want = np.asarray(f(bz.asarray(x)))
    with bz.backend("mlx"):
        before = dict(be.stats)
        first = np.asarray(g(bz.asarray(x)))
        d1 = _delta(be, before)
        before = dict(be.stats)
        second = np.asarray(g(bz.asarray(x)))
        d2 = _delta(be, before)
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(first, second)
    assert d1["held"] == 6  # three weights, three biases: converted once
    assert d1["uploads"] == 1 and d1["downloads"] == 1
    # the replay: x in, the result out, nothing else crosses and nothing runs on the host
    assert d2["uploads"] == 1 and d2["downloads"] == 1 and "held" not in d2
    assert "numpy" not in d2 and "host_library" not in d2
    assert d2["mlx_library"] == 3 and d2["lower"] >= 1


def test_a_held_constant_is_dropped_with_its_host_array(be) -> None:
    with bz.backend("mlx"):
        w = bz.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
        g = bz.compile(lambda x: x @ w.T * 2.0)
        n = len(be.held)
        g(bz.asarray(np.ones((2, 4), np.float32)))
    # w is a closure array: read at every call (it may be rebound), never held
    assert len(be.held) == n


def test_eval_crosses_once(be) -> None:
    x = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    with bz.backend("mlx"):
        a = bz.asarray(x)
        before = dict(be.stats)
        y = np.asarray(bz.exp(bz.tanh(a) @ a) / 3.0 + a.sum(axis=0))
        d = _delta(be, before)
    np.testing.assert_allclose(y, np.exp(np.tanh(x) @ x) / 3.0 + x.sum(axis=0),
                               rtol=1e-5, atol=1e-5)
    assert d["uploads"] == 1 and d["downloads"] == 1 and "numpy" not in d


def test_a_host_library_op_crosses_and_comes_back(be) -> None:
    x = np.random.default_rng(2).standard_normal((40, 30)).astype(np.float32)
    with bz.backend("mlx"):
        before = dict(be.stats)
        y = np.asarray(bz.roll(bz.exp(bz.asarray(x)), 3, axis=-1) + 1.0)
        d = _delta(be, before)
    np.testing.assert_allclose(y, np.roll(np.exp(x), 3, axis=-1) + 1.0, rtol=1e-6)
    # x in; exp's result out to numpy's roll; the rolled values back in; the result out
    assert d["host_library"] == 1 and d["uploads"] == 2 and d["downloads"] == 2


@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(0, 2),
       st.integers(2, 4))
def test_slots_written_in_parts_match_numpy(shape, axis, parts) -> None:
    axis = axis % len(shape)
    rng = np.random.default_rng(len(shape) * 7 + axis)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(parts)]

    def f(*a):
        c = bz.concatenate([bz.exp(v) for v in a], axis=axis)
        s = bz.stack([v * 2.0 for v in a], axis=-1)  # a store per part, strided
        return c, s

    with bz.backend("mlx"):
        c, s = bz.compile(f)(*[bz.asarray(v) for v in xs])
    np.testing.assert_allclose(np.asarray(c), np.concatenate([np.exp(v) for v in xs], axis),
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(s), np.stack([v * 2 for v in xs], axis=-1))


def test_box_and_scatter_stores() -> None:
    from braze.backends.mlx.resident import _box_start, _flat_indices
    from braze.graph.view import View

    # rows 1..2, columns 2..4 of a (4, 6) array: a box
    assert _box_start(View((2, 3), (6, 1), 8), (4, 6)) == [1, 2]
    # every other column: not a box; its flat indices
    v = View((4, 3), (6, 2), 1)
    assert _box_start(v, (4, 6)) is None
    np.testing.assert_array_equal(np.asarray(_flat_indices(v)),
                                  np.arange(24).reshape(4, 6)[:, 1::2].reshape(-1))


def test_an_error_found_only_at_evaluation_reruns_step_by_step(be, monkeypatch) -> None:
    import mlx.core as mx

    from braze.backends.mlx import resident

    real = mx.eval
    calls = {"n": 0}

    def eval_once_broken(*a):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("device lost")
        return real(*a)

    monkeypatch.setattr(resident.mx, "eval", eval_once_broken)
    x = np.linspace(0, 1, 300, dtype=np.float32)
    with bz.backend("mlx"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = np.asarray(bz.sin(bz.asarray(x)) * 3.0 + 1.0)
    np.testing.assert_allclose(y, np.sin(x) * 3.0 + 1.0, rtol=1e-6)
    msgs = [str(m.message) for m in w if "mlx backend" in str(m.message)]
    assert len(msgs) == 1 and "device lost" in msgs[0] and "step by step" in msgs[0]


# ---------------------------------------------------------------- library ops in MLX
def _library_in_mlx(be, fn, *args):
    """fn(*args) compiled on mlx (asserting its library op ran in MLX) and on numpy."""
    with bz.backend("mlx"):
        before = dict(be.stats)
        got = np.asarray(bz.compile(fn)(*[bz.asarray(a) for a in args]))
        d = _delta(be, before)
    with bz.backend("numpy"):
        want = np.asarray(fn(*[bz.asarray(a) for a in args]))
    assert d.get("mlx_library", 0) >= 1 and "host_library" not in d, d
    return got, want


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("rows", [1, 7])
def test_quantized_matmul_in_mlx(be, bits, rows) -> None:
    rng = np.random.default_rng(bits + rows)
    w = rng.standard_normal((48, 128)).astype(np.float32)
    wq, s, b = bz.quantize(bz.asarray(w), group_size=32, bits=bits)
    x = rng.standard_normal((rows, 128)).astype(np.float32)
    got, want = _library_in_mlx(
        be, lambda x, wq, s, b: bz.quantized_matmul(x, wq, s, b, group_size=32, bits=bits),
        x, np.asarray(wq), np.asarray(s), np.asarray(b))
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-4 * scale


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("per_row", [False, True])
def test_rope_in_mlx(be, traditional, per_row) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 5, 16)).astype(np.float32)
    off = np.array([0, 7, 130], np.int32) if per_row else np.int32(11)
    got, want = _library_in_mlx(
        be, lambda x, o: bz.fast.rope(x, 16, traditional=traditional, base=10000.0,
                                      scale=1.0, offset=o), x, off)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_attention_in_mlx_without_and_with_a_cache(be) -> None:
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 6, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    pk = rng.standard_normal((1, 2, 10, 8)).astype(np.float32)
    pv = rng.standard_normal((1, 2, 10, 8)).astype(np.float32)
    got, want = _library_in_mlx(
        be, lambda q, k, v: bz.fast.scaled_dot_product_attention(q, k, v, scale=0.3,
                                                                  mask="causal"), q, k, v)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got, want = _library_in_mlx(
        be, lambda q, k, v, pk, pv, n: bz.fast.scaled_dot_product_attention(
            q, k, v, scale=0.3, mask="causal", past=(pk, pv), past_length=n), q, k, v, pk, pv,
        np.int32(6))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batched_decode_attention_in_mlx(be) -> None:
    """One query row per sequence, each at its own cache length in its own cache slot."""
    rng = np.random.default_rng(5)
    b, slots, cap = 4, 6, 12
    q = rng.standard_normal((b, 6, 1, 8)).astype(np.float32)
    k = rng.standard_normal((b, 2, 1, 8)).astype(np.float32)
    v = rng.standard_normal((b, 2, 1, 8)).astype(np.float32)
    pk = rng.standard_normal((slots, 2, cap, 8)).astype(np.float16)
    pv = rng.standard_normal((slots, 2, cap, 8)).astype(np.float16)
    lens = np.array([0, 5, 12, 3], np.int32)
    idx = np.array([5, 0, 2, 3], np.int32)
    got, want = _library_in_mlx(
        be, lambda q, k, v, pk, pv, n, i: bz.fast.scaled_dot_product_attention(
            q, k, v, scale=0.35, mask="causal", past=(pk, pv), past_length=n,
            past_index=i),
        q, k, v, pk, pv, lens, idx)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@given(st.data())
def test_gather_in_mlx_matches_numpy_indexing(data) -> None:
    be = bz.backends.get("mlx")
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=3, max_size=3)))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 0.5
    i = np.asarray(data.draw(st.lists(st.integers(-shape[0], shape[0] - 1), min_size=1,
                                      max_size=4)), np.int32)
    j = np.asarray(data.draw(st.lists(st.integers(-shape[-1], shape[-1] - 1), min_size=1,
                                      max_size=1)), np.int64)
    form = data.draw(st.sampled_from(["rows", "pairs", "slice_between", "new_axis"]))
    fn = {"rows": lambda x, i, j: x[i] * 2.0,
          "pairs": lambda x, i, j: x[i, ..., j] + 1.0,
          "slice_between": lambda x, i, j: x[i, 1:, j] - 1.0,
          "new_axis": lambda x, i, j: x[None, i] * 3.0}[form]
    want = fn(x, i, j)
    with bz.backend("mlx"):
        before = dict(be.stats)
        got = np.asarray(bz.compile(fn)(bz.asarray(x), bz.asarray(i), bz.asarray(j)))
        d = _delta(be, before)
    np.testing.assert_array_equal(got, want)
    assert d.get("mlx_library", 0) >= 1 and "host_library" not in d, d


def test_gather_out_of_range_raises_the_reference_error() -> None:
    x = bz.asarray(np.ones((4, 3), np.float32))
    with bz.backend("mlx"), pytest.raises(IndexError, match="getitem/take"):
        bz.compile(lambda x, i: x[i] * 2.0)(x, bz.asarray(np.array([1, 4], np.int32)))


@given(st.data())
def test_sort_argsort_and_scans_in_mlx_match_numpy(data) -> None:
    be = bz.backends.get("mlx")
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    descending = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(["float32", "int32", "int64"]))
    # few distinct values: ties everywhere (the order of equal elements is checked)
    x = np.asarray(data.draw(st.lists(st.integers(-3, 3), min_size=int(np.prod(shape)),
                                      max_size=int(np.prod(shape))))).reshape(shape)
    x = x.astype(dtype)
    if dtype == "float32" and x.size > 1:
        x.reshape(-1)[0] = np.nan

    def fn(x):
        return (bz.sort(x, axis=axis, descending=descending) + 0,
                bz.argsort(x, axis=axis, descending=descending, stable=True) + 0,
                bz.cumsum(x, axis=axis) + 0)

    with bz.backend("numpy"):
        want = [np.asarray(v) for v in fn(bz.asarray(x))]
    with bz.backend("mlx"):
        before = dict(be.stats)
        got = [np.asarray(v) for v in bz.compile(fn)(bz.asarray(x))]
        d = _delta(be, before)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert d.get("mlx_library", 0) == 3 and "host_library" not in d, d


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_ffts_in_mlx(name) -> None:
    """MLX's FFTs on float32 / complex64 (complex64 values resident in MLX, the kernels
    around them on the host); within 1e-5 of the largest |reference|."""
    be = bz.backends.get("mlx")
    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    if name == "irfftn":
        x = np.fft.rfftn(x, axes=(1,)).astype(np.complex64)
    f = getattr(bz.fft, name)
    got, want = _library_in_mlx(be, lambda x: f(x, axes=(1,), norm="ortho") * 2.0, x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())


def test_inverse_and_determinant_in_mlx() -> None:
    be = bz.backends.get("mlx")
    rng = np.random.default_rng(14)
    a = (rng.standard_normal((3, 5, 5)) + 4 * np.eye(5)).astype(np.float32)
    got, want = _library_in_mlx(be, lambda a: bz.linalg.inv(a) + 0.0, a)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    got, want = _library_in_mlx(be, lambda a: bz.linalg.det(a) + 0.0, a)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_a_singular_inverse_raises_numpys_error_on_mlx() -> None:
    s = bz.asarray(np.array([[1.0, 2.0], [2.0, 4.0]], np.float32))
    with bz.backend("mlx"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (MLX's failure, then numpy's)
        with pytest.raises(np.linalg.LinAlgError):
            bz.compile(lambda a: bz.linalg.inv(a) + 0.0)(s)
