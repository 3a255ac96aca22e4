"""conv_pool (level 2): a max pool of a convolution's result becomes the convolution's last
step (``conv_fused`` with ``attrs['pool']``), which a backend may run as one pass that pools
each line of the convolution's output while it is still in cache: the convolution's whole
result (a network's stem: 111 x 111 x 64 floats in SqueezeNet, 3 MiB) is never written to
memory and read back. oneDNN fuses a pooling into a convolution's output the same way.

Rule, on ``max_pool(c)``:

* ``c`` a ``conv`` or ``conv_fused`` with two spatial dims, no residual, no pool yet, whose
  only consumer is the pool (not a graph output);
* float32 or float64 (as ``conv_epilogue``).

Runs after ``conv_epilogue`` (the pool follows the bias and activation) and ``conv_concat``
(a pooled convolution is never a concatenation's branch). ``bz.explain`` counts what fired.

>>> import braze as bz
>>> x, w = bz.ones((1, 9, 9, 3)), bz.ones((8, 3, 3, 3))
>>> f = lambda x: bz.nn.max_pool(bz.maximum(bz.conv2d(x, w), 0.0), (3, 3), 2)
>>> [k.name for k in bz.explain(f, x).kernels]
['conv_fused']
"""

from __future__ import annotations

from collections import Counter

from .. import dtypes as dt
from ..ir import GNode, Graph
from .conv_epilogue import fused_attrs
from .registry import Pass, fused_summary, rebuild, register

NAME = "conv_pool"
_CONV = ("conv", "conv_fused")
_FLOATS = (dt.float32, dt.float64)


def _pooled(g: Graph, n: GNode, uses: list[int]) -> GNode | None:
    """The convolution ``n`` max-pools, or None (no rule)."""
    if n.op != "max_pool" or n.dtype not in _FLOATS:
        return None
    c = g.nodes[n.inputs[0]]
    if c.op not in _CONV or c.dtype != n.dtype or len(c.shape) != 4 or \
            uses[n.inputs[0]] != 1 or c.attrs.get("residual") or c.attrs.get("pool"):
        return None
    return c


def conv_pool(g: Graph, changes: Counter[str] | None = None) -> Graph:
    """``g`` with max pools of convolutions folded into them (the replaced nodes stay: see
    ``dce``)."""
    uses = g.live_uses()

    def replace(n: GNode, remap: list[int]) -> GNode | None:
        c = _pooled(g, n, uses)
        if c is None:
            return None
        own = c.inputs if c.op == "conv_fused" else c.inputs[:2]
        if changes is not None:
            changes["max pool of a convolution"] += 1
        return GNode("conv_fused", tuple(remap[j] for j in own),
                     {**fused_attrs(c), "pool": tuple(sorted(n.attrs.items()))}, n.shape,
                     n.dtype)

    return rebuild(g, replace)


PASS = register(Pass(NAME, 2, 126, "a convolution's max pool as its last step", run=conv_pool,
                     summary=fused_summary("no pools of convolutions")))
