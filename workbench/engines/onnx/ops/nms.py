"""CombinedNonMaxSuppression as standard ONNX ops that ONNX Runtime runs and TensorRT builds.

TF's op (tensorflow/core/kernels/image/non_max_suppression_op.cc) runs a greedy NMS per batch
and class (boxes scoring above score_threshold, best first; a box whose IoU with a box kept
before it is above iou_threshold is suppressed; at most max_output_size_per_class kept), sorts
the kept boxes of a batch by score, keeps the best `per_batch` and pads boxes, scores and
classes with zeros. TF-TRT built it with the EfficientNMS plugin; ONNX's NonMaxSuppression
would do the per-class part, but TensorRT for RTX has no plugins and no kernel for its NMS
layer. So the greedy NMS is written with the ops every TensorRT builds: each class's boxes in
score order, their IoU matrix, and a Loop to the fixed point of "kept = above the score
threshold and suppressed by no kept box before it" (the greedy result is that recursion's
unique solution; after t rounds the first t boxes are right, so the box count bounds the
rounds). A dense [batch, class * box] score matrix of the kept boxes (everything else
`_EMPTY`) then gives, through TopK, TF's output order, and the classes and boxes by index.
The IoU matrix is [batch, class, box, box]: `MAX_BOXES` bounds the box count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.engines.onnx.context import ExportContext, ExportError

# The score of a box NMS did not keep: below every score TF can keep.
_EMPTY = float(np.finfo(np.float32).min)
# Boxes per class the IoU matrix may hold (TensorRT's TopK takes at most 3840 too).
MAX_BOXES = 3840


def _per_batch(op: Any, max_per_class: int, max_total: int, classes: int) -> int:
    """The detections each batch's outputs hold (TF's `per_batch_size`)."""
    if op.get_attr("pad_per_class"):
        return min(max_total, max_per_class * classes)
    return max_total


def combined_nms(ctx: ExportContext, op: Any) -> None:
    boxes_shape, scores_shape = op.inputs[0].shape, op.inputs[1].shape
    if boxes_shape.rank != 4 or scores_shape.rank != 3:
        raise ExportError(op, "boxes must be 4-D and scores 3-D")
    q, classes, count = boxes_shape[2], scores_shape[2], scores_shape[1]
    if q is None or classes is None:
        raise ExportError(op, "the boxes' q and the scores' class dims must be known")
    if q not in (1, classes):
        raise ExportError(op, "the boxes' q must be 1 or the number of classes")
    if count is not None and count > MAX_BOXES:
        raise ExportError(op, f"{count} boxes per class: the IoU matrix takes at most "
                          f"{MAX_BOXES}")
    max_per_class = int(ctx.require_const(op, 2, "max_output_size_per_class"))
    max_total = int(ctx.require_const(op, 3, "max_total_size"))
    per_batch = _per_batch(op, max_per_class, max_total, classes)

    scores = ctx.helper(op, "class_major", "Transpose", [ctx.input(op, 1)], perm=[0, 2, 1])
    boxes_per_class = _dim(ctx, op, "boxes_per_class", scores, 2)
    ranked_scores, order = ctx.helper_outputs(op, "rank", "TopK", [scores, boxes_per_class], 2,
                                              axis=-1, largest=1, sorted=1)
    boxes = _ranked_boxes(ctx, op, q, classes, order)
    kept = _greedy(ctx, op, boxes, ranked_scores, boxes_per_class, max_per_class)
    empty = ctx.constant(op, "empty", _EMPTY, np.float32)
    candidates = ctx.helper(op, "kept_scores", "Where", [kept, ranked_scores, empty])
    flat = ctx.helper(op, "flat_scores", "Reshape",
                      [candidates, ctx.constant(op, "flat_shape", [0, -1], np.int64)])
    top, index = _top(ctx, op, flat, per_batch, None if count is None else count * classes)
    chosen = ctx.helper(op, "chosen", "Greater", [top, empty])
    zero = ctx.constant(op, "zero", 0.0, np.float32)

    # index = class * boxes + rank, the row of the ranked boxes flattened to [b, c * n, 4]
    flat_boxes = ctx.helper(op, "flat_boxes", "Reshape",
                            [boxes, ctx.constant(op, "flat_boxes_shape", [0, -1, 4], np.int64)])
    last_axis = ctx.constant(op, "last_axis", [-1], np.int64)
    boxes = ctx.helper(op, "chosen_boxes", "GatherND", [
        flat_boxes, ctx.helper(op, "box_row", "Unsqueeze", [index, last_axis])], batch_dims=1)
    if op.get_attr("clip_boxes"):
        boxes = ctx.helper(op, "clipped", "Clip", [boxes, zero,
                                                   ctx.constant(op, "one", 1.0, np.float32)])
    box_chosen = ctx.helper(op, "box_chosen", "Unsqueeze", [chosen, last_axis])
    ctx.helper_to(op, "boxes", "Where", [box_chosen, boxes, zero], ctx.output(op, 0))
    ctx.helper_to(op, "scores", "Where", [chosen, top, zero], ctx.output(op, 1))
    class_index = ctx.helper(op, "class_index", "Div", [index, boxes_per_class])
    class_float = ctx.helper(op, "class_float", "Cast", [class_index], to=TensorProto.FLOAT)
    ctx.helper_to(op, "classes", "Where", [chosen, class_float, zero], ctx.output(op, 2))
    chosen_count = ctx.helper(op, "chosen_int32", "Cast", [chosen], to=TensorProto.INT32)
    ctx.helper_to(op, "valid_detections", "ReduceSum",
                  [chosen_count, ctx.constant(op, "detection_axis", [1], np.int64)],
                  ctx.output(op, 3), keepdims=0)


def _ranked_boxes(ctx: ExportContext, op: Any, q: int, classes: int, order: str) -> str:
    """[b, c, n, 4]: each class's boxes in its score order (`order` [b, c, n])."""
    boxes = ctx.helper(op, "class_boxes", "Transpose", [ctx.input(op, 0)], perm=[0, 2, 1, 3])
    if q == 1:  # one box set, shared by the classes
        boxes = ctx.helper(op, "shared_boxes", "Expand", [
            boxes, ctx.constant(op, "per_class", [1, classes, 1, 1], np.int64)])
    index = ctx.helper(op, "order_column", "Unsqueeze",
                       [order, ctx.constant(op, "coordinate_axis", [-1], np.int64)])
    index = ctx.helper(op, "order_coordinates", "Expand",
                       [index, ctx.constant(op, "coordinates", [1, 1, 1, 4], np.int64)])
    return ctx.helper(op, "ranked_boxes", "GatherElements", [boxes, index], axis=2)


