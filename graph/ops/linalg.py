"""Linear algebra library ops (numpy/LAPACK references)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OpDef, Shape, library_op
from .shapes import broadcast_shapes, reduced_shape


# linalg (float inputs; the recording layer casts ints to the default float)
def _linalg(name: str, ref: Callable[..., Any], shape_rule: Callable[..., Shape],
            dtype_rule: Callable[[np.dtype], np.dtype] = lambda d: d) -> OpDef:
    def infer(shapes, dtypes, attrs):
        d = dtypes[0]
        part_real = (name, attrs.get("part")) in (("eigh", 0), ("slogdet", 1), ("svd", 1))
        return shape_rule(*shapes, **attrs), dt.real_dtype(d) if part_real else dtype_rule(d)

    return library_op("linalg." + name, ref, infer, "numeric")


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


_linalg("cholesky", _cholesky_ref, _sq)
_linalg("det", np.linalg.det, _batch)
_linalg("eigh", _eigh_ref, lambda s, *, part: s[:-1] if part == 0 else s,
        lambda d: d)
_linalg("eigvalsh", np.linalg.eigvalsh, _eigvals_shape, dt.real_dtype)
_linalg("inv", np.linalg.inv, _sq)
_linalg("matrix_power", lambda x, *, n: np.linalg.matrix_power(x, n), _sq)
_linalg("matrix_rank", _rank_ref,
        lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt, op="linalg.matrix_rank"),
        lambda d: dt.DEFAULT_INDEX)
_linalg("pinv", _pinv_ref, lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt,
                                                                  op="linalg.pinv")
        + (s[-1], s[-2]))
_linalg("qr", _qr_ref, _qr_shape)
_linalg("slogdet", _slogdet_ref, lambda s, *, part: s[:-2])
_linalg("solve", _solve_ref, _solve_shape)
_linalg("svd", _svd_ref, _svd_shape)
_linalg("svdvals", lambda x: np.linalg.svd(x, compute_uv=False), lambda s: s[:-2] + (min(s[-2:]),),
        dt.real_dtype)
_linalg("matrix_norm", _matrix_norm_ref, _matrix_norm_shape, dt.real_dtype)
_linalg("vector_norm", _vector_norm_ref,
        lambda s, *, axes, keepdims, ord: reduced_shape(s, axes, keepdims), dt.real_dtype)
