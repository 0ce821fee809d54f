"""The converted GraphDef as TF-TRT's converted function held it: one TRTEngineOp per engine.

In process each engine is a call of its `<engine>_native_segment` function (`hybrid_graph.py`);
user code written for TF-TRT reads `converted.graph.as_graph_def()` and counts `TRTEngineOp`
nodes, or reads their attributes (`calibration_data` after INT8 calibration). This module
turns each engine's call node into the TRTEngineOp TF-TRT's convert_graph.cc made, with the
attributes it set (docs/tftrt-behaviour.md#engine-ops), the native segment functions in the library.
The GraphDef is a description: TensorFlow >= 2.18 has no TRTEngineOp kernel to run it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.conversion.params import DEFAULT_MAX_WORKSPACE_SIZE_BYTES
from workbench.conversion.result import EngineInfo, Shape
from workbench.engines.runtime.hybrid_graph import native_function_name, with_native_functions
from workbench.engines.settings import EngineSettings

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

ENGINE_OP = "TRTEngineOp"
CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# The types TF-TRT's TRTEngineOp declared for InT and OutT (DataType enum values: bool, int8,
# half, float, int32; resource for inputs).
ENGINE_OUTPUT_TYPES = frozenset({10, 6, 19, 1, 3})
ENGINE_INPUT_TYPES = ENGINE_OUTPUT_TYPES | {20}
# The first line of the calibration table (TensorRT's calibration cache layout: a header line,
# then `<tensor>: <float32 scale as hex>` per tensor).
CALIBRATION_HEADER = b"TRT-workbench-MinMaxCalibration"


def engine_attrs(info: EngineInfo, settings: EngineSettings,
                 calibration_data: Sequence[Sequence[np.ndarray]] = ()) -> dict[str, Any]:
    """The attributes TF-TRT's convert_graph.cc gave the engine's TRTEngineOp (InT, OutT and
    segment_func come from the call node), `calibration_data` filled once calibrated."""
    workspace = settings.max_workspace_size_bytes
    attrs: dict[str, Any] = {
        "input_shapes": list(info.input_shapes),
        "output_shapes": list(info.output_shapes),
        "static_engine": False,
        "serialized_segment": b"",
        "calibration_data": calibration_table(calibration_data),
        "max_cached_engines_count": settings.maximum_cached_engines,
        "workspace_size_bytes": DEFAULT_MAX_WORKSPACE_SIZE_BYTES if workspace is None
        else workspace,
        "max_batch_size": 1,
        "precision_mode": settings.precision_mode,
        "use_calibration": settings.use_calibration,
        "_use_implicit_batch": settings.use_implicit_batch,
        "use_explicit_precision": False,
        "_allow_build_at_runtime": settings.allow_build_at_runtime,
    }
    if settings.use_dynamic_shape:  # TF-TRT set it in explicit batch mode only
        attrs["profile_strategy"] = settings.dynamic_shape_profile_strategy or "Range"
    return attrs


def calibration_table(batches: Sequence[Sequence[np.ndarray]]) -> bytes:
    """The calibration of an engine's inputs, in TensorRT's calibration cache layout: each
    input `TensorRTInputPH_<i>` with its symmetric INT8 scale (max |x| / 127 over the
    batches). Empty before calibration, as TF-TRT's attribute was."""
    if not batches:
        return b""
    lines = [CALIBRATION_HEADER]
    for index in range(len(batches[0])):
        peak = max(float(np.max(np.abs(b[index]))) if np.size(b[index]) else 0.0
                   for b in batches)
        scale = np.float32(peak / 127.0 if peak > 0 else 1.0)
        lines.append(f"TensorRTInputPH_{index}: {scale.view(np.uint32):08x}".encode())
    return b"\n".join(lines) + b"\n"


def engine_infos(graph: Any) -> dict[str, EngineInfo]:
    return {s.engine.name: s.engine for s in graph.segments}


def engine_attrs_of(graph: Any) -> Callable[[str], dict[str, Any]]:
    """Each engine's TRTEngineOp attributes in `graph` (a runtime.RuntimeGraph): its converted
    model's (settings, calibration), default settings for a graph without one."""
    given = graph.engine_attrs() if graph.engine_attrs else None
    if given is not None:
        return given
    infos = engine_infos(graph)
    return lambda name: engine_attrs(infos[name], EngineSettings())


