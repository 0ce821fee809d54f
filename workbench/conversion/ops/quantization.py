"""Quantization ops (docs/tftrt-behaviour.md#validator, step 1; `ops/quantization_ops.cc`).

They exist only in INT8 precision; the validator itself enforces that before the rule runs.
"""

from __future__ import annotations

from workbench.conversion.operands import ANY, WEIGHTS, Ctx, check_roles, fail
from workbench.conversion.ops.rule import Check

QUANTIZATION_OPS = ("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
                    "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxArgs")
# Believed to be just QDQV2 (docs/tftrt-behaviour.md#open-questions); the header copy read was
# truncated.
EXPLICIT_QUANTIZATION_OPS = ("QuantizeAndDequantizeV2",)

ROLES = {
    "QuantizeAndDequantizeV2": (("input", ANY), ("input_min", WEIGHTS), ("input_max", WEIGHTS)),
    "QuantizeAndDequantizeV3": (("input", ANY), ("min", WEIGHTS), ("max", WEIGHTS),
                                ("num_bits", WEIGHTS)),
    "FakeQuantWithMinMaxVars": (("input", ANY), ("min", WEIGHTS), ("max", WEIGHTS)),
    "FakeQuantWithMinMaxArgs": (("input", ANY),),
}


def _quantization(ctx: Ctx) -> None:
    check_roles(ctx, ROLES[ctx.op], structured=True)
    if ctx.settings.use_explicit_precision and ctx.op.startswith("FakeQuant"):
        fail("")  # TF-TRT really reports an empty message here


RULES: dict[str, Check] = {op: _quantization for op in QUANTIZATION_OPS}
