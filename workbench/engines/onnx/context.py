"""What an ONNX op converter works with: the export context, its error and the converter type.

The exporter (`export`) and the per-family converters (`ops/`) both import it.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.errors import WorkbenchError
from workbench.graph.nodes import DTYPE_ENUMS, numpy_dtype
from workbench.lazy import tf

Converter = Callable[["ExportContext", Any], None]


class ExportError(WorkbenchError):
    """A segment op the exporter cannot express in ONNX (names the op and the node)."""

    def __init__(self, op: Any, reason: str = "the exporter has no converter for this op"):
        self.op_type = op.type
        self.node = op.name
        super().__init__(f"Cannot export {op.type} node {op.name} to ONNX: {reason}")


class ExportContext:
    """What a converter needs: TF tensors in, ONNX nodes and initializers out."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, TensorProto] = {}
        self._names: set[str] = set()
        # Const node -> its TensorProto in the segment's GraphDef (weights are copied from
        # there as bytes: going through numpy took most of the export's time).
        self.const_protos: dict[str, Any] = {}
        # Initializer -> the TF TensorProto holding its bytes, for the initializers made
        # without their data: the bytes are copied once, where the model is written.
        self.raw_weights: dict[str, Any] = {}

    # -- TF tensors -------------------------------------------------------------------------
    @staticmethod
    def value_name(tensor: Any) -> str:
        """ONNX value name of a TF tensor: `node` for port 0, `node:port` otherwise."""
        name = tensor.name
        return name[:-2] if name.endswith(":0") else name

    def input(self, op: Any, index: int) -> str:
        """ONNX value for input `index` of `op`; a Const input becomes an initializer."""
        tensor = op.inputs[index]
        name = self.value_name(tensor)
        proto = self.const_protos.get(tensor.op.name)
        if (tensor.op.type == "Const" or proto is not None) and name not in self.initializers:
            raw = _raw_initializer(proto, name)
            if raw is not None:
                self.initializers[name] = raw
                self.raw_weights[name] = proto
                return name
            value = _proto_array(proto) if proto is not None else _const_array(tensor.op)
            if value.dtype.kind in "OSU":
                raise ExportError(op, "string tensors have no ONNX equivalent here")
            self.initializers[name] = numpy_helper.from_array(value, name)
        return name

    def const(self, op: Any, index: int) -> np.ndarray | None:
        """The value of input `index` when TensorFlow can fold it statically."""
        tensor = op.inputs[index]
        proto = self.const_protos.get(tensor.op.name)
        if proto is not None and tensor.value_index == 0:  # a weight is a Placeholder here
            return _proto_array(proto)
        return tf.get_static_value(tensor)

    def require_const(self, op: Any, index: int, what: str) -> np.ndarray:
        value = self.const(op, index)
        if value is None:
            raise ExportError(op, f"its {what} (input {index}) must be a constant")
        return np.asarray(value)

    def output(self, op: Any, port: int = 0) -> str:
        return self.value_name(op.outputs[port])

    @staticmethod
    def rank(op: Any, index: int) -> int | None:
        return op.inputs[index].shape.rank

    @staticmethod
    def dtype(op: Any, index: int) -> np.dtype:
        return np.dtype(op.inputs[index].dtype.as_numpy_dtype)

    # -- ONNX nodes -------------------------------------------------------------------------
    def reserve(self, names: Sequence[str]) -> None:
        """Reserves the TF node names so that helper nodes never take one."""
        self._names.update(names)

    def _unique(self, base: str) -> str:
        name = base
        for n in itertools.count(1):
            if name not in self._names:
                break
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def node(
        self, op: Any, onnx_op: str, inputs: Sequence[str],
        outputs: Sequence[str] | None = None, **attrs: Any,
    ) -> None:
        """The ONNX node that stands for `op`: named like it, writing its outputs."""
        outputs = list(outputs) if outputs is not None else [self.output(op)]
        self.nodes.append(helper.make_node(onnx_op, list(inputs), outputs, name=op.name, **attrs))

    def helper(self, op: Any, label: str, onnx_op: str, inputs: Sequence[str], **attrs: Any) -> str:
        """A helper node `<op>/<label>` (its output value has the same name)."""
        name = self._unique(f"{op.name}/{label}")
        self.nodes.append(helper.make_node(onnx_op, list(inputs), [name], name=name, **attrs))
        return name

    def helper_to(
        self, op: Any, label: str, onnx_op: str, inputs: Sequence[str], output: str,
        **attrs: Any,
    ) -> None:
        """A helper node `<op>/<label>` writing the given value (e.g. one of the op's outputs)."""
        name = self._unique(f"{op.name}/{label}")
        self.nodes.append(helper.make_node(onnx_op, list(inputs), [output], name=name, **attrs))

    def helper_outputs(self, op: Any, label: str, onnx_op: str, inputs: Sequence[str],
                       count: int, **attrs: Any) -> list[str]:
        """A helper node `<op>/<label>` with `count` outputs `<op>/<label>:<i>`."""
        name = self._unique(f"{op.name}/{label}")
        outputs = [f"{name}:{i}" for i in range(count)]
        self.nodes.append(helper.make_node(onnx_op, list(inputs), outputs, name=name, **attrs))
        return outputs

    def constant(self, op: Any, label: str, value: Any, dtype: Any = None) -> str:
        """An initializer `<op>/<label>` (e.g. int64 axes ONNX wants as an input)."""
        name = self._unique(f"{op.name}/{label}")
        self.initializers[name] = numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        return name

    def int64(self, op: Any, index: int, label: str) -> str:
        """Input `index` of `op` as int64: a folded initializer, or a Cast when it is computed."""
        value = self.const(op, index)
        if value is not None:
            return self.constant(op, label, value, np.int64)
        source = self.input(op, index)
        if self.dtype(op, index) == np.int64:
            return source
        return self.helper(op, label, "Cast", [source], to=TensorProto.INT64)


# TF DataType enum -> ONNX type, for the dtypes whose TF and ONNX raw layouts are the same.
_RAW_TYPES = {DTYPE_ENUMS[name]: helper.np_dtype_to_tensor_dtype(numpy_dtype(name))
              for name in ("float", "double", "half", "int32", "int64", "int8", "uint8",
                           "int16", "bool")}


def _raw_initializer(proto: Any, name: str) -> TensorProto | None:
    """The initializer of a TF TensorProto whose dtype has ONNX's raw layout, without its
    bytes yet (see `ExportContext.raw_weights` and `raw_bytes`)."""
    if proto is None or proto.dtype not in _RAW_TYPES or sys.byteorder != "little":
        return None
    return TensorProto(name=name, data_type=_RAW_TYPES[proto.dtype],
                       dims=[d.size for d in proto.tensor_shape.dim])


def raw_bytes(proto: Any) -> bytes:
    """A TF TensorProto's value as ONNX raw data: its bytes (read once: each read of a proto's
    bytes field copies them), else its values (a repeated value TF keeps short) expanded."""
    return proto.tensor_content or _proto_array(proto).tobytes()


def _const_array(op: Any) -> np.ndarray:
    return _proto_array(op.get_attr("value"))


def _proto_array(proto: Any) -> np.ndarray:
    return np.asarray(tf.make_ndarray(proto))
