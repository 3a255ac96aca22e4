"""braze's math functions (backends/kernels/bzmath.h, csrc/vmath.cpp, graph/ops/libm.py).

Accuracy against numpy in more precision (float32 against float64 rounded, float64 against
long double), IEEE special values, the operand forms of the numpy tier (views, 0-d, empty,
broadcasting, integer / low-precision / complex operands), and the claim the tiers rest on:
a generated CPU kernel gives the numpy tier's bits for every libm function, at every ISA
level of this CPU and at 1 and 2 threads; ``BRAZE_DETERMINISTIC=0`` trades that for libmvec.
"""

from __future__ import annotations

import numpy as np
import pytest

import braze as bz
from braze import _core
from braze.backends import cpu as cpu_mod
from braze.backends.cpu import build, codegen
from braze.graph.ops import OPS
from braze.graph.ops import libm as lm

OWN = sorted(n for n, (_, own) in lm.FUNCTIONS.items() if len(own) == 2)
OWN32 = sorted(n for n, (arity, own) in lm.FUNCTIONS.items()
               if own == ["float32"] and arity == 1)  # sin, cos (pow: its own test)
LIBM1 = sorted(n for n, (arity, own) in lm.FUNCTIONS.items() if len(own) < 2 and arity == 1)
LIBM2 = sorted(n for n, (arity, own) in lm.FUNCTIONS.items() if len(own) < 2 and arity == 2)
# largest error seen in ulp (2M inputs each; the test's inputs must stay within it)
BOUND = {np.float32: {"exp": 1.0, "expm1": 1.4, "log": 1.0, "log1p": 1.5, "tanh": 1.5},
         np.float64: {"exp": 0.8, "expm1": 1.3, "log": 1.3, "log1p": 1.5, "tanh": 2.3}}
DOMAIN = {"exp": (-745.0, 709.0), "expm1": (-50.0, 709.0), "log": (0.0, np.inf),
          "log1p": (-1.0, np.inf), "tanh": (-np.inf, np.inf), "sin": (-np.inf, np.inf),
          "cos": (-np.inf, np.inf)}
NUMPY = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
         "sin": np.sin, "cos": np.cos}
# braze's float32-only functions, computed in double: correctly rounded but in near-ties
MORE = {"sin": (np.sin, (-np.inf, np.inf)), "cos": (np.cos, (-np.inf, np.inf)),
        "tan": (np.tan, (-np.inf, np.inf)), "asin": (np.arcsin, (-1.0, 1.0)),
        "acos": (np.arccos, (-1.0, 1.0)), "atan": (np.arctan, (-np.inf, np.inf)),
        "sinh": (np.sinh, (-np.inf, np.inf)), "cosh": (np.cosh, (-np.inf, np.inf)),
        "asinh": (np.arcsinh, (-np.inf, np.inf)), "acosh": (np.arccosh, (1.0, np.inf)),
        "atanh": (np.arctanh, (-1.0, 1.0)), "exp2": (np.exp2, (-150.0, 128.0)),
        "log2": (np.log2, (0.0, np.inf)), "log10": (np.log10, (0.0, np.inf))}
for _name, (_f, _dom) in MORE.items():
    NUMPY[_name], DOMAIN[_name] = _f, _dom
    BOUND[np.float32][_name] = 0.51
