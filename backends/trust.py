"""Which cache directories braze may load code (and cached model data) from.

braze ``dlopen``s the kernels it finds in its cache directory and memory-maps the model
tensors it repacked there. A checksum beside each entry only detects corruption: whoever
can write the directory can write the checksum too. So, as ssh does for keys, a cache is
trusted only when it is *private*: the directory and each entry owned by the current
user and writable by no one else (group or others), and every directory above it owned
by this user or root and not writable by others -- unless sticky, as ``/tmp`` is, where
others cannot rename or replace what they do not own. Entries must be regular files
(not symbolic links, which could point anywhere).

Elsewhere (Windows: no owners to compare) every path is trusted.

>>> import tempfile
>>> d = tempfile.mkdtemp()  # mode 0700, owned by this user
>>> problem(d) is None
True
>>> os.chmod(d, 0o777)
>>> "writable by others" in problem(d)
True
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["entry_problem", "problem"]


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def _loose(st: os.stat_result, path: Path, what: str, uid: int, ancestor: bool) -> str | None:
    """Why a stat result is not private enough, or None."""
    if st.st_uid != uid and not (ancestor and st.st_uid == 0):
        return f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    sticky = ancestor and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & 0o022 and not sticky:
        who = "others" if st.st_mode & 0o002 else "its group"
        return f"{what} {path} is writable by {who} (mode {oct(st.st_mode & 0o7777)})"
    return None


def problem(directory: str | os.PathLike[str]) -> str | None:
    """Why ``directory`` (which must exist) is not a private cache directory, or None.

    >>> problem("/") is None or "owned" in problem("/")  # root's: not this user's
    True
    """
    uid = _uid()
    if uid is None:
        return None
    path = Path(directory).resolve()
    try:
        st = path.stat()
        if not stat.S_ISDIR(st.st_mode):
            return f"{path} is not a directory"
        if why := _loose(st, path, "the cache directory", uid, ancestor=False):
            return why
        for parent in path.parents:
            if why := _loose(parent.stat(), parent, "its parent directory", uid,
                             ancestor=True):
                return why
    except OSError as e:
        return f"{path} cannot be inspected ({e})"
    return None


def entry_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the cache entry ``path`` must not be loaded, or None (a missing entry has no
    problem: it is built).

    >>> entry_problem("/no/such/entry") is None
    True
    """
    uid = _uid()
    if uid is None:
        return None
    p = Path(path)
    try:
        st = p.lstat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"the cache entry {p} cannot be inspected ({e})"
    if not stat.S_ISREG(st.st_mode):
        return f"the cache entry {p} is not a regular file"
    return _loose(st, p, "the cache entry", uid, ancestor=False)
