"""ONNX models on the CPU: braze (`bz.onnx.load`) against onnxruntime and torch eager.

Models (float32, written once to a temporary directory, the same file for every framework):
  resnet50:   onnx's light ResNet-50 (onnx/backend/test/data/light), its constant-filled
              weights replaced by seeded random values of the same shapes (conv and Gemm
              weights normal, variance gain / fan-in with the gain that keeps the logits
              O(1..10); BN scale / var in [0.5, 1.5], bias / mean in [-0.1, 0.1])
  squeezenet: onnx's light SqueezeNet 1.0, randomized the same way
  bert:       a BERT-like encoder built with onnx.helper: 4 layers, d 256, 4 heads, seq
              128, GELU (erf) MLP 4x, post-norm LayerNormalization, random weights
Reported per model: batch-1 latency (median ms of --runs timed calls after warm-up) and
batch-8 throughput (samples/s) for braze (default cpu backend) and onnxruntime
(ORT_ENABLE_ALL, intra_op_num_threads=2), plus torch eager on the encoder (the same
weights in plain torch code); "vs ORT" is the median over the turns of braze/ORT; then an
ablation of batch-1 latency per braze opt level (0/1/2/3) and per ORT graph optimization
level (DISABLE_ALL/BASIC/EXTENDED/ALL). The frameworks run in worker processes that take
turns (run 1 of each, run 2 of each..., who goes first rotating), so each sees the same
machine noise. Results are checked against ORT's on the batch-1 input: max rel err =
max |braze - ORT| / max |ORT| (1e-4 asked).
Peers (onnxruntime, torch) run under $PEERS_PYTHON (default: this interpreter).

    .venv/bin/python benchmarks/onnx.py [--models resnet50,squeezenet,bert] [--runs 7]
        [--no-ablation] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# this file is named onnx.py: the onnx package must come first on the path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE] + [HERE]
from _timing import Worker  # noqa: E402

MODELS = ["resnet50", "squeezenet", "bert"]
ORT_LEVELS = ("DISABLE_ALL", "ENABLE_BASIC", "ENABLE_EXTENDED", "ENABLE_ALL")
BERT = {"layers": 4, "d": 256, "heads": 4, "seq": 128, "ff": 1024}
RUN_SECONDS = 0.5  # a timed run's least duration


# ---------------------------------------------------------------- models
def _light(name: str, path: str, gain: float, seed: int = 0) -> None:
    """onnx's light model ``name`` with random weights (conv / Gemm weights normal with
    variance gain / fan-in), batch dim symbolic, at ``path``."""
    import onnx
    from onnx import numpy_helper

    src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                       f"light_{name}.onnx")
    m = onnx.load(src)
    g = m.graph
    rng = np.random.default_rng(seed)
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}

    def random(pname: str, shape: tuple[int, ...]) -> np.ndarray:
        if len(shape) >= 2:  # conv / Gemm weights
            fan_in = int(np.prod(shape[1:]))
            return rng.normal(0, np.sqrt(gain / fan_in), shape).astype(np.float32)
        if any(k in pname for k in ("_s_", "riv", "var", "scale")):  # BN scale / variance
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        return rng.uniform(-0.1, 0.1, shape).astype(np.float32)

    nodes, new = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = tuple(int(v) for v in inits[n.input[0]])
            new.append(numpy_helper.from_array(random(n.output[0], shape), n.output[0]))
        else:
            nodes.append(n)
    keep = [numpy_helper.from_array(random(i.name, a.shape), i.name)
            if a.dtype == np.float32 and a.size > 1 else i
            for i, a in ((i, inits[i.name]) for i in g.initializer)]
    for i, t in enumerate(keep):  # a fixed reshape to (1, C) before the classifier
        if inits[t.name].dtype == np.int64 and inits[t.name].tolist()[:1] == [1] \
                and any(n.op_type == "Reshape" and n.input[1] == t.name for n in nodes):
            keep[i] = numpy_helper.from_array(np.array([0, -1], np.int64), t.name)
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    del g.initializer[:]
    g.initializer.extend(t for t in keep + new if t.name in used)
    names = {t.name for t in g.initializer}
    graph_inputs = [i for i in g.input if i.name not in names | set(inits)]  # the data
    del g.input[:]
    g.input.extend(graph_inputs)
    for vi in list(g.input) + list(g.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    m.ir_version = max(m.ir_version, 4)  # initializers that are not inputs: constants
    onnx.checker.check_model(m)
    onnx.save(m, path)


def bert_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """The encoder's weights by name (also what the torch version reads)."""
    rng = np.random.default_rng(seed)
    d, ff = BERT["d"], BERT["ff"]
    w: dict[str, np.ndarray] = {}
    for i in range(BERT["layers"]):
        for name, shape in ((f"l{i}.qkv_w", (d, 3 * d)), (f"l{i}.o_w", (d, d)),
                            (f"l{i}.ff1_w", (d, ff)), (f"l{i}.ff2_w", (ff, d))):
            w[name] = rng.normal(0, 1 / np.sqrt(shape[0]), shape).astype(np.float32)
        for name, n in ((f"l{i}.qkv_b", 3 * d), (f"l{i}.o_b", d), (f"l{i}.ff1_b", ff),
                        (f"l{i}.ff2_b", d), (f"l{i}.ln1_b", d), (f"l{i}.ln2_b", d)):
            w[name] = rng.uniform(-0.1, 0.1, n).astype(np.float32)
        for name in (f"l{i}.ln1_g", f"l{i}.ln2_g"):
            w[name] = rng.uniform(0.8, 1.2, d).astype(np.float32)
    return w


