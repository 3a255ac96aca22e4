"""Keep the ``cpu`` backend's OpenMP workers off the CPU of the thread that calls the
kernels (``csrc/core.cpp``, "thread placement").

After Python work between kernels the workers sleep; one woken by the next parallel
region was sometimes placed on the caller's own CPU and stayed there, so every region
shared one core and a loop of 2-thread kernels ran 2-5x slower (seen in
``/proc/self/task/*/stat`` while a benchmark program's calls slowed) until the OS moved
it. Here the workers of the caller's team are found once (a tiny kernel returns the team's
Linux thread ids); from then on each native call from that thread allows them every CPU
of the process but the caller's current one (re-set only when the caller has moved).

Off with ``BRAZE_PLACE_WORKERS=0``, when the user places OpenMP threads already
(``OMP_PROC_BIND``, ``OMP_PLACES``, ``GOMP_CPU_AFFINITY``), off Linux, and with one
thread.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ... import _core
from . import build as _build
from .library import file_kernel

__all__ = ["enabled", "place_workers", "source"]

source, _KERNELS = file_kernel(__package__, "kernels/thread_ids.cc", "bz_thread_ids")

_USER_PLACEMENT = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")
PLACED = False  # the workers of this process have been registered (or never will be)


def enabled() -> bool:
    """Whether the workers are placed (see the module docstring)."""
    return sys.platform.startswith("linux") and \
        os.environ.get("BRAZE_PLACE_WORKERS", "1") != "0" and \
        not any(k in os.environ for k in _USER_PLACEMENT)


def team_ids(num_threads: int) -> list[int]:
    """The Linux thread ids of an OpenMP team of ``num_threads`` started here (the
    caller first).

    >>> ids = team_ids(2)
    >>> len(ids) == 2 and ids[0] == __import__("threading").get_native_id()
    True
    """
    ids = np.zeros(num_threads, np.int64)
    _core.launch(_KERNELS.handle(), [ids], np.array([num_threads], np.int64))
    return [int(t) for t in ids]


def place_workers(num_threads: int) -> list[int]:
    """Register the calling thread's OpenMP workers with the native calls' placement
    check (nothing when not :func:`enabled` or the kernel cannot be built); their ids."""
    global PLACED
    PLACED = True
    if num_threads < 2 or not enabled():
        return []
    try:
        ids = team_ids(num_threads)
    except _build.BuildError:
        return []
    workers = [t for t in ids[1:] if t > 0 and t != ids[0]]
    _core.place_workers(workers)
    return workers