def _greedy(ctx: ExportContext, op: Any, boxes: str, scores: str, count: str,
            max_per_class: int) -> str:
    """bool [b, c, n]: the ranked boxes TF's greedy NMS keeps."""
    corners = ctx.helper_outputs(op, "corners", "Split", [boxes], 4, axis=-1)  # [b, c, n, 1]
    low = [ctx.helper(op, f"low_{i}", "Min", [corners[i], corners[i + 2]]) for i in (0, 1)]
    high = [ctx.helper(op, f"high_{i}", "Max", [corners[i], corners[i + 2]]) for i in (0, 1)]
    sides = [ctx.helper(op, f"side_{i}", "Sub", [high[i], low[i]]) for i in (0, 1)]
    area = ctx.helper(op, "area", "Mul", sides)  # the box's own: as TF computes it

    def across(value: str) -> str:  # [b, c, n, 1] -> [b, c, 1, n]: the other box of a pair
        return ctx.helper(op, "across", "Transpose", [value], perm=[0, 1, 3, 2])

    zero = ctx.constant(op, "no_overlap", 0.0, np.float32)
    overlap = []
    for i in (0, 1):
        start = ctx.helper(op, f"overlap_low_{i}", "Max", [low[i], across(low[i])])
        end = ctx.helper(op, f"overlap_high_{i}", "Min", [high[i], across(high[i])])
        overlap.append(ctx.helper(op, f"overlap_side_{i}", "Max", [
            ctx.helper(op, f"overlap_{i}", "Sub", [end, start]), zero]))
    inter = ctx.helper(op, "intersection", "Mul", overlap)
    union = ctx.helper(op, "union", "Sub", [
        ctx.helper(op, "areas", "Add", [area, across(area)]), inter])
    iou = ctx.helper(op, "iou", "Div", [inter, union])
    # TF: a pair with an empty box never overlaps (its 0/0 IoU is NaN here, never above).
    real = ctx.helper(op, "real", "Greater", [area, zero])
    overlaps = ctx.helper(op, "overlaps", "And", [
        ctx.helper(op, "iou_above", "Greater", [iou, ctx.input(op, 4)]),
        ctx.helper(op, "both_real", "And", [real, across(real)])])
    # suppress[j, i]: box j, ranked before box i, suppresses it if j is kept.
    ranks = ctx.helper(op, "ranks", "Range", [
        ctx.constant(op, "first_rank", 0, np.int64),
        ctx.helper(op, "box_count", "Squeeze", [count]),
        ctx.constant(op, "rank_step", 1, np.int64)])
    rank_column = ctx.helper(op, "rank_column", "Unsqueeze",
                             [ranks, ctx.constant(op, "column_axis", [1], np.int64)])
    earlier = ctx.helper(op, "earlier", "Less", [rank_column, ranks])
    suppress = ctx.helper(op, "suppress", "Cast", [
        ctx.helper(op, "suppressing", "And", [overlaps, earlier])], to=TensorProto.FLOAT)
    eligible = ctx.helper(op, "eligible", "Cast", [
        ctx.helper(op, "above_score", "Greater", [scores, ctx.input(op, 5)])],
        to=TensorProto.FLOAT)
    kept = _fixed_point(ctx, op, eligible, suppress, count)
    # At most max_output_size_per_class per class: the first ones kept, best first.
    kept_rank = ctx.helper(op, "kept_rank", "CumSum", [
        kept, ctx.constant(op, "rank_axis", 2, np.int64)])
    return ctx.helper(op, "kept", "And", [
        ctx.helper(op, "is_kept", "Greater", [kept, zero]),
        ctx.helper(op, "within_max", "LessOrEqual", [
            kept_rank, ctx.constant(op, "max_per_class", float(max_per_class), np.float32)])])


