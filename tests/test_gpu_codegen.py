"""CUDA C and MSL generators, checked without a GPU.

Every kernel of the corpus (``tests/kernel_corpus.py``: README workloads over every real
dtype, every elementwise op of the table, casts, random programs) must

* generate CUDA C that compiles through our own NVRTC path (``braze._core.nvrtc_compile``;
  ``nvidia-cuda-nvrtc`` is a test dependency; skipped where it is not installed), and
* generate MSL that type-checks as C++17 against the test-only shim ``tests/mslshim``
  (skipped without a C++ compiler).

Kernels are compiled in batches (each in its own namespace, one NVRTC program or one
compiler run per batch); a failing batch is recompiled kernel by kernel so the failure
names its kernel and carries the compiler's log.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import braze as bz
from braze import _core
from braze.backends.cuda import codegen as cuda_codegen
from braze.backends.cuda import nvrtc
from braze.backends.metal import codegen as metal_codegen
from braze.graph.kernel import Kernel

from .kernel_corpus import corpus

BATCH = 40
SHIM = Path(__file__).parent / "mslshim"


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Code generation does not depend on the active backend: run the module once."""
    yield "none"


def _generated(gen, unsupported: type[Exception]) -> tuple[dict[str, object], list[str]]:
    out, skipped = {}, []
    for k in corpus():
        try:
            g = gen(k)
        except unsupported as e:
            skipped.append(f"{k.name}: {e}")
            continue
        out.setdefault(g.symbol, g)
    return out, skipped


def _batches(items: list, n: int) -> list[list]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def _wrap(prelude: str, sources: list[str]) -> str:
    return prelude + "\n".join(f"namespace bz_k{i} {{\n{s[len(prelude):]}\n}}"
                               for i, s in enumerate(sources))


# ---------------------------------------------------------------- CUDA
needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="nvidia-cuda-nvrtc not installed")


def test_every_corpus_kernel_generates_cuda() -> None:
    gens, skipped = _generated(cuda_codegen.generate, cuda_codegen.Unsupported)
    assert not skipped, skipped[:5]
    assert len(gens) >= 300  # the corpus is representative, not a handful
    modes = {g.mode for g in gens.values()}
    assert modes == {"flat", "nested", "rows"}
    assert any(g.vec > 1 for g in gens.values())  # vectorized contiguous loads exist


@needs_nvrtc
def test_every_corpus_kernel_compiles_with_nvrtc() -> None:
    gens, _ = _generated(cuda_codegen.generate, cuda_codegen.Unsupported)
    prelude = cuda_codegen.PRELUDE
    nvrtc.version()

    def one(batch: list) -> list[str]:
        try:
            _core.nvrtc_compile(_wrap(prelude, [g.source for g in batch]), "batch",
                                nvrtc.DEFAULT_ARCH, False, ["-w"])
            return []
        except RuntimeError:
            errors = []
            for g in batch:
                try:
                    nvrtc.compile_source(g.source, g.symbol, cache=False)
                except nvrtc.NvrtcError as e:
                    errors.append(str(e))
            return errors or ["a batch failed but each kernel compiles alone"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = [e for es in pool.map(one, _batches(list(gens.values()), BATCH)) for e in es]
    assert not errors, f"{len(errors)} kernels failed:\n" + "\n\n".join(errors[:3])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_every_corpus_kernel_compiles_with_nvcc(tmp_path) -> None:
    """The generated CUDA C is plain CUDA, not only NVRTC's dialect: the corpus (one
    translation unit, each kernel in its namespace) and the library kernels compile with
    ``nvcc --ptx`` against the host's headers (the prelude's fixed-width types come from
    <stdint.h> there)."""
    from braze.backends.cuda.library import gemm_kernel
    from braze.backends.cuda.llm import kernel as llm_kernel

    gens, _ = _generated(cuda_codegen.generate, cuda_codegen.Unsupported)
    rms = bz.explain(lambda x: x / bz.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5),
                     bz.asarray(np.ones((4, 64), np.float32))).kernels[0].source("cuda")
    sources = [g.source for g in gens.values()] + [rms] + [gemm_kernel(t).source
                                                           for t in ("float", "double")]
    sources.append(llm_kernel("bz_qmm4_h", 5).source)  # (the file holds every LLM kernel)
    unit = tmp_path / "corpus.cu"
    unit.write_text(_wrap(cuda_codegen.PRELUDE, sources))
    out = subprocess.run(["nvcc", "--ptx", "-arch=sm_80", "-w", "-o", str(tmp_path / "c.ptx"),
                          str(unit)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    ptx = (tmp_path / "c.ptx").read_text()
    assert ptx.count(".entry") >= len(gens)
    assert "bz_sdpa_h_i64" in ptx and "bz_qmm8_f" in ptx


@needs_nvrtc
@pytest.mark.parametrize("make", [
    lambda x: bz.softmax(x, axis=-1),
    lambda x: bz.tanh(x) * 0.5 + bz.sqrt(bz.abs(x)),
    lambda x: bz.argmax(x.astype(bz.float16), axis=0),
    lambda x: (x.T * 2).astype(bz.bfloat16),
], ids=["softmax", "chain", "argmax_f16", "transpose_bf16"])
def test_cubin_for_hopper_through_ptxas(make) -> None:
    """CUBIN (ptxas runs inside NVRTC) for sm_90, the benchmark machine's architecture."""
    x = bz.asarray(np.ones((64, 32), np.float32))
    for k in bz.explain(make, x).kernels:
        g = cuda_codegen.generate(k.kernel)
        image = nvrtc.compile_source(g.source, g.symbol, arch="sm_90", cubin=True, cache=False)
        assert image[:4] == b"\x7fELF"


@needs_nvrtc
def test_nvrtc_errors_carry_the_log_and_the_kernel_name() -> None:
    with pytest.raises(nvrtc.NvrtcError, match=r"bz_broken[\s\S]*float3"):
        nvrtc.compile_source('extern "C" __global__ void k(float* y) { float3 v = y[0]; }',
                             "bz_broken", cache=False)


@needs_nvrtc
def test_ptx_is_cached_on_disk_and_a_corrupt_entry_is_recompiled(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] *= 2.0f; }'
    ptx = nvrtc.compile_source(src, "k")
    (entry,) = tmp_path.glob("k-*.ptx")
    entry.write_bytes(b"garbage")
    assert nvrtc.compile_source(src, "k") == ptx
    assert entry.read_bytes() == ptx


def test_source_is_available_from_explain_on_any_machine() -> None:
    x = bz.asarray(np.ones((8, 16), np.float32))
    k = bz.explain(lambda x: bz.softmax(x, axis=-1), x).kernels[0]
    cuda, metal = k.source("cuda"), k.source("metal")
    params = re.sub(r"bz_[0-9a-f]{16,}", "", cuda.split("__global__")[1].split("bz_args")[0])
    assert "__global__" in cuda and "__shfl_xor_sync" in cuda and "16" not in params
    assert "[[kernel]]" in metal and "simd_shuffle_xor" in metal


def test_cuda_backend_is_listed_only_with_a_device() -> None:
    from braze.backends import cuda

    assert ("cuda" in bz.backends.available()) == cuda.available()
    if not cuda.available():
        with pytest.raises(ValueError, match="not available"):
            bz.backends.get("cuda")


# ---------------------------------------------------------------- Metal
def _cxx() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++") or shutil.which(
        "clang++")


