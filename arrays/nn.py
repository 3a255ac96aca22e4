"""``bz.nn``: neural-network layers for inference (MLX-style modules).

A :class:`Module` holds its parameters as attributes (Arrays, child modules, lists
of modules); ``parameters()`` returns them as a nested dict, ``load_weights``
assigns them by dotted name with shape checks. Layers call ``bz.fast`` building
blocks, so a transformer block records a graph the fusion compiler turns into a
few kernels, and a ``@bz.compile``d step replays it.

>>> import braze as bz
>>> lin = bz.nn.Linear(3, 2)
>>> lin.load_weights({"weight": bz.ones((2, 3)), "bias": bz.zeros(2)})
>>> lin(bz.ones((1, 3))).tolist()
[[3.0, 3.0]]
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..graph import dtypes as dt
from . import fast, losses
from .array import Array, as_array
from .array import eval as _eval
from .autodiff import value_and_grad as _value_and_grad
from .conv import NN_FUNCTIONS as _conv_functions
from .conv import avg_pool, batch_norm, group_norm, max_pool, upsample  # noqa: F401 (bz.nn.*)
from .creation import asarray, zeros
from .elementwise import abs as _abs  # type: ignore[attr-defined]  # generated (op records)
from .elementwise import exp, sigmoid, tanh, where  # type: ignore[attr-defined]  # generated
from .indexing import take
from .linalg import matmul
from .manipulation import concat, permute_dims, reshape
from .quantized import dequantize, quantize, quantized_matmul
from .reductions import softmax  # noqa: F401  (bz.nn.softmax)

__all__ = [
    "Module", "Linear", "QuantizedLinear", "Embedding", "QuantizedEmbedding", "RMSNorm",
    "LayerNorm", "RoPE", "Attention", "Ragged", "concat_linears", "silu", "gelu",
    "gelu_approx", "relu", "softmax", "Dropout", "LoRALinear", "value_and_grad", "losses",
    "tree_from_names", "names_from_tree", *_conv_functions, "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "BatchNorm", "GroupNorm",
    "InstanceNorm", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d", "Upsample",
]


# ---------------------------------------------------------------- activations
def silu(x: Any) -> Array:
    """``x * sigmoid(x)`` (swish).

    >>> import braze as bz
    >>> round(bz.nn.silu(bz.asarray(1.0)).item(), 4)
    0.7311
    """
    return x * sigmoid(x)


def relu(x: Any) -> Array:
    """``max(x, 0)``.

    >>> import braze as bz
    >>> bz.nn.relu(bz.asarray([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    x = as_array(x, "relu")
    return where(x > 0, x, 0)


def _erf(x: Array) -> Array:
    # Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 (below float32 resolution of gelu)
    a = _abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * exp(-a * a)
    return where(x < 0, -y, y)


def gelu(x: Any) -> Array:
    """``x * Phi(x)`` with the exact Gaussian CDF (erf to 1.5e-7).

    >>> import braze as bz
    >>> round(bz.nn.gelu(bz.asarray(1.0)).item(), 5)
    0.84134
    """
    x = as_array(x, "gelu")
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


def gelu_approx(x: Any) -> Array:
    """The tanh approximation of gelu (GPT-2's).

    >>> import braze as bz
    >>> round(bz.nn.gelu_approx(bz.asarray(1.0)).item(), 4)
    0.8412
    """
    x = as_array(x, "gelu_approx")
    return 0.5 * x * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


# ---------------------------------------------------------------- parameter trees
def tree_from_names(items: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Nested dicts (lists where the keys count 0, 1, ...) from dotted names.

    >>> tree_from_names([("a.0.w", 1), ("a.1.w", 2), ("b", 3)])
    {'a': [{'w': 1}, {'w': 2}], 'b': 3}
    """
    root: dict[str, Any] = {}
    for name, value in items:
        node = root
        *path, leaf = name.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return _lists(root)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: _lists(v) for k, v in node.items()}
    if out and all(k.isdigit() for k in out) and sorted(map(int, out)) == list(range(len(out))):
        return [out[str(i)] for i in range(len(out))]
    return out


def names_from_tree(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted name, leaf) of a nested dict/list tree: the inverse of tree_from_names.

    >>> names_from_tree({"a": [{"w": 1}], "b": 3})
    [('a.0.w', 1), ('b', 3)]
    """
    if isinstance(tree, Mapping):
        return [x for k, v in tree.items() for x in names_from_tree(v, f"{prefix}{k}.")]
    if isinstance(tree, (list, tuple)):
        return [x for i, v in enumerate(tree) for x in names_from_tree(v, f"{prefix}{i}.")]
    return [(prefix[:-1], tree)]


# ---------------------------------------------------------------- modules
class Module:
    """Base class: parameters are the Array attributes of a module and its children.

    >>> import braze as bz
    >>> class Two(bz.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.layers = [bz.nn.Linear(2, 2, bias=False) for _ in range(2)]
    >>> sorted(name for name, _ in Two().named_parameters())
    ['layers.0.weight', 'layers.1.weight']
    """

    def __init__(self) -> None:
        self._frozen: set[str] = set()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")

    # ------------------------------------------------------------ the parameter tree
    def children(self) -> Iterator[tuple[str, Any]]:
        """(name, value) of attributes that are Arrays, modules or lists of modules."""
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (Array, Module)):
                yield name, value
            elif isinstance(value, (list, tuple)) and value and all(
                    isinstance(v, Module) for v in value):
                yield name, value

    def named_parameters(self, prefix: str = "") -> list[tuple[str, Array]]:
        """Every parameter as (dotted name, Array), children first-to-last."""
        out: list[tuple[str, Array]] = []
        for name, value in self.children():
            if isinstance(value, Array):
                out.append((prefix + name, value))
            elif isinstance(value, Module):
                out += value.named_parameters(f"{prefix}{name}.")
            else:
                for i, m in enumerate(value):
                    out += m.named_parameters(f"{prefix}{name}.{i}.")
        return out

    def parameters(self) -> dict[str, Any]:
        """The parameters as a nested dict (lists of modules become lists)."""
        out: dict[str, Any] = {}
        for name, value in self.children():
            if isinstance(value, Array):
                out[name] = value
            elif isinstance(value, Module):
                out[name] = value.parameters()
            else:
                out[name] = [m.parameters() for m in value]
        return out

    def trainable_parameters(self) -> dict[str, Any]:
        """The parameters not frozen with :meth:`freeze`, as a nested dict like
        :meth:`parameters` (what ``nn.value_and_grad`` differentiates)."""
        frozen = self._all_frozen()
        return tree_from_names([(n, p) for n, p in self.named_parameters() if n not in frozen])

    def update(self, parameters: Mapping[str, Any]) -> Module:
        """Replace parameters from a nested dict shaped like :meth:`parameters` (any
        subset; lazy values stay lazy: an optimizer step records, then evaluates once).

        >>> import braze as bz
        >>> lin = bz.nn.Linear(2, 1).update({"bias": bz.ones(1)})
        >>> lin.bias.tolist()
        [1.0]
        """
        for name, value in names_from_tree(parameters):
            try:
                owner, leaf = self._owner(name)
            except (AttributeError, IndexError, ValueError):
                owner, leaf = None, ""
            if not isinstance(owner, Module) or not isinstance(getattr(owner, leaf, None),
                                                                 Array):
                raise ValueError(f"update: {type(self).__name__} has no parameter {name!r}")
            old = getattr(owner, leaf)
            if not isinstance(value, Array) or value.shape != old.shape:
                raise ValueError(f"update: {name}: expected an array of shape {old.shape}, "
                                 f"got {getattr(value, 'shape', type(value).__name__)}")
            setattr(owner, leaf, value)
        return self

    @property
    def training(self) -> bool:
        """True in training mode (:meth:`train`; Dropout is active), False after
        :meth:`eval`."""
        return vars(self).get("_training", True)

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and its children."""
        self._training = bool(mode)
        for m in self._submodules():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """Inference mode (``train(False)``)."""
        return self.train(False)

    def freeze(self) -> Module:
        """Mark every current parameter frozen (excluded from trainable_parameters)."""
        self._frozen = {n for n, _ in self.named_parameters()}
        return self

    def unfreeze(self) -> Module:
        """Clear :meth:`freeze` on this module and its children."""
        self._frozen = set()
        for m in self._submodules():
            m.unfreeze()
        return self

    def _submodules(self) -> Iterator[Module]:
        """The child modules (those in lists included)."""
        for _, value in self.children():
            for m in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(m, Module):
                    yield m

    def _all_frozen(self) -> set[str]:
        out = set(self._frozen)
        for name, value in self.children():
            subs = [(f"{name}.{i}.", m) for i, m in enumerate(value)] \
                if isinstance(value, (list, tuple)) else [(name + ".", value)]
            for prefix, m in subs:
                if isinstance(m, Module):
                    out |= {prefix + n for n in m._all_frozen()}
        return out

    def load_weights(self, weights: Mapping[str, Any] | Sequence[tuple[str, Any]],
                     strict: bool = True) -> None:
        """Assign parameters by dotted name; shapes must match the existing ones.

        With ``strict``, a missing or unexpected name is an error naming it. The new
        values are evaluated, so a compiled call sees them as data, not graphs.
        """
        items = dict(weights.items() if isinstance(weights, Mapping) else weights)
        current = dict(self.named_parameters())
        if strict:
            missing = sorted(set(current) - set(items))
            extra = sorted(set(items) - set(current))
            if missing or extra:
                raise ValueError(f"load_weights: {type(self).__name__}: missing {missing[:8]}"
                                 f"{'...' if len(missing) > 8 else ''}, unexpected "
                                 f"{extra[:8]}{'...' if len(extra) > 8 else ''}")
        for name, value in items.items():
            if name not in current:
                continue
            value = asarray(value)
            if value.shape != current[name].shape:
                raise ValueError(f"load_weights: {name}: expected shape "
                                 f"{current[name].shape}, got {value.shape}")
            owner, leaf = self._owner(name)
            setattr(owner, leaf, value)
        _eval(*[p for _, p in self.named_parameters()])

    def _owner(self, name: str) -> tuple[Any, str]:
        """(the module holding parameter ``name``, its attribute name)."""
        *path, leaf = name.split(".")
        owner: Any = self
        for part in path:
            owner = owner[int(part)] if isinstance(owner, (list, tuple)) else \
                getattr(owner, part)
        return owner, leaf

    def nbytes(self) -> int:
        """Bytes held by the parameters."""
        return sum(p.size * p.dtype.itemsize for _, p in self.named_parameters())


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out, in).

    >>> import braze as bz
    >>> bz.nn.Linear(4, 3)(bz.ones((2, 4))).shape
    (2, 3)
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(input_dims)
        rng = np.random.default_rng(0)
        self.weight = asarray(rng.uniform(-bound, bound, (output_dims, input_dims))
                              .astype(np.float32), copy=False)
        if bias:
            self.bias = zeros((output_dims,))

    def __call__(self, x: Any) -> Array:
        y = matmul(x, self.weight.mT)
        return y + self.bias if "bias" in vars(self) else y


class QuantizedLinear(Module):
    """A :class:`Linear` whose weight is kept packed (see :mod:`braze.arrays.quantized`).

    >>> import braze as bz
    >>> q = bz.nn.QuantizedLinear.from_linear(bz.nn.Linear(64, 8), bits=8)
    >>> q(bz.ones((1, 64))).shape
    (1, 8)
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 32, bits: int = 4, act: str | None = None) -> None:
        super().__init__()
        self.group_size, self.bits = group_size, bits
        self.act = act  # activations: see bz.quantized_matmul
        self.weight = zeros((output_dims, input_dims * bits // 32), dtype=dt.uint32)
        self.scales = zeros((output_dims, input_dims // group_size))
        self.biases = zeros((output_dims, input_dims // group_size))
        if bias:
            self.bias = zeros((output_dims,))
        self.freeze()  # packed weights are not trained (LoRALinear adapts them)

    @classmethod
    def from_linear(cls, linear: Linear, group_size: int = 32, bits: int = 4
                    ) -> QuantizedLinear:
        """Quantize a float :class:`Linear`."""
        out_dims, in_dims = linear.weight.shape
        q = cls(in_dims, out_dims, "bias" in vars(linear), group_size, bits)
        q.weight, q.scales, q.biases = quantize(linear.weight, group_size=group_size, bits=bits)
        if "bias" in vars(linear):
            q.bias = linear.bias
        return q

    def __call__(self, x: Any) -> Array:
        y = quantized_matmul(x, self.weight, self.scales, self.biases,
                             group_size=self.group_size, bits=self.bits,
                             act=getattr(self, "act", None))
        return y + self.bias if "bias" in vars(self) else y


def concat_linears(layers: Sequence[Module]) -> Module:
    """One layer computing ``concat([layer(x) for layer in layers], -1)`` with one matmul.

    All float :class:`Linear` or all :class:`QuantizedLinear` with the same bits and
    group size (packed rows are independent, so they stack as they are).

    >>> import braze as bz
    >>> a, b = bz.nn.Linear(4, 2), bz.nn.Linear(4, 3)
    >>> bz.nn.concat_linears([a, b])(bz.ones((1, 4))).shape
    (1, 5)
    """
    first = layers[0]
    names = ("weight", "scales", "biases") if isinstance(first, QuantizedLinear) else ("weight",)
    if any(type(m) is not type(first) for m in layers) or (
            isinstance(first, QuantizedLinear) and any(
                (m.bits, m.group_size) != (first.bits, first.group_size)
                for m in layers if isinstance(m, QuantizedLinear))):
        raise ValueError("concat_linears: layers must all be Linear, or all QuantizedLinear "
                         "with the same bits and group_size")
    has_bias = ["bias" in vars(m) for m in layers]
    if any(has_bias) and not all(has_bias):
        raise ValueError("concat_linears: either every layer has a bias or none has")
    out = copy.copy(first)
    out.__dict__ = dict(vars(first))
    for name in names + (("bias",) if all(has_bias) else ()):
        setattr(out, name, concat([getattr(m, name) for m in layers], axis=0))
    _eval(*[getattr(out, name) for name in names])
    return out


class Embedding(Module):
    """A lookup table (num_embeddings, dims); ``as_linear`` reuses it as a tied output layer.

    >>> import braze as bz
    >>> bz.nn.Embedding(10, 4)(bz.asarray([[1, 2]])).shape
    (1, 2, 4)
    """

    def __init__(self, num_embeddings: int, dims: int) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.weight = asarray(rng.normal(0, dims ** -0.5, (num_embeddings, dims))
                              .astype(np.float32), copy=False)

    def __call__(self, ids: Any) -> Array:
        ids = as_array(ids, "Embedding")
        return reshape(take(self.weight, reshape(ids, (-1,)), axis=0),
                       (*ids.shape, self.weight.shape[1]))

    def as_linear(self, x: Any) -> Array:
        """``x @ weight.T``: logits over the vocabulary for tied embeddings."""
        return matmul(x, self.weight.mT)


class QuantizedEmbedding(Module):
    """An :class:`Embedding` kept packed: rows are dequantized after the lookup.

    >>> import braze as bz
    >>> e = bz.nn.QuantizedEmbedding.from_embedding(bz.nn.Embedding(10, 32), bits=8)
    >>> e(bz.asarray([[3]])).shape, e.as_linear(bz.ones((1, 32))).shape
    ((1, 1, 32), (1, 10))
    """

    def __init__(self, num_embeddings: int, dims: int, group_size: int = 32,
                 bits: int = 4, act: str | None = None) -> None:
        super().__init__()
        self.group_size, self.bits = group_size, bits
        self.act = act  # activations of as_linear: see bz.quantized_matmul
        self.weight = zeros((num_embeddings, dims * bits // 32), dtype=dt.uint32)
        self.scales = zeros((num_embeddings, dims // group_size))
        self.biases = zeros((num_embeddings, dims // group_size))
        self.freeze()

    @classmethod
    def from_embedding(cls, emb: Embedding, group_size: int = 32, bits: int = 4
                       ) -> QuantizedEmbedding:
        """Quantize a float :class:`Embedding`."""
        n, d = emb.weight.shape
        q = cls(n, d, group_size, bits)
        q.weight, q.scales, q.biases = quantize(emb.weight, group_size=group_size, bits=bits)
        return q

    def __call__(self, ids: Any) -> Array:
        ids = as_array(ids, "QuantizedEmbedding")
        flat = reshape(ids, (-1,))
        rows = dequantize(take(self.weight, flat, axis=0), take(self.scales, flat, axis=0),
                          take(self.biases, flat, axis=0), group_size=self.group_size,
                          bits=self.bits)
        return reshape(rows, (*ids.shape, rows.shape[-1]))

    def as_linear(self, x: Any) -> Array:
        """``x @ dequantize(weight).T`` without unpacking the table."""
        return quantized_matmul(x, self.weight, self.scales, self.biases,
                                group_size=self.group_size, bits=self.bits,
                                act=getattr(self, "act", None))


class RMSNorm(Module):
    """Root-mean-square normalization over the last axis, with a learned scale.

    >>> import braze as bz
    >>> [round(v, 4) for v in bz.nn.RMSNorm(4)(bz.ones((1, 4))).tolist()[0]]
    [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, dims: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = asarray(np.ones(dims, np.float32), copy=False)

    def __call__(self, x: Any) -> Array:
        return fast.rms_norm(x, self.weight, self.eps)


class LayerNorm(Module):
    """Layer normalization over the last axis (``affine``: learned weight and bias).

    >>> import braze as bz
    >>> [round(v, 4) for v in bz.nn.LayerNorm(2)(bz.asarray([[1.0, 3.0]])).tolist()[0]]
    [-1.0, 1.0]
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True) -> None:
        super().__init__()
        self.eps = eps
        if affine:
            self.weight = asarray(np.ones(dims, np.float32), copy=False)
            self.bias = zeros((dims,))

    def __call__(self, x: Any) -> Array:
        v = vars(self)
        return fast.layer_norm(x, v.get("weight"), v.get("bias"), self.eps)


class RoPE(Module):
    """Rotary position embedding (``traditional``: interleaved pairs; else half-split).

    >>> import braze as bz
    >>> bz.nn.RoPE(4, base=10000.0)(bz.ones((1, 2, 4)), offset=3).shape
    (1, 2, 4)
    """

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000.0,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.dims, self.traditional, self.base, self.scale = dims, traditional, base, scale

    def __call__(self, x: Any, offset: Any = 0) -> Array:
        return fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                         scale=self.scale, offset=offset)


class Ragged(NamedTuple):
    """B sequences of different lengths as R packed rows (a batched pre-fill: no row of
    the projections and feed-forward spent on padding), and where each row sits in the
    padded (B, T) layout that attention reads. ``to_padded`` (B*T,) ints: the packed row
    of each padded position (any row at padding positions: past a sequence's last token,
    causal attention never reads them); ``to_packed`` (R,) ints: the padded position of
    each packed row (any position for filler rows past the last sequence's tokens).

    >>> import braze as bz
    >>> rows = bz.nn.Ragged(bz.asarray([0, 1, 2, 0]), bz.asarray([0, 1, 2]), 2, 2)
    >>> att = bz.nn.Attention(8, 2)  # sequences of 2 and 1 tokens, 3 packed rows
    >>> out, (k, v) = att(bz.ones((3, 8)), bz.asarray([0, 0]), ragged=rows)
    >>> out.shape, k.shape
    ((3, 8), (2, 2, 2, 4))
    """

    to_padded: Any
    to_packed: Any
    batch: int
    length: int

    def unpack(self, y: Array) -> Array:
        """Packed rows (R, F) -> padded (B, T, F)."""
        return reshape(take(y, self.to_padded, axis=0), (self.batch, self.length, y.shape[-1]))

    def pack(self, y: Array) -> Array:
        """Padded (B, T, F) -> packed rows (R, F)."""
        return take(reshape(y, (self.batch * self.length, y.shape[-1])), self.to_packed, axis=0)


class Attention(Module):
    """Multi-head / grouped-query self-attention with rotary positions and a KV cache.

    ``__call__(x, offset, past=None, past_index=None)`` takes x (B, T, dims) at positions
    ``offset .. offset+T-1`` (an int or a 0-d int array: a runtime input of a
    compiled step; or (B,) ints, one position per sequence: batched decoding) and
    optionally ``past = (keys, values)`` of shape (B, kv_heads, S, head_dim), of which
    the first ``offset`` positions are valid (the rest is unused capacity of a
    fixed-size cache); ``past_index`` (B,) picks the past's batch row of each sequence
    (a cache of fixed slots). It returns ``(out, (k_new, v_new))``: the caller appends
    the new keys/values to its cache. ``ragged`` (a :class:`Ragged`): x is (R, dims),
    packed rows of B sequences: the projections run on the R rows, attention on the
    padded (B, T) layout; out is (R, dims), the new keys/values padded (B, kv_heads, T,
    head_dim).

    >>> import braze as bz
    >>> att = bz.nn.Attention(16, 4, n_kv_heads=2)
    >>> out, (k, v) = att(bz.ones((1, 3, 16)), 0)
    >>> out.shape, k.shape
    ((1, 3, 16), (1, 2, 3, 4))
    """

    def __init__(self, dims: int, n_heads: int, n_kv_heads: int | None = None,
                 head_dim: int | None = None, bias: bool = False, rope_base: float = 10000.0,
                 rope_traditional: bool = False) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads or n_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"Attention: n_heads ({n_heads}) must be a multiple of "
                             f"n_kv_heads ({self.n_kv_heads})")
        self.head_dim = head_dim or dims // n_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = Linear(dims, n_heads * self.head_dim, bias)
        self.k_proj = Linear(dims, self.n_kv_heads * self.head_dim, bias)
        self.v_proj = Linear(dims, self.n_kv_heads * self.head_dim, bias)
        self.o_proj = Linear(n_heads * self.head_dim, dims, bias)
        self.rope = RoPE(self.head_dim, rope_traditional, rope_base)

    def fuse_qkv(self) -> Attention:
        """Replace q/k/v_proj by one ``qkv_proj`` (one matmul instead of three)."""
        self.qkv_proj = concat_linears([self.q_proj, self.k_proj, self.v_proj])
        del self.q_proj, self.k_proj, self.v_proj
        return self

    def __call__(self, x: Any, offset: Any = 0, past: tuple[Array, Array] | None = None,
                 past_index: Any = None, ragged: Ragged | None = None
                 ) -> tuple[Array, tuple[Array, Array]]:
        if ragged is not None:
            _check_ragged(as_array(x, "Attention"), ragged)
        unpack = ragged.unpack if ragged is not None else (lambda y: y)
        if "qkv_proj" in vars(self):
            dq, dk = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
            qkv = unpack(self.qkv_proj(x))
            q, k, v = qkv[..., :dq], qkv[..., dq:dq + dk], qkv[..., dq + dk:]
        else:
            q, k, v = unpack(self.q_proj(x)), unpack(self.k_proj(x)), unpack(self.v_proj(x))
        q = split_heads(q, self.n_heads)
        k, v = split_heads(k, self.n_kv_heads), split_heads(v, self.n_kv_heads)
        q, k = self.rope(q, offset), self.rope(k, offset)
        out = merge_heads(attend(q, k, v, self.scale, offset, past, past_index))
        return self.o_proj(ragged.pack(out) if ragged is not None else out), (k, v)


def _check_ragged(x: Array, ragged: Ragged) -> None:
    """A clear error at the call for packed rows that do not fit their :class:`Ragged`."""
    to_padded = as_array(ragged.to_padded, "Attention")
    to_packed = as_array(ragged.to_packed, "Attention")
    if x.ndim != 2:
        raise ValueError(f"Attention: ragged rows need x of shape (R, dims), got "
                         f"{tuple(x.shape)}")
    if to_padded.shape != (ragged.batch * ragged.length,) or to_packed.shape != (x.shape[0],):
        raise ValueError(f"Attention: ragged needs to_padded of shape ({ragged.batch} * "
                         f"{ragged.length},) and to_packed of shape ({x.shape[0]},) for x of "
                         f"shape {tuple(x.shape)}, got {tuple(to_padded.shape)} and "
                         f"{tuple(to_packed.shape)}")


def split_heads(y: Array, n: int) -> Array:
    """(B, T, n*D) -> (B, n, T, D)."""
    b, t, f = y.shape
    return permute_dims(reshape(y, (b, t, n, f // n)), (0, 2, 1, 3))


def merge_heads(y: Array) -> Array:
    """(B, n, T, D) -> (B, T, n*D)."""
    b, n, t, d = y.shape
    return reshape(permute_dims(y, (0, 2, 1, 3)), (b, t, n * d))


def attend(q: Array, k: Array, v: Array, scale: float, offset: Any,
           past: tuple[Array, Array] | None, past_index: Any = None) -> Array:
    """Causal attention of new queries over ``past`` (first ``offset`` rows valid, per
    sequence when ``offset`` is (B,); ``past_index``: the past row of each) + new keys.

    >>> import braze as bz
    >>> q = k = v = bz.ones((1, 2, 3, 4))
    >>> attend(q, k, v, 0.5, 0, None).shape
    (1, 2, 3, 4)
    """
    if past is None:
        return fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal")
    # the cached rows are read in place (no concatenation): one attention op
    return fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal", past=past,
                                             past_length=offset, past_index=past_index)




# ---------------------------------------------------------------- training
class Dropout(Module):
    """Zero each element with probability ``p`` in training mode, scaling the rest by
    ``1 / (1 - p)``; the identity after :meth:`Module.eval`. ``key`` (a
    ``bz.random.key``) makes the mask reproducible; a compiled step should pass one per
    call (the global random state is read when tracing, not at each replay).

    >>> import braze as bz
    >>> bz.nn.Dropout(0.5).eval()(bz.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)

    def __call__(self, x: Any, key: Any = None) -> Array:
        from .random import bernoulli

        x = as_array(x, "Dropout")
        if not self.training or self.p == 0:
            return x
        keep = bernoulli(1.0 - self.p, x.shape, key=key)
        return where(keep, x * (1.0 / (1.0 - self.p)), 0.0)


class LoRALinear(Module):
    """A frozen :class:`Linear` or :class:`QuantizedLinear` plus a trainable low-rank
    update: ``y = base(x) + scale * (x @ lora_a) @ lora_b`` (``lora_b`` starts at zero,
    so training starts from the base model). :meth:`fuse` merges the update into a plain
    Linear.

    >>> import braze as bz
    >>> lora = bz.nn.LoRALinear.from_base(bz.nn.Linear(4, 3), rank=2)
    >>> sorted(name for name, _ in bz.nn.names_from_tree(lora.trainable_parameters()))
    ['lora_a', 'lora_b']
    """

    def __init__(self, base: Module, rank: int = 8, scale: float = 20.0,
                 dropout: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(base, (Linear, QuantizedLinear)):
            raise TypeError(f"LoRALinear: base must be a Linear or QuantizedLinear, got "
                            f"{type(base).__name__}")
        if rank < 1:
            raise ValueError(f"LoRALinear: rank must be >= 1, got {rank}")
        out_dims, in_dims = _linear_dims(base)
        self.base = base.freeze()
        self.scale = float(scale)
        self.dropout = Dropout(dropout)
        bound = 1.0 / math.sqrt(in_dims)
        rng = np.random.default_rng(seed)
        self.lora_a = asarray(rng.uniform(-bound, bound, (in_dims, rank)).astype(np.float32),
                              copy=False)
        self.lora_b = zeros((rank, out_dims))

    @classmethod
    def from_base(cls, base: Module, rank: int = 8, scale: float = 20.0,
                  dropout: float = 0.0, seed: int = 0) -> LoRALinear:
        """Wrap ``base`` (see the class)."""
        return cls(base, rank, scale, dropout, seed)

    def __call__(self, x: Any) -> Array:
        x = as_array(x, "LoRALinear")
        y = self.base(x)
        z = matmul(matmul(self.dropout(x), self.lora_a.astype(x.dtype)),
                   self.lora_b.astype(x.dtype))
        return y + z * self.scale

    def fuse(self) -> Linear:
        """A plain Linear computing the same function (the adapter merged in)."""
        base = self.base
        out_dims, in_dims = _linear_dims(base)
        w: Array
        if isinstance(base, QuantizedLinear):
            w = dequantize(base.weight, base.scales, base.biases, group_size=base.group_size,
                           bits=base.bits)
        else:
            w = vars(base)["weight"]
        fused = Linear(in_dims, out_dims, bias="bias" in vars(base))
        fused.weight = w + (self.lora_a @ self.lora_b).mT * self.scale
        if "bias" in vars(base):
            fused.bias = vars(base)["bias"]
        _eval(*[p for _, p in fused.named_parameters()])
        return fused


def _linear_dims(layer: Module) -> tuple[int, int]:
    if isinstance(layer, QuantizedLinear):
        return layer.weight.shape[0], layer.weight.shape[1] * 32 // layer.bits
    out_dims, in_dims = vars(layer)["weight"].shape
    return out_dims, in_dims


def value_and_grad(model: Module, fn: Any) -> Any:
    """``fn(*args)`` and its gradient with respect to ``model``'s trainable parameters
    (a nested dict shaped like :meth:`Module.trainable_parameters`), MLX's
    ``nn.value_and_grad``. ``fn`` calls the model; it returns a scalar loss.

    >>> import braze as bz
    >>> lin = bz.nn.Linear(2, 1)
    >>> loss, grads = bz.nn.value_and_grad(lin, lambda x: bz.sum(lin(x)))(bz.ones((3, 2)))
    >>> grads["bias"].tolist(), grads["weight"].tolist()
    ([3.0], [[3.0, 3.0]])
    """
    def inner(params: Any, *args: Any, **kwargs: Any) -> Any:
        model.update(params)
        return fn(*args, **kwargs)

    vg = _value_and_grad(inner)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        params = model.trainable_parameters()
        try:
            return vg(params, *args, **kwargs)
        finally:
            model.update(params)  # the arrays it held (the traced stand-ins are gone)

    return wrapped


# the convolutional layers subclass Module (defined above)
from .conv_layers import (  # noqa: E402
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    BatchNorm,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    GroupNorm,
    InstanceNorm,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    Upsample,
)
