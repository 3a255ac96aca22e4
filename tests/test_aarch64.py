"""The hand-written cpu kernels on AArch64 (Apple silicon's ISA) without a Mac: each kernel's
source, exactly as braze builds it, is cross-compiled with ``aarch64-linux-gnu-g++`` into a
small harness (``tests/aarch64/harness.cc``: buffers in, buffers out, the uniform kernel
ABI) and run under ``qemu-aarch64`` against numpy on the host -- with the dot-product
extension (``-march=armv8.2-a+dotprod`` on ``-cpu max``) and without it (``-march=armv8-a``
on ``-cpu cortex-a53``, which has none: a dot-product instruction there dies of SIGILL).

Tolerances: the quantized matmul's exact path within ``1e-5 * (|x| @ (|code * s| +
|b|).T)`` of float64 and its int8-activation path within the stated bound of
``tests/test_quantized.int8_bound`` (the same as on x86); the float32 matvec/GEMM within
``K * 1e-6`` (unit normals). Skipped where the cross compiler or qemu is missing (``.ci/run``
installs both: Debian's ``g++-aarch64-linux-gnu`` and ``qemu-user``)."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braze.arrays.quantized import pack

from .test_quantized import _int8_operands, check_qmm, int8_bound, terms64

CXX = shutil.which("aarch64-linux-gnu-g++")
QEMU = shutil.which("qemu-aarch64")
SYSROOT = "/usr/aarch64-linux-gnu"
HARNESS = Path(__file__).parent / "aarch64" / "harness.cc"
# (-march, qemu -cpu, the int8 level the kernel reports: 4 sdot, 5 smull/sadalp)
TARGETS = {"dotprod": ("armv8.2-a+dotprod", "max", 4), "neon": ("armv8-a", "cortex-a53", 5)}

pytestmark = pytest.mark.skipif(
    CXX is None or QEMU is None or platform.machine() in ("aarch64", "arm64"),
    reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 on a non-AArch64 host")


@pytest.fixture(autouse=True, scope="module")
def backend_name():
    """Host-independent: the kernels run under qemu, whatever the active backend."""
    yield "none"


_DIR = Path(tempfile.mkdtemp(prefix="braze-aarch64-"))


@functools.cache
def binary(source: str, symbol: str, target: str) -> Path:
    """The harness linked with one kernel source (its entry point renamed bz_kernel),
    built once per session for ``target``."""
    march = TARGETS[target][0]
    src = _DIR / f"{symbol}-{target}.cc"
    src.write_text(source.replace(f"#define BZ_SYMBOL {symbol}\n", "#define BZ_SYMBOL bz_kernel\n"))
    exe = src.with_suffix("")
    argv = [CXX, "-std=gnu++17", "-O2", f"-march={march}", "-fopenmp", "-ffp-contract=off",
            "-static", str(src), str(HARNESS), "-o", str(exe)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr[-4000:]}"
    return exe


def run(exe: Path, target: str, bufs: list[np.ndarray], args: list[int]) -> list[np.ndarray]:
    """The kernel over ``bufs`` (numpy arrays, written back in place and returned) under
    qemu on the target's CPU model."""
    fd, inp = tempfile.mkstemp(dir=_DIR)
    os.close(fd)
    out = inp + ".out"
    with open(inp, "wb") as f:
        f.write(np.int64(len(bufs)).tobytes())
        for b in bufs:
            raw = np.ascontiguousarray(b).tobytes()
            f.write(np.int64(len(raw)).tobytes() + raw)
        f.write(np.int64(len(args)).tobytes() + np.asarray(args, np.int64).tobytes())
    r = subprocess.run([QEMU, "-L", SYSROOT, "-cpu", TARGETS[target][1], str(exe), inp, out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"qemu-aarch64 -cpu {TARGETS[target][1]} {exe.name}: rc " \
        f"{r.returncode}\n{r.stderr[-2000:]}"
    data = Path(out).read_bytes()
    os.unlink(inp)
    os.unlink(out)
    pos, res = 8, []
    for b in bufs:
        n = int(np.frombuffer(data[pos:pos + 8], np.int64)[0])
        res.append(np.frombuffer(data[pos + 8:pos + 8 + n], b.dtype).reshape(b.shape).copy())
        pos += 8 + n
    return res


def _qmm_source(bits: int, gs: int, half: bool) -> tuple[str, str]:
    from braze.backends.cpu import qmatmul

    return qmatmul.source(bits, gs, half)


# (bits, group size, float16 scales): every code width and group size, both scale types
QMM_VARIANTS = [(4, 32, False), (4, 64, True), (4, 128, True), (8, 32, True), (8, 128, False)]


@pytest.mark.parametrize("target", list(TARGETS))
def test_qmatmul_reports_its_neon_int8_level(target: str) -> None:
    exe = binary(*_qmm_source(4, 32, False), target)
    box = np.zeros(2, np.int64)
    got = run(exe, target, [box] * 6, [1, -1, 0, 0, 0])[0]
    assert got.tolist() == [3, TARGETS[target][2]]  # NEON; sdot or smull/sadalp


@st.composite
def qmm_problems(draw):  # type: ignore[no-untyped-def]
    bits, gs, half = draw(st.sampled_from(QMM_VARIANTS))
    m = draw(st.sampled_from([1, 2, 3, 5, 8, 9, 17]))  # past 16: the exact path's tiles
    n = draw(st.sampled_from([1, 3, 4, 6, 37]))
    k = gs * draw(st.integers(1, 3))
    rng, x, s, b = _int8_operands(draw, m, n, k, gs)  # (the x86 int8 tests' operands)
    sdt = np.float16 if half else np.float32  # the variant's scale dtype: one build each
    s, b = s.astype(sdt), b.astype(sdt)
    wq = pack(rng.integers(0, 1 << bits, (n, k)), bits)
    return x, wq, s, b, bits, gs, half, draw(st.sampled_from([1, 2]))


@pytest.mark.parametrize("target", list(TARGETS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=qmm_problems())
def test_qmatmul_neon_paths_match_numpy(target: str, p) -> None:  # type: ignore[no-untyped-def]
    """Both activation paths of the quantized matmul on NEON: the exact one within its
    float32 bound, the int8 one (sdot or smull) within the int8 bound, for any rows of x,
    weight rows not a multiple of the 4-row passes, 1 or 2 threads."""
    x, wq, s, b, bits, gs, half, threads = p
    exe = binary(*_qmm_source(bits, gs, half), target)
    m, k = x.shape
    n = wq.shape[0]
    scratch = np.zeros(m * k if bits == 4 else 1, np.float32)
    for act in (0, 1, 2):  # 2: batch invariant (the int8 matvec at every M on NEON)
        out = np.zeros((m, n), np.float32)
        y = run(exe, target, [x, wq, s, b, out, scratch], [threads, m, n, k, act, 0])[4]
        if act == 2:
            out1 = np.zeros((1, n), np.float32)
            y1 = run(exe, target, [x[-1:], wq, s, b, out1, scratch], [threads, 1, n, k, 2, 0])[4]
            np.testing.assert_array_equal(y1, y[-1:])  # a row alone: the same bits
        if act == 0:  # the exact path; int8 runs for any rows of x without the x86 GEMM
            check_qmm(y, x, wq, s, b, bits, gs)
        else:
            w64, _ = terms64(wq, s, b, bits, gs)
            err = np.abs(y.astype(np.float64) - x.astype(np.float64) @ w64.T)
            bound = int8_bound(x, wq, s, b, bits, gs)
            worst = np.unravel_index(np.argmax(err / bound), err.shape)
            assert np.all(err <= bound), f"{target}: error {err[worst]} > bound {bound[worst]}"


@pytest.mark.parametrize("target", list(TARGETS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), k=st.integers(0, 70), n=st.integers(1, 21),
       threads=st.sampled_from([1, 2]))
def test_matvec_kernel_on_neon_matches_numpy(target: str, m: int, k: int, n: int,
                                             threads: int) -> None:
    """The float32 x @ W.T of the replay programs (portable loops the compiler vectorizes
    for NEON): within K * 1e-6 of float64 (unit normals), any K, M and N."""
    from braze.backends.cpu import matvec

    exe = binary(*matvec.source(), target)
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k)))
    y = run(exe, target, [x, w, np.zeros((m, n), np.float32)], [threads, m, n, k, 0])[2]
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5,
                               atol=max(k, 1) * 1e-6)


