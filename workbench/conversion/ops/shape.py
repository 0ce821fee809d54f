"""Shape manipulation: Reshape, ExpandDims, Squeeze, Transpose, Shape, Pack, Unpack, ConcatV2,
Split, Tile, DepthToSpace, SpaceToDepth, DataFormatVecPermute (docs/tftrt-behaviour.md#op-rules)."""

from __future__ import annotations

import numpy as np

from workbench.conversion.operands import (
    ANY,
    TENSOR,
    WEIGHTS,
    Ctx,
    Operand,
    check_dtype_attr,
    check_reshape_volume,
    check_roles,
    convert_axis,
    expect_shape_tensor,
    fail,
    is_static,
    scalar_int,
    volume,
)
from workbench.conversion.ops.rule import FLOAT_HALF_INT32, Check, legacy, structured
from workbench.conversion.ops.slicing import batch_size, strided_slice_helper

LEGACY_DTYPES = FLOAT_HALF_INT32  # printed in enum order: [float, int32, half]


def _values(operand: Operand) -> list[int]:
    return np.asarray(operand.value).reshape(-1).astype(np.int64).tolist()


def _reshape(ctx: Ctx) -> None:
    tensor, shape = ctx.inputs[0], ctx.inputs[1]
    if shape.is_tensor:
        if ctx.ib:
            fail('The input "shape" for Reshape must be a constant in implicit batch mode.')
        expect_shape_tensor(shape)
        if shape.nb_dims == 0:
            fail("Reshape with dynamic input requires 1D input tensor")
        return
    target = tuple(_values(shape))
    if not target and ctx.ib:
        fail("Reshape to shape=[] is not supported")
    if ctx.ib:
        if _changes_batch(tensor.shape, target):
            fail("Reshape on batch dimension is not supported")
        target = target[1:]
    check_reshape_volume(tensor, target)


