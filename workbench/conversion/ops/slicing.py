"""Slice, StridedSlice, Pad and GatherV2 (spec §3.4)."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import (
    ANY,
    MAX_DIMS,
    TENSOR,
    WEIGHTS,
    Ctx,
    Operand,
    check_dtype_attr,
    fail,
)
from workbench.conversion.ops.rule import Check, legacy

BATCH_MSG = "TensorRT does not allow modifications to the batch dimension"


def _ints(ctx: Ctx, index: int) -> list[int]:
    return np.asarray(ctx.inputs[index].value).reshape(-1).astype(np.int64).tolist()


def _slice(ctx: Ctx) -> None:
    shape = ctx.inputs[0].shape
    begin, size = _ints(ctx, 1), _ints(ctx, 2)
    if any(b < 0 for b in begin):
        fail('"begin" in Slice is out of range')
    if any(n < -1 for n in size):
        fail('"size" in Slice is out of range')
    if len(begin) != len(shape) or len(size) != len(shape):
        fail("Length of begin and size arguments must equal rank of input for Slice")
    if ctx.ib and (begin[0] != 0 or size[0] not in (-1, shape[0])):
        fail(f"{BATCH_MSG} in implicit batch mode")
    for i, (b, n, d) in enumerate(zip(begin, size, shape, strict=True)):
        if n != -1 and b + n > d > 0:
            fail(f'"begin" + "size" for dimension {i} in Slice is out of range')
    # TF's own ValidateStridedSliceOp runs next; its shape errors are not reproduced.


def _strided_slice(ctx: Ctx) -> None:
    if int(ctx.attr("new_axis_mask", 0)):
        fail("new_axis_mask is not supported for StridedSlice")
    shape = ctx.inputs[0].shape
    begin, end, strides = _ints(ctx, 1), _ints(ctx, 2), _ints(ctx, 3)
    if not len(begin) == len(end) == len(strides):
        fail("Length of begin, end, and stride must be equal")
    if not ctx.ib:
        return
    if int(ctx.attr("shrink_axis_mask", 0)) & 1:
        fail(BATCH_MSG)
    ellipsis_first = int(ctx.attr("ellipsis_mask", 0)) & 1 and len(begin) < len(shape)
    if not ellipsis_first and _touches_batch(ctx, shape[0], begin, end, strides):
        fail(BATCH_MSG)


def _touches_batch(ctx: Ctx, batch: int, begin: list[int], end: list[int],
                   strides: list[int]) -> bool:
    begin_full = int(ctx.attr("begin_mask", 0)) & 1 or begin[0] == 0
    if int(ctx.attr("end_mask", 0)) & 1:
        end_full = True
    else:
        # With an unknown batch size no explicit end can be proven to cover it.
        end_full = batch >= 0 and end[0] >= batch
    return not (begin_full and end_full and strides[0] == 1)


def _pad(ctx: Ctx) -> None:
    rank = len(ctx.inputs[0].shape)
    paddings = np.asarray(ctx.inputs[1].value)
    if rank < 4:
        fail("Convertpad requires at least 4D input")
    if paddings.shape != (rank, 2):
        fail("Paddings must be a weight with shape [n, 2], where n is the rank of input tensor")
    if ctx.attr("Tpaddings", "int32") != "int32":
        fail("Tpaddings supports only DT_INT32")
    padded = [i for i in range(rank) if paddings[i].any()]
    if len(padded) > 2:
        fail("Padding layer does not support padding on > 2")
    if ctx.ib and 0 in padded:
        fail("Padding layer does not support padding on batch dimension")


def _batch_size(operand: Operand) -> int:
    """TRT_TensorOrWeights::batch_size(): dim 0 of a tensor, -1 for weights."""
    return operand.shape[0] if operand.is_tensor and operand.shape else -1


def _gather(ctx: Ctx) -> None:
    check_dtype_attr(ctx.node, ("int32",), "Tindices", legacy=True)
    params, indices, axis = ctx.inputs
    if np.asarray(axis.value).size != 1:
        fail("Axis for GatherV2 must be a scalar")
    tf_axis = int(np.asarray(axis.value).reshape(-1)[0])
    # Weights params have no implicit batch dim, so their axis is converted like EB.
    ib_tensor = ctx.ib and params.is_tensor
    tf_nb_dims = params.nb_dims + (1 if ib_tensor else 0)
    if tf_axis < -tf_nb_dims or tf_axis >= tf_nb_dims:
        fail(f"Axis value of {tf_axis} is out of bounds, must be in range "
             f"[{-tf_nb_dims}, {tf_nb_dims}), at {ctx.name}")
    trt_axis = tf_axis % tf_nb_dims
    if ib_tensor and trt_axis == 0:
        fail("TensorRT does not allow manipulation of the batch dimension")
    if ctx.ib and params.is_weights and trt_axis != 0:
        fail("The input axis must be zero when params is a weight.")
    if ctx.ib and params.is_tensor == indices.is_tensor and (
            _batch_size(indices) != 1 or _batch_size(params) != 1):
        fail("Params and indices must have a batch size of 1 when params and indices are both "
             "tensors or both constants.")
    rank = sum(o.nb_dims + (1 if ctx.ib and o.is_tensor else 0) for o in (params, indices)) - 1
    if rank > MAX_DIMS + (1 if ctx.ib else 0):
        fail(f"Result of gather has dimension greater than {MAX_DIMS + 1}")
    batch_dims = int(ctx.attr("batch_dims", 0))
    if ctx.ib and batch_dims:
        fail("batch_dims must be zero in implicit batch mode")
    if not ctx.ib and batch_dims > 1:
        fail("batch_dims cannot exceed 1 in dynamic shape mode")


RULES: dict[str, Check] = {
    "Slice": legacy(_slice, dtypes=("float", "half", "int32"),
                    roles=(("input", TENSOR), ("begin", WEIGHTS), ("size", WEIGHTS))),
    "StridedSlice": legacy(_strided_slice, dtypes=("float", "half", "int32"),
                           roles=(("input", TENSOR), ("begin", WEIGHTS), ("end", WEIGHTS),
                                  ("strides", WEIGHTS))),
    "Pad": legacy(_pad, dtypes=("float", "half", "int8"),
                  roles=(("tensor", TENSOR), ("paddings", WEIGHTS))),
    "GatherV2": legacy(_gather, dtypes=("float", "half", "int32"), dtype_attr="Tparams",
                       roles=(("params", ANY), ("indices", ANY), ("axis", WEIGHTS))),
}