def _msl_check(text: str) -> str:
    cxx = _cxx()
    clang = "clang" in Path(cxx).name
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "k.metal"
        f.write_text(text)
        r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-fno-exceptions", "-fno-rtti",
                            f"-I{SHIM}", "-include", "metal_stdlib",
                            "-Wno-unknown-attributes" if clang else "-Wno-attributes",
                            "-x", "c++", str(f)], capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stderr


@pytest.mark.skipif(_cxx() is None, reason="no C++ compiler")
def test_every_corpus_kernel_generates_msl_that_passes_the_shim() -> None:
    gens, skipped = _generated(metal_codegen.generate, metal_codegen.Unsupported)
    assert all("float64" in s or "buffers" in s for s in skipped), skipped[:5]
    assert len(gens) >= 250
    prelude = metal_codegen.PRELUDE

    def one(batch: list) -> list[str]:
        if not _msl_check(_wrap(prelude, [g.source for g in batch])):
            return []
        return [f"{g.symbol}:\n{err[:3000]}" for g in batch
                if (err := _msl_check(g.source))] or ["batch failed, kernels pass alone"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = [e for es in pool.map(one, _batches(list(gens.values()), BATCH * 2)) for e in es]
    assert not errors, f"{len(errors)} kernels failed:\n" + "\n\n".join(errors[:3])


@pytest.mark.skipif(_cxx() is None, reason="no C++ compiler")
def test_the_shim_rejects_what_metal_rejects() -> None:
    assert "double" in _msl_check("kernel void k(device double* x) { x[0] = 1; }")
    assert _msl_check("float f(float x) { return erf(x); }")
    assert not _msl_check("kernel void k(device float* x) { x[0] = exp(x[1]); }")


def test_metal_kernels_stay_within_the_buffer_limit() -> None:
    for k in corpus():
        try:
            g = metal_codegen.generate(k)
        except metal_codegen.Unsupported:
            continue
        assert len(g.slots) + 1 <= metal_codegen.MAX_BUFFERS


def test_generators_are_pure_and_shape_independent() -> None:
    def kern(n: int) -> Kernel:
        x = bz.asarray(np.ones((n, 2 * n), np.float32))
        return bz.explain(lambda x: bz.softmax(x * 3.0, axis=-1), x).kernels[0].kernel

    a, b = kern(8), kern(64)
    for gen in (cuda_codegen.generate, metal_codegen.generate):
        assert gen(a).source == gen(a).source == gen(b).source


@needs_nvrtc
@pytest.mark.parametrize("ctype", ["float", "double"])
def test_the_device_matmul_kernel_compiles_with_nvrtc(ctype: str) -> None:
    from braze.backends.cuda.library import gemm_kernel

    g = gemm_kernel(ctype)
    assert b".entry " + g.symbol.encode() in nvrtc.compile_source(g.source, g.symbol,
                                                                   cache=False)
    image = nvrtc.compile_source(g.source, g.symbol, arch="sm_90", cubin=True, cache=False)
    assert image[:4] == b"\x7fELF"


@needs_nvrtc
@pytest.mark.parametrize("symbol", ["bz_qmm4_h", "bz_rope_i64", "bz_sdpa_h_i32",
                                    "bz_gather_rows_i32", "bz_copy_slabs"])
def test_the_llm_kernels_compile_with_nvrtc(symbol: str) -> None:
    from braze.backends.cuda.llm import kernel

    ptx = nvrtc.compile_source(kernel(symbol, 1).source, symbol, cache=False).decode()
    assert f".entry {symbol}(" in ptx
