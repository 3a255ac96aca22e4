"""``bz.nn``'s convolutional layers (MLX's modules, channels-last): convolutions and
transposed convolutions, batch / group / instance norm, pooling, upsampling.

Each layer calls one function of :mod:`braze.arrays.conv`; weights are (C_out, *kernel,
C_in / groups) with MLX's uniform initialization.

>>> import braze as bz
>>> net = [bz.nn.Conv2d(3, 8, 3, padding=1), bz.nn.BatchNorm(8), bz.nn.MaxPool2d(2)]
>>> x = bz.ones((2, 16, 16, 3))
>>> for layer in net:
...     x = layer(x)
>>> x.shape
(2, 8, 8, 8)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .array import Array, as_array
from .conv import (
    avg_pool,
    batch_norm,
    conv_general,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    group_norm,
    max_pool,
    upsample,
)
from .creation import asarray, ones, zeros
from .nn import Module
from .reductions import mean, var

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "BatchNorm", "GroupNorm", "InstanceNorm", "MaxPool1d",
           "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "Upsample"]


def _tuple(v: Any, n: int) -> tuple[int, ...]:
    return (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)


def _uniform(shape: tuple[int, ...], fan_in: int) -> Array:
    bound = math.sqrt(1.0 / fan_in)
    rng = np.random.default_rng(0)
    return asarray(rng.uniform(-bound, bound, shape).astype(np.float32), copy=False)


class _ConvNd(Module):
    _n = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True
                 ) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{type(self).__name__}: in_channels ({in_channels}) and "
                             f"out_channels ({out_channels}) must be multiples of groups "
                             f"({groups})")
        k = _tuple(kernel_size, self._n)
        self.weight = _uniform((out_channels, *k, in_channels // groups),
                               in_channels // groups * math.prod(k))
        if bias:
            self.bias = zeros((out_channels,))
        self._conf = (stride, padding, dilation, groups)

    def __call__(self, x: Any) -> Array:
        stride, padding, dilation, groups = self._conf
        y = conv_general(x, self.weight, stride=stride, padding=padding,
                         kernel_dilation=dilation, groups=groups)
        return y + self.bias if "bias" in vars(self) else y


class Conv1d(_ConvNd):
    """1-d convolution layer on x (N, L, C_in).

    >>> import braze as bz
    >>> bz.nn.Conv1d(4, 6, 3)(bz.ones((2, 10, 4))).shape
    (2, 8, 6)
    """

    _n = 1


class Conv2d(_ConvNd):
    """2-d convolution layer on x (N, H, W, C_in).

    >>> import braze as bz
    >>> bz.nn.Conv2d(3, 16, 3, stride=2, padding=1)(bz.ones((1, 32, 32, 3))).shape
    (1, 16, 16, 16)
    """

    _n = 2


class Conv3d(_ConvNd):
    """3-d convolution layer on x (N, D, H, W, C_in).

    >>> import braze as bz
    >>> bz.nn.Conv3d(2, 4, 3)(bz.ones((1, 5, 5, 5, 2))).shape
    (1, 3, 3, 3, 4)
    """

    _n = 3


class _ConvTransposeNd(Module):
    _n = 0
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, output_padding: Any = 0,
                 groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        k = _tuple(kernel_size, self._n)
        self.weight = _uniform((out_channels, *k, in_channels // groups),
                               in_channels // groups * math.prod(k))
        if bias:
            self.bias = zeros((out_channels,))
        self._conf = (stride, padding, dilation, output_padding, groups)

    def __call__(self, x: Any) -> Array:
        y = type(self)._fn(x, self.weight, *self._conf)
        return y + self.bias if "bias" in vars(self) else y


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution layer.

    >>> import braze as bz
    >>> bz.nn.ConvTranspose1d(4, 2, 3, stride=2)(bz.ones((1, 5, 4))).shape
    (1, 11, 2)
    """

    _n, _fn = 1, staticmethod(conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution layer.

    >>> import braze as bz
    >>> bz.nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1)(bz.ones((1, 8, 8, 4))).shape
    (1, 16, 16, 2)
    """

    _n, _fn = 2, staticmethod(conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution layer.

    >>> import braze as bz
    >>> bz.nn.ConvTranspose3d(1, 1, 2, stride=2)(bz.ones((1, 2, 2, 2, 1))).shape
    (1, 4, 4, 4, 1)
    """

    _n, _fn = 3, staticmethod(conv_transpose3d)


