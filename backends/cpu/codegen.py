"""C++ code generation for the ``cpu`` backend: Kernel IR -> one C++ function.

``generate(kernel)`` is a pure function from a :class:`~braze.graph.kernel.Kernel` to
C++ source text. The source is **shape-independent**: the iteration shape, every
view's offset and strides and every constant are runtime arguments; only structure
is baked in — the ops and dtypes, the number of (merged) outer and reduced dims, and
for each view whether its innermost stride is 0, 1 or general. So the same fused
structure at another shape (or with other constants) reuses one binary, and the
symbol is structural: ``bz_<hash of the source>``.

The ABI, the same for every kernel::

    extern "C" void bz_<hash>(void** bufs, const int64_t* args);

* ``bufs[b]`` is the data pointer of the b-th *distinct slot* of the kernel, slots in
  order of first appearance over ``kernel.loads`` then ``kernel.stores``
  (``GeneratedKernel.slots``); each buffer is the row-major flat buffer of its slot
  (bool as uint8, float16/bfloat16 as their uint16 bits).
* ``args`` (int64, built by :func:`kernel_args`): ``[0]`` the thread count; then the
  normalized iteration shape (outer dims, then reduced dims); then for each load its
  element offset and its strides over all dims; then for each store its offset and
  strides (element stores: all dims; row stores: the outer dims); then each constant
  (float32 bits, float64 bits, or the integer value).

Before generating, the iteration space is *normalized*: size-1 dims are dropped and
neighbouring dims that every view can step through as one are merged (outer with
outer, reduced with reduced), so a contiguous 4096x4096 softmax and a 16x8 one are the
same 2-d kernel, and any contiguous elementwise chain is one flat loop.

Three loop shapes:

* **flat** (no reduction, <= 1 dim after merging): one work-shared ``simd`` loop;
* **nested** (no reduction, strided/broadcast views): rows of the leading dims in
  parallel (each thread a contiguous range, odometer indices), the innermost dim a
  ``simd`` loop;
* **rows** (reductions): rows in parallel; per row, the row-level instructions once,
  each reduction as its own vectorized loop over the row (blocked sums, NaN-aware
  max/min, first-index argmax/argmin), then the element loop for element stores, then
  the row stores. Without outer dims (a full reduction, one big softmax row) the
  threads share the row's loops instead. Expensive element values that several loops
  need (softmax's ``exp``) are kept in a per-row scratch buffer by the first loop and
  read back by the later ones. A reduction over no axes (``n_red == 0``) is a row
  kernel whose rows are single elements.

OpenMP threads start only when the work is large (``if(parallel: ...)``). Contiguous
element stores are computed into an L1 tile and copied out, with non-temporal
(streaming) stores when the kernel writes more than ``STREAM_BYTES``: no
read-for-ownership traffic on outputs that do not fit in cache.

Semantics follow ``backends/numpy_backend.py`` (the reference executor): values of
float16/bfloat16 are float32 in flight and rounded (RNE, NaN kept) after every op
whose result dtype is low precision, and on store; reduction results stay float32;
integer arithmetic wraps (built with ``-fwrapv``), integer division and remainder
by zero give 0, floor division / remainder follow numpy's sign rules (floats:
``npy_divmod``), shifts by >= the bit width give 0 (or -1 for negative signed right
shifts), integer powers with negative exponents give 0 / +-1. Complex dtypes and
anything else without a C expression raise :class:`Unsupported`: the backend then
runs that kernel with the numpy executor.

Transcendentals vectorize without ``-ffast-math`` by declaring glibc's libmvec
variants (``#pragma omp declare simd notinbranch``), for the functions the host's
glibc has (see ``shared/recipes/vector-math.md``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...graph import dtypes as dt
from ...graph.kernel import Instr, Kernel
from ...graph.ops import OPS

__all__ = ["CEXPR", "GeneratedKernel", "Unsupported", "generate", "kernel_args",
           "kernel_slots"]

PARALLEL_WORK = 1 << 17  # cost-weighted elements below which a kernel stays single-threaded
SUM_BLOCK = 1024  # blocked summation: simd partial sums over blocks, then across blocks
TILE = 1024  # contiguous outputs are computed in tiles of this many elements, then copied
STREAM_BYTES = 16 << 20  # ... with non-temporal (streaming) stores above this output size
ROW_CACHE_BYTES = 1 << 20  # rows up to this size keep expensive values for later passes


class Unsupported(Exception):
    """The kernel has something the C++ generator does not handle (complex dtypes...)."""


@dataclass(frozen=True)
class GeneratedKernel:
    source: str
    symbol: str
    slots: tuple[int, ...]  # schedule slot of each bufs[] entry
    n_args: int
    empty: bool  # an outer dim is 0: nothing to compute, no need to launch


# ---------------------------------------------------------------- dtypes
_CT = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
       "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
       "uint64": "uint64_t", "float16": "float", "bfloat16": "float", "float32": "float",
       "float64": "double"}
_ST = dict(_CT, bool="uint8_t", float16="uint16_t", bfloat16="uint16_t")
_LOW = ("float16", "bfloat16")


def _name(d: np.dtype) -> str:
    n = dt.name(d) if d in dt.ALL else str(d)
    if n not in _CT:
        raise Unsupported(f"dtype {n} has no C++ type in the cpu backend")
    return n


def _kind(n: str) -> str:
    if n == "bool":
        return "b"
    if n.startswith("uint"):
        return "u"
    if n.startswith("int"):
        return "i"
    return "f"


def _bits(n: str) -> int:
    return {"bool": 8, "float16": 16, "bfloat16": 16}.get(n) or int("".join(
        c for c in n if c.isdigit()))


def _wide_unsigned(n: str) -> str:
    return "uint64_t" if _bits(n) == 64 else "uint32_t"


def _fsuffix(n: str) -> str:
    return "" if n == "float64" else "f"


# ---------------------------------------------------------------- the op table
# C expression of each elementwise op, by operand dtype name (rare overrides), else by
# operand kind: "f" float (float16/bfloat16 computed in float), "i" signed int, "u"
# unsigned int, "b" bool; "*" = any kind.
# {0} {1} {2}: operands; {T}: compute type; {U}: wide unsigned type (integer ops);
# {f}: libm suffix ("f" for float, "" for double). bz_* are helpers emitted on demand;
# libm names are declared (with libmvec simd variants where glibc has them).
CEXPR: dict[str, dict[str, str]] = {
    "exp": {"f": "exp{f}({0})"}, "expm1": {"f": "expm1{f}({0})"},
    "log": {"f": "log{f}({0})"}, "log1p": {"f": "log1p{f}({0})"},
    "log2": {"f": "log2{f}({0})"}, "log10": {"f": "log10{f}({0})"},
    "sin": {"f": "sin{f}({0})"}, "cos": {"f": "cos{f}({0})"}, "tan": {"f": "tan{f}({0})"},
    "asin": {"f": "asin{f}({0})"}, "acos": {"f": "acos{f}({0})"},
    "atan": {"f": "atan{f}({0})"}, "sinh": {"f": "sinh{f}({0})"},
    "cosh": {"f": "cosh{f}({0})"}, "tanh": {"f": "tanh{f}({0})"},
    "asinh": {"f": "asinh{f}({0})"}, "acosh": {"f": "acosh{f}({0})"},
    "atanh": {"f": "atanh{f}({0})"},
    "sqrt": {"f": "__builtin_sqrt{f}({0})"},
    "reciprocal": {"f": "(({T})1 / {0})"},
    "sigmoid": {"f": "bz_sigmoid({0})"},
    "negative": {"*": "({T})(-{0})"},
    "positive": {"*": "{0}"},
    "square": {"*": "({T})({0} * {0})"},
    "sign": {"f": "bz_fsign({0})", "i": "({T})(({0} > 0) - ({0} < 0))", "u": "({T})({0} > 0)"},
    "round": {"f": "__builtin_rint{f}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "ceil": {"f": "__builtin_ceil{f}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "floor": {"f": "__builtin_floor{f}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "trunc": {"f": "__builtin_trunc{f}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "abs": {"f": "__builtin_fabs{f}({0})", "i": "({T})({0} < 0 ? -{0} : {0})", "u": "{0}",
            "b": "{0}"},
    "real": {"*": "{0}"},
    "imag": {"*": "({T})0"},
    "conj": {"*": "{0}"},
    "bitwise_invert": {"i": "({T})(~{0})", "u": "({T})(~{0})", "b": "(!{0})"},
    "logical_not": {"*": "(!{0})"},
    "isnan": {"f": "({0} != {0})", "i": "false", "u": "false", "b": "false"},
    "isinf": {"f": "(__builtin_fabs{f}({0}) == ({T})__builtin_inf())", "i": "false",
              "u": "false", "b": "false"},
    "isfinite": {"f": "(__builtin_fabs{f}({0}) < ({T})__builtin_inf())", "i": "true",
                 "u": "true", "b": "true"},
    "signbit": {"f": "bz_signbit({0})"},
    "add": {"b": "({0} | {1})", "*": "({T})({0} + {1})"},
    "subtract": {"*": "({T})({0} - {1})"},
    "multiply": {"b": "({0} & {1})", "*": "({T})({0} * {1})"},
    "divide": {"f": "({0} / {1})"},
    "floor_divide": {"f": "bz_floordiv({0}, {1})", "i": "bz_idiv<{T}>({0}, {1})",
                     "u": "({1} == 0 ? ({T})0 : ({T})({0} / {1}))"},
    "remainder": {"f": "bz_pymod({0}, {1})", "i": "bz_irem<{T}>({0}, {1})",
                  "u": "({1} == 0 ? ({T})0 : ({T})({0} % {1}))"},
    "pow": {"f": "pow{f}({0}, {1})", "i": "bz_ipow<{T}, {U}>({0}, {1})",
            "u": "bz_ipow<{T}, {U}>({0}, {1})"},
    "maximum": {"f": "bz_fmax({0}, {1})", "b": "({0} | {1})",
                "*": "({0} > {1} ? {0} : {1})"},
    "minimum": {"f": "bz_fmin({0}, {1})", "b": "({0} & {1})",
                "*": "({0} < {1} ? {0} : {1})"},
    "atan2": {"f": "atan2{f}({0}, {1})"},
    "hypot": {"f": "hypot{f}({0}, {1})"},
    "copysign": {"f": "__builtin_copysign{f}({0}, {1})"},
    "nextafter": {"float16": "bz_nextafter_h({0}, {1})", "bfloat16": "bz_nextafter_b({0}, {1})",
                  "f": "__builtin_nextafter{f}({0}, {1})"},
    "logaddexp": {"f": "bz_logaddexp({0}, {1})"},
    "bitwise_and": {"*": "({T})({0} & {1})"},
    "bitwise_or": {"*": "({T})({0} | {1})"},
    "bitwise_xor": {"*": "({T})({0} ^ {1})"},
    "bitwise_left_shift": {"i": "bz_shl<{T}, {U}>({0}, {1})", "u": "bz_shl<{T}, {U}>({0}, {1})"},
    "bitwise_right_shift": {"i": "bz_shr<{T}>({0}, {1})", "u": "bz_shr<{T}>({0}, {1})"},
    "logical_and": {"*": "({0} && {1})"},
    "logical_or": {"*": "({0} || {1})"},
    "logical_xor": {"*": "({0} != {1})"},
    "equal": {"*": "({0} == {1})"},
    "not_equal": {"*": "({0} != {1})"},
    "less": {"*": "({0} < {1})"},
    "less_equal": {"*": "({0} <= {1})"},
    "greater": {"*": "({0} > {1})"},
    "greater_equal": {"*": "({0} >= {1})"},
    "where": {"*": "({0} ? {1} : {2})"},
}

# Results that are exact on float16/bfloat16-representable inputs: no rounding needed.
_EXACT_ON_LOW = {"where", "positive", "negative", "abs", "maximum", "minimum", "copysign",
                 "real", "conj", "ceil", "floor", "trunc", "round", "sign", "imag", "nextafter"}

_LIBM1 = {"exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
          "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"}
_LIBM2 = {"pow", "atan2", "hypot"}
# glibc's libmvec: the functions with x86-64 vector variants, by the glibc that added them.
_MVEC_222 = {"exp", "log", "sin", "cos", "pow"}
_MVEC_235 = _LIBM1 | _LIBM2

_COST = {"exp": 8, "expm1": 8, "log": 8, "log1p": 8, "log2": 8, "log10": 8, "sin": 8, "cos": 8,
         "tan": 8, "asin": 8, "acos": 8, "atan": 8, "sinh": 8, "cosh": 8, "tanh": 8,
         "asinh": 8, "acosh": 8, "atanh": 8, "pow": 8, "atan2": 8, "hypot": 8, "sigmoid": 8,
         "logaddexp": 16, "nextafter": 8, "divide": 2, "sqrt": 2, "reciprocal": 2,
         "floor_divide": 8, "remainder": 8}


def glibc_version() -> tuple[int, int] | None:
    """(major, minor) of the host's glibc, or None when not on glibc."""
    try:
        s = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    parts = s.split()
    if len(parts) != 2 or parts[0] != "glibc":
        return None
    try:
        major, minor = parts[1].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def libmvec_functions() -> frozenset[str]:
    """libm functions whose libmvec vector variants the host has (x86-64 glibc only)."""
    if os.uname().machine not in ("x86_64", "AMD64") or os.environ.get("BRAZE_NO_LIBMVEC"):
        return frozenset()
    v = glibc_version()
    if v is None or v < (2, 22):
        return frozenset()
    return frozenset(_MVEC_235 if v >= (2, 35) else _MVEC_222)


