"""Reductions, ArgMax/ArgMin and TopKV2 (docs/tftrt-behaviour.md#op-rules)."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import TENSOR, WEIGHTS, Ctx, convert_axis, fail
from workbench.conversion.ops.rule import FLOAT_HALF, FLOAT_HALF_INT32, Check, legacy

REDUCTIONS = ("Sum", "Prod", "Max", "Min", "Mean")


def _reduce(ctx: Ctx) -> None:
    if ctx.attr("Tidx", "int32") != "int32":
        fail("Tidx supports only DT_INT32")
    axes = np.asarray(ctx.inputs[1].value).reshape(-1).tolist()
    if not axes:
        fail("TRT cannot support reduce on all (batch) dimensions")
    for axis in axes:
        convert_axis(int(axis), ctx.inputs[0].nb_dims, ctx)


def _arg_min_max(ctx: Ctx) -> None:
    # TF's default output_type is int64, so a default tf.argmax never converts.
    output_type = ctx.attr("output_type", "int64")
    if output_type != "int32":
        fail(f"Output type {output_type} is not supported")
    axis = int(np.asarray(ctx.inputs[1].value).reshape(-1)[0])
    convert_axis(axis, ctx.inputs[0].nb_dims, ctx)


def _top_k(ctx: Ctx) -> None:
    if not ctx.attr("sorted", True):
        fail("Only sorted=True is supported")
    if ctx.inputs[0].nb_dims < 1:  # in both modes: a 0-D input has no axis to sort
        fail("TensorRT TopK cannot apply on batch dimension")
    if np.asarray(ctx.inputs[1].value).size != 1:  # one element, whatever its shape
        fail("k value of TopK should be a scalar")


def _rules() -> dict[str, Check]:
    axis_roles = (("input", TENSOR), ("axis", WEIGHTS))
    rules: dict[str, Check] = {
        op: legacy(_reduce, dtypes=FLOAT_HALF_INT32, roles=axis_roles) for op in REDUCTIONS}
    for op in ("ArgMax", "ArgMin"):
        rules[op] = legacy(_arg_min_max, dtypes=FLOAT_HALF,
                           roles=(("input", TENSOR), ("dimension", WEIGHTS)))
    rules["TopKV2"] = legacy(_top_k, dtypes=FLOAT_HALF, roles=(("input", TENSOR), ("k", WEIGHTS)))
    return rules


RULES = _rules()
