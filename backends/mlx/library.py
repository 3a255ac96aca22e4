"""Library ops as MLX ops over resident values (:class:`~.resident.MlxRun`).

Each entry of :data:`MLX_LIBRARY` takes ``(attrs, out_dtype, operands)`` and returns the
result as a (lazy) ``mx.array``, or None where MLX's op does not cover the case (the
op's numpy reference then runs on the host). Operands are read through
:class:`Operands`: ``mx(i)`` in MLX, ``host(i)`` as numpy (for small values a decision
needs, a cache length say). float16/bfloat16 operands are computed in float32 and
rounded once, as the reference does; float64 runs on MLX's CPU stream.

What runs in MLX: ``matmul`` (floating), ``quantized_matmul`` (braze's packed layout is
MLX's: ``mx.quantized_matmul``), ``rope`` (``mx.fast.rope``, one offset or one per
entry of the first axis), ``scaled_dot_product_attention``
(``mx.fast.scaled_dot_product_attention`` over [cached prefix, new keys], batched
decoding's per-row cache lengths and cache slots included), ``conv``/``conv_fused``
(``mx.conv_general``: braze's record is MLX's), ``concat``, ``gather`` (numpy's
advanced indexing, its index arrays checked on the host), ``sort``/``argsort`` (stable,
NaN last, as numpy's), the cumulative sum and product, the n-d FFTs (float32/complex64)
and ``linalg.inv``/``det`` (float32, MLX's CPU stream).

>>> {"quantized_matmul", "rope", "scaled_dot_product_attention"} <= set(MLX_LIBRARY)
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import numpy as np

from ...graph.ops import sdpa_visible
from .lower import MX_DTYPES, on_cpu_if_f64

if TYPE_CHECKING:
    from .resident import MlxRun

__all__ = ["MLX_LIBRARY", "Operands"]

_FAST = ("float32", "float16", "bfloat16")


class Operands:
    """A library step's inputs as a run holds them (MLX or host, converted on demand)."""

    def __init__(self, run: MlxRun, slots: Sequence[int]) -> None:
        self.run, self.slots = run, list(slots)

    def __len__(self) -> int:
        return len(self.slots)

    def mx(self, i: int) -> mx.array:
        return self.run.on_mx(self.slots[i])

    def host(self, i: int) -> np.ndarray:
        return self.run.on_host(self.slots[i])

    def dtype(self, i: int) -> np.dtype:
        return self.run.s.slots[self.slots[i]].dtype

    def shape(self, i: int) -> tuple[int, ...]:
        return self.run.s.slots[self.slots[i]].shape

    def size(self, i: int) -> int:
        return math.prod(self.shape(i))

    def fast(self, *idx: int) -> bool:
        """float32/float16/bfloat16 and non-empty (what MLX's fast kernels take)."""
        return all(self.dtype(i).name in _FAST and self.size(i) for i in idx)


def _f32(x: mx.array) -> mx.array:
    return x if x.dtype == mx.float32 else x.astype(mx.float32)


def _out(y: mx.array, out_dtype: np.dtype) -> mx.array:
    want = MX_DTYPES[out_dtype]
    return y if y.dtype == want else y.astype(want)


