"""`--target-gpu` beyond convert: check, tune, report and their Python API, on a real sample
(map_fn_cnn: four engines at minimum_segment_size 1, one at 4) through the one estimate path
(`profiling.estimate.conversion`)."""

from __future__ import annotations

import pytest

from workbench.conversion.params import ConversionParams
from workbench.errors import WorkbenchError
from workbench.tuning import TrialRecord, TuneResult, expand_grid, tune
from workbench.tuning.estimates import estimate_trials, with_estimates


@pytest.fixture(scope="module")
def map_fn_session():
    import sample_models
    from workbench.conversion.session import ConversionSession

    return ConversionSession.open(sample_models.build("map_fn_cnn"))


def measured_trial(precision: str, threshold: int, cpu_ms: float, engines: int,
                   error: float = 1e-6) -> TrialRecord:
    """A finished trial as a CPU search records it (the CPU figures are the ones to keep)."""
    params = expand_grid({"precision_mode": [precision],
                          "minimum_segment_size": [threshold]})[0].params
    return TrialRecord(f"{precision}-{threshold}", params, "ok", percent_converted=20.0,
                       engines=engines, latency_ms={1: {"mean": cpu_ms, "p50": cpu_ms,
                                                        "p99": cpu_ms}},
                       speedup=1.0, max_abs_error=error, top1_agreement=1.0,
                       backend="onnxruntime", device="CPU")


def test_the_sweep_is_estimated_once_per_set_of_engines(map_fn_session):
    from workbench.profiling.estimate.conversion import sweep_advice, sweep_estimate
    from workbench.viz.estimate_charts import sweep_estimate_chart

    params = ConversionParams()
    table = sweep_estimate(map_fn_session, params, map_fn_session.sweep(params, range(1, 7)),
                           "T4")
    assert list(table["minimum_segment_size"]) == [1, 2, 3, 4, 5, 6]
    assert list(table["engines"]) == [4, 3, 2, 1, 1, 1]
    # Every engine costs its launch: here the four small ones are estimated slower than one.
    assert table["converted_ms"].iloc[0] > table["converted_ms"].iloc[3]
    assert table["converted_ms"].iloc[3] == table["converted_ms"].iloc[5]
    assert table["native_ms"].nunique() == 1 and table.attrs["gpu"] == "Tesla T4"
    faster = 100 * (1 - table["converted_ms"].iloc[3] / table["converted_ms"].iloc[0])
    # One figure per configuration: the current setting's time is the estimate line's alone,
    # so the comparison (every threshold from the TF nodes) is a ratio and says its basis.
    assert sweep_advice(table, 1) == (
        f"Tesla T4 (estimated): minimum_segment_size=4 makes 1 engine, estimated "
        f"{faster:.0f}% faster than the current 1 (4 engines), comparing every threshold from "
        "its TF nodes' shapes: more, smaller engines are estimated slower than fewer")
    assert table.attrs["basis"] == "tf_nodes"
    assert (table["converted_low_ms"] < table["converted_ms"]).all()
    assert (table["converted_high_ms"] > table["converted_ms"]).all()
    assert sweep_advice(table, 4) == ""  # already the fastest
    figure = sweep_estimate_chart(table)
    assert "Estimated latency on Tesla T4" in figure.layout.title.text
    assert figure.layout.meta["estimate_label"].startswith("estimated for Tesla T4; ")
    assert "median" in figure.layout.meta["estimate_label"]


