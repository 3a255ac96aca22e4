"""Random numbers (``bz.random``): counter-based, reproducible on every backend.

Keys are uint32 arrays of shape (2,); bits come from Threefry-2x32 over a counter,
so the same key gives the same numbers on every backend, lazily, in any order.
The bits of an n-element draw: counter ``c`` (``c < ceil(n / 2)``) gives words ``x0``
(element ``c``) and ``x1`` (element ``c + ceil(n / 2)``). They are computed by the
elementwise ``threefry2x32_x0`` / ``_x1`` records over the elements' flat indices (read
from a counter table, broadcast), so a draw and its float transform (and the ops after
it) are one fused kernel.
Signatures follow ``mlx.core.random`` (shape first, ``key=`` keyword). Without a
key, a global state (``seed``) is split at each call.

>>> import braze as bz
>>> k = bz.random.key(0)
>>> a, b = bz.random.uniform(shape=(3,), key=k), bz.random.uniform(shape=(3,), key=k)
>>> a.tolist() == b.tolist()
True
"""

from __future__ import annotations

import builtins
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.node import Node, constant
from ..graph.ops import BITCAST, RANDOM_BITS, broadcast_shapes, random_bits_ref
from .array import Array, as_array, astype
from .creation import asarray, normalize_shape
from .elementwise import (  # type: ignore[attr-defined]  # generated from the op records
    cos,
    log,
    maximum,
    minimum,
    sqrt,
    threefry2x32_x0,
    threefry2x32_x1,
    where,
)
from .reductions import argmax

_state: np.ndarray = np.zeros(2, np.uint32)


def _key_data(seed: int) -> np.ndarray:
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)


def seed(seed: int) -> None:
    """Seed the global random state.

    >>> import braze as bz
    >>> bz.random.seed(42); x = bz.random.normal((2,))
    >>> bz.random.seed(42); x.tolist() == bz.random.normal((2,)).tolist()
    True
    """
    global _state
    if isinstance(seed, builtins.bool) or not isinstance(seed, (builtins.int, np.integer)):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    _state = _key_data(seed)


seed(int.from_bytes(os.urandom(8), "little"))  # (os.urandom: what secrets would call)


def key(seed: int) -> Array:
    """A PRNG key (uint32, shape (2,)) from an integer seed.

    >>> import braze as bz
    >>> bz.random.key(1).tolist()
    [0, 1]
    """
    if isinstance(seed, builtins.bool) or not isinstance(seed, (builtins.int, np.integer)):
        raise TypeError(f"key: expected an int seed, got {type(seed).__name__}")
    return Array(constant(_key_data(seed)))


def _check_key(k: Any, op: str) -> Array:
    k = as_array(k, op)
    if k.dtype != dt.uint32 or k.shape != (2,):
        raise ValueError(f"{op}: key must be a uint32 array of shape (2,) (from bz.random.key), "
                         f"got {dt.name(k.dtype)} of shape {k.shape}")
    return k


def _next_key() -> Array:
    global _state
    new = random_bits_ref(_state, shape=(2, 2))
    _state = np.ascontiguousarray(new[0])
    return Array(constant(np.ascontiguousarray(new[1])))


def split(key: Array, num: int = 2) -> Array:
    """``num`` new independent keys from ``key``, as an array of shape (num, 2).

    >>> import braze as bz
    >>> bz.random.split(bz.random.key(0), 3).shape
    (3, 2)
    """
    k = _check_key(key, "split")
    if isinstance(num, builtins.bool) or not isinstance(num, (builtins.int, np.integer)) or num < 1:
        raise ValueError(f"split: num must be a positive int, got {num!r}")
    return bits((int(num), 2), key=k)


