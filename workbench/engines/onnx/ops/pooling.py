"""Max and average pooling, 2-D and 3-D."""

from __future__ import annotations

from typing import Any

from workbench.engines.onnx.context import ExportContext
from workbench.engines.onnx.ops.common import (
    is_nchw,
    nchw_node,
    padding,
    spatial,
)


def pool(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        nchw = is_nchw(op)
        attrs = padding(op, nchw)
        attrs["kernel_shape"] = spatial(op.get_attr("ksize"), nchw)
        attrs["strides"] = spatial(op.get_attr("strides"), nchw)
        # TF's AvgPool averages over the valid pixels only: ONNX's count_include_pad=0.
        nchw_node(ctx, op, onnx_op, [ctx.input(op, 0)], nchw, len(op.get_attr("ksize")),
                   **attrs)

    return convert


CONVERTERS = {
    "MaxPool": pool("MaxPool"), "AvgPool": pool("AveragePool"),
    "MaxPool3D": pool("MaxPool"), "AvgPool3D": pool("AveragePool"),
}
