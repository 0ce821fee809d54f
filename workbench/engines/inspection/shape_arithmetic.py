"""Which TF nodes of a segment compute shapes: values that depend only on the shapes of tensors
and on constants (Tensordot's `Shape -> GatherV2 -> Prod -> concat`, a reshape's target
shape). TensorRT computes them from the input shapes, on the host in dynamic shape (its shape
calls), or folds them where shapes are static: they are in no kernel, and not removed work.

Found from the graph, not from op names alone: a node reading only a tensor's shape (`Shape`,
`Size`, `Rank`) starts a shape value; a node all of whose inputs are shape values or constants,
at least one a shape value, is one too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Ops whose value is a function of their input's shape, never of its values.
SHAPE_READERS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
# Ops that make a value from nothing but their attributes.
CONSTANTS = frozenset({"Const", "HostConst"})
# Ops whose value is not a function of their inputs (state, randomness, inputs).
_NOT_FUNCTIONS = frozenset({"Placeholder", "PlaceholderWithDefault", "VarHandleOp",
                            "ReadVariableOp", "VariableV2", "RandomUniform",
                            "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"})


def shape_computations(graph_def: Any) -> set[str]:
    """The nodes of `graph_def` (a GraphDef, or anything with `.node` of NodeDefs) whose value
    is computed from tensor shapes and constants only."""
    return shape_nodes_of((n.name, n.op, list(n.input)) for n in graph_def.node)


def shape_nodes_of(nodes: Iterable[tuple[str, str, list[str]]]) -> set[str]:
    """`shape_computations` over (name, op, inputs) triples; inputs as a GraphDef writes them
    (`node`, `node:1`, `^control`)."""
    table = {name: (op, [_producer(i) for i in inputs if not i.startswith("^")])
             for name, op, inputs in nodes}
    kind: dict[str, str] = {}  # node -> "shape", "constant" or "data"

    def kind_of(name: str) -> str:
        stack = [name]
        while stack:
            node = stack[-1]
            if node in kind:
                stack.pop()
                continue
            op, inputs = table.get(node, ("", []))
            pending = [i for i in inputs if i not in kind and i in table and i not in stack]
            if pending and op not in SHAPE_READERS:
                stack.extend(pending)
                continue
            kind[node] = _kind(op, [kind.get(i, "data") for i in inputs])
            stack.pop()
        return kind[name]

    return {name for name in table if kind_of(name) == "shape"}


def _kind(op: str, inputs: list[str]) -> str:
    if op in SHAPE_READERS:
        return "shape"
    if op in CONSTANTS:
        return "constant"
    if op in _NOT_FUNCTIONS or not op or not inputs or "data" in inputs:
        return "data"
    return "shape" if "shape" in inputs else "constant"


def _producer(tensor: str) -> str:
    """`node:1` -> `node`."""
    name, _, port = tensor.rpartition(":")
    return name if name and port.isdigit() else tensor
