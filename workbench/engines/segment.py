"""One engine's subgraph as a standalone TensorFlow GraphDef, and running it natively.

The GraphDef mirrors TF-TRT's `<engine>_native_segment` function
(docs/tftrt-behaviour.md#engine-ops): the segment's
nodes, the outside Consts they read copied in, each engine input a Placeholder
`TensorRTInputPH_<port>` and each engine output an Identity `TensorRTOutputPH_<port>`, in the
port order of `EngineInfo.inputs` / `EngineInfo.outputs`. Placeholders stand in for TF-TRT's
`_Arg`/`_Retval` so the GraphDef imports and runs as an ordinary graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from workbench.conversion.result import EngineInfo
from workbench.engines.weights import LiftedGraph, large_const, lift_weights, stand_in_for
from workbench.errors import WorkbenchError
from workbench.graph.channels_last import cpu_runnable
from workbench.graph.nodes import DTYPE_ENUMS, Graph, TensorRef, TensorSpec, numpy_dtype
from workbench.graph.prepare import PreparedGraph
from workbench.lazy import tf

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

INPUT_PREFIX = "TensorRTInputPH_"
OUTPUT_PREFIX = "TensorRTOutputPH_"


T = TypeVar("T")


class MadeOnUse(Generic[T]):
    """A value, or a function making it: made on first use, and dropped by `release()` when it
    can be made again (GraphDefs holding weights that engines or captured tensors hold too)."""

    def __init__(self, source: T | Callable[[], T]) -> None:
        self._maker: Callable[[], T] | None = source if callable(source) else None
        self._value: T | None = None if callable(source) else source

    @property
    def held(self) -> bool:
        return self._value is not None

    def get(self) -> T:
        if self._value is None:
            assert self._maker is not None
            self._value = self._maker()
        return self._value

    def release(self) -> None:
        if self._maker is not None:
            self._value = None


class GraphMadeOnUse(MadeOnUse["GraphDef"]):
    """A GraphDef made on use that can also be made lifted (`lift_weights`' form): straight
    from the prepared graph's protos when `lifted_maker` is given and the GraphDef is not
    held, so its weights are not copied."""

    def __init__(self, source: GraphDef | Callable[[], GraphDef],
                 lifted_maker: Callable[[], LiftedGraph] | None = None) -> None:
        super().__init__(source)
        self._lifted_maker = lifted_maker

    def lifted(self, select: Callable[[NodeDef], TensorProto | None] | None = None
               ) -> LiftedGraph:
        if self._lifted_maker is not None and not self.held:
            return self._lifted_maker()
        return lift_weights(self.get(), select)


@dataclass
class SegmentGraph:
    """An engine's subgraph with named inputs and outputs.

    Specs are the prepared graph's static properties (TF dtype names, Grappler's symbolic
    unknown dims -1, -2, ... kept, so equal negative dims are equal at run time).
    """

    engine: EngineInfo
    # The GraphDef, or a function making it: segments are made (a saved model's read) on first
    # use; engines run without them, the native fallback and the ONNX export need them.
    source: GraphDef | Callable[[], GraphDef]
    input_names: list[str]
    output_names: list[str]
    input_specs: list[TensorSpec]
    output_specs: list[TensorSpec]
    # Makes `lifted()` without a copy of the weights (a segment cut out of the prepared graph).
    lifted_source: Callable[[], LiftedGraph] | None = None

    def __post_init__(self) -> None:
        self._graph_def = GraphMadeOnUse(self.source, self.lifted_source)

    @property
    def graph_def(self) -> GraphDef:
        return self._graph_def.get()

    @property
    def graph_def_held(self) -> bool:
        return self._graph_def.held

    def release(self) -> None:
        """Drops the GraphDef when it can be made again: it holds the segment's weights,
        which its engine holds too once built (and TensorFlow, once the native segment ran)."""
        self._graph_def.release()

    def lifted(self) -> LiftedGraph:
        """The GraphDef with its large Consts (`large_const`) as Placeholders, and their
        protos: for a segment cut out of the prepared graph, the prepared graph's own (what the
        ONNX export reads, without a copy of the segment's weights)."""
        return self._graph_def.lifted(large_const)