LONG = np.finfo(np.longdouble).nmant >= 63  # x86's 80-bit or a quad long double


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Math functions and cpu kernels, not a backend: run once."""
    yield "cpu"


def _inputs(name: str, dtype: type, n: int = 200_000) -> np.ndarray:
    """Uniform over the interesting range, log-uniform magnitudes of both signs, and the
    edges of the domain, clipped to it."""
    lo, hi = DOMAIN[name]
    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    lo_mag, hi_mag = np.log(float(info.smallest_subnormal)) + 1, np.log(float(info.max)) - 1
    mags = np.exp(rng.uniform(lo_mag, hi_mag, n)) * rng.choice([-1.0, 1.0], n)
    near = rng.uniform(-3.0, 3.0, n)
    x = np.concatenate([mags, near]).astype(dtype)
    x = x[(x >= lo) & (x <= hi)]
    if name == "exp" and dtype == np.float32:
        x = x[(x > -104) & (x < 89)]
    return x


def _ulps(got: np.ndarray, want: np.ndarray, dtype: type) -> np.ndarray:
    """|got - want| in units of the last place of ``dtype`` at ``want`` (higher precision)."""
    with np.errstate(over="ignore"):
        rounded = want.astype(dtype)
    ok = np.isfinite(rounded)
    spacing = np.spacing(np.abs(rounded[ok])).astype(want.dtype)
    return np.abs(got[ok].astype(want.dtype) - want[ok]) / spacing


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OWN + OWN32)
def test_own_functions_are_within_their_ulp_bound(name: str, dtype: type) -> None:
    if name in OWN32 and dtype == np.float64:
        pytest.skip(f"{name} of float64 is the C library's")
    if dtype == np.float64 and not LONG:
        pytest.skip("no long double wider than double to compare float64 with")
    x = _inputs(name, dtype)
    got = getattr(lm, name)(x)
    assert got.dtype == dtype
    wide = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        want = NUMPY[name](x.astype(wide))
    err = _ulps(got, want, dtype)
    assert err.size > 0.5 * x.size and err.max() <= BOUND[dtype][name], (name, err.max())


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1e-300, -1e-300, 5e-324,
           -5e-324, 1e-45, 1.4e-45, 3e38, -3e38, 1.7e308, -1.7e308, 88.72283, 88.7228394,
           -103.97208, -87.33654, 709.782712893384, 709.7827128933841, -745.1332191019412,
           -745.13321910194, 0.7, -0.7, 0.55, 22.0, 40.0, 2.0**-28, 2.0**-54]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OWN + OWN32)
def test_own_functions_keep_ieee_special_values(name: str, dtype: type) -> None:
    """Zeros keep their sign, infinities, NaN, overflow to inf, underflow to 0 and the
    domain errors come out as numpy's (in float64, rounded: the correct answer)."""
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL, dtype)
        got = getattr(lm, name)(x)
        want = NUMPY[name](x.astype(np.float64)).astype(dtype)
    assert (np.isnan(got) == np.isnan(want)).all()
    fin = ~np.isnan(want)
    assert (np.signbit(got[fin]) == np.signbit(want[fin])).all()
    exact = fin & (~np.isfinite(want) | (want == 0))
    assert (got[exact] == want[exact]).all(), x[exact][got[exact] != want[exact]]
    near = fin & ~exact
    rel = np.abs(got[near] - want[near]) <= 2 * np.spacing(np.abs(want[near]))
    assert rel.all(), x[near][~rel]


def test_common_values_are_the_correctly_rounded_ones() -> None:
    import math

    one = np.float64(1.0)
    assert float(lm.exp(one)) == math.e and float(lm.log(np.float64(math.e))) == 1.0
    assert float(lm.log(np.float64(2.0))) == math.log(2.0)
    assert float(lm.expm1(one)) == math.expm1(1.0) and float(lm.log1p(one)) == math.log(2.0)
    assert [float(lm.exp(np.float32(v))) for v in (0.0, 1.0)] == [1.0, float(np.float32(math.e))]


