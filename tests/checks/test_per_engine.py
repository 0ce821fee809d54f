"""Per-engine accuracy: which engine costs accuracy, and what each remedy measurably does."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

import sample_models
from workbench.checks.conversion_check import check_conversion
from workbench.checks.per_engine import KEEP_NATIVE, per_engine_accuracy
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession


def save_overflow_model(path: Path) -> Path:
    """Three engines split by Cumsum (not convertible); the middle one squares values of a few
    thousand (past float16's 65504) and takes the root again, so only its inside overflows."""
    import tensorflow as tf

    class Overflow(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.w1 = tf.Variable(rng.normal(size=(16, 32)).astype("float32"))
            self.w2 = tf.Variable((rng.normal(size=(32, 32)) * 100).astype("float32"))
            self.w3 = tf.Variable(rng.normal(size=(32, 10)).astype("float32"))

        @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32, name="x")])
        def serve(self, x):
            h = tf.math.cumsum(tf.nn.relu(tf.matmul(x, self.w1) + 0.1), axis=-1)
            g = tf.matmul(h, self.w2)
            rms = tf.sqrt(tf.reduce_mean(tf.square(g), axis=-1, keepdims=True))
            g = tf.math.cumsum(g * 0.001 + rms * 0.001, axis=-1)
            return {"y": tf.matmul(g, self.w3) + 0.5}

    module = Overflow()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.fixture(scope="module")
def overflow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_overflow_model(tmp_path_factory.mktemp("overflow") / "overflow")


@pytest.fixture(scope="module")
def overflow(overflow_model: Path) -> ConversionSession:
    return ConversionSession.open(overflow_model)


def squaring_engine(session: ConversionSession, params: ConversionParams) -> str:
    engines = session.convert(params).engines
    return next(e.name for e in engines if "Square" in e.native_ops)


def test_fp16_overflow_inside_an_engine_fails_the_check(overflow: ConversionSession) -> None:
    """ONNX Runtime's CPU provider computes float16 ops in float32; the engine still stores
    float16, so the squares overflow to inf as in TensorRT and the outputs are not finite."""
    fp32 = check_conversion(overflow, ConversionParams(), time_latency=False)
    assert fp32.validation.passed
    fp16 = check_conversion(overflow, ConversionParams(precision_mode="FP16"),
                            time_latency=False)
    (output,) = fp16.validation.outputs
    assert not output.passed and output.nan + output.inf > 0
    assert "NaN" in output.reason


def test_the_ranking_names_the_overflowing_engine(overflow: ConversionSession) -> None:
    params = ConversionParams(precision_mode="FP16")
    report = per_engine_accuracy(overflow, params, remedies_for=1)
    worst, *others = report.engines
    assert worst.engine == squaring_engine(overflow, params)
    assert math.isinf(worst.local_max_abs_error) and worst.inf > 0
    assert not worst.output_passed and not math.isfinite(worst.output_max_abs_error)
    assert all(o.output_max_abs_error < 10 for o in others)  # finite, not overflowing
    remedies = {r.setting: r for r in worst.remedies}
    assert remedies["precision_mode"].value == "FP32" and remedies["precision_mode"].passed
    assert remedies["denylist"].value == ["Square"]  # makes the largest values
    native = remedies[KEEP_NATIVE]
    assert not native.tftrt_setting and native.engines == len(report.engines) - 1
    assert math.isfinite(native.output_max_abs_error)  # the overflow is gone without it
    assert not others[0].remedies  # remedies only for the worst one asked for
    table = report.table()
    assert list(table["engine"]) == [e.engine for e in report.engines]


def test_int8_ranks_engines_and_measures_each_remedy() -> None:
    session = ConversionSession.open(sample_models.build("digits_cnn"))
    params = ConversionParams(precision_mode="INT8")
    # FP32's tolerances: at INT8's own (mean error 0.1) both engines pass and need no remedy.
    report = per_engine_accuracy(session, params, remedies_for=1, atol=1e-5, rtol=1e-5)
    errors = [e.output_max_abs_error for e in report.engines]
    assert len(errors) == 2 and errors == sorted(errors, reverse=True) and errors[0] > 1e-3
    assert all(e.local_max_abs_error > 0 for e in report.engines)  # quantized
    worst = report.engines[0]
    settings = {r.setting for r in worst.remedies}
    assert {"precision_mode", "denylist", "minimum_segment_size", KEEP_NATIVE} <= settings
    # Measured, not guessed: each remedy is what checking its settings gives.
    for remedy in worst.remedies:
        if not remedy.tftrt_setting:
            continue
        value = tuple(remedy.value) if isinstance(remedy.value, list) else remedy.value
        check = check_conversion(session, replace(params, **{remedy.setting: value}),
                                 batch_sizes=(8,), time_latency=False)  # the report's batches
        assert check.engines == remedy.engines
        assert max(o.max_abs for o in check.validation.outputs) == pytest.approx(
            remedy.output_max_abs_error, rel=1e-6, abs=1e-9)
    fp16 = next(r for r in worst.remedies if r.setting == "precision_mode")
    assert fp16.value == "FP16" and fp16.output_max_abs_error < worst.output_max_abs_error


def test_cli_check_per_engine_json(overflow_model: Path, tmp_path: Path) -> None:
    done = run_cli("check", str(overflow_model), "--precision", "FP16", "--iterations", "2",
                   "--per-engine", "--json")
    assert done.returncode == 3, done.stderr  # the overflow fails the check
    rows = json.loads(done.stdout)["per_engine"]
    assert [set(r) >= {"engine", "nodes", "local_max_abs_error", "output_max_abs_error",
                       "remedies"} for r in rows] == [True] * 3
    assert "Square" in rows[0]["ops"] and rows[0]["remedies"]
    finite = [r["output_max_abs_error"] for r in rows[1:]]
    assert finite == sorted(finite, reverse=True)
    page = tmp_path / "report.html"
    done = run_cli("report", str(overflow_model), "--precision", "FP16", "--per-engine",
                   "-o", str(page))
    assert done.returncode == 0, done.stderr
    assert 'id="chart-per-engine"' in page.read_text() and rows[0]["engine"] in page.read_text()


@pytest.mark.slow
def test_app_report_chart_and_graph_show_the_ranking(overflow_model: Path,
                                                    tmp_path: Path) -> None:
    from workbench.ui import Workbench
    from workbench.viz.html_report import html_report
    from workbench.viz.style import ERROR_COLORS

    app = Workbench(overflow_model, ConversionParams(precision_mode="FP16"),
                    store=tmp_path / "runs", background=False)
    assert app.per_engine.empty
    app.validation_tab.per_engine_button.click()  # with the tab's batches, atol, rtol
    table = app.per_engine
    worst = squaring_engine(app.session, app.params)
    assert table["engine"].iloc[0] == worst and len(table) == 3
    assert "per_engine" in app.figures and "Per-engine accuracy, FP16" in \
        app.validation_tab.per_engine_note.value
    assert ERROR_COLORS[-1] in app.svg  # the overflowing engine drawn red
    assert "max abs error" in app.svg
    app.controls.minimum_segment_size.value = 5  # other settings: the ranking is said stale
    assert "other settings" in app.validation_tab.per_engine_stale.value
    page = html_report(app.session, ConversionParams(precision_mode="FP16"),
                       per_engine=app.per_engine_report)
    assert "Per-engine accuracy" in page and 'id="chart-per-engine"' in page
    assert "keep this engine native (workbench what-if, not a TF-TRT setting)" in page
