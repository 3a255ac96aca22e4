"""Untrusted inputs (issue 21): kernel and model caches that are not private are never
loaded from.

The cache's checksum sidecars only detect corruption; what keeps another user's code out
of the process is :mod:`braze.backends.trust`: a cache directory (or entry) owned by
someone else, writable by group or others, or under a directory others can write (not
sticky) is refused with one warning, and kernels build into a private per-process
directory instead (they still run, and give the same answers).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import braze as bz
from braze.backends import trust
from braze.backends.cpu import build, codegen
from braze.graph.compiler import compile_graph

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="no file owners here")

NOBODY = 65534


def _kernel() -> codegen.GeneratedKernel:
    x = bz.asarray(np.linspace(-1, 1, 32, dtype=np.float32))
    s, _ = compile_graph([(bz.tanh(x) * 0.5 + 1.0)._node])
    return codegen.generate(s.kernels[0])


@pytest.fixture
def fresh(monkeypatch):
    """A process state without a cache directory chosen or a private one made."""
    monkeypatch.setattr(build, "_PRIVATE", None)
    monkeypatch.setattr(build, "_usable", {})
    monkeypatch.setattr(build, "_loaded", {})
    return monkeypatch


def _private_build(cache: Path) -> tuple[Path, list[str]]:
    """Build the test kernel with ``cache`` configured: (the library, warnings)."""
    g = _kernel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = build.build(g.source, g.symbol)
        handle = build.load(g.source, g.symbol)
    assert isinstance(handle, int)
    return lib, [str(w.message) for w in caught if "not private" in str(w.message)]


def test_a_new_cache_directory_is_private(tmp_path, fresh) -> None:
    fresh.setenv("BRAZE_CACHE_DIR", str(tmp_path / "a" / "kernels"))
    lib, warned = _private_build(tmp_path / "a" / "kernels")
    assert not warned and lib.parent == tmp_path / "a" / "kernels"
    assert (lib.parent.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_cache_directory_others_can_write_is_refused(tmp_path, fresh, mode) -> None:
    cache = tmp_path / "kernels"
    cache.mkdir()
    cache.chmod(mode)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    lib, warned = _private_build(cache)
    assert len(warned) == 1 and "writable by" in warned[0] and str(cache) in warned[0]
    assert not str(lib).startswith(str(cache))  # built in the private directory
    assert list(cache.iterdir()) == []  # nothing written where others could swap it


def test_a_cache_under_a_directory_others_can_write_is_refused_unless_sticky(
        tmp_path, fresh) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # like /tmp without its sticky bit: others may rename our cache
    fresh.setenv("BRAZE_CACHE_DIR", str(shared / "kernels"))
    _, warned = _private_build(shared / "kernels")
    assert len(warned) == 1 and "its parent directory" in warned[0]
    shared.chmod(0o1777)  # sticky, as /tmp is: trusted
    assert trust.problem(shared / "kernels") is None


def test_a_cache_directory_owned_by_another_user_is_refused(tmp_path, fresh) -> None:
    if os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    cache = tmp_path / "kernels"
    cache.mkdir(mode=0o700)
    os.chown(cache, NOBODY, NOBODY)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    _, warned = _private_build(cache)
    assert len(warned) == 1 and f"owned by uid {NOBODY}" in warned[0]


@pytest.mark.parametrize("how", ["group-writable", "other-user", "symlink"])
def test_a_planted_cache_entry_is_never_loaded(tmp_path, fresh, how) -> None:
    """An entry with a valid checksum sidecar but loose ownership or permissions (what a
    planted library looks like) is not loaded: the kernel is built privately."""
    cache = tmp_path / "kernels"
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    g = _kernel()
    lib = build.build(g.source, g.symbol)  # a genuine entry, then tampered with
    if how == "group-writable":
        lib.chmod(0o664)
    elif how == "other-user":
        if os.getuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(lib, NOBODY, NOBODY)
    else:
        real = tmp_path / "elsewhere.so"
        lib.rename(real)
        lib.symlink_to(real)
    fresh.setattr(build, "_loaded", {})
    got, warned = _private_build(cache)
    assert len(warned) == 1 and str(lib) in warned[0] and got != lib
    assert not str(got).startswith(str(cache))


def test_kernels_from_a_refused_cache_still_give_the_answers(tmp_path, fresh) -> None:
    cache = tmp_path / "kernels"
    cache.mkdir()
    cache.chmod(0o777)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    x = np.linspace(-2, 2, 257, dtype=np.float32)
    with warnings.catch_warnings(record=True), bz.backend("cpu"):
        warnings.simplefilter("always")
        got = np.asarray(bz.exp(bz.asarray(x)) * 2.0 + 1.0)
    np.testing.assert_allclose(got, np.exp(x) * 2.0 + 1.0, rtol=1e-6)


def test_a_model_cache_others_can_write_is_not_used(tmp_path, monkeypatch) -> None:
    """The repacked-GGUF model cache lives under the same root: not private -> models are
    loaded from the file itself, uncached, after a warning."""
    from braze.arrays import io

    root = tmp_path / "root"
    (root / "models").mkdir(parents=True)
    (root / "models").chmod(0o777)
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(root))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.warns(RuntimeWarning, match="model cache is not private.*writable by others"):
        assert io._model_cache_dir(str(model)) is None
    (root / "models").chmod(0o700)
    assert io._model_cache_dir(str(model)) is not None


def test_trust_rules() -> None:
    assert trust.entry_problem("/no/such/file") is None
    assert "not a directory" in (trust.problem(__file__) or "")
