"""Differential fuzzer: random programs (tests/fuzz/graphs.py) evaluated by the reference
(the ``numpy`` backend), by the ``cpu`` backend -- eagerly, under ``bz.compile`` (its
first call and its replay) and at 1 and 2 threads -- and by the ``mlx`` backend where it
is installed (``BRAZE_FUZZ_BACKENDS``), compared with per-dtype tolerances against the
reference, and bit for bit between the cpu backend's tiers that must agree: a compiled
function's first call and its replay, 1 and 2 threads, eager and compiled, and (programs
without matmul or complex values) the kernels and the reference, which compute sums in one
order and transcendental functions with the kernels' code.

``BRAZE_FUZZ_EXAMPLES`` programs per run (default 300, what CI runs; ``make fuzz N=...`` sets it).
Tolerances: exact for bool and integers; for floats (complex: each part), by the *least
precise* float dtype any value of the program has (a float32 transcendental 1 ulp apart
stays 1 float32 ulp apart in a float64 sum): float16 2e-3, bfloat16 2e-2, float32 and
complex64 1e-5, float64 1e-12 relative, with an absolute floor of that times 16 x (1 + the
largest magnitude of the output), for reductions and cancellations whose roundings differ
between numpy's functions and the kernels'
(libmvec: <= 4 ulp)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import braze as bz
from braze.backends import cpu as cpu_mod
from braze.graph import dtypes as dt

from .graphs import build, programs

EXAMPLES = int(os.environ.get("BRAZE_FUZZ_EXAMPLES", "300"))
# other backends compared with the reference too (the cuda emulator builds every kernel
# anew: ask for it by name, BRAZE_FUZZ_BACKENDS=mlx,cuda-emulator)
OTHERS = [b for b in os.environ.get("BRAZE_FUZZ_BACKENDS", "mlx").split(",")
          if b and b in bz.backends.available()]
RTOL = {dt.float16: 2e-3, dt.bfloat16: 2e-2, np.dtype(np.float32): 1e-5,
        np.dtype(np.float64): 1e-12, np.dtype(np.complex64): 1e-5,
        np.dtype(np.complex128): 1e-12}

pytestmark = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Backends are chosen per evaluation here: run once."""
    yield "fuzz"


def _rtol(spec) -> float:  # type: ignore[no-untyped-def]
    """The tolerance of the least precise float dtype among all the program's values."""
    with bz.backend("numpy"):
        dtypes = {v.dtype for v in build(spec, everything=True)}
    return max([RTOL[d] for d in dtypes if d in RTOL], default=0.0)


def _close(got: np.ndarray, want: np.ndarray, what: str, rtol: float) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.shape} {got.dtype} != {want.shape} {want.dtype}"
    if want.dtype.kind not in "fc" and want.dtype not in (dt.float16, dt.bfloat16):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    if want.dtype.kind == "c":  # each part on its own
        _close(got.real.copy(), want.real.copy(), what + " (real part)", rtol)
        _close(got.imag.copy(), want.imag.copy(), what + " (imaginary part)", rtol)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    rtol = max(rtol, RTOL.get(want.dtype, 1e-5))
    finite = np.isfinite(w)
    big = float(np.max(np.abs(w[finite]))) if finite.any() else 0.0
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * 16 * (1.0 + big), equal_nan=True,
                               err_msg=what)


def _complex(spec) -> bool:  # type: ignore[no-untyped-def]
    """Complex values anywhere: the reference computes them with numpy's own functions."""
    return any(a.dtype.kind == "c" for a in spec[0])


def _same_bits(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), what


def _values(outs: list[bz.Array]) -> list[np.ndarray]:
    bz.eval(*outs)
    return [np.array(o) for o in outs]


@pytest.fixture(scope="module")
def kernels_always():  # type: ignore[no-untyped-def]
    """The registered cpu backend with every kernel built before it runs (no numpy tier
    while a kernel builds in the background, no op-by-op path for tiny graphs): what is
    compared is the generated code."""
    b = bz.backends.get("cpu")
    saved = b.tiered, b.skip_tiny
    b.tiered, b.skip_tiny = False, False
    yield
    b.tiered, b.skip_tiny = saved


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=programs())
def test_cpu_backend_matches_the_reference_and_itself(kernels_always, spec) -> None:  # type: ignore[no-untyped-def]
    with np.errstate(all="ignore"):
        with bz.backend("numpy"):
            want = _values(build(spec))
        with bz.backend("cpu"):
            eager = _values(build(spec))
            if any(step[0] == "mask" for step in spec[1]):
                # boolean indexing cannot be traced (a clear TypeError at the call): eager only
                first = again = eager
            else:
                f = bz.compile(lambda *xs: build(spec, list(xs)))
                first = _values(f(*[bz.asarray(a.copy()) for a in spec[0]]))
                again = _values(f(*[bz.asarray(a.copy()) for a in spec[0]]))
        others = {}
        for name in OTHERS:
            with bz.backend(name):
                others[name] = _values(build(spec))
        threads = []
        for n in (1, 2):
            b = cpu_mod.CpuBackend(num_threads=n, skip_tiny=False, tiered=False)
            outs = build(spec)
            threads.append([np.array(v) for v in b.evaluate([o._node for o in outs])])
    rtol = _rtol(spec)
    for i, w in enumerate(want):
        _close(eager[i], w, f"output {i}, eager", rtol)
        _close(first[i], w, f"output {i}, compiled", rtol)
        _same_bits(again[i], first[i], f"output {i}: a compiled replay against its first call")
        _close(threads[0][i], w, f"output {i}, 1 thread", rtol)
        for name, vals in others.items():
            _close(vals[i], w, f"output {i}, {name} backend", rtol)
        _same_bits(threads[1][i], threads[0][i], f"output {i}: 2 threads against 1")
        if not any(step[0] == "matmul" for step in spec[1]):
            # one order for sums and one math for transcendentals in every tier (a matmul
            # may be BLAS in one and the native GEMM of a replay plan in another)
            _same_bits(first[i], eager[i], f"output {i}: compiled against eager")
            if not _complex(spec):
                _same_bits(eager[i], w, f"output {i}: the cpu kernels against the reference")
