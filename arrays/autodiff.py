"""Function transformations: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``stop_gradient`` and ``custom_vjp``, by rewriting the recorded graph.

A transformed function runs on *variables*: placeholder nodes (the ``parameter`` leaf op
that ``bz.compile`` traces with) standing for the differentiated arguments, under
:func:`~braze.arrays.array.tracing`, so the graph it records stays whole (no eager
shortcut, no cut). Reverse mode then walks that graph from the outputs back to the
variables in reverse recording order and applies each op record's ``vjp`` rule
(:attr:`braze.graph.ops.OpDef.vjp`), which records the backward graph with the public
ops. Backward nodes are ordinary nodes: the compiler fuses and memory-plans forward and
backward as one graph, and a backward graph can be differentiated again (``grad(grad(f))``;
``jvp`` is the transpose of ``vjp``: the VJP of ``u -> vjp(f, x, u)``). Last, each
variable becomes an identity view of the argument it stands for, so the results are
ordinary lazy arrays.

>>> import braze as bz
>>> bz.grad(lambda x: bz.sum(x * x))(bz.asarray([1.0, 2.0])).tolist()
[2.0, 4.0]
"""

from __future__ import annotations

import contextvars
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from ..graph.evaluate import topo_order
from ..graph.node import Node
from ..graph.ops import OPS, PARAMETER, RESHAPE
from . import creation
from .array import Array, as_array, tracing
from .compile import flatten, unflatten

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "stop_gradient", "custom_vjp", "checkpoint"]


# ---------------------------------------------------------------- what rules are given
class RuleOps:
    """The namespace a gradient rule records with: every public braze function (as
    ``ad.exp``, ``ad.sum``...) plus the few graph-level helpers rules share. Rules live
    in the op records (``graph/ops``), which cannot import the public API (imports flow
    from ``arrays`` to ``graph``), so it is handed to them at the call."""

    def __getattr__(self, name: str) -> Any:
        import braze.arrays as bz

        return getattr(bz, name)

    @staticmethod
    def apply(name: str, *xs: Any, **attrs: Any) -> Array:
        """Record the non-elementwise op ``name`` on ``xs`` with ``attrs`` (its shape rule
        decides the result): for the view and library ops rules need raw."""
        op = OPS[name]
        nodes = tuple(as_array(x, name)._node for x in xs)
        assert op.infer is not None
        shape, dtype = op.infer(tuple(n.shape for n in nodes), tuple(n.dtype for n in nodes),
                                attrs)
        return Array(Node(op, nodes, attrs, tuple(shape), dtype))

    @staticmethod
    def is_transpose(x: Array) -> bool:
        """Whether ``x`` was recorded as the transpose of a matrix (a layer's ``W.T``):
        a rule can then give its cotangent in the matrix's own layout.

        >>> import braze as bz
        >>> AD.is_transpose(bz.ones((2, 3)).T), AD.is_transpose(bz.ones((2, 3)))
        (True, False)
        """
        n = x._node
        return n.op.name == "permute_dims" and n.attrs.get("axes") == (1, 0)

    @staticmethod
    def sum_to(g: Array, shape: tuple[int, ...]) -> Array:
        """``g`` summed down to ``shape`` (the transpose of broadcasting to g's shape)."""
        return _sum_to(g, shape)

    @staticmethod
    def unreduce(g: Array, shape: tuple[int, ...], axes: tuple[int, ...],
                 keepdims: bool) -> Array:
        """A reduction's cotangent ``g`` broadcast back over the reduced ``axes``."""
        import braze.arrays as bz

        if not keepdims:
            g = bz.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(shape)))
        return bz.broadcast_to(g, shape)


AD = RuleOps()


def _sum_to(g: Array, shape: tuple[int, ...]) -> Array:
    import braze.arrays as bz

    if g.shape == shape:
        return g
    if g.ndim < len(shape) or any(a < b for a, b in zip(g.shape[g.ndim - len(shape):], shape)):
        g = bz.broadcast_to(g, np.broadcast_shapes(g.shape, shape))
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    if axes:
        g = bz.sum(g, axis=axes, keepdims=True)
    return bz.reshape(g, shape)


# ---------------------------------------------------------------- marks on nodes
# stop_gradient's identity nodes, and custom_vjp's outputs -> their rule
_STOPPED: weakref.WeakSet[Node] = weakref.WeakSet()
_CUSTOM: weakref.WeakKeyDictionary[Node, _CustomCall] = weakref.WeakKeyDictionary()


