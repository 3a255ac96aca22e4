"""GPU benchmark: chain, softmax and layer norm through the ``cuda`` backend's generated
kernels, device-resident (upload once, launch repeatedly, synchronize), against torch and
cupy when installed. Prints one line per workload. Run by ``benchmarks/gpu.sh``."""

from __future__ import annotations

import time

import numpy as np

import braze as bz
from braze import _core
from braze.backends import cuda


def _time(fn, reps: int = 20) -> float:
    fn()
    _core.cuda_synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        _core.cuda_synchronize()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def bench_braze(make, arrays: list[np.ndarray]) -> tuple[float, int]:
    """Median seconds per launch of the (single) fused kernel of ``make(*arrays)``."""
    be = bz.backends.get("cuda")
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
            _core.cuda_upload(ptr, np.ascontiguousarray(inputs[slot]).reshape(-1).view(np.uint8))
    grid, block = be.launch_config(loaded.gen, k)
    return _time(lambda: _core.cuda_launch(loaded.fn, grid, block, ptrs, loaded.args)), moved


def main() -> None:
    if not cuda.available():
        raise SystemExit(f"no cuda backend here: {cuda._probe()}")
    info = cuda.device_info()
    print(f"device: {info['name']} cc {info['cc']} SMs {info['sms']} driver {info['driver']}")
    rng = np.random.default_rng(0)
    n = 1 << 26
    x1, y1 = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    x2 = rng.standard_normal((8192, 8192), dtype=np.float32)
    w, b = np.ones(8192, np.float32), np.zeros(8192, np.float32)

    def chain(x, y):
        return bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x) + bz.sqrt(bz.abs(y))

    def layer_norm(x, w, b):
        m = bz.mean(x, axis=-1, keepdims=True)
        return (x - m) / bz.sqrt(bz.var(x, axis=-1, keepdims=True) + 1e-5) * w + b

    work = {"chain 2^26": (chain, [x1, y1]),
            "softmax 8192x8192": (lambda x: bz.softmax(x, axis=-1), [x2]),
            "layer norm 8192x8192": (layer_norm, [x2, w, b])}
    try:
        import torch
        torch_ok = torch.cuda.is_available()
    except ImportError:
        torch_ok = False
    try:
        import cupy
    except ImportError:
        cupy = None
    for name, (make, arrays) in work.items():
        t, moved = bench_braze(make, arrays)
        line = f"{name:24s} braze {t * 1e3:8.3f} ms  {moved / t / 1e9:7.1f} GB/s"
        if torch_ok:
            ta = [torch.from_numpy(a).cuda() for a in arrays]
            f = {"chain 2^26": lambda x, y: torch.tanh(x) * 0.5 + torch.sigmoid(y) * x
                 - torch.exp(-x * x) + torch.sqrt(torch.abs(y)),
                 "softmax 8192x8192": lambda x: torch.softmax(x, -1),
                 "layer norm 8192x8192": lambda x, w, b: torch.nn.functional.layer_norm(
                     x, (8192,), w, b)}[name]
            tt = _time(lambda f=f, ta=ta: (f(*ta), torch.cuda.synchronize()))
            line += f" | torch {tt * 1e3:8.3f} ms ({tt / t:4.2f}x)"
        if cupy is not None and name == "chain 2^26":
            ca = [cupy.asarray(a) for a in arrays]
            tc = _time(lambda ca=ca: (cupy.tanh(ca[0]) * 0.5 + 1 / (1 + cupy.exp(-ca[1])) * ca[0]
                                - cupy.exp(-ca[0] * ca[0]) + cupy.sqrt(cupy.abs(ca[1])),
                                cupy.cuda.Device().synchronize()))
            line += f" | cupy {tc * 1e3:8.3f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