def _bert(path: str) -> None:
    """A post-norm BERT encoder as exporters write it (MatMul + Add, Reshape/Transpose
    heads, Softmax attention, erf GELU, LayerNormalization), opset 17."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    d, h = BERT["d"], BERT["heads"]
    hd = d // h
    w = bert_weights()
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    consts = {"heads_shape": np.array([0, 0, h, hd], np.int64),
              "model_shape": np.array([0, 0, d], np.int64),
              "scale": np.array(1 / np.sqrt(hd), np.float32),
              "sqrt2": np.array(np.sqrt(2.0), np.float32),
              "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32),
              "split": np.array([d, d, d], np.int64)}
    inits += [numpy_helper.from_array(v, k) for k, v in consts.items()]
    nodes = []

    def node(op: str, ins: list[str], out: str, **kw: object) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    x = "x"
    for i in range(BERT["layers"]):
        p = f"l{i}."
        qkv = node("Add", [node("MatMul", [x, p + "qkv_w"], p + "qkv_mm"), p + "qkv_b"],
                   p + "qkv")
        nodes.append(helper.make_node("Split", [qkv, "split"], [p + "q", p + "k", p + "v"],
                                      axis=2, name=p + "split"))
        heads = {}
        for t in "qkv":
            r = node("Reshape", [p + t, "heads_shape"], p + t + "_r")
            perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
            heads[t] = node("Transpose", [r], p + t + "_t", perm=perm)
        s = node("Mul", [node("MatMul", [heads["q"], heads["k"]], p + "qk"), "scale"],
                 p + "qk_s")
        a = node("Softmax", [s], p + "attn", axis=-1)
        ctx = node("MatMul", [a, heads["v"]], p + "ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], p + "ctx_t", perm=[0, 2, 1, 3]),
                               "model_shape"], p + "ctx_r")
        o = node("Add", [node("MatMul", [ctx, p + "o_w"], p + "o_mm"), p + "o_b"], p + "o")
        x = node("LayerNormalization", [node("Add", [o, x], p + "res1"), p + "ln1_g",
                                        p + "ln1_b"], p + "ln1", axis=-1, epsilon=1e-12)
        f = node("Add", [node("MatMul", [x, p + "ff1_w"], p + "ff1_mm"), p + "ff1_b"],
                 p + "ff1")
        erf = node("Erf", [node("Div", [f, "sqrt2"], p + "g_div")], p + "g_erf")
        g = node("Mul", [node("Mul", [f, node("Add", [erf, "one"], p + "g_add")],
                              p + "g_mul"), "half"], p + "gelu")
        f2 = node("Add", [node("MatMul", [g, p + "ff2_w"], p + "ff2_mm"), p + "ff2_b"],
                  p + "ff2")
        x = node("LayerNormalization", [node("Add", [f2, x], p + "res2"), p + "ln2_g",
                                        p + "ln2_b"], p + "ln2", axis=-1, epsilon=1e-12)
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "bert",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", BERT["seq"], d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", BERT["seq"], d])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def write_models(d: str, names: list[str]) -> dict[str, str]:
    paths = {}
    for name in names:
        paths[name] = os.path.join(d, f"{name}.onnx")
        if name == "bert":
            _bert(paths[name])
        else:
            # gains that keep the logits O(1..10) (the softmax neither saturated nor flat)
            _light(name, paths[name], gain={"resnet50": 1.0, "squeezenet": 2.0}[name])
    return paths


def model_input(name: str, batch: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "bert":
        return rng.standard_normal((batch, BERT["seq"], BERT["d"])).astype(np.float32)
    return rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)


# ---------------------------------------------------------------- the frameworks
def _torch_bert() -> object:
    """The encoder in plain torch code (eager), the same weights."""
    import torch as t

    w = {k: t.from_numpy(v) for k, v in bert_weights().items()}
    d, h = BERT["d"], BERT["heads"]
    hd = d // h
    ln = t.nn.functional.layer_norm

    @t.inference_mode()
    def run(x: t.Tensor) -> t.Tensor:
        n, s, _ = x.shape
        for i in range(BERT["layers"]):
            p = f"l{i}."
            qkv = x @ w[p + "qkv_w"] + w[p + "qkv_b"]
            q, k, v = (z.reshape(n, s, h, hd).transpose(1, 2) for z in qkv.split(d, dim=-1))
            a = t.softmax(q @ k.transpose(-1, -2) * (1 / hd ** 0.5), dim=-1)
            ctx = (a @ v).transpose(1, 2).reshape(n, s, d)
            x = ln(ctx @ w[p + "o_w"] + w[p + "o_b"] + x, (d,), w[p + "ln1_g"],
                   w[p + "ln1_b"], 1e-12)
            f = t.nn.functional.gelu(x @ w[p + "ff1_w"] + w[p + "ff1_b"])
            x = ln(f @ w[p + "ff2_w"] + w[p + "ff2_b"] + x, (d,), w[p + "ln2_g"],
                   w[p + "ln2_b"], 1e-12)
        return x
    return run


def make_runner(fw: str, path: str, model: str, threads: int) -> object:
    """A function numpy input -> numpy output for framework config ``fw``:
    braze[:level], ort[:DISABLE_ALL|BASIC|EXTENDED|ALL] or torch."""
    kind, _, level = fw.partition(":")
    if kind == "braze":
        import braze as bz

        m = bz.onnx.load(path, opt_level=int(level) if level else None)
        return lambda x: np.asarray(m(x)[0])
    if kind == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                              f"ORT_{level or 'ENABLE_ALL'}")
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        return lambda x: s.run(None, {name: x})[0]
    if kind == "torch":
        import torch

        torch.set_num_threads(threads)
        if model != "bert":
            raise ValueError("torch eager: only the encoder is written in torch here")
        run = _torch_bert()
        return lambda x: run(torch.from_numpy(x)).numpy()  # type: ignore[operator]
    raise ValueError(f"unknown framework {fw!r}")


def worker(fw: str, path: str, model: str, threads: int, out_dir: str) -> int:
    """Serve timed runs on stdin ("run BATCH" -> {"s": seconds per call}); at start, save
    the batch-1 output for the accuracy check."""
    t0 = time.perf_counter()
    run = make_runner(fw, path, model, threads)
    x1 = model_input(model, 1)
    y = run(x1)
    np.save(os.path.join(out_dir, f"{model}-{fw.replace(':', '_')}.npy"), y)
    first = time.perf_counter() - t0
    xs = {1: x1}
    calls: dict[int, int] = {}
    print(json.dumps({"ready": True, "first_s": first}), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] != "run":
            break
        b = int(parts[1])
        if b not in xs:
            xs[b] = model_input(model, b)
        x = xs[b]
        if b not in calls:  # warm-up (traces this batch), then size a run to RUN_SECONDS
            run(x)
            t1 = time.perf_counter()
            run(x)
            calls[b] = max(1, int(RUN_SECONDS / max(time.perf_counter() - t1, 1e-6)))
        t1 = time.perf_counter()
        for _ in range(calls[b]):
            run(x)
        print(json.dumps({"s": (time.perf_counter() - t1) / calls[b]}), flush=True)
    return 0


class _Worker(Worker):
    """A framework's worker process, warmed up and waiting for its turns."""

    def __init__(self, py: str, fw: str, path: str, model: str, threads: int, out_dir: str,
                 env: dict[str, str]) -> None:
        super().__init__(fw, [py, os.path.abspath(__file__), "--worker", fw, "--path", path,
                              "--model", model, "--threads", str(threads), "--out", out_dir],
                         env)
        self.first_s = self.ready["first_s"] if self.ready else float("nan")

    def close(self) -> None:
        if self.error is None:
            self.send("end")
        self.proc.wait()


