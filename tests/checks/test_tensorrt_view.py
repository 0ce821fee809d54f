"""TensorRT via ONNX next to TF-TRT, with the real tf2onnx and TensorRT-RTX parser and builder."""

from __future__ import annotations

import pytest

import sample_models
from workbench.checks.onnx_model import check_against_tensorflow, export_whole_model
from workbench.checks.tensorrt_view import REJECTED, TAKEN, UNSUPPORTED_SUBGRAPH, side_by_side
from workbench.conversion.session import ConversionSession
from workbench.engines.backends import tensorrt_rtx_onnx
from workbench.viz.graphs import TENSORRT_OUTLINES, side_by_side_graph, to_svg

TENSORRT, DETAIL = tensorrt_rtx_onnx.available()
needs_tensorrt = pytest.mark.skipif(not TENSORRT, reason=f"TensorRT-RTX is absent: {DETAIL}")
pytestmark = [pytest.mark.slow, needs_tensorrt]


def _session(name: str) -> ConversionSession:
    return ConversionSession.open(sample_models.build(name))


def test_resnet50_parses_whole_and_builds_a_plan() -> None:
    view = side_by_side(_session("resnet50"))
    assert view.plan_bytes and view.plan_bytes > 50_000_000  # the weights are in the plan
    assert view.tensorrt_subgraphs == 1 and not view.rejections
    table = view.table()
    assert list(table["engines"]) == [len(view.result.engines), 1] == [1, 1]
    assert table.loc[1, "% of nodes"] >= table.loc[0, "% of nodes"] > 90
    assert table.loc[1, "blocked by"].startswith("nothing: built a")


def test_tiny_bert_is_one_tensorrt_network_where_tftrt_makes_many_engines() -> None:
    view = side_by_side(_session("tiny_bert"))
    assert len(view.result.engines) > 5 and view.tensorrt_subgraphs == 1 and view.plan_bytes
    # Nodes TF-TRT leaves in TensorFlow that TensorRT takes, by their TensorFlow names.
    gained = view.nodes[(view.nodes["tftrt_engine"] == "") & (view.nodes["tensorrt"] == TAKEN)]
    assert "Einsum" in set(gained["op"])  # (and Erfc on TF 2.21, whose GELU uses it)
    assert len(gained) > 20


def test_weights_in_a_data_file_get_the_same_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model past protobuf's 2 GB goes to the parser as a file with its weights beside it."""
    from workbench.checks import onnx_model

    session = _session("digits_cnn")
    inline = side_by_side(session)
    monkeypatch.setattr(onnx_model, "EXTERNAL_WEIGHTS_BYTES", 0)
    external = side_by_side(session)
    assert inline.plan_bytes and external.plan_bytes is None  # no plan past 2 GB: trtexec's
    assert list(external.nodes["tensorrt"]) == list(inline.nodes["tensorrt"])
    assert external.tensorrt_subgraphs == inline.tensorrt_subgraphs == 1
    assert external.table().loc[1, "blocked by"] == "nothing (no plan built)"


def test_detector_rejection_is_named_and_no_plan_is_built() -> None:
    view = side_by_side(_session("detector"))
    assert view.plan_bytes is None and view.rejections
    first = view.rejections[0]
    assert first.op and first.reason and first.node
    statuses = set(view.nodes["tensorrt"])
    assert TAKEN in statuses and UNSUPPORTED_SUBGRAPH in statuses
    blocked = view.nodes[view.nodes["tensorrt"] == UNSUPPORTED_SUBGRAPH]
    assert blocked["tensorrt_reason"].str.contains(first.node).all()
    assert first.op in view.table().loc[1, "blocked by"]
    # tf2onnx's EyeLike__N has no TF name of its own: it belongs to the NMS it expands.
    assert view.rejected_at[0].endswith("CombinedNonMaxSuppression")
    nms = view.nodes.set_index("op").loc["CombinedNonMaxSuppression"]
    assert nms["tensorrt"] == REJECTED and first.reason in nms["tensorrt_reason"]
    # The graph: fill by TF-TRT engine, outline by TensorRT's verdict, with both legends.
    svg = to_svg(side_by_side_graph(_session("detector").prepared("FP32").graph, view.result,
                                    view.tensorrt_status))
    assert TENSORRT_OUTLINES[TAKEN] in svg and TENSORRT_OUTLINES[UNSUPPORTED_SUBGRAPH] in svg
    assert "TRTEngineOp_000_000" in svg and "outline: TensorRT taken" in svg


def test_build_plan_says_why_when_the_model_does_not_parse() -> None:
    session = _session("detector")
    onnx_bytes = export_whole_model(session).model.SerializeToString()
    with pytest.raises(tensorrt_rtx_onnx.TensorRTParseError, match="cannot parse the ONNX model"):
        tensorrt_rtx_onnx.build_plan(onnx_bytes, [], ["images"])


def test_a_node_the_parser_rejects_is_reported_with_its_reason() -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"),
         helper.make_node("NoSuchOp", ["h"], ["y"], name="mystery")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    capability = tensorrt_rtx_onnx.capability(model.SerializeToString())
    assert not capability.supported
    assert [(r.node, r.op) for r in capability.rejections] == [("mystery", "NoSuchOp")]


@pytest.mark.parametrize("name", ["cond", "MobileNetV2"])
def test_zoo_rows_export_match_native_and_build(name) -> None:
    from sample_models.zoo import zoo
    from workbench.checks.export_formats import build_shape_sets, engine_profiles
    from workbench.conversion.params import ConversionParams

    session = ConversionSession.open(zoo()[name].make())
    exported = export_whole_model(session)
    assert all(r.passed for r in check_against_tensorflow(session, exported))
    params = ConversionParams()
    plan = tensorrt_rtx_onnx.build_plan(
        exported.model.SerializeToString(),
        engine_profiles(params, build_shape_sets(session)), exported.input_names)
    assert len(plan) > 100_000
