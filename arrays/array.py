"""The lazy ``Array`` and the helpers every op uses to record graph nodes.

An ``Array`` wraps one graph node. Operators record new nodes (validating
shapes, dtypes and axes at the call) and compute nothing; data is produced
when something needs it (``np.asarray``, ``item``, ``repr``, ``bool``...).

>>> import braze as bz
>>> x = bz.ones((2, 3)) * 2   # recorded, not computed
>>> x.shape, float(x.sum())
((2, 3), 12.0)
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import functools
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from ..backends import current as _current_backend
from ..graph import dtypes as dt
from ..graph.evaluate import cut_targets, iteration_boundary
from ..graph.node import Node, constant, depth_over
from ..graph.ops import (
    CAST,
    CONSTANT,
    OPS,
    OpDef,
    broadcast_shapes,
    elementwise_dtypes,
    reference_eval,
)

# True while bz.compile traces a function: what the function computes must stay in the
# graph (a captured array may be rebound between calls), no eager shortcut may bake a value
TRACING: contextvars.ContextVar[bool] = contextvars.ContextVar("braze_tracing", default=False)


@contextlib.contextmanager
def tracing() -> Iterator[None]:
    """Record everything in the block (:data:`TRACING`), the native element fast paths
    of ``Array`` included: they step aside while any thread traces.

    >>> import braze as bz
    >>> x = bz.asarray([1.0, 2.0]); _ = x.tolist()
    >>> with tracing():
    ...     type(x[0]).__name__
    'Array'
    """
    token = TRACING.set(True)
    _core.tracing(1)
    try:
        yield
    finally:
        _core.tracing(-1)
        TRACING.reset(token)

Scalar = builtins.bool | builtins.int | builtins.float | builtins.complex
_SCALARS = (builtins.bool, builtins.int, builtins.float, builtins.complex)


class Device:
    """A device an array lives on. braze arrays live in host memory today.

    >>> Device("cpu") == Device("cpu")
    True
    """

    __slots__ = ("name",)

    def __init__(self, name: str = "cpu") -> None:
        self.name = name

    def __eq__(self, other: object) -> builtins.bool:
        return isinstance(other, Device) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Device({self.name!r})"


CPU = Device("cpu")


def _axis_method(name: str) -> Any:
    """The method ``name(axis=None, out=None, keepdims=False)`` of a reduction over axes."""
    def method(self: Array, axis: Any = None, out: None = None,
               keepdims: builtins.bool = False) -> Array:
        _no_out(name, out)
        return getattr(_r, name)(self, axis=axis, keepdims=keepdims)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``bz.{name}`` over ``axis`` (numpy's method signature)."
    return method


class Array(_core.ArrayBase):
    """A lazy n-dimensional array: a handle on a node of the pending graph.

    ``x[key]`` and ``x[key] = v`` are :meth:`_getitem` and :meth:`_setitem`; the native
    base answers an element read of an evaluated array, and an element store into one
    it alone holds, without calling them (``csrc/elements.cpp``).

    >>> import braze as bz
    >>> a = bz.asarray([[1, 2], [3, 4]])
    >>> (a @ a).tolist()
    [[7, 10], [15, 22]]
    """

    __slots__ = ("__weakref__",)
    _node: Node
    __array_priority__ = 1000

    def __init__(self, node: Node) -> None:
        self._node = node
        if node.depth >= CUT_DEPTH:  # a graph a loop keeps growing: evaluated in segments
            cut(node)

    # ------------------------------------------------------------ attributes (no eval)
    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    @property
    def size(self) -> int:
        return self._node.size

    @property
    def device(self) -> Device:
        return CPU

    @property
    def T(self) -> Array:
        """All axes reversed, as in numpy and MLX (the standard's 2-d transpose included).

        >>> import braze as bz
        >>> bz.zeros((2, 3, 4)).T.shape
        (4, 3, 2)
        """
        return _m.permute_dims(self, tuple(reversed(range(self.ndim))))

    @property
    def nbytes(self) -> int:
        """Bytes the elements take (size * itemsize), as numpy's ``nbytes``."""
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def mT(self) -> Array:
        if self.ndim < 2:
            raise ValueError(f"mT: requires at least 2 dimensions, got shape {self.shape}")
        axes = tuple(range(self.ndim - 2)) + (self.ndim - 1, self.ndim - 2)
        return _m.permute_dims(self, axes)

    def to_device(self, device: Any, /, *, stream: Any = None) -> Array:
        if device not in (CPU, "cpu"):
            raise ValueError(f"to_device: unknown device {device!r}; available: [{CPU!r}]")
        return self

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        import braze

        if api_version not in (None, "2024.12", "2023.12", "2022.12", "2021.12"):
            raise ValueError(f"__array_namespace__: unsupported api_version {api_version!r}")
        return braze

    # ------------------------------------------------------------ data (evaluates)
    def _value(self) -> np.ndarray:
        node = self._node
        if node.data is None:
            _current_backend().evaluate([node])
        return node.data

    def __copy__(self) -> Array:
        return Array(self._node)  # arrays are values: a new handle on the same node

    def __deepcopy__(self, memo: dict[int, Any]) -> Array:
        return Array(self._node)  # (a store into either copies first: see _setitem)

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        """Pickled as its value (evaluated), as numpy pickles an array.

        >>> import pickle, braze as bz
        >>> pickle.loads(pickle.dumps(bz.arange(3) * 2)).tolist()
        [0, 2, 4]
        """
        return _c.asarray, (np.array(self._value(), copy=True),)

    def __array__(self, dtype: Any = None, copy: builtins.bool | None = None) -> np.ndarray:
        data = self._value()
        if copy:
            return np.array(data, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != data.dtype:
            if copy is False:
                raise ValueError("__array__: a dtype change needs a copy, but copy=False")
            return data.astype(dtype)
        view = data.view()
        view.flags.writeable = False  # our buffer: numpy callers must not mutate it
        return view

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kw: Any) -> Any:
        fn = _linalg.matmul if ufunc.__name__ == "matmul" else _UFUNCS.get(ufunc.__name__)
        if kw.get("out", None) is None:
            kw.pop("out", None)
        if method != "__call__" or fn is None or set(kw) - {"dtype"}:
            return _numpy_fallback(getattr(ufunc, method), inputs, kw)
        out = fn(*inputs)
        return out if kw.get("dtype") is None else astype(out, kw["dtype"])

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """numpy's functions on braze arrays call braze's function of the same name, so
        they stay lazy (numpy keyword arguments accepted: ``out=None``, ``dtype=``,
        ``keepdims=``...); a function braze does not have runs numpy's on the values.

        >>> import numpy as np, braze as bz
        >>> x = bz.asarray([[1.0, 2.0], [3.0, 4.0]])
        >>> s = np.sum(x, axis=0); type(s).__name__, s.tolist()
        ('Array', [4.0, 6.0])
        >>> float(np.mean(x)), np.median(x).item()
        (2.5, 2.5)
        """
        return _array_function(func, args, kwargs)

    def __dlpack__(self, /, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: builtins.bool | None = None) -> Any:
        data = self._value().view()
        data.flags.writeable = False  # consumers must not write into braze's buffer
        if max_version is None or tuple(max_version) < (1, 0):
            data = data.copy()  # legacy DLPack cannot say read-only: hand out a copy
        kw: dict[str, Any] = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if dl_device is not None:
            kw["dl_device"] = dl_device
        if copy is not None:
            kw["copy"] = copy
        return data.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU

    def item(self) -> Scalar:
        """The single element as a Python scalar.

        >>> import braze as bz
        >>> bz.asarray([[3]]).item()
        3
        """
        if self.size != 1:
            raise ValueError(f"item: array of shape {self.shape} has {self.size} elements, not 1")
        data = self._value()
        if dt.is_low_precision(data.dtype):
            data = data.astype(np.float32)
        return data.reshape(()).item()

    def tolist(self) -> Any:
        """Nested Python lists of Python scalars.

        >>> import braze as bz
        >>> bz.arange(3).tolist()
        [0, 1, 2]
        """
        data = self._value()
        if dt.is_low_precision(data.dtype):
            data = data.astype(np.float32)
        return data.tolist()

    def _scalar(self, kind: type, what: str) -> Any:
        if self.size != 1:
            raise TypeError(f"{what}: only size-1 arrays convert to Python scalars, got shape "
                            f"{self.shape}")
        return kind(self.item())

    def __bool__(self) -> builtins.bool:
        if self.size != 1:
            raise ValueError(f"bool: the truth value of an array of shape {self.shape} is "
                             "ambiguous; use any() or all()")
        return builtins.bool(self.item())

    def __float__(self) -> builtins.float:
        if dt.is_complex(self.dtype):
            raise TypeError("float: cannot convert a complex array; use real() or abs()")
        return self._scalar(builtins.float, "float")

    def __int__(self) -> builtins.int:
        if dt.is_complex(self.dtype):
            raise TypeError("int: cannot convert a complex array")
        return self._scalar(builtins.int, "int")

    def __complex__(self) -> builtins.complex:
        return self._scalar(builtins.complex, "complex")

    def __index__(self) -> builtins.int:
        if not (dt.is_integer(self.dtype) and self.ndim == 0):
            raise TypeError(f"__index__: only 0-d integer arrays are indices, got "
                            f"{dt.name(self.dtype)} of shape {self.shape}")
        return self._scalar(builtins.int, "__index__")  # 0-d: one element

    def __repr__(self) -> str:
        """numpy's repr of the value (it evaluates).

        >>> import braze as bz
        >>> bz.arange(3), bz.ones(2)
        (array([0, 1, 2]), array([1., 1.], dtype=float32))
        """
        return repr(self._value())

    def __str__(self) -> str:
        """numpy's str of the value: ``print(bz.arange(3))`` shows ``[0 1 2]``."""
        return str(self._value())

    def __format__(self, spec: str) -> str:
        """``f"{x:.2f}"`` formats a size-1 array's element; other arrays as numpy does.

        >>> import braze as bz
        >>> f"{bz.asarray(2.0) / 3:.3f}", f"{bz.arange(3)}"
        ('0.667', '[0 1 2]')
        """
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(self._value(), spec)

    def __round__(self, ndigits: int | None = None) -> Any:
        """``round(x)`` of a 0-d array is a Python int; ``round(x, n)`` an array rounded to
        n decimals (numpy's rule: half to even on the scaled value).

        >>> import braze as bz
        >>> round(bz.asarray(2.5)), round(bz.asarray([1.234, 5.678]), 2).tolist()
        (2, [1.2300000190734863, 5.679999828338623])
        """
        if ndigits is None and self.ndim == 0:
            return builtins.round(self.item())  # type: ignore[arg-type]  # complex: TypeError
        return self.round(ndigits or 0)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Array]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    def _getitem(self, key: Any, /) -> Any:
        """``x[key]``. Basic indices (ints, slices, ``...``, None) record a view; integer
        index arrays a lazy gather. A boolean mask makes the result shape data-dependent:
        the mask, and only the mask, is evaluated at the call. One element of an evaluated
        array (an int per axis) is a numpy scalar, as numpy gives it; of a pending one, a
        lazy 0-d array.

        >>> import braze as bz
        >>> x = bz.arange(5) * 10
        >>> x[1:3].tolist(), x[bz.asarray([4, 0])].tolist(), x[x > 25].tolist()
        ([10, 20], [40, 0], [30, 40])
        >>> x[-1], type(x[-1]).__name__
        (np.int64(40), 'int64')
        """
        return _ix.getitem(self, key)

    def _setitem(self, key: Any, value: Any, /) -> None:
        """``x[key] = value``. Functional update: rebinds this array to a new node; views
        taken earlier keep the old value (an element store into a buffer nothing else
        holds writes in place). Same keys as ``x[key]`` (a boolean mask is evaluated at the
        call).

        >>> import braze as bz
        >>> x = bz.zeros(4, dtype=bz.int32); old = x[:]
        >>> x[bz.asarray([0, 2])] = 7
        >>> x.tolist(), old.tolist()
        ([7, 0, 7, 0], [0, 0, 0, 0])
        """
        _ix.setitem(self, key, value)

    # ------------------------------------------------------------ methods (lazy)
    def astype(self, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None
               ) -> Array:
        return astype(self, dtype, copy=copy, device=device)

    def reshape(self, *shape: Any) -> Array:
        if len(shape) == 1 and not isinstance(shape[0], builtins.int):
            shape = tuple(shape[0])
        return _m.reshape(self, shape)

    def transpose(self, *axes: Any) -> Array:
        if len(axes) == 1 and not isinstance(axes[0], builtins.int):
            axes = tuple(axes[0])
        return _m.permute_dims(self, axes or tuple(reversed(range(self.ndim))))

    def flatten(self) -> Array:
        return _m.ravel(self)

    # numpy's method signatures: dtype= and out=None accepted (out= must be None: braze
    # arrays are values, results are new arrays)
    def sum(self, axis: Any = None, dtype: Any = None, out: None = None,
            keepdims: builtins.bool = False) -> Array:
        _no_out("sum", out)
        return _r.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, out: None = None,
             keepdims: builtins.bool = False) -> Array:
        _no_out("prod", out)
        return _r.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, out: None = None,
             keepdims: builtins.bool = False) -> Array:
        _no_out("mean", out)
        x = self if dtype is None else astype(self, dtype)
        return _r.mean(x, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, dtype: Any = None, out: None = None, ddof: Any = 0,
            keepdims: builtins.bool = False, *, correction: Any = None) -> Array:
        return self._spread(_r.var, axis, dtype, out, ddof, keepdims, correction)

    def std(self, axis: Any = None, dtype: Any = None, out: None = None, ddof: Any = 0,
            keepdims: builtins.bool = False, *, correction: Any = None) -> Array:
        return self._spread(_r.std, axis, dtype, out, ddof, keepdims, correction)

    def _spread(self, fn: Any, axis: Any, dtype: Any, out: None, ddof: Any,
                keepdims: builtins.bool, correction: Any) -> Array:
        """var/std with numpy's ddof= (the standard's correction= wins when given)."""
        _no_out(fn.__name__, out)
        x = self if dtype is None else astype(self, dtype)
        return fn(x, axis=axis, correction=ddof if correction is None else correction,
                  keepdims=keepdims)

    # max, min, argmax, argmin, any, all: (axis=None, out=None, keepdims=False)
    max = _axis_method("max")
    min = _axis_method("min")
    argmax = _axis_method("argmax")
    argmin = _axis_method("argmin")
    any = _axis_method("any")
    all = _axis_method("all")

    def cumsum(self, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
        """``bz.cumsum``: the running sum along ``axis`` (the flattened array when None).

        >>> import braze as bz
        >>> bz.asarray([[1, 2], [3, 4]]).cumsum().tolist()
        [1, 3, 6, 10]
        """
        return _r.cumsum(self, axis, dtype, out)

    def cumprod(self, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
        return _r.cumprod(self, axis, dtype, out)

    def copy(self) -> Array:
        """An independent array with the same values (numpy's ``copy``).

        >>> import braze as bz
        >>> a = bz.arange(3); b = a.copy(); b[0] = 9
        >>> a.tolist(), b.tolist()
        ([0, 1, 2], [9, 1, 2])
        """
        return _c.copy(self)

    def clip(self, min: Any = None, max: Any = None, out: None = None) -> Array:  # noqa: A002
        _no_out("clip", out)
        return _e.clip(self, min, max)

    def round(self, decimals: int = 0, out: None = None) -> Array:
        """Round half to even to ``decimals`` decimals (``bz.around``: numpy's scale,
        round, scale back; integers are returned as they are for decimals >= 0).

        >>> import braze as bz
        >>> bz.asarray([0.125, 2.5, -1.75]).round(1).tolist()
        [0.10000000149011612, 2.5, -1.7999999523162842]
        """
        _no_out("round", out)
        from .numpy_extras import around

        return around(self, decimals)

    def squeeze(self, axis: Any = None) -> Array:
        return _m.squeeze(self, axis)

    def ravel(self) -> Array:
        return _m.ravel(self)

    def swapaxes(self, axis1: int, axis2: int) -> Array:
        return _m.swapaxes(self, axis1, axis2)

    def dot(self, other: Any) -> Array:
        return _linalg.dot(self, other)

    def conj(self) -> Array:
        return _ew_op("conj", self)

    def conjugate(self) -> Array:
        return _ew_op("conj", self)

    def nonzero(self) -> tuple[Array, ...]:
        from .searching import nonzero

        return nonzero(self)

    def argsort(self, axis: int = -1) -> Array:
        from .searching import argsort

        return argsort(self, axis=axis)

    def tobytes(self) -> bytes:
        return self._value().tobytes()

    # ------------------------------------------------------------ operators
    if TYPE_CHECKING:  # the binary operators are installed by _binary_dunders below
        def _binary(self, other: Any, /) -> Array: ...
        __add__ = __radd__ = __iadd__ = __sub__ = __rsub__ = __isub__ = _binary
        __mul__ = __rmul__ = __imul__ = __truediv__ = __rtruediv__ = __itruediv__ = _binary
        __floordiv__ = __rfloordiv__ = __ifloordiv__ = __mod__ = __rmod__ = __imod__ = _binary
        __pow__ = __rpow__ = __ipow__ = __and__ = __rand__ = __iand__ = _binary
        __or__ = __ror__ = __ior__ = __xor__ = __rxor__ = __ixor__ = _binary
        __lshift__ = __rlshift__ = __ilshift__ = __rshift__ = __rrshift__ = __irshift__ = _binary
        __lt__ = __le__ = __gt__ = __ge__ = _binary
        __eq__ = __ne__ = _binary  # type: ignore[assignment]  # elementwise: an Array, not bool

    def __neg__(self) -> Array:
        return _ew_op("negative", self)

    def __pos__(self) -> Array:
        return _ew_op("positive", self)

    def __abs__(self) -> Array:
        return _ew_op("abs", self)

    def __invert__(self) -> Array:
        return _ew_op("bitwise_invert", self)

    def __matmul__(self, other: Any, /) -> Array:
        return _linalg.matmul(self, as_array(other, "matmul"))

    def __rmatmul__(self, other: Any, /) -> Array:
        return _linalg.matmul(as_array(other, "matmul"), self)

    def __imatmul__(self, other: Any, /) -> Array:
        return self._inplace(self.__matmul__(other), "@=")

    def _inplace(self, result: Array, sym: str) -> Array:
        if result.dtype != self.dtype:
            raise TypeError(f"{sym}: the result dtype {dt.name(result.dtype)} differs from the "
                            f"array's {dt.name(self.dtype)}; in-place ops keep the dtype")
        if result.shape != self.shape:
            raise ValueError(f"{sym}: the result shape {result.shape} differs from the array's "
                             f"{self.shape}; in-place ops keep the shape")
        self._node = result._node  # rebind: views taken earlier keep the old value
        return self


def _binary_dunders(name: str, sym: str) -> None:
    op = OPS[name]

    def fwd(self: Array, other: Any, /) -> Array:
        return elementwise(op, self, other)

    def rev(self: Array, other: Any, /) -> Array:
        return elementwise(op, other, self)

    def inplace(self: Array, other: Any, /) -> Array:
        return self._inplace(elementwise(op, self, other), sym + "=")

    base = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "truediv",
            "floor_divide": "floordiv", "remainder": "mod", "pow": "pow", "bitwise_and": "and",
            "bitwise_or": "or", "bitwise_xor": "xor", "bitwise_left_shift": "lshift",
            "bitwise_right_shift": "rshift"}.get(name)
    if base is None:  # comparisons: no reflected/in-place forms
        setattr(Array, f"__{sym}__", fwd)
        return
    setattr(Array, f"__{base}__", fwd)
    setattr(Array, f"__r{base}__", rev)
    setattr(Array, f"__i{base}__", inplace)


for _name, _sym in [("add", "+"), ("subtract", "-"), ("multiply", "*"), ("divide", "/"),
                    ("floor_divide", "//"), ("remainder", "%"), ("pow", "**"),
                    ("bitwise_and", "&"), ("bitwise_or", "|"), ("bitwise_xor", "^"),
                    ("bitwise_left_shift", "<<"), ("bitwise_right_shift", ">>"),
                    ("equal", "eq"), ("not_equal", "ne"), ("less", "lt"),
                    ("less_equal", "le"), ("greater", "gt"), ("greater_equal", "ge")]:
    _binary_dunders(_name, _sym)


# ---------------------------------------------------------------- recording helpers
def _operand(x: Any, op: str) -> Array | Scalar:
    """An op argument: an Array, a Python scalar (kept weak), or array-like (converted)."""
    if isinstance(x, Array) or type(x) in _SCALARS:  # numpy scalars are typed: converted
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        return _c.asarray(x)
    if hasattr(x, "__dlpack__") or hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        return _c.asarray(x)  # nested Python sequences too, as numpy takes them
    raise TypeError(f"{op}: expected an array or a Python scalar, got {type(x).__name__}")


def as_array(x: Any, op: str) -> Array:
    """An array argument: array-likes, nested sequences and Python scalars are converted
    (``bz.sqrt(4)`` works as ``np.sqrt(4)`` does); None is refused."""
    if isinstance(x, Array):
        return x
    if x is None:
        raise TypeError(f"{op}: expected an array, got None")
    if type(x) in _SCALARS:
        return _c.asarray(x)
    return _operand(x, op)  # type: ignore[return-value]


def cast_node(node: Node, dtype: np.dtype) -> Node:
    """``node`` converted to ``dtype`` (no node when it already has it)."""
    if node.dtype == dtype:
        return node
    if dt.is_complex(node.dtype) and not dt.is_complex(dtype) and dtype != dt.bool_:
        raise TypeError(f"astype: cannot cast complex {dt.name(node.dtype)} to "
                        f"{dt.name(dtype)}; take real() or abs() first")
    return Node(CAST, (node,), {"dtype": dtype}, node.shape, dtype)


_SCALAR_NODES: dict[tuple[Any, ...], Node] = {}


def _scalar_node(value: Scalar, dtype: np.dtype) -> Node:
    """A 0-d constant leaf. Leaves are immutable, so equal scalars share one node
    (cheaper dispatch, and common subexpressions stay common)."""
    key = (type(value), value, dtype, str(value) if value == 0 else None)  # keeps -0.0 apart
    node = _SCALAR_NODES.get(key)
    if node is None:
        with np.errstate(over="ignore"):
            node = constant(np.asarray(value, dtype=dtype))
        if len(_SCALAR_NODES) >= 4096:
            _SCALAR_NODES.clear()
        _SCALAR_NODES[key] = node
    return node


_WEAK_SAMPLE = {"b": True, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def promote_operands(name: str, args: tuple[Any, ...]
                     ) -> tuple[tuple[Any, ...], np.dtype, builtins.bool]:
    """Normalize op arguments (array-likes become Arrays; Python scalars stay weak) and
    return them with their common dtype under the standard's promotion rules, and
    whether the result is weak (only Python scalars / traced scalars took part)."""
    arrays = []
    for a in args:
        if isinstance(a, Array):
            arrays.append(a)
        elif type(a) not in _SCALARS:  # np.float64 subclasses float, yet is typed
            args = tuple(b if isinstance(b, Array) or type(b) in _SCALARS else _operand(b, name)
                         for b in args)
            arrays = [b for b in args if isinstance(b, Array)]
            break
    if not arrays:  # all Python scalars: they take the default dtypes
        args = tuple(_c.asarray(a) for a in args)
        arrays = list(args)
    strong = [a for a in arrays if not a._node.weak]
    if not strong:  # traced Python scalars only: Python's own arithmetic decides
        kinds = [a.dtype.kind if isinstance(a, Array) else np.asarray(a).dtype.kind
                 for a in args]
        for kind, d in (("c", dt.complex128), ("f", dt.float64), ("i", dt.int64),
                        ("u", dt.int64), ("b", dt.bool_)):
            if kind in kinds:
                return args, d, True
    common = strong[0]._node.dtype
    for a in strong[1:]:
        if a._node.dtype != common:
            common = dt.promote(common, a._node.dtype, name)
    if len(strong) != len(args):
        for a in args:
            if isinstance(a, Array):
                if a._node.weak:
                    sample = _WEAK_SAMPLE[a.dtype.kind]
                    common = dt.promote(common, dt.scalar_dtype(sample, common, name), name)
            else:
                common = dt.promote(common, dt.scalar_dtype(a, common, name), name)
    return args, common, False


def operand_nodes(name: str, args: tuple[Any, ...], dtype: np.dtype,
                  common: np.dtype | None = None) -> tuple[list[Node], tuple[int, ...]]:
    """Nodes of ``args`` cast to ``dtype`` and their broadcast shape. Python scalars first
    take the ``common`` (promoted) dtype, as if they were arrays of it, then the cast."""
    nodes: list[Node] = []
    shapes: list[tuple[int, ...]] = []
    for a in args:
        if isinstance(a, Array):
            nodes.append(cast_node(a._node, dtype))
            shapes.append(a._node.shape)
        elif common is not None and common != dtype:
            nodes.append(cast_node(_scalar_node(a, common), dtype))
        else:
            nodes.append(_scalar_node(a, dtype))
    shape = shapes[0] if shapes else ()
    for s in shapes[1:]:
        if s != shape:
            shape = broadcast_shapes(*shapes, op=name)
            break
    return nodes, shape


# (op, dtype) -> elementwise_dtypes(op, dtype): pure, and on every binary op's path
_DTYPES: dict[tuple[OpDef, np.dtype], tuple[np.dtype, np.dtype]] = {}


def _same_dtype_result(op: OpDef, d: np.dtype) -> np.dtype | None:
    """``op``'s result dtype on inputs of dtype ``d`` when it also computes in ``d`` (the
    fast paths' case), else None. Raises for an unsupported dtype."""
    res = _DTYPES.get((op, d))
    if res is None:
        res = _DTYPES[op, d] = elementwise_dtypes(op, d)
    return res[1] if res[0] == d else None


_INT_RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                         np.uint32, np.uint64)}


