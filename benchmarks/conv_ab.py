"""A/B of the convolution and pool kernels: a git revision's ``conv.cc``, ``pool.cc`` and
``taps.h`` against the working copy's, each in its own process running an ONNX model of
``benchmarks/onnx.py``, the two taking turns (this host's speed drifts by more than the
changes one measures: only interleaved turns compare).

    .venv/bin/python benchmarks/conv_ab.py --rev HEAD~1 --models squeezenet,resnet50

Prints per model the median batch-1 latency of each side and the median over the turns of
new / rev with its quartiles; the working copy's kernels must give the same bits (checked).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Worker, isa  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "backends" / "cpu" / "kernels"
SUFFIX = "_ab_rev"  # the revision's copies next to the working files (built from there)

CHILD = r"""
import hashlib, json, os, sys, time, importlib.util
spec = importlib.util.spec_from_file_location("onnxbench", sys.argv[2])
ob = importlib.util.module_from_spec(spec); spec.loader.exec_module(ob)
import numpy as np, braze as bz
from braze.backends.cpu import conv, pooling
from braze.backends.cpu.library import file_kernel
if os.environ["CONV_AB_SIDE"] == "rev":
    s = sys.argv[3]
    conv._KERNELS = file_kernel("braze.backends.cpu", f"kernels/conv{s}.cc", "bz_conv_f32")[1]
    pooling._KERNELS = file_kernel("braze.backends.cpu", f"kernels/pool{s}.cc", "bz_pool_f32")[1]
model = sys.argv[1]
path = ob.write_models(sys.argv[4], [model])[model]
f = bz.onnx.load(path); x = ob.model_input(model, 1)
for _ in range(10): np.asarray(f(x)[0])
print(json.dumps({"sha": hashlib.sha256(np.asarray(f(x)[0]).tobytes()).hexdigest()}), flush=True)
for line in sys.stdin:
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < 0.5:
        np.asarray(f(x)[0]); n += 1
    print(json.dumps({"ms": (time.perf_counter() - t) / n * 1e3}), flush=True)
"""


def _write_rev(rev: str) -> list[Path]:
    def show(name: str) -> str:
        return subprocess.check_output(["git", "-C", str(ROOT), "show",
                                        f"{rev}:backends/cpu/kernels/{name}"], text=True)

    made = [KERNELS / f"taps{SUFFIX}.h"]
    made[0].write_text(show("taps.h"))
    for name in ("conv", "pool"):
        p = KERNELS / f"{name}{SUFFIX}.cc"
        p.write_text(show(f"{name}.cc").replace('"taps.h"', f'"taps{SUFFIX}.h"'))
        made.append(p)
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="HEAD", help="the git revision to compare with")
    ap.add_argument("--models", default="squeezenet", help="comma-separated (see onnx.py)")
    ap.add_argument("--turns", type=int, default=15)
    ap.add_argument("--model-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                        "braze-onnx-models"))
    args = ap.parse_args()
    print(f"conv/pool kernels {args.rev} vs the working copy, {isa()}, {args.turns} turns")
    os.makedirs(args.model_dir, exist_ok=True)
    made = _write_rev(args.rev)
    try:
        for model in args.models.split(","):
            argv = [sys.executable, "-c", CHILD, model, str(ROOT / "benchmarks" / "onnx.py"),
                    SUFFIX, args.model_dir]
            ws = {side: Worker(side, argv, dict(os.environ, CONV_AB_SIDE=side))
                  for side in ("rev", "new")}
            failed = [f"{s}: {w.error}" for s, w in ws.items() if w.error]
            if not failed and ws["rev"].ready != ws["new"].ready:
                failed = ["the two kernels give different bits"]
            res: dict[str, list[float]] = {"rev": [], "new": []}
            for t in range(args.turns if not failed else 0):
                for side in (("rev", "new") if t % 2 == 0 else ("new", "rev")):
                    got = ws[side].send("go")
                    if got is None:
                        failed.append(f"{side}: {ws[side].error}")
                        break
                    res[side].append(got["ms"])
            for w in ws.values():
                if w.error is None and w.proc.stdin is not None:
                    w.proc.stdin.close()
                w.proc.wait()
            if failed or not res["new"]:
                print(f"{model}: {'; '.join(failed)}")
                continue
            ratios = [b / a for a, b in zip(res["rev"], res["new"])]
            q = statistics.quantiles(ratios) if len(ratios) > 1 else ratios * 3
            print(f"{model}: rev {statistics.median(res['rev']):.3f} ms, new "
                  f"{statistics.median(res['new']):.3f} ms, new/rev {statistics.median(ratios):.3f}"
                  f" (quartiles {q[0]:.3f}, {q[2]:.3f})")
    finally:
        for p in made:
            p.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
