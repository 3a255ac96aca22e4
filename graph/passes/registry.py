"""The pass registry: named graph-to-graph transformers with optimization levels.

A :class:`Pass` has a name, a level (ONNX Runtime's: 1 basic, 2 extended, 3 layout;
level 0 runs none), a place in the pipeline (``order``: the basic passes 10-90, dce
last at 1000; extended passes belong in 100-199, and so does the layout pass, which
must run before the pattern fusions that read its result) and either
*rules* for the pattern rewriter (:mod:`braze.graph.passes.rewrite`) or a function
``(Graph, Counter) -> Graph``; it counts what it changed into the Counter and says it
in words (``summary``). Passes register themselves on import (the modules of
:mod:`braze.graph.passes`); ``PASSES`` keeps them in pipeline order. Adjacent rule
passes (and ``cse``, which deduplicates as the rewriter builds) run as *one* bottom-up
sweep, each node tried against the passes' rules in pipeline order (so a rewrite by a
later pass can still enable a fold further down the graph), at the cost of one sweep.

Levels:

====  ========  ==================================================================
0     none      no optimization: the graph goes to the lowering as recorded
1     basic     constant_folding, identities, cse, dce (exact: results unchanged)
2     extended  pattern fusions as rewrite rules (Conv+BatchNorm, GEMM epilogues...)
3     layout    layout changes (blocked channel layouts at convolution chains)
====  ========  ==================================================================

``fuse`` and ``plan_memory`` are not passes: they are the lowering that turns the
graph into a schedule, run at every level; asking to disable them is an error.

A :class:`PassConfig` (a level and the disabled names) selects the passes; it is part
of the schedule cache's key, so two configurations never share a schedule. The
default comes from ``BRAZE_OPT_LEVEL`` (default: the highest) and
``BRAZE_DISABLE_PASSES=name,...``, read when braze is imported
(:func:`config_from_env` reads them again).

>>> from braze.graph import passes
>>> [(p.name, p.level) for p in passes.PASSES.values()]
[('constant_folding', 1), ('identities', 1), ('cse', 1), ('layout', 3), ('small_reductions', 2),
 ('conv_epilogue', 2), ('conv_concat', 2), ('conv_pool', 2), ('dce', 1)]
>>> make_config(opt_level=1, disable_passes="cse").names()
('constant_folding', 'identities', 'dce')
>>> make_config(disable_passes=["fold"])
Traceback (most recent call last):
ValueError: unknown pass 'fold'; passes: constant_folding, identities, cse, layout,
small_reductions, conv_epilogue, conv_concat, conv_pool, dce
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..ir import GNode, Graph
from .rewrite import RuleSet, rewrite

LEVELS = {0: "none", 1: "basic", 2: "extended", 3: "layout"}
MAX_LEVEL = max(LEVELS)
LOWERING = ("fuse", "plan_memory")  # mandatory: they produce the schedule



def _rules_summary(c: Counter[str]) -> str:
    n = sum(c.values())
    if not n:
        return "no rewrites"
    parts = ", ".join(f"{k}: {v}" if v > 1 else k for k, v in c.most_common())
    return f"{n} rewrite{'s' if n != 1 else ''} ({parts})"


def fused_summary(none: str) -> Callable[[Counter[str]], str]:
    """A fusion pass's summary: "N fused (what: count, ...)", or ``none``.

    >>> from collections import Counter
    >>> fused_summary("nothing")(Counter({"conv + bias": 2}))
    '2 fused (conv + bias: 2)'
    """
    def summary(c: Counter[str]) -> str:
        n = sum(c.values())
        if not n:
            return none
        return f"{n} fused ({', '.join(f'{k}: {v}' for k, v in c.most_common())})"
    return summary


def rebuild(g: Graph, replace: Callable[[GNode, list[int]], GNode | None]) -> Graph:
    """``g``'s nodes in order into a new graph: node n as ``replace(n, remap)`` where that
    gives a node (its inputs already numbered in the new graph: ``remap`` maps the old
    numbers), else as itself with its inputs renumbered; the outputs renumbered. The
    replaced nodes' own inputs stay (see ``dce``).

    >>> from braze.graph.ir import GNode, Graph
    >>> import numpy as np
    >>> g = Graph(n_inputs=1)
    >>> x = g.add(GNode("input", (), {"index": 0}, (2,), np.dtype(np.float32)))
    >>> y = g.add(GNode("negative", (x,), {}, (2,), np.dtype(np.float32)))
    >>> g.outputs = [y]
    >>> h = rebuild(g, lambda n, remap: GNode("abs", (remap[n.inputs[0]],), {}, n.shape,
    ...                                        n.dtype) if n.op == "negative" else None)
    >>> [n.op for n in h.nodes]
    ['input', 'abs']
    """
    out = Graph(n_inputs=g.n_inputs)
    remap: list[int] = []
    for n in g.nodes:
        new = replace(n, remap)
        if new is None:
            new = GNode(n.op, tuple(remap[j] for j in n.inputs), n.attrs, n.shape, n.dtype,
                        n.value)
        remap.append(out.add(new))
    out.outputs = [remap[i] for i in g.outputs]
    return out


@dataclass(frozen=True)
class Pass:
    """A named optimization: ``rules`` (a rule pass) or ``run`` (a function pass)."""

    name: str
    level: int
    order: int  # place in the pipeline (see the module docstring)
    doc: str
    rules: RuleSet | None = None
    run: Callable[[Graph, Counter[str]], Graph] | None = None
    dedup: bool = False  # cse: merge identical nodes while the sweep builds the graph
    summary: Callable[[Counter[str]], str] = _rules_summary

    @property
    def sweeps(self) -> bool:
        """Does this pass run inside the shared rewrite sweep?"""
        return self.run is None


PASSES: dict[str, Pass] = {}  # in pipeline order
_VERSION = [0]  # bumped by register(): configurations re-plan


def register(p: Pass) -> Pass:
    """Add ``p`` to the pipeline at its ``order`` (replacing a pass of the same name)."""
    if p.name in LOWERING:
        raise ValueError(f"{p.name!r} is the name of a lowering stage")
    if p.level not in LEVELS or p.level == 0:
        raise ValueError(f"pass {p.name!r}: level must be 1, 2 or 3, got {p.level!r}")
    if (p.rules is None and not p.dedup) == (p.run is None):
        raise ValueError(f"pass {p.name!r}: give rules (or dedup) or run, not both")
    others = [q for q in PASSES.values() if q.name != p.name]
    if any(q.order == p.order for q in others):
        raise ValueError(f"pass {p.name!r}: order {p.order} is taken")
    PASSES.clear()
    PASSES.update((q.name, q) for q in sorted([*others, p], key=lambda q: q.order))
    _VERSION[0] += 1
    return p


@dataclass(frozen=True)
class _Sweep:
    names: tuple[str, ...]
    rules: RuleSet
    dedup: bool


@dataclass(frozen=True)
class PassConfig:
    """Which passes run: those of ``level`` or below, minus ``disabled``."""

    level: int = MAX_LEVEL
    disabled: frozenset[str] = field(default_factory=frozenset)

    @cached_property
    def key(self) -> tuple[Any, ...]:
        """Hashable identity (part of the schedule cache key)."""
        return (self.level, tuple(sorted(self.disabled)))

    def passes(self) -> list[Pass]:
        return [p for p in PASSES.values() if p.level <= self.level
                and p.name not in self.disabled]

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.passes())

    def _plan(self) -> tuple[Any, ...]:
        """The passes as steps: runs of sweep passes merged into one :class:`_Sweep`."""
        cached = self.__dict__.get("_plan_cache")
        if cached is not None and cached[0] == _VERSION[0]:
            return cached[1]
        plan: list[Any] = []
        for p in self.passes():
            if p.sweeps:
                if plan and isinstance(plan[-1], _Sweep):
                    s = plan[-1]
                    plan[-1] = _Sweep(s.names + (p.name,), s.rules + (p.rules or RuleSet(p.name)),
                                      s.dedup or p.dedup)
                else:
                    plan.append(_Sweep((p.name,), p.rules or RuleSet(p.name), p.dedup))
            else:
                plan.append(p)
        steps = tuple(plan)
        self.__dict__["_plan_cache"] = (_VERSION[0], steps)
        return steps

    def run(self, g: Graph, log: list[tuple[str, Counter[str]]] | None = None) -> Graph:
        """Run the selected passes on ``g``; append ``(name, changes)`` of each to ``log``."""
        for step in self._plan():
            if isinstance(step, _Sweep):
                changes: dict[str, Counter[str]] = {n: Counter() for n in step.names}
                g = rewrite(g, step.rules, changes, dedup=step.dedup,
                            dedup_pass=next((n for n in step.names if PASSES[n].dedup), "cse"))
                if log is not None:
                    log.extend((n, changes[n]) for n in step.names)
            else:
                c: Counter[str] = Counter()
                g = step.run(g, c)
                if log is not None:
                    log.append((step.name, c))
        return g


def _names(spec: str | Iterable[str] | None) -> frozenset[str]:
    if spec is None:
        return frozenset()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = set()
    for raw in items:
        if not isinstance(raw, str):
            raise TypeError(f"disable_passes: pass names are strings, got {raw!r}")
        name = raw.strip()
        if not name:
            continue
        if name in LOWERING:
            raise ValueError(f"{name!r} cannot be disabled: it is a lowering stage that "
                             f"produces the schedule ({', '.join(LOWERING)} run at every "
                             f"level); optimization passes: {', '.join(PASSES)}")
        if name not in PASSES:
            raise ValueError(f"unknown pass {name!r}; passes: {', '.join(PASSES)}")
        out.add(name)
    return frozenset(out)


def _level(level: Any) -> int:
    if isinstance(level, str):
        try:
            level = int(level.strip())
        except ValueError:
            raise ValueError(f"optimization level must be one of {sorted(LEVELS)} "
                             f"({', '.join(f'{k} {v}' for k, v in LEVELS.items())}), "
                             f"got {level!r}") from None
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        raise ValueError(f"optimization level must be one of {sorted(LEVELS)} "
                         f"({', '.join(f'{k} {v}' for k, v in LEVELS.items())}), got {level!r}")
    return level


def make_config(opt_level: int | str | None = None,
                disable_passes: str | Iterable[str] | None = None,
                base: PassConfig | None = None) -> PassConfig:
    """A validated :class:`PassConfig` (one object per configuration): ``opt_level``
    (default: ``base``'s, else the highest) and ``disable_passes`` (names, or one
    comma-separated string) added to ``base``'s disabled passes. Unknown names raise
    ValueError listing the passes."""
    level = (base.level if base is not None else MAX_LEVEL) if opt_level is None \
        else _level(opt_level)
    disabled = _names(disable_passes) | (base.disabled if base is not None else frozenset())
    cfg = _INTERNED.get((level, disabled))
    if cfg is None:
        cfg = _INTERNED[(level, disabled)] = PassConfig(level, disabled)
    return cfg


# one object per configuration: the schedule cache tells the default apart by identity
_INTERNED: dict[tuple[int, frozenset[str]], PassConfig] = {}
DEFAULT = make_config()  # every pass of every level


def config_from_env(environ: Mapping[str, str] = os.environ) -> PassConfig:
    """The configuration ``BRAZE_OPT_LEVEL`` and ``BRAZE_DISABLE_PASSES`` ask for."""
    level = environ.get("BRAZE_OPT_LEVEL", "").strip() or None
    try:
        return make_config(level, environ.get("BRAZE_DISABLE_PASSES"))
    except ValueError as e:
        raise ValueError(f"BRAZE_OPT_LEVEL / BRAZE_DISABLE_PASSES: {e}") from None
