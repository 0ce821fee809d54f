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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import onnx
from onnx import helper

from workbench.conversion.result import EngineInfo
from workbench.engines.onnx.context import ExportContext, ExportError, raw_bytes
from workbench.engines.onnx.external_data import INLINE_BYTES, append_external, data_file
from workbench.engines.onnx.ops import CONVERTERS
from workbench.engines.segment import SegmentGraph
from workbench.errors import WorkbenchError
from workbench.graph.nodes import TensorSpec, numpy_dtype
from workbench.lazy import tf

__all__ = ["NOT_EXPORTED", "ExportError", "export_notes", "export_onnx", "write_export"]

# Op types TF-TRT converts (the op-rule registry accepts them) that the exporter has no
# converter for, and why. A segment holding one keeps its engine op; the engine build fails
# with this reason and the segment runs natively, as TF-TRT ran a segment whose engine build
# failed: the conversion's figures stay TF-TRT's, the run shows the fallback.
NOT_EXPORTED = {
    **dict.fromkeys(("Conv2DBackpropInput", "Conv3DBackpropInputV2"),
                    "transposed convolutions are not exported yet"),
    "FusedConv2DBiasActivation": "this contrib op is not exported",
    **dict.fromkeys(("FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars",
                     "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3"),
                    "explicit quantization (INT8 with quantization nodes) is not exported yet"),
}
# Registry names that never reach the exporter: Consts become initializers, variables are
# frozen into Consts before segmentation, FakeOp is TF_TRT_OP_FAKELIST's test op and
# TF-TRT registered `ones_like` / `zeros_like`, names no TensorFlow op has.
NEVER_EXPORTED = frozenset({"Const", "VariableV2", "ReadVariableOp", "FakeOp", "ones_like",
                            "zeros_like"})


def export_notes(engines: Iterable[EngineInfo]) -> list[str]:
    """One line per engine holding an op the exporter cannot express, saying it runs natively
    here and why."""
    notes = []
    for engine in engines:
        missing = sorted(op for op in engine.native_ops
                         if op not in CONVERTERS and op not in NEVER_EXPORTED)
        if missing:
            reasons = "; ".join(f"{op}: {NOT_EXPORTED.get(op, 'no ONNX converter')}"
                                for op in missing)
            notes.append(f"{engine.name} runs natively here (TF-TRT would build a TensorRT "
                         f"engine): the ONNX exporter cannot express {reasons}")
    return notes

def export_onnx(segment: SegmentGraph, opset: int = 17) -> onnx.ModelProto:
    """The segment as an ONNX model; inputs `TensorRTInputPH_<i>`, outputs `TensorRTOutputPH_<i>`.

    Raises `ExportError` for the first op without a converter (or with attributes ONNX cannot
    express), naming the op type and node.
    """
    model, weights = _exported(segment, opset)
    for tensor in model.graph.initializer:  # each weight's bytes copied once, into the model
        if tensor.name in weights:
            tensor.raw_data = raw_bytes(weights.pop(tensor.name))
    onnx.checker.check_model(model)
    return model


def write_export(segment: SegmentGraph, path: Path, opset: int = 17) -> None:
    """`export_onnx`'s model into the file `path`, its weights streamed from the segment's
    protos into the data file beside it (`onnx_files.data_file`): the model in memory never
    holds them (VGG16's export held its weights three times: the segment's GraphDef, the model
    and `onnx.checker`'s serialization)."""
    model, weights = _exported(segment, opset)
    with data_file(path).open("wb") as data:
        for tensor in model.graph.initializer:  # converters made some (OIHW weights)
            proto = weights.pop(tensor.name, None)
            raw = tensor.raw_data if proto is None else raw_bytes(proto)  # read once
            if len(raw) > INLINE_BYTES:
                append_external(tensor, raw, data)
            elif proto is not None:
                tensor.raw_data = raw
    onnx.save_model(model, str(path))
    onnx.checker.check_model(str(path))


def _exported(segment: SegmentGraph, opset: int) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The segment's model, and initializer -> the TF TensorProto holding its bytes for each
    initializer made without them (`ExportContext.raw_weights`)."""
    if opset < 13:
        raise WorkbenchError(f"ONNX opset {opset} is too old: the exporter needs 13 or newer")
    ctx = ExportContext(opset)
    lifted = segment.lifted()  # the weights as Placeholders: the graph need not hold them
    ctx.const_protos = {**lifted.weights, **{n.name: n.attr["value"].tensor
                                             for n in lifted.graph_def.node if n.op == "Const"}}
    tf_graph = _import(lifted.graph_def)
    del lifted
    ctx.reserve([op.name for op in tf_graph.get_operations()])
    inputs = set(segment.input_names)
    for op in tf_graph.get_operations():  # import order is topological
        if op.type == "Const" or op.name in inputs or op.name in ctx.const_protos:
            continue
        convert = CONVERTERS.get(op.type)
        if convert is None:
            raise ExportError(op, *([NOT_EXPORTED[op.type]] if op.type in NOT_EXPORTED else []))
        convert(ctx, op)
    del tf_graph
    dims = _DimNames()
    graph = helper.make_graph(
        ctx.nodes,
        segment.engine.name,
        [_value_info(n, s, dims) for n, s in zip(segment.input_names, segment.input_specs,
                                                 strict=True)],
        [_value_info(n, s, dims) for n, s in zip(segment.output_names, segment.output_specs,
                                                 strict=True)],
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="tf-trt-workbench",
        ir_version=helper.find_min_ir_version_for(opsets),
    )
    # The initializers moved into the model one at a time (make_graph and make_model copy what
    # they are given).
    initializers = ctx.initializers
    while initializers:
        model.graph.initializer.append(initializers.pop(next(iter(initializers))))
    return model, ctx.raw_weights


def _import(graph_def: Any) -> Any:
    """`graph_def` (its weights Placeholders) as a tf.Graph: the converters read the weights
    from their protos (`ExportContext.const_protos`)."""
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
    elem = helper.np_dtype_to_tensor_dtype(numpy_dtype(spec.dtype))
    shape = None if spec.shape is None else [dims(d) for d in spec.shape]
    return helper.make_tensor_value_info(name, elem, shape)
