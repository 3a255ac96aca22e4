"""Random braze programs for the differential fuzzer (tests/fuzz/test_fuzz.py) over every
dtype braze computes (bool, integers, float16, bfloat16, float32/64, complex64).

A program is a spec -- input arrays and steps over earlier values -- replayed by
:func:`build` under any backend (recording is backend-independent; evaluating marks the
nodes, so each backend gets its own recording). Steps: every elementwise op of the op table
whose compute dtype is the value's (unary and binary, with broadcasting), casts between
every real dtype, reductions over random axes (keepdims or not), views (slices with steps,
negative ones included, transposes, broadcasts, reshapes, expand_dims, squeeze), ``where``,
``matmul`` of float values, ``take`` with an index array, boolean-mask indexing (a result
whose shape depends on values), ``concatenate``; inputs of every
dtype, 0-d and empty included, sometimes one large 1-d input (so that the cpu backend's
threads share a kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

import braze as bz
from braze.graph import dtypes as dt

from ..helpers import elementwise_ops

DTYPES = [dt.bool_, np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32),
          np.dtype(np.int64), dt.float16, dt.bfloat16, np.dtype(np.float32),
          np.dtype(np.float64), np.dtype(np.complex64)]
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "any", "all"]
BIG = (1 << 17) + 3  # elements of the occasional large input


def _values(rng: np.random.Generator, shape: tuple[int, ...], d: np.dtype) -> np.ndarray:
    if d == dt.bool_:
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        lo = 0 if d.kind == "u" else -5
        return rng.integers(lo, 6, shape).astype(d)
    if d.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
    v = rng.standard_normal(shape) * 2.0
    return v.astype(np.float32).astype(d)


def _op(name: str) -> Callable[..., Any] | None:
    f = getattr(bz, name, None)
    return f if callable(f) else None


@st.composite
def programs(draw: Any) -> tuple[list[np.ndarray], list[tuple[str, tuple[Any, ...]]], list[int]]:
    """(inputs, steps, outputs): steps are (kind, params), params index earlier values."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    big = draw(st.integers(0, 9)) == 0
    base = (BIG,) if big else tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        d = draw(st.sampled_from(DTYPES))
        nd = draw(st.integers(0, len(base)))
        shape = tuple(1 if draw(st.integers(0, 4)) == 0 else s for s in base[len(base) - nd:])
        inputs.append(_values(rng, shape, d))
    steps: list[tuple[str, tuple[Any, ...]]] = []
    n_vals = len(inputs)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "cast", "reduce", "view",
                                     "where", "matmul", "take", "mask", "concat"]))
        a, b = draw(st.integers(0, n_vals - 1)), draw(st.integers(0, n_vals - 1))
        steps.append((kind, (a, b, draw(st.integers(0, 10**6)))))
        n_vals += 1
    outs = sorted(set(draw(st.lists(st.integers(0, n_vals - 1), min_size=1, max_size=3)))
                  | {n_vals - 1})
    return inputs, steps, outs


def _step(kind: str, x: bz.Array, y: bz.Array, r: int) -> bz.Array:
    """One step; raises TypeError/ValueError where it does not apply (the step is then
    the identity: the same for every backend, as the spec is)."""
    if kind == "unary":
        ops = [n for n, _ in elementwise_ops(1, x.dtype) if _op(n)]
        if not ops:
            raise TypeError("no unary op")
        return _op(ops[r % len(ops)])(x)  # type: ignore[misc]
    if kind == "binary":
        ops = [n for n, _ in elementwise_ops(2, x.dtype) if _op(n)]
        if not ops:
            raise TypeError("no binary op")
        return _op(ops[r % len(ops)])(x, y.astype(x.dtype))  # type: ignore[misc]
    if kind == "cast":
        return x.astype(DTYPES[r % len(DTYPES)])
    if kind == "reduce":
        name = REDUCTIONS[r % len(REDUCTIONS)]
        if x.ndim == 0:
            return getattr(bz, name)(x)
        axes = tuple(sorted({(r >> (3 + 2 * i)) % x.ndim for i in range(1 + r % x.ndim)}))
        return getattr(bz, name)(x, axis=axes, keepdims=bool(r & 4))
    if kind == "view":
        if x.ndim == 0:
            return bz.broadcast_to(x, (2,))
        c = r % 6
        if c == 0:
            step = [1, 2, -1, -2, 3][(r >> 3) % 5]
            return x[..., ::step] if r & 8 else x[::step]
        if c == 1:
            return bz.permute_dims(x, tuple(reversed(range(x.ndim))))
        if c == 2:
            return bz.broadcast_to(x, (2, *x.shape))
        if c == 3:
            return bz.reshape(x, (-1,)) if x.size else bz.reshape(x, (0,))
        if c == 4:
            return bz.expand_dims(x, (r >> 3) % (x.ndim + 1))
        ones = tuple(i for i, s in enumerate(x.shape) if s == 1)
        return bz.squeeze(x, ones) if ones else x[1:]
    if kind == "where":
        return bz.where(x > 0 if x.dtype != dt.bool_ else x, x, y.astype(x.dtype))
    if kind == "matmul":
        if x.dtype.kind != "f" or x.ndim == 0:
            raise TypeError("float, at least 1-d")
        n = x.shape[-1]
        m = np.arange(n * 3).reshape(n, 3) % 5 - 2
        return x @ bz.asarray(m.astype(x.dtype))
    if kind == "mask":  # boolean indexing: a 1-d result whose length depends on values
        if x.ndim == 0:
            raise ValueError("0-d")
        try:
            fits = bz.broadcast_shapes(y.shape, x.shape) == x.shape
        except ValueError:
            fits = False
        m = bz.broadcast_to(y, x.shape) if fits else x
        return x[m != 0] if r & 1 else x[bz.logical_not(m != 0)]
    if kind == "take":
        if x.ndim == 0 or x.shape[0] == 0:
            raise ValueError("nothing to take from")
        idx = np.array([(r >> i) % x.shape[0] for i in range(0, 12, 3)], np.int64)
        return bz.take(x, bz.asarray(idx), axis=0)
    # concat
    if x.ndim == 0:
        raise ValueError("0-d")
    y2 = bz.broadcast_to(y.astype(x.dtype), x.shape) if y.ndim <= x.ndim else None
    if y2 is None:
        raise ValueError("shapes")
    return bz.concatenate([x, y2], axis=r % x.ndim)


def build(spec: tuple[list[np.ndarray], list[tuple[str, tuple[Any, ...]]], list[int]],
          inputs: list[bz.Array] | None = None, everything: bool = False) -> list[bz.Array]:
    """The program's outputs (``everything``: every value), recorded now (on whatever
    backend will evaluate them)."""
    arrays, steps, outs = spec
    vals = list(inputs) if inputs is not None else [bz.asarray(a.copy()) for a in arrays]
    for kind, (a, b, r) in steps:
        x, y = vals[a], vals[b]
        try:
            with np.errstate(all="ignore"):
                v = _step(kind, x, y, r)
            if v.size > 4 * BIG:
                raise ValueError("too big")
        except (TypeError, ValueError):
            v = x
        vals.append(v)
    return vals if everything else [vals[o] for o in outs]
