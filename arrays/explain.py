"""``bz.explain``: what the compiler does with a function, without running it.

The report lists the launches (fused kernels and library calls, with the ops each
fused), the planned memory peak, and the passes that ran with what each changed
(``.passes``: ``(name, summary)`` pairs, the lowering stages ``fuse`` and
``plan_memory`` last).

>>> import numpy as np, braze as bz
>>> x = bz.asarray(np.ones((4, 8), np.float32))
>>> r = bz.explain(lambda x: bz.softmax(x * 2.0, axis=-1), x)
>>> r.num_kernels, r.kernels[0].ops
(1, ['multiply', 'max', 'subtract', 'exp', 'sum', 'divide'])
>>> r = bz.explain(lambda x: bz.sin(x) * 1.0 + bz.sin(x) ** 2, x)
>>> for name, what in r.passes:
...     print(f"{name}: {what}")
constant_folding: nothing to fold
identities: 2 rewrites (x*1 -> x, x**2 -> x*x)
cse: 1 node merged
layout: no rewrites
small_reductions: no rewrites
conv_epilogue: no epilogues fused
conv_concat: no concatenations of convolutions
conv_pool: no pools of convolutions
dce: 2 nodes removed
fuse: 3 ops -> 1 kernel
plan_memory: 1 buffer in 1 storage, peak 256 bytes
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backends import current as _current_backend
from ..graph import compiler as _compiler
from ..graph.compiler import describe, optimize
from ..graph.ir import trace
from ..graph.kernel import Kernel, KernelStep, LibraryStep, Schedule
from ..graph.passes.registry import LEVELS, PassConfig
from .array import Array
from .compile import CompiledFunction, flatten


@dataclass
class KernelReport:
    """One launch: a fused kernel (``kind='kernel'``) or a library call (``'library'``)."""

    name: str
    kind: str
    ops: list[str]
    inputs: list[tuple[tuple[int, ...], str]]  # (shape, dtype) of each buffer read
    outputs: list[tuple[tuple[int, ...], str]]
    shape: tuple[int, ...] = ()
    kernel: Kernel | None = field(default=None, repr=False)
    # a library call's autotuned choice on the current backend: chosen, default,
    # timings_us of the alternatives measured, excluded (with reasons); None: not tuned
    tactic: dict[str, Any] | None = None

    def source(self, target: str) -> str:
        """Generated source for ``target`` ('cpu', 'cuda' or 'metal')."""
        if self.kernel is None:
            raise ValueError(f"{self.name} is a library call: it has no generated source")
        return self.kernel.source(target)


@dataclass
class Report:
    """What ``bz.explain`` found: launches, fused ops, the planned memory peak, and the
    passes that ran (``passes``: ``(name, what it changed)``, in order)."""

    schedule: Schedule = field(repr=False)
    kernels: list[KernelReport]
    passes: list[tuple[str, str]] = field(default_factory=list)
    config: PassConfig | None = field(default=None, repr=False)

    @property
    def num_kernels(self) -> int:
        return len(self.kernels)

    @property
    def peak_bytes(self) -> int:
        return self.schedule.peak_bytes

    def __str__(self) -> str:
        lines = [describe(self.schedule)]
        if self.config is not None:
            off = f"; disabled: {', '.join(sorted(self.config.disabled))}" \
                if self.config.disabled else ""
            lines.append(f"passes (level {self.config.level}, "
                         f"{LEVELS[self.config.level]}{off}):")
            lines += [f"  {name}: {what}" for name, what in self.passes]
        tuned = [k for k in self.kernels if k.tactic]
        if tuned:
            lines.append("tactics (autotuned on this machine):")
        for k in tuned:
            t = k.tactic or {}
            measured = ", ".join(f"{n} {us:.1f} us" for n, us in
                                 sorted(t.get("timings_us", {}).items(), key=lambda kv: kv[1]))
            lines.append(f"  {k.name}: {t.get('chosen')} (heuristic: {t.get('default')}); "
                         f"measured {measured}")
            lines += [f"    excluded {n}: {why}" for n, why in t.get("excluded", {}).items()]
        return "\n".join(lines)

    def to_dot(self) -> str:
        """Graphviz text: buffers as ellipses, launches as boxes."""
        lines = ["digraph braze {", "  rankdir=LR;"]
        s = self.schedule
        for i, slot in enumerate(s.slots):
            lines.append(f'  s{i} [shape=ellipse, label="{slot.shape} {slot.dtype.name}"];')
        launch = 0
        for st in s.steps:
            if isinstance(st, KernelStep):
                k = st.kernel
                label = f"{k.name}\\n{' '.join(k.ops)}"
                reads = [ld.slot for ld in k.loads]
                writes = [x.slot for x in k.stores]
            elif isinstance(st, LibraryStep):
                label, reads, writes = st.op, list(st.inputs), [st.output]
            else:
                lines.append(f'  s{st.source} -> s{st.output} [style=dashed, label="view"];')
                continue
            lines.append(f'  k{launch} [shape=box, label="{label}"];')
            lines += [f"  s{r} -> k{launch};" for r in dict.fromkeys(reads)]
            lines += [f"  k{launch} -> s{w};" for w in writes]
            launch += 1
        lines.append("}")
        return "\n".join(lines)


def explain(fn: Any, *args: Any, **kwargs: Any) -> Report:
    """Trace ``fn(*args, **kwargs)`` and report the optimized schedule (nothing runs).

    Works on plain functions and on ``bz.compile``d ones (with the passes those were
    compiled with: ``opt_level``, ``disable_passes``).

    >>> import numpy as np, braze as bz
    >>> a = bz.asarray(np.ones(8, np.float32))
    >>> bz.explain(lambda a, b: bz.exp(a) * b + 1.0, a, a).num_kernels
    1
    >>> print(bz.explain(bz.compile(lambda a: a * 2.0 + 0.0, opt_level=0), a))
    schedule: 1 launches, planned peak 64 bytes
      [0] kernel ... over (8,): multiply add -> slots [1]
    passes (level 0, none):
      fuse: 2 ops -> 1 kernel
      plan_memory: 1 buffer in 1 storage, peak 64 bytes
    """
    config = _compiler.CONFIG
    if isinstance(fn, CompiledFunction):
        if fn.pass_config is not None:
            config = fn.pass_config
        fn = fn.fn
    out = fn(*args, **kwargs)
    leaves, _ = flatten(out)
    targets = [x._node for x in leaves if isinstance(x, Array) and x._node.data is None]
    log: list[tuple[str, str]] = []
    schedule = optimize(trace(targets).build(), config, log)
    reports: list[KernelReport] = []
    for st in schedule.steps:
        if isinstance(st, KernelStep):
            k = st.kernel
            ins = [(schedule.slots[ld.slot].shape, schedule.slots[ld.slot].dtype.name)
                   for ld in k.loads]
            outs = [(schedule.slots[x.slot].shape, schedule.slots[x.slot].dtype.name)
                    for x in k.stores]
            reports.append(KernelReport(k.name, "kernel", list(k.ops), ins, outs, k.shape, k))
        elif isinstance(st, LibraryStep):
            ins = [(schedule.slots[i].shape, schedule.slots[i].dtype.name) for i in st.inputs]
            o = schedule.slots[st.output]
            report = getattr(_current_backend(), "tactic_report", None)
            reports.append(KernelReport(st.op, "library", [st.op], ins,
                                        [(o.shape, o.dtype.name)], o.shape,
                                        tactic=report(st.op, st.attrs, ins) if report else None))
    return Report(schedule, reports, log, config)
