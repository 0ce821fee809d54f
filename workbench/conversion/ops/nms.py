"""CombinedNonMaxSuppression (docs/tftrt-behaviour.md#op-rules, `ConvertCombinedNMS`). With
TensorRT 8.6 TF-TRT uses
the EfficientNMS plugin, which it only wires up in explicit batch mode."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import TENSOR, WEIGHTS, Ctx, fail, reject_implicit_batch
from workbench.conversion.ops.rule import Check, legacy

ROLES = (("boxes", TENSOR), ("scores", TENSOR), ("max_output_size_per_class", WEIGHTS),
         ("max_total_size", WEIGHTS), ("iou_threshold", WEIGHTS), ("score_threshold", WEIGHTS))
PLUGIN = "NMS TRT Plugin "  # the EfficientNMS branch's prefix (TRT >= 8.2.1.6)


def _scalar(ctx: Ctx, index: int, name: str) -> float:
    value = np.asarray(ctx.inputs[index].value)
    if value.size != 1:
        fail(f"{PLUGIN}{name} must be scalar, at {ctx.name}")
    return float(value.reshape(-1)[0])


def _combined_nms(ctx: Ctx) -> None:
    reject_implicit_batch(ctx)
    boxes, scores = ctx.inputs[0], ctx.inputs[1]
    if len(boxes.shape) != 4:
        fail(f"{PLUGIN}input boxes must be 4-D including batch, at {ctx.name}")
    # Unknown dims are compared as they are (-1), exactly like the converter does.
    num_classes = scores.shape[2] if len(scores.shape) > 2 else -1
    if boxes.shape[2] not in (1, num_classes):
        fail(f"{PLUGIN}third dimension of boxes must be either 1or match the num_classes "
             f"dimension of scores, at {ctx.name}")  # sic: "1or"
    for index, name in ((2, "max_output_size_per_class"), (3, "max_total_size")):
        if _scalar(ctx, index, name) <= 0:
            fail(f"{PLUGIN}{name} should be > 0, at {ctx.name}")
    if not 0.0 <= _scalar(ctx, 4, "iou_threshold") <= 1.0:
        fail(f"{PLUGIN}iou_threshold must be in [0, 1], at{ctx.name}")  # sic: no space
    _scalar(ctx, 5, "score_threshold")


RULES: dict[str, Check] = {
    "CombinedNonMaxSuppression": legacy(_combined_nms, dtypes=None, roles=ROLES),
}
