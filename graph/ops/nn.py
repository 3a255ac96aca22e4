"""Neural-network library ops: rotary embeddings, scaled dot-product attention."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare


def rope_tables(t: int, offset: int, dims: int, base: float, scale: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """float32 cos and sin of the (T, dims/2) rotary angles ``(offset + t) * scale *
    base**(-2i/dims)``: positions and frequencies rounded to float32 first (the order
    every backend follows)."""
    pos = (np.arange(t, dtype=np.int64) + offset).astype(np.float32) * np.float32(scale)
    inv_freq = (base ** (-np.arange(dims // 2, dtype=np.float64) * 2.0 / dims)
                ).astype(np.float32)
    theta = pos[:, None] * inv_freq[None, :]
    return np.cos(theta), np.sin(theta)


def _rope_ref(x, offset, *, dims, traditional, base, scale):
    # pair (a, b) -> (a*cos + b*(-sin), b*cos + a*sin), float32 math (float64 stays);
    # one offset per entry of x's first axis (batched decoding): entry by entry
    if np.ndim(offset):
        ct = np.result_type(x.dtype, np.float32)
        return np.stack([_rope_ref(x[i], offset[i], dims=dims, traditional=traditional,
                                   base=base, scale=scale) for i in range(x.shape[0])]) \
            if x.shape[0] else np.empty(x.shape, ct)
    ct = np.result_type(x.dtype, np.float32)
    c, s = rope_tables(x.shape[-2], int(offset), dims, base, scale)
    c, s = c.astype(ct), s.astype(ct)
    half = dims // 2
    out = np.array(x, dtype=ct, copy=True)
    xr = x[..., :dims].astype(ct)
    if traditional:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out[..., 0:dims:2] = a * c + b * -s
        out[..., 1:dims:2] = b * c + a * s
    else:
        a, b = xr[..., :half], xr[..., half:]
        out[..., :half] = a * c + b * -s
        out[..., half:dims] = b * c + a * s
    return out


def _rope_infer(shapes, dtypes, attrs):
    x, off = shapes
    d = attrs["dims"]
    if len(x) < 2 or d % 2 or d > x[-1] or d <= 0:
        raise ValueError(f"rope: needs x of shape (..., T, D) with an even dims <= D, got "
                         f"shape {x} and dims={d}")
    if not dt.is_integer(dtypes[1]) or not (off == () or (len(x) >= 3 and off == x[:1])):
        raise TypeError(f"rope: offset must be an int, a 0-d integer array or one per entry "
                        f"of x's first axis (x of 3 or more dims), got shape {off} "
                        f"({dt.name(dtypes[1])}) for x of shape {x}")
    return x, dtypes[0]


def _rope_vjp(ad, g, y, x, offset, *, dims, traditional, base, scale):
    # a rotation's transpose is the rotation by the negated angles: scale -> -scale
    # (positions are rounded to float32 first, then scaled: negation is exact)
    return ad.apply("rope", g, offset, dims=dims, traditional=traditional, base=base,
                    scale=-scale), None


ROPE = declare(OpDef(
    "rope", "library", 2, _rope_ref, "real_floating", infer=_rope_infer, vjp=_rope_vjp,
    doc="Rotary position embedding of the first `dims` features of x (..., T, D) at "
        "positions offset + t, one offset or one per entry of x's first axis (one op).",
))


def sdpa_visible(t: int, s: int, past_len: int | None, causal: bool) -> np.ndarray:
    """(T, past_len + S) bool: which keys each of T query rows attends to. With a past
    (``past_len`` valid cached rows before the S new ones), query i sees every cached
    row and, when causal, new rows j <= i; without one, causal query i sees keys
    j <= S - T + i."""
    p = past_len or 0
    cols = np.arange(p + s)
    rows = np.arange(t)[:, None]
    if not causal:
        return np.ones((t, p + s), bool)
    if past_len is None:
        return cols[None, :] <= rows + (s - t)
    return (cols[None, :] < p) | (cols[None, :] - p <= rows)


def _sdpa_ref(q, k, v, *past, scale, causal):
    # keys = [first `past_len` rows of the past chunk, the new keys]; float32 (float64 when
    # an input is) math; a query row that sees no key gets NaN (softmax over nothing).
    # Per-row past lengths (B,) and a past index (B,) (batched decoding) run row by row.
    if past and (np.ndim(past[2]) or len(past) == 4):
        pk, pv, lens = past[:3]
        b = q.shape[0]
        lens = np.broadcast_to(np.asarray(lens), (b,))
        idx = np.clip(np.asarray(past[3]), 0, pk.shape[0] - 1) if len(past) == 4 \
            else np.arange(b)
        return np.concatenate([
            _sdpa_ref(q[i:i + 1], k[i:i + 1], v[i:i + 1], pk[idx[i]:idx[i] + 1],
                      pv[idx[i]:idx[i] + 1], lens[i], scale=scale, causal=causal)
            for i in range(b)]) if b else _sdpa_ref(q, k, v, scale=scale, causal=causal)
    ct = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    b, hq, t, d = q.shape
    hkv = k.shape[1]
    p_len = None
    if past:
        pk, pv, off = past
        p_len = int(min(max(int(off), 0), pk.shape[2]))
        k = np.concatenate([pk[:, :, :p_len], k], axis=2)
        v = np.concatenate([pv[:, :, :p_len], v], axis=2)
    qg = q.astype(ct).reshape(b, hkv, hq // hkv * t, d)
    scores = np.matmul(qg, np.swapaxes(k.astype(ct), -1, -2)) * ct.type(scale)
    vis = np.tile(sdpa_visible(t, k.shape[2] - (p_len or 0), p_len, causal), (hq // hkv, 1))
    scores = np.where(vis, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        m = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - m)
        p = e / e.sum(axis=-1, keepdims=True)
    out = np.matmul(p, v.astype(ct))
    return out.reshape(b, hq, t, v.shape[-1])


def _sdpa_infer(shapes, dtypes, attrs):
    op = "scaled_dot_product_attention"
    if len(shapes) not in (3, 6, 7):
        raise ValueError(f"{op}: expected q, k, v and optionally past keys, past values, "
                         f"the past length(s) and a past index; got {len(shapes)} inputs")
    q, k, v = shapes[:3]
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or k[:3] != v[:3] or q[0] != k[0] \
            or q[3] != k[3] or k[1] == 0 or q[1] % k[1]:
        raise ValueError(f"{op}: expected q (B, Hq, T, D), k and v (B, Hkv, S, D) with Hq a "
                         f"multiple of Hkv; got shapes {q}, {k}, {v}")
    if len(shapes) >= 6:
        pk, pv, off = shapes[3:6]
        indexed = len(shapes) == 7
        # with a past index the past's batch is its own (slots); without, the batch's
        if pk[1:2] + pk[3:] != k[1:2] + k[3:] or pv[1:2] + pv[3:] != v[1:2] + v[3:] \
                or pk[:3] != pv[:3] or (not indexed and pk[0] != k[0]) \
                or (indexed and pk[0] == 0):
            raise ValueError(f"{op}: past keys/values {pk}, {pv} do not match keys {k} and "
                             f"values {v} (same heads and feature sizes; the same batch "
                             "unless a past index picks the past's rows)")
        if off not in ((), (q[0],)) or not dt.is_integer(dtypes[5]):
            raise TypeError(f"{op}: the past length must be a 0-d integer array or one per "
                            f"batch row ({q[0]},), got shape {off} ({dt.name(dtypes[5])})")
        if indexed and (shapes[6] != (q[0],) or not dt.is_integer(dtypes[6])):
            raise TypeError(f"{op}: the past index must be one integer per batch row "
                            f"({q[0]},), got shape {shapes[6]} ({dt.name(dtypes[6])})")
    for d in dtypes[:5]:
        if not dt.is_real_floating(d):
            raise TypeError(f"{op}: q, k, v (and the past) must be real floating, got "
                            f"{', '.join(dt.name(x) for x in dtypes[:3])}")
    return (q[0], q[1], q[2], v[3]), dt.result_type(*dtypes[:3])


def _sdpa_vjp(ad, g, y, q, k, v, *past, scale, causal):
    # the attention recomputed from its composed form (two matmuls around a masked
    # softmax: what a training step's backward reads anyway) and differentiated
    if past:
        raise TypeError("grad: scaled_dot_product_attention over a key/value cache (past=) "
                        "has no gradient rule; differentiate attention without a past")
    t, s = q.shape[2], k.shape[2]
    mask = ad.asarray(sdpa_visible(t, s, None, causal))

    def attention(q, k, v):
        return ad.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)

    _, grads = ad.vjp(attention, [q, k, v], [g])
    return tuple(grads)


SDPA = declare(OpDef(
    "scaled_dot_product_attention", "library", -1, _sdpa_ref, "real_floating",
    infer=_sdpa_infer, vjp=_sdpa_vjp,
    doc="softmax(q @ k.T * scale, causal mask) @ v over grouped-query heads, optionally "
        "after the first `past_len` rows (one length, or one per batch row) of a cached "
        "key/value chunk, whose batch rows a past index may pick (one op).",
))
