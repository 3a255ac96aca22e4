"""The cuda backend, run end to end on the CPU emulator of the CUDA execution model.

NVRTC (test_gpu_codegen) proves that generated CUDA C compiles; these tests *run* it:
every kernel of the corpus, through :class:`CudaBackend` (its launch configuration,
argument packing, allocator and transfers) with :class:`EmulatedDevice` as the driver,
must match the numpy executor on the same schedule. Device memory starts as 0xFF bytes, so
an element a kernel forgets to write shows. A second launch configuration
stresses what the default one does not reach on 16x16 inputs: grid-stride loops (fewer
blocks than rows or elements) and multi-warp block reductions (3 warps).

Tolerances (relative; absolute = relative x max(largest |reference|, reduction length x
largest |input|), as a sum may cancel to ~0 and round differently in another order):
float64 1e-12, float32 2e-6 (host libm vs
numpy: last-ulp differences, another summation order), float16 1e-3, bfloat16 1e-2;
integers and bools exact; NaNs where the reference has them.
"""

from __future__ import annotations

import contextlib
import runpy
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.backends import cuda
from braze.backends.cpu.build import compiler
from braze.backends.cuda import CudaBackend, codegen
from braze.backends.gpu_emulator import EmulatedDevice, EmulatorError, emulator_source
from braze.backends.gpusource import GpuKernel
from braze.backends.numpy_backend import run_kernel as numpy_run_kernel
from braze.backends.numpy_backend import run_schedule
from braze.graph import dtypes as dt
from braze.graph.compiler import compile_graph

from .helpers import arrays, shapes
from .kernel_corpus import corpus, op_programs, programs

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C++ compiler")

TOL = {dt.float64: 1e-12, dt.float32: 2e-6, dt.float16: 1e-3, dt.bfloat16: 1e-2}


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """The emulated backend is built here, whatever the active backend: run once."""
    yield "none"


@pytest.fixture(scope="module")
def device() -> EmulatedDevice:
    """One emulated device with every corpus kernel built (batches in parallel)."""
    dev = EmulatedDevice()
    gens = list({g.symbol: g for g in map(codegen.generate, corpus())}.values())
    batches = [gens[i:i + 60] for i in range(0, len(gens), 60)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(dev.build, batches))
    return dev


def _max_abs(a: np.ndarray) -> float:
    a = np.abs(a.astype(np.float64)) if a.dtype.kind in "fiu" else np.zeros(0)
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def assert_close(got: np.ndarray, want: np.ndarray, what: str, rtol: float = 0.0,
                 scale: float = 0.0) -> None:
    """``rtol``: at least the result dtype's (a float64 result computed through float32
    intermediates gets float32's); absolute error allowed: rtol x max(|want|, scale)."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype in TOL:
        g, w = got.astype(np.float64), want.astype(np.float64)
        scale = max(scale, _max_abs(want))
        rtol = max(rtol, TOL[want.dtype])
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


class StressedBackend(CudaBackend):
    """At most 3 blocks (grid-stride loops over rows and elements), 96 threads per row
    block (3 warps: the second level of the block reduction sees a partial warp)."""

    def launch_config(self, g, k):
        grid, block = super().launch_config(g, k)
        return min(grid, 3), (96 if g.mode == "rows" else 64)


def _check(backend: CudaBackend, schedule, inputs, label: str = "") -> None:
    """The backend's outputs of ``schedule`` against the numpy executor's."""
    _check_outputs(schedule, inputs, backend.run_schedule(schedule, inputs), label)


def _check_outputs(schedule, inputs, got, label: str = "") -> None:
    want = run_schedule(schedule, inputs)
    names = ", ".join(k.name for k in schedule.kernels)
    rtol = max([TOL.get(ins.dtype, 0.0) for k in schedule.kernels for ins in k.instrs],
               default=0.0)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"{label}output {i} of [{names}]", rtol, _scale(schedule, inputs))


def _check_programs(progs, run_kernel, label: str) -> None:
    """Every program run with ``run_kernel`` (a run_schedule hook) against numpy."""
    with np.errstate(all="ignore"):
        for schedule, inputs in progs:
            got = run_schedule(schedule, inputs, run_kernel=run_kernel)
            _check_outputs(schedule, inputs, got, label)


def _scale(schedule, inputs) -> float:
    """A sum of n terms may lose n ulps of its largest term (summation orders differ)."""
    n = max([int(np.prod(k.shape[len(k.shape) - k.n_red:])) for k in schedule.kernels
             if k.n_red], default=1)
    return n * max([_max_abs(np.asarray(a)) for a in inputs], default=0.0)


@pytest.mark.parametrize("kind", [CudaBackend, StressedBackend], ids=["default", "stressed"])
def test_every_corpus_kernel_runs_and_matches_the_numpy_executor(device, kind) -> None:
    """A backend (so a device pool) per program: device memory starts poisoned, never
    as another program's leftovers."""
    launched = 0
    with np.errstate(all="ignore"):
        for schedule, inputs in programs():
            backend = kind(driver=device)
            _check(backend, schedule, inputs)
            assert backend.stats["numpy"] == 0  # nothing fell back: every kernel emulated
            launched += backend.stats["cuda"]
    assert launched >= len(corpus()) >= 300


