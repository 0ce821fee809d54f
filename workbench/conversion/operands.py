"""TF-TRT's view of a node's inputs, and the checks every converter shares
(docs/tftrt-behaviour.md#validator,
#op-rules).

In validation-only mode TF-TRT turns each input into a `TRT_TensorOrWeights` (`Operand`; the
validator builds them): weights for Consts, a fake tensor (dtype and TRT dims only) for
everything else, or a fake resource handle. The converters then check dtypes, input roles,
axes and broadcasts with fixed message texts, which are reproduced here because the
non-conversion report prints them verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from workbench.graph.nodes import DTYPE_ENUMS, DTYPE_NAMES, Graph, Node

TENSOR, WEIGHTS, ANY, RESOURCE = "tensor", "weights", "any", "resource"

# TRT >= 8.2 maps bool; int8 has no TF->TRT mapping for tensors (docs/tftrt-behaviour.md#validator).
TRT_DTYPES = frozenset({"float", "half", "int32", "bool"})
MAX_DIMS = 8  # nvinfer1::Dims::MAX_DIMS in TensorRT 8
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


@dataclass(frozen=True)
class ValidatorSettings:
    """The conversion parameters TF-TRT's validator and converters read."""

    precision_mode: str = "FP32"  # "FP32" | "FP16" | "INT8"
    use_implicit_batch: bool = True
    use_calibration: bool = True
    use_explicit_precision: bool = False  # QDQ mode (docs/tftrt-behaviour.md#pipeline)
    fake_ops: frozenset[str] = frozenset()  # TF_TRT_OP_FAKELIST
    experimental_features: frozenset[str] = frozenset()  # e.g. "reject_all_fp_cast_ops"


class Reject(Exception):
    """A converter's validation error; `str(exc)` is TF-TRT's message."""


@dataclass(frozen=True)
class Operand:
    """One converted input: `kind` is tensor, weights or resource.

    `shape` is the TF shape; `dims` the TRT dims (batch dim dropped for tensors in implicit
    batch mode; weights always keep all their dims, as TRT_ShapedWeights does).
    A float Const's values are decoded only when a rule reads them (`value`): most rules need
    only dtype and shape, and decoding every weight costs seconds on big models.
    """

    kind: str
    dtype: str
    shape: tuple[int, ...] = ()
    dims: tuple[int, ...] = ()
    data: np.ndarray | None = field(default=None, repr=False, compare=False)
    const: Node | None = field(default=None, repr=False, compare=False)  # decoded on demand

    @property
    def value(self) -> np.ndarray | None:
        """The weights' values (None for tensors and variables)."""
        if self.data is None and self.const is not None:
            return np.asarray(self.const.attr("value"))
        return self.data

    @property
    def is_tensor(self) -> bool:
        return self.kind == TENSOR

    @property
    def is_weights(self) -> bool:
        return self.kind == WEIGHTS

    @property
    def nb_dims(self) -> int:
        return len(self.dims)


class Ctx:
    """What a converter sees in validation-only mode."""

    def __init__(self, graph: Graph | None, node: Node, inputs: list[Operand],
                 settings: ValidatorSettings):
        self.graph, self.node, self.inputs, self.settings = graph, node, inputs, settings

    @property
    def op(self) -> str:
        return self.node.op

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def ib(self) -> bool:
        return self.settings.use_implicit_batch

    def attr(self, key: str, default: Any = None) -> Any:
        return self.node.attr(key, default)

    def weights(self, index: int) -> np.ndarray:
        value = self.inputs[index].value
        return np.asarray(value)


def fail(message: str) -> NoReturn:
    raise Reject(message)


# DebugString(nvinfer1::DataType), used where TF-TRT prints a TRT type.
TRT_TYPE_NAMES = {"float": "kFLOAT", "half": "kHALF", "int32": "kINT32", "bool": "kBOOL",
                  "int8": "kINT8"}


def input_name(ctx: Ctx, index: int) -> str:
    """The NodeDef's input string (`node` or `node:port`), which some messages quote."""
    ref = ctx.node.inputs[index]
    return ref.node if ref.port == 0 else f"{ref.node}:{ref.port}"


