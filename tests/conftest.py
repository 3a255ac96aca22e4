"""Shared test setup: every test module runs once per available backend."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import braze as bz

settings.register_profile(
    "default", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=400, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=bz.backends.available(), autouse=True, scope="module")
def backend_name(request: pytest.FixtureRequest):
    """Run the module under each backend (numpy today; cpu/cuda/mlx as they land)."""
    with bz.backend(request.param):
        yield request.param
