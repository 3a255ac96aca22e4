"""The ``mlx`` backend: schedules run through MLX (``pip install 'braze[mlx]'``).

Available when ``import mlx.core`` works (Apple silicon, or MLX's CPU build on Linux:
``mlx[cpu]``). Pending graphs go through the same compiler and schedule executor as the
``numpy`` backend (:func:`braze.backends.numpy_backend.run_schedule`); each fused kernel
runs one of three ways, chosen once per kernel (:meth:`MlxBackend.mode`):

* ``"metal"`` — on a Metal device: the kernel's generated MSL
  (:mod:`braze.backends.metal.codegen`) launched with ``mx.fast.metal_kernel``
  (:mod:`.metal`);
* ``"lower"`` — elsewhere (Linux, CI), and for kernels the Metal path does not take
  (float64, in-place or partial stores): lowered to ``mlx.core`` ops instruction by
  instruction (:mod:`.lower`); float64 kernels run on MLX's CPU stream;
* ``"numpy"`` — kernels with a dtype MLX lacks (complex) or empty ones: the numpy
  executor, as is any kernel MLX raises on (after **one** warning naming it).

Library ops: on floating operands ``matmul`` runs as ``mx.matmul``, ``conv`` as
``mx.conv_general`` (the same record: braze's conv is MLX's), ``rope`` as
``mx.fast.rope`` and ``scaled_dot_product_attention`` as
``mx.fast.scaled_dot_product_attention`` (a cached prefix concatenated in MLX, the
causal/prefix mask as a boolean array); the others (sort, gather, linalg, fft,
quantized matmul...) run their numpy reference. Buffers are numpy
arrays between steps: MLX exports its results without a copy, but copies numpy buffers
on import (it has no zero-copy import of host memory), so each kernel's inputs are
copied once into MLX. ``use_metal`` (default: a Metal device is there; environment
``BRAZE_MLX_METAL=0|1``) picks the Metal path.

>>> import braze as bz
>>> ("mlx" in bz.backends.available()) == available()
True
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from typing import Any

import numpy as np

from ...graph.kernel import Kernel, Schedule
from ..numpy_backend import NumpyBackend, run_schedule
from ..numpy_backend import run_kernel as numpy_run_kernel

__all__ = ["MlxBackend", "available", "metal_available"]

MODES = ("metal", "lower", "numpy")


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Does ``mlx.core`` import here? (checked once per process)"""
    try:
        import mlx.core  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install means "not available"
        return False
    return True


@functools.lru_cache(maxsize=1)
def metal_available() -> bool:
    """Does MLX have a Metal device here (macOS on Apple silicon)?"""
    if not available():
        return False
    import mlx.core as mx

    try:
        return bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001
        return False


def _use_metal_default() -> bool:
    env = os.environ.get("BRAZE_MLX_METAL")
    if env in ("0", "1"):
        return env == "1"
    if env:
        raise ValueError(f"BRAZE_MLX_METAL must be 0 or 1, got {env!r}")
    return metal_available()