def tftrt_graph_def(graph: Any) -> GraphDef:
    """The converted GraphDef of `graph` (a runtime.RuntimeGraph) with TRTEngineOp nodes (top
    level and inside converted functions) and the native segment functions. Made on each call:
    what it makes to do so (the converted and segment GraphDefs) is let go again."""
    infos, attrs_of = engine_infos(graph), engine_attrs_of(graph)
    held = graph.converted_held
    segments_held = [s.graph_def_held for s in graph.segments]
    try:
        out = _with_native_functions(graph.converted_graph_def, graph.segments)
    finally:
        if not held:
            graph.release_converted()
        for segment, was_held in zip(graph.segments, segments_held, strict=True):
            if not was_held:
                segment.release()
    as_engine_nodes(out, infos, attrs_of)
    return out


def as_engine_nodes(graph_def: GraphDef, infos: dict[str, EngineInfo],
                    attrs_of: Callable[[str], dict[str, Any]], to_run: bool = False) -> None:
    """Each engine's call of its native segment in `graph_def` (top level and inside converted
    functions) made the engine's TRTEngineOp, in place, on the engine's device as TF-TRT
    placed it. `to_run` (a saved model's graph, which TensorFlow imports): left unplaced (the
    workbench's kernel is the CPU's), and a call whose types TF-TRT's op declaration refuses
    stays the call it is."""
    def convert(nodes: Any) -> set[str]:
        made = set()
        for node in nodes:
            if node.op in CALL_OPS and node.name in infos and \
                    node.attr["f"].func.name == native_function_name(node.name) and \
                    (not to_run or _declared_types(node)):
                _as_engine_node(node, infos[node.name], attrs_of(node.name), place=not to_run)
                made.add(node.name)
        return made

    convert(graph_def.node)
    for function in graph_def.library.function:
        made = convert(function.node_def)
        if made:  # inside a function an output is named by its op's output list
            _rename_outputs(function, made)


def _rename_outputs(function: Any, engines: set[str]) -> None:
    """`<engine>:output:<i>` (the call's output list) -> `<engine>:out_tensor:<i>`."""
    def renamed(text: str) -> str:
        node, _, rest = text.partition(":output:")
        return f"{node}:out_tensor:{rest}" if rest and node in engines else text

    for node in function.node_def:
        node.input[:] = [renamed(text) for text in node.input]
    for key, value in function.ret.items():
        function.ret[key] = renamed(value)


def _declared_types(call: NodeDef) -> bool:
    return set(call.attr["Tin"].list.type) <= ENGINE_INPUT_TYPES and \
        set(call.attr["Tout"].list.type) <= ENGINE_OUTPUT_TYPES


def _with_native_functions(converted: GraphDef, segments: Sequence[Any]) -> GraphDef:
    """`with_native_functions`; where native segments read variables (TF-TRT's
    disable_graph_freezing), each engine also takes those variables, as TF-TRT's did: a
    resource input from a top-level Placeholder named as the variable's capture."""
    from tensorflow.core.framework import graph_pb2

    from workbench.engines.runtime.saved_weights import lift_saved_weights
    from workbench.engines.weights import LiftedGraph
    from workbench.graph.variables import VARIABLE_OP_ATTR

    out = with_native_functions(converted, segments)
    if not any(VARIABLE_OP_ATTR in node.attr
               for function in out.library.function for node in function.node_def):
        return out
    del out
    copy = graph_pb2.GraphDef()
    copy.CopyFrom(converted)
    return lift_saved_weights(LiftedGraph(copy), segments, variables_only=True).graph_def


def _as_engine_node(node: NodeDef, info: EngineInfo, attrs: dict[str, Any], place: bool
                    ) -> None:
    in_types, out_types = list(node.attr["Tin"].list.type), list(node.attr["Tout"].list.type)
    segment_func = node.attr["f"].func.name
    node.op = ENGINE_OP
    node.attr.clear()
    node.attr["InT"].list.type.extend(in_types)
    node.attr["OutT"].list.type.extend(out_types)
    node.attr["segment_func"].func.name = segment_func
    for key, value in attrs.items():
        _set_attr(node.attr[key], value)
    if place and not node.device:
        node.device = info.device


def _set_attr(attr: Any, value: Any) -> None:
    if isinstance(value, bool):
        attr.b = value
    elif isinstance(value, int):
        attr.i = value
    elif isinstance(value, str):
        attr.s = value.encode()
    elif isinstance(value, bytes):
        attr.s = value
    else:  # a list of shapes
        attr.list.SetInParent()
        for shape in value:
            _shape_into(attr.list.shape.add(), shape)


def _shape_into(proto: Any, shape: Shape) -> None:
    if shape is None:
        proto.unknown_rank = True
        return
    for dim in shape:
        proto.dim.add(size=max(int(dim), -1))
