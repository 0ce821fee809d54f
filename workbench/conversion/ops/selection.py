"""Select and SelectV2 (docs/tftrt-behaviour.md#op-rules, `ops/selectv2.cc`; TRT >= 8.2)."""

from __future__ import annotations

from workbench.conversion.operands import (
    ANY,
    TENSOR,
    TRT_TYPE_NAMES,
    Ctx,
    Operand,
    check_broadcast,
    dims_debug_string,
    fail,
    input_name,
    is_static,
    reject_implicit_batch,
)
from workbench.conversion.ops.rule import FLOAT_HALF_INT32, Check, structured


def _select(ctx: Ctx) -> None:
    """ConvertSelectBase::Validate, in its order."""
    reject_implicit_batch(ctx)
    cond, then, other = ctx.inputs
    if cond.dtype != "bool":  # check_type() on the cond input
        fail(f"The '{input_name(ctx, 0)}' parameter of {ctx.op} operation in {ctx.name} is "
             f"expected to be of type kBOOL type, got {_trt_type(cond)}.")
    if cond.is_weights:
        fail(f"The boolean parameter '{input_name(ctx, 0)}'{_at(ctx)}cannot be passed as a "
             "weight in TRT version 8.4.")
    if then.dtype != other.dtype and "int32" in (then.dtype, other.dtype):
        fail(f"DataTypes ({_trt_type(then)}, {_trt_type(other)}) of parameters "
             f"({input_name(ctx, 1)}, {input_name(ctx, 2)}){_at(ctx)}are incompatible.")
    cond_dims = cond.dims
    if ctx.op == "Select":
        _same_shapes(ctx, then.dims, other.dims, "'then' and 'else'", (then, other))
        if not _same_shapes(ctx, cond.dims, then.dims, "'cond' and 'then'", (cond, then)):
            # A vector cond selects whole rows: it broadcasts as [N, 1, ..., 1].
            cond_dims = (cond.dims[0],) + (1,) * (then.nb_dims - 1)
    # The broadcast check treats cond as a tensor in explicit batch mode.
    bool_cond = Operand(TENSOR, "bool", cond_dims, cond_dims)
    for value in (then, other):
        check_broadcast(bool_cond, value, ib=False)


def _same_shapes(ctx: Ctx, first: tuple[int, ...], second: tuple[int, ...], names: str,
                 operands: tuple[Operand, Operand]) -> bool:
    """compare_shapes(): equal dims, or equal ranks with a dynamic tensor among the two (left
    to run time). `cond` may instead be a vector of the first dim's length (returns False)."""
    if first == second:
        return True
    if len(first) == len(second) and any(o.is_tensor and not is_static(o.dims)
                                         for o in operands):
        return True
    cond_vs_then = names.startswith("'cond'")
    if cond_vs_then and len(first) == 1 and second and first[0] == second[0]:
        return False
    vector = (" OR 'cond' must be a vector with N elements, where N is a batch size (the first "
              "shape dimension for 'then')") if cond_vs_then else ""
    fail(f"The shapes of the {names} parameters{_at(ctx)}must be the same{vector}, got "
         f"{dims_debug_string(first)} vs. {dims_debug_string(second)}.")


def _at(ctx: Ctx) -> str:
    return f" of the '{ctx.op}' operation at the node '{ctx.name}' "


def _trt_type(operand: Operand) -> str:
    return TRT_TYPE_NAMES.get(operand.dtype, operand.dtype)


ROLES = (("cond", ANY), ("then", ANY), ("else", ANY))
RULES: dict[str, Check] = {
    op: structured(_select, dtypes=FLOAT_HALF_INT32, roles=ROLES) for op in ("Select", "SelectV2")
}