def test_tune_ranks_by_the_estimate_and_keeps_the_cpu_measurements(map_fn_session):
    # On this CPU the four-engine trial timed fastest; on a T4 its engines' launches cost more.
    trials = [measured_trial("FP32", 1, 1.0, 4), measured_trial("FP32", 4, 1.5, 1)]
    measured = TuneResult(trials)
    assert measured.recommended["trial_id"] == "FP32-1"
    estimated = TuneResult(trials, estimates=estimate_trials(map_fn_session, trials, "T4"))
    assert estimated.recommended["trial_id"] == "FP32-4"
    reason = estimated.recommended["reason"]
    assert reason.startswith("the fastest trial estimated for Tesla T4 whose outputs stay")
    assert "measured here: 1.50 ms at batch 1" in reason  # the CPU figure, as it was
    assert "FP32 min 1's 4 engines are estimated slower" in reason
    assert "out of sample" in reason
    table = estimated.table
    assert list(table["latency_ms"]) == [1.0, 1.5]
    assert table["estimated_ms"].iloc[1] < table["estimated_ms"].iloc[0]
    document = estimated.to_json()
    assert document["estimate"]["gpu"] == "Tesla T4"
    assert document["trials"][0]["estimate"]["engines_ms"] > 0
    figures = estimated.figures()
    assert "estimated for Tesla T4" in figures["pareto"].layout.xaxis.title.text
    assert "Estimated latency on Tesla T4" in figures["estimated latency"].layout.title.text
    assert "measured with onnxruntime" in figures["latency"].data[0].name  # kept apart
    from workbench.viz.tune_charts import readable_table

    assert "estimated ms on Tesla T4" in readable_table(table).columns
    # Without a GPU the same trials rank by what was measured again.
    assert with_estimates(estimated, map_fn_session, None).recommended["trial_id"] == "FP32-1"


def test_an_unknown_target_gpu_is_refused_before_any_work(tmp_path):
    with pytest.raises(WorkbenchError, match="Unknown GPU 'GTX 480': give one of T4, A10"):
        tune(tmp_path / "missing", target_gpu="GTX 480", store=tmp_path)


def test_check_adds_the_estimate_per_batch_size_apart_from_the_measurements(map_fn_session):
    from workbench.checks.conversion_check import check_conversion

    check = check_conversion(map_fn_session, ConversionParams(), batch_sizes=(1, 4),
                             compare=False, time_latency=False, target_gpu="A10")
    assert [e["batch_size"] for e in check.estimates] == [1, 4]
    assert all(e["gpu"] == "NVIDIA A10" for e in check.estimates)
    assert not any("estimate" in key for key in check.metrics())
    summary = check.summary()
    assert "NVIDIA A10 (estimated), batch 4: native TF" in summary
    assert "(estimated for NVIDIA A10; out of sample" in summary


def test_report_has_the_estimate_section(map_fn_session):
    from workbench.viz.html_report import html_report

    page = html_report(map_fn_session, ConversionParams(), target_gpu="T4", batch_sizes=(1, 8))
    assert "<h2>GPU latency estimated for Tesla T4</h2>" in page
    assert "chart-estimate-sweep" in page and "out of sample" in page
    assert "Estimated, not measured" in page
    graph = page[page.index('id="graph-converted"'):]  # its engines carry their estimated time
    assert "ms on Tesla T4 (estimated)" in graph[:graph.index("</svg>")]


def test_the_converter_estimates_what_it_converted():
    import sample_models
    from workbench.trt_convert import TrtGraphConverterV2

    converter = TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build("map_fn_cnn")),
                                    minimum_segment_size=4)
    with pytest.raises(RuntimeError, match="convert"):
        converter.estimate("T4")
    converter.convert()
    estimate = converter.estimate("L4", batch_size=2)
    assert estimate["gpu"] == "NVIDIA L4" and estimate["batch_size"] == 2
    assert list(estimate["engines"]) == [e.name for e in converter.result.engines]
    assert estimate["label"].startswith("estimated for NVIDIA L4")


def test_tune_measured_ms_calibrates_every_trial_on_the_first(map_fn_session):
    import argparse

    from workbench.cli.tune import _calibrated as _calibrated_tuning

    trials = [measured_trial("FP32", 1, 1.0, 4), measured_trial("FP32", 4, 1.5, 1)]
    raw = TuneResult(trials, estimates=estimate_trials(map_fn_session, trials, "T4"))
    first = raw.estimates["FP32-1"]["converted_ms"]
    args = argparse.Namespace(calibrate=None, measured_ms=2 * first)
    calibrated = _calibrated_tuning(raw, args)
    table = calibrated.table
    assert list(table["estimated_ms"]) == pytest.approx(list(2 * raw.table["estimated_ms"]))
    assert (table["estimated_low_ms"] < table["estimated_ms"]).all()
    assert "calibrated on trial FP32-1" in calibrated.target["label"]
    assert calibrated.recommended["trial_id"] == raw.recommended["trial_id"]  # same ranking
