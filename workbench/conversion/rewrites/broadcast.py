"""A `BroadcastTo` whose every consumer broadcasts anyway -> dropped.

`op(broadcast_to(x, s), y)` equals `op(x, y)` when broadcasting x against y alone gives the
same output shape: broadcasting only repeats values. That shape is proven from Grappler's
static shapes, where the same symbolic dimension (-2, -3, ...) counts as equal; a dimension
known only as -1 proves nothing, and the BroadcastTo stays.
"""

from __future__ import annotations

from workbench.conversion.rewrites.graph_edit import GraphEdit, Rewrite
from workbench.graph.nodes import Node, TensorRef

# Element-wise ops with numpy broadcasting of their two inputs.
BROADCASTING_OPS = frozenset({
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "FloorDiv", "Minimum", "Maximum", "Pow",
    "SquaredDifference", "Greater", "Less", "Equal", "GreaterEqual", "LessEqual", "NotEqual",
    "LogicalAnd", "LogicalOr",
})
UNKNOWN = -1  # a dimension Grappler knows nothing of (symbolic ones are -2, -3, ...)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast of two static shapes, or None when it cannot be proven."""
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    result = []
    for da, db in zip(a, b, strict=True):
        if da == 1:
            result.append(db)
        elif db == 1 or da == db:
            result.append(da)
        else:
            return None
    return None if UNKNOWN in result else tuple(result)


def _redundant_for(edit: GraphEdit, broadcast: Node, consumer: Node, index: int) -> bool:
    """Whether `consumer` gives the same output reading the BroadcastTo's input instead."""
    if consumer.op not in BROADCASTING_OPS or len(consumer.inputs) != 2:
        return False
    other = consumer.inputs[1 - index]
    if other.node == broadcast.name:
        return False
    specs = [edit.spec(ref) for ref in (broadcast.inputs[0], other, TensorRef(consumer.name))]
    if any(spec is None or spec.shape is None for spec in specs):
        return False
    source, second, output = (spec.shape for spec in specs)
    return broadcast_shape(source, second) == output


def _apply(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("BroadcastTo")):
        uses = edit.consumers(node)
        if node.name in edit.protected or not uses:
            continue
        if all(_redundant_for(edit, node, consumer, index) for consumer, index in uses):
            for consumer, index in uses:
                edit.reroute(consumer.name, index, str(node.inputs[0]))
            rewritten += 1
    return rewritten


BROADCAST_TO = Rewrite(
    name="broadcast_to_dropped",
    pattern="BroadcastTo(x, shape) feeding only broadcasting element-wise ops "
            "that give the same output shape from x",
    replacement="x fed to those ops directly",
    rejects="Op type BroadcastTo is not supported.",
    ops=("BroadcastTo",),
    apply=_apply,
)