def _matmul(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    a, b = ops.dtype(0), ops.dtype(1)
    if a != b or not (a.kind == "f" or a.name == "bfloat16") or not ops.size(0) \
            or not ops.size(1) or a not in MX_DTYPES:
        return None
    if a == np.float64:
        with on_cpu_if_f64(a):
            return mx.matmul(ops.mx(0), ops.mx(1))
    return _out(mx.matmul(_f32(ops.mx(0)), _f32(ops.mx(1))), out_dtype)


def _quantized_matmul(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands
                      ) -> mx.array | None:
    """``mx.quantized_matmul`` in float32 (the reference's exact product; ``act`` is a
    precision the cpu backend may take, not a result)."""
    if not ops.fast(0) or not ops.size(1) or ops.dtype(2).name not in _FAST \
            or ops.dtype(3).name not in _FAST:
        return None
    y = mx.quantized_matmul(_f32(ops.mx(0)), ops.mx(1), _f32(ops.mx(2)), _f32(ops.mx(3)),
                            transpose=True, group_size=attrs["group_size"], bits=attrs["bits"])
    return _out(y, out_dtype)


def _rope(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    if not ops.fast(0):
        return None
    shape = ops.shape(0)
    offset: Any
    offset = ops.mx(1).astype(mx.int32)  # (an array: read in MLX, no crossing)
    if len(ops.shape(1)):  # one offset per entry of x's first axis
        x = _f32(ops.mx(0)).reshape(shape[0], -1, *shape[-2:])
    else:
        x = _f32(ops.mx(0)).reshape(-1, *shape[-2:])
    y = mx.fast.rope(x, attrs["dims"], traditional=attrs["traditional"], base=attrs["base"],
                     scale=attrs["scale"], offset=offset)
    return _out(y.reshape(shape), out_dtype)


def _sdpa(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    """Over [the first n cached rows, the new keys] with the op's visibility as a boolean
    mask; batched decoding (one cache length per row, and a cache slot per row) gathers
    each row's slot and masks its own length. None (the reference) where a query row
    sees no key (the reference's NaN)."""
    if not ops.fast(0, 1, 2):
        return None
    t, s = ops.shape(0)[2], ops.shape(1)[2]
    keys, values = _f32(ops.mx(1)), _f32(ops.mx(2))
    mask = None
    if len(ops) > 3:
        if not ops.fast(3, 4):
            return None
        cap, b = ops.shape(3)[2], ops.shape(0)[0]
        lens = np.asarray(ops.host(5)).astype(np.int64)
        pk, pv = ops.mx(3), ops.mx(4)
        if lens.ndim or len(ops) == 7:  # batched decoding: a length (and a slot) per row
            lens = np.clip(np.broadcast_to(lens, (b,)), 0, cap)
            n = int(lens.max()) if b else 0
            if len(ops) == 7:
                idx = np.clip(np.asarray(ops.host(6)).astype(np.int64), 0, ops.shape(3)[0] - 1)
                pk, pv = pk[mx.array(idx)], pv[mx.array(idx)]
            pad = np.zeros((b, 1, t, n + s), bool)
            for i, m in enumerate(lens):  # row i: its m cached rows, then the new ones
                vis = sdpa_visible(t, s, int(m), attrs["causal"])
                pad[i, 0, :, :m] = vis[:, :m]
                pad[i, 0, :, n:] = vis[:, m:]
            visible = pad
        else:
            n = int(min(max(int(lens), 0), cap))
            visible = sdpa_visible(t, s, n, attrs["causal"])
        if n:
            keys = mx.concatenate([_f32(pk[:, :, :n]), keys], axis=2)
            values = mx.concatenate([_f32(pv[:, :, :n]), values], axis=2)
    else:
        visible = sdpa_visible(t, s, None, attrs["causal"])
    if not visible.any(axis=-1).all():
        return None
    if not visible.all():
        mask = mx.array(visible)
    y = mx.fast.scaled_dot_product_attention(_f32(ops.mx(0)), keys, values,
                                             scale=attrs["scale"], mask=mask)
    return _out(y, out_dtype)


def _conv(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    """``mx.conv_general`` in float32 with non-negative padding, then a ``conv_fused``
    epilogue (bias, residual, clip)."""
    x, w = ops.dtype(0), ops.dtype(1)
    if x != w or not ops.fast(0, 1) or any(p < 0 for pair in attrs["padding"] for p in pair):
        return None
    y = mx.conv_general(_f32(ops.mx(0)), _f32(ops.mx(1)), stride=list(attrs["stride"]),
                        padding=([lo for lo, _ in attrs["padding"]],
                                 [hi for _, hi in attrs["padding"]]),
                        kernel_dilation=list(attrs["kernel_dilation"]),
                        input_dilation=list(attrs["input_dilation"]),
                        groups=attrs["groups"], flip=attrs["flip"])
    rest = 2
    if attrs.get("bias"):
        y = y + _f32(ops.mx(rest))
        rest += 1
    if attrs.get("residual"):
        y = y + _f32(ops.mx(rest))
    if attrs.get("act") == "clip":
        y = mx.minimum(mx.maximum(y, attrs["clip"][0]), attrs["clip"][1])
    elif attrs.get("act") not in (None, "clip"):
        return None  # (the epilogue's other activations: the reference)
    if attrs.get("pool"):  # (the conv_pool pass)
        y = _windows("max_pool", dict(attrs["pool"]), y)
    return _out(y, out_dtype)


def _windows(op: str, attrs: dict[str, Any], x: mx.array) -> mx.array:
    """``max_pool`` / ``window_sum`` of x (see ``_pool``)."""
    from ...graph.ops import pool_windows

    crop = [slice(None)] + [slice(0, x.shape[1 + i] + min(hi, 0))
                            for i, (_, hi) in enumerate(attrs["padding"])]
    x = x[tuple(crop)]
    widths = [(0, 0)] + [(lo, max(hi, 0)) for lo, hi in attrs["padding"]] + [(0, 0)]
    if any(w != (0, 0) for w in widths):
        x = mx.pad(x, widths, constant_values=-math.inf if op == "max_pool" else 0.0)
    geo = [(x.shape[1 + i] - (k - 1) * d - 1) // s + 1 for i, (k, s, d) in
           enumerate(zip(attrs["kernel_size"], attrs["stride"], attrs["dilation"]))]
    views = pool_windows(x, attrs["kernel_size"], attrs["stride"], attrs["dilation"], geo)
    y = views[0]
    for v in views[1:]:
        y = mx.maximum(y, v) if op == "max_pool" else y + v
    return y


def _pool(op: str) -> Callable[[dict[str, Any], np.dtype, Operands], mx.array | None]:
    """``max_pool`` / ``window_sum``: x padded with -inf / zeros (a negative pad crops), then
    ``mx.maximum`` / ``+`` over the windows' strided slices in the reference's tap order
    (MLX's own pooling layers are built so)."""

    def run(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
        if not ops.fast(0):
            return None
        x = ops.mx(0) if op == "max_pool" else _f32(ops.mx(0))
        return _out(_windows(op, attrs, x), out_dtype)

    return run


def _conv_concat(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands
                 ) -> mx.array | None:
    """Each branch as ``_conv``, concatenated along the channels."""
    from ...graph.ops import concat_branches

    ys, i = [], 0
    for n, a in concat_branches(attrs):
        y = _conv(a, out_dtype, Operands(ops.run, ops.slots[i:i + n]))
        if y is None:
            return None
        ys.append(y)
        i += n
    return mx.concatenate(ys, axis=-1)


def _concat(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    if out_dtype not in MX_DTYPES or any(ops.dtype(i) != out_dtype for i in range(len(ops))):
        return None
    return mx.concatenate([ops.mx(i) for i in range(len(ops))], axis=attrs["axis"])


def _gather(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    """``x[key]`` (numpy's advanced indexing, as ``mx.array.__getitem__`` follows it), the
    index arrays checked and wrapped on the host as the reference does (an index out of
    range raises the reference's IndexError there)."""
    from ...graph.ops.library import index_key

    if out_dtype not in MX_DTYPES or any(ops.dtype(i).kind not in "iu" for i in
                                         range(1, len(ops))):
        return None
    shape = ops.shape(0)
    arrays: dict[int, mx.array] = {}
    axis = 0
    for s in attrs["spec"]:  # the axis of x each index array indexes
        if s is None:
            continue
        if isinstance(s, int):
            n = shape[axis]
            a = np.asarray(ops.host(1 + s)).astype(np.int64)
            if a.size and (a.min() < -n or a.max() >= n):
                return None  # (the reference raises its IndexError)
            arrays[s] = mx.array(np.where(a < 0, a + n, a).astype(np.int32))
        axis += 1
    if sorted(arrays) != list(range(len(ops) - 1)):
        return None
    key: tuple[Any, ...] = tuple(arrays[i] for i in range(len(arrays)))
    return ops.mx(0)[index_key(attrs["spec"], key)]


def _scan(name: str) -> Callable[[dict[str, Any], np.dtype, Operands], mx.array | None]:
    def scan(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
        """``mx.cumsum`` / ``mx.cumprod`` in the result dtype (the reference's accumulator:
        int64 for integers, float32/float64 as given); include_initial pads the identity."""
        d = ops.dtype(0)
        if out_dtype not in MX_DTYPES or not ops.size(0) or d.kind not in "iuf" or \
                d.kind == "f" and d != out_dtype or out_dtype.itemsize < 4:
            return None
        axis = attrs["axis"]
        with on_cpu_if_f64(out_dtype):
            x = ops.mx(0).astype(MX_DTYPES[out_dtype])
            y = (mx.cumsum if name == "sum" else mx.cumprod)(x, axis=axis)
            if attrs["include_initial"]:
                shape = list(y.shape)
                shape[axis] = 1
                first = (mx.zeros if name == "sum" else mx.ones)(shape, y.dtype)
                y = mx.concatenate([first, y], axis=axis)
        return y

    return scan


def _sort(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    """A stable sort (MLX's, NaN last as numpy's); descending as the reference: the
    reversed sort of the reversed axis."""
    if ops.dtype(0) not in MX_DTYPES or ops.dtype(0).kind not in "iuf" or not ops.size(0):
        return None
    axis = attrs["axis"] % len(ops.shape(0))
    flip = (slice(None),) * axis + (slice(None, None, -1),)
    with on_cpu_if_f64(ops.dtype(0)):
        x = ops.mx(0)
        if not attrs["descending"]:
            return mx.sort(x, axis=axis)
        return mx.sort(x[flip], axis=axis)[flip]


def _argsort(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
    """A stable argsort (MLX's); descending keeps equal elements in their order."""
    if ops.dtype(0) not in MX_DTYPES or ops.dtype(0).kind not in "iuf" or not ops.size(0) \
            or out_dtype not in MX_DTYPES:
        return None
    axis = attrs["axis"] % len(ops.shape(0))
    flip = (slice(None),) * axis + (slice(None, None, -1),)
    want = MX_DTYPES[out_dtype]
    with on_cpu_if_f64(ops.dtype(0)):
        x = ops.mx(0)
        if not attrs["descending"]:
            return mx.argsort(x, axis=axis).astype(want)
        n = ops.shape(0)[axis]
        return (n - 1 - mx.argsort(x[flip], axis=axis)[flip].astype(want))


_F32, _C64 = np.dtype(np.float32), np.dtype(np.complex64)


def _fft(name: str) -> Callable[[dict[str, Any], np.dtype, Operands], mx.array | None]:
    def fft(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
        """``mx.fft.<name>`` on float32 / complex64 (numpy's float32 FFTs give complex64:
        the same precision)."""
        d = ops.dtype(0)
        if d not in (_F32, _C64) or out_dtype not in (_F32, _C64) or not ops.size(0) \
                or not all(attrs["s"]):
            return None
        x = ops.mx(0)
        if name in ("fftn", "ifftn") and d == _F32:
            x = x.astype(mx.complex64)
        f = getattr(mx.fft, name)
        return f(x, s=list(attrs["s"]), axes=list(attrs["axes"]),
                 norm=attrs["norm"] or "backward")

    return fft


def _linalg(name: str) -> Callable[[dict[str, Any], np.dtype, Operands], mx.array | None]:
    def linalg(attrs: dict[str, Any], out_dtype: np.dtype, ops: Operands) -> mx.array | None:
        """``mx.linalg.<name>`` on float32 matrices, on MLX's CPU stream (its only one for
        linalg); a singular matrix raises when MLX evaluates it, and the numpy reference
        then raises its LinAlgError."""
        if ops.dtype(0) != _F32 or out_dtype != _F32 or not ops.size(0):
            return None
        with mx.stream(mx.cpu):
            return getattr(mx.linalg, name)(ops.mx(0))

    return linalg


MLX_LIBRARY: dict[str, Callable[[dict[str, Any], np.dtype, Operands], mx.array | None]] = {
    "matmul": _matmul, "quantized_matmul": _quantized_matmul, "rope": _rope,
    "scaled_dot_product_attention": _sdpa, "conv": _conv, "conv_fused": _conv,
    "conv_concat": _conv_concat, "max_pool": _pool("max_pool"),
    "window_sum": _pool("window_sum"),
    "concat": _concat, "gather": _gather, "cumulative_sum": _scan("sum"),
    "cumulative_prod": _scan("prod"), "sort": _sort, "argsort": _argsort,
    "fft.fftn": _fft("fftn"), "fft.ifftn": _fft("ifftn"), "fft.rfftn": _fft("rfftn"),
    "fft.irfftn": _fft("irfftn"), "linalg.inv": _linalg("inv"), "linalg.det": _linalg("det"),
}


