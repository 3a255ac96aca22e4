"""The ``bz`` namespace as a Python Array API 2024.12 namespace: every name of the
standard exists (main namespace, ``linalg``, ``fft``, array attributes/methods);
``__array_namespace_info__``; the data-type functions (``can_cast``, ``finfo``,
``iinfo``, ``isdtype``, ``result_type``) against the standard's promotion table;
``astype(copy=)``, ``from_dlpack(device=, copy=)``; the new manipulation and statistics
functions (``roll``, ``tile``, ``repeat``, ``unstack``, ``diff``, ``cumulative_prod``)
against numpy. Exact comparisons except float products (helpers.assert_matches).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from .helpers import ALL_DTYPES, arrays, assert_matches, shapes, upcast

MAIN = """abs acos acosh add all any arange argmax argmin argsort asarray asin asinh astype atan
atan2 atanh bitwise_and bitwise_invert bitwise_left_shift bitwise_or bitwise_right_shift
bitwise_xor bool broadcast_arrays broadcast_shapes broadcast_to can_cast ceil clip complex128
complex64 concat conj copysign cos cosh count_nonzero cumulative_prod cumulative_sum diff
divide e empty empty_like equal exp expand_dims expm1 eye finfo flip float32 float64 floor
floor_divide from_dlpack full full_like greater greater_equal hypot iinfo imag inf int16
int32 int64 int8 isdtype isfinite isinf isnan less less_equal linspace log log10 log1p log2
logaddexp logical_and logical_not logical_or logical_xor matmul matrix_transpose max maximum
mean meshgrid min minimum moveaxis multiply nan negative newaxis nextafter nonzero not_equal
ones ones_like permute_dims pi positive pow prod real reciprocal remainder repeat reshape
result_type roll round searchsorted sign signbit sin sinh sort sqrt square squeeze stack std
subtract sum take take_along_axis tan tanh tensordot tile tril triu trunc uint16 uint32
uint64 uint8 unique_all unique_counts unique_inverse unique_values unstack var vecdot where
zeros zeros_like __array_api_version__ __array_namespace_info__ linalg fft""".split()
LINALG = """cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power
matrix_rank matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot
vector_norm""".split()
FFT = """fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift
ifftshift""".split()
ARRAY = """__abs__ __add__ __and__ __array_namespace__ __bool__ __complex__ __dlpack__
__dlpack_device__ __eq__ __float__ __floordiv__ __ge__ __getitem__ __gt__ __index__
__int__ __invert__ __le__ __lshift__ __lt__ __matmul__ __mod__ __mul__ __ne__ __neg__
__or__ __pos__ __pow__ __rshift__ __setitem__ __sub__ __truediv__ __xor__ to_device
dtype device mT ndim shape size T""".split()


def test_every_standard_name_exists():
    assert bz.__array_api_version__ == "2024.12"
    assert [n for n in MAIN if not hasattr(bz, n)] == []
    assert [n for n in LINALG if not hasattr(bz.linalg, n)] == []
    assert [n for n in FFT if not hasattr(bz.fft, n)] == []
    assert [n for n in ARRAY if not hasattr(bz.Array, n)] == []
    assert bz.ones(2).__array_namespace__() is bz


# Where NumPy programs pass a keyword-only parameter of the standard positionally
# (np.roll(x, 1, 0)), braze takes it either way: a superset, every standard call works.
NUMPY_POSITIONAL = {"roll"}


def _positional_superset(p1: list, p2: list) -> bool:
    """p2 is p1 with some keyword-only parameters made positional-or-keyword."""
    kw, pk = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    return [n for n, _ in p1] == [n for n, _ in p2] and all(
        k1 == k2 or (k1 == kw and k2 == pk) for (_, k1), (_, k2) in zip(p1, p2))


def test_signatures_match_array_api_strict():
    xp = pytest.importorskip("array_api_strict")
    bad = []
    for mod, ours, names in ((xp, bz, MAIN), (xp.linalg, bz.linalg, LINALG),
                             (xp.fft, bz.fft, FFT)):
        for n in names:
            f1, f2 = getattr(mod, n, None), getattr(ours, n)
            if not callable(f1) or isinstance(f1, type) or n.startswith("__"):
                continue
            p1 = [(p.name, p.kind) for p in inspect.signature(f1).parameters.values()]
            p2 = [(p.name, p.kind) for p in inspect.signature(f2).parameters.values()
                  if not p.name.startswith("_")]
            if p1 != p2 and not (n in NUMPY_POSITIONAL and _positional_superset(p1, p2)):
                bad.append(n)
    strict_array = type(xp.asarray([1.0]))
    for n in ARRAY:
        f1, f2 = getattr(strict_array, n), getattr(bz.Array, n)
        if not callable(f1) or n == "to_device":  # strict: `stream` not keyword-only, unlike
            continue                                # the standard's (device, /, *, stream)
        p1 = [(p.name, p.kind) for p in inspect.signature(f1).parameters.values()][1:]
        p2 = [(p.name, p.kind) for p in inspect.signature(f2).parameters.values()][1:]
        if p1 != p2:
            bad.append(n)
    assert bad == []


def test_namespace_info():
    info = bz.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["boolean indexing"] and caps["data-dependent shapes"]
    assert info.default_device() == bz.ones(1).device and info.devices() == [info.default_device()]
    d = info.default_dtypes(device=info.default_device())
    assert d == {"real floating": bz.float32, "complex floating": bz.complex64,
                 "integral": bz.int64, "indexing": bz.int64}
    assert set(info.dtypes().values()) == set(dt.ALL) - {dt.float16, dt.bfloat16}
    assert list(info.dtypes(kind="complex floating")) == ["complex64", "complex128"]
    assert set(info.dtypes(kind=("bool", "signed integer"))) == {"bool", "int8", "int16",
                                                                  "int32", "int64"}
    with pytest.raises(ValueError, match="unknown device"):
        info.dtypes(device="gpu")


DT = st.sampled_from(ALL_DTYPES)


@given(DT, DT)
def test_can_cast_and_result_type_follow_promotion(a, b):
    try:
        r = dt.promote(a, b)
    except TypeError:
        with pytest.raises(TypeError):
            bz.result_type(a, b)
        assert not bz.can_cast(a, b) or a == b
        return
    assert bz.result_type(a, b) == r == bz.result_type(bz.zeros(1, dtype=a), b)
    assert bz.can_cast(a, b) == (r == b)
    assert bz.can_cast(bz.zeros(1, dtype=a), a)


@given(DT, st.sampled_from([True, 1, 1.0, 1j]))
def test_result_type_with_python_scalars(a, s):
    try:
        want = (bz.zeros(1, dtype=a) + s).dtype
    except TypeError:
        with pytest.raises(TypeError):
            bz.result_type(a, s)
        return
    assert bz.result_type(a, s) == want == bz.result_type(s, bz.zeros((), dtype=a))
    assert bz.result_type(1, 2.0) == bz.float32


@given(DT)
def test_finfo_iinfo_isdtype(d):
    if dt.is_floating(d):
        f = bz.finfo(d)
        ref = np.finfo(dt.real_dtype(d)) if d != dt.bfloat16 else __import__(
            "ml_dtypes").finfo(d)
        assert (f.bits, f.eps, f.max, f.min, f.smallest_normal) == (
            ref.bits, float(ref.eps), float(ref.max), float(ref.min),
            float(ref.smallest_normal))
        assert f.dtype == dt.real_dtype(d) and bz.finfo(bz.zeros(1, dtype=d)) == f
        with pytest.raises(TypeError, match="iinfo"):
            bz.iinfo(d)
    elif dt.is_integer(d):
        i = np.iinfo(d)
        assert bz.iinfo(d) == (i.bits, int(i.max), int(i.min), d)
        with pytest.raises(TypeError, match="finfo"):
            bz.finfo(d)
    kinds = {"bool": d == dt.bool_, "signed integer": d.kind == "i",
             "unsigned integer": d.kind == "u", "integral": d.kind in "iu",
             "real floating": dt.is_real_floating(d), "complex floating": d.kind == "c",
             "numeric": d != dt.bool_}
    for k, v in kinds.items():
        assert bz.isdtype(d, k) is v
    assert bz.isdtype(d, (d,)) and bz.isdtype(d, ("bool", d))
    with pytest.raises(ValueError, match="isdtype: unknown kind"):
        bz.isdtype(d, "floating")


def test_astype_copy_and_dlpack():
    x = bz.asarray([1.0, 2.0])
    assert bz.astype(x, bz.float32, copy=False) is x
    y = bz.astype(x, bz.float32, copy=True)
    assert y is not x
    y[0] = 5.0
    assert x.tolist() == [1.0, 2.0]
    assert x.astype(bz.int32, device=x.device).dtype == bz.int32
    with pytest.raises(ValueError, match="astype: unknown device"):
        x.astype(bz.int32, device="gpu")
    a = np.arange(3.0)
    assert bz.from_dlpack(a, device=x.device).tolist() == [0.0, 1.0, 2.0]
    c = bz.from_dlpack(a, copy=True)
    a[0] = 9
    assert c.tolist()[0] == 0.0
    assert bz.from_dlpack(bz.asarray([1, 2])).tolist() == [1, 2]
    with pytest.raises(ValueError, match="from_dlpack: unknown device"):
        bz.from_dlpack(a, device="gpu")
    assert x.__dlpack_device__() == (1, 0)


@given(arrays(st.sampled_from([dt.int8, dt.float32, dt.bool_]), shapes(min_dims=1)),
       st.data())
def test_roll_tile_repeat_unstack(x, data):
    b = bz.asarray(x)
    shift = data.draw(st.integers(-7, 7))
    assert_matches(bz.roll(b, shift), np.roll(x, shift))
    axes = tuple(data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=3)))
    shifts = tuple(data.draw(st.integers(-5, 5)) for _ in axes)
    assert_matches(bz.roll(b, shifts, axis=axes), np.roll(x, shifts, axis=axes))
    reps = tuple(data.draw(st.lists(st.integers(0, 3), max_size=4)))
    assert_matches(bz.tile(b, reps), np.tile(x, reps))
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    k = data.draw(st.integers(0, 3))
    assert_matches(bz.repeat(b, k, axis=axis), np.repeat(x, k, axis=axis))
    n = x.size if axis is None else x.shape[axis]
    r = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64)
    assert_matches(bz.repeat(b, bz.asarray(r), axis=axis), np.repeat(x, r, axis=axis))
    ax = data.draw(st.integers(-x.ndim, x.ndim - 1))
    parts = bz.unstack(b, axis=ax)
    assert isinstance(parts, tuple) and len(parts) == x.shape[ax]
    for p, w in zip(parts, np.moveaxis(x, ax, 0)):
        assert_matches(p, w)


@given(arrays(st.sampled_from([dt.int16, dt.uint8, dt.float64, dt.bool_]), shapes(min_dims=1)),
       st.data())
def test_diff(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.integers(0, 3))
    with np.errstate(all="ignore"):
        want = np.diff(x, n=n, axis=axis)
    assert_matches(bz.diff(bz.asarray(x), n=n, axis=axis), want)
    pre = np.zeros(x.shape[:axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1:], x.dtype)
    with np.errstate(all="ignore"):
        want = np.diff(x, n=1, axis=axis, prepend=pre, append=pre)
    assert_matches(bz.diff(bz.asarray(x), axis=axis, prepend=bz.asarray(pre),
                           append=bz.asarray(pre)), want)


@given(arrays(st.sampled_from([dt.int8, dt.uint16, dt.bool_, dt.float32, dt.float64,
                               dt.complex64]), shapes(min_dims=1, max_dims=3, max_side=4),
              finite=True), st.booleans(), st.data())
def test_cumulative_prod(x, include_initial, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    from braze.graph.ops import sum_dtype

    want_dtype = sum_dtype(x.dtype)
    with np.errstate(all="ignore"):
        want = np.cumprod(upcast(x), axis=axis, dtype=want_dtype)
    if include_initial:
        shape = list(want.shape)
        shape[axis] = 1
        want = np.concatenate([np.ones(shape, want.dtype), want], axis=axis)
    got = bz.cumulative_prod(bz.asarray(x), axis=axis, include_initial=include_initial)
    if dt.is_floating(x.dtype):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
        assert got.dtype == want_dtype
    else:
        assert_matches(got, want, want_dtype)


def test_errors_name_the_op():
    with pytest.raises(ValueError, match="cumulative_prod: axis is required"):
        bz.cumulative_prod(bz.ones((2, 2)))
    with pytest.raises(ValueError, match="repeat: repeats of shape"):
        bz.repeat(bz.ones(3), bz.asarray([1, 2]))
    with pytest.raises(ValueError, match="roll: shift"):
        bz.roll(bz.ones((2, 2)), (1, 2, 3), axis=(0, 1))
    with pytest.raises(ValueError, match="diff: needs at least 1"):
        bz.diff(bz.asarray(1))
    with pytest.raises(ValueError, match="unstack: needs at least 1"):
        bz.unstack(bz.asarray(1))
    x = bz.ones((3, 3)) * 2
    for lazy in (bz.roll(x, 1), bz.tile(x, (2,)), bz.repeat(x, 2), bz.diff(x),
                 bz.cumulative_prod(x, axis=0), bz.count_nonzero(x), bz.sort(x)):
        assert lazy._node.data is None and x._node.data is None
