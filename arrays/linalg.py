"""Linear algebra (``bz.linalg``): the Array API standard's linalg extension.

``matmul`` is a library op: backends call their best BLAS; its elementwise
epilogue (bias, activation) is left to the fusion compiler. The decompositions
and solvers are lazy library ops run through numpy (LAPACK) on every backend;
functions with several results (``eigh``, ``qr``, ``slogdet``, ``svd``) return
named tuples of lazy arrays. Integer and bool inputs are computed in float32
(the default float); float16/bfloat16 in float32 and rounded back.

>>> import braze as bz
>>> (bz.ones((2, 3)) @ bz.ones(3)).tolist()
[3.0, 3.0]
>>> bz.linalg.det(bz.asarray([[2.0, 0.0], [0.0, 3.0]])).item()
6.0
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import MATMUL, OPS, check_domain
from .array import Array, as_array, astype, cast_node, elementwise
from .manipulation import matrix_transpose, moveaxis, permute_dims, reshape
from .reductions import normalize_axes


def matmul(x1: Array, x2: Array, /) -> Array:
    """Matrix product with broadcast batch dims; 1-d operands act as vectors.

    >>> import braze as bz
    >>> bz.matmul(bz.eye(2), bz.asarray([[1.0], [2.0]])).tolist()
    [[1.0], [2.0]]
    """
    a, b = as_array(x1, "matmul"), as_array(x2, "matmul")
    dtype = dt.promote(a.dtype, b.dtype, "matmul")
    if dtype == dt.bool_:
        raise TypeError("matmul: unsupported dtype bool; expected a numeric dtype")
    check_domain(MATMUL, dtype)
    shape, _ = MATMUL.infer((a.shape, b.shape), (dtype, dtype), {})  # type: ignore[misc]
    return Array(Node(MATMUL, (cast_node(a._node, dtype), cast_node(b._node, dtype)), {},
                      shape, dtype))


def _float(x: Any, name: str, square: bool = False, min_ndim: int = 2) -> Array:
    x = as_array(x, "linalg." + name)
    if x.ndim < min_ndim:
        raise ValueError(f"linalg.{name}: needs at least {min_ndim} dimensions, got shape "
                         f"{x.shape} ({dt.name(x.dtype)})")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.{name}: needs square matrices, got shape {x.shape}")
    if not dt.is_floating(x.dtype):
        x = astype(x, dt.DEFAULT_FLOAT)
    return x


def _op(name: str, inputs: Sequence[Array], **attrs: Any) -> Array:
    op = OPS["linalg." + name]
    shape, dtype = op.infer(tuple(a.shape for a in inputs), tuple(a.dtype for a in inputs),  # type: ignore[misc]
                            attrs)
    return Array(Node(op, tuple(a._node for a in inputs), attrs, shape, dtype))


def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """Cholesky factor of Hermitian positive-definite matrices (lower, or upper ``U`` with
    ``x = U^H U``).

    >>> import braze as bz
    >>> bz.linalg.cholesky(bz.asarray([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    return _op("cholesky", [_float(x, "cholesky", True)], upper=bool(upper))


def det(x: Array, /) -> Array:
    """Determinant of each square matrix.

    >>> import braze as bz
    >>> bz.linalg.det(bz.eye(3) * 2).item()
    8.0
    """
    return _op("det", [_float(x, "det", True)])


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


def eigh(x: Array, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices.

    >>> import braze as bz
    >>> bz.linalg.eigh(bz.asarray([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
    [1.0, 2.0]
    """
    x = _float(x, "eigh", True)
    return EighResult(_op("eigh", [x], part=0), _op("eigh", [x], part=1))


def eigvalsh(x: Array, /) -> Array:
    """Eigenvalues (ascending) of Hermitian matrices; real dtype.

    >>> import braze as bz
    >>> bz.linalg.eigvalsh(bz.asarray([[2.0, 0.0], [0.0, 1.0]])).tolist()
    [1.0, 2.0]
    """
    return _op("eigvalsh", [_float(x, "eigvalsh", True)])


def inv(x: Array, /) -> Array:
    """Inverse of each square matrix.

    >>> import braze as bz
    >>> bz.linalg.inv(bz.asarray([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return _op("inv", [_float(x, "inv", True)])


def matrix_norm(x: Array, /, *, keepdims: bool = False,
                ord: int | float | Literal["fro", "nuc"] | None = "fro") -> Array:  # noqa: A002
    """Matrix norm over the last two axes: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf.

    >>> import braze as bz
    >>> bz.linalg.matrix_norm(bz.asarray([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    allowed = ("fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf"))
    if ord is None:
        ord = "fro"
    if ord not in allowed:
        raise ValueError(f"linalg.matrix_norm: ord must be one of {allowed}, got {ord!r}")
    return _op("matrix_norm", [_float(x, "matrix_norm")], ord=ord, keepdims=bool(keepdims))


def matrix_power(x: Array, n: int, /) -> Array:
    """``x`` multiplied by itself ``n`` times (negative ``n``: of its inverse; 0: identity).

    >>> import braze as bz
    >>> bz.linalg.matrix_power(bz.asarray([[1, 1], [0, 1]]), 3).tolist()
    [[1, 3], [0, 1]]
    """
    x = as_array(x, "linalg.matrix_power")
    n = operator.index(n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.matrix_power: needs square matrices, got shape {x.shape}")
    if n < 0 or dt.is_bool(x.dtype):
        x = _float(x, "matrix_power", True)
    return _op("matrix_power", [x], n=n)


def matrix_rank(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """Number of singular values above ``rtol * largest`` (default ``max(M, N) * eps``).

    >>> import braze as bz
    >>> bz.linalg.matrix_rank(bz.asarray([[1.0, 2.0], [2.0, 4.0]])).item()
    1
    """
    return _with_rtol("matrix_rank", _float(x, "matrix_rank"), rtol)


def outer(x1: Array, x2: Array, /) -> Array:
    """Outer product of two 1-d arrays (lazy: broadcast multiply).

    >>> import braze as bz
    >>> bz.linalg.outer(bz.asarray([1, 2]), bz.asarray([3, 4])).tolist()
    [[3, 4], [6, 8]]
    """
    a, b = as_array(x1, "linalg.outer"), as_array(x2, "linalg.outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"linalg.outer: needs 1-d arrays, got shapes {a.shape} and {b.shape}")
    return elementwise(OPS["multiply"], reshape(a, (-1, 1)), reshape(b, (1, -1)))


def pinv(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """Moore-Penrose pseudo-inverse (singular values below ``rtol * largest`` dropped).

    >>> import braze as bz
    >>> bz.linalg.pinv(bz.asarray([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    return _with_rtol("pinv", _float(x, "pinv"), rtol)


def _with_rtol(name: str, x: Array, rtol: Any) -> Array:
    """An array ``rtol`` (one tolerance per matrix, broadcast over the batch) is an input."""
    if isinstance(rtol, Array):
        if dt.is_complex(rtol.dtype):
            raise TypeError(f"linalg.{name}: rtol must be real, got {dt.name(rtol.dtype)}")
        return _op(name, [x, astype(rtol, dt.real_dtype(x.dtype))], rtol=None)
    if rtol is not None and not isinstance(rtol, (int, float)):
        raise TypeError(f"linalg.{name}: rtol must be a number, an array or None, got "
                        f"{type(rtol).__name__}")
    return _op(name, [x], rtol=None if rtol is None else float(rtol))


class QRResult(NamedTuple):
    Q: Array
    R: Array


def qr(x: Array, /, *, mode: Literal["reduced", "complete"] = "reduced") -> QRResult:
    """QR decomposition: ``x = Q @ R`` with orthonormal Q and upper-triangular R.

    >>> import braze as bz
    >>> q, r = bz.linalg.qr(bz.eye(2) * 2)
    >>> bz.abs(q @ r).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    x = _float(x, "qr")
    return QRResult(_op("qr", [x], mode=mode, part=0), _op("qr", [x], mode=mode, part=1))


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def slogdet(x: Array, /) -> SlogdetResult:
    """Sign and natural log of the absolute determinant (stable for huge/tiny dets).

    >>> import braze as bz
    >>> [v.item() for v in bz.linalg.slogdet(bz.eye(2) * -1)]
    [1.0, 0.0]
    """
    x = _float(x, "slogdet", True)
    sign = _op("slogdet", [x], part=0)
    return SlogdetResult(sign, _op("slogdet", [x], part=1))


def solve(x1: Array, x2: Array, /) -> Array:
    """Solve ``x1 @ out = x2``; a 1-d ``x2`` is a vector (batch dims broadcast).

    >>> import braze as bz
    >>> bz.linalg.solve(bz.asarray([[2.0, 0.0], [0.0, 4.0]]), bz.asarray([2.0, 2.0])).tolist()
    [1.0, 0.5]
    """
    a = _float(x1, "solve", True)
    b = as_array(x2, "linalg.solve")
    common = dt.promote(a.dtype, b.dtype if dt.is_floating(b.dtype) else a.dtype, "linalg.solve")
    a, b = astype(a, common), astype(b, common)
    vector = b.ndim == 1
    if (b.shape[-1] if vector else b.shape[-2:-1][0] if b.ndim >= 2 else -1) != a.shape[-1]:
        raise ValueError(f"linalg.solve: shapes {a.shape} and {b.shape} do not match")
    return _op("solve", [a, b], vector=vector)


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U @ diag(S) @ Vh`` (S descending, real).

    >>> import braze as bz
    >>> bz.linalg.svd(bz.asarray([[3.0, 0.0], [0.0, 4.0]])).S.tolist()
    [4.0, 3.0]
    """
    x = _float(x, "svd")
    fm = bool(full_matrices)
    return SVDResult(_op("svd", [x], full_matrices=fm, part=0),
                     _op("svd", [x], full_matrices=fm, part=1),
                     _op("svd", [x], full_matrices=fm, part=2))


def svdvals(x: Array, /) -> Array:
    """Singular values, descending; real dtype.

    >>> import braze as bz
    >>> bz.linalg.svdvals(bz.asarray([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    return _op("svdvals", [_float(x, "svdvals")])


def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """Sum of the ``offset`` diagonal of each matrix (integers accumulate in 64 bits).

    >>> import braze as bz
    >>> bz.linalg.trace(bz.asarray([[1, 2], [3, 4]])).item()
    5
    """
    from .reductions import sum as _sum

    d = diagonal(x, offset=offset)
    if dtype is None and as_array(x, "linalg.trace").dtype == dt.bool_:
        raise TypeError("linalg.trace: unsupported dtype bool; expected a numeric dtype")
    return _sum(d, axis=-1, dtype=dtype)


def diagonal(x: Array, /, *, offset: int = 0) -> Array:
    """The ``offset`` diagonal of each matrix (last two axes); a gather, lazy.

    >>> import braze as bz
    >>> bz.linalg.diagonal(bz.asarray([[1, 2], [3, 4]]), offset=1).tolist()
    [2]
    """
    import numpy as np

    from ..graph.node import constant
    from ..graph.ops import GATHER
    from .indexing import _shape

    x = as_array(x, "linalg.diagonal")
    if x.ndim < 2:
        raise ValueError(f"linalg.diagonal: needs at least 2 dimensions, got shape {x.shape}")
    m, n = x.shape[-2:]
    offset = operator.index(offset)
    k = builtins.max(0, builtins.min(m + builtins.min(offset, 0), n - builtins.max(offset, 0)))
    rows = np.arange(k, dtype=np.int64) - builtins.min(offset, 0)
    cols = np.arange(k, dtype=np.int64) + builtins.max(offset, 0)
    idx = [Array(constant(rows)), Array(constant(cols))]
    spec = tuple((0, d, 1) for d in x.shape[:-2]) + (0, 1)
    return Array(Node(GATHER, (x._node, idx[0]._node, idx[1]._node), {"spec": spec},
                      _shape(x, spec, idx, "linalg.diagonal"), x.dtype))


def tensordot(x1: Array, x2: Array, /, *,
              axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Array:
    """Sum of products over ``axes`` (an int: last N of x1 with first N of x2). One matmul.

    >>> import braze as bz
    >>> bz.tensordot(bz.ones((2, 3)), bz.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    a, b = as_array(x1, "tensordot"), as_array(x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(f"tensordot: axes must be non-negative, got {axes}")
        if axes > builtins.min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={axes} exceeds the dims of {a.shape} or {b.shape}")
        ax_a = tuple(range(a.ndim - axes, a.ndim))
        ax_b = tuple(range(axes))
    else:
        if len(axes) != 2:
            raise ValueError(f"tensordot: axes must be an int or a pair of axis sequences, "
                             f"got {axes!r}")
        first, second = (v if isinstance(v, (list, tuple)) else (v,) for v in axes)
        ax_a = tuple(normalize_axes(i, a.ndim, "tensordot")[0] for i in first)
        ax_b = tuple(normalize_axes(i, b.ndim, "tensordot")[0] for i in second)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"tensordot: axes {axes} differ in length")
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: contracted dims differ: shapes {a.shape} and "
                             f"{b.shape}, axes {ax_a} and {ax_b}")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = 1
    for i in ax_a:
        k *= a.shape[i]
    ma = 1
    for i in free_a:
        ma *= a.shape[i]
    nb = 1
    for i in free_b:
        nb *= b.shape[i]
    a2 = reshape(permute_dims(a, free_a + list(ax_a)), (ma, k))
    b2 = reshape(permute_dims(b, list(ax_b) + free_b), (k, nb))
    out = matmul(a2, b2)
    return reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def _from_end(axis: int, a: Array, b: Array, op: str) -> int:
    """``axis`` counted from the end (the standard's convention); a non-negative axis is
    taken relative to the broadcast shape of ``a`` and ``b``."""
    axis = operator.index(axis)
    if axis >= 0:
        nd = builtins.max(a.ndim, b.ndim)
        if axis >= nd:
            raise ValueError(f"{op}: axis {axis} is out of bounds for shapes {a.shape} and "
                             f"{b.shape}")
        axis -= nd
    return axis


def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Dot product along ``axis`` (``conj(x1) * x2`` summed); other axes broadcast.

    >>> import braze as bz
    >>> bz.vecdot(bz.asarray([[1, 2], [3, 4]]), bz.asarray([1, 1])).tolist()
    [3, 7]
    """
    from .reductions import sum as _sum

    a, b = as_array(x1, "vecdot"), as_array(x2, "vecdot")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"vecdot: needs at least 1-d arrays, got shapes {a.shape}, {b.shape}")
    axis = _from_end(axis, a, b, "vecdot")
    (ax_a,) = normalize_axes(axis, a.ndim, "vecdot")
    (ax_b,) = normalize_axes(axis, b.ndim, "vecdot")
    if a.shape[ax_a] != b.shape[ax_b]:
        raise ValueError(f"vecdot: the dot axis differs: shapes {a.shape} and {b.shape}")
    if a.dtype == dt.bool_ or b.dtype == dt.bool_:
        raise TypeError("vecdot: unsupported dtype bool; expected a numeric dtype")
    prod = elementwise(OPS["multiply"], elementwise(OPS["conj"], moveaxis(a, ax_a, -1)),
                       moveaxis(b, ax_b, -1))
    return astype(_sum(prod, axis=-1), prod.dtype)


def vector_norm(x: Array, /, *, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False, ord: int | float = 2) -> Array:  # noqa: A002
    """p-norm over ``axis`` (all axes by default); ``ord`` any real, incl. 0 and +-inf.

    >>> import braze as bz
    >>> bz.linalg.vector_norm(bz.asarray([3.0, -4.0])).item()
    5.0
    """
    x = _float(x, "vector_norm", min_ndim=0)
    axes = normalize_axes(axis, x.ndim, "linalg.vector_norm")
    if isinstance(ord, builtins.bool) or not isinstance(ord, (int, float)):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return _op("vector_norm", [x], axes=axes, keepdims=bool(keepdims), ord=float(ord))


def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Cross product of 3-vectors along ``axis`` (other axes broadcast); lazy.

    >>> import braze as bz
    >>> bz.linalg.cross(bz.asarray([1, 0, 0]), bz.asarray([0, 1, 0])).tolist()
    [0, 0, 1]
    """
    a, b = as_array(x1, "linalg.cross"), as_array(x2, "linalg.cross")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("linalg.cross: needs at least 1-d arrays")
    axis = _from_end(axis, a, b, "linalg.cross")
    (ax_a,) = normalize_axes(axis, a.ndim, "linalg.cross")
    (ax_b,) = normalize_axes(axis, b.ndim, "linalg.cross")
    if a.shape[ax_a] != 3 or b.shape[ax_b] != 3:
        raise ValueError(f"linalg.cross: axis {axis} must have size 3, got shapes {a.shape} "
                         f"and {b.shape}")
    if a.dtype == dt.bool_ or b.dtype == dt.bool_:
        raise TypeError("linalg.cross: unsupported dtype bool; expected a numeric dtype")
    from .manipulation import stack, unstack

    a0, a1, a2 = unstack(moveaxis(a, ax_a, -1), axis=-1)
    b0, b1, b2 = unstack(moveaxis(b, ax_b, -1), axis=-1)
    out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return moveaxis(out, -1, axis)


__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]