def _int_takes(v: int, d: np.dtype) -> builtins.bool:
    """Whether a Python int beside an array of dtype ``d`` simply takes ``d`` (a float
    dtype, or an integer one whose range holds it): promotion's answer, without it."""
    if d.kind == "f":
        return True
    r = _INT_RANGES.get(d)
    return r is not None and r[0] <= v <= r[1]


def _binary_fast(op: OpDef, a: Any, b: Any) -> Array | None:
    """The common binary cases (two strong arrays of one dtype; a float array and a
    Python float; an int or float array and a Python int it holds) without the general
    promotion machinery: ~2x cheaper dispatch.
    Returns None for everything else (the general path decides, raising as it does)."""
    # (the operand cases spelled out, not a helper per operand: recording is a hot path)
    if type(a) is Array:
        na = a._node
        d = na.dtype
        if na.weak:
            return None
        if type(b) is Array:
            nb = b._node
            if nb.dtype != d or nb.weak:
                return None
        elif type(b) is float and d.kind == "f" or type(b) is int and _int_takes(b, d):
            nb = _scalar_node(b, d)
        else:
            return None
    elif type(b) is Array:
        nb = b._node
        d = nb.dtype
        if nb.weak or not (type(a) is float and d.kind == "f" or
                           type(a) is int and _int_takes(a, d)):
            return None
        na = _scalar_node(a, d)
    else:
        return None
    if op.arity != 2:
        return None
    out = _same_dtype_result(op, d)
    if out is None:
        return None
    sa, sb = na.shape, nb.shape
    shape = sa if sa == sb or not sb else sb if not sa else broadcast_shapes(sa, sb, op=op.name)
    attrs = {"dtype": d} if op.exact_dtype else {}
    node = Node(op, (na, nb), attrs, shape, out)
    if not shape and na.data is not None and nb.data is not None:
        _eager(node)
    return Array(node)


