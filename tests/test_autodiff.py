"""bz.grad / value_and_grad / vjp / jvp / stop_gradient / custom_vjp against central
finite differences in float64, on every op with a gradient rule and on hypothesis-drawn
graphs; compositions (grad of grad, jvp of grad, compile of grad, grad of compile);
kernel counts of compiled backward passes; bad input.

Tolerances: a directional derivative <grad f(x), v> against (f(x + e v) - f(x - e v)) / 2e
with e = 1e-6 in float64 agrees to rtol 1e-5 (the difference's truncation error is
~e^2 |f'''|, its rounding ~1e-16 |f| / e).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, broadcastable_shapes

import braze as bz

EPS = 1e-6
RTOL, ATOL = 1e-5, 1e-8


def _np(x):
    return np.asarray(x)


def _directional_fd(f, args, argnums, direction):
    """(f(x + e v) - f(x - e v)) / 2e along ``direction`` for the arguments ``argnums``."""
    def at(sign):
        moved = list(args)
        for i, v in zip(argnums, direction):
            moved[i] = bz.asarray(_np(args[i]) + sign * EPS * v)
        return float(f(*moved))
    return (at(1.0) - at(-1.0)) / (2 * EPS)


def check_grad(f, *args, argnums=None, seed=0, rtol=RTOL):
    """grad f against central differences along a random direction (float64 args)."""
    argnums = tuple(range(len(args))) if argnums is None else argnums
    gs = bz.grad(f, argnums=argnums)(*args)
    rng = np.random.default_rng(seed)
    direction = [rng.standard_normal(np.shape(_np(args[i]))) for i in argnums]
    lhs = sum(float(np.sum(_np(g) * v)) for g, v in zip(gs, direction))
    rhs = _directional_fd(f, args, argnums, direction)
    scale = max(1.0, abs(rhs))
    assert abs(lhs - rhs) <= rtol * scale + ATOL, (lhs, rhs)
    for g, i in zip(gs, argnums):
        assert g.shape == np.shape(_np(args[i])) and g.dtype == bz.float64
    return gs


def weighted(op, w):
    """A scalar loss over op's output: the sum of out * w (w fixed, broadcast)."""
    return lambda *xs: bz.sum(op(*xs) * w)


