"""Quantized matmul (the ``cpu`` backend's native kernel) against numpy, LLM-decode shapes.

    .venv/bin/python benchmarks/quantized.py [--quick] [--group-size 64] [--threads N]

Shapes: SmolLM2-135M's matrix-vector products (M = 1, float32 x): K=576 with
N in {576 (q, o), 192 (k, v), 1536 (gate, up)}, K=1536 N=576 (down), 4-bit; and the
tied embedding output K=576 N=49152 at 8 bits. Columns (medians in ms):

* ``native``: the kernel called directly on numpy arrays
  (``braze.backends.cpu.qmatmul.quantized_matmul``), exact float path (``act="float"``),
  the weight hot in cache;
* ``int8``: the same with int8 activations (``act="int8"``, VNNI; ``-`` without it);
* ``bz``: ``bz.quantized_matmul`` evaluated on the ``cpu`` backend (adds the graph
  and library-step overhead);
* ``np f32``: numpy float32 ``x @ w.T`` with the dequantized weight (BLAS);
* ``np deq``: the numpy reference, dequantize then matmul (what a backend without the
  kernel runs);
* GB/s: packed bytes read (codes + scales + biases) / native time;
* ratios: np f32 / native and np deq / native.

Then a whole decode token: 30 layers of distinct weights (q, k, v, o, gate, up, down)
plus the 8-bit output projection, run back to back as one token would (the weights
cycle through the caches, as in real decode): float, int8 and the default (``auto``:
int8 at 4 bits, float at 8) on 1 and on N threads, vs numpy float32 matvecs;
prefill (M = 33, 128) for the largest 4-bit shape; and SmolLM2's prefill shapes at
M = 96, the exact tiled float path vs the int8 VNNI GEMM.

``--batched M`` (default 16; 0 skips it): a batched decode step's GEMMs, M rows of x
against SmolLM2's merged layer shapes (qkv, o, gate_up at 4 bits, down) and the 8-bit
output layer, ``act="invariant"`` as the server's decode step runs them (the int8 GEMM
over the weights' prepacked tiles where compiled), GMAC/s and the step's total (30 layers
+ the output layer) vs numpy float32 matmuls of the dequantized weights. ``--only-batched``
runs that table alone.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from _timing import isa, median_seconds  # benchmarks/ is the script's directory

import braze as bz
from braze.arrays.quantized import pack
from braze.backends.cpu import qmatmul

LAYERS = 30
LAYER_SHAPES = [("q", 576, 576), ("k", 576, 192), ("v", 576, 192), ("o", 576, 576),
                ("gate", 576, 1536), ("up", 576, 1536), ("down", 1536, 576)]
HEAD = ("lm_head", 576, 49152)


def median_ms(fn: Callable[[], object], repeat: int = 21, warmup: int = 3) -> float:
    return median_seconds(fn, repeat, warmup) * 1e3


def make(rng: np.random.Generator, k: int, n: int, bits: int, gs: int, half: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes = rng.integers(0, 1 << bits, (n, k))
    sdt = np.float16 if half else np.float32
    s = (rng.random((n, k // gs)) * 0.01).astype(sdt)
    b = (-rng.random((n, k // gs)) * 0.05).astype(sdt)
    return pack(codes, bits), s, b


def dequantized(wq: np.ndarray, s: np.ndarray, b: np.ndarray, k: int, bits: int, gs: int
                ) -> np.ndarray:
    """The (N, K) float32 weight the packed one stands for (numpy's side of the tables)."""
    return qmatmul.reference(np.eye(k, dtype=np.float32), wq, s, b, group_size=gs,
                             bits=bits).T.copy()


def packed_bytes(*arrays: np.ndarray) -> int:
    return sum(a.nbytes for a in arrays)


def shapes_table(rng: np.random.Generator, gs: int, half: bool, threads: int,
                 quick: bool) -> None:
    rows = [(name, k, n, 4) for name, k, n in LAYER_SHAPES if name in ("q", "k", "gate", "down")]
    rows.append((HEAD[0], HEAD[1], HEAD[2], 8))
    print(f"M=1, float32 x, group_size={gs}, {'float16' if half else 'float32'} scales, "
          f"{threads} threads, {isa()}, kernel ISA "
          f"{qmatmul.ISA_NAMES[qmatmul.kernel_isa(4, gs, half)]}")
    print(f"{'shape':>22} {'bits':>4} {'native':>8} {'int8':>8} {'bz':>8} {'np f32':>8} "
          f"{'np deq':>8} {'GB/s':>6} {'f32/nat':>7} {'deq/nat':>7}")
    reps = 7 if quick else 21
    for name, k, n, bits in rows:
        wq, s, b = make(rng, k, n, bits, gs, half)
        x = rng.standard_normal((1, k)).astype(np.float32)
        w = dequantized(wq, s, b, k, bits, gs)
        xb, wqb, sb, bb = (bz.asarray(a) for a in (x, wq, s, b))

        def native(x=x, wq=wq, s=s, b=b, bits=bits, act="float") -> np.ndarray:
            return qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=bits,
                                            num_threads=threads, act=act)

        def via_bz(xb=xb, wqb=wqb, sb=sb, bb=bb, bits=bits) -> np.ndarray:
            return np.asarray(bz.quantized_matmul(xb, wqb, sb, bb, group_size=gs, bits=bits))

        t_nat = median_ms(native, reps)
        t_i8 = (f"{median_ms(lambda: native(act='int8'), reps):8.4f}"
                if qmatmul.int8_available(bits, gs, half) else f"{'-':>8}")
        with bz.backend("cpu"):
            t_bz = median_ms(via_bz, reps)
        t_f32 = median_ms(lambda x=x, w=w: x @ w.T, reps)
        t_deq = median_ms(lambda x=x, wq=wq, s=s, b=b, bits=bits: qmatmul.reference(
            x, wq, s, b, group_size=gs, bits=bits), max(3, reps // 3), 1)
        gbs = packed_bytes(wq, s, b) / (t_nat * 1e-3) / 1e9
        print(f"{name + f' {k}x{n}':>22} {bits:>4} {t_nat:8.4f} {t_i8} {t_bz:8.4f} {t_f32:8.4f} "
              f"{t_deq:8.3f} {gbs:6.1f} {t_f32 / t_nat:7.2f} {t_deq / t_nat:7.1f}")


def token(rng: np.random.Generator, gs: int, half: bool, threads: int, quick: bool) -> None:
    layers = LAYERS // 5 if quick else LAYERS
    mats = []
    for _ in range(layers):
        for _, k, n in LAYER_SHAPES:
            mats.append((k, 4, *make(rng, k, n, 4, gs, half)))
    mats.append((HEAD[1], 8, *make(rng, HEAD[1], HEAD[2], 8, gs, half)))
    xs = {k: rng.standard_normal((1, k)).astype(np.float32) for k in (576, 1536)}
    total = packed_bytes(*(a for m in mats for a in m[2:]))

    def run_native(act: str = "float", nt: int = threads) -> None:
        for k, bits, wq, s, b in mats:
            qmatmul.quantized_matmul(xs[k], wq, s, b, group_size=gs, bits=bits,
                                     num_threads=nt, act=act)

    reps = 5 if quick else 11
    acts = ("float", "int8", "auto") if qmatmul.int8_available(4, gs, half) else ("float",)
    per = {(a, nt): median_ms(lambda a=a, nt=nt: run_native(a, nt), reps, 1)
           for nt in sorted({1, threads}) for a in acts}
    t_nat = per["float", threads]
    f32 = [(k, dequantized(wq, s, b, k, bits, gs)) for k, bits, wq, s, b in mats]
    f32_bytes = sum(w.nbytes for _, w in f32)

    def run_f32() -> None:
        for k, w in f32:
            xs[k] @ w.T

    t_f32 = median_ms(run_f32, 5 if quick else 11, 1)
    print(f"\ndecode token ({layers} layers x 7 matvecs + 8-bit lm_head, distinct weights, "
          f"{total / 1e6:.1f} MB packed / {f32_bytes / 1e6:.1f} MB float32):")
    print(f"  native {t_nat:.2f} ms ({total / t_nat / 1e6:.1f} GB/s)   numpy float32 matvecs "
          f"{t_f32:.2f} ms   ratio {t_f32 / t_nat:.2f}")
    for (a, nt), t in per.items():
        print(f"  act={a:<5} {nt} thread{'s' if nt > 1 else ' '}: {t:6.2f} ms per token "
              f"({total / t / 1e6:.1f} GB/s)")
    if quick:
        print(f"  (--quick: {layers} of {LAYERS} layers)")


def prefill(rng: np.random.Generator, gs: int, half: bool, threads: int) -> None:
    k, n = 576, 1536
    wq, s, b = make(rng, k, n, 4, gs, half)
    w = dequantized(wq, s, b, k, 4, gs)
    print(f"\nprefill {k}x{n} 4-bit: {'M':>4} {'native':>8} {'np f32':>8} {'np deq':>8}")
    for m in (4, 33, 128):
        x = rng.standard_normal((m, k)).astype(np.float32)
        t_nat = median_ms(lambda x=x: qmatmul.quantized_matmul(
            x, wq, s, b, group_size=gs, bits=4, num_threads=threads), 11)
        t_f32 = median_ms(lambda x=x: x @ w.T, 11)
        t_deq = median_ms(lambda x=x: qmatmul.reference(x, wq, s, b, group_size=gs, bits=4), 5)
        print(f"{'':>26}{m:>4} {t_nat:8.3f} {t_f32:8.3f} {t_deq:8.3f}")
    prefill_int8(rng, gs, half, threads)


def prefill_int8(rng: np.random.Generator, gs: int, half: bool, threads: int, m: int = 96
                 ) -> None:
    """SmolLM2-135M's prefill shapes (one layer: qkv, o, gate_up, down) at M = 96 rows,
    4 bits: the exact tiled float path vs the int8 VNNI GEMM (``act="int8"``)."""
    if not qmatmul.int8_available(4, gs, half):
        return
    print(f"\nprefill M={m}, 4-bit: {'shape':>12} {'float':>8} {'int8':>8} {'GF/s f':>7} "
          f"{'GF/s i8':>7} {'ratio':>6}")
    tot = {"float": 0.0, "int8": 0.0}
    for k, n in ((576, 960), (576, 576), (576, 3072), (1536, 576)):
        wq, s, b = make(rng, k, n, 4, gs, half)
        x = rng.standard_normal((m, k)).astype(np.float32)
        t = {a: median_ms(lambda a=a, x=x, wq=wq, s=s, b=b: qmatmul.quantized_matmul(
            x, wq, s, b, group_size=gs, bits=4, num_threads=threads, act=a), 11)
            for a in ("float", "int8")}
        for a in t:
            tot[a] += t[a]
        gf = {a: 2 * m * k * n / (t[a] * 1e-3) / 1e9 for a in t}
        print(f"{'':>21}{f'{k}x{n}':>12} {t['float']:8.3f} {t['int8']:8.3f} {gf['float']:7.0f} "
              f"{gf['int8']:7.0f} {t['float'] / t['int8']:6.2f}")
    print(f"{'':>21}{'layer':>12} {tot['float']:8.3f} {tot['int8']:8.3f} {'':>15} "
          f"{tot['float'] / tot['int8']:6.2f}")


BATCHED_SHAPES = [("qkv", 576, 960, 4), ("o", 576, 576, 4), ("gate_up", 576, 3072, 4),
                  ("down", 1536, 576, 4), ("lm_head", 576, 49152, 8)]


def batched(rng: np.random.Generator, gs: int, half: bool, threads: int, m: int,
            quick: bool) -> None:
    """A batched decode step's GEMMs at M rows (``act="invariant"``), vs numpy float32."""
    print(f"\nbatched decode GEMMs, M={m}, act=invariant, {threads} threads, {isa()}: "
          f"{'shape':>16} {'ms':>8} {'GMAC/s':>7} {'np f32':>8} {'ratio':>6}")
    reps = 7 if quick else 21
    step = step_np = 0.0
    for name, k, n, bits in BATCHED_SHAPES:
        wq, s, b = make(rng, k, n, bits, gs, half)
        w = dequantized(wq, s, b, k, bits, gs)
        x = rng.standard_normal((m, k)).astype(np.float32)
        t = median_ms(lambda x=x, wq=wq, s=s, b=b, bits=bits: qmatmul.quantized_matmul(
            x, wq, s, b, group_size=gs, bits=bits, num_threads=threads, act="invariant"), reps)
        t_np = median_ms(lambda x=x, w=w: x @ w.T, reps)
        per = 1 if name == "lm_head" else LAYERS
        step, step_np = step + per * t, step_np + per * t_np
        print(f"{'':>31}{f'{name} {k}x{n}/{bits}b':>24} {t:8.3f} {m * k * n / t / 1e6:7.1f} "
              f"{t_np:8.3f} {t_np / t:6.2f}")
    print(f"{'':>31}{'step (30 layers + head)':>24} {step:8.2f} {'':>7} {step_np:8.2f} "
          f"{step_np / step:6.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, 6 layers per token")
    p.add_argument("--group-size", type=int, default=64, choices=(32, 64, 128))
    p.add_argument("--half", action="store_true", help="float16 scales and biases")
    p.add_argument("--threads", type=int, default=0, help="default: BRAZE_NUM_THREADS / all")
    p.add_argument("--batched", type=int, default=16, help="rows of the batched-decode table "
                   "(0: skip it)")
    p.add_argument("--only-batched", action="store_true", help="the batched-decode table alone")
    a = p.parse_args()
    from braze.backends.cpu import default_num_threads

    threads = a.threads or default_num_threads()
    rng = np.random.default_rng(0)
    if not a.only_batched:
        shapes_table(rng, a.group_size, a.half, threads, a.quick)
        token(rng, a.group_size, a.half, threads, a.quick)
        prefill(rng, a.group_size, a.half, threads)
    if a.batched > 0:
        batched(rng, a.group_size, a.half, threads, a.batched, a.quick)


if __name__ == "__main__":
    main()
