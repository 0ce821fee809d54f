"""The exporter's ONNX through TensorRT-RTX's real parser and builder: the segments TensorRT
refused before a fix now parse and build (their ONNX Runtime results against native TF are
checked in test_onnx_export.py)."""

from __future__ import annotations

import pytest
from test_onnx_export import CASES, exported, function_segment
from test_segment import engine_io_values, segments

from workbench.engines.onnx.segment_export import export_onnx
from workbench.engines.profiles import Profile

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_tiny_bert_dynamic_shape_engines_build(tensorrt_error, precision: str) -> None:
    """Its attention Einsums ("BTNH,BSNH->BNTS") were refused: "Invalid character(s) in Einsum
    equation"; TensorRT's Einsum takes lowercase subscripts only."""
    small, large = engine_io_values("tiny_bert", 1), engine_io_values("tiny_bert", 4)
    for seg, model in zip(segments("tiny_bert", "dynamic"), exported("tiny_bert", "dynamic"),
                          strict=True):
        low = tuple(small[t].shape for t in seg.engine.inputs)
        high = tuple(large[t].shape for t in seg.engine.inputs)
        error = tensorrt_error(model, precision, Profile(low, high, high))
        assert error == "", f"{seg.engine.name}: {error}"


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_detector_nms_engine_builds(tensorrt_error, precision: str) -> None:
    """CombinedNonMaxSuppression was not exported; ONNX's NonMaxSuppression then parsed, but
    TensorRT-RTX has no kernel for its NMS layer ("has no runners that implement it"): the
    exporter's greedy NMS Loop builds."""
    small, large = engine_io_values("detector", 1), engine_io_values("detector", 4)
    models = exported("detector", "dynamic")
    assert any(n.op_type == "Loop" for m in models for n in m.graph.node)
    for seg, model in zip(segments("detector", "dynamic"), models, strict=True):
        low = tuple(small[t].shape for t in seg.engine.inputs)
        high = tuple(large[t].shape for t in seg.engine.inputs)
        assert tensorrt_error(model, precision, Profile(low, high, high)) == "", seg.engine.name


# Op-family cases TensorRT refused before a fix, and the fix's mark in the ONNX model.
REFUSED_CASES = {
    # "Invalid character(s) in Einsum equation": lowercase subscripts only.
    "einsum_uppercase": ("Einsum", "equation", b"abcd,aecd->acbe"),
    # "This version of TensorRT only support round_prefer_floor nearest mode in
    # tf_half_pixel_for_nn": half-pixel nearest resizes are exported as half_pixel.
    "resizes": ("Resize", "coordinate_transformation_mode", b"half_pixel"),
}


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
@pytest.mark.parametrize("case", REFUSED_CASES)
def test_op_family_case_builds(tensorrt_error, case: str, precision: str) -> None:
    _, body, specs = CASES[case]
    model = export_onnx(function_segment(body, *specs))
    shapes = tuple(tuple(3 if d is None else d for d in s[0]) for s in specs)
    assert tensorrt_error(model, precision, Profile(shapes, shapes, shapes)) == ""
    op_type, attribute, value = REFUSED_CASES[case]
    assert value in {a.s for n in model.graph.node if n.op_type == op_type
                     for a in n.attribute if a.name == attribute}
