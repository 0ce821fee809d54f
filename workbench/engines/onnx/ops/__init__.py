"""ONNX converters per TF op family, one module per family of the op rules
(`workbench/conversion/ops/`); `CONVERTERS` maps a TF op type to its converter."""

from workbench.engines.onnx.context import Converter
from workbench.engines.onnx.ops import (
    binary,
    conv,
    matmul,
    misc,
    normalization,
    pooling,
    reduction,
    selection,
    shape,
    slicing,
    unary,
)
from workbench.errors import merge_registry

_FAMILIES = (binary, conv, matmul, misc, normalization, pooling, reduction, selection, shape,
             slicing, unary)
CONVERTERS: dict[str, Converter] = merge_registry(
    "ONNX converters", (f.CONVERTERS for f in _FAMILIES))
