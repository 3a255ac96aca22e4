"""bz.onnx's import-time Conv fusions (arrays/onnx/fusions.py): each rule fires where its
preconditions hold and not where one fails; results equal the unfused model's within
1e-5 relative (float32)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import braze as bz  # noqa: E402

C_IN, C_OUT = 3, 4


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Fusions are backend-independent: numpy (one test runs on cpu)."""
    with bz.backend("numpy"):
        yield "numpy"


def _rng():
    return np.random.default_rng(0)


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _model(nodes, inits, outputs=("y",), extra_inputs=(), nd=2):
    sp = [6] * nd
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, C_IN, *sp])]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [C_OUT]) for n in extra_inputs]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    return helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits))


def _conv(out="c", bias=True, nd=2):
    r = _rng()
    inits = [_init("W", r.standard_normal((C_OUT, C_IN, *[3] * nd)))]
    ins = ["x", "W"]
    if bias:
        inits.append(_init("B", r.standard_normal(C_OUT)))
        ins.append("B")
    return helper.make_node("Conv", ins, [out], pads=[1] * 2 * nd), inits


def _bn(x="c", out="y", params=("s", "b", "m", "v")):
    r = _rng()
    vals = [r.uniform(0.5, 1.5, C_OUT), r.standard_normal(C_OUT), r.standard_normal(C_OUT),
            r.uniform(0.5, 1.5, C_OUT)]
    inits = [_init(n, v) for n, v in zip(params, vals)]
    return helper.make_node("BatchNormalization", [x, *params], [out], epsilon=1e-3), inits


def _check(model, expect, x=None):
    """The model's fusion counts are ``expect``; its results equal the unfused model's."""
    fused, plain = bz.onnx.load(model), bz.onnx.load(model, fold=False)
    want = dict.fromkeys(("conv_bn", "conv_mul", "conv_add"), 0) | expect
    assert fused.fusions == want, (fused.fusions, fused.fusion_refusals)
    assert not any(plain.fusions.values())
    n = len(model.graph.input)
    xs = [_rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)] if x is None else x
    for a, b in zip(fused(*xs[:n]), plain(*xs[:n])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    return fused


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("nd", [1, 2])
def test_conv_bn_folds(bias, nd):
    conv, ci = _conv(bias=bias, nd=nd)
    bn, bi = _bn()
    m = _model([conv, bn], ci + bi, nd=nd)
    x = [_rng().standard_normal((2, C_IN, *[6] * nd)).astype(np.float32)]
    fused = _check(m, {"conv_bn": 1}, x)
    assert [n.op_type for n in fused._runtime] == ["Conv"]
    assert not fused.fusion_refusals


@pytest.mark.parametrize("shape", [(C_OUT, 1, 1), (1, C_OUT, 1, 1), (), (1,)])
@pytest.mark.parametrize("op, rule", [("Mul", "conv_mul"), ("Add", "conv_add")])
@pytest.mark.parametrize("conv_first", [True, False])
def test_conv_mul_add_fold(shape, op, rule, conv_first):
    conv, ci = _conv()
    k = _init("k", _rng().uniform(0.5, 2.0, shape))
    node = helper.make_node(op, ["c", "k"] if conv_first else ["k", "c"], ["y"])
    fused = _check(_model([conv, node], ci + [k]), {rule: 1})
    assert [n.op_type for n in fused._runtime] == ["Conv"]


def test_chain_folds_one_rule_at_a_time():
    conv, ci = _conv(bias=False)
    bn, bi = _bn(out="z")
    k1, k2 = (_init(n, _rng().uniform(0.5, 2, (1, C_OUT, 1, 1))) for n in ("k1", "k2"))
    nodes = [conv, bn, helper.make_node("Mul", ["z", "k1"], ["u"]),
             helper.make_node("Add", ["u", "k2"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    fused = _check(_model(nodes, ci + bi + [k1, k2]), {"conv_bn": 1, "conv_mul": 1,
                                                       "conv_add": 1})
    assert [n.op_type for n in fused._runtime] == ["Conv", "Relu"]


def test_constants_computed_at_load_count():
    # BN's scale from a Constant node and Sqrt of an initializer: constants after folding
    conv, ci = _conv()
    bn, bi = _bn(params=("s", "b", "m", "v2"))
    r = _rng()
    nodes = [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(
        r.uniform(0.5, 1.5, C_OUT).astype(np.float32))),
        helper.make_node("Sqrt", ["vv"], ["v2"]), conv, bn]
    inits = ci + [i for i in bi if i.name in ("b", "m")] + [_init("vv", r.uniform(1, 2, C_OUT))]
    _check(_model(nodes, inits), {"conv_bn": 1})


# ---------------------------------------------------------------- refusals
def test_two_consumers_refuse():
    conv, ci = _conv()
    bn, bi = _bn(out="y")
    relu = helper.make_node("Relu", ["c"], ["r"])
    fused = _check(_model([conv, bn, relu], ci + bi, outputs=("y", "r")), {})
    assert "BatchNormalization" in [n.op_type for n in fused._runtime]


def test_graph_output_refuses():
    conv, ci = _conv()
    bn, bi = _bn()
    fused = _check(_model([conv, bn], ci + bi, outputs=("y", "c")), {})
    assert any("graph output" in r for r in fused.fusion_refusals)


def test_non_constant_parameters_refuse():
    conv, ci = _conv()
    bn, bi = _bn()
    inits = ci + [i for i in bi if i.name != "m"]
    x = _rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)
    fused = _check(_model([conv, bn], inits, extra_inputs=("m",)),
                   {}, [x, _rng().standard_normal(C_OUT).astype(np.float32)])
    assert any("not a constant" in r for r in fused.fusion_refusals), fused.fusion_refusals
    # a weight that is a graph input: nothing folds into the Conv
    conv = helper.make_node("Conv", ["x", "W2", "B"], ["c"], pads=[1, 1, 1, 1])
    k = _init("k", np.full((1, C_OUT, 1, 1), 2.0))
    m = _model([conv, helper.make_node("Mul", ["c", "k"], ["y"])], ci[1:] + [k])
    m.graph.input.append(helper.make_tensor_value_info("W2", TensorProto.FLOAT,
                                                       [C_OUT, C_IN, 3, 3]))
    w = _rng().standard_normal((C_OUT, C_IN, 3, 3)).astype(np.float32)
    fused = _check(m, {}, [x, w])
    assert any("weight is not a constant" in r for r in fused.fusion_refusals)


@pytest.mark.parametrize("shape", [(1, 1, 1, 6), (1, 1, 6), (1, C_OUT, 6, 1), (2, C_OUT, 1, 1)])
def test_not_per_channel_refuses(shape):
    conv, ci = _conv()
    k = _init("k", _rng().uniform(0.5, 2.0, shape))
    fused = _check(_model([conv, helper.make_node("Mul", ["c", "k"], ["y"])], ci + [k]), {})
    assert any("one value per output channel" in r for r in fused.fusion_refusals)


def test_non_constant_operand_refuses():
    conv, ci = _conv()
    m = _model([conv, helper.make_node("Add", ["c", "k"], ["y"])], ci)
    m.graph.input.append(helper.make_tensor_value_info("k", TensorProto.FLOAT, [C_OUT, 1, 1]))
    x = _rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)
    fused = _check(m, {}, [x, np.ones((C_OUT, 1, 1), np.float32)])
    assert any("not a constant" in r for r in fused.fusion_refusals)


def test_opt_level_below_2_and_fold_false_do_not_fuse():
    conv, ci = _conv()
    bn, bi = _bn()
    m = _model([conv, bn], ci + bi)
    assert bz.onnx.load(m, opt_level=1).fusions["conv_bn"] == 0
    assert bz.onnx.load(m, opt_level=0).fusions["conv_bn"] == 0
    assert bz.onnx.load(m, opt_level=2).fusions["conv_bn"] == 1
    assert bz.onnx.load(m, fold=False).fusions["conv_bn"] == 0
    x = _rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)
    for level in (0, 1, 2, 3):
        a = bz.onnx.load(m, opt_level=level)
        assert a._fn.pass_config is not None and a._fn.pass_config.level == level
        np.testing.assert_allclose(np.asarray(a(x)[0]), np.asarray(bz.onnx.load(m)(x)[0]),
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="optimization level"):
        bz.onnx.load(m, opt_level=7)


