"""fuse: lower a simplified Graph to a Schedule of fused kernels and library calls.

Data-flow analysis in four steps:

1. **Realize.** A node gets its own buffer when it is an output, a library op
   (matmul, concat, scan, random...), a library op's input, or a reduction.
   Elementwise ops and views are otherwise *inlined* into whatever consumes them;
   views become index maps on the loads (:mod:`braze.graph.view`), never copies.
2. **Cost rule for shared producers.** A non-realized node inlined into several
   *kernels* (after grouping, step 3) is recomputed in each when its expression
   (down to buffers) costs at most ``RECOMPUTE_LIMIT`` = 16 (transcendental 8,
   divide/sqrt 4, other ops 1, views 0): a few flops per element are cheaper than
   writing and re-reading a buffer (two extra memory passes). Costlier ones are
   realized and grouping is redone. A transcendental expression that a kernel reads
   broadcast over at least ``BROADCAST_REALIZE`` = 4 times its own elements (rope's
   cos/sin tables) is realized too, unless it derives from a reduction (row kernels
   stay whole): recomputing it would multiply its cost by the broadcast factor.
   Sharing inside one kernel costs nothing extra (a row kernel's stages re-read the
   row they work on). A reshape that strides cannot express (flattening a
   transpose) realizes the value it reads, as a copy. Before all this, a value that
   ``MAX_INLINE_ROOTS`` = 8 or more kernel roots would inline is realized (a running
   value threaded through many row ops): it keeps the analysis linear in graph size.
3. **Group.** Row fusion: a reduction merges with the kernels that read its result
   broadcast back along the reduced dims (``x - max(x)``, ``e / sum(e)``) over the
   same iteration space — softmax, layer norm, RMS norm and logsumexp become one
   kernel with several reduce stages. Sibling fusion: kernels over the same
   iteration space that share an input buffer and do not depend on each other
   become one multi-output kernel. No merge may create a cycle between groups.
4. **Emit** one :class:`~braze.graph.kernel.Kernel` per group, a library step per
   library op, a view step per output that is only a view of a buffer, ordered so
   every buffer is written before it is read.
"""

from __future__ import annotations

from typing import Any

from ..ir import GNode, Graph
from ..kernel import Instr, Kernel, KernelStep, LibraryStep, Load, Schedule, Slot, Store, ViewStep
from ..ops import OPS
from ..view import View

RECOMPUTE_LIMIT = 16
BROADCAST_REALIZE = 4  # see Fuser.broadcast_costly
MAX_INLINE_ROOTS = 8  # see Fuser.realize_widely_inlined
_EXPENSIVE = {"exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "pow",
              "sigmoid", "atan2", "hypot", "logaddexp"}
_MEDIUM = {"divide", "sqrt", "reciprocal", "floor_divide", "remainder"}
_VIEW_ATTR = {"broadcast_to": "shape", "permute_dims": "axes", "slice": "slices",
              "reshape": "shape"}

# View ops from a node's index space up to a kernel's iteration space, innermost first:
# (op, argument, the graph node whose value the op produces).
Chain = tuple[tuple[str, Any, int], ...]


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def op_cost(name: str) -> int:
    """Relative per-element cost of an elementwise op (for the recompute rule)."""
    if name in _EXPENSIVE:
        return 8
    if name in _MEDIUM:
        return 4
    return 1


def kind_of(n: GNode) -> str:
    """input | const | elementwise | reduce | view | library."""
    if n.op in ("input", "const"):
        return n.op
    k = OPS[n.op].kind
    if k in ("elementwise", "reduce"):
        return k
    return "view" if n.op in _VIEW_ATTR else "library"


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


_ROW_VIEWS: dict[tuple[tuple[int, ...], int], View] = {}


def _row_view_cached(shape: tuple[int, ...], n_red: int) -> View:
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


def member_chain(f: Fuser, r: int, shape: tuple[int, ...], n_red: int,
                 perm: tuple[int, ...]) -> Chain:
    """View ops from root r's own iteration space to its group's iteration space."""
    if f.kinds[r] == "reduce":
        return ()
    rs = f.g.nodes[r].shape
    if n_red and rs != tuple(shape[perm.index(a)] for a in range(len(perm))):  # a row member
        rowed = shape[:len(shape) - n_red] + (1,) * n_red
        return (("reshape", rowed, r), ("broadcast_to", shape, r))
    if perm != tuple(range(len(perm))):
        return (("permute_dims", perm, r),)
    return ()


