"""Native float32 convolution for the ``cpu`` backend (the ``conv`` library op).

Tactics, chosen by shape (the first that applies):

* **1x1** (unit stride, no padding or dilation, one group): the convolution *is* a GEMM
  of x viewed as (N*H*W, C_in) rows with the weight (C_out, C_in): no copy at all.
* **depthwise** (groups == C_in == C_out): a direct kernel (``kernels/conv.cc`` mode 1),
  vectorized across channels, the taps summed in order per output.
* **im2col + GEMM**: rows of the taps each output position reads (``kernels/conv.cc``
  mode 0: one contiguous copy of C_in/groups floats per tap in channels-last), then the
  native GEMM (``matvec``) against the weight as stored, (C_out, K*C_in/groups); one
  im2col + GEMM per group.

An input-dilated (transposed) convolution dilates x in numpy first; a flipped kernel
is flipped once (weights are small). Other dtypes, and hosts where the kernels do not
build, run the numpy reference. Every tactic's result is the same bits at any thread
count (im2col moves data only; the GEMM and the depthwise kernel sum each output in one
fixed order).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import OPS, dilate_and_pad, reference_eval
from . import matvec as _mv
from .library import NativeOp, file_kernel

__all__ = ["Conv", "source"]

PARALLEL_ELEMENTS = 1 << 15  # im2col / depthwise work below this runs on one thread
SMALL_CHANNELS = 16  # fewer input channels: im2col first (the implicit GEMM's taps too short)
_F32 = np.dtype(np.float32)

source, _KERNELS = file_kernel(__package__, "kernels/conv.cc", "bz_conv_f32")


def _geometry(x: np.ndarray, w: np.ndarray, out_shape: tuple[int, ...], attrs: dict[str, Any]
              ) -> list[int]:
    """The kernel's args 2..21 (N, C, in, k, out, stride, dilation, pad lo; 3-d padded)."""
    n = x.ndim - 2

    def pad3(v: Any, fill: int) -> list[int]:
        return [fill] * (3 - n) + list(v)

    return [x.shape[0], x.shape[-1], *pad3(x.shape[1:-1], 1), *pad3(w.shape[1:-1], 1),
            *pad3(out_shape[1:-1], 1), *pad3(attrs["stride"], 1),
            *pad3(attrs["kernel_dilation"], 1), *pad3([lo for lo, _ in attrs["padding"]], 0)]


def _tile(h: int) -> tuple[int, int]:
    """(rows, output channels) of the implicit GEMM's register tile on this host."""
    out = np.zeros(2, np.int64)
    _core.launch(h, [out], np.array([3, 1] + [1] * 22, np.int64))
    return int(out[0]), int(out[1])