def _unary_fast(op: OpDef, x: Node) -> Array | None:
    """A unary op on a strong array whose dtype it computes in (``exp`` of float32): no
    promotion machinery. None for everything else (the general path decides)."""
    if x.weak:
        return None
    d = x.dtype
    out = _same_dtype_result(op, d)
    if out is None:
        return None
    node = Node(op, (x,), {"dtype": d} if op.exact_dtype else {}, x.shape, out)
    if not x.shape and x.data is not None:
        _eager(node)
    return Array(node)


_LOW_DTYPES = (dt.float16, dt.bfloat16)


def numpy_scalar_fn(op: OpDef, args: tuple[Any, ...]) -> Any:
    """The function that computes ``op`` at once on operands of the types of ``args``
    when they are numpy scalars of one numeric dtype (Python floats beside float ones),
    giving a numpy scalar as numpy's function does: ``x[i]`` of an evaluated array is
    one, so a scalar loop runs at numpy's speed. False for other operand types, or when
    braze's dtype rule differs from the reference's computing dtype (float16/bfloat16,
    an integer with a float): the array path decides. Depends on the types alone, so
    callers cache it by them.

    >>> import numpy as np
    >>> numpy_scalar_fn(OPS["tanh"], (np.float32(0.5),))(np.float32(0.5))
    np.float32(0.46211717)
    >>> numpy_scalar_fn(OPS["add"], (np.float16(1), 2.0))
    False
    """
    d = None
    weak = False
    for a in args:
        if isinstance(a, np.generic):
            if d is not None and a.dtype != d or a.dtype.kind not in "biufc":
                return False
            d = a.dtype
        elif type(a) is float:
            weak = True
        else:
            return False
    if d is None or d in _LOW_DTYPES or weak and d.kind != "f" or op.arity != len(args):
        return False
    try:
        out = _same_dtype_result(op, d)
    except TypeError:
        return False  # (outside the op's domain: the array path raises its message)
    if out is None:
        return False
    ref = op.real_reference if op.real_reference is not None and d.kind != "c" else \
        op.reference
    libm = getattr(ref, "libm_name", None)
    if libm is not None and d in (dt.float32, dt.float64) and out == d:
        return _core.vmath_scalar(libm, d == dt.float64)  # the kernels' math (ops/libm.py)
    if op.exact_dtype:
        ref = functools.partial(ref, dtype=d)
    sample = np.zeros((), d)[()]
    with np.errstate(all="ignore"):
        probe = ref(*(sample,) * op.arity)
    if isinstance(probe, np.generic) and probe.dtype == out:
        return ref

    def fn(*xs: Any) -> Any:
        res = np.asarray(ref(*xs))
        return (res if res.dtype == out else res.astype(out))[()]

    return fn


