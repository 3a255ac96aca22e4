"""Build generated C++ kernels with the system compiler, cache them on disk, load them.

* The cache lives in ``BRAZE_CACHE_DIR`` (default ``~/.cache/braze/kernels``). An
  entry is ``<symbol>-<key>.so`` plus a sidecar ``.sha256`` holding the library's
  checksum (and the source as ``.cpp``, for reading). The key hashes the source, the
  flags, the compiler's version, the host CPU's ISA features
  (``braze._core.cpu_features()``), the glibc version and the machine: a cache shared
  between hosts never hands out a kernel built for another CPU.
* Writes are atomic: the compiler writes a temporary file in the cache directory,
  which is then ``os.replace``d into place, so concurrent processes building the same
  kernel both succeed and nobody ever sees half a library.
* An entry whose checksum does not match its sidecar (corrupt, truncated, foreign),
  or that fails to load, is rebuilt, never loaded. The checksum detects corruption
  only: whoever can write the directory can write the sidecar too. What keeps others'
  code out is :mod:`braze.backends.trust`: the directory is created with mode 0700,
  and a directory (or an entry) that is not private -- owned by someone else, writable
  by group or others, under a directory others can write -- is not used: kernels are
  built into a private directory for this process instead, after one warning.
* Loaded kernels are kept in an in-process dict: a second request costs a lookup.
* The compiler's ``--version`` line (part of every key) is remembered in the cache's
  ``compilers.txt`` under the compiler binary's path, size and modification time, so a
  new process that only loads cached kernels never starts the compiler.

Flags: ``-std=gnu++17 -O3 -march=<target> -fno-math-errno -fno-trapping-math -ffp-contract=off
-fwrapv -fopenmp`` (+ ``-lmvec`` where glibc has libmvec). Never ``-ffast-math``: it
changes IEEE semantics and, through ``crtfastmath.o``, flushes denormals process-wide.
``-ffp-contract=off`` keeps arithmetic bit-identical to numpy's (no FMA contraction);
``-fwrapv`` gives numpy's wrapping integer overflow.

Target ISA (``BRAZE_ISA``, read at import; :func:`target`): ``native`` (default: every
feature of this CPU, ``-march=native``), or a narrower level to run what a CPU of that
kind runs -- on x86-64 ``avx512`` (native, refused without AVX-512), ``avx2``
(``-march=x86-64-v3``: AVX2, FMA, F16C, no VNNI: an AMD Zen 2/3 or Haswell-class CPU) and
``scalar`` (``-march=x86-64``: SSE2 only); on AArch64 ``dotprod``
(``-march=armv8.2-a+dotprod``) and ``neon`` (``-march=armv8-a``). The hand-written kernels
choose their paths from the compiler's ISA macros, so the level selects them too; it is
part of every cache key. A level the CPU does not have is refused with a ValueError
naming it (the kernels would die of SIGILL).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# subprocess, shlex and tempfile are imported where a kernel is built: a process that
# only loads cached kernels never needs them
from .. import trust
from .codegen import glibc_version, libmvec_functions

__all__ = ["BuildError", "FLAGS", "build", "build_many", "cache_dir", "cache_key", "compiler",
           "describe", "flags", "load", "load_many", "target"]

FLAGS = ["-std=gnu++17", "-O3", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
         "-fwrapv", "-fopenmp", "-fPIC", "-shared", "-fvisibility=hidden", "-w"]
# BRAZE_ISA level -> (-march flags, CPU features it needs: cpu_features() names)
TARGETS: dict[str, dict[str, tuple[list[str], set[str]]]] = {
    "x86_64": {"native": (["-march=native"], set()),
               "avx512": (["-march=native"], {"avx512f", "avx512bw", "avx512vl"}),
               "avx2": (["-march=x86-64-v3", "-mtune=native"], {"avx2", "fma", "f16c"}),
               "scalar": (["-march=x86-64", "-mtune=native"], set())},
    "aarch64": {"native": (["-march=native"], set()),
                "dotprod": (["-march=armv8.2-a+dotprod"], {"asimddp"}),
                "neon": (["-march=armv8-a"], set())},
}
BUILD_TIMEOUT = 300  # seconds (BRAZE_BUILD_TIMEOUT)
BUILD_MEMORY_MB = 4096  # address space of one build (BRAZE_BUILD_MEMORY_MB; 0: unbounded)
# A build runs under this POSIX sh wrapper, its own process group's leader: the address
# space limit applies to the driver and everything it starts (cc1plus, as, ld), and a
# watcher kills the whole group when the process that asked for the build dies, even by
# SIGKILL (no compiler outlives it; one once ran on for 7 minutes at 10.7 GB).
# $1: the parent pid, $2: the limit in KiB (0: none), then the compiler's argv (its stdin,
# the source, passed through fd 3: a background job's stdin would be /dev/null).
_WRAPPER = (
    'p=$1; m=$2; shift 2; [ "$m" -gt 0 ] && ulimit -v "$m" 2>/dev/null; '
    'exec 3<&0; "$@" <&3 3<&- & c=$!; exec 3<&- 0</dev/null; '
    '( while kill -0 "$p" 2>/dev/null; do sleep 1; done; kill -9 -$$ 2>/dev/null ) '
    '</dev/null >/dev/null 2>&1 & w=$!; '
    'wait "$c"; r=$?; kill "$w" 2>/dev/null; exit "$r"')


class BuildError(RuntimeError):
    """A kernel could not be built (no compiler, or the compiler failed)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message + (f"\n{output}" if output else ""))
        self.output = output


