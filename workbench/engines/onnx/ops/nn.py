"""Neural-network layers: convolutions, pooling, bias, batch norm, matrix products, softmax.

ONNX convolutions and pools are NCHW (NCDHW) only. NHWC TF ops get a Transpose on each side, named
`<op>/to_nchw` and `<op>/to_nhwc`; ONNX Runtime cancels the pairs between consecutive layers
(measured: ResNet-50's engine exports 108 Transposes, one is left after ONNX Runtime's
optimizer, at the input). Transposing the weights instead and keeping NHWC would not help:
standard ONNX Conv is channels-first only.
Filters are transposed once, at export time, when they are constants.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from workbench.engines.onnx.context import ExportContext, ExportError


def _to_channels_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def _to_channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _is_nchw(op: Any) -> bool:
    return op.get_attr("data_format") in (b"NCHW", b"NCDHW")


def _spatial(values: list[int], nchw: bool) -> list[int]:
    """The spatial entries of a per-dim attribute (2 for 2-D ops, 3 for 3-D ones)."""
    return list(values[2:]) if nchw else list(values[1:-1])


def _padding(op: Any, nchw: bool) -> dict[str, Any]:
    padding = op.get_attr("padding").decode()
    if padding == "SAME":  # TF puts the odd pixel at the end, like SAME_UPPER
        return {"auto_pad": "SAME_UPPER"}
    if padding == "VALID":
        return {"auto_pad": "VALID"}
    explicit = list(op.get_attr("explicit_paddings"))
    pairs = _spatial([explicit[2 * i : 2 * i + 2] for i in range(len(explicit) // 2)], nchw)
    return {"pads": [p[0] for p in pairs] + [p[1] for p in pairs]}


def _nchw_node(
    ctx: ExportContext, op: Any, onnx_op: str, inputs: list[str], nchw: bool, rank: int = 4,
    **attrs: Any,
) -> None:
    """`onnx_op` on NCHW (NCDHW) data, wrapped in Transposes when the TF op works on NHWC."""
    if nchw:
        ctx.node(op, onnx_op, inputs, **attrs)
        return
    data = ctx.helper(op, "to_nchw", "Transpose", inputs[:1], perm=_to_channels_first(rank))
    result = f"{op.name}:nchw"  # ":" never occurs in TF node names
    ctx.node(op, onnx_op, [data, *inputs[1:]], outputs=[result], **attrs)
    ctx.helper_to(op, "to_nhwc", "Transpose", [result], ctx.output(op),
                  perm=_to_channels_last(rank))


def _filter(ctx: ExportContext, op: Any, depthwise: bool, rank: int = 4) -> str:
    """TF's HWIO (DHWIO) filter, HWCM for depthwise, as ONNX's OIHW (OIDHW)."""
    to_oihw = [rank - 1, rank - 2, *range(rank - 2)]
    value = ctx.const(op, 1)
    if value is None:
        if depthwise:
            raise ExportError(op, "its filter must be a constant")
        return ctx.helper(op, "oihw", "Transpose", [ctx.input(op, 1)], perm=to_oihw)
    value = np.asarray(value)
    if depthwise:
        h, w, c, m = value.shape
        # Output channel c*M+m of a depthwise conv is group c's m-th filter.
        oihw = value.reshape(h, w, c * m).transpose(2, 0, 1)[:, None]
    else:
        oihw = value.transpose(to_oihw)
    return ctx.constant(op, "oihw", np.ascontiguousarray(oihw))


def conv(ctx: ExportContext, op: Any) -> None:
    """Conv2D, DepthwiseConv2dNative and Conv3D."""
    nchw = _is_nchw(op)
    depthwise = op.type == "DepthwiseConv2dNative"
    rank = len(op.get_attr("strides"))
    weights = _filter(ctx, op, depthwise, rank)
    attrs = _padding(op, nchw)
    attrs["strides"] = _spatial(op.get_attr("strides"), nchw)
    attrs["dilations"] = _spatial(op.get_attr("dilations"), nchw)
    if attrs.get("auto_pad") == "SAME_UPPER" and max(attrs["dilations"]) > 1:
        attrs.pop("auto_pad")  # ONNX Runtime refuses SAME with dilations: explicit pads
        attrs["pads"] = _dilated_same_pads(ctx, op, nchw, attrs["strides"], attrs["dilations"])
    if depthwise:
        attrs["group"] = int(np.asarray(ctx.const(op, 1)).shape[2])
    _nchw_node(ctx, op, "Conv", [ctx.input(op, 0), weights], nchw, rank, **attrs)


def _dilated_same_pads(ctx: ExportContext, op: Any, nchw: bool, strides: list[int],
                       dilations: list[int]) -> list[int]:
    """TF's SAME padding of a dilated convolution as ONNX pads (begins, then ends): the odd
    pixel at the end. Needs the spatial input dims unless every stride is 1."""
    kernel = np.asarray(ctx.const(op, 1)).shape[:len(strides)]
    sizes = _spatial(op.inputs[0].shape.as_list(), nchw) if op.inputs[0].shape.rank else \
        [None] * len(strides)
    totals = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        span = (k - 1) * d + 1
        if s == 1:
            totals.append(span - 1)
        elif size is None:
            raise ExportError(op, "SAME padding with dilations and strides needs known "
                                  "spatial input dims")
        else:
            totals.append(max((-(-size // s) - 1) * s + span - size, 0))
    return [t // 2 for t in totals] + [t - t // 2 for t in totals]


def pool(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        nchw = _is_nchw(op)
        attrs = _padding(op, nchw)
        attrs["kernel_shape"] = _spatial(op.get_attr("ksize"), nchw)
        attrs["strides"] = _spatial(op.get_attr("strides"), nchw)
        # TF's AvgPool averages over the valid pixels only: ONNX's count_include_pad=0.
        _nchw_node(ctx, op, onnx_op, [ctx.input(op, 0)], nchw, len(op.get_attr("ksize")),
                   **attrs)

    return convert


def _channel_vector(ctx: ExportContext, op: Any, index: int, rank: int | None) -> str:
    """A per-channel vector that broadcasts against NCHW data (shape [C, 1, 1])."""
    if rank is None:
        raise ExportError(op, "NCHW needs the input rank")
    axes = ctx.constant(op, f"axes_{index}", list(range(1, rank - 1)), np.int64)
    return ctx.helper(op, f"channels_{index}", "Unsqueeze", [ctx.input(op, index), axes])


def bias_add(ctx: ExportContext, op: Any) -> None:
    bias = ctx.input(op, 1)
    if _is_nchw(op):
        bias = _channel_vector(ctx, op, 1, ctx.rank(op, 0))
    ctx.node(op, "Add", [ctx.input(op, 0), bias])


def fused_batch_norm(ctx: ExportContext, op: Any) -> None:
    """Inference batch norm as x * scale' + offset' (folded when the statistics are consts)."""
    if op.get_attr("is_training"):
        raise ExportError(op, "training-mode batch norm is not an inference op")
    for port in range(1, len(op.outputs)):
        if op.outputs[port].consumers():
            raise ExportError(op, f"its output {port} (batch statistics) is used")
    epsilon = op.get_attr("epsilon")
    values = [ctx.const(op, i) for i in range(1, 5)]
    if any(v is None for v in values):
        raise ExportError(op, "its scale, offset, mean and variance must be constants")
    scale, offset, mean, variance = (np.asarray(v, np.float64) for v in values)
    factor = scale / np.sqrt(variance + epsilon)
    shift = offset - mean * factor
    dtype = ctx.dtype(op, 0)
    mul, add = ctx.constant(op, "scale", factor, dtype), ctx.constant(op, "shift", shift, dtype)
    if _is_nchw(op):
        rank = ctx.rank(op, 0) or 4
        shape = ctx.constant(op, "channel_shape", [-1] + [1] * (rank - 2), np.int64)
        mul = ctx.helper(op, "scale_nchw", "Reshape", [mul, shape])
        add = ctx.helper(op, "shift_nchw", "Reshape", [add, shape])
    scaled = ctx.helper(op, "mul", "Mul", [ctx.input(op, 0), mul])
    ctx.node(op, "Add", [scaled, add], outputs=[ctx.output(op, 0)])


def _swap_last(ctx: ExportContext, op: Any, index: int, label: str) -> str:
    """Input `index` with its last two axes swapped (TF's transpose_a/b, adj_x/y)."""
    value = ctx.const(op, index)
    if value is not None:
        return ctx.constant(op, label, np.ascontiguousarray(np.swapaxes(value, -1, -2)))
    rank = ctx.rank(op, index)
    if rank is None:
        raise ExportError(op, "transposing an operand needs its rank")
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return ctx.helper(op, label, "Transpose", [ctx.input(op, index)], perm=perm)


def matmul(ctx: ExportContext, op: Any) -> None:
    flags = ("transpose_a", "transpose_b") if op.type == "MatMul" else ("adj_x", "adj_y")
    inputs = [
        _swap_last(ctx, op, i, f"{flag}") if op.get_attr(flag) else ctx.input(op, i)
        for i, flag in enumerate(flags)
    ]
    ctx.node(op, "MatMul", inputs)


def einsum(ctx: ExportContext, op: Any) -> None:
    equation = op.get_attr("equation").decode().replace(" ", "")
    if "." in equation:  # ONNX Runtime's Einsum handles ellipses poorly; none in our models
        raise ExportError(op, "ellipsis equations are not exported")
    inputs = [ctx.input(op, i) for i in range(len(op.inputs))]
    ctx.node(op, "Einsum", inputs, equation=lowercase_subscripts(equation))


def lowercase_subscripts(equation: str) -> str:
    """The equation with its subscripts renamed to lowercase letters (first seen, first
    letter): TensorRT's Einsum takes only lowercase subscripts (TF and ONNX take both cases).
    An equation with more than 26 distinct subscripts is kept as it is."""
    labels = list(dict.fromkeys(c for c in equation if c.isalpha()))
    if len(labels) > 26:
        return equation
    rename = dict(zip(labels, string.ascii_lowercase, strict=False))
    return "".join(rename.get(c, c) for c in equation)


def softmax(onnx_op: str):
    def convert(ctx: ExportContext, op: Any) -> None:
        ctx.node(op, onnx_op, [ctx.input(op, 0)], axis=-1)  # TF normalizes the last axis

    return convert


def depth_space(ctx: ExportContext, op: Any) -> None:
    # TF's DepthToSpace orders the moved depth like ONNX's DCR mode (SpaceToDepth has one).
    attrs: dict[str, Any] = {"blocksize": op.get_attr("block_size")}
    if op.type == "DepthToSpace":
        attrs["mode"] = "DCR"
    _nchw_node(ctx, op, op.type, [ctx.input(op, 0)], _is_nchw(op), **attrs)


def resize(ctx: ExportContext, op: Any) -> None:
    """TF's NHWC resizes as ONNX Resize on NCHW, to the [N, C] of the input and TF's size;
    the sampling follows TF's align_corners / half_pixel_centers."""
    align, half = op.get_attr("align_corners"), op.get_attr("half_pixel_centers")
    if op.type == "ResizeBilinear":
        attrs = {"mode": "linear", "coordinate_transformation_mode":
                 "align_corners" if align else "half_pixel" if half else "asymmetric"}
    else:
        # TF rounds half away from zero with align_corners, else floors. Its half-pixel source
        # index floor((x + 0.5) * in / out) is ONNX's half_pixel, (x + 0.5) * in / out - 0.5,
        # rounded half up: ONNX's tf_half_pixel_for_nn with floor says the same, but TensorRT
        # takes that mode only with round_prefer_floor (and opset 13 deprecated it).
        attrs = {"mode": "nearest",
                 "coordinate_transformation_mode":
                     "align_corners" if align else "half_pixel" if half else "asymmetric",
                 "nearest_mode": "round_prefer_ceil" if align or half else "floor"}
    shape = ctx.helper(op, "shape", "Shape", [ctx.input(op, 0)])
    batch_channels = ctx.helper(op, "nc", "Gather", [shape, ctx.constant(op, "nc_index", [0, 3],
                                                                           np.int64)])
    sizes = ctx.helper(op, "sizes", "Concat", [batch_channels, ctx.int64(op, 1, "hw")], axis=0)
    _nchw_node(ctx, op, "Resize", [ctx.input(op, 0), "", "", sizes], False, **attrs)


CONVERTERS = {
    "Conv2D": conv, "DepthwiseConv2dNative": conv, "Conv3D": conv,
    "MaxPool": pool("MaxPool"), "AvgPool": pool("AveragePool"),
    "MaxPool3D": pool("MaxPool"), "AvgPool3D": pool("AveragePool"),
    "BiasAdd": bias_add,
    "FusedBatchNorm": fused_batch_norm, "FusedBatchNormV2": fused_batch_norm,
    "FusedBatchNormV3": fused_batch_norm,
    "MatMul": matmul, "BatchMatMul": matmul, "BatchMatMulV2": matmul, "BatchMatMulV3": matmul,
    "Einsum": einsum,
    "Softmax": softmax("Softmax"), "LogSoftmax": softmax("LogSoftmax"),
    "DepthToSpace": depth_space, "SpaceToDepth": depth_space,
    "ResizeBilinear": resize, "ResizeNearestNeighbor": resize,
}
