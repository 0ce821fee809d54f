"""Exporting a conversion: the TF-TRT script runs (with our import) to the same engines, the
ONNX model matches native TensorFlow, trtexec commands carry the profiles, and bad inputs get
one clear line with nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

import sample_models
from workbench.checks.export_formats import (
    TFTRT_IMPORT,
    WORKBENCH_IMPORT,
    describe,
    export,
    params_of,
    tftrt_script,
    trtexec_commands,
)
from workbench.checks.onnx_model import (
    OnnxExportError,
    check_against_tensorflow,
    export_whole_model,
)
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.conversion.summary import summary_lines
from workbench.engines.profiles import Profile
from workbench.tuning.record import TrialRecord

pytestmark = pytest.mark.slow

BERT_PARAMS = ConversionParams(precision_mode="FP16", use_dynamic_shape=True,
                               dynamic_shape_profile_strategy="Optimal",
                               denylist=("Softmax",), max_engines=5)


@pytest.fixture(scope="module")
def tiny_bert() -> ConversionSession:
    return ConversionSession.open(sample_models.build("tiny_bert"))


def test_script_converts_to_the_same_engines_and_saves(tiny_bert, tmp_path) -> None:
    script = tmp_path / "convert.py"
    export(tiny_bert, "tftrt", script, BERT_PARAMS, batch_sizes=(1, 4))
    text = script.read_text()
    assert text.count(TFTRT_IMPORT) == 1
    assert "os.environ[\"TF_TRT_OP_DENYLIST\"] = 'Softmax'" in text
    assert "os.environ[\"TF_TRT_MAX_ALLOWED_ENGINES\"] = '5'" in text
    assert "dynamic_shape_profile_strategy='Optimal'" in text
    script.write_text(text.replace(TFTRT_IMPORT, WORKBENCH_IMPORT))
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "saved")],
                         capture_output=True, text=True, timeout=600,
                         # the script sets the conversion's own values over the caller's
                         env={**_environment(), "TF_TRT_OP_DENYLIST": "Conv2D"})
    assert run.returncode == 0, run.stderr[-2000:]
    expected = "\n".join(summary_lines(tiny_bert.convert(BERT_PARAMS))).splitlines()
    printed = run.stdout.splitlines()
    engine_lines = [line.strip() for line in expected if line.startswith(("[*]", "TRTEngineOp"))]
    assert len(engine_lines) == 5 + 2  # five engines, then the engine count and the share
    assert engine_lines == [line.strip() for line in printed
                            if line.startswith(("[*]", "TRTEngineOp"))]
    assert (tmp_path / "saved" / "saved_model.pb").is_file()


def test_int8_script_refuses_to_run_without_calibration_data(tmp_path) -> None:
    script = tmp_path / "int8.py"
    export(sample_models.build("quickstart_mlp"), "tftrt", script,
           ConversionParams(precision_mode="INT8"))
    text = script.read_text().replace(TFTRT_IMPORT, WORKBENCH_IMPORT)
    assert "calibration_input_fn=calibration_input_fn" in text
    script.write_text(text)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300, env=_environment())
    assert run.returncode == 1 and "set CALIBRATION_DATA" in run.stderr
    assert not (tmp_path / "out").exists()


def test_profiles_of_each_strategy_reach_the_script_and_trtexec(tiny_bert) -> None:
    shapes = [((4, 16),) * 3, ((1, 16),) * 3]
    range_params = ConversionParams(use_dynamic_shape=True,
                                    dynamic_shape_profile_strategy="Range")
    text = trtexec_commands("m.onnx", ["input_mask", "input_type_ids", "input_word_ids"],
                            range_params, shapes)
    assert text.count("trtexec ") == 1
    assert "--minShapes=input_mask:1x16,input_type_ids:1x16,input_word_ids:1x16" in text
    assert "--maxShapes=input_mask:4x16" in text
    for flag in ("--exportProfile=m_p0/m.profile.json", "--exportLayerInfo=m_p0/m.graph.json",
                 "--profilingVerbosity=detailed", "polygraphy run m.onnx --trt --onnxrt"):
        assert flag in text
    optimal = trtexec_commands("m.onnx", ["a", "b", "c"], BERT_PARAMS, shapes)
    assert optimal.count("trtexec ") == 2 and "--fp16" in optimal and "--int8" not in optimal
    script = tftrt_script(tiny_bert, BERT_PARAMS, (1, 4))
    assert "BUILD_SHAPES = [[(4, 16), (4, 16), (4, 16)], [(1, 16), (1, 16), (1, 16)]]" in script


def test_a_tuning_trial_and_the_cli_json_give_the_same_parameters() -> None:
    params = BERT_PARAMS
    trial = TrialRecord("t", params.to_json(), "ok")
    assert params_of(trial) == params_of(params.to_json()) == params_of(params)


@pytest.mark.parametrize("name", ["quickstart_mlp", "digits_cnn", "mobilenet_v2", "tiny_bert",
                                  "detector", "cond_mlp"])
def test_onnx_matches_native_tensorflow(name) -> None:
    session = ConversionSession.open(sample_models.build(name))
    exported = export_whole_model(session)
    assert [i.name for i in exported.model.graph.input] == session.loaded.input_names
    results = check_against_tensorflow(session, exported)
    assert results and all(r.passed for r in results)


def test_weights_past_the_limit_go_beside_the_model_in_a_data_file(tmp_path, monkeypatch) -> None:
    """The path of a model past protobuf's 2 GB (tests/test_big_model.py runs one), on a small
    model: the model file holds no large weight, ONNX Runtime runs it from its data file."""
    import numpy as np
    import onnx
    import onnxruntime

    from workbench.checks import onnx_model

    monkeypatch.setattr(onnx_model, "EXTERNAL_WEIGHTS_BYTES", 0)
    session = ConversionSession.open(sample_models.build("digits_cnn"))
    target = onnx_model.write_onnx(session, tmp_path / "digits.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.onnx", "digits.onnx.data"]
    model = onnx.load(str(target), load_external_data=False)
    external = [t for t in model.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    assert len(external) == 2  # the dense layers' kernels: 32 KB and 18 KB
    assert target.stat().st_size < 10_000 < (tmp_path / "digits.onnx.data").stat().st_size
    assert [i.name for i in model.graph.input] == session.loaded.input_names
    onnx.checker.check_model(str(target))
    x = np.random.default_rng(0).random([3, 8, 8, 1], np.float32)
    run = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(run.run(None, {"images": x})[0],
                               session.loaded(images=x)["logits"], atol=1e-5)


def test_unsupported_ops_are_named_before_onnx_runtime_sees_them() -> None:
    session = ConversionSession.open(sample_models.build("lstm"))
    exported = export_whole_model(session)
    assert exported.unsupported_ops == {"TensorListReserve": 1}
    with pytest.raises(OnnxExportError, match="TensorListReserve"):
        check_against_tensorflow(session, exported)


def test_implicit_batch_profile_spans_batch_one_to_the_largest() -> None:
    params = ConversionParams()
    text = trtexec_commands("d.onnx", ["images"], params, [((8, 8, 8, 1),), ((1, 8, 8, 1),)])
    assert "--minShapes=images:1x8x8x1" in text and "--maxShapes=images:8x8x8x1" in text
    assert Profile(((1, 2),), ((1, 2),), ((1, 2),)).describe() == "[1, 2]"


def _environment() -> dict[str, str]:
    import os

    from conftest import REPO

    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_a_converter_exports_its_own_settings(tmp_path) -> None:
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("quickstart_mlp")),
        precision_mode=trt.TrtPrecisionMode.FP16, minimum_segment_size=2)
    converter.convert()
    path = converter.export("trtexec", str(tmp_path / "mlp.sh"), batch_sizes=(1, 8))
    text = path.read_text()
    assert "FP16, minimum_segment_size=2, implicit batch" in text and "--fp16" in text
    assert "--maxShapes=" in text and ":8x" in text


def test_the_settings_line_counts_engines_in_words():
    assert describe(ConversionParams(max_engines=1)).endswith(", at most 1 engine")
    assert describe(ConversionParams(max_engines=20)).endswith(", at most 20 engines")
    assert describe(ConversionParams(max_engines=0)).endswith(", no engine limit")
