"""Select and SelectV2 (spec §3.5, `ops/selectv2.cc`; TRT >= 8.2)."""

from __future__ import annotations

from workbench.conversion.operands import (
    ANY,
    TRT_TYPE_NAMES,
    Ctx,
    fail,
    input_name,
    reject_implicit_batch,
)
from workbench.conversion.ops.rule import FLOAT_HALF_INT32, Check, structured


def _select(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)
    cond, then, other = ctx.inputs
    if cond.is_weights:
        fail(f"The boolean parameter '{input_name(ctx, 0)}' of the '{ctx.op}' operation at the "
             f"node '{ctx.name}' cannot be passed as a weight in TRT version 8.4.")
    if cond.dtype != "bool":
        # check_type(): "The '<input>' parameter of <Op> operation in <node> is expected ..."
        got = TRT_TYPE_NAMES.get(cond.dtype, cond.dtype)
        fail(f"The '{input_name(ctx, 0)}' parameter of {ctx.op} operation in {ctx.name} is "
             f"expected to be of type kBOOL type, got {got}.")
    if (then.dtype == "int32") != (other.dtype == "int32"):
        fail(f"Both 'then' and 'else' parameters of {ctx.op} operation in {ctx.name} are "
             "expected to be of the same type (kINT32 or not).")
    if ctx.op == "Select":
        _select_v1_shapes(ctx)


def _select_v1_shapes(ctx: Ctx) -> None:
    cond, then, other = ctx.inputs
    if then.dims != other.dims:
        fail(f"The shapes of the 'then' and 'else' parameters of Select operation in "
             f"{ctx.name} must be equal.")
    vector_ok = cond.nb_dims == 1 and then.nb_dims >= 1 and cond.dims[0] == then.dims[0]
    if cond.dims != then.dims and not vector_ok:
        fail(f"The shape of the 'cond' parameter of Select operation in {ctx.name} must be "
             "equal to the shape of 'then', or be a vector of its first dimension.")


ROLES = (("cond", ANY), ("then", ANY), ("else", ANY))
RULES: dict[str, Check] = {
    op: structured(_select, dtypes=FLOAT_HALF_INT32, roles=ROLES) for op in ("Select", "SelectV2")
}
