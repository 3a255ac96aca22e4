"""Reading an ONNX model and its external data, confined to the model's directory.

:func:`load_model_proto` takes a path, bytes or a ``ModelProto`` and returns a
``ModelProto`` whose tensors all hold their data. A tensor stored outside the model
(``data_location: EXTERNAL``) names a file in its ``location`` field; a model is
untrusted input, so that name is honoured only when it stays inside the model's
directory: absolute paths, ``..`` components and symlinks that resolve outside are
refused with a ``ValueError`` naming the tensor, the field and the file, and
``offset``/``length`` are checked against the file's size before anything is read.
onnx's own ``load_external_data_for_model`` is not used: it would read first.

>>> import numpy as np, onnx, tempfile, os
>>> from onnx import helper, numpy_helper
>>> from braze.arrays.onnx.external import load_model_proto
>>> d = tempfile.mkdtemp()
>>> t = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
>>> with open(os.path.join(d, "w.bin"), "wb") as f:
...     _ = f.write(t.raw_data)
>>> t.ClearField("raw_data"); t.data_location = onnx.TensorProto.EXTERNAL
>>> _ = t.external_data.add(key="location", value="w.bin")
>>> g = helper.make_graph([], "g", [], [helper.make_tensor_value_info(
...     "w", onnx.TensorProto.FLOAT, [4])], [t])
>>> onnx.save(helper.make_model(g), os.path.join(d, "m.onnx"))
>>> m = load_model_proto(os.path.join(d, "m.onnx"))
>>> numpy_helper.to_array(m.graph.initializer[0]).tolist()
[0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any


def load_model_proto(model: Any) -> Any:
    """A ``ModelProto`` from a path, bytes or a ``ModelProto``, external data resolved."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        resolve_external_data(model, None)
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        proto = onnx.load_model_from_string(bytes(model))
        resolve_external_data(proto, None)
        return proto
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"bz.onnx.load: no model file {path!r}")
        proto = onnx.load(path, load_external_data=False)
        resolve_external_data(proto, os.path.dirname(os.path.abspath(path)))
        return proto
    raise TypeError(f"bz.onnx.load: expected a path, bytes or an onnx.ModelProto, "
                    f"got {type(model).__name__}")


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a graph: initializers, node attributes, subgraphs."""
    import onnx

    yield from graph.initializer
    for sp in graph.sparse_initializer:
        yield sp.values
        yield sp.indices
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            elif a.type == onnx.AttributeProto.TENSORS:
                yield from a.tensors
            elif a.type == onnx.AttributeProto.GRAPH:
                yield from _tensors(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _tensors(g)


def resolve_external_data(model: Any, base_dir: str | None) -> None:
    """Read every external tensor's bytes into it, from files inside ``base_dir`` only."""
    import onnx

    tensors = list(_tensors(model.graph))
    for f in model.functions:
        for node in f.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    tensors.append(a.t)
    for t in tensors:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        if base_dir is None:
            raise ValueError(f"bz.onnx.load: tensor {t.name!r} keeps its data in an external "
                             f"file ({info.get('location')!r}); load the model from its path "
                             "so that the file can be found beside it")
        t.raw_data = read_external(base_dir, t.name, info)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def safe_path(base_dir: str, location: str, tensor: str) -> str:
    """The file ``location`` names, inside ``base_dir``; ValueError otherwise."""
    where = f"tensor {tensor!r}: external_data field 'location' = {location!r}"
    if not location:
        raise ValueError(f"bz.onnx.load: {where} is empty")
    if "\0" in location:
        raise ValueError(f"bz.onnx.load: {where} holds a NUL byte")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (
            len(location) > 1 and location[1] == ":"):
        raise ValueError(f"bz.onnx.load: {where} is an absolute path; external data must "
                         "be inside the model's directory")
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        raise ValueError(f"bz.onnx.load: {where} has a '..' component; external data must "
                         "be inside the model's directory")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, path]) != root:
        raise ValueError(f"bz.onnx.load: {where} resolves to {path!r}, outside the model's "
                         f"directory {root!r} (a symlink?)")
    if not os.path.isfile(path):
        raise ValueError(f"bz.onnx.load: {where}: no such file in the model's directory")
    return path


def read_external(base_dir: str, tensor: str, info: dict[str, str]) -> bytes:
    """The bytes of one external tensor (``info``: its external_data key/values)."""
    path = safe_path(base_dir, info.get("location", ""), tensor)
    size = os.path.getsize(path)
    fields = {}
    for key in ("offset", "length"):
        if key not in info:
            continue
        try:
            fields[key] = int(info[key])
        except ValueError:
            raise ValueError(f"bz.onnx.load: tensor {tensor!r}: external_data field {key!r} "
                             f"= {info[key]!r} is not an integer") from None
        if fields[key] < 0:
            raise ValueError(f"bz.onnx.load: tensor {tensor!r}: external_data field {key!r} "
                             f"= {fields[key]} is negative")
    offset = fields.get("offset", 0)
    length = fields.get("length", size - offset)
    if offset + length > size or offset > size:
        raise ValueError(f"bz.onnx.load: tensor {tensor!r}: external_data offset {offset} + "
                         f"length {length} is past the end of {info['location']!r} "
                         f"({size} bytes)")
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise ValueError(f"bz.onnx.load: tensor {tensor!r}: read {len(data)} of {length} "
                         f"bytes from {info['location']!r}")
    return data
