"""Data types and type promotion (Python Array API 2024.12 rules).

braze dtypes *are* ``numpy.dtype`` objects (bfloat16 comes from ``ml_dtypes``),
so ``bz.float32 == np.float32`` and arrays cross to numpy without translation.

>>> result_type(int8, uint8)
dtype('int16')
"""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

# annotated as plain np.dtype: code assigns any of them to one variable
bool_: np.dtype = np.dtype(np.bool_)
int8: np.dtype = np.dtype(np.int8)
int16: np.dtype = np.dtype(np.int16)
int32: np.dtype = np.dtype(np.int32)
int64: np.dtype = np.dtype(np.int64)
uint8: np.dtype = np.dtype(np.uint8)
uint16: np.dtype = np.dtype(np.uint16)
uint32: np.dtype = np.dtype(np.uint32)
uint64: np.dtype = np.dtype(np.uint64)
float16: np.dtype = np.dtype(np.float16)
float32: np.dtype = np.dtype(np.float32)
float64: np.dtype = np.dtype(np.float64)
bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
complex64: np.dtype = np.dtype(np.complex64)
complex128: np.dtype = np.dtype(np.complex128)

DEFAULT_FLOAT = float32
DEFAULT_INT = int64
DEFAULT_INDEX = int64
DEFAULT_COMPLEX = complex64

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
INTEGER = SIGNED + UNSIGNED
REAL_FLOAT = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
FLOATING = REAL_FLOAT + COMPLEX
NUMERIC = INTEGER + FLOATING
ALL = (bool_,) + NUMERIC

_NAMES = {d: d.name for d in ALL}
_NAMES[bfloat16] = "bfloat16"
_BY_NAME = {name: d for d, name in _NAMES.items()}
_BY_NAME["bool"] = bool_


def name(dtype: np.dtype) -> str:
    """Canonical braze name of a dtype.

    >>> name(bfloat16)
    'bfloat16'
    """
    return _NAMES[dtype]


def to_dtype(obj: object, what: str = "dtype") -> np.dtype:
    """Normalize a user dtype (a braze/numpy dtype, a name, a Python type) to a braze dtype.

    >>> to_dtype("float32") == float32, to_dtype(float) == float32
    (True, True)
    """
    if isinstance(obj, np.dtype) and obj in _NAMES:
        return obj
    if obj is builtins.float:
        return DEFAULT_FLOAT
    if obj is builtins.int:
        return DEFAULT_INT
    if obj is builtins.bool:
        return bool_
    if obj is builtins.complex:
        return DEFAULT_COMPLEX
    if isinstance(obj, str) and obj in _BY_NAME:
        return _BY_NAME[obj]
    try:
        d = np.dtype(obj)  # type: ignore[call-overload]
    except TypeError:
        d = None
    if d is not None and d in _NAMES:
        return d
    raise TypeError(f"{what}: unsupported dtype {obj!r}; braze supports {sorted(_BY_NAME)}")


def is_bool(d: np.dtype) -> bool:
    return d == bool_


def is_integer(d: np.dtype) -> bool:
    return d.kind in "iu"


def is_unsigned(d: np.dtype) -> bool:
    return d.kind == "u"


def is_floating(d: np.dtype) -> bool:
    """Real or complex floating point."""
    return d.kind in "fc" or d == bfloat16


def is_real_floating(d: np.dtype) -> bool:
    return d.kind == "f" or d == bfloat16


def is_complex(d: np.dtype) -> bool:
    return d.kind == "c"


def is_numeric(d: np.dtype) -> bool:
    return d != bool_


def is_low_precision(d: np.dtype) -> bool:
    """float16 / bfloat16: computed in float32 by every backend, rounded at the end."""
    return d == float16 or d == bfloat16


def real_dtype(d: np.dtype) -> np.dtype:
    """The real counterpart of a complex dtype (identity for real dtypes)."""
    return {complex64: float32, complex128: float64}.get(d, d)


def complex_dtype(d: np.dtype) -> np.dtype:
    """The complex dtype whose parts have real float dtype ``d``."""
    return complex128 if d == float64 else complex64


def float_result(d: np.dtype) -> np.dtype:
    """The dtype of a floating-point function applied to ``d`` (ints/bools -> default float)."""
    return d if is_floating(d) else DEFAULT_FLOAT


# Binary promotion. Within a kind numpy's table equals the standard's; across kinds
# (which the standard leaves open) we follow numpy 2, except that bool/int with a float
# never widens past the float operand, and uint64 with a signed int is a TypeError
# rather than numpy's silent float64.
_PROMOTE: dict[tuple[np.dtype, np.dtype], np.dtype] = {}


def _build_table() -> None:
    for a in ALL:
        for b in ALL:
            if (a == uint64 and b in SIGNED) or (b == uint64 and a in SIGNED):
                continue
            if bfloat16 in (a, b) and a != b:
                # bfloat16 meets float16 or float32 at float32; wider types win.
                other = b if a == bfloat16 else a
                na = float32 if other in (bool_, float16) + INTEGER else other
                _PROMOTE[a, b] = np.dtype(np.result_type(float32, na))
            else:
                _PROMOTE[a, b] = np.dtype(np.result_type(a, b))
    for f in FLOATING:
        for i in (bool_,) + INTEGER:
            _PROMOTE[f, i] = _PROMOTE[i, f] = f


_build_table()


def promote(a: np.dtype, b: np.dtype, op: str = "op") -> np.dtype:
    """Result dtype of a binary op on two arrays.

    >>> promote(int32, float16)
    dtype('float16')
    """
    try:
        return _PROMOTE[a, b]
    except KeyError:
        raise TypeError(
            f"{op}: no type promotion between {name(a)} and {name(b)} "
            "(cast one operand explicitly with astype)"
        ) from None


def result_type(*dtypes: np.dtype) -> np.dtype:
    """Promote any number of dtypes.

    >>> result_type(uint8, int8, float32)
    dtype('float32')
    """
    if not dtypes:
        raise ValueError("result_type: at least one dtype is required")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote(out, d, "result_type")
    return out


def scalar_dtype(value: object, other: np.dtype, op: str = "op") -> np.dtype:
    """Dtype a Python scalar takes next to an array of dtype ``other`` (scalars are weak).

    >>> scalar_dtype(1.5, int32), scalar_dtype(2, float16), scalar_dtype(True, int8)
    (dtype('float32'), dtype('float16'), dtype('int8'))
    """
    if isinstance(value, builtins.bool):
        return other
    if isinstance(value, builtins.int):
        if other == bool_:
            info = np.iinfo(DEFAULT_INT)
            if not info.min <= value <= info.max:
                raise OverflowError(f"{op}: Python int {value} is out of bounds for "
                                    f"{name(DEFAULT_INT)}")
            return DEFAULT_INT
        if is_integer(other):
            info = np.iinfo(other)
            if not info.min <= value <= info.max:
                raise OverflowError(
                    f"{op}: Python int {value} is out of bounds for {name(other)}"
                )
        return other
    if isinstance(value, builtins.float):
        return other if is_floating(other) else DEFAULT_FLOAT
    if isinstance(value, builtins.complex):
        if is_complex(other):
            return other
        return complex128 if other == float64 else DEFAULT_COMPLEX
    raise TypeError(f"{op}: expected an array or a Python scalar, got {type(value).__name__}")