def _fixed_point(ctx: ExportContext, op: Any, eligible: str, suppress: str, count: str) -> str:
    """float [b, c, n] kept = eligible and no kept box suppresses it, by a Loop of at most
    `count` rounds that stops once a round changes nothing. The body sees nothing of the outer
    graph (its constants are its own, eligible and suppress are carried through), so that the
    FP16 rewrite, which keeps the Loop in float32, sees every value it takes."""
    name = f"{op.name}/fixed_point"

    def value(label: str) -> str:
        return f"{name}/{label}"

    def node(op_type: str, inputs: list[str], label: str, **attrs: Any) -> onnx.NodeProto:
        return helper.make_node(op_type, [value(i) for i in inputs], [value(label)],
                                name=value(label), **attrs)

    nodes = [
        node("Unsqueeze", ["kept_in", "axis"], "kept_row"),
        node("MatMul", ["kept_row", "suppress_in"], "hits"),
        node("Squeeze", ["hits", "axis"], "hit_count"),
        node("Greater", ["hit_count", "zero"], "hit"),
        node("Where", ["hit", "zero", "eligible_in"], "kept_out"),
        node("Sub", ["kept_out", "kept_in"], "change"),
        node("Abs", ["change"], "changed"),
        node("ReduceMax", ["changed"], "most_changed", keepdims=0),
        node("Greater", ["most_changed", "zero"], "go_on"),
        node("Identity", ["eligible_in"], "eligible_out"),
        node("Identity", ["suppress_in"], "suppress_out"),
    ]

    def info(label: str, elem: int, shape: list | None = None) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(value(label), elem, shape)

    floats = ("kept", "eligible", "suppress")
    body = helper.make_graph(
        nodes, value("body"),
        [info("round", TensorProto.INT64, []), info("going", TensorProto.BOOL, []),
         *(info(f"{f}_in", TensorProto.FLOAT) for f in floats)],
        [info("go_on", TensorProto.BOOL, []), *(info(f"{f}_out", TensorProto.FLOAT)
                                                for f in floats)],
        [numpy_helper.from_array(np.array([2], np.int64), value("axis")),
         numpy_helper.from_array(np.array(0.0, np.float32), value("zero"))])
    kept = f"{op.name}:kept"  # the Loop is the node named after the op: the NMS itself
    ctx.node(op, "Loop", [ctx.helper(op, "rounds", "Squeeze", [count]),
                          ctx.constant(op, "start", True, np.bool_), eligible, eligible, suppress],
             outputs=[kept, f"{op.name}:eligible", f"{op.name}:suppress"], body=body)
    return kept


def _top(ctx: ExportContext, op: Any, flat: str, per_batch: int, candidates: int | None
         ) -> tuple[str, str]:
    """The `per_batch` best of each batch's [class * box] scores and their indices; fewer
    candidates than that are padded with `_EMPTY` (index 0)."""
    k = per_batch if candidates is None else min(per_batch, candidates)
    if candidates is None:  # the box count is known at run time only
        k_input = ctx.helper(op, "k", "Min", [
            ctx.constant(op, "per_batch", [per_batch], np.int64),
            _dim(ctx, op, "candidates", flat, 1)])
    else:
        k_input = ctx.constant(op, "k", [k], np.int64)
    top, index = ctx.helper_outputs(op, "top_k", "TopK", [flat, k_input], 2, axis=-1,
                                    largest=1, sorted=1)
    if candidates is not None and k == per_batch:
        return top, index
    # Pad to per_batch detections: only the dims after k's are padded.
    missing = ctx.helper(op, "missing", "Sub", [
        ctx.constant(op, "per_batch_count", [per_batch], np.int64),
        _dim(ctx, op, "top_count", top, 1)])
    pads = ctx.helper(op, "pads", "Concat", [ctx.constant(op, "no_pads", [0, 0, 0], np.int64),
                                             missing], axis=0)
    top = ctx.helper(op, "padded_top", "Pad", [top, pads,
                                               ctx.constant(op, "empty_pad", _EMPTY, np.float32)])
    index = ctx.helper(op, "padded_index", "Pad", [index, pads])
    return top, index


def _dim(ctx: ExportContext, op: Any, label: str, tensor: str, axis: int) -> str:
    """Dim `axis` of `tensor` as an int64 [1] (Shape's start/end need opset 15)."""
    shape = ctx.helper(op, f"{label}_shape", "Shape", [tensor])
    return ctx.helper(op, label, "Gather", [shape, ctx.constant(op, f"{label}_axis", [axis],
                                                                np.int64)])


CONVERTERS = {"CombinedNonMaxSuppression": combined_nms}
