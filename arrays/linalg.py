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
from .array import Array, _ew_op, as_array, astype, cast_node
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
    return _ew_op("multiply", reshape(a, (-1, 1)), reshape(b, (1, -1)))


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
    prod = _ew_op("multiply", _ew_op("conj", moveaxis(a, ax_a, -1)),
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


# ---------------------------------------------------------------- NumPy's names
def _product_dtype(a: Array, b: Array, name: str) -> tuple[Array, Array, Any]:
    d = dt.promote(a.dtype, b.dtype, name)
    if d == dt.bool_:
        raise TypeError(f"{name}: unsupported dtype bool; expected a numeric dtype")
    return astype(a, d), astype(b, d), d


def dot(a: Array, b: Array, /) -> Array:
    """NumPy's dot: a scalar multiply for 0-d, the inner product of vectors, matmul of
    matrices, and for N-d the sum over ``a``'s last and ``b``'s second-to-last axis.

    >>> import braze as bz
    >>> bz.dot(bz.asarray([1, 2]), bz.asarray([3, 4])).item()
    11
    """
    from .creation import asarray

    x, y, _ = _product_dtype(asarray(a), asarray(b), "dot")
    if x.ndim == 0 or y.ndim == 0:
        return _ew_op("multiply", x, y)
    if y.ndim == 1 or (x.ndim <= 2 and y.ndim == 2):
        if x.shape[-1] != y.shape[0 if y.ndim == 1 else -2]:
            raise ValueError(f"dot: shapes {x.shape} and {y.shape} are not aligned")
        return matmul(x, y)
    return tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 2]))


def vdot(a: Array, b: Array, /) -> Array:
    """Dot product of the flattened arrays, the first conjugated.

    >>> import braze as bz
    >>> bz.vdot(bz.asarray([[1, 2], [3, 4]]), bz.asarray([[1, 1], [1, 1]])).item()
    10
    """
    from .creation import asarray
    from .reductions import sum as _sum

    x, y, d = _product_dtype(asarray(a), asarray(b), "vdot")
    if x.size != y.size:
        raise ValueError(f"vdot: arrays of sizes {x.size} and {y.size} ({x.shape}, {y.shape})")
    return astype(_sum(_ew_op("conj", reshape(x, (-1,))) * reshape(y, (-1,))), d)


def inner(a: Array, b: Array, /) -> Array:
    """Sum of products over the last axes (a scalar multiply for 0-d).

    >>> import braze as bz
    >>> bz.inner(bz.asarray([[1, 2], [3, 4]]), bz.asarray([1, 1])).tolist()
    [3, 7]
    """
    from .creation import asarray

    x, y, _ = _product_dtype(asarray(a), asarray(b), "inner")
    if x.ndim == 0 or y.ndim == 0:
        return _ew_op("multiply", x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"inner: last dimensions differ: shapes {x.shape} and {y.shape}")
    return tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1]))


def kron(a: Array, b: Array, /) -> Array:
    """Kronecker product: blocks ``a[i, j] * b`` (lazy: a broadcast multiply).

    >>> import braze as bz
    >>> bz.kron(bz.asarray([1, 10]), bz.asarray([1, 2])).tolist()
    [1, 2, 10, 20]
    """
    from .creation import asarray

    x, y = asarray(a), asarray(b)
    nd = builtins.max(x.ndim, y.ndim)
    xs = (1,) * (nd - x.ndim) + x.shape
    ys = (1,) * (nd - y.ndim) + y.shape
    xr = reshape(x, tuple(v for d in xs for v in (d, 1)))
    yr = reshape(y, tuple(v for d in ys for v in (1, d)))
    return reshape(_ew_op("multiply", xr, yr), tuple(p * q for p, q in zip(xs, ys)))


