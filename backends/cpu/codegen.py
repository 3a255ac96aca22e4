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

Transcendentals: braze's own exp, expm1, log, log1p, tanh, and all the others of float32
(``kernels/bzmath.h``, :data:`OWN_MATH`) vectorize inline and give the bits of the numpy
tier (which computes them with the same code, ``graph/ops/libm.py``); the other libm
functions are the C library's scalar ones, which the numpy tier calls too.
``BRAZE_DETERMINISTIC=0`` trades that for speed: every libm function with a glibc libmvec
variant is declared ``#pragma omp declare simd notinbranch`` and vectorizes through libmvec
(``shared/recipes/vector-math.md``), whose results differ from the scalar ones by a few
ulp, and by an element's position in a loop (``benchmarks/transcendental.py``).

A kernel's text: the C++ prelude (``backends/kernels/cpu_prelude.h``: ``<cstdint>``, the
OpenMP and malloc declarations, the helper vocabulary), the libm declarations, the shared
helper headers it uses (``half.h``, ``int_ops.h``...: :meth:`Needs.headers`), the
streaming stores (``stream.h``) where it tiles its outputs, then the function.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from ... import _core
from ...graph.kernel import Kernel
from ...graph.ops import OPS
from ...graph.ops.reductions import SUM_BLOCK, SUM_LANES
from ..csource import (
    COST,
    CTYPE,
    LIBM,
    ExprGen,
    Needs,
    Unsupported,
    check_kernel,
    dtype_kind,
    extreme,
    fsuffix,
    kernel_args,
    kernel_slots,
    load_conv,
    prelude,
    symbolize,
)

# kernel_args / kernel_slots / Unsupported: the argument layout the cpu backend launches with
__all__ = ["GeneratedKernel", "Unsupported", "generate", "kernel_args", "kernel_slots"]

PARALLEL_WORK = 1 << 17  # cost-weighted elements below which a kernel stays single-threaded
# braze's summation order (graph/ops/reductions.py): blocks of SUM_BLOCK elements of the
# flattened reduced index, SUM_LANES lanes in each, block partials added in order
TILE = 1024  # contiguous outputs are computed in tiles of this many elements, then copied
STREAM_BYTES = 16 << 20  # ... with non-temporal (streaming) stores above this output size
ROW_CACHE_BYTES = 1 << 20  # rows up to this size keep expensive values for later passes

# glibc's libmvec: the functions with x86-64 vector variants, by the glibc that added them.
# A fact about glibc, not about the ops: a libm function without a variant (fmod) is
# declared without `omp declare simd` (declaring one would leave an undefined _ZGV symbol).
_MVEC_222 = {"exp", "log", "sin", "cos", "pow"}
_MVEC_235 = _MVEC_222 | {"acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt",
                         "cosh", "erf", "erfc", "exp10", "exp2", "expm1", "hypot", "log10",
                         "log1p", "log2", "sinh", "tan", "tanh"}



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


# braze's own functions (bzmath.h) as (libm name, C type), by the extension that computes
# them for the numpy tier
OWN_MATH = frozenset((n, {"float32": "float", "float64": "double"}[d])
                     for n, (_, dts) in _core.vmath_functions().items() for d in dts)
# their calls in a kernel body: expf( for the float one, exp( for the double one
_OWN_NAME = {n + ("f" if ct == "float" else ""): n for n, ct in OWN_MATH}
_OWN_CALL = re.compile(r"\b(" + "|".join(sorted(_OWN_NAME, key=len, reverse=True)) + r")\(")


def deterministic() -> bool:
    """Kernels give the numpy tier's bits (``BRAZE_DETERMINISTIC``, default on): braze's
    own math and scalar libm, never libmvec's vector variants.

    >>> deterministic() == (os.environ.get("BRAZE_DETERMINISTIC", "1") != "0")
    True
    """
    return os.environ.get("BRAZE_DETERMINISTIC", "1") != "0"


def own_calls(body: str) -> str:
    """The libm calls of a kernel body to braze's own functions (overloaded bzm_ names).

    >>> own_calls("v2 = expf(v1) + log1p(v0) + atan2(v1, v0) + sinf(v1) + sin(v0);")
    'v2 = bzm_exp(v1) + bzm_log1p(v0) + atan2(v1, v0) + bzm_sin(v1) + sin(v0);'
    """
    return _OWN_CALL.sub(lambda m: f"bzm_{_OWN_NAME[m.group(1)]}(", body)


