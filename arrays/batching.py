"""``bz.vmap``: a function of one example mapped over a batch axis, by rewriting its graph.

``vmap(f)(xs)`` records ``f`` once on per-example placeholders (like ``bz.compile`` and
``bz.grad``), then rewrites the recorded graph with the batch as a new leading axis of
every node that depends on the inputs: elementwise ops broadcast it, reductions, scans,
views and matmul shift their axes past it, attention and rope fold it into their own
batch axis. Any other op runs once per example and the results are stacked (one warning
per op: correct, not fused). The result is one graph over the whole batch, which the
compiler fuses as any other, and composes with grad/jvp/compile in any order.

>>> import braze as bz
>>> bz.vmap(lambda x: bz.sum(x * x))(bz.asarray([[1.0, 2.0], [3.0, 4.0]])).tolist()
[5.0, 25.0]
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..graph.evaluate import topo_order
from ..graph.node import Node
from ..graph.ops import OPS, PARAMETER, index_shape, matmul_shape
from . import creation
from .array import Array, tracing
from .compile import flatten, unflatten

__all__ = ["vmap"]

_WARNED: set[str] = set()
# linear algebra on the trailing matrix axes: leading axes are a batch already
_MATRIX_OPS = {"linalg." + n for n in (
    "cholesky", "det", "eigh", "eigvalsh", "inv", "matrix_power", "qr", "slogdet", "svd",
    "svdvals", "matrix_norm")}


def _moveaxis(x: Array, src: int, dst: int) -> Array:
    import braze.arrays as bz

    return x if src == dst else bz.moveaxis(x, src, dst)


def _node(op: Any, inputs: Sequence[Node], attrs: dict[str, Any], shape: tuple[int, ...],
          dtype: Any, weak: bool = False) -> Node:
    return Node(op, tuple(inputs), attrs, tuple(shape), dtype, None, weak)


def _lead(x: Node, rank: int) -> Node:
    """A batched node (B, *s) as (B, 1, ..., 1, *s) of per-example rank ``rank``."""
    extra = rank - (len(x.shape) - 1)
    if extra <= 0:
        return x
    shape = (x.shape[0], *(1,) * extra, *x.shape[1:])
    return _node(OPS["reshape"], (x,), {"shape": shape}, shape, x.dtype)


def _broadcast_batch(x: Node, b: int) -> Node:
    """An unbatched node as a batched one (B, *s)."""
    shape = (b, *x.shape)
    one = _node(OPS["reshape"], (x,), {"shape": (1, *x.shape)}, (1, *x.shape), x.dtype)
    return _node(OPS["broadcast_to"], (one,), {"shape": shape}, shape, x.dtype)


class _Batcher:
    """Rewrites one traced graph: ``batched[id(node)]`` is the node's batched version (with
    the batch leading) for nodes that depend on the mapped inputs."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.batched: dict[int, Node] = {}

    def rewrite(self, n: Node) -> None:
        b = self.size
        ins = n.inputs
        flags = [id(x) in self.batched for x in ins]
        if not any(flags):
            return
        xs = [self.batched[id(x)] if f else x for x, f in zip(ins, flags)]
        kind, name, a = n.op.kind, n.op.name, n.attrs
        shape = (b, *n.shape)
        out: Node | None = None
        if kind == "elementwise":
            r = len(n.shape)
            xs = [_lead(x, r) if f else x for x, f in zip(xs, flags)]
            out = _node(n.op, xs, a, shape, n.dtype, n.weak)
        elif name in ("argmax", "argmin") and len(a["axes"]) > 1:
            # over several axes: a flat index, so over each example flattened
            x = xs[0]
            flat = (b, x.size // b if b else 0)
            row = _node(OPS["reshape"], (x,), {"shape": flat}, flat, x.dtype)
            idx = _node(n.op, (row,), {"axes": (1,), "keepdims": False}, (b,), n.dtype)
            out = _node(OPS["reshape"], (idx,), {"shape": shape}, shape, n.dtype)
        elif kind == "reduce":
            out = _node(n.op, xs, {**a, "axes": tuple(ax + 1 for ax in a["axes"])}, shape,
                        n.dtype)
        elif kind == "scan":
            out = _node(n.op, xs, {**a, "axis": a["axis"] + 1}, shape, n.dtype)
        elif name == "reshape":
            out = _node(n.op, xs, {"shape": shape}, shape, n.dtype)
        elif name == "permute_dims":
            out = _node(n.op, xs, {"axes": (0, *(ax + 1 for ax in a["axes"]))}, shape, n.dtype)
        elif name == "broadcast_to":
            out = _node(n.op, [_lead(xs[0], len(n.shape))], {"shape": shape}, shape, n.dtype)
        elif name == "slice":
            out = _node(n.op, xs, {"slices": ((0, b, 1), *a["slices"])}, shape, n.dtype)
        elif name == "slice_update":
            xs = [x if f else _broadcast_batch(x, b) for x, f in zip(xs, flags)]
            out = _node(n.op, xs, {"slices": ((0, b, 1), *a["slices"])}, shape, n.dtype)
        elif name == "concat":
            xs = [x if f else _broadcast_batch(x, b) for x, f in zip(xs, flags)]
            out = _node(n.op, xs, {"axis": a["axis"] + 1}, shape, n.dtype)
        elif name == "matmul":
            out = self._matmul(n, xs, flags)
        elif name == "rope" and not flags[1] and ins[1].shape == ():
            out = _node(n.op, xs, a, shape, n.dtype)
        elif name == "scaled_dot_product_attention" and len(ins) == 3 or \
                name in ("max_pool", "window_sum"):
            out = self._fold_batch(n, xs, flags)
        elif name in ("sort", "argsort"):
            ax = a["axis"]
            out = _node(n.op, xs, {**a, "axis": ax + 1 if ax >= 0 else ax}, shape, n.dtype)
        elif name == "roll":
            axes = tuple(ax + 1 if ax >= 0 else ax for ax in a["axes"])
            out = _node(n.op, xs, {**a, "axes": axes}, shape, n.dtype)
        elif name == "take_along_axis":
            xs = [x if f else _broadcast_batch(x, b) for x, f in zip(xs, flags)]
            ax = a["axis"]
            out = _node(n.op, xs, {"axis": ax + 1 if ax >= 0 else ax}, shape, n.dtype)
        elif name == "gather" and flags[0] and not any(flags[1:]):
            out = self._gather(n, xs)
        elif name == "quantized_matmul" and flags == [True, False, False, False]:
            out = _node(n.op, xs, a, shape, n.dtype)  # (any leading axes)
        elif name in _MATRIX_OPS and len(xs) == 1 or name == "linalg.solve":
            # batched over leading axes as they are (solve broadcasts its operands)
            out = _node(n.op, xs, a, shape, n.dtype)
        elif name == "linalg.vector_norm":
            out = _node(n.op, xs, {**a, "axes": tuple(ax + 1 for ax in a["axes"])}, shape,
                        n.dtype)
        if out is None:
            out = self._per_example(n, [self.batched[id(x)] if f else x
                                        for x, f in zip(ins, flags)], flags)
        self.batched[id(n)] = out

    def _gather(self, n: Node, xs: list[Node]) -> Node | None:
        """x[key] with the index arrays unbatched: a full slice over the batch in front,
        where numpy then keeps the batch axis first (index arrays side by side)."""
        spec = n.attrs["spec"]
        arrays = [i for i, e in enumerate(spec) if isinstance(e, int)]
        if arrays and arrays != list(range(arrays[0], arrays[-1] + 1)):
            return None  # (separated index arrays move to the front: per example)
        new = ((0, self.size, 1), *spec)
        shape = (self.size, *n.shape)
        if index_shape(xs[0].shape, tuple(x.shape for x in xs[1:]), new) != shape:
            return None
        return _node(n.op, xs, {"spec": new}, shape, n.dtype)

    def _matmul(self, n: Node, xs: list[Node], flags: list[bool]) -> Node:
        a, b = n.inputs
        xa, xb = xs
        # 1-d operands as numpy promotes them, then the batch broadcast over both
        if len(a.shape) == 1:
            xa = self._expand(xa, flags[0], -2)
        if len(b.shape) == 1:
            xb = self._expand(xb, flags[1], -1)
        ra = len(xa.shape) - flags[0]
        rb = len(xb.shape) - flags[1]
        r = max(ra, rb)
        # (an unbatched operand broadcasts against the batch as it is)
        if flags[0]:
            xa = _lead(xa, r)
        if flags[1]:
            xb = _lead(xb, r)
        full = matmul_shape(xa.shape, xb.shape)
        prod = _node(n.op, (xa, xb), {}, full, n.dtype)
        shape = (self.size, *n.shape)
        return prod if full == shape else _node(OPS["reshape"], (prod,), {"shape": shape},
                                                shape, n.dtype)

    def _expand(self, x: Node, batched: bool, where: int) -> Node:
        s = list(x.shape)
        s.insert(len(s) + 1 + where if where < 0 else where, 1)
        return _node(OPS["reshape"], (x,), {"shape": tuple(s)}, tuple(s), x.dtype)

    def _fold_batch(self, n: Node, xs: list[Node], flags: list[bool]) -> Node:
        """Attention, pooling: the vmap batch folded into the op's own batch axis."""
        b = self.size
        folded = []
        for x, f in zip(xs, flags):
            x = x if f else _broadcast_batch(x, b)
            s = (b * x.shape[1], *x.shape[2:])
            folded.append(_node(OPS["reshape"], (x,), {"shape": s}, s, x.dtype))
        inner = (b * n.shape[0], *n.shape[1:])
        y = _node(n.op, folded, n.attrs, inner, n.dtype)
        shape = (b, *n.shape)
        return _node(OPS["reshape"], (y,), {"shape": shape}, shape, n.dtype)

    def _per_example(self, n: Node, xs: list[Node], flags: list[bool]) -> Node:
        """Any other op: once per example, stacked (correct; not fused)."""
        name = n.op.name
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"vmap: op {name} has no batching rule; it runs once per example "
                          "and the results are stacked", RuntimeWarning, stacklevel=4)
        b = self.size
        rows = []
        for i in range(b):
            ins = []
            for x, f in zip(xs, flags):
                if f:
                    sl = ((i, i + 1, 1), *((0, s, 1) for s in x.shape[1:]))
                    one = _node(OPS["slice"], (x,), {"slices": sl}, (1, *x.shape[1:]), x.dtype)
                    x = _node(OPS["reshape"], (one,), {"shape": x.shape[1:]}, x.shape[1:],
                              x.dtype)
                ins.append(x)
            y = _node(n.op, ins, n.attrs, n.shape, n.dtype, n.weak)
            rows.append(_node(OPS["reshape"], (y,), {"shape": (1, *n.shape)}, (1, *n.shape),
                              n.dtype))
        shape = (b, *n.shape)
        if not rows:
            return creation.zeros(shape, dtype=n.dtype)._node
        return _node(OPS["concat"], rows, {"axis": 0}, shape, n.dtype)