def test_the_corpus_reaches_every_shape_of_generated_code(device) -> None:
    gens = [codegen.generate(k) for k in corpus()]
    assert {g.mode for g in gens} == {"flat", "nested", "rows"}
    assert any(g.vec > 1 for g in gens)


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [1, 7, 64, 1001])
def test_vector_path_and_its_scalar_fallback(device, n: int, offset: int) -> None:
    """16-byte vector loads when every view is aligned, element loads otherwise, and the
    tail past the last whole vector."""
    base = np.random.default_rng(n).standard_normal(n + 3).astype(np.float32)
    x = bz.asarray(base)[offset:offset + n]
    schedule, leaves = compile_graph([(bz.exp(x) * 2.0 + x)._node])
    (k,) = schedule.kernels
    assert codegen.generate(k).vec == (4 if n > 1 else 1)  # one element: a stride-0 view
    _check(CudaBackend(driver=device), schedule, [leaf.data for leaf in leaves])


FUNCS = {
    "chain": lambda x, y: bz.tanh(x) * y - bz.sqrt(bz.abs(y)) + 1.0,
    "softmax": lambda x, y: bz.softmax(x + y, axis=-1),
    "sum0": lambda x, y: bz.sum(x * y, axis=0),
    "argmax": lambda x, y: bz.argmax(x - y, axis=-1),
    "transposed": lambda x, y: bz.permute_dims(x, tuple(range(x.ndim))[::-1]) * 3.0,
    "strided": lambda x, y: x[..., ::-2] + y[..., ::-2],
}


@given(data=st.data(), name=st.sampled_from(sorted(FUNCS)),
       dtype=st.sampled_from([dt.float32, dt.float64, dt.int32, dt.float16]))
def test_shapes_views_and_dtypes(device, data, name: str, dtype) -> None:
    """Empty, 0-d, broadcast and non-contiguous inputs through the emulated backend."""
    shape = data.draw(shapes(min_dims=0 if name in ("chain", "transposed") else 1, max_side=9))
    x = data.draw(arrays(dtype, shape, finite=True))
    y = data.draw(arrays(dtype, shape[1:] if len(shape) > 1 and data.draw(st.booleans()) else shape,
                         finite=True))
    fn = FUNCS[name]
    try:
        out = fn(bz.asarray(x), bz.asarray(y))
    except (TypeError, ValueError):
        return  # outside the op's domain (e.g. softmax of int32): nothing to run
    schedule, leaves = compile_graph([out._node])
    backend = CudaBackend(driver=device)
    with np.errstate(all="ignore"):
        _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["numpy"] == 0