# ---------------------------------------------------------------- helpers (C++ text)
_HALF = r"""
#if defined(__FLT16_MAX__) && !defined(BZ_SOFT_HALF)
static inline float bz_h2f(uint16_t h) { _Float16 v; __builtin_memcpy(&v, &h, 2); return (float)v; }
static inline uint16_t bz_f2h(float f) {
  _Float16 v = (_Float16)f; uint16_t h; __builtin_memcpy(&h, &v, 2); return h;
}
static inline uint16_t bz_d2h(double d) {
  _Float16 v = (_Float16)d; uint16_t h; __builtin_memcpy(&h, &v, 2); return h;
}
#else
static inline float bz_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0) { float f = (float)m * 5.9604644775390625e-08f; __builtin_memcpy(&u, &f, 4); }
  else if (e == 31) u = 0x7f800000u | (m << 13);
  else u = ((e + 112u) << 23) | (m << 13);
  u |= s; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t bz_f2h(float f) {
  uint32_t x; __builtin_memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu, r;
  if (ax > 0x7f800000u) r = 0x7e00u | ((ax >> 13) & 0x3ffu);
  else if (ax >= 0x477ff000u) r = 0x7c00u;
  else if (ax >= 0x38800000u) {
    uint32_t t = ax - 0x38000000u; t += 0xfffu + ((t >> 13) & 1u); r = t >> 13;
  }
  else { float a; __builtin_memcpy(&a, &ax, 4); r = (uint32_t)__builtin_rintf(a * 16777216.0f); }
  return (uint16_t)(r | sign);
}
static inline uint16_t bz_d2h(double d) {
  uint64_t x; __builtin_memcpy(&x, &d, 8);
  uint64_t sign = (x >> 48) & 0x8000u, ax = x & 0x7fffffffffffffffull, r;
  if (ax > 0x7ff0000000000000ull) r = 0x7e00u | ((ax >> 42) & 0x3ffu);
  else if (ax >= 0x40effe0000000000ull) r = 0x7c00u;
  else if (ax >= 0x3f10000000000000ull) {
    uint64_t t = ax - 0x3f00000000000000ull; t += 0x1ffffffffffull + ((t >> 42) & 1u); r = t >> 42;
  }
  else { double a; __builtin_memcpy(&a, &ax, 8); r = (uint64_t)__builtin_rint(a * 16777216.0); }
  return (uint16_t)(r | sign);
}
#endif
static inline float bz_rh(float x) { return bz_h2f(bz_f2h(x)); }
static inline float bz_nextafter_h(float x, float y) {  // numpy's npy_half_nextafter
  if (x != x || y != y) return x + y;
  if (x == y) return x;
  uint16_t h = bz_f2h(x);
  if ((h & 0x7fffu) == 0) h = (uint16_t)((y < 0 ? 0x8000u : 0u) | 1u);
  else if ((x < y) == (x > 0)) h++; else h--;
  return bz_h2f(h);
}
"""