def _identity(node: Node) -> Node:
    return Node(RESHAPE, (node,), {"shape": node.shape}, node.shape, node.dtype, None,
                node.weak)


def stop_gradient(x: Any) -> Array:
    """``x``, through which no transformation differentiates (a constant to grad/vjp/jvp).

    >>> import braze as bz
    >>> bz.grad(lambda x: bz.sum(x * bz.stop_gradient(x)))(bz.asarray([3.0])).tolist()
    [3.0]
    """
    x = as_array(x, "stop_gradient")
    if _DEPTH.get() == 0:  # no transformation in progress: nothing to stop (no extra node)
        return x
    node = _identity(x._node)
    _STOPPED.add(node)
    return Array(node)


class _CustomCall:
    """One call of a custom_vjp function under a transformation: its backward, the
    argument nodes it differentiates to, the residuals, and its output nodes."""

    __slots__ = ("bwd", "inputs", "arg_struct", "arg_leaves", "residuals", "outputs",
                 "out_struct", "done")

    def __init__(self, bwd: Callable[..., Any], arg_leaves: list[Any], arg_struct: Any,
                 residuals: Any, outputs: list[Node], out_struct: Any) -> None:
        self.bwd = bwd
        self.arg_leaves = arg_leaves
        self.arg_struct = arg_struct
        self.inputs = [x._node if isinstance(x, Array) else None for x in arg_leaves]
        self.residuals = residuals
        self.outputs = outputs
        self.out_struct = out_struct
        self.done = False


