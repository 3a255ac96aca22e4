"""Fused kernels lowered to ``mlx.core`` ops, instruction by instruction.

This is the ``mlx`` backend's kernel executor wherever generated Metal does not run
(MLX's Linux CPU build, float64 kernels): it mirrors the numpy executor
(:func:`braze.backends.numpy_backend.run_kernel`) with ``mx`` ops, so both give the same
values — loads become ``mx.as_strided`` views of the slot buffers, float16/bfloat16 are
computed in float32 and each instruction's result rounded to its dtype, reductions keep
their reduced dims (size 1), row stores drop them.

Ops whose MLX counterpart differs from the reference at the edges (integer floor
division and remainder, shifts past the width, ``nextafter``, ``hypot``, ``copysign``,
``logaddexp`` (float64 off by 1e-7),
float ``sign`` of NaN, integer ``pow``, integer ``mean``) run their numpy reference on the
instruction's operands (:data:`BRIDGED`). :func:`lowerable` says whether a kernel can be
lowered at all (complex kernels cannot: MLX has no complex128, and its complex64 ops are
not checked against the reference here; they run with the numpy executor).

>>> import numpy as np, braze as bz
>>> x = bz.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> k = bz.explain(lambda x: bz.exp(x - x.max(axis=-1, keepdims=True)), x).kernels[0].kernel
>>> lowerable(k)
True
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np

from ...graph import dtypes as dt
from ...graph.kernel import Kernel
from ...graph.ops import OPS
from ..numpy_backend import strided

__all__ = ["BRIDGED", "MX_DTYPES", "lower_stores", "lowerable", "on_cpu_if_f64",
           "run_lowered", "to_mx", "to_numpy"]

_LOW = (np.dtype(np.float16), np.dtype(dt.bfloat16))
_F32 = mx.float32

MX_DTYPES: dict[np.dtype, Any] = {
    np.dtype(np.bool_): mx.bool_, np.dtype(np.int8): mx.int8, np.dtype(np.int16): mx.int16,
    np.dtype(np.int32): mx.int32, np.dtype(np.int64): mx.int64,
    np.dtype(np.uint8): mx.uint8, np.dtype(np.uint16): mx.uint16,
    np.dtype(np.uint32): mx.uint32, np.dtype(np.uint64): mx.uint64,
    np.dtype(np.float16): mx.float16, np.dtype(dt.bfloat16): mx.bfloat16,
    np.dtype(np.float32): mx.float32, np.dtype(np.float64): mx.float64,
    # (values only: resident complex64 results of MLX's FFTs; kernels over complex dtypes
    # are not lowered, see lowerable)
    np.dtype(np.complex64): mx.complex64,
}


def to_mx(a: np.ndarray) -> mx.array:
    """``a`` as an ``mx.array`` of the same dtype (MLX copies host buffers on import;
    float64 is kept float64, which ``mx.array`` alone would narrow).

    >>> to_mx(np.arange(3.0)).dtype
    mlx.core.float64
    """
    return mx.array(a, dtype=MX_DTYPES[a.dtype])


def on_cpu_if_f64(*dtypes: np.dtype) -> Any:
    """MLX's CPU stream where a float64 value is computed (MLX's GPU has no float64), else
    the default stream.

    >>> type(on_cpu_if_f64(np.dtype(np.float32))).__name__
    'nullcontext'
    """
    return mx.stream(mx.cpu) if np.dtype(np.float64) in dtypes else contextlib.nullcontext()


def to_numpy(a: mx.array, dtype: np.dtype | None = None) -> np.ndarray:
    """``a`` as numpy, without a copy (MLX exports its buffer); bfloat16 goes through
    its bits, since the buffer protocol has no bfloat16.

    >>> to_numpy(mx.array([1.5], dtype=mx.bfloat16)).dtype.name
    'bfloat16'
    """
    if a.dtype == mx.bfloat16:
        return np.asarray(a.view(mx.uint16)).view(dt.bfloat16)
    out = np.asarray(a)
    return out if dtype is None or out.dtype == dtype else out.astype(dtype)


# ---------------------------------------------------------------- the op table
def _is_float(a: mx.array) -> bool:
    return mx.issubdtype(a.dtype, mx.floating)


def _is_bool(a: mx.array) -> bool:
    return a.dtype == mx.bool_


# From the op records (OpDef.mlx / mlx_bridge): name -> mx implementation over the
# instruction's operands (attrs as keywords); bridged ops run their numpy reference on
# the operands where MLX's version differs from it at the edges.
LOWERED: dict[str, Callable[..., mx.array]] = {
    n: functools.partial(op.mlx, mx) for n, op in OPS.items() if op.mlx is not None}
BRIDGED = frozenset(n for n, op in OPS.items() if op.mlx_bridge == "always")
_BRIDGE_WHEN: dict[str, Callable[[list[mx.array]], bool]] = {
    "float": lambda xs: _is_float(xs[0]),
    "int": lambda xs: not _is_float(xs[0]),
    # MLX 0.32's float64 exp, sin, cos and sigmoid are float32-accurate on its CPU stream
    # (measured relative errors 1e-8 to 4e-7): float64 runs them through numpy
    "float64": lambda xs: xs[0].dtype == mx.float64,
}
_BRIDGED_IF = {n: _BRIDGE_WHEN[op.mlx_bridge] for n, op in OPS.items()
               if op.mlx_bridge in _BRIDGE_WHEN}
# reductions run_lowered computes with mx ops (see _reduce); ops it cannot lower, and why
# (lowerable refuses kernels holding them: they run with the numpy executor)
REDUCTIONS = frozenset({"sum", "prod", "mean", "max", "min", "any", "all", "argmax", "argmin"})
UNSUPPORTED: dict[str, str] = {}


def lowerable(k: Kernel, float64: bool = True) -> bool:
    """Can ``k`` run lowered to mx ops? (every dtype has an MLX dtype — no complex —,
    float64 only where ``float64``, no op of :data:`UNSUPPORTED`, and the kernel is not
    empty).

    >>> import braze as bz
    >>> x = bz.asarray(np.ones(3, np.complex64))
    >>> lowerable(bz.explain(lambda x: x * 2, x).kernels[0].kernel)
    False
    """
    if any(d == 0 for d in k.shape):
        return False
    for ins in k.instrs:
        d = np.dtype(ins.dtype)
        if d not in MX_DTYPES or d.kind == "c" or (d == np.float64 and not float64):
            return False
        if ins.op in UNSUPPORTED:
            return False
        if ins.op not in ("load", "const", "cast", "bitcast") and ins.op not in LOWERED \
                and ins.op not in BRIDGED and ins.op not in _BRIDGED_IF \
                and OPS[ins.op].kind != "reduce":
            return False
    return True


# ---------------------------------------------------------------- the executor
def _compute(x: mx.array) -> mx.array:
    return x.astype(_F32) if x.dtype in (mx.float16, mx.bfloat16) else x


def _bridge(name: str, xs: list[mx.array], attrs: dict[str, Any]) -> mx.array:
    ref = OPS[name].reference
    out = np.asarray(ref(*[to_numpy(x) for x in xs], **attrs))
    return to_mx(np.ascontiguousarray(out))


def _reduce(name: str, x: mx.array, axes: tuple[int, ...], n_outer: int,
            dtype: np.dtype) -> mx.array:
    if name in ("argmax", "argmin"):
        inner = 1
        for d in x.shape[n_outer:]:
            inner *= d
        flat = x.reshape(tuple(x.shape[:n_outer]) + (inner,))
        f = mx.argmax if name == "argmax" else mx.argmin
        r = f(flat, axis=-1)
        return r.reshape(tuple(r.shape) + (1,) * len(axes)).astype(MX_DTYPES[dtype])
    if name in ("sum", "prod", "mean"):
        acc = _F32 if dtype in _LOW else MX_DTYPES[dtype]
        if name == "mean" and not mx.issubdtype(acc, mx.inexact):
            return _bridge_reduce(name, x, axes, n_outer, dtype)
        f = {"sum": mx.sum, "prod": mx.prod, "mean": mx.mean}[name]
        return f(x.astype(acc), axis=axes, keepdims=True)
    f = {"max": mx.max, "min": mx.min, "any": mx.any, "all": mx.all}[name]
    return f(x, axis=axes, keepdims=True)


def _bridge_reduce(name: str, x: mx.array, axes: tuple[int, ...], n_outer: int,
                   dtype: np.dtype) -> mx.array:
    from ..numpy_backend import _reduce as np_reduce

    out = np_reduce(name, to_numpy(x), axes, n_outer, dtype)
    return to_mx(np.ascontiguousarray(out))


def lower_stores(k: Kernel, load: Callable[[int], mx.array],
                 stats: dict[str, int] | None = None) -> list[mx.array]:
    """``k``'s stored values as (lazy) mx arrays, one per store, each of its store view's
    shape in the stored dtype; ``load(slot)`` gives a slot's value as a flat mx array
    (see :func:`lowerable` for the kernels this accepts)."""
    n_outer = len(k.shape) - k.n_red
    red_axes = tuple(range(n_outer, len(k.shape)))
    flat: dict[int, mx.array] = {}
    vals: list[Any] = [None] * len(k.instrs)
    for i, ins in enumerate(k.instrs):
        dtype = np.dtype(ins.dtype)
        if ins.op == "load":
            ld = k.loads[ins.attr("load")]
            base = flat.get(ld.slot)
            if base is None:
                base = flat[ld.slot] = load(ld.slot)
            v = ld.view
            out = mx.as_strided(base, v.shape, v.strides, v.offset)
            out = _compute(out)
        elif ins.op == "const":
            out = _compute(mx.array(np.asarray(ins.attr("value"), dtype=dtype),
                                    dtype=MX_DTYPES[dtype]))
        elif ins.op == "bitcast":
            src = np.dtype(k.instrs[ins.args[0]].dtype)
            out = _compute(vals[ins.args[0]].astype(MX_DTYPES[src]).view(MX_DTYPES[dtype]))
        elif OPS[ins.op].kind == "reduce":
            x = vals[ins.args[0]]
            if tuple(x.shape) != k.shape:
                x = mx.broadcast_to(x, k.shape)
            out = _compute(_reduce(ins.op, x, red_axes, n_outer, dtype))
        else:
            xs = [vals[a] for a in ins.args]
            attrs = dict(ins.attrs)
            if ins.op == "cast":
                out = xs[0] != 0 if dtype == np.bool_ else xs[0]
            elif ins.op in BRIDGED or (ins.op in _BRIDGED_IF and _BRIDGED_IF[ins.op](xs)):
                out = _bridge(ins.op, xs, attrs)
                if stats is not None:
                    stats["bridged"] = stats.get("bridged", 0) + 1
            else:
                out = LOWERED[ins.op](*xs, **attrs)
            want = MX_DTYPES[dtype]
            if ins.op == "cast" or out.dtype != want:
                out = out.astype(want)  # rounds (a cast to float16, say) ...
                out = _compute(out)  # ... then keeps computing in float32
        vals[i] = out
    results = []
    for st in k.stores:
        v = vals[st.instr]
        if k.n_red and len(st.view.shape) == n_outer:  # a row value: drop the reduced dims
            if v.ndim == len(k.shape):
                v = v[(Ellipsis,) + (slice(0, 1),) * k.n_red]
            v = _fit(v, k.shape[:n_outer] + (1,) * k.n_red).reshape(st.view.shape)
        else:
            v = _fit(v, st.view.shape)
        want = MX_DTYPES[np.dtype(k.instrs[st.instr].dtype)]
        results.append(v if v.dtype == want else v.astype(want))
    return results


def _fit(v: mx.array, shape: tuple[int, ...]) -> mx.array:
    """``v`` broadcast to ``shape`` (as numpy's copyto would: a value of the same size
    differing in unit dims, a (1,) into (), is reshaped)."""
    if tuple(v.shape) == tuple(shape):
        return v
    n = 1
    for d in shape:
        n *= d
    return v.reshape(shape) if v.size == n else mx.broadcast_to(v, shape)


def run_lowered(k: Kernel, bufs: list[Any], stats: dict[str, int] | None = None) -> None:
    """Run fused kernel ``k`` with mx ops over the slot buffers ``bufs`` (numpy arrays),
    writing its stores into them (see :func:`lowerable` for what it accepts)."""
    results = lower_stores(k, lambda slot: to_mx(bufs[slot].reshape(-1)), stats)
    mx.eval(*results)
    for st, r in zip(k.stores, results):
        dst = bufs[st.slot]
        if not (st.view.is_contiguous() and dst.shape == st.view.shape):
            dst = strided(dst, st.view)
        np.copyto(dst, to_numpy(r).reshape(dst.shape), casting="unsafe")