def const_weights(const: Node) -> Operand:
    """The Const (or VariableV2) converter: integer weights become int32."""
    if const.op == "VariableV2":
        check_dtype_attr(const, ("float", "half"), "dtype", legacy=True)
        return Operand(WEIGHTS, const.attr("dtype"), tuple(const.attr("shape") or ()),
                       tuple(const.attr("shape") or ()))
    lazy = _lazy_float_weights(const)
    if lazy is not None:
        return lazy
    value = np.asarray(const.attr("value"))
    declared = const.attr("dtype")
    actual = tf_dtype_of(value)
    if declared is not None and declared != actual:
        fail(f"DataType mismatch between attr ({declared}) and tensor ({actual})")
    if actual in INT_DTYPES:
        value = _to_int32(value)
        actual = "int32"
    if actual not in TRT_DTYPES:
        fail(f"Unsupported tensorflow data type {actual}")
    return Operand(WEIGHTS, actual, value.shape, value.shape, value)


# Float weights pass the Const converter on dtype and shape alone; other dtypes are decoded
# (integers are range-checked, odd dtypes keep numpy's name in the messages).
_LAZY_DTYPES = frozenset({DTYPE_ENUMS["float"], DTYPE_ENUMS["half"]})


def _lazy_float_weights(const: Node) -> Operand | None:
    """A float Const's weights read from its TensorProto header, values left undecoded."""
    if isinstance(const.raw_attrs, dict) or not const.has_attr("value"):
        return None  # hand-built nodes hold decoded values already
    raw = const.raw_attrs["value"]
    if raw.WhichOneof("value") != "tensor":
        return None
    proto = raw.tensor
    if proto.dtype not in _LAZY_DTYPES or proto.tensor_shape.unknown_rank:
        return None
    declared = const.attr("dtype")
    actual = DTYPE_NAMES[proto.dtype]
    if declared is not None and declared != actual:
        return None  # the decoding path words the mismatch
    shape = tuple(int(d.size) for d in proto.tensor_shape.dim)
    return Operand(WEIGHTS, actual, shape, shape, const=const)


def _to_int32(value: np.ndarray) -> np.ndarray:
    flat = value.reshape(-1)
    info = np.iinfo(np.int32)
    bad = np.flatnonzero((flat < info.min) | (flat > info.max))
    if bad.size:
        fail(f"Value at index {int(bad[0])} is outside the range of int32")
    return value.astype(np.int32)


_NUMPY_TO_TF = {
    "float32": "float", "float16": "half", "float64": "double", "bool": "bool", "str": "string",
    "bytes": "string", "object": "string", "complex64": "complex64", "complex128": "complex128",
}


def tf_dtype_of(value: np.ndarray) -> str:
    """TF's short dtype name for a numpy array (int32 stays int32, float32 becomes float)."""
    name = value.dtype.name
    return _NUMPY_TO_TF.get(name, "string" if value.dtype.kind in "SUO" else name)


def shape_debug_string(shape: tuple[int, ...]) -> str:
    """PartialTensorShape::DebugString: `[1,?,3]`."""
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def dims_debug_string(dims: tuple[int, ...]) -> str:
    """TF-TRT's DebugString(nvinfer1::Dims): `nvinfer1::Dims(nbDims=2, d=3,4,)`."""
    return f"nvinfer1::Dims(nbDims={len(dims)}, d={''.join(f'{d},' for d in dims)})"


def adapter_debug_string(dims: tuple[int, ...]) -> str:
    """DimsAdapter::DebugString: `DimsAdapter(num_dims=2,shape=[3,4],vol=12)`."""
    return (f"DimsAdapter(num_dims={len(dims)},shape=[{','.join(str(d) for d in dims)}],"
            f"vol={volume(dims)})")


def check_reshape_volume(operand: Operand, dims: tuple[int, ...]) -> None:
    """PrepareTensorForShape in validation mode: static element counts must agree, and
    weights need a fully static target."""
    if volume(dims) > 0 and is_static(operand.dims) and is_static(dims) \
            and volume(operand.dims) != volume(dims):
        fail(f"Incompatible shapes: {adapter_debug_string(operand.dims)} vs. "
             f"{adapter_debug_string(dims)}")
    if operand.is_weights and not is_static(dims):
        fail(f"Shape is not fully defined: {adapter_debug_string(dims)}")


# ---------------------------------------------------------------- shared converter checks
# (docs/tftrt-behaviour.md#op-rules)

def check_dtype_attr(node: Node, allowed: tuple[str, ...], attr: str = "T",
                     legacy: bool = False) -> None:
    """The dtype-attribute check; legacy converters print their std::set in enum order."""
    if not node.has_attr(attr):
        # Legacy AllowDataTypes text; structured converters fail GetNodeAttr similarly.
        fail(f"Attribute with name {attr} not found.")
    dtype = node.attr(attr)
    if dtype in allowed:
        return
    listed = sorted(allowed, key=lambda d: DTYPE_ENUMS.get(d, 99)) if legacy else list(allowed)
    fail(f"Data type {dtype} is not supported for {node.op}, must be one of "
         f"[{', '.join(listed)}]")


