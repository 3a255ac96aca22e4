"""The compile pipeline and the schedule cache.

``compile_graph(targets)`` builds the optimizer's graph behind ``targets``, looks its
structural key up in an LRU cache, and on a miss runs the passes
simplify -> fuse -> plan_memory. A loop that rebuilds the same graph every step
(a decode loop, a training step) optimizes once.

>>> import braze as bz
>>> x = bz.ones((4, 4))
>>> s, _ = compile_graph([bz.softmax(x + 1.0)._node])
>>> s.num_kernels
1
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .ir import Graph, Trace, trace
from .kernel import Schedule
from .node import Node
from .passes.fuse import fuse
from .passes.memory import plan_memory
from .passes.simplify import simplify


def optimize(g: Graph) -> Schedule:
    """Run the pass pipeline on ``g``."""
    return plan_memory(fuse(simplify(g)))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    size: int = 0


class ScheduleCache:
    """Bounded LRU map from a graph's structural key to its optimized schedule."""

    def __init__(self, maxsize: int = 512) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Any, Schedule] = OrderedDict()
        self._sightings: OrderedDict[Any, None] = OrderedDict()  # keys seen, not built
        self.hits = 0
        self.misses = 0

    def get_or_build(self, key: Any, build: Any) -> Schedule:
        """The schedule cached under ``key``, or ``optimize(build())`` (then cached)."""
        s = self._entries.get(key)
        if s is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return s
        self.misses += 1
        s = optimize(build())
        self._entries[key] = s
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return s

    def sighted(self, key: Any) -> bool:
        """Is ``key`` cached, or was it sighted before (without being built)? Notes it.
        Lets an evaluator run a small graph op by op the first time and compile it when
        it comes back (the optimizer costs ~1 ms; op by op, a few us per node)."""
        if key in self._entries or key in self._sightings:
            return True
        self._sightings[key] = None
        if len(self._sightings) > 4 * self.maxsize:
            self._sightings.popitem(last=False)
        return False

    def stats(self) -> CacheStats:
        return CacheStats(self.hits, self.misses, len(self._entries))

    def clear(self) -> None:
        self._entries.clear()
        self._sightings.clear()
        self.hits = self.misses = 0


CACHE = ScheduleCache()
_LOG_FUSION = "fusion" in os.environ.get("BRAZE_LOG", "").split(",")


def compile_graph(targets: list[Node], traced: Trace | None = None
                  ) -> tuple[Schedule, list[Node]]:
    """The (cached) schedule computing ``targets`` and the leaf nodes bound to its inputs
    (``traced``: ``trace(targets)`` when the caller has it already)."""
    t = traced if traced is not None else trace(targets)
    s = CACHE.get_or_build(t.key, t.build)
    if _LOG_FUSION:  # BRAZE_LOG=fusion: the schedule of every compiled eval
        print(describe(s), file=sys.stderr)
    return s, t.leaves


def describe(s: Schedule) -> str:
    """Readable text of a schedule: one line per step."""
    from .kernel import KernelStep, LibraryStep

    lines = [f"schedule: {s.num_kernels} launches, planned peak {s.peak_bytes:,} bytes"]
    for i, st in enumerate(s.steps):
        if isinstance(st, KernelStep):
            k = st.kernel
            lines.append(f"  [{i}] kernel {k.name} over {k.shape}"
                         f"{f' (reduce last {k.n_red})' if k.n_red else ''}: "
                         f"{' '.join(k.ops) or 'copy'} -> slots {[x.slot for x in k.stores]}")
        elif isinstance(st, LibraryStep):
            lines.append(f"  [{i}] library {st.op}{list(st.inputs)} -> slot {st.output}")
        else:
            lines.append(f"  [{i}] view of slot {st.source} -> slot {st.output}")
    return "\n".join(lines)
