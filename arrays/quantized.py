"""Quantized weights: affine groups packed into uint32 words (MLX's layout).

A float weight ``w`` of shape (N, K) becomes three arrays: ``wq`` (N, K*bits/32)
uint32 holding ``bits``-bit unsigned codes (the first element in the lowest bits),
and ``scales``/``biases`` (N, K/group_size), so that element (n, k) is
``scales[n, k // group_size] * code + biases[n, k // group_size]``. GGUF's Q4_1
blocks are exactly 4-bit groups of 32 and load into this layout without
dequantizing. :func:`quantized_matmul` keeps the weight packed: backends run it
with dequantize-fused kernels (the CPU backend's read ~6x fewer bytes than
float32 at 4 bits).

>>> import braze as bz
>>> w = bz.reshape(bz.arange(64, dtype=bz.float32), (2, 32))
>>> wq, scales, biases = bz.quantize(w, group_size=32, bits=8)
>>> wq.shape, scales.shape
((2, 8), (2, 1))
>>> bool(bz.all(bz.abs(bz.dequantize(wq, scales, biases, bits=8) - w) <= scales / 2 + 1e-6))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import QUANT_ACT_MODES, QUANTIZED_MATMUL, quant_check
from .array import Array, as_array, astype
from .creation import arange, asarray
from .manipulation import reshape


def quantize(w: Any, /, *, group_size: int = 32, bits: int = 4
             ) -> tuple[Array, Array, Array]:
    """Quantize a 2-d float weight into (packed uint32 codes, scales, biases).

    Each group of ``group_size`` consecutive elements of a row maps its [min, max]
    range onto the ``2**bits`` codes (round to nearest), so the error per element
    is at most half a step, ``(max - min) / (2**bits - 1) / 2``. The weight is
    evaluated (a one-time preparation step); the results are float32 scales/biases.

    >>> import braze as bz
    >>> wq, s, b = bz.quantize(bz.ones((4, 64)), group_size=64, bits=4)
    >>> wq.shape, wq.dtype, s.shape
    ((4, 8), dtype('uint32'), (4, 1))
    """
    w = as_array(w, "quantize")
    if w.ndim != 2:
        raise ValueError(f"quantize: expected a 2-d weight, got shape {w.shape}")
    if not dt.is_real_floating(w.dtype):
        raise TypeError(f"quantize: expected a real floating weight, got {dt.name(w.dtype)}")
    n, k = w.shape
    quant_check("quantize", ((n, k * bits // 32), dt.uint32), ((n, k // group_size), dt.float32),
                ((n, k // group_size), dt.float32), group_size, bits)
    if k % group_size or (k * bits) % 32:
        raise ValueError(f"quantize: the last dimension ({k}) must be a multiple of "
                         f"group_size={group_size}")
    g = np.asarray(w, dtype=np.float32).reshape(n, k // group_size, group_size)
    lo, hi = g.min(axis=-1), g.max(axis=-1)
    levels = (1 << bits) - 1
    scale = (hi - lo) / levels
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint((g - lo[..., None]) / safe[..., None]), 0, levels).astype(np.uint32)
    return (asarray(pack(q.reshape(n, k), bits), copy=False), asarray(scale, copy=False),
            asarray(lo, copy=False))


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned ``bits``-bit codes (..., K) into uint32 words (..., K*bits/32).

    >>> pack(np.array([[1, 2, 3, 4, 5, 6, 7, 8]]), 4)
    array([[2271560481]], dtype=uint32)
    """
    per = 32 // bits
    c = codes.astype(np.uint32).reshape(*codes.shape[:-1], -1, per)
    shifts = np.arange(per, dtype=np.uint32) * np.uint32(bits)
    return np.bitwise_or.reduce(c << shifts, axis=-1).astype(np.uint32)


def dequantize(wq: Any, scales: Any, biases: Any, /, *, group_size: int = 32, bits: int = 4
               ) -> Array:
    """Unpack quantized weights to float (lazy; fuses into one elementwise kernel).

    >>> import braze as bz
    >>> wq, s, b = bz.quantize(bz.full((1, 32), 2.0), bits=4)
    >>> bz.dequantize(wq, s, b).tolist()[0][:3]
    [2.0, 2.0, 2.0]
    """
    wq, scales, biases = (as_array(a, "dequantize") for a in (wq, scales, biases))
    k = quant_check("dequantize", (wq.shape, wq.dtype), (scales.shape, scales.dtype),
                    (biases.shape, biases.dtype), group_size, bits)
    n, per = wq.shape[0], 32 // bits
    shifts = astype(arange(per) * bits, dt.uint32)
    codes = (reshape(wq, (n, wq.shape[1], 1)) >> shifts) & ((1 << bits) - 1)
    groups = reshape(astype(codes, dt.float32), (n, k // group_size, group_size))
    out = groups * astype(scales, dt.float32)[..., None] + astype(biases, dt.float32)[..., None]
    return reshape(out, (n, k))


def quantized_matmul(x: Any, wq: Any, scales: Any, biases: Any, /, *, transpose: bool = True,
                     group_size: int = 32, bits: int = 4, act: str | None = None) -> Array:
    """``x @ dequantize(wq, scales, biases).T`` without unpacking the weight in memory.

    ``x`` (..., K) float; the result (..., N) has x's float dtype. ``act`` chooses how
    the CPU backend treats the activations: ``"float"`` (exact), ``"int8"`` (quantized
    per group of 32 for VNNI integer dot products: ~0.3-1 % relative error, the bound
    stated in ``braze.backends.cpu.qmatmul``), ``"auto"``, ``"invariant"`` (int8 where
    the kernel has it, through one code path at every number of rows: each row of the
    result is the same whatever rows are computed with it -- batched decoding),
    ``"int16"`` (16-bit integers per group of 32 in two int8 planes: ~3e-5 relative error,
    batch invariant); None defers to ``BRAZE_QMM_ACT`` (default ``"auto"``: int8 for a few
    rows against 4-bit weights, int16 for more rows and against 8-bit weights where the
    kernel has it).

    >>> import braze as bz
    >>> w = bz.reshape(bz.arange(64, dtype=bz.float32) / 64, (2, 32))
    >>> wq, s, b = bz.quantize(w, bits=8)
    >>> y = bz.quantized_matmul(bz.ones((1, 32)), wq, s, b, bits=8)
    >>> bool(bz.all(bz.abs(y - bz.ones((1, 32)) @ w.T) < 1e-2))
    True
    """
    if not transpose:
        raise NotImplementedError("quantized_matmul: only transpose=True (x @ w.T) is supported")
    x = as_array(x, "quantized_matmul")
    wq, scales, biases = (as_array(a, "quantized_matmul") for a in (wq, scales, biases))
    if not dt.is_floating(x.dtype) or dt.is_complex(x.dtype):
        x = astype(x, dt.DEFAULT_FLOAT)
    attrs: dict[str, Any] = {"group_size": group_size, "bits": bits}
    if act is not None:
        if act not in QUANT_ACT_MODES:
            raise ValueError(f"quantized_matmul: act must be one of {QUANT_ACT_MODES}, "
                             f"got {act!r}")
        attrs["act"] = act
    shape, dtype = QUANTIZED_MATMUL.infer(  # type: ignore[misc]
        (x.shape, wq.shape, scales.shape, biases.shape),
        (x.dtype, wq.dtype, scales.dtype, biases.dtype), attrs)
    return Array(Node(QUANTIZED_MATMUL, (x._node, wq._node, scales._node, biases._node), attrs,
                      shape, dtype))
