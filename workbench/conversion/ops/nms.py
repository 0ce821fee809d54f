"""CombinedNonMaxSuppression (spec §3.5). With TensorRT 8.6 TF-TRT uses the EfficientNMS
plugin, which it only wires up in explicit batch mode."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import TENSOR, WEIGHTS, Ctx, fail, reject_implicit_batch
from workbench.conversion.ops.rule import Check, legacy

ROLES = (("boxes", TENSOR), ("scores", TENSOR), ("max_output_size_per_class", WEIGHTS),
         ("max_total_size", WEIGHTS), ("iou_threshold", WEIGHTS), ("score_threshold", WEIGHTS))


def _scalar(ctx: Ctx, index: int) -> float:
    return float(np.asarray(ctx.inputs[index].value).reshape(-1)[0])


def _combined_nms(ctx: Ctx) -> None:
    # The spec gives no text for the IB rejection; we use TF-TRT's shared helper wording.
    reject_implicit_batch(ctx)
    boxes, scores = ctx.inputs[0], ctx.inputs[1]
    if len(boxes.shape) != 4:
        fail("TensorRT NMS requires boxes input with rank 4 (batch, num_boxes, q, 4)")
    num_classes = scores.shape[-1] if scores.shape else -1
    q = boxes.shape[2]
    if q >= 0 and num_classes >= 0 and q not in (1, num_classes):
        fail("The third dimension of boxes must be either 1 or num_classes")
    if _scalar(ctx, 2) <= 0 or _scalar(ctx, 3) <= 0:
        fail("max_output_size_per_class and max_total_size must be greater than 0")
    if not 0.0 <= _scalar(ctx, 4) <= 1.0:
        fail("iou_threshold must be in [0, 1]")


RULES: dict[str, Check] = {
    "CombinedNonMaxSuppression": legacy(_combined_nms, dtypes=None, roles=ROLES),
}
