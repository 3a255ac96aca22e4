"""Hand-written kernel sources: real ``.h`` / ``.cc`` / ``.cu`` files shipped as package
data beside the modules that build them (``backends/cpu/kernels/``,
``backends/cuda/kernels/``, ``backends/emulator_kernels/``), read from the package's
folder (braze is installed as folders, never zipped: its native extension must be a
file; plain paths also spare ``import braze`` importlib.resources and zipfile).

A kernel is built from one translation unit handed to the compiler as text (on stdin, or
to NVRTC): :func:`source` returns the ``#define`` lines of its parameters, then the file
with every quoted include (``#include "x.h"``: a file of the same folder) replaced by that
file's text, recursively, each between ``#line`` markers so that compiler messages name the
real file and line. Include guards keep a header included twice from being defined twice;
the kernel cache key, a hash of this text, covers every header a kernel includes. The
parameters are macros the files document (and check with ``#error``) at their top: no
string replacement happens here.

>>> text = source("braze.backends.cpu", "kernels/concat.cc", {"BZ_SYMBOL": "bz_concat"})
>>> text.splitlines()[0]
'#define BZ_SYMBOL bz_concat'
>>> '#include "' in text
False
"""

from __future__ import annotations

import functools
import importlib
import os
import posixpath
import re
from collections.abc import Mapping

__all__ = ["read", "source"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$')
_MAX_DEPTH = 16


@functools.cache
def read(package: str, name: str) -> str:
    """The text of the file ``name`` (a path with ``/``) of ``package``'s data, as is.

    >>> read("braze.backends.cpu", "kernels/dispatch.h").count("bz_dispatch") > 0
    True
    """
    folder = os.path.dirname(importlib.import_module(package).__file__ or "")
    try:
        with open(os.path.join(folder, *name.split("/")), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise FileNotFoundError(f"kernel source {name!r} of {package} is missing from the "
                                f"installation ({e})") from None


def _label(package: str, name: str) -> str:
    return f"{package.replace('.', '/')}/{name}"


@functools.cache
def _inlined(package: str, name: str, lines: bool, depth: int = 0) -> str:
    if depth > _MAX_DEPTH:
        raise RecursionError(f"kernel source {name!r} of {package}: includes nest deeper "
                             f"than {_MAX_DEPTH} (a cycle?)")
    here = _label(package, name)
    out = [f'#line 1 "{here}"\n'] if lines else []
    for i, line in enumerate(read(package, name).splitlines()):
        m = _INCLUDE.match(line)
        if m is None:
            out.append(line + "\n")
            continue
        inc = posixpath.normpath(posixpath.join(posixpath.dirname(name), m.group(1)))
        out.append(_inlined(package, inc, lines, depth + 1))
        if lines:
            out.append(f'#line {i + 2} "{here}"\n')
    return "".join(out)


def source(package: str, name: str, defines: Mapping[str, object] | None = None,
           lines: bool = True) -> str:
    """One translation unit: ``#define NAME VALUE`` per item of ``defines`` (in order),
    then the file ``name`` of ``package`` with its quoted includes inlined; ``lines``:
    with ``#line`` markers (leave them out for text that more source follows)."""
    head = "".join(f"#define {k} {v}\n" for k, v in (defines or {}).items())
    return head + _inlined(package, name, lines)
