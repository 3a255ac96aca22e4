"""space: node kinds, iteration spaces and view chains shared by every fusion stage.

A kernel iterates over a shape whose last ``n_red`` dims are reduced; a node read
inside it is seen through a *chain* of view ops (broadcast, permute, slice, reshape)
from its own index space up to the kernel's. Nothing here holds state: functions take
shapes, views and chains and return views or facts about them.

>>> row_view((4, 8), 1)  # a row value (one per outer index) read in a (4, 8) row kernel
View(shape=(4, 8), strides=(1, 0), offset=0)
>>> is_row_shape((4, 1), (4, 8), 1), is_row_shape((4, 8), (4, 8), 1)
(True, False)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...ir import GNode
from ...ops import OPS
from ...view import View

if TYPE_CHECKING:
    from .analysis import Analysis

VIEW_ATTR = {"broadcast_to": "shape", "permute_dims": "axes", "slice": "slices",
             "reshape": "shape"}

# View ops from a node's index space up to a kernel's iteration space, innermost first:
# (op, argument, the graph node whose value the op produces).
Chain = tuple[tuple[str, Any, int], ...]

# (iteration shape, number of reduced dims, permutation of the natural shape)
Layout = tuple[tuple[int, ...], int, tuple[int, ...]]


def size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def kind_of(n: GNode) -> str:
    """input | const | elementwise | reduce | view | library."""
    if n.op in ("input", "const"):
        return n.op
    k = OPS[n.op].kind
    if k in ("elementwise", "reduce"):
        return k
    return "view" if n.op in VIEW_ATTR else "library"


def apply_chain(view: View, chain: Chain) -> View | None:
    """Fold the view ops of ``chain`` into ``view``; None if a reshape is not expressible."""
    for op, arg, _ in chain:
        if op == "broadcast_to":
            view = view.broadcast(arg)
        elif op == "permute_dims":
            view = view.permute(arg)
        elif op == "slice":
            view = view.slice(arg)
        else:
            v = view.reshape(arg)
            if v is None:
                return None
            view = v
    return view


_CHAIN_VIEWS: dict[Any, Any] = {}
_MISSING = object()


def chain_view(shape: tuple[int, ...], chain: Chain) -> View | None:
    """The canonical view of a contiguous ``shape`` seen through ``chain`` (None if a
    reshape is not expressible), cached: identical chains recur (every layer of a model)."""
    try:
        v = _CHAIN_VIEWS.get((shape, chain), _MISSING)  # this very chain, seen before
        if v is not _MISSING:
            return v
        key: Any = (shape, tuple((op, arg) for op, arg, _ in chain))
        v = _CHAIN_VIEWS.get(key, _MISSING)
        if v is not _MISSING:
            _CHAIN_VIEWS[(shape, chain)] = v
    except TypeError:  # unhashable args (slices before Python 3.12)
        key, v = None, _MISSING
    if v is _MISSING:
        v = apply_chain(View.contiguous(shape), chain)
        v = v.canonical() if v is not None else None
        if key is not None:
            if len(_CHAIN_VIEWS) > 65536:
                _CHAIN_VIEWS.clear()
            _CHAIN_VIEWS[key] = _CHAIN_VIEWS[(shape, chain)] = v
    return v


def view_key(shape: tuple[int, ...], chain: Chain) -> Any:
    """What identifies a node's value seen through ``chain``: the index map (its canonical
    view), so that two paths of views reaching a node at the same elements (``x[1:][:-1]``
    and ``x[:-1][1:]``) are one; the chain itself where no view expresses it. The identity
    map is None: the common case (no views on the way) costs no view and no hashing of one.
    """
    if not chain:
        return None
    v = chain_view(shape, chain)
    if v is None:
        return chain
    ident = _IDENTITY.get(shape)
    if ident is None:
        if len(_IDENTITY) > 4096:
            _IDENTITY.clear()
        ident = _IDENTITY[shape] = View.contiguous(shape).canonical()
    return None if v == ident else v


_IDENTITY: dict[tuple[int, ...], View] = {}


_ROW_VIEWS: dict[tuple[tuple[int, ...], int], View] = {}


def row_view_cached(shape: tuple[int, ...], n_red: int) -> View:
    v = _ROW_VIEWS.get((shape, n_red))
    if v is None:
        if len(_ROW_VIEWS) > 1024:
            _ROW_VIEWS.clear()
        v = _ROW_VIEWS[(shape, n_red)] = row_view(shape, n_red)
    return v


def row_view(shape: tuple[int, ...], n_red: int) -> View:
    """How a row value (one per outer index) is read from its buffer in a kernel over shape."""
    outer = View.contiguous(shape[:len(shape) - n_red])
    return View(shape, outer.strides + (0,) * n_red, 0).canonical()


def is_row_shape(s: tuple[int, ...], shape: tuple[int, ...], n_red: int) -> bool:
    """Is ``s`` one value per row (the outer dims, size-1 dims anywhere)?"""
    outer = shape[:len(shape) - n_red]
    return n_red > 0 and tuple(d for d in s if d != 1) == tuple(d for d in outer if d != 1)


def natural(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """The un-permuted shape of an iteration space (what an elementwise member has)."""
    return tuple(shape[perm.index(a)] for a in range(len(perm)))


def member_chain(f: Analysis, r: int, shape: tuple[int, ...], n_red: int,
                 perm: tuple[int, ...]) -> Chain:
    """View ops from root r's own iteration space to its group's iteration space."""
    if f.kinds[r] == "reduce":
        return ()
    rs = f.g.nodes[r].shape
    if n_red and rs != natural(shape, perm):  # a row member
        rowed = shape[:len(shape) - n_red] + (1,) * n_red
        return (("reshape", rowed, r), ("broadcast_to", shape, r))
    if perm != tuple(range(len(perm))):
        return (("permute_dims", perm, r),)
    return ()


def fits(f: Analysis, r: int, shape: tuple[int, ...], n_red: int, perm: tuple[int, ...]) -> bool:
    """Can root r (not a reduction) join a kernel over this space: its natural shape, or
    one value per row?"""
    rs = f.g.nodes[r].shape
    return rs == natural(shape, perm) or is_row_shape(rs, shape, n_red)


def layout_of(f: Analysis, members: list[int]) -> Layout | None:
    """The common (iteration shape, n_red, perm) of a would-be group, or None."""
    reduces = {f.space(r) for r in members if f.kinds[r] == "reduce"}
    if len(reduces) > 1:
        return None
    if reduces:
        shape, n_red, perm = next(iter(reduces))
        for r in members:
            if f.kinds[r] != "reduce" and not fits(f, r, shape, n_red, perm):
                return None
        return shape, n_red, perm
    spaces = {f.space(r) for r in members}
    return next(iter(spaces)) if len(spaces) == 1 else None


def stored_read(f: Analysis, r: int, lay: Layout) -> View:
    """How a kernel over ``lay`` reads member r's stored value at the element where it
    computes it: the row view for a row value, else r's own shape permuted to the space."""
    shape, n_red, perm = lay
    rs = f.g.nodes[r].shape
    if n_red and rs != natural(shape, perm) and is_row_shape(rs, shape, n_red):
        return row_view_cached(shape, n_red)
    if perm == tuple(range(len(perm))):
        return View.contiguous(rs).canonical()
    return View.contiguous(rs).permute(perm).canonical()
