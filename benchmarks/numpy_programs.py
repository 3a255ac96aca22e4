"""NumPy programs as people write them, run with numpy and with braze as a drop-in.

    .venv/bin/python benchmarks/numpy_programs.py [--quick] [--only NAME,...]

Each program is written once against a module ``np`` (numpy, or ``braze`` imported the
way a user swaps it in) and gets its inputs from the harness (float32, made by numpy with
a fixed seed and converted with ``np.asarray``; random draws inside a program use
``rand``, which is ``numpy.random.Generator.random`` or ``braze.random.uniform``).
Every braze result is checked against numpy's (``rtol``/``atol`` per program, stated in
the table; where numpy's float32 answer is itself far from the truth, a cumulative sum
of 4M values, against numpy's on float64 copies of the inputs, within numpy's own error
plus ``atol``) before it is timed. Reported: first-call time (it includes tracing and the
kernel builds it waits for), then how long the kernels it left building in the background
took to finish ("+builds": the harness waits for them, so the later calls do not share
the cores with the C++ compiler), the median of later calls, and the speed-up (numpy
time / braze time; > 1 means braze is faster). A program that fails on braze (a missing
name, an error) is reported as such, never skipped silently.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
from _timing import isa, median_seconds  # benchmarks/ is the script's directory

import braze

# ---------------------------------------------------------------- the programs


def jacobi(np: Any, A: Any, steps: int = 40) -> Any:
    """2-d Jacobi time stepping with in-place slice updates (polybench's jacobi-2d)."""
    B = A.copy()
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return A


def heat_1d(np: Any, u: Any, steps: int = 200) -> Any:
    """Explicit finite differences for u_t = u_xx, fixed ends."""
    r = 0.25
    for _ in range(steps):
        u[1:-1] = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def kmeans(np: Any, X: Any, C: Any, iters: int = 10) -> Any:
    """Lloyd's algorithm: assign by squared distance, move centroids to their means."""
    k = C.shape[0]
    for _ in range(iters):
        d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
        labels = d.argmin(axis=1)
        onehot = (labels[:, None] == np.arange(k)[None, :]).astype(X.dtype)
        counts = onehot.sum(axis=0)
        C = (onehot.T @ X) / np.maximum(counts, 1)[:, None]
    return C


def nbody(np: Any, pos: Any, vel: Any, steps: int = 10) -> Any:
    """All-pairs gravity with softening, leapfrog steps."""
    dt, eps = 0.01, 0.01
    for _ in range(steps):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d ** 2).sum(axis=-1) + eps
        inv = r2 ** -1.5
        acc = (d * inv[:, :, None]).sum(axis=1)
        vel = vel + dt * acc
        pos = pos + dt * vel
    return pos


def monte_carlo_pi(np: Any, n: int, rand: Callable[..., Any]) -> Any:
    """pi from the fraction of uniform points inside the quarter circle."""
    xy = rand((n, 2))
    inside = (xy ** 2).sum(axis=1) <= 1.0
    return 4.0 * inside.mean()


def mandelbrot(np: Any, c_re: Any, c_im: Any, iters: int = 30) -> Any:
    """Escape-time iteration in real arithmetic; counts iterations before |z| > 2."""
    zr = np.zeros_like(c_re)
    zi = np.zeros_like(c_im)
    count = np.zeros_like(c_re)
    for _ in range(iters):
        zr, zi = zr * zr - zi * zi + c_re, 2 * zr * zi + c_im
        alive = zr * zr + zi * zi <= 4.0
        count = count + alive
        zr = np.where(alive, zr, 2.0)
        zi = np.where(alive, zi, 0.0)
    return count


def pairwise_distances(np: Any, X: Any, Y: Any) -> Any:
    """Euclidean distance matrix through broadcasting."""
    return np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(axis=-1))


def moving_average(np: Any, x: Any, w: int = 50) -> Any:
    """Moving average through a cumulative sum."""
    c = np.cumsum(x)
    return (c[w:] - c[:-w]) / w


