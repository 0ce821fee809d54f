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

from typing import Any

from workbench.conversion.ops.slicing import NO_SPEC
from workbench.conversion.rewrites.graph_edit import (
    EXPLICIT_BATCH,
    SELECT_TYPES,
    GraphEdit,
    Rewrite,
    data_inputs,
)
from workbench.graph.nodes import Graph, Node

STRIDED_SLICE_TYPES = SELECT_TYPES  # float, half and int32, as TF-TRT's StridedSlice takes


def split_pieces(edit: GraphEdit, node: Node) -> tuple[int, int, int, bool] | None:
    """(rank, axis, piece size, shrink) of a Split or Unpack that the rewrite replaces, or None:
    its input has a dynamic dimension, a static split axis that divides evenly, and a type
    TF-TRT's StridedSlice takes."""
    if node.name in edit.protected or node.attr("T") not in STRIDED_SLICE_TYPES:
        return None
    value = node.inputs[1] if node.op == "Split" else node.inputs[0]
    spec = edit.spec(value)
    if spec is None or spec.shape is None or not spec.shape:
        return None
    shape, rank = spec.shape, len(spec.shape)
    if node.op == "Split":
        axis_node = edit.graph[node.inputs[0].node]
        if axis_node.op != "Const":
            return None
        axis, pieces = int(edit.graph.const_value(axis_node.name)), int(node.attr("num_split", 1))
    else:
        axis, pieces = int(node.attr("axis", 0)), int(node.attr("num", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or pieces < 1 or shape[axis] < 0 or shape[axis] % pieces:
        return None
    if node.op == "Unpack" and shape[axis] != pieces:
        return None
    if all(dim >= 0 for dim in shape):
        return None  # TF-TRT's own converter takes it
    return rank, axis, shape[axis] // pieces, node.op == "Unpack"


def _apply(edit: GraphEdit) -> int:
    found = [(node, split_pieces(edit, node)) for node in [*edit.nodes("Split"),
                                                           *edit.nodes("Unpack")]]
    found = [(node, pieces) for node, pieces in found if pieces]  # decided, then edited
    for node, (rank, axis, size, shrink) in found:
        node_def = edit.node_def(node.name)
        value = data_inputs(node_def)[1 if node.op == "Split" else 0]
        count = int(node.attr("num_split" if node.op == "Split" else "num"))
        strides = edit.const(f"{node.name}/strides", [1] * rank, "int32", anchor=value)
        names = [_slice(edit, node_def, node.attr("T"), [value, strides],
                        (rank, axis, i * size, size, shrink)) for i in range(count)]
        for consumer, index in edit.consumers(node):
            edit.reroute(consumer.name, index, names[consumer.inputs[index].port])
    return len(found)


def _slice(edit: GraphEdit, origin: Any, dtype: str, value_and_strides: list[str],
           piece: tuple[int, int, int, int, bool]) -> str:
    """Piece `(rank, axis, begin, size, shrink)` of the value: `value[..., begin:begin + size,
    ...]` along `axis` (`value[..., begin, ...]` when `shrink`), as a StridedSlice named after
    the node it replaces (`origin`, a NodeDef); returns its name."""
    rank, axis, begin, size, shrink = piece
    value, strides = value_and_strides
    name = f"{origin.name}/piece_{begin // size}"
    starts, ends = [0] * rank, [0] * rank
    starts[axis], ends[axis] = begin, begin + size
    bounds = [edit.const(f"{name}/{key}", values, "int32", anchor=value)
              for key, values in (("begin", starts), ("end", ends))]
    node = edit.add(name, "StridedSlice", [value, *bounds, strides], control_from=origin,
                    T=dtype, Index="int32")
    whole = ((1 << rank) - 1) & ~(1 << axis)  # every other axis taken whole
    node.attr["begin_mask"].i = node.attr["end_mask"].i = whole
    node.attr["shrink_axis_mask"].i = (1 << axis) if shrink else 0
    for key in ("ellipsis_mask", "new_axis_mask"):
        node.attr[key].i = 0
    return node.name


def _has_pieces(graph: Graph, node: Node) -> bool:
    return node.attr("T") in STRIDED_SLICE_TYPES


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
    starts_at=_has_pieces,
)
