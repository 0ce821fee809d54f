"""Slice, StridedSlice, Pad and GatherV2 (docs/tftrt-behaviour.md#op-rules)."""

from __future__ import annotations

from dataclasses import dataclass

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
SLICE_DTYPES = ("float", "half", "int32")  # what Slice and StridedSlice take


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
    end, end_mask = [], 0
    for i, (b, n, d) in enumerate(zip(begin, size, shape, strict=True)):
        if n == -1:  # to the end of the dimension: an end-mask bit
            end_mask |= 1 << i
            end.append(0)
            continue
        end.append(b + n)
        if b + n > d > 0:
            fail(f'"begin" + "size" for dimension {i} in Slice is out of range')
    spec = SliceSpec(begin, end, [1] * len(shape), end_mask=end_mask)
    strided_slice_helper(ctx, shape, *dense_slice(shape, spec))


def _strided_slice(ctx: Ctx) -> None:
    if int(ctx.attr("new_axis_mask", 0)):
        fail("new_axis_mask is not supported for StridedSlice")
    if ctx.ib and int(ctx.attr("shrink_axis_mask", 0)) & 1:
        fail(BATCH_MSG)
    shape = ctx.inputs[0].shape
    spec = SliceSpec(_ints(ctx, 1), _ints(ctx, 2), _ints(ctx, 3),
                     *(int(ctx.attr(f"{m}_mask", 0)) for m in ("begin", "end", "ellipsis",
                                                              "shrink_axis")))
    if not len(spec.begin) == len(spec.end) == len(spec.strides):
        fail("Length of begin, end, and stride must be equal")
    begin, end, strides = dense_slice(shape, spec)
    # The ellipsis test compares the begin tensor's rank (always 1), not its length.
    ellipsis_first = spec.ellipsis_mask & 1 and ctx.inputs[1].value.ndim < len(shape)
    if ctx.ib and not ellipsis_first and _touches_batch(shape[0], spec, begin, end, strides):
        fail(BATCH_MSG)
    strided_slice_helper(ctx, shape, begin, end, strides)


def _touches_batch(batch: int, spec: SliceSpec, begin: list[int], end: list[int],
                   strides: list[int]) -> bool:
    """The sparse masks' bit 0 with the dense begin/end; an unknown batch never counts as
    covered by an explicit end."""
    begin_moved = not spec.begin_mask & 1 and begin[0] != 0
    end_moved = not spec.end_mask & 1 and (batch <= 0 or end[0] != batch)
    return begin_moved or end_moved or strides[0] != 1


@dataclass(frozen=True)
class SliceSpec:
    """A StridedSlice's sparse specification: begin/end/strides and its masks."""

    begin: list[int]
    end: list[int]
    strides: list[int]
    begin_mask: int = 0
    end_mask: int = 0
    ellipsis_mask: int = 0
    shrink_axis_mask: int = 0


def dense_slice(shape: tuple[int, ...], spec: SliceSpec) -> tuple[list, list, list]:
    """TF's ValidateStridedSliceOp (no new axes): the ellipsis expanded to one entry per
    dimension, then begin/end made explicit and clamped on every dimension of known size."""
    rank = len(shape)
    ellipsis, entries = spec.ellipsis_mask, len(spec.strides)
    if ellipsis & (ellipsis - 1):
        fail("Multiple ellipses in slice spec not allowed")
    if not ellipsis:  # an implicit ellipsis after the last entry
        ellipsis, entries = 1 << entries, entries + 1
    begin, end, strides = [0] * rank, [0] * rank, [0] * rank
    begin_mask = end_mask = shrink = full = 0
    for i in range(entries):
        if ellipsis >> i & 1:
            while full < min(rank - (entries - i) + 1, rank):
                strides[full] = 1
                begin_mask, end_mask = begin_mask | 1 << full, end_mask | 1 << full
                full += 1
            continue
        if full == rank:
            fail(f"Index out of range using input dim {full}; input has only {rank} dims")
        begin[full], end[full], strides[full] = spec.begin[i], spec.end[i], spec.strides[i]
        begin_mask |= (spec.begin_mask >> i & 1) << full
        end_mask |= (spec.end_mask >> i & 1) << full
        shrink |= (spec.shrink_axis_mask >> i & 1) << full
        full += 1
    for i, dim in enumerate(shape):
        if strides[i] == 0:
            fail(f"strides[{i}] must be non-zero")
        if dim < 0:
            continue  # unknown size: begin and end stay as given
        if shrink >> i & 1:
            if strides[i] <= 0:
                fail("only stride 1 allowed on non-range indexing.")
            index = begin[i] + dim if begin[i] < 0 else begin[i]
            if not 0 <= index < dim:
                fail(f"slice index {index} of dimension {i} out of bounds.")
            begin[i], end[i] = index, index + 1
            continue
        masks = (begin_mask >> i & 1, end_mask >> i & 1)
        begin[i] = _canonical(begin[i], 0, dim, strides[i], masks)
        end[i] = _canonical(end[i], 1, dim, strides[i], masks)
    return begin, end, strides


def _canonical(x: int, which: int, dim: int, stride: int, masks: tuple[int, int]) -> int:
    low, high = (0, dim) if stride > 0 else (-1, dim - 1)
    if masks[which]:
        return (low, high)[which if stride > 0 else 1 - which]
    x = dim + x if x < 0 else x
    return min(max(x, low), high)


NO_SPEC = ("The argument `strided_slice_spec` is `std::nullopt` with "
           "`dynamic_input_size_indices` non empty.")


def strided_slice_helper(ctx: Ctx, shape: tuple[int, ...], begin: list[int], end: list[int],
                         strides: list[int], has_spec: bool = True) -> None:
    """ConvertStridedSliceHelper's checks on full (TF) begin/end/strides.

    It drops the batch entry from begin/end/strides in implicit batch mode but still reads
    the TF shape at the same index, so TRT dim i is judged by TF dim i: an unknown batch counts
    as a dynamic size. Split and Unpack pass no slice spec, so any dynamic size rejects them.
    """
    first = 1 if ctx.ib else 0
    dynamic = False
    for i in range(len(begin) - first):
        if shape[i] < 0:
            dynamic = True
        elif end[i + first] < begin[i + first] and strides[i + first] > 0:
            fail('"size" cannot be negative for StridedSlice')
    if dynamic and not has_spec:
        fail(NO_SPEC)
    if dynamic and ctx.ib:
        fail("In implicit batch mode, dynamic input size is not supported.")


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


def batch_size(operand: Operand) -> int:
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
            batch_size(indices) != 1 or batch_size(params) != 1):
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
    "Slice": legacy(_slice, dtypes=SLICE_DTYPES,
                    roles=(("input", TENSOR), ("begin", WEIGHTS), ("size", WEIGHTS))),
    "StridedSlice": legacy(_strided_slice, dtypes=SLICE_DTYPES,
                           roles=(("input", TENSOR), ("begin", WEIGHTS), ("end", WEIGHTS),
                                  ("strides", WEIGHTS))),
    "Pad": legacy(_pad, dtypes=("float", "half", "int8"),
                  roles=(("tensor", TENSOR), ("paddings", WEIGHTS))),
    "GatherV2": legacy(_gather, dtypes=("float", "half", "int32"), dtype_attr="Tparams",
                       roles=(("params", ANY), ("indices", ANY), ("axis", WEIGHTS))),
}
