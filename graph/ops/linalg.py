"""Linear algebra library ops (numpy/LAPACK references)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, Shape, library_op, zero_vjp
from .shapes import broadcast_shapes, reduced_shape


# linalg (float inputs; the recording layer casts ints to the default float)
def _linalg(name: str, ref: Callable[..., Any], shape_rule: Callable[..., Shape],
            dtype_rule: Callable[[np.dtype], np.dtype] = lambda d: d,
            vjp: Callable[..., Any] | None = None) -> OpDef:
    def infer(shapes, dtypes, attrs):
        d = dtypes[0]
        part_real = (name, attrs.get("part")) in (("eigh", 0), ("slogdet", 1), ("svd", 1))
        return shape_rule(*shapes, **attrs), dt.real_dtype(d) if part_real else dtype_rule(d)

    return library_op("linalg." + name, ref, infer, "numeric", vjp=vjp)


# ---- gradient rules (see OpDef.vjp): the standard matrix-calculus results
def _mat(ad, g):
    return g[..., None, None]


def _inv_vjp(ad, g, y, x):
    yt = ad.matrix_transpose(y)
    return (-(yt @ g @ yt),)


def _det_vjp(ad, g, y, x):
    return (_mat(ad, g * y) * ad.matrix_transpose(ad.linalg.inv(x)),)


def _slogdet_vjp(ad, g, y, x, *, part):
    if part == 0:  # the sign: piecewise constant
        return (None,)
    return (_mat(ad, g) * ad.matrix_transpose(ad.linalg.inv(x)),)


def _solve_vjp(ad, g, y, a, b, *, vector):
    # y = a^-1 b: gb = a^-T g, ga = -gb y^T (summed over a broadcast batch by autodiff)
    at = ad.matrix_transpose(a)
    gb = ad.apply("linalg.solve", at, g, vector=vector)
    ga = -(gb[..., :, None] * y[..., None, :]) if vector else -(gb @ ad.matrix_transpose(y))
    return ad.sum_to(ga, a.shape), ad.sum_to(gb, b.shape)


def _phi(ad, m):
    """The lower triangle of m with its diagonal halved."""
    n = m.shape[-1]
    return ad.tril(m) - 0.5 * m * ad.eye(n, dtype=m.dtype)


def _cholesky_vjp(ad, g, y, x, *, upper):
    # Murray (2016): gA = sym(L^-T phi(L^T gL) L^-1), sym(M) = (M + M^T) / 2
    low = ad.matrix_transpose(y) if upper else y
    gl = ad.matrix_transpose(g) if upper else g
    lt = ad.matrix_transpose(low)
    p = _phi(ad, lt @ gl)
    s = ad.linalg.solve(lt, ad.matrix_transpose(ad.linalg.solve(lt, ad.matrix_transpose(p))))
    return ((s + ad.matrix_transpose(s)) * 0.5,)


def _eigh_vjp(ad, g, y, x, *, part):
    w, v = ad.linalg.eigh(x)
    vt = ad.matrix_transpose(v)
    if part == 0:  # eigenvalues: V diag(g) V^T
        inner = g[..., :, None] * ad.eye(w.shape[-1], dtype=g.dtype)
    else:  # eigenvectors: V (F * V^T g) V^T, F_ij = 1 / (w_j - w_i) off the diagonal
        diff = w[..., None, :] - w[..., :, None]
        off = ad.eye(w.shape[-1], dtype=w.dtype) == 0
        f = ad.where(off, 1.0 / ad.where(off, diff, 1.0), 0.0)
        inner = f * (vt @ g)
    m = v @ inner @ vt
    return ((m + ad.matrix_transpose(m)) * 0.5,)


def _svdvals_vjp(ad, g, y, x):
    u, _, vh = ad.linalg.svd(x, full_matrices=False)
    return ((u * g[..., None, :]) @ vh,)


def _matrix_power_vjp(ad, g, y, x, *, n):
    if n < 0:
        return _matrix_power_neg(ad, g, x, n)
    xt = ad.matrix_transpose(x)
    pw = [ad.broadcast_to(ad.eye(x.shape[-1], dtype=x.dtype), x.shape)]
    for _ in range(max(n - 1, 0)):
        pw.append(pw[-1] @ xt)
    total = None
    for k in range(n):  # sum_k (X^T)^k G (X^T)^(n-1-k)
        term = pw[k] @ g @ pw[n - 1 - k]
        total = term if total is None else total + term
    return (total if total is not None else ad.zeros_like(x),)


def _matrix_power_neg(ad, g, x, n):
    # X^n = (X^-1)^|n|: through the power's rule, then the inverse's
    xi = ad.linalg.inv(x)
    (gi,) = _matrix_power_vjp(ad, g, None, xi, n=-n)
    return _inv_vjp(ad, gi, xi, x)


def _vector_norm_vjp(ad, g, y, x, *, axes, keepdims, ord):
    gk = ad.unreduce(g, x.shape, axes, keepdims)
    yk = ad.unreduce(y, x.shape, axes, keepdims)
    if ord == 2:
        return (gk * ad.where(yk == 0.0, 0.0, x / ad.where(yk == 0.0, 1.0, yk)),)
    if ord in (float("inf"), float("-inf")):
        a = ad.abs(x)
        hit = a == yk
        count = ad.sum(hit, axis=axes, keepdims=True).astype(x.dtype)
        return (ad.where(hit, gk * ad.sign(x) / count, 0.0),)
    if ord == 0:
        return (None,)
    p = float(ord)
    a = ad.abs(x)
    return (gk * ad.sign(x) * a ** (p - 1.0) / ad.where(yk == 0.0, 1.0, yk) ** (p - 1.0),)


def _matrix_norm_vjp(ad, g, y, x, *, ord, keepdims):
    if ord != "fro":
        return _no_rule("linalg.matrix_norm", f"ord={ord!r}")
    gk = g if keepdims else g[..., None, None]
    yk = y if keepdims else y[..., None, None]
    return (gk * ad.where(yk == 0.0, 0.0, x / ad.where(yk == 0.0, 1.0, yk)),)


def _no_rule(op, what):
    raise TypeError(f"grad: op {op} has no gradient rule for {what}")


def _sq(s, **a):
    return s


def _batch(s, **a):
    return s[:-2]


def _eigvals_shape(s, **a):
    return s[:-1]


def _qr_ref(x, *, mode, part):
    return np.linalg.qr(x, mode=mode)[part]


def _qr_shape(s, *, mode, part):
    m, n = s[-2:]
    k = min(m, n)
    if part == 0:
        return s[:-2] + ((m, k) if mode == "reduced" else (m, m))
    return s[:-2] + ((k, n) if mode == "reduced" else (m, n))


def _svd_ref(x, *, full_matrices, part):
    return np.linalg.svd(x, full_matrices=full_matrices)[part]


def _svd_shape(s, *, full_matrices, part):
    m, n = s[-2:]
    k = min(m, n)
    if part == 1:
        return s[:-2] + (k,)
    if part == 0:
        return s[:-2] + ((m, m) if full_matrices else (m, k))
    return s[:-2] + ((n, n) if full_matrices else (k, n))


def _cholesky_ref(x, *, upper):
    out = np.linalg.cholesky(x)
    return np.conj(np.swapaxes(out, -1, -2)) if upper else out


def _solve_ref(a, b, *, vector):
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _solve_shape(a, b, *, vector):
    if vector:
        return broadcast_shapes(a[:-2], b[:-1], op="linalg.solve") + a[-1:]
    return broadcast_shapes(a[:-2], b[:-2], op="linalg.solve") + b[-2:]


def _pinv_ref(x, *rt, rtol):
    if x.size == 0:
        return np.zeros(x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype)
    if rt:  # an array of tolerances, one per matrix (broadcast over the batch)
        rtol = rt[0]
    elif rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(x.dtype).eps
    return np.linalg.pinv(x, rtol=rtol)


def _rank_ref(x, *rt, rtol):
    s = np.linalg.svd(x, compute_uv=False) if x.size else np.zeros(x.shape[:-2] + (0,))
    if rt:
        rtol = np.asarray(rt[0])[..., None]
    elif rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(s.dtype).eps
    tol = (s.max(axis=-1, keepdims=True, initial=0.0) * rtol)
    return np.count_nonzero(s > tol, axis=-1).astype(np.int64)


def _matrix_norm_ref(x, *, ord, keepdims):
    return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _matrix_norm_shape(s, *, ord, keepdims):
    return s[:-2] + ((1, 1) if keepdims else ())


def _vector_norm_ref(x, *, axes, keepdims, ord):
    a = np.abs(x)
    if ord == float("inf"):
        r = np.max(a, axis=axes, keepdims=keepdims, initial=0)
    elif ord == float("-inf"):
        r = np.min(a, axis=axes, keepdims=keepdims, initial=np.inf)
    elif ord == 0:
        r = np.sum(a != 0, axis=axes, keepdims=keepdims).astype(a.dtype)
    elif ord == 2:
        scale = np.max(a, axis=axes, keepdims=True, initial=0)  # no overflow for big values
        safe = np.where((scale == 0) | ~np.isfinite(scale), 1, scale)
        r = np.sqrt(np.sum((a / safe) ** 2, axis=axes, keepdims=True)) * safe
        r = np.where(np.isinf(scale), np.inf, r)
        r = np.where(np.isnan(a).any(axis=axes, keepdims=True), np.nan, r)
        if not keepdims:
            r = np.squeeze(r, axis=axes)
    else:
        r = np.sum(a ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)
    return r


def _slogdet_ref(x, *, part):
    return np.linalg.slogdet(x)[part]


def _eigh_ref(x, *, part):
    return np.linalg.eigh(x)[part]


_linalg("cholesky", _cholesky_ref, _sq, vjp=_cholesky_vjp)
_linalg("det", np.linalg.det, _batch, vjp=_det_vjp)
_linalg("eigh", _eigh_ref, lambda s, *, part: s[:-1] if part == 0 else s,
        lambda d: d, vjp=_eigh_vjp)
_linalg("eigvalsh", np.linalg.eigvalsh, _eigvals_shape, dt.real_dtype,
        vjp=lambda ad, g, y, x: _eigh_vjp(ad, g, y, x, part=0))
_linalg("inv", np.linalg.inv, _sq, vjp=_inv_vjp)
_linalg("matrix_power", lambda x, *, n: np.linalg.matrix_power(x, n), _sq,
        vjp=_matrix_power_vjp)
_linalg("matrix_rank", _rank_ref,
        lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt, op="linalg.matrix_rank"),
        lambda d: dt.DEFAULT_INDEX, vjp=zero_vjp)
_linalg("pinv", _pinv_ref, lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt,
                                                                  op="linalg.pinv")
        + (s[-1], s[-2]))
_linalg("qr", _qr_ref, _qr_shape)
_linalg("slogdet", _slogdet_ref, lambda s, *, part: s[:-2], vjp=_slogdet_vjp)
_linalg("solve", _solve_ref, _solve_shape, vjp=_solve_vjp)
_linalg("svd", _svd_ref, _svd_shape)
_linalg("svdvals", lambda x: np.linalg.svd(x, compute_uv=False), lambda s: s[:-2] + (min(s[-2:]),),
        dt.real_dtype, vjp=_svdvals_vjp)
_linalg("matrix_norm", _matrix_norm_ref, _matrix_norm_shape, dt.real_dtype,
        vjp=_matrix_norm_vjp)
_linalg("vector_norm", _vector_norm_ref,
        lambda s, *, axes, keepdims, ord: reduced_shape(s, axes, keepdims), dt.real_dtype,
        vjp=_vector_norm_vjp)
