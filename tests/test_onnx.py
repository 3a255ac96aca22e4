"""bz.onnx: ONNX's node test cases, the backend API, hand-built models, external data.

The node sweep runs every case whose op types all have a converter on the ``numpy``
backend (each case must pass, or be refused at load with a documented reason, or be in
XFAIL); one case per op type runs on the ``cpu`` backend (it builds C++ kernels).
docs/onnx.md is generated from the converter table: ``python tests/test_onnx.py`` rewrites
it, and test_doc_is_current fails when it is stale.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

import braze as bz  # noqa: E402
from braze.arrays.onnx.ops import CONVERTERS  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "onnx.md")

# Known failures, each with its reason (strict: a fix makes the test fail until removed).
XFAIL = {
    "test_attention_4d_causal_fp16_expanded":
        "float16 chain computed in float32 inside a fused kernel (one rounding); the "
        "reference rounds after every op: 2 of 192 elements differ by 2 ulps",
}
# Clean refusals at load (NotImplementedError) that a case of supported op types may hit.
REFUSALS = re.compile(r"element type|only tensors are supported|training|reduction=|"
                      r"antialias|Indices output|attribute references")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """This module picks its backends per test (the sweep is numpy; a subset is cpu)."""
    with bz.backend("numpy"):
        yield "numpy"


def _ops(model) -> set[str]:
    return {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            for n in model.graph.node}


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnx's generators warn (divide by zero...)
    NODE_CASES = load_model_tests(kind="node")
SUPPORTED = [c for c in NODE_CASES if _ops(c.model) <= set(CONVERTERS)]


def _arrays(xs):
    return [numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x for x in xs]


def _run_case(case) -> str:
    """'pass' or 'refused: ...'; raises on a wrong answer."""
    try:
        model = bz.onnx.load(case.model)
    except NotImplementedError as e:
        assert REFUSALS.search(str(e)), f"undocumented refusal: {e}"
        return f"refused: {e}"
    for inputs, refs in case.data_sets:
        outs = [np.asarray(o) for o in model(*_arrays(inputs))]
        Runner.assert_similar_outputs(_arrays(refs), outs, rtol=case.rtol, atol=case.atol)
    return "pass"


def _params(cases):
    return [pytest.param(c, id=c.name, marks=pytest.mark.xfail(reason=XFAIL[c.name],
                                                                strict=True))
            if c.name in XFAIL else pytest.param(c, id=c.name) for c in cases]


@pytest.mark.parametrize("case", _params(SUPPORTED))
def test_node_case_numpy(case):
    _run_case(case)


def _one_per_op():
    seen, out = set(), []
    for c in SUPPORTED:
        new = _ops(c.model) - seen
        if new and c.name not in XFAIL and "expanded" not in c.name:
            seen |= new
            out.append(c)
    return out


@pytest.mark.parametrize("case", _params(_one_per_op()))
def test_node_case_cpu(case):
    if "cpu" not in bz.backends.available():
        pytest.skip("no cpu backend (no C++ compiler)")
    with bz.backend("cpu"):
        _run_case(case)


def test_sweep_counts():
    """Every supported case ran: passed + refused + xfail == supported."""
    outcome = collections.Counter()
    for c in SUPPORTED:
        if c.name in XFAIL:
            outcome["xfail"] += 1
            continue
        outcome[_run_case(c).split(":")[0]] += 1
    assert outcome["pass"] + outcome["refused"] + outcome["xfail"] == len(SUPPORTED)
    assert outcome["pass"] > 1100, outcome


# ---------------------------------------------------------------- the light real models
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512"]


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_cpu(name):
    """onnx's light models (weights from ConstantOfShape) against their stored output for
    the input BackendTest feeds them (arange / size)."""
    if "cpu" not in bz.backends.available():
        pytest.skip("no cpu backend (no C++ compiler)")
    m = bz.onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    shape = m._inputs[0].shape
    size = int(np.prod(shape))
    x = (np.arange(size).reshape(shape) / size).astype(np.float32)
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT,
                                                              f"light_{name}_output_0.pb")))
    with bz.backend("cpu"):
        y = np.asarray(m(x)[0])
    np.testing.assert_allclose(y, ref, rtol=1e-3, atol=1e-6)


# ---------------------------------------------------------------- the backend API
def test_backend_test_smoke():
    import unittest

    import onnx.backend.test

    from braze.arrays.onnx import backend

    bt = onnx.backend.test.BackendTest(backend, __name__)
    bt.include(r"^test_(relu|add_bcast|conv_with_strides_padding|maxpool_2d_pads|"
               r"reshape_negative_dim|softmax_axis_1)_cpu$")
    suite = unittest.TestSuite()
    for cls in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(cls))
    result = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(suite)
    ran = result.testsRun - len(result.skipped)
    assert ran == 6 and result.wasSuccessful(), (result.failures, result.errors)


def test_run_node():
    from braze.arrays.onnx import backend

    node = helper.make_node("Add", ["a", "b"], ["c"])
    out = backend.run_node(node, [np.ones(3, np.float32), np.full(3, 2, np.float32)])
    assert out[0].tolist() == [3.0, 3.0, 3.0]
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


# ---------------------------------------------------------------- hand-built models
def _mlp(dim=None):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2) - 2, "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 2])],
                          [w, b])
    return helper.make_model(g)


def _mlp_ref(x):
    w = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    return np.maximum(x @ w + np.array([0.5, -0.5], np.float32), 0)


@pytest.mark.parametrize("compiled", [True, False])
def test_mlp_positional_and_named(compiled):
    m = bz.onnx.load(_mlp("n"), compiled=compiled)
    assert m.input_names == ["x"] and m.output_names == ["y"]
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    (y,) = m(x)
    assert isinstance(y, bz.Array)
    np.testing.assert_allclose(np.asarray(y), _mlp_ref(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m(x=x)[0]), _mlp_ref(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m(bz.asarray(x[:2]))[0]), _mlp_ref(x[:2]), rtol=1e-6)
    if compiled:
        m(x)
        assert m._fn.trace_count == 2  # one per input shape: (4, 3), (2, 3)


def test_numpy_inputs_read_in_place_never_alias_the_outputs():
    """A compiled model reads numpy inputs without copying them: an output that is a view
    of an input (Reshape) is copied out, a later write to the input never shows in
    returned outputs, and an input written in place between calls gives new results."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, [6]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(np.array([6], np.int64), "shape")])
    m = bz.onnx.load(helper.make_model(g))
    assert m.compiled
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    for _ in range(3):  # the trace, then replays
        want = x.copy()
        r, y = m(x)
        x += 10  # written in place after the call: the outputs keep the call's values
        np.testing.assert_array_equal(np.asarray(r), want.reshape(6))
        np.testing.assert_array_equal(np.asarray(y), np.maximum(want, 0))
    np.testing.assert_array_equal(np.asarray(m(x[:, ::-1])[1]), np.maximum(x[:, ::-1], 0))
    assert x.flags.writeable  # (the caller's array is left as it was)


