"""The ONNX op table: one converter per op type (default domain), and the node context.

A converter is ``fn(n, *xs) -> Array | tuple``: ``n`` is the :class:`NodeContext` (the
node's attributes, opset, and ``n.const(i)``: input ``i`` as a numpy value, for inputs
that ONNX passes as tensors but braze needs as Python ints: shapes, axes, pads, k...),
``xs`` the inputs as braze arrays (None for an absent optional input). Opset differences
(an attribute that became an input) are handled inside the converter. A converter may
return numpy values (``Shape``, ``Range``...): they stay constants for the next nodes.
Conv/pool/normalization converters are in :mod:`.ops_nn`.

Registration: ``@op("Name", ...)``; ``check=`` refuses a node configuration at load
(a reason string), ``dynamic=True`` marks ops whose output shape depends on data (the
model then runs eagerly), ``fold=False`` keeps an op out of constant folding (random).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from ... import arrays as _arrays
from ..array import TRACING, Array

bz: Any = _arrays  # typed loosely: mypy cannot see the star-imported names

Converter = Callable[..., Any]
CONVERTERS: dict[str, Converter] = {}
CHECKS: dict[str, Callable[[NodeContext], str | None]] = {}
DYNAMIC: set[str] = set()
NO_FOLD: set[str] = set()


def op(*names: str, check: Callable[[NodeContext], str | None] | None = None,
       dynamic: bool = False, fold: bool = True) -> Callable[[Converter], Converter]:
    """Register ``fn`` as the converter of the ONNX op types ``names``."""
    def deco(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
            if check is not None:
                CHECKS[name] = check
            if dynamic:
                DYNAMIC.add(name)
            if not fold:
                NO_FOLD.add(name)
        return fn
    return deco


class DataDependentError(Exception):
    """A value that must be known to build the graph (a shape, axes...) is computed from
    the model's inputs: it cannot be traced, only run eagerly."""


# ---------------------------------------------------------------- dtypes and tensors
_SUPPORTED = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128"}


def onnx_dtype(elem_type: int, what: str) -> np.dtype:
    """The numpy dtype of an ONNX element type; NotImplementedError where braze has none."""
    import onnx

    name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in \
        onnx.TensorProto.DataType.values() else str(elem_type)
    try:
        d = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        d = None
    if d is None or d.name not in _SUPPORTED or (name.startswith(("FLOAT8", "FLOAT4", "INT4",
                                                                  "UINT4", "INT2", "UINT2"))):
        raise NotImplementedError(f"bz.onnx: {what} has element type {name}, which braze does "
                                  f"not support (supported: {sorted(_SUPPORTED)})")
    return d


def tensor_to_numpy(t: Any, what: str) -> np.ndarray:
    from onnx import numpy_helper

    onnx_dtype(t.data_type, what)
    return np.asarray(numpy_helper.to_array(t))


def _attr_value(a: Any, where: str) -> Any:
    import onnx

    if a.ref_attr_name:
        raise NotImplementedError(f"bz.onnx: {where}: attribute references (functions)")
    T = onnx.AttributeProto
    if a.type == T.TENSOR:
        return tensor_to_numpy(a.t, f"{where} attribute {a.name!r}")
    if a.type == T.STRING:
        return a.s.decode("utf-8", "replace")
    if a.type == T.STRINGS:
        return [s.decode("utf-8", "replace") for s in a.strings]
    if a.type in (T.GRAPH, T.GRAPHS, T.SPARSE_TENSOR, T.TENSORS, T.SPARSE_TENSORS,
                  T.TYPE_PROTO, T.TYPE_PROTOS):
        return a  # the converters that take these read the proto themselves
    return onnx.helper.get_attribute_value(a)