def elementwise(op: OpDef, *args: Any) -> Array:
    """Record elementwise ``op`` on arrays and/or Python scalars (broadcasting, promotion).

    >>> import braze as bz
    >>> elementwise(OPS["add"], bz.ones((2, 1), dtype=bz.int8), 1.5).dtype
    dtype('float32')
    """
    if len(args) == 2:
        fast = _binary_fast(op, args[0], args[1])
        if fast is not None:
            return fast
    elif len(args) == 1 and op.arity == 1 and type(args[0]) is Array:
        fast = _unary_fast(op, args[0]._node)
        if fast is not None:
            return fast
    if len(args) != op.arity:
        raise TypeError(f"{op.name}: takes {op.arity} arguments, got {len(args)}")
    args, common, weak = promote_operands(op.name, args)
    compute, out = elementwise_dtypes(op, common)
    nodes, shape = operand_nodes(op.name, args, compute, common)
    attrs = {"dtype": compute} if op.exact_dtype else {}
    node = Node(op, tuple(nodes), attrs, shape, out, None, weak)
    if not shape:
        _eager(node)
    return Array(node)


def _eager(node: Node) -> None:
    """Compute a 0-d elementwise ``node`` at once when its inputs are known (a scalar
    read of an evaluated array, arithmetic on such values): a loop of scalar steps
    builds no graph. Op by op with the numpy references, as a tiny graph is evaluated.
    Not while tracing (the values must stay in the compiled graph)."""
    for x in node.inputs:
        if x.data is None and not (x.op is CAST and x.inputs[0].data is not None):
            return
    if TRACING.get():
        return
    folded = True  # constants only (no value read from an array): the result is one too
    with np.errstate(all="ignore"):  # IEEE semantics, as evaluation has
        for x in node.inputs:
            if x.data is None:  # a cast of a known value
                folded = folded and x.inputs[0].op is CONSTANT
                x.data = reference_eval(CAST, x.attrs, x.dtype, x.inputs[0].data)
                x.inputs = ()
            elif x.op is not CONSTANT:
                folded = False
        node.data = reference_eval(node.op, node.attrs, node.dtype,
                                   *[x.data for x in node.inputs])
    node.inputs = ()
    node.depth = 0
    if folded:
        node.op, node.attrs = CONSTANT, {}


