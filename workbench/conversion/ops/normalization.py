"""Batch normalization (docs/tftrt-behaviour.md#op-rules, `ConvertFusedBatchNorm` in
`convert_nodes.cc`)."""

from __future__ import annotations

from workbench.conversion.operands import TENSOR, TRT_TYPE_NAMES, WEIGHTS, Ctx, fail
from workbench.conversion.ops.rule import Check, legacy

ROLES = (("x", TENSOR), ("scale", WEIGHTS), ("offset", WEIGHTS), ("mean", WEIGHTS),
         ("variance", WEIGHTS))


def _fused_batch_norm(ctx: Ctx) -> None:
    # TF's op default for is_training is true; frozen inference graphs set it to false.
    if ctx.attr("is_training", True):
        fail(f"{ctx.op} only supports is_training=false")
    shape = ctx.inputs[0].shape
    channel = 1 if ctx.attr("data_format", "NHWC") == "NCHW" else 3
    if not ctx.ib and len(shape) > channel and shape[channel] < 0:
        fail("Channel dimension must be static")
    params = ctx.inputs[1:5]
    kind = params[0].dtype
    if kind not in ("float", "half"):
        fail(f"Only float32 or float16 weight data type is supported, got "
             f"{TRT_TYPE_NAMES.get(kind, kind)}")
    if any(p.dtype != kind for p in params):
        fail("Inconsistent parameter type for batchnorm is not supported")
    counts = [p.value.size if p.value is not None else 1 for p in params]
    if any(c not in (max(counts), 1) for c in counts):
        fail("Inconsistent batchnorm parameter count")


RULES: dict[str, Check] = {
    op: legacy(_fused_batch_norm, roles=ROLES)
    for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
}