def extract_segment(prepared: PreparedGraph, engine: EngineInfo) -> SegmentGraph:
    """The segment GraphDef of `engine`, cut out of the prepared graph it was found in."""
    from tensorflow.core.framework import graph_pb2

    graph = prepared.graph
    members = set(engine.nodes)
    missing = sorted(members - {nd.name for nd in prepared.graph_def.node})
    if missing:
        raise WorkbenchError(f"{engine.name}: node {missing[0]} is not in the prepared graph")
    input_ports = {TensorRef.parse(text): i for i, text in enumerate(engine.inputs)}
    input_specs = [_spec(graph, ref, engine.name) for ref in input_ports]
    output_refs = [TensorRef.parse(text) for text in engine.outputs]
    output_specs = [_spec(graph, ref, engine.name) for ref in output_refs]

    input_names = [f"{INPUT_PREFIX}{i}" for i in range(len(input_specs))]
    output_names = [f"{OUTPUT_PREFIX}{i}" for i in range(len(output_refs))]

    def segment_graph_def(weights: dict[str, Any] | None = None) -> GraphDef:
        """Made on use, again after `release()`; with `weights`, each large Const a
        Placeholder, its proto (the prepared graph's) in `weights` (see `lifted`)."""
        segment = graph_pb2.GraphDef()
        segment.versions.CopyFrom(prepared.graph_def.versions)
        node_defs = {nd.name: nd for nd in prepared.graph_def.node}
        for name in _copied_consts(graph, members):  # at the front, as TF-TRT places them
            _copy_node(segment, node_defs[name], members, input_ports, weights)
        for name in sorted(members, key=lambda n: graph[n].id):
            _copy_node(segment, node_defs[name], members, input_ports, weights)
        for name, spec in zip(input_names, input_specs, strict=True):
            _add_placeholder(segment, name, spec)
        for name, ref, spec in zip(output_names, output_refs, output_specs, strict=True):
            _add_output(segment, name, ref, spec)
        return segment

    def lifted() -> LiftedGraph:
        weights: dict[str, Any] = {}
        return LiftedGraph(segment_graph_def(weights), weights)

    return SegmentGraph(engine, segment_graph_def, input_names, output_names, input_specs,
                        output_specs, lifted)


def _spec(graph: Graph, ref: TensorRef, engine: str) -> TensorSpec:
    spec = graph.output_spec(ref)
    if spec is None or spec.dtype not in DTYPE_ENUMS:
        raise WorkbenchError(f"{engine}: the dtype of tensor {ref} is unknown")
    return spec


def _copied_consts(graph: Graph, members: set[str]) -> list[str]:
    """Outside Consts read by segment nodes, in node-id order."""
    names = {
        ref.node
        for name in members
        for ref in graph[name].inputs
        if ref.node not in members and graph[ref.node].op == "Const"
    }
    return sorted(names, key=lambda n: graph[n].id)


def _copy_node(segment: GraphDef, node_def: NodeDef, members: set[str],
               ports: dict[TensorRef, int], weights: dict[str, Any] | None = None) -> None:
    """Copies one NodeDef, rewiring engine inputs to their Placeholders; with `weights`, a
    large Const becomes a Placeholder and its proto goes into `weights`, uncopied.

    Control inputs from outside the segment are dropped: inside the native function nothing
    outside exists (TF-TRT moves them onto the TRTEngineOp itself).
    """
    tensor = None if weights is None else large_const(node_def)
    if tensor is not None:
        assert weights is not None
        weights[node_def.name] = tensor
        segment.node.append(stand_in_for(node_def, tensor))
        return
    copy = segment.node.add()
    copy.CopyFrom(node_def)
    del copy.input[:]
    for text in node_def.input:
        if text.startswith("^"):
            if text[1:] in members:
                copy.input.append(text)
            continue
        ref = TensorRef.parse(text)
        port = ports.get(ref)
        copy.input.append(text if port is None else f"{INPUT_PREFIX}{port}")


def _add_placeholder(segment: GraphDef, name: str, spec: TensorSpec) -> None:
    node = segment.node.add(name=name, op="Placeholder")
    node.attr["dtype"].type = DTYPE_ENUMS[spec.dtype]
    shape = node.attr["shape"].shape
    if spec.shape is None:
        shape.unknown_rank = True
        return
    for dim in spec.shape:
        shape.dim.add(size=max(dim, -1))


def _add_output(segment: GraphDef, name: str, ref: TensorRef, spec: TensorSpec) -> None:
    node = segment.node.add(name=name, op="Identity")
    node.input.append(ref.node if ref.port == 0 else str(ref))
    node.attr["T"].type = DTYPE_ENUMS[spec.dtype]


class NativeSegment:
    """Runs a segment in TensorFlow: what TF-TRT falls back to when an engine cannot run. The
    GraphDef is imported (wrapped once as a function of its placeholders) on the first call:
    an engine op whose engines always run never pays for it."""

    def __init__(self, segment: SegmentGraph):
        self.segment = segment
        self._function: Any = None

    def _wrapped(self) -> Any:
        if self._function is None:
            segment = self.segment

            def _import() -> None:
                tf.compat.v1.import_graph_def(cpu_runnable(segment.graph_def), name="")

            wrapped = tf.compat.v1.wrap_function(_import, [])
            tensor = wrapped.graph.get_tensor_by_name
            self._function = wrapped.prune(
                [tensor(f"{name}:0") for name in segment.input_names],
                [tensor(f"{name}:0") for name in segment.output_names],
            )
        return self._function

    def __call__(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        specs = self.segment.input_specs
        if len(inputs) != len(specs):
            raise WorkbenchError(
                f"{self.segment.engine.name} takes {len(specs)} inputs, got {len(inputs)}")
        tensors = [tf.convert_to_tensor(np.asarray(x, dtype=numpy_dtype(s.dtype)))
                   for x, s in zip(inputs, specs, strict=True)]
        return [out.numpy() for out in self._wrapped()(*tensors)]
