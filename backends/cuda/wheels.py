"""Where NVIDIA's PyPI wheels put their shared libraries (``nvidia-cuda-nvrtc``,
``nvidia-cublas``...): the ``nvidia`` namespace package, ``cu13/lib`` in the CUDA 13
layout or ``<component>/lib`` in the CUDA 12 one.

>>> find("BRAZE_NO_SUCH_LIBRARY", ("cu*/lib/libnosuch.so.*",)) is None
True
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

__all__ = ["find"]


def find(env: str, patterns: Sequence[str], exclude: str = "") -> str | None:
    """The library path in ``$env``, else the newest match of ``patterns`` under the
    ``nvidia`` namespace package (basenames containing ``exclude`` skipped), else None."""
    path = os.environ.get(env)
    if path:
        return path
    try:
        import nvidia  # the namespace package of NVIDIA's wheels
    except ImportError:
        return None
    for root in list(getattr(nvidia, "__path__", [])):
        for pattern in patterns:
            hits = sorted(p for p in glob.glob(os.path.join(root, pattern))
                          if not exclude or exclude not in os.path.basename(p))
            if hits:
                return hits[-1]
    return None