def _values(seed, shape, lo, hi):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _distinct(seed, shape, lo, hi):
    """Values in [lo, hi] at least (hi - lo) / (2 size) apart: sorts, maxima and argsorts
    stay put under a finite-difference step (a near tie would cross over)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    steps = rng.permutation(n) + rng.uniform(0.0, 0.5, n)
    return (lo + (hi - lo) * steps / max(n, 1)).reshape(shape)


# ---------------------------------------------------------------- elementwise ops
UNARY = {  # op -> the domain values are drawn from (away from non-differentiable points)
    "exp": (-2, 2), "expm1": (-2, 2), "exp2": (-2, 2), "log": (0.2, 3), "log1p": (-0.5, 3),
    "log2": (0.2, 3), "log10": (0.2, 3), "sqrt": (0.2, 3), "sin": (-3, 3), "cos": (-3, 3),
    "tan": (-1.2, 1.2), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3),
    "sinh": (-2, 2), "cosh": (-2, 2), "tanh": (-2, 2), "asinh": (-3, 3), "acosh": (1.2, 3),
    "atanh": (-0.9, 0.9), "reciprocal": (0.3, 3), "sigmoid": (-4, 4), "negative": (-3, 3),
    "positive": (-3, 3), "square": (-3, 3), "abs": (0.2, 3), "sinc": (-2, 2),
    "deg2rad": (-3, 3), "rad2deg": (-3, 3), "real": (-3, 3), "conj": (-3, 3),
}
BINARY = {  # op -> domains of its two operands
    "add": ((-3, 3), (-3, 3)), "subtract": ((-3, 3), (-3, 3)),
    "multiply": ((-3, 3), (-3, 3)), "divide": ((-3, 3), (0.5, 3)),
    "pow": ((0.3, 2), (-2, 2)), "maximum": ((-3, 3), (-3, 3)), "minimum": ((-3, 3), (-3, 3)),
    "fmax": ((-3, 3), (-3, 3)), "fmin": ((-3, 3), (-3, 3)),
    "atan2": ((0.5, 3), (0.5, 3)), "hypot": ((0.5, 3), (0.5, 3)),
    "logaddexp": ((-3, 3), (-3, 3)), "logaddexp2": ((-3, 3), (-3, 3)),
    "remainder": ((0.2, 0.8), (1.0, 2.0)), "fmod": ((0.2, 0.8), (1.0, 2.0)),
    "copysign": ((0.2, 3), (-3, 3)),
}
shapes = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_unary_grad_matches_finite_differences(name, shape, seed) -> None:
    lo, hi = UNARY[name]
    x = bz.asarray(_values(seed, shape, lo, hi))
    w = bz.asarray(_values(seed + 1, shape, -1, 1))
    check_grad(weighted(getattr(bz, name), w), x, seed=seed)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=broadcastable_shapes((3, 2), min_dims=0, max_dims=3, min_side=1),
       seed=st.integers(0, 2**16), swap=st.booleans())
def test_binary_grad_matches_finite_differences(name, shapes, seed, swap) -> None:
    (la, ha), (lb, hb) = BINARY[name]
    sa, sb = ((3, 2), shapes) if not swap else (shapes, (3, 2))
    a = bz.asarray(_values(seed, sa, la, ha))
    b = bz.asarray(_values(seed + 1, sb, lb, hb))
    w = bz.asarray(_values(seed + 2, np.broadcast_shapes(sa, sb), -1, 1))
    # broadcasting: each operand's gradient is summed back to its own shape
    check_grad(weighted(getattr(bz, name), w), a, b, seed=seed)


def test_where_and_python_scalars() -> None:
    x = bz.asarray(_values(0, (4, 3), -2, 2))
    w = bz.asarray(_values(1, (4, 3), -1, 1))
    check_grad(lambda x: bz.sum(bz.where(x > 0, x * x, 3.0 * x) * w), x)
    check_grad(lambda x: bz.sum((2.0 - x) / 4.0 + 1.5 ** x), x)


def test_ties_of_max_and_maximum_split_evenly() -> None:
    g = bz.grad(lambda x: bz.max(x))(bz.asarray([1.0, 3.0, 3.0, 2.0]))
    assert g.tolist() == [0.0, 0.5, 0.5, 0.0]
    ga, gb = bz.grad(lambda a, b: bz.sum(bz.maximum(a, b)), argnums=(0, 1))(
        bz.asarray([1.0, 2.0]), bz.asarray([1.0, 0.0]))
    assert ga.tolist() == [0.5, 1.0] and gb.tolist() == [0.5, 0.0]


def test_piecewise_constant_ops_have_zero_gradient() -> None:
    x = bz.asarray([0.3, 1.7, -2.2])
    for f in (bz.floor, bz.ceil, bz.round, bz.sign, bz.trunc):
        assert bz.grad(lambda x, f=f: bz.sum(f(x) * x))(x).tolist() == _np(f(x)).tolist()


# ---------------------------------------------------------------- reductions, scans
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "logsumexp", "var",
                                  "std"])
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       seed=st.integers(0, 2**16), keepdims=st.booleans(), data=st.data())
def test_reduction_grad(name, shape, seed, keepdims, data) -> None:
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)),
                     label="axes")
    axis = tuple(axes) if axes else None
    counted = int(np.prod([shape[a] for a in (axes or range(len(shape)))]))
    assume(name != "std" or counted > 1)  # sqrt at 0: not differentiable
    lo, hi = (0.5, 1.5) if name == "prod" else (-2, 2)
    x = bz.asarray(_distinct(seed, shape, lo, hi))
    f = getattr(bz, name)
    out_shape = np.sum(np.zeros(shape), axis=axis, keepdims=keepdims).shape
    w = bz.asarray(_values(seed + 1, out_shape, -1, 1))
    check_grad(lambda x: bz.sum(f(x, axis=axis, keepdims=keepdims) * w), x, seed=seed)


def test_prod_grad_with_zeros_is_exact() -> None:
    g = bz.grad(lambda x: bz.prod(x))(bz.asarray([2.0, 0.0, 3.0, 4.0]))
    assert g.tolist() == [0.0, 24.0, 0.0, 0.0]
    g = bz.grad(lambda x: bz.prod(x))(bz.asarray([2.0, 0.0, 0.0]))
    assert g.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
       seed=st.integers(0, 2**16), include=st.booleans(), data=st.data())
def test_scan_grad(name, shape, seed, include, data) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    x = bz.asarray(_values(seed, shape, 0.5, 1.5))
    f = getattr(bz, name)
    out = f(x, axis=axis, include_initial=include)
    w = bz.asarray(_values(seed + 1, out.shape, -1, 1))
    check_grad(lambda x: bz.sum(f(x, axis=axis, include_initial=include) * w), x, seed=seed)


def test_cumprod_grad_with_a_zero() -> None:
    x = np.array([2.0, 0.0, 3.0, 0.5])
    g = bz.grad(lambda x: bz.sum(bz.cumulative_prod(x)))(bz.asarray(x))
    # d/dx_i sum_j prod_{k<=j} x_k, by hand
    want = [1 + 0 + 0 + 0, 2 + 2 * 3 + 2 * 3 * 0.5, 0.0, 0.0]
    assert np.allclose(_np(g), want)


def test_softmax_and_normalizations() -> None:
    x = bz.asarray(_values(3, (3, 5), -2, 2))
    w = bz.asarray(_values(4, (3, 5), -1, 1))
    check_grad(weighted(lambda x: bz.softmax(x, axis=-1), w), x)
    check_grad(weighted(lambda x: bz.fast.rms_norm(x, None, 1e-5), w), x)
    g = bz.asarray(_values(5, (5,), 0.5, 1.5))
    b = bz.asarray(_values(6, (5,), -1, 1))
    check_grad(lambda x, g, b: bz.sum(bz.fast.layer_norm(x, g, b, 1e-5) * w), x, g, b)
    check_grad(lambda x, g: bz.sum(bz.fast.rms_norm(x, g, 1e-5) * w), x, g)


# ---------------------------------------------------------------- views and data movement
VIEWS = {
    "reshape": lambda x: bz.reshape(x, (x.size,)),
    "transpose": lambda x: bz.permute_dims(x, tuple(reversed(range(x.ndim)))),
    "T": lambda x: x.mT if x.ndim >= 2 else x,
    "slice_step": lambda x: x[::2],
    "slice_neg_step": lambda x: x[::-1],
    "slice_inner": lambda x: x[..., 1:] if x.shape[-1] > 1 else x,
    "broadcast": lambda x: bz.broadcast_to(x, (2, *x.shape)),
    "expand_squeeze": lambda x: bz.squeeze(bz.expand_dims(x, 0), axis=0),
    "concat": lambda x: bz.concat([x, x * 2.0, x[:1]], axis=0),
    "stack": lambda x: bz.stack([x, bz.sin(x)], axis=-1),
    "flip": lambda x: bz.flip(x, axis=0),
    "roll": lambda x: bz.roll(x, 1, axis=0),
    "take_dups": lambda x: bz.take(x, bz.asarray([0, 0, x.shape[0] - 1]), axis=0),
    "fancy": lambda x: x[bz.asarray([1, 0, 1]) % x.shape[0]],
    "take_along": lambda x: bz.take_along_axis(
        x, bz.argsort(bz.cos(x * 3.0), axis=0), axis=0),
    "sort": lambda x: bz.sort(x, axis=0),
    "repeat": lambda x: bz.repeat(x, 2, axis=0),
    "tile": lambda x: bz.tile(x, (2,) + (1,) * (x.ndim - 1)),
    "pad": lambda x: bz.pad(x, [(1, 2)] + [(0, 0)] * (x.ndim - 1)),
    "setitem": lambda x: _setitem(x),
}


def _setitem(x):
    y = x * 1.0
    y[0] = x[-1] * 3.0
    return y


@pytest.mark.parametrize("name", sorted(VIEWS))
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       seed=st.integers(0, 2**16), strided=st.booleans())
def test_view_grad(name, shape, seed, strided) -> None:
    big = _distinct(seed, (2 * shape[0], *shape[1:]), -2, 2)
    # a non-contiguous argument (every other row of an evaluated array) or a plain one
    x = bz.asarray(big)[::2] if strided else bz.asarray(big[: shape[0]])
    f = VIEWS[name]
    out = f(x)
    w = bz.asarray(_values(seed + 1, out.shape, -1, 1))
    check_grad(lambda x: bz.sum(f(x) * w), x, seed=seed)


def test_gather_duplicates_accumulate() -> None:
    g = bz.grad(lambda x: bz.sum(x[bz.asarray([0, 0, 2, 0])]))(bz.asarray([1.0, 2.0, 3.0]))
    assert g.tolist() == [3.0, 0.0, 1.0]


# ---------------------------------------------------------------- matmul and friends
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                   ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                                   ((1, 2, 3), (4, 3, 2)), ((2, 1, 2, 3), (3, 3, 1))])
def test_matmul_grad(sa, sb) -> None:
    a, b = bz.asarray(_values(0, sa, -1, 1)), bz.asarray(_values(1, sb, -1, 1))
    w = bz.asarray(_values(2, np.matmul(_np(a), _np(b)).shape, -1, 1))
    check_grad(lambda a, b: bz.sum(bz.matmul(a, b) * w), a, b)


def test_einsum_tensordot_grad() -> None:
    a, b = bz.asarray(_values(0, (2, 3, 4), -1, 1)), bz.asarray(_values(1, (4, 3), -1, 1))
    check_grad(lambda a, b: bz.sum(bz.sin(bz.einsum("ijk,kj->i", a, b))), a, b)
    check_grad(lambda a, b: bz.sum(bz.tensordot(a, b, axes=([1, 2], [1, 0])) ** 2), a, b)


# ---------------------------------------------------------------- random graphs
SMOOTH_UNARY = ["sin", "cos", "tanh", "sigmoid", "square", "negative", "atan"]
SMOOTH_BINARY = ["add", "subtract", "multiply", "hypot_safe", "logaddexp"]


def _apply(name, *xs):
    if name == "hypot_safe":  # smooth everywhere, unlike hypot at (0, 0)
        return bz.sqrt(xs[0] * xs[0] + xs[1] * xs[1] + 1.0)
    return getattr(bz, name)(*xs)


@given(data=st.data(), seed=st.integers(0, 2**16))
def test_random_graphs_match_finite_differences(data, seed) -> None:
    sa = data.draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), label="a")
    sb = data.draw(broadcastable_shapes(sa, min_dims=0, max_dims=3, min_side=1), label="b")
    steps = data.draw(st.lists(st.tuples(st.sampled_from(SMOOTH_UNARY + SMOOTH_BINARY
                                                         + ["sum", "mean", "max"]),
                                         st.integers(0, 100), st.integers(0, 100)),
                               min_size=1, max_size=8), label="steps")
    a = bz.asarray(_values(seed, sa, -1.5, 1.5))
    b = bz.asarray(_values(seed + 1, sb, -1.5, 1.5))

    def f(a, b):
        pool = [a, b]
        for name, i, j in steps:
            x, y = pool[i % len(pool)], pool[j % len(pool)]
            if name in SMOOTH_UNARY:
                pool.append(_apply(name, x))
            elif name in SMOOTH_BINARY:
                pool.append(_apply(name, x, y))
            elif x.ndim:  # a reduction over the last axis, kept: broadcasts back later
                pool.append(getattr(bz, name)(x, axis=-1, keepdims=True))
        return bz.sum(bz.sin(pool[-1])) + bz.sum(pool[-2] * 0.5)

    check_grad(f, a, b, seed=seed)


# ---------------------------------------------------------------- compositions
def test_grad_of_grad() -> None:
    x = bz.asarray(_values(0, (4,), -2, 2))
    # d2/dx2 sum(sin(x) * x) = 2 cos x - x sin x
    h = bz.grad(lambda x: bz.sum(bz.grad(lambda y: bz.sum(bz.sin(y) * y))(x)))(x)
    xs = _np(x)
    assert np.allclose(_np(h), 2 * np.cos(xs) - xs * np.sin(xs), rtol=1e-12)
    assert bz.grad(bz.grad(bz.grad(lambda x: x ** 4)))(bz.asarray(2.0)).item() == 48.0


def test_grad_of_closure_over_outer_variable() -> None:
    # d/dx [d/dy (x * y)] at y = x is 1 (no perturbation confusion)
    f = lambda x: bz.grad(lambda y: x * y)(x)  # noqa: E731
    assert bz.grad(f)(bz.asarray(3.0)).item() == 1.0


def test_jvp_matches_finite_differences_and_hvp() -> None:
    x = bz.asarray(_values(0, (3, 4), -1, 1))
    t = bz.asarray(_values(1, (3, 4), -1, 1))
    f = lambda x: bz.tanh(x @ x.mT)  # noqa: E731
    outs, tans = bz.jvp(f, [x], [t])
    fd = (_np(f(bz.asarray(_np(x) + EPS * _np(t)))) - _np(f(bz.asarray(_np(x) - EPS * _np(t))))
          ) / (2 * EPS)
    assert np.allclose(_np(tans[0]), fd, rtol=1e-6, atol=1e-9)
    assert np.allclose(_np(outs[0]), _np(f(x)))
    # jvp(grad(f)): a Hessian-vector product
    loss = lambda x: bz.sum(bz.sin(x) ** 3)  # noqa: E731
    _, (hv,) = bz.jvp(bz.grad(loss), [x], [t])
    xs, ts = _np(x), _np(t)
    assert np.allclose(_np(hv), (6 * np.sin(xs) * np.cos(xs) ** 2 - 3 * np.sin(xs) ** 3) * ts)


def test_vjp_multiple_outputs() -> None:
    x, y = bz.asarray([1.0, 2.0]), bz.asarray([3.0, 4.0])
    outs, (gx, gy) = bz.vjp(lambda x, y: (x * y, bz.sum(x)), [x, y],
                            [bz.asarray([1.0, 10.0]), bz.asarray(100.0)])
    assert _np(outs[0]).tolist() == [3.0, 8.0] and outs[1].item() == 3.0
    assert gx.tolist() == [103.0, 140.0] and gy.tolist() == [1.0, 20.0]


def test_compile_of_grad_and_grad_of_compile() -> None:
    w = bz.asarray(_values(0, (3, 4), -1, 1).astype(np.float32))
    x = bz.asarray(_values(1, (5, 3), -1, 1).astype(np.float32))

    def loss(w, x):
        return bz.mean(bz.tanh(x @ w) ** 2)

    want = _np(bz.grad(loss)(w, x))
    step = bz.compile(bz.grad(loss))
    for _ in range(2):  # the second call replays
        assert np.allclose(_np(step(w, x)), want, rtol=1e-6, atol=1e-7)
    assert step.trace_count == 1
    assert np.allclose(_np(bz.grad(bz.compile(loss))(w, x)), want, rtol=1e-6, atol=1e-7)
    vg = bz.compile(bz.value_and_grad(loss))
    v, g = vg(w, x)
    assert np.isclose(v.item(), loss(w, x).item()) and np.allclose(_np(g), want, atol=1e-7)


def test_pytree_arguments_and_has_aux() -> None:
    params = {"w": bz.asarray([[1.0, 2.0]]), "b": [bz.asarray([0.5])]}

    def loss(p, x):
        y = x @ p["w"].mT + p["b"][0]
        return bz.sum(y * y), y

    (v, aux), g = bz.value_and_grad(loss, has_aux=True)(params, bz.asarray([[1.0, 1.0]]))
    assert v.item() == 12.25 and aux.tolist() == [[3.5]]
    assert g["w"].tolist() == [[7.0, 7.0]] and g["b"][0].tolist() == [7.0]
    g2, aux2 = bz.grad(loss, has_aux=True)(params, bz.asarray([[1.0, 1.0]]))
    assert g2["b"][0].tolist() == [7.0] and aux2.tolist() == [[3.5]]


def test_gradient_of_unused_argument_is_zero() -> None:
    g = bz.grad(lambda x, y: bz.sum(x), argnums=1)(bz.ones(2), bz.ones((2, 3)))
    assert g.shape == (2, 3) and not np.any(_np(g))


def test_lazy_arguments_and_float32() -> None:
    x = bz.ones((3,), dtype=bz.float32) * 2.0  # pending, never evaluated by the caller
    g = bz.grad(lambda x: bz.sum(x ** 3))(x)
    assert g.dtype == bz.float32 and g.tolist() == [12.0, 12.0, 12.0]


def test_stop_gradient_and_custom_vjp() -> None:
    x = bz.asarray([2.0, 3.0])
    assert bz.grad(lambda x: bz.sum(x * bz.stop_gradient(x)))(x).tolist() == [2.0, 3.0]

    @bz.custom_vjp
    def scaled(x, k):
        return x * k

    scaled.defvjp(lambda x, k: (x * k, k), lambda k, g: (g * k * 10.0, None))
    assert bz.grad(lambda x: bz.sum(scaled(x, 2.0)))(x).tolist() == [20.0, 20.0]
    assert scaled(x, 2.0).tolist() == [4.0, 6.0]  # outside transformations: the function


# ---------------------------------------------------------------- compiled backward kernels
def _kernels(f, *args):
    return bz.explain(f, *args).num_kernels


def test_backward_of_row_ops_is_one_kernel() -> None:
    x = bz.asarray(_values(0, (64, 128), -1, 1).astype(np.float32))
    w = bz.asarray(_values(1, (64, 128), -1, 1).astype(np.float32))
    g = bz.asarray(_values(2, (128,), 0.5, 1.5).astype(np.float32))
    cases = {
        "softmax": lambda x: bz.softmax(x, axis=-1),
        "log_softmax": lambda x: x - bz.logsumexp(x, axis=-1, keepdims=True),
        "rms_norm": lambda x: bz.fast.rms_norm(x, g, 1e-5),
        "layer_norm": lambda x: bz.fast.layer_norm(x, g, None, 1e-5),
        "chain": lambda x: bz.tanh(bz.exp(x) * 2.0 + 1.0) * bz.sigmoid(x),
    }
    for name, f in cases.items():
        n = _kernels(lambda x, w, f=f: bz.grad(lambda x: bz.sum(f(x) * w))(x), x, w)
        assert n == 1, (name, n)


def test_layer_backward_keeps_every_buffer_in_its_own_layout() -> None:
    """A ReLU layer's backward (ReLU mask, bias and weight cotangents): the weight's
    cotangent comes out in W's layout (contiguous: the optimizer reads it in order), and
    no elementwise kernel writes the transposed operand the weight's GEMM reads -- the
    GEMM reads it transposed in place. Forward and backward ReLU and the bias's sum are
    one kernel; the values match numpy within float32 rounding."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((32, 24)).astype(np.float32) * 0.2
    b1 = np.zeros(32, np.float32)
    w2 = rng.standard_normal((5, 32)).astype(np.float32) * 0.2
    x = rng.standard_normal((16, 24)).astype(np.float32)

    def loss(params, x):
        w1, b1, w2 = params
        return bz.sum(bz.maximum(x @ w1.T + b1, 0.0) @ w2.T)

    f = bz.compile(bz.grad(loss))
    args = ([bz.asarray(w1), bz.asarray(b1), bz.asarray(w2)], bz.asarray(x))
    rep = bz.explain(f, *args)
    kernels = [k for k in rep.kernels if k.kind == "kernel"]
    assert len(kernels) == 1, [k.name for k in kernels]
    assert all(shape != (32, 16) for k in kernels for shape, _ in k.outputs), rep
    gw1, gb1, gw2 = (np.asarray(g) for g in f(*args))
    assert gw1.flags.c_contiguous and gw2.flags.c_contiguous
    h = x @ w1.T + b1
    gh = np.where(h > 0, np.ones((16, 5), np.float32) @ w2, 0.0)
    np.testing.assert_allclose(gw1, gh.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb1, gh.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw2, np.ones((5, 16), np.float32) @ np.maximum(h, 0), rtol=1e-5,
                               atol=1e-5)