class custom_vjp:  # noqa: N801 - used as a decorator, as jax.custom_vjp is
    """A function with a user-defined backward (JAX's ``custom_vjp``).

    ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (outputs, residuals)``, ``bwd(residuals, g)
    -> one cotangent per argument`` (None: zero). Outside transformations ``f`` runs as is.

    >>> import braze as bz
    >>> @bz.custom_vjp
    ... def clip_grad(x):
    ...     return x
    >>> clip_grad.defvjp(lambda x: (x, None), lambda res, g: (bz.clip(g, -1.0, 1.0),))
    >>> bz.grad(lambda x: bz.sum(clip_grad(x) * 5.0))(bz.asarray([1.0])).tolist()
    [1.0]
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        functools.update_wrapper(self, fun)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> Any:
        if _DEPTH.get() == 0:
            return self.fun(*args)
        if self.fwd is None or self.bwd is None:
            raise TypeError(f"custom_vjp: {getattr(self.fun, '__name__', 'function')} has no "
                            "rule: call defvjp(fwd, bwd) first")
        out, residuals = self.fwd(*args)
        leaves, struct = flatten(out)
        nodes = [_identity(as_array(o, "custom_vjp")._node) for o in leaves]
        arg_leaves, arg_struct = flatten(args)
        call = _CustomCall(self.bwd, arg_leaves, arg_struct, residuals, nodes, struct)
        for n in nodes:
            _CUSTOM[n] = call
        return unflatten(struct, [Array(n) for n in nodes])


# ---------------------------------------------------------------- reverse mode
# transformations in progress on this thread / task (custom_vjp records its rule only
# inside one; another thread's grad does not make this thread's stop_gradient a node)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("braze_ad_depth", default=0)


def _differentiable(d: np.dtype) -> bool:
    return dt.is_real_floating(d)


def _order(roots: list[Node]) -> list[Node]:
    """Pending nodes behind ``roots`` in recording order, custom_vjp calls' arguments
    included (their backward reaches them past the function's own nodes)."""
    roots = list(roots)
    seen_calls: set[int] = set()
    while True:
        order = topo_order(roots)
        more = []
        for n in order:
            call = _CUSTOM.get(n)
            if call is not None and id(call) not in seen_calls:
                seen_calls.add(id(call))
                more += [x for x in call.inputs if x is not None and x.data is None]
        if not more:
            return order
        roots += more


def backward(outputs: Sequence[Node], cotangents: Sequence[Array], wrt: Sequence[Node],
             name: str) -> list[Array | None]:
    """The cotangents of ``wrt`` given those of ``outputs`` (None: no path), recorded."""
    wrt_ids = {id(v) for v in wrt}
    order = _order([o for o in outputs if o.data is None])
    active = set(wrt_ids)
    for n in order:
        if id(n) in active or n in _STOPPED:
            continue
        call = _CUSTOM.get(n)
        ins = call.inputs if call is not None else n.inputs
        if not any(x is not None and id(x) in active for x in ins):
            continue
        if dt.is_complex(n.dtype):
            raise TypeError(f"{name}: differentiating through complex values is not "
                            f"supported (op {n.op.name} gives {dt.name(n.dtype)})")
        if _differentiable(n.dtype):  # (integer and bool results carry no gradient)
            active.add(id(n))
    cts: dict[int, Array] = {}

    def add(node: Node, g: Array | None) -> None:
        if g is None or id(node) not in active:
            return
        if g.shape != node.shape:
            g = _sum_to(g, node.shape)
        if g.dtype != node.dtype:
            g = g.astype(node.dtype)
        prev = cts.get(id(node))
        cts[id(node)] = g if prev is None else prev + g

    for o, seed in zip(outputs, cotangents):
        add(o, seed)
    for n in reversed(order):
        if id(n) in wrt_ids or id(n) not in active:
            continue
        call = _CUSTOM.get(n)
        if call is not None:
            if not call.done:
                call.done = True
                _custom_backward(call, cts, add, name)
            continue
        g = cts.pop(id(n), None)
        if g is None:
            continue
        rule = n.op.vjp
        if rule is None:
            raise TypeError(f"{name}: op {n.op.name} has no gradient rule (recorded with "
                            f"inputs {[x.shape for x in n.inputs]}); it cannot be "
                            "differentiated")
        gs = rule(AD, g, Array(n), *[Array(x) for x in n.inputs], **n.attrs)
        for x, gx in zip(n.inputs, gs):
            add(x, gx)
    return [cts.get(id(v)) for v in wrt]


def _custom_backward(call: _CustomCall, cts: dict[int, Array], add: Callable[..., None],
                     name: str) -> None:
    outs = []
    for n in call.outputs:
        g = cts.pop(id(n), None)
        outs.append(g if g is not None else creation.zeros(n.shape, dtype=n.dtype))
    assert call.bwd is not None
    gs = call.bwd(call.residuals, unflatten(call.out_struct, outs))
    gleaves = list(gs) if isinstance(gs, (tuple, list)) else [gs]
    if len(gleaves) != len(call.arg_leaves):
        raise ValueError(f"{name}: custom_vjp backward returned {len(gleaves)} cotangents for "
                         f"{len(call.arg_leaves)} arguments")
    for x, g in zip(call.inputs, gleaves):
        if x is not None and g is not None:
            add(x, as_array(g, "custom_vjp"))


# ---------------------------------------------------------------- variables
def _variables(args: Sequence[Any], which: Sequence[int], name: str
               ) -> tuple[list[Any], list[Node], list[Node], list[Any]]:
    """(args with each differentiated leaf replaced by a variable, the variables, the
    nodes they stand for, each differentiated argument's (structure, number of leaves))."""
    new = list(args)
    variables: list[Node] = []
    values: list[Node] = []
    structs: list[Any] = []
    for i in which:
        leaves, struct = flatten(args[i])
        swapped = []
        for leaf in leaves:
            if isinstance(leaf, Array):
                x = leaf
            elif isinstance(leaf, (float, np.ndarray, np.generic)):
                x = creation.asarray(leaf)
            else:
                raise TypeError(f"{name}: argument {i} holds a {type(leaf).__name__}; only "
                                "arrays (in lists, tuples and dicts) can be differentiated")
            if not _differentiable(x.dtype):
                raise TypeError(f"{name}: argument {i} has dtype {dt.name(x.dtype)}; only "
                                "real floating-point arrays can be differentiated")
            v = Node(PARAMETER, (), {"index": -1}, x.shape, x.dtype)
            variables.append(v)
            values.append(x._node)
            swapped.append(Array(v))
        new[i] = unflatten(struct, swapped)
        structs.append((struct, len(leaves)))
    return new, variables, values, structs


def _bind(variables: Sequence[Node], values: Sequence[Node]) -> None:
    """Each variable becomes an identity view of its value: the graphs recorded on the
    variables now compute on the arguments (no copy of them)."""
    for v, x in zip(variables, values):
        v.op, v.inputs, v.attrs = RESHAPE, (x,), {"shape": v.shape}
        v.depth = (x.depth if x.data is None else 0) + 1


def _argnums(argnums: int | Sequence[int], nargs: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -nargs <= a < nargs:
            raise ValueError(f"{name}: argnums {argnums!r} out of range for {nargs} "
                             "positional arguments")
    return tuple(a % nargs for a in nums)


def _run(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        return fun(*args, **kwargs)
    finally:
        _DEPTH.reset(token)


# ---------------------------------------------------------------- the transformations
def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """``fun`` and its gradient with respect to the arguments ``argnums`` (each an array
    or a list/tuple/dict of arrays, the gradient shaped alike). ``fun`` returns a scalar
    (0-d) float array, or ``(scalar, aux)`` with ``has_aux``.

    >>> import braze as bz
    >>> v, g = bz.value_and_grad(lambda w, x: bz.sum(w * x), argnums=(0, 1))(
    ...     bz.asarray([2.0]), bz.asarray([3.0]))
    >>> v.item(), g[0].tolist(), g[1].tolist()
    (6.0, [3.0], [2.0])
    """
    single = isinstance(argnums, int)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums(argnums, len(args), "grad")
        with tracing():
            new, variables, values, structs = _variables(args, nums, "grad")
            out = _run(fun, new, kwargs)
            if has_aux:
                if not isinstance(out, (tuple, list)) or len(out) != 2:
                    raise TypeError("grad: with has_aux=True the function must return "
                                    "(scalar, aux)")
                out, aux = out
            if not isinstance(out, Array) or out.ndim != 0 or not _differentiable(out.dtype):
                what = (f"an array of shape {out.shape} and dtype {dt.name(out.dtype)}"
                        if isinstance(out, Array) else type(out).__name__)
                raise TypeError(f"grad: the function must return a scalar (0-d) float array "
                                f"to differentiate, got {what}")
            seed = creation.ones((), dtype=out.dtype)
            depth = _DEPTH.set(_DEPTH.get() + 1)
            try:
                gs = backward([out._node], [seed], variables, "grad")
            finally:
                _DEPTH.reset(depth)
            _bind(variables, values)
        grads = _structure(gs, variables, structs)
        g = grads[0] if single else tuple(grads)
        return ((out, aux), g) if has_aux else (out, g)

    functools.update_wrapper(wrapped, fun)
    return wrapped


def _structure(gs: Sequence[Array | None], variables: Sequence[Node],
               structs: Sequence[tuple[Any, int]]) -> list[Any]:
    """The cotangents of the variables (zeros where none reached them) shaped like each
    differentiated argument (its structure and number of leaves, from _variables)."""
    full = [g if g is not None else creation.zeros(v.shape, dtype=v.dtype)
            for g, v in zip(gs, variables)]
    out, k = [], 0
    for struct, n in structs:
        out.append(unflatten(struct, full[k:k + n]))
        k += n
    return out


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar function with respect to arguments ``argnums``.

    Composes with itself, :func:`jvp` and ``bz.compile`` in any order; the backward
    graph is recorded lazily and compiled (fused) with the forward one.

    >>> import braze as bz
    >>> bz.grad(bz.grad(lambda x: x ** 3))(bz.asarray(2.0)).item()  # 6x
    12.0
    """
    vg = value_and_grad(fun, argnums, has_aux)

    def wrapped_grad(*args: Any, **kwargs: Any) -> Any:
        res = vg(*args, **kwargs)
        if has_aux:
            (_, aux), g = res
            return g, aux
        return res[1]

    functools.update_wrapper(wrapped_grad, fun)
    return wrapped_grad


def _as_list(x: Any) -> tuple[list[Any], bool]:
    return (list(x), True) if isinstance(x, (list, tuple)) else ([x], False)


def vjp(fun: Callable[..., Any], primals: Sequence[Any], cotangents: Sequence[Any]
        ) -> tuple[list[Array], list[Array]]:
    """(``fun(*primals)`` as a list, the vector-Jacobian products: one cotangent per
    primal), for one cotangent per output (MLX's signature).

    >>> import braze as bz
    >>> outs, vjps = bz.vjp(lambda x: x * 3.0, [bz.asarray([1.0])], [bz.asarray([2.0])])
    >>> outs[0].tolist(), vjps[0].tolist()
    ([3.0], [6.0])
    """
    primals = list(primals)
    cts = [as_array(c, "vjp") for c in cotangents]
    with tracing():
        new, variables, values, structs = _variables(primals, range(len(primals)), "vjp")
        outs, _ = _as_list(_run(fun, new, {}))
        outs = [as_array(o, "vjp") for o in outs]
        _check_cotangents(outs, cts, "vjp", "cotangents")
        depth = _DEPTH.set(_DEPTH.get() + 1)
        try:
            gs = backward([o._node for o in outs], cts, variables, "vjp")
        finally:
            _DEPTH.reset(depth)
        _bind(variables, values)
    return outs, _structure(gs, variables, structs)


def _check_cotangents(outs: Sequence[Array], cts: Sequence[Array], name: str, what: str
                      ) -> None:
    if len(cts) != len(outs):
        raise ValueError(f"{name}: {len(cts)} {what} for {len(outs)} outputs")
    for i, (o, c) in enumerate(zip(outs, cts)):
        if o.shape != c.shape:
            raise ValueError(f"{name}: {what}[{i}] has shape {c.shape}, output {i} has shape "
                             f"{o.shape}")


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]
        ) -> tuple[list[Array], list[Array]]:
    """(``fun(*primals)`` as a list, the Jacobian-vector products: one per output), for
    one tangent per primal (MLX's signature). Computed as the transpose of the VJP (the
    VJP is linear in its cotangent), so every op with a gradient rule has a JVP.

    >>> import braze as bz
    >>> outs, jvps = bz.jvp(lambda x: bz.sin(x), [bz.asarray([0.0])], [bz.asarray([2.0])])
    >>> jvps[0].tolist()
    [2.0]
    """
    primals = list(primals)
    ts = [as_array(t, "jvp") for t in tangents]
    if len(ts) != len(primals):
        raise ValueError(f"jvp: {len(ts)} tangents for {len(primals)} primals")
    with tracing():
        new, variables, values, _ = _variables(primals, range(len(primals)), "jvp")
        for i, (v, t) in enumerate(zip(variables, ts)):
            if v.shape != t.shape:
                raise ValueError(f"jvp: tangents[{i}] has shape {t.shape}, primal {i} has "
                                 f"shape {v.shape}")
        outs, _ = _as_list(_run(fun, new, {}))
        outs = [as_array(o, "jvp") for o in outs]
        us = [Node(PARAMETER, (), {"index": -1}, o.shape, o.dtype) for o in outs]
        depth = _DEPTH.set(_DEPTH.get() + 1)
        try:
            back = backward([o._node for o in outs], [Array(u) for u in us], variables, "jvp")
            pairs = [(b, v, t) for b, v, t in zip(back, variables, ts) if b is not None]
            tangent_outs = backward([b._node for b, _, _ in pairs], [t for _, _, t in pairs],
                                    us, "jvp")
        finally:
            _DEPTH.reset(depth)
        _bind(variables, values)
        _bind(us, [creation.zeros(u.shape, dtype=u.dtype)._node for u in us])
    return outs, [t if t is not None else creation.zeros(o.shape, dtype=o.dtype)
                  for t, o in zip(tangent_outs, outs)]


def checkpoint(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` whose intermediates are not kept for the backward pass: it is computed
    again there from its (array) arguments (activation checkpointing: memory for time).
    The recomputation reads its inputs through ``x - 0 * s`` with ``s`` the cotangent's
    sum (exact for a finite cotangent), so the compiler cannot merge it back into the
    forward computation as a common subexpression.

    >>> import braze as bz
    >>> f = bz.checkpoint(lambda x: bz.sin(x) * x)
    >>> bz.grad(lambda x: bz.sum(f(x)))(bz.asarray([0.0])).tolist()
    [0.0]
    """
    @custom_vjp
    def ck(*args: Any) -> Any:
        return fun(*args)

    def fwd(*args: Any) -> Any:
        return fun(*args), args

    def bwd(args: tuple[Any, ...], g: Any) -> Any:
        import braze.arrays as bz

        cts, _ = flatten(g)
        total = None
        for c in cts:
            t = bz.sum(c).astype(dt.float32)
            total = t if total is None else total + t
        assert total is not None
        zero = total * 0.0
        fresh = [a - zero.astype(a.dtype) if isinstance(a, Array) and _differentiable(a.dtype)
                 else a for a in args]
        _, grads = vjp(fun, fresh, cts)
        return tuple(grads)

    ck.defvjp(fwd, bwd)
    functools.update_wrapper(ck, fun)
    return ck
