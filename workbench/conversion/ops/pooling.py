"""Pooling (docs/tftrt-behaviour.md#op-rules, `ConvertPool` and `ConvertPool3D` in
`convert_nodes.cc`)."""

from __future__ import annotations

from workbench.conversion.operands import TENSOR, Ctx, fail
from workbench.conversion.ops.rule import FLOAT_HALF, Check, legacy

INPUT = (("input", TENSOR),)
# TRT's kernel-volume limit: 100000 ** (spatial dims / 2).
MAX_WINDOW = {2: 100000, 3: int(100000.0 ** 1.5)}


def _spatial_window(ctx: Ctx, values: list[int], rank: int) -> list[int]:
    channels_first = str(ctx.attr("data_format", "")).startswith("NC")
    return values[2:] if channels_first else values[1:rank - 1]


def _check_padding(ctx: Ctx) -> None:
    padding = ctx.attr("padding")
    if padding not in ("SAME", "VALID"):
        fail(f"Unsupported padding type: {padding}")


def _check_volume(window: list[int]) -> None:
    size = 1
    for k in window:
        size *= k
    if min(window, default=1) < 1 or size >= MAX_WINDOW[len(window)]:
        fail("Window dimensions are not within bounds")


def _pool2d(ctx: Ctx) -> None:
    _check_padding(ctx)
    # Only the spatial ksize entries are read; batch/channel ksize and strides go unchecked.
    _check_volume(_spatial_window(ctx, list(ctx.attr("ksize") or [1, 1, 1, 1]), 4))


def _pool3d(ctx: Ctx) -> None:
    _check_padding(ctx)
    channel = 4 if ctx.attr("data_format", "NDHWC") == "NDHWC" else 1
    ksize = list(ctx.attr("ksize") or [])
    for name, values in (("strides", list(ctx.attr("strides") or [])), ("ksize", ksize)):
        if len(values) != 5:
            fail(f"Pooling {name} field must specify 5 dimensions")
        if values[0] != 1 or values[channel] != 1:
            fail(f"{name.rstrip('s')} must be 1 for batch and channel dimensions")
    _check_volume(_spatial_window(ctx, ksize, 5))


RULES: dict[str, Check] = {
    "MaxPool": legacy(_pool2d, dtypes=("float", "half", "int8"), roles=INPUT),
    "AvgPool": legacy(_pool2d, dtypes=("float", "half", "int8"), roles=INPUT),
    "MaxPool3D": legacy(_pool3d, dtypes=FLOAT_HALF, roles=INPUT),
    "AvgPool3D": legacy(_pool3d, dtypes=FLOAT_HALF, roles=INPUT),
}
