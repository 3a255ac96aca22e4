"""Untrusted inputs (issue 21): kernel and model caches that are not private are never
loaded from.

The cache's checksum sidecars only detect corruption; what keeps another user's code out
of the process is :mod:`braze.backends.trust`: a cache directory (or entry) owned by
someone else, writable by group or others, or under a directory others can write (not
sticky) is refused with one warning, and kernels build into a private per-process
directory instead (they still run, and give the same answers).
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import braze as bz
from braze.backends import trust
from braze.backends.cpu import build, codegen
from braze.graph.compiler import compile_graph

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="no file owners here")


@pytest.fixture(autouse=True)
def _once(backend_name):
    if backend_name != "numpy":
        pytest.skip("files and caches do not depend on the backend: run once")

NOBODY = 65534


def _kernel() -> codegen.GeneratedKernel:
    x = bz.asarray(np.linspace(-1, 1, 32, dtype=np.float32))
    s, _ = compile_graph([(bz.tanh(x) * 0.5 + 1.0)._node])
    return codegen.generate(s.kernels[0])


@pytest.fixture
def fresh(monkeypatch):
    """A process state without a cache directory chosen or a private one made."""
    monkeypatch.setattr(build, "_PRIVATE", None)
    monkeypatch.setattr(build, "_usable", {})
    monkeypatch.setattr(build, "_loaded", {})
    return monkeypatch


def _private_build(cache: Path) -> tuple[Path, list[str]]:
    """Build the test kernel with ``cache`` configured: (the library, warnings)."""
    g = _kernel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = build.build(g.source, g.symbol)
        handle = build.load(g.source, g.symbol)
    assert isinstance(handle, int)
    return lib, [str(w.message) for w in caught if "not private" in str(w.message)]


def test_a_new_cache_directory_is_private(tmp_path, fresh) -> None:
    fresh.setenv("BRAZE_CACHE_DIR", str(tmp_path / "a" / "kernels"))
    lib, warned = _private_build(tmp_path / "a" / "kernels")
    assert not warned and lib.parent == tmp_path / "a" / "kernels"
    assert (lib.parent.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_cache_directory_others_can_write_is_refused(tmp_path, fresh, mode) -> None:
    cache = tmp_path / "kernels"
    cache.mkdir()
    cache.chmod(mode)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    lib, warned = _private_build(cache)
    assert len(warned) == 1 and "writable by" in warned[0] and str(cache) in warned[0]
    assert not str(lib).startswith(str(cache))  # built in the private directory
    assert list(cache.iterdir()) == []  # nothing written where others could swap it


def test_a_cache_under_a_directory_others_can_write_is_refused_unless_sticky(
        tmp_path, fresh) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # like /tmp without its sticky bit: others may rename our cache
    fresh.setenv("BRAZE_CACHE_DIR", str(shared / "kernels"))
    _, warned = _private_build(shared / "kernels")
    assert len(warned) == 1 and "its parent directory" in warned[0]
    shared.chmod(0o1777)  # sticky, as /tmp is: trusted
    assert trust.problem(shared / "kernels") is None


def test_a_cache_directory_owned_by_another_user_is_refused(tmp_path, fresh) -> None:
    if os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    cache = tmp_path / "kernels"
    cache.mkdir(mode=0o700)
    os.chown(cache, NOBODY, NOBODY)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    _, warned = _private_build(cache)
    assert len(warned) == 1 and f"owned by uid {NOBODY}" in warned[0]


@pytest.mark.parametrize("how", ["group-writable", "other-user", "symlink"])
def test_a_planted_cache_entry_is_never_loaded(tmp_path, fresh, how) -> None:
    """An entry with a valid checksum sidecar but loose ownership or permissions (what a
    planted library looks like) is not loaded: the kernel is built privately."""
    cache = tmp_path / "kernels"
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    g = _kernel()
    lib = build.build(g.source, g.symbol)  # a genuine entry, then tampered with
    if how == "group-writable":
        lib.chmod(0o664)
    elif how == "other-user":
        if os.getuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(lib, NOBODY, NOBODY)
    else:
        real = tmp_path / "elsewhere.so"
        lib.rename(real)
        lib.symlink_to(real)
    fresh.setattr(build, "_loaded", {})
    got, warned = _private_build(cache)
    assert len(warned) == 1 and str(lib) in warned[0] and got != lib
    assert not str(got).startswith(str(cache))


def test_kernels_from_a_refused_cache_still_give_the_answers(tmp_path, fresh) -> None:
    cache = tmp_path / "kernels"
    cache.mkdir()
    cache.chmod(0o777)
    fresh.setenv("BRAZE_CACHE_DIR", str(cache))
    x = np.linspace(-2, 2, 257, dtype=np.float32)
    with warnings.catch_warnings(record=True), bz.backend("cpu"):
        warnings.simplefilter("always")
        got = np.asarray(bz.exp(bz.asarray(x)) * 2.0 + 1.0)
    np.testing.assert_allclose(got, np.exp(x) * 2.0 + 1.0, rtol=1e-6)


def test_a_model_cache_others_can_write_is_not_used(tmp_path, monkeypatch) -> None:
    """The repacked-GGUF model cache lives under the same root: not private -> models are
    loaded from the file itself, uncached, after a warning."""
    from braze.arrays import io

    root = tmp_path / "root"
    (root / "models").mkdir(parents=True)
    (root / "models").chmod(0o777)
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(root))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.warns(RuntimeWarning, match="model cache is not private.*writable by others"):
        assert io._model_cache_dir(str(model)) is None
    (root / "models").chmod(0o700)
    assert io._model_cache_dir(str(model)) is not None


def test_trust_rules() -> None:
    assert trust.entry_problem("/no/such/file") is None
    assert "not a directory" in (trust.problem(__file__) or "")


# ---------------------------------------------------------------- hostile model files
# Every loader gets mutated and truncated real files: each load either succeeds (a byte
# flip can leave a valid file) or raises a ValueError naming the file -- never another
# exception type, a crash, or an allocation beyond MEMORY_BOUND (traced by tracemalloc:
# numpy reports its allocations there; memory-mapped file data is not an allocation).
MEMORY_BOUND = 64 << 20
FUZZ_EXAMPLES = int(os.environ.get("BRAZE_FUZZ_FILES", "200"))


def _small_files(d: Path) -> dict[str, bytes]:
    import gguf

    w = gguf.GGUFWriter(str(d / "t.gguf"), "llama")
    w.add_block_count(1)
    w.add_string("general.name", "tiny")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    w.add_tensor("token_embd.weight", np.arange(4 * 32, dtype=np.float32).reshape(4, 32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((2, 64), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    x = bz.arange(12).reshape(3, 4).astype(bz.float32)
    bz.save(str(d / "t.safetensors"), {"a": x, "b": bz.ones(5)}, metadata={"k": "v"})
    bz.save(str(d / "t.npz"), {"a": x, "b": bz.arange(5)})
    bz.save(str(d / "t.npy"), x)
    return {fmt: (d / f"t.{fmt}").read_bytes() for fmt in ("gguf", "safetensors", "npz", "npy")}


def _mutations(size: int, head: int, tail: int = 0):
    """Byte flips in the first ``head`` bytes (where headers, counts and offsets live) or
    the last ``tail`` bytes (a GGUF's tensor table), 8-byte fields overwritten with huge
    values, and truncations."""
    from hypothesis import strategies as st

    where = st.integers(0, max(head - 8, 0))
    if tail:
        where = st.one_of(where, st.integers(size - tail, size - 8))
    big = st.sampled_from([2**63 - 1, 2**64 - 1, 2**40, 2**32 + 7, 2**31])
    flips = st.lists(st.tuples(where, st.integers(0, 255)), max_size=6)
    words = st.lists(st.tuples(where, big), max_size=2)
    return st.tuples(flips, words, st.one_of(st.none(), st.integers(0, size - 1)))


def _mutate(data: bytes, mutation) -> bytes:
    import struct

    flips, words, cut = mutation
    b = bytearray(data)
    for pos, value in flips:
        b[pos] = value
    for pos, value in words:
        b[pos:pos + 8] = struct.pack("<Q", value)
    return bytes(b[:cut] if cut is not None else b)


def _load_checked(path: Path, load, bound: int = MEMORY_BOUND) -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        load(str(path))
    except ValueError as e:
        assert str(path) in str(e), f"{type(e).__name__}: {e}"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < bound, f"{peak} bytes traced loading a {path.stat().st_size}-byte file"


@pytest.mark.parametrize("fmt", ["gguf", "safetensors", "npz", "npy"])
def test_fuzzed_model_files_give_clean_errors(tmp_path, monkeypatch, fmt) -> None:
    from hypothesis import HealthCheck, given, settings

    monkeypatch.setenv("BRAZE_MODEL_CACHE", "0")
    src = _small_files(tmp_path)[fmt]
    path = tmp_path / f"fuzzed.{fmt}"

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(mutation=_mutations(len(src), min(len(src), 512)))
    def run(mutation) -> None:
        path.write_bytes(_mutate(src, mutation))
        _load_checked(path, bz.load)

    run()


def test_fuzzed_headers_of_the_embedded_model_give_clean_errors(tmp_path) -> None:
    """The embedded SmolLM2 GGUF's header and tensor table (everything before the first
    tensor's data) mutated, the rest of the file a sparse copy of its size: the parse and
    every bounds check run (the weights themselves are not repacked). Its 49152-token
    vocabulary makes a parse take seconds and ~160 MB of Python objects: fewer examples,
    and a bound of twice the intact file's."""
    import sys
    import tracemalloc

    from hypothesis import HealthCheck, given, settings

    from braze.arrays import io

    sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "llm"))
    import llama

    try:
        model = llama.default_model_path()
    except FileNotFoundError as e:  # pragma: no cover - `make test` installs it
        pytest.skip(str(e))
    _, tensors = io._gguf_index(model)
    head_bytes = min(t.data_offset for t in tensors)
    size = os.path.getsize(model)
    with open(model, "rb") as f:
        head = f.read(head_bytes)
    path = tmp_path / "model.gguf"
    tracemalloc.start()
    io._gguf_index(model)
    bound = 2 * tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    table = sum(len(t.name) + 4 + 8 * len(t.shape) + 4 + 8 + 8 for t in tensors)

    @settings(max_examples=max(FUZZ_EXAMPLES // 10, 5), deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(mutation=_mutations(head_bytes, 4096, table))
    def run(mutation) -> None:
        with open(path, "wb") as f:
            f.write(_mutate(head, mutation))
            f.truncate(size)  # sparse: the tensor data's place, zeros
        _load_checked(path, io._gguf_index, bound)

    run()


def test_crafted_npy_and_npz_files_are_refused_before_allocating(tmp_path) -> None:
    """A header that claims far more data than follows, and object arrays (pickles)."""
    import zipfile

    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                 "shape": (1 << 40,)})
        f.write(b"\0" * 64)
    with pytest.raises(ValueError, match=r"huge.npy: the header claims shape \(1099511627776,\)"):
        bz.load(str(huge))
    objs = tmp_path / "objs.npz"
    np.savez(objs, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"objs.npz\[a.npy\]: holds Python objects"):
        bz.load(str(objs))
    member = tmp_path / "member.npz"
    with zipfile.ZipFile(member, "w") as z:
        with z.open("w.npy", "w") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                                     "shape": (1 << 30, 1 << 10)})
    with pytest.raises(ValueError, match=r"member.npz\[w.npy\]: the header claims"):
        bz.load(str(member))


