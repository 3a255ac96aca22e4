"""plan_memory: buffer lifetimes on the linear schedule, reuse, and the planned peak.

Each slot written by a kernel lives from the step that writes it to the last step
that reads it (outputs live to the end; inputs and constants belong to the caller
and are counted as live throughout). A kernel output takes the storage of a slot
that died earlier with the same byte size, or — *in place* — of one of its own
inputs that dies at this very step, when every load of that input in the kernel
uses exactly the store's index map (each element is read before it is written, by
the same iteration). A library output takes a dead storage of its byte size too
(never in place: its inputs are read while it is written; a replay writes it there,
``run_schedule`` adopts the library's result as that storage); a view aliases its
source.

>>> from braze.graph.kernel import Schedule, Slot
>>> s = plan_memory(Schedule([Slot((4,), __import__("numpy").dtype("f4"))], [0], {}, [0], []))
>>> s.peak_bytes
16
"""

from __future__ import annotations

from ..kernel import KernelStep, LibraryStep, Schedule, ViewStep


def _reads_writes(step: object) -> tuple[list[int], list[int]]:
    if isinstance(step, KernelStep):
        k = step.kernel
        return [ld.slot for ld in k.loads], [s.slot for s in k.stores]
    if isinstance(step, LibraryStep):
        return list(step.inputs), [step.output]
    assert isinstance(step, ViewStep)
    return [step.source], [step.output]


def plan_memory(s: Schedule) -> Schedule:
    """Fill ``s.storage``, ``s.storage_bytes``, ``s.frees`` (storage ids to release after
    each step) and ``s.peak_bytes`` (in place)."""
    n = len(s.steps)
    last_use: dict[int, int] = {}
    alias_of: dict[int, int] = {}  # view output -> the slot whose memory it shares
    for t, step in enumerate(s.steps):
        reads, _ = _reads_writes(step)
        for r in reads:
            last_use[alias_of.get(r, r)] = t
        if isinstance(step, ViewStep):
            alias_of[step.output] = alias_of.get(step.source, step.source)
    pinned = set(s.input_slots) | set(s.const_slots)
    for o in s.output_slots:
        last_use[alias_of.get(o, o)] = n
    storage: dict[int, int] = {}
    storage_bytes: dict[int, int] = {}
    written_at: dict[int, int] = {}
    pool: dict[int, list[int]] = {}  # nbytes -> storage ids free for reuse
    for t, step in enumerate(s.steps):
        if isinstance(step, ViewStep):
            continue
        reads, writes = _reads_writes(step)
        dying = [r for r in dict.fromkeys(reads) if last_use.get(r) == t and r in storage]
        taken: set[int] = set()
        for w in writes:
            size = s.slots[w].nbytes
            sid = None
            if isinstance(step, KernelStep):
                sid = _in_place(step, w, [r for r in dying if storage[r] not in taken],
                                storage, s)
            if sid is None and pool.get(size):  # storage dead before this step (never
                sid = pool[size].pop()  # one of its inputs: those join the pool after it)
            if sid is None:
                sid = len(storage_bytes)
                storage_bytes[sid] = size
            storage[w] = sid
            written_at[w] = t
            taken.add(sid)
        for r in dying:
            if storage[r] not in taken:
                pool.setdefault(storage_bytes[storage[r]], []).append(storage[r])
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for slot, sid in storage.items():
        first[sid] = min(first.get(sid, n), written_at[slot])
        last[sid] = max(last.get(sid, -1), last_use.get(slot, written_at[slot]))
    frees: list[list[int]] = [[] for _ in range(n)]
    for sid, t in last.items():
        if t < n:
            frees[t].append(sid)
    base = sum(s.slots[i].nbytes for i in pinned)
    peak = base
    for t in range(n):
        peak = max(peak, base + sum(storage_bytes[sid] for sid in storage_bytes
                                    if first[sid] <= t <= last[sid]))
    s.storage, s.storage_bytes, s.frees, s.peak_bytes = storage, storage_bytes, frees, peak
    return s


