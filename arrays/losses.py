"""``bz.nn.losses``: training losses (MLX's names and conventions).

Each takes predictions and targets and a ``reduction`` ("mean", the default; "sum";
"none": per element). Written with the public ops, so each is a few fused kernels and
differentiable by ``bz.grad``.

>>> import braze as bz
>>> round(bz.nn.losses.cross_entropy(bz.asarray([[2.0, 0.0]]), bz.asarray([0])).item(), 4)
0.1269
"""

from __future__ import annotations

from typing import Any

from ..graph import dtypes as dt
from .array import Array, as_array
from .elementwise import abs as _abs  # type: ignore[attr-defined]  # generated (op records)
from .elementwise import exp as _exp  # type: ignore[attr-defined]
from .elementwise import log1p, maximum, where  # type: ignore[attr-defined]
from .indexing import take_along_axis
from .manipulation import expand_dims, squeeze
from .reductions import logsumexp, mean
from .reductions import sum as _sum

__all__ = ["cross_entropy", "mse_loss", "l1_loss", "binary_cross_entropy"]


def _reduce(loss: Array, reduction: str, op: str, weights: Array | None = None) -> Array:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return _sum(loss)
    if reduction == "mean":
        if weights is not None:  # the mean over the counted (not ignored) elements
            return _sum(loss) / maximum(_sum(weights), 1.0)
        return mean(loss)
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(logits: Any, targets: Any, *, axis: int = -1, label_smoothing: float = 0.0,
                  ignore_index: int | None = None, weights: Any = None,
                  reduction: str = "mean") -> Array:
    """Softmax cross-entropy of ``logits`` against integer class ``targets`` (or class
    probabilities of logits' shape). ``label_smoothing`` mixes the one-hot target with
    the uniform distribution; targets equal to ``ignore_index`` (and zero ``weights``)
    count for nothing, and the mean is over the rest.

    >>> import braze as bz
    >>> bz.nn.losses.cross_entropy(bz.asarray([[0.0, 0.0]]), bz.asarray([-100]),
    ...                            ignore_index=-100).item()
    0.0
    """
    op = "cross_entropy"
    logits = as_array(logits, op)
    targets = as_array(targets, op)
    if not dt.is_real_floating(logits.dtype):
        raise TypeError(f"{op}: logits must be floating, got {dt.name(logits.dtype)}")
    if not 0 <= label_smoothing < 1:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1), got {label_smoothing}")
    ax = axis % logits.ndim if logits.ndim else 0
    lse = logsumexp(logits, axis=ax)
    mask = None
    if targets.shape == logits.shape and dt.is_real_floating(targets.dtype):
        logp = logits - expand_dims(lse, ax)
        loss = -_sum(targets * logp, axis=ax)
    else:
        if not dt.is_integer(targets.dtype):
            raise TypeError(f"{op}: targets must be integer class indices or probabilities "
                            f"of the logits' shape, got {dt.name(targets.dtype)} of shape "
                            f"{targets.shape}")
        want = logits.shape[:ax] + logits.shape[ax + 1:]
        if targets.shape != want:
            raise ValueError(f"{op}: targets of shape {targets.shape} do not match logits of "
                             f"shape {logits.shape} (expected {want} along axis {axis})")
        safe = targets
        if ignore_index is not None:
            mask = targets != ignore_index
            safe = where(mask, targets, 0)
        picked = squeeze(take_along_axis(logits, expand_dims(safe, ax), axis=ax), axis=ax)
        loss = lse - picked
        if label_smoothing:
            smooth = lse - mean(logits, axis=ax)  # cross-entropy against the uniform target
            loss = loss * (1.0 - label_smoothing) + smooth * label_smoothing
    w = None
    if weights is not None:
        w = as_array(weights, op).astype(loss.dtype)
        loss = loss * w
    if mask is not None:
        m = mask.astype(loss.dtype)
        loss = where(mask, loss, 0.0)
        w = m if w is None else w * m
    return _reduce(loss, reduction, op, w)


def mse_loss(predictions: Any, targets: Any, *, reduction: str = "mean") -> Array:
    """Mean squared error.

    >>> import braze as bz
    >>> bz.nn.losses.mse_loss(bz.asarray([1.0, 3.0]), bz.asarray([0.0, 1.0])).item()
    2.5
    """
    p, t = _pair(predictions, targets, "mse_loss")
    d = p - t
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(predictions: Any, targets: Any, *, reduction: str = "mean") -> Array:
    """Mean absolute error.

    >>> import braze as bz
    >>> bz.nn.losses.l1_loss(bz.asarray([1.0, 3.0]), bz.asarray([0.0, 1.0])).item()
    1.5
    """
    p, t = _pair(predictions, targets, "l1_loss")
    return _reduce(_abs(p - t), reduction, "l1_loss")


def binary_cross_entropy(logits: Any, targets: Any, *, with_logits: bool = True,
                         reduction: str = "mean") -> Array:
    """Binary cross-entropy of logits (stable: ``max(x, 0) - x t + log(1 + exp(-|x|))``),
    or of probabilities with ``with_logits=False``.

    >>> import braze as bz
    >>> round(bz.nn.losses.binary_cross_entropy(bz.asarray([0.0]), bz.asarray([1.0])).item(), 4)
    0.6931
    """
    x, t = _pair(logits, targets, "binary_cross_entropy")
    if with_logits:
        loss = maximum(x, 0.0) - x * t + log1p(_exp(-_abs(x)))
    else:
        from .elementwise import clip, log  # type: ignore[attr-defined]

        p = clip(x, 1e-12, 1.0 - 1e-7)
        loss = -(t * log(p) + (1.0 - t) * log(1.0 - p))
    return _reduce(loss, reduction, "binary_cross_entropy")


def _pair(predictions: Any, targets: Any, op: str) -> tuple[Array, Array]:
    """Both operands as arrays of one shape (else a ValueError naming the op)."""
    p, t = as_array(predictions, op), as_array(targets, op)
    if p.shape != t.shape:
        raise ValueError(f"{op}: predictions of shape {p.shape} and targets of shape "
                         f"{t.shape} differ")
    return p, t
