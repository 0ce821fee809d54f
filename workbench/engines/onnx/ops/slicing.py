"""Slicing ops: StridedSlice (all five masks), Slice and GatherV2, with constant bounds; Pad."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import TensorProto

from workbench.engines.onnx.context import ExportContext, ExportError

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


@dataclass
class SlicePlan:
    """An ONNX Slice over input axes, then Unsqueeze for new axes, then Squeeze for shrunk ones.

    `layout` is the axis order after the Unsqueeze: "new" or the input axis index.
    """

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    axes: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    layout: list[Any] = field(default_factory=list)
    shrink: list[int] = field(default_factory=list)  # input axes


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def plan_strided_slice(
    begin: np.ndarray, end: np.ndarray, strides: np.ndarray, masks: dict[str, int],
    rank: int | None,
) -> SlicePlan:
    """TF's sparse slice spec made dense: which input axis each spec entry addresses."""
    plan = SlicePlan()
    dim, count = 0, len(begin)
    for i in range(count):
        if _bit(masks["ellipsis_mask"], i):
            if rank is None:
                raise ValueError("an ellipsis needs the input rank")
            later = sum(not _bit(masks["new_axis_mask"], j) for j in range(i + 1, count))
            plan.layout.extend(range(dim, rank - later))
            dim = rank - later
        elif _bit(masks["new_axis_mask"], i):
            plan.layout.append("new")
        else:
            _plan_axis(plan, dim, int(begin[i]), int(end[i]), int(strides[i]), masks, i)
            plan.layout.append(dim)
            dim += 1
    return plan


def _plan_axis(
    plan: SlicePlan, dim: int, begin: int, end: int, stride: int, masks: dict[str, int], i: int
) -> None:
    if _bit(masks["shrink_axis_mask"], i):
        plan.shrink.append(dim)
        # One element; -1 + 1 would be 0, an empty slice, so -1 runs to the end instead.
        stride, end = 1, INT64_MAX if begin == -1 else begin + 1
    else:
        if _bit(masks["begin_mask"], i):
            begin = 0 if stride > 0 else INT64_MAX
        if _bit(masks["end_mask"], i):
            end = INT64_MAX if stride > 0 else INT64_MIN
    plan.starts.append(begin)
    plan.ends.append(end)
    plan.axes.append(dim)
    plan.steps.append(stride)


MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice(ctx: ExportContext, op: Any) -> None:
    begin, end, strides = (ctx.require_const(op, i, what) for i, what in
                           ((1, "begin"), (2, "end"), (3, "strides")))
    masks = {name: op.get_attr(name) for name in MASKS}
    try:
        plan = plan_strided_slice(begin, end, strides, masks, ctx.rank(op, 0))
    except ValueError as exc:
        raise ExportError(op, str(exc)) from None
    value = ctx.input(op, 0)
    steps = [("slice", bool(plan.axes)), ("unsqueeze", "new" in plan.layout),
             ("squeeze", bool(plan.shrink))]
    last = [name for name, needed in steps if needed][-1:] or ["identity"]
    if last == ["identity"]:
        ctx.node(op, "Identity", [value])
        return
    for name, needed in steps:
        if not needed:
            continue
        inputs = [value, *_step_inputs(ctx, op, plan, name)]
        onnx_op = name.capitalize()
        if name == last[0]:
            ctx.node(op, onnx_op, inputs)
        else:
            value = ctx.helper(op, name, onnx_op, inputs)


def _step_inputs(ctx: ExportContext, op: Any, plan: SlicePlan, step: str) -> list[str]:
    if step == "slice":
        return [ctx.constant(op, label, values, np.int64) for label, values in
                (("starts", plan.starts), ("ends", plan.ends), ("axes", plan.axes),
                 ("steps", plan.steps))]
    if step == "unsqueeze":
        new = [i for i, axis in enumerate(plan.layout) if axis == "new"]
        return [ctx.constant(op, "new_axes", new, np.int64)]
    shrunk = [plan.layout.index(axis) for axis in plan.shrink]
    return [ctx.constant(op, "shrink_axes", shrunk, np.int64)]


