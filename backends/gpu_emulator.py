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
  (``emulator_kernels/cuda_shim.h``: ``__global__``/``__shared__``/``threadIdx``/
  ``__syncthreads``/``__shfl_xor_sync``/bit casts) in front of it -- the source itself is
  not edited;
* each block runs its threads as cooperative fibers on one OS thread (started with
  ``makecontext``, switched with ``_setjmp``/``_longjmp``: no system call per switch; the
  scheduler is ``emulator_kernels/runtime.cc``):
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
same way, behind a shim of the Metal library subset they use (``metal_shim.h``; real
semantics, unlike the type-checking shim in ``tests/mslshim``); threadgroup arrays become
one copy per group.

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
import functools
import hashlib
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import trust
from .cpu.build import (
    BuildError,
    _atomic_write,
    _private_dir,
    cache_dir,
    compiler,
    compiler_version,
)
from .gpusource import GpuKernel
from .kernel_sources import source as kernel_source

__all__ = ["EmulatedDevice", "EmulatorError", "emulator_source"]

FLAGS = ["-std=c++17", "-O1", "-fno-strict-aliasing", "-fPIC", "-shared",
         "-fvisibility=hidden", "-nostdinc++", "-w"]
MAX_BLOCK = 1024
ALIGN = 256


class EmulatorError(RuntimeError):
    """A launch the emulator refused or a barrier misuse it caught (message says which)."""


# The C++ lives in emulator_kernels/: cuda_shim.h / metal_shim.h start the kernel translation
# unit (then the dialect's prelude, then the kernels), runtime.cc is the fiber scheduler (its
# own translation unit); runtime_api.h is what both sides share.
_KERNEL_FILES = "emulator_kernels"


@functools.lru_cache(maxsize=4)
def _text(name: str) -> str:
    """An emulator source file with its quoted includes inlined (no ``#line`` markers: the
    prelude and the kernels follow the shims in one file)."""
    return kernel_source(__package__, f"{_KERNEL_FILES}/{name}", lines=False)


_SIGNATURE = {
    "cuda": re.compile(r'extern "C"\s+__global__\s+void\s+(?:__launch_bounds__\(\d+\)\s+)?'
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
    # the signature of g's symbol (a source may spell several under #if, as the matmul does)
    m = next((m for m in _SIGNATURE[target].finditer(g.source) if m.group(1) == g.symbol), None)
    if m is None:
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
        head = [_text("metal_shim.h"), prelude.replace("#include <metal_stdlib>\n", "")]
    else:
        head = [_text("cuda_shim.h"), prelude]
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
    runtime = _text("runtime.cc")
    key = hashlib.sha256("\0".join([source, runtime, " ".join(FLAGS),
                                    compiler_version(tuple(cmd))]).encode()).hexdigest()[:32]
    lib = cache_dir() / f"cudaemu-{key}.so"
    why = trust.entry_problem(lib)
    if why is not None:  # never loaded (backends/trust.py): built for this process
        lib = _private_dir(f"a kernel cache entry is not private: {why}") / lib.name
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        k, r, out = Path(d) / "kernels.cpp", Path(d) / "runtime.cpp", Path(d) / "k.so"
        k.write_text(source)
        r.write_text(runtime)
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

    def __init__(self, sms: int = 4, target: str = "cuda", blas: bool = False) -> None:
        if target not in ("cuda", "metal"):
            raise ValueError(f"EmulatedDevice: target must be 'cuda' or 'metal', got {target!r}")
        self.sms = sms
        self.blas = blas  # stand in for cuBLAS (gemm) too, as a machine with it installed
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

    def has_gemm(self) -> bool:
        return self.blas

    def gemm(self, is_double: bool, m: int, n: int, k: int, a: int, sa: int, b: int, sb: int,
             c: int, sc: int, batch: int) -> None:
        """cuBLAS's strided batched GEMM (row-major ``C[i] = A[i] @ B[i]``, batch strides
        in elements, 0 broadcasts) with numpy on device memory."""
        t = np.float64 if is_double else np.float32
        size = np.dtype(t).itemsize

        def view(ptr: int, stride: int, rows: int, cols: int) -> np.ndarray:
            n_el = stride * (batch - 1) + rows * cols
            flat = np.ctypeslib.as_array((ctypes.c_uint8 * (n_el * size)).from_address(ptr))
            flat = flat.view(t)
            return np.lib.stride_tricks.as_strided(flat, (batch, rows, cols),
                                                   (stride * size, cols * size, size))

        np.matmul(view(a, sa, m, k), view(b, sb, k, n), out=view(c, sc, m, n))

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
