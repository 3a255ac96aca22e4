"""A CPU emulator of the GPU execution model, so generated CUDA C and MSL *run* without
a GPU.

NVRTC proves that every generated kernel compiles; only running it proves that it
computes the right thing (indexing, strides, grid-stride loops, the 16-byte vector
path, block reductions through warp shuffles and shared memory). :class:`EmulatedDevice`
is a drop-in *driver* for :class:`~braze.backends.cuda.CudaBackend`: the backend's own
code (generation, launch configuration, argument packing, the caching allocator,
uploads/downloads, the build-failure fallback) runs unchanged; only the device is
replaced:

* the kernel's CUDA source is compiled as C++17 by the host compiler, with a small shim
  (``__global__``/``__shared__``/``threadIdx``/``__syncthreads``/``__shfl_xor_sync``/bit
  casts) in front of it -- the source itself is not edited;
* each block runs its threads as cooperative fibers on one OS thread (started with
  ``makecontext``, switched with ``_setjmp``/``_longjmp``: no system call per switch):
  ``__syncthreads`` and warp shuffles switch fibers, ``__shared__`` arrays are one copy
  per block (blocks run one after another);
* barriers are checked: threads of one block waiting at different barriers, a barrier
  some threads of the block exited before, or a warp shuffle with exited lanes --
  undefined behaviour on a GPU, often a hang -- raise :class:`EmulatorError` naming the
  block and what each thread was doing;
* device memory is host memory (256-byte aligned, like ``cuMemAlloc``), filled with
  0xFF bytes when allocated (NaN, -1, True): an element a kernel reads before anything
  wrote it, or that it forgets to write, shows in its results.

``EmulatedDevice(target="metal")`` runs the MSL generator's ``[[kernel]]`` functions the
same way, behind a shim of the Metal library subset they use (real semantics, unlike the
type-checking shim in ``tests/mslshim``); threadgroup arrays become one copy per group.

Math runs on the host's libm, not CUDA's or Metal's (results differ in the last ulp at
most); the emulator checks the generated program, not the GPU's arithmetic or speed.

>>> import numpy as np, braze as bz
>>> from braze.backends.cuda import CudaBackend
>>> from braze.graph.compiler import compile_graph
>>> x = bz.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
>>> schedule, leaves = compile_graph([bz.softmax(x, axis=-1)._node])
>>> be = CudaBackend(driver=EmulatedDevice())
>>> out, = be.run_schedule(schedule, [leaf.data for leaf in leaves])
>>> bool(np.allclose(out.sum(axis=-1), 1.0)), be.stats["cuda"]
(True, 1)
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .cpu.build import BuildError, _atomic_write, cache_dir, compiler, compiler_version
from .gpusource import GpuKernel

__all__ = ["EmulatedDevice", "EmulatorError", "emulator_source"]

FLAGS = ["-std=c++17", "-O1", "-fno-strict-aliasing", "-fPIC", "-shared",
         "-fvisibility=hidden", "-nostdinc++", "-w"]
MAX_BLOCK = 1024
ALIGN = 256


class EmulatorError(RuntimeError):
    """A launch the emulator refused or a barrier misuse it caught (message says which)."""


# What kernel code sees of the runtime (the fiber scheduler, RUNTIME below).
RUNTIME_API = r"""struct bz_emu_dim3 { unsigned int x, y, z; };
extern "C" bz_emu_dim3 bz_emu_tidx, bz_emu_bidx, bz_emu_bdim, bz_emu_gdim;
extern "C" void bz_emu_syncthreads(void);
extern "C" void bz_emu_shuffle_xor(void* value, unsigned int size, int lane_mask);
extern "C" int bz_emu_run(unsigned int grid, unsigned int block, void (*fn)(void), char* err,
                          int errlen);
"""

# The kernel translation unit starts with this. -nostdinc++ makes <math.h> glibc's C
# header, which (unlike the C++ one) defines no int64_t: the CUDA prelude's own typedefs
# (int64_t = long long, as NVRTC has it) stay valid.
SHIM = r"""// braze CUDA emulator shim (kernel side)
#include <math.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static  /* one copy per block: blocks run one after another */
""" + RUNTIME_API + r"""#define threadIdx bz_emu_tidx
#define blockIdx bz_emu_bidx
#define blockDim bz_emu_bdim
#define gridDim bz_emu_gdim
#define __syncthreads() bz_emu_syncthreads()
static inline unsigned int __float_as_uint(float f) {
  unsigned int u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) {
  float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) {
  long long u; __builtin_memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) {
  double d; __builtin_memcpy(&d, &u, 8); return d; }
