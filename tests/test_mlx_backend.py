"""The ``mlx`` backend: which path each kernel takes (generated Metal through
``mx.fast.metal_kernel``, lowering to ``mlx.core`` ops, or the numpy executor), the
``metal_kernel`` form of every corpus kernel (checked with the MSL shim, as Metal cannot
run here), lowering against the numpy executor, and the fallbacks. The whole suite also
runs on the ``mlx`` backend through ``conftest.py`` when MLX is installed."""

from __future__ import annotations

import re
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import braze as bz
from braze.backends import mlx as mlx_backend
from braze.backends.metal import codegen as metal_codegen

from .kernel_corpus import corpus
from .test_gpu_codegen import _batches, _cxx, _msl_check

HAS_MLX = mlx_backend.available()
needs_mlx = pytest.mark.skipif(not HAS_MLX, reason="mlx not installed")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """These tests choose their backends themselves: run the module once."""
    yield "none"


def _kernel(fn, *args):
    return bz.explain(fn, *args).kernels[0].kernel


def test_mlx_is_listed_exactly_when_it_imports() -> None:
    assert ("mlx" in bz.backends.available()) == mlx_backend.available()
    try:
        import mlx.core  # noqa: F401

        imports = True
    except ImportError:
        imports = False
    assert mlx_backend.available() == imports


@needs_mlx
def test_mode_follows_the_metal_flag() -> None:
    from braze.backends.mlx import MlxBackend

    x = bz.asarray(np.ones((4, 8), np.float32))
    soft = _kernel(lambda x: bz.softmax(x, axis=-1), x)
    assert MlxBackend(use_metal=True).mode(soft) == "metal"
    assert MlxBackend(use_metal=False).mode(soft) == "lower"
    # float64: Metal has no double -> lowered (on MLX's CPU stream)
    x64 = bz.asarray(np.ones((4, 8)))
    assert MlxBackend(use_metal=True).mode(_kernel(lambda x: bz.exp(x) + 1, x64)) == "lower"
    # complex: no MLX lowering -> the numpy executor
    xc = bz.asarray(np.ones(8, np.complex128))
    for use_metal in (True, False):
        assert MlxBackend(use_metal=use_metal).mode(_kernel(lambda x: x * 2, xc)) == "numpy"


@needs_mlx
def test_metal_flag_from_the_environment(monkeypatch) -> None:
    from braze.backends.mlx import MlxBackend

    monkeypatch.setenv("BRAZE_MLX_METAL", "1")
    assert MlxBackend().use_metal
    monkeypatch.setenv("BRAZE_MLX_METAL", "0")
    assert not MlxBackend().use_metal
    monkeypatch.setenv("BRAZE_MLX_METAL", "yes")
    with pytest.raises(ValueError, match="BRAZE_MLX_METAL"):
        MlxBackend()


@needs_mlx
def test_on_linux_no_metal_device_and_kernels_are_lowered() -> None:
    import sys

    from braze.backends.mlx import metal_available

    if sys.platform == "darwin":
        pytest.skip("macOS")
    assert not metal_available()
    b = bz.backends.get("mlx")
    assert not b.use_metal
    before = dict(b.stats)
    with bz.backend("mlx"):
        x = bz.asarray(np.linspace(-3, 3, 4096, dtype=np.float32).reshape(64, 64))
        y = np.asarray(bz.softmax(x * 2.0, axis=-1))
    with bz.backend("numpy"):
        ref = np.asarray(bz.softmax(x * 2.0, axis=-1))
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-7)
    assert b.stats["lower"] > before["lower"] and b.stats["metal"] == 0


# ---------------------------------------------------------------- the Metal form
_MLX_T = {"bool": "bool", "float16": "float16_t", "bfloat16": "bfloat16_t", "float32": "float",
          "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
          "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t"}


def _slot_dtypes(k) -> dict[int, str]:
    out = {}
    for ins in k.instrs:
        if ins.op == "load":
            out[k.loads[ins.attr("load")].slot] = np.dtype(ins.dtype).name
    for st in k.stores:
        out[st.slot] = np.dtype(k.instrs[st.instr].dtype).name
    return out


def _as_mlx_writes_it(spec, k) -> str:
    """The kernel MLX would build from ``spec`` (its signature rules: inputs
    ``const device T*``, outputs ``device T*``, the thread attributes the body names)."""
    types = _slot_dtypes(k)
    params = [f"const device {_MLX_T[types[s]]}* {n} [[buffer({i})]]"
              for i, (n, s) in enumerate(zip(spec.input_names, spec.input_slots))]
    params.append(f"const device int64_t* bz_args [[buffer({len(params)})]]")
    params += [f"device {_MLX_T[types[s]]}* {n} [[buffer({len(params) + i})]]"
               for i, (n, s) in enumerate(zip(spec.output_names, spec.output_slots))]
    for attr in ("thread_position_in_threadgroup", "threadgroup_position_in_grid",
                 "threads_per_threadgroup", "threadgroups_per_grid"):
        if attr in spec.source:
            params.append(f"uint3 {attr} [[{attr}]]")
    return (f"[[kernel]] void {spec.name}(" + ", ".join(params) + ") {\n"
            + spec.source + "\n}\n")