def compiler() -> list[str] | None:
    """The C++ compiler command: ``BRAZE_CXX`` or ``CXX`` if set, else c++ / g++ / clang++."""
    env = os.environ.get("BRAZE_CXX") or os.environ.get("CXX")
    if env:
        import shlex

        cmd = shlex.split(env)
        return cmd if cmd and shutil.which(cmd[0]) else None
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


@functools.lru_cache(maxsize=8)
def compiler_version(cmd: tuple[str, ...]) -> str:
    """The first line of ``cmd --version``, remembered on disk per compiler binary.

    >>> compiler_version(tuple(compiler() or ["c++"])) != ""
    True
    """
    binary = shutil.which(cmd[0]) if cmd else None
    try:
        st = os.stat(binary or "")
        seen = f"{' '.join(cmd)}|{os.path.realpath(binary or '')}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        seen = ""
    known = _known_versions() if seen else {}
    if seen in known:
        return known[seen]
    import subprocess

    try:
        r = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"cannot run the C++ compiler {' '.join(cmd)!r}: {e}") from None
    if r.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} --version failed", r.stdout + r.stderr)
    version = (r.stdout.strip().splitlines() or [""])[0]
    if seen and "\t" not in seen + version:
        known[seen] = version
        with contextlib.suppress(OSError):
            cache_dir().mkdir(parents=True, exist_ok=True)
            _atomic_write(cache_dir() / _VERSIONS, "".join(
                f"{k}\t{v}\n" for k, v in known.items()).encode())
    return version


_VERSIONS = "compilers.txt"  # "<command>|<binary path>|<size>|<mtime ns>\t<version line>"


def _known_versions() -> dict[str, str]:
    try:
        text = (cache_dir() / _VERSIONS).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return dict(line.split("\t", 1) for line in text.splitlines() if line.count("\t") == 1)


