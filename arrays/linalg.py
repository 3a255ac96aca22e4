"""Linear algebra (``bz.linalg``): matmul today; the standard's full extension lands with
the Array API issue.

``matmul`` is a library op: backends call their best BLAS; its elementwise
epilogue (bias, activation) is left to the fusion compiler.

>>> import braze as bz
>>> (bz.ones((2, 3)) @ bz.ones(3)).tolist()
[3.0, 3.0]
"""

from __future__ import annotations

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import MATMUL, check_domain
from .array import Array, as_array, cast_node
from .manipulation import matrix_transpose


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




__all__ = ["matmul", "matrix_transpose"]
