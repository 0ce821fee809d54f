"""TF-TRT 2.17 rules read in its converter sources (issue 10), with TF-TRT's message texts.

Each test's docstring records the facts it relies on: the message and the order of the checks.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_op_rules import EB, X4, both, const, ph, run

I32 = np.int32
F = {"T": "float"}
SS = {"T": "float", "begin_mask": 0, "end_mask": 0}
DYNAMIC_IB = "In implicit batch mode, dynamic input size is not supported."
NEGATIVE_SIZE = '"size" cannot be negative for StridedSlice'
NO_SPEC = ("The argument `strided_slice_spec` is `std::nullopt` with "
           "`dynamic_input_size_indices` non empty.")
BATCH_MSG = "TensorRT does not allow modifications to the batch dimension"


def i32(*values):
    return const(np.array(values, I32))


def ib_only(op, kind=""):
    prefix = f"{kind} " if kind else ""
    return f"Convertion for {prefix}op: '{op}' is not supported in implicit batch mode, at n"


# ------------------------------------------------------------------ StridedSlice / Slice

def test_strided_slice_unknown_batch_is_a_dynamic_size_in_implicit_batch():
    """ConvertStridedSliceHelper drops the batch entry from begin/end/strides but reads the TF
    shape at the same index, so TRT dim 0 is judged by the batch size: an unknown batch is a
    dynamic input size, and implicit batch mode rejects it ("In implicit batch mode, dynamic
    input size is not supported."). Explicit batch mode handles dynamic sizes."""
    masked = {**SS, "begin_mask": 1, "end_mask": 1}
    assert both("StridedSlice", [ph(X4), i32(0, 1), i32(0, 3), i32(1, 1)], masked) == (
        DYNAMIC_IB, None)
    static = [ph((4, 8, 8, 3)), i32(0, 1), i32(4, 3), i32(1, 1)]
    assert both("StridedSlice", static, SS) == (None, None)


def test_strided_slice_negative_size_on_static_dims():
    """For a dimension of known size, `end < begin` with a positive stride fails with
    '"size" cannot be negative for StridedSlice', in both modes. The check reads the begin and
    end ValidateStridedSliceOp normalized (negative indices wrapped, clamped to the size)."""
    backwards = [ph((4, 8, 8, 3)), i32(0, 5), i32(4, 2), i32(1, 1)]
    assert both("StridedSlice", backwards, SS) == (NEGATIVE_SIZE, NEGATIVE_SIZE)
    # -1 wraps to 7: 2..7 is forwards, and passes.
    wrapped = [ph((4, 8, 8, 3)), i32(0, 2), i32(4, -1), i32(1, 1)]
    assert both("StridedSlice", wrapped, SS) == (None, None)
    # A negative stride may run backwards.
    reverse = [ph((4, 8, 8, 3)), i32(0, 5), i32(4, 2), i32(1, -1)]
    assert both("StridedSlice", reverse, SS) == (None, None)


def test_strided_slice_size_check_runs_before_the_dynamic_check():
    """The helper returns the negative-size error from inside its loop over dimensions; the
    dynamic-size error comes after the loop. In implicit batch mode the TF shape is read one
    index off: with a static batch and an unknown TF dim 1, TRT dim 0 (TF dim 1, masked to an
    end of 0 and begin 2) counts as static, and fails the size check."""
    shifted = [ph((4, -1, 8, 3)), i32(0, 2), i32(4, 0), i32(1, 1)]
    attrs = {**SS, "end_mask": 2}
    assert both("StridedSlice", shifted, attrs) == (NEGATIVE_SIZE, None)


def test_strided_slice_ellipsis_test_uses_the_rank_of_begin():
    """The batch check is skipped when ellipsis bit 0 is set and the begin *tensor's rank*
    (1 for any 1-D begin) is below the input rank, whatever the number of entries."""
    # Four entries after the ellipsis on a rank-4 input: len(begin)=5 >= rank, rank(begin)=1.
    spec = [i32(0, 0, 0, 0, 0), i32(0, 4, 8, 8, 3), i32(1, 1, 1, 1, 1)]
    attrs = {**SS, "ellipsis_mask": 1}
    got_ib, _ = both("StridedSlice", [ph((4, 8, 8, 3)), *spec], attrs)
    assert got_ib is None
    # Without the ellipsis the batch check reads the normalized dense begin/end.
    cut = [ph((4, 8, 8, 3)), i32(1, 0), i32(4, 8), i32(1, 1)]
    assert both("StridedSlice", cut, SS) == (BATCH_MSG, None)


def test_strided_slice_check_order_shrink_before_lengths():
    """ConvertStridedSlice: new_axis_mask, then (implicit batch) shrink bit 0, then the length
    check, then ValidateStridedSliceOp's own errors."""
    uneven = [ph(X4), i32(0, 1), i32(0, 3, 1), i32(1, 1)]
    assert run("StridedSlice", uneven, {**SS, "shrink_axis_mask": 1}) == BATCH_MSG
    out_of_bounds = [ph((4, 8, 8, 3)), i32(0, 9), i32(4, 10), i32(1, 1)]
    attrs = {**SS, "shrink_axis_mask": 2}
    assert both("StridedSlice", out_of_bounds, attrs) == (
        "slice index 9 of dimension 1 out of bounds.",) * 2
    zero_stride = [ph((4, 8, 8, 3)), i32(0, 1), i32(4, 3), i32(1, 0)]
    assert both("StridedSlice", zero_stride, SS) == ("strides[1] must be non-zero",) * 2


def test_slice_goes_through_the_same_helper():
    """ConvertSlice builds end = begin + size (size -1: an end-mask bit) and calls the same
    helper with a slice spec: an unknown batch is rejected in implicit batch mode only."""
    assert both("Slice", [ph(X4), i32(0, 1, 1, 0), i32(-1, 2, 2, -1)], F) == (DYNAMIC_IB, None)
    static = [ph((4, 8, 8, 3)), i32(0, 1, 1, 0), i32(-1, 2, 2, -1)]
    assert both("Slice", static, F) == (None, None)


# ------------------------------------------------------------------ Split / Unpack

@pytest.mark.parametrize("op, inputs, attrs", [
    ("Split", [const(I32(3)), ph(X4)], {"T": "float", "num_split": 3}),
    ("Unpack", [ph((-1, 2, 5))], {"T": "float", "num": 2, "axis": 1}),
])
def test_split_and_unpack_reject_dynamic_sizes(op, inputs, attrs):
    """ConvertSplitHelper slices each piece with ConvertStridedSliceHelper and no slice spec,
    so any dynamic size (an unknown batch in implicit batch mode, any unknown dim in explicit
    batch mode) fails with the `std::nullopt` message, which comes before the implicit-batch
    one."""
    assert both(op, inputs, attrs) == (NO_SPEC, NO_SPEC)


def test_split_static_shapes_convert_and_unknown_inner_dim_is_judged_one_off():
    """With a static batch, implicit batch mode judges TRT dim i by TF dim i: an unknown TF
    dim 1 is read for TRT dim 1 (TF dim 2) and gives a negative size (end = 0 + -1) at TRT dim
    0, so the size error; explicit batch mode sees the unknown dim as dynamic."""
    attrs = {"T": "float", "num_split": 3}
    assert both("Split", [const(I32(3)), ph((4, 8, 8, 3))], attrs) == (None, None)
    assert both("Split", [const(I32(3)), ph((4, -1, 8, 3))], attrs) == (NEGATIVE_SIZE, NO_SPEC)


# ------------------------------------------------------------------ Range

RANGE = {"Tidx": "int32"}


def test_range_inputs_need_trt_dims_of_one():
    """ConvertRange (explicit batch only): every input's TRT dims must be `[1]`, so scalar
    constants fail: "Dimension for 'start' of Range operator should be equal to 1"."""
    scalars = [const(I32(0)), const(I32(5)), const(I32(1))]
    assert both("Range", scalars, RANGE) == (
        ib_only("Range"), "Dimension for 'start' of Range operator should be equal to 1")
    vectors = [const(np.array([0], I32)), const(np.array([5], I32)), const(np.array([1], I32))]
    assert both("Range", vectors, RANGE) == (ib_only("Range"), None)
    tensor_limit = [vectors[0], ph((1,), "int32"), vectors[2]]
    assert run("Range", tensor_limit, RANGE, EB) is None


def test_range_message_order():
    """Order: the mixed-dtype check (a tensor among the inputs needs all kINT32), delta == 0,
    a negative delta when start or limit is a tensor, the `[1]` dims check, then for constants
    the sign of (limit - start) / delta."""
    f32 = {"Tidx": "float"}
    mixed = [const(np.array([0], np.float32)), ph((1,), "int32"), const(np.array([1], I32))]
    assert run("Range", mixed, f32, EB) == (
        "When at least one of parameters (start, limit, delta) of Range operation in n is "
        "passed as a tensor, they must all be of type kINT32")
    negative = [const(np.array([9], I32)), ph((1,), "int32"), const(np.array([-2], I32))]
    assert run("Range", negative, RANGE, EB) == (
        "The delta parameter of Range operation cannot be negative, when one of (start, limit) "
        "is passed as a tensor, but got -2")
    zero = [const(I32(0)), const(I32(5)), const(I32(0))]
    assert run("Range", zero, RANGE, EB) == (
        "The delta parameter of Range operation cannot be equal to 0")
    wrong_sign = [const(np.array([0], I32)), const(np.array([5], I32)),
                  const(np.array([-1], I32))]
    assert run("Range", wrong_sign, RANGE, EB) == (
        "For parameters (start, limit) = (0.00, 5.00) of the Range operation delta cannot be "
        "negative, got -1.00")


# ------------------------------------------------------------------ Einsum, unary, binary

@pytest.mark.parametrize("equation", ["i,j->ij", "ij,ij->ij", "ij,j->ij"])
def test_einsum_rejects_outer_products(equation):
    """ValidateEinsumEquation (TRT >= 8.2): two inputs whose equation has exactly two labels,
    each once in the output, is an outer product: "No conversion for einsum equation."."""
    a, b = ph((-1, 4)), ph((-1, 4)) if equation.startswith("ij,ij") else ph((4,))
    assert both("Einsum", [a, b], {"T": "float", "equation": equation}) == (
        ib_only("Einsum"), "No conversion for einsum equation.")


def test_einsum_matmul_still_converts():
    attrs = {"T": "float", "equation": "bij,bjk->bik"}
    assert both("Einsum", [ph((-1, 4, 8)), ph((-1, 8, 3))], attrs) == (ib_only("Einsum"), None)


@pytest.mark.parametrize("op, dtype, attrs", [("Round", "float", F), ("Sign", "float", F),
                                              ("LogicalNot", "bool", {})])
def test_unary_dims_check_comes_before_implicit_batch(op, dtype, attrs):
    """ConvertUnaryImpl::ValidateImpl: "At least 1 dimension is required for UNARY operation"
    before the implicit-batch rejection of Round, Sign and LogicalNot."""
    message = f"At least 1 dimension is required for UNARY operation '{op}'"
    assert both(op, [ph((-1,), dtype)], attrs) == (message, None)
    assert both(op, [ph((), dtype)], attrs)[1] == message


def test_activation_dims_message_says_unary():
    """Activations share ValidateImpl, so their message says UNARY too."""
    assert run("Relu", [ph((-1,))], F) == (
        "At least 1 dimension is required for UNARY operation 'Relu'")


def test_logical_binary_check_order():
    """ConvertBinaryImpl for LogicalAnd/LogicalOr: both-constant check, implicit-batch check,
    both-tensors check, then the broadcast check."""
    consts = [const(np.ones(3, bool)), const(np.ones(3, bool))]
    folded = ("Constant folding is falled back to TensorFlow, binary op 'LogicalAnd' received "
              "both input as constant")
    assert both("LogicalAnd", consts, {}) == (folded, folded)
    mismatch = [ph((-1, 3), "bool"), ph((-1, 4), "bool")]
    _, eb = both("LogicalOr", mismatch, {})
    assert eb.startswith("Infeasible broadcast scheme")


def test_comparison_both_constant_before_implicit_batch():
    """Comparisons: the both-constant check comes before the implicit-batch check."""
    consts = [const(np.ones(3, np.float32)), const(np.ones(3, np.float32))]
    assert run("Greater", consts, F) == (
        "Constant folding is falled back to TensorFlow, binary op 'Greater' received both input "
        "as constant")


# ------------------------------------------------------------------ TopKV2

def test_topk_k_needs_one_element_and_input_needs_a_dim():
    """ConvertTopK: sorted, then a 0-D input (no TRT dims) in *both* modes, then k holding
    exactly one element (a `[1]` k converts)."""
    assert both("TopKV2", [ph((-1,)), const(I32(2))], {"T": "float", "sorted": True}) == (
        "TensorRT TopK cannot apply on batch dimension", None)
    assert run("TopKV2", [ph(()), const(I32(2))], {"T": "float", "sorted": True}, EB) == (
        "TensorRT TopK cannot apply on batch dimension")
    assert both("TopKV2", [ph(X4), i32(2)], {"T": "float", "sorted": True}) == (None, None)
    assert both("TopKV2", [ph(X4), i32(2, 3)], {"T": "float", "sorted": True}) == (
        ("k value of TopK should be a scalar",) * 2)


# ------------------------------------------------------------------ Select / SelectV2 / Fill

def test_select_messages_and_order():
    """ConvertSelectBase: implicit batch, cond dtype (check_type) before cond-as-weights, then
    then/else dtypes ("DataTypes (kFLOAT, kINT32) of parameters (...) ... are incompatible.")."""
    eb = EB
    float_const_cond = [const(np.ones(3, np.float32)), ph(X4), ph(X4)]
    assert run("SelectV2", float_const_cond, F, eb) == (
        "The 'in0' parameter of SelectV2 operation in n is expected to be of type kBOOL type, "
        "got kFLOAT.")
    mixed = [ph(X4, "bool"), ph(X4), ph(X4, "int32")]
    assert run("SelectV2", mixed, F, eb) == (
        "DataTypes (kFLOAT, kINT32) of parameters (in1, in2) of the 'SelectV2' operation at the "
        "node 'n' are incompatible.")


def test_select_shapes_tolerate_dynamic_tensors():
    """Select's shape comparison accepts equal ranks when a tensor among the two compared has
    a dynamic shape; otherwise "The shapes of the 'then' and 'else' parameters of the 'Select'
    operation at the node 'n' must be the same, got <dims> vs. <dims>."."""
    eb = EB
    assert run("Select", [ph((-1, 3), "bool"), ph((-1, 3)), ph((-1, 3))], F, eb) is None
    static = [ph((2, 3), "bool"), ph((2, 3)), const(np.ones((2, 4), np.float32))]
    assert run("Select", static, F, eb) == (
        "The shapes of the 'then' and 'else' parameters of the 'Select' operation at the node "
        "'n' must be the same, got nvinfer1::Dims(nbDims=2, d=2,3,) vs. "
        "nvinfer1::Dims(nbDims=2, d=2,4,).")
    vector_cond = [ph((2,), "bool"), ph((2, 3)), ph((2, 3))]
    assert run("Select", vector_cond, F, eb) is None
    bad_cond = [ph((3,), "bool"), ph((2, 3)), ph((2, 3))]
    assert run("Select", bad_cond, F, eb) == (
        "The shapes of the 'cond' and 'then' parameters of the 'Select' operation at the node "
        "'n' must be the same OR 'cond' must be a vector with N elements, where N is a batch "
        "size (the first shape dimension for 'then'), got nvinfer1::Dims(nbDims=1, d=3,) vs. "
        "nvinfer1::Dims(nbDims=2, d=2,3,).")


def test_selectv2_broadcast_check():
    """SelectV2 broadcasts cond with then and with else (explicit batch rules: unknown dims
    pass, static dims must match or be 1)."""
    eb = EB
    assert run("SelectV2", [ph((2, 1), "bool"), ph((2, 3)), ph((1, 3))], F, eb) is None
    got = run("SelectV2", [ph((2, 4), "bool"), ph((2, 3)), ph((2, 3))], F, eb)
    assert got == ("Infeasible broadcast scheme (batch_dim: 2, nvinfer1::Dims(nbDims=2, d=2,4,) "
                   "vs batch_dim: 2, nvinfer1::Dims(nbDims=2, d=2,3,))")


def test_fill_message_text():
    """fill_ops.cc: "The dims parameter of Fill operation in <n> is expected to be of type
    kINT32 type, got kFLOAT" (no quotes, no final period)."""
    assert run("Fill", [ph((2,), "float"), const(np.float32(0))], F, EB) == (
        "The dims parameter of Fill operation in n is expected to be of type kINT32 type, got "
        "kFLOAT")
