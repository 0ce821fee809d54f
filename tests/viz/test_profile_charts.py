"""Profile charts: what each trace holds, labels naming source and device, runs aligned."""

from __future__ import annotations

import re

import pytest
from conftest import fixture_path

from workbench.errors import WorkbenchError
from workbench.profiling import combine, layer_table, read_trtexec_dir
from workbench.profiling.layers import align_runs, layer_scopes, shared_node_groups
from workbench.viz.charts import PRECISION_COLORS
from workbench.viz.profile_charts import (
    compare_runs_chart,
    latency_sunburst,
    layer_latency_chart,
    layer_type_chart,
    native_vs_engine_chart,
    precision_chart,
    precision_per_layer_chart,
    profile_figures,
)

RTX = "NVIDIA GeForce RTX 3090"


@pytest.fixture(scope="module")
def trio():
    folder = "keras-resnet50-rtx3090-{}"
    return combine([read_trtexec_dir(fixture_path(folder.format(p)), run=run)
                    for p, run in (("fp32", "FP32"), ("fp16", "FP16"), ("qat", "INT8"))])


def by_name(fig):
    return {trace.name: trace for trace in fig.data}


def test_layer_latency_chart_holds_every_layer_once_coloured_by_type(trio):
    fig = layer_latency_chart(trio, "FP16")
    assert sum(len(t.y) for t in fig.data) == 86
    assert sum(sum(t.y) for t in fig.data) == pytest.approx(4.272736)
    conv = by_name(fig)["CaskConvolution"]
    assert len(conv.y) == 54
    assert f"FP16 (trtexec on {RTX})" in fig.layout.title.text
    # Execution order on x: the first conv is layer 3, after the transpose and the copy.
    assert conv.x[0] == 3


def test_one_run_must_be_named_when_the_table_has_several(trio):
    with pytest.raises(WorkbenchError, match="holds 3 runs"):
        layer_latency_chart(trio)
    with pytest.raises(WorkbenchError, match="no run 'BF16'"):
        latency_sunburst(trio, "BF16")


def test_layer_type_chart_stacks_each_runs_total(trio):
    fig = layer_type_chart(trio)
    totals = [sum(t.y[i] for t in fig.data) for i in range(3)]
    assert totals == pytest.approx([12.399744, 4.272736, 2.380608])
    assert list(fig.data[0].x) == ["<b>FP32</b>", "<b>FP16</b>", "<b>INT8</b>"]
    assert f"FP32, FP16, INT8: trtexec on {RTX}" in fig.layout.title.text  # what measured them
    # One colour per type, the same in the per-layer chart.
    per_layer = by_name(layer_latency_chart(trio, "FP32"))
    assert by_name(fig)["Reformat"].marker.color == per_layer["Reformat"].marker.color


def test_precision_chart_counts_layers_per_precision(trio):
    traces = [t for t in precision_chart(trio).data if t.xaxis == "x"]
    counts = {t.name: list(t.y) for t in traces}
    assert counts["FP32"] == [103, 3, 5]
    assert counts["FP16"] == [0, 83, 0]
    assert counts["INT8"] == [0, 0, 58]
    assert by_name(precision_chart(trio))["INT8"].marker.color == PRECISION_COLORS["INT8"]


def test_precision_per_layer_chart(trio):
    fig = precision_per_layer_chart(trio, "INT8")
    assert {t.name: len(t.y) for t in fig.data} == {"FP32": 5, "INT8": 58}


def test_sunburst_sums_engine_type_layer(trio):
    trace = latency_sunburst(trio, "FP32").data[0]
    values = dict(zip(trace.ids, trace.values, strict=True))
    assert values["e:engine"] == pytest.approx(12.399744)
    types = [v for k, v in values.items() if k.startswith("t:")]
    assert sum(types) == pytest.approx(12.399744)
    assert sum(1 for k in values if k.startswith("l:")) == 103


def test_runs_align_by_name_and_by_tf_scopes(trio):
    aligned = align_runs(trio).set_index("layer")
    name = "resnet50/conv2_block1_1_conv/Conv2D + resnet50/conv2_block1_1_relu/Relu"
    row = aligned.loc[name]
    assert row["FP32"] == pytest.approx(0.07504) and row["FP16"] == pytest.approx(0.03584)
    # The INT8 build names it after its quantized weights; the TF scopes still match.
    assert row["INT8:layer"].startswith("resnet50/quant_conv2_block1_1_conv/LastValueQuant")
    assert row["INT8"] == pytest.approx(0.0208)
    # Every layer of every run lands in exactly one row.
    assert aligned[["FP32", "FP16", "INT8"]].notna().sum().tolist() == [103, 86, 63]


def test_layer_scopes_drop_quantizer_names():
    assert layer_scopes(["resnet50/quant_conv1_conv/LastValueQuant/QuantizeAndDequantizeV4/"
                         "ReadVariableOp", "StatefulPartitionedCall/resnet50_1/conv1_relu_1/Relu"]
                        ) == {"resnet50/conv1_conv", "resnet50/conv1_relu"}


