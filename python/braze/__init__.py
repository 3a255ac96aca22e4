"""braze: lazy NumPy-like arrays with a fusion compiler.

The package root only sets two thread-pool defaults and re-exports the public API of
:mod:`braze.arrays`; the subpackages live in the repository's top-level folders
(``arrays/``, ``graph/``, ``backends/``; ``csrc/`` builds ``braze._core``), mapped into
``braze`` by ``[tool.scikit-build.wheel.packages]`` in pyproject.toml.

>>> import braze as bz
>>> float(bz.sum(bz.ones((2, 3)) * 2))
12.0
"""

import os as _os

# Two thread pools share the cores: numpy's OpenBLAS and our kernels' OpenMP. By default
# each spins for a long time after its work (OpenBLAS ~0.1 s), starving the other: a
# 100-token LLM pre-fill ran 6x slower. Short spins keep back-to-back kernels fast and
# hand the cores over quickly (measured on 2 cores; override either variable to taste).
# OPENBLAS_THREAD_TIMEOUT only takes effect when braze is imported before numpy.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
_os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from braze import arrays, backends, graph  # noqa: E402
from braze._version import __version__ as __version__  # noqa: E402  (generated: pyproject)
from braze.arrays import *  # noqa: E402, F403
from braze.arrays import __all__ as _arrays_all  # noqa: E402
from braze.arrays import linalg, random  # noqa: E402

__all__ = [*_arrays_all, "arrays", "graph", "backends", "random", "linalg"]