def test_numpy_inputs_replay_without_braze_arrays(monkeypatch):
    """A model's first call makes braze arrays of its numpy inputs (the general way: the
    trace); later calls with inputs of the same shapes go straight to the replay (none
    made), and braze inputs still run."""
    import braze.arrays.onnx as bz_onnx

    made = []
    asarray = bz_onnx.asarray

    def counted(*a: object, **k: object) -> object:
        made.append(1)
        return asarray(*a, **k)

    m = bz.onnx.load(_mlp(4))
    monkeypatch.setattr(bz_onnx, "asarray", counted)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    want = np.asarray(m(x)[0])
    assert made == [1]
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(m(x)[0]), want)
    assert made == [1]
    np.testing.assert_array_equal(np.asarray(m(bz.asarray(x))[0]), want)


def test_bad_inputs():
    m = bz.onnx.load(_mlp(4))
    x = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"expected 1 inputs \['x'\], got 2"):
        m(x, x)
    with pytest.raises(ValueError, match="unknown inputs"):
        m(z=x)
    with pytest.raises(ValueError, match=r"expected 1 inputs \['x'\], got 0"):
        m()
    with pytest.raises(TypeError, match=r"input 'x': expected dtype float32, got float64"):
        m(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(4, 3\).*got \(5, 3\)"):
        m(np.ones((5, 3), np.float32))
    with pytest.raises(ValueError, match="expected shape"):
        m(np.ones(3, np.float32))


def test_unsupported_ops_listed_at_load():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("FooBar", ["a"], ["b"], name="foo1"),
             helper.make_node("LSTM", ["b"], ["c"], name="rnn"),
             helper.make_node("FooBar", ["c"], ["y"], name="foo2")]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(NotImplementedError, match=r"opset \d+: FooBar \(nodes 'foo1', "
                                                  r"'foo2'\); LSTM \(nodes 'rnn'\)"):
        bz.onnx.load(helper.make_model(g))