def test_operand_forms() -> None:
    x = np.linspace(-2.0, 2.0, 21)
    whole = lm.tanh(x)
    np.testing.assert_array_equal(lm.tanh(x[::3]), whole[::3])  # a strided view
    np.testing.assert_array_equal(lm.tanh(x.reshape(3, 7).T), whole.reshape(3, 7).T)
    s = lm.exp(np.float32(1.0))
    assert type(s) is np.float32  # a numpy scalar for a scalar, as numpy gives
    assert type(lm.exp(np.array(1.0))) is np.float64
    assert lm.log(np.empty((0, 3), np.float32)).shape == (0, 3)
    a, b = np.arange(3.0).reshape(3, 1), np.linspace(-1, 1, 4)
    got = lm.atan2(a, b)
    assert got.shape == (3, 4)
    np.testing.assert_array_equal(got, lm.atan2(np.broadcast_to(a, (3, 4)).copy(),
                                                np.broadcast_to(b, (3, 4)).copy()))
    assert lm.exp(np.arange(3, dtype=np.int32)).dtype == np.float32  # braze's rule for ints
    assert lm.exp(np.float16([1.0])).dtype == np.float32  # computed in float32
    z = np.array([1 + 1j, -0.5j], np.complex64)
    np.testing.assert_array_equal(lm.exp(z), np.exp(z))  # complex: numpy's own
    with pytest.raises(ValueError, match="no function"):
        _core.vmath_apply("erfcx", [x], np.empty_like(x))
    with pytest.raises(TypeError):
        _core.vmath_apply("exp", [x.astype(np.float32)], np.empty_like(x))


needs_cpu = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


def _kernel_value(name: str, xs: list[np.ndarray], threads: int = 1) -> np.ndarray:
    fn = getattr(bz, {"pow": "pow"}.get(name, name))
    backend = cpu_mod.CpuBackend(num_threads=threads, skip_tiny=False, tiered=False)
    out = fn(*(bz.asarray(x) for x in xs)) * 1.0
    backend.evaluate([out._node])
    return np.asarray(out)


def _operands(name: str, dtype: type, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(n) * 3).astype(dtype)
    if name in ("log", "log2", "log10", "acosh"):
        x = np.abs(x) + (1.0 if name == "acosh" else 0.0)
    if name in ("asin", "acos", "atanh"):
        x = np.tanh(x).astype(dtype)
    if name == "log1p":
        x = np.abs(x) - 0.5
    arity = lm.FUNCTIONS[name][0]
    if arity == 2:
        y = (rng.standard_normal(n) * 2).astype(dtype)
        return [np.abs(x) if name == "pow" else x, y]
    return [x]


@needs_cpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OWN + LIBM1 + LIBM2)
def test_a_kernel_gives_the_numpy_tiers_bits(name: str, dtype: type) -> None:
    """Whatever the position of an element in the kernel's loop (vector body or scalar tail:
    1001 elements) and the thread count (2 threads split 200k elements)."""
    # pow's op is float_ops.h's bz_fpow (libm's pow but at exponents 0, 2 and -1): its
    # record's reference
    ref = OPS["pow"].reference if name == "pow" else getattr(lm, name)
    small = _operands(name, dtype, 1001)
    if name == "pow":
        small[1][:9] = [0, 2, -1, 0.5, 3, -2, 2, 0, -1]
    with np.errstate(all="ignore"):
        want = ref(*small)
    got = _kernel_value(name, small)
    assert got.dtype == dtype and got.tobytes() == want.tobytes(), name
    big = _operands(name, dtype, 200_000)
    with np.errstate(all="ignore"):
        want = ref(*big)
    for threads in (1, 2):
        assert _kernel_value(name, big, threads).tobytes() == want.tobytes(), (name, threads)


@needs_cpu
@pytest.mark.parametrize("isa", ["avx2", "scalar", "neon"])
def test_every_isa_level_gives_the_same_bits(isa: str, monkeypatch) -> None:
    """A kernel built for a narrower ISA level (other vector widths, no FMA) computes
    braze's functions to the same bits as the numpy tier (and so as any other level)."""
    if isa not in build.TARGETS.get(build._machine(), {}):
        pytest.skip(f"{isa}: not a level of this machine")
    try:
        build._target_flags(isa)
    except ValueError:
        pytest.skip(f"{isa}: this CPU lacks it")
    monkeypatch.setattr(build, "_TARGET", isa)  # (BRAZE_ISA is read at import)
    x = _operands("tanh", np.float32, 5000)[0]
    for dtype in (np.float32, np.float64):
        xs = x.astype(dtype)
        got = _kernel_value("exp", [xs * 0.1])
        assert got.tobytes() == lm.exp(xs * dtype(0.1)).tobytes()
        out = bz.tanh(bz.asarray(xs)) + bz.log1p(bz.abs(bz.asarray(xs))) * bz.expm1(
            bz.asarray(xs) * 0.01)
        cpu_mod.CpuBackend(skip_tiny=False, tiered=False).evaluate([out._node])
        want = lm.tanh(xs) + lm.log1p(np.abs(xs)) * lm.expm1(xs * dtype(0.01))
        assert np.asarray(out).tobytes() == want.tobytes(), dtype


