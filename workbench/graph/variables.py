"""Which Consts of a frozen graph were variables: TF-TRT's `disable_graph_freezing`.

With `TF_TRT_EXPERIMENTAL_FEATURES=disable_graph_freezing` (dynamic shape only) TF-TRT did not
freeze: its segmenter saw each variable read (a TF2 model's `ReadVariableOp` of a captured
resource, a TF1 model's `VariableV2`), its converters read the values at engine build time,
and the native segments kept those nodes. The workbench still segments the frozen graph (the
same values, so the same engines), but marks each Const that was a variable with the variable
op it stands for (`VARIABLE_OP_ATTR`), so the native segments written for it
(engines/runtime/hybrid_graph.py, saved_weights.py) read variables again, as TF-TRT's did.
"""

from __future__ import annotations

from typing import Any

VARIABLE_OP_ATTR = "_workbench_variable_op"  # on a frozen Const: the variable op it replaced
READ_VARIABLE = "ReadVariableOp"
REF_VARIABLE = "VariableV2"
DT_RESOURCE = 20  # types_pb2.DT_RESOURCE


def variable_origins(graph_def: Any) -> dict[str, str]:
    """The variables of an unfrozen function's GraphDef (its top-level nodes), by the node name
    freezing gives their Const: a captured resource Placeholder or a TF1 resource variable's
    `VarHandleOp` is read with `ReadVariableOp`, a TF1 `VariableV2` is itself."""
    origins = {}
    for node in graph_def.node:
        if node.op in ("VariableV2", "Variable"):
            origins[node.name] = REF_VARIABLE
        elif node.op == "VarHandleOp" or (
                node.op == "Placeholder" and node.attr["dtype"].type == DT_RESOURCE):
            origins[node.name] = READ_VARIABLE
    return origins


def mark_variables(graph_def: Any, origins: dict[str, str]) -> None:
    """Marks the Consts of the frozen `graph_def` that were variables."""
    for node in graph_def.node:
        if node.op == "Const" and node.name in origins:
            node.attr[VARIABLE_OP_ATTR].s = origins[node.name].encode()


def variable_op(node: Any) -> str | None:
    """The variable op a marked Const (or the Placeholder lifted in its place) stands for,
    else None."""
    if node.op not in ("Const", "Placeholder") or VARIABLE_OP_ATTR not in node.attr:
        return None
    return node.attr[VARIABLE_OP_ATTR].s.decode()


def variable_nodes(name: str, argument: str, value: Any, op: str, shared_name: str) -> list[Any]:
    """The nodes a native segment function holds for the marked Const `name`, reading the
    variable its argument `argument` brings, as TF-TRT's native segments held them:

    - `ReadVariableOp`: `argument` is the variable's resource handle; `name` reads it (with
      TF-TRT's `_shape` annotation);
    - `VariableV2`: `argument` is the variable's value; `name` is a `VariableV2` that
      `name/Assign` sets to it before `name/read` reads it (a TF1 variable's own layout; the
      variable lives in TensorFlow's resource manager under `shared_name`).
    Consumers read `read_name(name, op)`."""
    from tensorflow.core.framework import node_def_pb2

    dtype, shape = value.dtype, value.tensor_shape
    if op == READ_VARIABLE:
        handle = handle_placeholder(argument)
        read = node_def_pb2.NodeDef(name=name, op="ReadVariableOp", input=[argument])
        read.attr["dtype"].type = dtype
        read.attr["_shape"].shape.CopyFrom(shape)
        return [handle, read]
    given = node_def_pb2.NodeDef(name=argument, op="Placeholder")
    given.attr["dtype"].type = dtype
    given.attr["shape"].shape.CopyFrom(shape)
    variable = node_def_pb2.NodeDef(name=name, op="VariableV2")
    variable.attr["dtype"].type = dtype
    variable.attr["shape"].shape.CopyFrom(shape)
    variable.attr["container"].s = b""
    variable.attr["shared_name"].s = shared_name.encode()
    assign = node_def_pb2.NodeDef(name=f"{name}/Assign", op="Assign", input=[name, argument])
    assign.attr["T"].type = dtype
    assign.attr["validate_shape"].b = True
    assign.attr["use_locking"].b = True
    read = node_def_pb2.NodeDef(name=f"{name}/read", op="Identity",
                                input=[name, f"^{name}/Assign"])
    read.attr["T"].type = dtype
    return [given, variable, assign, read]


def handle_placeholder(name: str) -> Any:
    """A Placeholder bringing a variable's resource handle (a scalar)."""
    from tensorflow.core.framework import node_def_pb2

    node = node_def_pb2.NodeDef(name=name, op="Placeholder")
    node.attr["dtype"].type = DT_RESOURCE
    node.attr["shape"].shape.SetInParent()
    return node


def read_name(name: str, op: str | None) -> str:
    """The tensor a marked Const's consumers read once `variable_nodes` replaced it."""
    return f"{name}/read" if op == REF_VARIABLE else name
