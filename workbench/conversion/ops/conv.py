"""Convolutions (docs/tftrt-behaviour.md#op-rules, `ConvertConv2DHelper`, `ConvertConv3DHelper`,
`ConvertFusedConv2DBiasActivation` in `convert_nodes.cc`)."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import TENSOR, WEIGHTS, Ctx, check_dtype_attr, check_roles, fail
from workbench.conversion.ops.rule import FLOAT_HALF, Check, legacy
from workbench.conversion.ops.unary import ACTIVATIONS

PADDINGS = ("SAME", "VALID")


def _channel_index(ctx: Ctx, rank: int) -> int:
    return 1 if ctx.attr("data_format", "NHWC" if rank == 4 else "NDHWC").startswith("NC") \
        else rank - 1


def _spatial(ctx: Ctx, rank: int) -> list[int]:
    c = _channel_index(ctx, rank)
    return [i for i in range(1, rank) if i != c]


def _check_window(ctx: Ctx, rank: int, field: str, batch_msg: str) -> list[int]:
    values = list(ctx.attr(field) or [1] * rank)
    if len(values) != rank:
        fail(f"Convolution {field} field must specify {rank} dimensions")
    if values[0] != 1 or values[_channel_index(ctx, rank)] != 1:
        fail(batch_msg)
    return [values[i] for i in _spatial(ctx, rank)]


def _check_channel_static(ctx: Ctx, tensor_index: int, rank: int) -> None:
    shape = ctx.inputs[tensor_index].shape
    if not ctx.ib and len(shape) == rank and shape[_channel_index(ctx, rank)] < 0:
        fail("Channel dimension must be static")


def _conv2d(ctx: Ctx) -> None:
    """ConvertConv2DHelper after its input checks (shared with Conv2DBackpropInput)."""
    backprop = ctx.op == "Conv2DBackpropInput"
    if len(ctx.inputs[1].dims) != 4:
        fail("Conv2D expects kernel of dimension 4")
    dilations = _check_window(ctx, 4, "dilations",
                              "Dilation rate must be 1 for batch and channel dimensions")
    if backprop and any(d != 1 for d in dilations):
        fail("Dilation with Conv2DBackpropInput (conv2d_transpose) is not supported")
    _check_window(ctx, 4, "strides", "Stride must be 1 for batch and channel dimensions")
    _check_channel_static(ctx, 2 if backprop else 0, 4)
    padding = ctx.attr("padding")
    if padding not in PADDINGS:
        fail(f"{padding} padding type not implemented, only VALID and SAME are supported")


def _conv2d_backprop_input(ctx: Ctx) -> None:
    """Checks that run before the dtype check; roles are skipped in explicit-precision mode."""
    if not ctx.settings.use_explicit_precision:
        check_roles(ctx, (("input_sizes", WEIGHTS), ("filter", WEIGHTS),
                          ("out_backprop", TENSOR)), structured=False)
    dims = ctx.inputs[2].dims
    if len(dims) != (3 if ctx.ib else 4):
        mode, rank = ("implicit", 3) if ctx.ib else ("explicit", 4)
        fail(f"In {mode} batch mode, input nbDims should be {rank}")
    # Quirk kept: TF-TRT scans TRT dims from index 1 (IB) or 2 (EB) to the end, which for NHWC
    # covers W and C rather than H and W.
    if any(d < 0 for d in dims[1 if ctx.ib else 2:]):
        fail("Conv2dBackpropInput does not support input with unknown spatial shape")
    check_dtype_attr(ctx.node, FLOAT_HALF, legacy=True)
    _conv2d(ctx)


def _conv2d_rule(ctx: Ctx) -> None:
    # In explicit-precision (QDQ) mode the filter must be a tensor: the dequantized weights.
    filter_role = TENSOR if ctx.settings.use_explicit_precision else WEIGHTS
    legacy(_conv2d, roles=(("input", TENSOR), ("filter", filter_role)))(ctx)


def _conv3d(backprop: bool):
    def check(ctx: Ctx) -> None:
        tensor_index = 2 if backprop else 0
        if len(ctx.inputs[1].shape) != 5:
            fail("Conv3D expects kernel of dimension 5")
        dilations = _check_window(ctx, 5, "dilations",
                                  "Dilation rate must be 1 for batch and channel dimensions")
        if backprop and any(d != 1 for d in dilations):
            fail("Dilation with Conv3DBackpropInputV2 (conv3d_transpose) is not supported")
        strides = _check_window(ctx, 5, "strides",
                                "Stride must be 1 for batch and channel dimensions")
        if backprop and ctx.attr("padding") == "SAME":
            _check_symmetric_padding(ctx, strides)
        # Conv3D needs a static channel dim in both modes (it sizes the kernel at build time).
        shape = ctx.inputs[tensor_index].shape
        if len(shape) == 5 and shape[_channel_index(ctx, 5)] < 0:
            fail("Channel dimension must be static")
    return check


def _check_symmetric_padding(ctx: Ctx, strides: list[int]) -> None:
    sizes = np.asarray(ctx.inputs[0].value).reshape(-1).tolist()
    kernel = ctx.inputs[1].shape[:3]
    for axis, stride, k in zip(_spatial(ctx, 5), strides, kernel, strict=True):
        size = sizes[axis] if axis < len(sizes) else -1
        if size < 0:
            continue
        total = max(((size - 1) // stride) * stride + k - size, 0)
        if total % 2:
            fail("Asymmetric padding with Conv3DBackpropInputV2 (conv3d_transpose) is not "
                 "supported")


def _fused_conv_bias_activation(ctx: Ctx) -> None:
    if len(ctx.inputs[1].shape) != 4:
        fail("FusedConv2DBiasActivation expects kernel of dimension 4")
    data_format = ctx.attr("data_format", "NHWC")
    if data_format not in ("NHWC", "NCHW"):
        fail(f"Unsupported data_format:{data_format}")  # sic: no space
    _check_window(ctx, 4, "dilations", "Dilation rate must be 1 for batch and channel dimensions")
    _check_window(ctx, 4, "strides", "Stride must be 1 for batch and channel dimensions")
    mode = ctx.attr("activation_mode", "Relu")
    if mode != "None" and mode not in ACTIVATIONS:
        fail(f"Activation mode not supported: {mode}")
    filter_format = ctx.attr("filter_format", "HWIO")
    if filter_format not in ("HWIO", "OIHW"):
        fail(f"Unsupported filter_format:{filter_format}")
    if np.asarray(ctx.inputs[3].value).size != 0:
        fail("FusedConv2DBiasActivation doesn't yet support side_input")
    scale = np.asarray(ctx.inputs[4].value)
    if scale.size != 1 or scale.dtype != np.float32 or float(scale.reshape(-1)[0]) != 1.0:
        fail("FusedConv2DBiasActivation doesn't yet support conv_input_scale")


def _rules() -> dict[str, Check]:
    conv_roles = (("input", TENSOR), ("filter", WEIGHTS))
    backprop_roles = (("input_sizes", WEIGHTS), ("filter", WEIGHTS), ("out_backprop", TENSOR))
    return {
        "Conv2D": _conv2d_rule,
        "DepthwiseConv2dNative": _conv2d_rule,
        "Conv2DBackpropInput": _conv2d_backprop_input,
        "Conv3D": legacy(_conv3d(False), roles=conv_roles),
        "Conv3DBackpropInputV2": legacy(_conv3d(True), roles=backprop_roles),
        "FusedConv2DBiasActivation": legacy(
            _fused_conv_bias_activation,
            roles=(("input", TENSOR), ("filter", WEIGHTS), ("bias", WEIGHTS),
                   ("side_input", WEIGHTS), ("conv_input_scale", WEIGHTS),
                   ("side_input_scale", WEIGHTS))),
    }


RULES = _rules()