@needs_cpu
def test_braze_deterministic_0_uses_libmvec(monkeypatch) -> None:
    x = bz.asarray(np.linspace(-3, 3, 4096, dtype=np.float32))
    def body() -> str:  # the declarations and the function (after the prelude: bzm_exp)
        src = bz.explain(lambda x: bz.exp(x) + bz.sin(x), x).kernels[0].source("cpu")
        assert src.startswith(codegen.PRELUDE)
        return src[len(codegen.PRELUDE):]

    src = body()
    assert "bzm_exp(" in src and "omp declare simd" not in src
    monkeypatch.setenv("BRAZE_DETERMINISTIC", "0")
    assert not codegen.deterministic()
    src = body()
    assert "bzm_exp(" not in src and "expf(" in src
    if codegen.libmvec_functions():
        assert "omp declare simd" in src
    out = bz.exp(x) + bz.sin(x)
    cpu_mod.CpuBackend(skip_tiny=False, tiered=False).evaluate([out._node])
    xs = np.linspace(-3, 3, 4096, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(out), np.exp(xs) + np.sin(xs), rtol=4e-7, atol=1e-7)


def test_float32_pow_is_correctly_rounded_with_c99s_special_values() -> None:
    """braze's float pow (computed in double) against numpy's float64 pow rounded, and the
    C99 table of special operands (zeros, infinities, NaN, negative bases)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-20, 20, 200_000).astype(np.float32)
    y = rng.uniform(-30, 30, 200_000).astype(np.float32)
    y[::3] = np.round(y[::3])
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64))
        got = lm.pow(x, y)
    with np.errstate(over="ignore"):
        ok = np.isfinite(want) & np.isfinite(want.astype(np.float32))
    assert (np.isnan(got) == np.isnan(want)).all()
    assert _ulps(got[ok], want[ok], np.float32).max() <= 0.51
    sx = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, -2.0, 0.5])
    sy = np.float32([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, np.inf, -np.inf, np.nan])
    a, b = np.meshgrid(sx, sy)
    with np.errstate(all="ignore"):
        got, want = lm.pow(a, b), np.power(a.astype(np.float64), b.astype(np.float64))
    want = want.astype(np.float32)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), list(zip(a[~same], b[~same], got[~same], want[~same]))


@pytest.mark.parametrize("name,ref", [("atan2", np.arctan2), ("hypot", np.hypot)])
def test_float32_atan2_and_hypot_are_correctly_rounded_with_c99s_special_values(name, ref) -> None:
    rng = np.random.default_rng(12)
    y = (rng.standard_normal(200_000) * 10.0 ** rng.integers(-8, 8, 200_000)).astype(np.float32)
    x = (rng.standard_normal(200_000) * 10.0 ** rng.integers(-8, 8, 200_000)).astype(np.float32)
    f = getattr(lm, name)
    with np.errstate(all="ignore"):
        want, got = ref(y.astype(np.float64), x.astype(np.float64)), f(y, x)
    assert _ulps(got, want, np.float32).max() <= 0.51
    s = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, 3e38])
    a, b = np.meshgrid(s, s)
    with np.errstate(all="ignore"):
        got, want = f(a, b), ref(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), list(zip(a[~same], b[~same], got[~same], want[~same]))
