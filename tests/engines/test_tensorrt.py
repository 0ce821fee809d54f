"""TensorRT's verdict with the real TensorRT-RTX parser and builder (no GPU needed to build),
and the TensorRT backend family. Build-heavy tests are few: a ResNet-50 plan takes about a
second plus its export; the sample models are shared, already built SavedModels."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import sample_models
from tests.conftest import run_cli
from workbench import trt_convert as trt
from workbench.checks.inputs import generated_input_sets
from workbench.engines.backends import tensorrt_backend
from workbench.engines.backends.base import BackendUnavailableError, backend_status, get_backend
from workbench.engines.inspection import tensorrt_verdict as verdict_module
from workbench.engines.inspection.tensorrt_verdict import (
    JSON_KEYS,
    engine_verdicts,
    shape_values,
    tensorrt_verdict,
)
from workbench.engines.profiles import Profile
from workbench.engines.settings import BuildRequest, EngineSettings

pytest.importorskip("tensorrt_rtx", reason='needs TensorRT-RTX: pip install "tftrt-workbench'
                                           '[tensorrt]"')
NO_GPU = not tensorrt_backend.gpu_present()


@pytest.fixture(autouse=True)
def fresh_verdicts(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test really parses and builds: verdicts are cached in a folder of this test's
    own, not the user's cache (the prepared graphs still are)."""
    folder = tmp_path_factory.mktemp("verdicts")
    monkeypatch.setattr(verdict_module, "_verdict_dir", lambda: folder)
    monkeypatch.setattr(verdict_module, "_memory", {})


def converter_for(name: str, **kwargs: object) -> trt.TrtGraphConverterV2:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)),
                                        **kwargs)  # type: ignore[arg-type]
    calibration = None
    if kwargs.get("precision_mode") == "INT8":
        x = sample_models.data(name)["x_calib"][:16]

        def calibration():
            yield (x,)
    converter.convert(calibration)
    return converter


# --- the backend family ----------------------------------------------------------------------

@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU: engines would run")
def test_rtx_backend_builds_but_cannot_run_here_and_onnxruntime_stays_the_default():
    ok, reason = backend_status()["tensorrt-rtx"]
    assert not ok and "TensorRT-RTX 1.7" in reason and "(CPU: build only)" in reason
    assert get_backend().name == "onnxruntime"
    with pytest.raises(BackendUnavailableError, match="CPU: build only"):
        get_backend("tensorrt-rtx")
    backend = tensorrt_backend.TensorRTRTXBackend()
    assert backend.device.startswith("TensorRT-RTX 1.7.1 builder (CPU: build only)")
    # A real build of a tiny model: the plan is made, then refused for want of a GPU.
    with pytest.raises(BackendUnavailableError, match=r"built a \d+-byte plan .* cannot run"):
        backend.build(_matmul_model(), EngineSettings(), "tiny",
                      BuildRequest(profiles=(Profile(((1, 4),), ((2, 4),), ((2, 4),)),)))


