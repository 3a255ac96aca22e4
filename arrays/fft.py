"""Discrete Fourier transforms (``bz.fft``): the Array API standard's fft extension.

Transforms are lazy library ops run through ``numpy.fft`` on every backend.
Single precision stays single precision (float32 -> complex64); integer and
bool inputs are computed in float32; float16/bfloat16 in float32.

>>> import braze as bz
>>> bz.fft.fft(bz.asarray([1.0, 0.0, 0.0, 0.0])).tolist()
[(1+0j), (1+0j), (1+0j), (1+0j)]
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import OPS
from .array import Array, as_array, astype
from .manipulation import roll
from .reductions import normalize_axes

Norm = Literal["backward", "ortho", "forward"]


def _prep(x: Any, name: str, want: str) -> Array:
    x = as_array(x, "fft." + name)
    if x.ndim == 0:
        raise ValueError(f"fft.{name}: needs at least 1 dimension, got a 0-d array")
    if want == "complex":
        if not dt.is_complex(x.dtype):
            x = astype(x, dt.complex_dtype(dt.float_result(x.dtype)) if dt.is_floating(x.dtype)
                       and x.dtype == dt.float64 else dt.DEFAULT_COMPLEX)
    else:
        if dt.is_complex(x.dtype):
            raise TypeError(f"fft.{name}: expected a real dtype, got {dt.name(x.dtype)}")
        if x.dtype != dt.float64:
            x = astype(x, dt.float32)
    return x


def _norm(norm: str, name: str) -> str:
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f"fft.{name}: norm must be 'backward', 'ortho' or 'forward', "
                         f"got {norm!r}")
    return norm


def _nd(op_name: str, x: Any, s: Any, axes: Any, norm: str, want: str,
        inverse_real: bool = False, name: str | None = None) -> Array:
    name = name or op_name
    x = _prep(x, name, want)
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    ax = tuple(normalize_axes(a, x.ndim, "fft." + name)[0] for a in axes)
    if len(set(ax)) != len(ax):
        raise ValueError(f"fft.{name}: repeated axis in {axes}")
    if s is None:
        s = [x.shape[a] for a in ax]
        if inverse_real:
            s[-1] = 2 * (x.shape[ax[-1]] - 1)
    s = tuple(operator.index(n) for n in s)
    if len(s) != len(ax):
        raise ValueError(f"fft.{name}: s {s} and axes {ax} differ in length")
    # -1 keeps the input's length along that axis (the standard's convention)
    s = tuple((2 * (x.shape[a] - 1) if inverse_real and i == len(ax) - 1 else x.shape[a])
              if n == -1 else n for i, (n, a) in enumerate(zip(s, ax)))
    if len(s) != len(ax):
        raise ValueError(f"fft.{name}: s {s} and axes {ax} differ in length")
    if any(n < 1 for n in s):
        raise ValueError(f"fft.{name}: invalid number of points {s}")
    op = OPS["fft." + op_name]
    attrs = {"s": s, "axes": ax, "norm": _norm(norm, name)}
    shape, dtype = op.infer((x.shape,), (x.dtype,), attrs)  # type: ignore[misc]
    return Array(Node(op, (x._node,), attrs, shape, dtype))


def _one(name: str, x: Any, n: int | None, axis: int, norm: str, want: str,
         inverse_real: bool = False) -> Array:
    return _nd(name + "n", x, None if n is None else (n,), (axis,), norm, want, inverse_real,
               name)


def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """One-dimensional discrete Fourier transform along ``axis`` (``n``: crop or zero-pad).

    >>> import braze as bz
    >>> bz.fft.fft(bz.asarray([1.0, 1.0])).tolist()
    [(2+0j), 0j]
    """
    return _one("fft", x, n, axis, norm, "complex")


def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
         ) -> Array:
    """Inverse of :func:`fft`.

    >>> import braze as bz
    >>> bz.fft.ifft(bz.asarray([2.0, 0.0])).tolist()
    [(1+0j), (1+0j)]
    """
    return _one("ifft", x, n, axis, norm, "complex")


def fftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: Norm = "backward") -> Array:
    """n-dimensional DFT over ``axes`` (all by default).

    >>> import braze as bz
    >>> bz.fft.fftn(bz.ones((2, 2))).tolist()
    [[(4+0j), 0j], [0j, 0j]]
    """
    return _nd("fftn", x, s, axes, norm, "complex")


def ifftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Array:
    """Inverse of :func:`fftn`.

    >>> import braze as bz
    >>> bz.real(bz.fft.ifftn(bz.asarray([[4.0, 0.0], [0.0, 0.0]]))).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _nd("ifftn", x, s, axes, norm, "complex")


def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
         ) -> Array:
    """DFT of real input: the ``n // 2 + 1`` non-negative frequencies.

    >>> import braze as bz
    >>> bz.fft.rfft(bz.asarray([1.0, 1.0, 1.0, 1.0])).tolist()
    [(4+0j), 0j, 0j]
    """
    return _one("rfft", x, n, axis, norm, "real")


