"""Quantized weights: ``bz.quantize`` / ``bz.dequantize`` / ``bz.quantized_matmul`` against
numpy, on every backend (the ``cpu`` backend runs its native dequantize-fused kernels,
``braze.backends.cpu.qmatmul``; the ``numpy`` backend the reference).

Error bounds (stated, then asserted):

* quantize: every element within half a step, ``|w - dequantize(quantize(w))| <= scale/2``
  (plus float32 rounding of the affine map: 1e-6 of the group's magnitude);
* dequantize: equal to numpy's float32 ``code * scale + bias`` within one rounding
  (the cpu kernels may fuse it into one FMA): 1e-6 relative to ``|code*scale| + |bias|``;
* quantized_matmul, exact-float path: against a float64 evaluation of the same
  dequantized weight, ``|y - y64| <= 1e-5 * (|x| @ (|code*scale| + |bias|).T)``
  elementwise (float32 rounding of the weight and of a K-term sum in any order). The
  same bound holds for every instruction-set path of the native kernel (scalar, AVX2,
  AVX-512, forced with ``isa=``) and for the tiled prefill path (M >= 16). The module
  runs with ``BRAZE_QMM_ACT=float`` (the exact path) unless a test says otherwise;
* quantized_matmul, int8-activation path (``act="int8"``, M <= 8, VNNI kernels): x is
  rounded per block of 32 to ``q * dx`` (``dx = max|x| / 127``) and the codes are centred
  on ``Z`` (8 at 4 bits, 128 at 8 bits) exactly, so against float64,
  ``|y - y64| <= 0.5 * sum_blocks |s| * dx * sum_k |code_k - Z|`` (the rounding of x) plus
  float32 rounding ``1e-5 * (|x| @ (|code*scale| + |bias|).T + Z * |x| @ |scale|.T)``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.arrays.quantized import pack
from braze.backends import cpu as cpu_mod
from braze.graph import dtypes as dt

RTOL = 1e-5


def _reload_env() -> None:
    """BRAZE_QMM_ACT is read at import: re-read it after changing it."""
    try:
        from braze.backends.cpu import qmatmul
    except ImportError:  # pragma: no cover
        return
    qmatmul.reload_env()


@pytest.fixture(autouse=True)
def _exact_float_activations(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("BRAZE_QMM_ACT", "float")
    _reload_env()
    yield
    monkeypatch.undo()
    _reload_env()


def unpack(wq: np.ndarray, bits: int) -> np.ndarray:
    """Codes (N, K) of packed words (N, K*bits/32), in numpy."""
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint32) * np.uint32(bits)
    q = (wq[..., None] >> shifts) & np.uint32((1 << bits) - 1)
    return q.reshape(wq.shape[0], -1).astype(np.int64)


def terms64(wq: np.ndarray, s: np.ndarray, b: np.ndarray, bits: int, gs: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """(w, |code*scale| + |bias|) in float64, shape (N, K)."""
    q = unpack(wq, bits).astype(np.float64)
    s64 = np.repeat(np.asarray(s, np.float64), gs, axis=-1)
    b64 = np.repeat(np.asarray(b, np.float64), gs, axis=-1)
    return q * s64 + b64, np.abs(q * s64) + np.abs(b64)


def check_qmm(y: np.ndarray, x: np.ndarray, wq: np.ndarray, s: np.ndarray, b: np.ndarray,
              bits: int, gs: int, rtol: float = RTOL) -> None:
    w64, mag = terms64(wq, s, b, bits, gs)
    x64 = np.asarray(x, np.float64)
    want = x64 @ w64.T
    bound = rtol * (np.abs(x64) @ mag.T) + 1e-30
    y = np.asarray(y, np.float64)
    assert y.shape == want.shape, f"{y.shape} != {want.shape}"
    err = np.abs(y - want)
    worst = np.unravel_index(np.argmax(err / bound), err.shape) if err.size else ()
    assert np.all(err <= bound), f"error {err[worst]} > bound {bound[worst]} at {worst}"


@st.composite
def problems(draw, half: bool | None = None, ms=(1, 2, 7, 33)):  # type: ignore[no-untyped-def]
    bits = draw(st.sampled_from([4, 8]))
    gs = draw(st.sampled_from([32, 64, 128]))
    k = gs * draw(st.integers(1, 3))
    n = draw(st.sampled_from([1, 3, 17, 37]))  # not multiples of the vector width
    lead = draw(st.sampled_from([(m,) for m in ms] + [(2, 3), ()]))
    half = draw(st.booleans()) if half is None else half
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << bits, (n, k))
    sdt = np.float16 if half else np.float32
    s = (rng.random((n, k // gs)) * 0.1).astype(sdt)
    b = (rng.standard_normal((n, k // gs)) * 0.5).astype(sdt)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    return x, pack(codes, bits), s, b, bits, gs


# ---------------------------------------------------------------- quantize / dequantize
@given(st.sampled_from([4, 8]), st.sampled_from([32, 64, 128]), st.integers(1, 9),
       st.integers(1, 3), st.integers(0, 2**32 - 1), st.floats(1e-3, 1e3))
def test_quantize_roundtrip_within_half_step(bits, gs, n, groups, seed, scale) -> None:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, gs * groups)) * scale).astype(np.float32)
    w[0, :gs] = 1.5  # a constant group: scale 0, exact
    wq, s, b = bz.quantize(bz.asarray(w), group_size=gs, bits=bits)
    assert wq.dtype == dt.uint32 and wq.shape == (n, gs * groups * bits // 32)
    assert s.shape == b.shape == (n, groups) and s.dtype == dt.float32
    deq = np.asarray(bz.dequantize(wq, s, b, group_size=gs, bits=bits))
    assert deq.dtype == np.float32 and deq.shape == w.shape
    step = np.repeat(np.asarray(s), gs, axis=-1)
    mag = np.repeat(np.maximum(np.abs(np.asarray(b)), np.abs(np.asarray(b) + np.asarray(s)
                                                             * ((1 << bits) - 1))), gs, axis=-1)
    assert np.all(np.abs(deq - w) <= step / 2 + 1e-6 * mag)
    assert np.all(deq[0, :gs] == 1.5)
    assert np.all(unpack(np.asarray(wq), bits) < (1 << bits))


@given(problems())
def test_dequantize_matches_numpy(p) -> None:
    _, wq, s, b, bits, gs = p
    got = np.asarray(bz.dequantize(bz.asarray(wq), bz.asarray(s), bz.asarray(b),
                                   group_size=gs, bits=bits))
    w64, mag = terms64(wq, s, b, bits, gs)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - w64) <= 1e-6 * mag + 1e-30)


def test_pack_layout() -> None:
    # little-end first: element 0 in the lowest bits of word 0
    assert pack(np.array([[1, 2, 3, 4, 5, 6, 7, 8]]), 4)[0, 0] == 0x87654321
    assert pack(np.array([[1, 2, 3, 4]]), 8)[0, 0] == 0x04030201


# ---------------------------------------------------------------- quantized_matmul
@given(problems())
def test_quantized_matmul_matches_numpy(p) -> None:
    x, wq, s, b, bits, gs = p
    y = bz.quantized_matmul(bz.asarray(x), bz.asarray(wq), bz.asarray(s), bz.asarray(b),
                            group_size=gs, bits=bits)
    assert y.shape == x.shape[:-1] + (wq.shape[0],) and y.dtype == dt.float32
    check_qmm(np.asarray(y), x, wq, s, b, bits, gs)


@given(problems(half=False, ms=(1, 5)))
def test_quantized_matmul_fused_with_other_ops(p) -> None:
    x, wq, s, b, bits, gs = p
    xb = bz.asarray(x)
    y = bz.quantized_matmul(xb * 2.0, bz.asarray(wq), bz.asarray(s), bz.asarray(b),
                            group_size=gs, bits=bits) + 1.0
    w64, mag = terms64(wq, s, b, bits, gs)
    x64 = 2.0 * x.astype(np.float64)
    bound = RTOL * (np.abs(x64) @ mag.T + 1.0)
    assert np.all(np.abs(np.asarray(y, np.float64) - (x64 @ w64.T + 1.0)) <= bound)


@pytest.mark.parametrize("xdtype", [dt.float16, dt.float64])
def test_quantized_matmul_result_has_x_dtype(xdtype) -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 64)).astype(np.float32)
    wq, s, b = bz.quantize(w, group_size=32, bits=4)
    x = rng.standard_normal((3, 64)).astype(xdtype)
    y = bz.quantized_matmul(bz.asarray(x), wq, s, b, group_size=32, bits=4)
    assert y.dtype == xdtype
    check_qmm(np.asarray(y), x.astype(np.float32), np.asarray(wq), np.asarray(s),
              np.asarray(b), 4, 32, rtol=1e-3 if xdtype == dt.float16 else RTOL)


def test_quantized_matmul_int_x_computes_in_float32() -> None:
    w = np.ones((5, 32), np.float32)
    wq, s, b = bz.quantize(w, group_size=32, bits=8)
    y = bz.quantized_matmul(bz.ones((2, 32), dtype=bz.int32), wq, s, b, group_size=32, bits=8)
    assert y.dtype == dt.float32
    np.testing.assert_array_equal(np.asarray(y), np.full((2, 5), 32.0, np.float32))


def test_quantized_matmul_of_quantized_weight_close_to_float_matmul() -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((300, 256)).astype(np.float32) * 0.05
    x = rng.standard_normal((1, 256)).astype(np.float32)
    for bits, tol in ((4, 0.1), (8, 0.01)):
        wq, s, b = bz.quantize(w, group_size=64, bits=bits)
        y = np.asarray(bz.quantized_matmul(x, wq, s, b, group_size=64, bits=bits))
        ref = x @ w.T
        assert np.linalg.norm(y - ref) <= tol * np.linalg.norm(ref)


# ---------------------------------------------------------------- errors at the call
def _valid():  # type: ignore[no-untyped-def]
    wq = bz.zeros((8, 8), dtype=bz.uint32)  # N=8, K=64 at 4 bits
    return bz.ones((2, 64)), wq, bz.ones((8, 2)), bz.zeros((8, 2))


def test_quantized_matmul_errors() -> None:
    x, wq, s, b = _valid()
    with pytest.raises(TypeError, match="uint32"):
        bz.quantized_matmul(x, bz.zeros((8, 8), dtype=bz.int32), s, b)
    with pytest.raises(ValueError, match="scales and biases must have shape"):
        bz.quantized_matmul(x, wq, bz.ones((8, 3)), b)
    with pytest.raises(ValueError, match="scales and biases must have shape"):
        bz.quantized_matmul(x, wq, s, bz.zeros((7, 2)))
    with pytest.raises(ValueError, match="last dims differ"):
        bz.quantized_matmul(bz.ones((2, 63)), wq, s, b)
    with pytest.raises(ValueError, match="bits must be one of"):
        bz.quantized_matmul(x, wq, s, b, bits=3)
    with pytest.raises(ValueError, match="group_size must be one of"):
        bz.quantized_matmul(x, wq, s, b, group_size=16)
    with pytest.raises(TypeError, match="floating"):
        bz.quantized_matmul(x, wq, bz.ones((8, 2), dtype=bz.int32), b)
    with pytest.raises(TypeError, match="uint32"):
        bz.quantized_matmul(x, bz.zeros((8,), dtype=bz.uint32), s, b)
    with pytest.raises(NotImplementedError):
        bz.quantized_matmul(x, wq, s, b, transpose=False)


def test_quantize_errors() -> None:
    with pytest.raises(ValueError, match="2-d"):
        bz.quantize(bz.ones((64,)))
    with pytest.raises(TypeError, match="floating"):
        bz.quantize(bz.ones((2, 64), dtype=bz.int32))
    with pytest.raises(ValueError):
        bz.quantize(bz.ones((2, 48)), group_size=32)
    with pytest.raises(ValueError, match="bits must be one of"):
        bz.quantize(bz.ones((2, 64)), bits=3)
    with pytest.raises(ValueError, match="group_size must be one of"):
        bz.dequantize(*_valid()[1:], group_size=48)


# ---------------------------------------------------------------- the native cpu kernel
needs_cpu = pytest.mark.skipif(not cpu_mod.available(), reason="no C++ compiler")


@needs_cpu
def test_cpu_backend_runs_the_native_kernel(backend_name) -> None:
    if backend_name != "cpu":
        pytest.skip("the native kernel is the cpu backend's")
    impl = bz.backends.get("cpu").library["quantized_matmul"]
    before = dict(impl.calls)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((96, 128)).astype(np.float32)
    wq, s, b = bz.quantize(w, group_size=64, bits=4)
    x = rng.standard_normal((4, 128)).astype(np.float32)
    y = bz.quantized_matmul(bz.asarray(x), wq, s, b, group_size=64, bits=4)
    check_qmm(np.asarray(y), x, np.asarray(wq), np.asarray(s), np.asarray(b), 4, 64)
    assert impl.calls["native"] == before["native"] + 1
    assert impl.calls["numpy"] == before["numpy"]


@needs_cpu
@pytest.mark.parametrize("isa", [0, 1, 2, 3])
@pytest.mark.parametrize("bits,gs,half", [(4, 32, False), (8, 64, True), (4, 128, True)])
def test_native_kernel_every_isa(backend_name, isa, bits, gs, half) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    rng = np.random.default_rng(isa * 100 + bits + gs)
    n, k = 45, 3 * gs
    wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
    sdt = np.float16 if half else np.float32
    s = (rng.random((n, k // gs)) * 0.1).astype(sdt)
    b = (rng.standard_normal((n, k // gs))).astype(sdt)
    host = qmatmul.host_isa()  # a cap lowers it; on AArch64 (3) any cap below 3 is scalar
    assert qmatmul.kernel_isa(bits, gs, half, isa) == (
        min(isa, host) if host != 3 else (3 if isa >= 3 else 0))
    for m in (1, 3, 5, 16, 21, 40, 45):  # fused with 1-4 rows per pass, tiled from 16;
                                         # 40, 45: last blocks of 8 and 13 rows (dot products)
        x = rng.standard_normal((m, k)).astype(np.float32)
        for threads in (1, 2, 5):  # (5: more threads than cores)
            y = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                         num_threads=threads)
            check_qmm(y, x, wq, s, b, bits, gs)
            if threads == 1:
                y1 = y
            else:  # N is split between threads: each output is summed the same way
                np.testing.assert_array_equal(y, y1)


@needs_cpu
def test_native_kernel_edge_shapes(backend_name) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    wq = pack(np.ones((3, 32)), 4)
    s, b = np.ones((3, 1), np.float32), np.zeros((3, 1), np.float32)
    assert qmatmul.quantized_matmul(np.ones((0, 32), np.float32), wq, s, b).shape == (0, 3)
    assert qmatmul.quantized_matmul(np.ones((2, 0, 32), np.float32), wq, s, b).shape == (2, 0, 3)
    y = qmatmul.quantized_matmul(np.ones(32, np.float32), wq, s, b)  # 1-d x
    np.testing.assert_array_equal(y, np.full(3, 32.0, np.float32))
    empty = qmatmul.quantized_matmul(np.ones((2, 32), np.float32), wq[:0], s[:0], b[:0])
    assert empty.shape == (2, 0)
    # mixed scale dtypes run as float32; bfloat16 too
    y = qmatmul.quantized_matmul(np.ones((1, 32), np.float32), wq, s.astype(np.float16), b)
    np.testing.assert_array_equal(y, np.full((1, 3), 32.0, np.float32))
    y = qmatmul.quantized_matmul(np.ones((1, 32), np.float32), wq, s.astype(dt.bfloat16),
                                 b.astype(dt.bfloat16))
    np.testing.assert_array_equal(y, np.full((1, 3), 32.0, np.float32))
    with pytest.raises(ValueError, match="isa"):
        qmatmul.quantized_matmul(np.ones((1, 32), np.float32), wq, s, b, isa=4)
    with pytest.raises(ValueError, match="last dims differ"):
        qmatmul.quantized_matmul(np.ones((1, 64), np.float32), wq, s, b)


@needs_cpu
def test_build_failure_falls_back_to_numpy_with_one_warning(backend_name, monkeypatch) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import build, qmatmul

    def fail(source: str, symbol: str) -> int:
        raise build.BuildError(f"simulated failure of {symbol}")

    from braze.backends.cpu.library import KernelFamily

    monkeypatch.setattr(build, "load", fail)
    monkeypatch.setattr(qmatmul, "_KERNELS", KernelFamily(lambda key: qmatmul.source(*key)))
    impl = qmatmul.QuantizedMatmul()
    rng = np.random.default_rng(4)
    wq = pack(rng.integers(0, 16, (5, 64)), 4)
    s, b = rng.random((5, 2)).astype(np.float32), rng.random((5, 2)).astype(np.float32)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    attrs = {"group_size": 32, "bits": 4}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y1 = impl(attrs, np.dtype(np.float32), x, wq, s, b)
        y2 = impl(attrs, np.dtype(np.float32), x, wq, s, b)
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "numpy reference" in msgs[0]
    assert impl.calls == {"native": 0, "numpy": 2}
    check_qmm(y1, x, wq, s, b, 4, 32)
    np.testing.assert_array_equal(y1, y2)


# ---------------------------------------------------------------- int8-activation path
def int8_bound(x: np.ndarray, wq: np.ndarray, s: np.ndarray, b: np.ndarray, bits: int,
               gs: int) -> np.ndarray:
    """The stated elementwise bound of the int8-activation path (module docstring)."""
    z = 8.0 if bits == 4 else 128.0
    x64 = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    m, k = x64.shape
    dx = np.abs(x64.reshape(m, k // 32, 32)).max(axis=-1) / 127.0  # (M, K/32)
    q = unpack(wq, bits).astype(np.float64)
    s64 = np.abs(np.repeat(np.asarray(s, np.float64), gs, axis=-1))  # (N, K)
    cen = (np.abs(q - z) * s64).reshape(q.shape[0], k // 32, 32).sum(-1)  # (N, K/32)
    _, mag = terms64(wq, s, b, bits, gs)
    return (0.5 * (1 + 1e-4) * dx @ cen.T
            + 1e-5 * (np.abs(x64) @ mag.T + z * np.abs(x64) @ s64.T) + 1e-30)


def _int8_operands(draw, m: int, n: int, k: int, gs: int):  # type: ignore[no-untyped-def]
    """rng, x (m, k) at a drawn scale (sometimes with outliers and an all-zero block), and
    float16 or float32 scales/biases (n, k // gs) for the int8 strategies below."""
    half = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sdt = np.float16 if half else np.float32
    s = (rng.random((n, k // gs)) * 0.1).astype(sdt)
    b = (rng.standard_normal((n, k // gs)) * 0.5).astype(sdt)
    x = (rng.standard_normal((m, k)) * draw(st.sampled_from([1e-3, 1.0, 30.0]))).astype(np.float32)
    if draw(st.booleans()):  # outliers and an all-zero block
        x[:, rng.integers(0, k, 3)] *= 50.0
        x[:, :32] = 0.0
    return rng, x, s, b


@st.composite
def int8_problems(draw):  # type: ignore[no-untyped-def]
    bits = draw(st.sampled_from([4, 8]))
    gs = draw(st.sampled_from([32, 32, 64, 128]))
    k = gs * draw(st.integers(1, 1536 // gs))
    # not multiples of the vector width; 301 rows run on 2 threads (above PARALLEL_WEIGHTS)
    n = draw(st.sampled_from([1, 3, 5, 17, 37, 45, 301]))
    m = draw(st.integers(1, 8))
    rng, x, s, b = _int8_operands(draw, m, n, k, gs)
    return x, pack(rng.integers(0, 1 << bits, (n, k)), bits), s, b, bits, gs


def _int8_isas() -> list[int]:
    from braze.backends.cpu import qmatmul

    return [i for i in (1, 2) if qmatmul.int8_available(isa=i) and qmatmul.kernel_isa(isa=i) == i]


@needs_cpu
@given(int8_problems())
def test_int8_path_within_stated_bound(backend_name, p) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, bits, gs = p
    isas = _int8_isas()
    if not isas:
        pytest.skip("no VNNI: the int8 path is not compiled on this CPU")
    w64, _ = terms64(wq, s, b, bits, gs)
    want = x.astype(np.float64) @ w64.T
    bound = int8_bound(x, wq, s, b, bits, gs)
    for isa in isas:  # AVX-512 VNNI and AVX-VNNI (isa=1 on a CPU that has both)
        y1 = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                      act="int8", num_threads=1)
        y2 = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                      act="int8", num_threads=2)
        err = np.abs(y1.astype(np.float64) - want)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert np.all(err <= bound), f"isa {isa}: error {err[worst]} > bound {bound[worst]}"
        np.testing.assert_array_equal(y1, y2)  # each output summed the same way


@needs_cpu
def test_int8_switch(backend_name, monkeypatch) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    impl = qmatmul.QuantizedMatmul()
    rng = np.random.default_rng(7)
    n, k = 37, 192
    x = rng.standard_normal((1, k)).astype(np.float32)
    sw = {}
    for bits in (4, 8):
        wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
        s = (rng.random((n, k // 32)) * 0.1).astype(np.float16)
        b = (rng.standard_normal((n, k // 32)) * 0.5).astype(np.float16)
        run = {}
        for mode in ("float", "int8", "auto", None):
            if mode is None:
                monkeypatch.delenv("BRAZE_QMM_ACT")
            else:
                monkeypatch.setenv("BRAZE_QMM_ACT", mode)
            qmatmul.reload_env()
            run[mode] = qmatmul.quantized_matmul(x, wq, s, b, bits=bits)
            # the backend's library op follows the same variable
            y = impl({"group_size": 32, "bits": bits}, np.dtype(np.float32), x, wq, s, b)
            np.testing.assert_array_equal(y, run[mode])
        check_qmm(run["float"], x, wq, s, b, bits, 32)
        np.testing.assert_array_equal(run[None], run["auto"])
        np.testing.assert_array_equal(
            qmatmul.quantized_matmul(x, wq, s, b, bits=bits, act="float"), run["float"])
        sw[bits] = run
    for bits in (4, 8):  # AVX2 without VNNI has the int8 path at 4 bits only
        if qmatmul.int8_available(bits, 32, True):
            assert not np.array_equal(sw[bits]["int8"], sw[bits]["float"])
        else:  # no int8 dot product: every mode runs the exact path
            np.testing.assert_array_equal(sw[bits]["int8"], sw[bits]["float"])
    if qmatmul.int8_available(4, 32, True):
        np.testing.assert_array_equal(sw[4]["auto"], sw[4]["int8"])  # auto: int8 at 4 bits
    # and at 8 bits 16-bit activations where the kernel has them, else float
    x16 = qmatmul._paths(8, 32, True, None, 1, "auto")[4]
    np.testing.assert_array_equal(
        sw[8]["auto"], qmatmul.quantized_matmul(x, wq, s, b, bits=8, act="int16" if x16
                                                else "float"))
    assert x16 == (qmatmul.PREPACK and qmatmul._levels(8, 32, True, None)[1] == 2)
    # more than INT8_MAX_M rows: 16-bit activations under auto where compiled (else the
    # exact path), and at 8 bits under "int8"; the int8 GEMM at 4 bits under "int8" only
    wq = pack(rng.integers(0, 16, (n, k)), 4)
    s, b = np.full((n, k // 32), 0.01, np.float32), np.zeros((n, k // 32), np.float32)
    x9 = rng.standard_normal((qmatmul.INT8_MAX_M + 1, k)).astype(np.float32)
    x16 = qmatmul._paths(4, 32, False, None, len(x9), "auto")[4]
    assert x16 == (qmatmul.PREPACK and qmatmul._levels(4, 32, False, None)[1] == 2)
    np.testing.assert_array_equal(qmatmul.quantized_matmul(x9, wq, s, b, act="auto"),
                                  qmatmul.quantized_matmul(x9, wq, s, b,
                                                           act="int16" if x16 else "float"))
    if qmatmul.int8_available(4, 32, False):
        assert not np.array_equal(qmatmul.quantized_matmul(x9, wq, s, b, act="int8"),
                                  qmatmul.quantized_matmul(x9, wq, s, b, act="float"))
    wq8 = pack(rng.integers(0, 256, (n, k)), 8)
    np.testing.assert_array_equal(qmatmul.quantized_matmul(x9, wq8, s, b, bits=8, act="int8"),
                                  qmatmul.quantized_matmul(x9, wq8, s, b, bits=8, act="float"))
    np.testing.assert_array_equal(qmatmul.quantized_matmul(x, wq, s, b, act="int8", isa=0),
                                  qmatmul.quantized_matmul(x, wq, s, b, act="float", isa=0))
    monkeypatch.setenv("BRAZE_QMM_ACT", "int4")
    qmatmul.reload_env()
    with pytest.raises(ValueError, match="BRAZE_QMM_ACT"):
        qmatmul.quantized_matmul(x, wq, s, b)
    with pytest.raises(ValueError, match="act must be"):
        qmatmul.quantized_matmul(x, wq, s, b, act="fp8")


@needs_cpu
@pytest.mark.parametrize("bits", [4, 8])
def test_int8_path_same_on_1_and_2_threads(backend_name, bits) -> None:
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    rng = np.random.default_rng(bits)
    n, k = 1001, 608  # above PARALLEL_WEIGHTS: really split between 2 threads; K % 64 == 32
    wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
    s = (rng.random((n, k // 32)) * 0.1).astype(np.float16)
    b = (rng.standard_normal((n, k // 32)) * 0.5).astype(np.float16)
    for m in (1, 2, 5, 8):
        x = rng.standard_normal((m, k)).astype(np.float32)
        y1, y2, y5 = (qmatmul.quantized_matmul(x, wq, s, b, bits=bits, act="int8",
                                               num_threads=t)
                      for t in (1, 2, 5))  # (5: more than the cores: rows taken over)
        np.testing.assert_array_equal(y1, y2)
        np.testing.assert_array_equal(y1, y5)
        if qmatmul.int8_available(bits, 32, True):
            w64, _ = terms64(wq, s, b, bits, 32)
            err = np.abs(y1.astype(np.float64) - x.astype(np.float64) @ w64.T)
            assert np.all(err <= int8_bound(x, wq, s, b, bits, 32))


@st.composite
def int8_gemm_problems(draw):  # type: ignore[no-untyped-def]
    gs = draw(st.sampled_from([32, 32, 64, 128]))
    k = gs * draw(st.integers(1, 1536 // gs))
    n = draw(st.sampled_from([1, 5, 16, 17, 45, 301]))  # tiles of 16 weight rows and a tail
    m = draw(st.sampled_from([9, 16, 33, 48, 96, 112, 130]))
    rng, x, s, b = _int8_operands(draw, m, n, k, gs)
    return x, pack(rng.integers(0, 16, (n, k)), 4), s, b, gs


@needs_cpu
@settings(max_examples=25, deadline=None)
@given(int8_gemm_problems())
def test_int8_gemm_within_stated_bound(backend_name, p) -> None:
    """M > INT8_MAX_M at 4 bits with act="int8": the VNNI GEMM (AVX-512 VNNI; the
    AVX-VNNI kernel runs its matvec path for every M), same bound, same on 1 and 2 threads."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, gs = p
    isas = _int8_isas()
    if not isas:
        pytest.skip("no VNNI: the int8 path is not compiled on this CPU")
    w64, _ = terms64(wq, s, b, 4, gs)
    want = x.astype(np.float64) @ w64.T
    bound = int8_bound(x, wq, s, b, 4, gs)
    for isa in isas:
        y1 = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=4, isa=isa,
                                      act="int8", num_threads=1)
        y2 = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=4, isa=isa,
                                      act="int8", num_threads=2)
        err = np.abs(y1.astype(np.float64) - want)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert np.all(err <= bound), f"isa {isa}: error {err[worst]} > bound {bound[worst]}"
        np.testing.assert_array_equal(y1, y2)
        # each row is computed independently of the others (row blocks of 16, tails)
        np.testing.assert_array_equal(
            qmatmul.quantized_matmul(x[-9:], wq, s, b, group_size=gs, bits=4, isa=isa,
                                     act="int8", num_threads=2), y1[-9:])


def int16_bound(x: np.ndarray, wq: np.ndarray, s: np.ndarray, b: np.ndarray, bits: int,
                gs: int) -> np.ndarray:
    """The stated bound of 16-bit activations: int8's with x's step dx = amax / 32639."""
    x64 = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    dx8 = np.abs(x64.reshape(len(x64), -1, 32)).max(axis=-1) / 127.0
    dx16 = dx8 * 127.0 / 32639.0
    z = 8.0 if bits == 4 else 128.0
    q = unpack(wq, bits).astype(np.float64)
    s64 = np.abs(np.repeat(np.asarray(s, np.float64), gs, axis=-1))
    cen = (np.abs(q - z) * s64).reshape(q.shape[0], -1, 32).sum(-1)
    return int8_bound(x, wq, s, b, bits, gs) - 0.5 * (1 + 1e-4) * (dx8 - dx16) @ cen.T


@needs_cpu
@settings(max_examples=30, deadline=None)
@given(st.sampled_from([4, 8]), st.sampled_from([32, 64, 128]), st.integers(1, 12),
       st.sampled_from([1, 5, 16, 17, 45, 301]), st.sampled_from([1, 2, 3, 9, 16, 17, 40]),
       st.data())
def test_int16_path_within_stated_bound(backend_name, bits, gs, blocks, n, m, data) -> None:
    """act="int16": x per block of 32 as 16-bit integers (two int8 planes) through the GEMM
    over the weight's tiles where compiled (AVX-512 VNNI; AVX2 at 4 bits), else the exact
    path: within int8's bound at dx = amax / 32639, the same bits on 1 and 2 threads, and
    each row the same whatever other rows run with it."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    k = gs * blocks
    rng, x, s, b = _int8_operands(data.draw, m, n, k, gs)
    wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
    w64, _ = terms64(wq, s, b, bits, gs)
    want = x.astype(np.float64) @ w64.T
    bound = int16_bound(x, wq, s, b, bits, gs)
    half = s.dtype == np.float16
    for isa in (0, 1, 2):
        if qmatmul.kernel_isa(bits, gs, half, isa) != isa:
            continue

        def run(rows: np.ndarray, threads: int = 2, isa: int = isa) -> np.ndarray:
            return qmatmul.quantized_matmul(rows, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                            act="int16", num_threads=threads)

        y = run(x)
        np.testing.assert_array_equal(run(x, 1), y)
        if not qmatmul._paths(bits, gs, half, isa, m, "int16")[4]:  # not compiled: exact
            check_qmm(y, x, wq, s, b, bits, gs)
            continue
        err = np.abs(y.astype(np.float64) - want)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert np.all(err <= bound), f"isa {isa}: error {err[worst]} > bound {bound[worst]}"
        np.testing.assert_array_equal(run(x[::-1])[::-1], y)  # rows in other blocks
        np.testing.assert_array_equal(run(x[-1:]), y[-1:])


@st.composite
def tile_problems(draw, ms, ns=(1, 5, 16, 17, 45, 301), k_max=768):  # type: ignore[no-untyped-def]
    """4- or 8-bit problems for the paths over weight tiles of 16 rows (ns: a tail too)."""
    bits = draw(st.sampled_from([4, 8]))
    gs = draw(st.sampled_from([32, 64, 128]))
    k = gs * draw(st.integers(1, k_max // gs))
    n = draw(st.sampled_from(ns))
    m = draw(st.sampled_from(ms))
    rng, x, s, b = _int8_operands(draw, m, n, k, gs)
    return x, pack(rng.integers(0, 1 << bits, (n, k)), bits), s, b, bits, gs


@needs_cpu
@settings(max_examples=30, deadline=None)
@given(tile_problems(ms=(2, 3, 8, 9, 16, 17, 33)))
def test_invariant_mode_rows_do_not_depend_on_the_batch(backend_name, p) -> None:
    """act="invariant" (batched decoding): every row of the result is bit-identical to
    that row computed alone, on every ISA level the host runs (the prepacked int8 GEMM on
    AVX-512 VNNI and on AVX2 -- there the same bits as AVX-512's --, the float path with
    fixed accumulators on scalar), on 1 and 2 threads; within the int8 bound where int8
    runs, else the float one."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, bits, gs = p
    w64, _ = terms64(wq, s, b, bits, gs)
    want = x.astype(np.float64) @ w64.T
    by_isa: dict[int, np.ndarray] = {}
    for isa in sorted({0, *(i for i in (1, 2) if qmatmul.kernel_isa(isa=i) == i)}):
        def run(rows: np.ndarray, threads: int = 2, isa: int = isa) -> np.ndarray:
            return qmatmul.quantized_matmul(rows, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                            act="invariant", num_threads=threads)

        y = run(x)
        by_isa[isa] = y
        alone = np.concatenate([run(x[i:i + 1]) for i in range(len(x))])
        np.testing.assert_array_equal(y, alone, err_msg=f"isa {isa}")
        np.testing.assert_array_equal(run(x[1:], 1), y[1:], err_msg=f"isa {isa}")
        if qmatmul.int8_available(bits, gs, s.dtype == np.float16, isa):
            err = np.abs(y.astype(np.float64) - want)
            bound = int8_bound(x, wq, s, b, bits, gs)
            worst = np.unravel_index(np.argmax(err / bound), err.shape)
            assert np.all(err <= bound), f"isa {isa}: error {err[worst]} > {bound[worst]}"
        else:
            check_qmm(y, x, wq, s, b, bits, gs)
    half = s.dtype == np.float16
    if len(by_isa) == 3 and [qmatmul._levels(bits, gs, half, i)[1] for i in (1, 2)] == [3, 2]:
        # the AVX2 GEMM (vpmaddubsw) and the AVX-512 VNNI one: the same integers, the same
        # float epilogue -- the same bits
        np.testing.assert_array_equal(by_isa[1], by_isa[2])


@needs_cpu
@settings(max_examples=15, deadline=None)
@given(tile_problems(ms=(48,)))
def test_float_rows_in_whole_blocks_of_16_do_not_depend_on_the_batch(backend_name, p) -> None:
    """act="float" over whole blocks of 16 rows of x (what a batched LLM pre-fill runs):
    every row is bit-identical whichever blocks run with it, on every ISA level the host
    runs (AVX-512's prepacked tiles, the AVX2 and scalar tiled float paths)."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, bits, gs = p
    for isa in sorted({0, *(i for i in (1, 2) if qmatmul.kernel_isa(isa=i) == i)}):
        def run(rows: np.ndarray, isa: int = isa) -> np.ndarray:
            return qmatmul.quantized_matmul(rows, wq, s, b, group_size=gs, bits=bits, isa=isa,
                                            act="float")

        y = run(x)
        np.testing.assert_array_equal(run(x[16:32]), y[16:32], err_msg=f"isa {isa}")
        np.testing.assert_array_equal(run(x[:32]), y[:32], err_msg=f"isa {isa}")


@needs_cpu
def test_kernel_queries_reject_bad_parameters(backend_name) -> None:
    """amx_available / int8_available / kernel_isa / problem_key name the call and the
    parameter instead of failing a build or answering for a kernel that cannot exist."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    for call in (lambda: qmatmul.amx_available(bits=3), lambda: qmatmul.kernel_isa(bits=5),
                 lambda: qmatmul.int8_available(group_size=48)):
        with pytest.raises(ValueError, match=r"qmatmul\.\w+: bits must be one of .* got bits="):
            call()
    with pytest.raises(ValueError, match=r"qmatmul\.problem_key: .*group_size=16"):
        qmatmul.problem_key(4, 16, False, None, 1, 16, 64, None, 2)
    with pytest.raises(ValueError, match="isa must be"):
        qmatmul.amx_available(isa=7)


@needs_cpu
@settings(max_examples=20, deadline=None)
@given(tile_problems(ms=(16, 17, 32, 47, 64), ns=(1, 5, 16, 17, 45), k_max=1536))
def test_amx_gemm_gives_the_vnni_bits(backend_name, p) -> None:
    """Where the CPU and OS have AMX, the int8 GEMM's blocks of 16 rows of x run tdpbsud:
    the result has the same bits as the AVX-512 VNNI path (AMX off), for the batch-invariant
    GEMM on prepacked tiles (4 and 8 bits) and the int8 GEMM repacking per call (4 bits), on
    1 and 2 threads."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, bits, gs = p
    if not qmatmul.amx_available(bits, gs, s.dtype == np.float16):
        pytest.skip("no AMX-INT8 on this CPU (or the OS refused the tile state)")
    acts = ("invariant", "int8") if bits == 4 else ("invariant",)
    for act in acts:
        for threads in (1, 2):
            got = {}
            for amx in (True, False):
                saved, qmatmul.AMX = qmatmul.AMX, amx
                try:
                    got[amx] = qmatmul.quantized_matmul(x, wq, s, b, group_size=gs, bits=bits,
                                                        act=act, num_threads=threads)
                finally:
                    qmatmul.AMX = saved
            np.testing.assert_array_equal(got[True], got[False], err_msg=f"{act}, {threads}")


@needs_cpu
@settings(max_examples=25, deadline=None)
@given(tile_problems(ms=(16, 17, 31, 33, 40), ns=(1, 5, 16, 17, 45),
                     k_max=1536))  # row blocks of 16 and tails
def test_exact_path_on_prepacked_tiles(backend_name, p) -> None:
    """The exact path at TILE_M+ rows runs float x against the weight's prepacked tiles
    where they exist (AVX-512 VNNI): within the float bound, the same bits on 1 and 2
    threads, and every row the same whatever other rows (of TILE_M+) run with it."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    x, wq, s, b, bits, gs = p

    def run(rows: np.ndarray, threads: int = 2) -> np.ndarray:
        return qmatmul.quantized_matmul(rows, wq, s, b, group_size=gs, bits=bits, act="float",
                                        num_threads=threads)

    y = run(x)
    check_qmm(y, x, wq, s, b, bits, gs)
    np.testing.assert_array_equal(run(x, 1), y)
    if qmatmul._levels(bits, gs, s.dtype == np.float16, None)[1] == 2 and qmatmul.PREPACK:
        other = np.concatenate([x[::-1], x[:3]])  # the rows in other blocks and positions
        np.testing.assert_array_equal(run(other)[:len(x)], y[::-1])


@needs_cpu
def test_invariant_mode_in_a_compiled_step_prepacks_once(backend_name) -> None:
    """The replay program passes the weight's prepacked tiles (computed when the weight
    changes, not per call): compiled results equal the eager ones, and a new weight
    array of the same shape gets its own tiles."""
    if backend_name != "cpu":
        pytest.skip("runs once, with the cpu backend's module pass")
    from braze.backends.cpu import qmatmul

    rng = np.random.default_rng(7)
    n, k = 45, 256
    x = rng.standard_normal((5, k)).astype(np.float32)
    weights = []
    for seed in (1, 2):
        r = np.random.default_rng(seed)
        weights.append((pack(r.integers(0, 16, (n, k)), 4),
                        (r.random((n, k // 32)) * 0.1).astype(np.float16),
                        (r.standard_normal((n, k // 32)) * 0.5).astype(np.float16)))
    step = bz.compile(lambda a, w, s, b: bz.quantized_matmul(a, w, s, b, act="invariant"))
    calls = []
    real = qmatmul.prepack

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kw)

    wants = [qmatmul.quantized_matmul(x, w, s, b, act="invariant") for w, s, b in weights]
    held = [tuple(bz.asarray(a) for a in w) for w in weights]  # the same arrays every call
    qmatmul.prepack = counting  # type: ignore[assignment]
    try:
        for i in [0] * 5 + [1] * 5:
            got = np.asarray(step(bz.asarray(x), *held[i]))
            np.testing.assert_array_equal(got, wants[i])
    finally:
        qmatmul.prepack = real  # type: ignore[assignment]
    if qmatmul.packed_bytes(qmatmul._handle(4, 32, True, None), n, k):
        # per weight: the first (general) call's, then the replay plan's while the arrays
        # are new to it -- never once per call
        assert 2 <= len(calls) <= 5, calls
