"""Plotly charts: what each trace, axis and marker holds, and offline rendering."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from sweeps import engine, result, tftrt_sweep

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import Recommendation, recommend_minimum_segment_size
from workbench.conversion.session import ConversionSession
from workbench.conversion.whatif import blocking_op_types
from workbench.ui.store import ExperimentStore, Run
from workbench.viz.charts import (
    LEGEND_GAP_PX,
    blocking_ops_chart,
    engine_sizes_chart,
    latency_chart,
    runs_chart,
    sweep_chart,
)
from workbench.viz.style import category_color, engine_color


def by_name(fig: go.Figure) -> dict[str, go.BaseTraceType]:
    return {trace.name: trace for trace in fig.data}


def recommendation_traces(fig: go.Figure) -> dict[str, go.Scatter]:
    return {t.meta["recommendation"]: t for t in fig.data if t.meta}


def assert_renders_offline(fig: go.Figure) -> None:
    html = fig.to_html(include_plotlyjs=True, full_html=True)
    # plotly.js is inlined, and no script or stylesheet is fetched from anywhere.
    assert "Plotly.newPlot" in html and len(html) > 1_000_000
    assert not re.search(r"<script[^>]+src=", html)
    assert not re.search(r"<link[^>]+href=\"http", html)


# sweep


def test_sweep_chart_plots_both_series_and_marks_the_recommendations() -> None:
    sweep = tftrt_sweep([2, 5, 9], range(1, 13))
    rec = recommend_minimum_segment_size(sweep, current=3)
    fig = sweep_chart(sweep, rec)
    traces = by_name(fig)
    converted, engines = traces["nodes converted (%)"], traces["TensorRT engines"]
    assert list(converted.x) == list(range(1, 13))
    assert list(converted.y) == [r.percent_converted for r in sweep]
    assert list(engines.y) == [3, 3, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0]
    assert converted.yaxis == "y" and engines.yaxis == "y2"  # engines on the second axis
    assert fig.layout.xaxis.title.text == "minimum_segment_size (effective nodes)"
    assert fig.layout.yaxis.title.text == "nodes converted (%)"
    assert fig.layout.yaxis2.title.text == "TensorRT engines (count)"
    assert fig.layout.title.text.startswith("Conversion against minimum_segment_size")
    markers = recommendation_traces(fig)
    assert {k: set(t.x) for k, t in markers.items()} == {
        "fewest_engines": {6}, "moderate": {7}, "current": {3},
    }
    for key, trace in markers.items():
        assert trace.visible is True
        assert rec.notes[key][:40] in trace.hovertemplate.replace("<br>", " ")
    labels = sorted(a.text for a in fig.layout.annotations)
    assert labels == ["current (3)", "fewest engines (6)", "moderate (7)"]
    # The labels hang from the top, in headroom above 100% and above the most engines.
    assert all(a.yanchor == "top" and a.y == 1.0 for a in fig.layout.annotations)
    assert fig.layout.yaxis.range[1] >= 125 and max(fig.layout.yaxis.tickvals) == 100
    assert fig.layout.yaxis2.range[1] >= 3 * 1.25
    # The legend sits below the x-axis title: LEGEND_GAP_PX under the plot, whatever the height.
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert -fig.layout.legend.y * plot_px == pytest.approx(LEGEND_GAP_PX)
    assert_renders_offline(fig)


def test_sweep_chart_shares_labels_and_hides_values_beyond_the_sweep() -> None:
    sweep = tftrt_sweep([20, 30], range(1, 11))
    rec = recommend_minimum_segment_size(sweep, current=4)
    fig = sweep_chart(sweep, rec)
    markers = recommendation_traces(fig)
    assert markers["moderate"].visible == "legendonly"  # 25 is beyond thresholds 1..10
    assert "beyond the sweep" in markers["moderate"].name
    assert [a.text for a in fig.layout.annotations] == ["fewest engines = current (4)"]


def test_sweep_chart_of_an_empty_sweep_says_so() -> None:
    fig = sweep_chart([], Recommendation(3, 3, 3, {}))
    assert any("empty" in a.text for a in fig.layout.annotations)


# engine sizes


def test_engine_sizes_chart() -> None:
    engines = [engine(0, 4), engine(1, 12)]
    res = result(3, [4, 12])
    res.engines = engines
    fig = engine_sizes_chart(res)
    bars, effective = fig.data
    assert list(bars.x) == ["TRTEngineOp_000_000", "TRTEngineOp_000_001"]
    assert list(bars.y) == [4, 12] and list(effective.y) == [4, 12]
    assert list(bars.marker.color) == [engine_color(0), engine_color(1)]  # as in the graphs
    assert "Relu 4x" in bars.customdata[0]
    (threshold,) = fig.layout.shapes
    assert threshold.y0 == threshold.y1 == 3
    assert fig.layout.yaxis.title.text == "nodes per engine (count)"
    assert list(fig.layout.xaxis.ticktext) == ["000_000", "000_001"]
    empty = engine_sizes_chart(result(3, []))
    assert any("No TensorRT engines" in a.text for a in empty.layout.annotations)


# blocking op types


BLOCKING = pd.DataFrame([
    {"op": "Einsum", "rejected": 12, "converted_now": 68, "converted_if_supported": 102,
     "gained": 34, "engines_now": 7, "engines_if_supported": 9,
     "top_reason": "Convertion for op: 'Einsum' is not supported in implicit batch mode, at x"},
    {"op": "Reshape", "rejected": 8, "converted_now": 68, "converted_if_supported": 78,
     "gained": 10, "engines_now": 7, "engines_if_supported": 11,
     "top_reason": 'The input "shape" for Reshape must be a constant in implicit batch mode.'},
    {"op": "Prod", "rejected": 8, "converted_now": 68, "converted_if_supported": 68,
     "gained": 0, "engines_now": 7, "engines_if_supported": 7,
     "top_reason": "implicit batch mode requires input shape with at least two dimensions"},
])


def test_blocking_ops_chart() -> None:
    fig = blocking_ops_chart(BLOCKING)
    traces = by_name(fig)
    gained = traces["nodes that would join engines if it converted"]
    assert list(gained.y) == ["Einsum", "Reshape", "Prod"] and list(gained.x) == [34, 10, 0]
    assert list(gained.text) == ["+34", "+10", "+0"]
    # Rejected nodes are coloured by reason category, all in one bar slot.
    unsupported = traces["rejected (op not supported)"]
    assert list(unsupported.y) == ["Einsum"] and list(unsupported.x) == [12]
    assert unsupported.marker.color == category_color("op not supported")
    shape = traces["rejected (shape / batch)"]
    assert list(shape.y) == ["Reshape", "Prod"]
    assert {t.offsetgroup for t in fig.data if t.name.startswith("rejected")} == {"rejected"}
    assert "engines 7 -> 9" in gained.customdata[0]
    assert list(fig.layout.yaxis.categoryarray) == ["Prod", "Reshape", "Einsum"]  # top first
    assert fig.layout.xaxis.title.text == "nodes (count)"
    assert_renders_offline(fig)


def test_blocking_ops_chart_without_reasons_or_rows() -> None:
    fig = blocking_ops_chart(BLOCKING.drop(columns="top_reason"))
    assert "rejected (reason not given)" in by_name(fig)
    empty = blocking_ops_chart(BLOCKING.iloc[0:0])
    assert any("No op type blocks" in a.text for a in empty.layout.annotations)


@pytest.mark.slow
def test_blocking_ops_chart_of_the_detector() -> None:
    session = ConversionSession.open(sample_models.build("detector"))
    fig = blocking_ops_chart(blocking_op_types(session, ConversionParams()))
    gained = by_name(fig)["nodes that would join engines if it converted"]
    assert gained.y[0] == "CombinedNonMaxSuppression" and gained.x[0] > 0


# runs


@pytest.fixture()
def store(tmp_path: Path) -> ExperimentStore:
    """Three kept runs made from hand-made results, as the workbench keeps them."""
    runs = ExperimentStore(tmp_path / "runs")
    for threshold, sizes, precision, name in [
        (3, [5, 9], "FP32", "baseline"), (6, [9], "FP16", "fp16"), (3, [5, 9], "FP32", "baseline"),
    ]:
        params = ConversionParams(precision_mode=precision, minimum_segment_size=threshold)
        res = result(threshold, sizes)
        res.params = params
        runs.add(Run.from_result(res, params, name=name))
    return runs


def test_runs_chart_compares_runs_side_by_side(store: ExperimentStore) -> None:
    table = store.table()
    fig = runs_chart(table)
    assert [a.text for a in fig.layout.annotations] == [
        "nodes converted (%)", "TensorRT engines (count)",
    ]
    percent = [t for t in fig.data if t.meta["column"] == "percent_converted"]
    engines = [t for t in fig.data if t.meta["column"] == "engines"]
    assert {t.name for t in percent} == {"FP32", "FP16"}
    values = {x: y for t in percent for x, y in zip(t.x, t.y, strict=True)}
    assert sorted(values.values()) == [22.5, 35.0, 35.0]
    assert sorted(y for t in engines for y in t.y) == [1, 2, 2]
    # Two runs share the name "baseline": their labels carry the run ids.
    labels = list(fig.layout.xaxis.categoryarray)
    assert len(set(labels)) == 3 and sum(label.startswith("baseline [") for label in labels) == 2
    assert "fp16" in labels
    # Every row of bars names its runs (shared axes would label the bottom row only).
    assert fig.layout.xaxis.showticklabels and fig.layout.xaxis2.showticklabels
    fp16 = next(t for t in percent if t.name == "FP16")
    assert "minimum_segment_size=6" in fp16.customdata[0]
    assert fig.layout.yaxis.title.text == "%" and fig.layout.yaxis2.title.text == "count"
    assert_renders_offline(fig)


def test_runs_chart_plots_extra_numeric_columns(store: ExperimentStore) -> None:
    first, second, _ = store.runs()
    store.update(first.run_id, metrics={"latency_ms_p50": 4.2, "accuracy": 0.98, "gpu": "T4"})
    store.update(second.run_id, metrics={"accuracy": 0.97, "int8_ready": True})
    fig = runs_chart(store.table())
    titles = [a.text for a in fig.layout.annotations if a.text != "not measured"]
    # Text ("gpu") and booleans ("int8_ready") are not plotted.
    assert titles == [
        "nodes converted (%)", "TensorRT engines (count)", "latency_ms_p50 (ms)", "accuracy",
    ]
    latency = [t for t in fig.data if t.meta["column"] == "latency_ms_p50"]
    assert sorted(y for t in latency for y in t.y if y is not None) == [4.2]
    missing = [a for a in fig.layout.annotations if a.text == "not measured"]
    assert len(missing) == 3  # two runs without latency, one without accuracy
    assert fig.layout.yaxis3.title.text == "ms"


def test_runs_chart_with_few_columns_or_no_runs(tmp_path: Path) -> None:
    minimal = pd.DataFrame({"run_id": ["a", "b"], "percent_converted": [50.0, 75.0]})
    fig = runs_chart(minimal)
    assert [t.name for t in fig.data] == ["?"] and list(fig.data[0].x) == ["a", "b"]
    empty = runs_chart(ExperimentStore(tmp_path / "none").table())
    assert any("No runs yet" in a.text for a in empty.layout.annotations)


def test_latency_chart_names_backend_and_device_and_whiskers_median_to_p99() -> None:
    rows = [{"model": "native TF", "backend": "tensorflow", "device": "CPU X", "batch_size": b,
             "mean_ms": 10.0 * b, "median_ms": 9.0 * b, "p90_ms": 12.0 * b, "p95_ms": 13.0 * b,
             "p99_ms": 15.0 * b, "throughput": 100.0} for b in (1, 8)]
    rows += [{**r, "model": "converted", "backend": "converted (onnxruntime engines)",
              "mean_ms": r["mean_ms"] / 2} for r in rows]
    fig = latency_chart(pd.DataFrame(rows))
    native, converted = fig.data
    assert native.name == "native TF: tensorflow on CPU X"
    assert converted.name == "converted: converted (onnxruntime engines) on CPU X"
    assert list(native.x) == ["batch 1", "batch 8"] and list(converted.y) == [5.0, 40.0]
    assert list(native.error_y.array) == [5.0, 40.0]  # p99 - mean
    assert list(native.error_y.arrayminus) == [1.0, 8.0]  # mean - median
    assert list(converted.error_y.arrayminus) == [0.0, 0.0]  # median above mean: no whisker
