"""Native float32 convolution for the ``cpu`` backend (the ``conv`` and ``conv_fused``
library ops), eager and as replay-program steps.

One kernel file (``kernels/conv.cc``), tactics chosen by shape:

* **implicit GEMM** (the default): output rows (positions) x output channels, a register
  tile of 6 x 64 (AVX-512; 6 x 16 AVX2, 8 x 8 NEON) fed by broadcasts of x read in place
  through per-tap row pointers (channels-last: one tap is C_in/groups contiguous floats;
  a padded tap reads a zero row) against the weight packed in panels of output channels;
  K walked in chunks whose panel slice stays in L2; groups as separate panels.
* **packed rows** (one group, the tile's rows a multiple of ``ALIAS_BYTES`` apart in x:
  C_in = 1024 at stride 1, 512 at stride 2; tiles of ``ALIAS_ROWS`` rows or more, NEON's
  8): the rows a tile broadcasts from would
  share one set of the 8-way L1 cache (4 KiB aliasing; a 1 x 1 convolution of 1024
  channels ran at ~2/3 of its 1000-channel neighbour's speed), so each block of rows is
  first copied as (taps * C_in, rows), the tile broadcasting from one contiguous block.
* **rows of runs** (fewer than ``SMALL_CHANNELS`` input channels, one group: an image's 3
  channels would make each tap 3 floats; up to ``RUN_CHANNELS`` when the kernel is wider
  than 1 along the last dim): x copied channels-last with its padding written as zeros,
  so a kernel row's taps are one run of k * C_in floats, read in place as the taps of a
  convolution with k = 1 along that dim. With a dilated last dim (or a kernel 1 wide
  along it), each row's taps are gathered into one row of taps * C_in floats instead (an
  NCHW image made channels-last first), then the implicit GEMM as a 1x1 convolution over
  them.
* **depthwise** (groups == C_in == C_out): a direct kernel vectorized across channels.

The GEMM works in **bands of rows** (about ``BAND_BYTES`` of x's taps each, as many per
thread): every output channel of a band before the next, so the band's rows of x stay in
L2 instead of being read from memory once per panel of output channels; packed and
gathered rows are made per band in per-thread scratch (no whole im2col matrix in memory).

``conv_fused`` adds its epilogue (bias, residual, ReLU / clip) before the one store.
Every tactic sums each output over its taps and channels in one fixed order: the same
bits at any thread count and ISA level (FMA everywhere). The weight is packed once per
weight: a replay plan's *derived* buffer (recomputed only when the weight changes), and
for eager calls a cache keyed by read-only (constant) weight arrays. A transposed
convolution (input dilation, flipped kernel) runs eagerly: x dilated and the kernel
flipped in numpy first. Other dtypes and hosts where the kernel does not build run the
numpy reference.
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from typing import Any

import numpy as np

from ... import _core
from ...graph.ops import OPS, concat_branches, dilate_and_pad, pool_outs, reference_eval
from ...graph.view import View
from ..replay import NativeLibraryCall
from . import build as _build
from .library import NativeOp, file_kernel

__all__ = ["Conv", "ConvConcat", "pack_panels", "source"]

PARALLEL_FLOPS = 1 << 18  # less work than this runs on one thread
SMALL_CHANNELS = 16  # fewer input channels: rows of runs or gathered (taps too short to read)
# at most this many input channels and a kernel wider than 1 along the last dim: rows of runs
# (16 channels: 3x3 9 % faster than in place; 32: 1-4 %; 48 and 64: slower, x's copy costs more)
RUN_CHANNELS = 32
# the implicit GEMM packs x's rows first where the rows its register tile reads side by side
# lie a multiple of this apart (C_in = 1024 at stride 1, 512 at 2): all in one L1 set
ALIAS_BYTES = 4096
# ... and where the tile reads at least this many rows: 12 rows in one 8-way set ran at 2/3
# speed, while a 6-row tile (AVX-512, AVX2) runs 5-16 % faster in place than packed
ALIAS_ROWS = 8
# the implicit GEMM computes bands of rows whose slice of x (taps * C_in floats per row) is
# about this size, every output channel of a band before the next (the band stays in L2)
BAND_BYTES = 256 << 10
# 3x3 convolutions at stride 1 run as Winograd F(2x2, 3x3) with at least this many input and
# output channels and outputs at least this many positions wide (BRAZE_WINOGRAD=0: never):
# 0.5-0.7x the direct convolution's time from 32 channels on (ResNet-50's 3x3s), about the
# same at 55x55, 16 -> 64 (the transforms cost what the products save); a 7x7 output (a
# quarter of its 2x2 tiles past the edge) gained 4 %, not worth its weight's 16/9 the
# memory (ResNet-50's last stage: +22 MB)
WINOGRAD = os.environ.get("BRAZE_WINOGRAD", "1") != "0"
WINOGRAD_CHANNELS = 16
WINOGRAD_SIZE = 8
# F(2x2, 3x3)'s weight transform: U = G g G^T per (output, input) channel pair
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
_F32 = np.dtype(np.float32)
_CONV_ARGS = 53  # one convolution's args (kernels/conv.cc: kConvArgs)

source, _KERNELS = file_kernel(__package__, "kernels/conv.cc", "bz_conv_f32")


@functools.cache
def _query() -> tuple[int, int, int, int]:
    """(rows, output channels) of the implicit GEMM's register tile on this host, then the
    number of args of one convolution and of one branch of a ``conv_concat`` call."""
    out = np.zeros(4, np.int64)
    _core.launch(_KERNELS.handle(), [out], np.array([1, 3] + [1] * 31, np.int64))
    if (out[2], out[3]) != (_CONV_ARGS, _CONV_ARGS + 2):
        raise _build.BuildError(f"conv kernel: {out[2]} args per convolution, {_CONV_ARGS} "
                                "expected (a stale build)")
    return int(out[0]), int(out[1]), int(out[2]), int(out[3])


def _tile() -> tuple[int, int]:
    """(rows, output channels) of the implicit GEMM's register tile on this host."""
    return _query()[:2]


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


