"""The optimizer's graph: an index-based copy of the pending subgraph.

Passes never touch user-visible :class:`~braze.graph.node.Node` objects; they work on
a :class:`Graph` — nodes in topological order, inputs by index — and return a new
one. Data-bearing leaves become numbered runtime *inputs*; 0-d leaves become
*constants* whose value is part of the structure (they fold and inline).

``Graph.key()`` is the structural hash key: ops, attributes, shapes, dtypes and
wiring, never input data. Two evals that build the same graph share one
optimized schedule.

>>> import numpy as np
>>> from braze.graph.node import Node, constant
>>> from braze.graph.ops import OPS
>>> x = constant(np.ones(3, np.float32))
>>> g, _ = Graph.from_nodes([Node(OPS["exp"], (x,), {}, (3,), x.dtype)])
>>> [n.op for n in g.nodes], g.outputs
(['input', 'exp'], [1])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .evaluate import topo_order
from .node import Node
from .ops import PARAMETER


@dataclass
class GNode:
    """One node of the optimizer's graph. ``op`` is an op name, or 'input' / 'const'."""

    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    shape: tuple[int, ...]
    dtype: np.dtype
    value: Any = None  # the scalar of a 'const'; the slot number of an 'input'

    def signature(self) -> tuple[Any, ...]:
        return (self.op, self.inputs, attrs_key(self.attrs), self.shape, self.dtype,
                _const_key(self.value) if self.op == "const" else self.value)


@dataclass
class Graph:
    nodes: list[GNode] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    n_inputs: int = 0

    def add(self, node: GNode) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def key(self) -> tuple[Any, ...]:
        return (tuple(n.signature() for n in self.nodes), tuple(self.outputs))

    def live(self) -> list[bool]:
        """Per node: do the outputs depend on it? (Passes leave replaced nodes behind.)"""
        live = [False] * len(self.nodes)
        stack = list(self.outputs)
        while stack:
            i = stack.pop()
            if not live[i]:
                live[i] = True
                stack.extend(self.nodes[i].inputs)
        return live

    def live_uses(self) -> list[int]:
        """Per node: its uses by live nodes, plus one per place among the outputs."""
        live = self.live()
        uses = [0] * len(self.nodes)
        for i, n in enumerate(self.nodes):
            if live[i]:
                for j in n.inputs:
                    uses[j] += 1
        for j in self.outputs:
            uses[j] += 1
        return uses

    def consumers(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for j in n.inputs:
                out[j].append(i)
        return out

    @staticmethod
    def from_nodes(targets: list[Node]) -> tuple[Graph, list[Node]]:
        """The graph behind ``targets`` and the leaf Nodes bound to its input slots."""
        t = trace(targets)
        return t.build(), t.leaves


class Trace:
    """One walk over the pending graph: its structural key and leaves; the Graph itself
    is built only when the key misses the schedule cache."""

    __slots__ = ("key", "leaves", "_rows", "_outputs")

    def __init__(self, key: tuple[Any, ...], leaves: list[Node], rows: list[Any],
                 outputs: list[int]) -> None:
        self.key = key
        self.leaves = leaves
        self._rows = rows
        self._outputs = outputs

    def build(self) -> Graph:
        g = Graph(n_inputs=len(self.leaves))
        for op, ins, attrs, shape, dtype, value in self._rows:
            g.nodes.append(GNode(op, ins, attrs, shape, dtype, value))
        g.outputs = list(self._outputs)
        return g


def trace(targets: list[Node], order: list[Node] | None = None) -> Trace:
    """Walk the un-evaluated graph behind ``targets`` (see :class:`Trace`; ``order``:
    ``topo_order(targets)`` when the caller has it already)."""
    index: dict[int, int] = {}
    leaves: list[Node] = []
    rows: list[Any] = []
    sigs: list[Any] = []

    def ref(n: Node) -> int:
        i = index.get(id(n))
        if i is None:  # an evaluated node (leaf or earlier result): data bound at run time
            data = n.data
            i = index[id(n)] = len(rows)
            if data.ndim == 0 and n.op.name == "constant":
                v = data.item()
                rows.append(("const", (), n.attrs, (), n.dtype, v))
                sigs.append(("const", n.dtype, type(v), repr(v)))
            else:
                rows.append(("input", (), {}, n.shape, n.dtype, len(leaves)))
                sigs.append(("input", n.shape, n.dtype))
                leaves.append(n)
        return i

    for n in topo_order(targets) if order is None else order:
        if n.op is PARAMETER:  # a traced function's input: bound at each call
            index[id(n)] = len(rows)
            rows.append(("input", (), {}, n.shape, n.dtype, len(leaves)))
            sigs.append(("input", n.shape, n.dtype))
            leaves.append(n)
            continue
        ins = tuple([ref(x) for x in n.inputs])
        index[id(n)] = len(rows)
        rows.append((n.op.name, ins, n.attrs, n.shape, n.dtype, None))
        sigs.append((n.op.name, ins, attrs_key(n.attrs) if n.attrs else (), n.shape, n.dtype))
    outputs = [ref(t) for t in targets]
    return Trace((tuple(sigs), tuple(outputs)), leaves, rows, outputs)


def _const_key(v: Any) -> Any:
    # -0.0 and 0.0 (and NaN payloads) are different constants
    return (type(v).__name__, repr(v))


def attrs_key(attrs: dict[str, Any]) -> tuple[Any, ...]:
    """Hashable, exact form of an attribute dict (fast path for the common empty dict)."""
    if not attrs:
        return ()
    return tuple((k, ("f", repr(v)) if type(v) is float else v) for k, v in attrs.items())


def freeze(x: Any) -> Any:
    """A hashable form of attribute values (dicts, lists, dtypes)."""
    if isinstance(x, dict):
        return tuple(sorted((k, freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(freeze(v) for v in x)
    if isinstance(x, np.dtype):
        return x.name
    if isinstance(x, float):
        return ("f", repr(x))
    return x
