"""FFT library ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import Infer, library_op


# fft (complex or real floating inputs, float32 stays single precision)
def _fft_ref(fn: str) -> Callable[..., Any]:
    def ref(x, *, s, axes, norm):  # np.fft looked up here: numpy loads it on first use
        return getattr(np.fft, fn)(x, s=s, axes=axes, norm=norm)

    return ref


def _fft_infer(kind: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        shape, d = list(shapes[0]), dtypes[0]
        s, axes = attrs["s"], attrs["axes"]
        for n, a in zip(s, axes):
            shape[a] = n
        if kind == "r2c":
            shape[axes[-1]] = s[-1] // 2 + 1
            return tuple(shape), dt.complex_dtype(d)
        if kind == "c2r":
            return tuple(shape), dt.real_dtype(d)
        return tuple(shape), d

    return infer


for _fn, _kind in [("fftn", "c2c"), ("ifftn", "c2c"), ("rfftn", "r2c"), ("irfftn", "c2r")]:
    library_op("fft." + _fn, _fft_ref(_fn), _fft_infer(_kind), "numeric")


def _hfft_ref(x, *, n, axis, norm):
    return np.fft.hfft(x, n=n, axis=axis, norm=norm)


def _ihfft_ref(x, *, n, axis, norm):
    return np.fft.ihfft(x, n=n, axis=axis, norm=norm)


def _hfft_infer(shapes, dtypes, attrs):
    shape = list(shapes[0])
    shape[attrs["axis"]] = attrs["n"]
    return tuple(shape), dt.real_dtype(dtypes[0])


def _ihfft_infer(shapes, dtypes, attrs):
    shape = list(shapes[0])
    shape[attrs["axis"]] = attrs["n"] // 2 + 1
    return tuple(shape), dt.complex_dtype(dtypes[0])


library_op("fft.hfft", _hfft_ref, _hfft_infer, "numeric")
library_op("fft.ihfft", _ihfft_ref, _ihfft_infer, "numeric")