def astype(x: Array, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None) -> Array:
    """Cast to ``dtype`` (complex to real is refused: take real() or abs() first).

    >>> import braze as bz
    >>> bz.astype(bz.asarray([1.7, -1.7]), bz.int32).tolist()
    [1, -1]
    """
    x = as_array(x, "astype")
    to = dt.to_dtype(dtype, "astype")
    if device is not None and device not in (CPU, "cpu"):
        raise ValueError(f"astype: unknown device {device!r}; available: [{CPU!r}]")
    if to == x.dtype:
        # arrays are values (setitem rebinds), so a "copy" is a new handle on the node
        return x if not copy else Array(x._node)
    return Array(cast_node(x._node, to))


# A recorded node this deep in pending nodes cuts its graph: its inputs are evaluated
# (with everything behind them still held elsewhere, in one schedule) before it is used.
# A loop that never evaluates then runs as a few repeating segments, each a schedule
# cache hit, instead of one graph that grows every iteration and never repeats.
# Not above CUT_ELEMENTS elements: there one fused kernel's memory traffic outweighs
# what the optimizer and the dispatch cost, and a cut would store a buffer per segment.
# BRAZE_CUT_DEPTH=0 never cuts (one graph per eval, as before; benchmarks/compiler.py
# measures the optimizer on such graphs).
CUT_DEPTH = int(os.environ.get("BRAZE_CUT_DEPTH", "32")) or sys.maxsize
CUT_ELEMENTS = 1 << 22


