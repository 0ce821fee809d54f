"""What the op families' converters share: ops ONNX has under another name, scalars of an op's
dtype, and TF's NHWC layouts on ONNX's channels-first convolutions and pools.

ONNX convolutions and pools are NCHW (NCDHW) only. NHWC TF ops get a Transpose on each side, named
`<op>/to_nchw` and `<op>/to_nhwc`; ONNX Runtime cancels the pairs between consecutive layers
(one is left after its optimizer on ResNet-50, at the input). Transposing the weights instead and
keeping NHWC would not help: standard ONNX Conv is channels-first only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext, ExportError


def same_op(onnx_op: str):
    """The converter of a one-input TF op that is `onnx_op` under another name."""

    def convert(ctx: ExportContext, op: Any) -> None:
        ctx.node(op, onnx_op, [ctx.input(op, 0)])

    return convert


def scalar(ctx: ExportContext, op: Any, label: str, value: float) -> str:
    """A scalar of the op's input dtype (ONNX wants both operands of one type)."""
    return ctx.constant(op, label, value, ctx.dtype(op, 0))


def to_channels_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def to_channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def is_nchw(op: Any) -> bool:
    return op.get_attr("data_format") in (b"NCHW", b"NCDHW")


def spatial(values: list[int], nchw: bool) -> list[int]:
    """The spatial entries of a per-dim attribute (2 for 2-D ops, 3 for 3-D ones)."""
    return list(values[2:]) if nchw else list(values[1:-1])


def padding(op: Any, nchw: bool) -> dict[str, Any]:
    padding = op.get_attr("padding").decode()
    if padding == "SAME":  # TF puts the odd pixel at the end, like SAME_UPPER
        return {"auto_pad": "SAME_UPPER"}
    if padding == "VALID":
        return {"auto_pad": "VALID"}
    explicit = list(op.get_attr("explicit_paddings"))
    pairs = spatial([explicit[2 * i : 2 * i + 2] for i in range(len(explicit) // 2)], nchw)
    return {"pads": [p[0] for p in pairs] + [p[1] for p in pairs]}


def nchw_node(
    ctx: ExportContext, op: Any, onnx_op: str, inputs: list[str], nchw: bool, rank: int = 4,
    **attrs: Any,
) -> None:
    """`onnx_op` on NCHW (NCDHW) data, wrapped in Transposes when the TF op works on NHWC."""
    if nchw:
        ctx.node(op, onnx_op, inputs, **attrs)
        return
    data = ctx.helper(op, "to_nchw", "Transpose", inputs[:1], perm=to_channels_first(rank))
    result = f"{op.name}:nchw"  # ":" never occurs in TF node names
    ctx.node(op, onnx_op, [data, *inputs[1:]], outputs=[result], **attrs)
    ctx.helper_to(op, "to_nhwc", "Transpose", [result], ctx.output(op),
                  perm=to_channels_last(rank))


def channel_vector(ctx: ExportContext, op: Any, index: int, rank: int | None) -> str:
    """A per-channel vector that broadcasts against NCHW data (shape [C, 1, 1])."""
    if rank is None:
        raise ExportError(op, "NCHW needs the input rank")
    axes = ctx.constant(op, f"axes_{index}", list(range(1, rank - 1)), np.int64)
    return ctx.helper(op, f"channels_{index}", "Unsqueeze", [ctx.input(op, index), axes])
