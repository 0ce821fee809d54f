"""ONNX converters per TF op family; `CONVERTERS` maps a TF op type to its converter."""

from workbench.engines.onnx_context import Converter
from workbench.engines.onnx_ops import elementwise, nn, shapes, slicing

CONVERTERS: dict[str, Converter] = {
    **elementwise.CONVERTERS,
    **nn.CONVERTERS,
    **shapes.CONVERTERS,
    **slicing.CONVERTERS,
}
