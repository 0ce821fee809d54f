"""Shape ops: reshape, transpose, concat, pack, split, squeeze, shape, fill, range, pad,
reductions, top-k, data-format permutes.

Axes, permutations and paddings must be constants when ONNX takes them as attributes; shape
tensors computed at run time (dynamic-shape engines) are cast to the int64 ONNX wants.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

from workbench.engines.onnx.context import ExportContext, ExportError

# TF reduction -> ONNX reduction; ReduceSum takes its axes as an input from opset 13, the
# others only from opset 18.
REDUCTIONS = {
    "Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin",
    "Prod": "ReduceProd",
}
AXES_AS_INPUT_SINCE = {"ReduceSum": 13}


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


def top_k(ctx: ExportContext, op: Any) -> None:
    k = ctx.constant(op, "k", [int(ctx.require_const(op, 1, "k"))], np.int64)
    indices = f"{op.name}:indices64"
    ctx.node(op, "TopK", [ctx.input(op, 0), k], outputs=[ctx.output(op, 0), indices], axis=-1,
             largest=1, sorted=1)
    target = helper.np_dtype_to_tensor_dtype(np.dtype(op.outputs[1].dtype.as_numpy_dtype))
    ctx.helper_to(op, "indices", "Cast", [indices], ctx.output(op, 1), to=target)


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


def fill(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Expand", [ctx.input(op, 1), ctx.int64(op, 0, "dims")])


def tile(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Tile", [ctx.input(op, 0), ctx.int64(op, 1, "multiples")])


def range_(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Range", [ctx.input(op, i) for i in range(3)])


def pad(ctx: ExportContext, op: Any) -> None:
    paddings = ctx.require_const(op, 1, "paddings").astype(np.int64)
    pads = ctx.constant(op, "pads", np.concatenate([paddings[:, 0], paddings[:, 1]]))
    inputs = [ctx.input(op, 0), pads]
    attrs: dict[str, Any] = {}
    if op.type == "PadV2":
        inputs.append(ctx.input(op, 2))
    elif op.type == "MirrorPad":
        mode = op.get_attr("mode").decode()
        if mode != "REFLECT":  # ONNX's reflect excludes the edge like TF's REFLECT
            raise ExportError(op, f"mirror mode {mode} has no ONNX equivalent")
        attrs["mode"] = "reflect"
    ctx.node(op, "Pad", inputs, **attrs)


def reduction(ctx: ExportContext, op: Any) -> None:
    onnx_op = REDUCTIONS[op.type]
    axes = ctx.require_const(op, 1, "axes").reshape(-1).astype(np.int64)
    keep = int(op.get_attr("keep_dims"))
    if axes.size == 0:  # TF reduces nothing; ONNX would reduce everything
        ctx.node(op, "Identity", [ctx.input(op, 0)])
        return
    if ctx.opset >= AXES_AS_INPUT_SINCE.get(onnx_op, 18):
        axes_input = ctx.constant(op, "axes", axes)
        ctx.node(op, onnx_op, [ctx.input(op, 0), axes_input], keepdims=keep)
    else:
        ctx.node(op, onnx_op, [ctx.input(op, 0)], axes=[int(a) for a in axes], keepdims=keep)


def arg_reduction(ctx: ExportContext, op: Any) -> None:
    axis = int(ctx.require_const(op, 1, "axis"))
    onnx_op = "ArgMax" if op.type == "ArgMax" else "ArgMin"
    out = np.dtype(op.outputs[0].dtype.as_numpy_dtype)
    if out == np.int64:
        ctx.node(op, onnx_op, [ctx.input(op, 0)], axis=axis, keepdims=0)
        return
    index = ctx.helper(op, "int64", onnx_op, [ctx.input(op, 0)], axis=axis, keepdims=0)
    ctx.node(op, "Cast", [index], to=TensorProto.INT32)


CONVERTERS = {
    "Reshape": reshape, "Transpose": transpose, "ConcatV2": concat, "Pack": pack,
    "Unpack": unpack, "Squeeze": squeeze, "ExpandDims": expand_dims, "Shape": shape,
    "Fill": fill, "Tile": tile, "Range": range_, "Pad": pad, "PadV2": pad, "MirrorPad": pad,
    **{tf_op: reduction for tf_op in REDUCTIONS},
    "ArgMax": arg_reduction, "ArgMin": arg_reduction,
    "Split": split, "DataFormatVecPermute": vec_permute, "TopKV2": top_k,
}