def pack_panels(w: np.ndarray, groups: int, cols: int) -> np.ndarray:
    """w (C_out, *kernel, cg) as the implicit GEMM reads it: per group, panels of ``cols``
    output channels, each (taps * cg, cols), zeros past the group's channels.

    >>> pack_panels(np.arange(6, dtype=np.float32).reshape(3, 1, 2), 1, 4)[0].tolist()
    [[0.0, 2.0, 4.0, 0.0], [1.0, 3.0, 5.0, 0.0]]
    """
    og = w.shape[0] // groups
    kk = w.size // max(w.shape[0], 1)
    nb = -(-og // cols)
    padded = np.zeros((groups, nb * cols, kk), _F32)
    padded[:, :og] = w.reshape(groups, og, kk)
    return np.ascontiguousarray(padded.reshape(groups, nb, cols, kk).transpose(0, 1, 3, 2)
                                ).reshape(groups * nb, kk, cols)


def _epilogue(out: np.ndarray, bias: np.ndarray | None, residual: np.ndarray | None,
              act: int, clip: tuple[float, float]) -> np.ndarray:
    """The fused epilogue in numpy, in place (the depthwise kernel has none of its own)."""
    if bias is not None:
        out += bias
    if residual is not None:
        out += residual
    if act:
        np.clip(out, clip[0] if act == 2 else 0.0, clip[1] if act == 2 else None, out=out)
    return out


class Conv(NativeOp):
    """The ``cpu`` backend's ``library["conv"]`` (see the module docstring); ``calls``
    counts each tactic.

    >>> x = np.ones((1, 4, 4, 2), np.float32)
    >>> w = np.ones((3, 3, 3, 2), np.float32)
    >>> attrs = dict(stride=(1, 1), padding=((1, 1), (1, 1)), kernel_dilation=(1, 1),
    ...              input_dilation=(1, 1), groups=1, flip=False)
    >>> Conv()(attrs, np.dtype(np.float32), x, w)[0, :, :, 0].tolist()[0]
    [8.0, 12.0, 12.0, 8.0]
    """

    op = "conv"

    def __init__(self, backend: Any = None) -> None:
        super().__init__(backend)
        self.calls.update({"depthwise": 0, "implicit": 0, "im2col": 0})
        # packed weights of read-only (constant) weight arrays, packed once: the array ->
        # (flip, groups, its panels); a weight that is computed (writeable) is packed per call
        # (ndarrays are unhashable: keyed by id, the entry dropped when the array dies)
        self._panels: dict[int, tuple[weakref.ref[np.ndarray], bool, int, np.ndarray]] = {}
        self._tile: tuple[int, int] | None = None

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 w: np.ndarray, *epilogue: np.ndarray) -> np.ndarray:
        op = OPS["conv_fused" if "act" in attrs else "conv"]
        if x.dtype != _F32 or w.dtype != _F32 or out_dtype != _F32 or x.size == 0 or \
                any(e.dtype != _F32 for e in epilogue):
            self.calls["numpy"] += 1
            return reference_eval(op, attrs, out_dtype, x, w, *epilogue)
        h = self._kernel(_KERNELS.handle)
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(op, attrs, out_dtype, x, w, *epilogue)
        ep = list(epilogue)
        bias = np.ascontiguousarray(ep.pop(0)) if attrs.get("bias") else None
        residual = np.ascontiguousarray(ep.pop(0)) if attrs.get("residual") else None
        act, clip = 0, (0.0, 0.0)
        if attrs.get("act") == "clip":
            clip = attrs["clip"]
            act = 1 if clip == (0.0, math.inf) else 2
        n = x.ndim - 2
        original = w
        if attrs["flip"]:
            w = np.flip(w, axis=tuple(range(1, n + 1)))
        if any(d > 1 for d in attrs["input_dilation"]):
            x = dilate_and_pad(x, [(0, 0)] * n, attrs["input_dilation"])
            attrs = {**attrs, "input_dilation": (1,) * n}
        x = np.ascontiguousarray(x)
        w = np.ascontiguousarray(w)
        shape = OPS["conv"].infer((x.shape, w.shape), (x.dtype, w.dtype), attrs)[0]  # type: ignore[misc]
        rows = math.prod(shape[:-1])
        cin, cout, groups = x.shape[-1], w.shape[0], attrs["groups"]
        taps = math.prod(w.shape[1:-1])
        threads = self._num_threads()
        geo = _geometry(x, w, shape, attrs)
        if groups == cin == cout and taps > 1:
            self.calls["depthwise"] += 1
            out = np.empty(shape, _F32)
            wt = np.ascontiguousarray(w.reshape(cout, taps).T)
            nt = 1 if rows * taps * cin < PARALLEL_ELEMENTS else threads
            _core.launch(h, [x, wt, out], np.array([1, nt, *geo], np.int64))
            return _epilogue(out, bias, residual, act, clip)
        if self._tile is None:
            self._tile = _tile(h)
        cols = self._tile[1]
        if groups == 1 and cin < SMALL_CHANNELS and taps > 1:
            # few channels per tap (an image's 3): the taps' short rows gathered once
            # (im2col), then the implicit GEMM as a 1x1 convolution over them
            self.calls["im2col"] += 1
            nt = 1 if rows * taps * cin < PARALLEL_ELEMENTS else threads
            a = np.empty((rows, taps * cin), _F32)
            _core.launch(h, [x, a], np.array([0, nt, *geo, 0, cin], np.int64))
            flat = _geometry(a.reshape(1, rows, 1, taps * cin), w.reshape(cout, 1, 1, -1),
                             (1, rows, 1, cout), {"stride": (1, 1), "kernel_dilation": (1, 1),
                                                  "padding": ((0, 0), (0, 0))})
            return self.implicit(h, a, self._packed(original, w, attrs["flip"], 1, cols),
                                 shape, flat, 1, threads, bias, residual, act, clip)
        return self.implicit(h, x, self._packed(original, w, attrs["flip"], groups, cols),
                             shape, geo, groups, threads, bias, residual, act, clip)

    def _packed(self, original: np.ndarray, w: np.ndarray, flip: bool, groups: int, cols: int
                ) -> np.ndarray:
        """The panels of ``w`` (``original`` flipped or not), from the cache when the weight
        is a read-only array (a constant)."""
        key = id(original)
        hit = self._panels.get(key) if not original.flags.writeable else None
        if hit is not None and hit[0]() is original and hit[1:3] == (flip, groups):
            return hit[3]
        panels = pack_panels(w, groups, cols)
        if not original.flags.writeable:
            cache = self._panels
            self._panels[key] = (weakref.ref(original, lambda _: cache.pop(key, None)), flip,
                                 groups, panels)
        return panels

    def implicit(self, h: int, x: np.ndarray, panels: np.ndarray, shape: tuple[int, ...],
                 geo: list[int], groups: int, threads: int, bias: np.ndarray | None = None,
                 residual: np.ndarray | None = None, act: int = 0,
                 clip: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
        """The implicit GEMM (kernel mode 2) with its epilogue: ``+ bias``, ``+ residual``
        (rows, C_out), then ``act`` (0 none, 1 ReLU, 2 clip to ``clip``)."""
        self.calls["implicit"] += 1
        out = np.empty(shape, _F32)
        rows, cout = math.prod(shape[:-1]), shape[-1]
        flops = rows * panels.size // max(panels.shape[0], 1) * cout // max(panels.shape[2], 1)
        nt = 1 if flops < PARALLEL_ELEMENTS * 8 else threads
        bufs = [x, panels, out] + [a.reshape(-1) for a in (bias, residual) if a is not None]
        bits = np.array(clip, np.float64).view(np.int64)
        _core.launch(h, bufs, np.array([2, nt, *geo, groups, cout, act, *bits,
                                        bias is not None, residual is not None], np.int64))
        return out

    def _gemm(self, a: np.ndarray, w: np.ndarray, threads: int) -> np.ndarray:
        """``a @ w.T`` with the native GEMM (numpy's where it does not build)."""
        try:
            return _mv.matvec(a, w, 1 if w.size * a.shape[0] < PARALLEL_ELEMENTS else threads)
        except Exception:  # noqa: BLE001 - no GEMM kernel here: numpy's matmul
            return a @ w.T
