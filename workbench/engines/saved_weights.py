"""A saved model's large weights as variables, out of its graph protos.

TensorFlow's SavedModel writing copies every function library several times, and the native
segment functions held every weight as Consts (ResNet-50: 1.2 GB over the first call for
100 MB of weights). Here the weights become top-level Placeholders fed from variables, which
the checkpoint stores once; plain `tf.saved_model.load` restores them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workbench.engines.weights import large_const, stand_in

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

    from workbench.engines.segment import SegmentGraph


def _stored_weight(node: NodeDef) -> TensorProto | None:
    """A large Const whose bytes are stored (not one repeated value, which the proto keeps
    small and a variable would not)."""
    tensor = large_const(node)
    if tensor is None:
        return None
    elements = math.prod(d.size for d in tensor.tensor_shape.dim)
    return tensor if tensor.ByteSize() >= elements else None


@dataclass
class LiftedGraph:
    """A converted GraphDef whose large weights are top-level Placeholders to feed."""

    graph_def: GraphDef  # the native segment functions in its library
    weights: dict[str, TensorProto] = field(default_factory=dict)  # Placeholder -> value


def lift_weights(converted: GraphDef, segments: Sequence[SegmentGraph]) -> LiftedGraph:
    """`converted` with its native segment functions (`with_native_functions`), every large
    weight, top-level or in a segment, a top-level Placeholder named after its Const (one per
    Const of the prepared graph, so a weight two segments read is fed once). A segment's
    weights become trailing arguments of its function and inputs of its call node. Engines in
    a loop frame keep theirs (a node may not read two frames), as do segments called from
    inside library functions."""
    from tensorflow.core.framework import graph_pb2

    from workbench.engines.hybrid import engines_in_loops, with_native_functions

    in_loops = engines_in_loops(converted)
    calls = {n.name for n in converted.node if n.op == "PartitionedCall"}
    lifted = LiftedGraph(graph_pb2.GraphDef())
    per_engine: dict[str, list[str]] = {}
    for segment in segments:
        name = segment.engine.name
        if name in calls and name not in in_loops:
            found = {n.name: t for n in segment.graph_def.node
                     if (t := _stored_weight(n)) is not None}
            per_engine[name] = list(found)
            for weight, tensor in found.items():
                lifted.weights.setdefault(weight, tensor)
    out = lifted.graph_def
    out.versions.CopyFrom(converted.versions)
    out.library.CopyFrom(converted.library)
    top_level = set()
    for node in converted.node:
        top_level.add(node.name)
        tensor = _stored_weight(node)
        if tensor is not None:
            lifted.weights.setdefault(node.name, tensor)
            out.node.append(stand_in(node.name, tensor, node.device))
            continue
        copy = out.node.add()
        copy.CopyFrom(node)
        if node.name in per_engine:
            _feed_weights(copy, per_engine[node.name], lifted.weights)
    out.node.extend(stand_in(name, tensor) for name, tensor in lifted.weights.items()
                    if name not in top_level)
    lifted.graph_def = with_native_functions(out, segments, per_engine)
    return lifted


def _feed_weights(call: NodeDef, names: list[str], weights: dict[str, TensorProto]) -> None:
    """The call node's extra data inputs (before its control inputs) and their dtypes."""
    inputs = list(call.input)
    data = [t for t in inputs if not t.startswith("^")]
    del call.input[:]
    call.input.extend([*data, *names, *(t for t in inputs if t.startswith("^"))])
    call.attr["Tin"].list.type.extend(weights[n].dtype for n in names)