class NodeContext:
    """One ONNX node as the converters see it: op type, attributes, opset, inputs."""

    def __init__(self, node: Any, opset: int, onnx: Any = None) -> None:
        self.op_type = node.op_type
        self.domain = node.domain
        self.name = node.name
        self.opset = opset
        self.input_names = list(node.input)
        self.output_names = list(node.output)
        self.label = f"{node.op_type} node {node.name or '(unnamed)'!r} (opset {opset})"
        self.attrs = {a.name: _attr_value(a, self.label) for a in node.attribute}
        self._raw: list[Any] = []

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    @property
    def num_outputs(self) -> int:
        return len(self.output_names)

    def wants(self, i: int) -> bool:
        """Whether output ``i`` is used (present and named)."""
        return i < len(self.output_names) and bool(self.output_names[i])

    def has(self, i: int) -> bool:
        return i < len(self.input_names) and bool(self.input_names[i])

    def const(self, i: int) -> Any:
        """Input ``i`` as a numpy array (None if absent); it must be known now."""
        if not self.has(i):
            return None
        v = self._raw[i]
        if isinstance(v, np.ndarray):
            return v
        if TRACING.get():
            raise DataDependentError(f"{self.label}: input {i} ({self.input_names[i]!r}) is "
                                     "computed from the model's inputs but sets a shape, "
                                     "axis or count")
        return np.asarray(v)

    def ints(self, i: int) -> Any:
        """Input ``i`` as a list of Python ints (None if absent)."""
        v = self.const(i)
        return None if v is None else [int(e) for e in np.asarray(v).reshape(-1)]

    def convert(self, args: list[Any], raw: list[Any]) -> list[Any]:
        self._raw = list(raw) + [None] * (len(self.input_names) - len(raw))
        out = CONVERTERS[self.op_type](self, *args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for i in range(len(outs), len(self.output_names)):
            if self.output_names[i]:
                raise NotImplementedError(f"{self.label}: output {i} "
                                          f"({self.output_names[i]!r}) is not supported")
        return outs


# the largest value a model may make at load (constant folding: a ConstantOfShape of a
# 2^40-element shape in a 200-byte file is refused before anything is allocated)
MAX_CONSTANT_BYTES: ContextVar[int] = ContextVar("MAX_CONSTANT_BYTES", default=1 << 31)


def fold(n: NodeContext, raw: list[Any]) -> list[Any]:
    """Run node ``n`` on constant (numpy) inputs now, on the numpy backend: numpy out. A
    result over ``MAX_CONSTANT_BYTES`` is refused (its shape is known before its data)."""
    from ...backends import backend

    with backend("numpy"):
        args = [None if v is None else bz.asarray(v) for v in raw]
        outs = n.convert(args, raw)
        limit = MAX_CONSTANT_BYTES.get()
        for o in outs:
            nbytes = 0 if o is None else int(np.prod(np.shape(o), dtype=object)) * \
                np.dtype(o.dtype).itemsize
            if nbytes > limit:
                raise ValueError(f"bz.onnx: node {n.label} would make a constant of shape "
                                 f"{tuple(np.shape(o))} ({nbytes} bytes) at load, over the "
                                 f"limit of {limit} bytes (max_constant_bytes)")
        return [None if o is None else np.asarray(o) for o in outs]


# ---------------------------------------------------------------- helpers
def _axis(a: int, ndim: int) -> int:
    return a + ndim if a < 0 else a


def _cast(x: Array, d: Any) -> Array:
    return x if x.dtype == d else bz.astype(x, d)


# ---------------------------------------------------------------- elementwise
_UNARY = {
    "Abs": bz.abs, "Neg": bz.negative, "Exp": bz.exp, "Log": bz.log, "Sqrt": bz.sqrt,
    "Sin": bz.sin, "Cos": bz.cos, "Tan": bz.tan, "Asin": bz.asin, "Acos": bz.acos,
    "Atan": bz.atan, "Sinh": bz.sinh, "Cosh": bz.cosh, "Tanh": bz.tanh, "Asinh": bz.asinh,
    "Acosh": bz.acosh, "Atanh": bz.atanh, "Ceil": bz.ceil, "Floor": bz.floor,
    "Round": bz.round, "Sigmoid": bz.sigmoid, "Sign": bz.sign, "Not": bz.logical_not,
    "BitwiseNot": bz.bitwise_invert, "IsNaN": bz.isnan,
    "Reciprocal": lambda x: _cast(1 / x, x.dtype),
}
_BINARY = {
    "Add": bz.add, "Sub": bz.subtract, "Mul": bz.multiply, "And": bz.logical_and,
    "Or": bz.logical_or, "Xor": bz.logical_xor, "Equal": bz.equal, "Less": bz.less,
    "LessOrEqual": bz.less_equal, "Greater": bz.greater, "GreaterOrEqual": bz.greater_equal,
    "BitwiseAnd": bz.bitwise_and, "BitwiseOr": bz.bitwise_or, "BitwiseXor": bz.bitwise_xor,
}


def _unary(fn: Callable[[Array], Array]) -> Converter:
    return lambda n, x: fn(x)


def _binary(fn: Callable[[Array, Array], Array]) -> Converter:
    return lambda n, a, b: fn(a, b)


for _name, _fn in _UNARY.items():
    op(_name)(_unary(_fn))
for _name, _fn in _BINARY.items():
    op(_name)(_binary(_fn))


@op("Identity")
def _identity(n: NodeContext, x: Array) -> Array:
    return x


@op("Erf")
def _erf(n: NodeContext, x: Array) -> Array:
    from ..nn import _erf as erf  # braze has no public erf yet (A&S 7.1.26, 1.5e-7)

    return _cast(erf(_cast(x, np.float32) if x.dtype == np.float16 else x), x.dtype)


@op("IsInf")
def _isinf(n: NodeContext, x: Array) -> Array:
    pos, neg = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    if pos and neg:
        return bz.isinf(x)
    if pos:
        return bz.isinf(x) & (x > 0)
    return bz.isinf(x) & (x < 0) if neg else bz.zeros(x.shape, dtype=bz.bool)


@op("Div")
def _div(n: NodeContext, a: Array, b: Array) -> Array:
    if bz.isdtype(a.dtype, "integral"):
        # C-style division truncates toward zero (floor_divide floors)
        q = bz.floor_divide(a, b)
        adjust = (bz.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))
        return _cast(q + _cast(adjust, q.dtype), a.dtype)
    return _cast(bz.divide(a, b), a.dtype)


