"""The ``cpu`` backend (generated C++) side by side with numpy (and torch if installed).

    .venv/bin/python benchmarks/cpu.py [--quick]

Workloads (float32; medians in ms; GB/s = bytes of the inputs read + outputs written
once, divided by the time; ratio = numpy time / this time):

* chain: ``tanh(x)*0.5 + 1/(1+exp(-y))*x - exp(-x*x) + sqrt(abs(y))`` at 2^24;
* softmax and layer norm (weight, bias) over the rows of 4096x4096;
* matmul 2048x2048 (a library step: numpy/BLAS on both);
* a ``bz.compile``d 3-op call on 16 floats (per-call overhead, us);
* compile: cold build of the chain kernel (empty cache dir) and the warm-cache time
  in a new process (import, trace, load the cached kernel, run once).

Targets from the issue on the 2-core dev machine: chain <= 14 ms (numpy ~135-200 ms),
softmax <= 8 ms, layer norm <= 8 ms.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
from _timing import isa, median_seconds  # benchmarks/ is the script's directory

import braze as bz

try:  # optional
    import torch  # type: ignore[import-not-found]
except Exception:  # pragma: no cover - torch is optional
    torch = None


def median_ms(fn: Callable[[], object], repeat: int = 11, warmup: int = 2) -> float:
    return median_seconds(fn, repeat, warmup) * 1e3


def chain(m, x, y):  # type: ignore[no-untyped-def]
    return m.tanh(x) * 0.5 + 1 / (1 + m.exp(-y)) * x - m.exp(-x * x) + m.sqrt(m.abs(y))


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w + b


def bz_layer_norm(x, w, b):  # type: ignore[no-untyped-def]
    m = bz.mean(x, axis=-1, keepdims=True)
    v = bz.mean((x - m) * (x - m), axis=-1, keepdims=True)
    return (x - m) / bz.sqrt(v + 1e-5) * w + b


_WARM = """
import time, numpy as np
t0 = time.perf_counter()
import braze as bz
x = bz.asarray(np.linspace(-1, 1, 1 << 16, dtype=np.float32))
y = bz.asarray(np.linspace(-2, 2, 1 << 16, dtype=np.float32))
out = bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))
bz.eval(out)
t1 = time.perf_counter()
print((t1 - t0) * 1e3)
"""


def compile_times() -> tuple[float, float, float]:
    """(cold build ms of the chain kernel, new-process ms with a warm cache, same cold)."""
    from braze.backends.cpu import build
    from braze.backends.cpu.codegen import generate
    from braze.graph.compiler import compile_graph

    x = bz.asarray(np.ones(1 << 16, np.float32))
    s, _ = compile_graph([chain(bz, x, x * 2)._node])
    g = generate(s.kernels[0])
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("BRAZE_CACHE_DIR")
        os.environ["BRAZE_CACHE_DIR"] = d
        try:
            t0 = time.perf_counter()
            build.build(g.source, g.symbol)
            cold = (time.perf_counter() - t0) * 1e3
        finally:
            if old is None:
                del os.environ["BRAZE_CACHE_DIR"]
            else:
                os.environ["BRAZE_CACHE_DIR"] = old
        env = dict(os.environ, BRAZE_CACHE_DIR=d, BRAZE_BACKEND="cpu")
        new_cold = float(subprocess.run([sys.executable, "-c", _WARM], env=env, check=True,
                                        capture_output=True, text=True).stdout)
        warm = statistics.median(
            float(subprocess.run([sys.executable, "-c", _WARM], env=env, check=True,
                                 capture_output=True, text=True).stdout) for _ in range(3))
    return cold, warm, new_cold


def row(name: str, t_np: float, t_bz: float, nbytes: int, t_torch: float | None) -> str:
    gbs = nbytes / (t_bz * 1e-3) / 1e9
    tt = f"{t_torch:9.2f}" if t_torch is not None else "        -"
    return f"{name:<28}{t_np:9.2f}{t_bz:9.2f}{tt}{gbs:9.1f}{t_np / t_bz:8.1f}x"


def main() -> None:
    quick = "--quick" in sys.argv
    rep = 5 if quick else 11
    bz.set_backend("cpu")
    rng = np.random.default_rng(0)
    print(f"braze cpu backend: {bz.backends.current().name}, {isa()}, threads "
          f"{bz.backends.current().num_threads}, numpy {np.__version__}"
          + (f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""))
    print(f"{'workload':<28}{'numpy':>9}{'braze':>9}{'torch':>9}{'GB/s':>9}{'ratio':>9}")
    print("-" * 73)

    n = 1 << 24
    xn = rng.standard_normal(n).astype(np.float32)
    yn = rng.standard_normal(n).astype(np.float32)
    xb, yb = bz.asarray(xn), bz.asarray(yn)
    with np.errstate(all="ignore"):
        t_np = median_ms(lambda: chain(np, xn, yn), rep)
    t_bz = median_ms(lambda: bz.eval(chain(bz, xb, yb)), rep)
    t_t = None
    if torch is not None:
        xt, yt = torch.from_numpy(xn), torch.from_numpy(yn)
        t_t = median_ms(lambda: chain(torch, xt, yt), rep)
    print(row("chain 2^24", t_np, t_bz, 3 * 4 * n, t_t))

    xn = rng.standard_normal((4096, 4096)).astype(np.float32)
    xb = bz.asarray(xn)
    t_np = median_ms(lambda: np_softmax(xn), rep)
    t_bz = median_ms(lambda: bz.eval(bz.softmax(xb, axis=-1)), rep)
    t_t = None
    if torch is not None:
        xt = torch.from_numpy(xn)
        t_t = median_ms(lambda: torch.softmax(xt, dim=-1), rep)
    print(row("softmax 4096x4096", t_np, t_bz, 2 * 4 * xn.size, t_t))

    wn = rng.standard_normal(4096).astype(np.float32)
    bn = rng.standard_normal(4096).astype(np.float32)
    wb, bb = bz.asarray(wn), bz.asarray(bn)
    t_np = median_ms(lambda: np_layer_norm(xn, wn, bn), rep)
    t_bz = median_ms(lambda: bz.eval(bz_layer_norm(xb, wb, bb)), rep)
    t_t = None
    if torch is not None:
        wt, bt = torch.from_numpy(wn), torch.from_numpy(bn)
        t_t = median_ms(lambda: torch.nn.functional.layer_norm(xt, (4096,), wt, bt, 1e-5), rep)
    print(row("layer norm 4096x4096", t_np, t_bz, 2 * 4 * xn.size, t_t))

    an = rng.standard_normal((2048, 2048)).astype(np.float32)
    ab = bz.asarray(an)
    t_np = median_ms(lambda: an @ an, rep)
    t_bz = median_ms(lambda: bz.eval(ab @ ab), rep)
    t_t = None
    if torch is not None:
        at = torch.from_numpy(an)
        t_t = median_ms(lambda: at @ at, rep)
    print(row("matmul 2048^2 (BLAS)", t_np, t_bz, 3 * 4 * an.size, t_t))

    @bz.compile
    def small(x, y):  # type: ignore[no-untyped-def]
        return x * y + 1.0

    sx = bz.asarray(np.ones(16, np.float32))
    sy = bz.asarray(np.full(16, 2.0, np.float32))
    sxn, syn = np.ones(16, np.float32), np.full(16, 2.0, np.float32)
    k = 20000 if not quick else 2000
    t_np = median_ms(lambda: [sxn * syn + 1.0 for _ in range(k)], 5) / k * 1e3
    t_bz = median_ms(lambda: [bz.eval(small(sx, sy)) for _ in range(k)], 5) / k * 1e3
    print(f"{'compiled 3-op, 16 floats':<28}{t_np:7.2f}us{t_bz:7.2f}us"
          f"{'':9}{'':9}{t_np / t_bz:8.2f}x")

    cold, warm, new_cold = compile_times()
    print(f"{'chain kernel cold build':<28}{'':9}{cold:9.1f} ms")
    print(f"{'new process, warm cache':<28}{'':9}{warm:9.1f} ms  (cold cache: {new_cold:.1f} ms;"
          " import + trace + load + run)")


if __name__ == "__main__":
    main()