def _matmul_model() -> onnx.ModelProto:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], np.arange(12, dtype=np.float32))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reshape_by_shape_input() -> onnx.ModelProto:
    """`y = Reshape(x, shape)` with `shape` a graph input: TensorRT makes it a shape tensor."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "shape_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_tensor_inputs_are_built_with_their_values():
    model = _reshape_by_shape_input()
    profile = Profile(((1, 6), (2,)), ((4, 6), (2,)), ((4, 6), (2,)))
    request = BuildRequest(profiles=(profile,))
    refused = tensorrt_verdict(model, request=request, name="reshape")
    assert refused.parsed and not refused.built and "shape tensor" in refused.error
    batches = [(np.ones((1, 6), np.float32), np.array([2, 3])),
               (np.ones((4, 6), np.float32), np.array([8, 3]))]
    values = shape_values(model, batches)
    assert values == {"shape": ((2, 3), (8, 3), (8, 3))}
    built = tensorrt_verdict(model, request=request, name="reshape", shape_values=values)
    assert built.built and built.error is None and built.plan_bytes > 0 and built.layers >= 1
    assert built.builder.startswith("TensorRT-RTX 1.7.1")
    assert list(built.to_json()) == list(JSON_KEYS)
    # Cached on disk: the same question is answered without building again.
    assert len(list(verdict_module._verdict_dir().glob("*.json"))) == 2
    verdict_module._memory.clear()  # from disk this time
    again = tensorrt_verdict(model, request=request, name="reshape", shape_values=values)
    assert again.to_json() == built.to_json()


# --- verdicts on the sample models -----------------------------------------------------------

@pytest.mark.parametrize("precision", ["FP32", "FP16", "INT8"])
def test_digits_cnn_engines_build_in_every_precision(precision):
    converter = converter_for("digits_cnn", precision_mode=precision)
    verdicts = converter.tensorrt_verdicts()
    assert len(verdicts) == len(converter.result.engines) == 2
    for verdict in verdicts.values():
        assert verdict.built, verdict.error
        assert verdict.precision == precision and verdict.plan_bytes > 10_000
        assert verdict.layers >= 1 and verdict.build_s > 0
    table = converter.report.engines
    assert table["tensorrt_built"].tolist() == [True, True]
    assert (table["tensorrt_plan_bytes"] > 0).all()
    document = converter.report.to_dict()
    assert all(list(e["tensorrt"]) == list(JSON_KEYS) for e in document["engines"])


def test_dynamic_shape_verdicts_use_the_profiles_build_made():
    converter = converter_for("digits_cnn", use_dynamic_shape=True)
    x = sample_models.data("digits_cnn")["x_calib"]
    converter.build(lambda: iter([(x[:2],), (x[:6],)]))  # Range: batch 2 to 6
    verdicts = converter.tensorrt_verdicts()
    first = verdicts["TRTEngineOp_000_000"]
    assert first.built and first.profiles == ("[2-6, 8, 8, 1]",), first


def test_resnet50_engine_builds_with_the_implicit_batch_profile():
    converter = converter_for("resnet50")
    x = np.zeros((4, 224, 224, 3), np.float32)
    (verdict,) = converter.tensorrt_verdicts(lambda: iter([(x,)])).values()
    assert verdict.built, verdict.error
    assert verdict.profiles == ("[1-4, 224, 224, 3]",)  # TF-TRT's implicit batch: 1..max
    assert verdict.plan_bytes > 50_000_000  # ResNet-50's weights are in the plan


def test_tiny_bert_dynamic_shape_verdicts_carry_tensorrts_reasons():
    converter = converter_for("tiny_bert", use_dynamic_shape=True)
    verdicts = converter.tensorrt_verdicts()
    assert len(verdicts) == len(converter.result.engines)
    einsum = {e.name for e in converter.result.engines if "Einsum" in e.native_ops}
    assert einsum and any(v.built for v in verdicts.values())
    for name, verdict in verdicts.items():
        assert verdict.built == (verdict.error is None)
        if name in einsum and not verdict.built:  # until the exporter lowercases subscripts
            assert verdict.parsed is False
            assert "Invalid character(s) in Einsum equation" in verdict.error
    assert all("-" in " ".join(v.profiles) for v in verdicts.values())  # batch ranges 1-8


def test_an_engine_inside_map_fns_loop_gets_a_verdict():
    from workbench.engines.runtime.hybrid_graph import engines_in_loops

    converter = converter_for("map_fn_cnn")
    converted = converter._converted_func
    inside = engines_in_loops(converted.graph.converted_graph_def) & set(converted.ops)
    assert inside, "map_fn_cnn's loop body should hold an engine"
    verdicts = engine_verdicts(converted, generated_input_sets(converter.session,
                                                                   converted.input_names))
    assert set(verdicts) == set(converted.ops) and inside <= set(verdicts)
    assert all(verdicts[name].built for name in inside), [verdicts[n].error for n in inside]


def _zero_trip_loop_model(path) -> None:
    """An engine in a while-loop body that inputs below 100 run zero times (Model Garden
    RetinaNet's 6 unbuilt engines had this property: generated inputs never reach them)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w1, w2 = (tf.constant(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(2))

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
        def serve(self, x):
            trips = tf.reduce_sum(tf.cast(x > 100.0, tf.int32))

            def body(i, acc):
                return i + 1, tf.nn.relu(tf.matmul(tf.nn.relu(tf.matmul(acc, w1)), w2)) + acc

            _, y = tf.while_loop(lambda i, _: i < trips, body, [tf.constant(0), x])
            return {"y": tf.nn.relu(tf.matmul(y, w1)) * 2.0}

    model = Model()
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})


def test_an_engine_no_input_set_reaches_gets_a_verdict_from_its_static_shapes(tmp_path):
    """Dynamic-shape mode (implicit batch makes no engine in a loop body)."""
    from workbench.engines.runtime.hybrid_graph import engines_in_loops

    _zero_trip_loop_model(tmp_path / "model")
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(tmp_path / "model"),
                                        use_dynamic_shape=True, minimum_segment_size=2)
    converter.convert()
    converted = converter._converted_func
    inside = engines_in_loops(converted.graph.converted_graph_def) & set(converted.ops)
    assert inside, "the loop body should hold an engine"
    sets = generated_input_sets(converter.session, converted.input_names)
    shapes = converted.engine_shape_sets(sets)
    assert all(shapes[name] == [] for name in inside)  # the sets never reach it
    verdicts = converter.tensorrt_verdicts()
    for name in inside:
        assert verdicts[name].built, verdicts[name].error
        # unknown dims from 1 to the largest generated batch (8), known ones as they are
        assert verdicts[name].profiles[0].startswith("[1-8, 8]"), verdicts[name].profiles


# --- the CLI contract --------------------------------------------------------------------------

def test_cli_json_carries_a_tensorrt_object_per_engine(tmp_path):
    done = run_cli("convert", str(sample_models.build("digits_cnn")), "--json", "--tensorrt",
                   env={"WORKBENCH_CACHE_DIR": str(tmp_path)})  # a real build, no cached one
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    for engine in document["engines"]:
        verdict = engine["tensorrt"]
        assert list(verdict) == list(JSON_KEYS)
        assert verdict["parsed"] is True and verdict["built"] is True
        assert verdict["error"] is None and verdict["plan_bytes"] > 0
        assert isinstance(verdict["build_s"], float) and verdict["layers"] >= 1
        assert verdict["builder"] == "TensorRT-RTX 1.7.1.116"


