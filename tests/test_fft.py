"""``bz.fft`` compared with ``numpy.fft``: every function of the standard's fft extension,
``n`` / ``s`` cropping and padding, axes, the three norms, result dtypes (float32 ->
complex64, float64 -> complex128, c2r transforms real), helpers, errors, laziness.

Tolerances: complex64/float32 1e-4 absolute relative to the input's scale (single-precision
FFTs of up to 8 points), float64 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import arrays, shapes

NORMS = st.sampled_from(["backward", "ortho", "forward"])


def close(got, want, dtype, scale=1.0) -> None:
    g = np.asarray(got)
    want = np.asarray(want)
    assert g.shape == want.shape, f"{g.shape} != {want.shape}"
    assert got.dtype == dtype, f"{got.dtype} != {dtype}"
    tol = 1e-10 if dtype in (dt.float64, dt.complex128) else 1e-4
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol * scale)


def complex_of(d):
    return dt.complex128 if d in (dt.float64, dt.complex128) else dt.complex64


def real_of(d):
    return dt.float64 if d in (dt.float64, dt.complex128) else dt.float32


@given(arrays(st.sampled_from([dt.float32, dt.float64, dt.complex64, dt.complex128]),
              shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), finite=True),
       NORMS, st.data())
def test_complex_transforms(x, norm, data):
    scale = 1 + float(np.abs(x).max(initial=0)) * x.size
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.none() | st.integers(1, 6))
    c = complex_of(x.dtype)
    b = bz.asarray(x)
    close(bz.fft.fft(b, n=n, axis=axis, norm=norm), np.fft.fft(x, n=n, axis=axis, norm=norm),
          c, scale)
    close(bz.fft.ifft(b, n=n, axis=axis, norm=norm), np.fft.ifft(x, n=n, axis=axis, norm=norm),
          c, scale)
    close(bz.fft.fftn(b, norm=norm), np.fft.fftn(x, norm=norm), c, scale)
    axes = data.draw(st.permutations(range(x.ndim)))[:data.draw(st.integers(1, x.ndim))]
    s = [data.draw(st.integers(1, 5)) for _ in axes]
    close(bz.fft.ifftn(b, s=s, axes=axes, norm=norm),
          np.fft.ifftn(x, s=s, axes=axes, norm=norm), c, scale)
    m = x.shape[axis]
    nn = n if n is not None else 2 * (m - 1)
    if nn >= 1:
        close(bz.fft.irfft(b, n=n, axis=axis, norm=norm),
              np.fft.irfft(x, n=n, axis=axis, norm=norm), real_of(x.dtype), scale)
        close(bz.fft.hfft(b, n=n, axis=axis, norm=norm),
              np.fft.hfft(x, n=n, axis=axis, norm=norm), real_of(x.dtype), scale)
        close(bz.fft.irfftn(b, s=s, axes=axes, norm=norm),
              np.fft.irfftn(x, s=s, axes=axes, norm=norm), real_of(x.dtype), scale)


@given(arrays(st.sampled_from([dt.float32, dt.float64, dt.int16, dt.float16]),
              shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), finite=True),
       NORMS, st.data())
def test_real_transforms(x, norm, data):
    scale = 1 + float(np.abs(x.astype(np.float64)).max(initial=0)) * x.size
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.none() | st.integers(1, 6))
    c = dt.complex128 if x.dtype == dt.float64 else dt.complex64
    xf = x.astype(np.float64 if x.dtype == dt.float64 else np.float32)
    b = bz.asarray(x)
    close(bz.fft.rfft(b, n=n, axis=axis, norm=norm), np.fft.rfft(xf, n=n, axis=axis, norm=norm),
          c, scale)
    close(bz.fft.ihfft(b, n=n, axis=axis, norm=norm),
          np.fft.ihfft(xf, n=n, axis=axis, norm=norm), c, scale)
    close(bz.fft.rfftn(b, norm=norm), np.fft.rfftn(xf, norm=norm), c, scale)
    assert bz.fft.fft(b).dtype == c


@given(st.integers(1, 9), st.sampled_from([1.0, 0.5, 3.0]), st.sampled_from([None, dt.float64]))
def test_frequencies_and_shifts(n, d, dtype):
    want_dtype = dtype or dt.float32
    close(bz.fft.fftfreq(n, d=d, dtype=dtype), np.fft.fftfreq(n, d), want_dtype)
    close(bz.fft.rfftfreq(n, d=d, dtype=dtype), np.fft.rfftfreq(n, d), want_dtype)
    x = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    close(bz.fft.fftshift(bz.asarray(x)), np.fft.fftshift(x), dt.float64)
    close(bz.fft.ifftshift(bz.asarray(x), axes=0), np.fft.ifftshift(x, axes=0), dt.float64)
    close(bz.fft.fftshift(bz.asarray(x), axes=(1,)), np.fft.fftshift(x, axes=(1,)), dt.float64)


def test_errors_and_laziness():
    with pytest.raises(ValueError, match="fft.fft: needs at least 1 dimension"):
        bz.fft.fft(bz.asarray(1.0))
    with pytest.raises(ValueError, match="fft.fft: norm"):
        bz.fft.fft(bz.ones(4), norm="bad")
    with pytest.raises(TypeError, match="fft.rfft: expected a real dtype"):
        bz.fft.rfft(bz.ones(4, dtype=bz.complex64))
    with pytest.raises(ValueError, match="fft.fftn: s"):
        bz.fft.fftn(bz.ones((2, 2)), s=(2,), axes=(0, 1))
    with pytest.raises(TypeError, match="fft.fftfreq"):
        bz.fft.fftfreq(4, dtype=bz.int32)
    x = np.arange(12.0).reshape(3, 4)
    close(bz.fft.fftn(bz.asarray(x), s=(-1, 6)), np.fft.fftn(x, s=(3, 6), axes=(0, 1)),
          dt.complex128)
    close(bz.fft.irfftn(bz.asarray(x), s=(2, -1)), np.fft.irfftn(x, s=(2, 6), axes=(0, 1)),
          dt.float64, scale=100)
    y = bz.fft.fft(bz.ones(8) * 2)
    assert y._node.data is None and y.shape == (8,)