def check_roles(ctx: Ctx, roles: tuple[tuple[str, str], ...], structured: bool) -> None:
    """Each input must have its role: tensor, weights (a constant), any, or resource."""
    suffix = f", at {ctx.name}" if structured else ""
    for (arg, role), operand in zip(roles, ctx.inputs, strict=False):
        if role == WEIGHTS and not operand.is_weights:
            fail(f'The input "{arg}" for {ctx.op} must be a constant{suffix}')
        if role == TENSOR and not operand.is_tensor:
            fail(f'The input "{arg}" for {ctx.op} must be a tensor{suffix}')
        if role == RESOURCE and operand.kind != RESOURCE:
            fail(f'The input "{arg}" for {ctx.op} must be a resource handle')


def reject_implicit_batch(ctx: Ctx, kind: str = "") -> None:
    """The explicit-batch-only guard; TF-TRT spells it "Convertion"."""
    if ctx.ib:
        prefix = f"{kind} " if kind else ""
        fail(f"Convertion for {prefix}op: '{ctx.op}' is not supported in implicit batch mode, "
             f"at {ctx.name}")


def convert_axis(tf_axis: int, trt_nb_dims: int, ctx: Ctx) -> int:
    """ConvertAxis: bounds check, then (implicit batch) reject the batch axis."""
    tf_nb_dims = trt_nb_dims + (1 if ctx.ib else 0)
    if tf_axis < -tf_nb_dims or tf_axis >= tf_nb_dims:
        fail(f"Axis value of {tf_axis} is out of bounds, must be in range "
             f"[{-tf_nb_dims}, {tf_nb_dims}), at {ctx.name}")
    if tf_axis < 0:
        tf_axis += tf_nb_dims
    if ctx.ib and tf_axis == 0:
        # The 2.17-era source has no ", at <node>" here (older and newer copies do).
        fail("TensorRT does not allow manipulation of the batch dimension")
    return tf_axis - 1 if ctx.ib else tf_axis


def check_broadcast(left: Operand, right: Operand, ib: bool, feasibility: bool = True) -> None:
    """GetTrtBroadcastShape: right-align both operands and compare static dims."""
    if not left.is_tensor and not right.is_tensor:
        fail("Broadcasting requires at least one of the operands be tensors")
    rank = max(o.nb_dims + (1 if ib and o.is_tensor else 0) for o in (left, right))
    full_l, dims_l = _broadcast_dims(left, rank, ib)
    full_r, dims_r = _broadcast_dims(right, rank, ib)
    if not feasibility:
        return
    for a, b in zip(full_l, full_r, strict=True):
        if not ib and (a == -1 or b == -1):
            continue  # dynamic dims are checked by TRT at run time
        if a != b and a != 1 and b != 1:
            fail(f"Infeasible broadcast scheme (batch_dim: {full_l[0]}, "
                 f"{dims_debug_string(dims_l)} vs batch_dim: {full_r[0]}, "
                 f"{dims_debug_string(dims_r)})")


def _broadcast_dims(operand: Operand, rank: int, ib: bool) -> tuple[list[int], tuple[int, ...]]:
    full = [1] * (rank - operand.nb_dims) + list(operand.dims)
    if ib and operand.is_tensor:
        if operand.nb_dims + 1 < rank:
            fail(f"Broadcasting beyond batch dimension is not supported (tensor #dims "
                 f"{operand.nb_dims + 1} vs broadcast #dims {rank})")
        full[0] = -1  # the batch dim is never broadcast
    return full, tuple(full[1:] if ib else full)


def expect_shape_tensor(operand: Operand) -> None:
    """ExpectShapeTensor: a shape given as a tensor must be int32 and at most 1-D."""
    if operand.dtype != "int32":
        fail("Expected a shape tensor with INT32 type")
    if operand.nb_dims > 1:
        fail("Expected a 0D or 1D shape tensor")


def is_static(dims: tuple[int, ...]) -> bool:
    return all(d >= 0 for d in dims)


def volume(dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64)) if dims else 1


def scalar_int(value: np.ndarray) -> int:
    return int(np.asarray(value).reshape(-1)[0])
