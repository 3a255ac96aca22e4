"""``bz.fast``: the building blocks of transformer models, each one call.

``rms_norm`` and ``layer_norm`` record primitive ops that the fusion compiler turns
into one row kernel (one read of x, one write); ``rope`` and
``scaled_dot_product_attention`` are one op each (library ops: the ``cpu`` backend
runs each as one native kernel, other backends their numpy reference; attention
with an array mask is two matrix products around one fused mask+softmax kernel). Grouped-query
attention (fewer key/value heads than query heads) is handled by grouping query
heads, never by repeating keys and values in memory.

>>> import braze as bz
>>> x = bz.ones((2, 8))
>>> [round(v, 4) for v in bz.fast.rms_norm(x, bz.full((8,), 2.0), eps=1e-5).tolist()[0][:2]]
[2.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ..graph import dtypes as dt
from ..graph.node import Node
from ..graph.ops import ROPE, SDPA
from .array import Array, as_array, astype
from .creation import asarray
from .elementwise import sqrt, where  # type: ignore[attr-defined]  # generated (op records)
from .linalg import matmul
from .manipulation import reshape
from .reductions import mean, softmax

__all__ = ["rms_norm", "layer_norm", "rope", "scaled_dot_product_attention"]


def _float(x: Any, op: str) -> Array:
    x = as_array(x, op)
    if not dt.is_floating(x.dtype) or dt.is_complex(x.dtype):
        raise TypeError(f"{op}: expected a real floating array, got {dt.name(x.dtype)}")
    return x


def rms_norm(x: Any, weight: Any | None, eps: float) -> Array:
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` over the last axis (one fused kernel).

    >>> import braze as bz
    >>> [round(v, 5) for v in bz.fast.rms_norm(bz.asarray([[3.0, 4.0]]), None, 0.0).tolist()[0]]
    [0.84853, 1.13137]
    """
    x = _float(x, "rms_norm")
    if weight is not None:
        weight = as_array(weight, "rms_norm")
        if weight.shape != x.shape[-1:]:
            raise ValueError(f"rms_norm: weight of shape {weight.shape} does not match the last "
                             f"axis of x {x.shape}")
    y = x * (1.0 / sqrt(mean(x * x, axis=-1, keepdims=True) + eps))
    return y if weight is None else y * weight


