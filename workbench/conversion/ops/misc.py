"""Softmax, fill-like ops, Resize, variables, Const, Cast and the pass-through ops
(docs/tftrt-behaviour.md#op-rules)."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import (
    ANY,
    RESOURCE,
    TENSOR,
    TRT_TYPE_NAMES,
    WEIGHTS,
    Ctx,
    Operand,
    ValidatorSettings,
    check_dtype_attr,
    const_weights,
    expect_shape_tensor,
    fail,
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
        fail(f"The dims parameter of Fill operation in {ctx.name} is expected to be of type "
             f"kINT32 type, got {TRT_TYPE_NAMES.get(dtype, dtype)}")


RANGE_ARGS = ("start", "limit", "delta")


def _range(ctx: Ctx) -> None:
    """ConvertRange's checks, in its order (fill_ops.cc)."""
    reject_implicit_batch(ctx)
    values = [_range_value(ctx, i) for i in range(3)]
    all_weights = all(o.is_weights for o in ctx.inputs)
    if not all_weights and any(o.dtype != "int32" for o in ctx.inputs):
        fail("When at least one of parameters (start, limit, delta) of Range operation in "
             f"{ctx.name} is passed as a tensor, they must all be of type kINT32")
    start, limit, delta = values
    if ctx.inputs[2].is_weights:
        if delta == 0:
            fail("The delta parameter of Range operation cannot be equal to 0")
        if not all_weights and delta < 0:
            fail("The delta parameter of Range operation cannot be negative, when one of "
                 f"(start, limit) is passed as a tensor, but got {delta:g}")
    for arg, operand in zip(RANGE_ARGS, ctx.inputs, strict=True):
        if operand.dims != (1,):  # so a scalar constant fails too
            fail(f"Dimension for '{arg}' of Range operator should be equal to 1")
    if all_weights and (limit - start) / delta < 0:
        fail(f"For parameters (start, limit) = ({start:.2f}, {limit:.2f}) of the Range "
             f"operation delta cannot be {'negative' if start < limit else 'positive'}, "
             f"got {delta:.2f}")


def _range_value(ctx: Ctx, index: int) -> np.float32:
    """A constant argument's first element as float32 (what TF-TRT computes with)."""
    operand = ctx.inputs[index]
    if operand.is_tensor:
        return np.float32(0)
    if operand.dtype not in FLOAT_HALF_INT32:
        fail(f"Unsupported data type {TRT_TYPE_NAMES.get(operand.dtype, operand.dtype)} used "
             f"for '{RANGE_ARGS[index]}'")
    flat = np.asarray(operand.value).reshape(-1)
    return np.float32(flat[0]) if flat.size else np.float32(0)


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
