"""Shape, slicing, reduction, selection, NMS and misc rules (spec §3.4, §3.5)."""

from __future__ import annotations

import numpy as np
import pytest
from test_op_rules import X4, assert_rule_case, both, const, ph, run

from workbench.conversion.validator import ValidatorSettings

F = {"T": "float"}
NN = {"T": "float", "align_corners": False, "half_pixel_centers": True}
I32 = np.int32
BATCH = "TensorRT does not allow manipulation of the batch dimension"
DYNAMIC_IB = "In implicit batch mode, dynamic input size is not supported."


def ib_only(op, kind=""):
    prefix = f"{kind} " if kind else ""
    return f"Convertion for {prefix}op: '{op}' is not supported in implicit batch mode, at n"


def i32(*values):
    return const(np.array(values, I32))


CASES = [
    # --- Reshape
    ("Reshape", [ph(X4), i32(-1, 192)], F, None, None),
    ("Reshape", [ph(X4), i32(-1, 2, 96)], {"T": "int64"},
     "Data type int64 is not supported for Reshape, must be one of [float, int32, half]", "same"),
    ("Reshape", [ph(X4), i32(2, -1)], F, "Reshape on batch dimension is not supported", None),
    ("Reshape", [ph(X4), i32(-1, -1)], F, "Reshape on batch dimension is not supported", None),
    ("Reshape", [ph((1, 1)), const(np.array([], I32))], F,
     "Reshape to shape=[] is not supported", None),
    ("Reshape", [ph((2, 3)), i32(4, 2)], F, "Reshape on batch dimension is not supported",
     "Incompatible shapes: DimsAdapter(num_dims=2,shape=[2,3],vol=6) vs. "
     "DimsAdapter(num_dims=2,shape=[4,2],vol=8)"),
    ("Reshape", [ph((2, 3)), i32(2, 4)], F,
     "Incompatible shapes: DimsAdapter(num_dims=1,shape=[3],vol=3) vs. "
     "DimsAdapter(num_dims=1,shape=[4],vol=4)", "Incompatible shapes: "
     "DimsAdapter(num_dims=2,shape=[2,3],vol=6) vs. DimsAdapter(num_dims=2,shape=[2,4],vol=8)"),
    ("Reshape", [ph(X4), ph((2, 2), "int32")], F,
     'The input "shape" for Reshape must be a constant in implicit batch mode.',
     "Expected a 0D or 1D shape tensor"),
    ("Reshape", [ph(X4), ph((), "int32")], F,
     "Failed to convert at least one input to a TRT_TensorOrWeights: Scalar input tensor is not "
     "supported since the first dimension is treated as batch dimension by TRT",
     "Reshape with dynamic input requires 1D input tensor"),
    ("Reshape", [ph(X4), ph((2,), "int32")], F,
     'The input "shape" for Reshape must be a constant in implicit batch mode.', None),
    ("Reshape", [ph(X4), ph((2,), "float")], F,
     'The input "shape" for Reshape must be a constant in implicit batch mode.',
     "Expected a shape tensor with INT32 type"),
    ("Reshape", [const(np.ones((2, 3), np.float32)), i32(3, 2)], F,
     'The input "tensor" for Reshape must be a tensor', "same"),
    # --- ExpandDims / Squeeze / Transpose
    ("ExpandDims", [ph(X4), i32(-1)], F, None, None),
    ("ExpandDims", [ph(X4), const(np.int32(0))], F, BATCH, None),
    ("ExpandDims", [ph(X4), i32(1, 2)], F, "ExpandDims axis must be a scalar", "same"),
    ("ExpandDims", [ph(X4), const(np.int32(7))], F,
     "Axis value of 7 is out of bounds, must be in range [-5, 5), at n", "same"),
    ("Squeeze", [ph((-1, 1, 3))], {"T": "float", "squeeze_dims": [1]}, None, None),
    ("Squeeze", [ph((-1, 2, 3))], {"T": "float", "squeeze_dims": [1]},
     "Dimension 1 with size 2 cannot be squeezed because it must be size 1", "same"),
    ("Squeeze", [ph((1, 1, 3))], {"T": "float", "squeeze_dims": []},
     "Squeeze is not implemented for empty squeeze_dims", None),
    ("Transpose", [ph(X4), i32(0, 3, 1, 2)], F, None, None),
    ("Transpose", [ph(X4), i32(1, 0, 2, 3)], F,
     "Transpose at batch dimension is not supported.", None),
    ("Transpose", [ph(X4), i32(0, 2, 1)], F,
     "Rank of perm for transpose does not match with that of the input.", "same"),
    ("Shape", [ph(X4)], {"out_type": "int32"},
     "Shape is only supported for explicit batch mode.", None),
    # --- Pack / Unpack / ConcatV2 / Split
    ("Pack", [ph(X4), ph(X4)], {"T": "float", "N": 2, "axis": 1}, None, None),
    ("Pack", [ph(X4), ph((-1, 8, 8, 4))], {"T": "float", "N": 2, "axis": 1},
     "Received inputs with inconsistent shape, at n", "same"),
    ("Pack", [ph(X4), ph(X4)], {"T": "float", "N": 2, "axis": 0}, BATCH, None),
    ("Unpack", [ph((4, 2, 5))], {"T": "float", "num": 2, "axis": 1}, None, None),
    ("Unpack", [ph((-1, -1, 5))], {"T": "float", "num": 2, "axis": 1},
     "Dimension 1 must have statically defined dimensions", "same"),
    ("Pack", [ph(X4), ph(X4)], {"T": "float", "N": 3, "axis": 1},
     "Number of inputs for Pack is inconsistent with N attribute", "same"),
    ("Pack", [ph(X4), const(np.ones((2, 8, 8, 3), np.float32))], {"T": "bool", "N": 2, "axis": 1},
     'The input "values_1" for Pack must be a tensor',
     "Data type bool is not supported for Pack, must be one of [float, int32, half]"),
    ("Unpack", [ph((-1, 3, 5))], {"T": "float", "num": 2, "axis": 1},
     "Dimension 1 has size 3 which is not equal to num of 2", "same"),
    ("ConcatV2", [ph(X4), ph((-1, 8, 8, 5)), const(np.int32(3))], {"T": "float", "N": 2},
     None, None),
    ("ConcatV2", [ph(X4), ph((-1, 8, 8, 5)), const(np.int32(2))], {"T": "float", "N": 2},
     "Received inputs with inconsistent shape, at n", "same"),
    ("ConcatV2", [ph(X4), ph(X4), i32(3, 3)], {"T": "float", "N": 2},
     "Axis for ConcatV2 must be a scalar", "same"),
    ("ConcatV2", [ph(X4), ph(X4), const(np.int32(0))], {"T": "float", "N": 2}, BATCH, None),
    ("ConcatV2", [ph(X4), ph(X4), const(np.int32(3))], {"T": "float", "N": 3},
     "Number of inputs for ConcatV2 is inconsistent with N attributes.", "same"),
    ("ConcatV2", [ph(X4), const(np.ones((2, 8, 8, 3), np.float32)), const(np.int32(3))],
     {"T": "float", "N": 2}, 'The input "values_1" for ConcatV2 must be a tensor', None),
    ("ConcatV2", [ph(X4), ph(X4), ph((), "int32")], {"T": "float", "N": 2},
     "Failed to convert at least one input to a TRT_TensorOrWeights: Scalar input tensor is not "
     "supported since the first dimension is treated as batch dimension by TRT",
     'The input "axis" for ConcatV2 must be a constant'),
    ("Split", [const(np.int32(3)), ph((4, 8, 8, 3))], {"T": "float", "num_split": 3}, None, None),
    ("Split", [const(np.int32(3)), ph(X4)], {"T": "float", "num_split": 2},
     "Dimension 3 of size 3 is not evenly divisible by 2", "same"),
    # --- Tile (structured: declaration order)
    ("Tile", [ph(X4), i32(1, 2, 2, 1)], F, None, None),
    ("Tile", [ph(X4), i32(2, 1, 1, 1)], F,
     "The Tile operation along the batch dimension in 'n' is not implemented.", None),
    ("Tile", [ph(X4), i32(1, 2, 2, 1)], {"T": "bool"},
     "Data type bool is not supported for Tile, must be one of [float, half, int32]", "same"),
    # --- DepthToSpace / DataFormatVecPermute
    ("DepthToSpace", [ph((-1, 4, 4, 8))], {"T": "float", "block_size": 2}, None, None),
    ("DepthToSpace", [ph((-1, 4, 4, 6))], {"T": "float", "block_size": 2},
     "Number of channels must be divisible by block_size*block_size", "same"),
    ("SpaceToDepth", [ph((-1, 4, 4, 8))], {"T": "float", "block_size": 2,
                                           "data_format": "NCHW_VECT_C"},
     "Data format NCHW_VECT_C is not supported", "same"),
    ("DataFormatVecPermute", [ph((-1, 4), "int32")], {"T": "int32"},
     "Implicit batch mode not supported, at n", None),
    # --- Slice / StridedSlice / Pad / GatherV2
    ("Slice", [ph(X4), i32(0, 1, 1, 0), i32(-1, 2, 2, -1)], F, DYNAMIC_IB, None),
    ("Slice", [ph(X4), i32(1, 1, 1, 0), i32(-1, 2, 2, -1)], F,
     "TensorRT does not allow modifications to the batch dimension in implicit batch mode",
     None),
    ("Slice", [ph(X4), i32(0, -1, 1, 0), i32(-1, 2, 2, -1)], F,
     '"begin" in Slice is out of range', "same"),
    ("Slice", [ph(X4), i32(0, 1, 1, 0), i32(-1, 2, 2, -2)], F,
     '"size" in Slice is out of range', "same"),
    ("Slice", [ph(X4), i32(0, 1, 1), i32(-1, 2, 2)], F,
     "Length of begin and size arguments must equal rank of input for Slice", "same"),
    ("Slice", [ph(X4), i32(0, 1, 1, 0), i32(-1, 8, 2, -1)], F,
     '"begin" + "size" for dimension 1 in Slice is out of range', "same"),
    ("Slice", [ph((4, 8, 8, 3)), i32(0, 1, 1, 0), i32(4, 2, 2, -1)], F, None, None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3), i32(1, 1)],
     {"T": "float", "begin_mask": 1, "end_mask": 1}, DYNAMIC_IB, None),
    ("StridedSlice", [ph((4, 8, 8, 3)), i32(0, 1), i32(4, 3), i32(1, 1)], F, None, None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3), i32(2, 1)],
     {"T": "float", "begin_mask": 1, "end_mask": 1},
     "TensorRT does not allow modifications to the batch dimension", None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3, 1), i32(1, 1)], F,
     "Length of begin, end, and stride must be equal", "same"),
    # ellipsis first with fewer specs than dims leaves the batch alone
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 2), i32(1, 1)],
     {"T": "float", "ellipsis_mask": 1}, DYNAMIC_IB, None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(1, 3), i32(1, 1)], F,
     "TensorRT does not allow modifications to the batch dimension", None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3), i32(1, 1)],
     {"T": "float", "begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 1},
     "TensorRT does not allow modifications to the batch dimension", None),
    ("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3), i32(1, 1)],
     {"T": "float", "new_axis_mask": 2}, "new_axis_mask is not supported for StridedSlice",
     "same"),
    ("Pad", [ph(X4), const(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], I32))], F, None, None),
    ("Pad", [ph((-1, 8)), const(np.array([[0, 0], [1, 1]], I32))], F,
     "Convertpad requires at least 4D input", "same"),
    ("Pad", [ph(X4), const(np.array([[0, 0], [1, 1], [1, 1]], I32))], F,
     "Paddings must be a weight with shape [n, 2], where n is the rank of input tensor", "same"),
    ("Pad", [ph(X4), const(np.array([[1, 0], [1, 1], [0, 0], [0, 0]], I32))], F,
     "Padding layer does not support padding on batch dimension", None),
    ("Pad", [ph(X4), const(np.array([[0, 0], [1, 1], [1, 1], [1, 1]], I32))], F,
     "Padding layer does not support padding on > 2", "same"),
    ("Pad", [ph(X4), const(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], I32))], {"T": "int32"},
     "Data type int32 is not supported for Pad, must be one of [float, int8, half]", "same"),
    ("GatherV2", [const(np.ones((100, 8), np.float32)), ph((-1, 5), "int32"),
                  const(np.int32(0))], {"Tparams": "float", "Tindices": "int32"}, None, None),
    ("GatherV2", [const(np.ones((100, 8), np.float32)), ph((-1, 5), "int32"),
                  const(np.int32(1))], {"Tparams": "float", "Tindices": "int32"},
     "The input axis must be zero when params is a weight.", None),
    ("GatherV2", [const(np.ones((100, 8), np.float32)), ph((-1, 5), "int32"),
                  const(np.int32(0))], {"Tparams": "float", "Tindices": "int64"},
     "Data type int64 is not supported for GatherV2, must be one of [int32]", "same"),
    ("GatherV2", [ph((-1, 8)), ph((-1, 5), "int32"), const(np.int32(1))],
     {"Tparams": "float", "Tindices": "int32"},
     "Params and indices must have a batch size of 1 when params and indices are both tensors "
     "or both constants.", None),
    ("GatherV2", [ph((1, 8)), ph((1, 5), "int32"), const(np.int32(1))],
     {"Tparams": "float", "Tindices": "int32"}, None, None),
    ("GatherV2", [ph((-1, 8)), ph((-1, 5), "int32"), const(np.int32(0))],
     {"Tparams": "float", "Tindices": "int32"}, BATCH, None),
    ("GatherV2", [ph((-1, 8, 6)), ph((-1, 5), "int32"), const(np.int32(1))],
     {"Tparams": "float", "Tindices": "int32", "batch_dims": 1},
     "Params and indices must have a batch size of 1 when params and indices are both tensors "
     "or both constants.", None),
    ("GatherV2", [const(np.ones((100, 8), np.float32)), ph((-1, 5), "int32"),
                  const(np.int32(0))], {"Tparams": "float", "Tindices": "int32", "batch_dims": 2},
     "batch_dims must be zero in implicit batch mode",
     "batch_dims cannot exceed 1 in dynamic shape mode"),
    # --- reductions, ArgMax, TopK
    ("Mean", [ph(X4), i32(1, 2)], {"T": "float", "Tidx": "int32"}, None, None),
    ("Sum", [ph(X4), i32(0)], {"T": "float", "Tidx": "int32"}, BATCH, None),
    ("Max", [ph(X4), i32(1)], {"T": "float", "Tidx": "int64"}, "Tidx supports only DT_INT32",
     "same"),
    ("Mean", [ph(X4), const(np.array([], I32))], {"T": "float", "Tidx": "int32"},
     "TRT cannot support reduce on all (batch) dimensions", "same"),
    ("ArgMax", [ph(X4), const(np.int32(3))], F, "Output type int64 is not supported", "same"),
    ("ArgMax", [ph(X4), const(np.int32(3))], {"T": "float", "output_type": "int32"}, None, None),
    ("ArgMin", [ph(X4), const(np.int32(0))], {"T": "float", "output_type": "int32"}, BATCH,
     None),
    ("TopKV2", [ph(X4), const(np.int32(2))], {"T": "float", "sorted": True}, None, None),
    ("TopKV2", [ph(X4), const(np.int32(2))], {"T": "float", "sorted": False},
     "Only sorted=True is supported", "same"),
    ("TopKV2", [ph(X4), i32(2)], {"T": "float", "sorted": True}, None, None),  # one element
    ("TopKV2", [ph(X4), i32(2, 3)], {"T": "float", "sorted": True},
     "k value of TopK should be a scalar", "same"),
    # --- Softmax, Select, fill-likes
    ("Softmax", [ph((-1, 10))], F, None, None),
    ("Softmax", [ph((-1, 10))], {"T": "int32"},
     "Data type int32 is not supported for Softmax, must be one of [float, half]", "same"),
    ("SelectV2", [ph(X4, "bool"), ph(X4), ph(X4)], F, ib_only("SelectV2"), None),
    ("SelectV2", [const(np.ones(3, bool)), ph(X4), ph(X4)], F, ib_only("SelectV2"),
     "The boolean parameter 'in0' of the 'SelectV2' operation at the node 'n' cannot be "
     "passed as a weight in TRT version 8.4."),
    ("SelectV2", [ph(X4), ph(X4), ph(X4)], F, ib_only("SelectV2"),
     "The 'in0' parameter of SelectV2 operation in n is expected to be of type kBOOL type, "
     "got kFLOAT."),
    ("Fill", [ph((2,), "int32"), const(np.float32(0))], F, ib_only("Fill"), None),
    ("Fill", [ph((2,), "float"), const(np.float32(0))], F, ib_only("Fill"),
     "The dims parameter of Fill operation in n is expected to be of type kINT32 type, got "
     "kFLOAT"),
    ("Range", [const(np.int32(0)), const(np.int32(5)), const(np.int32(0))], {"Tidx": "int32"},
     ib_only("Range"), "The delta parameter of Range operation cannot be equal to 0"),
    ("ZerosLike", [ph(X4)], F, ib_only("ZerosLike"), None),
    ("OnesLike", [ph(X4, "int32")], {"T": "bool"},
     "Data type bool is not supported for OnesLike, must be one of [float, half, int32]",
     "same"),
    # --- Resize
    ("ResizeBilinear", [ph(X4), i32(16, 16)], {"T": "float", "align_corners": True}, None, None),
    ("ResizeBilinear", [ph(X4), i32(16, 16)], {"T": "float", "align_corners": False,
                                               "half_pixel_centers": True},
     "Cannot Convert Bilinear Resize when align_corners=False", "same"),
    ("ResizeNearestNeighbor", [ph(X4), i32(16, 16)], NN, None, None),
    ("ResizeNearestNeighbor", [ph(X4), i32(16, 16, 1)], NN,
     "Resize requires 2D values for the size", "same"),
    ("ResizeNearestNeighbor", [ph(X4), ph((2,), "int32")], NN,
     "Resize requires constant size in implicit batch mode", None),
    ("ResizeNearestNeighbor", [ph(X4), ph((3,), "int32")], NN,
     "Resize requires constant size in implicit batch mode",
     "Resize requires 2D values for the size"),
    ("ResizeNearestNeighbor", [ph(X4), ph((2,), "float")], NN,
     "Resize requires constant size in implicit batch mode",
     "Expected a shape tensor with INT32 type"),
    # int32 passes the first dtype check, then fails the second one (before align_corners).
    ("ResizeBilinear", [ph(X4, "int32"), i32(16, 16)], {"T": "int32", "align_corners": False},
     "Data type int32 is not supported for ResizeBilinear, must be one of [float, half]",
     "same"),
    ("ResizeBilinear", [ph(X4), i32(16, 16)], {"T": "bool", "align_corners": True},
     "Data type bool is not supported for ResizeBilinear, must be one of [float, int32, half]",
     "same"),
    # --- Cast, pass-through ops, variables
    ("Cast", [ph(X4, "half")], {"SrcT": "half", "DstT": "float"}, None, None),
    ("Cast", [ph(X4, "int32")], {"SrcT": "int32", "DstT": "float"},
     "Cast op is not supported - Allowed input dtypes: [float, half]. Received: int32", "same"),
    ("Cast", [ph(X4, "int32")], {"SrcT": "half", "DstT": "float"},  # SrcT is not read
     "Cast op is not supported - Allowed input dtypes: [float, half]. Received: int32", "same"),
    ("Cast", [ph(X4)], {"SrcT": "float", "DstT": "int32"},
     "Cast op is not supported - Allowed output dtypes: [float, half]. Received: int32", "same"),
    ("Cast", [ph(X4, "uint8")], {"SrcT": "uint8", "DstT": "float"},
     "Failed to convert at least one input to a TRT_TensorOrWeights: Unsupported tensorflow "
     "data type uint8", "same"),
    ("IdentityN", [ph(X4), ph((-1, 3))], {"T": ["float", "float"]}, None, None),
    ("StopGradient", [ph(X4)], F, None, None),
    ("VariableV2", [], {"dtype": "int32", "shape": (3,)},
     "Data type int32 is not supported for VariableV2, must be one of [float, half]", "same"),
]