def _in_place(step: KernelStep, w: int, dying: list[int], storage: dict[int, int],
              s: Schedule) -> int | None:
    for r in dying:
        if r in s.input_slots or r in s.const_slots:
            continue
        if _overwrites(step, w, r, s):
            return storage[r]
    return None


def _overwrites(step: KernelStep, w: int, r: int, s: Schedule) -> bool:
    """Whether kernel ``step`` may store slot ``w`` over slot ``r``'s memory: same bytes
    and dtype, no reduction, and every load of ``r`` at the store's own index map (each
    element read before it is written, by the same iteration)."""
    k = step.kernel
    if k.n_red or s.slots[r].nbytes != s.slots[w].nbytes or s.slots[r].dtype != s.slots[w].dtype:
        return False
    store = next(st for st in k.stores if st.slot == w)
    views = [ld.view for ld in k.loads if ld.slot == r]
    return all(v == store.view for v in views)


def donatable(s: Schedule, out_pos: int, in_pos: int) -> bool:
    """Whether output ``out_pos`` may be written into input ``in_pos``'s buffer (buffer
    donation, as jax.jit's ``donate_argnums`` and MLX's donated arrays: a training step's
    new parameters and optimizer moments over the old ones): a kernel writes the output
    (not a view, a library op or a constant); that kernel reads the input only at the
    store's own index map, and no step after it reads the input or a view of it; the
    input is not an output itself and appears once among the inputs.

    >>> import numpy as np
    >>> from braze.graph.kernel import Schedule, Slot
    >>> donatable(Schedule([Slot((4,), np.dtype("f4"))], [0], {}, [0], []), 0, 0)
    False
    """
    return bool(donatable_pairs(s, [(out_pos, in_pos)]))


def donatable_pairs(s: Schedule, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (output position, input position) pairs of ``pairs`` that :func:`donatable`
    allows, from one pass over the steps (a LoRA step asks for hundreds of pairs of a
    schedule of thousands of steps).

    >>> import numpy as np
    >>> from braze.graph.kernel import Schedule, Slot
    >>> donatable_pairs(Schedule([Slot((4,), np.dtype("f4"))], [0], {}, [0], []), [(0, 0)])
    []
    """
    root: dict[int, int] = {}  # a view's output -> the slot owning its memory
    writer: dict[int, int] = {}  # slot -> the last (non-view) step writing it
    last_read: dict[int, int] = {}  # owning slot -> the last step reading it or a view of it
    for t, step in enumerate(s.steps):
        reads, writes = _reads_writes(step)
        if isinstance(step, ViewStep):
            root[step.output] = root.get(step.source, step.source)
        else:
            for w in writes:
                writer[w] = t
        for r in reads:
            last_read[root.get(r, r)] = t
    returned = {root.get(o, o) for o in s.output_slots}
    ok = []
    for out_pos, in_pos in pairs:
        if not (0 <= out_pos < len(s.output_slots) and 0 <= in_pos < len(s.input_slots)):
            continue
        out, inp = s.output_slots[out_pos], s.input_slots[in_pos]
        if s.input_slots.count(inp) != 1 or s.output_slots.count(out) != 1 or \
                out in s.input_slots or out in s.const_slots or \
                s.slots[out].shape != s.slots[inp].shape:
            continue
        at = writer.get(out)
        if at is None or last_read.get(inp, -1) > at or inp in returned:
            continue  # (returned: the input, or a view of it, is an output as it is)
        step = s.steps[at]
        if not isinstance(step, KernelStep):
            continue
        if any(root.get(ld.slot) == inp for ld in step.kernel.loads):
            continue  # (a view of the input read by the writer: another index map)
        if _overwrites(step, out, inp, s):
            ok.append((out_pos, in_pos))
    return ok