@op("Mod")
def _mod(n: NodeContext, a: Array, b: Array) -> Array:
    return bz.fmod(a, b) if n.attr("fmod", 0) else bz.remainder(a, b)


@op("Pow")
def _pow(n: NodeContext, a: Array, b: Array) -> Array:
    if a.dtype == b.dtype:
        return bz.pow(a, b)
    if bz.isdtype(a.dtype, "integral") and not bz.isdtype(b.dtype, "integral"):
        return _cast(bz.pow(_cast(a, np.float64), _cast(b, np.float64)), a.dtype)
    return _cast(bz.pow(a, _cast(b, a.dtype)), a.dtype)


@op("BitShift")
def _bitshift(n: NodeContext, a: Array, b: Array) -> Array:
    left = n.attr("direction") == "LEFT"
    return (bz.bitwise_left_shift if left else bz.bitwise_right_shift)(a, b)


def _variadic(fn: Callable[[Array, Array], Array]) -> Converter:
    def convert(n: NodeContext, *xs: Array) -> Array:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out
    return convert


op("Sum")(_variadic(bz.add))
op("Max")(_variadic(bz.maximum))
op("Min")(_variadic(bz.minimum))


@op("Mean")
def _mean(n: NodeContext, *xs: Array) -> Array:
    return _cast(_variadic(bz.add)(n, *xs) / len(xs), xs[0].dtype)


@op("Where")
def _where(n: NodeContext, c: Array, a: Array, b: Array) -> Array:
    return bz.where(c, a, b)


def _cast_check(n: NodeContext) -> str | None:
    try:
        if n.op_type == "Cast":
            onnx_dtype(n.attr("to"), "Cast's 'to'")
    except NotImplementedError as e:
        return str(e)
    return None


@op("Cast", check=_cast_check)
def _cast_op(n: NodeContext, x: Array) -> Array:
    to = onnx_dtype(n.attr("to"), n.label)
    if bz.isdtype(x.dtype, "real floating") and bz.isdtype(to, "integral") \
            and to != np.bool_:
        x = bz.trunc(x)  # explicit: float -> int truncates toward zero
    return bz.astype(x, to)


@op("CastLike")
def _cast_like(n: NodeContext, x: Array, like: Array) -> Array:
    return bz.astype(x, like.dtype)


@op("Constant")
def _constant(n: NodeContext) -> np.ndarray:
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in n.attrs:
            return np.asarray(n.attrs[key], dtype=dtype)
    if "value" in n.attrs:
        return np.asarray(n.attrs["value"])
    raise NotImplementedError(f"{n.label}: only tensor/float/int values "
                              f"(got {sorted(n.attrs)})")


