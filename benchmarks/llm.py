"""LLM decode and pre-fill speed: braze (4-bit, float32) vs the numpy float32 reference.

Each implementation runs in its own processes (``--runs`` of them, medians reported):
load SmolLM2-135M-Instruct, pre-fill a 104-token chat prompt (3 times from an empty
cache, median), then decode ``--tokens`` tokens greedily with a KV cache. Reported:
pre-fill and decode tokens/s, peak RSS, ratios against the numpy float32 reference, and
the decode roofline (bytes of weights read per token / memory bandwidth).

    .venv/bin/python benchmarks/llm.py [--runs 3] [--tokens 64] [--only braze-q4,numpy]
                                       [--profile]

``--profile``: where a braze decode step's time goes (``bz.backends.profile()`` over 16
more steps of one process: each step of the compiled plan by op, ms per step, and the
Python around the plan).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import braze  # noqa: F401  (before numpy: braze tunes OpenBLAS's thread pool)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "llm"))

QUESTION = ("Explain in a few sentences why the sky is blue, how sunsets get their colors, "
            "and what Rayleigh scattering has to do with it. Then give one everyday example "
            "of the same effect, and finish with a short summary a ten-year-old could follow. "
            "Keep it friendly and clear, avoid jargon, and use no more than five short "
            "sentences in total.")  # 104 tokens in the chat template, as in issue 6
BANDWIDTH = 35e9  # bytes/s: STREAM triad on this machine kind (2 threads)
IMPLS = ("numpy", "braze-f32", "braze-q4")
PREFILLS = 3  # pre-fills per process (median): one ~0.2 s measurement is at the host's mercy


def _profile_steps(model, cache, logits, steps: int = 16) -> list[tuple[str, float, float]]:
    """(op, ms per step, calls per step) of ``steps`` decode steps, most costly first; the
    last row is the time around the compiled plan (the model's Python, the KV-cache write,
    argmax)."""
    import numpy as np

    by: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    with braze.backends.profile() as calls:
        for _ in range(steps):
            logits = np.asarray(model([[int(np.argmax(logits))]], cache, last_only=True))[0, -1]
    wall = time.perf_counter() - t0
    for name, t in calls:
        by.setdefault(name.split("_")[0] if "_" in name else name, []).append(t)
    rows = sorted(((k, 1e3 * sum(v) / steps, len(v) / steps) for k, v in by.items()),
                  key=lambda r: -r[1])
    inside = sum(r[1] for r in rows)
    return rows + [("(around the plan)", 1e3 * wall / steps - inside, 0.0)]


def worker(impl: str, n_tokens: int, profile: bool = False) -> dict[str, float]:
    """One process: load, pre-fill, decode; returns timings and peak RSS."""
    import llama
    import numpy as np

    t0 = time.perf_counter()
    if impl == "numpy":
        from numpy_llama import NumpyLlama

        tok = llama.load_tokenizer_only()
        ref = NumpyLlama(llama.default_model_path())
        step = ref.step
        weight_bytes = sum(a.nbytes for a in ref.wt.values())
        ids = tok.encode(llama.chat_prompt(QUESTION)).ids
        load_s = time.perf_counter() - t0
        step(ids[:8])  # warm-up (BLAS threads, caches)
        times = []
        for _ in range(PREFILLS):  # each from an empty cache
            ref.reset()
            t0 = time.perf_counter()
            logits = step(ids)[-1]
            times.append(time.perf_counter() - t0)
        prefill_s = statistics.median(times)
        t0 = time.perf_counter()
        for _ in range(n_tokens):
            logits = step([int(np.argmax(logits))])[-1]
        decode_s = time.perf_counter() - t0
    else:
        model, tok = llama.load(quantized=impl == "braze-q4")
        weight_bytes = model.nbytes()
        ids = tok.encode(llama.chat_prompt(QUESTION)).ids
        load_s = time.perf_counter() - t0
        # warm-up: trace and build the pre-fill and decode steps of this prompt length (a
        # compiled step's first call traces it, its second prepares its replay plan)
        for _ in range(2):
            warm = model.make_cache()
            list(llama.generate(model, tok, llama.chat_prompt(QUESTION), max_tokens=3,
                                cache=warm))
        times = []
        for _ in range(PREFILLS):  # each into an empty cache
            cache = model.make_cache()
            t0 = time.perf_counter()
            logits = np.asarray(model([ids], cache, last_only=True))[0, -1]
            times.append(time.perf_counter() - t0)
        prefill_s = statistics.median(times)
        t0 = time.perf_counter()
        for _ in range(n_tokens):
            logits = np.asarray(model([[int(np.argmax(logits))]], cache, last_only=True))[0, -1]
        decode_s = time.perf_counter() - t0
        if profile:
            return {"profile": _profile_steps(model, cache, logits)}  # type: ignore[dict-item]
    return {"prompt_tokens": len(ids), "prefill_tps": len(ids) / prefill_s,
            "decode_tps": n_tokens / decode_s, "load_s": load_s,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "weight_mb": weight_bytes / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--only", default=",".join(IMPLS))
    ap.add_argument("--worker")
    ap.add_argument("--profile", action="store_true",
                    help="also print where a braze decode step's time goes")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.tokens, args.profile)))
        return
    impls = [i for i in args.only.split(",") if i in IMPLS]
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.runs):  # interleaved, so drifting machine load hits all alike
        for impl in impls:
            out = subprocess.run([sys.executable, __file__, "--worker", impl, "--tokens",
                                  str(args.tokens)], capture_output=True, text=True)
            if out.returncode:
                print(f"{impl}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            results.setdefault(impl, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {i: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for i, rs in results.items()}
    base = med.get("numpy")
    n_prompt = next(iter(med.values()))["prompt_tokens"] if med else 0
    print(f"SmolLM2-135M-Instruct, {os.cpu_count()} cpus, medians of {args.runs} processes; "
          f"pre-fill {n_prompt:.0f} tokens, decode {args.tokens} tokens")
    print(f"{'impl':<10} {'prefill tok/s':>14} {'decode tok/s':>13} {'x numpy':>8} "
          f"{'weights MB':>11} {'roofline tok/s':>15} {'peak RSS MB':>12} {'load s':>7}")
    for impl, m in med.items():
        ratio = m["decode_tps"] / base["decode_tps"] if base else float("nan")
        roof = BANDWIDTH / (m["weight_mb"] * 2**20)
        print(f"{impl:<10} {m['prefill_tps']:>14.0f} {m['decode_tps']:>13.1f} {ratio:>7.2f}x "
              f"{m['weight_mb']:>11.0f} {roof:>15.0f} {m['rss_mb']:>12.0f} {m['load_s']:>7.1f}")
    if args.profile:
        for impl in (i for i in impls if i.startswith("braze")):
            out = subprocess.run([sys.executable, __file__, "--worker", impl, "--tokens",
                                  str(args.tokens), "--profile"], capture_output=True, text=True)
            if out.returncode:
                print(f"{impl} profile: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            rows = json.loads(out.stdout.strip().splitlines()[-1])["profile"]
            total = sum(r[1] for r in rows)
            print(f"\n{impl}: a decode step, {total:.2f} ms")
            for name, ms, n in rows[:-1][:8] + rows[-1:]:
                calls = f"{n:5.0f} calls" if n else " " * 11
                print(f"  {name:<26} {ms:7.3f} ms {calls}  {100 * ms / total:5.1f} %")


if __name__ == "__main__":
    main()
