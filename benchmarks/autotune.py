"""Ablation: the autotuned tactic against the static heuristic, on every tuned op.

Tuned ops: the 4-bit / 8-bit quantized matmul (tactics: 4 kernel variants -- prefetch
distance, int8 weight rows per pass -- x 1 or all threads x AMX or not where the CPU has
it; ``backends/cpu/tactics.py``) at SmolLM2-135M's shapes, decode (M = 1), a 16-sequence
serving step (M = 16, batch invariant as the server runs it: the int8 GEMM) and pre-fill
(M = 104); and the end-to-end LLM
(``benchmarks/llm.py``'s protocol) with ``BRAZE_AUTOTUNE=0`` (heuristic) against ``max``
(every tactic, variants built) in separate processes. Per shape: the heuristic's time, the
tuner's choice and its time (hot cache: the operands stay in L2/L3, as when the tuner
times them), every tactic measured, and the first-call cost of tuning (its timing runs;
the variant builds are counted apart, once per machine).

    .venv/bin/python benchmarks/autotune.py [--quick] [--no-llm]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time

import numpy as np
from _timing import isa, median_seconds  # benchmarks/ is the script's directory

from braze.arrays.quantized import pack
from braze.backends.cpu import default_num_threads, qmatmul, tactics

HERE = os.path.dirname(os.path.abspath(__file__))
# (name, K, N, bits): the fused projections of one layer and the 8-bit tied lm_head
SHAPES = [("qkv", 576, 960, 4), ("o", 576, 576, 4), ("gate_up", 576, 3072, 4),
          ("down", 1536, 576, 4), ("lm_head", 576, 49152, 8)]
GS, HALF = 32, True


def shapes_table(quick: bool) -> None:
    rng = np.random.default_rng(0)
    threads = default_num_threads()
    os.environ["BRAZE_AUTOTUNE"] = "max"
    print(f"quantized_matmul tactics, {isa()}, {threads} threads, group {GS}, "
          f"float16 scales (hot cache; us)")
    print(f"{'shape':>16} {'M':>4} {'heuristic':>10} {'tuned':>8} {'gain':>6}  {'chosen':<14} "
          f"{'tuning ms':>9}  all tactics")
    build_s = 0.0
    gains = []
    for name, k, n, bits in SHAPES:
        wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
        s = (rng.random((n, k // GS)) * 0.1).astype(np.float16)
        b = s.copy()
        t0 = time.perf_counter()
        for v in qmatmul.VARIANTS:  # the variants' builds: once per machine, not per call
            qmatmul._handle(bits, GS, HALF, None, v)
        build_s += time.perf_counter() - t0
        # decode, a 16-sequence serving step (batch invariant, as the server runs it), pre-fill
        for m, act in ((1, None), (16, "invariant"), (104, None)):
            x = rng.standard_normal((m, k)).astype(np.float32)
            key = qmatmul.problem_key(bits, GS, HALF, None, m, n, k, act, threads)
            tactics.TACTICS.forget(key)  # tune afresh here, timed
            t0 = time.perf_counter()
            qmatmul.quantized_matmul(x, wq, s, b, group_size=GS, bits=bits, num_threads=threads,
                                     act=act)
            first = time.perf_counter() - t0
            rep = tactics.report(key) or {}
            reps = 5 if quick else 15
            e = qmatmul._prepared(wq, s, b, GS, bits, None)
            assert e is not None
            p = qmatmul._Problem(e, m, n, k, bits, GS, None, threads, act)
            run = p.runner((x, wq, s, b))
            by = {t.name: t for t in p.tactics}
            times = {t.name: median_seconds(functools.partial(run, t), reps, 2) * 1e6
                     for t in p.tactics if t.valid(p.problem)}
            # (no report: one valid tactic, nothing to tune -- a streamed matvec over tiles)
            heur = rep.get("default", p.default.name)
            chosen = rep.get("chosen", p.default.name)
            gain = times[heur] / times[chosen] if heur in times and chosen in times else 1.0
            gains.append(gain)
            others = " ".join(f"{t}={us:.0f}" for t, us in sorted(times.items(),
                                                                   key=lambda kv: kv[1]))
            print(f"{name + f' {k}x{n}':>16} {m:>4} {times.get(heur, 0):10.1f} "
                  f"{times.get(chosen, 0):8.1f} {gain:5.2f}x  {chosen:<14} "
                  f"{first * 1e3:9.1f}  {others}")
            assert chosen in by
    geo = float(np.exp(np.mean(np.log(gains)))) if gains else 1.0
    print(f"geometric mean gain of the tuned choice: {geo:.3f}x over {len(gains)} problems; "
          f"variant builds {build_s:.1f} s (cached afterwards)")


def llm(runs: int) -> None:
    print(f"\nend to end (benchmarks/llm.py protocol, braze-q4, {runs} processes each)")
    for mode in ("0", "max"):
        env = dict(os.environ, BRAZE_AUTOTUNE=mode)
        out = subprocess.run([sys.executable, os.path.join(HERE, "llm.py"), "--runs",
                              str(runs), "--only", "braze-q4"], env=env,
                             capture_output=True, text=True)
        rows = [ln for ln in out.stdout.splitlines() if ln.startswith("braze-q4")]
        print(f"  BRAZE_AUTOTUNE={mode:<4} {rows[0] if rows else out.stderr[-500:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-llm", action="store_true")
    args = ap.parse_args()
    shapes_table(args.quick)
    if not args.no_llm:
        llm(1 if args.quick else 3)


if __name__ == "__main__":
    main()
