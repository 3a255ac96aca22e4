"""Native dequantize-fused ``quantized_matmul`` for the ``cpu`` backend.

``y = x @ dequantize(wq, scales, biases).T`` without ever materializing the float
weight: each kernel reads the packed codes once, unpacks them in registers, applies
the group's affine map (``w = scale * code + bias``, one FMA per vector) and
accumulates against ``x``. Layout: MLX's affine groups (see ``graph/ops.py`` above
``QUANT_BITS``): row ``n`` of the (N, K) weight is ``K // group_size`` groups, codes
packed little-end first into uint32 words, so byte ``j`` of a 4-bit row holds
elements ``2j`` (low nibble) and ``2j + 1`` (high nibble).

Kernel (the C++ of ``kernels/qmatmul.cc``: ``qmatmul_common.h``, ``qmatmul_float.h`` and
``qmatmul_int8.h``, built per (bits, group_size, scale dtype) -- those are its macros --
through the backend's cache in :mod:`.build`, launched with the uniform kernel ABI
``kernel(void** bufs, const int64_t* args)`` of ``braze._core``):

* **Vectorization**, chosen at compile time from the ISA macros of ``-march=native``
  (the cache key holds the host's CPU features): AVX-512 (16 lanes), AVX2+FMA (8
  lanes) or portable scalar C++. A block of codes is zero-extended byte -> int32
  (``vpmovzxbd``); at 4 bits ``and 15`` gives the even elements and ``>> 4`` the odd
  ones, so x is de-interleaved once per launch into a scratch row (even elements of
  each block, then the odd ones) and no shuffle runs in the inner loop. 8-bit codes
  are already in element order.
* **Rows of x**: below 16 rows (decode, short prompts) the codes are unpacked in
  registers and each unpacked weight vector serves up to 4 rows of x; M = 1 keeps 4
  independent accumulators to hide the FMA latency. At 4 bits with AVX-512 the 16
  possible weights of a group are computed once (``fma(iota, scale, bias)``) and each
  code is a ``vpermps`` lane lookup (no int->float conversion, no mask). From 16 rows
  on (prefill), chunks of weight rows are dequantized into a float buffer once and
  multiplied by every row of x: AVX-512 computes ``out^T = W x^T`` (x transposed once
  per call; 8 weight rows x 32 rows of x in 16 registers, 2 loads + 8 broadcasts per
  16 FMAs, no horizontal sums; ~120 GFLOP/s per core here, about BLAS sgemm), AVX2 a
  4x2 dot-product kernel. Where the weight's int8-GEMM tiles exist (AVX-512 VNNI builds,
  ``PREPACK``; decoding has made them), the exact path from 16 rows on reads those tiles
  instead: per element, 16 weight rows' codes become float32 weights ``fma(code, s, b)``
  in one register (4 operations) that serve 16 rows of x (16 FMAs with x broadcast from
  memory, the outputs' 16 lanes stored contiguously). No dequantized copy goes through
  memory and every output is one chain over k in element order whatever M, the row
  block or the thread (batch invariant). SmolLM2-135M's pre-fill matmuls at 24 rows
  (an 18-token prompt after a cached system prompt) ~2x faster; see the README.
* **Threads**: OpenMP, the N rows split evenly between threads; small problems run
  on one thread (a parallel region costs more than they do).
* **Prefetch** (M < 16 paths, int8 and exact): each pass issues ``prefetcht0`` for the
  codes, scales and biases of the weight rows ``BZ_PF_ROWS`` (8) rows ahead, so the next
  rows stream in from DRAM while these compute (decode reads every weight once per token,
  from memory, and the hardware prefetcher alone left the loads exposed: SmolLM2-135M's
  4-bit matvecs of one token on one thread 8.9 -> 6.2 ms). No effect on the results.
* **Per-call Python work**: the launch-ready state of a weight (kernel handle, VNNI level,
  argument arrays per (M, threads, int8)) is cached per (wq, scales, biases) objects,
  holding only weak references (the entry leaves with the arrays); float16 scales are
  passed as they are (the kernel reads raw 16-bit words).
* **int8 activations** (``act="int8"``, M <= ``INT8_MAX_M`` = 8, kernels compiled with
  AVX-512 VNNI, or AVX-VNNI at the AVX2 level; elsewhere the exact path runs): each row
  of x is quantized once per call per block of 32 (``dx = max|x| / 127``, ``q =
  rint(x / dx)``, int8), with per-block ``sum(x)`` and per-group sums for the bias. The
  codes stay bytes: ``vpdpbusd`` (u8 code x s8 q -> int32) at 64 elements per AVX-512
  instruction. 4 bits: 64 packed bytes (4 blocks) split by one ``and`` / one ``shift +
  and`` into low and high nibbles, x de-interleaved per chunk of 128 at quantization so
  no shuffle runs in the loop; the odd tail (K % 128) unpacks words ``(w | w << 4) &
  0x0f0f`` in natural order. Per chunk: two chained ``vpdpbusd``, one int->float
  conversion, one ``vpermps`` to spread the 4 blocks' combined scales ``s * dx``
  (precomputed per row), one FMA. 4 weight rows x up to 4 x rows per pass, one
  accumulator chain per output (the same arithmetic whatever the blocking or thread:
  1 and 2 threads give identical results). ``y = sum_blk s*dx*idot + sum_g b*sum(x_g) +
  Z * sum_blk s*(sum(x_blk) - dx*sum(q_blk))``: the last term centres the codes
  (``Z`` = 8 at 4 bits, 128 at 8) exactly, which halves the error.
  Bound (asserted by the tests): ``|y - y64| <= 0.5 * sum_blk |s| * dx * sum_k |code_k -
  Z|`` + float32 rounding. Measured on SmolLM2-135M's weights (all 30 layers' qkv,
  o, gate_up, down at 4 bits; the 8-bit tied embedding as lm_head) against the exact
  path, ``||y_int8 - y|| / ||y||``: captured decode activations median 0.7-0.9 %, max
  2.0 % (4 bits), median 0.7 %, max 1.0 % (8 bits); random normal x median 0.5-0.6 %.
  Per matvec on one thread (hot cache, this 2-core AVX-512 host): 576x3072 4-bit
  95 -> 50 us, 1536x576 47 -> 17 us; the 8-bit lm_head is memory bound (1.2x).
* **int8 GEMM** (``act="int8"``, M > ``INT8_MAX_M``, 4-bit weights, AVX-512 VNNI kernels;
  the AVX-VNNI kernel runs the matvec path above for every M; 8-bit weights run the exact
  path): the same quantization of x (dx, q, the centring ``ez`` and group sums, rows
  quantized in parallel, each block stored as its 16 even elements then its 16 odd
  ones) and the same bound, but the output's 16 lanes are 16 weight rows: per call
  each tile of 16 rows is repacked (per block of 32, 4 vectors of one dword = 8 codes
  per row; scales and biases to float32 per lane), its nibbles split once per block and
  reused by 8 rows of x: per (row of x, block), 8 ``vpdpbusd`` against broadcast dwords
  of q into an int32 chain, then ``t = idot * dx + ez``, ``acc += t * s`` (``+ b *
  sum(x_g)`` at a group's first block). Every output is one chain over the blocks
  whatever the row block, tile or thread (1 and 2 threads give identical results);
  OpenMP over tiles. SmolLM2-135M prefill shapes at M = 96 on 2 threads (this host):
  2.0-3.3x the tiled float path (~420 vs ~140 GFLOP/s), end to end 84-token prefill 440
  -> ~800 tok/s. Not under ``auto``: with int8 prefill (the qkv projection alone
  suffices) SmolLM2 no longer answers "Paris" in ``examples/llm/chat.py`` (the relative
  errors, 0.3-1 %, are those of the decode path, but every cached key/value carries them).
* **Prepacked int8 GEMM** (AVX-512 VNNI or AVX2, int8 activations against 4-bit weights
  (AVX2: 4 and 8 bits), every M; ``act="invariant"`` at 4 and 8 bits): the weight's tiles of
  16 rows (codes as dwords per block and lane, scales and biases per lane) are repacked once
  per weight -- cached with the weight's state, a replay plan's derived buffer -- and the
  GEMM above reads them as they are: at one row of x it is 1.3-1.8x faster than the matvec
  path (no per-output horizontal sums, 16 outputs per instruction), and every row of the
  result is computed the same way whatever M (batch invariant). ``BRAZE_QMM_PREPACK=0``
  turns it off for "auto"/"int8" (no second copy of the codes in memory). On AVX2 without
  VNNI the same tiles and arithmetic on 8-lane vectors: a pass takes a whole tile (two
  halves of 8 rows) against 4 rows of x, each dword column's nibbles split once for the
  pass, per column and row ``vpmaddubsw`` against broadcast dwords of q summed in int16 over
  the block (a nibble <= 15 times |q| <= 128: no overflow), one ``vpmaddwd`` to int32 -- the
  integers ``vpdpbusd`` gives -- then the same epilogue, so the same bits as AVX-512. 8-bit
  codes are split into nibbles too (two rows of x per pass, ``idot = 16 * idot(hi) +
  idot(lo)``): AVX2 runs int8 against the 8-bit lm_head through the GEMM (it has no 8-bit
  matvec path: a code times q overflows ``vpmaddubsw``'s int16 pairs). The rows' broadcasts
  and products are inline assembly: gcc's allocation of the intrinsics spilled the pass's
  codes and sums. At 16 rows ~2x the previous kernel (one half tile against 8 rows, all in
  intrinsics), at one row 1.3-2.7x faster than the AVX2 int8 matvec (SmolLM2's shapes,
  ``BRAZE_ISA=avx2`` on a Zen 4; figures in the README).
* **Intel AMX** (``kernels/qmatmul_amx.h``; compiled where the compiler targets AMX-INT8
  and AMX-BF16, used once Linux grants the tile state; ``BRAZE_QMM_AMX=0``, read at import
  and by ``reload_env()``, keeps it off; a tactic, timed against the AVX-512 path): the int8
  GEMM's blocks of 16 rows of x run one ``tdpbsud`` per block of 32 and 16 weight rows (the
  128 ``vpdpbusd`` of the AVX-512 block) with the same float epilogue, operation for
  operation -- the same bits, so rows past the last full 16 run the AVX-512 path and
  batch invariance holds; float x against the prepacked tiles runs ``tdpbf16ps`` on x split
  exactly into three bfloat16 parts (hi + mid + lo == x: truncations) against the codes as
  bfloat16 (integers below 256: exact), summing each block's 32 products in float32 before
  ``acc = fma(sum, s, acc)`` -- no approximation, ~4x smaller errors than the AVX-512 float
  path's; every row of x alike (the last block's missing rows are zeros). Figures: the
  README (``benchmarks/autotune.py``).
* **16-bit activations** (``act="int16"``; AVX-512 VNNI at 4 and 8 bits, AVX2 at 4 bits, else
  the exact path): x per block of 32 rounded to integers ``v`` with ``|v| <= 32639``
  (``dx = amax / 32639``) and stored as two int8 planes, ``hi = floor((v + 128) / 256)`` and
  ``lo = v - 256 hi`` (both in -128..127), through the prepacked GEMM above: per block and
  row two ``vpdpbusd`` chains (AVX2: two ``vpmaddubsw`` sums), ``256 * hi + lo`` in int32
  (<= 255 * 32639 * 32 < 2^31), then the int8 epilogue. The int8 bound with that dx: ~250x
  smaller than int8's (measured ~3e-5 relative against ~2e-7 for the exact path: a
  thousandth of the 4-bit weights' own error), batch invariant, and the dot products at the
  int8 GEMM's rate: pre-fill float32 x against 4-bit tiles is FMA-bound, the 8-bit lm_head
  matvec's float dequantization was compute-bound at ~30 GB/s.
* **Which activations** (``BRAZE_QMM_ACT`` = ``auto`` | ``int8`` | ``float`` | ``int16`` |
  ``invariant``, read at import, again by ``reload_env()``; ``act=`` overrides): the default
  ``auto`` runs int8 against 4-bit weights up to ``INT8_MAX_M`` rows and 16-bit activations
  for more rows and against 8-bit weights with AVX-512 VNNI (elsewhere, and with
  ``BRAZE_QMM_PREPACK=0``, the exact path there: on AVX2 the two planes' ``vpmaddubsw`` were
  no faster than exact float32 at pre-fill -- README). At 4 bits the int8 error (< 1 %) is
  far below the weights' own quantization error (~10 %) and the matvecs are 1.5-2.8x faster;
  at 8 bits it would double the weights' error, and on SmolLM2 it flips the greedy answer
  of ``tests/test_llm.py`` when the 8-bit lm_head runs int8, as int8 pre-fill does
  ("L'Étoile" before "The capital"): 16-bit activations do neither.
* **Accuracy** (exact-float path): every weight is ``fma(code, s, b)``
  in float32 (the reference rounds ``code * s`` then adds ``b``: at most one ulp of
  the weight apart) and the products are summed in float32 in a different order than
  BLAS. Against a float64 evaluation of the dequantized weight (asserted by
  ``tests/test_quantized.py`` for every ISA path, M = 1 ... 33, K up to 384):
  ``|y - y64| <= 1e-5 * (|x| @ (|code * scale| + |bias|).T)`` elementwise. No
  approximation of x is made.
* **Fallbacks**: no compiler / a failed build -> the numpy reference (dequantize then
  matmul) after **one** ``RuntimeWarning``; x of another float dtype is computed in
  float32 and the result cast once (as the reference does); scales/biases of
  different dtypes or other than float32/float16 are converted to float32.

* **Tactics** (:mod:`.tactics`): the kernel's compile-time ``VARIANTS`` (prefetch distance,
  int8 weight rows per pass) x 1 or all threads, all giving the same bits; the first call of
  a problem (bucketed M, N, K, activations) times the cheap ones on its operands
  (``BRAZE_AUTOTUNE=max``: all, building the variants), replay plans use the stored winner.

``BRAZE_QMM_ISA`` (0 scalar, 1 AVX2, 2 AVX-512, 3 NEON) caps the instruction set (tests
exercise every path on one machine); it can only lower what the host has (on AArch64 any
cap below 3 is scalar). ``BRAZE_ISA`` (``build.py``) sets the compiler's target instead.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _core
from ...graph import dtypes as dt
from ...graph.ops import (
    QUANT_ACT_MODES,
    QUANT_BITS,
    QUANT_GROUPS,
    QUANTIZED_MATMUL,
    qmm_ref,
    quant_check,
    reference_eval,
)
from ...graph.view import View
from ..kernel_sources import source as _kernel_source
from ..replay import NativeLibraryCall
from . import build as _build
from . import default_num_threads
from . import tactics as _tactics_mod
from .library import KernelFamily, NativeOp

__all__ = ["QuantizedMatmul", "VARIANTS", "act_mode", "amx_available", "host_isa",
           "int8_available", "kernel_isa", "problem_key", "quantized_matmul", "reload_env",
           "source", "tactic_report"]

ISA_NAMES = {0: "scalar", 1: "avx2", 2: "avx512", 3: "neon"}
PARALLEL_WEIGHTS = 1 << 17  # N*K*max(1, M/4) below this runs on one thread
INT8_MAX_M = 8  # rows of x up to which int8 runs the matvec path (BZ_I8_MMAX), then GEMM
GEMM_VNNI = (2, 3)  # VNNI levels with the int8 GEMM over prepacked tiles (AVX-512, AVX2)
TILE_M = 16  # rows of x from which the exact path runs tiled (BZ_TILE_M)
ACT_MODES = QUANT_ACT_MODES
# int8 activations against 4-bit weights on AVX-512 VNNI run the GEMM over weight tiles
# repacked once (a second copy of the codes, float16 scales kept 16-bit: ~1.25x the 4-bit
# weights' memory) at every M; BRAZE_QMM_PREPACK=0 (read at import): the matvec path up to
# INT8_MAX_M rows and no copy
PREPACK = os.environ.get("BRAZE_QMM_PREPACK", "1") != "0"
# the GEMMs on Intel AMX where the CPU and OS have it (the int8 GEMM's 16-row blocks: the
# same bits as the AVX-512 VNNI path; float x against the tiles: bfloat16 parts, other bits);
# BRAZE_QMM_AMX=0 (read at import, and by reload_env()): off
AMX = os.environ.get("BRAZE_QMM_AMX", "1") != "0"
DEFAULT_ACT = "auto"  # int8 for a few rows against 4-bit weights, else 16-bit where compiled


def host_isa() -> int:
    """The best kernel ISA level this CPU runs under the build target (``BRAZE_ISA``):
    2 AVX-512, 1 AVX2+FMA, 3 NEON (AArch64), 0 scalar.

    >>> host_isa() in (0, 1, 2, 3)
    True
    """
    feats = set(_core.cpu_features())
    if "neon" in feats:
        return 3
    level = 2 if "avx512f" in feats else 1 if {"avx2", "fma"} <= feats else 0
    return {"avx2": min(level, 1), "scalar": 0}.get(_build.target(), level)


def _isa_cap(isa: int | None) -> int | None:
    if isa is None:
        return _ENV_ISA
    if isa not in ISA_NAMES:
        raise ValueError(f"quantized_matmul: isa must be 0 (scalar), 1 (avx2), 2 (avx512) or "
                         f"3 (neon), got {isa!r}")
    return isa


def _env_isa() -> int | None:
    env = os.environ.get("BRAZE_QMM_ISA")
    if not env:
        return None
    if env not in ("0", "1", "2", "3"):
        raise ValueError(f"BRAZE_QMM_ISA must be 0, 1, 2 or 3, got {env!r}")
    return int(env)


_ENV_ISA = _env_isa()  # read at import
_ENV_ACT = os.environ.get("BRAZE_QMM_ACT") or None  # read at import (an env lookup per call
# cost ~1 us, ~1 % of a decode token)


def reload_env() -> None:
    """Re-read ``BRAZE_QMM_ACT``, ``BRAZE_QMM_ISA`` and ``BRAZE_QMM_AMX`` (read once, at
    import).

    >>> reload_env()
    """
    global _ENV_ISA, _ENV_ACT, AMX
    _ENV_ISA = _env_isa()
    _ENV_ACT = os.environ.get("BRAZE_QMM_ACT") or None
    AMX = os.environ.get("BRAZE_QMM_AMX", "1") != "0"


# Compile-time variants, the tactics' build axis (with the thread count, the runtime one):
# (BZ_PF_ROWS: rows prefetched ahead, BZ_I8_RB: weight rows per int8 pass). Every variant
# keeps one summation chain per output, so all give the same bits; the first is the
# default build.
VARIANTS: tuple[tuple[int, int], ...] = ((8, 4), (16, 4), (4, 4), (8, 2))


def source(bits: int, group_size: int, half: bool, isa: int | None = None,
           variant: tuple[int, int] = VARIANTS[0]) -> tuple[str, str]:
    """(C++ source, symbol) of the kernel for one (bits, group_size, scale dtype).

    ``half``: scales and biases are float16 (else float32); ``isa`` caps the
    instruction set (None: the best the compiler's ``-march=native`` allows);
    ``variant``: (prefetch rows, int8 rows per pass), one of ``VARIANTS``.

    >>> src, sym = source(4, 64, False)
    >>> sym
    'bz_qmm_b4_g64_f32'
    """
    sym = f"bz_qmm_b{bits}_g{group_size}_{'f16' if half else 'f32'}"
    defs: dict[str, object] = {"BZ_BITS": bits, "BZ_GS": group_size, "BZ_HALF": int(half)}
    if isa is not None:
        defs["BZ_ISA_MAX"] = isa
        sym += f"_isa{isa}"
    if variant != VARIANTS[0]:
        defs["BZ_PF_ROWS"], defs["BZ_I8_RB"] = variant
        sym += f"_pf{variant[0]}_rb{variant[1]}"
    defs["BZ_SYMBOL"] = sym
    return _kernel_source(__package__, "kernels/qmatmul.cc", defs), sym


_KERNELS = KernelFamily(lambda key: source(*key))


def _handle(bits: int, group_size: int, half: bool, isa: int | None,
            variant: tuple[int, int] = VARIANTS[0]) -> int:
    """The loaded kernel (built on first use); raises BuildError."""
    return _KERNELS.handle((bits, group_size, half, isa, variant))


@functools.lru_cache(maxsize=64)
def _tactics(bits: int, group_size: int, half: bool, isa: int | None, num_threads: int
             ) -> tuple[_tactics_mod.Tactic, ...]:
    """Every (variant, threads, AMX or not) tactic of one kernel; a variant other than the
    default build is cheap only when its kernel is cached already (BRAZE_AUTOTUNE=max
    builds it). AMX tactics exist where the kernel can use AMX, valid where the problem
    runs a GEMM on 16+ rows (``problem["amx"]``)."""
    out = []
    amx_axis = (False, True) if _levels(bits, group_size, half, isa)[2] else (False,)
    for variant in VARIANTS:
        cheap = variant == VARIANTS[0] or _build.is_cached(
            *source(bits, group_size, half, isa, variant))
        for threads in sorted({1, num_threads}):
            for amx in amx_axis:
                out.append(_tactics_mod.Tactic(
                    f"pf{variant[0]}-rb{variant[1]}-t{threads}" + ("-amx" if amx else ""),
                    {"variant": variant, "threads": threads, "amx": amx}, cheap,
                    valid=functools.partial(_tactic_applies, variant, amx, threads)))
    return tuple(out)


def _tactic_applies(variant: tuple[int, int], amx: bool, threads: int, problem: Any) -> bool:
    # rows per pass is an int8-path parameter: elsewhere it changes nothing, as both are
    # in the GEMMs over tiles; AMX where the problem can run there, and for float x against
    # the tiles only AMX then (the AVX-512 float path sums in another order: other bits).
    # One thread never for a streamed matvec: in a model its weight comes from memory, where
    # every core's share of the bandwidth counts (one thread timed faster on its own, cold
    # or hot, and made SmolLM2's decode step ~4 % slower)
    gemm = bool(problem.get("gemm", 0))
    if threads == 1 and problem.get("streamed", 0):
        return False
    return (variant == VARIANTS[0] or (not gemm and (
        variant[1] == VARIANTS[0][1] or bool(problem["int8"])))) and (
        bool(problem["amx"]) if amx else not (problem["amx"] and not problem["int8"]))


def _tactic_key(bits: int, group_size: int, half: bool, isa: int | None, m: int, n: int,
                k: int, int8: bool, num_threads: int, invariant: bool = False,
                tiles: bool = False, x16: bool = False) -> str:
    mode = "int16" if x16 else ("inv-" if invariant else "") + ("int8" if int8 else "float")
    return (f"quantized_matmul:b{bits}:g{group_size}:{'f16' if half else 'f32'}:"
            f"isa{_build.target() if isa is None else isa}:M{_tactics_mod.bucket(m)}:N{n}:K{k}:"
            f"{mode}:T{num_threads}" + (":tiles" if tiles else ""))


def _float_tiles(vnni: int, int8: bool, m: int) -> bool:
    """Whether a call runs exact float x against the weight's prepacked int8-GEMM tiles
    (TILE_M+ rows, AVX-512 VNNI builds, PREPACK)."""
    return PREPACK and not int8 and vnni == 2 and m >= TILE_M


def _default_tactic(tactics: tuple[_tactics_mod.Tactic, ...], threads: int, amx: bool = False
                    ) -> _tactics_mod.Tactic:
    """The heuristic's choice: the default build at the heuristic's thread count, on AMX
    where the problem can run there."""
    return next(t for t in tactics if t.params["variant"] == VARIANTS[0]
                and t.params["threads"] == threads and t.params["amx"] == amx)


def tactic_report(x_shape: tuple[int, ...], n: int, k: int, bits: int, group_size: int,
                  half: bool, act: str | None = None, num_threads: int | None = None
                  ) -> dict[str, Any] | None:
    """What tuning found for a problem (:func:`braze.backends.cpu.tactics.report`), or None
    (not tuned: ``BRAZE_AUTOTUNE=0``, or no other tactic applies, as on one core).

    >>> from braze.arrays.quantized import pack
    >>> wq, s = pack(np.zeros((64, 64)), 4), np.ones((64, 2), np.float32)
    >>> b = np.zeros((64, 2), np.float32)
    >>> _ = quantized_matmul(np.ones((1, 64), np.float32), wq, s, b, group_size=32, bits=4)
    >>> rep = tactic_report((1, 64), 64, 64, 4, 32, False)
    >>> rep is None or rep["chosen"] in rep["timings_us"]
    True
    """
    m = int(np.prod(x_shape[:-1])) if len(x_shape) > 1 else 1
    return _tactics_mod.report(problem_key(bits, group_size, half, _ENV_ISA, m, n, k, act,
                                           num_threads or default_num_threads()))


def _paths(bits: int, group_size: int, half: bool, isa: int | None, m: int, act: str | None
           ) -> tuple[bool, bool, bool, bool, bool]:
    """(int8, invariant, float_tiles, amx, x16): which kernel paths an (M, K) x runs."""
    _, vnni, amx_ok = _levels(bits, group_size, half, isa)
    int8 = _int8(vnni, m, bits, act)
    invariant = _invariant(vnni, int8, bits, act)
    x16 = not int8 and _x16(vnni, m, bits, act)
    # the int8 GEMM on 16+ rows of x, and float x against the tiles, can run their dot
    # products on AMX (BRAZE_QMM_AMX); the 16-bit GEMM does not
    gemm = int8 and vnni == 2 and (invariant or (m > INT8_MAX_M and bits == 4))
    float_tiles = _float_tiles(vnni, int8 or x16, m)
    return (int8, invariant, float_tiles,
            AMX and (gemm or float_tiles) and m >= 16 and amx_ok, x16)


def _kernel_params(fn: str, bits: int, group_size: int, half: bool
                   ) -> tuple[int, int, bool]:
    """(bits, group_size, half) checked for a public query about a kernel (a kernel of other
    parameters would not build, or answer for nothing that runs)."""
    if bits not in QUANT_BITS or group_size not in QUANT_GROUPS:
        raise ValueError(f"qmatmul.{fn}: bits must be one of {QUANT_BITS} and group_size one "
                         f"of {QUANT_GROUPS}, got bits={bits!r}, group_size={group_size!r}")
    return bits, group_size, bool(half)


def problem_key(bits: int, group_size: int, half: bool, isa: int | None, m: int, n: int,
                k: int, act: str | None, num_threads: int) -> str:
    """The tactic key of an (M, K) x against (N, K) weights: what tuning stores per problem.

    >>> problem_key(4, 32, False, 0, 3, 64, 64, None, 2)
    'quantized_matmul:b4:g32:f32:isa0:M4:N64:K64:float:T2'
    """
    _kernel_params("problem_key", bits, group_size, half)
    int8, invariant, float_tiles, amx, x16 = _paths(bits, group_size, half, isa, m, act)
    return _tactic_key(bits, group_size, half, isa, m, n, k, int8, num_threads, invariant,
                       float_tiles, x16) + (":amx" if amx else "")


def _levels(bits: int, group_size: int, half: bool, isa: int | None
            ) -> tuple[int, int, bool]:
    """(ISA level, VNNI level, AMX usable by the GEMM) of a kernel (built on first use)."""
    key = (bits, group_size, half, isa)
    lv = _levels_cache.get(key)
    if lv is None:
        h = _handle(bits, group_size, half, isa)
        box = np.zeros(3, np.int64)
        _core.launch(h, [box] * 6, np.array([1, -1, 0, 0, 0], np.int64))
        lv = _levels_cache[key] = (int(box[0]), int(box[1]), bool(box[2]))
    return lv


_levels_cache: dict[tuple[int, int, bool, int | None], tuple[int, int, bool]] = {}


def amx_available(bits: int = 4, group_size: int = 32, half: bool = False,
                  isa: int | None = None) -> bool:
    """Whether that kernel's GEMMs can run on Intel AMX: compiled for a CPU with AMX-INT8 and
    AMX-BF16, and the OS grants the tile state (``BRAZE_QMM_AMX=0`` keeps it off all the
    same). The int8 GEMM gives the same bits either way; exact float x against the tiles
    (16+ rows) other bits, within the same bound.

    >>> amx_available(isa=1)  # the AVX2 build has no int8 GEMM
    False
    """
    return _levels(*_kernel_params("amx_available", bits, group_size, half), _isa_cap(isa))[2]


def kernel_isa(bits: int = 4, group_size: int = 32, half: bool = False,
               isa: int | None = None) -> int:
    """The ISA level the kernel for these parameters was compiled with (builds it).

    >>> kernel_isa() == host_isa()
    True
    """
    return _levels(*_kernel_params("kernel_isa", bits, group_size, half), _isa_cap(isa))[0]


def int8_available(bits: int = 4, group_size: int = 32, half: bool = False,
                   isa: int | None = None) -> bool:
    """Whether that kernel has the int8-activation path (compiled with AVX-512 VNNI,
    AVX-VNNI, AVX2's ``vpmaddubsw`` or NEON); without it every call runs the exact float
    path.

    >>> int8_available(isa=0)
    False
    """
    return _levels(*_kernel_params("int8_available", bits, group_size, half), _isa_cap(isa))[1] > 0


def act_mode(act: str | None = None) -> str:
    """The activation mode a call runs with: ``act`` if given, else ``BRAZE_QMM_ACT``
    (read at import and by ``reload_env()``), else ``DEFAULT_ACT`` (``"auto"``: int8
    for a few rows against 4-bit weights, else 16-bit integers where the kernel has them).

    >>> act_mode("float")
    'float'
    """
    if act is None and _ENV_ACT is None:
        return DEFAULT_ACT
    mode = act if act is not None else _ENV_ACT
    if mode not in ACT_MODES:
        src = "act" if act is not None else "BRAZE_QMM_ACT"
        raise ValueError(f"quantized_matmul: {src} must be one of {ACT_MODES}, got {mode!r}")
    return mode


_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)
_NO_SCRATCH = np.empty(1, np.float32)  # 8 bits: x is read in place


class _Weights:
    """A weight's launch-ready state, cached per (wq, scales, biases) objects: the kernel
    handle, its VNNI level, and per (M, threads, act) the tactic's handle, arguments and
    scratch size."""

    __slots__ = ("refs", "h", "vnni", "half", "args", "packed", "__weakref__")

    def __init__(self, refs: tuple[Any, ...], h: int, vnni: int, half: bool = False) -> None:
        self.refs = refs
        self.h = h
        self.vnni = vnni
        self.half = half
        self.args: dict[tuple[int, int, str, bool], tuple[int, np.ndarray, int]] = {}
        self.packed: np.ndarray | None = None  # the GEMM's repacked tiles ("invariant")


# (id(wq), id(scales), id(biases), group_size, bits, isa) -> _Weights; an entry holds only
# weak references to the arrays (checked on every hit) and leaves when one of them dies
_wcache: dict[tuple[int, int, int, int, int, int | None], _Weights] = {}


def _prepared(wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int,
              bits: int, isa: int | None) -> _Weights | None:
    """The cached state of weights that need no conversion (float16 or float32 scales and
    biases of one dtype, all C-contiguous numpy arrays); None for the others."""
    key = (id(wq), id(scales), id(biases), group_size, bits, isa)
    e = _wcache.get(key)
    if e is not None:
        r = e.refs
        if r[0]() is wq and r[1]() is scales and r[2]() is biases:
            return e
    sd = scales.dtype
    if (type(wq) is not np.ndarray or type(scales) is not np.ndarray
            or type(biases) is not np.ndarray or sd != biases.dtype or sd not in (_F16, _F32)
            or not (scales.flags.c_contiguous and biases.flags.c_contiguous
                    and wq.flags.c_contiguous)):
        return None
    half = sd == _F16
    h = _handle(bits, group_size, half, isa)
    vnni = _levels(bits, group_size, half, isa)[1]

    def drop(_: Any, key: tuple[int, int, int, int, int, int | None] = key) -> None:
        _wcache.pop(key, None)

    e = _Weights((weakref.ref(wq, drop), weakref.ref(scales, drop), weakref.ref(biases, drop)),
                 h, vnni, half)
    if len(_wcache) > 4096:  # stale entries whose arrays live on elsewhere
        _wcache.clear()
    _wcache[key] = e
    return e


def _native(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
            group_size: int, bits: int, num_threads: int, isa: int | None,
            act: str | None = None) -> np.ndarray:
    """The kernel's float32 result (x already float32, shapes already checked)."""
    k = x.shape[-1]
    n = wq.shape[0]
    x2 = x if x.ndim == 2 else x.reshape(-1, k)
    if not x2.flags.c_contiguous:
        x2 = np.ascontiguousarray(x2)
    m = x2.shape[0]
    if m == 0 or n == 0 or k == 0:
        return np.zeros(x.shape[:-1] + (n,), np.float32)
    e = _prepared(wq, scales, biases, group_size, bits, isa)
    if e is None:  # converted copies (the kernel reads float16 as raw 16-bit words)
        sd, bd = scales.dtype, biases.dtype
        if not (sd == bd and sd in (_F16, _F32)):
            scales, biases = scales.astype(np.float32), biases.astype(np.float32)
        scales, biases, wq = (np.ascontiguousarray(a) for a in (scales, biases, wq))
        half = scales.dtype == _F16
        e = _Weights((), _handle(bits, group_size, half, isa),
                     _levels(bits, group_size, half, isa)[1], half)
    akey = (m, num_threads, act_mode(act), AMX)  # (the env may change: reload_env)
    launch = e.args.get(akey)
    if launch is None:
        launch = _launch(e, m, n, k, bits, group_size, isa, num_threads, act,
                         (x2, wq, scales, biases))
        if e.refs:  # (a converted copy's state is rebuilt every call: nothing to keep)
            e.args[akey] = launch
    h, args, scratch_len = launch
    out = np.empty((m, n), np.float32)
    scratch = np.empty(scratch_len, np.float32) if scratch_len else _NO_SCRATCH
    bufs = [x2, wq, scales, biases, out, scratch]
    if args[5]:  # the weight's tiles, repacked once (the int8 GEMM, or float x at TILE_M+ rows)
        bufs.append(_packed_tiles(e, h, wq, scales, biases, n, k, num_threads))
    _core.launch(h, bufs, args)
    return out if x.ndim == 2 else out.reshape(x.shape[:-1] + (n,))


def packed_bytes(h: int, n: int, k: int) -> int:
    """Bytes of kernel ``h``'s repacked GEMM tiles for an (N, K) weight; 0 when the kernel
    has no int8 GEMM (it needs AVX-512 VNNI).

    >>> packed_bytes(_handle(4, 32, False, 0), 16, 64)  # the scalar build: no GEMM
    0
    """
    box = np.zeros(1, np.int64)
    _core.launch(h, [box] * 7, np.array([1, -3, n, k, 0, 0], np.int64))
    return int(box[0])


def prepack(h: int, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, n: int, k: int,
            num_threads: int = 1) -> np.ndarray:
    """The (N, K) weight's tiles as kernel ``h``'s int8 GEMM reads them (see the kernel's
    ``bz_gemm_prepack``), repacked once instead of per call (the repacking was ~40 % of a
    one-row product) for every launch that runs the batch-invariant GEMM
    (:func:`_invariant`). A 1-byte placeholder when the kernel has no GEMM. Reads the
    buffers' first N rows (views' owning buffers are fine).
    """
    size = packed_bytes(h, n, k)
    out = np.empty(max(size, 1), np.uint8)
    if size:
        threads = 1 if n * k < PARALLEL_WEIGHTS else num_threads
        _core.launch(h, [wq, wq, scales, biases, out, out, out],
                     np.array([threads, -2, n, k, 0, 0], np.int64))
    return out


def _int8(vnni: int, m: int, bits: int, act: str | None) -> bool:
    """Whether a call runs int8 activations: M <= INT8_MAX_M at 4 bits under auto (and
    any bits under "int8"); the GEMM (M > INT8_MAX_M) at 4 bits under "int8" only (under
    auto it flips SmolLM2's answer); any M and bits under "invariant"; never without an
    int8 dot product compiled."""
    mode = act_mode(act)
    return vnni > 0 and (
        mode == "invariant" or
        (m <= INT8_MAX_M and (mode == "int8" or (mode == "auto" and bits == 4)))
        or (m > INT8_MAX_M and bits == 4 and mode == "int8"))


def _x16(vnni: int, m: int, bits: int, act: str | None) -> bool:
    """Whether a call runs 16-bit activations (act 3: the GEMM over the prepacked tiles,
    where compiled: AVX-512 VNNI, and AVX2 at 4 bits): under "int16", and under "auto" on
    AVX-512 VNNI where int8 does not run (more than INT8_MAX_M rows at 4 bits; 8 bits)
    unless ``BRAZE_QMM_PREPACK=0`` (on AVX2 the two vpmaddubsw planes are no faster than
    exact float32 FMAs: auto keeps the exact path there)."""
    mode = act_mode(act)
    return (mode == "int16" and (vnni == 2 or (vnni == 3 and bits == 4))) or (
        mode == "auto" and PREPACK and vnni == 2 and (bits == 8 or m > INT8_MAX_M))


def _invariant(vnni: int, int8: bool, bits: int, act: str | None) -> bool:
    """Whether a call runs the kernel's batch-invariant path (act 2): under "invariant",
    and for int8 against 4-bit weights on AVX-512 VNNI and AVX2, and 8-bit ones on AVX2
    (the prepacked GEMM at every M: faster than the matvec path even at one row, the same
    int8 bound; AVX2 has no 8-bit matvec path) unless ``BRAZE_QMM_PREPACK=0`` (AVX2 at 8
    bits: the GEMM repacks each call's tiles)."""
    return act_mode(act) == "invariant" or (
        PREPACK and int8 and vnni in GEMM_VNNI and (bits == 4 or vnni == 3))


class _Problem:
    """One (M, K) x against a weight's N rows: the paths it runs, its tactics (valid ones
    per ``problem``), the heuristic's default, its tuning key, and per tactic the kernel
    handle and arguments."""

    def __init__(self, e: _Weights, m: int, n: int, k: int, bits: int, group_size: int,
                 isa: int | None, num_threads: int, act: str | None) -> None:
        self.e, self.m, self.n, self.k = e, m, n, k
        self.bits, self.group_size, self.isa, self.num_threads = bits, group_size, isa, num_threads
        int8, self.invariant, float_tiles, amx, self.x16 = _paths(bits, group_size, e.half, isa,
                                                                  m, act)
        self.int8 = int8
        # a parallel region costs more than a small problem: one thread below PARALLEL_WEIGHTS
        threads = 1 if n * k * (m // 4 or 1) < PARALLEL_WEIGHTS else min(num_threads, n)
        self.scratch_len = m * k if bits == 4 and not (int8 or float_tiles or self.x16) else 0
        self.tactics = _tactics(bits, group_size, e.half, isa, min(num_threads, n))
        self.default = _default_tactic(self.tactics, threads, amx)
        # "invariant" with the int8 GEMM, 16-bit activations or float_tiles: the weight's
        # tiles repacked once
        tiles = (self.invariant and int8 and e.vnni in GEMM_VNNI) or float_tiles or self.x16
        self.packed = int(tiles)
        # the GEMMs over tiles read neither the prefetch distance nor the int8 rows per pass
        gemm = tiles or (int8 and m > INT8_MAX_M and bits == 4 and e.vnni in GEMM_VNNI)
        self.problem = {"m": m, "n": n, "k": k, "int8": int(int8), "amx": int(amx),
                        "gemm": int(gemm), "streamed": int(m <= INT8_MAX_M and threads > 1)}
        self.key = problem_key(bits, group_size, e.half, isa, m, n, k, act, num_threads)

    def handle(self, t: _tactics_mod.Tactic) -> int:
        v = t.params["variant"]
        return self.e.h if v == VARIANTS[0] else _handle(self.bits, self.group_size,
                                                          self.e.half, self.isa, v)

    def args(self, t: _tactics_mod.Tactic) -> np.ndarray:
        return np.array([t.params["threads"], self.m, self.n, self.k,
                         3 if self.x16 else 2 if self.invariant else int(self.int8), self.packed,
                         int(t.params["amx"])], np.int64)

    def runner(self, operands: tuple[np.ndarray, ...]
               ) -> Callable[[_tactics_mod.Tactic], np.ndarray]:
        """``run(t)``: the product of ``operands`` (x as (M, K) float32, wq, scales,
        biases) with tactic ``t``."""
        x2, wq, scales, biases = operands
        bufs = [x2, wq, scales, biases, np.empty(1, np.float32),
                np.empty(max(self.scratch_len, 1), np.float32)]
        if self.packed:
            bufs.append(_packed_tiles(self.e, self.e.h, wq, scales, biases, self.n, self.k,
                                      self.num_threads))

        def run(t: _tactics_mod.Tactic) -> np.ndarray:
            out = np.empty((self.m, self.n), np.float32)
            bufs[4] = out
            _core.launch(self.handle(t), bufs, self.args(t))
            return out

        if self.m <= INT8_MAX_M:  # memory bound: timed with the weight out of the caches
            evict = np.array([1, -4, self.n, self.k, 0, self.packed, 0,
                              bufs[6].nbytes if self.packed else 0], np.int64)
            run.prepare = lambda: _core.launch(self.e.h, bufs, evict)  # type: ignore[attr-defined]
        return run


def _launch(e: _Weights, m: int, n: int, k: int, bits: int, group_size: int,
            isa: int | None, num_threads: int, act: str | None,
            operands: tuple[np.ndarray, ...] | None) -> tuple[int, np.ndarray, int]:
    """(kernel handle, int64 args, float32 scratch length) for an (M, K) x against N packed
    rows: the tactic stored for the problem, or -- given the call's ``operands`` -- the one
    tuning finds now, else the heuristic's (scratch 0: a 1-element placeholder)."""
    p = _Problem(e, m, n, k, bits, group_size, isa, num_threads, act)
    if operands is None:
        t = _tactics_mod.stored(p.key, p.tactics, p.default, p.problem)
    else:
        t = _tactics_mod.select(p.key, p.tactics, p.default, p.problem, p.runner(operands))
    try:
        return p.handle(t), p.args(t), p.scratch_len
    except _build.BuildError:  # a variant that no longer builds: the default's kernel
        return e.h, p.args(p.default), p.scratch_len


def _check(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
           group_size: int, bits: int) -> None:
    k = quant_check("quantized_matmul", (wq.shape, wq.dtype), (scales.shape, scales.dtype),
                    (biases.shape, biases.dtype), group_size, bits)
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(f"quantized_matmul: x of shape {x.shape} does not match packed "
                         f"weights of {wq.shape[0]} rows x {k} columns (last dims differ)")
    if not dt.is_real_floating(x.dtype):
        raise TypeError(f"quantized_matmul: x must be real floating, got {dt.name(x.dtype)}")


def quantized_matmul(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray,
                     *, group_size: int = 32, bits: int = 4, num_threads: int | None = None,
                     isa: int | None = None, act: str | None = None) -> np.ndarray:
    """``x @ dequantize(wq, scales, biases).T`` on numpy arrays with the native kernel.

    Eager (no graph): the building block the ``cpu`` backend's library op and the
    benchmark use. The result has x's dtype (computed in float32). ``num_threads``:
    default ``BRAZE_NUM_THREADS`` / all CPUs; ``isa``: cap the instruction set (0
    scalar, 1 AVX2, 2 AVX-512); ``act``: ``"int8"``, ``"float"`` or ``"auto"`` activations
    (default ``BRAZE_QMM_ACT``, else ``DEFAULT_ACT``; int8 runs only where the
    kernel has VNNI, and for more than ``INT8_MAX_M`` rows of x only at 4 bits with
    ``"int8"``: the GEMM). Raises BuildError when the
    kernel cannot be built.

    >>> import numpy as np
    >>> from braze.arrays.quantized import pack
    >>> wq = pack(np.full((3, 32), 2), 4)
    >>> s, b = np.full((3, 1), 0.5, np.float32), np.zeros((3, 1), np.float32)
    >>> quantized_matmul(np.ones((1, 32), np.float32), wq, s, b, group_size=32, bits=4)
    array([[32., 32., 32.]], dtype=float32)
    """
    x, wq, scales, biases = (np.asarray(a) for a in (x, wq, scales, biases))
    _check(x, wq, scales, biases, group_size, bits)
    out = _native(x.astype(np.float32, copy=False), wq, scales, biases, group_size, bits,
                  num_threads or default_num_threads(), _isa_cap(isa), act)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


class QuantizedMatmul(NativeOp):
    """The ``cpu`` backend's ``library["quantized_matmul"]``: ``impl(attrs, out_dtype,
    x, wq, scales, biases)`` runs the native kernel (the numpy reference after one
    warning when it cannot be built). ``calls`` counts native and numpy runs.

    >>> import braze as bz
    >>> impl = QuantizedMatmul()
    >>> wq, s, b = (np.asarray(a) for a in bz.quantize(bz.ones((2, 32)), bits=8))
    >>> impl({"group_size": 32, "bits": 8}, np.dtype(np.float32), np.ones((1, 32), np.float32),
    ...      wq, s, b).tolist()
    [[32.0, 32.0]]
    >>> impl.calls["native"]
    1
    """

    op = "quantized_matmul"

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 wq: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
        gs, bits = attrs["group_size"], attrs["bits"]
        try:
            out = _native(x if x.dtype == _F32 else x.astype(np.float32), wq, scales, biases,
                          gs, bits, self._num_threads(), _ENV_ISA, attrs.get("act"))
        except _build.BuildError as e:
            self._warn_build(e, f" (bits={bits}, group_size={gs})")
            self.calls["numpy"] += 1
            return reference_eval(QUANTIZED_MATMUL, attrs, out_dtype, x, wq, scales, biases)
        self.calls["native"] += 1
        return out if out.dtype == out_dtype else out.astype(out_dtype)

    def tactic_report(self, attrs: dict[str, Any], inputs: list[tuple[tuple[int, ...], str]]
                      ) -> dict[str, Any] | None:
        (xs, _), (ws, _), (_, sd), _ = inputs
        return tactic_report(xs, ws[0], xs[-1], attrs["bits"], attrs["group_size"],
                             sd == "float16", attrs.get("act"), self._num_threads())

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """The op as a step of a replay program (no Python per call): the kernel over
        [x, wq, scales, biases, out, scratch], for contiguous inputs, float32 x and
        output, float16/float32 scales and biases; None otherwise (or if the kernel
        does not build: the Python call then warns and falls back)."""
        (xv, xd), (wv, wd), (sv, sd), (bv, bd) = inputs
        if xd != _F32 or out[1] != _F32 or sd != bd or sd not in (_F16, _F32) \
                or not all(v.offset == 0 and v.is_contiguous() for v in (xv, wv, sv, bv)):
            return None
        gs, bits = attrs["group_size"], attrs["bits"]
        n, k = wv.shape[0], xv.shape[-1]
        m = xv.size // k if k else 0
        if m == 0 or n == 0 or k == 0:
            return None
        half = sd == _F16
        try:
            e = _Weights((), _handle(bits, gs, half, _ENV_ISA),
                         _levels(bits, gs, half, _ENV_ISA)[1], half)
        except _build.BuildError:
            return None
        threads = self._num_threads()
        h, args, scratch_len = _launch(e, m, n, k, bits, gs, _ENV_ISA, threads,
                                       attrs.get("act"), None)
        derived = None
        if args[5]:  # the weight's GEMM tiles, repacked when the weight changes
            derived = (functools.partial(_prepack_buffers, e.h, n, k, threads, gs, bits),
                       (1, 2, 3), 5)
        return NativeLibraryCall(h, args, (max(scratch_len, 1) * 4,), derived=derived)


def _prepack_buffers(h: int, n: int, k: int, threads: int, group_size: int, bits: int,
                     wq: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
    """A replay plan's derived buffer: the weight's tiles, shared with every other plan
    and eager call on the same arrays (through their cached state), so that a model's
    weights are repacked once, not once per compiled step (batch bucket)."""
    e = _prepared(wq, scales, biases, group_size, bits, _ENV_ISA) \
        if wq.shape[0] == n and wq.size * 32 // bits == n * k else None
    if e is None:
        return prepack(h, wq, scales, biases, n, k, threads)
    return _packed_tiles(e, h, wq, scales, biases, n, k, threads)


def _packed_tiles(e: _Weights, h: int, wq: np.ndarray, scales: np.ndarray,
                  biases: np.ndarray, n: int, k: int, threads: int) -> np.ndarray:
    """The weight's repacked tiles, made on first use and kept with its cached state."""
    if e.packed is None:
        e.packed = prepack(h, wq, scales, biases, n, k, threads)
    return e.packed


def reference(x: np.ndarray, wq: np.ndarray, scales: np.ndarray, biases: np.ndarray, *,
              group_size: int, bits: int) -> np.ndarray:
    """The numpy reference (dequantize, then matmul), for comparison.

    >>> from braze.arrays.quantized import pack
    >>> reference(np.ones((1, 32), np.float32), pack(np.ones((1, 32)), 8),
    ...           np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32),
    ...           group_size=32, bits=8).tolist()
    [[32.0]]
    """
    return qmm_ref(x, wq, scales, biases, group_size=group_size, bits=bits)
