"""Checking a conversion: engines built, outputs compared with native TF, both timed."""

from __future__ import annotations

import pytest

import sample_models
from workbench import environment
from workbench.checks.conversion_check import CONVERTED, NATIVE, WHOLE, check_conversion
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError

FAST = {"warmup": 1, "iterations": 3}


@pytest.fixture(scope="module")
def session() -> ConversionSession:
    return ConversionSession.open(sample_models.build("digits_cnn"))


def test_fp32_check_passes_and_labels_every_timing(session: ConversionSession) -> None:
    check = check_conversion(session, ConversionParams(), batch_sizes=(8, 1), **FAST)
    assert check.validation.passed and check.validation.native_runs == {}
    latency = check.latency.set_index(["model", "batch_size"])
    assert sorted(latency.index) == [(CONVERTED, 1), (CONVERTED, 8), (NATIVE, 1), (NATIVE, 8)]
    assert latency.loc[(NATIVE, 1), "backend"] == "tensorflow"
    assert latency.loc[(CONVERTED, 8), "backend"] == "onnxruntime engines + tensorflow"
    assert latency["device"].str.startswith("CPU").all()
    metrics = check.metrics()
    assert metrics["top1_agreement_pct"] == 100.0 and "native_segment_calls" not in metrics
    assert "native_ms_b1" not in metrics  # the baseline lives in the speed-up
    assert metrics["speedup_b8"] == pytest.approx(
        latency.loc[(NATIVE, 8), "mean_ms"] / latency.loc[(CONVERTED, 8), "mean_ms"])
    assert check.summary().splitlines()[1].startswith("batch 1: native TF ")


def test_int8_check_calibrates_then_runs_its_engines(session: ConversionSession) -> None:
    check = check_conversion(session, ConversionParams(precision_mode="INT8"), batch_sizes=(4,),
                             **FAST)
    assert check.validation.precision == "INT8" and check.validation.native_runs == {}
    assert check.metrics()["max_abs_error"] > 1e-5  # quantized: not bit-equal to FP32


def test_native_fallback_is_said_not_passed_off_as_engines(
        session: ConversionSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.ABORT_ENGINE_BUILD.name, "1")
    check = check_conversion(session, ConversionParams(), **FAST)
    converted = check.latency.set_index("model").loc[CONVERTED]
    assert converted["backend"].startswith("tensorflow (segments TRTEngineOp_000_")
    assert check.metrics()["native_segment_calls"] > 0


@pytest.mark.parametrize("options", [{"batch_sizes": ()}, {"batch_sizes": (0,)},
                                     {"batches": 0}, {"iterations": 0}])
def test_bad_options_are_clear_errors(session: ConversionSession, options: dict) -> None:
    with pytest.raises(WorkbenchError, match=">= 1"):
        check_conversion(session, ConversionParams(), **options)


def test_a_conversion_without_engines_says_it_is_native_tf(session: ConversionSession) -> None:
    check = check_conversion(session, ConversionParams(minimum_segment_size=1000), **FAST)
    assert check.engines == 0
    assert check.latency.set_index("model").loc[CONVERTED, "backend"] == \
        "tensorflow only (no engines)"
    assert "no engines at these settings" in check.summary()


def test_whole_model_is_timed_beside_when_asked(session: ConversionSession) -> None:
    steps: list[str] = []
    check = check_conversion(session, ConversionParams(), whole_model=True, batch_sizes=(2,),
                             progress=lambda fraction, message: steps.append(message), **FAST)
    whole = check.latency.set_index("model").loc[WHOLE]
    assert whole["backend"] == "onnxruntime engine" and whole["batch_size"] == 2
    assert check.metrics()["whole_model_ms_b2"] == whole["mean_ms"]
    assert "whole model" in check.summary() and not check.notes
    assert any("whole model as one engine" in s for s in steps)


def test_whole_model_that_cannot_export_is_a_note_not_a_failure() -> None:
    # png_cnn decodes its string input (DecodePng): no ONNX for the whole model.
    png_cnn = ConversionSession.open(sample_models.build("png_cnn"))
    check = check_conversion(png_cnn, ConversionParams(), whole_model=True, **FAST)
    assert WHOLE not in set(check.latency["model"])
    assert any(note.startswith("whole model not measured: Cannot export") for note in check.notes)


def test_calibration_sees_enough_samples_at_any_batch_size() -> None:
    from workbench.checks.conversion_check import CALIBRATION_SAMPLES, calibration_batch_count

    assert calibration_batch_count(1) == CALIBRATION_SAMPLES
    assert calibration_batch_count(32) * 32 >= CALIBRATION_SAMPLES
    assert calibration_batch_count(128) == 1 and calibration_batch_count(8, 3) == 3


def test_tolerance_fields_are_empty_for_the_precisions_default() -> None:
    from workbench.checks.conversion_check import parse_tolerance

    assert parse_tolerance(" ", "atol") is None and parse_tolerance("1e-3", "atol") == 1e-3
    for bad in ("-1", "abc", "nan"):
        with pytest.raises(WorkbenchError, match="atol must be a number >= 0"):
            parse_tolerance(bad, "atol")