def bits(shape: Sequence[int] = (), width: int = 4, *, key: Array | None = None) -> Array:
    """Raw random bits: uint32 (``width=4``) or uint64 (``width=8``) of ``shape``.

    >>> import braze as bz
    >>> bz.random.bits((2,), key=bz.random.key(0)).dtype
    dtype('uint32')
    """
    shape = normalize_shape(shape, "bits")
    k = _next_key() if key is None else _check_key(key, "bits")
    if width not in (4, 8):
        raise ValueError(f"bits: width must be 4 or 8 bytes, got {width}")
    n = math.prod(shape) * (width // 4)
    if n == 0 or n > _FUSED_LIMIT:  # empty, or flat indices past uint32: the whole-array op
        return _bits_op(shape, width, k)
    k64 = _packed_key(k)
    if width == 4:
        return _word(k64, _flat_index(shape, 1), n)
    f = _flat_index(shape, 2)  # element j: the words of flat indices 2j and 2j + 1
    return _join(_word(k64, f, n), _word(k64, f + 1, n))


def _join(hi: Array, lo: Array) -> Array:
    """uint64 ``hi << 32 | lo`` of uint32 words (a multiply: a shift by a runtime amount
    keeps gcc from vectorizing kernels that also call libm)."""
    return astype(hi, dt.uint64) * (1 << 32) | astype(lo, dt.uint64)


def _bits_op(shape: tuple[int, ...], width: int, k: Array) -> Array:
    """:func:`bits` through the whole-array ``random_bits`` op (numpy reference)."""
    if width == 4:
        return Array(Node(RANDOM_BITS, (k._node,), {"shape": shape}, shape, dt.uint32))
    pair = shape + (2,)
    raw = Array(Node(RANDOM_BITS, (k._node,), {"shape": pair}, pair, dt.uint32))
    return astype(raw[..., 0], dt.uint64) << 32 | astype(raw[..., 1], dt.uint64)


# draws of more elements than this take the whole-array op (flat indices are uint32)
_FUSED_LIMIT = 2**32


def _packed_key(k: Array) -> Array:
    """The key as one uint64 word ``k0 << 32 | k1`` (0-d): packed now when ``k`` holds data
    (a (1,)-array leaf, so the key stays runtime data, not part of the cached structure)."""
    from .manipulation import reshape

    data = k._node.data
    if data is not None:
        d = np.asarray(data).astype(np.uint64)
        return reshape(Array(constant(np.array([d[0] << np.uint64(32) | d[1]]))), ())
    return astype(k[0], dt.uint64) << 32 | astype(k[1], dt.uint64)


# The counters of a draw come from one uint32 table 0, 1, 2...: its kernel reads the flat
# index of each element from it (there is no index instruction in the kernel IR). The table
# grows to the largest draw and is kept between draws up to _TABLE_KEEP entries (128 MiB);
# a larger draw builds its own.
_TABLE_KEEP = 1 << 25
_table = np.arange(0, dtype=np.uint32)


def _counters(m: int) -> np.ndarray:
    """The read-only uint32 table [0, m) (a view of the kept table where it fits)."""
    global _table
    if m > _table.size:
        if m > _TABLE_KEEP:
            out = np.arange(m, dtype=np.uint32)
            out.flags.writeable = False
            return out
        _table = np.arange(builtins.min(builtins.max(m, 2 * _table.size, 1 << 16),
                                        _TABLE_KEEP), dtype=np.uint32)
        _table.flags.writeable = False
    return _table[:m]


# the innermost run of dims a draw's kernel loops over in one (vectorized) loop: at least this
_INNER = 256


def _flat_index(shape: tuple[int, ...], scale: int) -> Array:
    """``scale`` times each element's C-order flat index, uint32 of ``shape``: the counter
    table over the trailing dims (at least ``_INNER`` elements: one vectorized loop) plus
    the table, scaled, over the leading dims, broadcast (read by the kernel, never
    materialized)."""
    from .manipulation import broadcast_to, reshape

    split, inner = len(shape), 1
    while split > 0 and inner < _INNER:
        split -= 1
        inner *= shape[split]
    outer = math.prod(shape[:split])
    f = reshape(Array(constant(_counters(inner))), (1,) * split + shape[split:])
    if scale != 1:
        f = f * scale
    if outer > 1:
        lead = reshape(Array(constant(_counters(outer))),
                       shape[:split] + (1,) * (len(shape) - split))
        f = lead * (inner * scale) + f
    return broadcast_to(f, shape) if f.shape != shape else f


def _word(k64: Array, f: Array, n: int) -> Array:
    """The uint32 bits at flat indices ``f`` of an ``n``-element draw under key ``k64``."""
    half = (n + 1) // 2
    hi = f < half
    c = astype(where(hi, f, f - half), dt.uint64)
    return where(hi, astype(threefry2x32_x0(k64, c), dt.uint32),
                 astype(threefry2x32_x1(k64, c), dt.uint32))


def _pair(shape: tuple[int, ...], width: int, k: Array | None) -> tuple[Array, Array]:
    """``bits((2,) + shape, width)[0]`` and ``[1]``: the two words of the same counters."""
    k = _next_key() if k is None else _check_key(k, "bits")
    if not 0 < 2 * math.prod(shape) * (width // 4) <= _FUSED_LIMIT:
        b = _bits_op((2,) + shape, width, k)
        return b[0], b[1]
    k64 = _packed_key(k)

    def words(f: Array) -> tuple[Array, Array]:
        c = astype(f, dt.uint64)
        return (astype(threefry2x32_x0(k64, c), dt.uint32),
                astype(threefry2x32_x1(k64, c), dt.uint32))

    if width == 4:
        return words(_flat_index(shape, 1))
    f = _flat_index(shape, 2)
    (a0, a1), (b0, b1) = words(f), words(f + 1)
    return _join(a0, b0), _join(a1, b1)


def _bitcast(x: Array, dtype: np.dtype) -> Array:
    return Array(Node(BITCAST, (x._node,), {"dtype": dtype}, x.shape, dtype))


def _unit(shape: tuple[int, ...], dtype: np.dtype, k: Array | None) -> Array:
    """Uniform [0, 1) of ``dtype``'s precision (float64: 52 bits; others: 23 bits)."""
    return _to_unit(bits(shape, 8 if dtype == dt.float64 else 4, key=k))


def _to_unit(b: Array) -> Array:
    """Bits -> [0, 1): the mantissa bits under the exponent of 1.0, minus 1."""
    if b.dtype == dt.uint64:
        return _bitcast(b >> 12 | 0x3FF0000000000000, dt.float64) - 1.0
    return _bitcast(b >> 9 | 0x3F800000, dt.float32) - 1.0


def _float_dtype(dtype: Any, op: str) -> np.dtype:
    d = dt.to_dtype(dtype, op)
    if not dt.is_real_floating(d):
        raise TypeError(f"{op}: dtype must be a real floating dtype, got {dt.name(d)}")
    return d


def _out_shape(shape: Any, op: str, *params: Any) -> tuple[int, ...]:
    shapes = [p.shape for p in params if isinstance(p, Array)]
    if shape is None:
        return broadcast_shapes(*shapes, op=op) if shapes else ()
    out = normalize_shape(shape, op)
    for s in shapes:
        if broadcast_shapes(s, out, op=op) != out:
            raise ValueError(f"{op}: parameter of shape {s} does not broadcast to shape {out}")
    return out


def _size(shape: Any, size: Any, op: str) -> Any:
    """``shape`` or NumPy's ``size`` (one of them)."""
    if size is None:
        return shape
    if shape not in ((), None):
        raise TypeError(f"{op}: pass shape or size, not both")
    return () if size is None else size


def uniform(low: Any = 0.0, high: Any = 1.0, shape: Sequence[int] = (), dtype: Any = dt.float32,
            *, key: Array | None = None, size: Any = None) -> Array:
    """Uniform samples in [low, high) (``size=``: NumPy's name for ``shape``).

    >>> import braze as bz
    >>> x = bz.random.uniform(-1, 1, (1000,), key=bz.random.key(3))
    >>> bool((x >= -1).all() and (x < 1).all())
    True
    """
    d = _float_dtype(dtype, "uniform")
    shape = _out_shape(_size(shape, size, "uniform"), "uniform", low, high)
    if not isinstance(low, Array) and not isinstance(high, Array) and not high > low:
        raise ValueError(f"uniform: need low < high, got low={low}, high={high}")
    u = _unit(shape, d, key)
    lo = astype(low, u.dtype) if isinstance(low, Array) else low
    hi = astype(high, u.dtype) if isinstance(high, Array) else high
    x = astype(u * (hi - lo) + lo, d)
    # rounding may land on `high`: step back to the largest value below it
    hi_d = astype(high, d) if isinstance(high, Array) else asarray(high, dtype=d)
    below = Array(constant(np.nextafter(np.asarray(hi_d), np.asarray(-np.inf, d)).astype(d))) \
        if not isinstance(high, Array) else None
    if below is not None:
        return minimum(x, below)
    lo_d = astype(low, d) if isinstance(low, Array) else low
    return where(x < hi_d, x, lo_d)  # array bounds: the (rare) rounded-up sample maps to low


def normal(shape: Sequence[int] = (), dtype: Any = dt.float32, loc: Any = 0.0,
           scale: Any = 1.0, *, key: Array | None = None, size: Any = None) -> Array:
    """Normal samples with mean ``loc`` and standard deviation ``scale`` (Box-Muller).
    MLX's positional order (shape first); NumPy's keywords work: ``normal(loc=0,
    scale=1, size=n)``.

    >>> import braze as bz
    >>> x = bz.random.normal((100000,), key=bz.random.key(0))
    >>> abs(x.mean().item()) < 0.02 and abs(x.std().item() - 1) < 0.02
    True
    """
    d = _float_dtype(dtype, "normal")
    shape = _out_shape(_size(shape, size, "normal"), "normal", loc, scale)
    work = dt.float64 if d == dt.float64 else dt.float32
    u0, u1 = (_to_unit(b) for b in _pair(shape, 8 if work == dt.float64 else 4, key))
    radius = sqrt(log(1.0 - u0) * -2.0)  # 1 - u is in (0, 1]: log is finite
    z = radius * cos(u1 * (2 * math.pi))
    if isinstance(scale, Array) or scale != 1.0:
        z = z * (astype(scale, work) if isinstance(scale, Array) else scale)
    if isinstance(loc, Array) or loc != 0.0:
        z = z + (astype(loc, work) if isinstance(loc, Array) else loc)
    return astype(z, d)


def randint(low: Any, high: Any = None, shape: Sequence[int] = (), dtype: Any = dt.int32, *,
            key: Array | None = None, size: Any = None) -> Array:
    """Uniform integers in [low, high) ([0, low) without ``high``, as NumPy; ``size=``:
    NumPy's name for ``shape``).

    >>> import braze as bz
    >>> x = bz.random.randint(0, 3, (100,), key=bz.random.key(0))
    >>> sorted(set(x.tolist()))
    [0, 1, 2]
    """
    d = dt.to_dtype(dtype, "randint")
    if not dt.is_integer(d):
        raise TypeError(f"randint: dtype must be an integer dtype, got {dt.name(d)}")
    if high is None:
        low, high = 0, low
    shape = _out_shape(_size(shape, size, "randint"), "randint", low, high)
    if not isinstance(low, Array) and not isinstance(high, Array):
        if not high > low:
            raise ValueError(f"randint: need low < high, got low={low}, high={high}")
        info = np.iinfo(d)
        if low < info.min or high - 1 > info.max:
            raise OverflowError(f"randint: [{low}, {high}) does not fit {dt.name(d)}")
    lo = astype(low, dt.int64) if isinstance(low, Array) else asarray(int(low), dtype=dt.int64)
    hi = astype(high, dt.int64) if isinstance(high, Array) else asarray(int(high), dtype=dt.int64)
    span = astype(maximum(hi - lo, 1), dt.uint64)
    r = bits(shape, 8, key=key) % span  # bias <= span / 2**64
    return astype(astype(r, dt.int64) + lo, d)


def bernoulli(p: Any = 0.5, shape: Sequence[int] | None = None, *,
              key: Array | None = None) -> Array:
    """Booleans that are True with probability ``p``.

    >>> import braze as bz
    >>> bz.random.bernoulli(0.0, (3,)).tolist()
    [False, False, False]
    """
    if not isinstance(p, Array) and not 0 <= p <= 1:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
    shape = _out_shape(shape, "bernoulli", p)
    u = _unit(shape, dt.float32, key)
    return u < (astype(p, dt.float32) if isinstance(p, Array) else p)


def gumbel(shape: Sequence[int] = (), dtype: Any = dt.float32, *,
           key: Array | None = None) -> Array:
    """Standard Gumbel samples ``-log(-log(u))``.

    >>> import braze as bz
    >>> bz.random.gumbel((2, 3)).shape
    (2, 3)
    """
    d = _float_dtype(dtype, "gumbel")
    shape = normalize_shape(shape, "gumbel")
    u = _unit(shape, dt.float64 if d == dt.float64 else dt.float32, key)
    return astype(-log(-log(u)), d)


def categorical(logits: Array, axis: int = -1, shape: Sequence[int] | None = None,
                num_samples: int | None = None, *, key: Array | None = None) -> Array:
    """Sample category indices from unnormalized log-probabilities (Gumbel-max).

    >>> import braze as bz
    >>> logits = bz.log(bz.asarray([[0.0, 1.0], [1.0, 0.0]]))
    >>> bz.random.categorical(logits).tolist()
    [1, 0]
    """
    logits = as_array(logits, "categorical")
    if not dt.is_real_floating(logits.dtype):
        raise TypeError(f"categorical: logits must be real floating, got "
                        f"{dt.name(logits.dtype)}")
    if logits.ndim == 0:
        raise ValueError("categorical: logits must have at least one dimension")
    from .manipulation import expand_dims, moveaxis

    ax = axis % logits.ndim if -logits.ndim <= axis < logits.ndim else None
    if ax is None:
        raise ValueError(f"categorical: axis {axis} out of bounds for shape {logits.shape}")
    lg = moveaxis(logits, ax, -1)
    batch = lg.shape[:-1]
    if shape is not None and num_samples is not None:
        raise ValueError("categorical: pass at most one of shape and num_samples")
    if num_samples is not None:
        lg = expand_dims(lg, axis=-2)
        out_shape = batch + (int(num_samples),)
    elif shape is not None:
        out_shape = normalize_shape(shape, "categorical")
        if broadcast_shapes(batch, out_shape, op="categorical") != out_shape:
            raise ValueError(f"categorical: shape {out_shape} is not compatible with logits "
                             f"batch shape {batch}")
    else:
        out_shape = batch
    g = gumbel(out_shape + (lg.shape[-1],), key=key)
    return argmax(astype(lg, dt.float32) + g, axis=-1)


# ---------------------------------------------------------------- NumPy's names
def random(size: Any = None, dtype: Any = dt.float32, *, key: Array | None = None) -> Array:
    """Uniform samples in [0, 1) of shape ``size`` (NumPy's ``random.random``).

    >>> import braze as bz
    >>> x = bz.random.random((3,), key=bz.random.key(0))
    >>> x.shape, bool(((x >= 0) & (x < 1)).all())
    ((3,), True)
    """
    return uniform(0.0, 1.0, () if size is None else size, dtype, key=key)


def random_sample(size: Any = None, *, key: Array | None = None) -> Array:
    """NumPy's older name for :func:`random`.

    >>> import braze as bz
    >>> bz.random.random_sample((2, 2)).shape
    (2, 2)
    """
    return random(size, key=key)


def rand(*dims: int, key: Array | None = None) -> Array:
    """Uniform [0, 1) samples of shape ``dims``.

    >>> import braze as bz
    >>> bz.random.rand(2, 3).shape
    (2, 3)
    """
    return random(dims, key=key)


def randn(*dims: int, key: Array | None = None) -> Array:
    """Standard normal samples of shape ``dims``.

    >>> import braze as bz
    >>> bz.random.randn(2).shape
    (2,)
    """
    return normal(dims, key=key)


def standard_normal(size: Any = None, dtype: Any = dt.float32, *, key: Array | None = None
                    ) -> Array:
    """Standard normal samples of shape ``size``.

    >>> import braze as bz
    >>> bz.random.standard_normal(3).shape
    (3,)
    """
    return normal(() if size is None else size, dtype, key=key)


def exponential(scale: Any = 1.0, size: Any = None, *, key: Array | None = None) -> Array:
    """Exponential samples with mean ``scale`` (``-scale * log(1 - u)``).

    >>> import braze as bz
    >>> x = bz.random.exponential(2.0, (100000,), key=bz.random.key(1))
    >>> abs(x.mean().item() - 2.0) < 0.05
    True
    """
    shape = _out_shape(size, "exponential", scale)
    u = _unit(shape, dt.float32, key)
    return -log(1.0 - u) * (astype(scale, dt.float32) if isinstance(scale, Array) else scale)


def permutation(x: Any, *, key: Array | None = None) -> Array:
    """A random permutation of ``range(x)`` (an int), or of ``x``'s first axis. Lazy:
    an argsort of 64-bit random keys.

    >>> import braze as bz
    >>> sorted(bz.random.permutation(5, key=bz.random.key(0)).tolist())
    [0, 1, 2, 3, 4]
    """
    from .indexing import take
    from .searching import argsort

    if isinstance(x, (builtins.int, np.integer)) and not isinstance(x, builtins.bool):
        if x < 0:
            raise ValueError(f"permutation: n must be non-negative, got {x}")
        return argsort(bits((int(x),), 8, key=key))
    a = asarray(x)
    if a.ndim == 0:
        raise ValueError("permutation: x must be an int or an array of at least 1 dimension")
    return take(a, argsort(bits((a.shape[0],), 8, key=key)), axis=0)


def shuffle(x: Array, *, key: Array | None = None) -> None:
    """Shuffle ``x`` along its first axis in place (``x`` is rebound to the permuted
    value, as every braze in-place update).

    >>> import braze as bz
    >>> x = bz.arange(4); bz.random.shuffle(x, key=bz.random.key(0))
    >>> sorted(x.tolist())
    [0, 1, 2, 3]
    """
    if not isinstance(x, Array):
        raise TypeError(f"shuffle: x must be a braze Array, got {type(x).__name__}")
    x[...] = permutation(x, key=key)


def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, *,
           key: Array | None = None) -> Array:
    """Random samples from ``a`` (an int ``n``: ``range(n)``; or a 1-d array), with
    probabilities ``p``, with or without replacement. Lazy (without replacement: the
    top ``size`` of Gumbel-perturbed log-probabilities).

    >>> import braze as bz
    >>> bz.random.choice(3, 5, p=bz.asarray([0.0, 1.0, 0.0])).tolist()
    [1, 1, 1, 1, 1]
    """
    from .indexing import take
    from .searching import argsort

    if isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool):
        n, pool = int(a), None
    else:
        pool = asarray(a)
        if pool.ndim != 1:
            raise ValueError(f"choice: a must be an int or a 1-d array, got shape {pool.shape}")
        n = pool.shape[0]
    shape = () if size is None else normalize_shape(size, "choice")
    count = int(np.prod(shape))
    if n <= 0 and count:
        raise ValueError("choice: a must be non-empty to draw samples")
    if not replace and count > n:
        raise ValueError(f"choice: cannot take {count} samples from {n} without replacement")
    logp = None
    if p is not None:
        pa = asarray(p)
        if pa.shape != (n,):
            raise ValueError(f"choice: p of shape {pa.shape} must match a's {n} entries")
        logp = log(astype(pa, dt.float32))
    if replace:
        if logp is None:
            idx = randint(0, builtins.max(n, 1), shape, dt.int64, key=key)
        else:
            idx = categorical(logp, shape=shape, key=key) if shape else categorical(
                logp, key=key)
    else:
        g = gumbel((n,), key=key)
        score = g if logp is None else g + logp
        idx = argsort(score, descending=True)[:count].reshape(shape)
    if pool is None:
        return idx
    return take(pool, idx.reshape((-1,))).reshape(shape)