def test_string_input_refused():
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    with pytest.raises(NotImplementedError, match="STRING"):
        bz.onnx.load(helper.make_model(g))


def test_shape_arithmetic_folds_in_the_trace():
    # Shape -> Gather -> Concat -> Reshape: Python ints when traced; one kernel-free reshape
    c = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    i0 = numpy_helper.from_array(np.array([0], np.int64), "i0")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"]),
             helper.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 6])],
                          [c, i0])
    m = bz.onnx.load(helper.make_model(g))
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    assert np.asarray(m(x)[0]).tolist() == x.reshape(4, 6).tolist()


def test_data_dependent_shape_runs_eagerly():
    nodes = [helper.make_node("NonZero", ["x"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [1, None])])
    m = bz.onnx.load(helper.make_model(g))
    assert not m.compiled
    assert np.asarray(m(np.array([0, 1, 0, 2], np.float32))[0]).tolist() == [[1, 3]]
    # a shape read from the data in a traced model: it falls back to eager, with a warning
    nodes = [helper.make_node("Cast", ["s"], ["s64"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "s64"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
                           helper.make_tensor_value_info("s", TensorProto.INT32, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = bz.onnx.load(helper.make_model(g))
    with pytest.warns(RuntimeWarning, match="eagerly"):
        y = m(np.arange(6, dtype=np.float32), np.array([2, 3], np.int32))[0]
    assert y.shape == (2, 3) and not m.compiled


def test_load_from_path_and_bytes(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp(2), str(path))
    x = np.ones((2, 3), np.float32)
    for src in (str(path), path, path.read_bytes()):
        np.testing.assert_allclose(np.asarray(bz.onnx.load(src)(x)[0]), _mlp_ref(x))
    with pytest.raises(FileNotFoundError):
        bz.onnx.load(str(tmp_path / "absent.onnx"))
    with pytest.raises(TypeError, match="expected a path"):
        bz.onnx.load(42)


def _pool_model(op, **attrs):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g)


def test_pools_run_channels_last_through_bz_nn(monkeypatch):
    """MaxPool / AveragePool are bz.nn.max_pool / avg_pool between two transposes; pads as
    large as the window (which bz.nn refuses) take the composed path."""
    from braze.arrays.onnx import ops_nn

    took = []
    nn_pool = ops_nn._nn_pool
    monkeypatch.setattr(ops_nn, "_nn_pool", lambda *a: took.append(nn_pool(*a)) or took[-1])
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    xp = np.pad(x, [(0, 0), (0, 0), (2, 2), (2, 2)], constant_values=-np.inf)
    want = np.max([xp[:, :, i:i + 8:2, j:j + 8:2] for i in range(2) for j in range(2)], axis=0)
    m = _pool_model("MaxPool", kernel_shape=[2, 2], strides=[2, 2], pads=[2, 2, 2, 2])
    np.testing.assert_array_equal(np.asarray(bz.onnx.load(m)(x)[0]), want)
    assert took == [None]
    m = _pool_model("AveragePool", kernel_shape=[3, 3], auto_pad="SAME_UPPER")
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ones = np.pad(np.ones((5, 5)), 1)
    total = sum(xp[:, :, i:i + 5, j:j + 5] for i in range(3) for j in range(3))
    count = sum(ones[i:i + 5, j:j + 5] for i in range(3) for j in range(3))
    np.testing.assert_allclose(np.asarray(bz.onnx.load(m)(x)[0]), total / count, rtol=1e-6)
    assert len(took) == 2 and took[1] is not None


# ---------------------------------------------------------------- external data
def _external_model(d, location, offset=None, length=None):
    data = np.arange(4, dtype=np.float32)
    t = numpy_helper.from_array(data, "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    if offset is not None:
        t.external_data.add(key="offset", value=str(offset))
    if length is not None:
        t.external_data.add(key="length", value=str(length))
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [t])
    path = os.path.join(d, "model.onnx")
    onnx.save(helper.make_model(g), path)
    return path


def test_external_data_inside_the_directory(tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "w.bin").write_bytes(b"\0" * 8 + np.arange(4, dtype=np.float32)
                                                 .tobytes())
    path = _external_model(str(tmp_path), "weights/w.bin", offset=8, length=16)
    y = bz.onnx.load(path)(np.ones(4, np.float32))[0]
    assert np.asarray(y).tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="external file"):
        bz.onnx.load(onnx.load(path, load_external_data=False))  # no directory known


@pytest.mark.parametrize("location, why", [
    ("../secret.bin", "'..' component"),
    ("weights/../../secret.bin", "'..' component"),
    ("/etc/passwd", "absolute path"),
    ("link.bin", "outside the model's directory"),
    ("absent.bin", "no such file"),
])
def test_external_data_refused(tmp_path, location, why):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (model_dir / "link.bin").symlink_to(secret)
    path = _external_model(str(model_dir), location)
    with pytest.raises(ValueError, match=re.escape(why)) as e:
        bz.onnx.load(path)
    assert "'location'" in str(e.value) and "'w'" in str(e.value)


def test_external_data_offset_length_checked(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(ValueError, match="past the end"):
        bz.onnx.load(_external_model(str(tmp_path), "w.bin", offset=8, length=16))
    with pytest.raises(ValueError, match="negative"):
        bz.onnx.load(_external_model(str(tmp_path), "w.bin", offset=-4))


# ---------------------------------------------------------------- docs/onnx.md
def render_doc() -> str:
    per_op = collections.Counter()
    for c in NODE_CASES:
        for o in _ops(c.model):
            per_op[o] += 1
    supported = sorted(CONVERTERS)
    missing = sorted((o for o in per_op if o not in CONVERTERS), key=lambda o: (-per_op[o], o))
    lines = [
        "# ONNX import (`bz.onnx`): op coverage",
        "",
        "Generated by `python tests/test_onnx.py` from the converter table",
        "(`arrays/onnx/ops*.py`) and onnx's node test cases; `tests/test_onnx.py` checks that",
        "it is current. A model with an op type listed as unsupported is refused at load",
        "(`NotImplementedError` naming every such op type and node).",
        "",
        f"Node test cases in onnx {onnx.__version__}: {len(NODE_CASES)}; whose op types all "
        f"have a converter: {len(SUPPORTED)} (they run in the test suite: each passes, is "
        "refused at load for a documented reason (string/float8/int4 element types, "
        "sequences, training mode, scatter reductions, antialiasing, MaxPool's Indices), "
        "or is a listed expected failure).",
        "",
        "## Import-time fusions and optimization levels",
        "",
        "`bz.onnx.load(model, opt_level=None, fold=True)`: `opt_level` (0 none, 1 basic, 2",
        "extended, 3 layout; None: `BRAZE_OPT_LEVEL` or the highest) is passed to `bz.compile`.",
        "At level 2 and above, with `fold=True`, a BatchNormalization, Mul or Add by constants",
        "after a Conv is folded into the Conv's weights and bias at load",
        "(`arrays/onnx/fusions.py`: ONNX Runtime's conv_bn / conv_mul / conv_add fusions and",
        "their preconditions: constant weights and parameters, the Conv's output read by that",
        "node alone and not a graph output, one value per output channel).",
        "`model.fusions` counts what fired per rule; `model.fusion_refusals` says why a rule",
        "whose pattern matched did not. A Conv runs channels-last (`bz.conv_general`), its bias",
        "added before the result is transposed back, so the `conv_epilogue` pass fuses it;",
        "MaxPool / AveragePool run `bz.nn.max_pool` / `avg_pool` channels-last.",
        "",
        f"## Supported op types ({len(supported)})",
        "",
        ", ".join(f"`{o}`" for o in supported),
        "",
        f"## Op types of the node tests without a converter ({len(missing)})",
        "",
        "| op type | node test cases using it |",
        "|---|---|",
        *(f"| `{o}` | {per_op[o]} |" for o in missing),
        "",
    ]
    return "\n".join(lines)


def test_doc_is_current():
    with open(DOC) as f:
        assert f.read() == render_doc(), "docs/onnx.md is stale: python tests/test_onnx.py"


if __name__ == "__main__":
    with open(DOC, "w") as f:
        f.write(render_doc())
    print(f"wrote {DOC}", file=sys.stderr)
