"""Engine backends: the ONNX Runtime backend for real, TensorRT's pure helpers, the registry."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.engines.backends.base import (
    BackendUnavailableError,
    CalibrationDataError,
    EngineBuildError,
    available_backends,
    backend_status,
    get_backend,
)
from workbench.engines.backends.onnxruntime_backend import OnnxRuntimeBackend
from workbench.engines.profiles import Profile
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.errors import WorkbenchError

RNG = np.random.default_rng(7)
# FP16 tolerance: float16 keeps 11 significant bits (relative step 2**-11 ~ 5e-4); a few layers
# of rounding stay well inside 1e-2 absolute plus 1e-2 relative on these O(1) outputs.
FP16_ATOL = FP16_RTOL = 1e-2


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def conv_model() -> onnx.ModelProto:
    """Conv + Relu + Reshape + MatMul + Add + Softmax, nodes named like TF nodes."""
    inits = [
        _init("w", RNG.normal(size=(4, 3, 3, 3)).astype(np.float32)),
        _init("b", RNG.normal(size=(4,)).astype(np.float32)),
        _init("m", (RNG.normal(size=(256, 5)) / 16).astype(np.float32)),
        _init("bias", RNG.normal(size=(5,)).astype(np.float32)),
        _init("shape", np.array([-1, 256], np.int64)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="net/conv/Conv2D", pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"], name="net/conv/Relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="net/flatten/Reshape"),
        helper.make_node("MatMul", ["f", "m"], ["d"], name="net/dense/MatMul"),
        helper.make_node("Add", ["d", "bias"], ["l"], name="net/dense/BiasAdd"),
        helper.make_node("Softmax", ["l"], ["y"], name="net/softmax/Softmax"),
    ]
    graph = helper.make_graph(
        nodes, "segment", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fp32_only_model() -> onnx.ModelProto:
    """Mul, then TopK (kept in float32) and Resize (float32 scales) side by side."""
    inits = [_init("scale", np.float32(1.5) * np.ones((1, 1, 4, 4), np.float32)),
             _init("k", np.array([3], np.int64)),
             _init("scales", np.array([1, 1, 2, 2], np.float32))]
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["s"], name="scale/Mul"),
        helper.make_node("TopK", ["s", "k"], ["top", "idx"], name="top/TopKV2"),
        helper.make_node("Resize", ["s", "", "scales"], ["up"], name="up/Resize", mode="nearest"),
    ]
    graph = helper.make_graph(
        nodes, "segment", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4, 4])],
        [helper.make_tensor_value_info("top", TensorProto.FLOAT, [2, 1, 4, 3]),
         helper.make_tensor_value_info("up", TensorProto.FLOAT, [2, 1, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def plain_run(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The model run as is: default session, no workbench code."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = 10
    session = ort.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs, strict=True)))


def calibration(n: int = 6, batch: int = 4) -> tuple[tuple[np.ndarray, ...], ...]:
    return tuple((RNG.normal(size=(batch, 3, 8, 8)).astype(np.float32),) for _ in range(n))


@pytest.fixture(scope="module")
def backend() -> OnnxRuntimeBackend:
    return OnnxRuntimeBackend()


def x_input(batch: int = 2) -> np.ndarray:
    return RNG.normal(size=(batch, 3, 8, 8)).astype(np.float32)


# --- registry ---

def test_registry_picks_onnxruntime_without_tensorrt():
    assert available_backends() == ["onnxruntime"]
    chosen = get_backend()
    assert chosen.name == "onnxruntime" and chosen.device.startswith("CPU")
    ok, reason = backend_status()["tensorrt"]
    assert not ok and "tensorrt" in reason
    with pytest.raises(BackendUnavailableError, match="'tensorrt' is not available here"):
        get_backend("tensorrt")
    with pytest.raises(WorkbenchError, match="unknown backend 'cuda'"):
        get_backend("cuda")


def test_engine_settings_check_precision_and_requests_the_batch_size():
    assert EngineSettings("fp16").precision_mode == "FP16"
    with pytest.raises(WorkbenchError, match="precision mode 'FP8' is not supported"):
        EngineSettings("FP8")
    with pytest.raises(WorkbenchError, match="max_batch_size"):
        BuildRequest(max_batch_size=0)


# --- ONNX Runtime: precisions ---

def test_fp32_equals_the_plain_onnx_run(backend):
    model, x = conv_model(), x_input(3)
    engine = backend.build(model, EngineSettings(), "TRTEngineOp_000_000")
    (out,) = engine.run([x])
    (expected,) = plain_run(model, [x])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert (engine.name, engine.backend, engine.precision) == (
        "TRTEngineOp_000_000", "onnxruntime", "FP32")
    assert engine.device == backend.device


def test_sessions_do_not_spin_between_runs_and_share_one_arena(backend):
    """TF runs between engines on the same cores: ORT's idle threads must not spin there. A
    session's own memory arena would keep its largest run's activations, one per engine."""
    engine = backend.build(conv_model(), EngineSettings(), "TRTEngineOp_000_000")
    options = engine._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == backend.threads >= 1
    assert options.get_session_config_entry("session.use_env_allocators") == "1"


def test_fp32_matches_numpy_reference(backend):
    """Independent of ORT: the dense half of the model computed with numpy."""
    w, bias = RNG.normal(size=(6, 4)).astype(np.float32), np.arange(4, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["d"], name="dense/MatMul"),
         helper.make_node("Add", ["d", "b"], ["a"], name="dense/BiasAdd"),
         helper.make_node("Relu", ["a"], ["y"], name="dense/Relu")],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [_init("w", w), _init("b", bias)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = RNG.normal(size=(5, 6)).astype(np.float32)
    (out,) = backend.build(model, EngineSettings(), "mlp").run([x])
    np.testing.assert_allclose(out, np.maximum(x @ w + bias, 0), rtol=1e-5, atol=1e-5)


def test_fp16_is_close_and_computes_in_half_precision(backend):
    model, x = conv_model(), x_input(4)
    engine = backend.build(model, EngineSettings("FP16"), "e")
    (out,) = engine.run([x])
    (expected,) = plain_run(model, [x])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=FP16_RTOL, atol=FP16_ATOL)
    # ONNX Runtime's CPU provider computes float16 in float32: the weights hold float16
    # values and every tensor is rounded through float16 where it is made (TensorRT's storage).
    floats = [numpy_helper.to_array(t) for t in engine.model.graph.initializer
              if t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    assert floats and all(np.array_equal(w, w.astype(np.float16)) for w in floats)
    rounded = {n.input[0] for n in engine.model.graph.node
               if n.op_type == "Cast" and n.attribute[0].i == TensorProto.FLOAT16}
    assert all(o in rounded for n in engine.model.graph.node if n.op_type == "Conv"
               for o in n.output)
    io = [*engine.model.graph.input, *engine.model.graph.output]
    assert all(v.type.tensor_type.elem_type == TensorProto.FLOAT for v in io)
    assert not np.array_equal(out, plain_run(model, [x])[0])  # really rounded somewhere


def test_fp16_keeps_float32_only_ops_and_inputs(backend):
    model = fp32_only_model()
    x = RNG.normal(size=(2, 1, 4, 4)).astype(np.float32)
    engine = backend.build(model, EngineSettings("FP16"), "e")
    for out, expected in zip(engine.run([x]), plain_run(model, [x]), strict=True):
        np.testing.assert_allclose(out, expected, rtol=FP16_RTOL, atol=FP16_ATOL)
    nodes = {n.name: n for n in engine.model.graph.node}
    casts = {o: n for n in engine.model.graph.node if n.op_type == "Cast" for o in n.output}
    topk_in = casts[nodes["top/TopKV2"].input[0]]
    assert topk_in.attribute[0].i == TensorProto.FLOAT  # cast back to float32 for TopK
    assert nodes["up/Resize"].input[2] == "scales"  # scales stay float32, uncast
    assert {t.name: t.data_type for t in engine.model.graph.initializer}["scales"] == \
        TensorProto.FLOAT


def test_int8_quantizes_statically_and_stays_close(backend):
    model, x = conv_model(), x_input(4)
    engine = backend.build(model, EngineSettings("INT8"), "e",
                           BuildRequest(calibration_data=calibration()))
    ops = {n.op_type for n in engine.model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    (out,) = engine.run([x])
    (expected,) = plain_run(model, [x])
    assert np.abs(out - expected).max() < 0.1  # softmax probabilities
    assert (out.argmax(1) == expected.argmax(1)).mean() >= 0.75


def test_batch_norm_scale_is_folded_into_conv_before_lower_precision(backend):
    """Folded first, then FP16/INT8 (a Q/DQ pair between Conv and its scale blocks folding)."""
    model = conv_model()
    scale = _init("bn/scale", RNG.uniform(0.5, 2.0, size=(1, 4, 1, 1)).astype(np.float32))
    model.graph.initializer.append(scale)
    model.graph.node[0].output[0] = "c0"
    model.graph.node.insert(1, helper.make_node("Mul", ["c0", "bn/scale"], ["c"],
                                                name="net/bn/mul"))
    x = np.random.default_rng(3).normal(size=(4, 3, 8, 8)).astype(np.float32)
    (expected,) = plain_run(model, [x])
    for precision, data in (("FP16", ()), ("INT8", calibration())):
        engine = backend.build(model, EngineSettings(precision), "TRTEngineOp_000_000",
                               BuildRequest(calibration_data=data))
        assert "Mul" not in {n.op_type for n in engine.model.graph.node}, precision
        (out,) = engine.run([x])
        # Softmax outputs: INT8 rounding through two layers moves probabilities by ~0.1.
        np.testing.assert_allclose(out, expected, atol=0.15 if precision == "INT8" else 1e-2)


def test_calibration_errors_come_before_any_work(backend):
    broken = conv_model()
    broken.graph.node[1].op_type = "NoSuchOp"  # any build attempt would fail on this
    mixed = (calibration(1, batch=4)[0], calibration(1, batch=2)[0])
    with pytest.raises(CalibrationDataError, match="mixed shapes: batch 0 is"):
        backend.build(broken, EngineSettings("INT8"), "e", BuildRequest(calibration_data=mixed))
    with pytest.raises(CalibrationDataError, match="needs calibration data"):
        backend.build(broken, EngineSettings("INT8"), "e")
    pair = ((x_input(), x_input()),)
    with pytest.raises(CalibrationDataError, match="has 2 tensors; the engine has 1 inputs"):
        backend.build(broken, EngineSettings("INT8"), "e", BuildRequest(calibration_data=pair))
    assert not issubclass(CalibrationDataError, EngineBuildError)  # no silent fallback
    with pytest.raises(EngineBuildError, match="could not build INT8 engine 'e'"):
        backend.build(broken, EngineSettings("INT8"), "e",
                      BuildRequest(calibration_data=calibration(2)))


def test_run_checks_the_number_of_inputs(backend):
    engine = backend.build(conv_model(), EngineSettings(), "e")
    with pytest.raises(WorkbenchError, match="takes 1 inputs"):
        engine.run([x_input(), x_input()])
    with pytest.raises(EngineBuildError, match="failed"):  # wrong shape: runtime falls back
        engine.run([np.zeros((1, 3, 5, 5), np.float32)])


# --- serialization ---

@pytest.mark.parametrize("precision", ["FP32", "FP16", "INT8"])
def test_serialize_round_trip_without_rebuilding(backend, precision):
    request = BuildRequest(calibration_data=calibration() if precision == "INT8" else ())
    engine = backend.build(conv_model(), EngineSettings(precision), "e", request)
    data = engine.serialize()
    again = backend.deserialize(data, "e")
    x = x_input(3)
    np.testing.assert_array_equal(again.run([x])[0], engine.run([x])[0])
    assert again.precision == precision
    # The bytes carry the converted model: nothing is converted or calibrated again.
    assert again.model.SerializeToString() == engine.model.SerializeToString()


def test_engine_files_hold_what_serialize_returns(backend, tmp_path):
    engine = backend.build(conv_model(), EngineSettings(), "e")
    engine.write(tmp_path / "e.engine")  # the ORT engine streams header, then model
    assert (tmp_path / "e.engine").read_bytes() == engine.serialize()
    assert backend.deserialize((tmp_path / "e.engine").read_bytes(), "e").run([x_input(2)])


def test_damaged_serialized_engines_are_clear_errors(backend):
    data = backend.build(conv_model(), EngineSettings(), "e").serialize()
    with pytest.raises(EngineBuildError, match="missing workbench header"):
        backend.deserialize(b"garbage", "e")
    with pytest.raises(EngineBuildError, match="damaged serialized onnxruntime engine 'e'"):
        backend.deserialize(data[: len(data) // 2], "e")
    with pytest.raises(EngineBuildError, match="serialized by 'tensorrt'"):
        backend.deserialize(data.replace(b'"onnxruntime"', b'"tensorrt"', 1), "e")


# --- per-layer timings ---

def _optimized_node_count(model: onnx.ModelProto, tmp_path) -> int:
    """What ORT runs, saved by ORT itself with the backend's optimisation level."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = 10
    ort.InferenceSession(copy.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return len(onnx.load(str(tmp_path / "optimized.onnx")).graph.node)


def test_layer_timings_one_row_per_ort_node(backend, tmp_path):
    model = conv_model()
    engine = backend.build(model, EngineSettings(), "TRTEngineOp_000_000")
    table = engine.layer_timings([x_input(2)], runs=4)
    assert len(table) == _optimized_node_count(model, tmp_path)
    assert table["layer"].is_unique
    assert (table["avg_ms"] > 0).all() and (table["median_ms"] > 0).all()
    assert set(table["source"]) == {"onnxruntime"}
    assert set(table["device"]) == {backend.device}
    assert set(table["engine"]) == {"TRTEngineOp_000_000"}
    assert set(table["run"]) == {"TRTEngineOp_000_000 FP32"}
    assert set(table["precision"]) == {"FP32"}
    assert table["pct"].sum() == pytest.approx(100.0)
    # Every TF node is accounted for, fused or not, and names map back exactly.
    covered = {n for nodes in table["tf_nodes"] for n in nodes}
    assert covered == {n.name for n in model.graph.node}
    by_layer = dict(zip(table["layer"], table["tf_nodes"], strict=True))
    assert by_layer["net/softmax/Softmax"] == ["net/softmax/Softmax"]


def test_int8_layer_timings_report_int8_kernels(backend):
    engine = backend.build(conv_model(), EngineSettings("INT8"), "e",
                           BuildRequest(calibration_data=calibration()))
    table = engine.layer_timings([x_input(2)], runs=2, run="digits INT8")
    assert "INT8" in set(table["precision"])
    assert set(table["run"]) == {"digits INT8"}
    assert any("net/conv/Conv2D" in nodes for nodes in table["tf_nodes"])


# --- the Engine protocol ---

def test_engine_activates_deactivates_and_infers_by_name(backend):
    engine = backend.build(conv_model(), EngineSettings(), "e")
    x = x_input(2)
    assert engine.is_active  # built ready to run
    (want,) = engine.run([x])
    engine.deactivate()
    with pytest.raises(WorkbenchError, match="engine 'e' is not active: call activate"):
        engine.run([x])
    with engine as active:
        got = active.infer({engine.input_names[0]: x})
    assert not engine.is_active and list(got) == engine.output_names
    np.testing.assert_array_equal(got[engine.output_names[0]], want)
    engine.activate()
    with pytest.raises(WorkbenchError, match="missing"):
        engine.infer({})
    with pytest.raises(WorkbenchError, match="takes 1 inputs"):
        engine.run([x, x])


def test_every_backend_engine_implements_the_whole_protocol():
    from workbench.engines.backends.base import Engine, EngineBase
    from workbench.engines.backends.onnxruntime_backend import OrtEngine
    from workbench.engines.backends.tensorrt_backend import TensorRTEngine

    members = {name for name in dir(Engine) if not name.startswith("_")} - {"name", "device",
                                                                          "precision"}
    for engine_class in (OrtEngine, TensorRTEngine):
        assert issubclass(engine_class, EngineBase)
        assert all(hasattr(engine_class, m) for m in members - {"input_names", "output_names"})
        for hook in ("_activate", "_deactivate", "_run"):
            assert getattr(engine_class, hook) is not getattr(EngineBase, hook), hook


# --- TensorRT and TF-TRT, which cannot run here ---

def test_tensorrt_helpers():
    from workbench.engines.backends import tensorrt_backend as trt_backend

    assert trt_backend.precision_flags("FP32") == ()
    assert trt_backend.precision_flags("fp16") == ("FP16",)
    assert trt_backend.precision_flags("INT8") == ("FP16", "INT8")  # as TF-TRT set them
    profile = Profile(min=((1, 128), (1, 3)), opt=((4, 256), (4, 3)), max=((8, 384), (8, 3)))
    assert trt_backend.profile_shapes(profile, 0) == ((1, 128), (4, 256), (8, 384))
    assert trt_backend.profile_shapes(profile, 1) == ((1, 3), (4, 3), (8, 3))
    implicit = trt_backend.implicit_batch_profile(16, [(-1, 224, 224, 3), (-1, 10)])
    assert implicit.min == ((1, 224, 224, 3), (1, 10))
    assert implicit.opt == implicit.max == ((16, 224, 224, 3), (16, 10))
    with pytest.raises(EngineBuildError, match="non-batch dimension"):
        trt_backend.implicit_batch_profile(4, [(-1, -1, 3)])
    # Layer precision from the inspector's output formats, as trtexec's layer info spells them.
    fmt = "Thirty-two wide channel vectorized row major Int8 format"
    assert trt_backend._layer_precision({"Outputs": [{"Format/Datatype": fmt}]}) == "INT8"
    assert trt_backend._layer_precision(
        {"Outputs": [{"Format/Datatype": "Row major linear FP32"}]}) == "FP32"
    assert trt_backend._layer_precision({"Name": "reformatter"}) is None
    ok, reason = trt_backend.status()
    assert not ok and reason == "the tensorrt Python package is not installed"


# --- real segments of digits_cnn ---

@pytest.fixture(scope="module")
def digits_engines():
    """The digits_cnn segments as ONNX, with the calibration and test split."""
    export = pytest.importorskip("workbench.engines.onnx.segment_export")
    import sample_models
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession
    from workbench.engines.segment import extract_segment

    # Prepared for the CPU: between its two segments TF only flattens (`_run_chain` does it
    # with numpy, from the first segment's one output). Prepared for a GPU, the first segment
    # has two outputs, the NCHW pool and its NHWC Transpose, and TF flattens the latter with a
    # shape read off the former through a DataFormatVecPermute (the T4 graph's engines are
    # checked through the hybrid runtime in tests/graph/test_gpu_preparation.py).
    session = ConversionSession.open(sample_models.build("digits_cnn"), prepare_for="cpu")
    result = session.convert(ConversionParams())
    prepared = session.prepared("FP32")
    models = [export.export_onnx(extract_segment(prepared, e)) for e in result.engines]
    return models, result.engines, sample_models.data("digits_cnn")


def _run_chain(backend, models, engines, data, precision):
    """Builds every segment's engine (INT8 calibrated on x_calib) and runs them in a chain;
    between the segments TF only flattens, which numpy's reshape does here."""
    calib, x = data["x_calib"].astype(np.float32), data["x_test"].astype(np.float32)
    for model, info in zip(models, engines, strict=True):
        batches = tuple((calib[i:i + 32],) for i in range(0, len(calib), 32))
        engine = backend.build(model, EngineSettings(precision), info.name,
                               BuildRequest(calibration_data=batches))
        x, calib = engine.run([x])[0], engine.run([calib])[0]
        x, calib = x.reshape(len(x), -1), calib.reshape(len(calib), -1)
    return x


@pytest.mark.slow
def test_digits_segments_in_every_precision(backend, digits_engines):
    models, engines, data = digits_engines
    labels = data["y_test"]
    fp32 = _run_chain(backend, models, engines, data, "FP32")
    fp16 = _run_chain(backend, models, engines, data, "FP16")
    int8 = _run_chain(backend, models, engines, data, "INT8")
    top1 = {p: float((out.argmax(1) == labels).mean())
            for p, out in [("FP32", fp32), ("FP16", fp16), ("INT8", int8)]}
    assert top1["FP32"] >= 0.95
    scale = np.abs(fp32).max()
    np.testing.assert_allclose(fp16, fp32, atol=FP16_ATOL * scale)
    assert top1["FP16"] == top1["FP32"]
    assert top1["INT8"] >= top1["FP32"] - 0.01  # the INT8 budget: <= 1 point of top-1


@pytest.mark.slow
def test_digits_fp32_segment_equals_plain_run_and_maps_to_tf_nodes(backend, digits_engines):
    models, engines, data = digits_engines
    x = data["x_test"][:16].astype(np.float32)
    engine = backend.build(models[0], EngineSettings(), engines[0].name)
    np.testing.assert_allclose(engine.run([x])[0], plain_run(models[0], [x])[0],
                               rtol=1e-5, atol=1e-5)
    table = engine.layer_timings([x], runs=2)
    mapped = {n for nodes in table["tf_nodes"] for n in nodes}
    # TF node names of the segment (the exporter's layout helpers folded into their op), plus
    # TF-TRT's output placeholder that the segment graph ends in.
    assert mapped - set(engines[0].nodes) == {"TensorRTOutputPH_0"}
    ops = {name.rsplit("/", 1)[-1] for name in mapped}
    assert {"Relu", "MaxPool2d", "mul_1", "add_1"} <= ops  # conv (BN folded), bias, relu, pool


def test_ort_created_node_names_point_back_to_source_nodes():
    from workbench.engines.backends.onnxruntime_backend import _named_node

    conv = helper.make_node("Conv", ["x", "w"], ["net/conv:nchw"], name="net/conv")
    mul = helper.make_node("Mul", ["net/conv:nchw", "s"], ["net/bn/mul_1"], name="net/bn/mul_1")
    relu = helper.make_node("Relu", ["net/bn/mul_1"], ["r"], name="net/relu")
    by_name = {n.name: n for n in (conv, mul, relu)}
    producer = {o: n for n in (conv, mul, relu) for o in n.output}
    cases = {
        "net/bn/mul_1_token_1_mul_nchwc": "net/bn/mul_1",  # node name + ORT suffixes
        "net/conv:nchw_nchwc": "net/conv",  # tensor name -> its producer
        "InsertedPrecisionFreeCast_r_nchwc": "net/relu",  # inserted cast around tensor r
        "net/relu": "net/relu",
    }
    for ort_name, source in cases.items():
        assert _named_node(ort_name, by_name, producer).name == source, ort_name
    assert _named_node("ReorderOutput_token_9", by_name, producer) is None
