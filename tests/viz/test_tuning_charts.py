"""Tuning charts on a hand-built trial table: traces, the Pareto set, failed trials, labels."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import pytest
from test_charts import assert_renders_offline

from workbench.conversion.params import DEFAULT_MAX_ENGINES
from workbench.viz.charts import PRECISION_COLORS
from workbench.viz.tune_charts import (
    configuration_latency_chart,
    conversion_chart,
    pareto_chart,
    trial_label,
    tune_figures,
)

NAN = math.nan


def trial(trial_id: str, precision: str, mss: int, status: str = "ok", *,
          latency: float | None = None, error: float | None = None,
          converted: float | None = None, pareto: bool = False, recommended: bool = False,
          dynamic: bool = False, reason: str | None = None, backend: str = "onnxruntime",
          device: str = "CPU") -> dict:
    """One row as `TuneResult.table` holds it (missing figures NaN, as pandas stores them)."""
    timed = latency is not None
    return {
        "trial_id": trial_id, "precision_mode": precision, "minimum_segment_size": mss,
        "use_dynamic_shape": dynamic, "dynamic_shape_profile_strategy": "Optimal" if dynamic
        else None, "denylist": "", "max_engines": DEFAULT_MAX_ENGINES, "status": status,
        "reason": reason,
        "percent_converted": NAN if converted is None else converted,
        "engines": NAN if converted is None else 2.0,
        "latency_ms": latency if timed else NAN,
        "latency_p50_ms": latency * 0.9 if timed else NAN,
        "latency_p99_ms": latency * 1.5 if timed else NAN,
        "speedup": 1.4 if timed else NAN, "max_abs_error": NAN if error is None else error,
        "top1_agreement": 1.0 if error is not None else NAN,
        "backend": backend if timed else None, "device": device if timed else None,
        "worker": "tcp://127.0.0.1:40001", "pareto": pareto, "recommended": recommended,
        "seconds": 2.5,
    }


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame([
        trial("t1", "FP32", 2, latency=4.0, error=2e-6, converted=90.0, pareto=True,
              recommended=True),
        trial("t2", "FP32", 5, latency=4.5, error=1e-6, converted=70.0, pareto=True),
        trial("t3", "FP16", 2, latency=2.5, error=3e-3, converted=90.0, pareto=True),
        trial("t4", "FP16", 5, latency=3.0, error=4e-3, converted=70.0),
        trial("t5", "INT8", 2, "failed", converted=90.0,
              reason="INT8 needs calibration data\nsecond line"),
        trial("t6", "INT8", 5, "timeout", reason="took longer than 60 s"),
    ])


def by_name(fig: go.Figure) -> dict[str, go.BaseTraceType]:
    return {trace.name: trace for trace in fig.data}


def test_pareto_chart_plots_finished_trials_by_precision(table: pd.DataFrame) -> None:
    fig = pareto_chart(table)
    traces = by_name(fig)
    assert list(traces["FP32"].x) == [4.0, 4.5] and list(traces["FP16"].y) == [3e-3, 4e-3]
    assert traces["FP32"].marker.color == PRECISION_COLORS["FP32"]
    assert traces["FP16"].marker.color == PRECISION_COLORS["FP16"]
    # Size follows % converted: 90% is bigger than 70%.
    assert traces["FP32"].marker.size[0] > traces["FP32"].marker.size[1]
    assert "INT8" not in traces  # both INT8 trials did not finish
    hover = traces["FP16"].customdata[0]
    assert "FP16 min 2" in hover and "onnxruntime on CPU" in hover and "Pareto" in hover
    assert fig.layout.yaxis.type == "log"  # errors span decades
    assert "<br><sup>onnxruntime on CPU" in fig.layout.xaxis.title.text  # a line of its own
    assert_renders_offline(fig)


def test_pareto_chart_highlights_and_joins_the_pareto_set(table: pd.DataFrame) -> None:
    traces = by_name(pareto_chart(table))
    front = traces["Pareto front (latency vs error)"]
    assert list(front.meta["trials"]) == ["t3", "t1", "t2"]  # joined in latency order
    assert list(front.x) == [2.5, 4.0, 4.5] and front.line.shape == "hv"
    widths = traces["FP16"].marker.line.width
    assert widths[0] > widths[1]  # t3 (Pareto) ringed, t4 not
    star = traces["recommended"]
    assert list(star.meta["trials"]) == ["t1"] and star.marker.symbol == "star"
    assert list(star.x) == [4.0]


def test_pareto_trials_beaten_in_the_plane_are_ringed_but_not_joined() -> None:
    # Pareto over three objectives: "wide" is slower and less exact than "lean" but converts
    # more, so it is on the set while "lean" beats it on both axes of the chart.
    table = pd.DataFrame([
        trial("lean", "FP32", 5, latency=1.0, error=1e-6, converted=40.0, pareto=True),
        trial("wide", "FP16", 2, latency=2.0, error=1e-3, converted=90.0, pareto=True),
    ])
    traces = by_name(pareto_chart(table))
    assert list(traces["Pareto front (latency vs error)"].meta["trials"]) == ["lean"]
    assert traces["FP16"].marker.line.width == (2.5,)  # still ringed as a Pareto trial


def test_failed_trials_are_listed_not_plotted(table: pd.DataFrame) -> None:
    fig = pareto_chart(table)
    left_out = fig.layout.meta["left_out"]
    assert left_out == ["INT8 min 2: failed (INT8 needs calibration data)",
                        "INT8 min 5: timeout (took longer than 60 s)"]
    assert "2 trials not plotted" in fig.layout.annotations[-1].text
    plotted = {t for trace in fig.data for t in (trace.meta or {}).get("trials", ())}
    assert not plotted & {"t5", "t6"}


def test_pareto_chart_with_a_zero_error_stays_linear() -> None:
    fig = pareto_chart(pd.DataFrame([trial("z", "FP32", 3, latency=1.0, error=0.0,
                                           converted=50.0)]))
    assert fig.layout.yaxis.type == "linear"
    assert list(by_name(fig)["FP32"].y) == [0.0]


def test_latency_chart_names_what_measured_each_bar(table: pd.DataFrame) -> None:
    table.loc[table["trial_id"] == "t4", ["backend", "device"]] = ["tftrt", "GPU:0"]
    fig = configuration_latency_chart(table)
    traces = by_name(fig)
    assert set(traces) == {"measured with onnxruntime on CPU", "measured with tftrt on GPU:0"}
    cpu = traces["measured with onnxruntime on CPU"]
    assert list(cpu.x) == ["FP16 min 2", "FP32 min 2", "FP32 min 5"]  # fastest first
    assert list(cpu.y) == [2.5, 4.0, 4.5]
    # Whiskers: down to p50 and up to p99.
    assert list(cpu.error_y.arrayminus) == pytest.approx([0.25, 0.4, 0.45])
    assert list(cpu.error_y.array) == pytest.approx([1.25, 2.0, 2.25])
    assert "tftrt on GPU:0" in traces["measured with tftrt on GPU:0"].customdata[0]
    assert list(fig.layout.xaxis.categoryarray) == [
        "FP16 min 2", "FP16 min 5", "FP32 min 2", "FP32 min 5"]
    assert len(fig.layout.meta["left_out"]) == 2
    assert_renders_offline(fig)


def test_conversion_chart_draws_one_line_per_precision(table: pd.DataFrame) -> None:
    fig = conversion_chart(table)
    traces = by_name(fig)
    assert set(traces) == {"FP32", "FP16", "INT8"}
    assert list(traces["FP32"].x) == [2, 5] and list(traces["FP32"].y) == [90.0, 70.0]
    # A failed trial that converted still shows its conversion; the timed-out one did not.
    assert list(traces["INT8"].x) == [2]
    assert fig.layout.meta["left_out"] == ["INT8 min 5: no percent_converted (timeout)"]
    assert traces["FP32"].line.width > traces["FP16"].line.width  # coinciding lines show


def test_conversion_chart_splits_lines_by_a_setting_that_varies() -> None:
    table = pd.DataFrame([
        trial("a", "FP16", 2, converted=80.0), trial("b", "FP16", 4, converted=60.0),
        trial("c", "FP16", 2, converted=85.0, dynamic=True),
    ])
    traces = by_name(conversion_chart(table))
    assert set(traces) == {"FP16", "FP16 dynamic/Optimal"}
    assert list(traces["FP16"].x) == [2, 4]
    assert traces["FP16 dynamic/Optimal"].line.dash == "dash"


def test_charts_of_a_search_with_nothing_finished_say_so() -> None:
    table = pd.DataFrame([trial("x", "FP16", 3, "failed", reason="engine build failed")])
    for name, fig in tune_figures(table).items():
        assert fig.layout.meta["left_out"], name
        assert "engine build failed" in fig.layout.annotations[-1].text or name == "conversion"
        fig.to_html(include_plotlyjs=False)


def test_trial_label_names_the_settings_that_matter() -> None:
    assert trial_label({"precision_mode": "FP16", "minimum_segment_size": 3,
                        "use_dynamic_shape": True,
                        "dynamic_shape_profile_strategy": "Range"}) == "FP16 min 3 dynamic/Range"
    assert trial_label({"precision_mode": "FP32", "minimum_segment_size": 5.0,
                        "use_dynamic_shape": False, "denylist": "Conv2D,Relu",
                        "max_engines": 2}) == "FP32 min 5 deny Conv2D,Relu max engines 2"
    # TF-TRT's default engine limit goes without saying.
    assert trial_label({"precision_mode": "INT8", "minimum_segment_size": 3,
                        "max_engines": DEFAULT_MAX_ENGINES}) == "INT8 min 3"