class _Restart(Exception):
    def __init__(self, node: int) -> None:
        self.node = node


class Fuser:
    """The analysis state of one fuse() call (see the module docstring)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.kinds = [kind_of(n) for n in g.nodes]
        self.consumers = g.consumers()
        self.realized: set[int] = set(g.outputs)
        for i, n in enumerate(g.nodes):
            if self.kinds[i] in ("input", "library", "reduce"):
                self.realized.add(i)
            if self.kinds[i] == "library":
                self.realized.update(n.inputs)
        self.realized = {i for i in self.realized if self.kinds[i] != "const"}
        self.copies: set[int] = set()  # view nodes materialized by a (copy) kernel
        for i in list(self.realized):  # a reshaped computed value: compute it in its own
            if self.kinds[i] == "view":  # shape, then view it (a reshape cannot be pushed
                j, reshaped = i, False   # into the loads of everything it computes from)
                while self.kinds[j] == "view":
                    reshaped |= g.nodes[j].op == "reshape"
                    j = g.nodes[j].inputs[0]
                if reshaped and self.kinds[j] == "elementwise":
                    self.realized.add(j)

    def realize_widely_inlined(self) -> None:
        """Inline-width rule: an elementwise value that ``MAX_INLINE_ROOTS`` or more kernel
        roots would inline is realized. Every root walks what it inlines down to buffers,
        so a running value threaded through N row ops (``a = softmax(a) + a``, N times)
        made each root walk the whole chain: O(N^2) analysis (700 nodes: 200 ms). One
        pass over the graph in reverse order counts, per node, the roots reaching it
        through inlined nodes (a bitset per node); realizing a node makes it the only
        root its inputs see."""
        reach = [0] * len(self.g.nodes)
        kinds, consumers = self.kinds, self.consumers
        for i in range(len(self.g.nodes) - 1, -1, -1):
            k = kinds[i]
            if k not in ("elementwise", "view"):
                continue
            if self.is_buffer(i):
                reach[i] = 1 << i
                continue
            bits = 0
            for c in consumers[i]:
                kc = kinds[c]
                if kc == "reduce" or (kc in ("elementwise", "view") and self.is_buffer(c)):
                    bits |= 1 << c
                elif kc in ("elementwise", "view"):
                    bits |= reach[c]
            if k == "elementwise" and bits.bit_count() >= MAX_INLINE_ROOTS:
                self.realized.add(i)
                bits = 1 << i
            reach[i] = bits

    # ------------------------------------------------------------ spaces and views
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
            chain = ((n.op, n.attrs[_VIEW_ATTR[n.op]], j),) + chain
            j = n.inputs[0]
        if self.kinds[j] == "view" or (j not in self.realized and self.kinds[j] != "const"):
            return None
        if apply_chain(View.contiguous(self.g.nodes[j].shape), chain) is None:
            return None
        return j, chain

    def space(self, root: int) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
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
                              ((node.op, node.attrs[_VIEW_ATTR[node.op]], i),) + c))
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
                for b in breaks:
                    self.realized.add(b)
                    if self.kinds[b] == "view":
                        self.copies.add(b)
                continue
            self.loads, self.members = loads, members
            return loads

    def realize_costly_shared(self, group_of: dict[int, int]) -> bool:
        """Cost rule: realize producers inlined into several *kernels* (groups) whose
        expression costs more than RECOMPUTE_LIMIT, deepest first (once one is a buffer
        the costs above it drop). Sharing within one kernel is free: its stages read
        the value again from the row they are working on. Returns whether any changed."""
        changed = False
        for i in sorted(self.members):
            groups = {group_of[r] for r in self.members[i] if r in group_of}
            cost = self.subtree_cost(i)
            if (len(groups) > 1 and cost > RECOMPUTE_LIMIT) or self.broadcast_costly(i, cost):
                self.realized.add(i)
                changed = True
        return changed

    def broadcast_costly(self, i: int, cost: int) -> bool:
        """Broadcast rule: a transcendental expression read by a kernel whose iteration
        space is ``BROADCAST_REALIZE`` times larger than its own shape (rope's cos/sin of
        (T, D/2) angles under (B, H, T, D) features) is computed once per element of its
        own shape, not once per element of every consumer. Not for values computed from
        a reduction (a row kernel's epilogue, log-softmax's ``log(sum)``): those stay in
        their row kernel."""
        if cost < op_cost("exp"):
            return False
        own = max(1, _size(self.g.nodes[i].shape))
        if max((_size(self.g.nodes[r].shape) for r in self.members[i]), default=0) < \
                BROADCAST_REALIZE * own:
            return False
        stack, seen = [i], set()
        while stack:  # no reduction below it
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            if self.kinds[j] == "reduce":
                return False
            if j == i or not self.is_buffer(j):
                stack.extend(self.g.nodes[j].inputs)
        return True

    def subtree_cost(self, i: int, cap: int = RECOMPUTE_LIMIT + 1) -> int:
        """Per-element cost of what node i inlines (each shared node once), counted only
        up to ``cap``: the rules ask "more than RECOMPUTE_LIMIT?", and deep inlined chains
        (1,000-node graphs) made the full count quadratic."""
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


def _recorders(g: Graph, r: int, loads: dict[int, list[tuple[int, View]]],
               members: dict[int, set[int]]) -> tuple[Any, Any]:
    """Callbacks for Fuser.walk that record root r's buffer reads and inlined nodes."""
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


