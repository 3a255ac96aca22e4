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

from ...graph.kernel import Kernel
from ...graph.ops import OPS
from ..csource import (
    COST,
    CTYPE,
    INT_HELPERS,
    LIBM1,
    LIBM2,
    ExprGen,
    Needs,
    Unsupported,
    check_kernel,
    dtype_kind,
    extreme,
    float_helper,
    fsuffix,
    kernel_args,
    kernel_slots,
)

# kernel_args / kernel_slots / Unsupported: the argument layout the cpu backend launches with
__all__ = ["GeneratedKernel", "Unsupported", "generate", "kernel_args", "kernel_slots"]

PARALLEL_WORK = 1 << 17  # cost-weighted elements below which a kernel stays single-threaded
SUM_BLOCK = 1024  # blocked summation: simd partial sums over blocks, then across blocks
TILE = 1024  # contiguous outputs are computed in tiles of this many elements, then copied
STREAM_BYTES = 16 << 20  # ... with non-temporal (streaming) stores above this output size
ROW_CACHE_BYTES = 1 << 20  # rows up to this size keep expensive values for later passes

# glibc's libmvec: the functions with x86-64 vector variants, by the glibc that added them.
_MVEC_222 = {"exp", "log", "sin", "cos", "pow"}
_MVEC_235 = LIBM1 | LIBM2



@dataclass(frozen=True)
class GeneratedKernel:
    source: str
    symbol: str
    slots: tuple[int, ...]  # schedule slot of each bufs[] entry
    n_args: int
    empty: bool  # an outer dim is 0: nothing to compute, no need to launch


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

class _Needs(Needs):
    """The shared helper/libm tracking, rendered as C++ for the host compiler."""

    def text(self, mvec: frozenset[str]) -> str:
        out = []
        if self.malloc:
            out.append('extern "C" void* malloc(__SIZE_TYPE__);\nextern "C" void free(void*);')
        if self.libm:
            out.append('extern "C" {')
            for fn, ct in sorted(self.libm):
                f = "f" if ct == "float" else ""
                params = ", ".join([ct] * (2 if fn in LIBM2 else 1))
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
            out.append(INT_HELPERS[name].strip())
        for name, ct in sorted(self.floats):
            out.append(float_helper(name, ct).strip())
        return "\n".join(out)


class _Gen(ExprGen):
    """Emits the C++ function of one kernel (see the module docstring for the shapes)."""

    def __init__(self, k: Kernel) -> None:
        super().__init__(k, _Needs())
        # contiguous element stores go through a tile buffer (streaming stores when large)
        self.tiled = [si for si in self.el_stores if self.inner_class(self.n_loads + si) == 1]

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
                if i in first and first[i] < li and COST.get(self.k.instrs[i].op, 1) >= 8:
                    self.cached.add(i)
                first.setdefault(i, li)
        self.loop_of = {i: first[i] for i in self.cached}

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
        self.needs.bits = any(k.instrs[i].op == "const" and dtype_kind(self.names[i]) == "f"
                              for i in self.live)
        self.emit("const int bz_nt = (int)args[0];")
        dims = [f"n{d}" for d in range(len(norm.outer) + len(norm.red))]

        def pointer(vi: int, slot: int, t: str, offset: str) -> str:
            c = "const " if vi < self.n_loads else ""
            return f"{c}{t}* __restrict L{vi} = ({c}{t}*)bufs[{self.slots.index(slot)}]" \
                f" + {offset};"

        a = self.emit_arguments(dims, lambda i: f"args[{i}]", pointer, "bz_f32({})",
                                "bz_f64({})")
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
        akind = dtype_kind(an)
        op = ins.op
        last = red[-1]
        if op in ("argmax", "argmin"):  # first index of the extreme; NaN wins (numpy)
            cmp = ">" if op == "argmax" else "<"
            at = CTYPE[an]
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
        acc = CTYPE[rn]
        if op in ("max", "min") and akind == "b":
            op = "any" if op == "max" else "all"
        if op in ("any", "all"):
            acc = "int"
        rec = OPS[op]  # identity and combining operator from the op record
        comb = rec.combine
        assert rec.identity is not None and comb is not None, op
        if comb in ("max", "min"):
            c = ">" if comb == "max" else "<"
            init = extreme(an, low=rec.identity == "lowest")
            upd = f"bz_p = v{a} {c} bz_p ? v{a} : bz_p;"
        else:
            init = rec.identity
            upd = (f"bz_p {comb}= (v{a} != 0);" if op in ("any", "all")
                   else f"bz_p {comb}= ({acc})(v{a});")
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
            self.emit(f"v{i} = bz_nan ? __builtin_nan{fsuffix(rn)}(\"\") : bz_acc;")
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


def generate(kernel: Kernel) -> GeneratedKernel:
    """C++ source of ``kernel`` (see the module docstring); raises :class:`Unsupported`."""
    check_kernel(kernel)
    g = _Gen(kernel)
    text = g.generate()
    symbol = "bz_" + hashlib.sha1(text.encode()).hexdigest()[:20]
    return GeneratedKernel(text.replace("BZ_SYMBOL", symbol), symbol, g.slots, g.n_args,
                           g.norm.empty)

