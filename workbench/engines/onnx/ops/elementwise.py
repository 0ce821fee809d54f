"""Element-wise ops: unary and binary math, comparisons, Cast, Select, OnesLike, clipping."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from workbench.engines.onnx.context import ExportContext, ExportError

# TF op -> ONNX op with the same semantics (inputs in the same order, numpy broadcasting).
UNARY = {
    "Identity": "Identity", "Snapshot": "Identity", "StopGradient": "Identity",
    "_CopyFromHostToGpu": "Identity",
    "Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
    "Neg": "Neg", "Sqrt": "Sqrt", "Abs": "Abs", "Reciprocal": "Reciprocal", "Inv": "Reciprocal",
    "Erf": "Erf", "Floor": "Floor", "Ceil": "Ceil", "Round": "Round", "Sign": "Sign",
    "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan",
    "Sinh": "Sinh", "Cosh": "Cosh", "Asinh": "Asinh", "Acosh": "Acosh", "Atanh": "Atanh",
    "Elu": "Elu", "Selu": "Selu", "Softplus": "Softplus", "Softsign": "Softsign",
    "LogicalNot": "Not",
}
BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
    "Maximum": "Max", "Minimum": "Min", "Pow": "Pow",
    "Less": "Less", "Greater": "Greater", "Equal": "Equal",
    "LessEqual": "LessOrEqual", "GreaterEqual": "GreaterOrEqual",
    "LogicalAnd": "And", "LogicalOr": "Or",
}


def _unary(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        ctx.node(op, onnx_op, [ctx.input(op, 0)])

    return convert


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


def _scalar(ctx: ExportContext, op: Any, label: str, value: float) -> str:
    """A scalar of the op's input dtype (ONNX wants both operands of one type)."""
    return ctx.constant(op, label, value, ctx.dtype(op, 0))


def identity_n(ctx: ExportContext, op: Any) -> None:
    ctx.node(op, "Identity", [ctx.input(op, 0)])
    for port in range(1, len(op.outputs)):
        ctx.helper_to(op, f"identity_{port}", "Identity", [ctx.input(op, port)],
                      ctx.output(op, port))


def clip_by_value(ctx: ExportContext, op: Any) -> None:
    # TF takes bounds shaped like the input; ONNX's Clip takes scalars only: Max then Min.
    low = ctx.helper(op, "max", "Max", [ctx.input(op, 0), ctx.input(op, 1)])
    ctx.node(op, "Min", [low, ctx.input(op, 2)])


def relu6(ctx: ExportContext, op: Any) -> None:
    low, high = _scalar(ctx, op, "zero", 0), _scalar(ctx, op, "six", 6)
    ctx.node(op, "Clip", [ctx.input(op, 0), low, high])


def rsqrt(ctx: ExportContext, op: Any) -> None:
    root = ctx.helper(op, "sqrt", "Sqrt", [ctx.input(op, 0)])
    ctx.node(op, "Reciprocal", [root])


def square(ctx: ExportContext, op: Any) -> None:
    x = ctx.input(op, 0)
    ctx.node(op, "Mul", [x, x])


def erfc(ctx: ExportContext, op: Any) -> None:
    erf = ctx.helper(op, "erf", "Erf", [ctx.input(op, 0)])
    ctx.node(op, "Sub", [_scalar(ctx, op, "one", 1), erf])


def leaky_relu(ctx: ExportContext, op: Any) -> None:
    alpha = op.get_attr("alpha")
    ctx.node(op, "LeakyRelu", [ctx.input(op, 0)], alpha=alpha)


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


def cast(ctx: ExportContext, op: Any) -> None:
    target = helper.np_dtype_to_tensor_dtype(np.dtype(op.outputs[0].dtype.as_numpy_dtype))
    ctx.node(op, "Cast", [ctx.input(op, 0)], to=target)


def select(ctx: ExportContext, op: Any) -> None:
    condition = ctx.input(op, 0)
    rank_c, rank_x = ctx.rank(op, 0), ctx.rank(op, 1)
    if op.type == "Select" and rank_c == 1 and rank_x not in (None, 1):
        # TF1 Select picks whole rows with a vector condition: align it with axis 0.
        axes = ctx.constant(op, "axes", list(range(1, rank_x)), np.int64)
        condition = ctx.helper(op, "rows", "Unsqueeze", [condition, axes])
    inputs = [condition, ctx.input(op, 1), ctx.input(op, 2)]
    ctx.node(op, "Where", inputs)


def filled_like(value: int):
    def convert(ctx: ExportContext, op: Any) -> None:
        shape = ctx.helper(op, "shape", "Shape", [ctx.input(op, 0)])
        fill = helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(ctx.dtype(op, 0)),
                                  [1], [value])
        ctx.node(op, "ConstantOfShape", [shape], value=fill)

    return convert


CONVERTERS = {
    **{tf_op: _unary(onnx_op) for tf_op, onnx_op in UNARY.items()},
    **{tf_op: _binary(onnx_op) for tf_op, onnx_op in BINARY.items()},
    "Relu6": relu6, "Rsqrt": rsqrt, "Square": square, "Erfc": erfc, "LeakyRelu": leaky_relu,
    "SquaredDifference": squared_difference, "NotEqual": not_equal, "Div": divide,
    "FloorDiv": floor_div, "AddN": add_n, "Cast": cast, "Select": select, "SelectV2": select,
    "OnesLike": filled_like(1), "ZerosLike": filled_like(0),
    "IdentityN": identity_n, "ClipByValue": clip_by_value,
}