def _turns(workers: list[_Worker], batch: int, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {w.fw: [] for w in workers}
    for turn in range(runs):
        k = turn % len(workers)  # who goes first rotates
        for w in workers[k:] + workers[:k]:
            time.sleep(0.2)  # the last worker's spinning thread pool goes idle
            r = w.send(f"run {batch}")
            if r is not None:
                times[w.fw].append(r["s"])
    return times


def _ratio(a: list[float], b: list[float]) -> str:
    pairs = [x / y for x, y in zip(a, b)]
    return f"{statistics.median(pairs):.2f}" if pairs else "-"


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ablation", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.path, args.model, args.threads, args.out)
    from _timing import isa

    peers_py = os.environ.get("PEERS_PYTHON", sys.executable)
    env = dict(os.environ, BRAZE_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    isa_line = subprocess.run("grep -o 'avx512[a-z_]*\\|avx2' /proc/cpuinfo | sort -u | "
                              "tr '\\n' ' '", shell=True, capture_output=True, text=True).stdout
    print(f"ONNX inference, float32, {os.cpu_count()} cpus, {args.threads} threads, {isa()} "
          f"(/proc/cpuinfo: {isa_line.strip()}); median of {args.runs} runs, frameworks "
          f"taking turns")
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.2f} before the run: another process is using the "
              "CPUs, the figures will be noisy")
    names = args.models.split(",")
    with tempfile.TemporaryDirectory() as d:
        paths = write_models(d, names)
        ablation: list[tuple[str, dict[str, float], str]] = []
        for name in names:
            fws = ["braze", "ort"] + (["torch"] if name == "bert" else [])
            workers = [_Worker(sys.executable if fw == "braze" else peers_py, fw, paths[name],
                               name, args.threads, d, env) for fw in fws]
            lat = _turns(workers, 1, args.runs)
            thr = _turns(workers, 8, max(3, args.runs // 2))
            for w in workers:
                w.close()
            ref_path = os.path.join(d, f"{name}-ort.npy")
            ref = np.load(ref_path) if os.path.exists(ref_path) else None
            print(f"\n{name}: batch-1 latency, batch-8 throughput")
            print(f"{'framework':12s} {'ms (b=1)':>9s} {'vs ORT':>7s} {'img/s (b=8)':>12s} "
                  f"{'vs ORT':>7s} {'first s':>8s} {'max rel err':>12s}")
            for w in workers:
                if not lat[w.fw]:
                    print(f"{w.fw:12s} {w.error}")
                    continue
                out = os.path.join(d, f"{name}-{w.fw}.npy")
                err = "-" if ref is None or w.fw == "ort" else \
                    f"{_rel_err(np.load(out), ref):.1e}"
                ms = statistics.median(lat[w.fw]) * 1e3
                ips = 8 / statistics.median(thr[w.fw]) if thr[w.fw] else float("nan")
                print(f"{w.fw:12s} {ms:9.2f} {_ratio(lat[w.fw], lat.get('ort', [])):>7s} "
                      f"{ips:12.1f} {_ratio(thr.get('ort', []), thr[w.fw]):>7s} "
                      f"{w.first_s:8.1f} {err:>12s}")
            if not args.no_ablation:
                cfgs = [f"braze:{lv}" for lv in range(4)] + \
                    [f"ort:{lv}" for lv in ORT_LEVELS]
                workers = [_Worker(sys.executable if fw.startswith("braze") else peers_py, fw,
                                   paths[name], name, args.threads, d, env) for fw in cfgs]
                t = _turns(workers, 1, max(3, args.runs // 2))
                for w in workers:
                    w.close()
                errs = []
                for lv in range(4):
                    out = os.path.join(d, f"{name}-braze_{lv}.npy")
                    if ref is not None and os.path.exists(out):
                        errs.append(_rel_err(np.load(out), ref))
                ablation.append((name, {fw: statistics.median(v) * 1e3 for fw, v in t.items()
                                        if v}, f"{max(errs):.1e}" if errs else "-"))
        if ablation:
            print("\nablation: batch-1 latency in ms per optimization level "
                  "(braze opt_level; ORT graph_optimization_level)")
            print(f"{'model':11s} {'bz 0':>7s} {'bz 1':>7s} {'bz 2':>7s} {'bz 3':>7s} "
                  f"{'ORT off':>8s} {'basic':>7s} {'extended':>8s} {'all':>7s} "
                  f"{'bz err':>8s}")
            for name, ms, err in ablation:
                keys = [f"braze:{lv}" for lv in range(4)] + \
                    [f"ort:{lv}" for lv in ORT_LEVELS]
                cells = [f"{ms[k]:7.2f}" if k in ms else f"{'-':>7s}" for k in keys]
                print(f"{name:11s} {' '.join(cells[:4])} {cells[4]:>8s} {cells[5]} "
                      f"{cells[6]:>8s} {cells[7]} {err:>8s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
