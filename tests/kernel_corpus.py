"""A representative corpus of fused kernels, for testing code generators without running
them: the README workloads (elementwise chains, broadcasts, strided views, reductions,
softmax, layer/RMS norm, logsumexp, argmax/argmin, multi-output) over every real dtype,
every elementwise op of the table over every dtype of its domain, and deterministic
random programs (the generator of ``test_compiler.programs``, drawn with numpy's rng).
Kernels are deduplicated by structural name, so shapes that normalize alike count once."""

from __future__ import annotations

import functools

import numpy as np

import braze as bz
from braze.graph import dtypes as dt
from braze.graph.compiler import compile_graph
from braze.graph.kernel import Kernel, Schedule
from braze.graph.node import Node
from braze.graph.ops import OPS

from .helpers import elementwise_ops
from .test_compiler import build_program

REAL_DTYPES = [d for d in dt.ALL if d.kind != "c"]
N_RANDOM = 60


def _arr(shape: tuple[int, ...], d: np.dtype, seed: int = 0) -> bz.Array:
    rng = np.random.default_rng(seed)
    if d == dt.bool_:
        return bz.asarray(rng.integers(0, 2, shape).astype(bool))
    with np.errstate(all="ignore"):
        return bz.asarray((rng.standard_normal(shape) * 3).astype(np.float32).astype(d))


def _layer_norm(v: bz.Array, w: bz.Array) -> bz.Array:
    m = bz.mean(v, axis=-1, keepdims=True)
    return (v - m) / bz.sqrt(bz.var(v, axis=-1, keepdims=True) + 1e-5) * w + 1.0


def _rms_norm(v: bz.Array, w: bz.Array) -> bz.Array:
    return v * (1.0 / bz.sqrt(bz.mean(v * v, axis=-1, keepdims=True) + 1e-6)) * w


# (x, y: (16, 16); w: (16,)) -> outputs; a workload outside a dtype's domain is skipped
WORKLOADS = [
    lambda x, y, w: [bz.tanh(x) * 0.5 + 1 / (1 + bz.exp(-y)) * x - bz.exp(-x * x)
                     + bz.sqrt(bz.abs(y))],
    lambda x, y, w: [bz.softmax(x, axis=-1)], lambda x, y, w: [bz.softmax(x, axis=0)],
    lambda x, y, w: [_layer_norm(x, w)], lambda x, y, w: [_rms_norm(x, w)],
    lambda x, y, w: [bz.logsumexp(x, axis=-1)], lambda x, y, w: [x.T * 2.0 + y.T],
    lambda x, y, w: [x[::2, ::-1] - 1.0], lambda x, y, w: [bz.sum(x[:, 1:7], axis=0)],
    lambda x, y, w: [bz.mean(x, axis=(0, 1))], lambda x, y, w: [bz.var(x, axis=0)],
    lambda x, y, w: [bz.max(x, axis=1), bz.min(x, axis=1)],
    lambda x, y, w: [bz.exp(x), bz.sin(x) + y],
    lambda x, y, w: [x + y], lambda x, y, w: [x * w],
    lambda x, y, w: [bz.reshape(x, (4, 4, 16)).sum(axis=1)],
    lambda x, y, w: [x[::3] + y[::3]], lambda x, y, w: [bz.argmax(x, axis=-1)],
    lambda x, y, w: [bz.argmin(x, axis=0)], lambda x, y, w: [bz.max(x, axis=-1)],
    lambda x, y, w: [bz.sum(x, axis=-1), bz.prod(x, axis=-1)],
    lambda x, y, w: [bz.any(x != 0, axis=0)], lambda x, y, w: [bz.all(x == y, axis=-1)],
    lambda x, y, w: [bz.where(x > y, x, y)],
    lambda x, y, w: [bz.permute_dims(bz.reshape(x, (2, 8, 16)), (2, 0, 1)) * w[0]],
    lambda x, y, w: [bz.broadcast_to(w, (3, 16, 16)) + x[0]],
    lambda x, y, w: [bz.count_nonzero(x, axis=1)],
    lambda x, y, w: [bz.cumulative_sum(x, axis=-1)],
    lambda x, y, w: [bz.sum(bz.reshape(x, (4, 4, 16)), axis=(0, 2))],
]


def _elementwise_nodes(d: np.dtype, arity: int, args: tuple[Node, ...]) -> list[Node]:
    """One node per elementwise op of the table of this arity whose compute dtype is d,
    over ``args`` (64 elements each)."""
    return [Node(OPS[name], args[:arity], {"dtype": d} if name == "nextafter" else {},
                 (64,), result) for name, result in elementwise_ops(arity, d)]


