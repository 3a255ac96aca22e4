"""analysis: what each kernel root computes and reads, given the set of realized values.

The state of one ``fuse`` call: the graph, each node's kind, the *realized* set (nodes
that get a buffer) and the *copies* (view nodes materialized by a copy kernel). A
realized elementwise or reduce node, or a copied view, is a kernel *root*; everything
else it reaches through elementwise ops and views, down to buffers, is inlined into
it. :meth:`Analysis.analyze` walks every root and leaves, per root, the buffers it
reads (``loads``: node and view over the root's own space) and, per inlined node, the
roots that inline it (``members``); the rules of :mod:`.realize` read both to grow the
realized set, and :mod:`.group` reads ``loads`` to merge roots into kernels.
"""

from __future__ import annotations

from typing import Any

from ...ir import Graph
from ...view import View
from .log import Decisions
from .space import VIEW_ATTR, Chain, Layout, apply_chain, kind_of


class _Restart(Exception):
    def __init__(self, node: int) -> None:
        self.node = node


class Analysis:
    """Realized set, kernel roots and the walk over what each root inlines."""

    def __init__(self, g: Graph, log: Decisions | None = None) -> None:
        self.g = g
        self.log = log if log is not None else Decisions(g, None)
        self.kinds = [kind_of(n) for n in g.nodes]
        self.consumers = g.consumers()
        self.realized: set[int] = set()
        self.copies: set[int] = set()  # view nodes materialized by a (copy) kernel
        self.loads: dict[int, list[tuple[int, View]]] = {}
        self.members: dict[int, set[int]] = {}

    def is_buffer(self, i: int) -> bool:
        """Is node i read from its own contiguous buffer (rather than inlined) by consumers?

        A realized view that is a pure view of a buffer is *not*: consumers fold its
        index map into theirs; its view step only serves outputs and library ops."""
        if self.kinds[i] == "view":
            return i in self.copies
        return i in self.realized

    def view_base(self, i: int) -> tuple[int, Chain] | None:
        """For a realized view node: (buffer node, chain) when it is a pure view of a buffer."""
        chain: Chain = ()
        j = i
        while self.kinds[j] == "view" and (j == i or j not in self.copies):
            n = self.g.nodes[j]
            chain = ((n.op, n.attrs[VIEW_ATTR[n.op]], j),) + chain
            j = n.inputs[0]
        if self.kinds[j] == "view" or (j not in self.realized and self.kinds[j] != "const"):
            return None
        if apply_chain(View.contiguous(self.g.nodes[j].shape), chain) is None:
            return None
        return j, chain

    def space(self, root: int) -> Layout:
        """(iteration shape, number of reduced dims, permutation of the natural shape)."""
        n = self.g.nodes[root]
        if self.kinds[root] == "reduce":
            src = self.g.nodes[n.inputs[0]].shape
            axes = n.attrs["axes"]
            perm = tuple(a for a in range(len(src)) if a not in axes) + tuple(axes)
            return tuple(src[a] for a in perm), len(axes), perm
        return n.shape, 0, tuple(range(len(n.shape)))

    def roots(self) -> list[int]:
        """Nodes that head a kernel: realized elementwise/reduce nodes and copied views."""
        out = []
        for i in sorted(self.realized | self.copies):
            k = self.kinds[i]
            if k in ("elementwise", "reduce"):
                out.append(i)
            elif k == "view" and (i in self.copies or self.view_base(i) is None):
                if i not in self.copies and self.log.on:
                    self.log.realize(i, "view copy", "not a strided view of a buffer: copied")
                self.copies.add(i)
                out.append(i)
        return out

    def walk(self, root: int, visit_load: Any, visit_inline: Any) -> None:
        """Traverse what ``root`` computes: inlined nodes and buffer reads (with chains)."""
        n = self.g.nodes[root]
        _, _, perm = self.space(root)
        if self.kinds[root] == "reduce":
            start = n.inputs[0]
            chain: Chain = (("permute_dims", perm, start),) if perm != tuple(range(len(perm))) \
                else ()
        else:
            start, chain = root, ()
        seen: set[tuple[int, Chain]] = set()
        stack = [(start, chain)]
        while stack:
            i, c = stack.pop()
            if (i, c) in seen:
                continue
            seen.add((i, c))
            node = self.g.nodes[i]
            k = self.kinds[i]
            if k == "const":
                continue
            if i != root and self.is_buffer(i):
                visit_load(i, c)
                continue
            if i != root:
                visit_inline(i)
            if k == "view":
                stack.append((node.inputs[0],
                              ((node.op, node.attrs[VIEW_ATTR[node.op]], i),) + c))
            elif k == "elementwise":
                for j in node.inputs:
                    cj = c if self.g.nodes[j].shape == node.shape else \
                        (("broadcast_to", node.shape, i),) + c
                    stack.append((j, cj))

    def analyze(self) -> dict[int, list[tuple[int, View]]]:
        """Fix the realized set; return each root's buffer reads (over its own space)."""
        while True:
            roots = self.roots()
            members: dict[int, set[int]] = {}
            loads: dict[int, list[tuple[int, View]]] = {}
            breaks: set[int] = set()
            for r in roots:  # collect every break of this pass, then redo the pass once
                try:
                    self.walk(r, *_recorders(self.g, r, loads, members))
                except _Restart as e:
                    breaks.add(e.node)
            if breaks:
                for b in sorted(breaks):
                    if self.log.on:
                        self.log.realize(b, "inexpressible view", "a reshape that strides "
                                         "cannot express reads it: computed, then viewed")
                    self.realized.add(b)
                    if self.kinds[b] == "view":
                        self.copies.add(b)
                continue
            self.loads, self.members = loads, members
            return loads


def _recorders(g: Graph, r: int, loads: dict[int, list[tuple[int, View]]],
               members: dict[int, set[int]]) -> tuple[Any, Any]:
    """Callbacks for Analysis.walk that record root r's buffer reads and inlined nodes."""
    def on_load(i: int, c: Chain) -> None:
        shape = g.nodes[i].shape
        try:  # identical chains recur (every layer of a model): fold each shape once
            key: Any = (shape, tuple((op, arg) for op, arg, _ in c))
            v = _CHAIN_VIEWS.get(key, _MISSING)
        except TypeError:  # unhashable args (slices before Python 3.12)
            key, v = None, _MISSING
        if v is _MISSING:
            v = apply_chain(View.contiguous(shape), c)
            v = v.canonical() if v is not None else None
            if key is not None:
                if len(_CHAIN_VIEWS) > 65536:
                    _CHAIN_VIEWS.clear()
                _CHAIN_VIEWS[key] = v
        if v is None:
            raise _Restart(_break_point(shape, i, c))
        loads.setdefault(r, []).append((i, v))

    def on_inline(i: int) -> None:
        members.setdefault(i, set()).add(r)

    return on_load, on_inline


_CHAIN_VIEWS: dict[Any, Any] = {}
_MISSING = object()


def _break_point(shape: tuple[int, ...], buf: int, chain: Chain) -> int:
    """The node whose value the first inexpressible reshape in ``chain`` reads."""
    view = View.contiguous(shape)
    for k, step in enumerate(chain):
        nxt = apply_chain(view, (step,))
        if nxt is None:
            return chain[k - 1][2] if k > 0 else buf
        view = nxt
    raise AssertionError("chain is expressible")
