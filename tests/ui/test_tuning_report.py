"""The HTML report's Tuning section: from a TuneResult, and from a store through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.tuning import TrialRecord, TuneResult
from workbench.viz.html_report import tuning_html, write_html_report


def record(trial_id: str, precision: str, mss: int, latency: float | None,
           error: float | None, status: str = "ok", reason: str | None = None) -> TrialRecord:
    params = ConversionParams(precision_mode=precision, minimum_segment_size=mss)
    timed = latency is not None
    return TrialRecord(
        trial_id, params.to_json(), status, reason,
        percent_converted=80.0 if status == "ok" else None, engines=1 if status == "ok" else None,
        latency_ms={1: {"mean": latency, "p50": latency * 0.9, "p99": latency * 2}}
        if timed else {},
        speedup=1.2 if timed else None, max_abs_error=error,
        top1_agreement=1.0 if error is not None else None,
        backend="onnxruntime" if timed else None, device="CPU" if timed else None,
        worker="tcp://127.0.0.1:40001", seconds=1.0)


@pytest.fixture
def result() -> TuneResult:
    return TuneResult([
        record("exact", "FP32", 3, 2.0, 1e-6),
        record("fast", "FP16", 3, 1.0, 1e-3),
        record("slow", "FP16", 5, 3.0, 2e-3),
        record("broken", "INT8", 3, None, None, "failed", "INT8 needs calibration <data>"),
    ], model="models/mlp", store="runs/trials/abc")


def test_tuning_section_shows_recommendation_pareto_charts_and_failures(
        result: TuneResult) -> None:
    html = tuning_html(result)
    assert "4 trials (3 ok, 1 failed)" in html and "<code>models/mlp</code>" in html
    assert "<b>Recommended: FP16 min 3</b>, the fastest trial whose outputs stay within" in html
    for name in ("pareto", "latency", "conversion"):
        assert f'id="chart-tune-{name}"' in html
    pareto = html[html.index("<h3>Pareto set</h3>"):html.index("<details>")]
    assert pareto.count("<tr>") == 3  # header, FP32 min 3 and FP16 min 3
    assert "FP16 min 5" not in pareto
    assert "INT8 needs calibration &lt;data&gt;" in html  # escaped, in the all-trials table
    assert "onnxruntime on CPU" in html


def test_tuning_section_without_a_finished_trial(result: TuneResult) -> None:
    html = tuning_html(TuneResult([result.trials[-1]], model="m", store="s"))
    assert "No recommendation: no trial finished ok." in html
    assert "1 trial not plotted" in html  # the charts list it


def test_written_report_has_the_section(tiny_saved_model: Path, tmp_path: Path,
                                        result: TuneResult) -> None:
    session = ConversionSession.open(str(tiny_saved_model))
    path = write_html_report(session, ConversionParams(), tmp_path / "r.html", tuning=result)
    text = path.read_text()
    assert '<section id="tuning"><h2>Tuning</h2>' in text
    assert text.index('id="tuning"') > text.index('id="charts"')


@pytest.mark.slow
def test_cli_report_reads_the_trials_workbench_tune_stored(tiny_saved_model: Path,
                                                           tmp_path: Path) -> None:
    store, page = tmp_path / "runs", tmp_path / "report.html"
    done = run_cli("report", str(tiny_saved_model), "-o", str(page), "--tune-store", str(store))
    assert done.returncode != 0 and not page.exists()
    assert done.stderr.strip().count("\n") == 0 and "run `workbench tune" in done.stderr
    done = run_cli("tune", str(tiny_saved_model), "--minimum-segment-size", "1,2",
                   "--precision", "FP32,FP16", "--workers", "2", "--store", str(store))
    assert done.returncode == 0, done.stderr
    done = run_cli("report", str(tiny_saved_model), "-o", str(page), "--tune-store", str(store))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert '<section id="tuning">' in text
    stored = [json.loads(f.read_text()) for f in store.glob("trials/*/*.json")]
    assert "4 trials (4 ok)" in text, [(t["params"], t["status"], t["reason"]) for t in stored]
    assert "<b>Recommended: " in text and 'id="chart-tune-pareto"' in text
