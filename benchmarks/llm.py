"""LLM decode and pre-fill speed: braze (4-bit, float32) vs the numpy float32 reference and
llama.cpp (llama-cpp-python, where installed).

Each implementation runs in its own processes (``--runs`` of them, medians reported):
load SmolLM2-135M-Instruct, pre-fill a 104-token chat prompt (3 times from an empty
cache, median), then decode ``--tokens`` tokens greedily with a KV cache. Reported:
pre-fill and decode tokens/s, peak RSS, ratios against the numpy float32 reference and
llama.cpp, and the decode roofline (bytes of weights read per token / memory bandwidth).

    .venv/bin/python benchmarks/llm.py [--runs 3] [--tokens 64] [--only braze-q4,numpy]
                                       [--profile] [--llama-python PYTHON]

``braze-q4-mlx``: the 4-bit model on the ``mlx`` backend (resident in MLX: Metal on a Mac,
MLX's CPU build elsewhere, which is far slower than braze's own ``cpu`` kernels); on a Mac
``--only braze-q4,braze-q4-mlx,llama.cpp`` puts it beside the cpu backend and llama.cpp's
Metal build (llama-cpp-python installs with Metal there).

``llama.cpp``: the same GGUF file (Q4_1, the one braze quantizes to 4 bits from), the
same prompt ids, 2 threads, pre-fill in one ``eval`` and greedy steps through the
low-level API (no sampling or detokenizing costs). It runs in ``--llama-python``
(default ``$LLAMA_CPP_PYTHON``, else this interpreter) when that can import
``llama_cpp``; never a braze dependency (building it takes ~10 minutes:
``../shared/recipes/peers-and-aarch64.md``). The header names the ISA braze's kernels ran
on (``BRAZE_ISA`` included); llama.cpp runs its own build for the host's.

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

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__" and sys.argv[1:3] == ["--worker", "llama.cpp"]:
    braze = None  # llama-cpp-python's own interpreter: no braze there
else:
    # as examples/llm/chat.py and server.py run (workers spin between decode steps)
    os.environ.setdefault("GOMP_SPINCOUNT", "300000")
    import braze  # (before numpy: braze tunes OpenBLAS's thread pool)
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "llm"))
    sys.path.insert(0, HERE)
    from _timing import isa

QUESTION = ("Explain in a few sentences why the sky is blue, how sunsets get their colors, "
            "and what Rayleigh scattering has to do with it. Then give one everyday example "
            "of the same effect, and finish with a short summary a ten-year-old could follow. "
            "Keep it friendly and clear, avoid jargon, and use no more than five short "
            "sentences in total.")  # 104 tokens in the chat template, as in issue 6
BANDWIDTH = 35e9  # bytes/s: STREAM triad on this machine kind (2 threads)
IMPLS = ("numpy", "braze-f32", "braze-q4", "braze-q4-mlx", "llama.cpp")
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


def llama_cpp_worker(gguf: str, text: str, n_tokens: int) -> dict[str, float]:
    """llama.cpp's process (llama-cpp-python's interpreter): the protocol of ``worker``."""
    import llama_cpp
    import numpy as np

    t0 = time.perf_counter()
    m = llama_cpp.Llama(model_path=gguf, n_ctx=2048, n_batch=512, n_threads=2,
                        n_threads_batch=2, verbose=False)
    ids = m.tokenize(text.encode(), add_bos=False, special=True)
    load_s = time.perf_counter() - t0
    nv = m.n_vocab()

    def last() -> int:
        ptr = llama_cpp.llama_get_logits_ith(m._ctx.ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(nv,))))

    m.reset()
    m.eval(ids[:8])  # warm-up
    times = []
    for _ in range(PREFILLS):  # each from an empty cache
        m.reset()
        t0 = time.perf_counter()
        m.eval(ids)
        tok = last()
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(n_tokens):
        m.eval([tok])
        tok = last()
    decode_s = time.perf_counter() - t0
    return {"prompt_tokens": len(ids), "prefill_tps": len(ids) / statistics.median(times),
            "decode_tps": n_tokens / decode_s, "load_s": load_s,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "weight_mb": os.path.getsize(gguf) / 2**20}


def _llama_python(arg: str | None) -> str | None:
    """The interpreter that imports llama_cpp (``--llama-python``, ``$LLAMA_CPP_PYTHON``,
    this one), or None."""
    for py in (arg, os.environ.get("LLAMA_CPP_PYTHON"), sys.executable):
        if py and subprocess.run([py, "-c", "import llama_cpp"],
                                 capture_output=True).returncode == 0:
            return py
    return None


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
        if impl.endswith("-mlx"):
            braze.backends.set_backend("mlx")
        model, tok = llama.load(quantized=impl.startswith("braze-q4"))
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
    ap.add_argument("--llama-python", help="an interpreter with llama-cpp-python")
    ap.add_argument("--gguf", help=argparse.SUPPRESS)
    ap.add_argument("--text", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "llama.cpp":
        print(json.dumps(llama_cpp_worker(args.gguf, args.text, args.tokens)))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.tokens, args.profile)))
        return
    impls = [i for i in args.only.split(",") if i in IMPLS]
    lpy = _llama_python(args.llama_python) if "llama.cpp" in impls else None
    if "llama.cpp" in impls and lpy is None:
        print("llama.cpp: llama-cpp-python is not installed here (--llama-python): skipped",
              file=sys.stderr)
        impls.remove("llama.cpp")
    import llama

    extra = ["--gguf", llama.default_model_path(), "--text", llama.chat_prompt(QUESTION)]
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.runs):  # interleaved, so drifting machine load hits all alike
        for impl in impls:
            py = lpy if impl == "llama.cpp" else sys.executable
            out = subprocess.run([py, __file__, "--worker", impl, "--tokens",
                                  str(args.tokens), *(extra if impl == "llama.cpp" else [])],
                                 capture_output=True, text=True)
            if out.returncode:
                print(f"{impl}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            results.setdefault(impl, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {i: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for i, rs in results.items()}
    base, peer = med.get("numpy"), med.get("llama.cpp")
    n_prompt = next(iter(med.values()))["prompt_tokens"] if med else 0
    print(f"SmolLM2-135M-Instruct, {os.cpu_count()} cpus, {isa()}, medians of {args.runs} "
          f"processes; pre-fill {n_prompt:.0f} tokens, decode {args.tokens} tokens")
    if any(i.endswith("-mlx") for i in med):
        from braze.backends.mlx import metal_available

        print(f"mlx backend on {'Metal' if metal_available() else 'MLX CPU build (no Metal)'}")
    print(f"{'impl':<12} {'prefill tok/s':>14} {'decode tok/s':>13} {'x numpy':>8} "
          f"{'x llama.cpp':>17} {'weights MB':>11} {'roofline tok/s':>15} {'peak RSS MB':>12} "
          f"{'load s':>7}")
    for impl, m in med.items():
        ratio = f"{m['decode_tps'] / base['decode_tps']:.2f}x" if base else "-"
        vs = (f"{m['prefill_tps'] / peer['prefill_tps']:.2f}x / "
              f"{m['decode_tps'] / peer['decode_tps']:.2f}x") if peer else "-"
        roof = BANDWIDTH / (m["weight_mb"] * 2**20)
        print(f"{impl:<12} {m['prefill_tps']:>14.0f} {m['decode_tps']:>13.1f} {ratio:>8} "
              f"{vs:>17} {m['weight_mb']:>11.0f} {roof:>15.0f} {m['rss_mb']:>12.0f} "
              f"{m['load_s']:>7.1f}")
    if peer:
        print("x llama.cpp: pre-fill / decode tokens/s against llama.cpp's in the same run")
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
