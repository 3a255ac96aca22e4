"""Mirrored host buffers: host arrays a device backend keeps its own copy of across calls.

An LLM's key/value cache is a host buffer every decode step reads whole and writes a few
rows of. A backend with its own memory (``cuda``, ``mlx``) would upload it whole at every
step; :func:`declare` lets it keep a copy instead, and :func:`wrote` reports each write into
the host buffer (or into a view of it): a backend brings its copy up to date with the
byte ranges written since it last synced (:meth:`Mirror.changes_since`), or uploads the
whole buffer again when it is too far behind. Host backends (``numpy``, ``cpu``) read the
host buffer in place and ignore all this.

The contract: every write into a declared buffer is reported with :func:`wrote`, after it
happened (``examples/llm/llama.py``'s caches do). An unreported write leaves device copies
stale.

>>> import numpy as np
>>> cache = np.zeros((2, 8, 4), np.float32)
>>> m = declare(cache)
>>> m.watch()  # (what a backend keeping a copy does)
>>> cache[:, 3] = 1.0
>>> wrote(cache, (slice(None), 3))
>>> m.version, m.changes_since(0)  # one row of each layer: two 16-byte ranges
(1, [(48, 16), (176, 16)])
>>> find(cache[1]) is m
True
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

__all__ = ["Mirror", "declare", "find", "wrote"]

MAX_LOG = 4096  # byte ranges remembered per buffer: a copy further behind is re-uploaded


class Mirror:
    """A declared host buffer: its version (writes reported so far) and, once a backend
    keeps a copy (:meth:`watch`), the regions of recent writes."""

    def __init__(self, base: np.ndarray) -> None:
        self.ref = weakref.ref(base)
        self.ptr = base.ctypes.data
        self.nbytes = base.nbytes
        self.version = 0
        self.watched = False  # no backend has a copy yet: writes only count
        self._log: list[tuple[int, np.ndarray]] = []  # (version, the region written)
        self._lock = threading.Lock()

    @property
    def base(self) -> np.ndarray | None:
        return self.ref()

    def watch(self) -> None:
        """A backend keeps a copy from now on: remember what is written."""
        global _ANY_WATCHED
        self.watched = True
        _ANY_WATCHED = True

    def record(self, region: np.ndarray) -> None:
        with self._lock:
            self.version += 1
            if self.watched:
                self._log.append((self.version, region))
                if len(self._log) > MAX_LOG:
                    del self._log[:len(self._log) - MAX_LOG]

    def sync(self, synced: int | None) -> tuple[int, list[tuple[int, int]] | None]:
        """What a copy synced at version ``synced`` (None: no copy yet) needs: (the version
        it will have, the byte ranges written since, or None for the whole buffer). Starts
        the watching. The version is read first: a write racing the sync is taken again
        at the next one, never lost."""
        self.watch()
        version = self.version
        return version, None if synced is None else self.changes_since(synced)

    def changes_since(self, version: int) -> list[tuple[int, int]] | None:
        """Byte ranges written after ``version`` (in order), or None when the log does
        not reach back that far (sync the whole buffer)."""
        with self._lock:
            if version == self.version:
                return []
            if not self._log or self._log[0][0] > version + 1:
                return None
            return [r for v, region in self._log if v > version
                    for r in _ranges(region, self.ptr)]


_MIRRORS: dict[int, Mirror] = {}
_LOCK = threading.Lock()
_ANY_WATCHED = False  # no backend ever kept a copy: a write needs no bookkeeping


def declare(base: np.ndarray) -> Mirror:
    """Declare ``base`` (a C-contiguous host array) mirrored: device backends may keep a
    copy of it across calls; every later write into it must be reported (:func:`wrote`)."""
    if not base.flags.c_contiguous:
        raise ValueError("mirrors.declare: the buffer must be C-contiguous")
    m = Mirror(base)
    key = m.ptr

    def drop(_: object) -> None:
        with _LOCK:
            if _MIRRORS.get(key) is m:
                del _MIRRORS[key]

    m.ref = weakref.ref(base, drop)
    with _LOCK:
        _MIRRORS[key] = m
    return m


def find(a: np.ndarray) -> Mirror | None:
    """The declared buffer whose memory holds ``a`` (the buffer itself or a view), if any."""
    if not _MIRRORS or not isinstance(a, np.ndarray) or a.size == 0:
        return None
    ptr = a.ctypes.data
    for m in list(_MIRRORS.values()):
        if m.ptr <= ptr < m.ptr + m.nbytes and m.base is not None:
            return m
    return None


def whole(a: np.ndarray) -> Mirror | None:
    """The declared buffer ``a`` is all of (same memory, same size, C-contiguous): what a
    backend may substitute its copy for."""
    m = find(a)
    if m is None or a.ctypes.data != m.ptr or a.nbytes != m.nbytes or not a.flags.c_contiguous:
        return None
    return m


def wrote(a: np.ndarray, key: Any = ...) -> None:
    """Report that ``a[key]`` was written (``a``: a declared buffer or a view into one;
    nothing happens for other arrays)."""
    if not _ANY_WATCHED:  # (host backends only so far: nothing keeps a copy to update;
        return  # a backend's first copy of a buffer is taken whole)
    m = find(a)
    if m is None:
        return
    m.record(a[key] if key is not ... else a)  # (its byte ranges: when a backend asks)


def _ranges(region: np.ndarray, base: int) -> list[tuple[int, int]]:
    """``region``'s memory as (byte offset from ``base``, byte count) runs."""
    if region.size == 0:
        return []
    if region.flags.c_contiguous:
        return [(region.ctypes.data - base, region.nbytes)]
    if region.ndim == 0:
        return [(region.ctypes.data - base, region.itemsize)]
    out: list[tuple[int, int]] = []
    for i in range(region.shape[0]):
        out.extend(_ranges(region[i], base))
    merged: list[tuple[int, int]] = []
    for o, n in out:  # adjacent runs become one
        if merged and merged[-1][0] + merged[-1][1] == o:
            merged[-1] = (merged[-1][0], merged[-1][1] + n)
        else:
            merged.append((o, n))
    return merged
