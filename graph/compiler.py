"""The compile pipeline and the schedule cache.

``compile_graph(targets)`` builds the optimizer's graph behind ``targets``, looks its
structural key up in an LRU cache, and on a miss runs the pipeline: the optimization
passes the :class:`~braze.graph.passes.registry.PassConfig` selects (see
:mod:`braze.graph.passes`), then the lowering ``fuse -> plan_memory``, which always
runs (it produces the schedule). A loop that rebuilds the same graph every step (a
decode loop, a training step) optimizes once. The cache key is the graph's structure
*and* the pass configuration: two configurations never share a schedule.

The configuration in force: ``BRAZE_OPT_LEVEL`` / ``BRAZE_DISABLE_PASSES`` as read at
import, changed with :func:`configure` (``bz.compile(fn, opt_level=...,
disable_passes=...)`` gives one function its own).

>>> import braze as bz
>>> x = bz.ones((4, 4))
>>> s, _ = compile_graph([bz.softmax(x + 1.0)._node])
>>> s.num_kernels
1
>>> log = []
>>> y = bz.asarray([1.0, 2.0])
>>> _ = optimize(trace([(bz.exp(y) * 1.0 + 2.0)._node]).build(), log=log)
>>> for name, what in log:
...     print(f"{name}: {what}")
constant_folding: nothing to fold
identities: 1 rewrite (x*1 -> x)
cse: nothing to merge
layout: no rewrites
small_reductions: no rewrites
conv_epilogue: no epilogues fused
conv_concat: no concatenations of convolutions
conv_pool: no pools of convolutions
dce: 1 node removed
fuse: 2 ops -> 1 kernel
plan_memory: 1 buffer in 1 storage, peak 16 bytes
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
from .ops import OPS
from .passes.fuse import fuse
from .passes.memory import plan_memory
from .passes.registry import DEFAULT, PASSES, PassConfig, config_from_env, make_config

CONFIG = config_from_env()  # the configuration evals compile with (see configure)


def configure(opt_level: int | str | None = None,
              disable_passes: str | Any = None) -> PassConfig:
    """Set the pass configuration of later compilations (traces ``bz.compile`` made
    already keep their schedules; functions compiled with their own ``opt_level`` /
    ``disable_passes`` keep those); returns the previous one, which
    ``configure(prev.level, prev.disabled)`` restores. With no arguments: back to what
    the environment asks for. Bad levels or names raise ValueError."""
    global CONFIG
    prev = CONFIG
    CONFIG = config_from_env() if opt_level is None and disable_passes is None else \
        make_config(opt_level, disable_passes)
    return prev


def optimize(g: Graph, config: PassConfig | None = None,
             log: list[tuple[str, Any]] | None = None) -> Schedule:
    """Run the pipeline on ``g``: the passes of ``config`` (default: :data:`CONFIG`),
    then fuse and plan_memory. ``log`` (a list) receives ``(pass name, summary)`` of
    every pass that ran and of the two lowering stages."""
    cfg = CONFIG if config is None else config
    if log is None:
        return plan_memory(fuse(cfg.run(g)))
    changes: list[tuple[str, Any]] = []
    g = cfg.run(g, changes)
    log.extend((name, PASSES[name].summary(c)) for name, c in changes)
    n_ops = sum(1 for n in g.nodes  # computing ops (views are index maps, not ops)
                if n.op not in ("input", "const") and OPS[n.op].kind != "view")
    s = fuse(g)
    log.append(("fuse", f"{n_ops} op{'s' if n_ops != 1 else ''} -> {s.num_kernels} "
                        f"kernel{'s' if s.num_kernels != 1 else ''}"))
    s = plan_memory(s)
    n_buf, n_store = len(s.storage), len(s.storage_bytes)
    log.append(("plan_memory", f"{n_buf} buffer{'s' if n_buf != 1 else ''} in {n_store} "
                               f"storage{'s' if n_store != 1 else ''}, "
                               f"peak {s.peak_bytes:,} bytes"))
    return s


def _cache_key(cfg: PassConfig, key: Any) -> Any:
    """A schedule's cache key under pass configuration ``cfg`` (the default's entries are
    keyed by the graph alone: a cache hit costs what it did)."""
    return key if cfg is DEFAULT else (cfg.key, key)


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

    def get_or_build(self, key: Any, build: Any, config: PassConfig | None = None
                     ) -> Schedule:
        """The schedule cached under ``key`` and ``config`` (default: :data:`CONFIG`), or
        ``optimize(build(), config)`` (then cached)."""
        cfg = CONFIG if config is None else config
        key = _cache_key(cfg, key)
        s = self._entries.get(key)
        if s is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return s
        self.misses += 1
        s = optimize(build(), cfg)
        self._entries[key] = s
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return s

    def sighted(self, key: Any) -> bool:
        """Is ``key`` cached (under :data:`CONFIG`), or was it sighted before (without
        being built)? Notes it. Lets an evaluator run a small graph op by op the first
        time and compile it when it comes back (the optimizer costs ~1 ms; op by op, a
        few us per node)."""
        key = _cache_key(CONFIG, key)
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


def compile_graph(targets: list[Node], traced: Trace | None = None,
                  config: PassConfig | None = None) -> tuple[Schedule, list[Node]]:
    """The (cached) schedule computing ``targets`` and the leaf nodes bound to its inputs
    (``traced``: ``trace(targets)`` when the caller has it already; ``config``: the
    passes, default :data:`CONFIG`)."""
    t = traced if traced is not None else trace(targets)
    s = CACHE.get_or_build(t.key, t.build, config)
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