def test_compare_runs_chart_leaves_out_layers_without_time(trio):
    fig = compare_runs_chart(trio)
    assert [t.name.split(" ")[0] for t in fig.data] == ["FP32", "FP16", "INT8"]
    assert all(RTX in t.name for t in fig.data)
    assert sum(v for v in fig.data[0].y if v == v) == pytest.approx(12.399744)
    rows = len(fig.data[0].y)
    assert rows < len(align_runs(trio))  # zero-time copies dropped
    assert "12.40 ms" in fig.layout.title.text and "2.38 ms" in fig.layout.title.text
    assert fig.layout.legend.y < 0 and fig.layout.legend.yanchor == "top"  # clear of the title


def native_run():
    # A TensorFlow-profiler-like run: one row per TF op, Keras 3 names.
    prefix = "StatefulPartitionedCall/resnet50_1/"
    return layer_table([
        {"layer": prefix + "conv2_block1_1_conv_1/convolution", "avg_ms": 1.5,
         "tf_nodes": [prefix + "conv2_block1_1_conv_1/Conv2D"]},
        {"layer": prefix + "conv2_block1_1_relu_1/Relu", "avg_ms": 0.5,
         "tf_nodes": [prefix + "conv2_block1_1_relu_1/Relu"]},
        {"layer": prefix + "pool1_pool_1/MaxPool2d", "avg_ms": 0.7,
         "tf_nodes": [prefix + "pool1_pool_1/MaxPool"]},
        {"layer": "not in the engine", "avg_ms": 9.0, "tf_nodes": ["elsewhere/op"]},
    ], "TF", "tensorflow", "CPU (x86_64)")


def test_same_tf_nodes_in_two_runs_sum_the_native_ops_of_a_fused_layer(trio):
    both = combine([native_run(), trio])
    groups = shared_node_groups(both, "TF", "FP32").set_index("label")
    fused = groups.loc["resnet50/conv2_block1_1_conv/Conv2D + resnet50/conv2_block1_1_relu/Relu"]
    assert fused["first_ms"] == pytest.approx(2.0)  # Conv2D + Relu natively
    assert fused["second_ms"] == pytest.approx(0.07504)
    assert groups.loc["resnet50/pool1_pool/MaxPool", "first_ms"] == pytest.approx(0.7)
    assert len(groups) == 2  # the op outside the engine has no partner
    fig = native_vs_engine_chart(both, "TF", "FP32")
    assert [t.name for t in fig.data] == ["TF (tensorflow on CPU (x86_64))",
                                          f"FP32 (trtexec on {RTX})"]
    assert list(fig.data[0].x) == pytest.approx([2.0, 0.7])
    assert fig.layout.legend.y < 0 and fig.layout.legend.yanchor == "top"  # clear of the title


def test_native_vs_engine_without_shared_nodes_says_so():
    a = layer_table([{"layer": "x", "avg_ms": 1, "tf_nodes": ["m/a/Relu"]}], "A", "tensorflow",
                    "CPU")
    b = layer_table([{"layer": "y", "avg_ms": 1, "tf_nodes": ["m/b/Relu"]}], "B", "onnxruntime",
                    "CPU")
    fig = native_vs_engine_chart(combine([a, b]), "A", "B")
    assert [a.text for a in fig.layout.annotations] == ["no TF node is timed in both runs"]
    assert all(len(t.x) == 0 for t in fig.data)


def test_figures_render_offline(trio):
    figures = profile_figures(trio, "FP16")
    assert set(figures) == {"latency per layer", "latency per layer type", "precision",
                            "precision per layer", "sunburst", "runs compared"}
    html = figures["sunburst"].to_html(include_plotlyjs=True, full_html=True)
    assert "Plotly.newPlot" in html and not re.search(r"<script[^>]+src=", html)


def test_layer_type_colours_are_distinct_and_small_types_grouped(trio):
    fig = layer_type_chart(trio)
    names = [t.name for t in fig.data]
    colors = [t.marker.color for t in fig.data]
    assert len(names) <= 10 and len(set(colors)) == len(colors)  # no scrolling legend
    types = trio["layer_type"].fillna("(no layer info)").nunique()
    assert ("other layer types" in names) == (types > 10)
    latency = layer_latency_chart(trio, "FP32")
    assert {t.name for t in latency.data} <= set(names)  # one colour per type in both


def test_precision_chart_ticks_name_runs_and_the_subtitle_what_measured_them(trio):
    fig = precision_chart(trio)
    ticks = {x for trace in fig.data for x in trace.x}
    assert ticks == {"<b>FP32</b>", "<b>FP16</b>", "<b>INT8</b>"}  # one line each: no overprint
    assert f"FP32, FP16, INT8: trtexec on {RTX}" in fig.layout.title.text
