"""A cache of large host buffers, reused across evaluations.

A fresh large allocation is fresh pages: the kernel that first writes them pays a
page fault per 4 KiB (measured here: ~5 ms for a 64 MiB output, a third of a fused
chain's run time). Like MLX's buffer cache, the cpu backend therefore keeps the
planned storages it allocated and hands them out again once nothing refers to them.

"Nothing refers to it" is exact: every array braze builds on a pooled buffer (slot
views, outputs, the user's slices of an output) is a numpy view whose ``.base`` is the
pooled array itself, so the buffer is free when its reference count shows only the
pool's own reference. Buffers below ``MIN_BYTES`` are left to the allocator (malloc
reuses small blocks anyway). At most ``max_bytes`` are kept (``BRAZE_CPU_POOL_BYTES``,
default min(1 GiB, 1/8 of RAM); 0 disables the pool); ``clear()`` drops the idle ones.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading

import numpy as np

MIN_BYTES = 1 << 20
HUGE_PAGE_BYTES = 2 << 20  # transparent huge pages where the OS allows (madvise mode)


def huge_page_empty(nbytes: int) -> np.ndarray:
    """An uninitialized uint8 array; at 2 MiB and more, anonymous memory advised for
    transparent huge pages (512x fewer page faults on first touch) where the OS offers
    ``madvise(MADV_HUGEPAGE)``; plain ``np.empty`` elsewhere."""
    if nbytes >= HUGE_PAGE_BYTES and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mem = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            mem.madvise(mmap.MADV_HUGEPAGE)
            return np.frombuffer(mem, np.uint8)
        except (OSError, ValueError, AttributeError):
            pass
    return np.empty(nbytes, np.uint8)
SLACK = 1.25  # a request may take a free buffer up to this much larger


def default_max_bytes() -> int:
    env = os.environ.get("BRAZE_CPU_POOL_BYTES")
    if env:
        return max(0, int(env))
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 << 30
    return min(1 << 30, ram // 8)


class BufferPool:
    """Reusable uint8 buffers (see the module docstring)."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self._bufs: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _idle(buf: np.ndarray) -> bool:
        # references: the pool's list, the caller's loop variable, this parameter and
        # getrefcount's argument; any view of the buffer adds one
        return sys.getrefcount(buf) <= 4

    def alloc(self, nbytes: int) -> np.ndarray:
        """A uint8 array of ``nbytes`` (uninitialized), from the pool when one is idle."""
        if nbytes < MIN_BYTES or self.max_bytes <= 0:
            return np.empty(nbytes, np.uint8)
        with self._lock:
            for buf in self._bufs:
                if nbytes <= buf.nbytes <= nbytes * SLACK and self._idle(buf):
                    self.hits += 1
                    return buf[:nbytes]
            self.misses += 1
            fresh = huge_page_empty(nbytes)
            if nbytes <= self.max_bytes:
                self._evict(self.max_bytes - nbytes)
                if self.held_bytes + nbytes <= self.max_bytes:
                    self._bufs.append(fresh)
            return fresh[:nbytes]

    def holds(self, buf: np.ndarray) -> bool:
        """Whether ``buf`` is one of the pool's buffers (not a view of one).

        >>> pool = BufferPool(1 << 30)
        >>> buf = pool.alloc(MIN_BYTES).base
        >>> pool.holds(buf), pool.holds(np.empty(4))
        (True, False)
        """
        return any(b is buf for b in self._bufs)

    @property
    def held_bytes(self) -> int:
        return sum(b.nbytes for b in self._bufs)

    def _evict(self, limit: int) -> None:
        """Drop idle buffers (oldest first) until at most ``limit`` bytes are held."""
        held = self.held_bytes
        keep = []
        for buf in self._bufs:
            if held > limit and self._idle(buf):
                held -= buf.nbytes
                continue
            keep.append(buf)
        self._bufs = keep

    def clear(self) -> None:
        """Forget the idle buffers (the memory goes back to the system)."""
        with self._lock:
            self._evict(0)
