"""Loading and saving arrays: GGUF, safetensors and npz files.

``bz.load`` reads a whole file into a ``{name: Array}`` dict. GGUF files are read
with the ``gguf`` package (memory-mapped); their Q4_0, Q4_1 and Q8_0 tensors stay
quantized: ``name`` holds the packed uint32 codes and ``<stem>.scales`` /
``<stem>.biases`` the per-group affine parameters (``<stem>`` is ``name`` without a
trailing ``.weight``), in :mod:`braze.arrays.quantized`'s layout (groups of 32),
and ``metadata["quantization"][name]`` gives ``{"bits", "group_size"}``. With
``dequantize=True`` every tensor is float32 instead. Safetensors files are read
with ``safetensors``; ``bz.save`` writes safetensors or npz.

>>> import braze as bz, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
>>> bz.save(path, {"w": bz.ones((2, 3))})
>>> bz.load(path)["w"].shape
(2, 3)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..backends import trust
from ..graph import dtypes as dt
from .array import Array
from .creation import asarray
from .quantized import pack

__all__ = ["load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt",
           "fromfile"]

GGUF_MAGIC = b"GGUF"
PROGRESS_BYTES = 64 << 20  # show a progress bar for files larger than this
QK = 32  # elements per GGUF quantization block
BF16_SUFFIX = ".__bfloat16__"


def load(path: str | os.PathLike[str], /, *, return_metadata: bool = False,
         dequantize: bool = False) -> Any:
    """Load every tensor of a ``.gguf``, ``.safetensors`` or ``.npz`` file, or the one
    array of a ``.npy`` file.

    Returns ``{name: Array}`` (an Array for ``.npy``), or ``(arrays, metadata)`` with
    ``return_metadata``
    (GGUF key/values plus ``"quantization"``; safetensors' string metadata).

    >>> import braze as bz, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
    >>> bz.save(path, {"a": bz.arange(3)})
    >>> bz.load(path)["a"].tolist()
    [0, 1, 2]
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: {path}: no such file")
    if os.path.isdir(path):
        raise IsADirectoryError(f"load: {path}: is a directory, not a model file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] == GGUF_MAGIC or path.endswith(".gguf"):
        arrays, meta = _load_gguf_cached(path, head, dequantize)
    elif path.endswith(".safetensors"):
        arrays, meta = _load_safetensors(path)
    elif path.endswith(".npy") or head[:6] == b"\x93NUMPY":
        with _numpy_errors(path, "npy"):
            with open(path, "rb") as f:
                _check_npy_header(f, os.path.getsize(path), path)
            data = np.load(path, allow_pickle=False)
        x = asarray(data, copy=False)  # np.load made it: braze holds the only reference
        return (x, {}) if return_metadata else x
    elif path.endswith(".npz") or head[:2] == b"PK":
        arrays, meta = {}, {}
        with _numpy_errors(path, "npz"):
            with np.load(path, allow_pickle=False) as z:
                _check_npz(z.zip, path)
                for k in z.files:  # bfloat16 is stored as its uint16 bits (npz has none)
                    if k.endswith(BF16_SUFFIX):
                        arrays[k[:-len(BF16_SUFFIX)]] = asarray(z[k].view(dt.bfloat16),
                                                                copy=False)
                    else:
                        arrays[k] = asarray(z[k], copy=False)
    else:
        raise ValueError(f"load: {path}: unknown format (expected .gguf, .safetensors, .npz or "
                         ".npy)")
    return (arrays, meta) if return_metadata else arrays


def save(path: str | os.PathLike[str], arrays: Any, /, *,
         metadata: Mapping[str, str] | None = None) -> None:
    """Save ``{name: array}`` as ``.safetensors`` (optional string metadata) or ``.npz``;
    one array as ``.npy`` (NumPy's ``np.save``; a path without a suffix gets ``.npy``) or
    as ``.npz`` (stored as ``arr_0``).

    >>> import braze as bz, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> bz.save(os.path.join(d, "x.npz"), {"x": bz.zeros(2)})
    >>> bz.save(os.path.join(d, "y"), bz.arange(3)); bz.load(os.path.join(d, "y.npy")).tolist()
    [0, 1, 2]
    """
    path = os.fspath(path)
    if not isinstance(arrays, Mapping):
        if isinstance(arrays, (str, bytes)) or arrays is None:
            raise TypeError(f"save: expected an array or a {{name: array}} mapping, got "
                            f"{type(arrays).__name__}")
        if path.endswith(".npz"):
            arrays = {"arr_0": arrays}
        elif path.endswith((".safetensors", ".gguf")):
            raise TypeError(f"save: {path}: a {{name: array}} mapping is needed for this format")
        else:
            if metadata:
                raise ValueError("save: .npy files cannot hold metadata; use .safetensors")
            v = np.asarray(np.asarray(arrays), order="C")
            if v.dtype == dt.bfloat16:
                raise TypeError("save: .npy has no bfloat16; use .safetensors or .npz")
            np.save(path if path.endswith(".npy") else path + ".npy", v, allow_pickle=False)
            return
    data = {k: np.asarray(np.asarray(v), order="C") for k, v in arrays.items()}
    if path.endswith(".safetensors"):
        save_file = _require("safetensors.numpy", "save").save_file
        save_file(data, path, metadata=dict(metadata) if metadata else None)
    elif path.endswith(".npz"):
        if metadata:
            raise ValueError("save: .npz files cannot hold metadata; use .safetensors")
        np.savez(path, **_npz_entries(data))
    else:
        raise ValueError(f"save: {path}: unknown format (expected .safetensors or .npz)")


def savez(file: str | os.PathLike[str], *args: Any, **kwds: Any) -> None:
    """Several arrays in one uncompressed ``.npz`` (positional ones as ``arr_0``...).

    >>> import braze as bz, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npz"); bz.savez(p, bz.ones(1), b=bz.zeros(1))
    >>> sorted(bz.load(p))
    ['arr_0', 'b']
    """
    _savez(file, args, kwds, "savez")


def savez_compressed(file: str | os.PathLike[str], *args: Any, **kwds: Any) -> None:
    """:func:`savez`, compressed.

    >>> import braze as bz, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npz"); bz.savez_compressed(p, w=bz.ones(3))
    >>> bz.load(p)["w"].tolist()
    [1.0, 1.0, 1.0]
    """
    _savez(file, args, kwds, "savez_compressed")


def _npz_entries(arrays: dict[str, Any]) -> dict[str, Any]:
    """``{name: array}`` as an .npz holds it: C order; bfloat16 (which numpy cannot
    store) as its uint16 bits under ``name + BF16_SUFFIX``."""
    out = {}
    for k, v in arrays.items():
        a = np.asarray(np.asarray(v), order="C")
        if a.dtype == dt.bfloat16:
            k, a = k + BF16_SUFFIX, a.view(np.uint16)
        out[k] = a
    return out


def _savez(file: Any, args: tuple[Any, ...], kwds: dict[str, Any], name: str) -> None:
    named = {f"arr_{i}": a for i, a in enumerate(args)}
    for k, v in kwds.items():
        if k in named:
            raise ValueError(f"{name}: cannot use the name {k!r} twice")
        named[k] = v
    getattr(np, name)(os.fspath(file), **_npz_entries(named))


def loadtxt(fname: Any, dtype: Any = float, **kwargs: Any) -> Array:
    """An array from a text file (numpy's ``loadtxt`` and its options; float32 by
    default, braze's default float).

    >>> import braze as bz, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.txt"); _ = open(p, "w").write("1 2\\n3 4\\n")
    >>> bz.loadtxt(p).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    d = dt.DEFAULT_FLOAT if dtype is float else dt.to_dtype(dtype, "loadtxt")
    return asarray(np.loadtxt(fname, dtype=d, **kwargs), copy=False)


def genfromtxt(fname: Any, dtype: Any = float, **kwargs: Any) -> Array:
    """An array from a text file with missing values (numpy's ``genfromtxt``; missing
    entries are NaN; float32 by default).

    >>> import braze as bz, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv"); _ = open(p, "w").write("1,\\n3,4\\n")
    >>> bz.genfromtxt(p, delimiter=",").tolist()
    [[1.0, nan], [3.0, 4.0]]
    """
    d = dt.DEFAULT_FLOAT if dtype is float else dt.to_dtype(dtype, "genfromtxt")
    return asarray(np.genfromtxt(fname, dtype=d, **kwargs), copy=False)


def savetxt(fname: Any, X: Any, **kwargs: Any) -> None:
    """Write a 1-d or 2-d array to a text file (numpy's ``savetxt`` and its options).

    >>> import braze as bz, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.txt"); bz.savetxt(p, bz.eye(2), fmt="%d")
    >>> open(p).read()
    '1 0\\n0 1\\n'
    """
    np.savetxt(fname, np.asarray(X), **kwargs)


def fromfile(file: Any, dtype: Any = float, count: int = -1, sep: str = "",
             offset: int = 0) -> Array:
    """A 1-d array read from a raw binary (or ``sep``-separated text) file.

    >>> import braze as bz, tempfile, os, numpy as np
    >>> p = os.path.join(tempfile.mkdtemp(), "r.bin"); np.arange(3, dtype=np.int32).tofile(p)
    >>> bz.fromfile(p, dtype=bz.int32).tolist()
    [0, 1, 2]
    """
    d = np.float64 if dtype is float else dt.to_dtype(dtype, "fromfile")
    return asarray(np.fromfile(file, dtype=d, count=count, sep=sep, offset=offset),
                   copy=False)


# ---------------------------------------------------------------- safetensors
@contextlib.contextmanager
def _numpy_errors(path: str, kind: str) -> Iterator[None]:
    """numpy's and zipfile's many exception types on a malformed file, as one ValueError
    naming the file."""
    import tokenize
    import zipfile
    import zlib

    try:
        yield
    except _BadFile:
        raise
    except (ValueError, OSError, EOFError, KeyError, SyntaxError, tokenize.TokenError,
            zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, NotImplementedError,
            OverflowError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise _BadFile(f"load: {path}: not a readable {kind} file ({type(e).__name__}: "
                       f"{e})") from None


class _BadFile(ValueError):
    """A model file that does not hold what it claims (its message names the file)."""


def _check_npy_header(f: Any, size: int, where: str) -> None:
    """Read an .npy header from ``f`` (``size`` bytes in all) and refuse what np.load
    would trust: Python objects (pickles) and a shape whose data is not there -- before
    anything is allocated for it."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(f)
    else:
        raise _BadFile(f"load: {where}: npy format version {version} is not supported")
    if dtype.hasobject:
        raise _BadFile(f"load: {where}: holds Python objects (dtype {dtype}), which could "
                       "run code when unpickled: refused")
    count = 1
    for d in shape:
        count *= int(d)
    need, have = count * dtype.itemsize, size - f.tell()
    if need > have:
        raise _BadFile(f"load: {where}: the header claims shape {tuple(shape)} of {dtype} "
                       f"({need} bytes) but only {have} bytes follow it")


# A compressed .npz member may expand at most this much (a zip bomb's ratio is ~1000x and
# more): numpy would otherwise allocate what its header claims from a tiny file.
MAX_EXPANSION = 1024
MAX_EXPANDED_FLOOR = 64 << 20  # members up to this size are never refused for their ratio


def _check_npz(z: Any, path: str) -> None:
    """Every member of an .npz (its open ``zipfile.ZipFile``) checked as
    :func:`_check_npy_header` does, against the member's own size, before numpy reads
    any; a compressed member may expand at most ``MAX_EXPANSION`` times (above
    ``MAX_EXPANDED_FLOOR``)."""
    for info in z.infolist():
        if info.file_size > max(MAX_EXPANDED_FLOOR, MAX_EXPANSION * info.compress_size):
            raise ValueError(f"load: {path}[{info.filename}]: a member of {info.compress_size} "
                             f"compressed bytes claims {info.file_size} bytes uncompressed "
                             f"(more than {MAX_EXPANSION}x: refused as a zip bomb)")
        with z.open(info) as f:
            _check_npy_header(f, info.file_size, f"{path}[{info.filename}]")


def _load_safetensors(path: str) -> tuple[dict[str, Array], dict[str, Any]]:
    st = _require("safetensors", "load")
    SafetensorError, safe_open = st.SafetensorError, st.safe_open  # noqa: N806

    try:
        with safe_open(path, framework="numpy") as f:
            meta = dict(f.metadata() or {})
            arrays = {k: asarray(f.get_tensor(k), copy=False)
                      for k in _progress(list(f.keys()), path)}
    except (SafetensorError, OSError) as e:
        raise ValueError(f"load: {path}: not a readable safetensors file: {e}") from None
    return arrays, meta


# ---------------------------------------------------------------- gguf
MODEL_CACHE_VERSION = 2  # 2: each tensor's file size and CRC-32 in the index


def _model_cache_dir(path: str) -> str | None:
    """Where the repacked tensors of a GGUF file are kept (None: caching is off)."""
    if os.environ.get("BRAZE_MODEL_CACHE", "1") == "0":
        return None
    import hashlib

    st = os.stat(path)
    key = f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}:{MODEL_CACHE_VERSION}"
    root = os.environ.get("BRAZE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "braze")
    models = os.path.join(root, "models")
    try:
        os.makedirs(models, mode=0o700, exist_ok=True)
    except OSError as e:
        _warn_model_cache(f"cannot write the model cache at {models} ({e}); this model's "
                          "repacked tensors are not cached")
        return None
    why = trust.problem(models)
    if why is not None:  # others could swap the tensors a model is read from
        _warn_model_cache(f"the model cache is not private ({why}); models are not cached")
        return None
    return os.path.join(models, hashlib.sha1(key.encode()).hexdigest()[:20])


def _load_gguf_cached(path: str, head: bytes, dequantize: bool
                      ) -> tuple[dict[str, Array], dict[str, Any]]:
    """GGUF with packed weights, memory-mapped from a cache of the repacked tensors after
    the first load (parsing the file's metadata and repacking take seconds; the cache
    is keyed by path, size and mtime, and written atomically)."""
    where = None if dequantize or head[:4] != GGUF_MAGIC else _model_cache_dir(path)
    if where is not None and os.path.lexists(where):
        try:
            return _read_model_cache(where)
        except (OSError, ValueError, KeyError, TypeError) as e:
            # damaged (truncated, corrupt, half-deleted): rebuilt below, never trusted
            _warn_model_cache(f"the model cache entry {where} is damaged ({e}); rebuilding it")
            import shutil

            shutil.rmtree(where, ignore_errors=True)
            if os.path.lexists(where):
                try:
                    os.remove(where)
                except OSError:
                    pass
    arrays, meta = _load_gguf(path, head, dequantize)
    if where is not None:
        try:
            _write_model_cache(where, arrays, meta)
        except (OSError, TypeError, ValueError) as e:
            # caching is an optimization: this load is simply not cached
            _warn_model_cache(f"cannot write the model cache at {where} ({e}); "
                              "this model's repacked tensors are not cached")
    return arrays, meta


def _warn_model_cache(message: str) -> None:
    import warnings

    warnings.warn(f"braze.load: {message}", RuntimeWarning, stacklevel=4)


def _file_crc(path: str) -> tuple[int, int]:
    """(size, CRC-32) of a file: what the model cache checks before trusting an entry
    (integrity against truncation and corruption; the cache directory is the user's own)."""
    import mmap
    import zlib

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return 0, 0
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return size, zlib.crc32(m)


def _write_model_cache(where: str, arrays: dict[str, Array], meta: dict[str, Any]) -> None:
    import json
    import shutil
    import tempfile

    os.makedirs(os.path.dirname(where), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(where), prefix=".tmp-")
    try:
        index = {}
        for i, (name, a) in enumerate(arrays.items()):
            data = np.asarray(a)
            kind = dt.name(data.dtype)
            if data.dtype == dt.bfloat16:
                data = data.view(np.uint16)
            np.save(os.path.join(tmp, f"{i}.npy"), data)
            index[name] = [f"{i}.npy", kind, *_file_crc(os.path.join(tmp, f"{i}.npy"))]
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f)
        with open(os.path.join(tmp, "index.json"), "w") as f:  # last: marks it complete
            json.dump(index, f)
        try:
            os.rename(tmp, where)
        except OSError:  # another process won the race: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_model_cache(where: str) -> tuple[dict[str, Array], dict[str, Any]]:
    import json

    with open(os.path.join(where, "index.json")) as f:
        index = json.load(f)
    with open(os.path.join(where, "meta.json")) as f:
        meta = json.load(f)
    arrays = {}
    for name, (file, kind, size, crc) in index.items():
        if _file_crc(os.path.join(where, file)) != (size, crc):
            raise ValueError(f"{file} (tensor {name}) does not match its size and CRC-32")
        data = np.load(os.path.join(where, file), mmap_mode="r", allow_pickle=False)
        if kind == "bfloat16":
            data = data.view(dt.bfloat16)
        arrays[name] = asarray(data)
    return arrays, meta


def _check_gguf_counts(path: str) -> None:
    """The header's tensor and key/value counts against what the file can hold (a
    tensor's record takes at least 24 bytes, a key/value's 12), before the reader sizes
    anything by them."""
    import struct

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24:
        raise ValueError(f"load: {path}: truncated GGUF file: {size} bytes, shorter than its "
                         "24-byte header")
    version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3):
        raise ValueError(f"load: {path}: GGUF version {version} is not supported (2 or 3)")
    for field, count, least in (("tensor_count", n_tensors, 24), ("kv_count", n_kv, 12)):
        if count * least > size:
            raise ValueError(f"load: {path}: corrupt GGUF header: {field} is {count}, more "
                             f"than a {size}-byte file can hold")


def _gguf_index(path: str) -> tuple[dict[str, Any], list[Any]]:
    """A GGUF file's key/values and tensor records (memory-mapped, nothing read into
    memory yet), every count, offset and size checked against the file: ValueError
    naming the file otherwise."""
    gguf = _require("gguf", "load")
    _check_gguf_counts(path)
    try:
        reader = gguf.GGUFReader(path)
        meta: dict[str, Any] = {k: _field_value(f) for k, f in reader.fields.items()
                                if not k.startswith("GGUF.")}
        tensors = list(reader.tensors)
    except Exception as e:  # gguf raises ValueError/IndexError/struct.error on bad files
        raise ValueError(f"load: {path}: truncated or corrupt GGUF file ({type(e).__name__}: "
                         f"{e})") from None
    size = os.path.getsize(path)
    for t in tensors:
        if t.data_offset + t.n_bytes > size:
            raise ValueError(f"load: {path}: truncated GGUF file: tensor {t.name!r} needs bytes "
                             f"up to {t.data_offset + t.n_bytes}, the file has {size}")
    return meta, tensors


def _load_gguf(path: str, head: bytes, dequantize: bool
               ) -> tuple[dict[str, Array], dict[str, Any]]:
    if head[:4] != GGUF_MAGIC:
        raise ValueError(f"load: {path}: not a GGUF file (starts with {head[:4]!r}, "
                         f"expected {GGUF_MAGIC!r})")
    gguf = _require("gguf", "load")
    meta, tensors = _gguf_index(path)
    size = os.path.getsize(path)
    arrays: dict[str, Array] = {}
    quant: dict[str, dict[str, int]] = {}
    for t in _progress(tensors, path, size):
        kind = gguf.GGMLQuantizationType(t.tensor_type)
        shape = tuple(int(d) for d in reversed(t.shape))  # GGUF lists the fastest axis first
        if kind.name in _FLOAT_TYPES:
            arrays[t.name] = asarray(np.asarray(t.data).view(_FLOAT_TYPES[kind.name])
                                     .reshape(shape), copy=False)  # the file's mmap
        elif kind.name in _QUANT_REPACK and not dequantize:
            wq, scales, biases, bits = _QUANT_REPACK[kind.name](np.asarray(t.data), shape)
            stem = t.name[:-len(".weight")] if t.name.endswith(".weight") else t.name
            arrays[t.name] = asarray(wq, copy=False)
            arrays[stem + ".scales"] = asarray(scales, copy=False)
            arrays[stem + ".biases"] = asarray(biases, copy=False)
            quant[t.name] = {"bits": bits, "group_size": QK}
        elif dequantize:
            try:
                w = gguf.quants.dequantize(np.asarray(t.data), kind)
            except NotImplementedError:
                raise ValueError(f"load: {path}: tensor {t.name!r} has quantization type "
                                 f"{kind.name}, which gguf cannot dequantize") from None
            arrays[t.name] = asarray(np.asarray(w, np.float32).reshape(shape), copy=False)
        else:
            raise ValueError(
                f"load: {path}: tensor {t.name!r} has quantization type {kind.name}; braze "
                f"keeps {', '.join(sorted(_QUANT_REPACK))} packed and loads other types only "
                "dequantized (pass dequantize=True)")
    meta["quantization"] = quant
    return arrays, meta


_FLOAT_TYPES: dict[str, np.dtype] = {
    "F32": np.dtype(np.float32), "F16": np.dtype(np.float16), "BF16": dt.bfloat16,
    "F64": np.dtype(np.float64), "I8": np.dtype(np.int8), "I16": np.dtype(np.int16),
    "I32": np.dtype(np.int32), "I64": np.dtype(np.int64)}


def _blocks(raw: np.ndarray, shape: tuple[int, ...], block_bytes: int) -> np.ndarray:
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if len(shape) != 2 or shape[-1] % QK:
        raise ValueError(f"quantized tensors must be 2-d with rows a multiple of {QK}; got "
                         f"shape {shape}")
    return raw.reshape(rows, shape[-1] // QK, block_bytes)


def _repack(raw: np.ndarray, shape: tuple[int, ...], block_bytes: int, bits: int,
            decode: Any) -> tuple[Any, ...]:
    """Repack GGUF blocks into (packed codes, scales, biases), a few thousand rows at a
    time so the temporaries stay small next to the model."""
    b = _blocks(raw, shape, block_bytes)
    rows, cols = shape
    wq = np.empty((rows, cols * bits // 32), np.uint32)
    scales = np.empty((rows, cols // QK), np.float16)
    biases = np.empty_like(scales)
    step = max(1, (1 << 20) // cols)
    for lo in range(0, rows, step):
        chunk = b[lo:lo + step]
        d = chunk[..., 0:2].copy().view(np.float16)[..., 0]
        codes, bias = decode(chunk, d)
        wq[lo:lo + step] = pack(codes.reshape(len(chunk), cols), bits)
        scales[lo:lo + step], biases[lo:lo + step] = d, bias
    return wq, scales, biases, bits


def _nibbles(qs: np.ndarray) -> np.ndarray:
    # byte i of a 16-byte block holds element i (low nibble) and element i + 16
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _q4_1(raw: np.ndarray, shape: tuple[int, ...]) -> tuple[Any, ...]:
    # block: f16 d, f16 m, 16 bytes of codes; value = d * code + m
    return _repack(raw, shape, 20, 4, lambda c, d: (
        _nibbles(c[..., 4:20]), c[..., 2:4].copy().view(np.float16)[..., 0]))


def _q4_0(raw: np.ndarray, shape: tuple[int, ...]) -> tuple[Any, ...]:
    # block: f16 d, 16 bytes of codes; value = d * (code - 8)
    return _repack(raw, shape, 18, 4, lambda c, d: (
        _nibbles(c[..., 2:18]), (d.astype(np.float32) * -8).astype(np.float16)))


def _q8_0(raw: np.ndarray, shape: tuple[int, ...]) -> tuple[Any, ...]:
    # block: f16 d, 32 int8; value = d * q = d * (q + 128) - 128 d (exact in float16)
    return _repack(raw, shape, 34, 8, lambda c, d: (
        c[..., 2:34] ^ np.uint8(0x80), (d.astype(np.float32) * -128).astype(np.float16)))


_QUANT_REPACK = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q8_0": _q8_0}


def _require(module: str, op: str) -> Any:
    """Import an optional dependency, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{op}: needs the '{module.split('.')[0]}' package: "
                          "pip install 'braze[llm]'") from None


def _field_value(field: Any) -> Any:
    v = field.contents()
    return v.tolist() if isinstance(v, np.ndarray) else v


def _progress(items: list[Any], path: str, size: int | None = None) -> Any:
    size = os.path.getsize(path) if size is None else size
    if size < PROGRESS_BYTES:
        return items
    tqdm = _require("tqdm", "load").tqdm
    return tqdm(items, desc=f"loading {os.path.basename(path)}", unit="tensor", leave=False,
                disable=None)
