"""Kernel IR and schedules: what the fusion compiler hands to a backend.

A :class:`Kernel` is one fused loop nest, backend-agnostic:

* ``shape`` is its iteration space; the last ``n_red`` dims are reduced (a *row*
  is one index of the other, *outer*, dims);
* ``loads`` read buffer slots through strided :class:`~braze.graph.view.View` index
  maps (broadcast, transpose, slice and reshape folded in — views never copy);
* ``instrs`` is an SSA expression DAG over the op table; ``row`` instructions are
  constant along the reduced dims (computed once per row); a ``reduce`` instruction
  turns an element value into a row value, so softmax / layer norm (reduce ->
  broadcast -> elementwise) are one kernel with several reduce stages;
* ``stores`` write instructions to output slots (row values through a view over the
  outer dims only).

A :class:`Schedule` is the linear program: kernel steps, library steps (matmul...),
view steps (an output that is only a view of a buffer: no copy), with slot shapes,
the memory plan and its peak.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .view import View


@dataclass(frozen=True)
class Load:
    slot: int
    view: View  # over the kernel's full iteration shape


@dataclass(frozen=True)
class Instr:
    op: str  # an op-table name, or "load" / "const"
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]  # frozen attributes; load: ("load", i); const: ("value", v)
    dtype: np.dtype
    row: bool  # constant along the reduced dims

    def attr(self, name: str) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        raise KeyError(name)


@dataclass(frozen=True)
class Store:
    instr: int
    slot: int
    view: View  # element values: over `shape`; row values: over the outer dims


@dataclass
class Kernel:
    shape: tuple[int, ...]
    n_red: int
    loads: list[Load]
    instrs: list[Instr]
    stores: list[Store]
    ops: list[str] = field(default_factory=list)  # the graph ops it fused, in order

    @property
    def outer_shape(self) -> tuple[int, ...]:
        return self.shape[:len(self.shape) - self.n_red]

    @property
    def name(self) -> str:
        """Structural name: the fused ops and a hash of the expression (not of the sizes)."""
        body = repr([(i.op, i.args, i.attrs if i.op != "load" else (), i.dtype.name, i.row)
                     for i in self.instrs]) + repr([(s.instr, len(s.view.shape))
                                                     for s in self.stores])
        tag = "_".join(dict.fromkeys(o for o in self.ops))[:40] or "copy"
        kind = "row" if self.n_red else "ew"
        return f"{kind}_{tag}_{hashlib.sha1(body.encode()).hexdigest()[:8]}"

    def source(self, target: str) -> str:
        """Generated source for ``target`` ('cpu', 'cuda', 'metal'), from the code generator
        a backend registered in ``SOURCE_GENERATORS``."""
        gen = SOURCE_GENERATORS.get(target)
        if gen is None:
            raise NotImplementedError(f"no {target!r} code generator is registered "
                                      f"(registered: {sorted(SOURCE_GENERATORS)})")
        return gen(self)


# target name -> function from Kernel to source text; backends register theirs (the graph
# package never imports a backend).
SOURCE_GENERATORS: dict[str, Any] = {}


@dataclass
class KernelStep:
    kernel: Kernel


@dataclass
class LibraryStep:
    op: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]
    output: int


@dataclass
class ViewStep:
    source: int
    view: View
    output: int


Step = KernelStep | LibraryStep | ViewStep


@dataclass
class Slot:
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n


@dataclass
class Schedule:
    slots: list[Slot]
    input_slots: list[int]  # slot of each graph input, in input order
    const_slots: dict[int, Any]  # slot -> 0-d value
    output_slots: list[int]
    steps: list[Step]
    storage: dict[int, int] = field(default_factory=dict)  # slot -> storage id (memory plan)
    storage_bytes: dict[int, int] = field(default_factory=dict)
    frees: list[list[int]] = field(default_factory=list)  # slots dead after each step
    peak_bytes: int = 0

    @property
    def kernels(self) -> list[Kernel]:
        return [s.kernel for s in self.steps if isinstance(s, KernelStep)]

    @property
    def num_kernels(self) -> int:
        """Launches: fused kernels plus library ops (views are free)."""
        return sum(1 for s in self.steps if not isinstance(s, ViewStep))