def test_folded_conv_bn_relu_is_one_native_call():
    """Conv + BN + ReLU, folded at import: on cpu the conv, its bias and (when the
    layout allows) its activation run as native conv calls, results as unfused."""
    if "cpu" not in bz.backends.available():
        pytest.skip("no cpu backend")
    conv, ci = _conv()
    bn, bi = _bn(out="z")
    m = _model([conv, bn, helper.make_node("Relu", ["z"], ["y"])], ci + bi)
    x = _rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)
    with bz.backend("cpu"):
        fused = bz.onnx.load(m)
        assert fused.fusions["conv_bn"] == 1
        got = np.asarray(fused(x)[0])
    with bz.backend("numpy"):
        want = np.asarray(bz.onnx.load(m, fold=False)(x)[0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_constants_are_read_only_and_shared():
    """The runtime graph's constants are read-only buffers shared with braze (a backend
    may cache what it derives from them, such as the cpu convolution's packed weights),
    and a Conv's channels-last weights are transposed once per model."""
    conv, ci = _conv()
    bn, bi = _bn()
    m = bz.onnx.load(_model([conv, bn], ci + bi))
    assert m._consts and all(not v.flags.writeable for v in m._consts.values())
    x = _rng().standard_normal((2, C_IN, 6, 6)).astype(np.float32)
    m(x)
    (node,) = m._runtime
    first = node._weights[1]
    m.compiled = False
    m(x)  # run again (eagerly): the same transposed weights
    raw, t = node._weights
    assert t is first
    assert raw is m._consts[node.input_names[1]] and not t.flags.writeable
    assert t.shape == (C_OUT, 3, 3, C_IN)
