"""Shape rules shared by op records: broadcasting, reductions, matmul."""

from __future__ import annotations

Shape = tuple[int, ...]


def broadcast_shapes(*shapes: Shape, op: str = "broadcast_shapes") -> Shape:
    """Broadcast shapes per the standard; ValueError names the op and the shapes.

    >>> broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                raise ValueError(
                    f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                    "cannot be broadcast together"
                )
    return tuple(out)



def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def matmul_shape(a: Shape, b: Shape) -> Shape:
    """Result shape of matmul per the standard (1-d operands promoted, then squeezed)."""
    if not a or not b:
        raise ValueError(f"matmul: operands must be at least 1-d, got shapes {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: contraction dimensions differ: shapes {a} and {b} ({a2[-1]} != {b2[-2]})"
        )
    batch = broadcast_shapes(a2[:-2], b2[:-2], op="matmul")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out