def game_of_life(np: Any, board: Any, steps: int = 20) -> Any:
    """Conway's game of life on a torus (np.roll)."""
    for _ in range(steps):
        n = sum(np.roll(np.roll(board, i, 0), j, 1)
                for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
        board = ((n == 3) | ((board == 1) & (n == 2))).astype(board.dtype)
    return board


def blur_sobel(np: Any, img: Any) -> Any:
    """A 3x3 box blur then the Sobel gradient magnitude, written with slices."""
    b = (img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:] + img[1:-1, :-2] + img[1:-1, 1:-1]
         + img[1:-1, 2:] + img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]) / 9.0
    gx = (b[:-2, 2:] + 2 * b[1:-1, 2:] + b[2:, 2:]) - (b[:-2, :-2] + 2 * b[1:-1, :-2] + b[2:, :-2])
    gy = (b[2:, :-2] + 2 * b[2:, 1:-1] + b[2:, 2:]) - (b[:-2, :-2] + 2 * b[:-2, 1:-1] + b[:-2, 2:])
    return np.sqrt(gx * gx + gy * gy)


def chained_blurs(np: Any, img: Any, passes: int = 5) -> Any:
    """Five 3x3 blurs left lazy (the recomputation trap of a fusing compiler)."""
    for _ in range(passes):
        img = (img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:] + img[1:-1, :-2] + img[1:-1, 1:-1]
               + img[1:-1, 2:] + img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]) / 9.0
    return img


def linear_regression_gd(np: Any, X: Any, y: Any, iters: int = 100) -> Any:
    """Batch gradient descent on mean squared error."""
    w = np.zeros(X.shape[1], dtype=X.dtype)
    lr = 0.1
    for _ in range(iters):
        grad = X.T @ (X @ w - y) / X.shape[0]
        w = w - lr * grad
    return w


def logistic_regression(np: Any, X: Any, y: Any, iters: int = 100) -> Any:
    """Logistic regression by gradient descent (sigmoid written out)."""
    w = np.zeros(X.shape[1], dtype=X.dtype)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - 0.5 * (X.T @ (p - y)) / X.shape[0]
    return w


def histogram(np: Any, x: Any) -> Any:
    """A 64-bin histogram of normal samples."""
    counts, _ = np.histogram(x, bins=64, range=(-4.0, 4.0))
    return counts


def softmax_rows(np: Any, x: Any) -> Any:
    """Row softmax, the numerically stable way."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def zscore(np: Any, x: Any) -> Any:
    """Standardize the columns of a table."""
    return (x - x.mean(axis=0)) / x.std(axis=0)


def black_scholes(np: Any, S: Any, K: Any, T: Any) -> Any:
    """European call prices; the normal CDF through tanh (no erf in NumPy's namespace)."""
    r, sigma = 0.02, 0.3
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)

    def cdf(z: Any) -> Any:
        return 0.5 * (1.0 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3)))

    return S * cdf(d1) - K * np.exp(-r * T) * cdf(d2)


def polynomial(np: Any, x: Any) -> Any:
    """Horner's rule for a degree-8 polynomial."""
    coeffs = [0.1, -0.4, 0.3, 1.2, -0.7, 0.05, 0.2, -0.1, 1.0]
    acc = np.zeros_like(x)
    for c in coeffs:
        acc = acc * x + c
    return acc


def cosine_similarity(np: Any, A: Any) -> Any:
    """All-pairs cosine similarity of the rows."""
    n = np.sqrt((A * A).sum(axis=1, keepdims=True))
    U = A / n
    return U @ U.T


def power_iteration(np: Any, M: Any, iters: int = 50) -> Any:
    """Dominant eigenvalue by power iteration."""
    v = np.ones(M.shape[0], dtype=M.dtype)
    for _ in range(iters):
        v = M @ v
        v = v / np.sqrt((v * v).sum())
    return (v * (M @ v)).sum()


def random_walk(np: Any, steps: Any) -> Any:
    """Cumulative position of +-1 steps, and its running maximum excursion."""
    pos = np.cumsum(np.where(steps > 0.5, 1.0, -1.0))
    return np.abs(pos).max()


