"""Freezing a SavedModel's signature straight from its protos and checkpoint.

TF-TRT froze a loaded signature function with `convert_variables_to_constants_v2`; loading it
(`tf.saved_model.load`: every function rebuilt as a Python graph, every variable restored) and
the freeze's last step (importing the frozen GraphDef and copying it op by op into a pruned
function, `lift_to_graph`) are Python work per op: ResNet-50, about 2.3 of a 3 s cold
convert().
Here the same graph is built on the protos:

1. the signature's function: the object graph names its concrete function and the objects it
   captures (`bound_inputs`); its FunctionDef becomes a GraphDef as TensorFlow's import makes
   it (a Placeholder per argument, default attrs, no `_output_shapes`), with the functions it
   calls as its library;
2. TensorFlow's function inlining and control-flow lowering (Grappler, as the freeze runs it);
3. TensorFlow's own variables-to-Consts rewrite (`_replace_variables_by_constants`), fed with
   the values read from the checkpoint (a variable's key found through the checkpoint's object
   graph, large float32 weights written into their Consts once) and the SavedModel's
   captured constants;
4. the import and pruning `lift_to_graph` does, on NodeDefs: the nodes the outputs depend on,
   in its order, with its attrs (defaults added, `_class` dropped, inputs' Placeholders
   rebuilt, `_has_manual_control_dependencies` on every node a control edge leaves).

`tests/graph/test_freeze.py` checks the prepared graph is TensorFlow's on every sample model.
What this path does not know (a TF1 SavedModel, captured tables or assets,
resource ops left after inlining) raises `NotDirect`, and TensorFlow freezes instead.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from workbench.graph.freeze import (
    FrozenGraph,
    hold_out_large_values,
    reject_variable_updates,
    take_weights,
)
from workbench.graph.function_library import function_refs, rename_changed_functions
from workbench.graph.variables import variable_origins
from workbench.lazy import tf
from workbench.tf_private import freezing, grappler
from workbench.tf_private.function_defs import op_def

CHECKPOINT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VARIABLE_VALUE = "VARIABLE_VALUE"
DROPPED_ATTR_PREFIXES = ("_class", "_tpu_replicate")  # lift_to_graph does not copy these
MANUAL_CONTROL_ATTR = "_has_manual_control_dependencies"


class NotDirect(Exception):
    """The model needs TensorFlow's own load and freezing; the message says why."""


def freeze_saved_model(path: Path, meta_graph: Any, signature_key: str,
                       timings: dict[str, float] | None = None) -> FrozenGraph:
    """The frozen signature function of the SavedModel at `path`, large weights as stand-ins
    (graph/freeze.py), as `convert_variables_to_constants_v2` of the loaded signature.
    `timings` gets the checkpoint's reading time as `read_weights_s`."""
    from tensorflow.core.framework import function_pb2

    name, bound = _signature_function(meta_graph, signature_key)
    library = {f.signature.name: f for f in meta_graph.graph_def.library.function}
    graph_def, inputs, outputs = function_graph_def(library, name)
    start = time.perf_counter()
    values = _captured_values(path, meta_graph, bound)
    if timings is not None:
        timings["read_weights_s"] = time.perf_counter() - start
    captured = inputs[len(inputs) - len(bound):] if bound else []
    feeds = inputs[:len(inputs) - len(bound)]
    inlined = _inline(graph_def, inputs + outputs)
    reject_variable_updates(inlined, signature_key)
    frozen, written = _to_constants(inlined, captured, values)
    del values  # the large ones live on in `written`, then as the weights
    weights, groups = take_weights(frozen, given=written)
    pruned = prune(frozen, feeds, outputs)
    # Functions kept (not inlined) get names of their content: the saved names are only
    # unique within their SavedModel, and TensorFlow registers them process-wide.
    rename_changed_functions(pruned, function_pb2.FunctionDefLibrary())
    return FrozenGraph(pruned, feeds, outputs, weights, groups, variable_origins(inlined))


# --- the signature's function -------------------------------------------------------------


def _signature_function(meta_graph: Any, key: str) -> tuple[str, list[int]]:
    """The signature's concrete function name and the object graph nodes it captures."""
    objects = meta_graph.object_graph_def
    if not objects.nodes:
        raise NotDirect("a TF1 SavedModel, without an object graph")
    signatures = _child(objects.nodes[0], "signatures")
    node = None if signatures is None else _child(objects.nodes[signatures], key)
    if node is None or objects.nodes[node].WhichOneof("kind") != "bare_concrete_function":
        raise NotDirect(f"the object graph does not hold signature {key!r} as a function")
    name = objects.nodes[node].bare_concrete_function.concrete_function_name
    if name not in objects.concrete_functions:
        raise NotDirect(f"the object graph does not describe function {name}")
    return name, list(objects.concrete_functions[name].bound_inputs)