def libmvec_functions() -> frozenset[str]:
    """libm functions whose libmvec vector variants the host has (x86-64 glibc only)."""
    if os.uname().machine not in ("x86_64", "AMD64") or os.environ.get("BRAZE_NO_LIBMVEC"):
        return frozenset()
    v = glibc_version()
    if v is None or v < (2, 22):
        return frozenset()
    return frozenset(_MVEC_235 if v >= (2, 35) else _MVEC_222)


# ---------------------------------------------------------------- helpers
# the C++ helper vocabulary (backends/kernels/cpu_prelude.h, the headers it includes inlined)
PRELUDE = prelude("cpu")


class _Needs(Needs):
    """The shared helper/libm tracking, rendered as C++ for the host compiler."""

    def text(self, mvec: frozenset[str], own: frozenset[tuple[str, str]], stream: bool) -> str:
        """The libm declarations (``omp declare simd`` for those in ``mvec``: libmvec has
        vector variants; none for braze's ``own``), then the helper headers (``stream``:
        with the streaming stores)."""
        out = []
        libm = sorted((fn, ct) for fn, ct in self.libm if (fn, ct) not in own)
        if libm:
            out.append('extern "C" {\n')
            for fn, ct in libm:
                f = "f" if ct == "float" else ""
                params = ", ".join([ct] * LIBM[fn])
                if fn in mvec:
                    out.append("#pragma omp declare simd notinbranch\n")
                out.append(f"{ct} {fn}{f}({params});\n")
            out.append("}\n")
        return "".join(out) + self.helpers(("stream.h",) if stream else ())


