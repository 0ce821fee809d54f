"""Select and SelectV2 as ONNX's Where."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext


def select(ctx: ExportContext, op: Any) -> None:
    condition = ctx.input(op, 0)
    rank_c, rank_x = ctx.rank(op, 0), ctx.rank(op, 1)
    if op.type == "Select" and rank_c == 1 and rank_x not in (None, 1):
        # TF1 Select picks whole rows with a vector condition: align it with axis 0.
        axes = ctx.constant(op, "axes", list(range(1, rank_x)), np.int64)
        condition = ctx.helper(op, "rows", "Unsqueeze", [condition, axes])
    inputs = [condition, ctx.input(op, 1), ctx.input(op, 2)]
    ctx.node(op, "Where", inputs)


CONVERTERS = {
    "Select": select, "SelectV2": select,
}