def _constant_check(n: NodeContext) -> str | None:
    if not {"value", "value_float", "value_floats", "value_int", "value_ints"} & set(n.attrs):
        return f"Constant with {sorted(n.attrs)} (strings and sparse values are unsupported)"
    return None


CHECKS["Constant"] = _constant_check


# ---------------------------------------------------------------- activations
@op("Relu")
def _relu(n: NodeContext, x: Array) -> Array:
    return bz.maximum(x, 0)


@op("LeakyRelu")
def _leaky(n: NodeContext, x: Array) -> Array:
    return bz.where(x >= 0, x, x * n.attr("alpha", 0.01))


@op("PRelu")
def _prelu(n: NodeContext, x: Array, slope: Array) -> Array:
    return bz.where(x >= 0, x, x * slope)


@op("ThresholdedRelu")
def _thresholded(n: NodeContext, x: Array) -> Array:
    return bz.where(x > n.attr("alpha", 1.0), x, 0)


@op("Elu")
def _elu(n: NodeContext, x: Array) -> Array:
    return bz.where(x >= 0, x, n.attr("alpha", 1.0) * bz.expm1(x))


@op("Celu")
def _celu(n: NodeContext, x: Array) -> Array:
    a = n.attr("alpha", 1.0)
    return bz.maximum(x, 0) + bz.minimum(0, a * bz.expm1(x / a))


@op("Selu")
def _selu(n: NodeContext, x: Array) -> Array:
    a = n.attr("alpha", 1.67326319217681884765625)
    g = n.attr("gamma", 1.05070102214813232421875)
    return bz.where(x > 0, g * x, g * a * bz.expm1(x))


@op("HardSigmoid")
def _hardsigmoid(n: NodeContext, x: Array) -> Array:
    return bz.clip(n.attr("alpha", 0.2) * x + n.attr("beta", 0.5), 0, 1)


@op("HardSwish")
def _hardswish(n: NodeContext, x: Array) -> Array:
    return x * bz.clip(x / 6 + 0.5, 0, 1)


@op("Softplus")
def _softplus(n: NodeContext, x: Array) -> Array:
    return bz.logaddexp(x, _cast(bz.zeros((), dtype=x.dtype), x.dtype))


@op("Softsign")
def _softsign(n: NodeContext, x: Array) -> Array:
    return x / (1 + bz.abs(x))


@op("Mish")
def _mish(n: NodeContext, x: Array) -> Array:
    return x * bz.tanh(_softplus(n, x))


@op("Swish")
def _swish(n: NodeContext, x: Array) -> Array:
    return x * bz.sigmoid(n.attr("alpha", 1.0) * x)


@op("Gelu")
def _gelu(n: NodeContext, x: Array) -> Array:
    if n.attr("approximate", "none") == "tanh":
        return bz.nn.gelu_approx(x)
    return 0.5 * x * (1 + _erf(n, x * (1 / math.sqrt(2))))


@op("Shrink")
def _shrink(n: NodeContext, x: Array) -> Array:
    lambd, bias = n.attr("lambd", 0.5), n.attr("bias", 0.0)
    return _cast(bz.where(x < -lambd, x + bias, bz.where(x > lambd, x - bias, 0)), x.dtype)


@op("Clip")
def _clip(n: NodeContext, x: Array, lo: Array | None = None, hi: Array | None = None
          ) -> Array:
    if n.opset < 11:
        lo_v, hi_v = n.attr("min"), n.attr("max")
        return bz.clip(x, lo_v, hi_v)
    out = x
    if lo is not None:
        out = bz.maximum(out, lo)
    if hi is not None:
        out = bz.minimum(out, hi)
    return out


def _softmax_like(fn: Callable[[Array, int], Array]) -> Converter:
    def convert(n: NodeContext, x: Array) -> Array:
        if n.opset >= 13:
            return fn(x, _axis(n.attr("axis", -1), x.ndim))
        # opset < 13: the input is seen as 2-d, (prod(shape[:axis]), prod(shape[axis:]))
        axis = _axis(n.attr("axis", 1), x.ndim)
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        y = fn(bz.reshape(x, (rows, -1) if rows else (0, int(np.prod(x.shape[axis:])))), 1)
        return bz.reshape(y, x.shape)
    return convert


