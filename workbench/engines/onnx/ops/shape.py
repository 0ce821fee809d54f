"""Shape ops: reshape, transpose, concat, pack, split, squeeze, shape, tile, data-format
permutes, depth/space moves.

Axes and permutations must be constants when ONNX takes them as attributes; shape tensors
computed at run time (dynamic-shape engines) are cast to the int64 ONNX wants."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from workbench.engines.onnx.context import ExportContext, ExportError
from workbench.engines.onnx.ops.common import (
    is_nchw,
    nchw_node,
)


def reshape(ctx: ExportContext, op: Any) -> None:
    # TF has no "copy this dim" 0, so ONNX must read a 0 literally (allowzero, opset 14+).
    attrs = {"allowzero": 1} if ctx.opset >= 14 else {}
    ctx.node(op, "Reshape", [ctx.input(op, 0), ctx.int64(op, 1, "shape")], **attrs)


def transpose(ctx: ExportContext, op: Any) -> None:
    perm = ctx.require_const(op, 1, "permutation")
    ctx.node(op, "Transpose", [ctx.input(op, 0)], perm=[int(p) for p in perm])


def concat(ctx: ExportContext, op: Any) -> None:
    axis = int(ctx.require_const(op, len(op.inputs) - 1, "axis"))
    inputs = [ctx.input(op, i) for i in range(len(op.inputs) - 1)]
    ctx.node(op, "Concat", inputs, axis=axis)


def pack(ctx: ExportContext, op: Any) -> None:
    axis = ctx.constant(op, "axis", [op.get_attr("axis")], np.int64)
    parts = [
        ctx.helper(op, f"unsqueeze_{i}", "Unsqueeze", [ctx.input(op, i), axis])
        for i in range(len(op.inputs))
    ]
    ctx.node(op, "Concat", parts, axis=op.get_attr("axis"))


def unpack(ctx: ExportContext, op: Any) -> None:
    axis, count = op.get_attr("axis"), len(op.outputs)
    parts = [f"{op.name}:part{i}" for i in range(count)]
    attrs = {"num_outputs": count} if ctx.opset >= 18 else {}
    ctx.node(op, "Split", [ctx.input(op, 0)], outputs=parts, axis=axis, **attrs)
    axes = ctx.constant(op, "axis", [axis], np.int64)
    for i, part in enumerate(parts):
        ctx.helper_to(op, f"squeeze_{i}", "Squeeze", [part, axes], ctx.output(op, i))


def split(ctx: ExportContext, op: Any) -> None:
    """TF's Split(axis, value) into `num_split` equal parts (ONNX's Split without sizes)."""
    axis = int(ctx.require_const(op, 0, "axis"))
    count = len(op.outputs)
    attrs = {"num_outputs": count} if ctx.opset >= 18 else {}
    ctx.node(op, "Split", [ctx.input(op, 1)], outputs=[ctx.output(op, i) for i in range(count)],
             axis=axis, **attrs)


def vec_permute(ctx: ExportContext, op: Any) -> None:
    """DataFormatVecPermute: the dims (or [dim, 2] rows) of `src_format` in `dst_format`'s
    order; a vector of two holds the spatial dims only."""
    source, target = (op.get_attr(a).decode() for a in ("src_format", "dst_format"))
    size = op.inputs[0].shape[0] if op.inputs[0].shape.rank else None
    if size is not None and size == 2 and len(source) > 2:
        source, target = source.strip("NC"), target.strip("NC")
    if size is None or size != len(source) or sorted(source) != sorted(target):
        raise ExportError(op, f"cannot permute {size} values from {source} to {target}")
    index = ctx.constant(op, "perm", [source.index(c) for c in target], np.int64)
    ctx.node(op, "Gather", [ctx.input(op, 0), index], axis=0)


def squeeze(ctx: ExportContext, op: Any) -> None:
    dims = list(op.get_attr("squeeze_dims"))
    inputs = [ctx.input(op, 0)]
    if dims:  # no dims: every size-1 dim, the same in both
        inputs.append(ctx.constant(op, "axes", dims, np.int64))
    ctx.node(op, "Squeeze", inputs)


def expand_dims(ctx: ExportContext, op: Any) -> None:
    axis = ctx.require_const(op, 1, "axis").reshape(-1)
    axes = ctx.constant(op, "axes", axis, np.int64)
    ctx.node(op, "Unsqueeze", [ctx.input(op, 0), axes])


def shape(ctx: ExportContext, op: Any) -> None:
    out = np.dtype(op.outputs[0].dtype.as_numpy_dtype)
    if out == np.int64:
        ctx.node(op, "Shape", [ctx.input(op, 0)])
        return
    dims = ctx.helper(op, "int64", "Shape", [ctx.input(op, 0)])
    ctx.node(op, "Cast", [dims], to=helper.np_dtype_to_tensor_dtype(out))


def tile(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Tile", [ctx.input(op, 0), ctx.int64(op, 1, "multiples")])


def depth_space(ctx: ExportContext, op: Any) -> None:
    # TF's DepthToSpace orders the moved depth like ONNX's DCR mode (SpaceToDepth has one).
    attrs: dict[str, Any] = {"blocksize": op.get_attr("block_size")}
    if op.type == "DepthToSpace":
        attrs["mode"] = "DCR"
    nchw_node(ctx, op, op.type, [ctx.input(op, 0)], is_nchw(op), **attrs)


CONVERTERS = {
    "Reshape": reshape, "Transpose": transpose, "ConcatV2": concat, "Pack": pack,
    "Unpack": unpack, "Squeeze": squeeze, "ExpandDims": expand_dims, "Shape": shape,
    "Tile": tile, "Split": split, "DataFormatVecPermute": vec_permute,
    "DepthToSpace": depth_space, "SpaceToDepth": depth_space,
}
