"""Element-wise unary ops, activations and LogicalNot (docs/tftrt-behaviour.md#op-rules,
`ops/unary_ops.cc`)."""

from __future__ import annotations

from workbench.conversion.operands import TENSOR, Ctx, fail, reject_implicit_batch
from workbench.conversion.ops.rule import FLOAT_HALF, Rule, structured

X = (("x", TENSOR),)
UNARY_DTYPES = ("float", "half", "int8")

UNARY_OPS = (
    "Neg", "Exp", "Log", "Sqrt", "Rsqrt", "Abs", "Reciprocal", "Sin", "Cos", "Tan", "Sinh",
    "Cosh", "Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh", "Ceil", "Floor", "Erf",
)
ACTIVATIONS = (
    "Relu", "Relu6", "Sigmoid", "Tanh", "Elu", "Selu", "Softsign", "Softplus", "LeakyRelu",
)


def _at_least_one_dim(ctx: Ctx) -> None:
    if ctx.inputs[0].nb_dims < 1:
        fail(f"At least 1 dimension is required for UNARY operation '{ctx.op}'")


def _explicit_batch_unary(ctx: Ctx) -> None:
    """Round, Sign, LogicalNot: the dims check comes before the implicit-batch check."""
    _at_least_one_dim(ctx)
    reject_implicit_batch(ctx, "Unary")


def _activation(ctx: Ctx) -> None:
    _at_least_one_dim(ctx)  # shared with the unary converter, so its message says UNARY
    if ctx.op == "LeakyRelu" and not ctx.node.has_attr("alpha"):
        fail(f"Attribute alpha of {ctx.op} not found, at {ctx.name}")


def _rules() -> dict[str, Rule]:
    rules = {op: structured(_at_least_one_dim, dtypes=UNARY_DTYPES, roles=X)
             for op in UNARY_OPS}
    rules["Round"] = structured(_explicit_batch_unary, dtypes=UNARY_DTYPES, roles=X)
    rules["Sign"] = structured(_explicit_batch_unary, dtypes=(*UNARY_DTYPES, "int32"), roles=X)
    rules["LogicalNot"] = structured(_explicit_batch_unary, dtypes=None, roles=X)
    rules.update({op: structured(_activation, dtypes=FLOAT_HALF, roles=(("input", TENSOR),))
                  for op in ACTIVATIONS})
    return rules


RULES = _rules()
