"""End to end on every sample model: TF-TRT's API and the CLI, as a user runs them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli

import sample_models
from workbench import trt_convert as trt
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession

pytestmark = pytest.mark.slow
_SESSIONS: dict[str, ConversionSession] = {}


def session_for(name: str) -> ConversionSession:
    """One prepared session per sample model for the whole test run (Grappler is slow)."""
    if name not in _SESSIONS:
        _SESSIONS[name] = ConversionSession.open(sample_models.build(name))
    return _SESSIONS[name]


@pytest.mark.parametrize("name", sample_models.NAMES)
def test_every_sample_model_converts_consistently(name: str) -> None:
    session = session_for(name)
    result = session.convert(ConversionParams())
    graph = session.prepared().graph
    engine_nodes = [n for e in result.engines for n in e.nodes]
    assert len(engine_nodes) == len(set(engine_nodes)), "engines overlap"
    assert all(n in graph.by_name for n in engine_nodes)
    names = [e.name for e in result.engines]
    assert names == [f"TRTEngineOp_000_{i:03d}" for i in range(len(names))]
    # Every real node is either in an engine or explained.
    unconverted = {u.name for u in result.unconverted}
    assert unconverted.isdisjoint(engine_nodes)
    assert unconverted | set(engine_nodes) == {n.name for n in graph.real_nodes}
    # The report counts exactly the nodes the candidate test rejected, plus _SOURCE/_SINK.
    reported = sum(c for reasons in result.nonconversion.values() for c in reasons.values())
    assert reported == sum(u.in_tftrt_report for u in result.unconverted) + 2
    # _SOURCE and _SINK, plus the graph's own NoOps (loops' control anchors).
    real_noops = sum(n.op == "NoOp" for n in graph.real_nodes)
    assert result.nonconversion["NoOp"] == {"Op type NoOp is not supported.": 2 + real_noops}


def test_resnet50_implicit_batch_fp32_puts_every_convolution_in_an_engine() -> None:
    session = session_for("resnet50")
    result = session.convert(ConversionParams())
    graph = session.prepared().graph
    convolutions = {n.name for n in graph.real_nodes if n.op == "Conv2D"}
    in_engines = {n for e in result.engines for n in e.nodes}
    assert len(convolutions) == 53 and convolutions <= in_engines
    assert result.percent_converted > 95
    engine = result.engines[0]
    assert engine.input_shapes == ((-1, 224, 224, 3),)
    assert engine.output_shapes == ((-1, 1000),)


def test_detector_report_names_tftrt_reasons() -> None:
    result = session_for("detector").convert(ConversionParams())
    report = result.nonconversion
    nms = report["CombinedNonMaxSuppression"]
    assert list(nms) == [
        "Convertion for op: 'CombinedNonMaxSuppression' is not supported in implicit batch "
        "mode, at StatefulPartitionedCall/combined_non_max_suppression/CombinedNonMaxSuppression"
    ]
    assert report["ResizeBilinear"] == {
        "Cannot Convert Bilinear Resize when align_corners=False": 1}
    assert report["Cast"] == {
        "Failed to convert at least one input to a TRT_TensorOrWeights: "
        "Unsupported tensorflow data type uint8": 1}


def test_detector_in_dynamic_shape_mode_converts_nms() -> None:
    result = session_for("detector").convert(ConversionParams(use_dynamic_shape=True))
    assert "CombinedNonMaxSuppression" not in result.nonconversion
    assert result.params.dynamic_shape_profile_strategy == "Range"


def test_fp16_splits_casts_to_float() -> None:
    session = session_for("detector")
    session.convert(ConversionParams(precision_mode="FP16"))
    graph = session.prepared("FP16").graph
    split = [n for n in graph.real_nodes if n.name.endswith("_split")]
    assert split and all(n.op == "Cast" and n.attr("DstT") == "half" for n in split)
    assert all(graph[n.name[: -len("_split")]].attr("SrcT") == "half" for n in split)


def test_sweep_equals_fresh_conversions() -> None:
    session = session_for("tiny_bert")
    params = ConversionParams()
    sweep = session.sweep(params, range(1, 40))
    for threshold in (1, 2, 3, 5, 8, 13, 21, 34):
        fresh = session.convert(replace(params, minimum_segment_size=threshold))
        assert sweep[threshold - 1].engines == fresh.engines
        assert sweep[threshold - 1].total_nodes == fresh.total_nodes


def test_minimum_segment_size_minus_one_converts_nothing() -> None:
    result = session_for("quickstart_mlp").convert(ConversionParams(minimum_segment_size=-1))
    assert result.engines == [] and result.nonconversion == {}
    assert result.percent_converted == 0.0


def test_user_guide_flow_with_one_import_changed(capsys: pytest.CaptureFixture) -> None:
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("quickstart_mlp")),
        precision_mode=trt.TrtPrecisionMode.FP16,
        minimum_segment_size=3,
    )
    func = converter.convert()
    lines: list[str] = []
    converter.summary(print_fn=lines.append)
    assert lines[0].startswith("TRTEngineOP Name")
    assert any("[*] Total number of TensorRT engines: 1" in line for line in lines)
    # The converted model is called like the original and gives the model's named outputs.
    import numpy as np

    outputs = func(np.zeros([2, 8, 8], np.float32))
    assert outputs["logits"].shape == (2, 10)
    assert converter.report.to_dict()["params"]["precision_mode"] == "FP16"


def test_environment_variables_apply_at_convert(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    csv_path = tmp_path / "report.csv"
    monkeypatch.setenv("TF_TRT_OP_DENYLIST", "Relu")
    monkeypatch.setenv("TF_TRT_MAX_ALLOWED_ENGINES", "1")
    monkeypatch.setenv("TF_TRT_SHOW_DETAILED_REPORT", str(csv_path))
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build("resnet50")))
    converter.convert()
    result = converter.result
    assert result.nonconversion["Relu"] == {"Denylisted with the env var TF_TRT_OP_DENYLIST": 49}
    assert len(result.engines) == 1 and result.params.max_engines == 1
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "OP Name|Reason|Count"
    assert "Relu|Denylisted with the env var TF_TRT_OP_DENYLIST|49" in rows


def test_keras_model_object_converts_like_its_saved_model() -> None:
    converter = trt.TrtGraphConverterV2(input_model=sample_models.keras_model("digits_cnn"))
    converter.convert()
    from_keras = converter.result
    from_saved_model = session_for("digits_cnn").convert(ConversionParams())
    assert from_keras.percent_converted == from_saved_model.percent_converted
    assert [len(e.nodes) for e in from_keras.engines] == \
        [len(e.nodes) for e in from_saved_model.engines]
    # Keras 3's Flatten reshapes to a computed shape, which implicit batch mode rejects.
    assert from_keras.nonconversion["Reshape"] == {
        'The input "shape" for Reshape must be a constant in implicit batch mode.': 1}


def test_cli_json_is_one_document_matching_the_api() -> None:
    path = sample_models.build("digits_cnn")
    done = run_cli("convert", str(path), "--json", "--minimum-segment-size", "2")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    expected = ConversionReport(
        session_for("digits_cnn").convert(ConversionParams(minimum_segment_size=2))
    ).to_dict()
    assert document["engines"] == expected["engines"]
    assert document["params"] == expected["params"]
    assert document["model"] == str(path)
    assert list(document) == ["model", "signature_key", "params", "engines", "unconverted",
                              "converted_nodes", "total_nodes", "percent_converted",
                              "tensorflow_version", "prepared_for", "advice"]
    import tensorflow as tf

    assert document["tensorflow_version"] == tf.__version__
    assert document["prepared_for"] == "NVIDIA T4 (sm_75)"  # the default GPU


def test_disabling_non_trt_optimizers_shows_the_graph_before_grappler() -> None:
    """TF-TRT's `_test_only_disable_non_trt_optimizers` (trt_convert.py): with it, no Grappler
    pass but TensorRTOptimizer runs (no pruning, constant folding or dependency optimizer).
    On digits_cnn the batch norms stay unfolded (Rsqrt of variance + epsilon, fed by weights),
    and the Identity nodes freezing left stay in the graph."""
    path = sample_models.build("digits_cnn")
    graphs, results = {}, {}
    for flag in (False, True):
        converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(path))
        converter._test_only_disable_non_trt_optimizers = flag
        converter.convert()
        graphs[flag] = converter.session.prepared().graph
        results[flag] = converter.result
    ops = {flag: [n.op for n in graph.real_nodes] for flag, graph in graphs.items()}
    assert "Rsqrt" not in ops[False] and ops[True].count("Rsqrt") == 2
    assert ops[False].count("Identity") == 1 and ops[True].count("Identity") > 20
    assert len(ops[True]) > 2 * len(ops[False])
    assert results[True].percent_converted < results[False].percent_converted


def test_resnet50_graph_looks_trained() -> None:
    """With `weights=None` every bias and batch-norm shift is 0, and Grappler folded each
    BiasAdd and batch-norm add into an Identity (recipe v1: 108 Identity nodes, no BiasAdd in
    362 nodes). Seeded non-zero values keep them, as in a trained ResNet-50. Prepared for a
    GPU (the default), the layout optimizer adds the input's Transpose and its permutation
    Const to the 503 nodes of the CPU preparation."""
    ops = [n.op for n in session_for("resnet50").prepared().graph.real_nodes]
    assert ops.count("BiasAdd") == 54 and ops.count("Identity") == 1 and len(ops) == 505
    assert ops.count("Transpose") == 1
