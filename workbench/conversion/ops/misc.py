"""Softmax, fill-like ops, Resize, variables, Const, Cast and the pass-through ops
(spec §3.4, §3.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from workbench.conversion.operands import (
    ANY,
    RESOURCE,
    TENSOR,
    TRT_TYPE_NAMES,
    WEIGHTS,
    Ctx,
    Operand,
    check_dtype_attr,
    const_weights,
    expect_shape_tensor,
    fail,
    input_name,
    reject_implicit_batch,
)
from workbench.conversion.ops.rule import (
    FLOAT_HALF,
    FLOAT_HALF_INT32,
    Check,
    accept,
    legacy,
    structured,
)
from workbench.graph.nodes import Node

if TYPE_CHECKING:
    from workbench.conversion.validator import ValidatorSettings

PASS_THROUGH = ("Identity", "IdentityN", "Snapshot", "StopGradient", "_CopyFromHostToGpu")
LIKE_OPS = ("ZerosLike", "OnesLike", "zeros_like", "ones_like")
RESIZE_OPS = ("ResizeBilinear", "ResizeNearestNeighbor")


def _softmax(ctx: Ctx) -> None:
    if ctx.ib and ctx.inputs[0].nb_dims < 1:
        fail(f"TensorRT {ctx.op} cannot apply on the batch dimension")


def _explicit_batch_only(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)


def _fill(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)
    dtype = ctx.inputs[0].dtype
    if dtype != "int32":
        # Worded like check_type() in convert_nodes.cc (fill_ops.cc not re-read).
        fail(f"The '{input_name(ctx, 0)}' parameter of Fill operation in {ctx.name} is expected "
             f"to be of type kINT32 type, got {TRT_TYPE_NAMES.get(dtype, dtype)}.")


def _range(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)
    delta = ctx.inputs[2]
    if any(o.is_tensor for o in ctx.inputs) and any(o.dtype != "int32" for o in ctx.inputs):
        fail(f"All parameters of Range operation in {ctx.name} are expected to be of type "
             "kINT32 when at least one of them is a tensor")
    if delta.is_weights and float(np.asarray(delta.value).reshape(-1)[0]) == 0:
        fail("The delta parameter of Range operation cannot be equal to 0")


def _resize(ctx: Ctx) -> None:
    size = ctx.inputs[1]
    if size.is_weights:
        if np.asarray(size.value).size != 2:
            fail("Resize requires 2D values for the size")
    else:
        if ctx.ib:
            fail("Resize requires constant size in implicit batch mode")
        expect_shape_tensor(size)
        if size.dims[:1] != (2,):
            fail("Resize requires 2D values for the size")
    if not ctx.node.has_attr("align_corners"):
        fail(f"No attr named 'align_corners' in NodeDef {ctx.name}")
    # A second dtype check narrows the first one (which allowed int32) to float/half.
    check_dtype_attr(ctx.node, FLOAT_HALF, legacy=True)
    # TRT >= 7.1: only align_corners=True matches TF's bilinear sampling; half_pixel_centers
    # is not looked at.
    if ctx.op == "ResizeBilinear" and not ctx.attr("align_corners"):
        fail("Cannot Convert Bilinear Resize when align_corners=False")


def _read_variable(ctx: Ctx) -> None:
    if ctx.ib:
        fail(f"Implicit batch mode not supported, at {ctx.name}")
    if not ctx.node.has_attr("_shape"):
        fail(f"Attribute _shape of {ctx.op} not found, at {ctx.name}")


READ_VARIABLE = structured(_read_variable, dtype_attr="dtype", roles=(("resource", RESOURCE),))


def read_variable_weights(node: Node, settings: ValidatorSettings) -> Operand:
    """A ReadVariableOp feeding another node: its converter run with a fake resource input."""
    READ_VARIABLE(Ctx(None, node, [Operand(RESOURCE, "resource")], settings))
    shape = tuple(node.attr("_shape") or ())
    return Operand(WEIGHTS, node.attr("dtype"), shape, shape)


def _const(ctx: Ctx) -> None:
    const_weights(ctx.node)


def _cast(ctx: Ctx) -> None:
    if "reject_all_fp_cast_ops" in ctx.settings.experimental_features:
        fail("Cast op is not supported - TF_TRT_EXPERIMENTAL_FEATURES=reject_all_fp_cast_ops "
             "has been defined")
    # The input dtype is the converted input's, not SrcT; the output dtype is DstT.
    for side, dtype in (("input", ctx.inputs[0].dtype), ("output", ctx.attr("DstT"))):
        if dtype not in FLOAT_HALF:
            fail(f"Cast op is not supported - Allowed {side} dtypes: [float, half]. "
                 f"Received: {dtype}")


def _rules() -> dict[str, Check]:
    rules: dict[str, Check] = {op: accept for op in PASS_THROUGH}
    rules["Softmax"] = structured(_softmax, roles=(("logits", TENSOR),))
    rules["LogSoftmax"] = structured(_softmax, roles=(("logits", TENSOR),))
    rules["Fill"] = structured(_fill, dtypes=FLOAT_HALF_INT32,
                               roles=(("dims", ANY), ("value", ANY)))
    rules["Range"] = structured(_range, dtypes=FLOAT_HALF_INT32, dtype_attr="Tidx",
                                roles=(("start", ANY), ("limit", ANY), ("delta", ANY)))
    rules.update({op: structured(_explicit_batch_only, dtypes=FLOAT_HALF_INT32,
                                 roles=(("input", ANY),)) for op in LIKE_OPS})
    rules.update({op: legacy(_resize, dtypes=FLOAT_HALF_INT32,
                             roles=(("input", TENSOR), ("size", ANY))) for op in RESIZE_OPS})
    rules["VariableV2"] = legacy(dtype_attr="dtype")
    rules["ReadVariableOp"] = READ_VARIABLE
    rules["Const"] = _const
    rules["Cast"] = _cast
    rules["FakeOp"] = accept  # the debug converter TF_TRT_OP_FAKELIST hands out
    return rules


RULES = _rules()
