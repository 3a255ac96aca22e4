"""NumPy coverage: which of NumPy's everyday names braze has, regenerated from the live
namespaces.

The candidates are NumPy's public functions (``dir(numpy)`` without classes and
modules) and the basics of ``numpy.linalg``, ``numpy.fft`` and ``numpy.random``.
``EXCLUDED`` drops what is not everyday array code (printing and error settings,
datetimes, memory layout, deprecated names), each with its reason; ``ABSENT`` gives
the reason for every counted name braze lacks. ``numpy.ndarray``'s methods are
listed in a second table (``arrays/array.py`` owns them; not counted).

    python docs/numpy_coverage.py          # rewrite docs/numpy_coverage.md
    python docs/numpy_coverage.py --check  # exit 1 if the table is stale

``tests/test_numpy_names.py`` checks the table is current and the coverage >= 90 %.
"""

from __future__ import annotations

import inspect
import pathlib
import sys

import numpy as np

import braze as bz

TABLE = pathlib.Path(__file__).with_name("numpy_coverage.md")

_PRINT = "printing / error-state configuration, not array code"
_DATE = "datetime64 business-day API: braze has no datetime dtypes"
_LAYOUT = "memory layout / aliasing: braze arrays are immutable values without strides"
_META = "introspection of numpy itself"
EXCLUDED: dict[str, str] = {
    **dict.fromkeys(["array2string", "array_repr", "array_str", "format_float_positional",
                     "format_float_scientific", "get_printoptions", "set_printoptions",
                     "printoptions", "getbufsize", "setbufsize", "geterr", "seterr",
                     "geterrcall", "seterrcall", "base_repr", "binary_repr"], _PRINT),
    **dict.fromkeys(["busday_count", "busday_offset", "is_busday", "datetime_as_string",
                     "datetime_data", "isnat"], _DATE),
    **dict.fromkeys(["asfortranarray", "isfortran", "require", "may_share_memory",
                     "shares_memory", "nested_iters"], _LAYOUT),
    **dict.fromkeys(["show_config", "show_runtime", "get_include", "info", "test", "typename",
                     "mintypecode", "common_type", "min_scalar_type"], _META),
    "asmatrix": "numpy.matrix is discouraged by numpy itself", "bmat": "numpy.matrix",
    "row_stack": "deprecated in NumPy 2.0 (vstack)",
    "frompyfunc": "builds numpy ufuncs from Python functions",
    "fromregex": "regular-expression file parsing", "fromstring": "deprecated binary mode",
    "apply_over_axes": "rarely used; apply_along_axis is present",
    "einsum_path": "an optimizer report for numpy's einsum",
    "mask_indices": "rarely used (tril_indices / triu_indices are present)",
    "real_if_close": "value-dependent result dtype", "sort_complex": "complex sorting",
    "i0": "Bessel function (scipy.special)", "spacing": "rarely used ulp helper",
    "iterable": "a Python-object test, not array code",
}
ABSENT: dict[str, str] = {
    "gcd": "integer loop per element: no C-family expression or kernel helper yet",
    "lcm": "integer loop per element: no C-family expression or kernel helper yet",
    "bitwise_count": "popcount is not in the shared C-family layer yet",
    "packbits": "bit packing: no op record yet",
    "unpackbits": "bit packing: no op record yet",
    "roots": "needs general (non-symmetric) eigenvalues",
    "linalg.eig": "no general eigendecomposition library op (eigh covers symmetric input)",
    "linalg.eigvals": "no general eigendecomposition library op (eigvalsh covers symmetric)",
    "random.poisson": "needs rejection sampling (a data-dependent loop) in the kernel",
    "random.binomial": "needs rejection sampling (a data-dependent loop) in the kernel",
    "random.gamma": "needs rejection sampling (a data-dependent loop) in the kernel",
    "random.beta": "needs gamma samples",
    "random.multivariate_normal": "not written yet (a cholesky and a matmul of normals)",
}
SUBMODULES = {
    "linalg": ["cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
               "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr",
               "slogdet", "solve", "svd", "svdvals", "cross", "outer", "trace", "diagonal",
               "vector_norm", "vecdot", "matmul", "tensordot", "matrix_transpose"],
    "fft": ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
            "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift",
            "ifftshift"],
    "random": ["seed", "rand", "randn", "randint", "random", "random_sample", "uniform",
               "normal", "standard_normal", "exponential", "choice", "permutation", "shuffle",
               "default_rng", "poisson", "binomial", "gamma", "beta", "multivariate_normal"],
}


def numpy_functions() -> list[str]:
    """NumPy's public callables that are not classes or modules."""
    out = []
    for n in dir(np):
        if n.startswith("_"):
            continue
        obj = getattr(np, n)
        if callable(obj) and not isinstance(obj, type) and not inspect.ismodule(obj):
            out.append(n)
    return sorted(out)


def candidates() -> list[str]:
    """The counted names: main-namespace functions minus EXCLUDED, then submodule ones."""
    names = [n for n in numpy_functions() if n not in EXCLUDED]
    for mod, fns in SUBMODULES.items():
        names += [f"{mod}.{f}" for f in fns if hasattr(getattr(np, mod), f)]
    return names


def present(name: str) -> bool:
    obj: object = bz
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return callable(obj)


def methods() -> list[tuple[str, bool]]:
    names = [n for n in dir(np.ndarray) if not n.startswith("_")]
    return [(n, hasattr(bz.Array, n)) for n in names]


def coverage() -> tuple[int, int]:
    """(present, total) over the counted names."""
    names = candidates()
    return sum(present(n) for n in names), len(names)


def render() -> str:
    names = candidates()
    have, total = coverage()
    lines = [
        "# NumPy coverage",
        "",
        f"Generated by `python docs/numpy_coverage.py` (NumPy {np.__version__}); "
        "`tests/test_numpy_names.py` checks it is current.",
        "",
        f"**{have} of {total} counted names present ({100 * have / total:.1f} %).** "
        "Counted: NumPy's public functions (minus the exclusions below) and the basics of "
        "`numpy.linalg`, `numpy.fft` and `numpy.random`.",
        "",
        "| name | braze | note |",
        "|---|---|---|",
    ]
    for n in names:
        ok = present(n)
        note = "" if ok else ABSENT.get(n, "**missing: no reason given**")
        lines.append(f"| `{n}` | {'yes' if ok else 'no'} | {note} |")
    lines += ["", "## Not counted: not everyday array code", "", "| name | why |", "|---|---|"]
    lines += [f"| `{n}` | {r} |" for n, r in sorted(EXCLUDED.items())]
    ms = methods()
    lines += ["", "## `ndarray` methods (on `bz.Array`, `arrays/array.py`; not counted)", "",
              f"{sum(ok for _, ok in ms)} of {len(ms)} present.", "",
              "| method | braze |", "|---|---|"]
    lines += [f"| `.{n}` | {'yes' if ok else 'no'} |" for n, ok in ms]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if TABLE.exists() and TABLE.read_text() == text else 1)
    TABLE.write_text(text)
    have, total = coverage()
    print(f"{TABLE}: {have}/{total} ({100 * have / total:.1f} %)")