def _prepacked(mode: int, groups: int, w: np.ndarray,
               shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The weight as the kernel reads it: panels, or (taps, C) for the depthwise kernel
    (``shape``: w's, when w is the flat buffer holding it, as a replay plan passes it)."""
    if shape is not None:
        w = w.reshape(-1).view(_F32)[:math.prod(shape)].reshape(shape) \
            if w.dtype != _F32 else w.reshape(-1)[:math.prod(shape)].reshape(shape)
    if mode == 1:
        return np.ascontiguousarray(w.reshape(w.shape[0], -1).T)
    if mode == 7:  # U[xi] = (G g G^T)[xi] as (C_out, 1, C_in), panels per xi
        g = _WINOGRAD_G
        u = np.einsum("ai,oijc,bj->aboc", g, w.astype(np.float64), g).astype(_F32)
        return np.concatenate([pack_panels(u[a, b][:, None, :], 1, _tile()[1])
                               for a in range(4) for b in range(4)])
    return pack_panels(w, groups, _tile()[1])


def _runs(w_shape: tuple[int, ...], dilation: tuple[int, ...]) -> bool:
    """Whether a kernel row's taps are one run of x's floats in mode 5 (kernels/conv.cc:
    the last spatial dim wider than 1 and not dilated)."""
    return w_shape[-2] > 1 and dilation[-1] == 1


def _launch(attrs: dict[str, Any], x_shape: tuple[int, ...], w_shape: tuple[int, ...],
            out_shape: tuple[int, ...], threads: int, offsets: tuple[int, int, int] = (0, 0, 0),
            x_strides: tuple[int, ...] | None = None, out_slice: tuple[int, int] = (0, 0)
            ) -> tuple[int, np.ndarray, tuple[int, int, int]]:
    """(mode, args, scratch byte sizes) of one call (see ``kernels/conv.cc``); x's element
    strides default to contiguous; ``out_slice``: (row stride, first channel) of the wider
    output the call writes channels of ((0, 0): out is its own). ``out_shape`` is the
    convolution's, before ``attrs['pool']`` (a max pool of it: the conv_pool pass)."""
    n = len(x_shape) - 2
    cin, cout, groups = x_shape[-1], w_shape[0], attrs["groups"]
    taps = math.prod(w_shape[1:-1])
    rows = math.prod(out_shape[:-1])
    if groups == cin == cout and taps > 1:
        mode = 1
    elif _winograd(attrs, x_shape, w_shape, out_shape, x_strides):
        mode = 7
    elif groups == 1 and taps > 1 and (cin < SMALL_CHANNELS or (
            cin <= RUN_CHANNELS and _runs(w_shape, attrs["kernel_dilation"]))):
        mode = 5
    else:
        mode = 2

    def pad3(v: Any, fill: int) -> list[int]:
        return [fill] * (3 - n) + list(v)

    geo = [x_shape[0], cin, *pad3(x_shape[1:-1], 1), *pad3(w_shape[1:-1], 1),
           *pad3(out_shape[1:-1], 1), *pad3(attrs["stride"], 1),
           *pad3(attrs["kernel_dilation"], 1), *pad3([lo for lo, _ in attrs["padding"]], 0)]
    act, clip = 0, (0.0, 0.0)
    if attrs.get("act") == "clip":
        clip = attrs["clip"]
        act = 1 if clip == (0.0, math.inf) else 2
    flops = 2 * rows * cout * taps * cin // groups
    nt = 1 if flops < PARALLEL_FLOPS else threads
    bits = np.array(clip, np.float64).view(np.int64)
    st = x_strides if x_strides is not None else View.contiguous(x_shape).strides
    st5 = [st[0], *pad3(st[1:-1], 0), st[-1]]
    kr = _tile()[0]
    pack = mode == 2 and groups == 1 and kr >= ALIAS_ROWS and \
        (attrs["stride"][-1] * cin * 4) % ALIAS_BYTES == 0
    k = taps * (cin // groups)
    nrb = -(-rows // kr)  # blocks of rows: in bands of about BAND_BYTES, as many per thread
    bands = -(-nrb // max(1, BAND_BYTES // (kr * k * 4)))
    if bands == 1 and nrb >= 8 * nt and cout <= rows:
        # one band: the threads split its rows, not its panels of output channels, unless
        # the weight outweighs x (cout > rows: each thread would read all of it) or the rows
        # are too few to split evenly (two threads writing alternate panels of each row ran
        # no faster than one: 16 -> 64 channels, 55 x 55)
        bands = nt
    bands = min(nrb, bands if bands == 1 else -(-bands // nt) * nt)
    band = -(-nrb // max(bands, 1))  # (the largest band's blocks: the scratch per thread)
    args = np.array([nt, mode, *geo, groups, cout, act, *bits, bool(attrs.get("bias")),
                     bool(attrs.get("residual")), *offsets, 1, *st5, pack, bands,
                     *[0] * 10, -1, *out_slice], np.int64)
    # gathered rows per thread; mode 5 also x channels-last after them (NCHW images), or
    # (rows of runs, see _runs) only x channels-last with its padding as zeros
    gathered = nt * band * kr * k * 4 + (math.prod(x_shape) * 4 if mode == 5 else 0) \
        if mode == 5 or pack else 4
    run = 1  # floats of one tap the GEMM reads in place
    ins, ks, outs, strides, dils, los = (geo[2 + 3 * i:5 + 3 * i] for i in range(6))
    if mode == 5 and _runs(w_shape, attrs["kernel_dilation"]):
        padded = math.prod(lo + max(n_, (o - 1) * s + (kk - 1) * d - lo + 1) for n_, kk, o, s, d, lo
                           in zip(ins, ks, outs, strides, dils, los))
        gathered = x_shape[0] * padded * cin * 4
        run = ks[2]
    offsets_bytes = nt * band * kr * taps * 8  # tap offsets per thread
    if mode == 7:  # bands of tiles (2x2 outputs): their V and M in the thread's scratch
        tiles = x_shape[0] * -(-out_shape[1] // 2) * -(-out_shape[2] // 2)
        per_tile = 16 * (cin + cout) * 4
        tband = max(kr, BAND_BYTES // per_tile // kr * kr)
        tband = min(tband, -(-tiles // (nt * kr)) * kr)  # (every thread a band at least)
        args[39] = tband
        gathered = nt * tband * per_tile
    if attrs.get("pool"):
        p = dict(attrs["pool"])
        pooled = [*p["kernel_size"], *p["stride"], *p["dilation"],
                  *[lo for lo, _ in p["padding"]],
                  *pool_outs(out_shape, p["kernel_size"], p["stride"], p["dilation"],
                             p["padding"])]
        args[40:50] = pooled
        if len(x_shape) == 4 and groups == 1 and not attrs.get("residual") and (
                mode == 2 and not pack or mode == 5 and _runs(w_shape, attrs["kernel_dilation"])):
            # each thread's ring of the convolution's lines, after x's channels-last copy
            ring_lines = (pooled[0] - 1) * pooled[4] + 1
            gathered += nt * ring_lines * out_shape[2] * cout * 4
            lines = -(-out_shape[2] // kr) * kr
            offsets_bytes = max(offsets_bytes, nt * lines * taps * 8)
        else:  # the whole convolution first, after what its own call uses there
            args[50] = -(-gathered // 64) * 16
            gathered = args[50] * 4 + math.prod(out_shape) * 4
    scratch = (offsets_bytes, (run * cin // groups + 16) * 4, gathered)
    return mode, args, scratch


def _winograd(attrs: dict[str, Any], x_shape: tuple[int, ...], w_shape: tuple[int, ...],
              out_shape: tuple[int, ...], x_strides: tuple[int, ...] | None) -> bool:
    """Whether a convolution runs as Winograd F(2x2, 3x3) (``kernels/conv.cc`` mode 7): a
    2-d 3x3 kernel at stride 1, undilated, one group, x contiguous, channels and outputs
    enough for its 2.25x fewer multiplies to outweigh the transforms (``WINOGRAD``)."""
    if not WINOGRAD or len(w_shape) != 4 or tuple(w_shape[1:3]) != (3, 3) or \
            attrs["groups"] != 1 or tuple(attrs["stride"]) != (1, 1) or \
            tuple(attrs["kernel_dilation"]) != (1, 1):
        return False
    if x_strides is not None and tuple(x_strides) != View.contiguous(x_shape).strides:
        return False
    return x_shape[-1] >= WINOGRAD_CHANNELS and w_shape[0] >= WINOGRAD_CHANNELS and \
        min(out_shape[1:3]) >= WINOGRAD_SIZE


class Conv(NativeOp):
    """The ``cpu`` backend's ``library["conv"]`` and ``library["conv_fused"]`` (see the
    module docstring); ``calls`` counts each tactic.

    >>> x = np.ones((1, 4, 4, 2), np.float32)
    >>> w = np.ones((3, 3, 3, 2), np.float32)
    >>> attrs = dict(stride=(1, 1), padding=((1, 1), (1, 1)), kernel_dilation=(1, 1),
    ...              input_dilation=(1, 1), groups=1, flip=False)
    >>> Conv()(attrs, np.dtype(np.float32), x, w)[0, :, :, 0].tolist()[0]
    [8.0, 12.0, 12.0, 8.0]
    """

    op = "conv"
    _MODES = {1: "depthwise", 2: "implicit", 5: "im2col", 7: "winograd"}

    def __init__(self, backend: Any = None) -> None:
        super().__init__(backend)
        self.calls.update({"depthwise": 0, "implicit": 0, "im2col": 0, "winograd": 0})
        # packed read-only (constant) weights for eager calls, keyed by the array's id (an
        # ndarray is unhashable), the entry dropped when the array dies: (weakref, mode,
        # groups, flip, packed)
        self._packed: dict[int, tuple[Any, int, int, bool, np.ndarray]] = {}

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
                 w: np.ndarray, *epilogue: np.ndarray) -> np.ndarray:
        op = OPS["conv_fused" if "act" in attrs else "conv"]
        h = None
        if x.dtype == _F32 and w.dtype == _F32 and out_dtype == _F32 and x.size and \
                all(e.dtype == _F32 for e in epilogue):
            h = self._kernel(_KERNELS.handle)
        if h is None:
            self.calls["numpy"] += 1
            return reference_eval(op, attrs, out_dtype, x, w, *epilogue)
        n = x.ndim - 2
        original, flip = w, attrs["flip"]
        if flip:
            w = np.flip(w, axis=tuple(range(1, n + 1)))
        if any(d > 1 for d in attrs["input_dilation"]):
            x = dilate_and_pad(x, [(0, 0)] * n, attrs["input_dilation"])
            attrs = {**attrs, "input_dilation": (1,) * n}
        x = np.ascontiguousarray(x)
        shape = op.infer((x.shape, w.shape, *(e.shape for e in epilogue)),  # type: ignore[misc]
                         (x.dtype, w.dtype, *(e.dtype for e in epilogue)), attrs)[0]
        conv_shape = _unpooled(attrs, (x.shape, w.shape, *(e.shape for e in epilogue)),
                               (x.dtype, w.dtype, *(e.dtype for e in epilogue)))
        mode, args, scratch = _launch(attrs, x.shape, w.shape, conv_shape, self._num_threads())
        self.calls[self._MODES[mode]] += 1
        out = np.empty(shape, _F32)
        bufs = [x, np.ascontiguousarray(w), *(np.ascontiguousarray(e) for e in epilogue), out,
                *(np.empty(b, np.uint8) for b in scratch),
                self._weights(original, w, mode, attrs["groups"], flip)]
        _core.launch(h, bufs, args)
        return out

    def _weights(self, original: np.ndarray, w: np.ndarray, mode: int, groups: int,
                 flip: bool) -> np.ndarray:
        """The packed weight, from the cache when the weight is a read-only array."""
        key = id(original)
        hit = self._packed.get(key) if not original.flags.writeable else None
        if hit is not None and hit[0]() is original and hit[1:4] == (mode, groups, flip):
            return hit[4]
        packed = _prepacked(mode, groups, w)
        if not original.flags.writeable:
            cache = self._packed
            cache[key] = (weakref.ref(original, lambda _: cache.pop(key, None)), mode, groups,
                          flip, packed)
        return packed

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """The kernel as a replay-program step: float32, x, bias and residual contiguous
        (at any offset in their buffers), no input dilation or flip; None otherwise (the
        step runs eagerly)."""
        if out[1] != _F32 or any(d != _F32 for _, d in inputs) or attrs["flip"] or \
                any(d > 1 for d in attrs["input_dilation"]):
            return None
        (xv, _), (wv, _) = inputs[:2]
        if xv.size == 0 or not all(v.is_contiguous() for v, _ in inputs[1:]) or wv.offset:
            return None
        try:
            h = _KERNELS.handle()
        except _build.BuildError:
            return None
        ep = [v.offset for v, _ in inputs[2:]]
        offsets = (xv.offset, ep[0] if attrs.get("bias") else 0,
                   ep[-1] if attrs.get("residual") else 0)
        contiguous = xv.is_contiguous()
        conv_shape = _unpooled(attrs, tuple(v.shape for v, _ in inputs),
                               tuple(d for _, d in inputs))
        mode, args, scratch = _launch(attrs, xv.shape, wv.shape, conv_shape,
                                      self._num_threads(), offsets,
                                      None if contiguous else xv.strides)
        if mode != 5 and not contiguous:  # (only the im2col gather reads x strided)
            return None
        return NativeLibraryCall(h, args, scratch, derived=(
            functools.partial(_derived, mode, attrs["groups"], wv.shape), (1,), 32))


def _unpooled(attrs: dict[str, Any], shapes: tuple[tuple[int, ...], ...],
              dtypes: tuple[np.dtype, ...]) -> tuple[int, ...]:
    """The convolution's result shape (inputs ``shapes`` / ``dtypes``), before
    ``attrs['pool']``."""
    op = OPS["conv_fused" if "act" in attrs else "conv"]
    return op.infer(shapes, dtypes,  # type: ignore[misc]
                    {k: v for k, v in attrs.items() if k != "pool"})[0]


def _derived(mode: int, groups: int, shape: tuple[int, ...], w: np.ndarray) -> np.ndarray:
    return _prepacked(mode, groups, w, shape)


class ConvConcat(NativeOp):
    """The ``cpu`` backend's ``library["conv_concat"]``: each branch's convolution writes
    its channels of the one result (the kernel's mode 6: one program step, no
    concatenation copy); eagerly, the branches by :class:`Conv`, then concatenated.

    >>> x = np.ones((1, 4, 4, 2), np.float32)
    >>> a = dict(stride=(1, 1), padding=((0, 0), (0, 0)), kernel_dilation=(1, 1),
    ...          input_dilation=(1, 1), groups=1, flip=False, bias=False, residual=False,
    ...          act="none", clip=(0.0, 0.0))
    >>> br = (2, tuple(sorted(a.items())))
    >>> ConvConcat()({"branches": (br, br)}, np.dtype(np.float32), x, np.ones((3, 1, 1, 2),
    ...     np.float32), x, np.ones((1, 1, 1, 2), np.float32)).shape
    (1, 4, 4, 4)
    """

    op = "conv_concat"

    def __init__(self, backend: Any = None) -> None:
        super().__init__(backend)
        self._conv = Conv(backend)

    def __call__(self, attrs: dict[str, Any], out_dtype: np.dtype,
                 *xs: np.ndarray) -> np.ndarray:
        outs, i = [], 0
        for n, a in concat_branches(attrs):
            outs.append(self._conv(a, out_dtype, *xs[i:i + n]))
            i += n
        return np.concatenate(outs, axis=-1)

    def native_call(self, attrs: dict[str, Any], inputs: list[tuple[View, np.dtype]],
                    out: tuple[tuple[int, ...], np.dtype]) -> NativeLibraryCall | None:
        """Every branch as :meth:`Conv.native_call` takes it, into its channel slice of the
        result; None otherwise (the step runs eagerly)."""
        if out[1] != _F32:
            return None
        try:
            h = _KERNELS.handle()
            _query()
        except _build.BuildError:
            return None
        total = out[0][-1]
        blocks: list[np.ndarray] = []
        scratch = [1, 1, 1]
        weights: list[tuple[int, tuple[int, ...], int]] = []  # (mode, w's shape, groups)
        packed_at, i, channel = 0, 0, 0
        for n, a in concat_branches(attrs):
            ins = inputs[i:i + n]
            shape = (*out[0][:-1], ins[1][0].shape[0])
            call = self._conv.native_call(a, ins, (shape, _F32))
            if call is None:
                return None
            wv = ins[1][0]
            mode, args = int(call.args[1]), call.args.copy()
            args[_CONV_ARGS - 2:_CONV_ARGS] = total, channel  # into its slice of the result
            scratch = [max(u, v) for u, v in zip(scratch, call.scratch)]
            blocks.append(np.concatenate([args, [i, packed_at]]).astype(np.int64))
            weights.append((mode, wv.shape, a["groups"]))
            packed_at += _packed_floats(mode, wv.shape, a["groups"])
            channel += shape[-1]
            i += n
        threads = max(int(b[0]) for b in blocks)
        head = [threads, 6, len(blocks), len(inputs), 1]
        w_positions = tuple(int(b[_CONV_ARGS]) + 1 for b in blocks)
        return NativeLibraryCall(h, np.concatenate([np.array(head, np.int64), *blocks]),
                                 tuple(scratch), derived=(
            functools.partial(_derived_all, tuple(weights)), w_positions, 4))


def _packed_floats(mode: int, shape: tuple[int, ...], groups: int) -> int:
    """Floats of one packed weight (``_prepacked``), rounded up to 64 bytes."""
    if mode == 1:
        n = math.prod(shape)
    elif mode == 7:
        cols = _tile()[1]
        n = 16 * -(-shape[0] // cols) * cols * shape[-1]
    else:
        cols = _tile()[1]
        og = shape[0] // groups
        n = groups * -(-og // cols) * cols * (math.prod(shape) // max(shape[0], 1))
    return -(-n // 16) * 16


def _derived_all(weights: tuple[tuple[int, tuple[int, ...], int], ...],
                 *ws: np.ndarray) -> np.ndarray:
    """Every branch's packed weight in one buffer, each at a multiple of 16 floats."""
    parts = []
    for (mode, shape, groups), w in zip(weights, ws):
        p = _prepacked(mode, groups, w, shape).reshape(-1)
        pad = _packed_floats(mode, shape, groups) - p.size
        parts.append(np.concatenate([p, np.zeros(pad, _F32)]) if pad else p)
    return np.ascontiguousarray(np.concatenate(parts), _F32)
