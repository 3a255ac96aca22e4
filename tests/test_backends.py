"""The backend registry: selection by name, context manager, environment variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import braze as bz


def test_numpy_reference_is_always_available() -> None:
    assert bz.backends.available()[0] == "numpy"


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown backend 'nope'.*numpy"):
        bz.set_backend("nope")
    with pytest.raises(ValueError, match="unknown backend"):
        with bz.backend("nope"):
            pass


def test_context_manager_restores_the_previous_backend(backend_name: str) -> None:
    before = bz.backends.current().name
    with bz.backend("numpy") as b:
        assert b.name == "numpy" == bz.backends.current().name
    assert bz.backends.current().name == before == backend_name


def test_set_backend_switches_and_evaluation_uses_it(backend_name: str) -> None:
    try:
        bz.set_backend("numpy")
        assert bz.backends.current().name == "numpy"
        assert (bz.arange(3) * 2).tolist() == [0, 2, 4]
    finally:
        bz.set_backend(backend_name)


def _run(code: str, env_value: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("BRAZE_BACKEND", None)
    if env_value is not None:
        env["BRAZE_BACKEND"] = env_value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_environment_variable_selects_the_backend() -> None:
    r = _run("import braze as bz; print(bz.backends.current().name)", "numpy")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "numpy"


def test_bad_environment_variable_fails_at_import_with_the_valid_names() -> None:
    r = _run("import braze", "nope")
    assert r.returncode != 0
    assert "unknown backend 'nope'" in r.stderr and "numpy" in r.stderr


def test_native_extension_is_loaded() -> None:
    from braze import _core

    assert isinstance(_core.cpu_features(), list)
    assert _core.hardware_concurrency() >= 1
    assert "C++" in _core.build_info()