def slice_(ctx: ExportContext, op: Any) -> None:
    begin = ctx.require_const(op, 1, "begin").astype(np.int64)
    size = ctx.require_const(op, 2, "size").astype(np.int64)
    ends = np.where(size == -1, INT64_MAX, begin + size)
    inputs = [ctx.input(op, 0), ctx.constant(op, "starts", begin), ctx.constant(op, "ends", ends),
              ctx.constant(op, "axes", np.arange(begin.size, dtype=np.int64))]
    ctx.node(op, "Slice", inputs)


def gather(ctx: ExportContext, op: Any) -> None:
    axis = int(ctx.require_const(op, 2, "axis")) if op.type == "GatherV2" else 0
    if op.type == "GatherV2" and op.get_attr("batch_dims") != 0:
        _batched_gather(ctx, op, axis, op.get_attr("batch_dims"))
        return
    ctx.node(op, "Gather", [ctx.input(op, 0), ctx.input(op, 1)], axis=axis)


def _batched_gather(ctx: ExportContext, op: Any, axis: int, batch_dims: int) -> None:
    """GatherV2 with `batch_dims` (ONNX's Gather has none): GatherND, whose `batch_dims`
    gathers along the first axis after the batch dims, with `axis` moved there and back.

    params [B.., D.., N, R..] -> [B.., N, D.., R..]; GatherND with indices [B.., I.., 1]
    gives [B.., I.., D.., R..]; the result wants [B.., D.., I.., R..]."""
    params_rank, indices_rank = ctx.rank(op, 0), ctx.rank(op, 1)
    if params_rank is None or indices_rank is None:
        raise ExportError(op, "batch_dims needs inputs of known rank")
    axis %= params_rank
    batch_dims %= indices_rank
    between = list(range(batch_dims, axis))  # the D dims
    batch, rest = list(range(batch_dims)), list(range(axis + 1, params_rank))
    params = ctx.input(op, 0)
    if between:
        params = ctx.helper(op, "axis_first", "Transpose", [params],
                            perm=batch + [axis] + between + rest)
    indices = ctx.helper(op, "indices_int64", "Cast", [ctx.input(op, 1)],
                         to=TensorProto.INT64)
    indices = ctx.helper(op, "index_tuples", "Unsqueeze",
                         [indices, ctx.constant(op, "last_axis", [-1], np.int64)])
    if not between:
        ctx.node(op, "GatherND", [params, indices], batch_dims=batch_dims)
        return
    gathered = ctx.helper(op, "gathered", "GatherND", [params, indices], batch_dims=batch_dims)
    index_dims = list(range(batch_dims, indices_rank))
    moved = [len(index_dims) + d for d in between]
    ctx.node(op, "Transpose", [gathered],
             perm=batch + moved + index_dims + list(range(indices_rank + len(between),
                                                          indices_rank + len(between)
                                                          + len(rest))))



def pad(ctx: ExportContext, op: Any) -> None:
    paddings = ctx.require_const(op, 1, "paddings").astype(np.int64)
    pads = ctx.constant(op, "pads", np.concatenate([paddings[:, 0], paddings[:, 1]]))
    inputs = [ctx.input(op, 0), pads]
    attrs: dict[str, Any] = {}
    if op.type == "PadV2":
        inputs.append(ctx.input(op, 2))
    elif op.type == "MirrorPad":
        mode = op.get_attr("mode").decode()
        if mode != "REFLECT":  # ONNX's reflect excludes the edge like TF's REFLECT
            raise ExportError(op, f"mirror mode {mode} has no ONNX equivalent")
        attrs["mode"] = "reflect"
    ctx.node(op, "Pad", inputs, **attrs)


CONVERTERS = {"StridedSlice": strided_slice, "Slice": slice_, "GatherV2": gather,
              "Gather": gather, "Pad": pad, "PadV2": pad, "MirrorPad": pad}
