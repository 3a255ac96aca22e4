"""Counter-based random bits (threefry-2x32): the numpy reference and the records.

``threefry2x32_x0`` / ``threefry2x32_x1`` are *elementwise* records over packed 64-bit words
(key ``k0 << 32 | k1``, counter ``c_hi << 32 | c_lo``): word x0 / x1 of the Threefry-2x32
block. Their C expressions call ``bz_threefry2x32_x0`` / ``_x1`` (``backends/kernels/
random.h``; both words of one counter in one kernel are one computation), so random
numbers are computed inside the fused kernel that transforms and consumes them
(``braze.arrays.random`` builds the counters and the float transforms around them).
``random_bits`` is the older whole-array op (numpy reference), kept for draws past 2**32
elements.

>>> OPS["threefry2x32_x0"].reference(np.uint64(0), np.uint64(0)).tolist()
1797259609
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from .record import OPS, OpDef, declare  # noqa: F401  (OPS: doctest)


def threefry2x32(key: np.ndarray, counter_hi: np.ndarray, counter_lo: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011): a counter-based bijection.

    Every backend implements this exact function, so random streams are
    bit-identical across backends.
    """
    with np.errstate(over="ignore"):  # (0-d counters compute as scalars, which warn)
        return _rounds(np.uint32(key[0]), np.uint32(key[1]), counter_hi.astype(np.uint32),
                       counter_lo.astype(np.uint32))


def threefry2x32_words(key: np.ndarray, counter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`threefry2x32` over packed 64-bit words (any integer dtype, taken modulo
    2**64, as the C expression's casts do): the words (x0, x1), uint32."""
    k, c = np.broadcast_arrays(np.asarray(key).astype(np.uint64),
                               np.asarray(counter).astype(np.uint64))
    with np.errstate(over="ignore"):
        return _packed_rounds(k, c, np.uint32)


def _packed_rounds(key: Any, counter: Any, u32: Any) -> tuple[Any, Any]:
    """:func:`_rounds` of uint64 key and counter words (numpy's or MLX's; ``u32`` their
    uint32 dtype): each split into its high and low 32 bits."""
    lo32 = 0xFFFFFFFF
    return _rounds((key >> 32).astype(u32), (key & lo32).astype(u32),
                   (counter >> 32).astype(u32), (counter & lo32).astype(u32))


def _rounds(k0: Any, k1: Any, c0: Any, c1: Any) -> tuple[Any, Any]:
    """The 20 rounds on uint32 arrays of numpy or MLX (operators only: both wrap)."""
    k2 = k0 ^ k1 ^ 0x1BD11BDA
    ks = (k0, k1, k2)
    x0, x1 = c0 + k0, c1 + k1
    for i in range(5):
        for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + (i + 1)
    return x0, x1


def _word_ref(w: int) -> Any:
    def ref(key: np.ndarray, counter: np.ndarray) -> np.ndarray:
        d = np.result_type(key, counter)
        return threefry2x32_words(key, counter)[w].astype(d)

    return ref


def _word_mx(w: int) -> Any:
    def lower(mx: Any, key: Any, counter: Any) -> Any:
        words = _packed_rounds(key.astype(mx.uint64), counter.astype(mx.uint64), mx.uint32)
        return words[w].astype(key.dtype)

    return lower


_EXAMPLES = ("[1797259609, 928981903]", "[2579123966, 3453687069]")
THREEFRY_X0, THREEFRY_X1 = (declare(OpDef(
    f"threefry2x32_x{w}", "elementwise", 2, _word_ref(w), "integer",
    summary=f"word x{w} of Threefry-2x32 (20 rounds) of packed 64-bit words: key "
            "k0 << 32 | k1, counter c_hi << 32 | c_lo (integers taken modulo 2**64)",
    example=(f"bz.threefry2x32_x{w}(bz.asarray([0], dtype=bz.uint64), "
             "bz.asarray([0, 1], dtype=bz.uint64))", _EXAMPLES[w]),
    cost=32,  # 20 rounds of add/rotate/xor on two words, 5 key injections: ~4 libm calls
    c={"*": f"({{T}})bz_threefry2x32_x{w}((uint64_t){{0}}, (uint64_t){{1}})"},
    helpers=(f"bz_threefry2x32_x{w}",), mlx=_word_mx(w), public=False,  # bz.random's
    doc="Word x0 / x1 of Threefry-2x32 of packed key and counter words (module docstring).",
)) for w in (0, 1))


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
