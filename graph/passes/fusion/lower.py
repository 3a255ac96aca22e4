"""lower: turn the groups of kernel roots into a :class:`~braze.graph.kernel.Schedule`.

Data enters as a :class:`~.realize.Fuser` (the realized set and what each root
inlines) and the groups of :mod:`.group`; it leaves as a Schedule: one slot per
buffer, one :class:`~braze.graph.kernel.Kernel` per group (loads through folded views,
an SSA instruction list, stores), a library step per library op and a view step per
realized view that is only a view of a buffer, put in dependency order by
:mod:`.order`. :func:`build_kernel` is the translation of one group: each root's
expression is walked down to buffers (views folded into the loads, shared
subexpressions emitted once, reductions of the kernel read back as row values).
"""

from __future__ import annotations

from typing import Any

from ...kernel import Instr, Kernel, KernelStep, LibraryStep, Load, Schedule, Slot, Store, ViewStep
from ...view import View
from .order import order_steps
from .realize import Fuser
from .space import (
    VIEW_ATTR,
    Chain,
    apply_chain,
    chain_view,
    is_row_shape,
    layout_of,
    member_chain,
    natural,
    stored_read,
    view_key,
)


def lower(f: Fuser, groups: list[list[int]]) -> Schedule:
    """The schedule computing ``f.g``'s outputs with one kernel per group."""
    g = f.g
    slots: list[Slot] = []
    slot_of: dict[int, int] = {}
    const_slots: dict[int, Any] = {}

    def slot(i: int) -> int:
        s = slot_of.get(i)
        if s is None:
            n = g.nodes[i]
            s = slot_of[i] = len(slots)
            slots.append(Slot(n.shape, n.dtype))
            if n.op == "const":
                const_slots[s] = n.value
        return s

    input_slots = [0] * g.n_inputs
    for i, n in enumerate(g.nodes):
        if n.op == "input":
            input_slots[n.value] = slot(i)

    steps: list[tuple[int, Any]] = []
    in_group = {r for grp in groups for r in grp}
    for grp in groups:
        steps.append((max(grp), KernelStep(build_kernel(f, grp, slot))))
    for i, n in enumerate(g.nodes):
        k = f.kinds[i]
        if k == "library":
            steps.append((i, LibraryStep(n.op, n.attrs, tuple(slot(j) for j in n.inputs),
                                         slot(i))))
        elif k == "view" and i in f.realized and i not in in_group:
            base, chain = f.view_base(i)  # type: ignore[misc]
            view = apply_chain(View.contiguous(g.nodes[base].shape), chain)
            steps.append((i, ViewStep(slot(base), view, slot(i))))  # type: ignore[arg-type]
    output_slots = [slot(i) for i in g.outputs]
    return Schedule(slots, input_slots, const_slots, output_slots, order_steps(steps))


def _consumed_inside(f: Fuser, c: int, group: set[int]) -> bool:
    """Is node c computed only inside the kernels of ``group`` (a root or inlined there)?"""
    stack, seen = [c], set()
    while stack:
        x = stack.pop()
        if x in seen or x in group:
            continue
        seen.add(x)
        if f.is_buffer(x) or x in f.g.outputs or not f.consumers[x]:
            return False
        stack.extend(f.consumers[x])
    return True


