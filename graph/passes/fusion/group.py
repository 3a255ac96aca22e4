"""group: merge kernel roots into kernels, never creating a cycle between kernels.

Data enters as a :class:`~.realize.Fuser` whose analysis is fixed (its roots and, per
root, the buffers it reads) and leaves as a list of groups, each a sorted list of
roots that :mod:`.lower` turns into one kernel. Two kinds of merge, in this order:

* **row**: a reduction merges with the kernels that read its result broadcast back
  along the reduced dims (``x - max(x)``, ``e / sum(e)``) over the same iteration
  space -- softmax, layer norm, RMS norm and logsumexp become one kernel with several
  reduce stages;
* **stored value**: a kernel that stores a value also computes that value's consumers
  over the same iteration space (``y = exp(x); return y, y * 2 + 1`` is one kernel
  with two stores), when they read it at the element where it is computed -- the
  merged kernel uses the value it holds, never reads back the buffer it writes. Into
  a kernel with reductions only while the stored kernel's per-element cost times the
  reader's reduce loops is at most ``RECOMPUTE_LIMIT``: every reduce loop of a row
  kernel recomputes the element values it needs, so a chain of row kernels stays a
  chain (``recompute cost``);
* **sibling**: kernels over the same iteration space that share an input buffer and
  do not depend on each other become one multi-output kernel.

Every refusal is recorded in the shared :class:`.log.Decisions` with its reason:
``dependent`` (siblings where one reads the other), ``cycle`` (a path through a third
kernel), ``recompute cost`` (above), ``strided stores`` (a kernel without reductions
would join a reduction over a permuted space -- ``x.mean(axis=0)`` of a (N, 8) table
iterates (8, N) -- and store its ``STRIDED_STORES`` or more elements across that
space: ``(x - mean) / std`` stays a contiguous elementwise kernel), ``iteration
spaces`` (the two kernels' spaces differ), ``cross read`` (one reads the other's buffer
elsewhere than where the merged kernel computes it: a transposed or shifted read, or an
element value where a row value is needed).
"""

from __future__ import annotations

import math

from ...view import View
from .realize import RECOMPUTE_LIMIT, Fuser
from .space import Layout, apply_chain, fits, member_chain, row_view_cached, stored_read

# a kernel storing this many elements stays out of a reduction over a permuted space
STRIDED_STORES = 1 << 16