_BF16 = r"""
static inline float bz_b2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t bz_f2b(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16);
}
static inline float bz_rb(float x) { return bz_b2f(bz_f2b(x)); }
static inline float bz_nextafter_b(float x, float y) {  // ml_dtypes' nextafter
  if (x != x || y != y) return x + y;
  if (x == y) return y;
  uint16_t h = bz_f2b(x);
  if ((h & 0x7fffu) == 0) h = (uint16_t)((y < 0 ? 0x8000u : 0u) | 1u);
  else if ((x < y) == (x > 0)) h++; else h--;
  return bz_b2f(h);
}
"""

_BITS = r"""
static inline float bz_f32(int64_t b) {
  uint32_t u = (uint32_t)b; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline double bz_f64(int64_t b) { double d; __builtin_memcpy(&d, &b, 8); return d; }
"""

_STREAM = r"""
#if defined(__AVX512F__)
typedef long long bz_vnt __attribute__((vector_size(64)));
#define BZ_NT(p, v) __builtin_ia32_movntdq512((bz_vnt*)(p), v)
#elif defined(__AVX__)
typedef long long bz_vnt __attribute__((vector_size(32)));
#define BZ_NT(p, v) __builtin_ia32_movntdq256((bz_vnt*)(p), v)
#elif defined(__SSE2__)
typedef long long bz_vnt __attribute__((vector_size(16)));
#define BZ_NT(p, v) __builtin_ia32_movntdq((bz_vnt*)(p), v)
#endif
#ifdef BZ_NT
static inline void bz_sfence() { __builtin_ia32_sfence(); }
#else
static inline void bz_sfence() {}
#endif
template <class T>
static inline void bz_put(T* __restrict d, const T* __restrict s, int64_t n, bool nt) {
  char* dc = (char*)d; const char* sc = (const char*)s; int64_t nb = n * (int64_t)sizeof(T);
#ifdef BZ_NT
  if (nt) {
    const int64_t w = (int64_t)sizeof(bz_vnt);
    int64_t head = (int64_t)((w - (int64_t)((uintptr_t)dc & (uintptr_t)(w - 1))) & (w - 1));
    if (head > nb) head = nb;
    __builtin_memcpy(dc, sc, head);
    int64_t i = head;
    for (; i + w <= nb; i += w) { bz_vnt v; __builtin_memcpy(&v, sc + i, w); BZ_NT(dc + i, v); }
    __builtin_memcpy(dc + i, sc + i, nb - i);
    return;
  }
#endif
  (void)nt;
  __builtin_memcpy(dc, sc, nb);
}
"""

_BITCAST = r"""
template <class D, class S> static inline D bz_bc(S s) {
  D d; __builtin_memcpy(&d, &s, sizeof d); return d;
}
"""