def _child(node: Any, local_name: str) -> int | None:
    return next((c.node_id for c in node.children if c.local_name == local_name), None)


def function_graph_def(library: dict[str, Any], name: str) -> tuple[Any, list[str], list[str]]:
    """Function `name` as the GraphDef of its function graph: one Placeholder per argument,
    its nodes with GraphDef-style inputs, the functions it calls (transitively) as library.
    Returns (graph_def, input tensor names, output tensor names)."""
    from tensorflow.core.framework import graph_pb2

    fdef = library[name]
    graph_def = graph_pb2.GraphDef()
    graph_def.versions.producer = tf.version.GRAPH_DEF_VERSION
    graph_def.versions.min_consumer = tf.version.GRAPH_DEF_VERSION_MIN_CONSUMER
    shapes = _input_shapes(fdef)
    for index, arg in enumerate(fdef.signature.input_arg):
        node = graph_def.node.add(name=arg.name, op="Placeholder")
        node.attr["dtype"].type = arg.type
        if shapes[index] is not None:
            node.attr["shape"].shape.CopyFrom(shapes[index])
        for key, value in fdef.arg_attr[index].attr.items():
            if key == "_output_shapes":
                node.attr["shape"].shape.CopyFrom(
                    value.list.shape[0] if value.HasField("list") else value.shape)
            elif key.startswith("_"):
                node.attr[key].CopyFrom(value)
        _as_imported(node)
    flat = {arg.name: f"{arg.name}:0" for arg in fdef.signature.input_arg}
    for node in fdef.node_def:
        flat.update(_flat_output_names(node, library))
    for source in fdef.node_def:
        node = graph_def.node.add()
        node.CopyFrom(source)
        _as_imported(node)
        for i, text in enumerate(node.input):
            node.input[i] = _graph_input(text, flat)
    for called in _called_functions(fdef.node_def, library):
        function = graph_def.library.function.add()
        function.CopyFrom(library[called])
        function.attr.pop("_input_shapes", None)
        for node in function.node_def:
            _as_imported(node)
    inputs = [f"{arg.name}:0" for arg in fdef.signature.input_arg]
    outputs = [flat[fdef.ret[arg.name]] for arg in fdef.signature.output_arg]
    return graph_def, inputs, outputs


def _input_shapes(fdef: Any) -> list[Any]:
    """Each argument's shape as TensorFlow's function import takes it (resource handles get
    none)."""
    from tensorflow.core.framework import types_pb2

    shapes: list[Any] = [None] * len(fdef.signature.input_arg)
    if "_input_shapes" in fdef.attr:
        for i, (shape, arg) in enumerate(zip(fdef.attr["_input_shapes"].list.shape,
                                             fdef.signature.input_arg, strict=False)):
            if not (arg.type == types_pb2.DT_RESOURCE and arg.handle_data):
                shapes[i] = shape
    return shapes


def _flat_output_names(node: Any, library: dict[str, Any]) -> dict[str, str]:
    """A FunctionDef node's output names (`node:arg:i`) -> GraphDef names (`node:k`)."""
    op_def = _op_def(node.op, library)
    if op_def is None:
        raise NotDirect(f"op {node.op} is not registered in this TensorFlow")
    names, flat = {}, 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            count = node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node.attr[arg.type_list_attr].list.type)
        else:
            count = 1
        for i in range(count):
            names[f"{node.name}:{arg.name}:{i}"] = f"{node.name}:{flat}"
            flat += 1
    return names


def _op_def(op: str, library: dict[str, Any]) -> Any:
    return library[op].signature if op in library else op_def(op)


def _graph_input(text: str, flat: dict[str, str]) -> str:
    if text.startswith("^"):
        return text
    name = flat.get(text)
    if name is None:
        raise NotDirect(f"cannot resolve input {text!r} of the signature's function")
    return name.removesuffix(":0")  # a GraphDef names output 0 by the node alone


def _called_functions(nodes: Any, library: dict[str, Any]) -> list[str]:
    """The library functions `nodes` call, directly or through other functions, in order of
    first call."""
    found: list[str] = []
    pending = [nodes]
    while pending:
        for node in pending.pop(0):
            for name in _callees(node):
                if name in library and name not in found:
                    found.append(name)
                    pending.append(library[name].node_def)
    return found


def _callees(node: Any) -> list[str]:
    return [node.op, *(ref.name for ref in function_refs([node]))]  # a function can be an op


