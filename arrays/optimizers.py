"""``bz.optimizers``: SGD, Adam, AdamW, gradient clipping and learning-rate schedules
(MLX's ``mlx.optimizers`` names and conventions).

An optimizer's :attr:`~Optimizer.state` is a tree of arrays (the step count and each
parameter's moments): it can be saved, and passed to ``bz.compile(inputs=, outputs=)``
with the model so a whole training step replays as one schedule. ``update`` records the
new parameters and state lazily, so evaluating them (``bz.eval(model.parameters(),
opt.state)``) runs each parameter's whole update (moments, bias correction, decay, the
step) as one fused kernel, never an op-by-op loop.

>>> import braze as bz
>>> lin = bz.nn.Linear(2, 1)
>>> opt = bz.optimizers.SGD(learning_rate=0.5)
>>> _, grads = bz.nn.value_and_grad(lin, lambda x: bz.sum(lin(x)))(bz.ones((1, 2)))
>>> opt.update(lin, grads); bz.eval(lin.parameters(), opt.state)
>>> lin.bias.tolist()
[-0.5]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..graph import dtypes as dt
from .array import Array, as_array
from .creation import asarray, zeros_like
from .elementwise import cos, minimum, sqrt, where  # type: ignore[attr-defined]  # generated
from .nn import Module, names_from_tree, tree_from_names
from .reductions import sum as _sum

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm", "linear_schedule",
           "cosine_decay", "exponential_decay", "join_schedules"]

Schedule = Callable[[Array], Any]


def _runtime_scalar(value: Any, dtype: np.dtype) -> Array:
    """A 0-d array bound at run time, as asarray makes a numpy scalar (never folded into a
    graph's structure: a value that changes every step must not make each step's graph
    new)."""
    return asarray(dtype.type(value))


class Optimizer:
    """Base class: ``apply_single(g, p, state, lr, step)`` per parameter returns the new
    parameter and state; this class walks the trees, counts steps and schedules."""

    def __init__(self, learning_rate: float | Schedule) -> None:
        self._schedule = learning_rate if callable(learning_rate) else None
        self._lr = None if callable(learning_rate) else float(learning_rate)
        self.state: dict[str, Any] = {"step": _runtime_scalar(0, dt.int64)}

    @property
    def step(self) -> Array:
        """The number of updates applied (a 0-d int64 array)."""
        return self.state["step"]

    @property
    def learning_rate(self) -> Any:
        """The learning rate of the next update (a float, or the schedule's value)."""
        if self._schedule is None:
            return self._lr
        return self._schedule(self.state["step"] + 1)

    def init(self, parameters: Any) -> Optimizer:
        """Create the state of every parameter of ``parameters`` (a tree) now, rather than
        at the first update: a compiled step then sees one state structure from its
        first call on (one trace instead of two).

        >>> import braze as bz
        >>> opt = bz.optimizers.Adam(1e-3).init({"w": bz.zeros(2)})
        >>> sorted(opt.state["params"]["w"])
        ['m', 'v']
        """
        slots = self.state.setdefault("params", {})
        for name, p in names_from_tree(parameters):
            if name not in slots:
                slots[name] = self.init_single(p)
        return self

    def init_single(self, p: Array) -> dict[str, Array]:
        return {}

    def apply_single(self, g: Array, p: Array, state: dict[str, Array], lr: Any,
                     step: Array) -> tuple[Array, dict[str, Array]]:
        raise NotImplementedError

    def apply_gradients(self, gradients: Any, parameters: Any) -> dict[str, Any]:
        """The updated ``parameters`` (a tree) for ``gradients`` (a tree of the same
        names, any subset); the state advances one step."""
        params = dict(names_from_tree(parameters))
        grads = names_from_tree(gradients)
        step = self.state["step"] + 1
        lr = self.learning_rate
        slots = self.state.setdefault("params", {})
        out = []
        for name, g in grads:
            if name not in params:
                raise ValueError(f"{type(self).__name__}: gradient for unknown parameter "
                                 f"{name!r}")
            p = params[name]
            g = as_array(g, type(self).__name__)
            if g.shape != p.shape:
                raise ValueError(f"{type(self).__name__}: gradient of {name} has shape "
                                 f"{g.shape}, the parameter {p.shape}")
            s = slots.get(name)
            if s is None:
                s = self.init_single(p)
            new_p, slots[name] = self.apply_single(g.astype(p.dtype), p, s, lr, step)
            out.append((name, new_p.astype(p.dtype)))
        self.state["step"] = step
        return tree_from_names(out)

    def update(self, model: Module, gradients: Any) -> None:
        """Apply ``gradients`` to ``model``'s trainable parameters (lazily)."""
        model.update(self.apply_gradients(gradients, model.trainable_parameters()))


def _bias_correction(beta: float, step: Array) -> Array:
    return 1.0 - beta ** step.astype(dt.float32)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (Nesterov), dampening and
    weight decay (added to the gradient, as torch's SGD does).

    >>> import braze as bz
    >>> bz.optimizers.SGD(0.1, momentum=0.9, nesterov=True).learning_rate
    0.1
    """

    def __init__(self, learning_rate: float | Schedule, momentum: float = 0.0,
                 weight_decay: float = 0.0, dampening: float = 0.0,
                 nesterov: bool = False) -> None:
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and no dampening")
        super().__init__(learning_rate)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.dampening, self.nesterov = dampening, nesterov

    def init_single(self, p: Array) -> dict[str, Array]:
        return {"v": zeros_like(p)} if self.momentum else {}

    def apply_single(self, g, p, state, lr, step):
        if self.weight_decay:
            g = g + p * self.weight_decay
        if not self.momentum:
            return p - g * lr, state
        v = state["v"] * self.momentum + g * (1.0 - self.dampening)
        d = g + v * self.momentum if self.nesterov else v
        return p - d * lr, {"v": v}


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction.

    >>> import braze as bz
    >>> bz.optimizers.Adam(1e-3).learning_rate
    0.001
    """

    def __init__(self, learning_rate: float | Schedule, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, bias_correction: bool = True) -> None:
        super().__init__(learning_rate)
        self.betas, self.eps, self.bias_correction = tuple(betas), eps, bias_correction

    def init_single(self, p: Array) -> dict[str, Array]:
        return {"m": zeros_like(p), "v": zeros_like(p)}

    def _step(self, g, p, state, lr, step):
        b1, b2 = self.betas
        m = state["m"] * b1 + g * (1.0 - b1)
        v = state["v"] * b2 + g * g * (1.0 - b2)
        # MLX's form: the bias corrections and the learning rate as two per-step scalars
        # (computed once per kernel call), so each element costs one division and one
        # square root instead of the textbook form's three divisions
        if self.bias_correction:
            c1 = lr / _bias_correction(b1, step)
            c2 = 1.0 / sqrt(_bias_correction(b2, step))
            upd = (m * c1) / (sqrt(v) * c2 + self.eps)
        else:
            upd = (m * lr) / (sqrt(v) + self.eps)
        return upd, {"m": m, "v": v}

    def apply_single(self, g, p, state, lr, step):
        upd, new = self._step(g, p, state, lr, step)
        return p - upd, new


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p -= lr * wd * p``.

    >>> import braze as bz
    >>> bz.optimizers.AdamW(1e-3, weight_decay=0.01).weight_decay
    0.01
    """

    def __init__(self, learning_rate: float | Schedule, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01,
                 bias_correction: bool = True) -> None:
        super().__init__(learning_rate, betas, eps, bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, g, p, state, lr, step):
        upd, new = self._step(g, p, state, lr, step)
        return p * (1.0 - lr * self.weight_decay) - upd, new


def clip_grad_norm(gradients: Any, max_norm: float) -> tuple[Any, Array]:
    """``gradients`` scaled so their global L2 norm is at most ``max_norm``, and that
    norm (before clipping).

    >>> import braze as bz
    >>> g, n = bz.optimizers.clip_grad_norm({"w": bz.asarray([3.0, 4.0])}, 1.0)
    >>> n.item(), [round(v, 3) for v in g["w"].tolist()]
    (5.0, [0.6, 0.8])
    """
    items = names_from_tree(gradients)
    if not items:
        return gradients, _runtime_scalar(0.0, dt.float32)
    total = None
    for _, g in items:
        s = _sum(as_array(g, "clip_grad_norm").astype(dt.float32) ** 2)
        total = s if total is None else total + s
    norm = sqrt(total)
    scale = minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_from_names([(n, g * scale.astype(g.dtype)) for n, g in items]), norm


# ---------------------------------------------------------------- schedules
def linear_schedule(init: float, end: float, steps: int) -> Schedule:
    """From ``init`` to ``end`` over ``steps`` steps, then ``end`` (a linear warm-up).

    >>> import braze as bz
    >>> bz.optimizers.linear_schedule(0.0, 1.0, 10)(bz.asarray(5)).item()
    0.5
    """
    if steps < 1:
        raise ValueError(f"linear_schedule: steps must be >= 1, got {steps}")

    def schedule(step: Array) -> Array:
        t = minimum(as_array(step, "linear_schedule").astype(dt.float32), float(steps))
        return init + (end - init) * (t / steps)

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Schedule:
    """Half a cosine from ``init`` down to ``end`` over ``decay_steps``, then ``end``.

    >>> import braze as bz
    >>> round(bz.optimizers.cosine_decay(1.0, 10)(bz.asarray(5)).item(), 6)
    0.5
    """
    if decay_steps < 1:
        raise ValueError(f"cosine_decay: decay_steps must be >= 1, got {decay_steps}")

    def schedule(step: Array) -> Array:
        t = minimum(as_array(step, "cosine_decay").astype(dt.float32), float(decay_steps))
        return end + (init - end) * 0.5 * (1.0 + cos(t * (math.pi / decay_steps)))

    return schedule


def exponential_decay(init: float, decay_rate: float) -> Schedule:
    """``init * decay_rate ** step``.

    >>> import braze as bz
    >>> bz.optimizers.exponential_decay(1.0, 0.5)(bz.asarray(2)).item()
    0.25
    """
    def schedule(step: Array) -> Array:
        return init * decay_rate ** as_array(step, "exponential_decay").astype(dt.float32)

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """``schedules[i]`` from ``boundaries[i - 1]`` on (each sees the steps since its
    start): e.g. a linear warm-up joined to a cosine decay.

    >>> import braze as bz
    >>> s = bz.optimizers.join_schedules([bz.optimizers.linear_schedule(0.0, 1.0, 10),
    ...                                   bz.optimizers.cosine_decay(1.0, 100)], [10])
    >>> s(bz.asarray(5)).item(), s(bz.asarray(10)).item()
    (0.5, 1.0)
    """
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} boundaries, got {len(boundaries)}")

    def schedule(step: Array) -> Array:
        step = as_array(step, "join_schedules")
        out = schedules[0](step)
        for b, s in zip(boundaries, schedules[1:]):
            out = where(step < b, out, s(step - b))
        return out

    return schedule
