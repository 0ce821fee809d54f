"""`workbench report`: the static HTML report from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

import sample_models


def test_cli_report_refuses_an_unknown_gpu_before_loading(tmp_path):
    done = run_cli("report", str(tmp_path / "no-model"), "-o", str(tmp_path / "r.html"),
                   "--target-gpu", "GTX 480")
    assert done.returncode == 2
    assert done.stderr.startswith("workbench: error: Unknown GPU 'GTX 480': give one of T4")


def test_cli_writes_the_report(tiny_saved_model: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    run = run_cli("report", str(tiny_saved_model), "-o", str(target),
                  "--precision", "FP16", "--minimum-segment-size", "2")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"wrote {target}"
    text = target.read_text(encoding="utf-8")
    assert "FP16" in text and 'id="chart-sweep"' in text


def test_cli_report_with_check_has_validation_and_latency(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    model = str(sample_models.build("digits_cnn"))
    run = run_cli("report", model, "-o", str(target), "--check", "--batch-sizes", "1,4")
    assert run.returncode == 0, run.stderr
    text = target.read_text(encoding="utf-8")
    assert 'id="validation-and-latency"' in text and 'id="chart-latency"' in text
    assert "PASSED: FP32 converted vs native TensorFlow" in text and "batch 4: native TF" in text
    assert "measured with other settings" not in text  # the check is of the report's settings
    plain = run_cli("report", model, "-o", str(target))
    assert plain.returncode == 0 and "chart-latency" not in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/model"], "workbench: error: "),
        (["MODEL", "--precision", "FP64"], "workbench: error: precision mode 'FP64'"),
        (["MODEL", "-o", "/no/such/dir/report.html"], "workbench: error: cannot write"),
        (["MODEL", "--check", "--batch-sizes", "a"], "workbench: error: batch sizes must be"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tiny_saved_model: Path, args: list[str], message: str
) -> None:
    args = [str(tiny_saved_model) if a == "MODEL" else a for a in args]
    run = run_cli("report", *args)
    assert run.returncode == 2
    assert run.stderr.startswith(message)
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