def test_a_dot_product_build_dies_on_a_cpu_without_it() -> None:
    """The reason braze builds for the host's ISA (``-march=native``, BRAZE_ISA): sdot on a
    Cortex-A53 is an illegal instruction, so the harness would catch a build for the wrong
    CPU rather than pass it."""
    exe = binary(*_qmm_source(4, 32, False), "dotprod")
    x = np.ones((1, 32), np.float32)
    wq = pack(np.full((1, 32), 3), 4)
    s, b = np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32)
    out = np.zeros((1, 1), np.float32)
    with pytest.raises(AssertionError, match="rc -4|rc 132"):  # SIGILL
        run(exe, "neon", [x, wq, s, b, out, np.zeros(32, np.float32)], [1, 1, 1, 32, 1])


# ---------------------------------------------------------------- the generated kernels
@functools.cache
def _corpus_binary() -> tuple[Path, dict[str, int]]:
    """Every corpus kernel's generated C++ (portable: libmvec's x86 vector variants left
    out, as ``BRAZE_NO_LIBMVEC`` does), each compiled on its own for plain ARMv8-A NEON, and
    linked into one harness behind a dispatch table indexed by ``args[0]``."""
    from concurrent.futures import ThreadPoolExecutor

    from braze.backends.cpu import codegen

    from .kernel_corpus import corpus

    os.environ["BRAZE_NO_LIBMVEC"] = "1"
    try:
        gens = [codegen.generate(k) for k in corpus()]
    finally:
        os.environ.pop("BRAZE_NO_LIBMVEC", None)
    index: dict[str, int] = {}
    objs = []
    jobs = []
    for g in gens:
        if g.symbol in index:
            continue
        i = index[g.symbol] = len(index)
        src = _DIR / f"gen{i}.cc"
        src.write_text(g.source.replace(g.symbol, f"bz_gen{i}"))
        objs.append(src.with_suffix(".o"))
        jobs.append([CXX, "-std=gnu++17", "-O2", "-march=armv8-a", "-fopenmp",
                     "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fwrapv",
                     "-w", "-c", str(src), "-o", str(objs[-1])])

    def compile_one(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for argv, r in zip(jobs, pool.map(compile_one, jobs)):
            assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr[-3000:]}"
    n = len(index)
    table = _DIR / "gen_table.cc"
    table.write_text(
        "#include <cstdint>\n"
        + "".join(f'extern "C" void bz_gen{i}(void**, const int64_t*);\n' for i in range(n))
        + "static void (*const bz_table[])(void**, const int64_t*) = {"
        + ", ".join(f"bz_gen{i}" for i in range(n)) + "};\n"
        'extern "C" void bz_kernel(void** b, const int64_t* a) { bz_table[a[0]](b, a + 1); }\n')
    exe = _DIR / "gen_corpus"
    argv = [CXX, "-std=gnu++17", "-O2", "-march=armv8-a", "-fopenmp", "-static",
            *map(str, objs), str(table), str(HARNESS), "-o", str(exe), "-lm"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe, index


def test_generated_kernel_corpus_on_neon_matches_the_numpy_executor() -> None:
    """The fused kernels braze generates (the corpus of tests/kernel_corpus.py: every
    elementwise op and dtype, reductions, softmax and norms, strided views, random
    programs) cross-compiled for ARMv8-A and run under qemu on a Cortex-A53, program by
    program through the schedule executor, against numpy's with the CUDA emulator
    tests' per-dtype tolerances."""
    from braze.backends.cpu import codegen
    from braze.backends.csource import kernel_slots
    from braze.graph import dtypes as dt

    from .kernel_corpus import corpus, programs
    from .test_cuda_emulator import _check_programs

    exe, index = _corpus_binary()
    ran = set()

    def run_kernel(k, bufs) -> None:  # type: ignore[no-untyped-def]
        from braze.backends.csource import kernel_args

        os.environ["BRAZE_NO_LIBMVEC"] = "1"
        try:
            sym = codegen.generate(k).symbol
        finally:
            os.environ.pop("BRAZE_NO_LIBMVEC", None)
        slots = kernel_slots(k)
        arrays = [bufs[s] for s in slots]
        sent = [a.view(np.uint16) if a.dtype == dt.bfloat16 else a for a in arrays]
        args = [index[sym], *kernel_args(k, num_threads=2).tolist()]
        got = run(exe, "neon", sent, args)
        for s, g in zip(slots, got):
            if s in {st.slot for st in k.stores}:
                bufs[s][...] = g.view(bufs[s].dtype).reshape(bufs[s].shape)
        ran.add(sym)

    _check_programs(programs(), run_kernel, "aarch64 ")
    assert len(ran) >= len(corpus()) * 0.9 >= 250  # (kernels that normalize alike share one)


# ---------------------------------------------------------------- the other hand-written ones
def _hand_written_sources() -> list[tuple[str, str]]:
    from braze.backends.cpu import (
        assign,
        attention,
        bincount,
        concat,
        matvec,
        pooling,
        roll,
        rope,
        scan,
        take_along,
    )

    return [attention.source(), rope.source(), scan.source(), bincount.source(),
            assign.source(), matvec.vecmat_source(), concat.source(), roll.source(),
            take_along.source(), pooling.source()]


def _program_steps(rng: np.random.Generator) -> None:
    """concat, roll and take_along_axis run only as replay-program steps: launched here
    from their step factories, over strided inputs, and checked against numpy on the host
    too."""
    from braze import _core
    from braze.backends.cpu import concat, roll, take_along
    from braze.graph.view import View

    f4 = np.dtype(np.float32)
    base = rng.standard_normal((6, 9)).astype(np.float32)
    # views into one buffer, as a program passes them
    for axis, parts in ((0, (base[:2, :5], base[1:5, 2:7])), (1, (base[:4, :4], base[1:5, 2:7]))):
        views = [(View(p.shape, tuple(s // 4 for s in p.strides),
                       (p.__array_interface__["data"][0] - base.ctypes.data) // 4), f4)
                 for p in parts]
        want = np.concatenate(parts, axis=axis)
        nc = concat.native_call({"axis": axis}, views, (want.shape, f4))
        out = np.zeros_like(want)
        _core.launch(nc.handle, [base, base, out], nc.args)
        np.testing.assert_array_equal(out, want)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    nc = roll.native_call({"shifts": (2, -3), "axes": (0, 1)},
                          [(View((5, 7), (7, 1), 0), f4)], ((5, 7), f4))
    out = np.zeros_like(x)
    _core.launch(nc.handle, [x, out], nc.args)
    np.testing.assert_array_equal(out, np.roll(x, (2, -3), axis=(0, 1)))
    idx = rng.integers(-7, 7, (5, 2))
    nc = take_along.native_call({"axis": 1}, [(View((5, 7), (7, 1), 0), f4),
                                              (View((5, 2), (2, 1), 0), np.dtype(np.int64))],
                                ((5, 2), f4))
    out, status = np.zeros((5, 2), np.float32), np.ones(2, np.int64)
    _core.launch(nc.handle, [x, idx, out, status], nc.args)
    assert status[0] == 0
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, 1))


def _drive_host_kernels() -> None:
    """Each hand-written kernel through braze's own calls on the host's cpu backend
    (attention with a causal mask and grouped heads, rope both layouts, cumsum along
    each axis, bincount, a big slice store, X.T @ v)."""
    import braze as bz

    rng = np.random.default_rng(11)
    with bz.backend("cpu"):
        for d in (16, 64):  # (a 64-wide head: the register path)
            q = bz.asarray(rng.standard_normal((1, 4, 5, d)).astype(np.float32))
            kv = [bz.asarray(rng.standard_normal((1, 2, 5, d)).astype(np.float32))
                  for _ in "kv"]
            np.asarray(bz.fast.scaled_dot_product_attention(q, *kv, scale=0.25, mask="causal"))
        # a batched decode step over a float16 past (query heads grouped per key head)
        q, k, v = (bz.asarray(rng.standard_normal((8, h, 1, 64)).astype(np.float32))
                   for h in (6, 2, 2))
        pk, pv = (bz.asarray(rng.standard_normal((8, 2, 21, 64)).astype(np.float16))
                  for _ in "kv")
        np.asarray(bz.fast.scaled_dot_product_attention(
            q, k, v, scale=0.125, mask="causal", past=(pk, pv),
            past_length=bz.asarray(np.array([0, 1, 4, 5, 16, 17, 20, 21], np.int32))))
        x = bz.asarray(rng.standard_normal((2, 3, 7, 32)).astype(np.float32))
        for trad in (True, False):
            np.asarray(bz.fast.rope(x, 32, traditional=trad, base=10000.0, offset=3))
        c = rng.standard_normal((33, 65)).astype(np.float32)
        for axis in (0, 1):
            np.asarray(bz.cumsum(bz.asarray(c), axis=axis))
    from braze.backends.cpu import assign, bincount, pooling

    _program_steps(rng)
    # 83 channels: a block of 64, one of 16 and 3 more; padded windows and a NaN
    xp = rng.standard_normal((2, 9, 10, 83)).astype(np.float32)
    xp[1, 4, 4, 70] = np.nan
    for op in pooling.MODES:  # max and sum
        pooling.Pool(op=op)({"kernel_size": (3, 2), "stride": (2, 1), "dilation": (1, 2),
                             "padding": ((1, 1), (1, 0))}, np.dtype(np.float32), xp)
    for idt in (np.int64, np.int32):
        bincount.Bincount()({"length": 50}, np.dtype(np.int64),
                            rng.integers(-2, 60, 5000).astype(idt))
    big = np.zeros((1024, 1024), np.float32)
    assign.assign(big, (slice(100, 900), slice(3, 1000)),
                  rng.standard_normal((800, 997)).astype(np.float32), 2)
    with bz.backend("cpu"):
        X = rng.standard_normal((300, 70)).astype(np.float32)
        v = rng.standard_normal(300).astype(np.float32)
        np.asarray(bz.asarray(X).T @ bz.asarray(v))


def test_hand_written_kernels_replayed_on_neon_match_the_host(monkeypatch) -> None:
    """Every launch of these kernels on the host, recorded (buffers before and after, the
    args), replayed under qemu on a Cortex-A53 from the same source built for ARMv8-A:
    integer buffers equal, float ones within 1e-5 relative (vector widths differ, so do
    summation orders)."""
    from braze import _core
    from braze.backends.cpu import build

    by_handle = {}
    for src, sym in _hand_written_sources():
        by_handle[build.load(src, sym)] = (src.replace("#define BZ_MVEC 1", "#define BZ_MVEC 0"),
                                           sym)
    calls = []
    real = _core.launch

    def recording(h, arrays, args):  # type: ignore[no-untyped-def]
        before = [np.array(a, copy=True) for a in arrays] if h in by_handle else None
        real(h, arrays, args)
        if before is not None:
            calls.append((h, before, [np.array(a, copy=True) for a in arrays],
                          np.asarray(args).tolist()))

    monkeypatch.setattr(_core, "launch", recording)
    _drive_host_kernels()
    monkeypatch.undo()
    seen = {by_handle[h][1] for h, *_ in calls}
    # (the batched decode call: its float16 past selects the kernel's float16 instance)
    assert sum(a[6] == 1 and a[45] == 1 for h, _, _, a in calls if by_handle[h][1] == "bz_sdpa_f32")
    assert len(calls) >= 17  # attention x3, rope x2, cumsum x2, bincount x2, assign, vecmat,
    # concat x2, roll, take_along_axis, pools x2
    assert seen == {sym for _, sym in _hand_written_sources()}, seen  # each one ran
    for h, before, after, args in calls:
        src, sym = by_handle[h]
        got = run(binary(src, sym, "neon"), "neon", before, args)
        for i, (g, want) in enumerate(zip(got, after)):
            if want.dtype.kind == "f":
                finite = np.abs(want[np.isfinite(want)])  # (NaN: in the same places)
                scale = float(np.max(finite)) if finite.size else 0.0
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6 * max(scale, 1.0),
                                           err_msg=f"{sym} buffer {i}")
            else:
                np.testing.assert_array_equal(g, want, err_msg=f"{sym} buffer {i}")
