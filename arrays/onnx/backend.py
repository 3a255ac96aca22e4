"""braze as an ``onnx.backend.base.Backend``: what ``onnx.backend.test.BackendTest`` runs.

``prepare(model, device)`` imports the model (:func:`braze.arrays.onnx.load`) and returns
a :class:`BrazeRep` whose ``run(inputs)`` feeds numpy arrays and returns numpy arrays;
``run_node`` runs one ``NodeProto`` through a one-node model. Devices: ``"CPU"`` (the
backend in force, or ``BRAZE_BACKEND``).

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from braze.arrays.onnx import backend
>>> node = helper.make_node("Relu", ["x"], ["y"])
>>> backend.run_node(node, [np.array([-1.0, 3.0], np.float32)])[0].tolist()
[0.0, 3.0]
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from . import OnnxModel, load


class BrazeRep(BackendRep):
    """A prepared model: ``run(inputs)`` -> a namedtuple of numpy outputs."""

    def __init__(self, model: OnnxModel) -> None:
        self.model = model
        names = [f"o{i}" for i in range(len(model.output_names))]
        self._tuple = namedtuple("Outputs", names)  # type: ignore[misc]  # noqa: PYI024

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            outs = self.model(**inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            outs = self.model(*inputs)
        return self._tuple(*(np.asarray(o) for o in outs))


class BrazeBackend(Backend):
    """The ONNX backend API over braze (``onnx.backend.test.BackendTest(BrazeBackend)``)."""

    @classmethod
    def is_compatible(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return True  # an unsupported op raises NotImplementedError at prepare, with names

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> BrazeRep:
        if not cls.supports_device(device):
            raise ValueError(f"bz.onnx backend: unsupported device {device!r} (only 'CPU')")
        return BrazeRep(load(model, backend=kwargs.get("backend")))

    @classmethod
    def run_node(cls, node: NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[Any, ...]:
        arrays = [np.asarray(x) for x in inputs]
        names = [n for n in node.input if n]
        vin = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             a.shape) for n, a in zip(names, arrays)]
        vout = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
        opset = kwargs.get("opset_version")
        graph = helper.make_graph([node], "run_node", vin, vout)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                                  if opset else None)
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = BrazeBackend.prepare
run_node = BrazeBackend.run_node
run_model = BrazeBackend.run_model
supports_device = BrazeBackend.supports_device
is_compatible = BrazeBackend.is_compatible
