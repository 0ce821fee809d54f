"""Per-family converter rules (spec §3): (op, inputs, attrs) -> (IB reason, EB reason)."""

from __future__ import annotations

import numpy as np
import pytest
from test_op_rules import X4, assert_rule_case, both, const, ph, run

from workbench.conversion.validator import ValidatorSettings

F = {"T": "float"}
W33 = const(np.ones((3, 3, 3, 4), np.float32))
CONV = {"T": "float", "padding": "SAME", "strides": [1, 1, 1, 1], "dilations": [1, 1, 1, 1],
        "data_format": "NHWC"}


def ib_only(op, kind=""):
    prefix = f"{kind} " if kind else ""
    return f"Convertion for {prefix}op: '{op}' is not supported in implicit batch mode, at n"


CASES = [
    # --- unary / activations (§3.1), structured: declaration order
    ("Exp", [ph(X4)], F, None, None),
    ("Exp", [ph(X4)], {"T": "int32"},
     "Data type int32 is not supported for Exp, must be one of [float, half, int8]", "same"),
    ("Exp", [const(np.ones((2, 2), np.float32))], F,
     'The input "x" for Exp must be a tensor, at n', "same"),
    ("Exp", [ph((-1,))], F, "At least 1 dimension is required for UNARY operation 'Exp'", None),
    ("Sign", [ph(X4)], F, ib_only("Sign", "Unary"), None),
    ("Round", [ph(X4)], F, ib_only("Round", "Unary"), None),
    ("Sign", [ph(X4)], {"T": "bool"},
     "Data type bool is not supported for Sign, must be one of [float, half, int8, int32]",
     "same"),
    ("LogicalNot", [ph(X4, "bool")], {}, ib_only("LogicalNot", "Unary"), None),
    ("Relu", [ph(X4)], F, None, None),
    ("Relu6", [ph(X4)], {"T": "int32"},
     "Data type int32 is not supported for Relu6, must be one of [float, half]", "same"),
    # --- binary (§3.2)
    ("AddV2", [ph(X4), const(np.ones(3, np.float32))], F, None, None),
    ("Mul", [ph(X4), ph(X4)], {"T": "int32"}, None, None),
    ("Sub", [ph(X4), ph(X4)], {"T": "bool"},
     "Data type bool is not supported for Sub, must be one of [float, half, int32]", "same"),
    ("AddV2", [const(np.ones(3, np.float32)), const(np.ones(3, np.float32))], F,
     "Constant folding is falled back to TensorFlow, binary op 'AddV2' received both input as "
     "constant", "same"),
    ("Mul", [ph((-1, 8, 8, 3)), ph((-1, 8, 8, 4))], F,
     "Infeasible broadcast scheme (batch_dim: -1, nvinfer1::Dims(nbDims=3, d=8,8,3,) vs "
     "batch_dim: -1, nvinfer1::Dims(nbDims=3, d=8,8,4,))",
     "Infeasible broadcast scheme (batch_dim: -1, nvinfer1::Dims(nbDims=4, d=-1,8,8,3,) vs "
     "batch_dim: -1, nvinfer1::Dims(nbDims=4, d=-1,8,8,4,))"),
    ("Mul", [ph((-1, 3)), const(np.ones((2, 1, 3), np.float32))], F,
     "Broadcasting beyond batch dimension is not supported (tensor #dims 2 vs broadcast #dims 3)",
     None),
    ("Greater", [ph(X4), ph(X4)], F, ib_only("Greater", "Binary"), None),
    ("LogicalAnd", [ph(X4, "bool"), ph(X4, "bool")], {}, ib_only("LogicalAnd", "Binary"), None),
    ("LogicalOr", [ph(X4, "bool"), const(np.ones(3, bool))], {},
     ib_only("LogicalOr", "Binary"), "Both inputs  of 'LogicalOr' are expected to be tensors"),
    ("SquaredDifference", [ph(X4), const(np.ones(3, np.float32))], F,
     'The input "y" for SquaredDifference must be a tensor', "same"),
    ("Square", [ph(X4)], {"T": "int64"},
     "Data type int64 is not supported for Square, must be one of [float, int32, half]", "same"),
    ("AddN", [ph(X4), ph(X4)], {"T": "float", "N": 2}, None, None),
    ("AddN", [ph(X4), const(np.ones((2, 3), np.float32))], {"T": "float", "N": 2},
     "Weights input to AddN is required to have batch dimension 1.", "same"),
    ("BiasAdd", [ph(X4), const(np.ones(3, np.float32))], F, None, None),
    ("BiasAdd", [ph(X4), const(np.ones(3, np.float32))], {"T": "int32"},
     "Data type int32 is not supported for BiasAdd, must be one of [float, half]", "same"),
    ("ClipByValue", [ph(X4), ph(X4), const(np.float32(1))], F,
     'The input "clip_value_min" for ClipByValue must be a constant', "same"),
    # --- convolution (§3.3), legacy: roles before dtypes, no ", at"
    ("Conv2D", [ph(X4), W33], CONV, None, None),
    ("Conv2D", [ph(X4), ph((3, 3, 3, 4))], CONV,
     'The input "filter" for Conv2D must be a constant', "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "T": "int32"},
     "Data type int32 is not supported for Conv2D, must be one of [float, half]", "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "dilations": [1, 2, 2, 1]}, None, None),
    ("Conv2D", [ph(X4), W33], {**CONV, "strides": [1, 2, 2]},
     "Convolution strides field must specify 4 dimensions", "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "padding": "EXPLICIT"},
     "EXPLICIT padding type not implemented, only VALID and SAME are supported", "same"),
    ("Conv2D", [ph(X4), const(np.ones((3, 3, 4), np.float32))], CONV,
     "Conv2D expects kernel of dimension 4", "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "strides": [2, 1, 1, 1]},
     "Stride must be 1 for batch and channel dimensions", "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "dilations": [1, 2, 2]},
     "Convolution dilations field must specify 4 dimensions", "same"),
    ("Conv2D", [ph(X4), W33], {**CONV, "dilations": [1, 1, 1, 2]},
     "Dilation rate must be 1 for batch and channel dimensions", "same"),
    ("Conv2D", [ph((-1, 8, 8, -1)), W33], CONV, None, "Channel dimension must be static"),
    ("DepthwiseConv2dNative", [ph(X4), const(np.ones((3, 3, 3, 1), np.float32))], CONV,
     None, None),
    ("Conv2DBackpropInput", [const(np.array([1, 16, 16, 3], np.int32)), W33, ph(X4)],
     {**CONV, "dilations": [1, 2, 2, 1]},
     "Dilation with Conv2DBackpropInput (conv2d_transpose) is not supported", "same"),
    ("Conv2DBackpropInput", [const(np.array([1, 16, 16, 3], np.int32)), W33,
                             ph((-1, 8, -1, 4))], CONV,
     "Conv2dBackpropInput does not support input with unknown spatial shape", "same"),
    # Quirk: the scan starts one TRT dim too late for NHWC, so an unknown H goes unnoticed.
    ("Conv2DBackpropInput", [const(np.array([1, 16, 16, 3], np.int32)), W33,
                             ph((-1, -1, 8, 4))], CONV, None, None),
    ("Conv2DBackpropInput", [const(np.array([1, 16, 16, 3], np.int32)), W33,
                             ph((-1, 8, 8, 4))], {**CONV, "T": "int32"},
     "Data type int32 is not supported for Conv2DBackpropInput, must be one of [float, half]",
     "same"),
    ("Conv2DBackpropInput", [ph((4,), "int32"), W33, ph((-1, 8, 8, 4))], CONV,
     'The input "input_sizes" for Conv2DBackpropInput must be a constant', "same"),
    ("Conv3D", [ph((-1, 4, 8, 8, 3)), W33],
     {"T": "float", "padding": "SAME", "strides": [1] * 5, "dilations": [1] * 5},
     "Conv3D expects kernel of dimension 5", "same"),
    ("Conv3D", [ph((-1, 4, 8, 8, -1)), const(np.ones((3, 3, 3, 2, 4), np.float32))],
     {"T": "float", "padding": "SAME", "strides": [1] * 5, "dilations": [1] * 5},
     "Channel dimension must be static", "same"),
    ("Conv3DBackpropInputV2", [const(np.array([1, 8, 8, 8, 2], np.int32)),
                               const(np.ones((2, 2, 2, 2, 4), np.float32)),
                               ph((-1, 4, 4, 4, 4))],
     {"T": "float", "padding": "SAME", "strides": [1, 2, 2, 2, 1], "dilations": [1] * 5},
     None, None),
    ("Conv3DBackpropInputV2", [const(np.array([1, 8, 8, 8, 2], np.int32)),
                               const(np.ones((3, 3, 3, 2, 4), np.float32)),
                               ph((-1, 4, 4, 4, 4))],
     {"T": "float", "padding": "SAME", "strides": [1, 2, 2, 2, 1], "dilations": [1] * 5},
     "Asymmetric padding with Conv3DBackpropInputV2 (conv3d_transpose) is not supported",
     "same"),
    ("FusedConv2DBiasActivation",
     [ph(X4), W33, const(np.ones(4, np.float32)), const(np.zeros(0, np.float32)),
      const(np.float32(1)), const(np.float32(0))],
     {**CONV, "filter_format": "HWIO", "activation_mode": "Relu"}, None, None),
    ("FusedConv2DBiasActivation",
     [ph(X4), W33, const(np.ones(4, np.float32)), const(np.zeros(0, np.float32)),
      const(np.float32(2)), const(np.float32(0))],
     {**CONV, "filter_format": "HWIO", "activation_mode": "Relu"},
     "FusedConv2DBiasActivation doesn't yet support conv_input_scale", "same"),
    ("FusedConv2DBiasActivation",
     [ph(X4), W33, const(np.ones(4, np.float32)), const(np.zeros(0, np.float32)),
      const(np.float32(1)), const(np.float32(0))],
     {**CONV, "filter_format": "HWIO", "activation_mode": "Gelu"},
     "Activation mode not supported: Gelu", "same"),
    # --- pooling
    ("MaxPool", [ph(X4)], {**CONV, "ksize": [1, 2, 2, 1]}, None, None),
    ("MaxPool", [ph(X4)], {**CONV, "T": "int32", "ksize": [1, 2, 2, 1]},
     "Data type int32 is not supported for MaxPool, must be one of [float, int8, half]", "same"),
    ("AvgPool", [ph(X4)], {**CONV, "padding": "EXPLICIT", "ksize": [1, 2, 2, 1]},
     "Unsupported padding type: EXPLICIT", "same"),
    ("MaxPool", [ph(X4)], {**CONV, "ksize": [1, 400, 400, 1]},
     "Window dimensions are not within bounds", "same"),
    ("MaxPool3D", [ph((-1, 4, 8, 8, 3))],
     {"T": "float", "padding": "SAME", "strides": [2, 1, 1, 1, 1], "ksize": [1, 2, 2, 2, 1]},
     "stride must be 1 for batch and channel dimensions", "same"),
    ("AvgPool3D", [ph((-1, 4, 8, 8, 3))],
     {"T": "float", "padding": "SAME", "strides": [1] * 5, "ksize": [1, 2, 2, 2, 2]},
     "ksize must be 1 for batch and channel dimensions", "same"),
    ("AvgPool3D", [ph((-1, 4, 8, 8, 3))],
     {"T": "float", "padding": "EXPLICIT", "strides": [1, 1], "ksize": [1, 2, 2, 2, 1]},
     "Unsupported padding type: EXPLICIT", "same"),
    ("MaxPool3D", [ph((-1, 4, 8, 8, 3))],
     {"T": "float", "padding": "VALID", "strides": [1] * 5, "ksize": [1, 2, 2, 1],
      "data_format": "NDHWC"}, "Pooling ksize field must specify 5 dimensions", "same"),
    # --- matmul
    ("MatMul", [ph((-1, 16)), const(np.ones((16, 4), np.float32))], F, None, None),
    ("MatMul", [ph((-1, 16)), ph((-1, 16))], F,
     "MatMul with 2D tensors requires explicit batch mode, or that tensor A is not transposed "
     "and B is a constant tensor.", None),
    ("MatMul", [ph((-1, 16)), const(np.ones((16, 4), np.float32))],
     {"T": "float", "transpose_a": True},
     "MatMul with 2D tensors requires explicit batch mode, or that tensor A is not transposed "
     "and B is a constant tensor.", None),
    ("MatMul", [ph((-1, 16)), const(np.ones((16, 4), np.float32))], {"T": "int32"},
     "Data type int32 is not supported for MatMul, must be one of [float, half]", "same"),
    ("BatchMatMulV2", [ph((-1, 4, 8)), const(np.ones((2, 8, 3), np.float32))], F,
     "TensorRT does not support batched constants in implicit batch mode.", None),
    ("BatchMatMulV2", [ph((-1, 4, 8)), ph((-1, 8, 3))], F, None, None),
    ("Einsum", [ph((-1, 4, 8)), ph((-1, 8, 3))], {"T": "float", "equation": "bij,bjk->bik"},
     ib_only("Einsum"), None),
    ("Einsum", [ph((-1, 4, 8)), ph((-1, 8, 3))], {"T": "float", "equation": "...ij,...jk->...ik"},
     ib_only("Einsum"), "No conversion for einsum equation."),
]


@pytest.mark.parametrize("op, inputs, attrs, expect_ib, expect_eb", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_family_rules(op, inputs, attrs, expect_ib, expect_eb):
    assert_rule_case(op, inputs, attrs, expect_ib, expect_eb)


def test_batch_norm():
    params = [const(np.ones(3, np.float32)) for _ in range(4)]
    ok = {"T": "float", "is_training": False, "data_format": "NHWC"}
    assert both("FusedBatchNormV3", [ph(X4), *params], ok) == (None, None)
    assert run("FusedBatchNormV3", [ph(X4), *params], {**ok, "is_training": True}) == (
        "FusedBatchNormV3 only supports is_training=false")
    assert run("FusedBatchNormV3", [ph(X4), *params], {"T": "float"}) == (
        "FusedBatchNormV3 only supports is_training=false")  # TF's op default is true
    assert run("FusedBatchNorm", [ph(X4), ph((3,)), *params[1:]], ok) == (
        'The input "scale" for FusedBatchNorm must be a constant')
    int_params = [const(np.ones(3, np.int32))] + params[1:]
    assert run("FusedBatchNormV3", [ph(X4), *int_params], ok) == (
        "Only float32 or float16 weight data type is supported, got kINT32")
    mixed = params[:3] + [const(np.ones(3, np.float16))]
    assert run("FusedBatchNormV3", [ph(X4), *mixed], ok) == (
        "Inconsistent parameter type for batchnorm is not supported")
    counts = params[:3] + [const(np.ones(2, np.float32))]
    assert run("FusedBatchNormV3", [ph(X4), *counts], ok) == (
        "Inconsistent batchnorm parameter count")
    assert both("FusedBatchNormV3", [ph((-1, 8, 8, -1)), *params], ok) == (
        None, "Channel dimension must be static")


def test_explicit_precision_wants_the_conv_filter_as_a_tensor():
    qdq = ValidatorSettings(precision_mode="INT8", use_explicit_precision=True,
                            use_implicit_batch=False)
    assert run("Conv2D", [ph(X4), ph((3, 3, 3, 4))], CONV, settings=qdq) is None
    assert run("Conv2D", [ph(X4), W33], CONV, settings=qdq) == (
        'The input "filter" for Conv2D must be a tensor')
    # In implicit batch the filter tensor loses a dim, so the kernel-rank check fails.
    qdq_ib = ValidatorSettings(precision_mode="INT8", use_explicit_precision=True)
    assert run("Conv2D", [ph(X4), ph((3, 3, 3, 4))], CONV, settings=qdq_ib) == (
        "Conv2D expects kernel of dimension 4")