def matvec(x1: Array, x2: Array, /) -> Array:
    """Matrix-vector product over the last axes (``(..., m, n) x (..., n)``).

    >>> import braze as bz
    >>> bz.matvec(bz.asarray([[1, 2], [3, 4]]), bz.asarray([1, 1])).tolist()
    [3, 7]
    """
    a, b = as_array(x1, "matvec"), as_array(x2, "matvec")
    if a.ndim < 2 or b.ndim < 1 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"matvec: needs (..., m, n) and (..., n), got {a.shape} and {b.shape}")
    return matmul(a, reshape(b, b.shape + (1,)))[..., 0]


def vecmat(x1: Array, x2: Array, /) -> Array:
    """Vector-matrix product over the last axes (``conj(x1) (..., m) x (..., m, n)``).

    >>> import braze as bz
    >>> bz.vecmat(bz.asarray([1, 1]), bz.asarray([[1, 2], [3, 4]])).tolist()
    [4, 6]
    """
    a, b = as_array(x1, "vecmat"), as_array(x2, "vecmat")
    if b.ndim < 2 or a.ndim < 1 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"vecmat: needs (..., m) and (..., m, n), got {a.shape} and {b.shape}")
    a = _ew_op("conj", a)
    return matmul(reshape(a, a.shape[:-1] + (1, a.shape[-1])), b)[..., 0, :]


def _einsum_parse(subscripts: str, shapes: list[tuple[int, ...]]
                  ) -> tuple[list[str], str]:
    """Input labels per operand and the output labels; ``...`` becomes upper-case
    labels (einsum's own labels must be letters)."""
    s = subscripts.replace(" ", "")
    lhs, arrow, out = s.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(shapes)} operands")
    nell = 0
    for spec, shp in zip(ins, shapes):
        if "..." in spec:
            nell = builtins.max(nell, len(shp) - (len(spec) - 3))
    ell = "".join(chr(0x3B1 + i) for i in range(nell))  # greek: never a user label
    labels = []
    for spec, shp in zip(ins, shapes):
        if "..." in spec:
            k = len(shp) - (len(spec) - 3)
            spec = spec.replace("...", ell[nell - k:] if k else "")
        if not all(c.isalpha() for c in spec) or len(spec) != len(shp):
            raise ValueError(f"einsum: subscripts {subscripts!r} do not fit operand shapes "
                             f"{shapes}")
        labels.append(spec)
    if arrow:
        out = out.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for spec in labels:
            for c in spec:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    if len(set(out)) != len(out) or any(c not in "".join(labels) for c in out):
        raise ValueError(f"einsum: bad output subscripts in {subscripts!r}")
    return labels, out