def test_cli_without_tensorrt_rtx_exits_2_saying_how_to_install_it(tmp_path):
    # The module made unimportable, as on a machine without the package.
    script = ("import sys; sys.modules['tensorrt_rtx'] = None; "
              "from workbench.cli import main; sys.exit(main(sys.argv[1:]))")
    import subprocess

    from tests.conftest import REPO, user_environment

    done = subprocess.run(
        [sys.executable, "-c", script, "convert", str(sample_models.build("quickstart_mlp")),
         "--json", "--tensorrt"], capture_output=True, text=True, cwd=REPO,
        env=user_environment(), timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert 'pip install "tftrt-workbench[tensorrt]"' in lines[0]
    assert "pip install tensorrt-rtx" in lines[0]


# --- tuning trials and the doctor ----------------------------------------------------------------

def test_a_tuning_trial_carries_tensorrts_verdict():
    from workbench.tuning.record import TrialRecord
    from workbench.tuning.trial import TrialSpec, run_trial
    from workbench.tuning.tune_result import _table

    spec = TrialSpec("t", str(sample_models.build("digits_cnn")), {"precision_mode": "FP16"},
                     validate=False, time_latency=False, tensorrt=True)
    record = run_trial(spec)
    assert record.status == "ok", record.reason
    assert record.tensorrt_built == "2/2"
    assert TrialRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert _table([record])["tensorrt_built"].tolist() == ["2/2"]


def test_doctor_names_the_builder_and_why_it_cannot_run_engines_here():
    from workbench.diagnosis import doctor

    finding = doctor(smoke=False).get("TensorRT-RTX")
    assert finding is not None and finding.state == "ok"
    assert finding.detail.startswith("1.7.1.116: builds plans here")
    if NO_GPU:
        assert "cannot run engines here: no NVIDIA GPU" in finding.detail
    assert "untested" in finding.detail


# --- where the verdicts are shown: the app's Summary tab and the HTML report -------------------

def test_the_apps_summary_tab_shows_verdicts_for_the_settings_they_were_made_for(tmp_path):
    from workbench.conversion.session import ConversionSession
    from workbench.ui import Workbench
    from workbench.viz.html_report import html_report

    app = Workbench(sample_models.build("detector"), store=tmp_path / "runs", background=False)
    assert "TensorRT built" not in app.summary_tab.html.value
    app.check_tensorrt()
    # At the top of the tab, above the advice: the engine table's columns are far right.
    assert "TensorRT-RTX 1.7.1.116 builds 3 of 3 engines" in app.summary_tab.verdict.value
    assert app.summary_tab.widget.children.index(app.summary_tab.verdict) == 1
    assert "TensorRT built" in app.summary_tab.html.value
    assert app.report.engines["tensorrt_built"].all()
    verdicts = next(iter(app.tensorrt.values()))
    app.set_params({"minimum_segment_size": 5})  # other settings: their verdicts are not made
    assert "TensorRT built" not in app.summary_tab.html.value
    assert app.summary_tab.verdict.value == ""  # no stale verdict beside other settings
    app.set_params({"minimum_segment_size": 3})
    assert "builds 3 of 3 engines" in app.summary_tab.verdict.value
    page = html_report(ConversionSession.open(sample_models.build("detector")),
                       app.params.__class__(), tensorrt=verdicts)
    assert "TensorRT&#x27;s verdict" in page and "TensorRT-RTX 1.7.1.116" in page


def test_engines_inside_a_tftrt_convert_function_get_verdicts_at_its_precision(tmp_path):
    from tests.conversion.test_function_conversion import ATTRS, _saved

    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path / "m", ATTRS),
                                        minimum_segment_size=5)
    converter.convert()
    verdicts = converter.tensorrt_verdicts()
    inside = verdicts["TRTEngineOp_001_000"]  # the function's engine, FP16 by its attributes
    assert inside.built and inside.precision == "FP16", inside.error
    (function,) = converter.report.to_dict()["functions"]
    (engine,) = function["engines"]
    assert engine["tensorrt"] == inside.to_json()
    assert converter.report.function_engines["tensorrt_built"].tolist() == [True]


def test_the_verdict_box_names_each_engine_tensorrt_refuses():
    from workbench.ui.tabs import verdict_html

    box = verdict_html({
        "TRTEngineOp_000_000": {"parsed": True, "built": True, "builder": "TensorRT-RTX 1.7"},
        "TRTEngineOp_000_001": {"parsed": False, "built": False, "error": "no importer for X\nat"},
    })
    assert "TensorRT-RTX 1.7 builds 1 of 2 engines" in box and "wb-verdict-fails" in box
    assert "<code>TRTEngineOp_000_001</code>: parse failed (no importer for X)" in box
    assert "TRTEngineOp_000_000</code>" not in box