class Generator:
    """NumPy's ``Generator`` on braze's counter-based keys: each call splits the
    generator's key, so a seeded generator gives the same stream on every backend.

    >>> import braze as bz
    >>> a = bz.random.default_rng(7).random(3)
    >>> a.tolist() == bz.random.default_rng(7).random(3).tolist()
    True
    """

    def __init__(self, seed: int | None = None) -> None:
        self._key = key(int.from_bytes(os.urandom(8), "little") >> 1 if seed is None else seed)

    def _next(self) -> Array:
        pair = split(self._key, 2)
        self._key = Array(constant(np.asarray(pair[0])))
        return pair[1]

    def random(self, size: Any = None, dtype: Any = dt.float32) -> Array:
        return random(size, dtype, key=self._next())

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Array:
        return uniform(low, high, () if size is None else size, key=self._next())

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Array:
        return normal(() if size is None else size, loc=loc, scale=scale, key=self._next())

    def standard_normal(self, size: Any = None, dtype: Any = dt.float32) -> Array:
        return standard_normal(size, dtype, key=self._next())

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = dt.int64,
                 endpoint: bool = False) -> Array:
        if high is None:
            low, high = 0, low
        if endpoint:
            high = high + 1
        return randint(low, high, () if size is None else size, dtype, key=self._next())

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Array:
        return exponential(scale, size, key=self._next())

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None) -> Array:
        return choice(a, size, replace, p, key=self._next())

    def permutation(self, x: Any) -> Array:
        return permutation(x, key=self._next())

    def shuffle(self, x: Array) -> None:
        shuffle(x, key=self._next())


def default_rng(seed: int | None = None) -> Generator:
    """A :class:`Generator` seeded with ``seed`` (fresh entropy without one).

    >>> import braze as bz
    >>> bz.random.default_rng(0).integers(0, 10, size=4).shape
    (4,)
    """
    return Generator(seed)


__all__ = ["seed", "key", "split", "bits", "uniform", "normal", "randint", "bernoulli",
           "gumbel", "categorical", "random", "random_sample", "rand", "randn", "standard_normal",
           "exponential", "permutation", "shuffle", "choice", "Generator", "default_rng"]