class Groups:
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
        self.n_reduce = {r: int(f.kinds[r] == "reduce") for r in roots}  # a group's reductions
        self.dep_cache: dict[int, set[int]] = {}
        self.src_cache: dict[int, set[int]] = {}
        self.group_reads: dict[int, set[int]] = {r: set(self.reads[r]) for r in roots}
        self._anc: dict[int, int] | None = None
        self._cost: dict[int, int] = {}

    def element_cost(self, gid: int) -> int:
        """Per-element cost of what group ``gid`` computes per element (each member's
        expression down to buffers, a reduction's input included): what every loop of a
        row kernel that needs it pays again."""
        c = self._cost.get(gid)
        if c is None:
            f, c = self.f, 0
            for m in self.members_of[gid]:
                if f.kinds[m] == "reduce":
                    src = f.g.nodes[m].inputs[0]
                    if not f.is_buffer(src) and f.kinds[src] != "const":
                        c += f.subtree_cost(src)
                elif f.kinds[m] == "elementwise":
                    c += f.subtree_cost(m)
            self._cost[gid] = c
        return c

    def find(self, r: int) -> int:
        while self.parent[r] != r:
            self.parent[r] = self.parent[self.parent[r]]
            r = self.parent[r]
        return r

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
        anc = self._anc
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

    def _merged_layout(self, ga: int, gb: int) -> Layout | None:
        la, lb = self.layouts.get(ga), self.layouts.get(gb)
        if la is None or lb is None:
            return None
        if (0 in la[0]) != (0 in lb[0]):
            # an empty iteration space (a reduction over an empty axis) has degenerate
            # views (every stride 0): another kernel's elements cannot be computed in it
            return None
        ra, rb = self.n_reduce[ga] > 0, self.n_reduce[gb] > 0
        if ra == rb:
            return la if la == lb else None
        lay, other = (la, gb) if ra else (lb, ga)
        shape, n_red, perm = lay
        if all(fits(self.f, r, shape, n_red, perm) for r in self.members_of[other]):
            return lay
        return None

    def _cross_reads_ok(self, ga: int, gb: int, lay: Layout) -> bool:
        """Reads between the two groups: a reduction's row value as a row view, or a
        stored value read at the element the merged kernel computes it (then the
        kernel uses the value it has, never the buffer it writes)."""
        shape, n_red, perm = lay
        want = row_view_cached(shape, n_red)
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
            in_group = apply_chain(v, member_chain(self.f, reader, shape, n_red, perm))
            if in_group is None:
                return False
            expect = want if self.f.kinds[buf] == "reduce" else stored_read(self.f, buf, lay)
            if in_group.canonical() != expect:
                return False
        return True

    def describe(self, gid: int) -> str:
        """A group for the log: its first roots (id, op) and its iteration space."""
        ms, nodes = self.members_of[gid], self.f.g.nodes
        names = ", ".join(f"#{r} {nodes[r].op}" for r in ms[:3]) + (", ..." if len(ms) > 3 else "")
        lay = self.layouts.get(gid)
        space = "" if lay is None else f" over {lay[0]}" + (f" reduce last {lay[1]}"
                                                            if lay[1] else "")
        return f"kernel[{names}]{space}"

    def _refuse(self, ga: int, gb: int, mode: str, reason: str, detail: str = "") -> None:
        log = self.f.log
        log.add("no_merge", reason, (ga, gb),
                f"{mode}: {self.describe(ga)} + {self.describe(gb)}", detail)

    def try_merge(self, a: int, b: int, mode: str) -> bool:
        """Merge the groups of roots a and b (``mode``: row | stored value | sibling)."""
        ga, gb = self.find(a), self.find(b)
        if ga == gb:
            return False
        log = self.f.log
        if mode == "stored value" and self.n_reduce[gb]:  # gb's loops recompute ga's values
            loops = self.n_reduce[gb]
            cost = self.element_cost(ga)
            if cost * loops > RECOMPUTE_LIMIT:
                if log.on:
                    self._refuse(ga, gb, mode, "recompute cost", f"{loops} reduce loops of "
                                 f"the reader recompute the stored kernel's values: {loops} x "
                                 f"cost {cost} per element > limit {RECOMPUTE_LIMIT}")
                return False
        if mode == "sibling":
            if self.reaches(ga, gb) or self.reaches(gb, ga):
                if log.on:
                    self._refuse(ga, gb, mode, "dependent", "one reads what the other computes")
                return False
        elif self.reaches(ga, gb, skip_direct=True) or self.reaches(gb, ga, skip_direct=True):
            if log.on:
                self._refuse(ga, gb, mode, "cycle", "a path through a third kernel joins them")
            return False
        lay = self._merged_layout(ga, gb)
        if lay is None:
            if log.on:
                self._refuse(ga, gb, mode, "iteration spaces")
            return False
        if (self.n_reduce[ga] > 0) != (self.n_reduce[gb] > 0) and \
                lay[2] != tuple(range(len(lay[2]))) and math.prod(lay[0]) >= STRIDED_STORES:
            if log.on:
                self._refuse(ga, gb, mode, "strided stores", "the reduction runs over a "
                             f"permuted space {lay[0]}: the other kernel's stores would "
                             "stride through memory")
            return False
        if not self._cross_reads_ok(ga, gb, lay):
            if log.on:
                self._refuse(ga, gb, mode, "cross read", "one reads the other's buffer at "
                             "other elements than the merged kernel computes")
            return False
        if log.on:
            log.add("merge", mode, (ga, gb), f"{self.describe(ga)} + {self.describe(gb)}")
        if ga in self._cost or gb in self._cost:
            self._cost[ga] = self.element_cost(ga) + self.element_cost(gb)
            self._cost.pop(gb)
        self._merge_ancestors(ga, gb)
        self.parent[gb] = ga
        self.members_of[ga] = sorted(self.members_of[ga] + self.members_of.pop(gb))
        self.layouts[ga] = lay
        self.n_reduce[ga] += self.n_reduce.pop(gb)
        self.group_reads[ga] |= self.group_reads.pop(gb)
        self.dep_cache.clear()
        return True

    def build(self) -> list[list[int]]:
        f = self.f
        for c in self.roots:  # row fusion, in topological order
            for buf in sorted(self.reads[c]):
                if buf in self.parent and f.kinds[buf] == "reduce":
                    self.try_merge(c, buf, "row")
        tried: set[tuple[int, int, int, int]] = set()  # a pair of groups, as they stand
        for c in self.roots:  # stored values: their kernel computes their consumers too
            for buf in sorted(self.reads[c]):
                if buf in self.parent and f.kinds[buf] != "reduce":
                    ga, gb = self.find(buf), self.find(c)
                    key = (ga, gb, len(self.members_of[ga]), len(self.members_of[gb]))
                    if key not in tried:
                        tried.add(key)
                        self.try_merge(buf, c, "stored value")
        readers: dict[int, list[int]] = {}
        for r in self.roots:
            for buf in self.reads[r]:
                readers.setdefault(buf, []).append(r)
        for buf in sorted(readers):  # sibling fusion: readers of one buffer, pairwise in order
            rs = readers[buf]
            for prev, cur in zip(rs, rs[1:]):
                self.try_merge(prev, cur, "sibling")
        return [m for _, m in sorted(self.members_of.items())]