def cut(node: Node, itself: builtins.bool = False, aligned: builtins.bool = True) -> None:
    """Evaluate the pending graph behind ``node``'s inputs (see :data:`CUT_DEPTH` and
    :func:`braze.graph.evaluate.cut_targets`) up to where its loop last started an
    iteration (:func:`~braze.graph.evaluate.iteration_boundary`: the segments repeat;
    unless not ``aligned``), or all of it; ``node`` stays pending unless ``itself`` (an
    array rebound by an assignment: its next writes then go in place). Never while
    tracing: a compiled function's graph is one."""
    if node.size > CUT_ELEMENTS or TRACING.get():
        return
    split = iteration_boundary(node.inputs) if aligned and not itself else None
    if split is not None:
        head, tail = split
        targets = cut_targets(head)
        del head
    else:
        targets = cut_targets((node,) if itself else node.inputs)
    if targets:
        _current_backend().evaluate(targets)
    del targets
    if split is None:
        node.depth = 0 if itself else 1
        return
    for n in [*tail, node]:  # (in recording order: inputs first)
        n.depth = depth_over(n.inputs)
    del split, tail
    if node.depth >= CUT_DEPTH:  # (the iteration in progress is itself this deep)
        cut(node, aligned=False)


def eval(*arrays: Any) -> None:  # noqa: A001 - the public name, as in MLX
    """Compute the given arrays (any nesting of lists/tuples/dicts of arrays).

    >>> import braze as bz
    >>> a = bz.ones(3) + 1
    >>> bz.eval(a); a._node.is_evaluated
    True
    """
    nodes: list[Node] = []
    stack: list[Any] = list(arrays)
    while stack:
        x = stack.pop()
        if isinstance(x, Array):
            if x._node.data is None:
                nodes.append(x._node)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif x is not None and not isinstance(x, (*_SCALARS, str, np.generic)):
            raise TypeError(f"eval: expected arrays (or lists/tuples/dicts of them), got "
                            f"{type(x).__name__}")
    if nodes:
        _current_backend().evaluate(nodes)


