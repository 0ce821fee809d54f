"""Convolutions: Conv2D, DepthwiseConv2dNative and Conv3D (filters transposed once, at
export time, when they are constants)."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext, ExportError
from workbench.engines.onnx.ops.common import (
    is_nchw,
    nchw_node,
    padding,
    spatial,
)


def _filter(ctx: ExportContext, op: Any, depthwise: bool, rank: int = 4) -> str:
    """TF's HWIO (DHWIO) filter, HWCM for depthwise, as ONNX's OIHW (OIDHW)."""
    to_oihw = [rank - 1, rank - 2, *range(rank - 2)]
    value = ctx.const(op, 1)
    if value is None:
        if depthwise:
            raise ExportError(op, "its filter must be a constant")
        return ctx.helper(op, "oihw", "Transpose", [ctx.input(op, 1)], perm=to_oihw)
    value = np.asarray(value)
    if depthwise:
        h, w, c, m = value.shape
        # Output channel c*M+m of a depthwise conv is group c's m-th filter.
        oihw = value.reshape(h, w, c * m).transpose(2, 0, 1)[:, None]
    else:
        oihw = value.transpose(to_oihw)
    return ctx.constant(op, "oihw", np.ascontiguousarray(oihw))


def conv(ctx: ExportContext, op: Any) -> None:
    """Conv2D, DepthwiseConv2dNative and Conv3D."""
    nchw = is_nchw(op)
    depthwise = op.type == "DepthwiseConv2dNative"
    rank = len(op.get_attr("strides"))
    weights = _filter(ctx, op, depthwise, rank)
    attrs = padding(op, nchw)
    attrs["strides"] = spatial(op.get_attr("strides"), nchw)
    attrs["dilations"] = spatial(op.get_attr("dilations"), nchw)
    if attrs.get("auto_pad") == "SAME_UPPER" and max(attrs["dilations"]) > 1:
        attrs.pop("auto_pad")  # ONNX Runtime refuses SAME with dilations: explicit pads
        attrs["pads"] = _dilated_same_pads(ctx, op, nchw, attrs["strides"], attrs["dilations"])
    if depthwise:
        attrs["group"] = int(np.asarray(ctx.const(op, 1)).shape[2])
    nchw_node(ctx, op, "Conv", [ctx.input(op, 0), weights], nchw, rank, **attrs)


def _dilated_same_pads(ctx: ExportContext, op: Any, nchw: bool, strides: list[int],
                       dilations: list[int]) -> list[int]:
    """TF's SAME padding of a dilated convolution as ONNX pads (begins, then ends): the odd
    pixel at the end. Needs the spatial input dims unless every stride is 1."""
    kernel = np.asarray(ctx.const(op, 1)).shape[:len(strides)]
    sizes = spatial(op.inputs[0].shape.as_list(), nchw) if op.inputs[0].shape.rank else \
        [None] * len(strides)
    totals = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        span = (k - 1) * d + 1
        if s == 1:
            totals.append(span - 1)
        elif size is None:
            raise ExportError(op, "SAME padding with dilations and strides needs known "
                                  "spatial input dims")
        else:
            totals.append(max((-(-size // s) - 1) * s + span - size, 0))
    return [t // 2 for t in totals] + [t - t // 2 for t in totals]


CONVERTERS = {
    "Conv2D": conv, "DepthwiseConv2dNative": conv, "Conv3D": conv,
}