class BatchNorm(Module):
    """Batch normalization over the last (channel) axis: batch statistics in training
    (running statistics updated with ``momentum``), running statistics in ``eval()``.
    The running statistics are parameters that are never trainable.

    >>> import braze as bz
    >>> bn = bz.nn.BatchNorm(2).eval()
    >>> [round(v, 4) for v in bn(bz.asarray([[1.0, 2.0]])).tolist()[0]]
    [1.0, 2.0]
    """

    _STATS = frozenset({"running_mean", "running_var"})

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        if affine:
            self.weight = ones((num_features,))
            self.bias = zeros((num_features,))
        if track_running_stats:
            self.running_mean = zeros((num_features,))
            self.running_var = ones((num_features,))
        self._frozen = set(self._STATS & vars(self).keys())

    def unfreeze(self) -> Module:
        super().unfreeze()
        self._frozen = set(self._STATS & vars(self).keys())
        return self

    def __call__(self, x: Any) -> Array:
        x = as_array(x, "BatchNorm")
        v = vars(self)
        if self.training or "running_mean" not in v:
            axes = tuple(range(x.ndim - 1))
            mu, var_ = mean(x, axis=axes), var(x, axis=axes)
            if self.training and "running_mean" in v:
                m = self.momentum
                n = x.size // max(x.shape[-1], 1)
                self.running_mean = (1 - m) * self.running_mean + m * mu
                self.running_var = (1 - m) * self.running_var + m * var_ * (n / max(n - 1, 1))
        else:
            mu, var_ = self.running_mean, self.running_var
        return batch_norm(x, mu, var_, v.get("weight"), v.get("bias"), self.eps)


class GroupNorm(Module):
    """Group normalization of x (N, *spatial, C) with ``num_groups`` channel groups.

    >>> import braze as bz
    >>> bz.nn.GroupNorm(2, 4)(bz.ones((1, 3, 3, 4))).shape
    (1, 3, 3, 4)
    """

    def __init__(self, num_groups: int, dims: int, eps: float = 1e-5, affine: bool = True
                 ) -> None:
        super().__init__()
        if dims % num_groups:
            raise ValueError(f"GroupNorm: dims ({dims}) must be a multiple of num_groups "
                             f"({num_groups})")
        self.num_groups, self.eps = num_groups, eps
        if affine:
            self.weight = ones((dims,))
            self.bias = zeros((dims,))

    def __call__(self, x: Any) -> Array:
        v = vars(self)
        return group_norm(x, self.num_groups, v.get("weight"), v.get("bias"), self.eps)


class InstanceNorm(GroupNorm):
    """Instance normalization: statistics per sample and channel over the spatial dims.

    >>> import braze as bz
    >>> bz.nn.InstanceNorm(3)(bz.ones((2, 4, 4, 3))).shape
    (2, 4, 4, 3)
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False) -> None:
        super().__init__(dims, dims, eps, affine)


class _Pool(Module):
    _n = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, **kw: Any
                 ) -> None:
        super().__init__()
        self._args = (_tuple(kernel_size, self._n), stride, padding)
        self._kw = kw


class _MaxPool(_Pool):
    def __call__(self, x: Any) -> Array:
        return max_pool(x, *self._args, **self._kw)


class _AvgPool(_Pool):
    def __call__(self, x: Any) -> Array:
        return avg_pool(x, *self._args, **self._kw)


class MaxPool1d(_MaxPool):
    """1-d max pooling (``kernel_size``, ``stride`` = kernel, ``padding``, ``dilation``,
    ``ceil_mode``).

    >>> import braze as bz
    >>> bz.nn.MaxPool1d(2)(bz.ones((1, 6, 3))).shape
    (1, 3, 3)
    """

    _n = 1


class MaxPool2d(_MaxPool):
    """2-d max pooling.

    >>> import braze as bz
    >>> bz.nn.MaxPool2d(3, stride=2, padding=1)(bz.ones((1, 8, 8, 2))).shape
    (1, 4, 4, 2)
    """

    _n = 2


class MaxPool3d(_MaxPool):
    """3-d max pooling.

    >>> import braze as bz
    >>> bz.nn.MaxPool3d(2)(bz.ones((1, 4, 4, 4, 1))).shape
    (1, 2, 2, 2, 1)
    """

    _n = 3


class AvgPool1d(_AvgPool):
    """1-d average pooling (``count_include_pad``, ``ceil_mode``).

    >>> import braze as bz
    >>> bz.nn.AvgPool1d(2)(bz.ones((1, 6, 3))).shape
    (1, 3, 3)
    """

    _n = 1


class AvgPool2d(_AvgPool):
    """2-d average pooling.

    >>> import braze as bz
    >>> bz.nn.AvgPool2d(2)(bz.ones((1, 8, 8, 2))).shape
    (1, 4, 4, 2)
    """

    _n = 2


class AvgPool3d(_AvgPool):
    """3-d average pooling.

    >>> import braze as bz
    >>> bz.nn.AvgPool3d(2)(bz.ones((1, 4, 4, 4, 1))).shape
    (1, 2, 2, 2, 1)
    """

    _n = 3


class Upsample(Module):
    """Resize the spatial dims by ``scale_factor`` (``nearest`` or ``linear``).

    >>> import braze as bz
    >>> bz.nn.Upsample(2)(bz.ones((1, 3, 3, 4))).shape
    (1, 6, 6, 4)
    """

    def __init__(self, scale_factor: Any, mode: str = "nearest", align_corners: bool = False
                 ) -> None:
        super().__init__()
        self._conf = (scale_factor, mode, align_corners)

    def __call__(self, x: Any) -> Array:
        return upsample(x, *self._conf)
