"""A saved model's large weights as variables, out of its graph protos.

TensorFlow's SavedModel writing copies every function library several times, and the native
segment functions held every weight as Consts (ResNet-50: 1.2 GB over the first call for
100 MB of weights). Here the weights become top-level Placeholders fed from variables, which
the checkpoint stores once; plain `tf.saved_model.load` restores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.engines.weights import LiftedGraph, is_stored, stand_in
from workbench.graph.variables import READ_VARIABLE, handle_placeholder, variable_op

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

    from workbench.engines.segment import SegmentGraph


def lift_saved_weights(lifted: LiftedGraph, segments: Sequence[SegmentGraph],
                       variables_only: bool = False) -> LiftedGraph:
    """The converted GraphDef, `lifted` (`RuntimeGraph.lifted_converted`), with its native
    segment functions (`with_native_functions`), every large
    weight, top-level or in a segment, a top-level Placeholder named after its Const (one per
    Const of the prepared graph, so a weight two segments read is fed once). A segment's
    weights become trailing arguments of its function and inputs of its call node. Engines in
    a loop frame keep theirs (a node may not read two frames), as do segments called from
    inside library functions. A Const that was a variable (graph/variables.py) is fed
    whatever its size, a resource handle where its segment reads it with `ReadVariableOp`;
    `variables_only` feeds only those (the in-process description, `tftrt_graph_def`)."""
    from workbench.engines.runtime.hybrid_graph import engines_in_loops, with_native_functions

    in_loops = engines_in_loops(lifted.graph_def)
    calls = {n.name: n for n in lifted.graph_def.node if n.op == "PartitionedCall"}
    top_level = {n.name for n in lifted.graph_def.node}
    # A variable also read outside engines stays a Const at the top level: its segments get
    # its value, as any weight's (a handle cannot be fed from it).
    outside = set(top_level)
    read: set[str] = set()
    per_engine: dict[str, list[str]] = {}
    for segment in segments:
        name = segment.engine.name
        if name not in calls or name in in_loops:
            continue
        segment_lifted = segment.lifted()
        found = {} if variables_only else {
            n: t for n, t in segment_lifted.weights.items() if is_stored(t)}
        variables = {n: v for n, v in _variables(segment_lifted).items() if n not in outside}
        found.update({n: tensor for n, (_, tensor) in variables.items()})
        read.update(variables)
        per_engine[name] = list(found)
        for weight, tensor in found.items():
            if weight not in top_level:
                handle = variables.get(weight, ("",))[0] == READ_VARIABLE
                lifted.graph_def.node.append(
                    handle_placeholder(weight) if handle else stand_in(weight, tensor))
                top_level.add(weight)
            lifted.weights.setdefault(weight, tensor)
        _feed_weights(calls[name], per_engine[name], lifted.graph_def)
    lifted.graph_def = with_native_functions(lifted.graph_def, segments, per_engine,
                                             frozenset(read))
    return lifted


def _feed_weights(call: NodeDef, names: list[str], graph_def: GraphDef) -> None:
    """The call node's extra data inputs (before its control inputs) and their dtypes (those
    of the top-level Placeholders feeding them)."""
    wanted = set(names)
    dtypes = {n.name: n.attr["dtype"].type for n in graph_def.node if n.name in wanted}
    inputs = list(call.input)
    data = [t for t in inputs if not t.startswith("^")]
    del call.input[:]
    call.input.extend([*data, *names, *(t for t in inputs if t.startswith("^"))])
    call.attr["Tin"].list.type.extend(dtypes[n] for n in names)


def _variables(lifted: LiftedGraph) -> dict[str, tuple[str, TensorProto]]:
    """The segment's Consts that were variables (graph/variables.py, any size): their
    variable op and value."""
    found = {}
    for node in lifted.graph_def.node:
        op = variable_op(node)
        if op:
            value = lifted.weights[node.name] if node.op == "Placeholder" else \
                node.attr["value"].tensor
            found[node.name] = (op, value)
    return found
