"""Validation of converted outputs with Polygraphy's comparison rules (CompareFunc.simple)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sample_models
from workbench import trt_convert as trt
from workbench.checks.validation import (
    ValidationError,
    compare_outputs,
    generated_inputs,
    validate,
)


def one(expected: Any, actual: Any, **tolerances: Any):
    (result,) = compare_outputs({"y": np.asarray(expected, np.float32)},
                                {"y": np.asarray(actual, np.float32)}, **tolerances)
    return result


# --- elementwise: an element fails only when it exceeds both tolerances -------------------


@pytest.mark.parametrize("actual, passed", [
    (1.25, True),   # abs 0.25 == atol: within
    (1.5, True),    # abs 0.5 > atol, but rel 0.5 == rtol: within
    (1.75, False),  # abs 0.75 > atol and rel 0.75 > rtol
    (0.25, False),
])
def test_elemwise_boundaries(actual: float, passed: bool) -> None:
    result = one([1.0, 4.0], [actual, 4.0], atol=0.25, rtol=0.5)
    assert result.passed is passed
    assert result.mismatches == (0 if passed else 1)
    assert result.max_abs == abs(actual - 1.0) and result.max_rel == abs(actual - 1.0)


def test_elemwise_is_polygraphys_either_tolerance_not_numpys_sum() -> None:
    # np.isclose accepts |a-b| <= atol + rtol*|b| (0.5 <= 0.25 + 0.25); Polygraphy does not.
    assert np.isclose(1.5, 1.0, atol=0.25, rtol=0.25)
    assert not one([1.0], [1.5], atol=0.25, rtol=0.25).passed


def test_defaults_are_1e_5_and_elemwise() -> None:
    result = one([1.0], [1.0])
    assert (result.atol, result.rtol, result.check_error_stat) == (1e-5, 1e-5, "elemwise")
    assert result.error_quantile == 0.99
    assert one([1000.0], [1000.0078125]).passed  # abs 7.8e-3 > atol, rel 7.8e-6 <= rtol
    assert not one([1000.0], [1000.015625]).passed  # rel 1.56e-5 > rtol too


def test_relative_error_of_a_zero_reference_uses_machine_epsilon() -> None:
    result = one([0.0], [1e-3], atol=0.0, rtol=1e9)
    assert result.max_rel == pytest.approx(np.float32(1e-3) / np.finfo(np.float64).eps)
    assert not result.passed  # 4.5e12 > 1e9


# --- error statistics: the output fails when both statistics exceed ----------------------

# Absolute (and, the reference being 1, relative) errors 0, 0, 0, 0.5, 2:
# max 2, mean 0.5, median 0, 75th percentile 0.5.
EXPECTED, ACTUAL = np.ones(5), np.array([1, 1, 1, 1.5, 3])


@pytest.mark.parametrize("stat, at_boundary, just_below", [
    ("max", 2.0, 1.99),
    ("mean", 0.5, 0.49),
    ("median", 0.0, -1.0),
    ("quantile", 0.5, 0.49),
])
def test_each_error_statistic_at_its_boundary(stat: str, at_boundary: float,
                                              just_below: float) -> None:
    kwargs = {"check_error_stat": stat, "error_quantile": 0.75}
    result = one(EXPECTED, ACTUAL, atol=at_boundary, rtol=at_boundary, **kwargs)
    assert result.passed
    assert (result.max_abs, result.mean_abs, result.median_abs, result.quantile_abs) == (
        2.0, 0.5, 0.0, 0.5)
    assert result.quantile_rel == 0.5
    if just_below >= 0:
        assert not one(EXPECTED, ACTUAL, atol=just_below, rtol=just_below, **kwargs).passed
        # One tolerance holding is enough.
        assert one(EXPECTED, ACTUAL, atol=just_below, rtol=at_boundary, **kwargs).passed
        assert one(EXPECTED, ACTUAL, atol=at_boundary, rtol=just_below, **kwargs).passed


def test_quantile_defaults_to_the_99th_percentile() -> None:
    result = one(EXPECTED, ACTUAL, check_error_stat="quantile", atol=1.94, rtol=0)
    assert result.quantile_abs == pytest.approx(np.quantile([0, 0, 0, 0.5, 2], 0.99))
    assert result.passed
    assert not one(EXPECTED, ACTUAL, check_error_stat="quantile", atol=1.9, rtol=0).passed


def test_elemwise_fails_where_a_statistic_passes() -> None:
    assert one(EXPECTED, ACTUAL, check_error_stat="mean", atol=0.5, rtol=0.5).passed
    result = one(EXPECTED, ACTUAL, atol=0.5, rtol=0.5)
    assert not result.passed and result.mismatches == 1


# --- tolerances per output ------------------------------------------------------------------


def test_tolerances_per_output_with_an_empty_name_as_default() -> None:
    expected = {"a": np.array([1.0]), "b": np.array([1.0]), "c": np.array([1.0])}
    actual = {"a": np.array([1.5]), "b": np.array([1.5]), "c": np.array([1.5])}
    results = compare_outputs(expected, actual, atol={"a": 0.5, "": 0.1}, rtol=0.0,
                              check_error_stat={"c": "max"})
    assert [(r.name, r.atol, r.passed) for r in results] == [
        ("a", 0.5, True), ("b", 0.1, False), ("c", 0.1, False)]
    assert [r.check_error_stat for r in results] == ["elemwise", "elemwise", "max"]
    # Without a "" entry the others keep Polygraphy's default 1e-5.
    (_, b, _) = compare_outputs(expected, actual, atol={"a": 0.5})
    assert (b.atol, b.rtol) == (1e-5, 1e-5)


def test_bad_arguments_are_clear_errors() -> None:
    y = {"y": np.ones(2)}
    with pytest.raises(ValidationError, match="not one of elemwise, max"):
        compare_outputs(y, y, check_error_stat="p99")
    with pytest.raises(ValidationError, match="output.*logitz.*its outputs: y"):
        compare_outputs(y, y, atol={"logitz": 1.0})
    with pytest.raises(ValidationError, match=r"error_quantile 1.5 must be in \[0, 1\]"):
        compare_outputs(y, y, check_error_stat="quantile", error_quantile=1.5)


# --- shapes, missing outputs, NaN and Inf ---------------------------------------------------


def test_shape_mismatch_fails_without_comparing_values() -> None:
    result = one(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not result.passed
    assert result.shape == (3, 2) and result.expected_shape == (2, 3)
    assert "shape [3, 2] differs from native [2, 3]" in result.reason
    assert np.isnan(result.max_abs) and result.elements == 0
    assert "FAILED y [3x2]: shape [3, 2] differs" in str(result)


def test_without_shape_check_equal_sizes_compare_in_the_expected_shape() -> None:
    assert one(np.arange(6).reshape(2, 3), np.arange(6).reshape(1, 6), check_shapes=False).passed
    assert not one(np.zeros(6), np.zeros(5), check_shapes=False).passed


def test_scalars_empty_and_bool_outputs_compare() -> None:
    scalar = one(np.float32(2.0), np.float32(2.0))
    assert scalar.passed and scalar.shape == () and "PASSED y [scalar]" in str(scalar)
    empty = one(np.zeros((0, 3)), np.zeros((0, 3)))
    assert empty.passed and empty.max_abs == 0.0 and empty.elements == 0
    (flags,) = compare_outputs({"b": np.array([True, False])}, {"b": np.array([True, True])})
    assert not flags.passed and flags.mismatches == 1 and flags.max_abs == 1.0


def test_an_output_missing_on_either_side_fails() -> None:
    results = compare_outputs({"a": np.ones(1), "b": np.ones(1)}, {"a": np.ones(1),
                                                                   "c": np.ones(1)})
    assert [(r.name, r.passed) for r in results] == [("a", True), ("b", False), ("c", False)]
    assert results[1].reason == "missing from the converted outputs"
    assert results[2].reason == "missing from the native outputs"


def test_nan_fails_even_where_both_sides_are_nan_and_is_counted() -> None:
    result = one([1.0, 2.0, 3.0], [1.0, np.nan, 3.0], atol=1e9, rtol=1e9)
    assert not result.passed and (result.nan, result.inf, result.mismatches) == (1, 0, 1)
    assert np.isnan(result.max_abs)
    assert "1 NaN and 0 Inf in the converted output" in result.reason
    both = one([np.nan], [np.nan], atol=1e9, rtol=1e9)
    assert not both.passed and (both.nan, both.expected_nan) == (1, 1)
    for stat in ("max", "mean", "median", "quantile"):
        assert not one([1.0, 2.0], [1.0, np.nan], atol=1e9, rtol=1e9,
                       check_error_stat=stat).passed


def test_matching_infinities_fail_unless_compared_equal() -> None:
    expected, actual = [np.inf, -np.inf, 1.0], [np.inf, -np.inf, 1.0]
    default = one(expected, actual)
    assert not default.passed and default.inf == 2 and default.expected_inf == 2
    equal = one(expected, actual, infinities_compare_equal=True)
    assert equal.passed and equal.reason == "" and equal.max_abs == 0.0
    assert not one([np.inf], [-np.inf], infinities_compare_equal=True).passed


# --- top-1 agreement ------------------------------------------------------------------------


def test_top1_agreement_for_rank_2_float_outputs_only() -> None:
    expected = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]], np.float32)
    actual = expected.copy()
    actual[0] = [0.9, 0.1]  # one row's class flips
    (logits,) = compare_outputs({"logits": expected}, {"logits": actual})
    assert logits.top1_agreement == 0.75 and not logits.passed
    assert "top-1 agreement 75.00%" in str(logits)
    assert one(np.ones((4, 1)), np.ones((4, 1))).top1_agreement is None  # one column
    assert one(np.ones((2, 2, 2)), np.ones((2, 2, 2))).top1_agreement is None
    ints = compare_outputs({"ids": np.ones((2, 3), np.int64)}, {"ids": np.ones((2, 3), np.int64)})
    assert ints[0].top1_agreement is None and ints[0].passed


# --- real conversions of digits_cnn ---------------------------------------------------------


def converted_digits(precision: str) -> tuple[Any, Any]:
    data = sample_models.data("digits_cnn")
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("digits_cnn")), precision_mode=precision)
    x_calib = data["x_calib"]

    def calibration() -> Any:
        return ([x_calib[i:i + 32]] for i in range(0, 128, 32))

    func = converter.convert(calibration_input_fn=calibration if precision == "INT8" else None)
    converter.build(lambda: iter([[data["x_test"][:120]]]))
    return func, converter


def held_out(func: Any, size: int = 120) -> list[dict[str, np.ndarray]]:
    x = sample_models.data("digits_cnn")["x_test"]
    return [{func.input_names[0]: x[i:i + size]} for i in range(0, len(x), size)]


@pytest.fixture(scope="module")
def fp32_report() -> Any:
    func, converter = converted_digits("FP32")
    return validate(func, converter.session.loaded, held_out(func), atol=1e-4, rtol=1e-4)


def test_digits_cnn_fp32_matches_native_at_1e_4(fp32_report: Any) -> None:
    report = fp32_report
    assert report.passed and report.batches == 3
    (logits,) = report.outputs
    assert logits.name == "logits" and logits.shape == (120, 10)
    assert logits.top1_agreement == 1.0 and logits.elements == 3600
    assert 0 < logits.max_abs <= 1e-4  # engines really ran: not bit-identical to TF
    assert (report.backend, report.precision, report.native_runs) == ("onnxruntime", "FP32", {})
    assert report.device.startswith("CPU")
    assert str(report).startswith("PASSED: FP32 converted vs native TensorFlow on 3 batches, "
                                  "engines on onnxruntime (CPU")
    table = report.table()
    assert list(table[["backend", "precision", "name", "passed", "top1_agreement"]].iloc[0]) == [
        "onnxruntime", "FP32", "logits", True, 1.0]


@pytest.fixture(scope="module")
def reduced_reports() -> dict[str, Any]:
    reports = {}
    for precision in ("FP16", "INT8"):
        func, converter = converted_digits(precision)
        reports[precision] = validate(func, converter.session.loaded, held_out(func),
                                      atol=1e-4, rtol=1e-4)
        reports[f"{precision} defaults"] = validate(func, converter.session.loaded,
                                                    held_out(func))
    return reports


def test_without_tolerances_each_precision_gets_its_own_stated_in_the_report(
        fp32_report: Any, reduced_reports: dict[str, Any]) -> None:
    """INT8 at 1e-5 failed with 100% top-1 agreement: a check fails only when numbers are
    wrong for the precision the engines run in."""
    for precision, tolerance in (("FP16", 1e-2), ("INT8", 1e-1)):
        report = reduced_reports[f"{precision} defaults"]
        assert report.passed, str(report)
        assert (report.outputs[0].atol, report.outputs[0].rtol) == (tolerance, tolerance)
        assert f"tolerances: {precision} defaults (atol {tolerance:g}, rtol {tolerance:g}" \
            in str(report)
    assert reduced_reports["INT8 defaults"].outputs[0].check_error_stat == "mean"
    assert fp32_report.tolerances == "given"


def test_given_tolerances_win_over_the_precision_defaults() -> None:
    from workbench.checks.validation import with_default_tolerances

    assert with_default_tolerances("INT8", {"atol": 1e-3, "rtol": None}) == (
        {"atol": 1e-3, "rtol": 0.1, "check_error_stat": "mean"},
        "INT8 defaults (rtol 0.1, check_error_stat mean; TF-TRT's tests' values)")
    assert with_default_tolerances("fp32", {}) == (
        {"atol": 1e-5, "rtol": 1e-5}, "FP32 defaults (atol 1e-05, rtol 1e-05; TF-TRT's tests' "
                                      "values)")
    assert with_default_tolerances("FP16", {"atol": 0, "rtol": 0})[1] == "given"


def test_fp16_and_int8_report_their_real_errors(fp32_report: Any,
                                                reduced_reports: dict[str, Any]) -> None:
    fp32 = fp32_report.outputs[0]
    fp16, int8 = (reduced_reports[p].outputs[0] for p in ("FP16", "INT8"))
    for precision in ("FP16", "INT8"):
        report = reduced_reports[precision]
        assert not report.passed and report.precision == precision and not report.native_runs
    # Each reduction loses more: FP16 rounds to 11 bits, INT8 quantizes activations.
    assert fp32.max_abs < fp16.max_abs < int8.max_abs
    assert fp32.mean_abs < fp16.mean_abs < int8.mean_abs
    assert 1e-4 < fp16.max_abs < 0.1
    assert fp16.top1_agreement >= 0.99
    assert int8.top1_agreement >= 0.98
    assert "FAILED logits [120x10]" in str(reduced_reports["INT8"])


def test_generated_inputs_follow_the_signature() -> None:
    func, converter = converted_digits("FP32")
    sets = list(generated_inputs(converter.session, batches=2, batch_size=4))
    assert [s[func.input_names[0]].shape for s in sets] == [(4, 8, 8, 1)] * 2
    assert not np.array_equal(*(s[func.input_names[0]] for s in sets))  # one seed per batch
    report = validate(func, converter.session.loaded, sets, atol=1e-4, rtol=1e-4)
    assert report.passed and report.batches == 2 and report.outputs[0].shape == (4, 10)


def test_batches_of_different_sizes_pool_their_errors_and_no_inputs_is_an_error() -> None:
    func, converter = converted_digits("FP32")
    report = validate(func, converter.session.loaded, held_out(func, 100), atol=1e-4,
                      rtol=1e-4)
    assert report.batches == 4 and report.outputs[0].shape == (-1, 10)  # 100, 100, 100, 60
    assert report.outputs[0].elements == 3600
    with pytest.raises(ValidationError, match="no inputs"):
        validate(func, converter.session.loaded, [])