_INT = {
    "idiv": r"""
template <class T> static inline T bz_idiv(T a, T b) {
  if (b == 0) return 0;
  if (b == (T)-1) return (T)(-a);
  T q = (T)(a / b);
  if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
  return q;
}
""",
    "irem": r"""
template <class T> static inline T bz_irem(T a, T b) {
  if (b == 0 || b == (T)-1) return 0;
  T r = (T)(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
  return r;
}
""",
    "ipow": r"""
template <class T, class U> static inline T bz_ipow(T a, T b) {
  if (b < 0) return a == 1 ? (T)1 : (a == (T)-1 ? (T)((b & 1) ? -1 : 1) : (T)0);
  U base = (U)a, r = 1, e = (U)b;
  while (e) { if (e & 1) r = (U)(r * base); base = (U)(base * base); e >>= 1; }
  return (T)r;
}
""",
    "shl": r"""
template <class T, class U> static inline T bz_shl(T a, T b) {
  return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)0 : (T)((U)a << b);
}
""",
    "shr": r"""
template <class T> static inline T bz_shr(T a, T b) {
  return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);
}
""",
}


def _float_helper(name: str, ct: str) -> str:
    f = "f" if ct == "float" else ""
    T = ct
    if name == "sigmoid":
        return (f"static inline {T} bz_sigmoid({T} x) {{\n"
                f"  const {T} e = exp{f}(-__builtin_fabs{f}(x));\n"
                f"  return x >= 0 ? ({T})1 / (({T})1 + e) : e / (({T})1 + e);\n}}\n")
    if name == "fsign":
        return (f"static inline {T} bz_fsign({T} x) {{ return x > 0 ? ({T})1 : (x < 0 ? ({T})-1 :"
                f" (x == 0 ? ({T})0 : x)); }}\n")
    if name == "signbit":  # a comparison of the bits: gcc 12 ICEs vectorizing the shift
        # __builtin_signbit becomes on values loaded from bfloat16
        it = "int32_t" if T == "float" else "int64_t"
        return (f"static inline bool bz_signbit({T} x) {{ {it} i; __builtin_memcpy(&i, &x, "
                f"sizeof i); return i < 0; }}\n")
    if name == "fmax":
        return (f"static inline {T} bz_fmax({T} a, {T} b) {{ return a != a ? a :"
                f" (a > b ? a : b); }}\n")
    if name == "fmin":
        return (f"static inline {T} bz_fmin({T} a, {T} b) {{ return a != a ? a :"
                f" (a < b ? a : b); }}\n")
    if name == "logaddexp":
        return (f"static inline {T} bz_logaddexp({T} x, {T} y) {{\n"
                f"  if (x == y) return x + ({T})0.693147180559945309417232121458176568;\n"
                f"  const {T} t = x - y;\n"
                f"  if (t > 0) return x + log1p{f}(exp{f}(-t));\n"
                f"  if (t <= 0) return y + log1p{f}(exp{f}(t));\n"
                f"  return t;\n}}\n")
    if name == "floordiv":  # numpy's npy_floor_divide / npy_divmod, with the standard's
        # infinity cases (graph/ops.py _floor_divide): inf // finite, finite // inf = x / y
        return (f"static inline {T} bz_floordiv({T} a, {T} b) {{\n"
                f"  if (__builtin_isinf(a) != __builtin_isinf(b)) return (a != a || b != b) ?"
                f" a + b : a / b;\n"
                f"  if (b == 0) return a / b;\n"
                f"  const {T} mod = __builtin_fmod{f}(a, b);\n"
                f"  {T} div = (a - mod) / b;\n"
                f"  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;\n"
                f"  if (div != 0) {{ {T} fl = __builtin_floor{f}(div);"
                f" if (div - fl > ({T})0.5) fl += 1; return fl; }}\n"
                f"  return __builtin_copysign{f}(0, a / b);\n}}\n")
    if name == "pymod":  # numpy's npy_remainder
        return (f"static inline {T} bz_pymod({T} a, {T} b) {{\n"
                f"  {T} mod = __builtin_fmod{f}(a, b);\n"
                f"  if (b == 0) return mod;\n"
                f"  if (mod != 0) {{ if ((b < 0) != (mod < 0)) mod += b; }}\n"
                f"  else mod = __builtin_copysign{f}(0, b);\n"
                f"  return mod;\n}}\n")
    raise AssertionError(name)


_FLOAT_HELPER_OF = {"bz_sigmoid": "sigmoid", "bz_fsign": "fsign", "bz_fmax": "fmax",
                    "bz_signbit": "signbit",
                    "bz_fmin": "fmin", "bz_logaddexp": "logaddexp", "bz_floordiv": "floordiv",
                    "bz_pymod": "pymod"}
_FLOAT_HELPER_NEEDS = {"sigmoid": ("exp",), "logaddexp": ("exp", "log1p")}


class _Needs:
    """What the kernel body uses: helper snippets and libm declarations."""

    def __init__(self) -> None:
        self.half = self.bf16 = self.bits = self.bitcast = self.malloc = False
        self.ints: set[str] = set()
        self.floats: set[tuple[str, str]] = set()  # (helper, ctype)
        self.libm: set[tuple[str, str]] = set()  # (function, ctype)

    def scan(self, expr: str, ct: str) -> None:
        """Record the helpers and libm calls an expression uses."""
        for h, name in _FLOAT_HELPER_OF.items():
            if h + "(" in expr:
                self.floats.add((name, ct))
                for fn in _FLOAT_HELPER_NEEDS.get(name, ()):
                    self.libm.add((fn, ct))
        for name in _INT:
            if f"bz_{name}<" in expr:
                self.ints.add(name)
        for fn in _LIBM1 | _LIBM2:
            suffix = "f" if ct == "float" else ""
            if f"{fn}{suffix}(" in expr and f"_{fn}{suffix}(" not in expr:
                self.libm.add((fn, ct))

    def text(self, mvec: frozenset[str]) -> str:
        out = []
        if self.malloc:
            out.append('extern "C" void* malloc(__SIZE_TYPE__);\nextern "C" void free(void*);')
        if self.libm:
            out.append('extern "C" {')
            for fn, ct in sorted(self.libm):
                f = "f" if ct == "float" else ""
                params = ", ".join([ct] * (2 if fn in _LIBM2 else 1))
                if fn in mvec:
                    out.append("#pragma omp declare simd notinbranch")
                out.append(f"{ct} {fn}{f}({params});")
            out.append("}")
        if self.bits:
            out.append(_BITS.strip())
        if self.half:
            out.append(_HALF.strip())
        if self.bf16:
            out.append(_BF16.strip())
        if self.bitcast:
            out.append(_BITCAST.strip())
        for name in sorted(self.ints):
            out.append(_INT[name].strip())
        for name, ct in sorted(self.floats):
            out.append(_float_helper(name, ct).strip())
        return "\n".join(out)