def _as_imported(node: Any) -> None:
    """A NodeDef as TensorFlow's import leaves it: default attrs set, `_output_shapes` gone."""
    node.attr.pop("_output_shapes", None)
    registered = op_def(node.op)
    if registered is None:
        return  # a library function: no attrs of its own
    if any(a.name == "shared_name" for a in registered.attr):
        raise NotDirect(f"the signature creates a resource ({node.op} {node.name})")
    for attr in registered.attr:
        if attr.HasField("default_value") and attr.name not in node.attr:
            node.attr[attr.name].CopyFrom(attr.default_value)


# --- captured values ----------------------------------------------------------------------


def _captured_values(path: Path, meta_graph: Any, bound: list[int]) -> list[Any]:
    """The value of each captured object: a variable's from the checkpoint, a constant's from
    the SavedModel's graph."""
    objects = meta_graph.object_graph_def
    kinds = [objects.nodes[i].WhichOneof("kind") for i in bound]
    other = sorted({k for k in kinds if k not in ("variable", "constant")})
    if other:
        raise NotDirect(f"the signature captures a {', '.join(other)}")
    keys = _checkpoint_keys(path, objects, bound) if "variable" in kinds else {}
    reader = _checkpoint_reader(path) if keys else None
    consts = {n.name: n for n in meta_graph.graph_def.node if n.op == "Const"}
    values = []
    for node_id, kind in zip(bound, kinds, strict=True):
        if kind == "variable":
            values.append(reader.get_tensor(keys[node_id]))
            continue
        operation = objects.nodes[node_id].constant.operation
        if operation not in consts:
            raise NotDirect(f"captured constant {operation} is not in the SavedModel's graph")
        values.append(tf.make_ndarray(consts[operation].attr["value"].tensor))
    return values


def _checkpoint_reader(path: Path) -> Any:
    try:
        return tf.train.load_checkpoint(str(path / "variables" / "variables"))
    except Exception as exc:  # TF raises many types; the fallback names it
        raise NotDirect(f"cannot read the checkpoint ({type(exc).__name__})") from None


def _checkpoint_keys(path: Path, objects: Any, bound: list[int]) -> dict[int, str]:
    """Each captured variable's checkpoint key: the object graphs of the SavedModel and of
    the checkpoint walked together from the root by child names, as a restore matches them."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    checkpoint = trackable_object_graph_pb2.TrackableObjectGraph()
    checkpoint.ParseFromString(_checkpoint_reader(path).get_tensor(CHECKPOINT_GRAPH_KEY))
    matched = {0: 0}
    pending = [0]
    while pending:
        saved_id = pending.pop()
        children = {c.local_name: c.node_id for c in checkpoint.nodes[matched[saved_id]].children}
        for child in objects.nodes[saved_id].children:
            if child.node_id not in matched and child.local_name in children:
                matched[child.node_id] = children[child.local_name]
                pending.append(child.node_id)
    keys = {}
    for node_id in bound:
        if objects.nodes[node_id].WhichOneof("kind") != "variable":
            continue
        attributes = checkpoint.nodes[matched[node_id]].attributes if node_id in matched else []
        key = next((a.checkpoint_key for a in attributes if a.name == VARIABLE_VALUE), None)
        if key is None:
            raise NotDirect("a captured variable has no value in the checkpoint")
        keys[node_id] = key
    return keys


# --- TensorFlow's steps on the GraphDef ---------------------------------------------------


def _inline(graph_def: Any, fetches: list[str]) -> Any:
    """Grappler's function inlining and control-flow lowering, configured as TensorFlow's
    freezing runs it (`_run_inline_graph_optimization`)."""
    from tensorflow.core.protobuf import config_pb2

    for function in graph_def.library.function:
        function.attr.pop("api_implements", None)  # would keep Keras' LSTM from inlining
    meta_graph = grappler.export_meta_graph(graph_def)
    meta_graph.collection_def["train_op"].node_list.value.extend(fetches)
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.min_graph_nodes = -1
    config.graph_options.rewrite_options.optimizers.append("function")
    return grappler.optimize_graph(config, meta_graph)


def _to_constants(graph_def: Any, captured: list[str], values: list[Any]
                  ) -> tuple[Any, dict[str, Any]]:
    """TensorFlow's variables-to-Consts rewrite with the captured values; returns the graph
    and the values of its Consts left empty, by node name.

    Its Consts are built with `make_tensor_proto`, which copies a weight's bytes three times
    (VGG16: 1.7 s); the large values are held out (`hold_out_large_values`)."""
    names = [name.split(":")[0] for name in captured]
    data = SimpleNamespace(graph_def=graph_def, tensor_data={
        name: freezing.tensor_data(value, tf.dtypes.as_dtype(value.dtype).as_datatype_enum, i)
        for i, (name, value) in enumerate(zip(names, values, strict=True))})
    written = hold_out_large_values(data.tensor_data, graph_def)
    converted, _ = freezing.replace_variables_by_constants(data)
    return converted, written


# --- lift_to_graph on NodeDefs ------------------------------------------------------------


def prune(graph_def: Any, feeds: list[str], fetches: list[str]) -> Any:
    """What importing `graph_def` and pruning it to `feeds` -> `fetches` gives
    (`wrap_function.function_from_graph_def`, i.e. `lift_to_graph`), as a GraphDef."""
    from tensorflow.core.framework import graph_pb2

    with tf.Graph().as_default() as imported:  # attrs as TensorFlow's import sets them
        tf.graph_util.import_graph_def(graph_def, name="")
    graph_def = imported.as_graph_def()
    nodes = {node.name: node for node in graph_def.node}
    sources = [name.split(":")[0] for name in feeds]
    consumers = _subgraph(nodes, sources, [name.split(":")[0] for name in fetches])
    order = _lift_order(nodes, consumers, [name.split(":")[0] for name in fetches])
    result = graph_pb2.GraphDef()
    result.versions.CopyFrom(graph_def.versions)
    copied = {}
    for name in sources:
        copied[name] = _placeholder(result, nodes[name])
    control_targets = set()
    for name in order:
        if name in copied:
            continue
        copied[name] = node = result.node.add()
        control_targets.update(_copy_node(nodes[name], node))
    for name in control_targets:
        copied[name].attr[MANUAL_CONTROL_ATTR].b = True
    result.library.CopyFrom(graph_def.library)
    return result


def _inputs(node: Any) -> list[str]:
    """The producers of `node`'s inputs, data inputs first (`op_selector.graph_inputs`)."""
    return [text.lstrip("^").split(":")[0] for text in node.input]