# ---------------------------------------------------------------- bad input
def test_errors_name_the_transformation_and_argument() -> None:
    x = bz.ones(3)
    with pytest.raises(TypeError, match=r"grad: the function must return a scalar.*shape \(3,\)"):
        bz.grad(lambda x: x * 2.0)(x)
    with pytest.raises(ValueError, match="grad: argnums 2 out of range for 1"):
        bz.grad(lambda x: bz.sum(x), argnums=2)(x)
    with pytest.raises(TypeError, match="grad: argument 0 has dtype int32"):
        bz.grad(lambda x: bz.sum(x))(bz.ones(3, dtype=bz.int32))
    with pytest.raises(TypeError, match="grad: argument 0 holds a str"):
        bz.grad(lambda x: bz.sum(x["a"]))({"a": "nope"})
    with pytest.raises(TypeError, match="grad: .* has_aux=True"):
        bz.grad(lambda x: bz.sum(x), has_aux=True)(x)
    with pytest.raises(TypeError, match="not known while tracing"):
        bz.grad(lambda x: bz.sum(x) * float(bz.sum(x)))(x)
    with pytest.raises(ValueError, match=r"vjp: cotangents\[0\] has shape \(2,\)"):
        bz.vjp(lambda x: x, [x], [bz.ones(2)])
    with pytest.raises(ValueError, match=r"jvp: tangents\[0\] has shape \(2,\)"):
        bz.jvp(lambda x: x, [x], [bz.ones(2)])
    # an op without a rule names itself
    with pytest.raises(TypeError, match=r"grad: op linalg\.svd.* no gradient rule"):
        bz.grad(lambda x: bz.sum(bz.linalg.svd(x)[1]))(bz.ones((3, 3)) + bz.eye(3))