def einsum(subscripts: str, /, *operands: Array, optimize: Any = False, dtype: Any = None
           ) -> Array:
    """Einstein summation. Each pair of operands is contracted as one batched matmul
    (permute and reshape to ``(batch, m, k) @ (batch, k, n)``), or multiplied with
    broadcasting when no label is summed between them; repeated labels in an operand
    take its diagonal; labels no other operand needs are summed first. ``...`` works.

    >>> import braze as bz
    >>> a, b = bz.ones((2, 3)), bz.ones((3, 4))
    >>> bz.einsum("ij,jk->ik", a, b).tolist()[0], bz.einsum("ii", bz.eye(3)).item()
    ([3.0, 3.0, 3.0, 3.0], 3.0)
    """
    from .creation import asarray
    from .manipulation import broadcast_to, diagonal
    from .reductions import sum as _sum

    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string, got {type(subscripts).__name__}")
    ops = [asarray(o) for o in operands]
    if not ops:
        raise ValueError("einsum: needs at least one operand")
    labels, out = _einsum_parse(subscripts, [o.shape for o in ops])
    d = ops[0].dtype
    for o in ops[1:]:
        d = dt.promote(d, o.dtype, "einsum")
    if dtype is not None:
        d = dt.to_dtype(dtype, "einsum")
    work = dt.DEFAULT_INT if d == dt.bool_ else d
    size: dict[str, int] = {}
    for lab, o in zip(labels, ops):
        for c, n in zip(lab, o.shape):
            if size.get(c, 1) not in (1, n) and n != 1:
                raise ValueError(f"einsum: label {c!r} has sizes {size[c]} and {n} "
                                 f"({subscripts!r}, shapes {[o.shape for o in ops]})")
            size[c] = builtins.max(size.get(c, 1), n)
    terms: list[tuple[str, Array]] = []
    for lab, o in zip(labels, ops):
        o = astype(o, work)
        while len(set(lab)) != len(lab):  # a repeated label: the diagonal
            c = next(c for c in lab if lab.count(c) > 1)
            i, j = lab.index(c), lab.index(c, lab.index(c) + 1)
            o = diagonal(o, 0, i, j)
            lab = "".join(x for k, x in enumerate(lab) if k not in (i, j)) + c
        want = tuple(size[c] for c in lab)
        if o.shape != want:
            o = broadcast_to(o, want)
        terms.append((lab, o))

    def needed(skip: int, extra: str = "") -> set[str]:
        keep = set(out) | set(extra)
        for k, (lab, _) in enumerate(terms):
            if k != skip:
                keep |= set(lab)
        return keep

    for k in range(len(terms)):  # sum away labels no one else needs
        lab, o = terms[k]
        gone = [i for i, c in enumerate(lab) if c not in needed(k)]
        if gone:
            o = _sum(o, axis=tuple(gone), dtype=work)
            lab = "".join(c for i, c in enumerate(lab) if i not in gone)
        terms[k] = (lab, o)
    while len(terms) > 1:
        (la, a), (lb, b) = terms[0], terms[1]
        rest = set(out)
        for lab, _ in terms[2:]:
            rest |= set(lab)
        batch = [c for c in la if c in lb and c in rest]
        contract = [c for c in la if c in lb and c not in rest]
        a_only = [c for c in la if c not in lb]
        b_only = [c for c in lb if c not in la]

        def prod(cs: list[str]) -> int:
            n = 1
            for c in cs:
                n *= size[c]
            return n
        pa = permute_dims(a, tuple(la.index(c) for c in batch + a_only + contract))
        pb = permute_dims(b, tuple(lb.index(c) for c in batch + contract + b_only))
        out_shape = tuple(size[c] for c in batch + a_only + b_only)
        if not contract:  # nothing summed: a broadcast product (fuses with its neighbours)
            ones_b, ones_a = (1,) * len(b_only), (1,) * len(a_only)
            r = _ew_op("multiply", reshape(pa, pa.shape + ones_b),
                            reshape(pb, pb.shape[:len(batch)] + ones_a
                                    + pb.shape[len(batch):]))
        else:  # one batched matmul: (batch, m, k) @ (batch, k, n)
            a3 = reshape(pa, (prod(batch), prod(a_only), prod(contract)))
            b3 = reshape(pb, (prod(batch), prod(contract), prod(b_only)))
            r = reshape(matmul(a3, b3), out_shape)
        terms = [("".join(batch + a_only + b_only), r)] + terms[2:]
    lab, r = terms[0]
    gone = [i for i, c in enumerate(lab) if c not in out]
    if gone:
        r = _sum(r, axis=tuple(gone), dtype=work)
        lab = "".join(c for i, c in enumerate(lab) if i not in gone)
    r = permute_dims(r, tuple(lab.index(c) for c in out)) if lab != out else r
    return astype(r, d)


