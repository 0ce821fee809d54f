"""`BroadcastTo`, which TF-TRT 2.17 has no converter for, and slices that only add axes, which
its StridedSlice converter refuses (`new_axis_mask`).

`op(broadcast_to(x, s), y)` equals `op(x, y)` when broadcasting x against y alone gives the
same output shape: broadcasting only repeats values. So does `op(x[None, None], y)`: numpy
broadcasting prepends those size-1 axes itself. The shape is proven from Grappler's static
shapes, where the same symbolic dimension (-2, -3, ...) counts as equal; a dimension known only
as -1 proves nothing, and the node stays.

Where no consumer broadcasts for it, a BroadcastTo is a select that copies x on both sides:
`SelectV2(cond, x, x)` with cond an all-true tensor of shape s (`Equal(Fill(s, 0), 0)`) has
shape broadcast(s, x.shape) = s and the values of x repeated, copied bit for bit, wherever
BroadcastTo runs (where x does not fit s, BroadcastTo fails and the select may broadcast).
A Cast after a BroadcastTo moves before it (`Cast(broadcast_to(x, s))` equals
`broadcast_to(Cast(x), s)`, a Cast being element-wise), so that a constant bool mask (keras-hub's
causal mask) is cast while still a constant, which Grappler folds. A slice that only inserts
axes where no consumer broadcasts for it (`x[:, None]`) is one ExpandDims per new axis.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.conversion.rewrites.graph_edit import (
    EXPLICIT_BATCH,
    SELECT_TYPES,
    GraphEdit,
    Rewrite,
    data_inputs,
)
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


def _selectable(edit: GraphEdit, node: Node) -> bool:
    """A BroadcastTo that TF-TRT converts as a copying select: a type SelectV2 takes, an int32
    shape (TF-TRT's Fill wants int32 dims), and an output shape not fully static (Grappler
    would fold the all-true condition into a constant, which TF-TRT refuses as a select's
    condition)."""
    if node.attr("T") not in SELECT_TYPES or node.attr("Tidx") != "int32":
        return False
    spec = edit.spec(TensorRef(node.name))
    return spec is not None and spec.shape is not None and min(spec.shape, default=0) < 0


def _broadcasts_as_selects(edit: GraphEdit) -> int:
    nodes = [node for node in edit.nodes("BroadcastTo") if _selectable(edit, node)]
    for node in nodes:
        node_def = edit.node_def(node.name)
        x, shape = data_inputs(node_def)
        zero = edit.const(f"{node.name}/zero", 0, "int32", anchor=shape)
        fill = edit.add(f"{node.name}/zeros", "Fill", [shape, zero], control_from=node_def,
                        T="int32", index_type="int32")
        everywhere = edit.add(f"{node.name}/everywhere", "Equal", [fill.name, zero],
                              control_from=node_def, T="int32")
        everywhere.attr["incompatible_shape_error"].b = True
        edit.retype(node_def, "SelectV2", [everywhere.name, x, x], T=node.attr("T"))
    return len(nodes)


def _casts_before_broadcasts(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("Cast")):
        broadcast = edit.graph[node.inputs[0].node]
        if (broadcast.op != "BroadcastTo" or broadcast.name in edit.protected
                or len(edit.consumers(broadcast)) != 1):
            continue
        node_def, broadcast_def = edit.node_def(node.name), edit.node_def(broadcast.name)
        x, shape = data_inputs(broadcast_def)
        cast = edit.add(f"{node.name}/before_broadcast", "Cast", [x],
                        control_from=broadcast_def)
        for key in ("SrcT", "DstT", "Truncate"):
            if key in node_def.attr:
                cast.attr[key].CopyFrom(node_def.attr[key])
        edit.retype(node_def, "BroadcastTo", [cast.name, shape], T=node.attr("DstT"),
                    Tidx=broadcast.attr("Tidx"))
        rewritten += 1
    return rewritten


def _after_a_broadcast(graph: Graph, node: Node) -> bool:
    return graph[node.inputs[0].node].op == "BroadcastTo"


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


def new_axis_positions(edit: GraphEdit, node: Node) -> list[int] | None:
    """Where a StridedSlice that only inserts axes (`x[:, None]`, `x[None, :, None]`: new axes
    and full slices of stride 1, no ellipsis, nothing shrunk) puts them in its output, else
    None. Each entry of such a slice gives one output axis, so entry i is output axis i."""
    specs = [edit.graph[ref.node] for ref in node.inputs[1:4]]
    if (node.attr("shrink_axis_mask", 0) or node.attr("ellipsis_mask", 0)
            or any(spec.op != "Const" for spec in specs)):
        return None
    begin, _, strides = (edit.graph.const_value(spec.name).reshape(-1) for spec in specs)
    new_axis = _bits(node.attr("new_axis_mask", 0))
    from_start, to_end = _bits(node.attr("begin_mask", 0)), _bits(node.attr("end_mask", 0))
    for i in range(len(begin)):
        if not new_axis[i] and not ((from_start[i] or begin[i] == 0) and to_end[i]
                                    and strides[i] == 1):
            return None
    positions = [i for i in range(len(begin)) if new_axis[i]]
    return positions or None


def _new_axes_as_expand_dims(edit: GraphEdit) -> int:
    slices = [(node, new_axis_positions(edit, node)) for node in edit.nodes("StridedSlice")
              if node.attr("T") in SELECT_TYPES]
    slices = [(node, positions) for node, positions in slices if positions]
    for node, positions in slices:
        node_def = edit.node_def(node.name)
        dtype = node.attr("T")
        tensor = data_inputs(node_def)[0]
        for position in positions[:-1]:
            axis = edit.const(f"{node.name}/axis_{position}", position, "int32", anchor=tensor)
            tensor = edit.add(f"{node.name}/new_axis_{position}", "ExpandDims", [tensor, axis],
                              control_from=node_def, T=dtype, Tdim="int32").name
        axis = edit.const(f"{node.name}/axis_{positions[-1]}", positions[-1], "int32", tensor)
        edit.retype(node_def, "ExpandDims", [tensor, axis], T=dtype, Tdim="int32")
    return len(slices)


def _starts_with_new_axes(graph: Graph, node: Node) -> bool:
    return node.attr("new_axis_mask", 0) & 1 == 1


def _adds_axes(graph: Graph, node: Node) -> bool:
    return node.attr("new_axis_mask", 0) != 0


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
CAST_BEFORE_BROADCAST = Rewrite(
    name="cast_before_broadcast",
    pattern="Cast(BroadcastTo(x, shape)), the BroadcastTo feeding only that Cast",
    replacement="BroadcastTo(Cast(x), shape)",
    rejects="Cast op is not supported - Allowed input dtypes: [float, half]. Received: bool",
    ops=("Cast",),
    apply=_casts_before_broadcasts,
    starts_at=_after_a_broadcast,
)
BROADCAST_AS_SELECT = Rewrite(
    name="broadcast_to_as_select",
    pattern="BroadcastTo(x, shape), x float, half or int32, the output shape not fully static",
    replacement="SelectV2(Equal(Fill(shape, 0), 0), x, x)",
    rejects="Op type BroadcastTo is not supported.",
    ops=("BroadcastTo",),
    apply=_broadcasts_as_selects,
    shape_modes=(EXPLICIT_BATCH,),  # Fill, comparisons and selects need explicit batch
)
NEW_AXES = Rewrite(
    name="new_axes_as_expand_dims",
    pattern="StridedSlice only inserting size-1 axes (x[:, None], x[None, :, None]: new axes and "
            "full slices of stride 1, no ellipsis, nothing shrunk), x float, half or int32",
    replacement="ExpandDims(x, i) for each new axis i, in increasing order",
    rejects="new_axis_mask is not supported for StridedSlice",
    ops=("StridedSlice",),
    apply=_new_axes_as_expand_dims,
    starts_at=_adds_axes,
)
