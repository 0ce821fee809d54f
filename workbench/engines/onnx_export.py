"""A focused TensorFlow -> ONNX exporter for engine segments.

Why our own and not tf2onnx: a segment holds only the op set TF-TRT converts, already frozen,
Grappler-optimized and with static properties, so one small function per op family is enough;
it exports ResNet-50's engine in well under a second where tf2onnx took 30 s for the whole model,
and every ONNX node keeps the name of the TF node it came from (helper nodes add a suffix:
`conv1/Conv2D/to_nchw`), which is what the per-layer profiles link back to.

Tensors keep their TF layout and dtype: NHWC convolutions and pools are wrapped in Transposes
(ONNX Runtime's transpose optimizer cancels the pairs between consecutive layers), int32 shape
arithmetic stays int32 and is cast to int64 only where ONNX demands it. Unknown dims become
symbolic (`dim_<k>` for Grappler's symbolic dim -k, shared where Grappler proved two dims
equal; `unknown_<n>` for each plain -1), so one model serves every
batch size. An op without a converter raises `ExportError`; the runtime then falls back to the
native segment, as TF-TRT does when an engine cannot be built.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.engines.segment import SegmentGraph, numpy_dtype
from workbench.errors import WorkbenchError
from workbench.graph.nodes import TensorSpec

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
        # there as bytes: going through numpy took most of VGG16's 10 s export).
        self.const_protos: dict[str, Any] = {}

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
        if tensor.op.type == "Const" and name not in self.initializers:
            raw = _raw_initializer(self.const_protos.get(tensor.op.name), name)
            if raw is not None:
                self.initializers[name] = raw
                return name
            value = _const_array(tensor.op)
            if value.dtype.kind in "OSU":
                raise ExportError(op, "string tensors have no ONNX equivalent here")
            self.initializers[name] = numpy_helper.from_array(value, name)
        return name

    def const(self, op: Any, index: int) -> np.ndarray | None:
        """The value of input `index` when TensorFlow can fold it statically."""
        from tensorflow.python.framework import tensor_util

        return tensor_util.constant_value(op.inputs[index])

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
_RAW_TYPES = {1: TensorProto.FLOAT, 2: TensorProto.DOUBLE, 19: TensorProto.FLOAT16,
              3: TensorProto.INT32, 9: TensorProto.INT64, 6: TensorProto.INT8,
              4: TensorProto.UINT8, 5: TensorProto.INT16, 10: TensorProto.BOOL}


def _raw_initializer(proto: Any, name: str) -> TensorProto | None:
    """The initializer made straight from a TF TensorProto's bytes, when it holds them raw."""
    if proto is None or not proto.tensor_content or proto.dtype not in _RAW_TYPES \
            or sys.byteorder != "little":
        return None
    tensor = TensorProto(name=name, data_type=_RAW_TYPES[proto.dtype],
                         dims=[d.size for d in proto.tensor_shape.dim])
    tensor.raw_data = proto.tensor_content
    return tensor


def _const_array(op: Any) -> np.ndarray:
    from tensorflow.python.framework import tensor_util

    return np.asarray(tensor_util.MakeNdarray(op.get_attr("value")))


def export_onnx(segment: SegmentGraph, opset: int = 17) -> onnx.ModelProto:
    """The segment as an ONNX model; inputs `TensorRTInputPH_<i>`, outputs `TensorRTOutputPH_<i>`.

    Raises `ExportError` for the first op without a converter (or with attributes ONNX cannot
    express), naming the op type and node.
    """
    from workbench.engines.onnx_ops import CONVERTERS

    if opset < 13:
        raise WorkbenchError(f"ONNX opset {opset} is too old: the exporter needs 13 or newer")
    tf_graph = _import(segment.graph_def)
    ctx = ExportContext(opset)
    ctx.const_protos = {n.name: n.attr["value"].tensor for n in segment.graph_def.node
                        if n.op == "Const"}
    ctx.reserve([op.name for op in tf_graph.get_operations()])
    inputs = set(segment.input_names)
    for op in tf_graph.get_operations():  # import order is topological
        if op.type == "Const" or op.name in inputs:
            continue
        convert = CONVERTERS.get(op.type)
        if convert is None:
            raise ExportError(op)
        convert(ctx, op)
    dims = _DimNames()
    graph = helper.make_graph(
        ctx.nodes,
        segment.engine.name,
        [_value_info(n, s, dims) for n, s in zip(segment.input_names, segment.input_specs,
                                                 strict=True)],
        [_value_info(n, s, dims) for n, s in zip(segment.output_names, segment.output_specs,
                                                 strict=True)],
        initializer=list(ctx.initializers.values()),
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="tf-trt-workbench",
        ir_version=helper.find_min_ir_version_for(opsets),
    )
    onnx.checker.check_model(model)
    return model


def _import(graph_def: Any) -> Any:
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    return graph


class _DimNames:
    """Symbolic dim names: Grappler's equal negative ids share a name, each -1 is its own."""

    def __init__(self) -> None:
        self._fresh = itertools.count()

    def __call__(self, dim: int) -> str | int:
        if dim >= 0:
            return dim
        if dim == -1:
            return f"unknown_{next(self._fresh)}"
        return f"dim_{-dim}"


def _value_info(name: str, spec: TensorSpec, dims: _DimNames) -> onnx.ValueInfoProto:
    elem = helper.np_dtype_to_tensor_dtype(numpy_dtype(spec))
    shape = None if spec.shape is None else [dims(d) for d in spec.shape]
    return helper.make_tensor_value_info(name, elem, shape)