# ---------------------------------------------------------------- grouping
class _Groups:
    """Union of kernel roots into groups (one kernel each), never creating a cycle."""

    def __init__(self, f: Fuser, roots: list[int]) -> None:
        self.f = f
        self.roots = roots
        self.parent = {r: r for r in roots}
        self.members_of: dict[int, list[int]] = {r: [r] for r in roots}
        self.reads = {r: {b for b, _ in f.loads.get(r, [])} for r in roots}
        self.readers: dict[int, list[tuple[int, View]]] = {}
        for r in roots:
            for buf, v in f.loads.get(r, []):
                self.readers.setdefault(buf, []).append((r, v))
        self.layouts = {r: f.space(r) for r in roots}
        self.has_reduce = {r: f.kinds[r] == "reduce" for r in roots}
        self.dep_cache: dict[int, set[int]] = {}
        self.src_cache: dict[int, set[int]] = {}
        self.group_reads: dict[int, set[int]] = {r: set(self.reads[r]) for r in roots}

    def find(self, r: int) -> int:
        while self.parent[r] != r:
            self.parent[r] = self.parent[self.parent[r]]
            r = self.parent[r]
        return r

    def members(self, gid: int) -> list[int]:
        return self.members_of[gid]

    def deps(self, gid: int) -> set[int]:
        """Groups whose outputs group ``gid`` reads."""
        cached = self.dep_cache.get(gid)
        if cached is not None:
            return cached
        out = set()
        for buf in self.group_reads[gid]:
            for src in self._sources(buf):
                gb = self.find(src)
                if gb != gid:
                    out.add(gb)
        self.dep_cache[gid] = out
        return out

    def _sources(self, buf: int) -> set[int]:
        """Kernel roots whose results ``buf`` is computed from: itself if a root, else
        through library and view nodes (a matmul between two kernels is a dependency)."""
        if buf in self.parent:
            return {buf}
        cached = self.src_cache.get(buf)
        if cached is not None:
            return cached
        out: set[int] = set()
        stack, seen = [buf], {buf}
        while stack:
            x = stack.pop()
            for i in self.f.g.nodes[x].inputs:
                if i in self.parent:
                    out.add(i)
                elif i not in seen:
                    seen.add(i)
                    stack.append(i)
        self.src_cache[buf] = out
        return out

    def ancestors(self) -> dict[int, int]:
        """Per group, the set of groups it transitively depends on, as a bitset (an int
        with bit g set for group g): reachability queries are then O(1) big-int tests."""
        anc = getattr(self, "_anc", None)
        if anc is None:
            anc = {}
            for r in self.roots:  # roots are in topological (node) order
                bits = 0
                for d in self.deps(r):
                    bits |= anc[d] | (1 << d)
                anc[r] = bits
            self._anc = anc
        return anc

    def reaches(self, a: int, b: int, skip_direct: bool = False) -> bool:
        """Does group a depend on group b (through another group, if skip_direct)?"""
        anc = self.ancestors()
        if not skip_direct:
            return bool(anc[a] >> b & 1)
        for buf in self.group_reads[a]:
            if buf in self.parent:  # a kernel result read directly: only paths beyond it
                d = self.find(buf)
                if d != b and d != a and anc[d] >> b & 1:
                    return True
            else:  # a library result (matmul...): b feeding it is an indirect path
                for src in self._sources(buf):
                    d = self.find(src)
                    if d == b or (d != a and anc[d] >> b & 1):
                        return True
        return False

    def _merge_ancestors(self, ga: int, gb: int) -> None:
        """gb joins ga: whatever depended on either part now depends on the whole."""
        anc = self.ancestors()
        both = (1 << ga) | (1 << gb)
        merged = (anc[ga] | anc.pop(gb)) & ~both
        anc[ga] = merged
        add = merged | (1 << ga)
        drop = ~(1 << gb)
        for x, bits in anc.items():
            if bits & both:
                anc[x] = (bits & drop) | add

    def layout(self, members: list[int]) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
        """The common (iteration shape, n_red, perm) of a would-be group, or None."""
        f = self.f
        reduces = {f.space(r) for r in members if f.kinds[r] == "reduce"}
        if len(reduces) > 1:
            return None
        if reduces:
            shape, n_red, perm = next(iter(reduces))
            for r in members:
                if f.kinds[r] != "reduce" and not self._fits(r, shape, n_red, perm):
                    return None
            return shape, n_red, perm
        spaces = {f.space(r) for r in members}
        return next(iter(spaces)) if len(spaces) == 1 else None

    def _fits(self, r: int, shape: tuple[int, ...], n_red: int, perm: tuple[int, ...]) -> bool:
        rs = self.f.g.nodes[r].shape
        natural = tuple(shape[perm.index(a)] for a in range(len(perm)))
        return rs == natural or is_row_shape(rs, shape, n_red)

    def _merged_layout(self, ga: int, gb: int
                       ) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
        la, lb = self.layouts.get(ga), self.layouts.get(gb)
        if la is None or lb is None:
            return None
        ra, rb = self.has_reduce[ga], self.has_reduce[gb]
        if ra and rb:
            return la if la == lb else None
        if not ra and not rb:
            return la if la == lb else None
        lay, other = (la, gb) if ra else (lb, ga)
        shape, n_red, perm = lay
        if all(self._fits(r, shape, n_red, perm) for r in self.members_of[other]):
            return lay
        return None

    def _cross_reads_ok(self, ga: int, gb: int, lay: Any) -> bool:
        """Reads between the two groups: only row values of reductions, as row views."""
        shape, n_red, perm = lay
        want = _row_view_cached(shape, n_red)
        small, big = (ga, gb) if len(self.members_of[ga]) <= len(self.members_of[gb]) else (gb, ga)
        pairs = []
        for m in self.members_of[small]:
            for buf, v in self.f.loads.get(m, []):  # small reads big
                if buf in self.parent and self.find(buf) == big:
                    pairs.append((m, buf, v))
            for reader, v in self.readers.get(m, []):  # big reads small
                if self.find(reader) == big:
                    pairs.append((reader, m, v))
        for reader, buf, v in pairs:
            if self.f.kinds[buf] != "reduce":
                return False
            in_group = apply_chain(v, member_chain(self.f, reader, shape, n_red, perm))
            if in_group is None or in_group.canonical() != want:
                return False
        return True

    def try_merge(self, a: int, b: int, sibling: bool) -> None:
        ga, gb = self.find(a), self.find(b)
        if ga == gb:
            return
        if sibling:
            if self.reaches(ga, gb) or self.reaches(gb, ga):
                return
        elif self.reaches(ga, gb, skip_direct=True) or self.reaches(gb, ga, skip_direct=True):
            return
        lay = self._merged_layout(ga, gb)
        if lay is None or not self._cross_reads_ok(ga, gb, lay):
            return
        self._merge_ancestors(ga, gb)
        self.parent[gb] = ga
        self.members_of[ga] = sorted(self.members_of[ga] + self.members_of.pop(gb))
        self.layouts[ga] = lay
        self.has_reduce[ga] = self.has_reduce[ga] or self.has_reduce.pop(gb)
        self.group_reads[ga] |= self.group_reads.pop(gb)
        self.dep_cache.clear()

    def build(self) -> list[list[int]]:
        f = self.f
        for c in self.roots:  # row fusion, in topological order
            for buf in sorted(self.reads[c]):
                if buf in self.parent and f.kinds[buf] == "reduce":
                    self.try_merge(c, buf, sibling=False)
        readers: dict[int, list[int]] = {}
        for r in self.roots:
            for buf in self.reads[r]:
                readers.setdefault(buf, []).append(r)
        for buf in sorted(readers):  # sibling fusion: readers of one buffer, pairwise in order
            rs = readers[buf]
            for prev, cur in zip(rs, rs[1:]):
                self.try_merge(prev, cur, sibling=True)
        return [m for _, m in sorted(self.members_of.items())]


