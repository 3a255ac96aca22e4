"""realize: which values get a buffer of their own (the rest are inlined).

A node is *realized* when it is an output, a reduction, a library op (matmul, concat,
scan, random...) or a library op's input. Elementwise ops and views are otherwise
inlined into whatever consumes them; views become index maps on the loads
(:mod:`braze.graph.view`), never copies. :class:`Fuser` starts from those rules and
then grows the realized set:

* **inline width** (:meth:`Fuser.realize_widely_inlined`, once, before analysis): a
  value that ``MAX_INLINE_ROOTS`` or more kernel roots would inline is realized;
* **recompute cost** (:meth:`Fuser.realize_costly_shared`, after each grouping): a
  value inlined into several *kernels* is recomputed in each when its expression, down
  to buffers, costs at most ``RECOMPUTE_LIMIT`` (:func:`.cost.op_cost` per op): a few
  flops per element are cheaper than writing and re-reading a buffer. Sharing inside
  one kernel costs nothing extra (a row kernel's stages re-read their row);
* **recompute (stencil)** (during analysis, :meth:`.analysis.Analysis.walk`): a value
  read through several views at once (``b[:-2, :-2] + b[1:-1, 1:-1] + ...``) is
  computed once per view; a stencil over a stencil multiplies the views (9 -> 25 -> 49
  offsets). The walk of each kernel root adds up the work its inlined nodes repeat after
  their first view; past ``STENCIL_LIMIT`` per element the repeated node with the most
  repeated work (extra views x cost) is realized and the walk redone, so no kernel
  repeats more than ``STENCIL_LIMIT`` per element (a 3x3 blur of a blur: 8 extra views
  x cost 12 = 96 > 32, so five chained blurs are five kernels);
* **broadcast costly**: a transcendental expression read broadcast over at least
  ``BROADCAST_REALIZE`` times its own elements (rope's cos/sin tables) is realized,
  unless it derives from a reduction (row kernels stay whole);
* a reshape that strides cannot express (flattening a transpose) realizes the value
  it reads, as a copy (:meth:`.analysis.Analysis.analyze`).

Each realization is recorded with its rule in the shared :class:`.log.Decisions`.

>>> import numpy as np, braze as bz
>>> from braze.graph.ir import Graph
>>> x = bz.asarray(np.ones((4, 8), np.float32))
>>> g, _ = Graph.from_nodes([bz.sum(bz.exp(x), axis=-1)._node])
>>> f = Fuser(g)
>>> sorted(g.nodes[i].op for i in f.realized)  # exp is inlined into the sum
['input', 'sum']
"""

from __future__ import annotations

from ...ir import Graph
from .analysis import Analysis
from .cost import op_cost
from .log import Decisions
from .space import size

RECOMPUTE_LIMIT = 16
STENCIL_LIMIT = 2 * RECOMPUTE_LIMIT  # see the module docstring: recompute (stencil)
BROADCAST_REALIZE = 4  # see Fuser.broadcast_costly
MAX_INLINE_ROOTS = 8  # see Fuser.realize_widely_inlined


class Fuser(Analysis):
    """The analysis state of one fuse() call, with the realization rules."""

    def __init__(self, g: Graph, log: Decisions | None = None) -> None:
        super().__init__(g, log)
        self.excess_limit = STENCIL_LIMIT
        log, kinds = self.log, self.kinds
        why: dict[int, list[str]] = {}
        for i in g.outputs:
            why.setdefault(i, []).append("output")
        for i, n in enumerate(g.nodes):
            if kinds[i] in ("input", "library", "reduce"):
                why.setdefault(i, []).append(_RULE[kinds[i]])
            if kinds[i] == "library":
                for j in n.inputs:
                    why.setdefault(j, []).append(f"library input of #{i} {n.op}")
        self.realized = {i for i in why if kinds[i] != "const"}
        matmul_inputs = {j for n in g.nodes if n.op == "matmul" for j in n.inputs}
        for i in list(self.realized):  # a reshaped computed value: compute it in its own
            if kinds[i] == "view":       # shape, then view it (a reshape cannot be pushed
                j, reshaped = i, False   # into the loads of everything it computes from)
                permuted = True
                while kinds[j] == "view":
                    reshaped |= g.nodes[j].op == "reshape"
                    permuted &= g.nodes[j].op == "permute_dims"
                    j = g.nodes[j].inputs[0]
                if reshaped and kinds[j] == "elementwise":
                    self.realized.add(j)
                    why.setdefault(j, []).append(f"reshape source of #{i}")
                elif permuted and i in matmul_inputs and kinds[j] == "elementwise":
                    # a matmul reads a transposed operand in place (the GEMM transposes
                    # in blocks): computing the value transposed would write it strided
                    self.realized.add(j)
                    why.setdefault(j, []).append(f"transposed matmul operand of #{i}")
        if log.on:
            for i in sorted(self.realized):
                if kinds[i] != "input":
                    code = _code(why[i][0])
                    log.realize(i, code, "" if why[i] == [code] else ", ".join(why[i]))

    def realize_widely_inlined(self) -> None:
        """Inline-width rule: an elementwise value that ``MAX_INLINE_ROOTS`` or more kernel
        roots would inline is realized. Every root walks what it inlines down to buffers,
        so a running value threaded through N row ops (``a = softmax(a) + a``, N times)
        made each root walk the whole chain: O(N^2) analysis. One pass over the graph in
        reverse order counts, per node, the roots reaching it through inlined nodes (a
        bitset per node); realizing a node makes it the only root its inputs see."""
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
                if self.log.on:
                    self.log.realize(i, "inline width", f"{bits.bit_count()} kernel roots "
                                     f"would inline it, limit {MAX_INLINE_ROOTS}")
                bits = 1 << i
            reach[i] = bits

    def realize_costly_shared(self, group_of: dict[int, int]) -> bool:
        """Cost rule: realize producers inlined into several *kernels* (groups) whose
        expression costs more than RECOMPUTE_LIMIT, deepest first (once one is a buffer
        the costs above it drop). Sharing within one kernel is free: its stages read
        the value again from the row they are working on. Returns whether any changed."""
        changed = False
        for i in sorted(self.members):
            groups = {group_of[r] for r in self.members[i] if r in group_of}
            cost = self.subtree_cost(i)
            if len(groups) > 1 and cost > RECOMPUTE_LIMIT:
                if self.log.on:
                    # (subtree_cost stops counting past the limit: "at least")
                    self.log.realize(i, "recompute cost", f"inlined into {len(groups)} "
                                     f"kernels, costs {cost}+ per element > limit "
                                     f"{RECOMPUTE_LIMIT}")
            elif not self.broadcast_costly(i, cost):
                continue
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
        own = max(1, size(self.g.nodes[i].shape))
        widest = max((size(self.g.nodes[r].shape) for r in self.members[i]), default=0)
        if widest < BROADCAST_REALIZE * own:
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
        if self.log.on:
            self.log.realize(i, "broadcast costly", f"cost {cost} per element, read over "
                             f"{widest} elements = {widest // own}x its own {own} "
                             f"(limit {BROADCAST_REALIZE}x)")
        return True

    def subtree_cost(self, i: int, cap: int = RECOMPUTE_LIMIT + 1) -> int:
        """Per-element cost of what node i inlines, up to ``cap`` (the rules ask "more
        than RECOMPUTE_LIMIT?")."""
        return super().subtree_cost(i, cap)


_RULE = {"input": "input", "library": "library op", "reduce": "reduction"}


def _code(reason: str) -> str:
    """The short code of a first-rule text ('library input of #4 matmul' -> 'library input')."""
    return reason.split(" of #")[0]
