"""Op declarations: every op braze knows, declared once.

Each :class:`OpDef` row gives the op's name, kind, arity, which input dtypes it
accepts, how inputs are cast before computing, its result-dtype and shape rules,
and its numpy reference. The public API (``braze.arrays``), the passes and every
backend read these rows; adding an elementwise op means adding one row here.

Conventions the rest of braze relies on:

* Elementwise nodes receive inputs that were already cast to one common
  *compute dtype* (the recording layer inserts explicit ``cast`` nodes), so a
  kernel never promotes implicitly. ``where`` is the exception: its condition is
  bool.
* float16 / bfloat16 are computed in float32 and rounded once at the end, on
  every backend (the reference included).

>>> OPS["add"].kind, OPS["add"].arity
('elementwise', 2)
>>> elementwise_dtypes(OPS["exp"], int32)
(dtype('float32'), dtype('float32'))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes as dt
from .dtypes import int32  # noqa: F401  (doctest)

Shape = tuple[int, ...]
Infer = Callable[[tuple[Shape, ...], tuple[np.dtype, ...], dict[str, Any]], tuple[Shape, np.dtype]]


@dataclass(frozen=True, eq=False)
class OpDef:
    """One op declaration (a row of the op table)."""

    name: str
    kind: str  # leaf | elementwise | reduce | scan | view | library | random
    arity: int  # number of array inputs; -1 = variadic
    reference: Callable[..., Any]  # numpy implementation: reference(*arrays, **attrs)
    domain: str = "any"  # input dtypes accepted (see DOMAINS)
    cast_inputs: str | None = None  # None | "float" (int/bool -> default float) | "bool"
    result: str = "same"  # result dtype rule for elementwise ops: same | bool | real
    infer: Infer | None = None  # shape/dtype rule for non-elementwise ops
    cexpr: str | None = None  # C expression over {0}, {1}, ... for the code generators
    # the result depends on the exact compute dtype (not float32 for float16/bfloat16):
    # elementwise nodes of the op carry it as attrs["dtype"]
    exact_dtype: bool = False
    # the op only moves elements (gather, scatter...): exact in any dtype, so its reference
    # never upcasts float16/bfloat16 (a row lookup must not convert a whole table)
    moves_data: bool = False
    doc: str = field(default="", repr=False)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


DOMAINS: dict[str, tuple[str, Callable[[np.dtype], bool]]] = {
    "any": ("any dtype", lambda d: True),
    "numeric": ("a numeric dtype", dt.is_numeric),
    "real": ("a real (non-complex) dtype", lambda d: not dt.is_complex(d)),
    "real_numeric": ("a real numeric dtype", lambda d: dt.is_numeric(d) and not dt.is_complex(d)),
    "integer": ("an integer dtype", dt.is_integer),
    "integer_or_bool": ("an integer or bool dtype", lambda d: dt.is_integer(d) or dt.is_bool(d)),
    "real_floating": (
        "a real floating-point dtype",
        lambda d: dt.is_real_floating(d) or dt.is_integer(d) or dt.is_bool(d),
    ),
}


def check_domain(op: OpDef, dtype: np.dtype) -> None:
    """Raise TypeError naming the op when ``dtype`` is outside the op's domain."""
    what, ok = DOMAINS[op.domain]
    if not ok(dtype):
        raise TypeError(f"{op.name}: unsupported dtype {dt.name(dtype)}; expected {what}")


