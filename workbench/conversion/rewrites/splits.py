"""`Split` and `Unpack` of a tensor with a dynamic dimension -> one `StridedSlice` per piece.

TF-TRT 2.17 slices each piece of a Split or Unpack without a slice specification, so any
dynamic dimension of the input rejects it (keras-hub Llama's rotary embeddings: a dynamic
batch, split in halves along the static last axis). A StridedSlice carries its specification,
and converts in dynamic shape mode. Piece i of `Split(axis, x, num_split=n)` is exactly
`x[..., i*s:(i+1)*s, ...]` along `axis` with s = x.shape[axis] / n, every other axis taken whole
(begin and end masks); piece i of `Unpack(x, axis)` is `x[..., i, ...]` (the axis shrunk).
The values are copied, not computed, so the rewrite is exact; it needs the split axis static.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from workbench.conversion.ops.slicing import NO_SPEC, SLICE_DTYPES
from workbench.conversion.rewrites.graph_edit import EXPLICIT_BATCH, GraphEdit, Rewrite, data_inputs
from workbench.graph.nodes import Graph, Node


class Pieces(NamedTuple):
    """How a Split or Unpack cuts its input: `count` pieces of `size` along `axis` of a
    rank-`rank` value (`shrink`: Unpack, the axis dropped from each piece)."""

    rank: int
    axis: int
    size: int
    count: int
    shrink: bool


def split_pieces(edit: GraphEdit, node: Node) -> Pieces | None:
    """The pieces of a Split or Unpack the rewrite replaces, or None: its input has a dynamic
    dimension, a static split axis that divides evenly, and a type TF-TRT slices."""
    if node.name in edit.protected or node.attr("T") not in SLICE_DTYPES:
        return None
    split = node.op == "Split"
    spec = edit.spec(node.inputs[1] if split else node.inputs[0])
    if spec is None or not spec.shape:
        return None
    shape, rank = spec.shape, len(spec.shape)
    if split:
        axis_node = edit.graph[node.inputs[0].node]
        if axis_node.op != "Const":
            return None
        axis, count = int(edit.graph.const_value(axis_node.name)), int(node.attr("num_split", 1))
    else:
        axis, count = int(node.attr("axis", 0)), int(node.attr("num", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or count < 1 or shape[axis] < 0 or shape[axis] % count:
        return None
    if not split and shape[axis] != count:
        return None
    if all(dim >= 0 for dim in shape):
        return None  # TF-TRT's own converter takes it
    return Pieces(rank, axis, shape[axis] // count, count, shrink=not split)


def _apply(edit: GraphEdit) -> int:
    found = [(node, split_pieces(edit, node))
             for node in [*edit.nodes("Split"), *edit.nodes("Unpack")]]
    found = [(node, pieces) for node, pieces in found if pieces]  # decided, then edited
    for node, pieces in found:
        node_def = edit.node_def(node.name)
        value = data_inputs(node_def)[1 if node.op == "Split" else 0]
        strides = edit.const(f"{node.name}/strides", [1] * pieces.rank, "int32", anchor=value)
        names = [_slice(edit, node_def, [value, strides], pieces, i) for i in range(pieces.count)]
        for consumer, index in edit.consumers(node):
            edit.reroute(consumer.name, index, names[consumer.inputs[index].port])
    return len(found)


def _slice(edit: GraphEdit, origin: Any, value_and_strides: list[str], pieces: Pieces,
           index: int) -> str:
    """Piece `index` of the value as a StridedSlice named after the node it replaces (`origin`,
    a NodeDef): `value[..., b:b + size, ...]` along the axis (`value[..., b, ...]` when the
    pieces shrink it), b = index * size; returns its name."""
    value, strides = value_and_strides
    name = f"{origin.name}/piece_{index}"
    starts, ends = [0] * pieces.rank, [0] * pieces.rank
    starts[pieces.axis] = index * pieces.size
    ends[pieces.axis] = starts[pieces.axis] + pieces.size
    bounds = [edit.const(f"{name}/{key}", values, "int32", anchor=value)
              for key, values in (("begin", starts), ("end", ends))]
    node = edit.add(name, "StridedSlice", [value, *bounds, strides], control_from=origin,
                    T=edit.graph[origin.name].attr("T"), Index="int32")
    whole = ((1 << pieces.rank) - 1) & ~(1 << pieces.axis)  # every other axis taken whole
    node.attr["begin_mask"].i = node.attr["end_mask"].i = whole
    node.attr["shrink_axis_mask"].i = (1 << pieces.axis) if pieces.shrink else 0
    return node.name


def _sliceable(graph: Graph, node: Node) -> bool:
    return node.attr("T") in SLICE_DTYPES


SPLIT_AS_SLICES = Rewrite(
    name="split_as_slices",
    pattern="Split or Unpack of x with a dynamic dimension, the split axis static (and divisible "
            "by num_split), x float, half or int32",
    replacement="one StridedSlice per piece: x[..., i*s:(i+1)*s, ...] along the axis (Unpack: "
                "x[..., i, ...], the axis shrunk), every other axis whole",
    rejects=NO_SPEC,
    ops=("Split", "Unpack"),
    apply=_apply,
    shape_modes=(EXPLICIT_BATCH,),  # implicit batch refuses any dynamic size in a slice
    starts_at=_sliceable,
)
