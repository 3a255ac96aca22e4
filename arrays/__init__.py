"""braze.arrays: the public API (``import braze as bz`` re-exports all of it).

>>> import braze as bz
>>> bz.sum(bz.arange(4) * 2).item()
12
"""

from ..backends import available as _available  # noqa: F401
from ..backends import backend, set_backend
from ..graph.dtypes import (
    bfloat16,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from . import fast, fft, linalg, nn, optimizers, random
from .array import Array, Device, astype, eval
from .autodiff import checkpoint, custom_vjp, grad, jvp, stop_gradient, value_and_grad, vjp
from .batching import vmap
from .compile import compile
from .conv import *
from .conv import __all__ as _conv_all
from .creation import *
from .creation import __all__ as _creation_all
from .creation import (
    arange,
    array,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from .elementwise import *
from .elementwise import __all__ as _elementwise_all
from .explain import explain
from .indexing import take, take_along_axis
from .info import *
from .info import __all__ as _info_all
from .info import __array_api_version__, __array_namespace_info__  # noqa: F401
from .io import fromfile, genfromtxt, load, loadtxt, save, savetxt, savez, savez_compressed
from .linalg import (
    cross,
    dot,
    einsum,
    inner,
    kron,
    matmul,
    matrix_transpose,
    matvec,
    tensordot,
    vdot,
    vecdot,
    vecmat,
)
from .manipulation import *
from .manipulation import __all__ as _manipulation_all
from .numpy_extras import *
from .numpy_extras import __all__ as _numpy_extras_all
from .quantized import dequantize, quantize, quantized_matmul
from .reductions import *
from .reductions import __all__ as _reductions_all
from .searching import *
from .searching import __all__ as _searching_all

bool = bool_  # noqa: A001 - the standard's name for the boolean dtype
e = 2.718281828459045
pi = 3.141592653589793
inf = float("inf")
nan = float("nan")
newaxis = None

__all__ = [
    "Array", "Device", "astype", "eval", "backend", "set_backend", "compile", "explain",
    "grad", "value_and_grad", "vjp", "jvp", "vmap", "stop_gradient", "custom_vjp", "checkpoint",
    "bool", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "e", "pi", "inf", "nan", "newaxis",
    "arange", "array", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full",
    "full_like", "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros",
    "zeros_like", "matmul", "tensordot", "vecdot", "take", "take_along_axis", "fft", "linalg",
    "quantize", "dequantize", "quantized_matmul", "nn", "onnx", "optimizers", "fast", "load",
    "save",
    "fromfile", "genfromtxt", "loadtxt", "savetxt", "savez", "savez_compressed",
    "cross", "dot", "einsum", "inner", "kron", "matvec", "vdot", "vecmat",
    *_elementwise_all, *_manipulation_all, *_reductions_all, *_info_all, *_searching_all,
    *_creation_all, *_numpy_extras_all, *_conv_all,
]

# last: its op table reads the names above (bz.abs, bz.nn...) when it is imported
from . import onnx  # noqa: E402
