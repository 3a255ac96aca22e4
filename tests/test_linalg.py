"""``bz.linalg`` compared with numpy: every function of the standard's linalg extension,
result shapes and dtypes (float32 stays float32, complex eigenvalues/singular values are
real, ints compute in float32), batch dims, named-tuple results, errors at the call,
laziness. Decompositions are checked by reconstruction where the factors are not unique.

Tolerances: float64 1e-10 (relative to the matrix norm); float32 1e-4 (LAPACK in single
precision on well-conditioned inputs: random matrices plus n * I).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import arrays

FLOATS = st.sampled_from([dt.float32, dt.float64])
TOL = {dt.float32: 1e-4, dt.float64: 1e-10, dt.complex64: 1e-4, dt.complex128: 1e-10}


def close(got, want, dtype) -> None:
    g = np.asarray(got)
    want = np.asarray(want)
    assert g.shape == want.shape, f"{g.shape} != {want.shape}"
    assert got.dtype == dtype, f"{got.dtype} != {dtype}"
    np.testing.assert_allclose(g, want, rtol=TOL[dtype], atol=TOL[dtype])


@st.composite
def matrices(draw, square=True, dtype=None):
    d = draw(FLOATS) if dtype is None else dtype
    batch = draw(st.sampled_from([(), (2,), (1, 3)]))
    n = draw(st.integers(1, 4))
    m = n if square else draw(st.integers(1, 4))
    a = draw(arrays(d, batch + (m, n), finite=True, views=False))
    a = np.clip(a, -10, 10)
    if square:
        a = a + (4 * n * 10) * np.eye(n, dtype=d)  # well conditioned
    return a.astype(d)


@given(matrices())
def test_square_functions(a):
    d = a.dtype
    x = bz.asarray(a)
    det = np.asarray(bz.linalg.det(x))
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=TOL[d] * 10)
    close(bz.linalg.inv(x), np.linalg.inv(a), d)
    sign, logabs = bz.linalg.slogdet(x)
    s2, l2 = np.linalg.slogdet(a)
    close(sign, s2, d)
    close(logabs, l2, d)
    close(bz.linalg.matrix_power(x, 2), np.linalg.matrix_power(a, 2) / 1, d) if d == \
        dt.float64 else None
    close(bz.linalg.matrix_power(x, 0), np.broadcast_to(np.eye(a.shape[-1], dtype=d), a.shape),
          d)
    b = a.reshape((-1,) + a.shape[-2:])[0, :, 0]  # 1-d: a vector (batch dims broadcast)
    close(bz.linalg.solve(x, bz.asarray(b)), np.linalg.solve(a, b[:, None])[..., 0], d)
    close(bz.linalg.solve(x, x), np.broadcast_to(np.eye(a.shape[-1]), a.shape), d)
    close(bz.linalg.trace(x), np.trace(a, axis1=-2, axis2=-1), d)
    close(bz.linalg.diagonal(x, offset=1), np.diagonal(a, 1, -2, -1), d)


@given(matrices())
def test_hermitian_functions(a):
    d = a.dtype
    h = (a + np.swapaxes(a, -1, -2)) / 2
    x = bz.asarray(h)
    w, v = bz.linalg.eigh(x)
    close(w, np.linalg.eigvalsh(h), d)
    close(bz.linalg.eigvalsh(x), np.linalg.eigvalsh(h), d)
    rebuilt = np.asarray(v) @ (np.asarray(w)[..., None] * np.swapaxes(np.asarray(v), -1, -2))
    np.testing.assert_allclose(rebuilt, h, rtol=TOL[d] * 10, atol=TOL[d] * 100)
    spd = h @ h
    c = bz.linalg.cholesky(bz.asarray(spd))
    close(c, np.linalg.cholesky(spd), d)
    close(bz.linalg.cholesky(bz.asarray(spd), upper=True),
          np.swapaxes(np.linalg.cholesky(spd), -1, -2), d)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's reference on near-singular input
@given(matrices(square=False), st.booleans())
def test_rectangular_functions(a, full):
    d = a.dtype
    x = bz.asarray(a)
    u, s, vh = bz.linalg.svd(x, full_matrices=full)
    nu, ns, nvh = np.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (nu.shape, ns.shape, nvh.shape)
    close(s, ns, d)
    close(bz.linalg.svdvals(x), ns, d)
    k = ns.shape[-1]
    rebuilt = np.asarray(u)[..., :k] * np.asarray(s)[..., None, :] @ np.asarray(vh)[..., :k, :]
    np.testing.assert_allclose(rebuilt, a, rtol=1e-3, atol=1e-3 * max(1, np.abs(a).max()))
    for mode in ("reduced", "complete"):
        q, r = bz.linalg.qr(x, mode=mode)
        nq, nr = np.linalg.qr(a, mode=mode)
        assert (q.shape, r.shape) == (nq.shape, nr.shape) and q.dtype == d
        np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, rtol=1e-3,
                                   atol=1e-3 * max(1, np.abs(a).max()))
    close(bz.linalg.pinv(x), np.linalg.pinv(a, rtol=max(a.shape[-2:]) * np.finfo(d).eps), d) \
        if d == dt.float64 else None
    assert bz.linalg.matrix_rank(x).dtype == dt.int64
    np.testing.assert_array_equal(np.asarray(bz.linalg.matrix_rank(x)),
                                  np.linalg.matrix_rank(a))
    for ord in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        close(bz.linalg.matrix_norm(x, ord=ord), np.linalg.norm(a, ord=ord, axis=(-2, -1)), d)
    close(bz.linalg.matrix_norm(x, keepdims=True),
          np.linalg.norm(a, axis=(-2, -1), keepdims=True), d)


@given(arrays(FLOATS, st.sampled_from([(3,), (2, 3), (0,), (2, 0)]), finite=True),
       st.sampled_from([2, 1, 0, 3, np.inf, -np.inf, 0.5]), st.booleans())
def test_vector_norm(x, ord, keepdims):
    d = x.dtype
    if x.size == 0 and ord == -np.inf:
        return
    got = bz.linalg.vector_norm(bz.asarray(x), axis=-1, ord=ord, keepdims=keepdims)
    want = np.linalg.norm(x.astype(np.float64), ord=ord, axis=-1, keepdims=keepdims)
    close(got, want, d)
    close(bz.linalg.vector_norm(bz.asarray(x)), np.linalg.norm(x.astype(np.float64).ravel()), d)


def test_vector_norm_no_overflow_and_complex():
    big = bz.asarray([3e30, 4e30], dtype=bz.float32)
    assert bz.linalg.vector_norm(big).item() == pytest.approx(5e30, rel=1e-6)
    z = bz.linalg.vector_norm(bz.asarray([3 + 4j]))
    assert z.dtype == bz.float32 and z.item() == pytest.approx(5.0)


@given(st.data())
def test_products(data):
    a = data.draw(arrays(dt.float64, (2, 3, 4), finite=True, views=False))
    b = data.draw(arrays(dt.float64, (4, 3, 5), finite=True, views=False))
    close(bz.tensordot(bz.asarray(a), bz.asarray(b), axes=([1, 2], [1, 0])),
          np.tensordot(a, b, axes=([1, 2], [1, 0])), dt.float64)
    close(bz.tensordot(bz.asarray(a), bz.asarray(b), axes=(2, 0)),
          np.tensordot(a, b, axes=(2, 0)), dt.float64)
    close(bz.linalg.tensordot(bz.asarray(a), bz.asarray(a), axes=0),
          np.tensordot(a, a, axes=0), dt.float64)
    v = data.draw(arrays(dt.float64, (4,), finite=True))
    close(bz.vecdot(bz.asarray(a), bz.asarray(v)), np.sum(a * v, axis=-1), dt.float64)
    close(bz.linalg.vecdot(bz.asarray(a[..., :3]), bz.asarray(a[..., :3]), axis=-2),
          np.sum(a[..., :3] * a[..., :3], axis=-2), dt.float64)
    close(bz.linalg.outer(bz.asarray(v), bz.asarray(v)), np.outer(v, v), dt.float64)
    c = data.draw(arrays(dt.float64, (2, 3), finite=True))
    close(bz.linalg.cross(bz.asarray(c), bz.asarray(c[::-1])), np.cross(c, c[::-1]),
          dt.float64)
    close(bz.linalg.matmul(bz.asarray(a), bz.asarray(b[:, 0])), a @ b[:, 0], dt.float64)
    close(bz.linalg.matrix_transpose(bz.asarray(a)), np.swapaxes(a, -1, -2), dt.float64)


def test_complex_vecdot_conjugates_and_real_results():
    x = bz.asarray([1j, 2.0])
    assert bz.vecdot(x, x).item() == pytest.approx(5.0)
    h = bz.asarray(np.array([[2, 1j], [-1j, 2]], np.complex64))
    w, _ = bz.linalg.eigh(h)
    assert w.dtype == bz.float32 and bz.linalg.svdvals(h).dtype == bz.float32
    assert bz.linalg.slogdet(h).logabsdet.dtype == bz.float32


def test_dtypes_errors_laziness():
    i = bz.asarray([[2, 0], [0, 2]])
    assert bz.linalg.inv(i).dtype == bz.float32
    assert bz.linalg.matrix_power(i, 2).dtype == bz.int64
    assert bz.linalg.inv(bz.eye(2, dtype=bz.float16)).dtype == bz.float16
    with pytest.raises(ValueError, match=r"linalg.inv: needs square matrices, got shape \(2, 3\)"):
        bz.linalg.inv(bz.ones((2, 3)))
    with pytest.raises(ValueError, match="linalg.det: needs at least 2 dimensions"):
        bz.linalg.det(bz.ones(3))
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord"):
        bz.linalg.matrix_norm(bz.ones((2, 2)), ord=3)
    with pytest.raises(ValueError, match="linalg.cross"):
        bz.linalg.cross(bz.ones(2), bz.ones(2))
    with pytest.raises(ValueError, match="tensordot"):
        bz.tensordot(bz.ones((2, 3)), bz.ones((2, 3)), axes=1)
    y = bz.linalg.svd(bz.ones((3, 2)) + 1)
    assert all(p._node.data is None for p in y)
    assert isinstance(bz.linalg.qr(bz.eye(2)), tuple) and bz.linalg.qr(bz.eye(2)).Q.shape == (2, 2)


def test_library_results_never_alias_their_inputs():
    from braze.graph.ops import OPS

    a = np.eye(3)
    out = OPS["linalg.matrix_power"].reference(a, n=1)  # numpy returns `a` itself here
    assert not np.shares_memory(out, a)
    x = np.eye(64)
    y = bz.linalg.matrix_power(bz.asarray(x), 1) + 1  # may run in place over the result
    assert float(y.sum()) == 64 * 64 + 64 and x.sum() == 64


@given(matrices(square=False), st.floats(1e-6, 0.9))
def test_rtol_scalars_and_arrays(a, r):
    x = bz.asarray(a)
    batch = a.shape[:-2]
    rt = np.full(batch, r, dtype=a.dtype)
    want = np.linalg.matrix_rank(a, rtol=rt) if a.size else np.zeros(batch, np.int64)
    np.testing.assert_array_equal(np.asarray(bz.linalg.matrix_rank(x, rtol=bz.asarray(rt))), want)
    np.testing.assert_array_equal(np.asarray(bz.linalg.matrix_rank(x, rtol=r)), want)
    if a.dtype == dt.float64:
        with np.errstate(all="ignore"):  # tiny singular values: the reference overflows too
            want = np.linalg.pinv(a, rtol=rt)
        close(bz.linalg.pinv(x, rtol=bz.asarray(rt)), want, dt.float64)


def test_array_dot_method_is_numpy_dot() -> None:
    a, b = np.arange(24.0).reshape(2, 3, 4), np.arange(20.0).reshape(5, 4, 1)
    np.testing.assert_allclose(bz.asarray(a).dot(bz.asarray(b)).tolist(), a.dot(b))
    assert bz.asarray(3.0).dot(bz.asarray([1.0, 2.0])).tolist() == [3.0, 6.0]