def _hardmax(x: Array, axis: int) -> Array:
    i = bz.argmax(x, axis=axis, keepdims=True)
    pos = bz.reshape(bz.arange(x.shape[axis]), (-1,) + (1,) * (x.ndim - axis - 1))
    return _cast(i == pos, x.dtype)


op("Softmax")(_softmax_like(lambda x, a: bz.softmax(x, axis=a)))
op("LogSoftmax")(_softmax_like(lambda x, a: x - bz.logsumexp(x, axis=a, keepdims=True)))
op("Hardmax")(_softmax_like(_hardmax))


def _dropout_check(n: NodeContext) -> str | None:
    known = n._raw[2] if len(n._raw) > 2 else None
    if n.has(2) and (known is None or bool(np.asarray(known))):
        return "training_mode (only inference)"
    return None


@op("Dropout", check=_dropout_check)
def _dropout(n: NodeContext, x: Array, ratio: Any = None, training: Any = None) -> Any:
    mask = bz.ones(x.shape, dtype=bz.bool)
    return (x, mask) if n.wants(1) else x


# ---------------------------------------------------------------- matmul
def _weight_rows(n: NodeContext, b: Array, i: int, transposed: bool = False) -> Array:
    """A constant 2-d right operand B (K, N) as the transpose of a row-major (N, K) copy,
    made once per model, read-only: the native GEMM's ``x @ W.T`` form (W read in rows),
    not a transposition of B in blocks on every call. ``transposed``: B given as (N, K)."""
    raw = n._raw[i] if i < len(n._raw) else None
    if not isinstance(raw, np.ndarray) or raw.ndim != 2 or raw.dtype.kind != "f":
        return bz.matrix_transpose(b) if transposed else b
    hit = getattr(n, "_weights", None)
    if hit is None or hit[0] is not raw:
        t = raw if transposed and raw.flags.c_contiguous else \
            np.ascontiguousarray(raw if transposed else raw.T)
        if t.flags.writeable:
            t = t.copy() if t is raw else t
            t.flags.writeable = False
        hit = n._weights = (raw, t)  # type: ignore[attr-defined]
    return bz.matrix_transpose(bz.asarray(hit[1], copy=False))


# rows of x from which a product with a constant weight runs as a 1x1 convolution
CONV_GEMM_ROWS = 16


def _times_weight(x: Array, w: Array) -> Array:
    """``x @ w`` for a constant (K, N) weight ``w`` (a view of its (N, K) copy): float32
    with many rows as a 1x1 convolution over the rows (the native implicit GEMM: weight
    packed once per model, a following bias / residual add / ReLU fused into its store by
    the conv_epilogue pass); otherwise a matmul."""
    k, n = w.shape
    rows = x.size // k if k else 0
    if x.dtype != bz.float32 or w.dtype != bz.float32 or rows < CONV_GEMM_ROWS:
        return bz.matmul(x, w)
    w4 = bz.reshape(bz.matrix_transpose(w), (n, 1, 1, k))
    y = bz.conv2d(bz.reshape(x, (1, rows, 1, k)), w4)
    return bz.reshape(y, (*x.shape[:-1], n))


@op("MatMul")
def _matmul(n: NodeContext, a: Array, b: Array) -> Array:
    if b.ndim == 2 and a.ndim >= 2 and isinstance(n._raw[1], np.ndarray):
        return _times_weight(a, _weight_rows(n, b, 1))
    return bz.matmul(a, b)


@op("Gemm")
def _gemm(n: NodeContext, a: Array, b: Array, c: Array | None = None) -> Array:
    if n.attr("transA", 0):
        a = bz.matrix_transpose(a)
    b = _weight_rows(n, b, 1, transposed=bool(n.attr("transB", 0)))
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    y = _times_weight(a, b) if isinstance(n._raw[1], np.ndarray) and b.ndim == 2 else \
        bz.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return _cast(y, a.dtype)


@op("Einsum")
def _einsum(n: NodeContext, *xs: Array) -> Array:
    return bz.einsum(n.attr("equation").replace(" ", ""), *xs)


from . import ops_reduce as _ops_reduce  # noqa: E402,F401  (reductions, sorting, cumsum)
from . import ops_shape as _ops_shape  # noqa: E402,F401  (registers the shape/index ops)