# numpy ufunc name -> braze op name, for np.exp(bz_array) and friends
_UFUNC_NAMES = {
    "true_divide": "divide", "divide": "divide", "power": "pow", "arctan2": "atan2",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "absolute": "abs", "conjugate": "conj",
    "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift", "mod": "remainder",
}
_UFUNCS: dict[str, Any] = {}


def _init_ufuncs() -> None:
    # Only names that can map to an op: dir(np) + getattr would import numpy's lazy
    # submodules (f2py, ma, testing...) and add ~100 ms to `import braze`.
    for ufunc_name in set(OPS) | set(_UFUNC_NAMES):
        u = getattr(np, ufunc_name, None)
        if isinstance(u, np.ufunc):
            op = OPS.get(_UFUNC_NAMES.get(u.__name__, u.__name__))
            if op is not None and op.kind == "elementwise" and op.name not in ("cast", "bitcast"):
                _UFUNCS[u.__name__] = functools.partial(elementwise, op)


_init_ufuncs()

def _ew_op(name: str, *args: Any) -> Array:
    """Record elementwise op ``name`` (the generated public functions are not visible to
    the type checker; this is what they call)."""
    return elementwise(OPS[name], *args)


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"{name}: out= is not supported (braze arrays are values; use the "
                        "result)")


