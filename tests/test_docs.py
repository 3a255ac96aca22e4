"""Every docstring example in braze runs and prints what it says (doctest)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import braze

MODULES = sorted(
    m.name for pkg in (braze.arrays, braze.graph, braze.backends)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
) + ["braze.arrays", "braze.graph", "braze.backends"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:  # an optional backend's dependency (mlx) is not installed
        if e.name and e.name.split(".")[0] == "mlx":
            pytest.skip(f"{name} needs mlx")
        raise
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"


def test_every_public_function_has_a_docstring_with_an_example() -> None:
    missing = []
    names = [(braze, n) for n in braze.__all__] + [
        (mod, n) for mod in (braze.linalg, braze.fft) for n in mod.__all__]
    for mod, name in names:
        obj = getattr(mod, name)
        if callable(obj) and not isinstance(obj, type) and getattr(obj, "__doc__", None):
            if ">>>" not in obj.__doc__:
                missing.append(name)
        elif callable(obj) and not isinstance(obj, type):
            missing.append(name)
    assert not missing, f"public functions without an example: {missing}"
