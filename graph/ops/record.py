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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..dtypes import int32  # noqa: F401  (doctest)
from .shapes import Shape

Infer = Callable[[tuple[Shape, ...], tuple[np.dtype, ...], dict[str, Any]], tuple[Shape, np.dtype]]


@dataclass(frozen=True, eq=False)
class OpDef:
    """One op record: every fact about an op that any layer needs, in one place.

    The recording layer reads the dtype/shape rules and the summary (public functions
    and their docstrings are generated from it), the passes read ``cost``, the C-family
    generators read ``c`` / ``helpers`` / ``libm`` (one expression serves C++, CUDA C and
    MSL), the Metal generator ``msl_native``, the MLX backend ``mlx``; the gradient slot
    ``vjp`` is filled by autodiff.
    """

    name: str
    kind: str  # leaf | elementwise | reduce | scan | view | library | random
    arity: int  # number of array inputs; -1 = variadic
    reference: Callable[..., Any]  # numpy implementation: reference(*arrays, **attrs)
    domain: str = "any"  # input dtypes accepted (see DOMAINS)
    cast_inputs: str | None = None  # None | "float" (int/bool -> default float) | "bool"
    result: str = "same"  # result dtype rule for elementwise ops: same | bool | real
    infer: Infer | None = None  # shape/dtype rule for non-elementwise ops
    # the result depends on the exact compute dtype (not float32 for float16/bfloat16):
    # elementwise nodes of the op carry it as attrs["dtype"]
    exact_dtype: bool = False
    # the op only moves elements (gather, scatter...): exact in any dtype, so its reference
    # never upcasts float16/bfloat16 (a row lookup must not convert a whole table)
    moves_data: bool = False
    # the numpy function equal to ``reference`` on real operands, where ``reference`` wraps
    # it for complex ones: a scalar loop's numpy-scalar calls go to it directly
    real_reference: Callable[..., Any] | None = field(default=None, repr=False)
    doc: str = field(default="", repr=False)
    # ---- the public function (elementwise ops: generated from the record)
    summary: str = ""  # one line: "e raised to x"
    public: bool = True  # exported in the braze namespace (False: braze's own building block)
    example: tuple[str, str] | None = None  # (doctest call, its output) for the docstring
    # ---- cost: relative per-element work (add = 1, divide/sqrt 4, transcendental 8);
    # fusion's recompute rule and the generators' threading/row-cache rules read it
    cost: int = 1
    # ---- C-family expression: by operand dtype name, else kind ("f" float, "i" signed,
    # "u" unsigned, "b" bool, "*" any) -> template over {0} {1} {2} (operands), {T}
    # (compute type), {U} (wide unsigned type), {f} (libm suffix: "f" or "")
    c: Mapping[str, str] = field(default_factory=dict, repr=False)
    helpers: tuple[str, ...] = ()  # bz_* helper functions the expression calls
    libm: tuple[tuple[str, int], ...] = ()  # (libm function, arity) the expression needs
    exact_on_low: bool = False  # exact on float16/bfloat16 values: no rounding after it
    msl_native: bool = True  # MSL has the op's libm functions (else its prelude's bz_ one)
    # ---- reductions: the accumulator's identity and combining operator
    identity: str | None = None  # "0", "1", "lowest", "highest"
    combine: str | None = None  # "+", "*", "|", "&", "max", "min", "argmax", "argmin"
    # ---- MLX: mlx(mx, *operands) -> mx.array; None: not lowered (the numpy reference
    # runs, or the kernel falls back); mlx_bridge: when the numpy reference runs on the
    # operands instead ("always", "float" / "int" operands, "float64" operands, "never")
    mlx: Callable[..., Any] | None = field(default=None, repr=False)
    mlx_bridge: str = "never"
    # ---- autodiff: vjp(ad, g, out, *inputs, **attrs) -> one cotangent per input (None:
    # zero). ``ad`` is braze.arrays.autodiff.AD: the public ops to record the backward
    # with (rules here cannot import them); g, out and the inputs are Arrays. An
    # elementwise input's cotangent may keep the broadcast shape (autodiff sums it down).
    # None: no rule (differentiating through the op is an error); zero_vjp: zero.
    vjp: Callable[..., Any] | None = field(default=None, repr=False)

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


def zero_vjp(ad: Any, g: Any, out: Any, *xs: Any, **attrs: Any) -> tuple[None, ...]:
    """The gradient rule of a piecewise-constant or integer op: zero for every input."""
    return (None,) * len(xs)


def declare(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} declared twice")
    OPS[op.name] = op
    return op



def library_op(name: str, ref: Callable[..., Any], infer: Infer, domain: str = "any",
             doc: str = "", moves_data: bool = False,
             vjp: Callable[..., Any] | None = None) -> OpDef:
    """Declare a library op whose reference result never aliases its inputs."""
    def fresh(*xs: Any, **attrs: Any) -> Any:
        # A library result must own its memory: backends plan in-place reuse of it, which
        # must never write through into an input (np.linalg.matrix_power(a, 1) returns a).
        out = ref(*xs, **attrs)
        if any(isinstance(x, np.ndarray) and np.may_share_memory(out, x) for x in xs):
            out = np.array(out, copy=True)
        return out

    return declare(OpDef(name, "library", -1, fresh, domain, infer=infer, doc=doc,
                         moves_data=moves_data, vjp=vjp))



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
    if op.kind in _UPCAST_KINDS and op.name != "bitcast" and not op.moves_data:
        for x in xs:
            if x.dtype in _LOW:
                xs = tuple(upcast(x) for x in xs)
                break
    out = np.asarray(op.reference(*xs, **attrs))
    if out.dtype != out_dtype:
        out = out.astype(out_dtype)
    return out