# ---------------------------------------------------------------- library ops
@pytest.mark.parametrize("mask", [None, "causal", "array"])
def test_attention_grad(mask) -> None:
    q = bz.asarray(_values(0, (2, 4, 3, 8), -1, 1))
    k = bz.asarray(_values(1, (2, 2, 5, 8), -1, 1))
    v = bz.asarray(_values(2, (2, 2, 5, 8), -1, 1))
    w = bz.asarray(_values(3, (2, 4, 3, 8), -1, 1))
    m = bz.asarray(_values(4, (3, 5), 0, 1) > 0.3) if mask == "array" else mask
    check_grad(lambda q, k, v: bz.sum(bz.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask=m) * w), q, k, v)


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_grad(traditional) -> None:
    x = bz.asarray(_values(0, (2, 5, 8), -1, 1))
    w = bz.asarray(_values(1, (2, 5, 8), -1, 1))
    check_grad(lambda x: bz.sum(bz.fast.rope(x, 6, traditional=traditional, base=10000.0,
                                             offset=3) * w), x)


def test_quantized_matmul_grad_equals_dequantized_matmul() -> None:
    x = bz.asarray(_values(0, (3, 64), -1, 1).astype(np.float32))
    wq, s, b = bz.quantize(bz.asarray(_values(1, (4, 64), -1, 1).astype(np.float32)), bits=4)
    w = bz.asarray(_values(2, (3, 4), -1, 1).astype(np.float32))
    packed = bz.grad(lambda x, s, b: bz.sum(
        bz.quantized_matmul(x, wq, s, b, act="float") * w), argnums=(0, 1, 2))(x, s, b)
    plain = bz.grad(lambda x, s, b: bz.sum((x @ bz.dequantize(wq, s, b).mT) * w),
                    argnums=(0, 1, 2))(x, s, b)
    for a, c in zip(packed, plain):  # the same sums, regrouped: float32 rounding apart
        assert np.allclose(_np(a), _np(c), rtol=1e-5, atol=1e-5)


