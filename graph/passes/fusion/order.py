"""order: put the schedule's steps in an order where every slot is written before it is read.

Data enters as ``(graph position, step)`` pairs -- kernel, library and view steps, each
tagged with the graph node that places it -- and leaves as the list of steps: a
depth-first topological order over slot writes and reads, stable on graph order (a
step runs as early as the graph put it, after what it reads). A cycle cannot arise
from grouping (:mod:`.group` refuses merges that would make one); meeting one is an
internal error.

>>> from braze.graph.kernel import LibraryStep
>>> a, b = LibraryStep("matmul", {}, (1,), 2), LibraryStep("matmul", {}, (0,), 1)
>>> order_steps([(0, a), (1, b)]) == [b, a]  # a reads slot 1, which b writes
True
"""

from __future__ import annotations

from typing import Any

from ...kernel import KernelStep, LibraryStep


def order_steps(steps: list[tuple[int, Any]]) -> list[Any]:
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
