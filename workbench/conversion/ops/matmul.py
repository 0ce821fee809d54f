"""MatMul, BatchMatMul and Einsum (docs/tftrt-behaviour.md#op-rules)."""

from __future__ import annotations

from workbench.conversion.operands import ANY, Ctx, check_broadcast, fail, reject_implicit_batch
from workbench.conversion.ops.rule import Check, legacy, structured


def _matmul(ctx: Ctx) -> None:
    a, b = ctx.inputs[0], ctx.inputs[1]
    if not ctx.ib:
        return
    # TRT dims: tensors lose the batch dim, weights keep all of theirs.
    if (a.nb_dims < 2 and (ctx.attr("transpose_a", False) or not b.is_weights)) \
            or b.nb_dims < 2:
        fail("MatMul with 2D tensors requires explicit batch mode, or that tensor A is not "
             "transposed and B is a constant tensor.")


def _batch_matmul(ctx: Ctx) -> None:
    x, y = ctx.inputs[0], ctx.inputs[1]
    if x.is_weights and y.is_weights:
        fail("All inputs are weights, but Grappler is expected to fold them.")
    if ctx.ib:
        for weights, other in ((x, y), (y, x)):
            if weights.is_weights and weights.nb_dims > other.nb_dims and weights.dims[0] != 1:
                fail("TensorRT does not support batched constants in implicit batch mode.")
    check_broadcast(x, y, ctx.ib, feasibility=False)


def _einsum(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)
    if len(ctx.inputs) > 2:
        fail(f"Einsum supports at most two inputs, at {ctx.name}")
    equation = str(ctx.attr("equation", ""))
    if equation.count("->") != 1:
        fail(f"Expecting exactly one '->' in einsum equation: {equation}")
    lhs, _, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    labels = set(lhs + out) - {",", "."}
    # ValidateEinsumEquation (TRT >= 8.2's IEinsumLayer): no ellipsis, no label repeated in an
    # input, some output label, and no outer product: two inputs whose two labels (in the
    # whole equation) both appear in the output.
    if ("." in equation or not out or any(len(set(t)) != len(t) for t in terms)
            or (len(terms) == 2 and len(labels) == 2 and all(out.count(c) == 1 for c in labels))):
        fail("No conversion for einsum equation.")


RULES: dict[str, Check] = {
    "MatMul": legacy(_matmul, roles=(("a", ANY), ("b", ANY))),
    "BatchMatMul": legacy(_batch_matmul, roles=(("x", ANY), ("y", ANY))),
    "BatchMatMulV2": legacy(_batch_matmul, roles=(("x", ANY), ("y", ANY))),
    "Einsum": structured(_einsum),
}
