"""Inference batch norm."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext, ExportError
from workbench.engines.onnx.ops.common import (
    is_nchw,
)


def fused_batch_norm(ctx: ExportContext, op: Any) -> None:
    """Inference batch norm as x * scale' + offset' (folded when the statistics are consts)."""
    if op.get_attr("is_training"):
        raise ExportError(op, "training-mode batch norm is not an inference op")
    for port in range(1, len(op.outputs)):
        if op.outputs[port].consumers():
            raise ExportError(op, f"its output {port} (batch statistics) is used")
    epsilon = op.get_attr("epsilon")
    values = [ctx.const(op, i) for i in range(1, 5)]
    if any(v is None for v in values):
        raise ExportError(op, "its scale, offset, mean and variance must be constants")
    scale, offset, mean, variance = (np.asarray(v, np.float64) for v in values)
    factor = scale / np.sqrt(variance + epsilon)
    shift = offset - mean * factor
    dtype = ctx.dtype(op, 0)
    mul, add = ctx.constant(op, "scale", factor, dtype), ctx.constant(op, "shift", shift, dtype)
    if is_nchw(op):
        rank = ctx.rank(op, 0) or 4
        shape = ctx.constant(op, "channel_shape", [-1] + [1] * (rank - 2), np.int64)
        mul = ctx.helper(op, "scale_nchw", "Reshape", [mul, shape])
        add = ctx.helper(op, "shift_nchw", "Reshape", [add, shape])
    scaled = ctx.helper(op, "mul", "Mul", [ctx.input(op, 0), mul])
    ctx.node(op, "Add", [scaled, add], outputs=[ctx.output(op, 0)])


CONVERTERS = {
    "FusedBatchNorm": fused_batch_norm, "FusedBatchNormV2": fused_batch_norm,
    "FusedBatchNormV3": fused_batch_norm,
}
