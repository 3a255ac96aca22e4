"""Device plans for an LLM's library ops on the ``cuda`` backend (``kernels/llm.cu``).

A decode step of a quantized Llama runs, besides fused kernels and matmuls: quantized
matmuls, rotary embeddings, attention over a key/value cache, an embedding row gather,
concatenations and a position table (an ``arange``). Each function of :data:`PLANS` looks
at one such library step (its operands' shapes and dtypes, and for a gather its index
values) and returns the launches that compute it on the device, or None where the kernels
do not take it (another dtype, a cache longer than the attention kernel's shared memory
holds, an index out of range): the op then runs on the host as before (its reference,
after the values cross). A convolutional network's pools (max and window sums) have
their device kernel here too.

Launches are :class:`Launch` es: the kernel, the schedule slots whose device pointers it
reads (the output's comes last), grid, block and int64 args.

>>> [g.symbol for g in (kernel("bz_qmm4_h", 5), kernel("bz_copy_slabs", 5))]
['bz_qmm4_h', 'bz_copy_slabs']
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..csource import helper_text
from ..gpusource import GpuKernel
from ..kernel_sources import source as _kernel_source
from .codegen import PRELUDE

__all__ = ["PLANS", "Launch", "Operands", "kernel", "strided_copy"]

SDPA_KEYS = 4096  # keys a query row may see (kernels/llm.cu: BZ_SDPA_KEYS)
_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_INT = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


@functools.lru_cache(maxsize=1)
def _source() -> str:
    return PRELUDE + helper_text(["half.h"]) + _kernel_source(__package__, "kernels/llm.cu")


@functools.lru_cache(maxsize=32)
def kernel(symbol: str, n_args: int) -> GpuKernel:
    """The kernel ``symbol`` of ``kernels/llm.cu`` as a launchable :class:`GpuKernel`."""
    return GpuKernel(_source(), symbol, (), n_args, "library", 1, False)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a planned library step."""

    kernel: GpuKernel
    inputs: tuple[int, ...]  # schedule slots passed as the first pointers, in order
    grid: int
    block: int
    args: np.ndarray


@dataclass(frozen=True)
class Operands:
    """What a plan sees of a library step: its input slots' shapes and dtypes, the
    output's, the device's SM count, and ``host(slot)`` (a value read on the host:
    gather indices, checked before the launch)."""

    slots: Sequence[int]
    shapes: Sequence[tuple[int, ...]]
    dtypes: Sequence[np.dtype]
    out_shape: tuple[int, ...]
    out_dtype: np.dtype
    sms: int
    host: Callable[[int], np.ndarray]


