"""Freezing a signature function as TF-TRT did, with the weights kept out of the slow steps.

TF-TRT froze with `convert_variables_to_constants_v2`: Grappler inlines the functions (and
lowers control flow) on the weightless graph, each captured variable's Placeholder becomes a
Const of its value (ReadVariableOp -> Identity, resource inputs of remaining functions become
value inputs), then the GraphDef is imported into a new function. That import, and later
Grappler's serialization, cost time and memory in proportion to the weight bytes (ResNet-50:
8 s of a 10 s freeze). The fast path runs the same TensorFlow steps, but before the import it
swaps each large, non-uniform float weight for a *stand-in*: a Const of the same dtype and shape
holding one repeated value (a few bytes). The import and Grappler only see shapes; the real
tensors go back in afterwards.

Why that is the same graph: the import and the graph copy are structural. Grappler can depend
on values (constant folding, zeros/ones simplifications, merging equal Consts), so
`optimize_with_stand_ins` runs it twice with different stand-in values (equal weights share
one) and keeps the result only when both runs agree node for node and every stand-in comes
out untouched; otherwise Grappler runs again on the real weights. Uniform tensors (all zeros,
all ones: the simplifications look for those) and tensors Grappler would compress are never
stood in, so the real tensors put back are byte for byte what TensorFlow's path leaves there.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import ModelLoadError
from workbench.graph.nodes import element_count

MIN_STAND_IN_ELEMENTS = 1024  # smaller weights stay in: they cost nothing to carry
MAX_RETRIES = 3  # Grappler reruns with fewer stand-ins before it runs on the real weights


# Ops that write a resource variable: a signature with them (Keras' BatchNormalization called
# with training=True updates its moving statistics) cannot be frozen, its variables become
# Consts. TensorFlow's freeze fails with "Input 0 of node .../AssignVariableOp was passed float
# ... incompatible with expected resource".
VARIABLE_WRITE_OPS = frozenset({"AssignVariableOp", "AssignAddVariableOp",
                                "AssignSubVariableOp", "ResourceStridedSliceAssign"})
VARIABLE_WRITE_PREFIXES = ("ResourceScatter", "ResourceApply", "ResourceSparseApply")
CALL_SCOPES = ("StatefulPartitionedCall", "PartitionedCall")  # inlining's name prefixes


class VariableUpdatesError(ModelLoadError):
    """The signature updates variables (a model exported in training mode): not freezable."""


@dataclass
class FrozenGraph:
    """A frozen signature function: its GraphDef (weights as stand-ins on the fast path)."""

    graph_def: Any
    inputs: list[str]  # tensor names
    outputs: list[str]
    weights: dict[str, Any] = field(default_factory=dict)  # stand-in Const -> real TensorProto
    groups: dict[str, int] = field(default_factory=dict)  # stand-in Const -> equal-weights group


def freeze_function(function: Any, fast: bool = True,
                    signature: str = "serving_default") -> FrozenGraph:
    """TF-TRT's freezing of `function` (the model's `signature`); with `fast`, large weights
    become stand-ins."""
    from workbench.tf_private import freezing

    reject_variable_updates(function.graph.as_graph_def(), signature)
    if not fast:
        frozen = freezing.convert_variables_to_constants_v2(function)
        return FrozenGraph(frozen.graph.as_graph_def(), _names(frozen.inputs),
                           _names(frozen.outputs))
    # The steps of convert_variables_to_constants_v2, with stand-ins taken before the import.
    converter = _converter_data(freezing.eager_converter_data())(
        func=function, lower_control_flow=True, aggressive_inlining=False)
    written = hold_out_large_values(converter.tensor_data, converter.graph_def)
    graph_def, converted = freezing.replace_variables_by_constants(converter)
    del converter  # its numpy copies of the weights
    weights, groups = take_weights(graph_def, given=written)
    del written
    frozen = freezing.construct_concrete_function(function, graph_def, converted)
    return FrozenGraph(frozen.graph.as_graph_def(), _names(frozen.inputs),
                       _names(frozen.outputs), weights, groups)


def hold_out_large_values(tensor_data: dict[str, Any], graph_def: Any) -> dict[str, Any]:
    """The large float32 values of TensorFlow's freezing data (`_TensorData` by node name),
    each swapped there for an empty array: its Const is made empty and `take_weights` keeps
    the value apart or writes it in once (`make_tensor_proto` would copy it three times).
    Not with a While left after inlining: TensorFlow's rewrite of it reads the values' shapes."""
    import numpy as np

    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    if any(node.op in ("While", "StatelessWhile") for node in nodes):
        return {}
    held = {}
    for name, data in list(tensor_data.items()):
        if data.numpy.dtype == np.float32 and data.numpy.size > 1:
            held[name] = data.numpy
            tensor_data[name] = data._replace(numpy=np.empty((0,), np.float32))
    return held


def reject_variable_updates(graph_def: Any, signature: str) -> None:
    """Raises `VariableUpdatesError` naming the layers when `graph_def` (its functions
    included) writes variables: a serving signature that updates variables cannot be frozen."""
    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    writes = [node for node in nodes if node.op in VARIABLE_WRITE_OPS
              or node.op.startswith(VARIABLE_WRITE_PREFIXES)]
    if not writes:
        return
    layers = list(dict.fromkeys(_layer_scope(node.name) for node in writes))
    shown = ", ".join(layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")
    raise VariableUpdatesError(
        f"Signature {signature!r} updates variables ({writes[0].op} in {shown}): the model was "
        "exported in training mode (e.g. BatchNormalization called with training=True), and "
        "a graph that updates its variables cannot be frozen for inference. Re-export it for "
        "inference: call the model with training=False in the serving function, or use "
        "model.export(path).")


def _layer_scope(node_name: str) -> str:
    """The name scope of a node (its layer), without the scopes inlining prefixes."""
    parts = [p for p in node_name.split("/")[:-1] if not p.startswith(CALL_SCOPES)]
    return "/".join(parts) or node_name


def _converter_data(base: type) -> type:
    """TensorFlow's eager converter data, reading each variable without `.numpy()`'s copy
    (the bytes are only read, into the Const; VGG16: 1.3 s and 528 MB less)."""

    class ConverterData(base):
        def _eval(self, tensor: Any) -> Any:
            value = tensor.read_value() if hasattr(tensor, "read_value") else tensor
            return value._numpy() if hasattr(value, "_numpy") else value.numpy()

    return ConverterData


def _names(tensors: Any) -> list[str]:
    return [tensor.name for tensor in tensors]


# --- stand-ins ----------------------------------------------------------------------------


def take_weights(graph_def: Any, given: dict[str, Any] | None = None
                 ) -> tuple[dict[str, Any], dict[str, int]]:
    """Replaces every eligible Const by its stand-in (value set A); returns the real weights
    (float32 arrays) by node name and each one's group (weights with equal bytes share one).

    `given` holds values of Consts written empty (the freezing's large float32 values): they
    are taken as they are, without ever being copied into their Const, and the ineligible
    ones are written in."""
    import numpy as np

    given = given or {}
    weights: dict[str, Any] = {}
    groups: dict[str, int] = {}
    firsts: dict[tuple, list[str]] = {}  # (shape, crc32) -> first node of each group
    folded = _feeds_constant_computation(graph_def)
    for node in graph_def.node:
        if node.op != "Const":
            continue
        tensor = node.attr["value"].tensor
        value = given.get(node.name)
        if value is None and node.name not in folded:
            value = _float_weight(tensor)
        if value is None or node.name in folded or not _eligible(value):
            if node.name in given:
                write_weight(tensor, given[node.name])
            continue
        key = (value.shape, zlib.crc32(np.ascontiguousarray(value).view(np.uint8)))
        same = [n for n in firsts.get(key, []) if np.array_equal(weights[n], value)]
        if same:
            groups[node.name] = groups[same[0]]
        else:
            groups[node.name] = sum(len(names) for names in firsts.values())
            firsts.setdefault(key, []).append(node.name)
        weights[node.name] = value
        tensor.CopyFrom(stand_in(value, groups[node.name], second=False))
    return weights, groups


def _float_weight(tensor: Any) -> Any:
    """A large float32 Const's value (its bytes copied out), or None."""
    import numpy as np
    from tensorflow.core.framework import types_pb2

    count = element_count(tensor)
    if tensor.dtype != types_pb2.DT_FLOAT or count < MIN_STAND_IN_ELEMENTS:
        return None
    content = tensor.tensor_content  # each read of the field copies the bytes
    if len(content) != 4 * count:
        return None
    return np.frombuffer(content, np.float32).reshape([d.size for d in tensor.tensor_shape.dim])


def write_weight(tensor: Any, value: Any) -> None:
    """`value` (float32) into `tensor` as `make_tensor_proto` writes it: dtype, shape, the
    C-order bytes as `tensor_content`."""
    _write_content(tensor, value.shape, value.tobytes())


def _write_content(tensor: Any, shape: tuple[int, ...], content: bytes) -> None:
    from tensorflow.core.framework import types_pb2

    tensor.Clear()
    tensor.dtype = types_pb2.DT_FLOAT
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    tensor.tensor_content = content


def _feeds_constant_computation(graph_def: Any) -> set[str]:
    """Consts that feed (through Identity) a node all of whose inputs are constant: constant
    folding computes with their values (Keras' batch-norm arithmetic, reshaped biases), so
    standing them in would only make the two Grappler runs disagree."""
    consumers: dict[str, list[str]] = {}
    pending: dict[str, int] = {}
    for node in graph_def.node:
        data = [text.split(":")[0] for text in node.input if not text.startswith("^")]
        pending[node.name] = len(data)
        for source in data:
            consumers.setdefault(source, []).append(node.name)
    ops = {node.name: node.op for node in graph_def.node}
    constant = [name for name, op in ops.items() if op == "Const"]
    seen = set(constant)
    while constant:  # a node is constant once all its data inputs are
        for consumer in consumers.get(constant.pop(), []):
            pending[consumer] -= 1
            if pending[consumer] == 0 and consumer not in seen:
                seen.add(consumer)
                constant.append(consumer)
    folded = set()
    for name, op in ops.items():
        if op != "Const":
            continue
        frontier = list(consumers.get(name, []))
        while frontier:
            consumer = frontier.pop()
            if ops[consumer] == "Identity":
                frontier.extend(consumers.get(consumer, []))
            elif consumer in seen:
                folded.add(name)
                break
    return folded


def _eligible(value: Any) -> bool:
    """A float32 weight neither uniform nor compressible: Grappler keeps such a tensor's bytes
    as they are unless it computes with them."""
    import numpy as np

    count = value.size
    if count < MIN_STAND_IN_ELEMENTS:
        return False
    # Grappler's CompressConstants rewrites a tensor whose trailing run of one repeated value
    # covers half of it or more; bits, not floats, so -0.0 and NaNs count as TensorFlow does.
    bits = np.ascontiguousarray(value).view(np.uint32).ravel()
    return bool(bits[count // 2] != bits[-1] or np.any(bits[count // 2:] != bits[-1]))


def stand_in(real: Any, group: int, second: bool) -> Any:
    """A Const value of `real`'s dtype and shape that repeats one value: distinct per group,
    and different in the second run (never 0 or 1, which Grappler's simplifications seek)."""
    from tensorflow.core.framework import tensor_pb2, types_pb2

    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    for size in real.shape:
        tensor.tensor_shape.dim.add(size=size)
    tensor.float_val.append(-3.0 - group / 1024 if second else 2.0 + group / 1024)
    return tensor


def optimize_with_stand_ins(frozen: FrozenGraph,
                            run: Callable[[Any], Any]) -> tuple[Any, Any | None]:
    """`run` (Grappler) on the stand-in graph, checked by a second run with other stand-in
    values. Returns (optimized graph with the real weights, the stand-in optimized graph), or
    (Grappler's result on the real weights, None) when the runs keep disagreeing.

    A stand-in that a run dropped or changed had its value used (e.g. constant folding's
    Mul-into-Conv2D rewrite folds a kernel); it goes back to its real value and both runs
    are redone, a few times at most."""
    from tensorflow.core.framework import graph_pb2

    for _ in range(MAX_RETRIES + 1):
        first = run(frozen.graph_def)
        second_input = graph_pb2.GraphDef()
        second_input.CopyFrom(frozen.graph_def)
        _set_stand_ins(second_input, frozen, second=True)
        second = run(second_input)
        used = _used_stand_ins(first, frozen, False) | _used_stand_ins(second, frozen, True)
        if not used and _same_but_stand_ins(first, second, frozen):
            result = graph_pb2.GraphDef()
            result.CopyFrom(first)
            put_weights(result, frozen.weights)
            return result, first
        if not used:
            break
        put_weights(frozen.graph_def, {name: frozen.weights.pop(name) for name in used})
    put_weights(frozen.graph_def, frozen.weights)
    return run(frozen.graph_def), None


def _used_stand_ins(result: Any, frozen: FrozenGraph, second: bool) -> set[str]:
    """The stand-ins `result` lacks or holds changed."""
    kept = {node.name for node in result.node if node.name in frozen.weights
            and node.op == "Const" and node.attr["value"].tensor == stand_in(
                frozen.weights[node.name], frozen.groups[node.name], second)}
    return set(frozen.weights) - kept


def _set_stand_ins(graph_def: Any, frozen: FrozenGraph, second: bool) -> None:
    for node in graph_def.node:
        if node.name in frozen.weights:
            node.attr["value"].tensor.CopyFrom(
                stand_in(frozen.weights[node.name], frozen.groups[node.name], second))


def _same_but_stand_ins(first: Any, second: Any, frozen: FrozenGraph) -> bool:
    """Both results are one graph but for the stand-ins' values."""
    from tensorflow.core.framework import graph_pb2

    if len(first.node) != len(second.node):
        return False
    masked = []
    for result in (first, second):
        copy = graph_pb2.GraphDef()
        copy.CopyFrom(result)
        for node in copy.node:
            if node.name in frozen.weights:
                node.attr["value"].tensor.Clear()
        masked.append(copy)
    return masked[0] == masked[1]


def put_weights(graph_def: Any, weights: dict[str, Any]) -> None:
    """Moves the real weights back in place of their stand-ins: each leaves `weights` as it
    goes in, so the bytes are held about once (plus the one weight being written)."""
    for node in graph_def.node:
        if node.name in weights:
            content = weights[node.name].tobytes()
            shape = weights.pop(node.name).shape  # the array goes before its bytes are copied
            _write_content(node.attr["value"].tensor, shape, content)
            del content