# ---------------------------------------------------------------- emission
def fuse(g: Graph) -> Schedule:
    """Lower ``g`` to a schedule (see the module docstring)."""
    f = Fuser(g)
    f.realize_widely_inlined()
    while True:
        f.analyze()
        roots = f.roots()
        groups = _Groups(f, roots).build()
        group_of = {r: gi for gi, grp in enumerate(groups) for r in grp}
        if not f.realize_costly_shared(group_of):
            break

    slots: list[Slot] = []
    slot_of: dict[int, int] = {}
    const_slots: dict[int, Any] = {}

    def slot(i: int) -> int:
        s = slot_of.get(i)
        if s is None:
            n = g.nodes[i]
            s = slot_of[i] = len(slots)
            slots.append(Slot(n.shape, n.dtype))
            if n.op == "const":
                const_slots[s] = n.value
        return s

    input_slots = [0] * g.n_inputs
    for i, n in enumerate(g.nodes):
        if n.op == "input":
            input_slots[n.value] = slot(i)

    steps: list[tuple[int, Any]] = []
    in_group = {r for grp in groups for r in grp}
    for grp in groups:
        steps.append((max(grp), KernelStep(_build_kernel(f, grp, slot))))
    for i, n in enumerate(g.nodes):
        k = f.kinds[i]
        if k == "library":
            steps.append((i, LibraryStep(n.op, n.attrs, tuple(slot(j) for j in n.inputs),
                                         slot(i))))
        elif k == "view" and i in f.realized and i not in in_group:
            base, chain = f.view_base(i)  # type: ignore[misc]
            view = apply_chain(View.contiguous(g.nodes[base].shape), chain)
            steps.append((i, ViewStep(slot(base), view, slot(i))))  # type: ignore[arg-type]
    output_slots = [slot(i) for i in g.outputs]
    return Schedule(slots, input_slots, const_slots, output_slots, _order(steps))