def norm(x: Array, ord: Any = None, axis: Any = None, keepdims: bool = False  # noqa: A002
         ) -> Array:
    """NumPy's ``linalg.norm``: the 2-norm of the flattened array by default; vector
    norms over an int ``axis``, matrix norms over a pair (or a 2-d array with ``ord``).

    >>> import braze as bz
    >>> bz.linalg.norm(bz.asarray([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    a = as_array(x, "linalg.norm")
    if axis is None:
        if ord is None or (ord in ("fro", 2) and a.ndim == 1):
            v = vector_norm(reshape(a, (-1,)), ord=2)
            return reshape(v, (1,) * a.ndim) if keepdims else v
        if a.ndim == 2:
            return matrix_norm(a, ord=ord, keepdims=keepdims)
        if a.ndim == 1:
            return vector_norm(a, ord=ord, keepdims=keepdims)
        raise ValueError(f"linalg.norm: ord {ord!r} needs a 1-d or 2-d array, got {a.shape}")
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(axes) == 1:
        return vector_norm(a, axis=axes[0], ord=2 if ord is None else ord, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(f"linalg.norm: axis must be an int or a pair, got {axis!r}")
    i, j = (normalize_axes(v, a.ndim, "linalg.norm")[0] for v in axes)
    r = matrix_norm(moveaxis(a, (i, j), (-2, -1)), ord="fro" if ord is None else ord)
    if keepdims:
        r = reshape(r, tuple(1 if k in (i, j) else n for k, n in enumerate(a.shape)))
    return r


class LstsqResult(NamedTuple):
    x: Array
    residuals: Array
    rank: Array
    s: Array


def lstsq(a: Array, b: Array, /, rcond: float | None = None) -> LstsqResult:
    """Least-squares solution of ``a @ x = b`` (by the pseudo-inverse), the residual sums
    of squares (when ``a`` has more rows than columns; numpy also requires full rank),
    the rank and the singular values.

    >>> import braze as bz
    >>> a = bz.asarray([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> r = bz.linalg.lstsq(a, bz.asarray([1.0, 2.0, 3.0]))
    >>> r.x.tolist(), r.residuals.tolist(), r.rank.item()
    ([1.0, 2.0], [9.0], 2)
    """
    from .reductions import sum as _sum

    x = _float(a, "lstsq")
    y = as_array(b, "linalg.lstsq")
    if x.ndim != 2 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"linalg.lstsq: needs a (m, n) matrix and (m,) or (m, k) b, got "
                         f"{x.shape} and {y.shape}")
    y = astype(y, dt.promote(x.dtype, y.dtype, "linalg.lstsq") if dt.is_floating(y.dtype)
               else x.dtype)
    x = astype(x, y.dtype)
    m, n = x.shape
    rtol = rcond if rcond is not None else None
    sol = matmul(pinv(x, rtol=rtol), y)
    if m > n:
        r = matmul(x, sol) - y
        res = _sum(_ew_op("abs", r) ** 2, axis=0)
        res = reshape(res, (1,)) if y.ndim == 1 else res
    else:
        from .creation import zeros

        res = zeros((0,), dtype=dt.real_dtype(y.dtype))
    return LstsqResult(sol, res, matrix_rank(x, rtol=rtol), svdvals(x))


def cond(x: Array, p: Any = None) -> Array:
    """Condition number: largest over smallest singular value (``p`` None/2/-2), else
    ``norm(x, p) * norm(inv(x), p)``.

    >>> import braze as bz
    >>> bz.linalg.cond(bz.asarray([[2.0, 0.0], [0.0, 0.5]])).item()
    4.0
    """
    a = _float(x, "cond")
    if p in (None, 2, -2):
        s = svdvals(a)
        r = s[..., 0] / s[..., -1]
        return r if p != -2 else s[..., -1] / s[..., 0]
    return matrix_norm(a, ord=p) * matrix_norm(inv(a), ord=p)


def multi_dot(arrays: Sequence[Array], /) -> Array:
    """Matrix product of a chain (a 1-d first operand is a row, a 1-d last one a
    column), multiplied left to right.

    >>> import braze as bz
    >>> bz.linalg.multi_dot([bz.ones(2), bz.eye(2), bz.ones(2)]).item()
    2.0
    """
    xs = [as_array(a, "linalg.multi_dot") for a in arrays]
    if len(xs) < 2:
        raise ValueError(f"linalg.multi_dot: needs at least 2 arrays, got {len(xs)}")
    out = xs[0]
    for b in xs[1:]:
        out = dot(out, b)
    return out


__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm", "norm", "lstsq", "cond", "multi_dot"]