def test_crafted_gguf_counts_name_the_field(tmp_path) -> None:
    import struct

    src = _small_files(tmp_path)["gguf"]
    for offset, field in ((8, "tensor_count"), (16, "kv_count")):
        p = tmp_path / f"{field}.gguf"
        p.write_bytes(src[:offset] + struct.pack("<Q", 1 << 40) + src[offset + 8:])
        with pytest.raises(ValueError, match=f"{p}: corrupt GGUF header: {field} is"):
            bz.load(str(p))


# ---------------------------------------------------------------- hostile ONNX files
ONNX_CASES = ("test_conv_with_strides_padding", "test_gemm_default_matrix_bias",
              "test_batchnorm_example", "test_reshape_extended_dims",
              "test_constantofshape_int_zeros", "test_resize_upsample_scales_linear")


@functools.cache
def _node_cases() -> dict[str, Any]:
    """The node-suite cases the fuzzer starts from (generating the suite takes seconds)."""
    from onnx.backend.test.loader import load_model_tests

    return {c.name: c for c in load_model_tests(kind="node") if c.name in ONNX_CASES}


def _onnx_files(d: Path) -> dict[str, bytes]:
    """Models from ONNX's node test suite (inputs turned into initializers, so that their
    data, shapes and shape inputs are part of the file), and a model whose weight lives in
    an external data file beside it."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    out = {}
    cases = _node_cases()
    for name in ONNX_CASES:
        case = cases[name]
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        inputs = case.data_sets[0][0]
        for vi, value in zip(list(model.graph.input), inputs):
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), vi.name))
        del model.graph.input[:]
        out[name] = model.SerializeToString()
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    model = helper.make_model(g)
    onnx.save_model(model, str(d / "external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="external.bin", size_threshold=0)
    out["external"] = (d / "external.onnx").read_bytes()
    return out


@pytest.mark.parametrize("which", [*ONNX_CASES, "external"])
def test_fuzzed_onnx_models_give_clean_errors(tmp_path, monkeypatch, which) -> None:
    """bz.onnx.load on mutated and truncated models: it loads, or raises ValueError (a
    malformed file, a folded value over the limit) or NotImplementedError (an op type a
    flipped byte made unknown), naming the file; within MEMORY_BOUND."""
    from hypothesis import HealthCheck, given, settings

    monkeypatch.setenv("BRAZE_ONNX_MAX_CONSTANT_BYTES", str(MEMORY_BOUND // 4))
    src = _onnx_files(tmp_path)[which]
    path = tmp_path / "fuzzed.onnx"  # (beside external.bin: the external model's data)

    @settings(max_examples=max(FUZZ_EXAMPLES // 2, 10), deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(mutation=_mutations(len(src), len(src)))
    def run(mutation) -> None:
        import tracemalloc

        path.write_bytes(_mutate(src, mutation))
        tracemalloc.start()
        try:
            bz.onnx.load(str(path), compiled=False)
        except (ValueError, NotImplementedError) as e:
            assert str(path) in str(e), f"{type(e).__name__}: {e}"
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < MEMORY_BOUND, f"{peak} bytes traced loading a {len(src)}-byte model"

    run()


def test_crafted_onnx_files_name_the_problem(tmp_path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    path = tmp_path / "bomb.onnx"
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [1 << 20, 1 << 20])
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    onnx.save(helper.make_model(g), str(path))
    with pytest.raises(ValueError, match=r"bomb\.onnx.*ConstantOfShape.*\(1048576, 1048576\).*"
                                         r"over the limit"):
        bz.onnx.load(str(path))
    path.write_bytes(b"\x08\x07not a model")
    with pytest.raises(ValueError, match=r"bomb\.onnx.*malformed model"):
        bz.onnx.load(str(path))


def test_a_compressed_npz_member_that_expands_like_a_zip_bomb_is_refused(tmp_path) -> None:
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, a=np.zeros(128 << 20, np.uint8))  # ~130 KB on disk
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ValueError, match=r"bomb\.npz\[a\.npy\].*zip bomb"):
        bz.load(str(path))
    np.savez_compressed(tmp_path / "ok.npz", a=np.zeros(1 << 20, np.uint8))  # under the floor
    assert bz.load(str(tmp_path / "ok.npz"))["a"].shape == (1 << 20,)
