"""The tokenizer stored in a GGUF file's metadata, rebuilt offline with ``tokenizers``.

GGUF files of Llama-architecture models with a byte-level BPE vocabulary
(``tokenizer.ggml.model == "gpt2"``) carry the token list, the merges and the
token types; this module turns them into a :class:`tokenizers.Tokenizer`.

>>> import llama
>>> tok = llama.load_tokenizer_only()
>>> tok.decode(tok.encode("Paris 2024").ids)
'Paris 2024'
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

CONTROL = 3  # GGUF token type of special (control) tokens


def load_tokenizer(meta: dict[str, Any]) -> Tokenizer:
    """Build the tokenizer described by GGUF metadata ``meta`` (see :func:`braze.load`)."""
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"tokenizer: only byte-level BPE vocabularies (tokenizer.ggml.model "
                         f"'gpt2') are supported, this file has {kind!r}")
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    pre = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if meta.get("tokenizer.ggml.pre") in ("smollm", "starcoder", "refact", "qwen2"):
        pre.insert(0, pre_tokenizers.Digits(individual_digits=True))  # one token per digit
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type") or []
    tok.add_special_tokens([tokens[i] for i, t in enumerate(types) if t == CONTROL])
    return tok