def _order(steps: list[tuple[int, Any]]) -> list[Any]:
    """Dependency order (every slot written before it is read), stable on graph order."""
    writes: dict[int, int] = {}
    reads: list[list[int]] = []
    for idx, (_, st) in enumerate(steps):
        if isinstance(st, KernelStep):
            for s in st.kernel.stores:
                writes[s.slot] = idx
            reads.append(sorted({ld.slot for ld in st.kernel.loads}))
        elif isinstance(st, LibraryStep):
            writes[st.output] = idx
            reads.append(list(st.inputs))
        else:
            writes[st.output] = idx
            reads.append([st.source])
    done = [False] * len(steps)
    active = [False] * len(steps)  # on the DFS stack: meeting one again is a cycle
    order: list[int] = []
    for start in sorted(range(len(steps)), key=lambda k: steps[k][0]):
        stack = [(start, 0)]
        while stack:
            j, pos = stack[-1]
            if done[j]:
                stack.pop()
                continue
            active[j] = True
            if pos < len(reads[j]):
                stack[-1] = (j, pos + 1)
                w = writes.get(reads[j][pos])
                if w is not None and w != j and not done[w]:
                    if active[w]:
                        raise RuntimeError("fuse: internal error: the kernels form a cycle")
                    stack.append((w, 0))
            else:
                stack.pop()
                done[j], active[j] = True, False
                order.append(j)
    return [steps[i][1] for i in order]


def _consumed_inside(f: Fuser, c: int, group: set[int]) -> bool:
    """Is node c computed only inside the kernels of ``group`` (a root or inlined there)?"""
    stack, seen = [c], set()
    while stack:
        x = stack.pop()
        if x in seen or x in group:
            continue
        seen.add(x)
        if f.is_buffer(x) or x in f.g.outputs or not f.consumers[x]:
            return False
        stack.extend(f.consumers[x])
    return True


