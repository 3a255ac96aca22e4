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

from collections import deque
from typing import Any

from ...ir import Graph
from ...view import View
from .cost import op_cost
from .log import Decisions
from .space import VIEW_ATTR, Chain, Layout, apply_chain, chain_view, kind_of, view_key


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
        self.excess_limit: int | None = None  # see walk: None, no bound

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
        if chain_view(self.g.nodes[j].shape, chain) is None:  # (cached; lowering reuses it)
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
        """Traverse what ``root`` computes: inlined nodes and buffer reads (with chains).

        A node is visited once per *index map* it is read through (:func:`.space.view_key`),
        not once per path: a stencil over a stencil reaches the input through 9 x 9 paths
        but at 25 offsets. Breadth first, so that the nodes nearest the root are met first.
        With ``excess_limit`` set, the walk also adds up the work an inlined elementwise
        node repeats at each view after its first (``op_cost`` per extra view) and raises
        :class:`_Stencil` as soon as the sum passes the limit."""
        n = self.g.nodes[root]
        _, _, perm = self.space(root)
        if self.kinds[root] == "reduce":
            start = n.inputs[0]
            chain: Chain = (("permute_dims", perm, start),) if perm != tuple(range(len(perm))) \
                else ()
        else:
            start, chain = root, ()
        limit = self.excess_limit
        views: dict[int, int] = {}
        excess = 0
        seen: set[Any] = set()
        queue = deque([(start, chain)])
        # (locals and is_buffer inlined: the walk is the analysis' inner loop)
        kinds, nodes, copies, realized = self.kinds, self.g.nodes, self.copies, self.realized
        pop, push = queue.popleft, queue.append
        while queue:
            i, c = pop()
            k = kinds[i]
            if k == "const":
                continue
            node = nodes[i]
            vk = view_key(node.shape, c) if c else None
            key: Any = i if vk is None else (i, vk)  # the identity map: the bare index
            if key in seen:
                continue
            seen.add(key)
            if i != root:
                if (i in copies) if k == "view" else (i in realized):  # self.is_buffer(i)
                    visit_load(i, c)
                    continue
                visit_inline(i)
            if k == "view":
                push((node.inputs[0], ((node.op, node.attrs[VIEW_ATTR[node.op]], i),) + c))
            elif k == "elementwise":
                if limit is not None:
                    seen_views = views[i] = views.get(i, 0) + 1
                    if seen_views > 1:
                        excess += op_cost(node.op)
                        if excess > limit:
                            raise _Stencil(root, views, excess)
                shape = node.shape
                for j in node.inputs:
                    push((j, c if nodes[j].shape == shape else
                          (("broadcast_to", shape, i),) + c))

    def analyze(self) -> dict[int, list[tuple[int, View]]]:
        """Fix the realized set; return each root's buffer reads (over its own space).

        Roots are walked from a work list: when a walk finds more repeated work than
        ``excess_limit`` (:class:`_Stencil`), the repeated node nearest the root is
        realized, and the walks it invalidates (that root's, and those of the roots that
        inlined the node) are redone, with the node's own walk: a chain of N stencils
        costs N short walks, not N passes over the graph."""
        while True:
            roots = self.roots()
            members: dict[int, set[int]] = {}
            loads: dict[int, list[tuple[int, View]]] = {}
            inlined: dict[int, list[int]] = {}
            breaks: set[int] = set()
            todo = list(reversed(roots))
            while todo:  # collect every break of this pass, then redo the pass once
                r = todo.pop()
                _forget(r, loads, members, inlined)
                try:
                    self.walk(r, *_recorders(self.g, r, loads, members, inlined))
                except _Restart as e:
                    breaks.add(e.node)
                except _Stencil as e:
                    p = self._realize_repeated(e)
                    redo = {r} | members.get(p, set())
                    for q in redo:
                        _forget(q, loads, members, inlined)
                    todo.extend(sorted(redo, reverse=True))
                    todo.append(p)
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

    def _realize_repeated(self, e: _Stencil) -> int:
        """Realize the node whose repetition the walk paid most for: the repeated
        elementwise node with the largest (extra views x its cost down to buffers), the
        nearest the root (highest id) among equals -- a whole blur, not a partial sum of
        its taps; in a long chain of cheap shifts, the deepest level met."""
        cap = 4 * (self.excess_limit or 0) + 1
        cost = {i: self.subtree_cost(i, cap) for i, k in e.views.items() if k > 1}
        p = max(cost, key=lambda i: ((e.views[i] - 1) * cost[i], i))
        self.realized.add(p)
        if self.log.on:
            n, c = e.views[p], cost[p]
            self.log.realize(p, "recompute (stencil)", f"the kernel of #{e.root} reads it at "
                             f"{n} views x cost {c}{'+' if c >= cap else ''}: its inlined "
                             f"work repeats {e.excess} per element > limit {self.excess_limit}")
        return p

    def subtree_cost(self, i: int, cap: int) -> int:
        """Per-element cost of what node i inlines (each shared node once), counted only
        up to ``cap``: deep inlined chains (1,000-node graphs) made the full count
        quadratic."""
        total, stack, seen = 0, [i], set()
        while stack and total < cap:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            if j != i and self.is_buffer(j):
                continue
            n = self.g.nodes[j]
            if self.kinds[j] == "elementwise":
                total += op_cost(n.op)
            if self.kinds[j] in ("elementwise", "view"):
                stack.extend(n.inputs)
        return total


class _Stencil(Exception):
    """A walk of ``root`` repeated more work than the limit (``views``: node -> views)."""

    def __init__(self, root: int, views: dict[int, int], excess: int) -> None:
        self.root, self.views, self.excess = root, views, excess


def _forget(r: int, loads: dict[int, list[tuple[int, View]]], members: dict[int, set[int]],
            inlined: dict[int, list[int]]) -> None:
    """Drop what root r's walk recorded (it is walked again)."""
    loads.pop(r, None)
    for i in inlined.pop(r, ()):
        m = members.get(i)
        if m is not None:
            m.discard(r)
            if not m:
                del members[i]


def _recorders(g: Graph, r: int, loads: dict[int, list[tuple[int, View]]],
               members: dict[int, set[int]], inlined: dict[int, list[int]]
               ) -> tuple[Any, Any]:
    """Callbacks for Analysis.walk that record root r's buffer reads and inlined nodes."""
    def on_load(i: int, c: Chain) -> None:
        shape = g.nodes[i].shape
        v = chain_view(shape, c)
        if v is None:
            raise _Restart(_break_point(shape, i, c))
        loads.setdefault(r, []).append((i, v))

    def on_inline(i: int) -> None:
        members.setdefault(i, set()).add(r)
        inlined.setdefault(r, []).append(i)

    return on_load, on_inline


def _break_point(shape: tuple[int, ...], buf: int, chain: Chain) -> int:
    """The node whose value the first inexpressible reshape in ``chain`` reads."""
    view = View.contiguous(shape)
    for k, step in enumerate(chain):
        nxt = apply_chain(view, (step,))
        if nxt is None:
            return chain[k - 1][2] if k > 0 else buf
        view = nxt
    raise AssertionError("chain is expressible")
