"""The whole model as one engine on a backend: the reference figure for converted models.

TF-TRT converts only its segments; to know how close a converted model gets to running
everything on the backend, the whole prepared graph (every node the signature's outputs
depend on, the signature's inputs excluded) is cut out as one `SegmentGraph` with
`extract_segment`, exported with our ONNX exporter and built like any engine. An op the
exporter cannot express raises `ExportError` naming it (there is no native fallback here:
a partial "whole model" would not be the reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import EngineInfo
from workbench.engines.backends.base import Backend, Engine
from workbench.engines.segment import SegmentGraph, extract_segment
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, TensorRef, TensorSpec
from workbench.graph.prepare import PreparedGraph

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession

WHOLE_MODEL_NAME = "whole_model"


def whole_model_segment(prepared: PreparedGraph, name: str = WHOLE_MODEL_NAME) -> SegmentGraph:
    """The prepared graph between the signature's inputs and outputs as one segment.

    Engine inputs are the signature inputs, engine outputs the signature outputs, both in
    signature order (the prepared graph's fetches: inputs first, then outputs).
    """
    graph = prepared.graph
    count = len(prepared.optimized.input_nodes)
    inputs = [TensorRef.parse(t) for t in prepared.optimized.fetches[:count]]
    outputs = [TensorRef.parse(t) for t in prepared.optimized.fetches[count:]]
    members = _ancestors(graph, [r.node for r in outputs], stop={r.node for r in inputs})
    if not members:
        raise WorkbenchError("the model's outputs are its inputs: there is nothing to export")
    return extract_segment(prepared, _engine_info(graph, name, members, inputs, outputs))


def whole_model_engine(session: ConversionSession, params: ConversionParams,
                       backend: Backend | None = None,
                       *, calibration_data: Sequence[Sequence[np.ndarray]] = ()) -> Engine:
    """The whole model of `session` built on `backend` (default: `get_backend()`) at
    `params.precision_mode`. INT8 needs `calibration_data`: batches of the model's inputs in
    signature order. Raises `ExportError` for an op ONNX cannot express.
    """
    from workbench.engines.runtime.segment_engine import build_segment_engine

    settings = EngineSettings.from_params(params)
    segment = whole_model_segment(session.prepared(settings.precision_mode))
    request = BuildRequest(calibration_data=tuple(tuple(batch) for batch in calibration_data))
    return build_segment_engine(segment, settings, request, backend=backend)


def _ancestors(graph: Graph, roots: list[str], stop: set[str]) -> set[str]:
    """Every node the roots depend on through data or control edges, `stop` excluded."""
    seen: set[str] = set()
    todo = [r for r in roots if r not in stop]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(ref.node for ref in graph[name].inputs if ref.node not in stop)
        todo.extend(n for n in graph[name].control_inputs if n not in stop)
    return seen


def _engine_info(graph: Graph, name: str, members: set[str], inputs: list[TensorRef],
                 outputs: list[TensorRef]) -> EngineInfo:
    ops: dict[str, int] = {}
    for node in members:
        ops[graph[node].op] = ops.get(graph[node].op, 0) + 1
    return EngineInfo(
        name=name, nodes=tuple(sorted(members)), native_ops=ops,
        native_node_count=len(members), effective_size=len(members),
        input_dtypes=tuple(_spec(graph, r).dtype for r in inputs),
        output_dtypes=tuple(_spec(graph, r).dtype for r in outputs),
        input_shapes=tuple(_spec(graph, r).shape for r in inputs),
        output_shapes=tuple(_spec(graph, r).shape for r in outputs),
        inputs=tuple(str(r) for r in inputs), outputs=tuple(str(r) for r in outputs),
    )


def _spec(graph: Graph, ref: TensorRef) -> TensorSpec:
    spec = graph.output_spec(ref)
    if spec is None:
        raise WorkbenchError(f"whole model: the dtype of tensor {ref} is unknown")
    return spec