def _changes_batch(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """In implicit batch mode a Reshape may keep the batch dim only provably."""
    if shape[0] != -1 and target[0] != -1:
        return shape[0] != target[0]
    rest, new_rest = shape[1:], target[1:]
    return not (is_static(rest) and is_static(new_rest) and volume(rest) == volume(new_rest))


def _expand_dims(ctx: Ctx) -> None:
    axis = ctx.inputs[1]
    if axis.value is None or np.asarray(axis.value).size != 1:
        fail("ExpandDims axis must be a scalar")
    convert_axis(scalar_int(axis.value), ctx.inputs[0].nb_dims + 1, ctx)


def _squeeze(ctx: Ctx) -> None:
    tensor = ctx.inputs[0]
    axes = list(ctx.attr("squeeze_dims") or [])
    if not axes:
        if ctx.ib or not is_static(tensor.dims):
            fail("Squeeze is not implemented for empty squeeze_dims")
        return
    for tf_axis in axes:
        trt_axis = convert_axis(tf_axis, tensor.nb_dims, ctx)
        size = tensor.dims[trt_axis]
        if size not in (1, -1):
            fail(f"Dimension {tf_axis} with size {size} cannot be squeezed because it must be "
                 "size 1")


def _transpose(ctx: Ctx) -> None:
    perm = _values(ctx.inputs[1])
    if len(perm) != len(ctx.inputs[0].shape):
        fail("Rank of perm for transpose does not match with that of the input.")
    if ctx.ib and perm[0] != 0:
        fail("Transpose at batch dimension is not supported.")


def _shape(ctx: Ctx) -> None:
    if ctx.ib:
        fail("Shape is only supported for explicit batch mode.")


def _check_same_shapes(ctx: Ctx, inputs: list[Operand], masked: int = -1) -> None:
    """VerifyShapesMatch: equal ranks, equal static dims except the masked one."""
    first = inputs[0].dims
    for other in inputs[1:]:
        if other.nb_dims != len(first):
            fail(f"Received inputs with inconsistent rank, at {ctx.name}")
        for j, (a, b) in enumerate(zip(first, other.dims, strict=True)):
            if a != -1 and b != -1 and a != b and j != masked:
                fail(f"Received inputs with inconsistent shape, at {ctx.name}")


def _variadic_roles(ctx: Ctx, count: int, name: str) -> None:
    role = TENSOR if ctx.ib else ANY  # implicit batch cannot carry a batch dim in weights
    check_roles(ctx, tuple((f"{name}_{i}", role) for i in range(count)), structured=False)


def _pack(ctx: Ctx) -> None:
    """ConvertPack: N first, then roles, then dtypes (not the usual legacy order)."""
    count = int(ctx.attr("N", len(ctx.inputs)))
    if count != len(ctx.inputs):
        fail("Number of inputs for Pack is inconsistent with N attribute")
    _variadic_roles(ctx, count, "values")
    check_dtype_attr(ctx.node, LEGACY_DTYPES, legacy=True)
    if count > 1:
        _check_same_shapes(ctx, ctx.inputs)
    # The rank comes from the last input with a static shape (input 0 if none is static).
    static = [i for i in range(1, count) if is_static(ctx.inputs[i].dims)]
    rank = ctx.inputs[static[-1] if static else 0].nb_dims
    convert_axis(int(ctx.attr("axis", 0)), rank + 1, ctx)


def _unpack(ctx: Ctx) -> None:
    value = ctx.inputs[0]
    if value.nb_dims == 0:
        fail('Input "value" for Unpack must be rank 2 or greater')
    _split_helper(ctx, value, int(ctx.attr("axis", 0)), int(ctx.attr("num", 0)), True)


def _split_helper(ctx: Ctx, value: Operand, tf_axis: int, num: int, squeeze: bool) -> None:
    """ConvertSplitHelper, shared by Split and Unpack."""
    trt_axis = convert_axis(tf_axis, value.nb_dims, ctx)
    size = value.dims[trt_axis]
    if size < 0:
        fail(f"Dimension {tf_axis} must have statically defined dimensions")
    if squeeze and size != num:
        fail(f"Dimension {tf_axis} has size {size} which is not equal to num of {num}")
    if size % num:
        fail(f"Dimension {tf_axis} of size {size} is not evenly divisible by {num}")
    # Each piece is a slice of the whole input (TF shape: the batch size, then the TRT dims),
    # sliced without a slice spec; every piece fails alike, so the first one stands for all.
    sizes = [*value.dims[:trt_axis], size // num, *value.dims[trt_axis + 1:]]
    if ctx.ib:
        shape, sizes = (max(-1, batch_size(value)), *value.dims), [1, *sizes]
    else:
        shape = value.dims
    strided_slice_helper(ctx, shape, [0] * len(sizes), sizes, [1] * len(sizes),
                         has_spec=False)


def _concat(ctx: Ctx) -> None:
    """ConvertConcat: N first, then roles (values, axis), then dtypes."""
    count = int(ctx.attr("N", len(ctx.inputs) - 1))
    if count != len(ctx.inputs) - 1:
        fail("Number of inputs for ConcatV2 is inconsistent with N attributes.")
    role = TENSOR if ctx.ib else ANY
    roles = tuple((f"values_{i}", role) for i in range(count)) + (("axis", WEIGHTS),)
    check_roles(ctx, roles, structured=False)
    check_dtype_attr(ctx.node, LEGACY_DTYPES, legacy=True)
    axis = np.asarray(ctx.inputs[count].value).reshape(-1)
    if axis.size != 1:
        fail("Axis for ConcatV2 must be a scalar")
    trt_axis = convert_axis(int(axis[0]), ctx.inputs[0].nb_dims, ctx)
    _check_same_shapes(ctx, list(ctx.inputs[:count]), masked=trt_axis)


def _split(ctx: Ctx) -> None:
    tf_axis = scalar_int(ctx.inputs[0].value)  # only the first value is read
    _split_helper(ctx, ctx.inputs[1], tf_axis, int(ctx.attr("num_split", 1)), False)


def _tile(ctx: Ctx) -> None:
    tensor, multiples = ctx.inputs[0], ctx.inputs[1]
    if multiples.dtype != "int32":
        fail(f"The multiples for Tile operation in '{ctx.name}' must be of type int32, at "
             f"{ctx.name}")
    if not multiples.is_weights:
        if ctx.ib:
            fail(f"Conversion for Tile is not implemented for the tensor input 'multiples' in "
                 f"implicit batch mode, at {ctx.name}")
        return
    values = _values(multiples)
    rank = len(tensor.shape) if tensor.is_tensor else tensor.nb_dims
    if len(values) != rank:
        fail(f"The length of 'multiples' for Tile operation in '{ctx.name}' should be equal to "
             f"the rank of the input, at {ctx.name}")
    if any(m <= 0 for m in values):
        fail(f"All replications of the Tile operation in '{ctx.name}' should be positive, at "
             f"{ctx.name}")
    if ctx.ib and values[0] != 1:
        fail(f"The Tile operation along the batch dimension in '{ctx.name}' is not "
             "implemented.")


def _depth_space(ctx: Ctx) -> None:
    block = int(ctx.attr("block_size", 0))
    if block < 2:
        fail("Block size must be 2 or greater")
    data_format = ctx.attr("data_format", "NHWC")
    if data_format not in ("NCHW", "NHWC"):
        fail(f"Data format {data_format} is not supported")
    shape = ctx.inputs[0].shape
    if len(shape) != 4:
        fail(f"The input to {ctx.op} must be rank 4")
    c, h, w = _chw(shape, data_format)
    if ctx.op == "DepthToSpace":
        if c >= 0 and c % (block * block):
            fail("Number of channels must be divisible by block_size*block_size")
    elif (h >= 0 and h % block) or (w >= 0 and w % block):
        fail("Width and height must be divisible by block_size")


def _chw(shape: tuple[int, ...], data_format: str) -> tuple[int, int, int]:
    if data_format == "NCHW":
        return shape[1], shape[2], shape[3]
    return shape[3], shape[1], shape[2]


def _vec_permute(ctx: Ctx) -> None:
    if ctx.ib:
        fail(f"Implicit batch mode not supported, at {ctx.name}")
    dims = ctx.inputs[0].dims
    if len(dims) not in (1, 2):
        fail(f"Input must be a vector or matrix, but got rank {len(dims)}, at {ctx.name}")


RULES: dict[str, Check] = {
    "Reshape": legacy(_reshape, dtypes=LEGACY_DTYPES, roles=(("tensor", TENSOR), ("shape", ANY))),
    "ExpandDims": legacy(_expand_dims, dtypes=LEGACY_DTYPES,
                         roles=(("input", TENSOR), ("axis", WEIGHTS))),
    "Squeeze": legacy(_squeeze, dtypes=LEGACY_DTYPES, roles=(("input", TENSOR),)),
    "Transpose": legacy(_transpose, dtypes=LEGACY_DTYPES,
                        roles=(("x", TENSOR), ("perm", WEIGHTS))),
    "Shape": structured(_shape, dtypes=None, roles=(("input", ANY),)),
    "Pack": _pack,
    "Unpack": legacy(_unpack, dtypes=LEGACY_DTYPES, roles=(("value", TENSOR),)),
    "ConcatV2": _concat,
    "Split": legacy(_split, dtypes=LEGACY_DTYPES, roles=(("axis", WEIGHTS), ("value", TENSOR))),
    # tile.cc: structured, declaration order [float, half, int32].
    "Tile": structured(_tile, dtypes=FLOAT_HALF_INT32,
                       roles=(("input_tensor", ANY), ("weight", ANY))),
    "DepthToSpace": legacy(_depth_space, dtypes=LEGACY_DTYPES, roles=(("input", TENSOR),)),
    "SpaceToDepth": legacy(_depth_space, dtypes=LEGACY_DTYPES, roles=(("input", TENSOR),)),
    # docs/tftrt-behaviour.md#open-questions: we take the newest data_format_vec_permute.cc's own
    # list, [int32]
    # (the usual use is permuting int32 shape vectors, which would otherwise never convert).
    "DataFormatVecPermute": structured(_vec_permute, dtypes=("int32",), roles=(("x", ANY),)),
}