def build_kernel(f: Fuser, group: list[int], slot: Any) -> Kernel:
    """One kernel computing the roots of ``group`` (``slot``: node -> buffer slot)."""
    g = f.g
    group_set = set(group)
    shape, n_red, perm = layout_of(f, group)  # type: ignore[misc]
    identity = perm == tuple(range(len(perm)))
    n_outer = len(shape) - n_red

    loads: list[Load] = []
    load_index: dict[tuple[int, View], int] = {}
    instrs: list[Instr] = []
    memo: dict[tuple[Any, ...], int] = {}
    reduce_instr: dict[int, int] = {}
    member_instr: dict[int, tuple[int, View]] = {}  # stored member -> (instr, read view)
    ops: list[str] = []

    def add(op: str, args: tuple[int, ...], attrs: tuple[Any, ...], dtype: Any, row: bool) -> int:
        key = (op, args, attrs, dtype)  # (dtype.name is a slow Python property)
        j = memo.get(key)
        if j is None:
            instrs.append(Instr(op, args, attrs, dtype, row))
            j = memo[key] = len(instrs) - 1
            if op not in ("load", "const"):
                ops.append(op)
        return j

    def load(buf: int, c: Chain) -> int:
        node = g.nodes[buf]
        v = chain_view(node.shape, c)
        assert v is not None
        key = (slot(buf), v)
        li = load_index.get(key)
        if li is None:
            li = load_index[key] = len(loads)
            loads.append(Load(slot(buf), v))
        row = n_red > 0 and all(s == 0 for s in v.strides[n_outer:])
        return add("load", (), (("load", li),), node.dtype, row)

    done: dict[tuple[int, Any, bool], int] = {}

    def children(i: int, c: Chain, is_root: bool) -> list[tuple[int, Chain, bool]] | int:
        """The sub-values node i needs under chain c, or its instruction if it needs none."""
        node = g.nodes[i]
        k = f.kinds[i]
        if k == "const":
            return add("const", (), (("value", node.value),), node.dtype, True)
        if not is_root:
            if i in reduce_instr:  # a reduction of this kernel, read as a row value
                return reduce_instr[i]
            if i in member_instr:  # a value this kernel computes (and stores): use it
                j, want = member_instr[i]
                assert chain_view(node.shape, c) == want, "fuse: a kernel reads back a " \
                    "buffer it writes"
                return j
            if f.is_buffer(i):
                return load(i, c)
        if k == "view":
            return [(node.inputs[0], ((node.op, node.attrs[VIEW_ATTR[node.op]], i),) + c, False)]
        if k == "reduce":
            src = node.inputs[0]
            rp = f.space(i)[2]
            rc: Chain = (("permute_dims", rp, src),) if rp != tuple(range(len(rp))) else ()
            return [(src, rc, False)]
        return [(j, c if g.nodes[j].shape == node.shape else
                 (("broadcast_to", node.shape, i),) + c, False) for j in node.inputs]

    def finish(i: int, args: list[int]) -> int:
        node = g.nodes[i]
        k = f.kinds[i]
        if k == "view":
            return args[0]
        if k == "reduce":
            return add(node.op, (args[0],), (), node.dtype, True)
        row = all(instrs[a].row for a in args)
        return add(node.op, tuple(args), tuple(sorted(node.attrs.items())), node.dtype, row)

    def key_of(kid: tuple[int, Chain, bool]) -> tuple[int, Any, bool]:
        """A sub-value by its index map, not its path of views (see .space.view_key)."""
        i, c, is_root = kid
        return i, view_key(g.nodes[i].shape, c), is_root

    def translate(i0: int, c0: Chain, root: int) -> int:
        """The instruction computing node i0 seen through chain c0 (iterative, memoized
        by index map: a node reached through several paths of views at the same elements
        is translated once)."""
        top = (i0, c0, i0 == root)
        stack: list[tuple[tuple[int, Chain, bool], Any, Any]] = [(top, key_of(top), None)]
        while stack:
            kid, key, kids = stack[-1]
            if key in done:
                stack.pop()
                continue
            if kids is None:
                sub = children(*kid)
                if isinstance(sub, int):
                    done[key] = sub
                    stack.pop()
                    continue
                kids = [(k, key_of(k)) for k in sub]
                stack[-1] = (kid, key, kids)
                stack.extend((k, kk, None) for k, kk in kids if kk not in done)
                continue
            if all(kk in done for _, kk in kids):
                done[key] = finish(kid[0], [done[kk] for _, kk in kids])
                stack.pop()
            else:
                stack.extend((k, kk, None) for k, kk in kids if kk not in done)
        return done[key_of(top)]

    # members that other members of this kernel read (in registers, never from the buffer)
    read_here = {b for m in group for b, _ in f.loads.get(m, ()) if b in group_set}
    outputs = set(g.outputs)
    stores: list[Store] = []
    for r in sorted(group):
        node = g.nodes[r]
        if f.kinds[r] == "reduce":
            j = reduce_instr[r] = translate(r, (), r)
            view = View.contiguous(shape[:n_outer])
        else:
            if n_red and is_row_shape(node.shape, shape, n_red) and \
                    node.shape != natural(shape, perm):  # one value per row
                j = translate(r, member_chain(f, r, shape, n_red, perm), r)
                view = View.contiguous(shape[:n_outer])
            else:
                chain: Chain = () if identity else (("permute_dims", perm, r),)
                j = translate(r, chain, r)
                view = apply_chain(View.contiguous(node.shape), chain)  # type: ignore[assignment]
            member_instr[r] = (j, stored_read(f, r, (shape, n_red, perm)))
        needed = r in outputs or (f.kinds[r] != "reduce" and r not in read_here) or \
            not all(_consumed_inside(f, c, group_set) for c in f.consumers[r])
        if needed:  # a value only this kernel reads needs no buffer
            stores.append(Store(j, slot(r), view.canonical()))
    return Kernel(shape, n_red, loads, instrs, stores, ops)