class MlxBackend(NumpyBackend):
    """MLX execution of fused schedules (see the module docstring).

    >>> MlxBackend(use_metal=False).use_metal
    False
    """

    name = "mlx"

    def __init__(self, optimize: bool | None = None, skip_tiny: bool = True,
                 use_metal: bool | None = None) -> None:
        super().__init__(optimize, skip_tiny)
        self.use_metal = _use_metal_default() if use_metal is None else use_metal
        self._modes: dict[int, tuple[Kernel, str, Any]] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self.stats = {"metal": 0, "lower": 0, "numpy": 0, "bridged": 0}
        self.library: dict[str, Any] = {"matmul": _matmul, "rope": _rope,
                                        "scaled_dot_product_attention": _sdpa,
                                        "conv": _conv, "conv_fused": _conv}

    def _run(self, schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return run_schedule(schedule, inputs, run_kernel=self._run_kernel, library=self.library)

    def mode(self, k: Kernel) -> str:
        """How ``k`` runs here: ``"metal"``, ``"lower"`` or ``"numpy"`` (cached per kernel;
        a softmax in float32 is ``"metal"`` with ``use_metal``, ``"lower"`` without)."""
        return self._entry(k)[1]

    def _entry(self, k: Kernel) -> tuple[Kernel, str, Any]:
        e = self._modes.get(id(k))
        if e is not None and e[0] is k:
            return e
        from .lower import lowerable

        e = (k, "numpy", None)
        if self.use_metal:
            from .metal import Unsupported, metal_spec

            with contextlib.suppress(Unsupported):
                e = (k, "metal", metal_spec(k))
        if e[1] == "numpy" and lowerable(k):
            e = (k, "lower", None)
        with self._lock:
            if len(self._modes) > 8192:
                self._modes.clear()
            self._modes[id(k)] = e
        return e

    def _run_kernel(self, k: Kernel, bufs: list[Any]) -> None:
        _, mode, spec = self._entry(k)
        if mode == "metal" and any(bufs[s].size != st.view.size for s, st in zip(
                spec.output_slots, k.stores)):
            mode = "lower"  # a store into part of a larger slot: MLX outputs are whole
        try:
            if mode == "metal":
                from .metal import run_metal

                run_metal(spec, bufs)
            elif mode == "lower":
                from .lower import run_lowered

                f64 = any(np.dtype(i.dtype) == np.float64 for i in k.instrs)
                with _cpu_stream() if f64 else contextlib.nullcontext():
                    run_lowered(k, bufs, self.stats)
            else:
                numpy_run_kernel(k, bufs)
        except Exception as err:  # noqa: BLE001 - MLX raised: the reference runs instead
            if mode == "numpy":
                raise
            if k.name not in self._warned:
                self._warned.add(k.name)
                warnings.warn(f"braze mlx backend: kernel {k.name} failed under MLX ({mode}); "
                              f"it runs with the numpy executor instead.\n{err}",
                              RuntimeWarning, stacklevel=3)
            with self._lock:
                self._modes[id(k)] = (k, "numpy", None)
            numpy_run_kernel(k, bufs)
            mode = "numpy"
        self.stats[mode] += 1


def _cpu_stream() -> Any:
    import mlx.core as mx

    return mx.stream(mx.cpu)


def _mlx_float(*xs: np.ndarray) -> bool:
    """Operands MLX's fast kernels take (float32/float16/bfloat16, non-empty)."""
    return all(x.dtype.name in ("float32", "float16", "bfloat16") and x.size for x in xs)


def _rope(attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray,
          offset: np.ndarray) -> np.ndarray:
    """``mx.fast.rope`` in float32 (low precision rounded once, as the reference does)."""
    import mlx.core as mx

    from ...graph.ops import OPS, reference_eval
    from .lower import to_mx, to_numpy

    if not _mlx_float(x) or np.ndim(offset):  # (per-row offsets: the reference)
        return reference_eval(OPS["rope"], attrs, out_dtype, x, offset)
    xm = to_mx(x.reshape(-1, *x.shape[-2:])).astype(mx.float32)
    out = mx.fast.rope(xm, attrs["dims"], traditional=attrs["traditional"],
                       base=attrs["base"], scale=attrs["scale"], offset=int(offset))
    mx.eval(out)
    return to_numpy(out, np.dtype(np.float32)).reshape(x.shape).astype(out_dtype, copy=False)


def _sdpa(attrs: dict[str, Any], out_dtype: np.dtype, q: np.ndarray, k: np.ndarray,
          v: np.ndarray, *past: np.ndarray) -> np.ndarray:
    """``mx.fast.scaled_dot_product_attention`` in float32 over [past prefix, new keys]
    with the op's mask; the numpy reference where a query row sees no key (NaN)."""
    import mlx.core as mx

    from ...graph.ops import OPS, reference_eval, sdpa_visible
    from .lower import to_mx, to_numpy

    n = None
    if past and (np.ndim(past[2]) or len(past) == 4):  # batched decoding: the reference
        return reference_eval(OPS["scaled_dot_product_attention"], attrs, out_dtype, q, k, v,
                              *past)
    if past:
        n = int(min(max(int(past[2]), 0), past[0].shape[2]))
    visible = sdpa_visible(q.shape[2], k.shape[2], n, attrs["causal"])
    if not _mlx_float(q, k, v) or not visible.any(axis=1).all():
        return reference_eval(OPS["scaled_dot_product_attention"], attrs, out_dtype, q, k, v,
                              *past)
    keys, values = to_mx(k).astype(mx.float32), to_mx(v).astype(mx.float32)
    if n:
        keys = mx.concatenate([to_mx(past[0][:, :, :n]).astype(mx.float32), keys], axis=2)
        values = mx.concatenate([to_mx(past[1][:, :, :n]).astype(mx.float32), values], axis=2)
    out = mx.fast.scaled_dot_product_attention(
        to_mx(q).astype(mx.float32), keys, values, scale=attrs["scale"],
        mask=None if visible.all() else mx.array(visible))
    mx.eval(out)
    return to_numpy(out, np.dtype(np.float32)).astype(out_dtype, copy=False)


def _conv(attrs: dict[str, Any], out_dtype: np.dtype, x: np.ndarray, w: np.ndarray,
          *epilogue: np.ndarray) -> np.ndarray:
    """``mx.conv_general`` (braze's conv record is MLX's conv_general) for float32 /
    float16 / bfloat16 operands (computed in float32, rounded once) with non-negative
    padding, then a ``conv_fused`` epilogue in the same dtype; the reference otherwise."""
    import mlx.core as mx

    from ...graph.ops import OPS, reference_eval
    from .lower import to_mx, to_numpy

    op = OPS["conv_fused" if "act" in attrs else "conv"]
    if x.dtype != w.dtype or x.dtype.itemsize > 4 or x.dtype.kind != "f" and \
            x.dtype.name != "bfloat16" or x.size == 0 or w.size == 0 or \
            any(p < 0 for pair in attrs["padding"] for p in pair):
        return reference_eval(op, attrs, out_dtype, x, w, *epilogue)
    y = mx.conv_general(to_mx(x).astype(mx.float32), to_mx(w).astype(mx.float32),
                        stride=list(attrs["stride"]),
                        padding=([lo for lo, _ in attrs["padding"]],
                                 [hi for _, hi in attrs["padding"]]),
                        kernel_dilation=list(attrs["kernel_dilation"]),
                        input_dilation=list(attrs["input_dilation"]),
                        groups=attrs["groups"], flip=attrs["flip"])
    rest = list(epilogue)
    if attrs.get("bias"):
        y = y + to_mx(rest.pop(0)).astype(mx.float32)
    if attrs.get("residual"):
        y = y + to_mx(rest.pop(0)).astype(mx.float32)
    if attrs.get("act") == "clip":
        y = mx.minimum(mx.maximum(y, attrs["clip"][0]), attrs["clip"][1])
    mx.eval(y)
    return to_numpy(y, np.dtype(np.float32)).astype(out_dtype, copy=False)


def _matmul(attrs: dict[str, Any], out_dtype: np.dtype, a: np.ndarray,
            b: np.ndarray) -> np.ndarray:
    """``mx.matmul`` for floating operands (float16/bfloat16 computed in float32 and
    rounded once, as the reference does); the numpy reference otherwise."""
    import mlx.core as mx

    from ...graph.ops import OPS, reference_eval
    from .lower import to_mx, to_numpy

    if a.dtype != b.dtype or a.dtype.kind != "f" and a.dtype.name != "bfloat16" \
            or a.size == 0 or b.size == 0:
        return reference_eval(OPS["matmul"], attrs, out_dtype, a, b)
    f64 = a.dtype == np.float64
    with _cpu_stream() if f64 else contextlib.nullcontext():
        x, y = to_mx(a), to_mx(b)
        if a.dtype.itemsize == 2:
            x, y = x.astype(mx.float32), y.astype(mx.float32)
        out = mx.matmul(x, y)
        mx.eval(out)
    return to_numpy(out, out_dtype)