@needs_mlx
@pytest.mark.skipif(_cxx() is None, reason="no C++ compiler")
def test_every_metal_spec_passes_the_shim_as_mlx_assembles_it() -> None:
    from braze.backends.mlx.metal import Unsupported, metal_spec

    specs, reasons = {}, set()
    for k in corpus():
        try:
            s = metal_spec(k)
        except Unsupported as e:
            reasons.add(re.sub(r"\d+", "N", str(e))[:60])
            continue
        specs.setdefault(s.name, (s, k))
    assert len(specs) >= 200, reasons
    prelude = metal_codegen.PRELUDE
    header = "typedef half float16_t;\n"

    def text(batch: list) -> str:
        return prelude + header + "\n".join(
            f"namespace bz_k{i} {{\n{s.header[len(prelude):]}\n{_as_mlx_writes_it(s, k)}\n}}"
            for i, (s, k) in enumerate(batch))

    def one(batch: list) -> list[str]:
        err = _msl_check(text(batch))
        if not err:
            return []
        return [f"{s.name}:\n{e[:3000]}" for s, k in batch if (e := _msl_check(text([(s, k)])))] \
            or ["batch failed, kernels pass alone"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = [e for es in pool.map(one, _batches(list(specs.values()), 80)) for e in es]
    assert not errors, f"{len(errors)} kernels failed:\n" + "\n\n".join(errors[:3])


@needs_mlx
def test_metal_spec_launch_geometry() -> None:
    from braze.backends.mlx.metal import BLOCK, metal_spec

    x = bz.asarray(np.ones((100, 2000), np.float32))
    rows = metal_spec(_kernel(lambda x: bz.sum(bz.exp(x), axis=-1), x))
    assert rows.threadgroup == (512, 1, 1) and rows.grid == (100 * 512, 1, 1)
    flat = metal_spec(_kernel(lambda x: bz.exp(x) * 2, x))
    assert flat.threadgroup == (BLOCK, 1, 1) and flat.grid[0] % BLOCK == 0
    assert flat.grid[0] >= 100 * 2000 or flat.grid[0] == (1 << 14) * BLOCK
    assert "bz_args" in flat.input_names and flat.args.dtype == np.int64


# ---------------------------------------------------------------- lowering
@needs_mlx
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32",
                                   "int8", "uint8", "bool"])
def test_lowering_matches_numpy_over_dtypes(dtype: str) -> None:
    rng = np.random.default_rng(0)
    d = np.dtype(dtype) if dtype != "bfloat16" else bz.bfloat16
    if dtype == "bool":
        a = rng.integers(0, 2, (8, 33)).astype(bool)
        fns = [lambda x: x & ~x.T[:8, :8].any(), lambda x: bz.sum(x, axis=-1)]
    else:
        a = (rng.standard_normal((8, 33)) * 5).astype(np.float32).astype(d)
        fns = [lambda x: bz.abs(x) * 2 + x[::-1], lambda x: bz.max(x, axis=-1) - bz.min(x),
               lambda x: bz.argmax(x, axis=-1), lambda x: bz.sum(x * x, axis=0),
               lambda x: x // 3 + x % 3 if not x.dtype == bz.bool else x]
    if dtype.startswith(("float", "bfloat")):
        fns += [lambda x: bz.softmax(x, axis=-1), lambda x: bz.sign(x / 0) + bz.tanh(x),
                lambda x: bz.mean(bz.exp(-x * x), axis=-1)]
    b = bz.backends.get("mlx")
    lowered = b.stats["lower"]
    for fn in fns:
        with bz.backend("numpy"):
            want = np.asarray(fn(bz.asarray(a)))
        with bz.backend("mlx"):
            got = np.asarray(fn(bz.asarray(a)))
        np.testing.assert_array_equal(got, want) if dtype[0] in "iub" else \
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=2e-6 if dtype in ("float32", "float64") else 1e-2,
                                       atol=1e-6)
    assert b.stats["lower"] > lowered  # (graphs on constants may fold before any kernel)


@needs_mlx
def test_a_kernel_mlx_rejects_falls_back_with_one_warning(monkeypatch) -> None:
    from braze.backends.mlx import MlxBackend, lower

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setitem(lower.LOWERED, "exp", broken)
    b = MlxBackend(use_metal=False)
    x = bz.asarray(np.linspace(0, 1, 512, dtype=np.float32).reshape(16, 32))
    k_ref = np.exp(np.asarray(x)) + 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            out = b.evaluate([(bz.exp(x) + 1)._node])[0]
            np.testing.assert_allclose(out, k_ref, rtol=1e-6)
    msgs = [str(m.message) for m in w if "mlx backend" in str(m.message)]
    assert len(msgs) == 1 and "boom" in msgs[0]
    assert b.stats["numpy"] == 3



@needs_mlx
def test_an_op_listed_unsupported_is_not_lowered_and_runs_with_numpy(monkeypatch) -> None:
    from braze.backends.mlx import MlxBackend, lower

    monkeypatch.setitem(lower.UNSUPPORTED, "exp", "listed by the test")
    b = MlxBackend(use_metal=False)
    x = bz.asarray(np.linspace(0, 1, 512, dtype=np.float32).reshape(16, 32))
    k = _kernel(lambda x: bz.exp(x) + 1, x)
    assert not lower.lowerable(k) and b.mode(k) == "numpy"
    out = b.evaluate([(bz.exp(x) + 1)._node])[0]
    np.testing.assert_allclose(out, np.exp(np.asarray(x)) + 1, rtol=1e-6)
    assert b.stats["numpy"] == 1 and b.stats["lower"] == 0

@needs_mlx
def test_matmul_runs_in_mlx_and_integer_matmul_in_numpy() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    c = rng.standard_normal((17, 5)).astype(np.float32)
    with bz.backend("mlx"):
        np.testing.assert_allclose(np.asarray(bz.asarray(a) @ bz.asarray(c)), a @ c,
                                   rtol=1e-5, atol=1e-5)
        ai = rng.integers(-9, 9, (6, 7)).astype(np.int64)
        np.testing.assert_array_equal(np.asarray(bz.asarray(ai) @ bz.asarray(ai.T)), ai @ ai.T)
