"""Data-type functions and the namespace inspection API of the Array API standard.

``can_cast``, ``finfo``, ``iinfo``, ``isdtype``, ``result_type`` and
``__array_namespace_info__()`` (capabilities, default device and dtypes, devices).

>>> import braze as bz
>>> bz.result_type(bz.int8, bz.uint8), bz.isdtype(bz.float16, "real floating")
(dtype('int16'), True)
"""

from __future__ import annotations

import builtins
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from ..graph import dtypes as dt
from .array import _SCALARS, CPU, Array, Device

__array_api_version__ = "2024.12"


def _dtype_of(x: Any, op: str) -> np.dtype:
    if isinstance(x, Array):
        return x.dtype
    return dt.to_dtype(x, op)


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether ``from_`` (a dtype or an array) promotes to ``to`` without a cast.

    >>> import braze as bz
    >>> bz.can_cast(bz.int8, bz.int16), bz.can_cast(bz.float64, bz.float32)
    (True, False)
    """
    a, b = _dtype_of(from_, "can_cast"), dt.to_dtype(to, "can_cast")
    if a == b:
        return True
    try:
        return dt.promote(a, b, "can_cast") == b
    except TypeError:
        return False


class finfo_object(NamedTuple):
    """Machine limits of a floating-point dtype (see :func:`finfo`)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


class iinfo_object(NamedTuple):
    """Machine limits of an integer dtype (see :func:`iinfo`)."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


def finfo(type: Any, /) -> finfo_object:  # noqa: A002 - the standard's name
    """Limits of a floating-point dtype (complex: of its real part); bfloat16 included.

    >>> import braze as bz
    >>> bz.finfo(bz.float32).bits, bz.finfo(bz.bfloat16).eps
    (32, 0.0078125)
    """
    d = _dtype_of(type, "finfo")
    if not dt.is_floating(d):
        raise TypeError(f"finfo: {dt.name(d)} is not a floating-point dtype")
    real = dt.real_dtype(d)
    f = ml_dtypes.finfo(real) if real == dt.bfloat16 else np.finfo(real)
    return finfo_object(int(f.bits), float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal), real)


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002 - the standard's name
    """Limits of an integer dtype.

    >>> import braze as bz
    >>> bz.iinfo(bz.int8)[:3]
    (8, 127, -128)
    """
    d = _dtype_of(type, "iinfo")
    if not dt.is_integer(d):
        raise TypeError(f"iinfo: {dt.name(d)} is not an integer dtype")
    i = np.iinfo(d)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), d)


_KINDS = {
    "bool": lambda d: d == dt.bool_,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": dt.is_integer,
    "real floating": dt.is_real_floating,
    "complex floating": dt.is_complex,
    "numeric": lambda d: d != dt.bool_,
}


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name ('integral', 'real floating',
    ...) or a tuple of them.

    >>> import braze as bz
    >>> bz.isdtype(bz.int32, ("integral", bz.float32)), bz.isdtype(bz.bool, "numeric")
    (True, False)
    """
    if not isinstance(dtype, np.dtype) or dtype not in dt.ALL:
        raise TypeError(f"isdtype: expected a braze dtype, got {dtype!r}")
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {list(_KINDS)}")
        return builtins.bool(_KINDS[kind](dtype))
    return dtype == dt.to_dtype(kind, "isdtype")


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype the standard's promotion rules give for arrays, dtypes and Python scalars
    (scalars are weak: they take the dtype of the arrays they meet).

    >>> import braze as bz
    >>> bz.result_type(bz.float16, 1.0), bz.result_type(bz.asarray([1], dtype=bz.int8), 2)
    (dtype('float16'), dtype('int8'))
    """
    typed = [_dtype_of(a, "result_type") for a in arrays_and_dtypes
             if type(a) not in _SCALARS]
    scalars = [a for a in arrays_and_dtypes if type(a) in _SCALARS]
    if not typed:
        if not scalars:
            raise ValueError("result_type: at least one array, dtype or scalar is required")
        from .creation import asarray

        typed = [asarray(scalars[0]).dtype]
        scalars = scalars[1:]
    out = dt.result_type(*typed)
    for s in scalars:
        out = dt.promote(out, dt.scalar_dtype(s, out, "result_type"), "result_type")
    return out


class Info:
    """What :func:`__array_namespace_info__` returns: braze's capabilities, devices and
    default dtypes.

    >>> import braze as bz
    >>> bz.__array_namespace_info__().default_dtypes()["real floating"]
    dtype('float32')
    """

    def capabilities(self) -> dict[str, Any]:
        """Optional features: boolean indexing and data-dependent shapes (they evaluate
        the mask / input), at most 64 dimensions.

        >>> import braze as bz
        >>> bz.__array_namespace_info__().capabilities()["boolean indexing"]
        True
        """
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> Device:
        """The default device (host memory).

        >>> import braze as bz
        >>> bz.__array_namespace_info__().default_device()
        Device('cpu')
        """
        return CPU

    def devices(self) -> list[Device]:
        """Every device braze can place arrays on.

        >>> import braze as bz
        >>> bz.__array_namespace_info__().devices()
        [Device('cpu')]
        """
        return [CPU]

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        """Default dtypes: float32 / complex64 (braze's choice), int64 integers and indices.

        >>> import braze as bz
        >>> bz.__array_namespace_info__().default_dtypes()["indexing"]
        dtype('int64')
        """
        _check_device(device)
        return {"real floating": dt.DEFAULT_FLOAT, "complex floating": dt.DEFAULT_COMPLEX,
                "integral": dt.DEFAULT_INT, "indexing": dt.DEFAULT_INDEX}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        """The standard's dtypes by name, optionally of one ``kind`` (as in
        :func:`isdtype`). braze's extra float16 and bfloat16 are not listed: consumers
        of this function expect the standard's names only.

        >>> import braze as bz
        >>> list(bz.__array_namespace_info__().dtypes(kind="unsigned integer"))
        ['uint8', 'uint16', 'uint32', 'uint64']
        """
        _check_device(device)
        out = {dt.name(d): d for d in dt.ALL if d not in (dt.float16, dt.bfloat16)}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if isdtype(d, kind)}


def _check_device(device: Any) -> None:
    if device is not None and device not in (CPU, "cpu"):
        raise ValueError(f"unknown device {device!r}; available: [{CPU!r}]")


def __array_namespace_info__() -> Info:
    """The namespace inspection object of the Array API standard.

    >>> import braze as bz
    >>> bz.__array_namespace_info__().devices()
    [Device('cpu')]
    """
    return Info()


__all__ = ["__array_api_version__", "__array_namespace_info__", "can_cast", "finfo", "iinfo",
           "isdtype", "result_type"]
