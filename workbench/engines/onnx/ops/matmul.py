"""Matrix products: MatMul, BatchMatMul and Einsum."""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext, ExportError


def _swap_last(ctx: ExportContext, op: Any, index: int, label: str) -> str:
    """Input `index` with its last two axes swapped (TF's transpose_a/b, adj_x/y)."""
    value = ctx.const(op, index)
    if value is not None:
        return ctx.constant(op, label, np.ascontiguousarray(np.swapaxes(value, -1, -2)))
    rank = ctx.rank(op, index)
    if rank is None:
        raise ExportError(op, "transposing an operand needs its rank")
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return ctx.helper(op, label, "Transpose", [ctx.input(op, index)], perm=perm)


def matmul(ctx: ExportContext, op: Any) -> None:
    flags = ("transpose_a", "transpose_b") if op.type == "MatMul" else ("adj_x", "adj_y")
    inputs = [
        _swap_last(ctx, op, i, f"{flag}") if op.get_attr(flag) else ctx.input(op, i)
        for i, flag in enumerate(flags)
    ]
    ctx.node(op, "MatMul", inputs)


def einsum(ctx: ExportContext, op: Any) -> None:
    equation = op.get_attr("equation").decode().replace(" ", "")
    if "." in equation:  # ONNX Runtime's Einsum handles ellipses poorly; none in our models
        raise ExportError(op, "ellipsis equations are not exported")
    inputs = [ctx.input(op, i) for i in range(len(op.inputs))]
    ctx.node(op, "Einsum", inputs, equation=lowercase_subscripts(equation))


def lowercase_subscripts(equation: str) -> str:
    """The equation with its subscripts renamed to lowercase letters (first seen, first
    letter): TensorRT's Einsum takes only lowercase subscripts (TF and ONNX take both cases).
    An equation with more than 26 distinct subscripts is kept as it is."""
    labels = list(dict.fromkeys(c for c in equation if c.isalpha()))
    if len(labels) > 26:
        return equation
    rename = dict(zip(labels, string.ascii_lowercase, strict=False))
    return "".join(rename.get(c, c) for c in equation)


CONVERTERS = {
    "MatMul": matmul, "BatchMatMul": matmul, "BatchMatMulV2": matmul,
    "BatchMatMulV3": matmul, "Einsum": einsum,
}
