"""Counter-based random bits (threefry-2x32)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .record import OpDef, declare


def threefry2x32(key: np.ndarray, counter_hi: np.ndarray, counter_lo: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011): a counter-based bijection.

    Every backend implements this exact function, so random streams are
    bit-identical across backends.
    """
    rot = ((13, 15, 26, 6), (17, 29, 16, 24))
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    k2 = np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    ks = (k0, k1, k2)
    x0 = counter_hi.astype(np.uint32) + k0
    x1 = counter_lo.astype(np.uint32) + k1
    for i in range(5):
        for r in rot[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def random_bits_ref(key, *, shape):
    n = int(np.prod(shape, dtype=np.int64))
    half = (n + 1) // 2
    with np.errstate(over="ignore"):
        idx = np.arange(half, dtype=np.uint64)
        hi, lo = threefry2x32(np.asarray(key, np.uint32),
                              (idx >> np.uint64(32)).astype(np.uint32),
                              (idx & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return np.concatenate([hi, lo])[:n].reshape(shape)


RANDOM_BITS = declare(OpDef(
    "random_bits", "random", 1, random_bits_ref, "any",
    infer=lambda shapes, dtypes, attrs: (attrs["shape"], dt.uint32),
    doc="uint32 bits of shape attrs['shape'] from a (2,) uint32 key (threefry-2x32).",
))
