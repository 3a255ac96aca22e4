"""fusion: the stages of :func:`braze.graph.passes.fuse.fuse`, one module each.

A simplified :class:`~braze.graph.ir.Graph` goes through

1. :mod:`.realize` -- which values get a buffer (outputs, reductions, library ops and
   their inputs, the recompute-cost, stencil, broadcast and inline-width rules), on top of
   :mod:`.analysis` (what each kernel root inlines and reads);
2. :mod:`.group` -- which kernel roots share a kernel (row and sibling merges, never
   a cycle); stages 1 and 2 repeat until the cost rule realizes nothing new;
3. :mod:`.lower` -- one kernel-IR :class:`~braze.graph.kernel.Kernel` per group plus
   library and view steps, put in dependency order by :mod:`.order`;

and leaves as a :class:`~braze.graph.kernel.Schedule`. Shared vocabulary (node kinds,
view chains, iteration spaces) is in :mod:`.space`, op costs in :mod:`.cost`, and the
record of every decision (why a value was realized, why two kernels stayed two) in
:mod:`.log`.
"""
