"""A plain float32 numpy Llama read straight from a GGUF file: the independent reference.

Nothing of braze is used: the ``gguf`` package reads and dequantizes the tensors,
and the forward pass (interleaved RoPE, grouped-query attention, SwiGLU, tied
embeddings) is written out in numpy. With a cache (``step``) it decodes like a real
runtime; the tests compare braze's logits to it and ``benchmarks/llm.py`` times it.

>>> import llama
>>> ref = NumpyLlama(llama.default_model_path())
>>> ref([1, 2, 3]).shape
(3, 49152)
"""

from __future__ import annotations

import numpy as np


class NumpyLlama:
    """Float32 weights and a forward pass with an optional key/value cache."""

    def __init__(self, path: str) -> None:
        import gguf

        r = gguf.GGUFReader(path)
        f = {k: v.contents() for k, v in r.fields.items() if k.startswith("llama.")}
        self.n_layers = f["llama.block_count"]
        self.n_heads = f["llama.attention.head_count"]
        self.n_kv = f["llama.attention.head_count_kv"]
        # Python floats: a numpy float64 scalar would promote the float32 activations
        self.eps = float(f["llama.attention.layer_norm_rms_epsilon"])
        self.base = float(f["llama.rope.freq_base"])
        self.w: dict[str, np.ndarray] = {}  # vectors and the embedding table (row lookups)
        self.wt: dict[str, np.ndarray] = {}  # matrices as (in, out): x @ w, BLAS-friendly
        for t in r.tensors:
            shape = tuple(int(d) for d in reversed(t.shape))
            a = np.asarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type),
                           np.float32).reshape(shape)
            if a.ndim == 2:
                self.wt[t.name] = np.ascontiguousarray(a.T)
            if a.ndim == 1 or t.name == "token_embd.weight":
                self.w[t.name] = a
        self.reset()

    def reset(self) -> None:
        """Empty the key/value cache."""
        self.k: list[np.ndarray | None] = [None] * self.n_layers
        self.v: list[np.ndarray | None] = [None] * self.n_layers

    def _norm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + self.eps) * w

    def _rope(self, x: np.ndarray, offset: int) -> np.ndarray:  # (H, T, D), pairs (2i, 2i+1)
        t, d = x.shape[1], x.shape[2]
        ang = (offset + np.arange(t))[:, None] * self.base ** (-np.arange(0, d, 2) / d)
        c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out

    def step(self, ids: list[int]) -> np.ndarray:
        """Logits (T, vocab) for ``ids`` following the cached positions; extends the cache."""
        w, wt = self.w, self.wt
        x = w["token_embd.weight"][ids]
        t = len(ids)
        offset = 0 if self.k[0] is None else self.k[0].shape[1]  # type: ignore[union-attr]
        rep = self.n_heads // self.n_kv
        for i in range(self.n_layers):
            p = f"blk.{i}."
            h = self._norm(x, w[p + "attn_norm.weight"])
            q = (h @ wt[p + "attn_q.weight"]).reshape(t, self.n_heads, -1).transpose(1, 0, 2)
            k = (h @ wt[p + "attn_k.weight"]).reshape(t, self.n_kv, -1).transpose(1, 0, 2)
            v = (h @ wt[p + "attn_v.weight"]).reshape(t, self.n_kv, -1).transpose(1, 0, 2)
            q, k = self._rope(q, offset), self._rope(k, offset)
            if self.k[i] is not None:
                k = np.concatenate([self.k[i], k], axis=1)  # type: ignore[list-item]
                v = np.concatenate([self.v[i], v], axis=1)  # type: ignore[list-item]
            self.k[i], self.v[i] = k, v
            qg = q.reshape(self.n_kv, rep * t, -1)  # query heads sharing a key head
            s = (qg @ k.transpose(0, 2, 1) * q.shape[-1] ** -0.5).reshape(self.n_kv, rep, t, -1)
            s_len = k.shape[1]
            visible = np.arange(s_len)[None, :] <= np.arange(t)[:, None] + offset
            s = np.where(visible, s, -np.inf)
            pr = np.exp(s - s.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            o = (pr.reshape(self.n_kv, rep * t, -1) @ v).reshape(self.n_heads, t, -1)
            x = x + o.transpose(1, 0, 2).reshape(t, -1) @ wt[p + "attn_output.weight"]
            h = self._norm(x, w[p + "ffn_norm.weight"])
            g, u = h @ wt[p + "ffn_gate.weight"], h @ wt[p + "ffn_up.weight"]
            x = x + (g / (1 + np.exp(-g)) * u) @ wt[p + "ffn_down.weight"]
        x = self._norm(x, w["output_norm.weight"])
        return x @ wt.get("output.weight", wt["token_embd.weight"])

    def __call__(self, ids: list[int]) -> np.ndarray:
        """Logits (T, vocab) of a fresh sequence (the cache is reset first)."""
        self.reset()
        return self.step(ids)