# ---------------------------------------------------------------- normalization
@dataclass
class _Norm:
    outer: list[int]  # merged outer dim sizes
    red: list[int]  # merged reduced dim sizes (n_red > 0 kernels; >= 1 dim there)
    offsets: list[int]  # per view (loads, then stores)
    strides: list[list[int]]  # per view, over outer + red dims (row stores: 0 on red dims)
    empty: bool


def _normalize(k: Kernel) -> _Norm:
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
        dims = [(sizes[i - lo], [s[i] for s in full]) for i in range(lo, hi) if sizes[i - lo] != 1]
        merged: list[tuple[int, list[int]]] = []
        for size, st in dims:
            if merged and all(p == c * size for p, c in zip(merged[-1][1], st)):
                merged[-1] = (merged[-1][0] * size, st)
            else:
                merged.append((size, st))
        groups.append(merged)
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
    if n in _LOW:
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
    norm = _normalize(k)
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
            out.append(_const_arg(ins.attr("value"), _name(ins.dtype)))
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
def _check(k: Kernel) -> None:
    for ins in k.instrs:
        n = _name(ins.dtype)
        if ins.op in ("load", "const"):
            continue
        if ins.op == "cast":
            _name(k.instrs[ins.args[0]].dtype)
            continue
        if ins.op == "bitcast":
            src = _name(k.instrs[ins.args[0]].dtype)
            if _bits(src) != _bits(n):
                raise Unsupported(f"bitcast {src} -> {n}")
            continue
        op = OPS.get(ins.op)
        if op is None:
            raise Unsupported(f"unknown op {ins.op!r}")
        if op.kind == "reduce":
            src = _name(k.instrs[ins.args[0]].dtype)
            if ins.op == "mean" and _kind(n) != "f":
                raise Unsupported(f"mean with result dtype {n}")
            if ins.op in ("sum", "prod") and _kind(n) == "f" and _kind(src) != "f":
                raise Unsupported(f"{ins.op} of {src} into {n}")
            if ins.op not in _REDUCE_OPS:
                raise Unsupported(f"reduction {ins.op!r}")
            continue
        if op.kind != "elementwise" or ins.op not in CEXPR:
            raise Unsupported(f"op {ins.op!r} has no C++ expression")
        kinds = CEXPR[ins.op]
        akind = _kind(_name(k.instrs[ins.args[-1]].dtype))
        if akind not in kinds and "*" not in kinds and _name(k.instrs[ins.args[-1]].dtype) \
                not in kinds:
            raise Unsupported(f"{ins.op} on {_name(k.instrs[ins.args[-1]].dtype)}")
    n_outer = len(k.shape) - k.n_red
    for st in k.stores:
        _name(k.instrs[st.instr].dtype)
        if k.n_red and len(st.view.shape) == n_outer and not k.instrs[st.instr].row:
            raise Unsupported("a row store of an element value")


_REDUCE_OPS = ("sum", "prod", "mean", "max", "min", "any", "all", "argmax", "argmin")


def _load_conv(n: str, raw: str) -> str:
    if n == "bool":
        return f"({raw} != 0)"
    if n == "float16":
        return f"bz_h2f({raw})"
    if n == "bfloat16":
        return f"bz_b2f({raw})"
    return raw


def _store_conv(n: str, v: str) -> str:
    if n == "bool":
        return f"(uint8_t)({v})"
    if n == "float16":
        return f"bz_f2h({v})"
    if n == "bfloat16":
        return f"bz_f2b({v})"
    return v


def _cast_expr(src: str, dst: str, x: str) -> str:
    """C expression converting a compute value of dtype src to the compute value of dst."""
    if dst == "bool":
        return f"({x} != 0)"
    ks, kd = _kind(src), _kind(dst)
    if dst in _LOW:
        rnd = "bz_rh" if dst == "float16" else "bz_rb"
        if src == "float64":
            return f"bz_h2f(bz_d2h({x}))" if dst == "float16" else f"bz_rb((float)({x}))"
        return f"{rnd}((float)({x}))"
    T = _CT[dst]
    if kd == "f" or ks in "biu":
        return f"(({T})({x}))"
    # float -> integer: truncation, through the paths numpy's x86-64 casts take
    if dst == "int64":
        return f"((int64_t)({x}))"
    if dst == "uint64":
        return f"(({x}) < 0 ? (uint64_t)(int64_t)({x}) : (uint64_t)({x}))"
    if dst == "uint32":
        return f"((uint32_t)(int64_t)({x}))"
    return f"(({T})(int32_t)({x}))"


