"""Shared test setup: every test module runs once per available backend."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import InMemoryExampleDatabase

# The cpu backend's tiered building (bz.eval runs a small kernel with numpy's executor
# while it builds in the background) would leave the generated kernels of small test
# inputs untested: the suite builds every kernel at once; tests of tiering opt in.
os.environ.setdefault("BRAZE_TIERED_BUILD", "0")

import braze as bz  # noqa: E402

# Hypothesis's pytest plugin wraps a parametrized test's settings once per item, and
# `settings.database` re-walks that whole chain whenever it resolves to None (its CI
# profile), overflowing the stack after ~500 items of one test function. A real database
# (in memory where the active profile has none) keeps every lookup one step deep.
DATABASE = settings.default.database or InMemoryExampleDatabase()

settings.register_profile(
    "default", max_examples=40, deadline=None, database=DATABASE,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=400, deadline=None, database=DATABASE)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# BRAZE_TEST_BACKENDS=mlx,cpu restricts the parametrization (default: every available one
# but the cuda emulator, which compiles each new kernel and runs threads as fibers: ask for
# it by name, BRAZE_TEST_BACKENDS=cuda-emulator, to run the suite through the CUDA code)
_WANTED = [b for b in os.environ.get("BRAZE_TEST_BACKENDS", "").split(",") if b]
BACKENDS = [b for b in bz.backends.available()
            if (b in _WANTED if _WANTED else b != "cuda-emulator")]


@pytest.fixture(params=BACKENDS, autouse=True, scope="module")
def backend_name(request: pytest.FixtureRequest):
    """Run the module under each backend (numpy today; cpu/cuda/mlx as they land)."""
    with bz.backend(request.param):
        yield request.param


@pytest.fixture
def uncut(monkeypatch: pytest.MonkeyPatch) -> None:
    """One pending graph however deep: recording would cut a graph that deep into
    segments (braze.arrays.array.CUT_DEPTH; tests/test_loops.py tests the cut)."""
    import sys

    monkeypatch.setattr(sys.modules["braze.arrays.array"], "CUT_DEPTH", 10**9)