template <class T> static inline T __shfl_xor_sync(unsigned int, T v, int o) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  bz_emu_shuffle_xor(&v, sizeof(T), o);
  return v;
}
"""

# The Metal kernel translation unit starts with this instead: the subset of the Metal
# standard library generated MSL uses, with real semantics (float math on the host's libm;
# Metal has no double). Address spaces are erased; kernel-scope threadgroup arrays become
# function statics (one copy per threadgroup) by a rewrite of their declarations.
METAL_SHIM = r"""// braze Metal emulator shim (kernel side)
typedef unsigned int uint; typedef unsigned short ushort; typedef unsigned char uchar;
typedef __INT8_TYPE__ int8_t;   typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t; typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t; typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t; typedef __UINT64_TYPE__ uint64_t;
#define device
#define constant
#define thread
#define threadgroup
#define kernel
""" + RUNTIME_API + r"""struct uint3 { uint x, y, z; };
struct bz_emu_16 { uint16_t bits; };  // half / bfloat as buffer element types (MLX's form)
typedef bz_emu_16 half; typedef bz_emu_16 float16_t;
struct bz_emu_b16 { uint16_t bits; }; typedef bz_emu_b16 bfloat16_t;
namespace metal {
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2 };
static inline void threadgroup_barrier(mem_flags) { bz_emu_syncthreads(); }
template <class To, class From> static inline To as_type(From f) {
  static_assert(sizeof(To) == sizeof(From), "as_type: size mismatch");
  To t; __builtin_memcpy(&t, &f, sizeof(To)); return t; }
template <class T> static inline T simd_shuffle_xor(T v, ushort o) {
  static_assert(sizeof(T) <= 4, "Metal shuffles 32-bit values at most");
  bz_emu_shuffle_xor(&v, sizeof(T), o);
  return v;
}
#define BZ_M1(name) static inline float name(float x) { return __builtin_##name##f(x); }
BZ_M1(exp) BZ_M1(exp2) BZ_M1(log) BZ_M1(log2) BZ_M1(log10) BZ_M1(sqrt) BZ_M1(fabs)
BZ_M1(sin) BZ_M1(cos) BZ_M1(tan) BZ_M1(asin) BZ_M1(acos) BZ_M1(atan) BZ_M1(sinh)
BZ_M1(cosh) BZ_M1(tanh) BZ_M1(asinh) BZ_M1(acosh) BZ_M1(atanh) BZ_M1(floor) BZ_M1(ceil)
BZ_M1(rint) BZ_M1(trunc) BZ_M1(round)
#undef BZ_M1
#define BZ_M2(name) static inline float name(float x, float y) { return __builtin_##name##f(x, y); }
BZ_M2(pow) BZ_M2(fmod) BZ_M2(atan2) BZ_M2(copysign) BZ_M2(fmin) BZ_M2(fmax)
#undef BZ_M2
template <class T> static inline T max(T a, T b) { return a < b ? b : a; }
template <class T> static inline T min(T a, T b) { return b < a ? b : a; }
template <class T> static inline T abs(T a) { return a < T(0) ? T(-a) : a; }
static inline float abs(float a) { return __builtin_fabsf(a); }
template <class T> static inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <class T> static inline T select(T a, T b, bool c) { return c ? b : a; }
static inline bool isnan(float x) { return x != x; }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
}  // namespace metal
"""

# The fiber scheduler (its own translation unit: it needs the C library's headers).
RUNTIME = r"""// braze CUDA emulator runtime: blocks of cooperative fibers
// A fiber starts on its own stack through makecontext/setcontext; afterwards switches use
// _setjmp/_longjmp, which (unlike swapcontext) save no signal mask: no system call.
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

struct bz_emu_dim3 { unsigned int x, y, z; };
extern "C" {
bz_emu_dim3 bz_emu_tidx, bz_emu_bidx, bz_emu_bdim, bz_emu_gdim;
unsigned long long bz_emu_slots[1024];
}

