"""braze's deterministic math against the opt-out (``BRAZE_DETERMINISTIC=0``: libmvec) and
numpy, one kernel per function over 2^22 elements (float32 and float64), plus the chain of
benchmarks/cpu.py, a softmax and a sum; medians in ms, 2 threads (the default).

    .venv/bin/python benchmarks/transcendental.py [--quick]

det: the default (braze's own exp, expm1, log, log1p, tanh inline; the C library's scalar
functions for the rest; one summation order). mvec: every function with a libmvec variant
vectorized through it (results then differ from the numpy tier by a few ulp). det/mvec
says what the opt-out buys, per function (above 1: the opt-out is faster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import isa, median_seconds  # benchmarks/ is the script's directory

import braze as bz

NAMES = ["exp", "log", "tanh", "expm1", "log1p", "sin", "cos", "atan", "exp2", "power", "chain",
         "softmax", "sum"]


def _program(name: str, m: Any) -> Callable[..., object]:
    """The workload ``name`` written against the module ``m`` (braze or numpy)."""
    if name == "power":
        return lambda x: m.power(m.abs(x), 2.5)
    if name in ("log", "log1p"):
        return lambda x: getattr(m, name)(m.abs(x))
    if name == "chain":
        return lambda x: m.tanh(x) * 0.5 + 1 / (1 + m.exp(-x)) * x - m.exp(-x * x) \
            + m.sqrt(m.abs(x))
    if name == "softmax":
        def softmax(x: Any) -> Any:  # (braze's has the same steps: max, exp, sum, divide)
            r = m.reshape(x, (1024, -1))
            e = m.exp(r - m.max(r, axis=-1, keepdims=True))
            return e / m.sum(e, axis=-1, keepdims=True)
        return softmax
    if name == "sum":
        return lambda x: m.sum(x * 1.5)
    return lambda x: getattr(m, name)(x * 1.0)


def _time_kernels(repeat: int, n: int) -> dict[str, float]:
    """This process's kernels (its BRAZE_DETERMINISTIC), per function and dtype."""
    out = {}
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = bz.asarray((rng.standard_normal(n) * 2).astype(dtype))
        for name in NAMES:
            f = bz.compile(_program(name, bz))
            out[f"{name} {np.dtype(dtype).name}"] = median_seconds(
                lambda: bz.eval(f(x)), repeat, 2) * 1e3  # noqa: B023 (called at once)
    return out


def _child(mode: str, repeat: int, n: int) -> dict[str, float]:
    """The kernels' times in a new process with BRAZE_DETERMINISTIC for ``mode`` (the
    mode is read when kernels are generated: one process per mode)."""
    env = dict(os.environ, BRAZE_DETERMINISTIC="1" if mode == "det" else "0")
    r = subprocess.run([sys.executable, __file__, "--child", str(repeat), str(n)], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_time_kernels(int(sys.argv[2]), int(sys.argv[3]))))
        return
    quick = "--quick" in sys.argv
    repeat = 3 if quick else 9
    n = 1 << (20 if quick else 22)
    print(f"# braze math: {isa()}; {n} elements, 2 threads, medians of {repeat} (ms)")
    det, mvec = _child("det", repeat, n), _child("mvec", repeat, n)
    print(f"{'function':10} {'dtype':8} {'det':>8} {'mvec':>8} {'numpy':>8} "
          f"{'det/mvec':>9} {'numpy/det':>9}")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(n) * 2).astype(dtype)
        for name in NAMES:
            key = f"{name} {np.dtype(dtype).name}"
            ref = median_seconds(lambda: _program(name, np)(x), repeat, 1) * 1e3  # noqa: B023
            print(f"{name:10} {np.dtype(dtype).name:8} {det[key]:8.2f} {mvec[key]:8.2f} "
                  f"{ref:8.2f} {det[key] / mvec[key]:9.2f} {ref / det[key]:9.2f}")


if __name__ == "__main__":
    main()
