"""Unary math and activations: ONNX ops of the same meaning, Relu6, Rsqrt, Erfc, LeakyRelu."""

from __future__ import annotations

from typing import Any

from workbench.engines.onnx.context import ExportContext
from workbench.engines.onnx.ops.common import (
    same_op,
    scalar,
)

# TF op -> ONNX op with the same semantics.
UNARY = {
    "Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
    "Neg": "Neg", "Sqrt": "Sqrt", "Abs": "Abs", "Reciprocal": "Reciprocal", "Inv": "Reciprocal",
    "Erf": "Erf", "Floor": "Floor", "Ceil": "Ceil", "Round": "Round", "Sign": "Sign",
    "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan",
    "Sinh": "Sinh", "Cosh": "Cosh", "Asinh": "Asinh", "Acosh": "Acosh", "Atanh": "Atanh",
    "Elu": "Elu", "Selu": "Selu", "Softplus": "Softplus", "Softsign": "Softsign",
    "LogicalNot": "Not",
}


def relu6(ctx: ExportContext, op: Any) -> None:
    low, high = scalar(ctx, op, "zero", 0), scalar(ctx, op, "six", 6)
    ctx.node(op, "Clip", [ctx.input(op, 0), low, high])


def rsqrt(ctx: ExportContext, op: Any) -> None:
    root = ctx.helper(op, "sqrt", "Sqrt", [ctx.input(op, 0)])
    ctx.node(op, "Reciprocal", [root])


def erfc(ctx: ExportContext, op: Any) -> None:
    erf = ctx.helper(op, "erf", "Erf", [ctx.input(op, 0)])
    ctx.node(op, "Sub", [scalar(ctx, op, "one", 1), erf])


def leaky_relu(ctx: ExportContext, op: Any) -> None:
    alpha = op.get_attr("alpha")
    ctx.node(op, "LeakyRelu", [ctx.input(op, 0)], alpha=alpha)


CONVERTERS = {
    **{tf_op: same_op(onnx_op) for tf_op, onnx_op in UNARY.items()},
    "Relu6": relu6, "Rsqrt": rsqrt, "Erfc": erfc, "LeakyRelu": leaky_relu,
}