def diagonal_trace(np: Any, a: Any) -> Any:
    """A loop over the diagonal: trace += tanh(a[i, i])."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return trace


def scalar_fill(np: Any, x: Any) -> Any:
    """Scalar reads and writes in a loop: out[i] = running max of x[: i + 1]."""
    out = np.zeros(x.shape[0], dtype=x.dtype)
    m = x[0]
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out


# ---------------------------------------------------------------- the harness
@dataclass
class Program:
    name: str
    fn: Callable[..., Any]
    make: Callable[[numpy.random.Generator, bool], tuple[Any, ...]]  # (rng, quick) -> inputs
    rtol: float = 1e-4
    atol: float = 1e-5
    kwargs: dict[str, Any] | None = None
    # checked against the program run by numpy on float64 copies of the inputs, within
    # numpy's own float32 error plus atol (numpy's float32 answer is not the truth)
    float64_reference: bool = False


def f32(a: Any) -> numpy.ndarray:
    return numpy.asarray(a, dtype=numpy.float32)


PROGRAMS = [
    Program("jacobi_2d", jacobi, lambda r, q: (f32(r.random((200 if q else 500,) * 2)),)),
    Program("heat_1d", heat_1d, lambda r, q: (f32(r.random(100_000 if q else 1_000_000)),)),
    Program("kmeans", kmeans, lambda r, q: (f32(r.standard_normal((5000 if q else 20000, 8))),
                                            f32(r.standard_normal((16, 8)))), rtol=1e-3,
            atol=1e-4),
    Program("nbody", nbody, lambda r, q: (f32(r.standard_normal((256 if q else 1024, 3))),
                                          f32(r.standard_normal((256 if q else 1024, 3)) * 0.1)),
            rtol=1e-3, atol=1e-3),
    Program("monte_carlo_pi", monte_carlo_pi, lambda r, q: (1_000_000 if q else 10_000_000,),
            rtol=0, atol=0.01),
    Program("mandelbrot", mandelbrot, lambda r, q: tuple(
        f32(a) for a in numpy.meshgrid(numpy.linspace(-2, 0.6, 300 if q else 800),
                                       numpy.linspace(-1.2, 1.2, 300 if q else 800))),
            rtol=0, atol=1.0),
    Program("pairwise_distances", pairwise_distances,
            lambda r, q: (f32(r.random((500 if q else 1500, 3))),
                          f32(r.random((500 if q else 1500, 3))))),
    Program("moving_average", moving_average,
            lambda r, q: (f32(r.random(1_000_000 if q else 4_000_000)),), rtol=0, atol=1e-3,
            float64_reference=True),
    Program("game_of_life", game_of_life,
            lambda r, q: ((r.random((256 if q else 512,) * 2) < 0.3).astype(numpy.int8),)),
    Program("blur_sobel", blur_sobel, lambda r, q: (f32(r.random((512 if q else 2048,) * 2)),)),
    Program("chained_blurs", chained_blurs,
            lambda r, q: (f32(r.random((512 if q else 2048,) * 2)),)),
    Program("linear_regression_gd", linear_regression_gd,
            lambda r, q: (f32(r.standard_normal((10_000 if q else 100_000, 16))),
                          f32(r.standard_normal(10_000 if q else 100_000))), rtol=1e-3, atol=1e-4),
    Program("logistic_regression", logistic_regression,
            lambda r, q: (f32(r.standard_normal((10_000 if q else 100_000, 16))),
                          f32(r.random(10_000 if q else 100_000) < 0.5)), rtol=1e-3, atol=1e-4),
    Program("histogram", histogram,
            lambda r, q: (f32(r.standard_normal(1_000_000 if q else 4_000_000)),), rtol=0,
            atol=2),
    Program("softmax_rows", softmax_rows, lambda r, q: (f32(r.standard_normal((2048, 1024))),)),
    Program("zscore", zscore,
            lambda r, q: (f32(r.standard_normal((100_000 if q else 1_000_000, 8))),), rtol=1e-3,
            atol=1e-4),
    Program("black_scholes", black_scholes,
            lambda r, q: (f32(r.uniform(50, 150, 1_000_000 if q else 4_000_000)),
                          f32(r.uniform(50, 150, 1_000_000 if q else 4_000_000)),
                          f32(r.uniform(0.1, 2, 1_000_000 if q else 4_000_000))), rtol=1e-3,
            atol=1e-3),
    Program("polynomial", polynomial, lambda r, q: (f32(r.uniform(-1, 1, 4_000_000)),)),
    Program("cosine_similarity", cosine_similarity,
            lambda r, q: (f32(r.standard_normal((1000 if q else 2000, 64))),), atol=1e-4),
    Program("power_iteration", power_iteration,
            lambda r, q: (f32(r.random((500 if q else 1000,) * 2)),), rtol=1e-3),
    Program("random_walk", random_walk, lambda r, q: (f32(r.random(1_000_000)),), rtol=0,
            atol=0),
    Program("diagonal_trace", diagonal_trace, lambda r, q: (f32(r.random((300, 300))),),
            rtol=1e-4, atol=1e-3),
    Program("scalar_fill", scalar_fill, lambda r, q: (f32(r.random(300 if q else 2000)),)),
]


def _materialize(mod: Any, out: Any) -> Any:
    if mod is braze:
        if isinstance(out, (tuple, list)):
            braze.eval(*[o for o in out if isinstance(o, braze.Array)])
        elif isinstance(out, braze.Array):
            braze.eval(out)
    return out


def _to_numpy(out: Any) -> numpy.ndarray:
    return numpy.asarray(out, dtype=numpy.float64)


def _run(prog: Program, mod: Any, inputs: tuple[Any, ...], seed: int) -> Any:
    args = tuple(mod.asarray(a.copy()) if isinstance(a, numpy.ndarray) else a for a in inputs)
    if prog.fn is monte_carlo_pi:
        if mod is numpy:
            g = numpy.random.default_rng(seed)
            args = (*args, lambda shape: g.random(shape, dtype=numpy.float32))
        else:
            key = braze.random.key(seed)
            args = (*args, lambda shape: braze.random.uniform(shape=shape, key=key))
    return _materialize(mod, prog.fn(mod, *args))


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    return 1e3 * median_seconds(fn, repeat, warmup=0)  # (the first call is timed apart)


def measure(prog: Program, quick: bool, repeat: int) -> dict[str, Any]:
    rng = numpy.random.default_rng(0)
    inputs = prog.make(rng, quick)
    row: dict[str, Any] = {"name": prog.name}
    ref = _run(prog, numpy, inputs, 0)
    row["numpy_ms"] = _median_ms(lambda: _run(prog, numpy, inputs, 0), repeat)
    # OpenBLAS's workers spin ~0.1 s after numpy's last multi-threaded call (its timeout
    # can only be shortened before numpy is imported): let them sleep before braze runs
    time.sleep(0.2)
    try:
        t0 = time.perf_counter()
        got = _run(prog, braze, inputs, 0)
        row["first_ms"] = 1e3 * (time.perf_counter() - t0)
        # kernels the first call handed to the background builder: the timed calls
        # measure the steady state, not g++ sharing the cores (the wait is reported)
        wait = getattr(braze.backends.current(), "wait_for_builds", None)
        t0 = time.perf_counter()
        if wait is not None:
            wait()
        row["builds_ms"] = 1e3 * (time.perf_counter() - t0)
        g, e = _to_numpy(got), _to_numpy(ref)
        atol = prog.atol
        if prog.float64_reference:
            wide = tuple(a.astype(numpy.float64) if isinstance(a, numpy.ndarray) else a
                         for a in inputs)
            exact = _to_numpy(_run(prog, numpy, wide, 0))
            atol += float(numpy.max(numpy.abs(e - exact)))
            e = exact
        if g.shape != e.shape or not numpy.allclose(g, e, rtol=prog.rtol, atol=atol,
                                                    equal_nan=True):
            err = numpy.max(numpy.abs(g - e)) if g.shape == e.shape else f"shape {g.shape}"
            row["error"] = f"wrong answer (max abs diff {err}; rtol {prog.rtol}, atol {atol})"
            return row
        row["braze_ms"] = _median_ms(lambda: _run(prog, braze, inputs, 0), repeat)
        row["speedup"] = row["numpy_ms"] / row["braze_ms"]
    except Exception as exc:  # reported, not hidden: a missing name is a finding
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:110]
        if "--traceback" in sys.argv:
            traceback.print_exc()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--traceback", action="store_true")
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)
    only = {n for n in args.only.split(",") if n}
    print(f"numpy {numpy.__version__} vs braze ({braze.backends.current().name} backend), "
          f"{isa()}, medians of {repeat} calls after the first")
    print(f"{'program':<22} {'numpy ms':>9} {'braze ms':>9} {'speed-up':>8} {'1st call ms':>11} "
          f"{'+builds ms':>10}")
    speedups = []
    for prog in PROGRAMS:
        if only and prog.name not in only:
            continue
        row = measure(prog, args.quick, repeat)
        if "error" in row:
            print(f"{row['name']:<22} {row['numpy_ms']:>9.2f} {'-':>9} {'-':>8} "
                  f"{row.get('first_ms', float('nan')):>11.0f}  {row['error']}")
            continue
        speedups.append(row["speedup"])
        print(f"{row['name']:<22} {row['numpy_ms']:>9.2f} {row['braze_ms']:>9.2f} "
              f"{row['speedup']:>7.2f}x {row['first_ms']:>11.0f} {row['builds_ms']:>10.0f}")
    if speedups:
        gm = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"geometric mean speed-up over {len(speedups)} programs that ran: {gm:.2f}x; "
              f"slower than numpy: {sum(s < 1 for s in speedups)}")


if __name__ == "__main__":
    main()
