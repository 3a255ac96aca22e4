"""Shared pieces of the ``cpu`` backend's native library-op kernels (quantized matmul,
attention, rope, matvec): a family of kernels built on first use, and the base of the
``library[op]`` implementations (thread count from the backend, call counters, one
warning when a kernel cannot be built).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from ..kernel_sources import source as _kernel_source
from . import build as _build

__all__ = ["KernelFamily", "NativeOp", "file_kernel"]


class KernelFamily:
    """Kernels from ``source(key) -> (C++ source, symbol)``, built and loaded on first use
    per key; a failed build is remembered (raised again, never retried in-process).

    >>> fam = KernelFamily(lambda key: (
    ...     'extern "C" __attribute__((visibility("default"))) '
    ...     'void bz_doc_nop(void**, const long*) {}', "bz_doc_nop"))
    >>> fam.handle() == fam.handle()
    True
    """

    def __init__(self, source: Callable[[Any], tuple[str, str]]) -> None:
        self._source = source
        self._handles: dict[Hashable, int] = {}
        self._failed: dict[Hashable, _build.BuildError] = {}
        self._lock = threading.Lock()

    def handle(self, key: Hashable = None) -> int:
        """The loaded kernel for ``key``; raises BuildError."""
        h = self._handles.get(key)
        if h is not None:
            return h
        if key in self._failed:
            raise self._failed[key]
        with self._lock:
            if key not in self._handles:
                try:
                    self._handles[key] = _build.load(*self._source(key))
                except _build.BuildError as e:
                    self._failed[key] = e
                    raise
        return self._handles[key]

    def handle_or_none(self, key: Hashable = None) -> int | None:
        """:meth:`handle`, or None when the kernel cannot be built (a program-step factory
        then declines and numpy's reference runs)."""
        try:
            return self.handle(key)
        except _build.BuildError:
            return None

    def handles(self) -> dict[Hashable, int]:
        """The kernels loaded so far, by key."""
        return dict(self._handles)


def file_kernel(package: str, path: str, symbol: str
                ) -> tuple[Callable[[], tuple[str, str]], KernelFamily]:
    """``source()`` -> (C++ source, symbol) of a kernel file whose only parameter is
    ``BZ_SYMBOL``, and the :class:`KernelFamily` that builds it once.

    >>> source, family = file_kernel("braze.backends.cpu", "kernels/scan.cc", "bz_cumsum")
    >>> source()[1], "bz_cumsum" in source()[0]
    ('bz_cumsum', True)
    """
    def source() -> tuple[str, str]:
        return _kernel_source(package, path, {"BZ_SYMBOL": symbol}), symbol

    return source, KernelFamily(lambda _: source())


class NativeOp:
    """Base of a ``cpu`` library-op implementation ``impl(attrs, out_dtype, *inputs)``:
    ``calls`` counts native and numpy runs; ``_kernel(get)`` returns a handle, or None
    after one RuntimeWarning naming the op when the kernel cannot be built (the caller
    then runs the numpy reference)."""

    op = ""

    def __init__(self, backend: Any = None) -> None:
        self._backend = weakref.ref(backend) if backend is not None else None
        self.calls = {"native": 0, "numpy": 0}
        self._warned = False

    def _num_threads(self) -> int:
        b = self._backend() if self._backend is not None else None
        if b is not None:
            return b.num_threads
        from . import default_num_threads  # the package imports this module

        return default_num_threads()

    def _warn_build(self, e: _build.BuildError, what: str = "") -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"braze cpu backend: the {self.op} kernel{what} failed to build; "
                          f"{self.op} runs with the numpy reference instead.\n{e}",
                          RuntimeWarning, stacklevel=4)

    def tactic_report(self, attrs: dict[str, Any], inputs: list[tuple[tuple[int, ...], str]]
                      ) -> dict[str, Any] | None:
        """What autotuning chose for this op on these input (shape, dtype)s and measured
        (``tactics.report``), or None: the op has no tactics or has not been tuned."""
        return None

    def _kernel(self, get: Callable[[], int], what: str = "") -> int | None:
        try:
            return get()
        except _build.BuildError as e:
            self._warn_build(e, what)
            return None