def _machine() -> str:
    m = os.uname().machine
    return {"AMD64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _env_target() -> str:
    return os.environ.get("BRAZE_ISA", "").strip().lower() or "native"


_TARGET = _env_target()  # read at import (checked below): loaded kernels keep their level


@functools.lru_cache(maxsize=8)
def _target_flags(level: str) -> tuple[str, ...]:
    levels = TARGETS.get(_machine(), {"native": (["-march=native"], set())})
    if level not in levels:
        raise ValueError(f"BRAZE_ISA={level!r}: this {_machine()} CPU's levels are "
                         f"{', '.join(levels)}")
    march, needs = levels[level]
    have = _core_features()
    missing = needs - set(have)
    if missing:
        raise ValueError(f"BRAZE_ISA={level}: this CPU has no {', '.join(sorted(missing))} "
                         f"(it has {', '.join(have)}); kernels built for it would die of an "
                         f"illegal instruction")
    return tuple(march)


def target() -> str:
    """The ISA level kernels are built for: ``BRAZE_ISA`` as read at import (``native``
    by default); a level this CPU lacks raises ValueError.

    >>> target() in TARGETS.get(_machine(), {"native": None})
    True
    """
    _target_flags(_TARGET)
    return _TARGET


def describe() -> str:
    """The CPU and the ISA level kernels are built for, as every benchmark figure names it:
    the widest vector ISA the level uses, its int8 dot product, and the level.

    >>> describe().split()[0] in ("x86-64", "aarch64") or describe() != ""
    True
    """
    feats = set(_core_features())
    level = target()
    if _machine() == "x86_64":
        if level == "scalar":
            return "x86-64 SSE2 (BRAZE_ISA=scalar)"
        wide = "AVX-512" if "avx512f" in feats and level != "avx2" else \
            "AVX2" if "avx2" in feats else "SSE2"
        dots = [] if level == "avx2" else [n for f, n in (("avx512vnni", "AVX512-VNNI"),
                                                          ("avxvnni", "AVX-VNNI")) if f in feats]
        if level != "avx2" and {"amx-int8", "amx-bf16"} <= feats:  # (the quantized matmul's)
            dots.append("AMX")
        extra = f" + {', '.join(dots)}" if dots else ""
        return f"x86-64 {wide}{extra}" + ("" if level == "native" else f" (BRAZE_ISA={level})")
    if _machine() == "aarch64":
        dot = "asimddp" in feats and level != "neon"
        return f"aarch64 NEON{' + dotprod' if dot else ''}" + \
            ("" if level == "native" else f" (BRAZE_ISA={level})")
    return _machine()


def _core_features() -> list[str]:
    from ... import _core

    return list(_core.cpu_features())


def flags() -> list[str]:
    """The compiler flags of every cpu kernel: :data:`FLAGS` and the target ISA's.

    >>> "-O3" in flags() and any(f.startswith("-march=") for f in flags())
    True
    """
    return [*FLAGS[:2], *_target_flags(_TARGET), *FLAGS[2:]]


def link_flags() -> list[str]:
    return ["-lmvec"] if libmvec_functions() else []


@functools.lru_cache(maxsize=1)
def _host() -> str:
    from ... import _core

    return "|".join([os.uname().machine, str(glibc_version()), ",".join(_core.cpu_features())])


def configured_cache_dir() -> Path:
    """``BRAZE_CACHE_DIR``, or ``$XDG_CACHE_HOME/braze/kernels`` (``~/.cache/braze/kernels``)."""
    d = os.environ.get("BRAZE_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "braze" / "kernels"


def cache_dir() -> Path:
    """The kernel cache directory: :func:`configured_cache_dir` where it is (or can be
    made) a writable directory; else -- under a regular file, on a read-only or foreign
    file system -- a private temporary directory for this process, removed at exit,
    after one warning naming the reason (kernels then build once per process).

    >>> cache_dir().is_dir()
    True
    """
    want = configured_cache_dir()
    got = _usable.get(want)
    if got is None:
        got = _usable[want] = _usable_dir(want)
    return got


_usable: dict[Path, Path] = {}


def _usable_dir(want: Path) -> Path:
    try:
        want.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.access(want, os.W_OK | os.X_OK):
            raise PermissionError(f"{want} is not writable")
    except OSError as e:
        return _private_dir(f"the kernel cache directory {want} cannot be used ({e})")
    why = trust.problem(want)
    if why is not None:  # others could plant code there (backends/trust.py)
        return _private_dir(f"the kernel cache directory is not private: {why}")
    return want


def cache_key(source: str, cmd: Sequence[str] | None = None) -> str:
    cmd = list(cmd) if cmd is not None else compiler()
    if cmd is None:
        raise BuildError("no C++ compiler found (looked for $BRAZE_CXX, $CXX, c++, g++, clang++)")
    h = hashlib.sha256()
    for part in (source, " ".join(flags() + link_flags()), compiler_version(tuple(cmd)), _host()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entry_ok(lib: Path, sidecar: Path) -> bool:
    try:
        return sidecar.read_text().split()[0] == _checksum(lib)
    except (OSError, IndexError):
        return False


def _atomic_write(path: Path, data: bytes) -> None:
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _paths(symbol: str, key: str) -> tuple[Path, Path]:
    d = cache_dir()
    return d / f"{symbol}-{key}.so", d / f"{symbol}-{key}.sha256"


def build(source: str, symbol: str, force: bool = False) -> Path:
    """Path of the built library of ``source`` (compiled now unless a valid entry exists).
    Where the cache directory fails under it (full, made read-only or deleted while
    running), the kernel is built into a private directory for this process instead,
    after one warning."""
    try:
        return _build(source, symbol, force, None)
    except OSError as e:
        return _build(source, symbol, True, _private_dir(f"writing to the kernel cache "
                                                         f"failed ({e})"))
    except BuildError as e:  # the compiler could not write its output there
        if not any(w in str(e) for w in _WRITE_ERRORS):
            raise
        why = f"writing to the kernel cache failed ({str(e).splitlines()[-1]})"
        return _build(source, symbol, True, _private_dir(why))


_WRITE_ERRORS = ("No space left on device", "Read-only file system", "Permission denied",
                 "Disk quota exceeded")


def _private_dir(why: str) -> Path:
    """This process's own kernel directory (made once, removed at exit) -- for a cache
    directory that cannot be used or fails under a build -- after one warning saying
    ``why``."""
    global _PRIVATE
    if _PRIVATE is None:
        import tempfile
        import warnings

        _PRIVATE = Path(tempfile.mkdtemp(prefix="braze-kernels-"))
        atexit.register(shutil.rmtree, _PRIVATE, True)
        warnings.warn(f"braze: {why}; kernels are built in {_PRIVATE} for this process only",
                      RuntimeWarning, stacklevel=4)
    return _PRIVATE


_PRIVATE: Path | None = None


def _build(source: str, symbol: str, force: bool, directory: Path | None) -> Path:
    cmd = compiler()
    if cmd is None:
        raise BuildError("no C++ compiler found (looked for $BRAZE_CXX, $CXX, c++, g++, clang++)")
    key = cache_key(source, cmd)
    lib, sidecar = _paths(symbol, key)
    if directory is not None:
        lib, sidecar = directory / lib.name, directory / sidecar.name
    if directory is None and lib.exists():
        why = trust.entry_problem(lib) or trust.entry_problem(sidecar)
        if why is not None:  # never loaded: built for this process instead
            return _build(source, symbol, True, _private_dir(f"a kernel cache entry is not "
                                                             f"private: {why}"))
    if not force and lib.exists() and _entry_ok(lib, sidecar):
        with contextlib.suppress(OSError):
            os.utime(lib)  # recently used: eviction removes the least recently used first
        return lib
    import shlex
    import subprocess
    import tempfile

    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=".tmp-", suffix=".so")
    os.close(fd)
    try:
        argv = [*cmd, *flags(), "-x", "c++", "-", "-o", tmp, *link_flags()]
        timeout, memory_mb = _limits()
        sh = shutil.which("sh")
        run = [sh, "-c", _WRAPPER, "sh", str(os.getpid()), str(memory_mb * 1024), *argv] \
            if sh else argv
        try:
            # its own process group: stopping it stops cc1plus / as / ld too
            proc = subprocess.Popen(run, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as e:
            raise BuildError(f"cannot run the C++ compiler for kernel {symbol}: {e}") from None
        _running[proc] = tmp
        try:
            out, err = proc.communicate(source, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise BuildError(f"building kernel {symbol} took over {timeout:g} s "
                             f"(BRAZE_BUILD_TIMEOUT)") from None
        finally:
            _running.pop(proc, None)
        if proc.returncode != 0:
            starved = any(w in err.lower() for w in ("memory", "signal", "bad_alloc", "killed"))
            hint = (f" (a build may use {memory_mb} MB: BRAZE_BUILD_MEMORY_MB)"
                    if memory_mb and starved else "")
            raise BuildError(f"building kernel {symbol} failed{hint} ({shlex.join(argv)})",
                             (out + err).strip())
        digest = _checksum(Path(tmp))
        with contextlib.suppress(OSError):
            _atomic_write(lib.with_suffix(".cpp"), source.encode())
        _atomic_write(sidecar, f"{digest} {symbol}\n".encode())
        os.replace(tmp, lib)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    evict(lib.parent)
    return lib


# compilers this process is running -> their temporary output: a build still running in a
# background thread when the interpreter exits is stopped and its file removed (left alone,
# the compiler would outlive the process and leave a .tmp-*.so in the cache)
_running: dict[Any, str] = {}


def _limits() -> tuple[float, int]:
    """(seconds, MB) a build may take: ``BRAZE_BUILD_TIMEOUT``, ``BRAZE_BUILD_MEMORY_MB``."""
    try:
        timeout = float(os.environ.get("BRAZE_BUILD_TIMEOUT") or BUILD_TIMEOUT)
        memory = int(os.environ.get("BRAZE_BUILD_MEMORY_MB") or BUILD_MEMORY_MB)
    except ValueError as e:
        raise BuildError(f"BRAZE_BUILD_TIMEOUT / BRAZE_BUILD_MEMORY_MB must be numbers: {e}"
                         ) from None
    return timeout, max(memory, 0)


def _kill_group(proc: Any) -> None:
    import signal

    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


@atexit.register
def _stop_builds() -> None:
    for proc, tmp in list(_running.items()):
        _kill_group(proc)
        with contextlib.suppress(Exception):  # not dying within 10 s
            proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def max_entries() -> int:
    """``BRAZE_CACHE_MAX_ENTRIES`` (default 4096 kernels; 0 = unbounded)."""
    return int(os.environ.get("BRAZE_CACHE_MAX_ENTRIES", "4096"))


def evict(directory: Path, limit: int | None = None) -> int:
    """Keep at most ``limit`` kernels in ``directory``: when over it, delete the least
    recently used (by modification time, refreshed on every cache hit) down to 3/4 of
    the limit. Returns how many were removed. A library another process has loaded
    stays mapped there; one deleted just before a load is simply rebuilt."""
    limit = max_entries() if limit is None else limit
    if limit <= 0:
        return 0
    libs = []
    with contextlib.suppress(OSError):
        for p in directory.glob("*.so"):
            if not p.name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    libs.append((p.stat().st_mtime, p))
    if len(libs) <= limit:
        return 0
    libs.sort()
    doomed = libs[:len(libs) - (3 * limit) // 4]
    for _, p in doomed:
        for q in (p, p.with_suffix(".sha256"), p.with_suffix(".cpp")):
            with contextlib.suppress(OSError):
                q.unlink()
    return len(doomed)


_loaded: dict[str, int] = {}  # cache key -> kernel handle
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        lk = _locks.get(key)
        if lk is None:
            lk = _locks[key] = threading.Lock()
        return lk


def load(source: str, symbol: str) -> int:
    """A launchable handle for ``source`` (built and cached as needed); raises BuildError."""
    from ... import _core

    cmd = compiler()
    if cmd is None:
        raise BuildError("no C++ compiler found (looked for $BRAZE_CXX, $CXX, c++, g++, clang++)")
    key = cache_key(source, cmd) + str(cache_dir())
    h = _loaded.get(key)
    if h is not None:
        return h
    with _lock(key):
        h = _loaded.get(key)
        if h is not None:
            return h
        path = build(source, symbol)
        try:
            h = _core.load_kernel(str(path), symbol)
        except RuntimeError:
            path = build(source, symbol, force=True)  # a bad entry: rebuild, never trust it
            try:
                h = _core.load_kernel(str(path), symbol)
            except RuntimeError as e:
                raise BuildError(f"kernel {symbol} was built but does not load: {e}") from None
        _loaded[key] = h
        return h


def is_cached(source: str, symbol: str) -> bool:
    """Is ``source`` loaded in this process or built in the cache (so that loading it
    costs no compile)?"""
    cmd = compiler()
    if cmd is None:
        return False
    key = cache_key(source, cmd)
    if key + str(cache_dir()) in _loaded:
        return True
    lib, sidecar = _paths(symbol, key)
    return lib.exists()


def load_many(items: Sequence[tuple[str, str]]) -> list[int | BuildError]:
    """Load several (source, symbol) kernels, building the missing ones in parallel."""
    if len(items) <= 1:
        out: list[int | BuildError] = []
        for src, sym in items:
            try:
                out.append(load(src, sym))
            except BuildError as e:
                out.append(e)
        return out

    def one(item: tuple[str, str]) -> int | BuildError:
        try:
            return load(*item)
        except BuildError as e:
            return e

    from concurrent.futures import ThreadPoolExecutor

    workers = min(len(items), max(1, len(os.sched_getaffinity(0)) if hasattr(
        os, "sched_getaffinity") else (os.cpu_count() or 1)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, items))


def build_many(items: Sequence[tuple[str, str]]) -> list[Path | BuildError]:
    """Build several (source, symbol) kernels in parallel (no loading)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(item: tuple[str, str]) -> Path | BuildError:
        try:
            return build(*item)
        except BuildError as e:
            return e

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return list(pool.map(one, items))


_target_flags(_TARGET)  # a BRAZE_ISA this CPU cannot run fails here, at import, by name