class _Gen:
    """Emits the C++ function of one kernel (see the module docstring for the shapes)."""

    def __init__(self, k: Kernel) -> None:
        self.k = k
        self.norm = _normalize(k)
        self.needs = _Needs()
        self.lines: list[str] = []
        self.ind = 1
        self.names = [_name(ins.dtype) for ins in k.instrs]
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
        self.cost = 1 + sum(_COST.get(k.instrs[i].op, 1) for i in self.live
                            if k.instrs[i].op not in ("load", "const"))
        self.el_stores = [si for si in range(len(k.stores)) if not self._is_row_store(si)]
        # contiguous element stores go through a tile buffer (streaming stores when large)
        self.tiled = [si for si in self.el_stores if self.inner_class(self.n_loads + si) == 1]

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
        return _CT[self.names[i]]

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

    def _plan_row_cache(self) -> None:
        """Expensive element values that several loops over a row need (softmax's exp) are
        computed once, kept in a per-row scratch buffer and read back by the later loops
        (single reduced dim only; rows up to ROW_CACHE_BYTES)."""
        self.cached: set[int] = set()
        self.loop_of: dict[int, int] = {}  # cached value -> the loop that computes it
        if self.mode != "rows" or self.n_r != 1:
            return
        loops = [self.cone([self.k.instrs[i].args[0]]) for i in self.live
                 if self.is_row(i) and self.k.instrs[i].op in OPS
                 and OPS[self.k.instrs[i].op].kind == "reduce"]
        if self.el_stores:
            loops.append(self.cone([self.k.stores[s].instr for s in self.el_stores]))
        first: dict[int, int] = {}
        for li, cone in enumerate(loops):
            for i in cone:
                if i in first and first[i] < li and _COST.get(self.k.instrs[i].op, 1) >= 8:
                    self.cached.add(i)
                first.setdefault(i, li)
        self.loop_of = {i: first[i] for i in self.cached}

    def _load_dtype(self, li: int) -> np.dtype:
        for ins in self.k.instrs:
            if ins.op == "load" and ins.attr("load") == li:
                return ins.dtype
        raise Unsupported(f"load {li} is never read")

    def view_st(self, vi: int) -> str:
        """Storage C type of view vi (loads, then stores)."""
        if vi < self.n_loads:
            return _ST[_name(self._load_dtype(vi))]
        return _ST[self.names[self.k.stores[vi - self.n_loads].instr]]

    # -------------------------------------------------------- expressions
    def op_expr(self, i: int) -> str:
        ins: Instr = self.k.instrs[i]
        n = self.names[i]
        args = [f"v{a}" for a in ins.args]
        if ins.op == "cast":
            e = _cast_expr(self.names[ins.args[0]], n, args[0])
            self._note_conv(e)
            return e
        if ins.op == "bitcast":
            src = self.names[ins.args[0]]
            self.needs.bitcast = True
            e = _load_conv(n, f"bz_bc<{_ST[n]}>(({_ST[src]})({_store_conv(src, args[0])}))")
            self._note_conv(e)
            return e
        table = CEXPR[ins.op]
        an = self.names[ins.args[-1]]  # operand dtype (where: the value operands)
        kind = _kind(an)
        tmpl = table.get(an, table.get(kind, table.get("*")))
        assert tmpl is not None
        act = _CT[an]
        e = tmpl.format(*args, T=act, U=_wide_unsigned(an) if kind in "iu" else "unsigned",
                        f=_fsuffix(an))
        self.needs.scan(e, act if kind == "f" else "int")
        self._note_conv(e)
        if n in _LOW and ins.op not in _EXACT_ON_LOW:
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
        e = _load_conv(self.names[i], f"P{li}[{index}]")
        self._note_conv(e)
        return e

    def store_expr(self, si: int, v: str) -> str:
        e = _store_conv(self.names[self.k.stores[si].instr], v)
        self._note_conv(e)
        return e

    # -------------------------------------------------------- strides and indices
    def inner_class(self, vi: int) -> int:
        """Innermost stride of view vi: 0 (broadcast), 1 (contiguous) or 2 (general)."""
        s = self.norm.strides[vi][-1]
        return 0 if s == 0 else (1 if s == 1 else 2)

    def sname(self, vi: int, d: int) -> str:
        return f"s{vi}_{d}"

    def index(self, vi: int, var: str = "j") -> str:
        """Element index of view vi at inner index ``var`` (within the current row)."""
        parts = [f"x{vi}_{self.n_r - 2}"] if self.n_r >= 2 else []
        c = self.inner_class(vi)
        if c == 1:
            parts.append(var)
        elif c == 2:
            parts.append(f"{var} * {self.sname(vi, self.n_o + self.n_r - 1)}")
        return " + ".join(parts) or "0"

    # -------------------------------------------------------- the function
    def generate(self) -> str:
        k, norm = self.k, self.norm
        self.needs.bits = any(k.instrs[i].op == "const" and _kind(self.names[i]) == "f"
                              for i in self.live)
        self.emit("const int bz_nt = (int)args[0];")
        a = 1
        dims = []
        for d in range(len(norm.outer) + len(norm.red)):
            dims.append(f"n{d}")
            self.emit(f"const int64_t n{d} = args[{a}];")
            a += 1
        n_o_full = len(norm.outer) if k.n_red else 0
        for vi in range(self.n_loads + len(k.stores)):
            slot = k.loads[vi].slot if vi < self.n_loads else k.stores[vi - self.n_loads].slot
            t = self.view_st(vi)
            c = "const " if vi < self.n_loads else ""
            self.emit(f"{c}{t}* __restrict L{vi} = ({c}{t}*)bufs[{self.slots.index(slot)}]"
                      f" + args[{a}];")
            a += 1
            row_store = vi >= self.n_loads and self._is_row_store(vi - self.n_loads)
            for d in range(n_o_full if row_store else len(dims)):
                self.emit(f"const int64_t {self.sname(vi, d)} = args[{a}];")
                a += 1
        for i, ins in enumerate(k.instrs):  # every constant has an argument, live or not
            if ins.op != "const":
                continue
            if i in self.live_set:
                n = self.names[i]
                if n == "float64":
                    val = f"bz_f64(args[{a}])"
                elif _kind(n) == "f":
                    val = f"bz_f32(args[{a}])"
                elif n == "bool":
                    val = f"(args[{a}] != 0)"
                else:
                    val = f"({_CT[n]})args[{a}]"
                self.emit(f"const {_CT[n]} v{i} = {val};")
            a += 1
        self.n_args = a
        if norm.empty:
            self.emit("(void)bz_nt;")
        else:
            self.gen_rows(dims)
        body = "\n".join(self.lines)
        head = ("#include <cstdint>\n"
                'extern "C" int omp_get_thread_num(void);\n'
                'extern "C" int omp_get_num_threads(void);\n')
        helpers = self.needs.text(libmvec_functions())
        if self.tiled:
            helpers += "\n" + _STREAM.strip()
        sig = ('extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL('
               "void** bufs, const int64_t* args) {")
        return f"{head}{helpers}\n{sig}\n{body}\n}}\n"

    def emit_instrs(self, order: list[int], var: str = "j") -> None:
        for i in order:
            ins = self.k.instrs[i]
            if ins.op == "const":
                continue
            e = (self.load_expr(i, self.index(ins.attr("load"), var)) if ins.op == "load"
                 else self.op_expr(i))
            self.emit(f"const {self.ct(i)} v{i} = {e};")

    def emit_loop_body(self, targets: list[int]) -> None:
        """The element values ``targets`` need, in loop number ``self.loop``: cached values
        are stored by the loop that computes them first and read back by later ones."""
        later = {c for c in self.cached if self.loop_of[c] < self.loop}
        order = self.cone(targets, later)
        done: set[int] = set()
        for i in order:
            if i in done:
                continue
            if i in later:
                self.emit(f"{self.ct(i)} v{i};")
                self.open(f"if (bz_cache) v{i} = bz_c{i}[j]; else")
                sub = [x for x in self.cone([i]) if x not in order or x == i]
                self.emit_instrs([x for x in sub if x != i])
                self.emit(f"v{i} = {self.op_expr(i)};")
                self.close()
            else:
                self.emit_instrs([i])
                if i in self.cached and self.loop_of[i] == self.loop:
                    self.emit(f"if (bz_cache) bz_c{i}[j] = v{i};")
            done.add(i)
        self.loop += 1

    # -------------------------------------------------------- rows (all three shapes)
    def gen_rows(self, dims: list[str]) -> None:
        k = self.k
        n_o = self.n_o
        outer, red = dims[:n_o], dims[n_o:]
        self.emit("const int64_t bz_R = " + (" * ".join(outer) if outer else "1") + ";")
        self.emit("const int64_t bz_N = " + " * ".join(red) + ";")
        if self.tiled:
            nbytes = " + ".join(f"(int64_t)sizeof({self.view_st(self.n_loads + s)})"
                                for s in self.tiled)
            self.emit(f"const bool bz_stream = bz_R * bz_N * ({nbytes}) >= {STREAM_BYTES};")
        self._plan_row_cache()
        self.loop = 0
        if outer:
            self.emit(f"const bool bz_pr = bz_R > 1 && bz_R * bz_N * {self.cost} > "
                      f"{PARALLEL_WORK};")
            self.emit("#pragma omp parallel num_threads(bz_nt) if(parallel: bz_pr)")
            self.open("")
            self._cache_alloc()
            self.emit("const int64_t bz_t = omp_get_thread_num(), bz_T = omp_get_num_threads();")
            self.emit("const int64_t bz_lo = bz_R * bz_t / bz_T, "
                      "bz_hi = bz_R * (bz_t + 1) / bz_T;")
            self.emit("int64_t bz_rem = bz_lo;")
            for d in reversed(range(n_o)):
                self.emit(f"int64_t i{d} = bz_rem % {outer[d]}; bz_rem /= {outer[d]};")
            self.open("for (int64_t bz_r = bz_lo; bz_r < bz_hi; ++bz_r)")
        else:
            self.emit(f"const bool bz_pi = bz_N * {self.cost} > {PARALLEL_WORK};")
            self.open("")
            self._cache_alloc()
        for vi in range(self.n_loads + len(k.stores)):  # row base pointers
            c = "const " if vi < self.n_loads else ""
            off = " + ".join(f"i{d} * {self.sname(vi, d)}" for d in range(n_o))
            self.emit(f"{c}{self.view_st(vi)}* __restrict P{vi} = L{vi}"
                      + (f" + ({off})" if off else "") + ";")
        for i in self.live:  # row-level values and reductions, in order
            ins = k.instrs[i]
            if not self.is_row(i) or ins.op == "const":
                continue
            if ins.op == "load":
                self.emit(f"const {self.ct(i)} v{i} = {self.load_expr(i, '0')};")
            elif OPS[ins.op].kind == "reduce":
                self.gen_reduce(i, red)
            else:
                self.emit(f"const {self.ct(i)} v{i} = {self.op_expr(i)};")
        if self.el_stores:
            self.gen_element_loop(red)
        for si, st in enumerate(k.stores):
            if si not in self.el_stores:
                self.emit(f"P{self.n_loads + si}[0] = {self.store_expr(si, f'v{st.instr}')};")
        if outer:
            line = "".join(f"if (++i{d} == {outer[d]}) {{ i{d} = 0; " for d in reversed(range(n_o)))
            self.emit(line + "}" * n_o)
            self.close()
            if self.tiled:
                self.emit("if (bz_stream) bz_sfence();")
        for c in sorted(self.cached):
            self.emit(f"free(bz_c{c});")
        self.close()

    def _cache_alloc(self) -> None:
        if not self.cached:
            return
        self.needs.malloc = True
        self.emit("bool bz_cache = true;")
        for c in sorted(self.cached):
            t = self.ct(c)
            self.emit(f"{t}* bz_c{c} = bz_N * (int64_t)sizeof({t}) <= {ROW_CACHE_BYTES} ? "
                      f"({t}*)malloc((__SIZE_TYPE__)bz_N * sizeof({t})) : ({t}*)0;")
            self.emit(f"bz_cache = bz_cache && bz_c{c} != 0;")

    def _red_loops_open(self, red: list[str]) -> None:
        """Loops over all reduced dims but the innermost; per-view offsets x{vi}_{d}."""
        for d in range(len(red) - 1):
            self.open(f"for (int64_t j{d} = 0; j{d} < {red[d]}; ++j{d})")
            for vi in range(self.n_loads + len(self.k.stores)):
                if vi >= self.n_loads and self._is_row_store(vi - self.n_loads):
                    continue
                prev = f"x{vi}_{d - 1} + " if d else ""
                self.emit(f"const int64_t x{vi}_{d} = {prev}j{d} * {self.sname(vi, self.n_o + d)};")

    def gen_reduce(self, i: int, red: list[str]) -> None:
        ins = self.k.instrs[i]
        a = ins.args[0]
        an, rn = self.names[a], self.names[i]
        akind = _kind(an)
        op = ins.op
        last = red[-1]
        if op in ("argmax", "argmin"):  # first index of the extreme; NaN wins (numpy)
            cmp = ">" if op == "argmax" else "<"
            at = _CT[an]
            self.emit(f"int64_t v{i} = 0;")
            self.open("")
            self.emit(f"int64_t bz_k = 0; bool bz_have = false; {at} bz_best = {at}();")
            self._red_loops_open(red)
            self.open(f"for (int64_t j = 0; j < {last}; ++j)")
            self.emit_loop_body([a])
            cond = (f"bz_best == bz_best && (v{a} {cmp} bz_best || v{a} != v{a})"
                    if akind == "f" else f"v{a} {cmp} bz_best")
            self.emit(f"if (!bz_have || ({cond})) {{ bz_best = v{a}; v{i} = bz_k; "
                      "bz_have = true; }")
            self.emit("++bz_k;")
            self.close()
            for _ in range(len(red) - 1):
                self.close()
            self.close()
            return
        acc = _CT[rn]
        if op in ("max", "min") and akind == "b":
            op = "any" if op == "max" else "all"
        if op in ("any", "all"):
            acc = "int"
        if op in ("max", "min"):
            c = ">" if op == "max" else "<"
            init, comb, upd = (_extreme(an, low=op == "max"), op,
                               f"bz_p = v{a} {c} bz_p ? v{a} : bz_p;")
        else:
            init, comb, upd = {
                "sum": ("0", "+", f"bz_p += ({acc})(v{a});"),
                "mean": ("0", "+", f"bz_p += ({acc})(v{a});"),
                "prod": ("1", "*", f"bz_p *= ({acc})(v{a});"),
                "any": ("0", "|", f"bz_p |= (v{a} != 0);"),
                "all": ("1", "&", f"bz_p &= (v{a} != 0);"),
            }[op]
        nan = op in ("max", "min") and akind == "f"
        self.emit(f"{'bool' if op in ('any', 'all') else acc} v{i};")
        self.open("")
        self.emit(f"{acc} bz_acc = ({acc}){init};")
        if nan:
            self.emit("int bz_nan = 0;")
        if self.inner_parallel:  # one big row: threads share its blocks
            self.emit(f"#pragma omp parallel for num_threads(bz_nt) schedule(static) "
                      f"reduction({comb}:bz_acc)" + (" reduction(|:bz_nan)" if nan else "")
                      + " if(parallel: bz_pi)")
        if len(red) >= 2:
            self.open(f"for (int64_t bz_o = 0; bz_o < {' * '.join(red[:-1])}; ++bz_o)")
            self.emit("int64_t bz_q = bz_o;")
            for d in reversed(range(len(red) - 1)):
                self.emit(f"const int64_t j{d} = bz_q % {red[d]}; bz_q /= {red[d]};")
            for vi in range(self.n_loads):
                terms = " + ".join(f"j{d} * {self.sname(vi, self.n_o + d)}"
                                   for d in range(len(red) - 1))
                self.emit(f"const int64_t x{vi}_{len(red) - 2} = {terms};")
        self.open(f"for (int64_t bz_jb = 0; bz_jb < {last}; bz_jb += {SUM_BLOCK})")
        self.emit(f"const int64_t bz_je = bz_jb + {SUM_BLOCK} < {last} ? bz_jb + {SUM_BLOCK}"
                  f" : {last};")
        self.emit(f"{acc} bz_p = ({acc}){init};")
        if nan:
            self.emit("int bz_pn = 0;")
        self.emit(f"#pragma omp simd reduction({comb}:bz_p)"
                  + (" reduction(|:bz_pn)" if nan else ""))
        self.open("for (int64_t j = bz_jb; j < bz_je; ++j)")
        self.emit_loop_body([a])
        self.emit(upd)
        if nan:
            self.emit(f"bz_pn |= (v{a} != v{a});")
        self.close()
        if comb in ("max", "min"):
            self.emit(f"bz_acc = bz_p {'>' if comb == 'max' else '<'} bz_acc ? bz_p : bz_acc;")
        else:
            self.emit(f"bz_acc = bz_acc {comb} bz_p;")
        if nan:
            self.emit("bz_nan |= bz_pn;")
        self.close()
        if len(red) >= 2:
            self.close()
        if op == "mean":
            self.emit(f"v{i} = bz_acc / ({acc})bz_N;")
        elif op in ("any", "all"):
            self.emit(f"v{i} = bz_acc != 0;")
        elif nan:
            self.emit(f"v{i} = bz_nan ? __builtin_nan{_fsuffix(rn)}(\"\") : bz_acc;")
        else:
            self.emit(f"v{i} = bz_acc;")
        self.close()

    def gen_element_loop(self, red: list[str]) -> None:
        k = self.k
        last = red[-1]
        multi = len(red) >= 2
        if self.inner_parallel:
            self.emit("#pragma omp parallel num_threads(bz_nt) if(parallel: bz_pi)")
            self.open("")
        if multi:  # flatten the outer reduced dims: one work-shared loop
            if self.inner_parallel:
                self.emit("#pragma omp for schedule(static) nowait")
            self.open(f"for (int64_t bz_o = 0; bz_o < {' * '.join(red[:-1])}; ++bz_o)")
            self.emit("int64_t bz_q = bz_o;")
            for d in reversed(range(len(red) - 1)):
                self.emit(f"const int64_t j{d} = bz_q % {red[d]}; bz_q /= {red[d]};")
            for vi in range(self.n_loads + len(k.stores)):
                if vi >= self.n_loads and self._is_row_store(vi - self.n_loads):
                    continue
                terms = " + ".join(f"j{d} * {self.sname(vi, self.n_o + d)}"
                                   for d in range(len(red) - 1))
                self.emit(f"const int64_t x{vi}_{len(red) - 2} = {terms};")
        share = self.inner_parallel and not multi
        if self.tiled:
            if share:
                self.emit("#pragma omp for schedule(static) nowait")
            self.open(f"for (int64_t bz_b = 0; bz_b < {last}; bz_b += {TILE})")
            self.emit(f"const int64_t bz_e = bz_b + {TILE} < {last} ? bz_b + {TILE} : {last};")
            for s in self.tiled:
                self.emit(f"{self.view_st(self.n_loads + s)} bz_t{s}[{TILE}] "
                          "__attribute__((aligned(64)));")
            self.emit("#pragma omp simd")
            self.open("for (int64_t j = bz_b; j < bz_e; ++j)")
        else:
            self.emit("#pragma omp for simd schedule(static) nowait" if share
                      else "#pragma omp simd")
            self.open(f"for (int64_t j = 0; j < {last}; ++j)")
        self.emit_loop_body([k.stores[s].instr for s in self.el_stores])
        for s in self.el_stores:
            v = self.store_expr(s, f"v{k.stores[s].instr}")
            if s in self.tiled:
                self.emit(f"bz_t{s}[j - bz_b] = {v};")
            else:
                self.emit(f"P{self.n_loads + s}[{self.index(self.n_loads + s)}] = {v};")
        self.close()
        if self.tiled:
            for s in self.tiled:
                vi = self.n_loads + s
                base = f"x{vi}_{len(red) - 2} + " if multi else ""
                self.emit(f"bz_put(P{vi} + {base}bz_b, bz_t{s}, bz_e - bz_b, bz_stream);")
            self.close()
        if multi:
            self.close()
        if self.inner_parallel:
            if self.tiled:
                self.emit("if (bz_stream) bz_sfence();")
            self.close()


def _extreme(n: str, low: bool) -> str:
    """The identity of max (low=True: the lowest value) or min (the highest) for dtype n."""
    if _kind(n) == "f":
        return "-__builtin_inf()" if low else "__builtin_inf()"
    info = np.iinfo(np.dtype(n))
    v = info.min if low else info.max
    if n == "int64" and low:
        return "(-9223372036854775807LL - 1)"
    if n == "uint64" and not low:
        return "18446744073709551615ULL"
    return f"{v}LL" if n != "uint64" else f"{v}ULL"


def generate(kernel: Kernel) -> GeneratedKernel:
    """C++ source of ``kernel`` (see the module docstring); raises :class:`Unsupported`."""
    _check(kernel)
    g = _Gen(kernel)
    text = g.generate()
    symbol = "bz_" + hashlib.sha1(text.encode()).hexdigest()[:20]
    return GeneratedKernel(text.replace("BZ_SYMBOL", symbol), symbol, g.slots, g.n_args,
                           g.norm.empty)
