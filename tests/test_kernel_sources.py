"""The hand-written kernel sources (``backends/cpu/kernels/``, ``backends/cuda/kernels/``,
``backends/emulator_kernels/``) are real files: each compiles on its own, with the macro
sets the Python side defines, for every ISA variant it has (AVX-512, AVX2, scalar), so a
broken header fails here, fast, rather than as a kernel that falls back to numpy; each is
``clang-format``-clean (``.clang-format`` at the repository root); the modules that build
them hand the compiler self-contained text (no quoted include left) naming real files.
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from pathlib import Path

import pytest

import braze as bz
from braze.backends import kernel_sources
from braze.backends.cpu import (
    assign,
    attention,
    bincount,
    build,
    concat,
    conv,
    matvec,
    placement,
    qmatmul,
    roll,
    rope,
    scan,
    take_along,
)
from braze.backends.cuda import codegen as cuda_codegen
from braze.backends.cuda import library as cuda_library

from .helpers import assert_clang_format_clean

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = Path(kernel_sources.__file__).resolve().parent
CPU = BACKENDS / "cpu" / "kernels"
CUDA = BACKENDS / "cuda" / "kernels"
EMU = BACKENDS / "emulator_kernels"
SUFFIXES = {".h", ".cc", ".cu"}

X86 = platform.machine() in ("x86_64", "AMD64", "i686")
# -m flags of each ISA path the CPU kernels have (elsewhere: the compiler's default target)
_AVX512 = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mfma",
           "-mavx2", "-mf16c"]
ISAS = {
    "avx512": _AVX512,
    "avx512-amx": [*_AVX512, "-mamx-tile", "-mamx-int8", "-mamx-bf16"],
    "avx2-vnni": ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"],
    "avx2": ["-mavx2", "-mfma", "-mf16c"],
    "scalar": [],
} if X86 else {"default": []}
CPU_FLAGS = ["-std=gnu++17", "-fopenmp", "-fsyntax-only", "-x", "c++", f"-I{CPU}"]
EMU_FLAGS = ["-std=c++17", "-nostdinc++", "-fsyntax-only", "-x", "c++", f"-I{EMU}"]

# the macro sets qmatmul.source() defines: (bits, group size, float16 scales)
QMM = [{"BZ_BITS": b, "BZ_GS": g, "BZ_HALF": h} for b, g, h in
       [(4, 32, 0), (4, 64, 1), (8, 32, 1), (8, 128, 0)]]
SYM = {"BZ_SYMBOL": "bz_test"}


# backend-independent: one module pass (the cpu backend's, where a compiler exists)
_PASS = "cpu" if "cpu" in bz.backends.available() else "numpy"


@pytest.fixture(autouse=True)
def _once(backend_name: str) -> None:
    if backend_name != _PASS:
        pytest.skip(f"backend-independent: runs once, in the {_PASS} backend's module pass")


def _cases() -> list[tuple[str, str, list[str], dict[str, object]]]:
    """(file, variant id, -m flags, macros) for every CPU kernel file and ISA."""
    cases = []
    for isa, flags in ISAS.items():
        for m in QMM:
            cases.append(("qmatmul.cc", isa, flags, {**m, **SYM}))
        for h in ("qmatmul_common.h", "qmatmul_float.h", "qmatmul_int8.h", "qmatmul_amx.h"):
            cases.append((h, isa, flags, QMM[1]))
        cases.append(("matvec.cc", isa, flags, SYM))
        cases.append(("matvec.cc", isa, flags, {"BZ_ISA_MAX": 0, **SYM}))
        for name in ("attention.cc", "rope.cc"):
            cases.append((name, isa, flags, {"BZ_MVEC": 1, **SYM}))
        cases.append(("concat.cc", isa, flags, SYM))
        cases.append(("roll.cc", isa, flags, SYM))
        cases.append(("take_along.cc", isa, flags, SYM))
        cases.append(("assign.cc", isa, flags, SYM))
        cases.append(("thread_ids.cc", isa, flags, SYM))
        cases.append(("scan.cc", isa, flags, SYM))
        cases.append(("vecmat.cc", isa, flags, SYM))
        cases.append(("bincount.cc", isa, flags, SYM))
        cases.append(("conv.cc", isa, flags, SYM))
        cases.append(("pool.cc", isa, flags, SYM))
        cases.append(("dispatch.h", isa, flags, {}))
        cases.append(("f16.h", isa, flags, {}))
        cases.append(("taps.h", isa, flags, {}))
        cases.append(("work_split.h", isa, flags, {}))
    for name in ("attention.cc", "rope.cc"):  # no libmvec
        cases.append((name, next(iter(ISAS)), next(iter(ISAS.values())), {"BZ_MVEC": 0, **SYM}))
    if X86:
        cases.append(("gemm_tile.h", "avx512", ISAS["avx512"], {}))  # AVX-512 and AVX2 only
        cases.append(("gemm_tile.h", "avx2", ISAS["avx2"], {}))
    return cases


CASES = _cases()


def _id(case: tuple[str, str, list[str], dict[str, object]]) -> str:
    name, isa, _, macros = case
    parts = [f"{k[3:].lower()}{v}" for k, v in macros.items() if k != "BZ_SYMBOL"]
    return "-".join([name, isa, *parts])


def _files() -> list[Path]:
    return sorted(p for d in (CPU, CUDA, EMU) for p in d.iterdir() if p.suffix in SUFFIXES)


def _compiler() -> list[str]:
    cmd = build.compiler()
    if cmd is None:
        pytest.skip("no C++ compiler")
    return cmd


@functools.cache
def _flags_work(flags: tuple[str, ...]) -> bool:
    cmd = build.compiler()
    r = subprocess.run([*cmd, *flags, "-fsyntax-only", "-x", "c++", "-"], input="",
                       capture_output=True, text=True, timeout=60)
    return r.returncode == 0


def _syntax(argv: list[str], text: str | None = None) -> None:
    r = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr[-4000:]}"


def test_every_kernel_file_is_compiled_by_this_test() -> None:
    """A new kernel file joins the syntax checks (CASES / the GPU tests) and the format one."""
    checked = {name for name, *_ in CASES} | {"gemm.cu", "llm.cu", "cuda_shim.h",
                                               "metal_shim.h", "runtime_api.h", "runtime.cc"}
    assert {p.name for p in _files()} <= checked


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_cpu_kernel_file_compiles_on_its_own(case) -> None:
    name, isa, flags, macros = case
    cmd = _compiler()
    if not _flags_work(tuple(flags)):
        pytest.skip(f"the compiler does not take the {isa} flags {' '.join(flags)}")
    defs = [f"-D{k}={v}" for k, v in macros.items()]
    _syntax([*cmd, *CPU_FLAGS, *flags, *defs, str(CPU / name)])


@pytest.mark.parametrize("name", ["cuda_shim.h", "metal_shim.h", "runtime_api.h",
                                  "runtime.cc"])
def test_emulator_file_compiles_on_its_own(name: str) -> None:
    _syntax([*_compiler(), *EMU_FLAGS, str(EMU / name)])


@pytest.mark.parametrize("ctype", ["float", "double"])
def test_cuda_matmul_kernel_compiles_behind_the_emulator_shim(ctype: str) -> None:
    """gemm.cu after the CUDA prelude, as the host compiler sees it in the GPU emulator
    (NVRTC compiles it in tests/test_gpu_codegen.py where NVRTC loads)."""
    text = (kernel_sources.source("braze.backends", "emulator_kernels/cuda_shim.h", lines=False)
            + cuda_library.gemm_kernel(ctype).source)
    assert text.count(f"bz_gemm_{ctype}(") == 1
    _syntax([*_compiler(), *EMU_FLAGS, "-"], text)


def test_cuda_llm_kernels_compile_behind_the_emulator_shim() -> None:
    """llm.cu (quantized matmul, rope, attention, gathers) after the CUDA prelude, as the
    host compiler sees it in the GPU emulator (nvcc and NVRTC: tests/test_gpu_codegen.py)."""
    from braze.backends.cuda.llm import kernel

    text = (kernel_sources.source("braze.backends", "emulator_kernels/cuda_shim.h", lines=False)
            + kernel("bz_qmm4_h", 5).source)
    _syntax([*_compiler(), *EMU_FLAGS, "-"], text)


def test_kernel_files_are_clang_format_clean() -> None:
    assert_clang_format_clean([str(p) for p in _files()])


def _built_sources() -> list[tuple[str, str]]:
    return [qmatmul.source(4, 32, False), qmatmul.source(8, 64, True, isa=1),
            matvec.source(), matvec.source(0), attention.source(), rope.source(),
            concat.source(), scan.source(), matvec.vecmat_source(), bincount.source(),
            roll.source(), take_along.source(), assign.source(), placement.source(),
            conv.source(),
            *((g.source, g.symbol) for g in
                               (cuda_library.gemm_kernel(t) for t in ("float", "double")))]


@pytest.mark.parametrize("i", range(17))
def test_built_source_is_self_contained_and_names_real_files(i: int) -> None:
    text, sym = _built_sources()[i]
    assert '#include "' not in text  # every quoted include inlined: the cache key covers it
    named = set(re.findall(r'^#line \d+ "braze/backends/(.+)"$', text, re.M))
    assert named and all((BACKENDS / n).is_file() for n in named)
    assert not re.search(r"^#define BZ_SYMBOL", text, re.M) or \
        re.search(rf"^#define BZ_SYMBOL {sym}$", text, re.M)


def test_cuda_kernel_starts_with_the_prelude() -> None:
    """The GPU emulator splits a CUDA kernel at the prelude (emulator_source)."""
    assert cuda_library.gemm_kernel("float").source.startswith(cuda_codegen.PRELUDE)


def test_kernel_sources_inlines_includes_once_per_use_and_errors_on_missing() -> None:
    text = kernel_sources.source("braze.backends.cpu", "kernels/qmatmul.cc",
                                 {"BZ_BITS": 4, "BZ_GS": 32, "BZ_HALF": 0, **SYM})
    assert text.startswith("#define BZ_BITS 4\n#define BZ_GS 32\n")
    # qmatmul_common.h is included 5 times (qmatmul_amx.h, which includes it, by the
    # AVX-512 and the AVX2 GEMM sections); its guard keeps one definition (compiled above)
    assert text.count("#define BZ_QMM_COMMON_H") == 5
    with pytest.raises(FileNotFoundError, match="missing from the installation"):
        kernel_sources.read("braze.backends.cpu", "kernels/no_such_file.h")
