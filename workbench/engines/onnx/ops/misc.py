"""Identities, Cast, OnesLike/ZerosLike, Fill, Range, softmax and resizes."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from workbench.engines.onnx.context import ExportContext
from workbench.engines.onnx.ops.common import (
    nchw_node,
    same_op,
)

IDENTITIES = ("Identity", "Snapshot", "StopGradient", "_CopyFromHostToGpu")


def identity_n(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Identity", [ctx.input(op, 0)])
    for port in range(1, len(op.outputs)):
        ctx.helper_to(op, f"identity_{port}", "Identity", [ctx.input(op, port)],
                      ctx.output(op, port))


def cast(ctx: ExportContext, op: Any) -> None:
    target = helper.np_dtype_to_tensor_dtype(np.dtype(op.outputs[0].dtype.as_numpy_dtype))
    ctx.node(op, "Cast", [ctx.input(op, 0)], to=target)


def filled_like(value: int):
    def convert(ctx: ExportContext, op: Any) -> None:
        shape = ctx.helper(op, "shape", "Shape", [ctx.input(op, 0)])
        fill = helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(ctx.dtype(op, 0)),
                                  [1], [value])
        ctx.node(op, "ConstantOfShape", [shape], value=fill)

    return convert


def fill(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Expand", [ctx.input(op, 1), ctx.int64(op, 0, "dims")])


def range_(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Range", [ctx.input(op, i) for i in range(3)])


def softmax(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        ctx.node(op, onnx_op, [ctx.input(op, 0)], axis=-1)  # TF normalizes the last axis

    return convert


def resize(ctx: ExportContext, op: Any) -> None:
    """TF's NHWC resizes as ONNX Resize on NCHW, to the [N, C] of the input and TF's size;
    the sampling follows TF's align_corners / half_pixel_centers."""
    align, half = op.get_attr("align_corners"), op.get_attr("half_pixel_centers")
    if op.type == "ResizeBilinear":
        attrs = {"mode": "linear", "coordinate_transformation_mode":
                 "align_corners" if align else "half_pixel" if half else "asymmetric"}
    else:
        # TF rounds half away from zero with align_corners, else floors. Its half-pixel source
        # index floor((x + 0.5) * in / out) is ONNX's half_pixel, (x + 0.5) * in / out - 0.5,
        # rounded half up: ONNX's tf_half_pixel_for_nn with floor says the same, but TensorRT
        # takes that mode only with round_prefer_floor (and opset 13 deprecated it).
        attrs = {"mode": "nearest",
                 "coordinate_transformation_mode":
                     "align_corners" if align else "half_pixel" if half else "asymmetric",
                 "nearest_mode": "round_prefer_ceil" if align or half else "floor"}
    shape = ctx.helper(op, "shape", "Shape", [ctx.input(op, 0)])
    batch_channels = ctx.helper(op, "nc", "Gather", [shape, ctx.constant(op, "nc_index", [0, 3],
                                                                           np.int64)])
    sizes = ctx.helper(op, "sizes", "Concat", [batch_channels, ctx.int64(op, 1, "hw")], axis=0)
    nchw_node(ctx, op, "Resize", [ctx.input(op, 0), "", "", sizes], False, **attrs)


CONVERTERS = {
    **{tf_op: same_op("Identity") for tf_op in IDENTITIES},
    "IdentityN": identity_n, "Cast": cast, "OnesLike": filled_like(1),
    "ZerosLike": filled_like(0), "Fill": fill, "Range": range_,
    "Softmax": softmax("Softmax"), "LogSoftmax": softmax("LogSoftmax"),
    "ResizeBilinear": resize, "ResizeNearestNeighbor": resize,
}