def test_values_stay_on_the_device_between_kernels(device) -> None:
    """Inputs cross once, outputs once; intermediates of a multi-kernel program never,
    a matmul's neither (it runs on the device); other library ops' operands do."""
    rng = np.random.default_rng(0)
    x = bz.asarray(rng.standard_normal((64, 300)).astype(np.float32))
    w = bz.asarray(rng.standard_normal(300).astype(np.float32))
    h = bz.softmax(x * w, axis=-1)
    out = bz.sum(h * bz.exp(h - bz.max(h, axis=0)), axis=0)
    schedule, leaves = compile_graph([out._node, h._node])
    assert len(schedule.kernels) >= 2
    backend = CudaBackend(driver=device)
    _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["uploads"] == 2 and backend.stats["downloads"] == 2
    assert backend.stats["cuda"] == len(schedule.kernels)

    y = bz.exp(x) @ bz.reshape(w, (300, 1))  # kernel -> matmul (device) -> kernel
    schedule, leaves = compile_graph([bz.tanh(y)._node])
    backend = CudaBackend(driver=device)
    _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["cuda_library"] == 1
    assert backend.stats["uploads"] == 2 and backend.stats["downloads"] == 1  # x, w; out

    z = bz.sort(bz.exp(x), axis=-1)  # kernel -> sort (host) -> kernel
    schedule, leaves = compile_graph([(z * 2.0)._node])
    backend = CudaBackend(driver=device)
    _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["uploads"] == 2 and backend.stats["downloads"] == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_shape, b_shape", [
    ((5, 7), (7, 3)), ((16, 16), (16, 16)), ((33, 70), (70, 17)), ((1, 300), (300, 49)),
    ((4, 9, 20), (20, 6)), ((4, 9, 20), (4, 20, 6)), ((9, 20), (3, 20, 6)),
    ((20,), (20, 6)), ((9, 20), (20,)), ((20,), (20,)), ((2, 3, 5, 8), (2, 3, 8, 4)),
    ((0, 5), (5, 3)), ((4, 0), (0, 3)),
])
def test_matmul_runs_on_the_device(device, a_shape, b_shape, dtype) -> None:
    """The tiled device matmul: partial tiles, batches (either side broadcast), 1-d
    operands, views, float32/float64; tolerance: rtol x K (another summation order)."""
    rng = np.random.default_rng(len(a_shape) * 10 + a_shape[-1])
    a = bz.asarray(rng.standard_normal(a_shape).astype(dtype))
    b = bz.asarray(rng.standard_normal(b_shape).astype(dtype))
    schedule, leaves = compile_graph([(bz.tanh(a) @ b * 2.0)._node])
    backend = CudaBackend(driver=device)
    inputs = [leaf.data for leaf in leaves]
    (got,), (want,) = backend.run_schedule(schedule, inputs), run_schedule(schedule, inputs)
    k = a_shape[-1]
    rtol = (2e-6 if dtype == np.float32 else 1e-12) * k
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 2 * k)
    assert backend.stats["cuda_library"] == (1 if want.size else 0)
    assert backend.stats["downloads"] <= 1


def test_matmul_the_device_does_not_take_runs_on_the_host(device) -> None:
    """Integer operands, partial batch broadcasting: numpy on the host, same results."""
    rng = np.random.default_rng(0)
    cases = [(rng.integers(-5, 5, (6, 7)).astype(np.int32), rng.integers(-5, 5, (7, 3))
              .astype(np.int32)),
             (rng.standard_normal((2, 1, 4, 5)).astype(np.float32),
              rng.standard_normal((1, 3, 5, 2)).astype(np.float32))]
    for x, y in cases:
        schedule, leaves = compile_graph([(bz.asarray(x) @ bz.asarray(y))._node])
        backend = CudaBackend(driver=device)
        (got,) = backend.run_schedule(schedule, [leaf.data for leaf in leaves])
        np.testing.assert_allclose(got, x @ y, rtol=1e-6)
        assert backend.stats["cuda_library"] == 0


def _kernel(body: str, symbol: str = "bz_0123456789abcdef0123") -> GpuKernel:
    src = codegen.PRELUDE + (f'extern "C" __global__ void {symbol}(float* b0, '
                             f"const bz_args<2> bz_a) {{\n{body}\n}}\n")
    return GpuKernel(src, symbol, (0,), 2, "flat", 1, False)


def _launch(body: str, block: int = 64) -> np.ndarray:
    dev = EmulatedDevice()
    g = _kernel(body)
    handle = dev.load(g, "sm_90")
    ptr = dev.malloc(4 * block)
    dev.launch(handle, 2, block, [ptr], np.zeros(2, np.int64))
    out = np.empty(block, np.float32)
    dev.download(out.view(np.uint8), ptr)
    return out


def test_shared_memory_barriers_and_shuffles_behave_like_a_block() -> None:
    body = """
  __shared__ float s[64];
  const int t = threadIdx.x;
  s[t] = (float)t;
  __syncthreads();
  float v = s[63 - t] + bz_shfl((float)t, 1);  // a partner lane's value
  __syncthreads();
  if (blockIdx.x == 1) b0[t] = v;"""
    out = _launch(body)
    t = np.arange(64)
    np.testing.assert_array_equal(out, (63 - t) + (t ^ 1))


@pytest.mark.parametrize("body, match", [
    ("if (threadIdx.x < 32) __syncthreads();", "deadlock"),
    ("if (threadIdx.x >= 48) return; __syncthreads();", "deadlock|exited"),
    ("if (threadIdx.x % 32 >= 16) return; bz_shfl(1.0f, 1);", "exited"),
])
def test_barrier_misuse_is_an_error_not_a_hang(body: str, match: str) -> None:
    with pytest.raises(EmulatorError, match=match):
        _launch(body)