def _op_nodes(d: np.dtype) -> list[list[bz.Array]]:
    """Every elementwise op of the table whose compute dtype is d: one kernel of all
    unary ops, one of all binary ops (multi-output)."""
    groups = []
    x, y = _arr((64,), d, 1)._node, _arr((64,), d, 2)._node
    for arity in (1, 2):
        nodes = _elementwise_nodes(d, arity, (x, y))
        if nodes:
            groups.append([bz.Array(n) for n in nodes])
    return groups


def _casts() -> list[list[bz.Array]]:
    out = []
    for src in REAL_DTYPES:
        x = _arr((32,), src, 3)
        out.append([x.astype(d) for d in REAL_DTYPES if d != src])
    return out


def _random_spec(rng: np.random.Generator):
    dtype = [np.float32, np.float64, np.int32][rng.integers(3)]
    base = tuple(int(v) for v in rng.integers(1, 6, rng.integers(1, 4)))
    inputs = []
    for _ in range(rng.integers(1, 4)):
        nd = int(rng.integers(0, len(base) + 1))
        shape = tuple(1 if rng.random() < 0.2 else s for s in base[len(base) - nd:])
        inputs.append(rng.integers(-4, 5, shape).astype(dtype))
    steps, n_vals = [], len(inputs)
    kinds = ["unary", "binary", "binary", "reduce", "view", "softmax", "scalar"]
    for _ in range(rng.integers(1, 13)):
        steps.append((kinds[rng.integers(len(kinds))], int(rng.integers(n_vals)),
                      int(rng.integers(n_vals)), int(rng.integers(1001))))
        n_vals += 1
    outs = sorted({int(v) for v in rng.integers(0, n_vals, rng.integers(1, 4))} | {n_vals - 1})
    return inputs, steps, outs


@functools.lru_cache(maxsize=1)
def programs() -> tuple[tuple[Schedule, list[np.ndarray]], ...]:
    """The compiled graphs (schedule, input arrays) that contribute a kernel of the
    corpus: what a test runs to execute every corpus kernel on real data."""
    graphs: list[list[bz.Array]] = []
    for d in REAL_DTYPES:
        x, y, w = _arr((16, 16), d, 0), _arr((16, 16), d, 1), _arr((16,), d, 2)
        for make in WORKLOADS:
            try:
                graphs.append(make(x, y, w))
            except (TypeError, ValueError):
                pass
        graphs += _op_nodes(d)
    graphs += _casts()
    rng = np.random.default_rng(7)
    for _ in range(N_RANDOM):
        graphs.append(build_program(_random_spec(rng)))
    seen: set[str] = set()
    out = []
    for outs in graphs:
        schedule, leaves = compile_graph([o._node for o in outs])
        keys = {_key(k) for k in schedule.kernels} - seen
        if keys:
            seen |= keys
            out.append((schedule, [leaf.data for leaf in leaves]))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def op_programs() -> tuple[tuple[Schedule, list[np.ndarray]], ...]:
    """One program per elementwise op of the table and real dtype of its domain (the
    corpus puts all ops of a dtype in one many-output kernel, which targets with a buffer
    limit -- Metal -- do not take). Float inputs mix magnitudes (x3, x1e-3, x1e-6) and
    hold 0, -0, +-inf and NaN."""
    out = []
    for d in REAL_DTYPES:
        args = []
        for seed in (1, 2):
            a = np.asarray(_arr((64,), d, seed))
            if d.kind == "f" or d in (dt.float16, dt.bfloat16):
                with np.errstate(all="ignore"):
                    a = a.astype(np.float32)
                    a[16:32] *= 1e-3
                    a[32:48] *= 1e-6
                    a[48:53] = [0.0, -0.0, np.inf, -np.inf, np.nan]
                    a = a.astype(d)
            args.append(bz.asarray(a)._node)
        for arity in (1, 2):
            for node in _elementwise_nodes(d, arity, tuple(args)):
                schedule, leaves = compile_graph([node])
                out.append((schedule, [leaf.data for leaf in leaves]))
    return tuple(out)


def _key(k: Kernel) -> str:
    return k.name + repr(k.shape) + repr([ld.view for ld in k.loads])


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[Kernel, ...]:
    """The kernels, deduplicated by structural name (first occurrence kept)."""
    seen: dict[str, Kernel] = {}
    for schedule, _ in programs():
        for k in schedule.kernels:
            seen.setdefault(_key(k), k)
    return tuple(seen.values())