SQUARE = _values(0, (3, 3), -1, 1) + 3 * np.eye(3)
W33 = _values(1, (3, 3), -1, 1)
LINALG = {
    "det": lambda a: bz.linalg.det(a),
    "inv": lambda a: bz.sum(bz.linalg.inv(a) * W33),
    "slogdet": lambda a: bz.linalg.slogdet(a)[1],
    "solve_vector": lambda a: bz.sum(bz.sin(bz.linalg.solve(a, bz.asarray([1.0, -2.0, 0.5])))),
    "solve_batched": lambda a: bz.sum(bz.sin(bz.linalg.solve(
        a, bz.asarray(_values(2, (2, 3, 2), -1, 1))))),
    "cholesky": lambda a: bz.sum(bz.linalg.cholesky(a @ a.mT + bz.eye(3)) * W33),
    "cholesky_upper": lambda a: bz.sum(bz.linalg.cholesky(a @ a.mT + bz.eye(3), upper=True)
                                       * W33),
    "eigvalsh": lambda a: bz.sum(bz.linalg.eigvalsh(a + a.mT) * bz.asarray([1.0, 2.0, 3.0])),
    # (squared: an eigenvector's sign is arbitrary)
    "eigh_vectors": lambda a: bz.sum(bz.linalg.eigh(a + a.mT)[1] ** 2 * W33),
    "svdvals": lambda a: bz.sum(bz.linalg.svdvals(a) * bz.asarray([1.0, 2.0, 3.0])),
    "matrix_power": lambda a: bz.sum(bz.linalg.matrix_power(a, 3) * W33),
    "matrix_power_neg": lambda a: bz.sum(bz.linalg.matrix_power(a, -2) * W33),
    "vector_norm_2": lambda a: bz.linalg.vector_norm(a),
    "vector_norm_1": lambda a: bz.linalg.vector_norm(a, ord=1),
    "vector_norm_3": lambda a: bz.linalg.vector_norm(a, axis=1, ord=3)[0],
    "vector_norm_inf": lambda a: bz.linalg.vector_norm(a, ord=float("inf")),
    "matrix_norm": lambda a: bz.linalg.matrix_norm(a),
    "trace_diagonal": lambda a: bz.linalg.trace(a) + bz.sum(bz.linalg.diagonal(a) ** 2),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_grad(name) -> None:
    check_grad(LINALG[name], bz.asarray(SQUARE))


def test_complex_paths_are_refused() -> None:
    with pytest.raises(TypeError, match="grad: differentiating through complex values"):
        bz.grad(lambda x: bz.sum(bz.abs(bz.fft.rfft(x))))(bz.ones(8))


def test_checkpoint_recomputes_with_the_same_gradient_and_less_memory() -> None:
    rng = np.random.default_rng(0)
    # activations (512 x 1024 per block) outweigh the weights (128 x 1024)
    x = bz.asarray(rng.random((512, 128)).astype(np.float32))
    w1 = [bz.asarray(rng.random((128, 1024)).astype(np.float32) * 0.05) for _ in range(4)]
    w2 = [bz.asarray(rng.random((1024, 128)).astype(np.float32) * 0.05) for _ in range(4)]

    def block(h, a, b):
        return h + bz.tanh(h @ a) @ b

    def loss(x, ck):
        h = x
        for a, b in zip(w1, w2):
            h = (bz.checkpoint(block) if ck else block)(h, a, b)
        return bz.sum(h * h)

    plain = bz.grad(lambda x: loss(x, False))(x)
    ck = bz.grad(lambda x: loss(x, True))(x)
    assert np.array_equal(_np(plain), _np(ck))  # the same ops on the same values
    peaks = [bz.explain(lambda x, c=c: bz.grad(lambda x: loss(x, c))(x), x).peak_bytes
             for c in (False, True)]
    assert peaks[1] < 0.8 * peaks[0]  # the blocks' tanh outputs are not kept
    assert bz.checkpoint(block)(x, w1[0], w2[0]).shape == (512, 128)  # (outside: as is)


def test_custom_vjp_without_a_rule_is_refused_at_the_call() -> None:
    @bz.custom_vjp
    def f(x):
        return x * 2.0

    assert f(bz.ones(2)).tolist() == [2.0, 2.0]  # outside transformations: the function
    with pytest.raises(TypeError, match="custom_vjp: f has no rule: call defvjp"):
        bz.grad(lambda x: bz.sum(f(x)))(bz.ones(2))
    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: (g, g))
    with pytest.raises(ValueError, match="custom_vjp backward returned 2 cotangents for 1"):
        bz.grad(lambda x: bz.sum(f(x)))(bz.ones(2))


def test_a_transformation_in_progress_is_per_thread() -> None:
    """stop_gradient outside any transformation is the array itself, even while another
    thread is inside a grad (the depth of transformations is per thread)."""
    import threading

    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def f(x):
        inside.set()
        release.wait(30)
        return bz.sum(x * x)

    x = bz.asarray(np.ones(3, np.float32))
    worker = threading.Thread(target=lambda: seen.append(bz.grad(f)(x).tolist() == [2.0] * 3))
    worker.start()
    assert inside.wait(30)
    try:
        assert bz.stop_gradient(x) is x  # this thread transforms nothing
    finally:
        release.set()
        worker.join(30)
    assert seen == [True]
