"""The GPU kernel generator shared by CUDA C and Metal Shading Language.

One loop structure, two dialects (:class:`Dialect`: qualifiers, thread indices,
barriers, warp shuffles, argument access). Expressions come from the shared op table
(:mod:`braze.backends.csource`), so every op is declared once for C++, CUDA and MSL.

Kernel ABI (both targets): one pointer parameter per distinct slot of the kernel
(``kernel_slots`` order; bool as uint8, float16/bfloat16 as their uint16 bits), then the
int64 argument vector of :func:`~braze.backends.csource.kernel_args` (CUDA: a struct
passed by value; Metal: a ``constant int64_t*`` buffer). ``args[0]`` (the CPU's thread
count) is unused. Sizes, strides and constants are arguments, so the source does not
depend on shapes.

Shapes of the generated code:

* **flat** (elementwise, one dim after merging): a grid-stride loop; on CUDA each thread
  handles ``VEC`` consecutive elements with 16-byte vector loads/stores where every
  contiguous view is aligned (checked at run time), else element by element;
* **nested** (elementwise over strided/broadcast views): a grid-stride loop over the
  flat index, decomposed into the dims (odometer by division);
* **rows** (reductions): one block (threadgroup) per row, grid-stride over rows; each
  reduction is a strided loop over the row followed by a block reduction (warp shuffles,
  then one value per warp through shared memory); row values are then known to every
  thread, the element loop writes element stores and thread 0 the row stores.
  argmax/argmin keep the first index of the extreme (NaN wins), max/min propagate NaN.

float16/bfloat16 are computed in float32 and rounded after each op, as on the CPU.
Launch: flat/nested kernels any 1-d grid; row kernels one block per row (or fewer, they
stride), ``blockDim.x`` a multiple of 32 up to 1024.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph.kernel import Kernel
from ..graph.ops import OPS
from .csource import (
    CTYPE,
    ExprGen,
    Unsupported,
    check_kernel,
    dtype_kind,
    load_conv,
    port,
    store_conv,
    symbolize,
)

__all__ = ["Dialect", "GpuKernel", "generate_gpu"]

MAX_ARGS = 400  # CUDA passes the arguments by value (4 KiB of parameters at most)
_SIZE = {"uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "int32_t": 4, "uint32_t": 4,
         "float": 4, "int64_t": 8, "uint64_t": 8, "double": 8}


@dataclass(frozen=True)
class GpuKernel:
    """Generated GPU source and what a launcher needs to call it."""

    source: str
    symbol: str
    slots: tuple[int, ...]  # schedule slot of each buffer parameter
    n_args: int
    mode: str  # "flat", "nested" or "rows"
    vec: int  # elements per thread in the flat vector path (1: none)
    empty: bool


@dataclass(frozen=True)
class Dialect:
    """What differs between CUDA C and MSL in the generated text."""

    target: str
    tid: str
    bid: str
    bdim: str
    gdim: str
    barrier: str
    arg: str  # format with {k}
    shared: str  # declaration prefix of block-shared arrays
    has_double: bool
    vector: bool
    max_buffers: int

    def ptr(self, t: str, const: bool) -> str:
        if self.target == "cuda":
            return f"const {t}* __restrict__" if const else f"{t}*"
        return f"const device {t}*" if const else f"device {t}*"


CUDA = Dialect("cuda", "(int64_t)threadIdx.x", "(int64_t)blockIdx.x", "(int64_t)blockDim.x",
               "(int64_t)gridDim.x", "__syncthreads();", "bz_a.a[{k}]", "__shared__",
               has_double=True, vector=True, max_buffers=1 << 30)
METAL = Dialect("metal", "(int64_t)bz_tid", "(int64_t)bz_bid", "(int64_t)bz_bdim",
                "(int64_t)bz_gdim", "threadgroup_barrier(mem_flags::mem_threadgroup);",
                "bz_a[{k}]", "threadgroup", has_double=False, vector=False, max_buffers=23)


# ---------------------------------------------------------------- helper text
# a reduction record's combining operator -> its functor (backends/kernels/reduce.h)
_FUNCTOR = {"+": "bz_add_op", "*": "bz_mul_op", "|": "bz_or_op", "&": "bz_and_op"}


# ---------------------------------------------------------------- the generator
class GpuGen(ExprGen):
    """Emits one GPU kernel in dialect ``d`` (see the module docstring)."""

    def __init__(self, k: Kernel, d: Dialect) -> None:
        super().__init__(k)
        self.d = d
        n_views = self.n_loads + len(k.stores)
        if len(self.slots) > d.max_buffers:
            raise Unsupported(f"{len(self.slots)} buffers (a {d.target} kernel takes at most "
                              f"{d.max_buffers})")
        if not d.has_double and any(n == "float64" for n in self.names):
            raise Unsupported(f"float64 in a {d.target} kernel")
        self.dims = [f"n{i}" for i in range(len(self.norm.outer) + len(self.norm.red))]
        self.n_views = n_views
        self.reduce = False
        self.vec = 1
        self.shared_decls: list[str] = []  # block-shared arrays, declared at function scope

    # ---- names and helpers
    def arg(self, k: int) -> str:
        return self.d.arg.format(k=k)

    def hoisted(self) -> set[int]:
        """Elementwise kernels: instructions that need no load (computed before the loop)."""
        out: set[int] = set()
        for i, ins in enumerate(self.k.instrs):
            if ins.op == "const" or (ins.op != "load" and ins.args
                                     and all(a in out for a in ins.args)):
                out.add(i)
        return out

    def is_row(self, i: int) -> bool:
        if self.mode == "rows":
            return self.k.instrs[i].row
        return i in self._hoisted

    def expr(self, i: int, index: dict[int, str]) -> str:
        """The value of instruction i; loads read view ``load`` at ``index[load]``."""
        ins = self.k.instrs[i]
        if ins.op == "load":
            li = ins.attr("load")
            e = load_conv(self.names[i], index[li])
            self._note_conv(e)
            return e
        return self.op_expr(i)

    def emit_values(self, order: list[int], index: dict[int, str]) -> None:
        for i in order:
            if self.k.instrs[i].op == "const":
                continue
            self.emit(f"const {self.ct(i)} v{i} = {port(self.expr(i, index), self.d.target)};")

    # ---- the kernel
    def generate(self) -> str:
        k, norm, d = self.k, self.norm, self.d
        self._hoisted = self.hoisted()
        params = []
        slot_const = {}
        stored = {st.slot for st in k.stores}
        for b, slot in enumerate(self.slots):
            vi = next((i for i, ld in enumerate(k.loads) if ld.slot == slot), None)
            if vi is None:
                vi = self.n_loads + next(i for i, st in enumerate(k.stores) if st.slot == slot)
            t = self.view_st(vi)
            const = slot not in stored
            slot_const[slot] = const
            q = d.ptr(t, const)
            params.append(f"{q} b{b}" + (f" [[buffer({b})]]" if d.target == "metal" else ""))
        def pointer(vi: int, slot: int, t: str, offset: str) -> str:
            const = vi < self.n_loads and slot_const[slot]
            return f"{d.ptr(t, const)} L{vi} = b{self.slots.index(slot)} + {offset};"

        a = self.emit_arguments(self.dims, self.arg, pointer, "bz_ffrom((uint32_t){})",
                                "bz_dfrom((uint64_t){})")
        self.n_args = a
        if a > MAX_ARGS:
            raise Unsupported(f"{a} kernel arguments (at most {MAX_ARGS})")
        if norm.empty:
            self.emit("return;")
        elif self.mode == "rows":
            self.gen_rows()
        else:
            for i in sorted(self._hoisted & self.live_set):
                if k.instrs[i].op != "const":
                    self.emit_values([i], {})
            if self.mode == "flat":
                self.gen_flat()
            else:
                self.gen_nested()
        body = "\n".join(["  " + x for x in self.shared_decls] + self.lines)
        # the helper headers the kernel uses (their vocabulary: the dialect's prelude)
        helpers = self.needs.helpers(("reduce.h",) if self.reduce else ())
        if d.target == "cuda":
            sig = ('extern "C" __global__ void __launch_bounds__(1024) BZ_SYMBOL('
                   + ", ".join(params + [f"const bz_args<{a}> bz_a"]) + ") {")
        else:
            sig = ("[[kernel]] void BZ_SYMBOL(" + ", ".join(
                params + [f"constant int64_t* bz_a [[buffer({len(self.slots)})]]",
                          "uint bz_tid [[thread_position_in_threadgroup]]",
                          "uint bz_bid [[threadgroup_position_in_grid]]",
                          "uint bz_bdim [[threads_per_threadgroup]]",
                          "uint bz_gdim [[threadgroups_per_grid]]"]) + ") {")
        return f"{helpers}{sig}\n{body}\n}}\n"

    # ---- elementwise
    def view_index(self, vi: int, idx: list[str]) -> str:
        """Element offset of view vi at per-dim indices ``idx`` (strides are arguments)."""
        terms = []
        last = len(self.dims) - 1
        for dd, x in enumerate(idx):
            if self.norm.strides[vi][dd] == 0:  # broadcast: structural, like the CPU's
                continue  # inner-stride classes (size-1 dims were dropped by normalization)
            unit = dd == last and self.inner_class(vi) == 1
            terms.append(x if unit else f"{x} * {self.sname(vi, dd)}")
        return " + ".join(terms) or "0"

    def _store_all(self, index: dict[int, str]) -> None:
        for si, st in enumerate(self.k.stores):
            v = store_conv(self.names[st.instr], f"v{st.instr}")
            self._note_conv(v)
            vi = self.n_loads + si
            self.emit(f"L{vi}[{index[vi]}] = {port(v, self.d.target)};")

    def _targets(self) -> list[int]:
        return [st.instr for st in self.k.stores]

    def gen_flat(self) -> None:
        d = self.d
        n = self.dims[0]
        self.emit(f"const int64_t bz_i0 = {d.bid} * {d.bdim} + {d.tid}, "
                  f"bz_step = {d.gdim} * {d.bdim};")
        order = self.cone(self._targets())
        contiguous = [vi for vi in range(self.n_views) if self.inner_class(vi) == 1]
        loads_used = {self.k.instrs[i].attr("load") for i in order
                      if self.k.instrs[i].op == "load"}
        if d.vector and contiguous:
            size = max(_SIZE[self.view_st(vi)] for vi in contiguous)
            self.vec = max(1, min(8, 16 // size))
        V = self.vec
        tail = "bz_j0"
        if V > 1:
            conds = " | ".join(f"((unsigned long long)L{vi} % (sizeof(*L{vi}) * {V}))"
                               for vi in contiguous)
            self.emit(f"const bool bz_al = ({conds}) == 0;")
            self.emit(f"const int64_t bz_j0 = bz_al ? {n} / {V} * {V} : 0;")
            self.open("if (bz_al)")
            self.open(f"for (int64_t bz_q = bz_i0; bz_q < {n} / {V}; bz_q += bz_step)")
            self.emit(f"const int64_t bz_b = bz_q * {V};")
            for vi in contiguous:
                t = self.view_st(vi)
                if vi < self.n_loads:
                    if vi in loads_used:
                        self.emit(f"const bz_vec<{t}, {V}> r{vi} = "
                                  f"*reinterpret_cast<const bz_vec<{t}, {V}>*>(L{vi} + bz_b);")
                else:
                    self.emit(f"bz_vec<{t}, {V}> r{vi};")
            self.emit("#pragma unroll")
            self.open(f"for (int bz_u = 0; bz_u < {V}; ++bz_u)")
            self.emit("const int64_t j = bz_b + bz_u;")
            index = {vi: (f"r{vi}.v[bz_u]" if vi in contiguous else self.view_index(vi, ["j"]))
                     for vi in range(self.n_views)}
            raw = {vi: (index[vi] if vi in contiguous else f"L{vi}[{index[vi]}]")
                   for vi in range(self.n_loads)}
            self.emit_values(order, raw)
            for si, st in enumerate(self.k.stores):
                vi = self.n_loads + si
                v = port(store_conv(self.names[st.instr], f"v{st.instr}"), d.target)
                self._note_conv(v)
                self.emit(f"{index[vi] if vi in contiguous else f'L{vi}[{index[vi]}]'} = {v};")
            self.close()
            for vi in contiguous:
                if vi >= self.n_loads:
                    t = self.view_st(vi)
                    self.emit(f"*reinterpret_cast<bz_vec<{t}, {V}>*>(L{vi} + bz_b) = r{vi};")
            self.close()
            self.close()
        else:
            self.emit("const int64_t bz_j0 = 0;")
        self.open(f"for (int64_t j = {tail} + bz_i0; j < {n}; j += bz_step)")
        index = {vi: self.view_index(vi, ["j"]) for vi in range(self.n_views)}
        self.emit_values(order, {vi: f"L{vi}[{index[vi]}]" for vi in range(self.n_loads)})
        self._store_all(index)
        self.close()

    def gen_nested(self) -> None:
        d = self.d
        total = " * ".join(self.dims)
        self.open(f"for (int64_t e = {d.bid} * {d.bdim} + {d.tid}; e < {total}; "
                  f"e += {d.gdim} * {d.bdim})")
        self._decompose("e", self.dims, "i")
        idx = [f"i{x}" for x in range(len(self.dims))]
        index = {vi: self.view_index(vi, idx) for vi in range(self.n_views)}
        self.emit_values(self.cone(self._targets()),
                         {vi: f"L{vi}[{index[vi]}]" for vi in range(self.n_loads)})
        self._store_all(index)
        self.close()

    def _decompose(self, var: str, dims: list[str], prefix: str, base: int = 0) -> None:
        self.emit(f"int64_t {prefix}_q = {var};")
        for x in reversed(range(len(dims))):
            if x == 0:
                self.emit(f"const int64_t {prefix}{base + x} = {prefix}_q;")
            else:
                self.emit(f"const int64_t {prefix}{base + x} = {prefix}_q % {dims[x]}; "
                          f"{prefix}_q /= {dims[x]};")

    # ---- rows
    def gen_rows(self) -> None:
        k, d = self.k, self.d
        n_o = self.n_o
        outer, red = self.dims[:n_o], self.dims[n_o:]
        self.reduce = True
        self.emit("const int64_t bz_R = " + (" * ".join(outer) if outer else "1") + ";")
        self.emit("const int64_t bz_N = " + " * ".join(red) + ";")
        self.emit(f"const int64_t bz_t = {d.tid}, bz_nt = {d.bdim};")
        self.open(f"for (int64_t bz_r = {d.bid}; bz_r < bz_R; bz_r += {d.gdim})")
        if outer:
            self._decompose("bz_r", outer, "o")
        for vi in range(self.n_views):
            slot_const = vi < self.n_loads and k.loads[vi].slot not in {
                st.slot for st in k.stores}
            off = " + ".join(f"o{x} * {self.sname(vi, x)}" for x in range(n_o)
                             if self.norm.strides[vi][x] != 0)
            self.emit(f"{d.ptr(self.view_st(vi), slot_const)} P{vi} = L{vi}"
                      + (f" + ({off})" if off else "") + ";")
        row_index = {vi: f"P{vi}[0]" for vi in range(self.n_loads)}
        n_red_loops = 0
        for i in self.live:
            ins = k.instrs[i]
            if not self.is_row(i) or ins.op == "const":
                continue
            if ins.op == "load":
                self.emit_values([i], row_index)
            elif OPS[ins.op].kind == "reduce":
                self.gen_reduce(i, red, n_red_loops)
                n_red_loops += 1
            else:
                self.emit_values([i], {})
        if self.el_stores:
            self._open_row_loop(red)
            index = self._row_index(red)
            self.emit_values(self.cone([k.stores[s].instr for s in self.el_stores]),
                             {vi: f"P{vi}[{index[vi]}]" for vi in range(self.n_loads)})
            for s in self.el_stores:
                st = k.stores[s]
                v = port(store_conv(self.names[st.instr], f"v{st.instr}"), d.target)
                self._note_conv(v)
                self.emit(f"P{self.n_loads + s}[{index[self.n_loads + s]}] = {v};")
            self.close()
        row_stores = [s for s in range(len(k.stores)) if s not in self.el_stores]
        if row_stores:
            self.open("if (bz_t == 0)")
            for s in row_stores:
                st = k.stores[s]
                v = port(store_conv(self.names[st.instr], f"v{st.instr}"), d.target)
                self._note_conv(v)
                self.emit(f"P{self.n_loads + s}[0] = {v};")
            self.close()
        self.close()

    def _open_row_loop(self, red: list[str]) -> None:
        self.open("for (int64_t j = bz_t; j < bz_N; j += bz_nt)")
        if len(red) > 1:
            self._decompose("j", red, "r")

    def _row_index(self, red: list[str]) -> dict[int, str]:
        n_o = self.n_o
        out = {}
        for vi in range(self.n_views):
            if vi >= self.n_loads and self._is_row_store(vi - self.n_loads):
                continue
            if len(red) == 1:
                c = self.inner_class(vi)
                out[vi] = {0: "0", 1: "j"}.get(c, f"j * {self.sname(vi, n_o)}")
            else:
                out[vi] = " + ".join(f"r{x} * {self.sname(vi, n_o + x)}" for x in range(len(red))
                                     if self.norm.strides[vi][n_o + x] != 0) or "0"
        return out

    def gen_reduce(self, i: int, red: list[str], n: int) -> None:
        k, d = self.k, self.d
        ins = k.instrs[i]
        a = ins.args[0]
        an = self.names[a]
        op = ins.op
        at = CTYPE[an]
        index = self._row_index(red)
        loads = {vi: f"P{vi}[{index[vi]}]" for vi in range(self.n_loads)}
        if op in ("argmax", "argmin"):
            mx = "true" if op == "argmax" else "false"
            self.shared_decls.append(f"{d.shared} {at} bz_sv{n}[32]; "
                                     f"{d.shared} int64_t bz_si{n}[32];")
            self.emit(f"int64_t v{i};")
            self.open("")
            self.emit(f"{at} bz_bv = ({at})0; int64_t bz_bi = -1;")
            self._open_row_loop(red)
            self.emit_values(self.cone([a]), loads)
            self.emit(f"bz_arg_comb<{at}, {mx}>(bz_bv, bz_bi, v{a}, j);")
            self.close()
            self.emit(f"v{i} = bz_block_arg<{at}, {mx}>(bz_bv, bz_bi, bz_sv{n}, bz_si{n}, "
                      "bz_t, bz_nt);")
            self.close()
            return
        op, acc, init, combine = self.reduction(i)
        if combine in ("max", "min"):
            init = port(init, d.target)
            comb = ("bz_f" if dtype_kind(an) == "f" else "bz_") + combine + "_op"
        else:
            comb = _FUNCTOR[combine]
        upd = {"any": f"(int)(v{a} != 0)", "all": f"(int)(v{a} != 0)"}.get(op, f"({acc})(v{a})")
        self.shared_decls.append(f"{d.shared} {acc} bz_sm{n}[32];")
        self.emit(f"{'bool' if op in ('any', 'all') else acc} v{i};")
        self.open("")
        self.emit(f"const {comb} bz_f = {comb}();")
        self.emit(f"{acc} bz_p = ({acc}){init};")
        self._open_row_loop(red)
        self.emit_values(self.cone([a]), loads)
        self.emit(f"bz_p = bz_f(bz_p, {upd});")
        self.close()
        self.emit(f"const {acc} bz_acc = bz_block_reduce<{acc}>(bz_p, ({acc}){init}, bz_f, "
                  f"bz_sm{n}, bz_t, bz_nt);")
        if op == "mean":
            self.emit(f"v{i} = bz_acc / ({acc})bz_N;")
        elif op in ("any", "all"):
            self.emit(f"v{i} = bz_acc != 0;")
        else:
            self.emit(f"v{i} = bz_acc;")
        self.close()


def generate_gpu(kernel: Kernel, d: Dialect, prelude: str) -> GpuKernel:
    """Source of ``kernel`` for dialect ``d`` (raises :class:`Unsupported`)."""
    check_kernel(kernel)
    g = GpuGen(kernel, d)
    text, symbol = symbolize(prelude + g.generate())
    return GpuKernel(text, symbol, g.slots, g.n_args, g.mode, g.vec,
                     g.norm.empty)


__all__ += ["CUDA", "METAL", "MAX_ARGS"]