class _Gen(ExprGen):
    """Emits the C++ function of one kernel (see the module docstring for the shapes)."""

    needs: _Needs

    def __init__(self, k: Kernel) -> None:
        super().__init__(k, _Needs())
        # contiguous element stores go through a tile buffer (streaming stores when large)
        self.tiled = [si for si in self.el_stores if self.inner_class(self.n_loads + si) == 1]
        self.hoist = self._invariants()

    def _invariants(self) -> set[int]:
        """Values the same at every element, computed once before the loops: loads of a
        broadcast scalar (every stride 0) and elementwise ops of those and constants only
        (an optimizer's per-step bias corrections: a division per element otherwise, as
        the C++ compiler cannot tell the strides are 0)."""
        inv: set[int] = set()
        if self.norm.empty:
            return inv
        for i in self.live:
            ins = self.k.instrs[i]
            if ins.op == "load":
                if not any(self.norm.strides[ins.attr("load")]):
                    inv.add(i)
            elif ins.op in OPS and ins.args and OPS[ins.op].kind == "elementwise" and \
                    all(a in inv or self.k.instrs[a].op == "const" for a in ins.args):
                inv.add(i)
        return inv

    def is_row(self, i: int) -> bool:
        return i in self.hoist or super().is_row(i)

    def emit_hoisted(self) -> None:
        for i in sorted(self.hoist):
            ins = self.k.instrs[i]
            if ins.op == "load":
                e = load_conv(self.names[i], f"L{ins.attr('load')}[0]")
                self._note_conv(e)
            else:
                e = self.op_expr(i)
            self.emit(f"const {self.ct(i)} v{i} = {e};")

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
        norm = self.norm
        self.emit("const int bz_nt = (int)args[0];")
        self.emit("const int bz_z = bz_nt < 0; (void)bz_z;  // 0 (BZ_I2F_ZERO)")
        dims = [f"n{d}" for d in range(len(norm.outer) + len(norm.red))]

        def pointer(vi: int, slot: int, t: str, offset: str) -> str:
            c = "const " if vi < self.n_loads else ""
            return f"{c}{t}* __restrict L{vi} = ({c}{t}*)bufs[{self.slots.index(slot)}]" \
                f" + {offset};"

        a = self.emit_arguments(dims, lambda i: f"args[{i}]", pointer, "bz_ffrom((uint32_t){})",
                                "bz_dfrom((uint64_t){})")
        self.n_args = a
        self.emit_hoisted()
        if norm.empty:
            self.emit("(void)bz_nt;")
        elif (cols := self._columns()) is not None:
            self.gen_columns_or_rows(dims, *cols)
        else:
            self.gen_rows(dims)
        body = "\n".join(self.lines)
        if deterministic():
            own, mvec = OWN_MATH, frozenset[str]()
            body = own_calls(body)
        else:
            own, mvec = frozenset[tuple[str, str]](), libmvec_functions()
        helpers = self.needs.text(mvec, own, bool(self.tiled))
        sig = ('extern "C" __attribute__((visibility("default"))) void BZ_SYMBOL('
               "void** bufs, const int64_t* args) {")
        return f"{PRELUDE}{helpers}{sig}\n{body}\n}}\n"

    def emit_instrs(self, order: list[int], var: str = "j") -> None:
        for i in order:
            ins = self.k.instrs[i]
            if ins.op == "const" or i in self.hoist:
                continue
            e = (self.load_expr(i, self.index(ins.attr("load"), var)) if ins.op == "load"
                 else self.op_expr(i))
            self.emit(f"const {self.ct(i)} v{i} = {e};")

    def reads_cache(self) -> bool:
        """Does loop number ``self.loop`` read values an earlier loop of the row cached?"""
        return any(self.loop_of[c] < self.loop for c in self.cached)

    def emit_loop_body(self, targets: list[int], use_cache: bool | None = None) -> None:
        """The element values ``targets`` need, in loop number ``self.loop``: cached values
        are stored by the loop that computes them first and read back by later ones
        (``use_cache``: read, or computed again, without the per-element test)."""
        later = {c for c in self.cached if self.loop_of[c] < self.loop}
        order = self.cone(targets, later)
        done: set[int] = set()
        for i in order:
            if i in done:
                continue
            if i in later and use_cache:
                self.emit(f"const {self.ct(i)} v{i} = bz_c{i}[j];")
            elif i in later and use_cache is None:
                self.emit(f"{self.ct(i)} v{i};")
                self.open(f"if (bz_cache) v{i} = bz_c{i}[j]; else")
                sub = [x for x in self.cone([i]) if x not in order or x == i]
                self.emit_instrs([x for x in sub if x != i])
                self.emit(f"v{i} = {self.op_expr(i)};")
                self.close()
            elif i in later:  # computed again, with what it needs (also its own cone)
                sub = [x for x in self.cone([i]) if x not in order or x == i]
                self.emit_instrs([x for x in sub if x not in done])
                done.update(sub)
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
            if not self.is_row(i) or ins.op == "const" or i in self.hoist:
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
        for ci in sorted(self.cached):
            self.emit(f"free(bz_c{ci});")
        self.close()

    # -------------------------------------------------------- columns (a sum down columns)
    def _columns(self) -> tuple[int, dict[int, int]] | None:
        """(the reduction, each load's outer stride class: 0 or 1) when this kernel is one
        float or integer sum (or mean) whose element values read down columns -- the
        reduced dim strided, the outer dim contiguous or broadcast, as a sum over a
        leading axis is -- with nothing else per element; else None."""
        if self.mode != "rows" or self.n_o != 1 or self.n_r != 1 or self.el_stores:
            return None
        reds = [i for i in self.live if self.k.instrs[i].op in OPS
                and OPS[self.k.instrs[i].op].kind == "reduce"]
        if len(reds) != 1 or self.k.instrs[reds[0]].op not in ("sum", "mean"):
            return None
        i = reds[0]
        _, acc, _, comb = self.reduction(i)
        if comb != "+" or acc not in ("float", "double", "int64_t", "uint64_t"):
            return None
        cone = self.cone([self.k.instrs[i].args[0]])
        outer: dict[int, int] = {}
        for c in cone:
            ins = self.k.instrs[c]
            if any(self.is_row(x) and self.k.instrs[x].op != "const" and x not in self.hoist
                   for x in ins.args):
                return None  # (a per-row value inside the sum)
            if ins.op == "load":
                vi = ins.attr("load")
                so = self.norm.strides[vi][0]
                if so not in (0, 1):
                    return None
                outer[vi] = so
        if not outer or not any(self.inner_class(vi) == 2 for vi in outer):
            return None
        return i, outer

    def gen_columns_or_rows(self, dims: list[str], i: int, outer: dict[int, int]) -> None:
        """A sum down columns (``x.sum(axis=0)`` of a row-major x; a bias gradient): the
        row kernel would read each output's column with a stride; instead up to 256
        neighbouring outputs are summed together, reading x row by row (contiguous runs),
        every output with its own SUM_LANES lanes in braze's order -- the bits of the row
        kernel. Chosen at run time when the outer strides are the ones the
        code was written for (else the row kernel, generated beside it)."""
        ok = " && ".join(f"{self.sname(vi, 0)} == {so}" for vi, so in sorted(outer.items()))
        self.open(f"if ({ok})")
        self.gen_columns(dims, i, outer)
        self.close()
        self.open("else")
        self.gen_rows(dims)
        self.close()

    def gen_columns(self, dims: list[str], i: int, outer: dict[int, int]) -> None:
        k = self.k
        cb, n = 256, SUM_LANES
        rows, red = dims[0], dims[1]
        op, acc, init, comb = self.reduction(i)
        a = k.instrs[i].args[0]
        self.emit(f"const int64_t bz_R = {rows}, bz_N = {red};")
        self.emit(f"const int64_t bz_nb = (bz_R + {cb - 1}) / {cb};")
        self.emit(f"const bool bz_pr = bz_nb > 1 && bz_R * bz_N * {self.cost} > "
                  f"{PARALLEL_WORK};")
        self.emit("#pragma omp parallel for num_threads(bz_nt) schedule(static) "
                  "if(parallel: bz_pr)")
        self.open("for (int64_t bz_b = 0; bz_b < bz_nb; ++bz_b)")
        self.emit(f"const int64_t bz_c0 = bz_b * {cb}, bz_cn = bz_R - bz_c0 < {cb} ? "
                  f"bz_R - bz_c0 : {cb};")
        self.emit(f"{acc} bz_tot[{cb}];")
        self.emit(f"for (int bz_c = 0; bz_c < {cb}; ++bz_c) bz_tot[bz_c] = ({acc}){init};")
        self.open(f"for (int64_t bz_qb = 0; bz_qb < bz_N; bz_qb += {SUM_BLOCK})")
        self.emit(f"const int64_t bz_qe = bz_qb + {SUM_BLOCK} < bz_N ? bz_qb + {SUM_BLOCK}"
                  " : bz_N;")
        self.emit(f"{acc} bz_l[{n}][{cb}] __attribute__((aligned(64)));")
        self.emit(f"for (int bz_u = 0; bz_u < {n}; ++bz_u) for (int bz_c = 0; bz_c < {cb}; "
                  f"++bz_c) bz_l[bz_u][bz_c] = ({acc}){init};")
        self.open("for (int64_t j = bz_qb; j < bz_qe; ++j)")
        self.emit(f"{acc}* __restrict bz_lane = bz_l[(j - bz_qb) % {n}];")
        self.emit("#pragma omp simd")
        self.open("for (int64_t bz_c = 0; bz_c < bz_cn; ++bz_c)")
        self.emit("const int64_t bz_i = bz_c0 + bz_c;")
        for c in self.cone([a]):
            ins = k.instrs[c]
            if ins.op == "const" or c in self.hoist:
                continue
            if ins.op == "load":
                vi = ins.attr("load")
                parts = ["bz_i"] if outer[vi] == 1 else []
                cls = self.inner_class(vi)
                if cls == 1:
                    parts.append("j")
                elif cls == 2:
                    parts.append(f"j * {self.sname(vi, 1)}")
                li = self.k.instrs[c].attr("load")
                e = load_conv(self.names[c], f"L{li}[{' + '.join(parts) or '0'}]")
                self._note_conv(e)
                self.emit(f"const {self.ct(c)} v{c} = {e};")
            else:
                self.emit(f"const {self.ct(c)} v{c} = {self.op_expr(c)};")
        self.emit(f"bz_lane[bz_c] {comb}= ({acc})(v{a});")
        self.close()
        self.close()
        w = n // 2
        while w:  # the lanes' halving tree, per output
            self.emit(f"for (int bz_u = 0; bz_u < {w}; ++bz_u) for (int bz_c = 0; bz_c < {cb};"
                      f" ++bz_c) bz_l[bz_u][bz_c] {comb}= bz_l[bz_u + {w}][bz_c];")
            w //= 2
        self.emit(f"for (int bz_c = 0; bz_c < {cb}; ++bz_c) bz_tot[bz_c] = bz_tot[bz_c] "
                  f"{comb} bz_l[0][bz_c];")
        self.close()
        # per output: the row-level values after the sum, and the row stores
        self.open("for (int64_t bz_c = 0; bz_c < bz_cn; ++bz_c)")
        self.emit("const int64_t i0 = bz_c0 + bz_c;")
        for vi in range(self.n_loads + len(k.stores)):
            const = "const " if vi < self.n_loads else ""
            self.emit(f"{const}{self.view_st(vi)}* __restrict P{vi} = L{vi} + i0 * "
                      f"{self.sname(vi, 0)};")
            self.emit(f"(void)P{vi};")
        for r in self.live:
            ins = k.instrs[r]
            if not self.is_row(r) or ins.op == "const" or r in self.hoist:
                continue
            if r == i:
                total = f"bz_tot[bz_c] / ({acc})bz_N" if op == "mean" else "bz_tot[bz_c]"
                self.emit(f"const {acc} v{r} = {total};")
            elif ins.op == "load":
                self.emit(f"const {self.ct(r)} v{r} = {self.load_expr(r, '0')};")
            elif OPS[ins.op].kind == "reduce":
                raise AssertionError("one reduction in a column kernel")
            else:
                self.emit(f"const {self.ct(r)} v{r} = {self.op_expr(r)};")
        for si, st in enumerate(k.stores):
            self.emit(f"P{self.n_loads + si}[0] = {self.store_expr(si, f'v{st.instr}')};")
        self.close()
        self.close()

    def _cache_alloc(self) -> None:
        if not self.cached:
            return
        for c in sorted(self.cached):
            t = self.ct(c)
            self.emit(f"{t}* bz_c{c} = bz_N * (int64_t)sizeof({t}) <= {ROW_CACHE_BYTES} ? "
                      f"({t}*)malloc((__SIZE_TYPE__)bz_N * sizeof({t})) : ({t}*)0;")
        ok = " && ".join(f"bz_c{c} != 0" for c in sorted(self.cached))
        self.emit(f"const bool bz_cache = {ok};")

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
        if op in ("argmax", "argmin") and akind in ("f", "i", "u"):
            self._gen_arg_reduce(i, a, red)
            return
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
        op, acc, init, comb = self.reduction(i)
        if comb in ("max", "min"):
            c = ">" if comb == "max" else "<"
            upd = f"bz_p = v{a} {c} bz_p ? v{a} : bz_p;"
        else:
            upd = (f"bz_p {comb}= (v{a} != 0);" if op in ("any", "all")
                   else f"bz_p {comb}= ({acc})(v{a});")
        nan = op in ("max", "min") and akind == "f"
        self.emit(f"{'bool' if op in ('any', 'all') else acc} v{i};")
        self.open("")
        self.emit(f"{acc} bz_acc = ({acc}){init};")
        if nan:
            self.emit("int bz_nan = 0;")
        if self.inner_parallel:  # one big row: threads share its blocks
            self._gen_shared_reduce(a, red, acc, init, comb, upd, nan)
        else:
            self._gen_serial_reduce(a, red, acc, init, comb, upd, nan)
        if op == "mean":
            self.emit(f"v{i} = bz_acc / ({acc})bz_N;")
        elif op in ("any", "all"):
            self.emit(f"v{i} = bz_acc != 0;")
        elif nan:
            self.emit(f"v{i} = bz_nan ? __builtin_nan{fsuffix(rn)}(\"\") : bz_acc;")
        else:
            self.emit(f"v{i} = bz_acc;")
        self.close()

    def _gen_arg_reduce(self, i: int, a: int, red: list[str]) -> None:
        """argmax / argmin of a number row in two passes, each over blocks of 16 elements
        in 16 lanes (vector selects and compares; one pass keeping the index beside the
        value compiled to a scalar loop, ~2.5x this time on 16 rows of 49152): the
        lanes' extremes and whether a NaN occurs, then the first index holding the
        extreme (or the first NaN: numpy's answer). Every pass computes the row's values
        alike (the same loop number: the same row cache use)."""
        an = self.names[a]
        op = self.k.instrs[i].op
        cmp = ">" if op == "argmax" else "<"
        flt = dtype_kind(an) == "f"
        at = CTYPE[an]
        last = red[-1]
        hit = f"(bz_nan ? v{a} != v{a} : v{a} == bz_m)" if flt else f"v{a} == bz_m"
        loop = self.loop

        def passes(body: Callable[[bool], None], line_end: str = "") -> None:
            """body(vector) over the row: whole blocks of 16 lanes, then the tail."""
            self._red_loops_open(red)
            self.open(f"for (int64_t bz_jb = 0; bz_jb + 16 <= {last}; bz_jb += 16)")
            body(True)
            self.close()
            self.open(f"for (int64_t j = {last} / 16 * 16; j < {last}; ++j)")
            self.loop = loop
            self.emit_loop_body([a])
            body(False)
            self.close()
            if line_end:
                self.emit(line_end)
            for _ in range(len(red) - 1):
                self.close()

        def lanes(pragma: str, update: str) -> None:
            """One block's 16 lanes: ``update`` after each lane's value."""
            self.emit(pragma)
            self.open("for (int bz_l = 0; bz_l < 16; ++bz_l)")
            self.emit("const int64_t j = bz_jb + bz_l;")
            self.loop = loop
            self.emit_loop_body([a])
            self.emit(update)
            self.close()

        def extremes(vector: bool) -> None:
            lane = "bz_l" if vector else "0"
            update = f"bz_ml[{lane}] = v{a} {cmp} bz_ml[{lane}] ? v{a} : bz_ml[{lane}];" + (
                f" bz_nl[{lane}] |= v{a} != v{a};" if flt else "")
            if vector:
                lanes("#pragma omp simd", update)
            else:
                self.emit(update)

        found = f"if ({hit}) {{ v{i} = bz_k + j; goto bz_found{i}; }}"

        def first(vector: bool) -> None:
            if vector:
                self.emit("int bz_any = 0;")
                lanes("#pragma omp simd reduction(|: bz_any)", f"bz_any |= {hit};")
                self.open("if (bz_any)")
                self.open("for (int64_t j = bz_jb; j < bz_jb + 16; ++j)")
                self.loop = loop
                self.emit_loop_body([a])
                self.emit(found)
                self.close()
                self.close()
            else:
                self.emit(found)

        self.emit(f"int64_t v{i} = 0;")
        self.open("")
        self.emit(f"{at} bz_ml[16];")
        self.emit("int bz_nl[16];")
        self.emit(f"for (int bz_l = 0; bz_l < 16; ++bz_l) bz_ml[bz_l] = ({at})"
                  f"{extreme(an, low=op == 'argmax')}, bz_nl[bz_l] = 0;")
        passes(extremes)
        self.emit(f"{at} bz_m = bz_ml[0];")
        self.emit("int bz_nan = bz_nl[0];")
        self.emit("for (int bz_l = 1; bz_l < 16; ++bz_l) { bz_m = bz_ml[bz_l] "
                  f"{cmp} bz_m ? bz_ml[bz_l] : bz_m; bz_nan |= bz_nl[bz_l]; }}")
        self.emit("int64_t bz_k = 0;  // the flattened index of the row's current line")
        passes(first, f"bz_k += {last};")
        self.emit(f"bz_found{i}:;")
        self.close()
        self.loop = loop + 1

    def _combine(self, comb: str, part: str) -> None:
        """bz_acc <- bz_acc combined with one block's partial ``part``."""
        if comb in ("max", "min"):
            self.emit(f"bz_acc = {part} {'>' if comb == 'max' else '<'} bz_acc ? {part} : bz_acc;")
        else:
            self.emit(f"bz_acc = bz_acc {comb} {part};")

    def _block_partial(self, a: int, acc: str, init: str, comb: str, upd: str, nan: bool,
                       red: list[str]) -> None:
        """bz_p (and bz_pn): the reduction of elements [bz_qb, bz_qe) of the flattened
        reduced index (row-major over the reduced dims). A float sum or product folds them
        in braze's order (:data:`~braze.graph.ops.reductions.SUM_LANES` lanes, element q to
        lane q % SUM_LANES in order, then a halving tree), which the numpy tier computes too
        (``reductions.blocked_reduce``); other reductions are exact in any order."""
        self.emit(f"const int64_t bz_qe = bz_qb + {SUM_BLOCK} < bz_N ? bz_qb + {SUM_BLOCK}"
                  " : bz_N;")
        lanes = comb in ("+", "*") and acc in ("float", "double")
        last = red[-1]
        if lanes and len(red) == 1:
            self._lanes(acc, init, comb, lambda: self.emit_loop_body([a]), f"v{a}", "bz_qb")
            return
        if lanes:  # the block's values in order, then folded by _lanes
            self.emit(f"{acc} bz_tmp[{SUM_BLOCK}] __attribute__((aligned(64)));")
        else:
            self.emit(f"{acc} bz_p = ({acc}){init};")
        if nan:
            self.emit("int bz_pn = 0;")
        if len(red) >= 2:  # runs along the last reduced dim
            self.open("for (int64_t bz_q = bz_qb; bz_q < bz_qe;)")
            self.emit(f"const int64_t bz_o = bz_q / {last}, bz_js = bz_q % {last};")
            self.emit(f"const int64_t bz_jn = {last} - bz_js < bz_qe - bz_q ? {last} - bz_js"
                      " : bz_qe - bz_q;")
            self._outer_red_offsets(red, "bz_o")
            lo, hi = "bz_js", "bz_js + bz_jn"
        else:
            lo, hi = "bz_qb", "bz_qe"
        if lanes:
            self.emit("#pragma omp simd")
        else:
            self.emit(f"#pragma omp simd reduction({comb}:bz_p)"
                      + (" reduction(|:bz_pn)" if nan else ""))
        self.open(f"for (int64_t j = {lo}; j < {hi}; ++j)")
        self.emit_loop_body([a])
        if lanes:  # (a run of the block, in order)
            self.emit(f"bz_tmp[bz_q - bz_qb + (j - bz_js)] = ({acc})(v{a});")
        else:
            self.emit(upd)
        if nan:
            self.emit(f"bz_pn |= (v{a} != v{a});")
        self.close()
        if len(red) >= 2:
            self.emit("bz_q += bz_jn;")
            self.close()
        if lanes:
            self._lanes(acc, init, comb, None, "bz_tmp", "bz_qb")

    def _lanes(self, acc: str, init: str, comb: str, body: Callable[[], None] | None, value: str,
               base: str) -> None:
        """``acc bz_p``: ``value`` (at element j, after ``body()`` emits what it needs; no body:
        ``value`` is an array already holding the block) folded over j in [base, bz_qe) into
        SUM_LANES lanes (j - base to lane (j - base) % SUM_LANES, in order), then a halving
        tree. Whole groups of SUM_LANES are computed by a vectorized loop into a group
        buffer and folded as GCC vectors of 16 held in registers (several, so the adds do
        not wait on each other; a lane array in memory would chain every group through a
        store); the rest, one element per lane at most, by a vectorized loop."""
        n, nv = SUM_LANES, SUM_LANES // 16
        self.emit(f"typedef {acc} bz_lv __attribute__((vector_size(16 * sizeof({acc}))));")
        for v in range(nv):
            self.emit(f"bz_lv bz_a{v} = bz_lv{{}} + ({acc}){init};")
        self.emit(f"{acc} bz_l[{n}] __attribute__((aligned(64)));")
        self.emit(f"int64_t bz_j0 = {base};")
        self.open(f"for (; bz_j0 + {n} <= bz_qe; bz_j0 += {n})")
        loop = self.loop
        if body is not None:
            self.emit("#pragma omp simd")
            self.open(f"for (int64_t bz_u = 0; bz_u < {n}; ++bz_u)")
            self.emit("const int64_t j = bz_j0 + bz_u;")
            body()
            self.emit(f"bz_l[bz_u] = ({acc})({value});")
            self.close()
            src = "bz_l"
        else:
            src = f"{value} + (bz_j0 - {base})"
        self.emit("bz_lv bz_g;")
        for v in range(nv):
            self.emit(f"__builtin_memcpy(&bz_g, {src} + {16 * v}, sizeof bz_g); "
                      f"bz_a{v} = bz_a{v} {comb} bz_g;")
        self.close()
        for v in range(nv):
            self.emit(f"__builtin_memcpy(bz_l + {16 * v}, &bz_a{v}, sizeof bz_a{v});")
        self.emit("#pragma omp simd")
        self.open("for (int64_t j = bz_j0; j < bz_qe; ++j)")
        self.loop = loop  # (the same loop of the row, for its cached values)
        if body is not None:
            body()
            self.emit(f"bz_l[j - bz_j0] {comb}= ({acc})({value});")
        else:
            self.emit(f"bz_l[j - bz_j0] {comb}= {value}[j - {base}];")
        self.close()
        w = n // 2
        while w:
            self.emit(f"for (int bz_u = 0; bz_u < {w}; ++bz_u) "
                      f"bz_l[bz_u] {comb}= bz_l[bz_u + {w}];")
            w //= 2
        self.emit(f"const {acc} bz_p = bz_l[0];")

    def _outer_red_offsets(self, red: list[str], var: str) -> None:
        """j0..j{n-2} and each load's x{vi}_{n-2} for the flat index ``var`` over all
        reduced dims but the last."""
        self.emit(f"int64_t bz_r = {var};")
        for d in reversed(range(len(red) - 1)):
            self.emit(f"const int64_t j{d} = bz_r % {red[d]}; bz_r /= {red[d]};")
        for vi in range(self.n_loads):
            terms = " + ".join(f"j{d} * {self.sname(vi, self.n_o + d)}"
                               for d in range(len(red) - 1))
            self.emit(f"const int64_t x{vi}_{len(red) - 2} = {terms};")

    def _gen_shared_reduce(self, a: int, red: list[str], acc: str, init: str,
                           comb: str, upd: str, nan: bool) -> None:
        """One big row's reduction shared by the threads, with the answer of one thread:
        every block of SUM_BLOCK elements of the flattened reduced index is reduced on its
        own into a partials array -- in parallel, each block by whichever thread -- and the
        partials are then combined by one thread in block order, exactly as the serial
        loop does, so no thread count changes a bit of the result."""
        self.emit(f"const int64_t bz_nw = (bz_N + {SUM_BLOCK - 1}) / {SUM_BLOCK};")
        self.emit(f"{acc}* bz_part = ({acc}*)malloc(sizeof({acc}) * (bz_nw > 0 ? bz_nw : 1));")
        if nan:
            self.emit("int* bz_partn = (int*)malloc(sizeof(int) * (bz_nw > 0 ? bz_nw : 1));")
        self.emit("#pragma omp parallel for num_threads(bz_nt) schedule(static) "
                  "if(parallel: bz_pi)")
        self.open("for (int64_t bz_w = 0; bz_w < bz_nw; ++bz_w)")
        self.emit(f"const int64_t bz_qb = bz_w * {SUM_BLOCK};")
        self._block_partial(a, acc, init, comb, upd, nan, red)
        self.emit("bz_part[bz_w] = bz_p;")
        if nan:
            self.emit("bz_partn[bz_w] = bz_pn;")
        self.close()
        self.open("for (int64_t bz_w = 0; bz_w < bz_nw; ++bz_w)")
        self._combine(comb, "bz_part[bz_w]")
        if nan:
            self.emit("bz_nan |= bz_partn[bz_w];")
        self.close()
        self.emit("free(bz_part);")
        if nan:
            self.emit("free(bz_partn);")

    def _gen_serial_reduce(self, a: int, red: list[str], acc: str, init: str, comb: str,
                           upd: str, nan: bool) -> None:
        """A row's reduction by its thread: blocks in order, each combined as it ends."""
        self.open(f"for (int64_t bz_qb = 0; bz_qb < bz_N; bz_qb += {SUM_BLOCK})")
        self._block_partial(a, acc, init, comb, upd, nan, red)
        self._combine(comb, "bz_p")
        if nan:
            self.emit("bz_nan |= bz_pn;")
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
        # two loops where this one reads the row cache: one reads it, one computes the
        # values again (an element-wise test would be if-converted: both, every element)
        modes: list[bool | None] = [True, False] if self.reads_cache() else [None]
        loop = self.loop
        for mode in modes:
            if len(modes) == 2:
                self.open("if (bz_cache)" if mode else "else")
            if self.tiled:
                self.emit("#pragma omp simd")
                self.open("for (int64_t j = bz_b; j < bz_e; ++j)")
            else:
                self.emit("#pragma omp for simd schedule(static) nowait" if share
                          else "#pragma omp simd")
                self.open(f"for (int64_t j = 0; j < {last}; ++j)")
            self.loop = loop
            self.emit_loop_body([k.stores[s].instr for s in self.el_stores], mode)
            for s in self.el_stores:
                v = self.store_expr(s, f"v{k.stores[s].instr}")
                if s in self.tiled:
                    self.emit(f"bz_t{s}[j - bz_b] = {v};")
                else:
                    self.emit(f"P{self.n_loads + s}[{self.index(self.n_loads + s)}] = {v};")
            self.close()
            if len(modes) == 2:
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
    text, symbol = symbolize(g.generate())
    return GeneratedKernel(text, symbol, g.slots, g.n_args, g.norm.empty)

