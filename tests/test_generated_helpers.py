"""The generated kernels' helper headers (``backends/kernels/``): written once for C++, CUDA C
and MSL in the vocabulary of each dialect's prelude (``{cpu,cuda,metal}_prelude.h``).

Each header compiles on its own after each dialect's prelude (C++: the host compiler, with
the native ``_Float16`` path and without it; CUDA: ``nvcc`` where it is installed, and
NVRTC; MSL: the test-only shim ``tests/mslshim`` and the GPU emulator's Metal shim), its
templates instantiated for every type the generators call them with; every header is
``clang-format``-clean; every ``bz_`` helper an op record names is defined by a header; a
kernel gets only the headers of the helper groups it uses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import braze as bz
from braze.backends import csource, kernel_sources
from braze.backends.cpu import build
from braze.backends.cpu import codegen as cpu_codegen
from braze.backends.cuda import codegen as cuda_codegen
from braze.backends.cuda import nvrtc
from braze.backends.metal import codegen as metal_codegen
from braze.graph.ops import OPS

from .helpers import assert_clang_format_clean

ROOT = Path(__file__).resolve().parents[1]
KERNELS = Path(csource.__file__).resolve().parent / "kernels"
SHIM = Path(__file__).parent / "mslshim"
EMU = KERNELS.parent / "emulator_kernels"
PRELUDES = ("cpu_prelude.h", "cuda_prelude.h", "metal_prelude.h")
PRELUDE_HEADERS = ("prelude.h",)  # included by every prelude (compiled with each of them)
CPU_PRELUDE_HEADERS = ("cpu_bits.h", "bzmath.h")  # included by cpu_prelude.h (and vmath.cpp)
SHARED = ("half.h", "bfloat16.h", "bitcast.h", "int_ops.h", "float_ops.h", "random.h")
HEADERS = {"cpu": SHARED + ("stream.h",), "cuda": SHARED + ("reduce.h",),
           "metal": SHARED + ("reduce.h",)}

_PASS = "cpu" if "cpu" in bz.backends.available() else "numpy"


@pytest.fixture(autouse=True)
def _once(backend_name: str) -> None:
    if backend_name != _PASS:
        pytest.skip(f"backend-independent: runs once, in the {_PASS} backend's module pass")


def _use(dialect: str, header: str) -> str:
    """Instantiations of the templates of ``header`` for the types the generators use."""
    floats = ["float"] + (["double"] if dialect != "metal" else [])
    if header == "int_ops.h":
        return "".join(
            f"BZ_FN {t} bz_use_{t}({t} a, {t} b) {{ return bz_idiv<{t}>(a, b) + "
            f"bz_irem<{t}>(a, b) + bz_ipow<{t}, {u}>(a, b) + bz_shl<{t}, {u}>(a, b) + "
            f"bz_shr<{t}>(a, b); }}\n"
            for t, u in (("int8_t", "uint32_t"), ("int32_t", "uint32_t"),
                         ("int64_t", "uint64_t"), ("uint16_t", "uint32_t")))
    if header == "float_ops.h":
        return "".join(
            f"BZ_FN {t} bz_use_{t}({t} a, {t} b) {{ return bz_sigmoid(a) + bz_fsign(a) + "
            f"(bz_signbit(a) ? a : b) + bz_fmax(a, b) + bz_fmin(a, b) + bz_logaddexp(a, b) + "
            f"bz_floordiv(a, b) + bz_pymod(a, b); }}\n" for t in floats)
    if header == "bitcast.h":
        return "BZ_FN uint32_t bz_use(float x) { return bz_bc<uint32_t>(x); }\n"
    if header == "reduce.h":
        return "".join(
            f"BZ_FN {t} bz_use_{t}(BZ_SHARED {t}* sm, BZ_SHARED int64_t* si, {t} v) {{\n"
            f"  return bz_block_reduce<{t}>(v, ({t})0, bz_add_op(), sm, 0, 32) + "
            f"bz_block_reduce<{t}>(v, ({t})0, bz_fmax_op(), sm, 0, 32) + "
            f"(float)bz_block_arg<{t}, true>(v, 0, sm, si, 0, 32);\n}}\n" for t in floats)
    if header == "stream.h":
        return "void bz_use(float* d, const float* s) { bz_put(d, s, 100, true); }\n"
    return ""


def _text(dialect: str, header: str) -> str:
    return (csource.prelude(dialect) + kernel_sources.read("braze.backends", f"kernels/{header}")
            + _use(dialect, header))


def _compiler() -> list[str]:
    cmd = build.compiler()
    if cmd is None:
        pytest.skip("no C++ compiler")
    return cmd


def _run(argv: list[str], text: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / f"h{suffix}"
        f.write_text(text)
        r = subprocess.run([*argv, str(f)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr[-4000:]}"


CPU_CASES = [(h, soft) for h in HEADERS["cpu"] for soft in (False, True)]


@pytest.mark.parametrize("header,soft", CPU_CASES,
                         ids=[f"{h}-{'soft' if s else 'native'}" for h, s in CPU_CASES])
def test_header_compiles_after_the_cpu_prelude(header: str, soft: bool) -> None:
    """As the generated C++ is built (backends/cpu/build.py's flags), with and without the
    native _Float16 path (BZ_SOFT_HALF: the portable bit arithmetic)."""
    flags = ["-std=gnu++17", "-O2", "-march=native", "-fopenmp", "-Wall", "-Werror",
             "-Wno-unused-function", "-fsyntax-only", "-x", "c++"]
    _run([*_compiler(), *flags, *(["-DBZ_SOFT_HALF"] if soft else [])],
         _text("cpu", header), ".cc")


@pytest.mark.parametrize("header", HEADERS["metal"])
def test_header_compiles_after_the_metal_prelude(header: str) -> None:
    """MSL as C++17 against the test-only shim (as tests/test_gpu_codegen.py checks kernels),
    and against the GPU emulator's Metal shim (real semantics: what the emulator builds)."""
    cmd = _compiler()
    clang = "clang" in Path(cmd[0]).name
    warn = "-Wno-unknown-attributes" if clang else "-Wno-attributes"
    _run([*cmd, "-std=c++17", "-fsyntax-only", "-fno-exceptions", "-fno-rtti", f"-I{SHIM}",
          "-include", "metal_stdlib", warn, "-x", "c++"], _text("metal", header), ".metal")
    emu = kernel_sources.source("braze.backends", "emulator_kernels/metal_shim.h", lines=False)
    text = emu + _text("metal", header).replace("#include <metal_stdlib>\n", "")
    _run([*cmd, "-std=c++17", "-nostdinc++", "-fsyntax-only", "-x", "c++"], text, ".cc")


@pytest.mark.parametrize("header", HEADERS["cuda"])
def test_header_compiles_after_the_cuda_prelude_with_nvcc(header: str) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    _run([nvcc, "--ptx", "-o", os.devnull, "-x", "cu"], _text("cuda", header), ".cu")


@pytest.mark.skipif(not nvrtc.available(), reason="nvidia-cuda-nvrtc not installed")
def test_headers_compile_after_the_cuda_prelude_with_nvrtc() -> None:
    """All CUDA headers in one program, as NVRTC (the cuda backend's compiler) sees them."""
    text = cuda_codegen.PRELUDE + "".join(
        kernel_sources.read("braze.backends", f"kernels/{h}") + _use("cuda", h)
        for h in HEADERS["cuda"])
    text += 'extern "C" __global__ void bz_k(float* y) { y[0] = bz_sigmoid(y[1]); }\n'
    assert nvrtc.compile_source(text, "bz_k", cache=False)


@pytest.mark.parametrize("header", HEADERS["cuda"])
def test_header_compiles_after_the_cuda_prelude_behind_the_emulator_shim(header: str) -> None:
    emu = kernel_sources.source("braze.backends", "emulator_kernels/cuda_shim.h", lines=False)
    _run([*_compiler(), "-std=c++17", "-nostdinc++", "-fsyntax-only", f"-I{EMU}", "-x", "c++"],
         emu + _text("cuda", header), ".cc")


def test_every_header_is_compiled_by_this_test() -> None:
    files = {p.name for p in KERNELS.iterdir() if p.suffix == ".h"}
    assert files == set(PRELUDES + PRELUDE_HEADERS + CPU_PRELUDE_HEADERS) | {
        h for hs in HEADERS.values() for h in hs}


def test_headers_are_clang_format_clean() -> None:
    assert_clang_format_clean(sorted(str(p) for p in KERNELS.iterdir() if p.suffix == ".h"))


def test_every_helper_an_op_record_names_is_defined_by_a_header() -> None:
    text = "".join(kernel_sources.read("braze.backends", f"kernels/{h}") for h in SHARED)
    named = {h for op in OPS.values() for h in op.helpers}
    assert named
    for h in named:
        defined = rf"BZ_FN \w+ {h}\(|^BZ_NEXTAFTER16\({h},"  # (the macro: kernels/prelude.h)
        assert re.search(defined, text, re.M), f"{h}: named by an op record, in no header"


def _kernel(fn, *arrays: np.ndarray):
    return bz.explain(fn, *(bz.asarray(a) for a in arrays)).kernels[0].kernel


def test_a_kernel_gets_only_the_helper_groups_it_uses() -> None:
    x = np.ones((64, 32), np.float32)
    plain = _kernel(lambda x: bz.exp(x) + 1.0, x)
    half = _kernel(lambda x: (x * 2).astype(bz.float16), x)
    ints = _kernel(lambda x: x // 3, np.arange(8, dtype=np.int32))
    for gen in (cpu_codegen.generate, cuda_codegen.generate, metal_codegen.generate):
        src = gen(plain).source
        assert "bz_h2f" not in src and "bz_b2f" not in src and "bz_idiv" not in src
        assert "bz_sigmoid" not in src
        assert "BZ_FN float bz_h2f" in gen(half).source and "bz_b2f" not in gen(half).source
        assert "bz_idiv(T a" in gen(ints).source and "bz_h2f" not in gen(ints).source
    row = _kernel(lambda x: bz.softmax(x, axis=-1), x)
    assert "bz_block_reduce" in cuda_codegen.generate(row).source
    assert "bz_block_reduce" not in cuda_codegen.generate(plain).source
    assert "bz_block_reduce" not in cpu_codegen.generate(row).source


def test_every_kernel_starts_with_its_dialects_prelude() -> None:
    k = _kernel(lambda x: bz.sigmoid(x).astype(bz.bfloat16), np.ones(16, np.float32))
    assert cpu_codegen.generate(k).source.startswith(cpu_codegen.PRELUDE)
    assert cuda_codegen.generate(k).source.startswith(cuda_codegen.PRELUDE)
    assert metal_codegen.generate(k).source.startswith(metal_codegen.PRELUDE)
    # the GPU emulator drops this include line from the prelude (gpu_emulator.emulator_source)
    assert metal_codegen.PRELUDE.startswith("// generated by braze (metal)\n"
                                            "#include <metal_stdlib>\n")
