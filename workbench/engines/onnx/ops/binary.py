"""Binary math and comparisons (numpy broadcasting), AddN, clipping, BiasAdd."""

from __future__ import annotations

from typing import Any

from workbench.engines.onnx.context import ExportContext, ExportError
from workbench.engines.onnx.ops.common import (
    channel_vector,
    is_nchw,
)

BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
    "Maximum": "Max", "Minimum": "Min", "Pow": "Pow",
    "Less": "Less", "Greater": "Greater", "Equal": "Equal",
    "LessEqual": "LessOrEqual", "GreaterEqual": "GreaterOrEqual",
    "LogicalAnd": "And", "LogicalOr": "Or",
}


# Operand order does not change these results; ONNX Runtime's Conv+Mul / Conv+Add fusions only
# fold a constant that is the second operand (a batch norm's Mul with its scale first was not
# fused, and slower).
COMMUTATIVE = frozenset({"Add", "Mul"})


def _binary(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        first, second = ctx.input(op, 0), ctx.input(op, 1)
        if onnx_op in COMMUTATIVE and first in ctx.initializers \
                and second not in ctx.initializers:
            first, second = second, first
        ctx.node(op, onnx_op, [first, second])

    return convert


def square(ctx: ExportContext, op: Any) -> None:
    x = ctx.input(op, 0)
    ctx.node(op, "Mul", [x, x])


def squared_difference(ctx: ExportContext, op: Any) -> None:
    diff = ctx.helper(op, "sub", "Sub", [ctx.input(op, 0), ctx.input(op, 1)])
    ctx.node(op, "Mul", [diff, diff])


def not_equal(ctx: ExportContext, op: Any) -> None:
    equal = ctx.helper(op, "equal", "Equal", [ctx.input(op, 0), ctx.input(op, 1)])
    ctx.node(op, "Not", [equal])


def divide(ctx: ExportContext, op: Any) -> None:
    # TF's Div rounds integer quotients toward minus infinity, ONNX's toward zero.
    if ctx.dtype(op, 0).kind != "f":
        raise ExportError(op, "integer division rounds differently in ONNX")
    ctx.node(op, "Div", [ctx.input(op, 0), ctx.input(op, 1)])


def floor_div(ctx: ExportContext, op: Any) -> None:
    if ctx.dtype(op, 0).kind != "f":
        raise ExportError(op, "integer floor division has no ONNX equivalent")
    quotient = ctx.helper(op, "div", "Div", [ctx.input(op, 0), ctx.input(op, 1)])
    ctx.node(op, "Floor", [quotient])


def add_n(ctx: ExportContext, op: Any) -> None:
    inputs = [ctx.input(op, i) for i in range(len(op.inputs))]
    ctx.node(op, "Sum", inputs)


def clip_by_value(ctx: ExportContext, op: Any) -> None:
    # TF takes bounds shaped like the input; ONNX's Clip takes scalars only: Max then Min.
    low = ctx.helper(op, "max", "Max", [ctx.input(op, 0), ctx.input(op, 1)])
    ctx.node(op, "Min", [low, ctx.input(op, 2)])


def bias_add(ctx: ExportContext, op: Any) -> None:
    bias = ctx.input(op, 1)
    if is_nchw(op):
        bias = channel_vector(ctx, op, 1, ctx.rank(op, 0))
    ctx.node(op, "Add", [ctx.input(op, 0), bias])


CONVERTERS = {
    **{tf_op: _binary(onnx_op) for tf_op, onnx_op in BINARY.items()},
    "Square": square, "SquaredDifference": squared_difference, "NotEqual": not_equal,
    "Div": divide, "FloorDiv": floor_div, "AddN": add_n, "ClipByValue": clip_by_value,
    "BiasAdd": bias_add,
}