namespace {
enum State { FRESH, RUN, AT_BLOCK, AT_WARP, DONE };
struct Fiber { jmp_buf jb; int state; };
const size_t STACK = 128 * 1024;
Fiber* fibers = nullptr;
char* stacks = nullptr;
unsigned int capacity = 0, cur = 0;
jmp_buf sched;
ucontext_t start_ctx;
void (*entry)(void) = nullptr;

void fiber_main() {
  entry();
  fibers[cur].state = DONE;
  _longjmp(sched, 1);
}
void wait_at(int s) {
  fibers[cur].state = s;
  if (!_setjmp(fibers[cur].jb)) _longjmp(sched, 1);
}
}  // namespace

extern "C" void bz_emu_syncthreads(void) { wait_at(AT_BLOCK); }

// __shfl_xor_sync / simd_shuffle_xor: every lane publishes its value, the warp meets, each
// reads its partner's (lane ^ mask), the warp meets again (the slots are reused).
extern "C" void bz_emu_shuffle_xor(void* value, unsigned int size, int lane_mask) {
  const unsigned int t = cur;
  memcpy(&bz_emu_slots[t], value, size);
  wait_at(AT_WARP);
  memcpy(value, &bz_emu_slots[(t & ~31u) | ((t & 31u) ^ (unsigned int)lane_mask)], size);
  wait_at(AT_WARP);
}

// Run `grid` blocks of `block` threads of fn; 0, or -1 with a message in err.
extern "C" int bz_emu_run(unsigned int grid, unsigned int block, void (*fn)(void), char* err,
                          int errlen) {
  if (block == 0 || block > 1024 || block % 32 != 0 || grid == 0) {
    snprintf(err, errlen, "launch of %u blocks of %u threads: a block has 32..1024 threads, "
             "a multiple of 32, and the grid at least one block", grid, block);
    return -1;
  }
  if (block > capacity) {
    free(fibers); free(stacks);
    fibers = (Fiber*)calloc(block, sizeof(Fiber));
    stacks = (char*)malloc((size_t)block * STACK);
    capacity = (fibers && stacks) ? block : 0;
    if (!capacity) { snprintf(err, errlen, "out of memory for %u fibers", block); return -1; }
  }
  entry = fn;
  bz_emu_bdim = {block, 1, 1};
  bz_emu_gdim = {grid, 1, 1};
  for (unsigned int b = 0; b < grid; ++b) {
    bz_emu_bidx = {b, 0, 0};
    for (unsigned int t = 0; t < block; ++t) fibers[t].state = FRESH;
    for (;;) {
      for (unsigned int t = 0; t < block; ++t) {
        Fiber& f = fibers[t];
        if (f.state != RUN && f.state != FRESH) continue;
        cur = t;
        bz_emu_tidx = {t, 0, 0};
        if (_setjmp(sched)) continue;  // the fiber waits or is done
        if (f.state == RUN) _longjmp(f.jb, 1);
        f.state = RUN;
        getcontext(&start_ctx);
        start_ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK;
        start_ctx.uc_stack.ss_size = STACK;
        start_ctx.uc_link = nullptr;
        makecontext(&start_ctx, fiber_main, 0);
        setcontext(&start_ctx);
      }
      // every thread now waits or is done: release what may go on
      unsigned int done = 0, at_block = 0, at_warp = 0;
      bool released = false;
      for (unsigned int w = 0; w < block; w += 32) {
        unsigned int a = 0, d = 0;
        for (unsigned int t = w; t < w + 32; ++t) {
          a += fibers[t].state == AT_WARP;
          d += fibers[t].state == DONE;
        }
        if (a && a + d == 32) {
          if (d) {
            snprintf(err, errlen, "block %u: a warp shuffle in warp %u while %u of its lanes "
                     "had exited (undefined on a GPU)", b, w / 32, d);
            return -1;
          }
          for (unsigned int t = w; t < w + 32; ++t) fibers[t].state = RUN;
          released = true;
        }
      }
      if (released) continue;
      for (unsigned int t = 0; t < block; ++t) {
        done += fibers[t].state == DONE;
        at_block += fibers[t].state == AT_BLOCK;
        at_warp += fibers[t].state == AT_WARP;
      }
      if (done == block) break;
      if (at_block == block) {
        for (unsigned int t = 0; t < block; ++t) fibers[t].state = RUN;
        continue;
      }
      snprintf(err, errlen, "block %u: deadlock -- %u threads wait at __syncthreads, %u at a "
               "warp shuffle, %u have exited (a barrier in divergent code: a GPU would hang "
               "or be undefined)", b, at_block, at_warp, done);
      return -1;
    }
  }
  return 0;
}
"""

_SIGNATURE = {
    "cuda": re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?'
                       r"(bz_\w+)\(([^)]*)\)"),
    "metal": re.compile(r"\[\[kernel\]\] void (bz_[0-9a-f]+)\((.*)\) \{"),  # also MLX's
}
# Metal's thread-position parameters: the generator's (uint) and MLX's metal_kernel (uint3)
_THREAD = {"bz_tid": "bz_emu_tidx.x", "bz_bid": "bz_emu_bidx.x", "bz_bdim": "bz_emu_bdim.x",
           "bz_gdim": "bz_emu_gdim.x",
           "thread_position_in_threadgroup": "uint3{bz_emu_tidx.x, 0, 0}",
           "threadgroup_position_in_grid": "uint3{bz_emu_bidx.x, 0, 0}",
           "threads_per_threadgroup": "uint3{bz_emu_bdim.x, 1, 1}",
           "threadgroups_per_grid": "uint3{bz_emu_gdim.x, 1, 1}"}
_METAL_BUFFER = re.compile(r"b\d+|in\d+|out\d+")  # the generator's; MLX's inputs, outputs


def _launcher(g: GpuKernel, target: str) -> str:
    """The C entry point that launches ``g``: pointers and int64 args -> a typed call."""
    m = _SIGNATURE[target].search(g.source)
    if m is None or m.group(1) != g.symbol:
        raise BuildError(f"kernel {g.symbol}: no {target} kernel signature found")
    params = [re.sub(r"\s*\[\[.*?\]\]", "", p).strip()
              for p in re.split(r",\s+", m.group(2))]
    na = g.n_args
    if target == "cuda":  # buffers..., then the argument struct by value
        casts = [re.sub(r"\s*\w+$", "", p) for p in params[:-1]]
        call = [f"({c})bz_emu_p[{i}]" for i, c in enumerate(casts)] + ["a"]
    else:  # buffers (pointers in signature order), the argument buffer, thread positions
        call, casts = [], []
        for p in params:
            name = p.split()[-1]
            if _METAL_BUFFER.fullmatch(name):
                casts.append(re.sub(r"\s*\w+$", "", p))
                call.append(f"({casts[-1]})bz_emu_p[{len(casts) - 1}]")
            elif name in ("bz_a", "bz_args"):
                call.append("a.a")
            else:
                call.append(_THREAD[name])
    n = len(casts)
    return f"""