def _subgraph(nodes: dict[str, Any], sources: list[str],
              ends: list[str]) -> dict[str, set[str]]:
    """The ops between `sources` and `ends` (`op_selector.map_subgraph`): each one's consumers
    within the subgraph. A Placeholder that is not a source cannot be lifted."""
    consumers: dict[str, set[str]] = defaultdict(set)
    visited = set(sources)
    for end in ends:
        pending = [end]
        while pending:
            name = pending.pop()
            if name in visited:
                continue
            visited.add(name)
            if nodes[name].op == "Placeholder":
                raise NotDirect(f"the frozen graph still has an input {name}")
            for source in _inputs(nodes[name]):
                consumers[source].add(name)
                if source not in visited:
                    pending.append(source)
    return consumers


def _lift_order(nodes: dict[str, Any], consumers: dict[str, set[str]],
                ends: list[str]) -> list[str]:
    """lift_to_graph's copy order: a depth-first walk from the ends that takes an op once all
    its consumers are taken, then reversed, with the ops without inputs first."""
    taken: list[str] = []
    marked: set[str] = set()
    stack = [end for end in ends if not consumers[end]]
    unvisited = set(stack)
    while unvisited:
        while stack:
            name = stack.pop()
            if name in marked:
                continue
            marked.add(name)
            taken.append(name)
            for source in _inputs(nodes[name]):
                unvisited.add(source)
                if consumers[source] <= marked:
                    stack.append(source)
        unvisited -= marked
        if unvisited:  # a loop: TensorFlow continues from an arbitrary op
            stack.append(min(unvisited))
    taken.sort(key=lambda name: not nodes[name].input)
    return taken[::-1]


def _placeholder(graph_def: Any, source: Any) -> Any:
    """An input rebuilt as `array_ops.placeholder` makes it: dtype and shape only."""
    node = graph_def.node.add(name=source.name, op="Placeholder", device=source.device)
    node.attr["dtype"].CopyFrom(source.attr["dtype"])
    if "shape" in source.attr:
        node.attr["shape"].CopyFrom(source.attr["shape"])
    else:
        node.attr["shape"].shape.unknown_rank = True
    return node


def _copy_node(source: Any, node: Any) -> set[str]:
    """`source` copied as `graph.create_op` copies it (a control input that is also a data
    input dropped; GraphDefs list control inputs by name); returns its control inputs, which
    TensorFlow marks with `_has_manual_control_dependencies` (the dropped ones too)."""
    node.name, node.op, node.device = source.name, source.op, source.device
    data = [text.removesuffix(":0") for text in source.input if not text.startswith("^")]
    producers = {text.split(":")[0] for text in data}
    controls = {text[1:] for text in source.input if text.startswith("^")}
    node.input.extend(data + [f"^{name}" for name in sorted(controls - producers)])
    for key, value in source.attr.items():
        if not key.startswith(DROPPED_ATTR_PREFIXES):
            node.attr[key].CopyFrom(value)
    if source.HasField("experimental_type"):
        node.experimental_type.CopyFrom(source.experimental_type)
    return controls

