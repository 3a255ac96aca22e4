"""Op records: every op braze knows, one record each, grouped by family.

An op's facts live in its :class:`~braze.graph.ops.record.OpDef` (name, arity, dtype
and shape rules, numpy reference, cost, C-family expression and helpers, Metal and MLX
facts, public summary and example, gradient slot); every layer reads the record.

==================  =========================================================
module              ops
==================  =========================================================
``record``          the record type, the registry ``OPS``, dtype domains,
                    ``reference_eval`` (braze's semantics over a numpy reference)
``shapes``          broadcasting, reduced and matmul shapes
``leaves``          constant, parameter, arange, linspace
``elementwise``     unary/binary/ternary elementwise ops, cast, bitcast
``reductions``      sum, prod, mean, max, min, any, all, argmax/argmin, scans
``views``           reshape, permute_dims, broadcast_to, slice, slice_update, concat
``library``         matmul, sort, argsort, searchsorted, gather, scatter, take_along_axis
``quantized``       quantized_matmul and the affine group layout
``nn``              rope, scaled_dot_product_attention
``conv``            conv (every convolution: N-d, strided, dilated, grouped, transposed)
``random``          threefry-2x32 random bits
``linalg``, ``fft`` the standard's extensions (numpy/LAPACK references)
==================  =========================================================

>>> OPS["add"].kind, OPS["add"].arity, OPS["exp"].cost
('elementwise', 2, 8)
>>> sorted({op.kind for op in OPS.values()})
['elementwise', 'leaf', 'library', 'random', 'reduce', 'scan', 'view']
"""

from __future__ import annotations

from . import (
    conv,
    elementwise,
    fft,
    leaves,
    library,
    linalg,
    nn,
    quantized,
    random,
    reductions,
    views,
)
from .conv import (
    CONV,
    CONV_CONCAT,
    CONV_FUSED,
    MAX_POOL,
    WINDOW_SUM,
    concat_branches,
    conv_attrs,
    conv_out_size,
    conv_ref,
    dilate_and_pad,
    pool_fill,
    pool_outs,
    pool_windows,
)
from .elementwise import BITCAST, CAST, WHERE
from .leaves import CONSTANT, PARAMETER, VALUE
from .library import GATHER, MATMUL, SCATTER, argsort_ref, index_key, index_shape
from .nn import ROPE, SDPA, rope_tables, sdpa_visible
from .quantized import (
    QUANT_ACT_MODES,
    QUANT_BITS,
    QUANT_GROUPS,
    QUANTIZED_MATMUL,
    dequantize_ref,
    qmm_ref,
    quant_check,
)
from .random import RANDOM_BITS, random_bits_ref, threefry2x32
from .record import (
    DOMAINS,
    OPS,
    Infer,
    OpDef,
    check_domain,
    declare,
    elementwise_dtypes,
    library_op,
    reference_eval,
    upcast,
)
from .reductions import mean_ref, sum_dtype
from .shapes import Shape, broadcast_shapes, matmul_shape, reduced_shape
from .views import BROADCAST, CONCAT, PERMUTE, RESHAPE, SLICE, SLICE_UPDATE

__all__ = [
    "BITCAST", "BROADCAST", "CAST", "CONCAT", "CONSTANT", "CONV", "CONV_CONCAT", "CONV_FUSED",
    "MAX_POOL", "WINDOW_SUM", "concat_branches", "conv",
    "conv_attrs", "conv_out_size", "conv_ref", "dilate_and_pad", "DOMAINS", "GATHER", "MATMUL",
    "OPS", "pool_fill", "pool_outs", "pool_windows",
    "PARAMETER", "PERMUTE", "QUANTIZED_MATMUL", "QUANT_ACT_MODES", "QUANT_BITS", "QUANT_GROUPS",
    "RANDOM_BITS",
    "RESHAPE", "ROPE", "SCATTER", "SDPA", "SLICE", "SLICE_UPDATE", "VALUE", "WHERE", "Infer",
    "OpDef", "Shape", "argsort_ref", "broadcast_shapes", "check_domain", "declare",
    "dequantize_ref", "elementwise", "elementwise_dtypes", "fft", "index_key", "index_shape",
    "leaves", "library", "library_op", "linalg", "matmul_shape", "mean_ref", "nn", "qmm_ref",
    "quant_check", "quantized", "random", "random_bits_ref", "reduced_shape", "reductions",
    "reference_eval", "rope_tables", "sdpa_visible", "sum_dtype", "threefry2x32", "upcast",
    "views",
]