def _axes_per_leaf(axes: Any, args: Sequence[Any], name: str) -> list[int | None]:
    """in_axes (an int, None, or one per argument) as one axis per array leaf."""
    if axes is None or isinstance(axes, int):
        per_arg: list[Any] = [axes] * len(args)
    else:
        per_arg = list(axes)
        if len(per_arg) != len(args):
            raise ValueError(f"vmap: {name} has {len(per_arg)} entries for {len(args)} "
                             "arguments")
    out: list[int | None] = []
    for a, ax in zip(args, per_arg):
        if ax is not None and not isinstance(ax, int):
            raise TypeError(f"vmap: {name} entries must be ints or None, got {ax!r}")
        out += [ax] * len(flatten(a)[0])
    return out


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """``fun`` mapped over axis ``in_axes`` of its arguments (an int, None: not mapped, or
    one per positional argument), the results' batch axis at ``out_axes``.

    Composes with ``bz.grad``, ``bz.jvp`` and ``bz.compile`` in any order.

    >>> import braze as bz
    >>> w = bz.asarray([[1.0, 0.0], [0.0, 2.0]])
    >>> bz.vmap(lambda x: w @ x, in_axes=1, out_axes=1)(bz.eye(2)).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    """

    @functools.wraps(fun)
    def wrapped(*args: Any) -> Any:
        leaves, struct = flatten(tuple(args))
        axes = _axes_per_leaf(in_axes, args, "in_axes")
        size = None
        for i, (x, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                continue
            if not isinstance(x, Array):
                x = leaves[i] = creation.asarray(x)
            if not -x.ndim <= ax < x.ndim:
                raise ValueError(f"vmap: in_axes {ax} out of range for an argument of shape "
                                 f"{x.shape}")
            n = x.shape[ax]
            if size is not None and n != size:
                raise ValueError(f"vmap: mapped axes have different sizes: {size} and {n} "
                                 f"(argument of shape {x.shape}, axis {ax})")
            size = n
        if size is None:
            raise ValueError("vmap: no argument is mapped (in_axes are all None)")
        with tracing():
            placeholders: list[Any] = []
            batcher = _Batcher(size)
            for x, ax in zip(leaves, axes):
                if ax is None:
                    placeholders.append(x)
                    continue
                moved = _moveaxis(x, ax % x.ndim, 0)
                v = Node(PARAMETER, (), {"index": -1}, moved.shape[1:], moved.dtype)
                batcher.batched[id(v)] = moved._node
                placeholders.append(Array(v))
            out = fun(*unflatten(struct, placeholders))
            outs, out_struct = flatten(out)
            nodes = [o._node for o in outs if isinstance(o, Array)]
            for node in topo_order(nodes):
                if node.inputs:
                    batcher.rewrite(node)
            oaxes = [out_axes] * len(outs) if out_axes is None or isinstance(out_axes, int) \
                else list(out_axes)
            if len(oaxes) != len(outs):
                raise ValueError(f"vmap: out_axes has {len(oaxes)} entries for {len(outs)} "
                                 "outputs")
            results = []
            for o, ax in zip(outs, oaxes):
                if not isinstance(o, Array):
                    results.append(o)
                    continue
                done = batcher.batched.get(id(o._node))
                y = Array(done if done is not None else _broadcast_batch(o._node, size))
                if not isinstance(ax, int):
                    raise TypeError(f"vmap: out_axes entries must be ints, got {ax!r}")
                results.append(_moveaxis(y, 0, ax % y.ndim))
        return unflatten(out_struct, results)

    return wrapped
