"""BRAZE_ISA: the instruction-set level every cpu kernel is built for. A narrower level runs,
on this CPU, the code a CPU of that kind runs (``avx2``: an AMD Zen 2/3 or Haswell-class
CPU, no AVX-512 and no VNNI; ``scalar``: SSE2 only), so the kernels' AVX2 and scalar paths
are tested here as they run there: the quantized matmul's int8 path (vpmaddubsw at 4 bits,
the exact path at 8), its tiled pre-fill, the float32 GEMM tile and the matvec, each in a
new process (the level is read at import) against the same bounds as on the host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from braze import _core
from braze.backends import cpu as cpu_mod
from braze.backends.cpu import build

ROOT = Path(__file__).resolve().parent.parent
X86 = build._machine() == "x86_64"


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Process-level: each check starts its own interpreter, whatever the active backend."""
    yield "none"


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **env}, cwd=ROOT)


def test_default_target_is_native_and_in_the_flags() -> None:
    assert build.target() == os.environ.get("BRAZE_ISA", "native") or os.environ.get("BRAZE_ISA")
    assert any(f.startswith("-march=") for f in build.flags())
    assert "fast-math" not in " ".join(build.flags())
    assert build.describe()


def test_an_unknown_or_unavailable_level_fails_at_import_by_name() -> None:
    r = _python("import braze", BRAZE_ISA="avx9")
    assert r.returncode != 0 and "BRAZE_ISA='avx9'" in r.stderr and "levels are" in r.stderr
    if X86 and "avx512f" not in _core.cpu_features():
        r = _python("import braze", BRAZE_ISA="avx512")
        assert r.returncode != 0 and "has no avx512" in r.stderr


@pytest.mark.skipif(not X86, reason="x86-64 levels")
def test_each_level_changes_the_flags_and_the_cache_key() -> None:
    code = ("from braze.backends.cpu import build; print(build.flags()[2]); "
            "print(build.cache_key('int f(){return 0;}')); print(build.describe())")
    seen = {}
    for level in ("native", "avx2", "scalar"):
        if level == "avx2" and not {"avx2", "fma", "f16c"} <= set(_core.cpu_features()):
            continue
        r = _python(code, BRAZE_ISA=level)
        assert r.returncode == 0, r.stderr
        march, key, desc = r.stdout.split("\n")[:3]
        seen[level] = (march, key)
        assert (level == "native") == ("BRAZE_ISA" not in desc)
    assert seen["native"][0] == "-march=native" and seen["scalar"][0] == "-march=x86-64"
    assert len({k for _, k in seen.values()}) == len(seen)  # a kernel cache per level


@pytest.mark.skipif(not (X86 and cpu_mod.available()), reason="x86-64 with a C++ compiler")
@pytest.mark.parametrize("level", ["avx2", "scalar"])
def test_kernel_paths_of_a_narrower_level_match_their_bounds(level: str) -> None:
    """The quantized matmul (every ISA path test, the int8 bound and switch tests) and the
    matvec/GEMM kernels under BRAZE_ISA=level, in a new process."""
    if level == "avx2" and not {"avx2", "fma", "f16c"} <= set(_core.cpu_features()):
        pytest.skip("this CPU has no AVX2")
    probe = _python("from braze.backends.cpu import qmatmul; "
                    "print(qmatmul.host_isa(), qmatmul._levels(4, 32, False, None))",
                    BRAZE_ISA=level)
    assert probe.returncode == 0, probe.stderr
    # AVX2 + vpmaddubsw (its GEMM too, no AMX); scalar: no int8 path
    want = "1 (1, 3, False)" if level == "avx2" else "0 (0, 0, False)"
    assert probe.stdout.strip() == want
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/test_quantized.py::test_native_kernel_every_isa",
         "tests/test_quantized.py::test_int8_path_within_stated_bound",
         "tests/test_quantized.py::test_int8_switch",
         "tests/test_quantized.py::test_invariant_mode_rows_do_not_depend_on_the_batch",
         "tests/test_cpu_backend.py::test_matvec_kernel_every_isa_matches_numpy",
         "tests/test_cpu_backend.py::test_eager_x_wt_of_many_rows_runs_the_native_gemm_not_blas",
         ], capture_output=True, text=True, timeout=1800, cwd=ROOT,
        env={**os.environ, "BRAZE_ISA": level, "BRAZE_TEST_BACKENDS": "cpu"})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    progress = r.stdout.split()[0]  # one character per test: "." passed, "s" skipped
    # scalar has no int8 path and no GEMM: those two tests skip there, and only there
    assert len(progress) >= 6 and progress.count("s") == (2 if level == "scalar" else 0), \
        r.stdout
