"""Hypothesis strategies and numpy-reference comparison used across the tests.

Tolerances (relative, absolute) by result dtype: float64 1e-12; float32 / complex64
2e-6 (transcendentals may differ in the last ulp); float16 1e-3; bfloat16 1e-2
(one rounding of a float32 result); integers and bools exact.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

TOL = {
    dt.float64: (1e-12, 1e-12), dt.complex128: (1e-12, 1e-12),
    dt.float32: (2e-6, 1e-6), dt.complex64: (2e-6, 1e-6),
    dt.float16: (1e-3, 1e-3), dt.bfloat16: (1e-2, 1e-2),
}

INT_DTYPES = list(dt.INTEGER)
REAL_FLOAT_DTYPES = [dt.float16, dt.bfloat16, dt.float32, dt.float64]
COMPLEX_DTYPES = [dt.complex64, dt.complex128]
ALL_DTYPES = list(dt.ALL)


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0, max_side: int = 5):
    """Shapes including 0-d, empty and size-1 dims."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def _np_values(dtype: np.dtype, shape: tuple[int, ...], finite: bool):
    if dtype == dt.bfloat16:
        elems = st.floats(-1e4, 1e4, width=32) if finite else st.floats(width=32)
        return hnp.arrays(np.float32, shape, elements=elems).map(
            lambda a: a.astype(dt.bfloat16))
    if dtype.kind == "f":
        return hnp.arrays(dtype, shape, elements=st.floats(
            width=dtype.itemsize * 8, allow_nan=not finite, allow_infinity=not finite,
            min_value=-1e4 if finite else None, max_value=1e4 if finite else None))
    if dtype.kind == "c":
        w = dtype.itemsize * 4
        elems = st.complex_numbers(max_magnitude=1e4, allow_nan=False, allow_infinity=False,
                                   width=w * 2) if finite else st.complex_numbers(width=w * 2)
        return hnp.arrays(dtype, shape, elements=elems)
    return hnp.arrays(dtype, shape)


@st.composite
def arrays(draw: Any, dtype: Any, shape: Any = None, finite: bool = False,
           views: bool = True) -> np.ndarray:
    """A numpy array of ``dtype`` (or a strategy of dtypes), sometimes non-contiguous.

    Non-contiguous inputs come from a strided slice or a transpose of a larger
    array, so braze sees exactly what a NumPy user would pass.
    """
    if not isinstance(dtype, np.dtype):
        dtype = draw(dtype)
    if shape is None:
        shape = draw(shapes())
    elif not isinstance(shape, tuple):
        shape = draw(shape)
    kind = draw(st.sampled_from(["plain", "strided", "transposed"])) if views else "plain"
    if kind == "strided" and len(shape) >= 1:
        big = shape[:-1] + (shape[-1] * 2,)
        a = draw(_np_values(dtype, big, finite))
        return a[..., ::2]
    if kind == "transposed" and len(shape) >= 2:
        a = draw(_np_values(dtype, tuple(reversed(shape)), finite))
        return a.T
    return draw(_np_values(dtype, shape, finite))


@st.composite
def finite_complex_arrays(draw: Any, dtype: Any, shape: Any = None, finite: bool = False,
                          views: bool = True) -> np.ndarray:
    """:func:`arrays` with complex values always finite (real floats may still be NaN/inf
    unless ``finite``)."""
    if not isinstance(dtype, np.dtype):
        dtype = draw(dtype)
    return draw(arrays(dtype, shape, finite=finite or dtype.kind == "c", views=views))


# Error bounds for results that accumulate (reductions, matmul), per dtype:
# |got - ref| <= (RTOL + n * U) * magnitude + ATOL, n = the number of terms.
RTOL = {dt.float64: 1e-12, dt.complex128: 1e-12, dt.float32: 1e-5, dt.complex64: 1e-5,
        dt.float16: 2e-3, dt.bfloat16: 1.6e-2}
ATOL = {dt.float64: 1e-300, dt.complex128: 1e-300, dt.float32: 1e-37, dt.complex64: 1e-37,
        dt.float16: 6e-8, dt.bfloat16: 1e-37}
U = {dt.float64: 1.2e-16, dt.complex128: 2.3e-16, dt.float32: 6e-8, dt.complex64: 1.2e-7,
     dt.float16: 6e-8, dt.bfloat16: 6e-8}


def assert_matches(result: bz.Array, expected: np.ndarray | Any, dtype: Any = None) -> None:
    """Compare a braze result with a numpy reference: shape, dtype, values (stated tolerance)."""
    got = np.asarray(result)
    expected = np.asarray(expected)
    want_dtype = dt.to_dtype(dtype) if dtype is not None else None
    if want_dtype is not None:
        assert got.dtype == want_dtype, f"dtype {got.dtype} != {want_dtype}"
        if expected.dtype != want_dtype:
            with np.errstate(all="ignore"):
                expected = expected.astype(want_dtype)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    if got.dtype in TOL:
        rtol, atol = TOL[got.dtype]
        g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        e = expected.astype(g.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def assert_same(got: bz.Array, expected: Any, dtype: Any = None) -> None:
    """Exact equality of shape, dtype and values (NaN equal to NaN)."""
    g = np.asarray(got)
    expected = np.asarray(expected)
    want = expected.dtype if dtype is None else dtype
    assert got.dtype == want and g.dtype == want, f"dtype {g.dtype} != {want}"
    assert got.shape == expected.shape and g.shape == expected.shape, \
        f"shape {g.shape} != {expected.shape}"
    np.testing.assert_array_equal(upcast(g), upcast(expected.astype(want)))


CLANG_FORMAT_MAJOR = 23  # the kernel sources are formatted with this (the `test` extra's pin)


def assert_clang_format_clean(files: list[str]) -> None:
    """``files`` are as ``clang-format`` (the root's ``.clang-format``) writes them; skips
    where clang-format is missing or another major version (they format differently)."""
    import pytest

    exe = shutil.which("clang-format", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        pytest.skip("clang-format is not installed (pip install clang-format: the `test` extra)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)", out)
    if m is None or int(m.group(1)) != CLANG_FORMAT_MAJOR:
        pytest.skip(f"{exe} is {out.strip()!r}; the files are formatted with clang-format "
                    f"{CLANG_FORMAT_MAJOR} (the `test` extra)")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([exe, f"--style=file:{root / '.clang-format'}", "--dry-run", "--Werror",
                        *files], capture_output=True, text=True)
    assert r.returncode == 0, ("not clang-format-clean (fix: clang-format -i FILES):\n"
                               + r.stderr[-4000:])


def upcast(x: np.ndarray) -> np.ndarray:
    """float16/bfloat16 -> float32: how every backend computes low-precision floats."""
    return x.astype(np.float32) if dt.is_low_precision(x.dtype) else x


def elementwise_ops(arity: int, d: np.dtype) -> list[tuple[str, np.dtype]]:
    """(name, result dtype) of every elementwise op of the table with this arity whose
    compute dtype is ``d`` (casts excluded: their target is an attribute)."""
    from braze.graph.ops import OPS, elementwise_dtypes

    out = []
    for name, op in OPS.items():
        if op.kind != "elementwise" or op.arity != arity or name in ("cast", "bitcast"):
            continue
        try:
            compute, result = elementwise_dtypes(op, d)
        except TypeError:
            continue
        if compute == d:
            out.append((name, result))
    return out
