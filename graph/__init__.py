"""braze.graph: the IR, op declarations, dtypes and evaluation of pending graphs.

Knows nothing of the user API (``braze.arrays``) or of any backend.

>>> from braze.graph import OPS
>>> "add" in OPS
True
"""

from . import dtypes
from .evaluate import evaluate, topo_order
from .node import Node, constant
from .ops import OPS, OpDef, broadcast_shapes

__all__ = ["OPS", "Node", "OpDef", "broadcast_shapes", "constant", "dtypes", "evaluate",
           "topo_order"]
