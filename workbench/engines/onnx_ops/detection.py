"""CombinedNonMaxSuppression as standard ONNX ops, which ONNX Runtime runs and TensorRT's ONNX
parser takes (its NonMaxSuppression layer; TF-TRT used the EfficientNMS plugin, which
TensorRT for RTX does not ship).

TF's op (tensorflow/core/kernels/image/non_max_suppression_op.cc) runs a greedy NMS per batch
and class (scores > score_threshold, IoU > iou_threshold suppresses, at most
max_output_size_per_class boxes), sorts all selected boxes of a batch by score, keeps the best
`per_batch` and pads boxes, scores and classes with zeros. ONNX's NonMaxSuppression does the
per-class part and returns the selected (batch, class, box) triples; the rest is a dense
[batch, class * box] score matrix holding the selected scores (everything else `_EMPTY`), whose
TopK gives the kept boxes in TF's order, their classes and boxes by index arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper

from workbench.engines.onnx_context import ExportContext, ExportError

# The score of a box NMS did not select: below every score TF can keep.
_EMPTY = float(np.finfo(np.float32).min)


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
    max_per_class = int(ctx.require_const(op, 2, "max_output_size_per_class"))
    max_total = int(ctx.require_const(op, 3, "max_total_size"))
    per_batch = _per_batch(op, max_per_class, max_total, classes)

    boxes = ctx.input(op, 0)
    if q == 1:  # one box set, shared by the classes
        boxes = ctx.helper(op, "shared_boxes", "Squeeze",
                           [boxes, ctx.constant(op, "q_axis", [2], np.int64)])
    scores = ctx.helper(op, "class_major", "Transpose", [ctx.input(op, 1)], perm=[0, 2, 1])
    selected = _selected(ctx, op, boxes, scores, q, classes, max_per_class)
    dense = ctx.helper(op, "unselected", "ConstantOfShape",
                       [ctx.helper(op, "scores_shape", "Shape", [scores])],
                       value=numpy_helper.from_array(np.array([_EMPTY], np.float32)))
    dense = ctx.helper(op, "selected_scores", "ScatterND",
                       [dense, selected, ctx.helper(op, "selected_score", "GatherND",
                                                    [scores, selected])])
    flat = ctx.helper(op, "flat_scores", "Reshape",
                      [dense, ctx.constant(op, "flat_shape", [0, -1], np.int64)])
    top, index = _top(ctx, op, flat, per_batch, None if count is None else count * classes)
    kept = ctx.helper(op, "kept", "Greater", [top, ctx.constant(op, "empty", _EMPTY, np.float32)])
    zero = ctx.constant(op, "zero", 0.0, np.float32)

    # index = class * boxes + box: boxes [b, n, 4] are gathered at (box), [b, n, q, 4] at
    # (box, class).
    boxes_per_class = _dim(ctx, op, "boxes_per_class", scores, 2)
    class_index = ctx.helper(op, "class_index", "Div", [index, boxes_per_class])
    last_axis = ctx.constant(op, "last_axis", [-1], np.int64)
    where = ctx.helper(op, "box_index", "Unsqueeze", [
        ctx.helper(op, "box_of_class", "Mod", [index, boxes_per_class]), last_axis])
    if q > 1:
        boxes = ctx.input(op, 0)
        where = ctx.helper(op, "box_class_index", "Concat", [
            where, ctx.helper(op, "class_of_box", "Unsqueeze", [class_index, last_axis])],
            axis=-1)
    boxes = ctx.helper(op, "kept_boxes", "GatherND", [boxes, where], batch_dims=1)
    if op.get_attr("clip_boxes"):
        boxes = ctx.helper(op, "clipped", "Clip", [boxes, zero,
                                                   ctx.constant(op, "one", 1.0, np.float32)])
    box_kept = ctx.helper(op, "box_kept", "Unsqueeze",
                          [kept, ctx.constant(op, "coordinate_axis", [-1], np.int64)])
    ctx.helper_to(op, "boxes", "Where", [box_kept, boxes, zero], ctx.output(op, 0))
    ctx.helper_to(op, "scores", "Where", [kept, top, zero], ctx.output(op, 1))
    class_float = ctx.helper(op, "class_float", "Cast", [class_index], to=TensorProto.FLOAT)
    ctx.helper_to(op, "classes", "Where", [kept, class_float, zero], ctx.output(op, 2))
    kept_count = ctx.helper(op, "kept_int32", "Cast", [kept], to=TensorProto.INT32)
    ctx.helper_to(op, "valid_detections", "ReduceSum",
                  [kept_count, ctx.constant(op, "detection_axis", [1], np.int64)],
                  ctx.output(op, 3), keepdims=0)


def _selected(ctx: ExportContext, op: Any, boxes: str, scores: str, q: int, classes: int,
              max_per_class: int) -> str:
    """ONNX NonMaxSuppression's [selected, 3] (batch, class, box) triples. With one box set
    per class (q > 1) each (batch, class) is its own NMS batch of one class, and the
    triples are mapped back."""
    limits = [ctx.constant(op, "max_output_size_per_class", [max_per_class], np.int64),
              ctx.input(op, 4), ctx.input(op, 5)]
    if q == 1:
        selected = f"{op.name}:selected"
        ctx.node(op, "NonMaxSuppression", [boxes, scores, *limits], outputs=[selected])
        return selected
    boxes = ctx.helper(op, "class_boxes", "Transpose", [boxes], perm=[0, 2, 1, 3])
    boxes = ctx.helper(op, "class_boxes_flat", "Flatten", [boxes], axis=2)  # [b * c, n * 4]
    boxes = ctx.helper(op, "nms_boxes", "Reshape",
                       [boxes, ctx.constant(op, "nms_boxes_shape", [0, -1, 4], np.int64)])
    scores = ctx.helper(op, "class_scores_flat", "Flatten", [scores], axis=2)  # [b * c, n]
    scores = ctx.helper(op, "nms_scores", "Unsqueeze",
                        [scores, ctx.constant(op, "nms_class_axis", [1], np.int64)])
    selected = f"{op.name}:selected"
    ctx.node(op, "NonMaxSuppression", [boxes, scores, *limits], outputs=[selected])
    # (batch * classes + class, 0, box) -> (batch, class, box)
    split = [ctx.helper(op, f"selected_{i}", "Slice",
                        [selected, ctx.constant(op, f"start_{i}", [i], np.int64),
                         ctx.constant(op, f"end_{i}", [i + 1], np.int64),
                         ctx.constant(op, f"axis_{i}", [1], np.int64)]) for i in (0, 2)]
    per_class = ctx.constant(op, "classes", classes, np.int64)
    batch = ctx.helper(op, "selected_batch", "Div", [split[0], per_class])
    klass = ctx.helper(op, "selected_class", "Mod", [split[0], per_class])
    return ctx.helper(op, "selected_triples", "Concat", [batch, klass, split[1]], axis=1)


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