static void* bz_emu_p[{max(n, 1)}];
static int64_t bz_emu_a[{na}];
template <int N> struct bz_emu_args {{ int64_t a[N]; }};
static void bz_emu_entry(void) {{
  {"bz_args" if target == "cuda" else "bz_emu_args"}<{na}> a;
  for (int i = 0; i < {na}; ++i) a.a[i] = bz_emu_a[i];
  {g.symbol}({", ".join(call)});
}}
extern "C" __attribute__((visibility("default"))) int bz_emu_launch_{g.symbol}(
    unsigned int grid, unsigned int block, void** p, const int64_t* args, char* err,
    int errlen) {{
  for (int i = 0; i < {n}; ++i) bz_emu_p[i] = p[i];
  for (int i = 0; i < {na}; ++i) bz_emu_a[i] = args[i];
  return bz_emu_run(grid, block, bz_emu_entry, err, errlen);
}}
"""


# a kernel-scope threadgroup array (Metal allows them only there): one copy per threadgroup
_TG_DECL = re.compile(r"(^|;)(\s*)threadgroup (\w+ \w+\[\d+\];)", re.M)


def emulator_source(kernels: Sequence[GpuKernel], prelude: str, target: str = "cuda") -> str:
    """The kernel translation unit for ``kernels`` (``target``: 'cuda' or 'metal'; each
    kernel in its own namespace after one shared ``prelude``), with one
    ``bz_emu_launch_<symbol>`` entry point per kernel."""
    if target == "metal":
        head = [METAL_SHIM, prelude.replace("#include <metal_stdlib>\n", "")]
    else:
        head = [SHIM, prelude]
    parts = head
    for i, g in enumerate(kernels):
        if not g.source.startswith(prelude):
            raise BuildError(f"kernel {g.symbol} does not start with the {target} prelude")
        body = g.source[len(prelude):]
        if target == "metal":
            body = _TG_DECL.sub(r"\1\2static \3", body)
        parts.append(f"namespace bz_emu_k{i} {{\n{body}\n{_launcher(g, target)}}}\n")
    return "\n".join(parts)


def _build(source: str) -> Path:
    """Compile (or find in the kernel cache) the library of one kernel translation unit."""
    cmd = compiler()
    if cmd is None:
        raise BuildError("the CUDA emulator needs a C++ compiler (looked for $BRAZE_CXX, $CXX, "
                         "c++, g++, clang++)")
    key = hashlib.sha256("\0".join([source, RUNTIME, " ".join(FLAGS),
                                    compiler_version(tuple(cmd))]).encode()).hexdigest()[:32]
    lib = cache_dir() / f"cudaemu-{key}.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        k, r, out = Path(d) / "kernels.cpp", Path(d) / "runtime.cpp", Path(d) / "k.so"
        k.write_text(source)
        r.write_text(RUNTIME)
        try:
            p = subprocess.run([*cmd, *FLAGS, str(k), str(r), "-o", str(out)],
                               capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError(f"cannot run the C++ compiler for the CUDA emulator: {e}") from None
        if p.returncode != 0:
            raise BuildError("the CUDA emulator could not compile the kernel source",
                             (p.stdout + p.stderr).strip()[:20000])
        _atomic_write(lib, out.read_bytes())
    return lib


class EmulatedDevice:
    """A CUDA "device" on the host CPU, for :class:`~braze.backends.cuda.CudaBackend`
    (see the module docstring). ``build(kernels)`` compiles many kernels in one compiler
    run (a test corpus); ``load`` compiles one on demand."""

    name = "braze CUDA emulator (host CPU)"

    def __init__(self, sms: int = 4, target: str = "cuda") -> None:
        if target not in ("cuda", "metal"):
            raise ValueError(f"EmulatedDevice: target must be 'cuda' or 'metal', got {target!r}")
        self.sms = sms
        self.target = target  # "metal": the MSL generator's kernels, launched the same way
        self._memory: dict[int, np.ndarray] = {}
        self._launchers: dict[str, Any] = {}
        self._libs: list[ctypes.CDLL] = []  # the loaded libraries stay loaded
        self._lock = threading.Lock()  # the runtime's fibers and statics are per library

    # -- what CudaBackend asks of a driver
    def info(self) -> dict[str, Any]:
        return {"name": self.name, "cc": (9, 0), "sms": self.sms, "driver": 0}

    def malloc(self, nbytes: int) -> int:
        buf = np.full(nbytes + ALIGN, 255, np.uint8)
        ptr = buf.ctypes.data + (-buf.ctypes.data) % ALIGN
        self._memory[ptr] = buf
        return ptr

    def upload(self, ptr: int, host: np.ndarray) -> None:
        ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def download(self, host: np.ndarray, ptr: int) -> None:
        ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

    def synchronize(self) -> None:
        """Launches run synchronously here."""

    def build(self, kernels: Sequence[GpuKernel]) -> None:
        """Compile ``kernels`` together (one library) and make them launchable."""
        if self.target == "metal":
            from .metal.codegen import PRELUDE
        else:
            from .cuda.codegen import PRELUDE

        todo = {g.symbol: g for g in kernels if g.symbol not in self._launchers}
        if not todo:
            return
        source = emulator_source(list(todo.values()), PRELUDE, self.target)
        lib = ctypes.CDLL(str(_build(source)))
        with self._lock:
            self._libs.append(lib)
            for sym in todo:
                fn = getattr(lib, f"bz_emu_launch_{sym}")
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
                self._launchers[sym] = fn

    def load(self, g: GpuKernel, arch: str) -> str:
        """A launch handle for ``g`` (its symbol), compiling it if need be."""
        self.build([g])
        return g.symbol

    def launch(self, handle: str, grid: int, block: int, ptrs: Sequence[int],
               args: np.ndarray) -> None:
        fn = self._launchers[handle]
        args = np.ascontiguousarray(args, np.int64)
        p = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
        err = ctypes.create_string_buffer(1024)
        with self._lock:
            rc = fn(grid, block, p, args.ctypes.data, err, len(err))
        if rc != 0:
            raise EmulatorError(f"kernel {handle}: {err.value.decode()}")
