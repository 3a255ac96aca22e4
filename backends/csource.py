"""C-family source pieces shared by the generated-kernel backends (C++, CUDA C, MSL).

One op table (:data:`CEXPR`: the C expression of every elementwise op by operand kind),
the dtype maps, the iteration-space normalization and argument layout
(:func:`kernel_args`: shapes, view offsets/strides, constants as int64), and
:class:`ExprGen`, the base of every generator: liveness, row/element classification and
the expression of each instruction. The CPU (``backends/cpu/codegen.py``), CUDA
(``backends/cuda/codegen.py``) and Metal (``backends/metal/codegen.py``) generators add
only their loop shapes, so an op is declared once for all three.

The ``bz_`` helpers are real headers (``backends/kernels/``: ``half.h``, ``bfloat16.h``,
``int_ops.h``, ``float_ops.h``...), written once for the three dialects in the vocabulary
(``BZ_FN``, ``bz_fbits``/``bz_ffrom``, ``BZ_BITCAST``, ``bz_exp``...) that each dialect's
prelude (:func:`prelude`: ``kernels/<dialect>_prelude.h``) defines; :meth:`Needs.headers`
names those a kernel uses and :func:`helper_text` joins them.

Expressions (the op records' text) use GCC builtins (``__builtin_sqrtf``...); :func:`port`
rewrites them for a target without them.

>>> CEXPR["add"]["*"]
'({T})({0} + {1})'
>>> port("__builtin_sqrtf(v0) + __builtin_inf()", "cuda")
'sqrtf(v0) + bz_inf()'
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.kernel import Instr, Kernel
from ..graph.ops import OPS
from ..graph.view import merge_dims
from .kernel_sources import read, source


class Unsupported(Exception):
    """The kernel has something a generator does not handle (complex dtypes...)."""



# ---------------------------------------------------------------- dtypes
CTYPE = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
       "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
       "uint64": "uint64_t", "float16": "float", "bfloat16": "float", "float32": "float",
       "float64": "double"}
STYPE = dict(CTYPE, bool="uint8_t", float16="uint16_t", bfloat16="uint16_t")
LOW_FLOATS = ("float16", "bfloat16")


def dtype_name(d: np.dtype) -> str:
    n = dt.name(d) if d in dt.ALL else str(d)
    if n not in CTYPE:
        raise Unsupported(f"dtype {n} has no C++ type in the cpu backend")
    return n


def dtype_kind(n: str) -> str:
    if n == "bool":
        return "b"
    if n.startswith("uint"):
        return "u"
    if n.startswith("int"):
        return "i"
    return "f"


def dtype_bits(n: str) -> int:
    return {"bool": 8, "float16": 16, "bfloat16": 16}.get(n) or int("".join(
        c for c in n if c.isdigit()))


def wide_unsigned(n: str) -> str:
    return "uint64_t" if dtype_bits(n) == 64 else "uint32_t"


def fsuffix(n: str) -> str:
    return "" if n == "float64" else "f"


# ---------------------------------------------------------------- the op table
# Everything below is read from the op records (graph/ops/elementwise.py): the C
# expression of each elementwise op by operand dtype name or kind (see OpDef.c), which
# results need no rounding on float16/bfloat16, the libm functions the expressions
# call (declared, with libmvec simd variants where glibc has them), each op's cost.
CEXPR: dict[str, dict[str, str]] = {n: dict(op.c) for n, op in OPS.items() if op.c}
EXACT_ON_LOW = {n for n, op in OPS.items() if op.exact_on_low}
LIBM: dict[str, int] = {fn: arity for op in OPS.values() for fn, arity in op.libm}  # -> arity
COST = {n: op.cost for n, op in OPS.items()}
# elementwise/reduce ops the C-family generators do not emit (op -> why); kernels holding
# them fall back to the reference backend. Complex dtypes are refused per kernel instead.
UNSUPPORTED: dict[str, str] = {}


# ---------------------------------------------------------------- helper text
# The bz_ helpers of the expressions and loops are real headers (backends/kernels/), written
# once for all three dialects in the vocabulary each dialect's prelude defines
# (kernels/{cpu,cuda,metal}_prelude.h: BZ_FN, bz_fbits/bz_ffrom, BZ_BITCAST, bz_exp...). A
# kernel gets the headers of the helper groups it uses (Needs.headers), each once.
INT_HELPERS = frozenset({"idiv", "irem", "ipow", "shl", "shr"})  # kernels/int_ops.h
RANDOM_HELPERS = frozenset({"threefry2x32_x0", "threefry2x32_x1"})  # kernels/random.h


@functools.cache
def prelude(dialect: str) -> str:
    """The helper vocabulary every kernel of ``dialect`` ('cpu', 'cuda' or 'metal') starts
    with: ``kernels/<dialect>_prelude.h`` with its quoted includes inlined (no ``#line``
    markers: the kernel's text follows it)."""
    return source(__package__, f"kernels/{dialect}_prelude.h", lines=False)


def helper_text(headers: list[str]) -> str:
    """The helper headers ``headers`` (names in ``backends/kernels/``), in order, as one text
    for a generated kernel (no include guards: a test or the GPU emulator puts several kernels
    in one translation unit, each in its own namespace)."""
    return "".join(read(__package__, f"kernels/{h}") for h in headers)


# the float helpers the records name (bz_sigmoid -> "sigmoid"); integer ones are INT_HELPERS's
_FLOAT_HELPER_OF = {h: h[3:] for op in OPS.values() for h in op.helpers
                    if h[3:] not in INT_HELPERS | RANDOM_HELPERS}
_FLOAT_HELPER_NEEDS = {"sigmoid": ("exp",), "logaddexp": ("exp", "log1p"), "fpow": ("pow",)}


class Needs:
    """What the kernel body uses: helper groups (headers) and libm declarations."""

    def __init__(self) -> None:
        self.half = self.bf16 = self.bitcast = self.random = False
        self.int_ops = self.float_ops = False  # kernels/int_ops.h, kernels/float_ops.h
        self.libm: set[tuple[str, str]] = set()  # (function, ctype)

    def scan(self, expr: str, ct: str) -> None:
        """Record the helpers and libm calls an expression uses."""
        for h, name in _FLOAT_HELPER_OF.items():
            if h + "(" in expr:
                self.float_ops = True
                for fn in _FLOAT_HELPER_NEEDS.get(name, ()):
                    self.libm.add((fn, ct))
        if not self.int_ops and any(f"bz_{name}<" in expr for name in INT_HELPERS):
            self.int_ops = True
        if "bz_threefry2x32_x" in expr:
            self.random = True
        suffix = "f" if ct == "float" else ""
        for fn in LIBM:
            if f"{fn}{suffix}(" in expr and f"_{fn}{suffix}(" not in expr:
                self.libm.add((fn, ct))

    def headers(self) -> list[str]:
        """The shared helper headers (``backends/kernels/``) of what was recorded, in order."""
        groups = [("half.h", self.half), ("bfloat16.h", self.bf16), ("bitcast.h", self.bitcast),
                  ("int_ops.h", self.int_ops), ("float_ops.h", self.float_ops),
                  ("random.h", self.random)]
        return [h for h, used in groups if used]

    def helpers(self, extra: tuple[str, ...] = ()) -> str:
        """The text of :meth:`headers`, then of the headers ``extra`` (a generator's loops'
        own: ``reduce.h``, ``stream.h``)."""
        return helper_text(self.headers() + list(extra))


def symbolize(text: str) -> tuple[str, str]:
    """``(source, symbol)`` of a generated kernel's ``text``: its ``BZ_SYMBOL`` replaced by
    the structural symbol ``bz_<hash of text>``."""
    symbol = "bz_" + hashlib.sha1(text.encode()).hexdigest()[:20]
    return text.replace("BZ_SYMBOL", symbol), symbol


# ---------------------------------------------------------------- normalization
@dataclass
class _Norm:
    outer: list[int]  # merged outer dim sizes
    red: list[int]  # merged reduced dim sizes (n_red > 0 kernels; >= 1 dim there)
    offsets: list[int]  # per view (loads, then stores)
    strides: list[list[int]]  # per view, over outer + red dims (row stores: 0 on red dims)
    empty: bool


def normalize(k: Kernel) -> _Norm:
    nd = len(k.shape)
    n_o = nd - k.n_red
    views = [ld.view for ld in k.loads] + [st.view for st in k.stores]
    full: list[list[int]] = []
    for v in views:
        s = list(v.strides)
        if len(s) == n_o and k.n_red:  # a row store: over the outer dims only
            s += [0] * k.n_red
        if len(s) != nd:
            raise Unsupported(f"a view of rank {len(s)} in a kernel of rank {nd}")
        full.append(s)
    nv = len(views)
    groups = []
    for lo, hi in ((0, n_o), (n_o, nd)):
        sizes = k.shape[lo:hi]
        if 0 in sizes:
            groups.append([(0, [0] * nv)])
            continue
        groups.append(merge_dims(sizes, [s[lo:hi] for s in full]))
    outer, red = groups
    if is_rows(k) and not red:  # (a reduction over no axes reduces each element alone)
        red = [(1, [0] * nv)]
    if not is_rows(k) and not outer:  # 0-d (or all size-1): one element
        outer = [(1, [0] * nv)]
    dims = outer + red
    return _Norm([d for d, _ in outer], [d for d, _ in red], [v.offset for v in views],
                 [[st[i] for _, st in dims] for i in range(nv)],
                 any(d == 0 for d in k.shape[:n_o]))


def is_rows(k: Kernel) -> bool:
    """Does ``k`` have reductions (then every iteration is a row, maybe of one element)?"""
    return k.n_red > 0 or any(ins.op in OPS and OPS[ins.op].kind == "reduce"
                              for ins in k.instrs)


def kernel_slots(k: Kernel) -> tuple[int, ...]:
    """The distinct slots of ``k`` in bufs[] order: first appearance over loads, then stores."""
    return tuple(dict.fromkeys([ld.slot for ld in k.loads] + [st.slot for st in k.stores]))


# ---------------------------------------------------------------- constants
def _const_arg(value: Any, n: str) -> int:
    d = dt.bfloat16 if n == "bfloat16" else np.dtype(n)
    with np.errstate(all="ignore"):
        v = np.asarray(value).astype(d) if n != "bool" else np.asarray(value).astype(bool)
    if n in LOW_FLOATS:
        return int(v.astype(np.float32).view(np.int32))
    if n == "float32":
        return int(v.view(np.int32))
    if n == "float64":
        return int(v.view(np.int64))
    if n == "uint64":
        return int(v.view(np.int64))
    return int(v)


def kernel_args(k: Kernel, slot_arrays: Any = None, num_threads: int = 1) -> np.ndarray:
    """The int64 ``args`` array of ``k`` (see the module docstring for its layout).

    ``slot_arrays`` (optional): the buffers in ``bufs[]`` order; when given, each view
    is checked to stay inside its buffer."""
    norm = normalize(k)
    out = [int(num_threads)] + norm.outer + norm.red
    n_o = len(norm.outer)
    n_l = len(k.loads)
    for vi in range(n_l + len(k.stores)):
        out.append(norm.offsets[vi])
        st = norm.strides[vi]
        row_store = vi >= n_l and k.n_red and len(k.stores[vi - n_l].view.shape) == len(
            k.shape) - k.n_red
        out.extend(st[:n_o] if row_store else st)
    for ins in k.instrs:
        if ins.op == "const":
            out.append(_const_arg(ins.attr("value"), dtype_name(ins.dtype)))
    args = np.asarray(out, dtype=np.int64)
    if slot_arrays is not None:
        _check_bounds(k, slot_arrays)
    return args


def _check_bounds(k: Kernel, arrays: Any) -> None:
    slots = kernel_slots(k)
    for what, items in (("load", k.loads), ("store", k.stores)):
        for it in items:
            a = arrays[slots.index(it.slot)]
            v = it.view
            if v.size == 0:
                continue
            lo = v.offset + sum((d - 1) * s for d, s in zip(v.shape, v.strides) if s < 0)
            hi = v.offset + sum((d - 1) * s for d, s in zip(v.shape, v.strides) if s > 0)
            if lo < 0 or hi >= a.size:
                raise ValueError(f"{what} view {v} is outside its buffer of {a.size} elements")


# ---------------------------------------------------------------- generation
def check_kernel(k: Kernel) -> None:
    for ins in k.instrs:
        n = dtype_name(ins.dtype)
        if ins.op in ("load", "const"):
            continue
        if ins.op in UNSUPPORTED:
            raise Unsupported(f"{ins.op}: {UNSUPPORTED[ins.op]}")
        if ins.op == "cast":
            dtype_name(k.instrs[ins.args[0]].dtype)
            continue
        if ins.op == "bitcast":
            src = dtype_name(k.instrs[ins.args[0]].dtype)
            if dtype_bits(src) != dtype_bits(n):
                raise Unsupported(f"bitcast {src} -> {n}")
            continue
        op = OPS.get(ins.op)
        if op is None:
            raise Unsupported(f"unknown op {ins.op!r}")
        if op.kind == "reduce":
            src = dtype_name(k.instrs[ins.args[0]].dtype)
            if ins.op == "mean" and dtype_kind(n) != "f":
                raise Unsupported(f"mean with result dtype {n}")
            if ins.op in ("sum", "prod") and dtype_kind(n) == "f" and dtype_kind(src) != "f":
                raise Unsupported(f"{ins.op} of {src} into {n}")
            if ins.op not in REDUCE_OPS:
                raise Unsupported(f"reduction {ins.op!r}")
            continue
        if op.kind != "elementwise" or ins.op not in CEXPR:
            raise Unsupported(f"op {ins.op!r} has no C++ expression")
        kinds = CEXPR[ins.op]
        akind = dtype_kind(dtype_name(k.instrs[ins.args[-1]].dtype))
        if akind not in kinds and "*" not in kinds and dtype_name(k.instrs[ins.args[-1]].dtype) \
                not in kinds:
            raise Unsupported(f"{ins.op} on {dtype_name(k.instrs[ins.args[-1]].dtype)}")
    n_outer = len(k.shape) - k.n_red
    for st in k.stores:
        dtype_name(k.instrs[st.instr].dtype)
        if k.n_red and len(st.view.shape) == n_outer and not k.instrs[st.instr].row:
            raise Unsupported("a row store of an element value")


# reductions the generators emit: every reduce record with an identity and a combiner
REDUCE_OPS = tuple(n for n, op in OPS.items() if op.kind == "reduce" and op.combine)


# storage <-> compute conversions of the dtypes stored differently from how they compute
_LOAD_CONV = {"bool": "({} != 0)", "float16": "bz_h2f({})", "bfloat16": "bz_b2f({})"}
_STORE_CONV = {"bool": "(uint8_t)({})", "float16": "bz_f2h({})", "bfloat16": "bz_f2b({})"}


def load_conv(n: str, raw: str) -> str:
    """The compute value of dtype ``n`` from its stored form ``raw``."""
    return _LOAD_CONV[n].format(raw) if n in _LOAD_CONV else raw


def store_conv(n: str, v: str) -> str:
    """The stored form of compute value ``v`` of dtype ``n``."""
    return _STORE_CONV[n].format(v) if n in _STORE_CONV else v


def cast_expr(src: str, dst: str, x: str) -> str:
    """C expression converting a compute value of dtype src to the compute value of dst."""
    if dst == "bool":
        return f"({x} != 0)"
    ks, kd = dtype_kind(src), dtype_kind(dst)
    # integer -> float: GCC 12 with -fno-trapping-math folds float -> int -> float into a
    # truncation that keeps the sign of a zero ((float)(int)-0.3 gives -0.0, not +0.0);
    # adding BZ_I2F_ZERO (0 at run time, which the C++ compiler cannot see: cpu_prelude.h)
    # to the integer keeps the conversions
    if ks in "iu" and (kd == "f" or dst in LOW_FLOATS):
        x = f"({x} + BZ_I2F_ZERO)"
    if dst in LOW_FLOATS:
        rnd = "bz_rh" if dst == "float16" else "bz_rb"
        if src == "float64":
            return f"bz_h2f(bz_d2h({x}))" if dst == "float16" else f"bz_rb((float)({x}))"
        return f"{rnd}((float)({x}))"
    T = CTYPE[dst]
    if kd == "f" or ks in "biu":
        return f"(({T})({x}))"
    # float -> integer: truncation, through the paths numpy's x86-64 casts take; NaN and
    # out-of-range values give the x86 "integer indefinite" (INT_MIN of the path) as numpy
    # does there -- written out, since the bare C cast is undefined for them (and GCC
    # then folds float -> int -> float into a truncation that keeps the NaN)
    f = "" if src == "float64" else "f"  # (MSL has no double: float bounds for float)
    if dst == "int64":
        return _f2i(x, 64, f)
    if dst == "uint64":
        return f"(({x}) < 0 ? (uint64_t){_f2i(x, 64, f)} : (uint64_t)({x}))"
    if dst == "uint32":
        return f"((uint32_t){_f2i(x, 64, f)})"
    return f"(({T}){_f2i(x, 32, f)})"


def _f2i(x: str, bits: int, f: str) -> str:
    """float -> int32/int64 truncation, NaN and out-of-range -> the minimum (x86's); the
    bounds 2^31 and 2^63 are exact in float too (``f``: the float literal suffix)."""
    t, lim = ("int32_t", "2147483648.0") if bits == 32 else ("int64_t", "9223372036854775808.0")
    low = "(int32_t)(-2147483647 - 1)" if bits == 32 else "(int64_t)(-9223372036854775807LL - 1)"
    return f"(!(({x}) >= -{lim}{f} && ({x}) < {lim}{f}) ? {low} : ({t})({x}))"


def extreme(n: str, low: bool) -> str:
    """The identity of max (low=True: the lowest value) or min (the highest) for dtype n."""
    if dtype_kind(n) == "f":
        return "-__builtin_inf()" if low else "__builtin_inf()"
    info = np.iinfo(np.dtype(n))
    v = info.min if low else info.max
    if n == "int64" and low:
        return "(-9223372036854775807LL - 1)"
    if n == "uint64" and not low:
        return "18446744073709551615ULL"
    return f"{v}LL" if n != "uint64" else f"{v}ULL"


# ---------------------------------------------------------------- porting builtins
_BUILTIN = re.compile(r"__builtin_(\w+)")


def port(text: str, target: str) -> str:
    """Rewrite the GCC builtins of CEXPR-derived text for ``target`` ('cuda' or 'metal'):
    the libm name (CUDA: ``sqrtf``; Metal: the overloaded ``sqrt``, or a ``bz_`` helper for
    what MSL lacks), ``bz_inf()`` / ``bz_nan()`` for the constants (each target's helper
    text defines them); Metal also gets ``L`` for ``LL`` literals (its ``long`` is 64-bit).

    >>> port("__builtin_fabsf(v1) < (float)__builtin_inf()", "metal")
    'fabs(v1) < (float)bz_inf()'
    """
    text = text.replace('__builtin_nanf("")', "bz_nanf()").replace('__builtin_nan("")', "bz_nan()")
    text = text.replace("__builtin_copysignf(0, ", "__builtin_copysignf(0.0f, ").replace(
        "__builtin_copysign(0, ", "__builtin_copysign(0.0, ")  # no int -> float overload pick
    text = _BUILTIN.sub(lambda m: _SPECIAL.get(m.group(1), m.group(1)), text)
    if target == "metal":
        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in METAL_OVERLOADED:
                return name + "("
            if name in METAL_MISSING:
                return f"bz_{name}("
            return m.group(0)

        text = _FCALL.sub(one, text)
        text = re.sub(r"\b(\d+)(U?)LL\b", r"\1\2L", text)
    return text


_SPECIAL = {"inf": "bz_inf", "isinf": "bz_isinf"}
_FCALL = re.compile(r"\b([a-z][a-z0-9]*)f\(")
# libm functions MSL lacks (the Metal prelude defines bz_<name>): from the op records
METAL_MISSING = {n for n, op in OPS.items() if not op.msl_native}
# libm names MSL spells without the float suffix (overloads); names MSL lacks are bz_ helpers
METAL_OVERLOADED = {"sqrt", "fabs", "rint", "ceil", "floor", "trunc", "copysign", "fmod"} | {
    fn for op in OPS.values() for fn, _ in op.libm if fn not in METAL_MISSING}


class ExprGen:
    """Shared analysis and expressions of one kernel; a target subclass adds loops."""

    def __init__(self, k: Kernel, needs: Needs | None = None) -> None:
        self.k = k
        self.norm = normalize(k)
        self.needs = needs if needs is not None else Needs()
        self.lines: list[str] = []
        self.ind = 1
        self.names = [dtype_name(ins.dtype) for ins in k.instrs]
        self.slots = kernel_slots(k)
        self.n_loads = len(k.loads)
        if is_rows(k):
            self.mode = "rows"
            self.n_o, self.n_r = len(self.norm.outer), len(self.norm.red)
        else:  # the innermost dim plays the role of a row's (single) reduced dim
            self.mode = "flat" if len(self.norm.outer) == 1 else "nested"
            self.n_o, self.n_r = len(self.norm.outer) - 1, 1
        # threads: over rows when there are outer dims, else inside the single row
        self.inner_parallel = self.n_o == 0
        self.live = self._live()
        self.live_set = set(self.live)
        self.cost = 1 + sum(COST.get(k.instrs[i].op, 1) for i in self.live
                            if k.instrs[i].op not in ("load", "const"))
        self.el_stores = [si for si in range(len(k.stores)) if not self._is_row_store(si)]

    # -------------------------------------------------------- the argument layout
    def emit_arguments(self, dims: list[str], arg: Any, pointer: Any, f32: str, f64: str
                       ) -> int:
        """Declare the kernel's uniform arguments from ``arg(a)`` (the a-th int64): the
        sizes ``dims``, then per view its base pointer (``pointer(vi, slot, ctype, offset)``
        gives the declaration) and strides, then every constant (floats from their bits
        through the ``f32``/``f64`` format strings). Returns the argument count."""
        k, a = self.k, 1
        for name in dims:
            self.emit(f"const int64_t {name} = {arg(a)};")
            a += 1
        n_o_full = len(self.norm.outer) if k.n_red else 0
        for vi in range(self.n_loads + len(k.stores)):
            slot = k.loads[vi].slot if vi < self.n_loads else k.stores[vi - self.n_loads].slot
            self.emit(pointer(vi, slot, self.view_st(vi), arg(a)))
            a += 1
            row_store = vi >= self.n_loads and self._is_row_store(vi - self.n_loads)
            for d in range(n_o_full if row_store else len(dims)):
                self.emit(f"const int64_t {self.sname(vi, d)} = {arg(a)};")
                a += 1
        for i, ins in enumerate(k.instrs):  # every constant has an argument, live or not
            if ins.op != "const":
                continue
            if i in self.live_set:
                n = self.names[i]
                if n == "float64":
                    val = f64.format(arg(a))
                elif dtype_kind(n) == "f":
                    val = f32.format(arg(a))
                elif n == "bool":
                    val = f"({arg(a)} != 0)"
                else:
                    val = f"({CTYPE[n]}){arg(a)}"
                self.emit(f"const {CTYPE[n]} v{i} = {val};")
            a += 1
        return a

    # -------------------------------------------------------- small utilities
    def emit(self, line: str) -> None:
        self.lines.append("  " * self.ind + line)

    def open(self, line: str) -> None:
        self.emit(line + " {" if line else "{")
        self.ind += 1

    def close(self) -> None:
        self.ind -= 1
        self.emit("}")

    def ct(self, i: int) -> str:
        return CTYPE[self.names[i]]

    def _live(self) -> list[int]:
        need: set[int] = set()
        stack = [st.instr for st in self.k.stores]
        while stack:
            i = stack.pop()
            if i in need:
                continue
            need.add(i)
            stack.extend(self.k.instrs[i].args)
        return sorted(need)

    def _is_row_store(self, si: int) -> bool:
        return bool(self.k.n_red) and len(self.k.stores[si].view.shape) == len(
            self.k.shape) - self.k.n_red

    def is_row(self, i: int) -> bool:
        """Computed once per row (not per element)."""
        ins = self.k.instrs[i]
        if self.mode != "rows":
            return ins.op == "const" or (ins.row and ins.op != "load")
        return ins.row

    def cone(self, targets: list[int], stops: set[int] | frozenset[int] = frozenset()
             ) -> list[int]:
        """Element-level instructions needed by ``targets``, in order (not looking past
        ``stops``: values read back from the row cache)."""
        need: set[int] = set()
        stack = [t for t in targets if not self.is_row(t)]
        while stack:
            i = stack.pop()
            if i in need:
                continue
            need.add(i)
            if i not in stops:
                stack.extend(a for a in self.k.instrs[i].args if not self.is_row(a))
        return sorted(need)

    def _load_dtype(self, li: int) -> np.dtype:
        for ins in self.k.instrs:
            if ins.op == "load" and ins.attr("load") == li:
                return ins.dtype
        raise Unsupported(f"load {li} is never read")

    def view_st(self, vi: int) -> str:
        """Storage C type of view vi (loads, then stores)."""
        if vi < self.n_loads:
            return STYPE[dtype_name(self._load_dtype(vi))]
        return STYPE[self.names[self.k.stores[vi - self.n_loads].instr]]

    # -------------------------------------------------------- expressions
    def reduction(self, i: int) -> tuple[str, str, str, str]:
        """``(op, acc, init, combine)`` of reduction instruction ``i`` (not argmax/argmin):
        bool max/min are any/all, which accumulate in ``int``; ``acc`` the accumulator's C
        type, ``init`` its starting value (C text with GCC builtins: :func:`port` it) and
        ``combine`` its operator ('+', '*', '|', '&', 'max', 'min'), from the op record."""
        ins = self.k.instrs[i]
        an = self.names[ins.args[0]]
        op, acc = ins.op, CTYPE[self.names[i]]
        if op in ("max", "min") and dtype_kind(an) == "b":
            op = "any" if op == "max" else "all"
        if op in ("any", "all"):
            acc = "int"
        rec = OPS[op]
        assert rec.identity is not None and rec.combine is not None, op
        init = (extreme(an, low=rec.identity == "lowest") if rec.combine in ("max", "min")
                else rec.identity)
        return op, acc, init, rec.combine

    def op_expr(self, i: int) -> str:
        ins: Instr = self.k.instrs[i]
        n = self.names[i]
        args = [f"v{a}" for a in ins.args]
        if ins.op == "cast":
            e = cast_expr(self.names[ins.args[0]], n, args[0])
            self._note_conv(e)
            return e
        if ins.op == "bitcast":
            src = self.names[ins.args[0]]
            self.needs.bitcast = True
            e = load_conv(n, f"bz_bc<{STYPE[n]}>(({STYPE[src]})({store_conv(src, args[0])}))")
            self._note_conv(e)
            return e
        table = CEXPR[ins.op]
        an = self.names[ins.args[-1]]  # operand dtype (where: the value operands)
        kind = dtype_kind(an)
        tmpl = table.get(an, table.get(kind, table.get("*")))
        assert tmpl is not None
        act = CTYPE[an]
        e = tmpl.format(*args, T=act, U=wide_unsigned(an) if kind in "iu" else "unsigned",
                        f=fsuffix(an))
        self.needs.scan(e, act if kind == "f" else "int")
        self._note_conv(e)
        if n in LOW_FLOATS and ins.op not in EXACT_ON_LOW:
            e = ("bz_rh" if n == "float16" else "bz_rb") + f"({e})"
            self._note_conv(e)
        return e

    def _note_conv(self, e: str) -> None:
        if any(h in e for h in ("bz_h2f", "bz_rh", "bz_f2h", "bz_d2h", "bz_nextafter_h")):
            self.needs.half = True
        if any(h in e for h in ("bz_b2f", "bz_rb", "bz_f2b", "bz_nextafter_b")):
            self.needs.bf16 = True

    def load_expr(self, i: int, index: str) -> str:
        li = self.k.instrs[i].attr("load")
        e = load_conv(self.names[i], f"P{li}[{index}]")
        self._note_conv(e)
        return e

    def store_expr(self, si: int, v: str) -> str:
        e = store_conv(self.names[self.k.stores[si].instr], v)
        self._note_conv(e)
        return e

    # -------------------------------------------------------- strides and indices
    def inner_class(self, vi: int) -> int:
        """Innermost stride of view vi: 0 (broadcast), 1 (contiguous) or 2 (general)."""
        s = self.norm.strides[vi][-1]
        return 0 if s == 0 else (1 if s == 1 else 2)

    def sname(self, vi: int, d: int) -> str:
        return f"s{vi}_{d}"
