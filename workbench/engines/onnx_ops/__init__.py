"""ONNX converters per TF op family; `CONVERTERS` maps a TF op type to its converter."""

from workbench.engines.onnx_context import Converter
from workbench.engines.onnx_ops import detection, elementwise, nn, shapes, slicing
from workbench.errors import merge_registry

CONVERTERS: dict[str, Converter] = merge_registry(
    "ONNX converters", (f.CONVERTERS for f in (detection, elementwise, nn, shapes, slicing)))