def test_bad_launch_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="target must be"):
        EmulatedDevice(target="opencl")
    dev = EmulatedDevice()
    handle = dev.load(_kernel(""), "sm_90")
    with pytest.raises(EmulatorError, match="multiple of 32"):
        dev.launch(handle, 1, 48, [dev.malloc(4)], np.zeros(2, np.int64))


def test_a_kernel_that_does_not_build_falls_back_with_one_warning(monkeypatch) -> None:
    """The backend's fallback path: a kernel the device cannot build runs with numpy,
    after one warning naming it, however often it comes back."""
    real = cuda.generate

    def broken(k):
        g = real(k)
        return GpuKernel(g.source.replace("{", "{ not C++;", 1) if "__global__" in g.source
                         else g.source, g.symbol, g.slots, g.n_args, g.mode, g.vec, g.empty)

    monkeypatch.setattr(cuda, "generate", broken)
    backend = CudaBackend(driver=EmulatedDevice())
    x = bz.asarray(np.arange(10, dtype=np.float32))
    schedule, leaves = compile_graph([(bz.exp(x) + 1.0)._node])
    (k,) = schedule.kernels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            out, = backend.run_schedule(schedule, [leaf.data for leaf in leaves])
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and k.name in msgs[0]
    np.testing.assert_allclose(out, np.exp(np.arange(10, dtype=np.float32)) + 1, rtol=2e-6)
    assert backend.stats["numpy"] == 3 and backend.stats["cuda"] == 0


def test_emulator_source_keeps_each_kernel_in_its_namespace() -> None:
    gens = [codegen.generate(k) for k in corpus()[:3]]
    src = emulator_source(gens, codegen.PRELUDE)
    assert src.count(codegen.PRELUDE) == 1
    for g in gens:
        assert f"bz_emu_launch_{g.symbol}" in src and g.source[len(codegen.PRELUDE):] in src


def test_the_gpu_benchmark_script_runs_on_the_emulator(capsys) -> None:
    """benchmarks/gpu.py has never met a GPU: its logic (explain, load, device buffers,
    launch, result check against numpy) runs here on small sizes."""
    gpu = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "gpu.py"))
    gpu["main"](["--emulate"])
    out = capsys.readouterr().out
    assert "emulator" in out
    assert all(w in out for w in ("chain 4096", "softmax 64x64", "layer norm 64x64",
                                  "matmul 64x64"))
    assert "SmolLM2-135M q4: not on the emulator" in out


# ---------------------------------------------------------------- Metal
def _metal_runner(dev: EmulatedDevice, stats: dict[str, int]):
    """A ``run_kernel`` for run_schedule: the kernel's MSL on the emulator, over the host
    buffers (unified memory), launched with the mlx backend's geometry; output buffers
    poisoned first. Kernels the Metal path does not take (float64, > 23 buffers) run
    with numpy and are counted."""
    from braze.backends.csource import kernel_args
    from braze.backends.metal import codegen as metal_codegen
    from braze.backends.mlx.metal import _launch

    def run(k, bufs) -> None:
        try:
            g = metal_codegen.generate(k)
        except metal_codegen.Unsupported:
            stats["numpy"] += 1
            numpy_run_kernel(k, bufs)
            return
        loaded = [bufs[ld.slot] for ld in k.loads]
        for store in k.stores:
            out = bufs[store.slot]
            if out.size == store.view.size and not any(np.shares_memory(out, a) for a in loaded):
                out.reshape(-1).view(np.uint8)[:] = 255
        held = [b if b.flags.c_contiguous else np.array(b, order="C")
                for b in (bufs[s] for s in g.slots)]
        assert all(bufs[st.slot] is held[g.slots.index(st.slot)] for st in k.stores)
        if not g.empty:
            groups, threads = _launch(g.mode, k)
            dev.launch(dev.load(g, "metal"), groups, threads, [a.ctypes.data for a in held],
                       kernel_args(k))
        stats["metal"] += 1

    return run


@pytest.fixture(scope="module")
def metal_device() -> EmulatedDevice:
    from braze.backends.metal import codegen as metal_codegen

    dev = EmulatedDevice(target="metal")
    gens = {}
    for k in corpus():
        with contextlib.suppress(metal_codegen.Unsupported):
            g = metal_codegen.generate(k)
            gens[g.symbol] = g
    batches = [list(gens.values())[i:i + 60] for i in range(0, len(gens), 60)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(dev.build, batches))
    return dev


