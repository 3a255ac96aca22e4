"""group: merge kernel roots into kernels, never creating a cycle between kernels.

Data enters as a :class:`~.realize.Fuser` whose analysis is fixed (its roots and, per
root, the buffers it reads) and leaves as a list of groups, each a sorted list of
roots that :mod:`.lower` turns into one kernel. Two kinds of merge, in this order:

* **row**: a reduction merges with the kernels that read its result broadcast back
  along the reduced dims (``x - max(x)``, ``e / sum(e)``) over the same iteration
  space -- softmax, layer norm, RMS norm and logsumexp become one kernel with several
  reduce stages;
* **sibling**: kernels over the same iteration space that share an input buffer and
  do not depend on each other become one multi-output kernel.

Every refusal is recorded in the shared :class:`.log.Decisions` with its reason:
``dependent`` (siblings where one reads the other), ``cycle`` (a path through a third
kernel), ``iteration spaces`` (the two kernels' spaces differ), ``cross read`` (one
reads the other other than as a row value).
"""

from __future__ import annotations

from ...view import View
from .realize import Fuser
from .space import Layout, apply_chain, is_row_shape, member_chain, natural, row_view_cached


def fits(f: Fuser, r: int, shape: tuple[int, ...], n_red: int, perm: tuple[int, ...]) -> bool:
    """Can root r (not a reduction) join a kernel over this space: its natural shape, or
    one value per row?"""
    rs = f.g.nodes[r].shape
    return rs == natural(shape, perm) or is_row_shape(rs, shape, n_red)


def layout_of(f: Fuser, members: list[int]) -> Layout | None:
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
        self.has_reduce = {r: f.kinds[r] == "reduce" for r in roots}
        self.dep_cache: dict[int, set[int]] = {}
        self.src_cache: dict[int, set[int]] = {}
        self.group_reads: dict[int, set[int]] = {r: set(self.reads[r]) for r in roots}
        self._anc: dict[int, int] | None = None

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
        ra, rb = self.has_reduce[ga], self.has_reduce[gb]
        if ra == rb:
            return la if la == lb else None
        lay, other = (la, gb) if ra else (lb, ga)
        shape, n_red, perm = lay
        if all(fits(self.f, r, shape, n_red, perm) for r in self.members_of[other]):
            return lay
        return None

    def _cross_reads_ok(self, ga: int, gb: int, lay: Layout) -> bool:
        """Reads between the two groups: only row values of reductions, as row views."""
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
            if self.f.kinds[buf] != "reduce":
                return False
            in_group = apply_chain(v, member_chain(self.f, reader, shape, n_red, perm))
            if in_group is None or in_group.canonical() != want:
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
        """Merge the groups of roots a and b (``mode``: row | sibling); whether it did."""
        ga, gb = self.find(a), self.find(b)
        if ga == gb:
            return False
        log = self.f.log
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
        if not self._cross_reads_ok(ga, gb, lay):
            if log.on:
                self._refuse(ga, gb, mode, "cross read", "one reads the other other than "
                             "as a reduction's row value")
            return False
        if log.on:
            log.add("merge", mode, (ga, gb), f"{self.describe(ga)} + {self.describe(gb)}")
        self._merge_ancestors(ga, gb)
        self.parent[gb] = ga
        self.members_of[ga] = sorted(self.members_of[ga] + self.members_of.pop(gb))
        self.layouts[ga] = lay
        self.has_reduce[ga] = self.has_reduce[ga] or self.has_reduce.pop(gb)
        self.group_reads[ga] |= self.group_reads.pop(gb)
        self.dep_cache.clear()
        return True

    def build(self) -> list[list[int]]:
        f = self.f
        for c in self.roots:  # row fusion, in topological order
            for buf in sorted(self.reads[c]):
                if buf in self.parent and f.kinds[buf] == "reduce":
                    self.try_merge(c, buf, "row")
        readers: dict[int, list[int]] = {}
        for r in self.roots:
            for buf in self.reads[r]:
                readers.setdefault(buf, []).append(r)
        for buf in sorted(readers):  # sibling fusion: readers of one buffer, pairwise in order
            rs = readers[buf]
            for prev, cur in zip(rs, rs[1:]):
                self.try_merge(prev, cur, "sibling")
        return [m for _, m in sorted(self.members_of.items())]
