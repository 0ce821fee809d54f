"""The converted graph: the prepared graph with each segment replaced by one call node.

TF-TRT replaced each segment by a TRTEngineOp whose `segment_func` is the
`<engine>_native_segment` function. Here every engine becomes a node named after the engine
that calls a function: in a saved model its native segment (a `PartitionedCall`, so plain
TensorFlow runs it anywhere), in process a function wrapping the engine op (a
`StatefulPartitionedCall` of a `numpy_function`). Both start from the same GraphDef, so what
is saved is exactly what runs, minus the engines.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.conversion.result import EngineInfo
from workbench.engines.runtime.engine_op import EngineMissError, EngineOp
from workbench.engines.runtime.native_op import engine_call
from workbench.errors import WorkbenchError
from workbench.graph.build import graph_from_graph_def
from workbench.graph.channels_last import cpu_runnable
from workbench.graph.control_flow import NEXT_ITERATION_OPS, loop_frames
from workbench.graph.function_library import function_refs
from workbench.graph.nodes import TensorRef, dtype_enum, numpy_dtype_name
from workbench.graph.variables import read_name, variable_nodes, variable_op
from workbench.lazy import tf
from workbench.tf_private import eager
from workbench.tf_private.function_defs import graph_to_function_def

if TYPE_CHECKING:
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

    from workbench.conversion.function_conversion import FunctionBody
    from workbench.engines.segment import SegmentGraph
    from workbench.engines.weights import LiftedGraph

NATIVE_SUFFIX = "_native_segment"
WEIGHT_PREFIX = "TensorRTWeightPH_"  # a native segment function's weight arguments
NOINLINE = "_noinline"  # FunctionDef attribute: TensorFlow calls the function, never inlines it


def native_function_name(engine: str) -> str:
    return engine + NATIVE_SUFFIX


def converted_graph_def(graph_def: GraphDef, engines: Sequence[EngineInfo],
                        engine_dtypes: dict[str, tuple[list[str], list[str]]],
                        fetch_nodes: Sequence[str],
                        weights: dict[str, TensorProto] | None = None) -> GraphDef:
    """The top-level GraphDef with each engine one `PartitionedCall` of its native segment.

    `engine_dtypes` gives each engine's input and output TF dtype names; nodes no fetch needs
    any more (Consts only the engines read) are pruned, as TF-TRT did. Given a `weights`
    dict, the graph is made lifted (`weights.lift_weights`): each stored weight a Placeholder,
    its proto (`graph_def`'s own, not a copy) put in `weights`.
    """
    from tensorflow.core.framework import graph_pb2

    from workbench.engines.weights import stand_in, stored_weight

    member_of = {name: e.name for e in engines for name in e.nodes}
    # TF-TRT drops control edges from Consts into and out of engines (GetEngineInfo's
    # ShallKeepControlEdgeFrom): keeping them can close a cycle through a boundary Const.
    consts = {n.name for n in graph_def.node if n.op == "Const"}
    remap = {TensorRef.parse(ref): f"{e.name}:{i}" for e in engines
             for i, ref in enumerate(e.outputs)}
    nodes, lifted = [], {}
    for node_def in graph_def.node:
        if node_def.name in member_of:
            continue
        inputs = [t for t in node_def.input
                  if not (t.startswith("^") and t[1:] in consts and t[1:] in member_of)]
        # Decided on the inputs kept: a Const whose only input was an engine Const's control
        # edge is a weight too (else EfficientNetV2L kept most of its weights as Consts).
        tensor = stored_weight(node_def, inputs) if weights is not None else None
        if tensor is not None:
            lifted[node_def.name] = tensor
            nodes.append(stand_in(node_def.name, tensor, node_def.device))
            continue
        copy = type(node_def)()
        copy.CopyFrom(node_def)
        _rewire(copy, inputs, member_of, remap)
        nodes.append(copy)
    for engine in engines:
        nodes.append(_call_node(graph_def, engine, engine_dtypes[engine.name], member_of, remap,
                                consts))
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    for node in _reachable(nodes, fetch_nodes):
        out.node.append(node)
        if weights is not None and node.name in lifted:
            weights[node.name] = lifted[node.name]
    return out


def _call_node(graph_def: GraphDef, engine: EngineInfo, dtypes: tuple[list[str], list[str]],
               member_of: dict[str, str], remap: dict[TensorRef, str], consts: set[str]
               ) -> NodeDef:
    from tensorflow.core.framework import node_def_pb2

    members = set(engine.nodes)
    controls = {
        text: None
        for node_def in graph_def.node if node_def.name in members
        for text in node_def.input
        if text.startswith("^") and text[1:] not in members and text[1:] not in consts
    }
    node = node_def_pb2.NodeDef(name=engine.name, op="PartitionedCall")
    _rewire(node, [*engine.inputs, *controls], member_of, remap)
    node.attr["Tin"].list.type.extend(dtype_enum(t) for t in dtypes[0])
    node.attr["Tout"].list.type.extend(dtype_enum(t) for t in dtypes[1])
    node.attr["f"].func.name = native_function_name(engine.name)
    return node


def _rewire(node: NodeDef, inputs: list[str], member_of: dict[str, str],
            remap: dict[TensorRef, str]) -> None:
    """Inputs from segment members now come from their engine's outputs."""
    del node.input[:]
    seen_controls = set()
    for text in inputs:
        if text.startswith("^"):
            source = member_of.get(text[1:], text[1:])
            if source != node.name and source not in seen_controls:
                seen_controls.add(source)
                node.input.append("^" + source)
            continue
        ref = TensorRef.parse(text)
        if ref.node in member_of:
            if ref not in remap:
                raise WorkbenchError(f"{node.name} reads {ref}, which is inside "
                                     f"{member_of[ref.node]} but not one of its outputs")
            node.input.append(remap[ref])
        else:
            node.input.append(text)


def _reachable(nodes: list[Any], fetch_nodes: Sequence[str]) -> list[Any]:
    by_name = {n.name: n for n in nodes}
    keep: set[str] = set()
    stack = [name for name in fetch_nodes if name in by_name]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        for text in by_name[name].input:
            source = TensorRef.parse(text.lstrip("^")).node
            if source in by_name and source not in keep:
                stack.append(source)
    return [n for n in nodes if n.name in keep]


def _native_graph_def(segment: SegmentGraph, weights: Sequence[str],
                      variables: frozenset[str] = frozenset()) -> GraphDef:
    """The GraphDef the `<engine>_native_segment` function is made of: the Consts named in
    `weights` become its trailing arguments (`TensorRTWeightPH_<i>`, for the caller to feed),
    made from the lifted form (the segment's GraphDef is then not made)."""
    return (_consts_as_arguments(segment.lifted(), weights, segment.engine.name, variables)
            if weights else segment.graph_def)


def _function_def_of(segment: SegmentGraph, graph_def: GraphDef, weights: int) -> FunctionDef:
    """The native segment function of `graph_def`: placeholders become arguments (then
    `weights` weight arguments), the output Identities' inputs its results."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    names = [*segment.input_names, *(f"{WEIGHT_PREFIX}{i}" for i in range(weights))]
    inputs = [graph.get_tensor_by_name(f"{n}:0") for n in names]
    identities = [graph.get_operation_by_name(n) for n in segment.output_names]
    outputs = [op.inputs[0] for op in identities]
    skip = {op.name for op in identities}
    operations = [op for op in graph.get_operations() if op.name not in skip]
    fdef = graph_to_function_def(graph, operations, inputs, outputs,
                                 out_names=[n.lower() for n in segment.output_names])
    fdef.signature.name = native_function_name(segment.engine.name)
    return fdef


def _consts_as_arguments(lifted: LiftedGraph, weights: Sequence[str],
                         segment_name: str = "", variables: frozenset[str] = frozenset()
                         ) -> GraphDef:
    """The segment's GraphDef with the Consts named in `weights` as argument Placeholders,
    made from its lifted form: its weights are not copied (a large Const not fed is put back).
    A Const named in `variables` (one that was a variable, graph/variables.py) reads the
    variable its argument brings."""
    from tensorflow.core.framework import graph_pb2

    from workbench.engines.weights import stand_in

    renamed = {name: f"{WEIGHT_PREFIX}{i}" for i, name in enumerate(weights)}
    reads = dict(renamed)  # what a fed Const's consumers read
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(lifted.graph_def.versions)
    out.library.CopyFrom(lifted.graph_def.library)
    for node in lifted.graph_def.node:
        tensor = lifted.weights.get(node.name)
        op = variable_op(node) if node.name in variables else None
        if node.name in renamed and op:  # a variable: its native segment reads it again
            value = node.attr["value"].tensor if tensor is None else tensor
            out.node.extend(variable_nodes(node.name, renamed[node.name], value, op,
                                           shared_name=f"{segment_name}/{node.name}"))
            reads[node.name] = read_name(node.name, op)
            continue
        if node.name in renamed:
            out.node.append(stand_in(renamed[node.name], tensor))
            continue
        if tensor is not None:  # one repeated value: small, kept a Const
            const = out.node.add(name=node.name, op="Const", device=node.device)
            const.attr["dtype"].type = tensor.dtype
            const.attr["value"].tensor.CopyFrom(tensor)
            continue
        copy = out.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        for text in node.input:
            ref = TensorRef.parse(text.lstrip("^"))
            if ref.node not in renamed:
                copy.input.append(text)
            elif not text.startswith("^"):
                copy.input.append(reads[ref.node])
    return out


def engines_in_loops(converted: GraphDef) -> set[str]:
    """Names of the nodes of a converted GraphDef that run inside a while loop's frame.

    A function called there must not be inlined: TensorFlow would put the function's
    input-less nodes (its Consts) in the outer frame, and a node may not read two frames.
    """
    if not any(node.op in NEXT_ITERATION_OPS for node in converted.node):
        return set()
    graph = graph_from_graph_def(converted)
    frames = loop_frames(graph)
    return {node.name for node in graph.real_nodes if frames.in_loop(node.name)}


def with_native_functions(converted: GraphDef, segments: Sequence[SegmentGraph],
                          weights: dict[str, list[str]] | None = None,
                          variables: frozenset[str] = frozenset()) -> GraphDef:
    """The converted GraphDef with every native segment function in its library; `weights`
    names, by engine, the Consts its function takes as arguments (see _native_graph_def)."""
    from tensorflow.core.framework import graph_pb2

    out = graph_pb2.GraphDef()
    out.CopyFrom(converted)
    present = {f.signature.name for f in out.library.function}
    in_loops = engines_in_loops(converted)
    for segment in segments:
        fed = (weights or {}).get(segment.engine.name, ())
        graph_def = _native_graph_def(segment, fed, variables)
        fdef = _function_def_of(segment, graph_def, len(fed))
        if segment.engine.name in in_loops:
            fdef.attr[NOINLINE].b = True
        if fdef.signature.name not in present:
            out.library.function.append(fdef)
        for nested in graph_def.library.function:  # not segment.graph_def's: made, it is held
            if nested.signature.name not in present:
                out.library.function.append(nested)
                present.add(nested.signature.name)
    return out


def converted_function_def(function: FunctionDef, body: FunctionBody,
                           segments: Sequence[SegmentGraph]) -> FunctionDef:
    """A library function with its engines in place (TF-TRT's converted function item).

    `body` is the `FunctionBody` the engines were found in and `segments` their SegmentGraphs:
    the body is rewritten as the top-level graph is (`converted_graph_def`), then turned back
    into a FunctionDef with the function's name, signature order and attributes."""
    engines = [s.engine for s in segments]
    dtypes = {s.engine.name: ([x.dtype for x in s.input_specs],
                              [x.dtype for x in s.output_specs]) for s in segments}
    rewritten = with_native_functions(
        converted_graph_def(body.graph_def, engines, dtypes, [*body.args, *body.results]),
        segments)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(rewritten, name="")
    results = set(body.results)
    fdef = graph_to_function_def(
        graph, [op for op in graph.get_operations() if op.name not in results],
        [graph.get_tensor_by_name(f"{arg}:0") for arg in body.args],
        [graph.get_operation_by_name(r).inputs[0] for r in body.results],
        out_names=[arg.name for arg in function.signature.output_arg])
    fdef.signature.name = function.signature.name
    for key, value in function.attr.items():
        fdef.attr[key].CopyFrom(value)
    return fdef


# A caller of a function that now runs engines (stateful numpy_function calls) must be
# stateful too, or TensorFlow may prune or fold the call.
_STATEFUL_CALLERS = {"PartitionedCall": "StatefulPartitionedCall", "StatelessIf": "If",
                     "StatelessWhile": "While", "StatelessCase": "Case"}


def _with_engine_calls(graph_def: GraphDef, engine_functions: dict[str, Any]) -> GraphDef:
    """`graph_def` with each engine node, top-level or inside a library function, calling its
    engine function. A library function so rewritten (and every function calling it) gets a
    name of its own, so it cannot clash with the function of the same name that calls the
    native segments (TensorFlow's function registry is process-wide)."""
    import hashlib

    from tensorflow.core.framework import graph_pb2

    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)

    def call_engines(nodes: Any) -> bool:
        hit = False
        for node in nodes:
            if node.name in engine_functions:
                node.op = "StatefulPartitionedCall"
                node.attr["f"].func.name = engine_functions[node.name].name
                hit = True
        return hit

    call_engines(out.node)
    library = out.library.function
    changed = {f.signature.name for f in library if call_engines(f.node_def)}
    while True:  # the callers of a changed function change too
        callers = {f.signature.name for f in library if f.signature.name not in changed
                   and any(_called(n) & changed for n in f.node_def)}
        if not callers:
            break
        changed |= callers
    if not changed:
        return out
    digest = hashlib.sha1(repr(sorted(str(f.name) for f in engine_functions.values())).encode()
                          ).hexdigest()[:10]
    renamed = {name: f"{name}_engines_{digest}" for name in changed}
    for function in library:
        function.signature.name = renamed.get(function.signature.name, function.signature.name)
        _rename_calls(function.node_def, renamed)
    _rename_calls(out.node, renamed)
    return out


def _called(node: NodeDef) -> set[str]:
    """The functions a node's attributes name."""
    return {ref.name for ref in function_refs([node]) if ref.name}


def _rename_calls(nodes: Any, renamed: dict[str, str]) -> None:
    for node in nodes:
        if not _called(node) & renamed.keys():
            continue
        node.op = _STATEFUL_CALLERS.get(node.op, node.op)
        for ref in function_refs([node]):
            ref.name = renamed.get(ref.name, ref.name)


def engine_function(op: EngineOp, segment: SegmentGraph, inline: bool = True,
                    fallback: bool = True) -> Any:
    """A ConcreteFunction standing for one TRTEngineOp in process: the engine op runs (a
    `numpy_function`) and, when it reports no engine ran, the native segment runs in the same
    graph (a `cond`), never nested inside the Python call, which could starve TensorFlow's
    inter-op threads. `fallback=False` (an engine already built) leaves the `cond` out, which
    halves the cost of a call: a call finding no engine raises `EngineMissError` and the
    converted model reruns it with the branch. Such a call is the compiled engine op where it
    can be (`native_op.engine_call`), the `numpy_function` otherwise. `inline=False` for an
    engine inside a loop (see `engines_in_loops`)."""
    import numpy as np
    tout = [tf.as_dtype(numpy_dtype_name(s.dtype)) for s in segment.output_specs]
    specs = [tf.TensorSpec(None, tf.as_dtype(numpy_dtype_name(s.dtype)))
             for s in segment.input_specs]
    placeholders = [np.zeros((), t.as_numpy_dtype) for t in tout]
    name = segment.engine.name
    # TensorFlow keeps every numpy_function's callable for the process's life (in the eager
    # default graph's `_py_funcs_used_in_graph`): they reach the op weakly, or a deleted
    # model's engines, sessions and prepared graph would stay with them (VGG16: 2.5x).
    engine_op = weakref.ref(op)

    def attempt(*arrays: Any) -> list[Any]:
        outputs = _alive(engine_op, name).try_engine(*arrays)
        return [*(placeholders if outputs is None else outputs), np.bool_(outputs is not None)]

    def engine_only(*arrays: Any) -> list[Any]:
        outputs = _alive(engine_op, name).try_engine(*arrays)
        if outputs is None:
            raise EngineMissError(name)
        return outputs

    compiled = None if fallback else engine_call(op, segment)

    def run(*inputs: Any) -> list[Any]:
        if compiled is not None:
            return compiled(list(inputs))
        if not fallback:
            return tf.numpy_function(engine_only, list(inputs), tout, stateful=True, name=name)
        *outputs, ran = tf.numpy_function(attempt, list(inputs), [*tout, tf.bool],
                                          stateful=True, name=name)

        def native() -> list[Any]:
            captured = [tf.identity(x) for x in inputs]  # brings the inputs into the branch
            return tf.compat.v1.import_graph_def(
                cpu_runnable(segment.graph_def),
                input_map={f"{n}:0": x for n, x in zip(segment.input_names, captured,
                                                         strict=True)},
                return_elements=[f"{n}:0" for n in segment.output_names], name="native")

        return tf.cond(tf.reshape(ran, []), lambda: [tf.identity(o) for o in outputs], native)

    attributes = None if inline else {NOINLINE: True}
    return tf.function(run, input_signature=specs, autograph=False,
                       experimental_attributes=attributes).get_concrete_function()


def _alive(engine_op: weakref.ref[EngineOp], name: str) -> EngineOp:
    op = engine_op()
    if op is None:
        raise WorkbenchError(f"engine {name}: its converted model was deleted; keep the "
                             "ConvertedModel while its function is called")
    return op


def wrap_converted(converted: Any, feeds: Sequence[str], feed_specs: Sequence[Any],
                   fetches: Sequence[str], engine_functions: dict[str, Any] | None = None,
                   captured: dict[str, Any] | None = None) -> Any:
    """A ConcreteFunction of the converted GraphDef taking `feeds` (tensor names, with their
    tf.TensorSpecs) positionally and returning `fetches` as a list. With `engine_functions`,
    engine nodes call them instead of their native segments (which then need not be in the
    library: their fixed names stay out of TensorFlow's process-wide function registry).
    `captured` maps Placeholders (the lifted weights, see `weights.lift_weights`) to eager
    tensors the function captures: as Consts, TensorFlow's function instantiation and
    optimization copied them many times (ConvNeXtLarge: 10 GB for 0.8 GB of weights)."""
    graph_def = _with_engine_calls(converted, engine_functions) if engine_functions else converted
    graph_def = cpu_runnable(graph_def)  # NCHW nodes of a GPU-prepared graph: channels_last.py

    def _import(*args: Any) -> list[Any]:
        for function in (engine_functions or {}).values():
            function.add_to_graph()
        input_map = dict(zip(feeds, args, strict=True))
        # Control inputs on a fed Placeholder (a lowered while loop's Enters hang on it) follow
        # it too: unmapped, they kept the imported Placeholder, which nothing feeds.
        input_map.update({f"^{name.split(':')[0]}": arg
                          for name, arg in zip(feeds, args, strict=True)})
        graph = tf.compat.v1.get_default_graph()
        input_map.update({f"{name}:0": graph.capture(tensor)
                          for name, tensor in (captured or {}).items()})
        return tf.compat.v1.import_graph_def(
            graph_def, input_map=input_map, return_elements=list(fetches), name="")

    return tf.compat.v1.wrap_function(_import, list(feed_specs))


def forget_functions(names: Sequence[str]) -> None:
    """Removes functions from TensorFlow's process-wide registry, where the fixed
    `<engine>_native_segment` names of one model would clash with another model's (their
    owners remove them when collected; this is for owners still alive)."""
    import gc

    if eager.has_functions(names):
        gc.collect()
    eager.remove_functions(names)
