"""The pattern rewriter: declarative rules over the optimizer's graph.

A :class:`Pat` describes a node: its op (a name, a set of names, or any), its inputs
(sub-patterns; none given: any inputs), an optional predicate on the node, and a name
under which the match binds it. :class:`Const` matches a scalar constant, bare or
broadcast (``const`` or ``broadcast_to(const)``), optionally of a given value.
A :class:`Rule` is a pattern plus a *builder*: given the :class:`Match` (the bound
nodes and constants), it returns the node that replaces the matched root, built
through the match (``m.emit``, ``m.constant``, ``m.keep``), or None to decline
(ONNX Runtime's ``SatisfyCondition`` is the builder's first lines).
A :class:`RuleSet` holds rules in order, indexed by root op; ``+`` concatenates
sets, so several passes' rules run in one sweep (tinygrad's ``PatternMatcher``
sums the same way).

:func:`rewrite` sweeps a graph bottom-up (topological order). Each node, its inputs
already rewritten, is tried against the rules in order; the first builder that
returns a replacement wins, and every node a builder emits is rewritten in turn, so
the result is a fixed point: no rule matches any node of the output. Optionally
(``dedup``: common-subexpression elimination) a node identical to an earlier one is
not added again. Nodes a rewrite leaves unused stay until dead-code elimination.

Data enters as a :class:`~braze.graph.ir.Graph` and leaves as a new one; what fired
is counted into a ``Counter`` per pass (``changes``), read by ``bz.explain``.

>>> import braze as bz
>>> from braze.graph.ir import Graph
>>> double_neg = Rule("--x -> x", Pat("negative", Pat("negative", Pat(name="x"))),
...                   lambda m: m.keep("x"))
>>> g, _ = Graph.from_nodes([(-(-bz.asarray([1.0, 2.0])))._node])
>>> out = rewrite(g, RuleSet("demo", [double_neg]))
>>> [n.op for n in out.nodes], out.outputs
(['input', 'negative'], [0])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import GNode, Graph

MAX_REWRITES_PER_NODE = 64  # a rule set that keeps rewriting one node is a bug: say so


class Pat:
    """A node pattern: ``Pat(op, *inputs, name=, where=, commutative=, each=)``.

    * ``op``: an op name, a collection of names, or None (any op);
    * ``inputs``: one sub-pattern per input (the node must have exactly as many);
      none given: any inputs;
    * ``each``: a sub-pattern every input must match (any number of inputs);
    * ``commutative``: a two-input pattern also tries its inputs swapped;
    * ``where``: a predicate on the node (``GNode -> bool``);
    * ``name``: bind the matched node under this name (a name bound twice must
      match the same node: ``Pat("subtract", X, X)`` is ``x - x``).
    """

    __slots__ = ("ops", "inputs", "name", "where", "commutative", "each", "_order")

    def __init__(self, op: str | Iterable[str] | None = None, *inputs: Pat,
                 name: str | None = None, where: Callable[[GNode], bool] | None = None,
                 commutative: bool = False, each: Pat | None = None) -> None:
        self.ops: frozenset[str] | None = (
            None if op is None else frozenset((op,) if isinstance(op, str) else op))
        self.inputs = inputs
        self.name = name
        self.where = where
        self.commutative = commutative and len(inputs) == 2
        self.each = each
        # inputs are tried most specific first (constants, then op-constrained patterns,
        # then bare bindings), so a non-match is rejected before anything is bound
        self._order = tuple(sorted(range(len(inputs)), key=lambda k: (
            0 if isinstance(inputs[k], Const) else 1 if inputs[k].ops is not None else 2)))

    def match(self, node: GNode, idx: int | None, m: Match) -> bool:
        if self.ops is not None and node.op not in self.ops:
            return False
        if self.where is not None and not self.where(node):
            return False
        each = self.each
        if each is not None:
            nodes = m.graph.nodes
            if each.__class__ is Const and each.plain:  # fast path: "every input a constant"
                for i in node.inputs:
                    x = nodes[i]
                    if x.op != "const" and (x.op != "broadcast_to"
                                            or nodes[x.inputs[0]].op != "const"):
                        return False
            else:
                for i in node.inputs:
                    if not each.match(nodes[i], i, m):
                        return False
        if self.inputs:
            ins = node.inputs
            if len(ins) != len(self.inputs):
                return False
            if self.commutative:
                saved = m.save()
                if not self._inputs_match(ins, m):
                    m.restore(saved)
                    if not self._inputs_match(ins[::-1], m):
                        return False
            elif not self._inputs_match(ins, m):
                return False
        return self.name is None or m.bind(self.name, idx)

    def _inputs_match(self, ins: tuple[int, ...], m: Match) -> bool:
        nodes = m.graph.nodes
        pats = self.inputs
        for k in self._order:
            i = ins[k]
            if not pats[k].match(nodes[i], i, m):
                return False
        return True

    def __repr__(self) -> str:
        ops = "any" if self.ops is None else "|".join(sorted(self.ops))
        ins = ", ".join(map(repr, self.inputs))
        name = f", name={self.name!r}" if self.name else ""
        return f"Pat({ops}{', ' + ins if ins else ''}{name})"


class Const(Pat):
    """A scalar constant, bare (``const``) or broadcast (``broadcast_to(const)``).

    ``value``: match only this value (``==``; complex values never match a real one);
    ``test``: a predicate on ``(value, dtype)``. Binds ``name`` to the matched node;
    ``m.value(name)`` is the Python scalar and ``m.scalar(name)`` the bare const's index.
    """

    __slots__ = ("value", "test", "plain")

    def __init__(self, value: Any = None, *, name: str | None = None,
                 test: Callable[[Any, np.dtype], bool] | None = None) -> None:
        super().__init__(("const", "broadcast_to"), name=name)
        self.value = value
        self.test = test
        self.plain = value is None and test is None and name is None

    def match(self, node: GNode, idx: int | None, m: Match) -> bool:
        base = idx
        if node.op == "broadcast_to":
            base = node.inputs[0]
            node = m.graph.nodes[base]
            if node.op != "const":
                return False
        elif node.op != "const":
            return False
        v = node.value
        if self.value is not None and (isinstance(v, complex) or v != self.value):
            return False
        if self.test is not None and not self.test(v, node.dtype):
            return False
        if self.name is not None:
            m.values[self.name] = v
            m.scalars[self.name] = base  # type: ignore[assignment]
        return m.bind(self.name, idx)

    def __repr__(self) -> str:
        return f"Const({'' if self.value is None else repr(self.value)})"


def negative_zero(v: Any, dtype: np.dtype) -> bool:
    """``test`` for :class:`Const`: the value is -0.0 (for floats the sign matters)."""
    return not isinstance(v, complex) and v == 0 and bool(np.signbit(v))


def positive_zero(v: Any, dtype: np.dtype) -> bool:
    """``test`` for :class:`Const`: the value is +0.0 (or an integer/bool zero)."""
    return not isinstance(v, complex) and v == 0 and not np.signbit(v)


@dataclass(frozen=True)
class Rule:
    """A named rewrite: where ``pattern`` matches, ``build(match)`` returns the index of
    the replacement node (built through the match), or None to leave the node alone."""

    name: str
    pattern: Pat
    build: Callable[[Match], int | None]


class Match:
    """What a pattern bound, and the means to build a replacement in the output graph."""

    __slots__ = ("graph", "root", "bound", "values", "scalars", "_builder")

    def __init__(self, builder: _Builder, root: GNode) -> None:
        self._builder = builder
        self.graph = builder.graph
        self.root = root  # the node being rewritten (not in the graph yet)
        self.bound: dict[str, int | None] = {}
        self.values: dict[str, Any] = {}
        self.scalars: dict[str, int] = {}

    def bind(self, name: str | None, idx: int | None) -> bool:
        if name is None:
            return True
        prev = self.bound.setdefault(name, idx)
        return prev == idx

    def save(self) -> Any:
        if not self.bound and not self.values:
            return None
        return dict(self.bound), dict(self.values), dict(self.scalars)

    def restore(self, saved: Any) -> None:
        if saved is None:
            if self.bound or self.values:
                self.bound, self.values, self.scalars = {}, {}, {}
        else:
            self.bound, self.values, self.scalars = saved

    def __getitem__(self, name: str) -> int:
        i = self.bound[name]
        if i is None:
            raise KeyError(f"{name!r} names the root: use m.root")
        return i

    def node(self, name: str) -> GNode:
        return self.graph.nodes[self[name]]

    def value(self, name: str) -> Any:
        """The Python scalar a :class:`Const` bound under ``name``."""
        return self.values[name]

    def scalar(self, name: str) -> int:
        """Index of the bare 0-d const a :class:`Const` bound under ``name``."""
        return self.scalars[name]

    def keep(self, name: str) -> int | None:
        """The node bound to ``name`` as the replacement, if it has the root's shape and
        dtype (else None: the rule declines)."""
        i = self[name]
        x = self.graph.nodes[i]
        return i if x.shape == self.root.shape and x.dtype == self.root.dtype else None

    def emit(self, op: str, *inputs: int, attrs: dict[str, Any] | None = None,
             shape: tuple[int, ...] | None = None, dtype: np.dtype | None = None,
             value: Any = None) -> int:
        """Add a node (rewritten in turn; shape and dtype default to the root's)."""
        r = self.root
        return self._builder.add(GNode(op, inputs, {} if attrs is None else attrs,
                                       r.shape if shape is None else shape,
                                       r.dtype if dtype is None else dtype, value))

    def constant(self, value: Any, dtype: np.dtype | None = None,
                 shape: tuple[int, ...] | None = None) -> int:
        """A scalar constant broadcast to ``shape`` (default: the root's)."""
        dtype = self.root.dtype if dtype is None else dtype
        shape = self.root.shape if shape is None else shape
        v = np.asarray(value, dtype=dtype).reshape(()).item()
        c = self.emit("const", shape=(), dtype=dtype, value=v)
        return self.broadcast(c, shape)

    def broadcast(self, scalar: int, shape: tuple[int, ...] | None = None) -> int:
        """The 0-d node ``scalar`` broadcast to ``shape`` (default: the root's)."""
        shape = self.root.shape if shape is None else shape
        if shape == ():
            return scalar
        return self.emit("broadcast_to", scalar, attrs={"shape": shape}, shape=shape,
                         dtype=self.graph.nodes[scalar].dtype)


class RuleSet:
    """Rules in order, each attributed to a pass (for counting), indexed by root op."""

    def __init__(self, pass_name: str, rules: Iterable[Rule] = ()) -> None:
        self.entries: tuple[tuple[str, Rule], ...] = tuple((pass_name, r) for r in rules)
        self._by_op: dict[str, tuple[tuple[str, Rule], ...]] = {}

    @classmethod
    def _of(cls, entries: tuple[tuple[str, Rule], ...]) -> RuleSet:
        rs = cls("")
        rs.entries = entries
        return rs

    def __add__(self, other: RuleSet) -> RuleSet:
        return RuleSet._of(self.entries + other.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def for_op(self, op: str) -> tuple[tuple[str, Rule], ...]:
        """The rules whose root pattern can match an ``op`` node, in order."""
        got = self._by_op.get(op)
        if got is None:
            got = self._by_op[op] = () if op in ("input", "const") else tuple(
                e for e in self.entries
                if e[1].pattern.ops is None or op in e[1].pattern.ops)
        return got


class _Builder:
    """The output graph under construction: rewrites, then (optionally) deduplicates."""

    __slots__ = ("graph", "rules", "seen", "changes", "merged", "depth")

    def __init__(self, n_inputs: int, rules: RuleSet | None, dedup: bool,
                 changes: dict[str, Counter[str]] | None) -> None:
        self.graph = Graph(n_inputs=n_inputs)
        self.rules = rules if rules else None
        self.seen: dict[tuple[Any, ...], int] | None = {} if dedup else None
        self.changes = changes
        self.merged = 0
        self.depth = 0

    def add(self, node: GNode) -> int:
        rules = self.rules.for_op(node.op) if self.rules is not None else None
        if rules:
            m = Match(self, node)
            for pass_name, rule in rules:
                if m.bound or m.values:
                    m.restore(None)
                if not rule.pattern.match(node, None, m):
                    continue
                self.depth += 1
                if self.depth > MAX_REWRITES_PER_NODE:
                    raise RuntimeError(f"rewrite: rule {rule.name!r} ({pass_name}) keeps "
                                       f"rewriting {node.op} nodes: no fixed point")
                try:
                    out = rule.build(m)
                finally:
                    self.depth -= 1
                if out is not None:
                    if self.changes is not None:
                        self.changes.setdefault(pass_name, Counter())[rule.name] += 1
                    return out
        return self.insert(node)

    def insert(self, node: GNode) -> int:
        seen = self.seen
        if seen is None:
            return self.graph.add(node)
        sig = node.signature()
        j = seen.get(sig)
        if j is None:
            j = seen[sig] = self.graph.add(node)
        else:
            self.merged += 1
        return j


def rewrite(g: Graph, rules: RuleSet | None, changes: dict[str, Counter[str]] | None = None,
            dedup: bool = False, dedup_pass: str = "cse") -> Graph:
    """``g`` rewritten bottom-up to a fixed point of ``rules`` (see the module docstring);
    ``dedup``: also merge identical nodes (counted as ``merged`` under ``dedup_pass``)."""
    b = _Builder(g.n_inputs, rules, dedup, changes)
    remap: list[int] = []
    for n in g.nodes:
        ins = tuple([remap[i] for i in n.inputs]) if n.inputs else ()
        remap.append(b.add(GNode(n.op, ins, n.attrs, n.shape, n.dtype, n.value)))
    b.graph.outputs = [remap[i] for i in g.outputs]
    if dedup and changes is not None:
        changes.setdefault(dedup_pass, Counter())["merged"] += b.merged
    return b.graph
