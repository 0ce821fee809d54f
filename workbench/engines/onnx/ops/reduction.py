"""Reductions, ArgMax/ArgMin and TopK."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

from workbench.engines.onnx.context import ExportContext

# TF reduction -> ONNX reduction; ReduceSum takes its axes as an input from opset 13, the
# others only from opset 18.
REDUCTIONS = {
    "Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin",
    "Prod": "ReduceProd",
}


AXES_AS_INPUT_SINCE = {"ReduceSum": 13}


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


def top_k(ctx: ExportContext, op: Any) -> None:
    k = ctx.constant(op, "k", [int(ctx.require_const(op, 1, "k"))], np.int64)
    indices = f"{op.name}:indices64"
    ctx.node(op, "TopK", [ctx.input(op, 0), k], outputs=[ctx.output(op, 0), indices], axis=-1,
             largest=1, sorted=1)
    target = helper.np_dtype_to_tensor_dtype(np.dtype(op.outputs[1].dtype.as_numpy_dtype))
    ctx.helper_to(op, "indices", "Cast", [indices], ctx.output(op, 1), to=target)


CONVERTERS = {
    **{tf_op: reduction for tf_op in REDUCTIONS},
    "ArgMax": arg_reduction, "ArgMin": arg_reduction, "TopKV2": top_k,
}