@pytest.mark.parametrize("which", ["corpus", "ops"])
def test_every_metal_corpus_kernel_runs_and_matches_the_numpy_executor(metal_device,
                                                                        which) -> None:
    """The MSL generator's kernels (its own helpers: expm1, log1p, hypot, nextafter,
    64-bit shuffles as two 32-bit ones) computed, not only type-checked: the corpus, and
    every elementwise op alone (with zeros, infinities, NaN, tiny values)."""
    stats = {"metal": 0, "numpy": 0}
    run = _metal_runner(metal_device, stats)
    _check_programs(programs() if which == "corpus" else op_programs(), run, "metal ")
    assert stats["metal"] >= 350 if which == "corpus" else stats["metal"] >= 300, stats


def _mlx_form(k):
    """(GpuKernel of the kernel as MLX's metal_kernel assembles it from metal_spec, spec),
    or None where the mlx backend does not take the kernel as Metal."""
    from braze.backends.metal import codegen as metal_codegen
    from braze.backends.mlx.metal import Unsupported as NotMetal
    from braze.backends.mlx.metal import metal_spec

    from .test_mlx_backend import _as_mlx_writes_it

    try:
        spec = metal_spec(k)
    except NotMetal:
        return None
    prelude = metal_codegen.PRELUDE
    source = prelude + spec.header[len(prelude):] + _as_mlx_writes_it(spec, k)
    return GpuKernel(source, spec.name, spec.input_slots + spec.output_slots, len(spec.args),
                     "flat", 1, False), spec


def test_the_mlx_metal_kernel_form_runs_and_matches_the_numpy_executor() -> None:
    """What runs on a Mac: metal_spec's split of the kernel (header, rebinding lines,
    inputs/outputs in MLX's order, grid in threads) under the signature MLX writes --
    executed, with fresh poisoned outputs as MLX allocates them, then copied back as
    run_metal does."""
    dev = EmulatedDevice(target="metal")
    forms = {}
    for k in corpus():
        f = _mlx_form(k)
        if f is not None:
            forms[f[0].symbol] = f[0]
    batches = [list(forms.values())[i:i + 60] for i in range(0, len(forms), 60)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(dev.build, batches))
    stats = {"metal": 0, "numpy": 0}

    def run(k, bufs) -> None:
        f = _mlx_form(k)
        if f is None:
            stats["numpy"] += 1
            numpy_run_kernel(k, bufs)
            return
        g, spec = f
        ins = [np.ascontiguousarray(bufs[s]).reshape(-1) for s in spec.input_slots]
        dsts = [bufs[s] for s in spec.output_slots]
        outs = [np.full(max(1, d.size) * d.itemsize, 255, np.uint8).view(d.dtype) for d in dsts]
        groups = spec.grid[0] // spec.threadgroup[0]
        assert groups * spec.threadgroup[0] == spec.grid[0]
        dev.launch(dev.load(g, "metal"), groups, spec.threadgroup[0],
                   [a.ctypes.data for a in ins + outs], spec.args)
        for d, o in zip(dsts, outs):
            if d.size:
                np.copyto(d.reshape(-1), o[:d.size], casting="no")
        stats["metal"] += 1

    _check_programs(programs(), run, "MLX-form ")
    assert stats["metal"] >= 200, stats


def test_outputs_that_are_views_of_device_values(device) -> None:
    """A reshape of a kernel's result is a pointer into its device buffer (read back as
    such); a transpose (strided) is made on the host; an input returned as is."""
    x = bz.asarray(np.random.default_rng(3).standard_normal((6, 10)).astype(np.float32))
    y = bz.exp(x) + 1.0
    outs = [bz.reshape(y, (-1,))[7:33], bz.permute_dims(y, (1, 0)), x, y * 2.0]
    schedule, leaves = compile_graph([o._node for o in outs])
    backend = CudaBackend(driver=device)
    _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["numpy"] == 0 and backend.stats["cuda"] >= 1


def test_matmul_of_a_row_slice_of_a_device_value(device) -> None:
    """A contiguous row slice (a pointer with an offset into the device buffer) as a
    matmul operand: no crossing to the host."""
    rng = np.random.default_rng(4)
    x = bz.asarray(rng.standard_normal((9, 20)).astype(np.float32))
    w = bz.asarray(rng.standard_normal((20, 7)).astype(np.float32))
    schedule, leaves = compile_graph([(bz.tanh(bz.exp(x * 0.1)[2:6] @ w))._node])
    backend = CudaBackend(driver=device)
    _check(backend, schedule, [leaf.data for leaf in leaves])
    assert backend.stats["cuda_library"] == 1 and backend.stats["downloads"] == 1
