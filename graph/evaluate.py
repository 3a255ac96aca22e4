"""Collect the pending subgraph behind some nodes and run it, freeing as it goes.

``evaluate(targets, run)`` orders the un-evaluated nodes reachable from
``targets`` topologically (iteratively: a 100k-op chain does not hit Python's
recursion limit), calls ``run(node, *input_values)`` for each, and then:

* stores each value on its node and drops the node's ``inputs`` (it becomes a
  leaf), so evaluating the same array twice computes once;
* lets go of each node as soon as its last consumer in the graph has run, so an
  intermediate nobody else holds (no user ``Array``, no other pending graph) is
  freed right then, not at the end.

``cut_targets(roots)`` says what to evaluate when the recording layer cuts a graph that
grew too deep (a loop that never evaluates): the roots, and every pending node behind
them that something outside that subgraph still holds (a user ``Array``, another
pending graph), so that no value is computed now and again later.

>>> import numpy as np
>>> from braze.graph.node import constant
>>> n = constant(np.float32(1.0))
>>> evaluate([n], lambda node, *xs: None)[0]
array(1., dtype=float32)
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .node import Node

Run = Callable[..., Any]


def topo_order(targets: Sequence[Node]) -> list[Node]:
    """Un-evaluated nodes reachable from ``targets``, inputs before consumers: in
    recording order (``Node._seq``; a node's inputs exist before it does), which also
    keeps a loop's repeated graphs in one order."""
    seen: set[int] = set()
    stack: list[Node] = []
    for t in targets:
        if t.data is None and id(t) not in seen:
            seen.add(id(t))
            stack.append(t)
    found: list[Node] = []
    while stack:
        n = stack.pop()
        found.append(n)
        for x in n.inputs:
            if x.data is None and id(x) not in seen:
                seen.add(id(x))
                stack.append(x)
    found.sort(key=_SEQ)
    return found


_SEQ = operator.attrgetter("_seq")


def cut_targets(roots: Sequence[Node]) -> list[Node]:
    """The pending ``roots`` and the pending nodes behind them that are referenced from
    outside the subgraph they span (found by reference count: a node the subgraph alone
    holds has exactly its in-graph references). Evaluating these in one schedule leaves
    nothing behind that a later evaluation would compute again."""
    targets: list[Node] = []
    wanted: set[int] = set()
    r: Node | None
    x: Node | None
    for r in roots:
        if r.data is None and id(r) not in wanted and not _view_of_data(r):
            wanted.add(id(r))
            targets.append(r)
    order = topo_order(targets)
    inside: dict[int, int] = {}  # in-graph references to each pending node
    for n in order:
        for x in n.inputs:
            inside[id(x)] = inside.get(id(x), 0) + 1
    r = x = None  # the loop variables hold no node into the count below
    base = _REFS_HERE if _REFS_HERE >= 0 else _calibrate()
    for n in order:
        if id(n) not in wanted and sys.getrefcount(n) > base + inside.get(id(n), 0) and \
                not _view_of_data(n):
            targets.append(n)
    return targets


def iteration_boundary(roots: Sequence[Node]) -> tuple[list[Node], list[Node]] | None:
    """Where the pending graph behind ``roots`` (a loop's, cut as it grows) last started
    an iteration: (the pending nodes recorded before that point that later ones read,
    the pending nodes recorded from it on), or None when it shows no repetition.

    In recording order a loop's graph repeats the signatures (op, shape, dtype) of its
    body, after whatever came before the loop. Evaluating only the whole iterations, and
    leaving the one in progress pending, starts every later segment at the same point of
    the body: each is the same graph (one schedule, one set of kernels), where a cut at a
    fixed depth drifts through the body and makes every segment new. The period taken is
    the one whose repetition covers the most of the graph (the body, not a repetition
    inside it: a sum of rolls).

    >>> import braze as bz
    >>> x = bz.ones(4)
    >>> for _ in range(3):
    ...     x = bz.sqrt(x * 2.0)
    >>> head, tail = iteration_boundary([bz.exp(x)._node.inputs[0]])
    >>> [n.op.name for n in head], [n.op.name for n in tail]  # the last iteration waits
    (['sqrt'], ['multiply', 'sqrt'])
    """
    order = topo_order(list(roots))  # (in recording order)
    count = len(order)
    ids: dict[tuple[Any, ...], int] = {}
    sig = [ids.setdefault((n.op, n.shape, n.dtype), len(ids)) for n in order]
    best = None  # (where the repetition starts, period)
    for period in range(1, count // 2 + 1):
        if sig[count - 2 * period:count - period] != sig[count - period:]:
            continue  # (the last two periods differ: not this one)
        start = count - 2 * period
        while start > 0 and sig[start - 1] == sig[start - 1 + period]:
            start -= 1
        if best is None or start < best[0]:
            best = (start, period)
    if best is None:
        return None
    start, period = best
    boundary = start + period * ((count - 1 - start) // period)
    if boundary <= start:
        return None
    later = {id(n) for n in order[boundary:]}
    head: dict[int, Node] = {}
    for n in [*order[boundary:], *roots]:
        for x in (n.inputs if id(n) in later else (n,)):
            if x.data is None and id(x) not in later:
                head[id(x)] = x
    return list(head.values()), order[boundary:]


def _view_of_data(n: Node) -> bool:
    """A pending view (or chain of views) of evaluated data (``X.T`` of an evaluated X):
    free to read in place, so no cut target; evaluated, it would become a strided leaf
    that every later schedule copies to row-major."""
    while n.data is None:
        if n.op.kind != "view" or len(n.inputs) != 1:
            return False
        n = n.inputs[0]
    return True


def evaluate(targets: Sequence[Node], run: Run, order: list[Node] | None = None) -> list[Any]:
    """Compute the value of every node in ``targets``; return them in order."""
    if order is None:
        order = topo_order(targets)
    if order:
        _execute(order, run)  # type: ignore[arg-type]
    return [t.data for t in targets]


def _execute(order: list[Node | None], run: Run) -> None:
    # Every computed value is stored on its node and the node's inputs are dropped
    # at once. ``order`` is this function's only reference to a node; it is cleared
    # when the node's last in-graph consumer has run. A node nobody else holds (no
    # user Array, no pending graph) is then freed with its value; one that is held
    # keeps its value, so evaluating it again computes nothing.
    pos = {id(n): i for i, n in enumerate(order)}
    remaining = [0] * len(order)  # in-graph consumers not yet run
    for n in order:
        for x in n.inputs:  # type: ignore[union-attr]
            j = pos.get(id(x))
            if j is not None:
                remaining[j] += 1
    n = x = None  # hold no node past its time
    for i in range(len(order)):
        node = order[i]
        assert node is not None
        inputs, node.inputs = node.inputs, ()
        node.data = run(node, *[x.data for x in inputs])
        for x in inputs:
            j = pos.get(id(x))
            if j is not None:
                remaining[j] -= 1
                if remaining[j] == 0:
                    order[j] = None
        if remaining[i] == 0:
            order[i] = None
        del inputs, node
        x = None


_REFS_HERE = -1  # see _calibrate


def _calibrate() -> int:
    """References to a node inside :func:`cut_targets` beyond its in-graph ones (its slot
    in ``order``, the loop variable, getrefcount's argument: 3 on CPython 3.11), read
    from a graph where nothing outside holds the middle node: the count is specific to
    the interpreter, so it is measured, not assumed."""
    global _REFS_HERE
    import numpy as np

    from .ops import CONSTANT

    f32 = np.dtype(np.float32)
    leaf = Node(CONSTANT, (), {}, (), f32, np.zeros((), f32))
    root = Node(CONSTANT, (Node(CONSTANT, (leaf,), {}, (), f32),), {}, (), f32)
    for base in range(16):
        _REFS_HERE = base
        if len(cut_targets([root])) == 1:
            return base
    raise AssertionError("cut_targets: reference counts could not be calibrated")