def _grid(work: int, per_block: int, sms: int) -> int:
    return max(1, min(-(-work // per_block), sms * 32))


def _qmm(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    x, wq, s, b = o.dtypes
    if x != _F32 or o.out_dtype != _F32 or s != b or s not in (_F16, _F32):
        return None
    m, (n, _), k = math.prod(o.shapes[0][:-1]), o.shapes[1], o.shapes[0][-1]
    if m * n == 0:
        return None
    g = kernel(f"bz_qmm{attrs['bits']}_{'h' if s == _F16 else 'f'}", 5)
    args = np.array([0, m, n, k, attrs["group_size"]], np.int64)
    return [Launch(g, tuple(o.slots), _grid(m * n, 8, o.sms), 256, args)]


def _rope(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    shape = o.shapes[0]
    if o.dtypes[0] != _F32 or o.out_dtype != _F32 or o.dtypes[1] not in _INT \
            or not math.prod(shape):
        return None
    r, (t, d) = math.prod(shape[:-2]), shape[-2:]
    per_row = len(o.shapes[1]) == 1
    rpo = r // shape[0] if per_row else r
    bits = [int(np.float64(v).view(np.int64)) for v in (attrs["base"], attrs["scale"])]
    args = np.array([0, r, t, d, attrs["dims"], int(attrs["traditional"]), int(per_row), rpo,
                     *bits], np.int64)
    g = kernel(f"bz_rope_{_INT[o.dtypes[1]]}", 10)
    return [Launch(g, tuple(o.slots), _grid(r * t * d, 256, o.sms), 256, args)]


def _sdpa(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    if any(dt != _F32 for dt in o.dtypes[:3]) or o.out_dtype != _F32:
        return None
    (b, hq, t, d), (_, hkv, s, _), dv = o.shapes[0], o.shapes[1], o.shapes[2][-1]
    slots = list(o.slots)
    past = len(slots) > 3
    if past:
        pk, pv, lens = o.dtypes[3:6]
        if pk != pv or pk not in (_F32, _F16) or lens not in _INT or \
                len(slots) == 7 and o.dtypes[6] != lens:
            return None
        bp, p = o.shapes[3][0], o.shapes[3][2]
        per_row = len(o.shapes[5]) == 1 or len(slots) == 7
        if len(o.shapes[5]) == 0 and len(slots) == 7:
            per_row = False  # (one length for every row, a slot per row)
        if len(slots) == 6:
            slots.append(slots[5])  # (no slot index: the kernel reads none)
        name = f"bz_sdpa_{'h' if pk == _F16 else 'f'}_{_INT[lens]}"
    else:
        bp = p = 0
        per_row = False
        slots += [slots[0]] * 4  # (no cache: the kernel reads none of these)
        name = "bz_sdpa_f_i32"
    if p + s > SDPA_KEYS or b * hq * t == 0 or hq % hkv:
        return None
    scale = int(np.float32(attrs["scale"]).view(np.uint32))
    args = np.array([0, b, hq, hkv, t, s, d, dv, p, bp, int(past), int(per_row),
                     int(len(o.slots) == 7), int(attrs["causal"]), scale], np.int64)
    return [Launch(kernel(name, 15), tuple(slots), _grid(b * hq * t, 1, o.sms), 128, args)]


def _gather(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    """Rows of x picked by one index array along the first axis (``x[idx]``, ``take``)."""
    spec = attrs["spec"]
    shape = o.shapes[0]
    if len(o.slots) != 2 or spec[0] != 0 or o.dtypes[1] not in _INT or len(spec) != len(shape) \
            or any(sl != (0, n, 1) for sl, n in zip(spec[1:], shape[1:])):
        return None
    rows = shape[0]
    idx = np.asarray(o.host(o.slots[1]))
    if idx.size == 0 or idx.min() < -rows or idx.max() >= rows:
        return None  # (the reference raises its IndexError)
    row = math.prod(shape[1:]) * o.dtypes[0].itemsize
    args = np.array([0, idx.size, row, rows], np.int64)
    g = kernel(f"bz_gather_rows_{_INT[o.dtypes[1]]}", 4)
    return [Launch(g, tuple(o.slots), _grid(idx.size * row, 256, o.sms), 256, args)]


def _concat(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    if any(dt != o.out_dtype for dt in o.dtypes):
        return None
    axis = attrs["axis"] % len(o.out_shape)
    item = o.out_dtype.itemsize
    outer = math.prod(o.out_shape[:axis])
    stride = math.prod(o.out_shape[axis:]) * item
    launches, at = [], 0
    g = kernel("bz_copy_slabs", 5)
    for slot, shape in zip(o.slots, o.shapes):
        inner = math.prod(shape[axis:]) * item
        if inner and outer:
            args = np.array([0, outer, inner, stride, at], np.int64)
            launches.append(Launch(g, (slot,), _grid(outer * inner, 256, o.sms), 256, args))
        at += inner
    return launches


_ARANGE_KIND = {np.dtype(np.int32): 0, np.dtype(np.int64): 1, np.dtype(np.float32): 2,
                np.dtype(np.float64): 3}


def _arange(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
    """``start + step * i`` written on the device (the reference's arithmetic: int64 for
    integers, float64 for floats, then the result dtype)."""
    kind = _ARANGE_KIND.get(np.dtype(attrs["dtype"]))
    n = attrs["num"]
    if kind is None or not n or np.dtype(attrs["dtype"]) != o.out_dtype:
        return None
    if kind < 2:
        start, step = int(attrs["start"]), int(attrs["step"])
    else:
        start, step = (int(np.float64(v).view(np.int64)) for v in (attrs["start"],
                                                                     attrs["step"]))
    args = np.array([0, n, kind, start, step], np.int64)
    return [Launch(kernel("bz_arange", 5), (), _grid(n, 256, o.sms), 256, args)]


def strided_copy(view: Any, item: int, src: int, sms: int) -> Launch | None:
    """The launch materializing ``view`` (of slot ``src``, ``item``-byte elements) into a
    row-major buffer (``bz_strided_copy``), or None past its 8 dims."""
    if len(view.shape) > 8:
        return None
    n = math.prod(view.shape)
    pad = 8 - len(view.shape)
    args = np.array([0, len(view.shape), n, item, view.offset, *view.shape, *[1] * pad,
                     *view.strides, *[0] * pad], np.int64)
    return Launch(kernel("bz_strided_copy", 21), (src,), _grid(n, 256, sms), 256, args)


def _pool(op: str) -> Callable[[dict[str, Any], Operands], list[Launch] | None]:
    """A convolutional network's ``max_pool`` / ``window_sum`` (float32, 1-3 spatial dims):
    one output element per thread (the cpu kernel's rules and bits)."""
    mode = {"max_pool": 0, "window_sum": 1}[op]

    def plan(attrs: dict[str, Any], o: Operands) -> list[Launch] | None:
        (shape,) = o.shapes
        n = len(shape) - 2
        if o.dtypes[0] != _F32 or o.out_dtype != _F32 or not 1 <= n <= 3 \
                or not math.prod(o.out_shape):
            return None

        def p3(v: Any, fill: int) -> list[int]:
            return [fill] * (3 - n) + [int(e) for e in v]

        args = np.array([0, shape[0], shape[-1], *p3(shape[1:-1], 1),
                         *p3(attrs["kernel_size"], 1), *p3(o.out_shape[1:-1], 1),
                         *p3(attrs["stride"], 1), *p3(attrs["dilation"], 1),
                         *p3([lo for lo, _ in attrs["padding"]], 0), mode], np.int64)
        total = math.prod(o.out_shape)
        return [Launch(kernel("bz_pool_f32", 22), tuple(o.slots), _grid(total, 256, o.sms),
                       256, args)]

    return plan


PLANS: dict[str, Callable[[dict[str, Any], Operands], list[Launch] | None]] = {
    "quantized_matmul": _qmm, "rope": _rope, "scaled_dot_product_attention": _sdpa,
    "gather": _gather, "concat": _concat, "arange": _arange, "max_pool": _pool("max_pool"),
    "window_sum": _pool("window_sum"),
}
