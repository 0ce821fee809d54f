"""Impossible conversion parameters: one clear line naming the problem, from API and CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from workbench import trt_convert as trt
from workbench.conversion.params import ConversionParams, params_from_environment
from workbench.environment import EnvironmentVariableError
from workbench.errors import ConversionParamsError

BAD_PARAMS = [
    ({"precision_mode": "fp64"},
     "precision mode 'fp64' is not supported. It should be one of ['FP32', 'FP16', 'INT8']"),
    ({"minimum_segment_size": 0},
     "minimum segment size should be positive or -1 (to disable main graph conversion), got 0"),
    ({"use_dynamic_shape": True, "dynamic_shape_profile_strategy": "Fastest"},
     "profile_strategy 'Fastest' is not supported. It should be one of ['Range', 'Optimal', "
     "'Range+Optimal', 'ImplicitBatchModeCompatible']"),
    ({"max_workspace_size_bytes": -1}, "max_workspace_size_bytes must be >= 0, got -1"),
    ({"maximum_cached_engines": 0}, "maximum_cached_engines must be >= 1, got 0"),
]


@pytest.mark.parametrize("kwargs, message", BAD_PARAMS)
def test_params_validation_message(kwargs: dict, message: str) -> None:
    with pytest.raises(ConversionParamsError) as info:
        ConversionParams(**kwargs)
    assert str(info.value) == message
    assert "\n" not in message


@pytest.mark.parametrize("kwargs, message", BAD_PARAMS)
def test_converter_rejects_bad_params_at_construction(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        trt.TrtGraphConverterV2(input_saved_model_dir="unused", **kwargs)
    assert str(info.value) == message


def test_defaults_match_tftrt() -> None:
    params = ConversionParams()
    assert params.precision_mode == "FP32" and params.minimum_segment_size == 3
    assert params.maximum_cached_engines == 1 and params.use_calibration
    assert params.allow_build_at_runtime and not params.use_dynamic_shape
    assert params.dynamic_shape_profile_strategy is None
    assert trt.DEFAULT_TRT_CONVERSION_PARAMS.minimum_segment_size == 3
    assert trt.supported_profile_strategies() == [
        "Range", "Optimal", "Range+Optimal", "ImplicitBatchModeCompatible"]
    assert "fp16" in trt.TrtPrecisionMode.supported_precision_modes()


def test_minus_one_and_lower_case_are_accepted() -> None:
    params = ConversionParams(precision_mode="fp16", minimum_segment_size=-1)
    assert (params.precision_mode, params.minimum_segment_size) == ("FP16", -1)


def test_dynamic_shape_defaults_to_range_and_canonical_case() -> None:
    assert ConversionParams(use_dynamic_shape=True).dynamic_shape_profile_strategy \
        == "Range"
    strategy = ConversionParams(use_dynamic_shape=True,
                                dynamic_shape_profile_strategy="range+optimal")
    assert strategy.dynamic_shape_profile_strategy == "Range+Optimal"


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TRT_OP_DENYLIST", "Conv2D, Relu")
    monkeypatch.setenv("TF_TRT_MAX_ALLOWED_ENGINES", "7")
    params = params_from_environment()
    assert params.denylist == ("Conv2D", "Relu") and params.max_engines == 7
    assert params_from_environment(max_engines=3, denylist=()).max_engines == 3
    monkeypatch.setenv("TF_TRT_MAX_ALLOWED_ENGINES", "lots")
    with pytest.raises(EnvironmentVariableError,
                       match="TF_TRT_MAX_ALLOWED_ENGINES='lots': must be an integer"):
        params_from_environment()


def test_converter_needs_a_model() -> None:
    with pytest.raises(ValueError, match="input_saved_model_dir is required"):
        trt.TrtGraphConverterV2()


def test_summary_before_convert_is_refused() -> None:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir="unused")
    with pytest.raises(RuntimeError, match=r"convert\(\) must be called first"):
        converter.summary()


def test_calibration_input_fn_rules() -> None:
    int8 = trt.TrtGraphConverterV2(input_saved_model_dir="unused", precision_mode="INT8")
    with pytest.raises(ValueError, match="Should specify calibration_input_fn"):
        int8.convert()
    fp32 = trt.TrtGraphConverterV2(input_saved_model_dir="unused")
    with pytest.raises(ValueError, match="Should not specify calibration_input_fn"):
        fp32.convert(calibration_input_fn=lambda: iter([]))


def test_build_and_save_need_convert_first() -> None:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir="unused")
    with pytest.raises(RuntimeError, match="Need to call convert\\(\\) before build\\(\\)"):
        converter.build(lambda: iter([]))
    with pytest.raises(RuntimeError, match="input_fn is None"):
        converter.build(None)
    with pytest.raises(RuntimeError, match="Need to call convert\\(\\) before save\\(\\)"):
        converter.save("out")


def test_denylist_names_must_be_op_types_the_model_holds_and_tftrt_converts() -> None:
    from workbench.conversion.params import check_denylist

    model, known = {"Conv2D", "Relu", "Switch"}, {"Conv2D", "Relu", "MatMul"}
    check_denylist(("Conv2D", "Relu"), model, known)
    with pytest.raises(ConversionParamsError, match="'Conv2d', which the model does not hold "
                                                    ".*; did you mean 'Conv2D'\\? op types "
                                                    "are case-sensitive"):
        check_denylist(("Conv2d",), model, known)
    with pytest.raises(ConversionParamsError, match="'MatMul', which the model does not hold;"):
        check_denylist(("MatMul",), model, known)
    with pytest.raises(ConversionParamsError, match="nor has TF-TRT a converter for it"):
        check_denylist(("Frobnicate",), model, known)
    with pytest.raises(ConversionParamsError, match="'Switch', which TF-TRT has no converter"):
        check_denylist(("Switch",), model, known)


def test_a_misspelt_denylist_fails_in_the_api_the_environment_and_the_cli(
        tiny_saved_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = trt.TrtConversionParams()
    monkeypatch.setenv("TF_TRT_OP_DENYLIST", "relu")
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(tiny_saved_model),
                                        conversion_params=params)
    with pytest.raises(ConversionParamsError, match="did you mean 'Relu'"):
        converter.convert()
    monkeypatch.delenv("TF_TRT_OP_DENYLIST")
    done = run_cli("convert", str(tiny_saved_model), "--denylist", "Relu,Softmx")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert "error: the denylist names op type 'Softmx'" in errors[-1]
    assert "did you mean 'Softmax'" in errors[-1] and len(errors) == 1, done.stderr


def test_params_are_valid_once_built_whichever_way() -> None:
    """Every ConversionParams is checked and canonical when built, so no caller checks it
    again: `replace()` goes through the same checks."""
    from dataclasses import replace

    params = ConversionParams(precision_mode="fp16", denylist=("Relu", " Add", ""))
    assert (params.precision_mode, params.denylist) == ("FP16", ("Add", "Relu"))
    assert not hasattr(params, "validated")
    with pytest.raises(ConversionParamsError, match="minimum segment size should be positive"):
        replace(params, minimum_segment_size=0)
    implicit = replace(ConversionParams(use_dynamic_shape=True), use_dynamic_shape=False)
    assert implicit.dynamic_shape_profile_strategy is None  # TF-TRT ignores it there