def _build_kernel(f: Fuser, group: list[int], slot: Any) -> Kernel:
    g = f.g
    group_set = set(group)
    shape, n_red, perm = _Groups(f, group).layout(group)  # type: ignore[misc]
    identity = perm == tuple(range(len(perm)))
    n_outer = len(shape) - n_red

    loads: list[Load] = []
    load_index: dict[tuple[int, View], int] = {}
    instrs: list[Instr] = []
    memo: dict[tuple[Any, ...], int] = {}
    reduce_instr: dict[int, int] = {}
    ops: list[str] = []

    def add(op: str, args: tuple[int, ...], attrs: tuple[Any, ...], dtype: Any, row: bool) -> int:
        key = (op, args, attrs, dtype.name)
        j = memo.get(key)
        if j is None:
            instrs.append(Instr(op, args, attrs, dtype, row))
            j = memo[key] = len(instrs) - 1
            if op not in ("load", "const"):
                ops.append(op)
        return j

    def load(buf: int, c: Chain) -> int:
        node = g.nodes[buf]
        v = apply_chain(View.contiguous(node.shape), c)
        assert v is not None
        v = v.canonical()
        key = (slot(buf), v)
        li = load_index.get(key)
        if li is None:
            li = load_index[key] = len(loads)
            loads.append(Load(slot(buf), v))
        row = n_red > 0 and all(s == 0 for s in v.strides[n_outer:])
        return add("load", (), (("load", li),), node.dtype, row)

    done: dict[tuple[int, Chain, bool], int] = {}

    def children(i: int, c: Chain, is_root: bool) -> list[tuple[int, Chain, bool]] | int:
        """The sub-values node i needs under chain c, or its instruction if it needs none."""
        node = g.nodes[i]
        k = f.kinds[i]
        if k == "const":
            return add("const", (), (("value", node.value),), node.dtype, True)
        if not is_root:
            if i in reduce_instr:  # a reduction of this kernel, read as a row value
                return reduce_instr[i]
            if f.is_buffer(i):
                return load(i, c)
        if k == "view":
            return [(node.inputs[0], ((node.op, node.attrs[_VIEW_ATTR[node.op]], i),) + c, False)]
        if k == "reduce":
            src = node.inputs[0]
            rp = f.space(i)[2]
            rc: Chain = (("permute_dims", rp, src),) if rp != tuple(range(len(rp))) else ()
            return [(src, rc, False)]
        return [(j, c if g.nodes[j].shape == node.shape else
                 (("broadcast_to", node.shape, i),) + c, False) for j in node.inputs]

    def finish(i: int, args: list[int]) -> int:
        node = g.nodes[i]
        k = f.kinds[i]
        if k == "view":
            return args[0]
        if k == "reduce":
            return add(node.op, (args[0],), (), node.dtype, True)
        row = all(instrs[a].row for a in args)
        return add(node.op, tuple(args), tuple(sorted(node.attrs.items())), node.dtype, row)

    def translate(i0: int, c0: Chain, root: int) -> int:
        """The instruction computing node i0 seen through chain c0 (iterative, memoized)."""
        top = (i0, c0, i0 == root)
        stack: list[tuple[tuple[int, Chain, bool], Any]] = [(top, None)]
        while stack:
            key, kids = stack[-1]
            if key in done:
                stack.pop()
                continue
            if kids is None:
                kids = children(*key)
                if isinstance(kids, int):
                    done[key] = kids
                    stack.pop()
                    continue
                stack[-1] = (key, kids)
                stack.extend((kid, None) for kid in kids if kid not in done)
                continue
            if all(kid in done for kid in kids):
                done[key] = finish(key[0], [done[kid] for kid in kids])
                stack.pop()
            else:
                stack.extend((kid, None) for kid in kids if kid not in done)
        return done[top]

    stores: list[Store] = []
    for r in sorted(group):
        node = g.nodes[r]
        if f.kinds[r] == "reduce":
            j = reduce_instr[r] = translate(r, (), r)
            view = View.contiguous(shape[:n_outer])
            needed = r in g.outputs or not all(_consumed_inside(f, c, group_set)
                                               for c in f.consumers[r])
        elif n_red and is_row_shape(node.shape, shape, n_red) and node.shape != \
                tuple(shape[perm.index(a)] for a in range(len(perm))):
            j = translate(r, member_chain(f, r, shape, n_red, perm), r)  # one value per row
            view = View.contiguous(shape[:n_outer])
            needed = True
        else:
            chain: Chain = () if identity else (("permute_dims", perm, r),)
            j = translate(r, chain, r)
            view = apply_chain(View.contiguous(node.shape), chain)  # type: ignore[assignment]
            needed = True
        if needed:
            stores.append(Store(j, slot(r), view.canonical()))
    return Kernel(shape, n_red, loads, instrs, stores, ops)