def elementwise_dtypes(op: OpDef, dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(compute dtype, result dtype) of elementwise ``op`` on inputs promoted to ``dtype``."""
    check_domain(op, dtype)
    if op.cast_inputs == "float":
        compute = dt.float_result(dtype)
    elif op.cast_inputs == "bool":
        compute = dt.bool_
    else:
        compute = dtype
    if op.result == "bool":
        out = dt.bool_
    elif op.result == "real":
        out = dt.real_dtype(compute)
    else:
        out = compute
    return compute, out


OPS: dict[str, OpDef] = {}


def declare(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} declared twice")
    OPS[op.name] = op
    return op


# ---------------------------------------------------------------- leaves
def _no_reference(*args: Any, **kw: Any) -> Any:
    raise RuntimeError("constant nodes carry their data; they are never executed")


CONSTANT = declare(OpDef("constant", "leaf", 0, _no_reference, doc="A leaf holding data."))


def _unbound_parameter(*args: Any, **kw: Any) -> Any:
    raise TypeError("the value of an array traced by bz.compile is not known while tracing: "
                    "reading it (item(), bool(), np.asarray, printing...) inside a compiled "
                    "function is not supported; compute it outside, or pass it as an argument")


PARAMETER = declare(OpDef("parameter", "leaf", 0, _unbound_parameter,
                          doc="An input of a traced function, bound at each call."))


def _arange_ref(*, start: Any, step: Any, num: int, dtype: np.dtype) -> np.ndarray:
    if dt.is_integer(dtype):
        return (int(start) + np.arange(num, dtype=np.int64) * int(step)).astype(dtype)
    return (start + np.arange(num, dtype=np.float64) * step).astype(dtype)


def _leaf_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return attrs["shape"], attrs["dtype"]


declare(OpDef("arange", "leaf", 0,
              lambda **a: _arange_ref(**{k: a[k] for k in ("start", "step", "num", "dtype")}),
              infer=_leaf_infer, doc="start + step * [0, 1, ..., num-1]."))
declare(OpDef("linspace", "leaf", 0,
              lambda *, start, stop, num, endpoint, dtype, shape: np.linspace(
                  start, stop, num, endpoint=endpoint, dtype=np.float64).astype(dtype),
              infer=_leaf_infer, doc="Evenly spaced values over an interval."))


# ---------------------------------------------------------------- elementwise
def _ew(name: str, arity: int, ref: Callable[..., Any], domain: str = "numeric",
        cast: str | None = None, result: str = "same", doc: str = "",
        exact_dtype: bool = False) -> OpDef:
    return declare(OpDef(name, "elementwise", arity, ref, domain, cast, result,
                         exact_dtype=exact_dtype, doc=doc))


def _int_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y for integers without numpy's error on negative exponents (result 0, or +-1)."""
    if not dt.is_integer(x.dtype) or not np.any(y < 0):
        return np.power(x, y)
    neg = y < 0
    out = np.power(x, np.where(neg, 0, y).astype(y.dtype))
    one = np.ones_like(x)
    at_neg = np.where(x == 1, one, np.where(x == -1, np.where(y % 2 == 0, one, -one), 0))
    return np.where(neg, at_neg, out).astype(x.dtype)


def _sign(x: np.ndarray) -> np.ndarray:
    if dt.is_complex(x.dtype):
        mag = np.abs(x)
        safe = np.where(mag == 0, 1, mag)  # parts divided separately: subnormals stay finite
        unit = (x.real / safe) + 1j * (x.imag / safe)
        return np.where(mag == 0, 0, unit).astype(x.dtype)
    return np.sign(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Two-branch form: never overflows exp, exact 0/1 at the ends.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _shift(f: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        bits = x.dtype.itemsize * 8
        big = (y < 0) | (y >= bits)  # C leaves these undefined; define them
        out = f(x, np.where(big, 0, y).astype(y.dtype))
        if f is np.right_shift:
            fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else 0
        else:
            fill = 0
        return np.where(big, fill, out).astype(x.dtype)

    return ref


def _expm1(x: np.ndarray) -> np.ndarray:
    """np.expm1, and for complex ``exp(z) - 1`` accurate near 0 (numpy's complex expm1
    is ``exp(z) - 1``) with the standard's special cases (infinite and NaN parts)."""
    if x.dtype.kind != "c":
        return np.expm1(x)
    a, b = x.real, x.imag
    re = np.expm1(a) * np.cos(b) - 2.0 * np.sin(b / 2) ** 2 + 0.0  # (+0: -0 - 0 is -0)
    im = np.where(b == 0, b, np.exp(a) * np.sin(b))
    bad_b = ~np.isfinite(b)
    re = np.where((a == -np.inf) & bad_b, -1.0, np.where((a == np.inf) & bad_b, np.inf, re))
    im = np.where((a == -np.inf) & bad_b, 0.0, np.where((a == np.inf) & bad_b, np.nan, im))
    return _complex(re, im, x.dtype)


def _complex(re: np.ndarray, im: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """re + im*j without arithmetic (which would turn an infinite part into NaNs)."""
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im
    return out


def _tanh(x: np.ndarray) -> np.ndarray:
    """np.tanh; for complex with an infinite real part and a finite imaginary one, the
    standard's ``±1 + 0j`` with the imaginary zero's sign from b (numpy's sign comes
    from sin(2b))."""
    out = np.tanh(x)
    if x.dtype.kind == "c":
        a, b = x.real, x.imag
        hit = np.isinf(a) & np.isfinite(b)
        if hit.any():
            out = np.where(hit, _complex(np.sign(a), np.copysign(0.0, b), x.dtype), out)
    return out


# unary, floating (integer inputs are computed in the default float dtype)
for _name, _ref in [
    ("exp", np.exp), ("expm1", _expm1), ("log", np.log), ("log1p", np.log1p),
    ("log2", np.log2), ("log10", np.log10), ("sqrt", np.sqrt),
    ("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin),
    ("acos", np.arccos), ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh),
    ("tanh", _tanh), ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh),
    ("reciprocal", np.reciprocal),
]:
    _ew(_name, 1, _ref, "numeric", cast="float")

_ew("sigmoid", 1, _sigmoid, "real_floating", cast="float")

# unary, same dtype
_ew("negative", 1, np.negative)
_ew("positive", 1, np.positive)
_ew("square", 1, np.square)
_ew("sign", 1, _sign)
_ew("round", 1, np.round)
_ew("ceil", 1, np.ceil, "real_numeric")
_ew("floor", 1, np.floor, "real_numeric")
_ew("trunc", 1, np.trunc, "real_numeric")
_ew("abs", 1, np.abs, "numeric", result="real")
_ew("real", 1, np.real, "numeric", result="real")
_ew("imag", 1, lambda x: np.imag(x) if dt.is_complex(x.dtype) else np.zeros_like(x),
    "numeric", result="real")
_ew("conj", 1, np.conj, "numeric")
_ew("bitwise_invert", 1, np.invert, "integer_or_bool")
_ew("logical_not", 1, np.logical_not, "any", cast="bool")
_ew("isnan", 1, np.isnan, "numeric", result="bool")
_ew("isinf", 1, np.isinf, "numeric", result="bool")
_ew("isfinite", 1, np.isfinite, "numeric", result="bool")
_ew("signbit", 1, np.signbit, "real_floating", cast="float", result="bool")

# binary
_ew("add", 2, np.add, "any")
_ew("subtract", 2, np.subtract)
_ew("multiply", 2, np.multiply, "any")
_ew("divide", 2, np.true_divide, cast="float")
def _floor_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's floor_divide with the standard's infinity cases: inf // finite is a signed
    inf (numpy: NaN) and finite // inf is a signed zero (numpy: -1 for opposite signs)."""
    out = np.floor_divide(x, y)
    if x.dtype.kind != "f":
        return out
    special = np.isinf(x) != np.isinf(y)
    if special.any():
        out = np.where(special, np.where(np.isnan(x) | np.isnan(y), np.nan, x / y), out)
    return out.astype(x.dtype)


_ew("floor_divide", 2, _floor_divide, "real_numeric")
_ew("remainder", 2, np.remainder, "real_numeric")
_ew("pow", 2, _int_power)
_ew("maximum", 2, np.maximum, "real")
_ew("minimum", 2, np.minimum, "real")
_ew("atan2", 2, np.arctan2, "real_floating", cast="float")
_ew("hypot", 2, np.hypot, "real_floating", cast="float")
_ew("copysign", 2, np.copysign, "real_floating", cast="float")
def _nextafter(x: np.ndarray, y: np.ndarray, *, dtype: np.dtype) -> np.ndarray:
    """C's nextafter in the exact dtype: y when x == y (numpy's float16 returns x, which
    gets nextafter(-0.0, +0.0) wrong)."""
    x, y = x.astype(dtype), y.astype(dtype)
    return np.where(x == y, y, np.nextafter(x, y))


_ew("nextafter", 2, _nextafter, "real_floating", cast="float", exact_dtype=True)
_ew("logaddexp", 2, np.logaddexp, "real_floating", cast="float")
_ew("bitwise_and", 2, np.bitwise_and, "integer_or_bool")
_ew("bitwise_or", 2, np.bitwise_or, "integer_or_bool")
_ew("bitwise_xor", 2, np.bitwise_xor, "integer_or_bool")
_ew("bitwise_left_shift", 2, _shift(np.left_shift), "integer")
_ew("bitwise_right_shift", 2, _shift(np.right_shift), "integer")
_ew("logical_and", 2, np.logical_and, "any", cast="bool")
_ew("logical_or", 2, np.logical_or, "any", cast="bool")
_ew("logical_xor", 2, np.logical_xor, "any", cast="bool")
_ew("equal", 2, np.equal, "any", result="bool")
_ew("not_equal", 2, np.not_equal, "any", result="bool")
_ew("less", 2, np.less, "real", result="bool")
_ew("less_equal", 2, np.less_equal, "real", result="bool")
_ew("greater", 2, np.greater, "real", result="bool")
_ew("greater_equal", 2, np.greater_equal, "real", result="bool")

# ternary: where(cond, x, y); cond is bool, x and y share the compute dtype
WHERE = _ew("where", 3, np.where, "any")


def _cast_ref(x: np.ndarray, *, dtype: np.dtype) -> np.ndarray:
    if dt.is_bool(dtype):
        return x != 0
    return x.astype(dtype)


CAST = declare(OpDef("cast", "elementwise", 1, _cast_ref, doc="Convert to attrs['dtype']."))
BITCAST = declare(OpDef("bitcast", "elementwise", 1, lambda x, *, dtype: x.view(dtype),
                        doc="Reinterpret the bits as attrs['dtype'] (same item size)."))


# ---------------------------------------------------------------- reductions
def _reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def sum_dtype(d: np.dtype) -> np.dtype:
    """Accumulator/result dtype of sum and prod: ints widen to 64 bits of their kind."""
    if dt.is_bool(d) or (dt.is_integer(d) and not dt.is_unsigned(d)):
        return dt.int64
    if dt.is_unsigned(d):
        return dt.uint64
    return d


def _reduce(name: str, ref: Callable[..., Any], domain: str, out: Callable[[np.dtype], np.dtype],
            needs_nonempty: bool = False) -> OpDef:
    def infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
        (shape,), (dtype,) = shapes, dtypes
        axes = attrs["axes"]
        if needs_nonempty and any(shape[a] == 0 for a in axes):
            raise ValueError(f"{name}: cannot reduce over a zero-size axis (shape {shape})")
        return _reduced_shape(shape, axes, attrs["keepdims"]), out(dtype)

    return declare(OpDef(name, "reduce", 1, ref, domain, infer=infer))


def _sum_ref(x, *, axes, keepdims):  # type: ignore[no-untyped-def]
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=sum_dtype(x.dtype))


def _prod_ref(x, *, axes, keepdims):  # type: ignore[no-untyped-def]
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=sum_dtype(x.dtype))


_reduce("sum", _sum_ref, "any", sum_dtype)
_reduce("prod", _prod_ref, "any", sum_dtype)
def mean_ref(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """sum / count (an empty reduction gives NaN, without numpy's warning)."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    total = np.sum(x, axis=axes, keepdims=keepdims)
    return total / np.asarray(n, dtype=total.real.dtype)


_reduce("mean", mean_ref, "numeric", lambda d: d)
_reduce("max", lambda x, *, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True)
_reduce("min", lambda x, *, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
        "real", lambda d: d, needs_nonempty=True)
_reduce("any", lambda x, *, axes, keepdims: np.any(x, axis=axes, keepdims=keepdims),
        "any", lambda d: dt.bool_)
_reduce("all", lambda x, *, axes, keepdims: np.all(x, axis=axes, keepdims=keepdims),
        "any", lambda d: dt.bool_)


def _arg_ref(f: Callable[..., Any]) -> Callable[..., Any]:
    def ref(x, *, axes, keepdims):  # type: ignore[no-untyped-def]
        if len(axes) == x.ndim and x.ndim != 1:  # axis=None: flat index
            r = f(x.reshape(-1), axis=0)
            return np.asarray(r).reshape((1,) * x.ndim if keepdims else ()).astype(np.int64)
        return np.asarray(f(x, axis=axes[0], keepdims=keepdims)).astype(np.int64)

    return ref


_reduce("argmax", _arg_ref(np.argmax), "real", lambda d: dt.DEFAULT_INDEX, needs_nonempty=True)
_reduce("argmin", _arg_ref(np.argmin), "real", lambda d: dt.DEFAULT_INDEX, needs_nonempty=True)


def _cumsum_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    (shape,), (dtype,) = shapes, dtypes
    shape = list(shape)
    if attrs["include_initial"]:
        shape[attrs["axis"]] += 1
    return tuple(shape), sum_dtype(dtype)


def _cumsum_ref(x, *, axis, include_initial):  # type: ignore[no-untyped-def]
    out = np.cumsum(x, axis=axis, dtype=sum_dtype(x.dtype))
    if include_initial:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        out = np.pad(out, pad)
    return out


declare(OpDef("cumulative_sum", "scan", 1, _cumsum_ref, "any", infer=_cumsum_infer))


# ---------------------------------------------------------------- views and data movement
def _reshape_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return attrs["shape"], dtypes[0]


def _permute_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return tuple(shapes[0][a] for a in attrs["axes"]), dtypes[0]


def _slice_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return tuple(len(range(*s)) for s in attrs["slices"]), dtypes[0]


def _slice_ref(x, *, slices):  # type: ignore[no-untyped-def]
    # normalized (start, stop, step); a negative stop means "past the front"
    return x[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in slices)]


def _concat_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    axis = attrs["axis"]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out), dtypes[0]


RESHAPE = declare(OpDef("reshape", "view", 1, lambda x, *, shape: x.reshape(shape),
                        infer=_reshape_infer))
PERMUTE = declare(OpDef("permute_dims", "view", 1, lambda x, *, axes: np.transpose(x, axes),
                        infer=_permute_infer))
BROADCAST = declare(OpDef("broadcast_to", "view", 1,
                          lambda x, *, shape: np.broadcast_to(x, shape),
                          infer=_reshape_infer))
SLICE = declare(OpDef("slice", "view", 1, _slice_ref, infer=_slice_infer))
def _slice_update_ref(x, v, *, slices):  # type: ignore[no-untyped-def]
    out = np.array(x, copy=True)
    out[tuple(slice(a, b if b >= 0 else None, c) for a, b, c in slices)] = v
    return out


SLICE_UPDATE = declare(OpDef(
    "slice_update", "view", 2, _slice_update_ref,
    infer=lambda shapes, dtypes, attrs: (shapes[0], dtypes[0]),
    doc="x with the region attrs['slices'] replaced by v (v has the region's shape).",
))
CONCAT = declare(OpDef("concat", "view", -1,
                       lambda *xs, axis: np.concatenate(xs, axis=axis), infer=_concat_infer))


# ---------------------------------------------------------------- library ops
def matmul_shape(a: Shape, b: Shape) -> Shape:
    """Result shape of matmul per the standard (1-d operands promoted, then squeezed)."""
    if not a or not b:
        raise ValueError(f"matmul: operands must be at least 1-d, got shapes {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: contraction dimensions differ: shapes {a} and {b} ({a2[-1]} != {b2[-2]})"
        )
    batch = broadcast_shapes(a2[:-2], b2[:-2], op="matmul")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


MATMUL = declare(OpDef(
    "matmul", "library", 2, np.matmul, "numeric",
    infer=lambda shapes, dtypes, attrs: (matmul_shape(*shapes), dtypes[0]),
))


# ---------------------------------------------------------------- quantized weights
# Affine groups (MLX's layout): row n of a (N, K) weight is cut into K // group_size
# groups; element k is ``scales[n, g] * q + biases[n, g]`` with q an unsigned
# ``bits``-bit integer, packed little-end first into uint32 words (32 // bits per word).
QUANT_BITS = (4, 8)
QUANT_GROUPS = (32, 64, 128)


def dequantize_ref(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, *,
                   group_size: int, bits: int) -> np.ndarray:
    """Unpack ``wq`` (N, K*bits/32) uint32 to float (N, K) with the per-group affine map."""
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    q = (wq[..., None] >> shifts) & np.uint32((1 << bits) - 1)
    q = q.reshape(*wq.shape[:-1], wq.shape[-1] * per).astype(np.float32)
    g = q.reshape(*q.shape[:-1], -1, group_size)
    w = g * upcast(scales)[..., None].astype(np.float32) + upcast(biases)[..., None]
    return w.reshape(q.shape)


def _qmm_ref(x, wq, scales, biases, *, group_size, bits, act=None):  # type: ignore[no-untyped-def]
    # ``act`` lets a backend approximate the activations (int8, with a stated bound); the
    # reference is the exact product
    w = dequantize_ref(wq, scales, biases, group_size=group_size, bits=bits)
    return np.matmul(x.astype(np.float32, copy=False), w.T)


def quant_check(op: str, wq: tuple[Shape, np.dtype], scales: tuple[Shape, np.dtype],
                biases: tuple[Shape, np.dtype], group_size: int, bits: int) -> int:
    """Validate a packed weight triple; returns K (the unpacked row length)."""
    if bits not in QUANT_BITS:
        raise ValueError(f"{op}: bits must be one of {QUANT_BITS}, got {bits}")
    if group_size not in QUANT_GROUPS:
        raise ValueError(f"{op}: group_size must be one of {QUANT_GROUPS}, got {group_size}")
    (ws, wd), (ss, sd), (bs, bd) = wq, scales, biases
    if wd != dt.uint32 or len(ws) != 2:
        raise TypeError(f"{op}: packed weights must be a 2-d uint32 array, got shape {ws} "
                        f"({dt.name(wd)})")
    k = ws[1] * (32 // bits)
    want = (ws[0], k // group_size)
    if k % group_size or ss != want or bs != want:
        raise ValueError(f"{op}: scales and biases must have shape {want} for packed weights "
                         f"{ws} with bits={bits}, group_size={group_size}; got {ss} and {bs}")
    if not (dt.is_real_floating(sd) and dt.is_real_floating(bd)):
        raise TypeError(f"{op}: scales and biases must be floating, got {dt.name(sd)} and "
                        f"{dt.name(bd)}")
    return k


def _qmm_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    k = quant_check("quantized_matmul", (shapes[1], dtypes[1]), (shapes[2], dtypes[2]),
                    (shapes[3], dtypes[3]), attrs["group_size"], attrs["bits"])
    x = shapes[0]
    if not x or x[-1] != k:
        raise ValueError(f"quantized_matmul: x of shape {x} does not match packed weights of "
                         f"{shapes[1][0]} rows x {k} columns (last dims differ)")
    return x[:-1] + (shapes[1][0],), dtypes[0]


QUANTIZED_MATMUL = declare(OpDef(
    "quantized_matmul", "library", 4, _qmm_ref, "real_floating", infer=_qmm_infer,
    doc="x @ dequantize(wq, scales, biases).T with the weight kept packed.",
))


def rope_tables(t: int, offset: int, dims: int, base: float, scale: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """float32 cos and sin of the (T, dims/2) rotary angles ``(offset + t) * scale *
    base**(-2i/dims)``: positions and frequencies rounded to float32 first (the order
    every backend follows)."""
    pos = (np.arange(t, dtype=np.int64) + offset).astype(np.float32) * np.float32(scale)
    inv_freq = (base ** (-np.arange(dims // 2, dtype=np.float64) * 2.0 / dims)
                ).astype(np.float32)
    theta = pos[:, None] * inv_freq[None, :]
    return np.cos(theta), np.sin(theta)


def _rope_ref(x, offset, *, dims, traditional, base, scale):  # type: ignore[no-untyped-def]
    # pair (a, b) -> (a*cos + b*(-sin), b*cos + a*sin), float32 math (float64 stays)
    ct = np.result_type(x.dtype, np.float32)
    c, s = rope_tables(x.shape[-2], int(offset), dims, base, scale)
    c, s = c.astype(ct), s.astype(ct)
    half = dims // 2
    out = np.array(x, dtype=ct, copy=True)
    xr = x[..., :dims].astype(ct)
    if traditional:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out[..., 0:dims:2] = a * c + b * -s
        out[..., 1:dims:2] = b * c + a * s
    else:
        a, b = xr[..., :half], xr[..., half:]
        out[..., :half] = a * c + b * -s
        out[..., half:dims] = b * c + a * s
    return out


def _rope_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    x, off = shapes
    d = attrs["dims"]
    if len(x) < 2 or d % 2 or d > x[-1] or d <= 0:
        raise ValueError(f"rope: needs x of shape (..., T, D) with an even dims <= D, got "
                         f"shape {x} and dims={d}")
    if off != () or not dt.is_integer(dtypes[1]):
        raise TypeError(f"rope: offset must be an int or a 0-d integer array, got shape "
                        f"{off} ({dt.name(dtypes[1])})")
    return x, dtypes[0]


ROPE = declare(OpDef(
    "rope", "library", 2, _rope_ref, "real_floating", infer=_rope_infer,
    doc="Rotary position embedding of the first `dims` features of x (..., T, D) at "
        "positions offset + t (one op).",
))


def sdpa_visible(t: int, s: int, past_len: int | None, causal: bool) -> np.ndarray:
    """(T, past_len + S) bool: which keys each of T query rows attends to. With a past
    (``past_len`` valid cached rows before the S new ones), query i sees every cached
    row and, when causal, new rows j <= i; without one, causal query i sees keys
    j <= S - T + i."""
    p = past_len or 0
    cols = np.arange(p + s)
    rows = np.arange(t)[:, None]
    if not causal:
        return np.ones((t, p + s), bool)
    if past_len is None:
        return cols[None, :] <= rows + (s - t)
    return (cols[None, :] < p) | (cols[None, :] - p <= rows)


def _sdpa_ref(q, k, v, *past, scale, causal):  # type: ignore[no-untyped-def]
    # keys = [first `past_len` rows of the past chunk, the new keys]; float32 (float64 when
    # an input is) math; a query row that sees no key gets NaN (softmax over nothing)
    ct = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    b, hq, t, d = q.shape
    hkv = k.shape[1]
    p_len = None
    if past:
        pk, pv, off = past
        p_len = int(min(max(int(off), 0), pk.shape[2]))
        k = np.concatenate([pk[:, :, :p_len], k], axis=2)
        v = np.concatenate([pv[:, :, :p_len], v], axis=2)
    qg = q.astype(ct).reshape(b, hkv, hq // hkv * t, d)
    scores = np.matmul(qg, np.swapaxes(k.astype(ct), -1, -2)) * ct.type(scale)
    vis = np.tile(sdpa_visible(t, k.shape[2] - (p_len or 0), p_len, causal), (hq // hkv, 1))
    scores = np.where(vis, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        m = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - m)
        p = e / e.sum(axis=-1, keepdims=True)
    out = np.matmul(p, v.astype(ct))
    return out.reshape(b, hq, t, v.shape[-1])


def _sdpa_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    op = "scaled_dot_product_attention"
    if len(shapes) not in (3, 6):
        raise ValueError(f"{op}: expected q, k, v and optionally past keys, past values and "
                         f"the past length; got {len(shapes)} inputs")
    q, k, v = shapes[:3]
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or k[:3] != v[:3] or q[0] != k[0] \
            or q[3] != k[3] or k[1] == 0 or q[1] % k[1]:
        raise ValueError(f"{op}: expected q (B, Hq, T, D), k and v (B, Hkv, S, D) with Hq a "
                         f"multiple of Hkv; got shapes {q}, {k}, {v}")
    if len(shapes) == 6:
        pk, pv, off = shapes[3:]
        if pk[:2] + pk[3:] != k[:2] + k[3:] or pv[:2] + pv[3:] != v[:2] + v[3:] \
                or pk[2] != pv[2]:
            raise ValueError(f"{op}: past keys/values {pk}, {pv} do not match keys {k} and "
                             f"values {v} (same batch, heads and feature sizes)")
        if off != () or not dt.is_integer(dtypes[5]):
            raise TypeError(f"{op}: the past length must be a 0-d integer array, got shape "
                            f"{off} ({dt.name(dtypes[5])})")
    for d in dtypes[:5]:
        if not dt.is_real_floating(d):
            raise TypeError(f"{op}: q, k, v (and the past) must be real floating, got "
                            f"{', '.join(dt.name(x) for x in dtypes[:3])}")
    return (q[0], q[1], q[2], v[3]), dt.result_type(*dtypes[:3])


SDPA = declare(OpDef(
    "scaled_dot_product_attention", "library", -1, _sdpa_ref, "real_floating",
    infer=_sdpa_infer,
    doc="softmax(q @ k.T * scale, causal mask) @ v over grouped-query heads, optionally "
        "after the first `past_len` rows of a cached key/value chunk (one op).",
))


# ---------------------------------------------------------------- random
def threefry2x32(key: np.ndarray, counter_hi: np.ndarray, counter_lo: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011): a counter-based bijection.

    Every backend implements this exact function, so random streams are
    bit-identical across backends.
    """
    rot = ((13, 15, 26, 6), (17, 29, 16, 24))
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    k2 = np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    ks = (k0, k1, k2)
    x0 = counter_hi.astype(np.uint32) + k0
    x1 = counter_lo.astype(np.uint32) + k1
    for i in range(5):
        for r in rot[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _random_bits_ref(key, *, shape):  # type: ignore[no-untyped-def]
    n = int(np.prod(shape, dtype=np.int64))
    half = (n + 1) // 2
    with np.errstate(over="ignore"):
        idx = np.arange(half, dtype=np.uint64)
        hi, lo = threefry2x32(np.asarray(key, np.uint32),
                              (idx >> np.uint64(32)).astype(np.uint32),
                              (idx & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return np.concatenate([hi, lo])[:n].reshape(shape)


RANDOM_BITS = declare(OpDef(
    "random_bits", "random", 1, _random_bits_ref, "any",
    infer=lambda shapes, dtypes, attrs: (attrs["shape"], dt.uint32),
    doc="uint32 bits of shape attrs['shape'] from a (2,) uint32 key (threefry-2x32).",
))


# ---------------------------------------------------------------- reference semantics
_LOW = (dt.float16, dt.bfloat16)
_UPCAST_KINDS = ("elementwise", "reduce", "scan", "library")


def upcast(x: np.ndarray) -> np.ndarray:
    """float16/bfloat16 -> float32: the compute dtype of low-precision floats."""
    return x.astype(np.float32) if x.dtype in _LOW else x


def reference_eval(op: OpDef, attrs: dict[str, Any], out_dtype: np.dtype, *xs: np.ndarray
                   ) -> np.ndarray:
    """Apply ``op``'s numpy reference with braze semantics: low-precision inputs are
    computed in float32 and the result rounded once to ``out_dtype``."""
    if op.kind in _UPCAST_KINDS and op is not BITCAST and not op.moves_data:
        for x in xs:
            if x.dtype in _LOW:
                xs = tuple(upcast(x) for x in xs)
                break
    out = np.asarray(op.reference(*xs, **attrs))
    if out.dtype != out_dtype:
        out = out.astype(out_dtype)
    return out


# ---------------------------------------------------------------- shapes
def broadcast_shapes(*shapes: Shape, op: str = "broadcast_shapes") -> Shape:
    """Broadcast shapes per the standard; ValueError names the op and the shapes.

    >>> broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                raise ValueError(
                    f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                    "cannot be broadcast together"
                )
    return tuple(out)


# ---------------------------------------------------------------- Array API library ops (issue 3)
# Library ops: every backend runs them through ``reference_eval`` unless it has its own.
def _library(name: str, ref: Callable[..., Any], infer: Infer, domain: str = "any",
             doc: str = "", moves_data: bool = False) -> OpDef:
    def fresh(*xs: Any, **attrs: Any) -> Any:
        # A library result must own its memory: backends plan in-place reuse of it, which
        # must never write through into an input (np.linalg.matrix_power(a, 1) returns a).
        out = ref(*xs, **attrs)
        if any(isinstance(x, np.ndarray) and np.may_share_memory(out, x) for x in xs):
            out = np.array(out, copy=True)
        return out

    return declare(OpDef(name, "library", -1, fresh, domain, infer=infer, doc=doc,
                         moves_data=moves_data))


def _same_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return shapes[0], dtypes[0]


def _sort_ref(x, *, axis, descending):  # type: ignore[no-untyped-def]
    if not descending:
        return np.sort(x, axis=axis, kind="stable")
    return np.flip(np.sort(np.flip(x, axis), axis=axis, kind="stable"), axis)


def argsort_ref(x, *, axis, descending):  # type: ignore[no-untyped-def]
    """Stable argsort; descending keeps equal elements in their original order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    a = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return (n - 1 - a).astype(np.int64)


_library("sort", _sort_ref, _same_infer, "real", doc="Stable sort along attrs['axis'].")
_library("argsort", argsort_ref, lambda s, d, a: (s[0], dt.DEFAULT_INDEX), "real",
         doc="Indices of a stable sort along attrs['axis'].")


def _searchsorted_ref(x1, x2, *sorter, side):  # type: ignore[no-untyped-def]
    return np.searchsorted(x1, x2, side=side, sorter=sorter[0] if sorter else None)


_library("searchsorted", _searchsorted_ref, lambda s, d, a: (s[1], dt.DEFAULT_INDEX), "real",
         doc="Insertion indices of x2 into sorted 1-d x1 (optional sorter input).")


def index_key(spec: tuple[Any, ...], arrays: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    """The numpy index described by ``spec`` (slices as (start, stop, step), ``None`` for a
    new axis, an int ``i`` for the i-th index array)."""
    out: list[Any] = []
    for s in spec:
        if s is None:
            out.append(None)
        elif isinstance(s, tuple):
            a, b, c = s
            out.append(slice(a, b if b >= 0 else None, c))
        else:
            out.append(arrays[s])
    return tuple(out)


def _checked(op: str, f: Callable[[], Any]) -> Any:
    """Run ``f``; an out-of-range index array (only detectable once its values exist)
    raises an IndexError naming the op."""
    try:
        return f()
    except IndexError as e:
        raise IndexError(f"{op}: {e} (integer index arrays are bounds-checked when they are "
                         "evaluated)") from None


def _gather_ref(x, *idx, spec):  # type: ignore[no-untyped-def]
    return _checked("getitem/take", lambda: x[index_key(spec, idx)])


def _index_shape(shape: Shape, idx_shapes: tuple[Shape, ...], spec: tuple[Any, ...]) -> Shape:
    """Result shape of numpy advanced indexing, from shapes only (zero-stride dummies)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, (0,) * len(shape))
    idx = tuple(np.lib.stride_tricks.as_strided(np.zeros(1, np.intp), s, (0,) * len(s))
                for s in idx_shapes)
    return dummy[index_key(spec, idx)].shape


def _gather_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    return _index_shape(shapes[0], tuple(shapes[1:]), attrs["spec"]), dtypes[0]


def _scatter_ref(x, v, *idx, spec):  # type: ignore[no-untyped-def]
    out = np.array(x, copy=True)
    _checked("setitem", lambda: out.__setitem__(index_key(spec, idx), v))
    return out


GATHER = _library("gather", _gather_ref, _gather_infer, moves_data=True,
                  doc="x[key] with integer index arrays (numpy advanced indexing).")
SCATTER = _library("scatter", _scatter_ref, lambda s, d, a: (s[0], d[0]), moves_data=True,
                   doc="x with x[key] = v (integer index arrays; last write wins).")


def _take_along_ref(x, idx, *, axis):  # type: ignore[no-untyped-def]
    return _checked("take_along_axis", lambda: np.take_along_axis(x, idx, axis=axis))


_library("take_along_axis", _take_along_ref,
         lambda s, d, a: (broadcast_shapes(s[0][:a["axis"]] + (s[1][a["axis"]],)
                                           + s[0][a["axis"] + 1:], s[1],
                                           op="take_along_axis"), d[0]),
         doc="Elements of x at idx along attrs['axis'].", moves_data=True)


def _cumprod_ref(x, *, axis, include_initial):  # type: ignore[no-untyped-def]
    out = np.cumprod(x, axis=axis, dtype=sum_dtype(x.dtype))
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        out = np.concatenate([np.ones(shape, out.dtype), out], axis=axis)
    return out


declare(OpDef("cumulative_prod", "scan", 1, _cumprod_ref, "any", infer=_cumsum_infer))


# linalg (float inputs; the recording layer casts ints to the default float)
def _linalg(name: str, ref: Callable[..., Any], shape_rule: Callable[..., Shape],
            dtype_rule: Callable[[np.dtype], np.dtype] = lambda d: d) -> OpDef:
    def infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
        d = dtypes[0]
        part_real = (name, attrs.get("part")) in (("eigh", 0), ("slogdet", 1), ("svd", 1))
        return shape_rule(*shapes, **attrs), dt.real_dtype(d) if part_real else dtype_rule(d)

    return _library("linalg." + name, ref, infer, "numeric")


def _sq(s, **a):  # type: ignore[no-untyped-def]
    return s


def _batch(s, **a):  # type: ignore[no-untyped-def]
    return s[:-2]


def _eigvals_shape(s, **a):  # type: ignore[no-untyped-def]
    return s[:-1]


def _qr_ref(x, *, mode, part):  # type: ignore[no-untyped-def]
    return np.linalg.qr(x, mode=mode)[part]


def _qr_shape(s, *, mode, part):  # type: ignore[no-untyped-def]
    m, n = s[-2:]
    k = min(m, n)
    if part == 0:
        return s[:-2] + ((m, k) if mode == "reduced" else (m, m))
    return s[:-2] + ((k, n) if mode == "reduced" else (m, n))


def _svd_ref(x, *, full_matrices, part):  # type: ignore[no-untyped-def]
    return np.linalg.svd(x, full_matrices=full_matrices)[part]


def _svd_shape(s, *, full_matrices, part):  # type: ignore[no-untyped-def]
    m, n = s[-2:]
    k = min(m, n)
    if part == 1:
        return s[:-2] + (k,)
    if part == 0:
        return s[:-2] + ((m, m) if full_matrices else (m, k))
    return s[:-2] + ((n, n) if full_matrices else (k, n))


def _cholesky_ref(x, *, upper):  # type: ignore[no-untyped-def]
    out = np.linalg.cholesky(x)
    return np.conj(np.swapaxes(out, -1, -2)) if upper else out


def _solve_ref(a, b, *, vector):  # type: ignore[no-untyped-def]
    if vector:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _solve_shape(a, b, *, vector):  # type: ignore[no-untyped-def]
    if vector:
        return broadcast_shapes(a[:-2], b[:-1], op="linalg.solve") + a[-1:]
    return broadcast_shapes(a[:-2], b[:-2], op="linalg.solve") + b[-2:]


def _pinv_ref(x, *rt, rtol):  # type: ignore[no-untyped-def]
    if x.size == 0:
        return np.zeros(x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype)
    if rt:  # an array of tolerances, one per matrix (broadcast over the batch)
        rtol = rt[0]
    elif rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(x.dtype).eps
    return np.linalg.pinv(x, rtol=rtol)


def _rank_ref(x, *rt, rtol):  # type: ignore[no-untyped-def]
    s = np.linalg.svd(x, compute_uv=False) if x.size else np.zeros(x.shape[:-2] + (0,))
    if rt:
        rtol = np.asarray(rt[0])[..., None]
    elif rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(s.dtype).eps
    tol = (s.max(axis=-1, keepdims=True, initial=0.0) * rtol)
    return np.count_nonzero(s > tol, axis=-1).astype(np.int64)


def _matrix_norm_ref(x, *, ord, keepdims):  # type: ignore[no-untyped-def]
    return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _matrix_norm_shape(s, *, ord, keepdims):  # type: ignore[no-untyped-def]
    return s[:-2] + ((1, 1) if keepdims else ())


def _vector_norm_ref(x, *, axes, keepdims, ord):  # type: ignore[no-untyped-def]
    a = np.abs(x)
    if ord == float("inf"):
        r = np.max(a, axis=axes, keepdims=keepdims, initial=0)
    elif ord == float("-inf"):
        r = np.min(a, axis=axes, keepdims=keepdims, initial=np.inf)
    elif ord == 0:
        r = np.sum(a != 0, axis=axes, keepdims=keepdims).astype(a.dtype)
    elif ord == 2:
        scale = np.max(a, axis=axes, keepdims=True, initial=0)  # no overflow for big values
        safe = np.where((scale == 0) | ~np.isfinite(scale), 1, scale)
        r = np.sqrt(np.sum((a / safe) ** 2, axis=axes, keepdims=True)) * safe
        r = np.where(np.isinf(scale), np.inf, r)
        r = np.where(np.isnan(a).any(axis=axes, keepdims=True), np.nan, r)
        if not keepdims:
            r = np.squeeze(r, axis=axes)
    else:
        r = np.sum(a ** ord, axis=axes, keepdims=keepdims) ** (1.0 / ord)
    return r


def _slogdet_ref(x, *, part):  # type: ignore[no-untyped-def]
    return np.linalg.slogdet(x)[part]


def _eigh_ref(x, *, part):  # type: ignore[no-untyped-def]
    return np.linalg.eigh(x)[part]


_linalg("cholesky", _cholesky_ref, _sq)
_linalg("det", np.linalg.det, _batch)
_linalg("eigh", _eigh_ref, lambda s, *, part: s[:-1] if part == 0 else s,
        lambda d: d)
_linalg("eigvalsh", np.linalg.eigvalsh, _eigvals_shape, dt.real_dtype)
_linalg("inv", np.linalg.inv, _sq)
_linalg("matrix_power", lambda x, *, n: np.linalg.matrix_power(x, n), _sq)
_linalg("matrix_rank", _rank_ref,
        lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt, op="linalg.matrix_rank"),
        lambda d: dt.DEFAULT_INDEX)
_linalg("pinv", _pinv_ref, lambda s, *rt, rtol: broadcast_shapes(s[:-2], *rt,
                                                                  op="linalg.pinv")
        + (s[-1], s[-2]))
_linalg("qr", _qr_ref, _qr_shape)
_linalg("slogdet", _slogdet_ref, lambda s, *, part: s[:-2])
_linalg("solve", _solve_ref, _solve_shape)
_linalg("svd", _svd_ref, _svd_shape)
_linalg("svdvals", lambda x: np.linalg.svd(x, compute_uv=False), lambda s: s[:-2] + (min(s[-2:]),),
        dt.real_dtype)
_linalg("matrix_norm", _matrix_norm_ref, _matrix_norm_shape, dt.real_dtype)
_linalg("vector_norm", _vector_norm_ref,
        lambda s, *, axes, keepdims, ord: _reduced_shape(s, axes, keepdims), dt.real_dtype)


# fft (complex or real floating inputs, float32 stays single precision)
def _fft_ref(fn: str) -> Callable[..., Any]:
    f = getattr(np.fft, fn)

    def ref(x, *, s, axes, norm):  # type: ignore[no-untyped-def]
        return f(x, s=s, axes=axes, norm=norm)

    return ref


def _fft_infer(kind: str) -> Infer:
    def infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
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
    _library("fft." + _fn, _fft_ref(_fn), _fft_infer(_kind), "numeric")


def _hfft_ref(x, *, n, axis, norm):  # type: ignore[no-untyped-def]
    return np.fft.hfft(x, n=n, axis=axis, norm=norm)


def _ihfft_ref(x, *, n, axis, norm):  # type: ignore[no-untyped-def]
    return np.fft.ihfft(x, n=n, axis=axis, norm=norm)


def _hfft_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    shape = list(shapes[0])
    shape[attrs["axis"]] = attrs["n"]
    return tuple(shape), dt.real_dtype(dtypes[0])


def _ihfft_infer(shapes, dtypes, attrs):  # type: ignore[no-untyped-def]
    shape = list(shapes[0])
    shape[attrs["axis"]] = attrs["n"] // 2 + 1
    return tuple(shape), dt.complex_dtype(dtypes[0])


_library("fft.hfft", _hfft_ref, _hfft_infer, "numeric")
_library("fft.ihfft", _ihfft_ref, _ihfft_infer, "numeric")