def _to_numpy_args(x: Any) -> Any:
    if isinstance(x, Array):
        return x._value()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy_args(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy_args(v) for k, v in x.items()}
    return x


def _numpy_fallback(func: Any, args: Any, kwargs: Any) -> Any:
    """numpy's own ``func`` on the values (braze has no such function, or not with these
    arguments): the result is numpy's."""
    return func(*_to_numpy_args(tuple(args)), **_to_numpy_args(dict(kwargs)))


def _braze_function(func: Any) -> Any:
    """braze's function of numpy function ``func``'s name (numpy, numpy.linalg, numpy.fft)."""
    import braze

    module = getattr(func, "__module__", "") or ""
    ns: Any = braze
    if module.endswith("linalg"):
        ns = braze.linalg
    elif module.endswith("fft"):
        ns = braze.fft
    fn = getattr(ns, func.__name__, None)
    return fn if callable(fn) and not isinstance(fn, type) else None


def _array_function(func: Any, args: Any, kwargs: Any) -> Any:
    fn = _braze_function(func)
    kw = dict(kwargs)
    if "out" in kw:
        _no_out(func.__name__, kw.pop("out"))
    if fn is None:
        return _numpy_fallback(func, args, kwargs)
    try:
        return fn(*args, **kw)
    except TypeError as e:  # numpy's signature differs (positional axis, extra keywords)
        if "argument" not in str(e) and "expected an array" not in str(e):
            raise
        return _numpy_fallback(func, args, kwargs)


# late imports: these modules import Array from here
from . import creation as _c  # noqa: E402
from . import elementwise as _e  # noqa: E402
from . import indexing as _ix  # noqa: E402
from . import linalg as _linalg  # noqa: E402
from . import manipulation as _m  # noqa: E402
from . import reductions as _r  # noqa: E402