@pytest.mark.parametrize("op, inputs, attrs, expect_ib, expect_eb", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_shape_and_misc_rules(op, inputs, attrs, expect_ib, expect_eb):
    assert_rule_case(op, inputs, attrs, expect_ib, expect_eb)


NMS_INPUTS = [ph((-1, 100, 1, 4)), ph((-1, 100, 5)), const(np.int32(10)), const(np.int32(20)),
              const(np.float32(0.5)), const(np.float32(0.3))]


def test_combined_nms_is_explicit_batch_only():
    ib, eb = both("CombinedNonMaxSuppression", NMS_INPUTS, {"pad_per_class": False})
    assert ib == ib_only("CombinedNonMaxSuppression")
    assert eb is None
    eb = ValidatorSettings(use_implicit_batch=False)
    plugin = "NMS TRT Plugin "
    wrong_q = [ph((-1, 100, 3, 4)), *NMS_INPUTS[1:]]
    assert run("CombinedNonMaxSuppression", wrong_q, settings=eb) == (
        plugin + "third dimension of boxes must be either 1or match the num_classes dimension "
        "of scores, at n")
    rank3 = [ph((-1, 100, 4)), *NMS_INPUTS[1:]]
    assert run("CombinedNonMaxSuppression", rank3, settings=eb) == (
        plugin + "input boxes must be 4-D including batch, at n")
    zero = [*NMS_INPUTS[:3], const(np.int32(0)), *NMS_INPUTS[4:]]
    assert run("CombinedNonMaxSuppression", zero, settings=eb) == (
        plugin + "max_total_size should be > 0, at n")
    bad_iou = [*NMS_INPUTS[:4], const(np.float32(1.5)), NMS_INPUTS[5]]
    assert run("CombinedNonMaxSuppression", bad_iou, settings=eb) == (
        plugin + "iou_threshold must be in [0, 1], atn")
    tensor_size = [*NMS_INPUTS[:2], ph((1,), "int32"), *NMS_INPUTS[3:]]
    assert run("CombinedNonMaxSuppression", tensor_size) == (
        'The input "max_output_size_per_class" for CombinedNonMaxSuppression must be a constant')


def test_cast_rejected_by_experimental_feature():
    settings = ValidatorSettings(experimental_features=frozenset({"reject_all_fp_cast_ops"}))
    assert run("Cast", [ph(X4, "half")], {"SrcT": "half", "DstT": "float"}, settings) == (
        "Cast op is not supported - TF_TRT_EXPERIMENTAL_FEATURES=reject_all_fp_cast_ops has "
        "been defined")


def test_const_node_itself():
    assert run("Const", [], {"value": np.ones(3, np.float32), "dtype": "float"}) is None
    assert run("Const", [], {"value": np.ones(3, np.int64), "dtype": "int64"}) is None
    assert run("Const", [], {"value": np.ones(3, np.float64), "dtype": "double"}) == (
        "Unsupported tensorflow data type double")
