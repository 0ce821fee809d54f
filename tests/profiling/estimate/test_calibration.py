"""Calibrating the estimate on one measurement: on the real trtexec fixtures, calibrate on one
precision's profile and predict the other's GPU compute time; `--calibrate` and `--measured-ms`
on the CLI."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_path, run_cli

from workbench.errors import WorkbenchError
from workbench.profiling.estimate.calibration import calibrated, from_measured, from_profile
from workbench.profiling.estimate.coefficients import load_coefficients
from workbench.profiling.estimate.roofline import estimate_engine
from workbench.profiling.trtexec import read_trtexec_kernels


def _measured_ms(name: str) -> float:
    metadata = json.loads((fixture_path(name) / "engine.profile.metadata.json").read_text())
    return metadata["performance_summary"]["GPU Compute Time"][3]


def _estimate(name: str, gpu: str) -> dict:
    return estimate_engine(read_trtexec_kernels(fixture_path(name) / "engine.graph.json"), gpu)


@pytest.mark.parametrize(("gpu", "calibrate_on", "predict"), [
    ("RTX 3090", "keras-resnet50-rtx3090-fp32", "keras-resnet50-rtx3090-fp16"),
    ("RTX 3090", "keras-resnet50-rtx3090-fp16", "keras-resnet50-rtx3090-fp32"),
    ("RTX 3090", "keras-resnet50-rtx3090-fp16", "keras-resnet50-rtx3090-qat"),
    ("A100", "torch-resnet18-a100-fp32", "torch-resnet18-a100-fp16"),
    ("A100", "torch-resnet18-a100-fp16", "torch-resnet18-a100-fp32"),
])
def test_calibrated_on_one_precision_the_other_lands_in_the_calibrated_range(
        gpu, calibrate_on, predict):
    calibration = from_profile(fixture_path(calibrate_on) / "engine.profile.json", gpu)
    # The calibrating engine itself is then exactly its measured GPU compute time.
    itself = calibrated(_estimate(calibrate_on, gpu), calibration)
    assert itself["total_ms"] == pytest.approx(_measured_ms(calibrate_on))
    document = calibrated(_estimate(predict, gpu), calibration)
    measured = _measured_ms(predict)
    assert document["total_low_ms"] <= measured <= document["total_high_ms"]
    assert "calibrated on engine.profile.json (trtexec's GPU compute time)" in \
        document["error_note"]
    span = load_coefficients()["range"]
    assert document["total_high_ms"] / document["total_low_ms"] == pytest.approx(
        span["calibrated_high"] / span["calibrated_low"])


def test_a_calibration_applies_to_its_gpu_only():
    calibration = from_measured("A100", 2.0, 1.0, "a test")
    other = _estimate("torch-resnet18-a100-fp16", "T4")
    assert calibrated(other, calibration)["total_ms"] == other["total_ms"]
    same = _estimate("torch-resnet18-a100-fp16", "A100")
    assert calibrated(same, calibration)["total_ms"] == pytest.approx(2 * same["total_ms"])
    with pytest.raises(WorkbenchError, match="positive number of ms"):
        from_measured("A100", -1.0, 1.0, "a test")


def test_a_profile_without_its_layer_info_is_a_clear_error(tmp_path):
    profile = tmp_path / "engine.profile.json"
    profile.write_text("[]")
    with pytest.raises(WorkbenchError, match="no layer info beside it"):
        from_profile(profile, "T4")


def test_cli_estimate_calibrates_on_a_profile_or_a_measured_latency():
    graph = str(fixture_path("keras-resnet50-rtx3090-fp16") / "engine.graph.json")
    profile = str(fixture_path("keras-resnet50-rtx3090-fp32") / "engine.profile.json")
    done = run_cli("estimate", "--trtexec-graph", graph, "--gpu", "RTX 3090", "--calibrate",
                   profile, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    measured = _measured_ms("keras-resnet50-rtx3090-fp16")
    assert document["total_low_ms"] <= measured <= document["total_high_ms"]
    assert "calibrated on" in document["error_note"]
    done = run_cli("estimate", "--trtexec-graph", graph, "--gpu", "RTX 3090", "--measured-ms",
                   "4.5")
    assert done.returncode == 0, done.stderr
    assert "total 4.500 ms" in done.stdout and "calibrated on this engine" in done.stdout
    both = run_cli("estimate", "--trtexec-graph", graph, "--gpu", "T4", "--measured-ms", "1",
                   "--calibrate", profile)
    assert both.returncode == 2 and "not allowed with" in both.stderr