def layer_norm(x: Any, weight: Any | None, bias: Any | None, eps: float) -> Array:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis (one kernel).

    >>> import braze as bz
    >>> y = bz.fast.layer_norm(bz.asarray([[1.0, 3.0]]), None, None, 0.0)
    >>> [round(v, 5) for v in y.tolist()[0]]
    [-1.0, 1.0]
    """
    x = _float(x, "layer_norm")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and as_array(p, "layer_norm").shape != x.shape[-1:]:
            raise ValueError(f"layer_norm: {name} of shape {as_array(p, 'layer_norm').shape} "
                             f"does not match the last axis of x {x.shape}")
    c = x - mean(x, axis=-1, keepdims=True)
    y = c * (1.0 / sqrt(mean(c * c, axis=-1, keepdims=True) + eps))
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def rope(x: Any, dims: int, *, traditional: bool, base: float, scale: float = 1.0,
         offset: Any = 0) -> Array:
    """Rotary position embedding of the first ``dims`` features of x (..., T, D).

    Position ``t`` of axis -2 is ``offset + t`` (``offset``: an int or a 0-d int
    array, so a compiled decode step takes it as a runtime input; or one int per entry
    of x's first axis, for a batch of sequences at different positions). Feature pairs are
    ``(2i, 2i+1)`` when ``traditional`` (GPT-J / GGUF layout), else ``(i, i + dims/2)``
    (GPT-NeoX / Hugging Face ``rotate_half``); pair i turns by ``pos * base**(-2i/dims)``.
    One op: the ``cpu`` backend computes the (T, dims/2) cos/sin table once per call
    and rotates any strided x (heads split out of a fused projection) in one pass.

    >>> import braze as bz
    >>> x = bz.reshape(bz.arange(4, dtype=bz.float32), (1, 4))
    >>> bz.fast.rope(x, 4, traditional=True, base=10000.0).tolist()  # position 0: identity
    [[0.0, 1.0, 2.0, 3.0]]
    """
    x = _float(x, "rope")
    offset = asarray(offset) if isinstance(offset, int) else as_array(offset, "rope")
    attrs = {"dims": dims, "traditional": bool(traditional), "base": float(base),
             "scale": float(scale)}
    shape, dtype = ROPE.infer((x.shape, offset.shape), (x.dtype, offset.dtype),  # type: ignore[misc]
                              attrs)
    return Array(Node(ROPE, (x._node, offset._node), attrs, shape, dtype))


def scaled_dot_product_attention(q: Any, k: Any, v: Any, *, scale: float,
                                 mask: Any | str | None = None,
                                 past: tuple[Any, Any] | None = None,
                                 past_length: Any = None, past_index: Any = None) -> Array:
    """``softmax(q @ k.T * scale + mask) @ v`` with grouped-query heads.

    q (B, Hq, T, D), k and v (B, Hkv, S, D) with Hq a multiple of Hkv; ``mask`` is
    None, ``"causal"`` (query t sees keys up to ``S - T + t``) or a boolean (True =
    attend) / additive float array broadcastable to (B, Hq, T, S).

    ``past=(keys, values)`` (B, Hkv, P, D) (any float dtype: a float16 cache is read
    as it is, never cast), of which the first ``past_length`` rows are valid (an int
    or a 0-d int array: a runtime input of a compiled step; clamped to [0, P]), puts
    those rows before k and v without concatenating them: every query sees them, and
    ``"causal"`` then means query t sees new keys up to t (the KV-cache
    decode/pre-fill case). For a batch of sequences at different positions (batched
    decoding) ``past_length`` may be one length per batch row (B,), and ``past_index``
    (B,) ints says which batch row of the past each row reads (the past then has its own
    batch size: a cache of fixed slots, read in place; indices are clamped into it).
    With ``mask`` None or ``"causal"`` the whole attention is
    one op (the ``cpu`` backend runs it as one native kernel: scores, softmax and the
    weighted sum per query row, never materializing the scores); an array mask is
    composed of two matmuls around one fused masked-softmax kernel (no ``past``).

    >>> import braze as bz
    >>> q = k = v = bz.ones((1, 2, 3, 4))
    >>> bz.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask="causal").shape
    (1, 2, 3, 4)
    """
    op = "scaled_dot_product_attention"
    q, k, v = (_float(a, op) for a in (q, k, v))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or k.shape[:3] != v.shape[:3] \
            or q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1] \
            or k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"{op}: expected q (B, Hq, T, D), k and v (B, Hkv, S, D) with Hq a "
                         f"multiple of Hkv; got shapes {q.shape}, {k.shape}, {v.shape}")
    if isinstance(mask, str) and mask != "causal":
        raise ValueError(f"{op}: mask must be None, 'causal' or an array, got {mask!r}")
    if mask is None or isinstance(mask, str):
        ins = [q, k, v]
        if past is not None:
            pk, pv = (_float(a, op) for a in past)
            n = asarray(past_length) if isinstance(past_length, int) else \
                as_array(past_length, op)
            ins += [pk, pv, n]
            if past_index is not None:
                ins.append(as_array(past_index, op))
        elif past_length is not None or past_index is not None:
            raise ValueError(f"{op}: past_length / past_index without past")
        dtype = dt.result_type(q.dtype, k.dtype, v.dtype)
        # (a past of another float dtype is read as it is: casting would copy the cache)
        ins = [a if a.dtype == dtype or i >= 3 else astype(a, dtype) for i, a in enumerate(ins)]
        attrs = {"scale": float(scale), "causal": mask == "causal"}
        shape, out_dtype = SDPA.infer(  # type: ignore[misc]
            tuple(a.shape for a in ins), tuple(a.dtype for a in ins), attrs)
        return Array(Node(SDPA, tuple(a._node for a in ins), attrs, shape, out_dtype))
    if past is not None:
        raise ValueError(f"{op}: past keys/values need mask None or 'causal'")
    return _attention_masked(q, k, v, scale, as_array(mask, op))


def _attention_masked(q: Array, k: Array, v: Array, scale: float, m: Array) -> Array:
    """Two matmuls around one fused masked-softmax row kernel (an array mask)."""
    b, hq, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    rep = hq // hkv
    qg = reshape(q, (b, hkv, rep * t, d))  # query heads sharing a key head, stacked as rows
    scores = matmul(qg, k.mT) * scale  # (b, hkv, rep*t, s)
    m = _group_heads(m, hkv, rep)
    if t == 1 and m.shape[-2] == 1:
        # one query row per head (decode): the mask stays 4-d, so the masked softmax is one
        # row kernel over the (b, hkv, rep, s) scores
        m = reshape(m, (*m.shape[:2], m.shape[2] * m.shape[3], m.shape[4]))
        scores = where(m, scores, float("-inf")) if m.dtype == dt.bool_ else scores + m
    else:
        scores = reshape(scores, (b, hkv, rep, t, s))
        scores = where(m, scores, float("-inf")) if m.dtype == dt.bool_ else scores + m
        scores = reshape(scores, (b, hkv, rep * t, s))
    # (float16/bfloat16 scores softmaxed in float32; float64 stays float64)
    p = astype(softmax(astype(scores, dt.result_type(scores.dtype, dt.float32)), axis=-1),
               q.dtype)
    out = matmul(p, v)
    return reshape(out, (b, hq, t, v.shape[-1]))


def _group_heads(m: Array, hkv: int, rep: int) -> Array:
    """A mask broadcastable to (B, Hq, T, S) as one broadcastable to (B, Hkv, rep, T, S)."""
    while m.ndim < 4:
        m = reshape(m, (1, *m.shape))
    if m.shape[1] == 1:
        return reshape(m, (m.shape[0], 1, 1, *m.shape[2:]))
    return reshape(m, (m.shape[0], hkv, rep, *m.shape[2:]))
