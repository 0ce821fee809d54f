"""Element-wise binary ops and their relatives (docs/tftrt-behaviour.md#op-rules,
`ops/binary_ops.cc`)."""

from __future__ import annotations

from workbench.conversion.operands import (
    ANY,
    TENSOR,
    WEIGHTS,
    Ctx,
    check_broadcast,
    fail,
    reject_implicit_batch,
)
from workbench.conversion.ops.rule import FLOAT_HALF, FLOAT_HALF_INT32, Rule, legacy, structured

XY_ANY = (("x", ANY), ("y", ANY))
XY_TENSOR = (("x", TENSOR), ("y", TENSOR))

ARITHMETIC = ("Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "FloorDiv", "Minimum", "Maximum",
              "Pow")
COMPARISONS = ("Greater", "Less", "Equal", "GreaterEqual", "LessEqual")
LOGICAL = ("LogicalAnd", "LogicalOr")


def _binary(ctx: Ctx) -> None:
    """ConvertBinaryImpl: both-constant check, the implicit-batch check (comparisons and
    logical ops), the both-tensors check (logical ops), then the broadcast check."""
    left, right = ctx.inputs[0], ctx.inputs[1]
    if left.is_weights and right.is_weights:
        fail(f"Constant folding is falled back to TensorFlow, binary op '{ctx.op}' received both "
             "input as constant")
    if ctx.op in COMPARISONS or ctx.op in LOGICAL:
        reject_implicit_batch(ctx, "Binary")
    if ctx.op in LOGICAL and not (left.is_tensor and right.is_tensor):
        fail(f"Both inputs  of '{ctx.op}' are expected to be tensors")  # sic: two spaces
    check_broadcast(left, right, ctx.ib)


def _squared_difference(ctx: Ctx) -> None:
    check_broadcast(ctx.inputs[0], ctx.inputs[1], ctx.ib)


def _add_n(ctx: Ctx) -> None:
    if len(ctx.inputs) < 2:
        fail("AddN requires at least two inputs")
    for operand in ctx.inputs:
        if operand.is_weights and (not operand.dims or operand.dims[0] != 1):
            fail("Weights input to AddN is required to have batch dimension 1.")


def _bias_add(ctx: Ctx) -> None:
    value, bias = ctx.inputs[0], ctx.inputs[1]
    if value.is_weights and bias.is_weights:
        fail("All inputs are weights, but Grappler is expected to fold them.")
    if ctx.attr("data_format", "NHWC") != "NCHW":
        check_broadcast(value, bias, ctx.ib)


def _rules() -> dict[str, Rule]:
    rules = {op: structured(_binary, dtypes=FLOAT_HALF_INT32, roles=XY_ANY) for op in ARITHMETIC}
    rules.update({op: structured(_binary, dtypes=FLOAT_HALF_INT32, roles=XY_ANY)
                  for op in COMPARISONS})
    rules.update({op: structured(_binary, dtypes=None, roles=XY_ANY) for op in LOGICAL})
    rules["SquaredDifference"] = legacy(_squared_difference, roles=XY_TENSOR)
    rules["AddN"] = legacy(_add_n)
    rules["BiasAdd"] = legacy(_bias_add, roles=(("value", ANY), ("bias", ANY)))
    rules["Square"] = legacy(dtypes=FLOAT_HALF_INT32, roles=(("x", TENSOR),))
    rules["ClipByValue"] = legacy(
        dtypes=FLOAT_HALF,
        roles=(("t", TENSOR), ("clip_value_min", WEIGHTS), ("clip_value_max", WEIGHTS)))
    return rules


RULES = _rules()
