"""`workbench check`: build, compare with native TF and time, from the command line."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

import sample_models


def test_cli_check_prints_json_and_exits_3_on_a_mismatch() -> None:
    model = str(sample_models.build("digits_cnn"))
    done = run_cli("check", model, "--batch-sizes", "1,4", "--iterations", "3", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] and document["engines"] == 2
    assert {row["batch_size"] for row in document["latency"]} == {1, 4}
    assert document["metrics"]["engines_backend"] == "onnxruntime"
    assert document["tolerances"].startswith("FP32 defaults (atol 1e-05, rtol 1e-05")
    strict = run_cli("check", model, "--precision", "FP16", "--iterations", "3",
                     "--atol", "1e-5", "--rtol", "1e-5")  # FP32's: FP16 misses them
    assert strict.returncode == 3 and "FAILED: FP16" in strict.stdout
    assert "tolerances: given" in strict.stdout
    assert "top-1 agreement" in strict.stdout  # one line per output says how far off
    bad = run_cli("check", model, "--batch-sizes", "0")
    assert bad.returncode == 2 and "batch sizes must be integers >= 1" in bad.stderr


def test_cli_int8_check_passes_at_batch_size_one_with_int8_defaults() -> None:
    """The issue's case: INT8 at batch size 1 failed with 100% top-1 agreement. It now
    calibrates on CALIBRATION_SAMPLES generated samples (two before) and is judged by INT8's
    tolerances, which the output states."""
    model = str(sample_models.build("digits_cnn"))
    done = run_cli("check", model, "--precision", "INT8", "--iterations", "3", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] and document["tolerances"].startswith("INT8 defaults")


@pytest.mark.slow
def test_png_cnn_checks_from_the_cli() -> None:
    done = run_cli("check", str(sample_models.build("png_cnn")), "--iterations", "2", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] and document["engines"] == 1
    assert document["notes"][0].startswith("input png: generated 16x16 3-channel PNG images")
