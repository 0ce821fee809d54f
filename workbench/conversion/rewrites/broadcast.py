"""A `BroadcastTo`, or a slice that only adds leading axes, whose every consumer broadcasts
anyway -> dropped.

`op(broadcast_to(x, s), y)` equals `op(x, y)` when broadcasting x against y alone gives the
same output shape: broadcasting only repeats values. So does `op(x[None, None], y)`: numpy
broadcasting prepends those size-1 axes itself. The shape is proven from Grappler's static
shapes, where the same symbolic dimension (-2, -3, ...) counts as equal; a dimension known only
as -1 proves nothing, and the node stays.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.conversion.rewrites.graph_edit import GraphEdit, Rewrite
from workbench.graph.nodes import Graph, Node, TensorRef

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
    """Whether `consumer` gives the same output reading the dropped node's input instead."""
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


def _dropper(op: str, repeats_only: Callable[[GraphEdit, Node], bool]
             ) -> Callable[[GraphEdit], int]:
    """The rewrite that drops each `op` node that `repeats_only` (its output is its input
    broadcast) when all its consumers broadcast to the same shape without it."""
    def apply(edit: GraphEdit) -> int:
        rewritten = 0
        for node in list(edit.nodes(op)):
            uses = edit.consumers(node)
            if node.name in edit.protected or not uses or not repeats_only(edit, node):
                continue
            if all(_redundant_for(edit, node, consumer, index) for consumer, index in uses):
                for consumer, index in uses:
                    edit.reroute(consumer.name, index, str(node.inputs[0]))
                rewritten += 1
        return rewritten
    return apply


def _bits(mask: int) -> list[bool]:
    return [bool(mask >> i & 1) for i in range(64)]


def adds_leading_axes_only(edit: GraphEdit, node: Node) -> bool:
    """Whether a StridedSlice is `x[None, ..., None, :, ..., :]` (or with an ellipsis after the
    new axes): new axes first, then full slices of stride 1, nothing shrunk."""
    specs = [edit.graph[ref.node] for ref in node.inputs[1:4]]
    if node.attr("shrink_axis_mask", 0) or any(spec.op != "Const" for spec in specs):
        return False
    begin, _, strides = (edit.graph.const_value(spec.name).reshape(-1) for spec in specs)
    new_axis, ellipsis = _bits(node.attr("new_axis_mask", 0)), _bits(node.attr("ellipsis_mask", 0))
    from_start, to_end = _bits(node.attr("begin_mask", 0)), _bits(node.attr("end_mask", 0))
    leading = 0
    while leading < len(begin) and new_axis[leading]:
        leading += 1
    for i in range(leading, len(begin)):
        full = (from_start[i] or begin[i] == 0) and to_end[i] and strides[i] == 1
        if new_axis[i] or not (ellipsis[i] or full):
            return False
    return leading > 0


def _starts_with_new_axes(graph: Graph, node: Node) -> bool:
    return node.attr("new_axis_mask", 0) & 1 == 1


BROADCAST_TO = Rewrite(
    name="broadcast_to_dropped",
    pattern="BroadcastTo(x, shape) feeding only broadcasting element-wise ops "
            "that give the same output shape from x",
    replacement="x fed to those ops directly",
    rejects="Op type BroadcastTo is not supported.",
    ops=("BroadcastTo",),
    apply=_dropper("BroadcastTo", lambda edit, node: True),
)
LEADING_AXES = Rewrite(
    name="leading_axes_dropped",
    pattern="StridedSlice adding leading size-1 axes only (x[None, None, :, :]) feeding only "
            "broadcasting element-wise ops that give the same output shape from x",
    replacement="x fed to those ops directly",
    rejects="new_axis_mask is not supported for StridedSlice",
    ops=("StridedSlice",),
    apply=_dropper("StridedSlice", adds_leading_axes_only),
    starts_at=_starts_with_new_axes,
)
