"""bz.vmap: vmap(f)(xs) equals stacking f(x) per example (exactly: the same ops on the
same values), over every family of batching rule, the per-example fallback, in_axes /
out_axes, unmapped arguments, and compositions with grad, jvp and compile; bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.arrays import batching


def _r(seed, shape, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


W = _r(0, (4, 3))
IDX = np.array([2, 0, 2])

FUNCS = {
    "elementwise": lambda x: bz.tanh(x) * 2.0 + bz.exp(x[0]),
    "broadcast_unmapped": lambda x: x * bz.asarray(_r(1, (3, 4))),
    "reductions": lambda x: bz.sum(x, axis=0) + bz.max(x) - bz.mean(x, axis=1, keepdims=True),
    "argmax_flat": lambda x: bz.argmax(x),
    "argmax_axis": lambda x: bz.argmax(x, axis=1),
    "softmax": lambda x: bz.softmax(x, axis=-1),
    "scan": lambda x: bz.cumulative_sum(x, axis=1),
    "views": lambda x: bz.reshape(x.T, (12,))[::2],
    "broadcast_to": lambda x: bz.broadcast_to(x[0], (2, 4)),
    "concat": lambda x: bz.concat([x, bz.asarray(_r(2, (1, 4)))], axis=0),
    "setitem": lambda x: _setitem(x),
    "matmul_vec": lambda x: x @ bz.asarray(_r(3, (4,))),
    "matmul_mat": lambda x: bz.asarray(W) @ x,
    "matmul_both_1d": lambda x: bz.matmul(x[0], x[1]),
    "gather": lambda x: x[:, bz.asarray(IDX)],
    "gather_rows": lambda x: x[bz.asarray(IDX) % 3],
    "take_along": lambda x: bz.take_along_axis(x, bz.argsort(x, axis=1), axis=1),
    "sort": lambda x: bz.sort(x, axis=0) + bz.sort(x),
    "roll": lambda x: bz.roll(x, 1, axis=1),
    "linalg": lambda x: bz.linalg.inv(x[:, :3] @ x[:, :3].T + bz.eye(3)),
    "solve": lambda x: bz.linalg.solve(x[:, :3] @ x[:, :3].T + bz.eye(3), x[:, 3]),
    "norm": lambda x: bz.linalg.vector_norm(x, axis=1),
    "where": lambda x: bz.where(x > 0, x, bz.asarray(_r(4, (3, 4)))),
}


def _setitem(x):
    y = x * 1.0
    y[1] = x[0] * 3.0
    return y


def _stack(f, xs, axis=0):
    return np.stack([np.asarray(f(bz.asarray(x))) for x in np.moveaxis(xs, axis, 0)])


@pytest.mark.parametrize("name", sorted(FUNCS))
@given(batch=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_vmap_equals_stacked_examples(name, batch, seed) -> None:
    xs = _r(seed, (batch, 3, 4))
    f = FUNCS[name]
    got = np.asarray(bz.vmap(f)(bz.asarray(xs)))
    want = _stack(f, xs)
    assert got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_in_axes_out_axes_and_unmapped_arguments() -> None:
    xs, ys = _r(0, (3, 5, 2)), _r(1, (2, 5))
    got = bz.vmap(lambda x, y, z: x @ y + z, in_axes=(1, 1, None), out_axes=1)(
        bz.asarray(xs), bz.asarray(ys), bz.asarray(2.0))
    want = np.stack([xs[:, i] @ ys[:, i] + 2.0 for i in range(5)], axis=1)
    assert np.allclose(np.asarray(got), want)
    # pytrees: a dict argument mapped, an output tuple
    out = bz.vmap(lambda p: (p["a"] * 2.0, bz.sum(p["b"])))({"a": bz.ones((4, 2)),
                                                              "b": bz.ones((4, 3))})
    assert out[0].shape == (4, 2) and out[1].tolist() == [3.0] * 4
    # an output that does not depend on the mapped input is broadcast over the batch
    assert bz.vmap(lambda x: bz.ones(2))(bz.ones((3, 5))).shape == (3, 2)


def test_fallback_runs_per_example_with_one_warning() -> None:
    xs = _r(0, (3, 4))
    f = lambda x: bz.cumulative_prod(bz.fft.irfft(bz.fft.rfft(x)), axis=0)  # noqa: E731
    batching._WARNED.clear()  # (one warning per op and process)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = np.asarray(bz.vmap(f)(bz.asarray(xs)))
    assert np.allclose(got, _stack(f, xs))
    assert any("no batching rule" in str(w.message) for w in seen)


def test_attention_and_rope_fold_the_batch() -> None:
    q, k, v = _r(0, (3, 1, 2, 4, 8)), _r(1, (3, 1, 2, 5, 8)), _r(2, (3, 1, 2, 5, 8))
    f = lambda q, k, v: bz.fast.scaled_dot_product_attention(  # noqa: E731
        bz.fast.rope(q, 8, traditional=False, base=1e4, offset=1), k, v, scale=0.3)
    got = np.asarray(bz.vmap(f)(bz.asarray(q), bz.asarray(k), bz.asarray(v)))
    want = np.stack([np.asarray(f(bz.asarray(q[i]), bz.asarray(k[i]), bz.asarray(v[i])))
                     for i in range(3)])
    assert np.allclose(got, want, rtol=1e-6, atol=1e-7)


def test_compositions() -> None:
    xs = _r(0, (5, 4))
    loss = lambda x: bz.sum(bz.sin(x) * x) + bz.max(x)  # noqa: E731
    per = np.stack([np.asarray(bz.grad(loss)(bz.asarray(x))) for x in xs])
    # vmap(grad(f)): per-example gradients
    assert np.allclose(np.asarray(bz.vmap(bz.grad(loss))(bz.asarray(xs))), per)
    # grad(vmap(f)): the gradient of the summed batch is the stacked per-example ones
    g = bz.grad(lambda xs: bz.sum(bz.vmap(loss)(xs)))(bz.asarray(xs))
    assert np.allclose(np.asarray(g), per)
    # jvp(vmap(f))
    t = _r(1, (5, 4))
    _, (tan,) = bz.jvp(bz.vmap(loss), [bz.asarray(xs)], [bz.asarray(t)])
    assert np.allclose(np.asarray(tan), np.sum(per * t, axis=1))
    # compile(vmap(f)) and vmap(compile(f))
    c = bz.compile(bz.vmap(loss))
    want = np.array([float(loss(bz.asarray(x))) for x in xs])
    assert np.allclose(np.asarray(c(bz.asarray(xs))), want)
    assert np.allclose(np.asarray(c(bz.asarray(xs))), want)
    assert np.allclose(np.asarray(bz.vmap(bz.compile(loss))(bz.asarray(xs))), want)
    # vmap(vmap(f))
    xss = _r(2, (2, 3, 4))
    want2 = np.array([[float(loss(bz.asarray(x))) for x in row] for row in xss])
    assert np.allclose(np.asarray(bz.vmap(bz.vmap(loss))(bz.asarray(xss))), want2)


def test_errors_name_vmap_and_the_argument() -> None:
    with pytest.raises(ValueError, match="vmap: mapped axes have different sizes: 3 and 4"):
        bz.vmap(lambda x, y: x + y)(bz.ones((3, 2)), bz.ones((4, 2)))
    with pytest.raises(ValueError, match=r"vmap: in_axes 2 out of range .* shape \(3, 2\)"):
        bz.vmap(lambda x: x, in_axes=2)(bz.ones((3, 2)))
    with pytest.raises(ValueError, match="vmap: no argument is mapped"):
        bz.vmap(lambda x: x, in_axes=None)(bz.ones(3))
    with pytest.raises(ValueError, match="vmap: in_axes has 1 entries for 2 arguments"):
        bz.vmap(lambda x, y: x, in_axes=(0,))(bz.ones(3), bz.ones(3))
