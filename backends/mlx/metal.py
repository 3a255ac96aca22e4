"""Generated MSL launched through ``mx.fast.metal_kernel`` (Apple silicon only).

:func:`metal_spec` turns a kernel's MSL (:mod:`braze.backends.metal.codegen`: a complete
``[[kernel]]`` function) into what ``mx.fast.metal_kernel`` takes — MLX writes the
kernel's signature itself from input/output names, so the generated function is split:
everything before it (prelude, helpers) becomes the ``header``; its body becomes the
``source``, preceded by one line per parameter that rebinds it from MLX's names
(``in0``..., ``out0``..., ``bz_args``, the thread-position attributes). Threadgroup arrays
stay in kernel scope, as Metal requires. :func:`metal_spec` is pure (no MLX call): it is
tested on Linux; :func:`run_metal` needs a Metal device.

What runs here: kernels the MSL generator supports (no float64, no complex, at most 23
buffers) whose stores write whole, contiguous slots that the kernel does not also read
(MLX outputs are fresh buffers); anything else is lowered to mx ops instead.

>>> import numpy as np, braze as bz
>>> x = bz.asarray(np.ones((4, 8), np.float32))
>>> spec = metal_spec(bz.explain(lambda x: bz.softmax(x, axis=-1), x).kernels[0].kernel)
>>> spec.input_names, spec.output_names, spec.threadgroup
(('in0', 'bz_args'), ('out0',), (32, 1, 1))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...graph.kernel import Kernel
from ..csource import Unsupported, kernel_args
from ..metal.codegen import generate

__all__ = ["BLOCK", "MetalSpec", "Unsupported", "launch_metal", "metal_spec", "run_metal"]

BLOCK = 256  # threads per threadgroup of elementwise kernels
MAX_GROUPS = 1 << 14  # elementwise kernels grid-stride over at most this many threadgroups

_KERNEL = re.compile(r"^\[\[kernel\]\] void (\w+)\((.*)\) \{$", re.M)
_ATTR = re.compile(r"\s*\[\[[a-z_]+(?:\(\d+\))?\]\]")
_THREAD = {"bz_tid": "thread_position_in_threadgroup", "bz_bid": "threadgroup_position_in_grid",
           "bz_bdim": "threads_per_threadgroup", "bz_gdim": "threadgroups_per_grid"}


@dataclass(frozen=True)
class MetalSpec:
    """One kernel's ``mx.fast.metal_kernel`` arguments and launch geometry."""

    name: str
    header: str
    source: str
    input_names: tuple[str, ...]  # in0..., then "bz_args" (the int64 argument array)
    output_names: tuple[str, ...]
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    args: np.ndarray
    grid: tuple[int, int, int]  # threads (MLX dispatches threads, not threadgroups)
    threadgroup: tuple[int, int, int]


def _launch(mode: str, k: Kernel) -> tuple[int, int]:
    """(threadgroups, threads per threadgroup), as the CUDA backend launches blocks."""
    if mode == "rows":
        n_red = int(np.prod(k.shape[len(k.shape) - k.n_red:]))
        rows = int(np.prod(k.outer_shape)) if k.outer_shape else 1
        block = 32 if n_red <= 64 else (128 if n_red <= 1024 else 512)
        return max(1, min(rows, 65535 * 16)), block
    n = int(np.prod(k.shape)) if k.shape else 1
    return max(1, min((n + BLOCK - 1) // BLOCK, MAX_GROUPS)), BLOCK


def metal_spec(k: Kernel) -> MetalSpec:
    """The ``metal_kernel`` form of ``k`` (raises :class:`Unsupported` for what the
    Metal path does not run: see the module docstring)."""
    g = generate(k)  # raises Unsupported: float64, complex, too many buffers
    if g.empty:
        raise Unsupported("empty kernel")
    loaded = {ld.slot for ld in k.loads}
    for st in k.stores:
        if st.slot in loaded:
            raise Unsupported("a slot both read and written (MLX outputs are fresh buffers)")
        if not st.view.is_contiguous() or st.view.offset:
            raise Unsupported("a store that does not write its whole slot")
    m = _KERNEL.search(g.source)
    if m is None:  # pragma: no cover - the generator always writes one kernel line
        raise Unsupported("no [[kernel]] function in the generated source")
    header = g.source[:m.start()]
    body = g.source[m.end():].rstrip()
    if not body.endswith("}"):  # pragma: no cover
        raise Unsupported("unexpected end of the generated kernel")
    body = body[:-1]
    binds: list[str] = []
    ins: list[str] = []
    outs: list[str] = []
    in_slots: list[int] = []
    out_slots: list[int] = []
    for param in m.group(2).split(", "):
        decl = _ATTR.sub("", param).strip()
        ctype, name = decl.rsplit(" ", 1)
        if name == "bz_a":
            binds.append("const device int64_t* bz_a = bz_args;")
        elif name in _THREAD:
            binds.append(f"const uint {name} = {_THREAD[name]}.x;")
        else:
            slot = g.slots[int(name[1:])]
            if ctype.startswith("const "):
                mx_name = f"in{len(ins)}"
                ins.append(mx_name)
                in_slots.append(slot)
            else:
                mx_name = f"out{len(outs)}"
                outs.append(mx_name)
                out_slots.append(slot)
            binds.append(f"{decl} = ({ctype}){mx_name};")
    groups, threads = _launch(g.mode, k)
    return MetalSpec(g.symbol, header, "\n".join(binds) + body, (*ins, "bz_args"), tuple(outs),
                     tuple(in_slots), tuple(out_slots), kernel_args(k),
                     (groups * threads, 1, 1), (threads, 1, 1))


_COMPILED: dict[str, Any] = {}


def launch_metal(spec: MetalSpec, inputs: list[Any], outputs: list[Any]) -> list[Any]:
    """Launch ``spec`` on flat ``mx.array`` inputs (in ``spec.input_slots`` order); returns
    one flat ``mx.array`` per output (``outputs``: the output slots, with ``shape`` and
    ``dtype``), lazily (MLX evaluates them when read)."""
    import mlx.core as mx

    from .lower import MX_DTYPES

    fn: Any = _COMPILED.get(spec.name)
    if fn is None:
        fn = _COMPILED[spec.name] = mx.fast.metal_kernel(
            name=spec.name, input_names=list(spec.input_names),
            output_names=list(spec.output_names), source=spec.source, header=spec.header)
    sizes = [int(np.prod(o.shape)) for o in outputs]
    outs = fn(inputs=[*inputs, mx.array(spec.args)], grid=spec.grid,
              threadgroup=spec.threadgroup, output_shapes=[(max(1, n),) for n in sizes],
              output_dtypes=[MX_DTYPES[o.dtype] for o in outputs])
    return [o[:n] for o, n in zip(outs, sizes)]


def run_metal(spec: MetalSpec, bufs: list[Any]) -> None:
    """Launch ``spec`` on the slot buffers (numpy) and write its outputs into them."""
    import mlx.core as mx

    from .lower import to_mx, to_numpy

    dsts = [bufs[s] for s in spec.output_slots]
    outs = launch_metal(spec, [to_mx(bufs[s].reshape(-1)) for s in spec.input_slots], dsts)
    mx.eval(*outs)
    for d, o in zip(dsts, outs):
        if d.size:
            np.copyto(d.reshape(-1), to_numpy(o), casting="no")
