"""Quantized weights: affine groups in MLX's layout, quantized matmul."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .record import OpDef, Shape, declare, upcast

# Affine groups (MLX's layout): row n of a (N, K) weight is cut into K // group_size
# groups; element k is ``scales[n, g] * q + biases[n, g]`` with q an unsigned
# ``bits``-bit integer, packed little-end first into uint32 words (32 // bits per word).
QUANT_BITS = (4, 8)
QUANT_GROUPS = (32, 64, 128)
# How a backend may treat a quantized matmul's activations (``act``): "float" exact,
# "int8" quantized per block of 32 for integer dot products, "auto" the backend's choice
# per problem, "invariant" int8 where the backend has it through one code path at every
# number of rows, so that each row of the result is independent of the others (a
# server's batched decode gives a sequence the bits it gets alone), "int16" quantized per
# block of 32 to 16-bit integers (two int8 planes for the same integer dot products: an
# error ~250x smaller than int8's), one code path at every number of rows.
QUANT_ACT_MODES = ("auto", "int8", "float", "invariant", "int16")


def dequantize_ref(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, *,
                   group_size: int, bits: int) -> np.ndarray:
    """Unpack ``wq`` (N, K*bits/32) uint32 to float (N, K) with the per-group affine map."""
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    q = (wq[..., None] >> shifts) & np.uint32((1 << bits) - 1)
    q = q.reshape(*wq.shape[:-1], wq.shape[-1] * per).astype(np.float32)
    g = q.reshape(*q.shape[:-1], -1, group_size)
    w = g * upcast(scales)[..., None].astype(np.float32) + upcast(biases)[..., None]
    return w.reshape(q.shape)


def qmm_ref(x, wq, scales, biases, *, group_size, bits, act=None):
    # ``act`` lets a backend approximate the activations (int8, with a stated bound); the
    # reference is the exact product
    w = dequantize_ref(wq, scales, biases, group_size=group_size, bits=bits)
    return np.matmul(x.astype(np.float32, copy=False), w.T)


def quant_check(op: str, wq: tuple[Shape, np.dtype], scales: tuple[Shape, np.dtype],
                biases: tuple[Shape, np.dtype], group_size: int, bits: int) -> int:
    """Validate a packed weight triple; returns K (the unpacked row length)."""
    if bits not in QUANT_BITS:
        raise ValueError(f"{op}: bits must be one of {QUANT_BITS}, got {bits}")
    if group_size not in QUANT_GROUPS:
        raise ValueError(f"{op}: group_size must be one of {QUANT_GROUPS}, got {group_size}")
    (ws, wd), (ss, sd), (bs, bd) = wq, scales, biases
    if wd != dt.uint32 or len(ws) != 2:
        raise TypeError(f"{op}: packed weights must be a 2-d uint32 array, got shape {ws} "
                        f"({dt.name(wd)})")
    k = ws[1] * (32 // bits)
    want = (ws[0], k // group_size)
    if k % group_size or ss != want or bs != want:
        raise ValueError(f"{op}: scales and biases must have shape {want} for packed weights "
                         f"{ws} with bits={bits}, group_size={group_size}; got {ss} and {bs}")
    if not (dt.is_real_floating(sd) and dt.is_real_floating(bd)):
        raise TypeError(f"{op}: scales and biases must be floating, got {dt.name(sd)} and "
                        f"{dt.name(bd)}")
    return k


def _qmm_infer(shapes, dtypes, attrs):
    k = quant_check("quantized_matmul", (shapes[1], dtypes[1]), (shapes[2], dtypes[2]),
                    (shapes[3], dtypes[3]), attrs["group_size"], attrs["bits"])
    x = shapes[0]
    if not x or x[-1] != k:
        raise ValueError(f"quantized_matmul: x of shape {x} does not match packed weights of "
                         f"{shapes[1][0]} rows x {k} columns (last dims differ)")
    return x[:-1] + (shapes[1][0],), dtypes[0]


def _qmm_vjp(ad, g, y, x, wq, scales, biases, *, group_size, bits, act="auto"):
    # y = x @ W.T with W[n, k] = code[n, k] * scale[n, k // gs] + bias[n, k // gs]:
    # gx = g @ W; the scales' and biases' cotangents sum g^T x (= gW) over each group,
    # the scales' weighted by the codes (the codes themselves are integers: no gradient)
    n, k = wq.shape[0], x.shape[-1]
    w = ad.dequantize(wq, scales, biases, group_size=group_size, bits=bits)
    gx = ad.matmul(g, w.astype(g.dtype))
    g2 = ad.reshape(g, (-1, n)).astype(ad.float32)
    x2 = ad.reshape(x, (-1, k)).astype(ad.float32)
    gw = ad.reshape(ad.matmul(ad.matrix_transpose(g2), x2), (n, k // group_size, group_size))
    codes = ad.dequantize(wq, ad.ones(scales.shape), ad.zeros(biases.shape),
                          group_size=group_size, bits=bits)
    codes = ad.reshape(codes, (n, k // group_size, group_size))
    gs = ad.sum(gw * codes, axis=-1).astype(scales.dtype)
    gb = ad.sum(gw, axis=-1).astype(biases.dtype)
    return gx, None, gs, gb


QUANTIZED_MATMUL = declare(OpDef(
    "quantized_matmul", "library", 4, qmm_ref, "real_floating", infer=_qmm_infer,
    vjp=_qmm_vjp,
    doc="x @ dequantize(wq, scales, biases).T with the weight kept packed.",
))
