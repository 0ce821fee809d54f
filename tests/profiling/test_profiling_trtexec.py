"""trtexec exports -> the per-layer table, against the real RTX 3090 / A100 files TREx shipped."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import fixture_path

from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.profiling import (
    LAYER_COLUMNS,
    combine,
    layer_table,
    read_trtexec,
    read_trtexec_dir,
    trtexec_summary,
)
from workbench.profiling.layers import NodeLinker, split_layer_name
from workbench.profiling.trtexec import fixtures_dir, precision_of_format

FIXTURES = ("keras-resnet50-rtx3090-fp32", "keras-resnet50-rtx3090-fp16",
            "keras-resnet50-rtx3090-qat", "torch-resnet18-a100-fp32", "torch-resnet18-a100-fp16")


def raw_profile(name: str) -> list[dict]:
    return json.loads((fixture_path(name) / "engine.profile.json").read_text())


@pytest.mark.parametrize("name", FIXTURES)
def test_each_fixture_keeps_its_layer_count_and_total_time(name):
    raw = raw_profile(name)
    table = read_trtexec_dir(fixture_path(name))
    assert raw[0].keys() == {"count"}  # a header, not a layer
    assert len(table) == len(raw) - 1
    assert table["avg_ms"].sum() == pytest.approx(sum(r["averageMs"] for r in raw[1:]))
    assert table["layer"].tolist() == [r["name"] for r in raw[1:]]
    # Our share of the total agrees with the percentage trtexec wrote.
    assert table["pct"].tolist() == pytest.approx([r["percentage"] for r in raw[1:]], abs=1e-3)
    assert list(table.columns[: len(LAYER_COLUMNS)]) == LAYER_COLUMNS
    assert set(table["source"]) == {"trtexec"}
    assert set(table["run"]) == {name}
    assert table.attrs["count"] == raw[0]["count"]


def test_device_and_precision_come_from_metadata_and_layer_info():
    fp32 = read_trtexec_dir(fixture_path("keras-resnet50-rtx3090-fp32"))
    fp16 = read_trtexec_dir(fixture_path("keras-resnet50-rtx3090-fp16"))
    qat = read_trtexec_dir(fixture_path("keras-resnet50-rtx3090-qat"))
    a100 = read_trtexec_dir(fixture_path("torch-resnet18-a100-fp32"))
    assert set(fp32["device"]) == {"NVIDIA GeForce RTX 3090"}
    assert set(a100["device"]) == {"NVIDIA A100 80GB PCIe"}
    assert set(fp32["precision"]) == {"FP32"}
    assert fp16["precision"].value_counts().to_dict() == {"FP16": 83, "FP32": 3}
    assert qat["precision"].value_counts().idxmax() == "INT8"
    conv = fp16.set_index("layer").loc["Conv__435 + resnet50/conv1_relu/Relu"]
    assert conv["layer_type"] == "CaskConvolution"
    assert conv["tactic"].startswith("trt_turing_cutlass_image_network_first_layer")
    assert fp16.attrs["build"]["build_options"]["Precision"] == "FP32+FP16"
    assert fp16.attrs["timing"]["iterations"] > 100


def test_fused_names_are_split_and_tf_names_kept():
    table = read_trtexec_dir(fixture_path("keras-resnet50-rtx3090-fp32")).set_index("layer")
    fused = "resnet50/conv2_block1_0_conv/Conv2D + resnet50/conv2_block1_add/add + " \
            "resnet50/conv2_block1_out/Relu"
    assert table.loc[fused, "tf_nodes"] == ["resnet50/conv2_block1_0_conv/Conv2D",
                                            "resnet50/conv2_block1_add/add",
                                            "resnet50/conv2_block1_out/Relu"]
    # tf2onnx's own Conv__435 names no TF node; the fused ReLU does.
    assert table.loc["Conv__435 + resnet50/conv1_relu/Relu", "tf_nodes"] == [
        "resnet50/conv1_relu/Relu"]
    # A format copy is linked to the layer it feeds; tf2onnx's "__6" transpose to its Conv2D.
    assert table.loc[f"Reformatting CopyNode for Input Tensor 0 to {fused}", "tf_nodes"] == \
        table.loc[fused, "tf_nodes"]
    assert table.loc["resnet50/conv1_conv/Conv2D__6", "tf_nodes"] == [
        "resnet50/conv1_conv/Conv2D"]


def test_torch_names_are_not_taken_for_tf_nodes():
    table = read_trtexec_dir(fixture_path("torch-resnet18-a100-fp16"))
    assert table["tf_nodes"].map(len).sum() == 0
    assert split_layer_name("Conv_5 + Add_6 + Relu_7") == ["Conv_5", "Add_6", "Relu_7"]


def test_split_layer_name_unwraps_pointwise_and_myelin_names():
    assert split_layer_name("PWN(PWN(a/mul + a/add), a/relu)") == ["a/mul", "a/add", "a/relu"]
    assert split_layer_name("{ForeignNode[m/first...m/last]}") == ["m/first", "m/last"]
    assert split_layer_name("(Unnamed Layer* 478) [Shuffle] + x/y") == [
        "(Unnamed Layer* 478) [Shuffle]", "x/y"]


def keras3_graph() -> Graph:
    names = [("StatefulPartitionedCall/resnet50_1/conv1_conv_1/convolution", "Conv2D"),
             ("StatefulPartitionedCall/resnet50_1/conv1_conv_1/BiasAdd", "BiasAdd"),
             ("StatefulPartitionedCall/resnet50_1/conv1_relu_1/Relu", "Relu"),
             ("StatefulPartitionedCall/resnet50_1/pool1_pool_1/MaxPool2d", "MaxPool"),
             ("StatefulPartitionedCall/resnet50_1/conv2_block1_add_1/Add", "AddV2")]
    nodes, previous = [], None
    for name, op in names:
        nodes.append(Node(0, name, op, inputs=[TensorRef(previous)] if previous else []))
        previous = name
    return Graph(nodes)


def test_graph_linking_tolerates_call_scope_keras_suffixes_and_op_names():
    linker = NodeLinker((n.name, n.op) for n in keras3_graph().real_nodes)
    prefix = "StatefulPartitionedCall/resnet50_1/"
    assert linker.tf_nodes("resnet50/conv1_conv/Conv2D__6 + resnet50/conv1_relu/Relu") == [
        prefix + "conv1_conv_1/convolution", prefix + "conv1_relu_1/Relu"]
    assert linker.tf_nodes("resnet50/pool1_pool/MaxPool") == [prefix + "pool1_pool_1/MaxPool2d"]
    assert linker.tf_nodes("resnet50/conv2_block1_add/add") == [prefix + "conv2_block1_add_1/Add"]
    assert linker.tf_nodes("resnet50/unknown_layer/Conv2D") == []


def test_read_with_graph_keeps_only_graph_names():
    folder = fixture_path("keras-resnet50-rtx3090-fp32")
    table = read_trtexec(folder / "engine.profile.json", graph=keras3_graph()).set_index("layer")
    assert table.loc["Conv__435 + resnet50/conv1_relu/Relu", "tf_nodes"] == [
        "StatefulPartitionedCall/resnet50_1/conv1_relu_1/Relu"]
    assert table.loc["resnet50/conv2_block1_1_conv/Conv2D + resnet50/conv2_block1_1_relu/Relu",
                     "tf_nodes"] == []


def test_profile_without_layer_info_works_with_fewer_columns():
    folder = fixture_path("keras-resnet50-rtx3090-fp16")
    table = read_trtexec(folder / "engine.profile.json")
    assert len(table) == 86
    assert table["layer_type"].isna().all() and table["precision"].isna().all()
    assert "tactic" not in table.columns
    assert set(table["run"]) == {"engine"}
    assert table["device"].iloc[0].startswith("unknown GPU")


def test_trtexec_summary_reads_throughput_and_latency():
    folder = fixture_path("keras-resnet50-rtx3090-fp16")
    summary = trtexec_summary(folder / "engine.profile.metadata.json")
    assert summary["throughput_qps"] == pytest.approx(248.211)
    assert summary["latency_ms"]["mean"] == pytest.approx(4.02732)
    assert summary["latency_ms"]["p99"] == pytest.approx(4.08063)
    assert summary["device"] == "NVIDIA GeForce RTX 3090"
    # Per-layer profiling adds overhead per layer: the sum exceeds end-to-end latency.
    layers = read_trtexec_dir(folder)
    assert layers["avg_ms"].sum() > summary["latency_ms"]["mean"]


def test_summary_accepts_three_percentiles_and_rejects_other_shapes():
    data = {"performance_summary": {"Throughput": 10, "Latency": [1, 5, 2, 2, 3, 4, 5]}}
    assert trtexec_summary(data)["latency_ms"] == {"min": 1, "max": 5, "mean": 2, "median": 2,
                                                   "p90": 3, "p95": 4, "p99": 5}
    data["performance_summary"]["Latency"] = [1, 2]
    with pytest.raises(WorkbenchError, match="5 or 7 statistics"):
        trtexec_summary(data)
    with pytest.raises(WorkbenchError, match="performance_summary"):
        trtexec_summary({"device_information": {}})


def test_precision_of_format_strings():
    assert precision_of_format("Row major linear FP32") == "FP32"
    assert precision_of_format("Channel major FP16 format where channel % 8 == 0") == "FP16"
    assert precision_of_format("Thirty-two wide channel vectorized row major Int8 format") == \
        "INT8"
    assert precision_of_format("Row major linear") is None


# --- Malformed files -----------------------------------------------------------------------

def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_truncated_profile_names_the_file(tmp_path):
    text = (fixture_path("keras-resnet50-rtx3090-fp16") / "engine.profile.json").read_text()
    path = write(tmp_path, "cut.profile.json", text[: len(text) // 2])
    with pytest.raises(WorkbenchError, match=r"cut\.profile\.json: truncated JSON") as error:
        read_trtexec(path)
    assert "\n" not in str(error.value)


def test_profile_that_is_not_an_array(tmp_path):
    path = write(tmp_path, "obj.profile.json", '{"Layers": []}')
    with pytest.raises(WorkbenchError, match="obj.profile.json: expected a JSON array"):
        read_trtexec(path)


@pytest.mark.parametrize("field", ["name", "averageMs"])
def test_profile_record_missing_a_field(tmp_path, field):
    record = {"name": "conv", "timeMs": 1.0, "averageMs": 1.0, "medianMs": 1.0, "percentage": 100}
    del record[field]
    path = write(tmp_path, "bad.profile.json", json.dumps([{"count": 1}, record]))
    with pytest.raises(WorkbenchError, match=f"bad.profile.json: record 1 has no '{field}'"):
        read_trtexec(path)


def test_profile_with_a_non_numeric_time(tmp_path):
    path = write(tmp_path, "nan.profile.json",
                 json.dumps([{"count": 1}, {"name": "conv", "averageMs": "fast"}]))
    with pytest.raises(WorkbenchError, match="'conv': avg_ms 'fast' is not a number"):
        read_trtexec(path)


def test_missing_file(tmp_path):
    with pytest.raises(WorkbenchError, match="cannot read the profile file"):
        read_trtexec(tmp_path / "nope.profile.json")


def test_layer_info_of_another_engine_warns_and_keeps_what_matches(tmp_path):
    folder = fixture_path("torch-resnet18-a100-fp32")
    info = json.loads((folder / "engine.graph.json").read_text())
    info["Layers"] = info["Layers"][:10]  # as if from a different build
    path = write(tmp_path, "other.graph.json", json.dumps(info))
    with pytest.warns(UserWarning, match="22 of 32 layers .* have no layer info"):
        table = read_trtexec(folder / "engine.profile.json", layer_info=path)
    assert len(table) == 32
    assert table["layer_type"].notna().sum() == 10


def test_layer_info_that_is_not_layer_info(tmp_path):
    folder = fixture_path("torch-resnet18-a100-fp32")
    path = write(tmp_path, "x.graph.json", "[]")
    with pytest.raises(WorkbenchError, match="x.graph.json: expected an object with a 'Layers'"):
        read_trtexec(folder / "engine.profile.json", layer_info=path)


def test_layer_names_only_info_has_no_types():
    folder = fixture_path("torch-resnet18-a100-fp32")
    names = [r["name"] for r in raw_profile("torch-resnet18-a100-fp32")[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = read_trtexec(folder / "engine.profile.json", layer_info={"Layers": names})
    assert table["layer_type"].isna().all()


def test_directory_errors(tmp_path):
    with pytest.raises(WorkbenchError, match="not a directory"):
        read_trtexec_dir(tmp_path / "missing")
    with pytest.raises(WorkbenchError, match="expected one \\*.profile.json, found none"):
        read_trtexec_dir(tmp_path)


# --- The shared table ----------------------------------------------------------------------

def test_layer_table_validates_and_combine_recomputes_shares():
    a = layer_table([{"layer": "x", "avg_ms": 1}, {"layer": "y", "avg_ms": 3}], "a", "tensorflow",
                    "CPU")
    b = layer_table([{"layer": "x", "avg_ms": 2, "precision": "float16"}], "b", "onnxruntime",
                    "CPU")
    both = combine([a, b])
    assert both.groupby("run")["pct"].sum().to_dict() == {"a": 100.0, "b": 100.0}
    assert both["precision"].tolist() == [None, None, "FP16"]
    assert both["median_ms"].tolist() == [1.0, 3.0, 2.0]
    with pytest.raises(WorkbenchError, match="unknown profiling source"):
        layer_table([], "a", "nsight", "GPU")
    with pytest.raises(WorkbenchError, match="device label"):
        layer_table([], "a", "trtexec", "")
    with pytest.raises(WorkbenchError, match="not a time >= 0"):
        layer_table([{"layer": "x", "avg_ms": -1}], "a", "trtexec", "GPU")


def test_layer_table_accepts_missing_tf_nodes_from_pandas():
    table = layer_table([{"layer": "x", "avg_ms": 1.0, "tf_nodes": float("nan")}], "a",
                        "onnxruntime", "CPU")
    assert table["tf_nodes"].tolist() == [[]]


def test_fixtures_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKBENCH_TRTEXEC_FIXTURES", raising=False)
    shipped = Path(__file__).resolve().parents[2] / "sample_models" / "trtexec"
    assert fixtures_dir() == shipped and (shipped / "LICENSE-Apache-2.0.txt").is_file()
    monkeypatch.setenv("WORKBENCH_TRTEXEC_FIXTURES", str(tmp_path))
    assert fixtures_dir() == tmp_path
    monkeypatch.setenv("WORKBENCH_TRTEXEC_FIXTURES", str(tmp_path / "absent"))
    assert fixtures_dir() is None