def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
          ) -> Array:
    """Inverse of :func:`rfft` (``n`` defaults to ``2 * (m - 1)``); real result.

    >>> import braze as bz
    >>> bz.fft.irfft(bz.asarray([4.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _one("irfft", x, n, axis, norm, "complex", inverse_real=True)


def rfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Array:
    """n-dimensional DFT of real input (last axis halved).

    >>> import braze as bz
    >>> bz.fft.rfftn(bz.ones((2, 2))).shape
    (2, 2)
    """
    return _nd("rfftn", x, s, axes, norm, "real")


def irfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: Norm = "backward") -> Array:
    """Inverse of :func:`rfftn`; real result.

    >>> import braze as bz
    >>> bz.fft.irfftn(bz.asarray([[4.0, 0.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _nd("irfftn", x, s, axes, norm, "complex", inverse_real=True)


def _herm(name: str, x: Any, n: int | None, axis: int, norm: str, want: str) -> Array:
    x = _prep(x, name, want)
    (ax,) = normalize_axes(axis, x.ndim, "fft." + name)
    if n is None:
        n = 2 * (x.shape[ax] - 1) if name == "hfft" else x.shape[ax]
    if n < 1:
        raise ValueError(f"fft.{name}: invalid number of points {n}")
    op = OPS["fft." + name]
    attrs = {"n": operator.index(n), "axis": ax, "norm": _norm(norm, name)}
    shape, dtype = op.infer((x.shape,), (x.dtype,), attrs)  # type: ignore[misc]
    return Array(Node(op, (x._node,), attrs, shape, dtype))


def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
         ) -> Array:
    """DFT of a Hermitian-symmetric signal given by its first half; real result.

    >>> import braze as bz
    >>> bz.fft.hfft(bz.asarray([1.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _herm("hfft", x, n, axis, norm, "complex")


def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward"
          ) -> Array:
    """Inverse of :func:`hfft` for real input.

    >>> import braze as bz
    >>> bz.real(bz.fft.ihfft(bz.asarray([1.0, 1.0, 1.0, 1.0]))).tolist()
    [1.0, 0.0, 0.0]
    """
    return _herm("ihfft", x, n, axis, norm, "real")


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Array:
    """Sample frequencies of :func:`fft` for ``n`` points spaced ``d`` apart.

    >>> import braze as bz
    >>> bz.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    want = dt.DEFAULT_FLOAT if dtype is None else dt.to_dtype(dtype, "fft.fftfreq")
    if not dt.is_real_floating(want):
        raise TypeError(f"fft.fftfreq: dtype must be real floating, got {dt.name(want)}")
    return Array(constant(np.fft.fftfreq(operator.index(n), d=d).astype(want)))


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Array:
    """Sample frequencies of :func:`rfft` (non-negative ones only).

    >>> import braze as bz
    >>> bz.fft.rfftfreq(4).tolist()
    [0.0, 0.25, 0.5]
    """
    want = dt.DEFAULT_FLOAT if dtype is None else dt.to_dtype(dtype, "fft.rfftfreq")
    if not dt.is_real_floating(want):
        raise TypeError(f"fft.rfftfreq: dtype must be real floating, got {dt.name(want)}")
    return Array(constant(np.fft.rfftfreq(operator.index(n), d=d).astype(want)))


def _shift(x: Any, axes: Any, sign: int, name: str) -> Array:
    x = as_array(x, "fft." + name)
    ax = normalize_axes(axes, x.ndim, "fft." + name)
    if not ax:
        return x
    shifts = tuple((x.shape[a] // 2) if sign > 0 else -(x.shape[a] // 2) for a in ax)
    return roll(x, shifts, axis=ax)


def fftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """Move the zero frequency to the center (lazy roll).

    >>> import braze as bz
    >>> bz.fft.fftshift(bz.fft.fftfreq(4)).tolist()
    [-0.5, -0.25, 0.0, 0.25]
    """
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """Inverse of :func:`fftshift`.

    >>> import braze as bz
    >>> bz.fft.ifftshift(bz.asarray([-0.5, -0.25, 0.0, 0.25])).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    return _shift(x, axes, -1, "ifftshift")


def fft2(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: Norm = "backward") -> Array:
    """2-d DFT over ``axes`` (the last two by default): :func:`fftn` over two axes.

    >>> import braze as bz
    >>> bz.fft.fft2(bz.ones((2, 2))).tolist()
    [[(4+0j), 0j], [0j, 0j]]
    """
    return fftn(x, s=s, axes=axes, norm=norm)


def ifft2(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: Norm = "backward") -> Array:
    """Inverse of :func:`fft2`.

    >>> import braze as bz
    >>> bz.real(bz.fft.ifft2(bz.asarray([[4.0, 0.0], [0.0, 0.0]]))).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return ifftn(x, s=s, axes=axes, norm=norm)


def rfft2(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: Norm = "backward") -> Array:
    """2-d DFT of real input (the last axis halved): :func:`rfftn` over two axes.

    >>> import braze as bz
    >>> bz.fft.rfft2(bz.ones((2, 2))).shape
    (2, 2)
    """
    return rfftn(x, s=s, axes=axes, norm=norm)


def irfft2(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: Norm = "backward") -> Array:
    """Inverse of :func:`rfft2`.

    >>> import braze as bz
    >>> bz.fft.irfft2(bz.fft.rfft2(bz.ones((2, 2)))).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return irfftn(x, s=s, axes=axes, norm=norm)


__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift", "fft2", "ifft2", "rfft2", "irfft2"]
