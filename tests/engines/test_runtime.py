"""The converted model at run time: engine cache, engine selection, native fallback, build,
save and load (TF-TRT's TRTEngineOp kernel and TrtGraphConverterV2.build/save)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sample_models
import workbench
from workbench import trt_convert as trt
from workbench.engines.profiles import optimization_profiles
from workbench.engines.runtime.engine_op import (
    EngineOp,
    NativeExecutionDisallowedError,
    compatible_key,
)
from workbench.engines.runtime.saving import FORMAT, MANIFEST, DamagedModelError
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.engines.weights import SMALL_CONST
from workbench.errors import WorkbenchError

# --- a tiny segment, y = 2x + 1, with an honest numpy engine ---------------------------------


class AffineEngine:
    """Implements the Engine protocol for the segment y = 2x + 1 and checks its own limits."""

    backend, device = "numpy", "cpu"

    def __init__(self, name: str, spec: dict[str, Any]):
        self.name, self.spec, self.precision = name, spec, spec["precision"]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        (x,) = inputs
        batch = self.spec["max_batch_size"]
        if batch is not None and x.shape[0] > batch:
            raise RuntimeError(f"batch {x.shape[0]} exceeds the engine's {batch}")
        return [2 * x + 1]

    def serialize(self) -> bytes:
        return repr(self.spec).encode()


def native_affine(inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [inputs[0] * 2.0 + 1.0]


def make_op(fail: bool = False, **settings: Any) -> tuple[EngineOp, list[dict[str, Any]]]:
    builds: list[dict[str, Any]] = []
    engine_settings = EngineSettings(**settings)

    def build_engine(request: BuildRequest) -> AffineEngine:
        spec = {"precision": engine_settings.precision_mode, **vars(request)}
        builds.append(spec)
        if fail:
            raise RuntimeError("forced build failure (like TF_TRT_ABORT_CUDA_ENGINE_BUILD)")
        return AffineEngine("TRTEngineOp_000_000", spec)

    op = EngineOp("TRTEngineOp_000_000", build_engine, native_affine, ["float32"],
                  engine_settings)
    return op, builds


def ones(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def test_implicit_batch_engine_serves_smaller_batches_with_equal_other_dims() -> None:
    op, builds = make_op(maximum_cached_engines=3)
    np.testing.assert_array_equal(op(ones(8, 4))[0], 3 * ones(8, 4))
    op(ones(4, 4))
    op(ones(1, 4))
    assert [b["max_batch_size"] for b in builds] == [8]
    op(ones(16, 4))  # larger batch: a new engine
    op(ones(8, 5))  # other dim differs: a new engine
    assert [b["max_batch_size"] for b in builds] == [8, 16, 8]
    assert op.stats.engine_calls == 5 and op.stats.native_calls == 0


def test_compatible_engine_is_the_smallest_batch_that_fits() -> None:
    keys = [((16, 4),), ((8, 4),), ((32, 4),)]
    assert compatible_key(keys, ((5, 4),)) == ((8, 4),)
    assert compatible_key(keys, ((9, 4),)) == ((16, 4),)
    assert compatible_key(keys, ((33, 4),)) is None
    assert compatible_key(keys, ((2, 5),)) is None


def test_engine_cache_is_lru_bounded_by_maximum_cached_engines() -> None:
    op, builds = make_op(maximum_cached_engines=2)
    op(ones(1, 4))
    op(ones(1, 5))
    op(ones(1, 4))  # touch [1,4]: [1,5] becomes least recently used
    op(ones(1, 6))  # evicts [1,5]
    assert op.cache.keys() == [((1, 4),), ((1, 6),)]
    op(ones(1, 5))  # rebuilt, evicting [1,4]
    assert len(builds) == 4
    assert op.cache.keys() == [((1, 6),), ((1, 5),)]
    assert op.stats.native_calls == 0


@pytest.mark.parametrize("strategy, engine_shapes, native_shapes", [
    ("Range", [(8, 128), (4, 384), (6, 200)], [(9, 128), (8, 385)]),
    ("Optimal", [(8, 128), (4, 384)], [(4, 128), (8, 384)]),
    ("Range+Optimal", [(8, 128), (4, 384), (6, 200)], [(2, 100)]),
    ("ImplicitBatchModeCompatible", [(1, 128), (8, 128), (3, 384)], [(6, 384), (4, 200)]),
])
def test_profile_selection_per_strategy(strategy: str, engine_shapes: list, native_shapes: list
                                        ) -> None:
    op, builds = make_op(use_dynamic_shape=True)
    op.profiles = tuple(optimization_profiles([[(8, 128)], [(4, 384)]], strategy))
    for shape in engine_shapes:
        np.testing.assert_array_equal(op(ones(*shape))[0], 3 * ones(*shape))
    assert op.stats.engine_calls == len(engine_shapes)
    for shape in native_shapes:
        np.testing.assert_array_equal(op(ones(*shape))[0], 3 * ones(*shape))
    assert op.stats.native_calls == len(native_shapes)
    assert all("no optimization profile" in run.reason for run in op.native_runs)
    assert len(builds) == 1 and builds[0]["profiles"] == op.profiles  # one engine, all profiles


def test_first_accepting_profile_is_chosen() -> None:
    op, _ = make_op(use_dynamic_shape=True)
    op.profiles = tuple(optimization_profiles([[(8, 128)], [(4, 384)]], "Range+Optimal"))
    assert op.profile_index(((8, 128),)) == 0
    assert op.profile_index(((4, 384),)) == 1
    assert op.profile_index(((5, 300),)) == 2
    assert op.profile_index(((9, 300),)) is None


def test_without_build_the_first_input_makes_a_min_equals_max_profile() -> None:
    op, builds = make_op(use_dynamic_shape=True)
    op(ones(2, 7))
    assert op.profiles[0].describe() == "[2, 7]"
    op(ones(3, 7))
    assert op.stats.native_calls == 1 and len(builds) == 1


def test_failed_build_falls_back_to_native_with_its_reason_and_is_not_retried() -> None:
    op, builds = make_op(fail=True)
    for _ in range(3):
        np.testing.assert_array_equal(op(ones(2, 4))[0], 3 * ones(2, 4))
    assert len(builds) == 1 and op.stats.failed_builds == 1
    assert op.stats.native_calls == 3
    (reason,) = op.fallback_reasons
    assert "engine creation for TRTEngineOp_000_000 failed: forced build failure" in reason


def test_engine_that_fails_to_run_falls_back_to_native() -> None:
    op, _ = make_op()
    op.add_engine(((2, 4),), AffineEngine("e", {"precision": "FP32", "max_batch_size": 1}))
    np.testing.assert_array_equal(op(ones(2, 4))[0], 3 * ones(2, 4))
    assert "failed to run: batch 2 exceeds" in op.native_runs[0].reason


def test_native_execution_can_be_disallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "false")
    op, _ = make_op(fail=True)
    with pytest.raises(NativeExecutionDisallowedError,
                       match="User disallowed engine native segment execution.*forced build"):
        op(ones(2, 4))


def test_allow_build_at_runtime_false_runs_natively_without_building() -> None:
    op, builds = make_op(allow_build_at_runtime=False)
    op(ones(2, 4))
    op(ones(2, 4))
    assert builds == [] and op.stats.native_calls == 2
    assert "allow_build_at_runtime=False" in op.native_runs[0].reason
    op.add_engine(((4, 4),), AffineEngine("e", {"precision": "FP32", "max_batch_size": 4}))
    op(ones(3, 4))  # a loaded engine still serves what it can
    assert op.stats.engine_calls == 1


def test_collecting_shapes_and_calibration_batches_runs_natively() -> None:
    op, builds = make_op()
    for shapes in (True, False):
        op.start_collecting(shapes)
        op(ones(2, 4))
        op(ones(3, 4))
        assert not op.ready_without_fallback
        collected_shapes, collected_batches = op.stop_collecting()
        if shapes:
            assert collected_shapes == [((2, 4),), ((3, 4),)] and collected_batches == []
        else:
            assert [b[0].shape for b in collected_batches] == [(2, 4), (3, 4)]
            assert collected_shapes == []
    assert builds == [] and op.stats.native_calls == 4
    op(ones(2, 4))  # collecting stopped: the engine is built and runs
    assert len(builds) == 1 and op.stats.engine_calls == 1


# --- the converted model on real sample models ------------------------------------------------



def converter_for(name: str, **kwargs: Any) -> trt.TrtGraphConverterV2:
    return trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)),
                                   **kwargs)


def builds_of(model: Any) -> int:
    return sum(op.stats.builds for op in model.ops.values())


def test_user_guide_quickstart_with_one_import_changed(tmp_path: Path) -> None:
    """The user guide's quickstart steps 5-8 (convert, build, save, infer) on quickstart_mlp,
    then the saved model reloaded with its engines and with plain TensorFlow."""
    x_test = sample_models.data("quickstart_mlp")["x_test"]
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("quickstart_mlp")),
        precision_mode=trt.TrtPrecisionMode.FP32,
    )
    trt_func = converter.convert()
    converter.summary(print_fn=lambda line: None)

    MAX_BATCH_SIZE = 128

    def input_fn():
        batch_size = MAX_BATCH_SIZE
        x = x_test[0:batch_size, :]
        yield [x]

    converter.build(input_fn=input_fn)
    assert builds_of(trt_func) == len(converter.result.engines) == 1
    OUTPUT_SAVED_MODEL_DIR = str(tmp_path / "tftrt_saved_model")
    converter.save(output_saved_model_dir=OUTPUT_SAVED_MODEL_DIR)

    native = converter.session.loaded
    infer_batch_size = MAX_BATCH_SIZE // 2
    for i in range(3):
        x = x_test[i * infer_batch_size:(i + 1) * infer_batch_size, :]
        np.testing.assert_allclose(trt_func(x)["logits"], native(x)["logits"], atol=1e-4)
    op = trt_func.ops["TRTEngineOp_000_000"]
    assert op.stats.native_calls == 0 and builds_of(trt_func) == 1  # batch 64 <= 128: reused

    reloaded = workbench.load(OUTPUT_SAVED_MODEL_DIR)
    x = x_test[:64]
    np.testing.assert_allclose(reloaded(x)["logits"], trt_func(x)["logits"], atol=1e-6)
    assert builds_of(reloaded) == 0 and reloaded.ops["TRTEngineOp_000_000"].stats.engine_calls

    plain = tf.saved_model.load(OUTPUT_SAVED_MODEL_DIR).signatures["serving_default"]
    np.testing.assert_allclose(plain(**{reloaded.input_names[0]: tf.constant(x)})["logits"],
                               native(x)["logits"], atol=1e-5)


def saved_graph(directory: Path) -> Any:
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((directory / "saved_model.pb").read_bytes())
    return proto.meta_graphs[0].graph_def


def test_saved_model_keeps_each_segment_as_a_function_named_after_its_engine(
        tmp_path: Path) -> None:
    converter = converter_for("digits_cnn")
    converter.convert()
    converter.save(str(tmp_path / "out"))
    functions = {f.signature.name: f for f in saved_graph(tmp_path / "out").library.function}
    for engine in converter.result.engines:
        native = functions[f"{engine.name}_native_segment"]
        # The segment's large weights are its trailing arguments, fed from variables.
        weights = [a.name for a in native.signature.input_arg
                   if a.name.startswith("TensorRTWeightPH_")]
        missing = set(engine.nodes) - {n.name for n in native.node_def}
        assert len(missing) == len(weights) > 0


def test_saved_graphs_leave_the_weights_to_the_checkpoint_and_the_engines(
        tmp_path: Path) -> None:
    """Each weight is on disk twice at most: in the checkpoint and in its engine."""
    x = sample_models.data("digits_cnn")["x_test"][:8]
    converter = converter_for("digits_cnn")
    func = converter.convert()
    converter.build(lambda: iter([[x]]))
    converter.save(str(tmp_path / "out"))
    assets = tmp_path / "out" / "assets"
    manifest = json.loads((assets / MANIFEST).read_text())
    assert not list(assets.glob("*.onnx"))  # made on demand: func.export_engines()
    in_graphs = set()
    for file in [*assets.glob("*.segment.pb"), assets / "converted_graph.pb"]:
        graph = tf.compat.v1.GraphDef.FromString(file.read_bytes())
        assert max(n.attr["value"].tensor.ByteSize() for n in graph.node
                   if n.op == "Const") < 4 * SMALL_CONST
        in_graphs |= {n.name for n in graph.node if n.op == "Placeholder"}
    assert set(manifest["saved_weights"]) <= in_graphs and manifest["saved_weights"]
    weights = sum(v.numpy().nbytes for v in tf.saved_model.load(str(tmp_path / "out")).weights)
    engines = sum(f.stat().st_size for f in assets.glob("trt-serialized-engine.*"))
    total = sum(f.stat().st_size for f in (tmp_path / "out").rglob("*") if f.is_file())
    assert total < weights + engines + 200_000  # the graphs and the manifest: small
    # Reloaded, the native segment runs on the weights read back from the checkpoint.
    reloaded = workbench.load(tmp_path / "out")
    name = "TRTEngineOp_000_000"  # reads the model's input
    for got, want in zip(reloaded.segments[name].op(x), func.segments[name].op(x), strict=True):
        np.testing.assert_array_equal(got, want)
    # Without engines (TF-TRT's save_gpu_specific_engines=False), each weight is stored once.
    converter.save(str(tmp_path / "once"), save_gpu_specific_engines=False)
    variables = tf.saved_model.load(str(tmp_path / "once")).weights
    stored = {p.name: p.read_bytes() for p in (tmp_path / "once").rglob("*") if p.is_file()}
    for variable in variables:
        data = variable.numpy().tobytes()
        assert [n for n, b in stored.items() if data in b] == ["variables.data-00000-of-00001"]


def test_saved_weights_are_variables_not_consts_and_plain_tensorflow_runs_them(
        tmp_path: Path) -> None:
    x = sample_models.data("digits_cnn")["x_test"][:8]
    converter = converter_for("digits_cnn")
    func = converter.convert()
    converter.save(str(tmp_path / "out"))
    graph = saved_graph(tmp_path / "out")
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    const_bytes = [n.attr["value"].tensor.ByteSize() for n in nodes if n.op == "Const"]
    checkpoint = sum(f.stat().st_size for f in (tmp_path / "out" / "variables").iterdir())
    assert max(const_bytes) < 4 * SMALL_CONST  # no Const holds more than SMALL_CONST floats
    assert sum(const_bytes) < checkpoint / 5  # the weights are in the checkpoint, once
    plain = tf.saved_model.load(str(tmp_path / "out")).signatures["serving_default"]
    np.testing.assert_allclose(plain(**{func.input_names[0]: tf.constant(x)})["logits"],
                               converter.session.loaded(x)["logits"], atol=1e-5)


def test_saved_weights_are_read_from_the_graphs_written_not_copied_out_of_their_protos(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.engines import weights

    x = sample_models.data("digits_cnn")["x_test"][:8]
    converter = converter_for("digits_cnn")
    func = converter.convert()  # not called: no captured tensor to share, every weight read
    assert converter.result.engines

    def copied_whole(tensor: Any) -> Any:
        raise AssertionError("a weight's bytes were copied out of its proto")

    monkeypatch.setattr(weights, "as_array", copied_whole)
    monkeypatch.setattr(weights, "_SLICE_BYTES", 4096)  # several slices per weight
    converter.save(str(tmp_path / "out"))
    monkeypatch.undo()
    plain = tf.saved_model.load(str(tmp_path / "out")).signatures["serving_default"]
    np.testing.assert_allclose(plain(**{func.input_names[0]: tf.constant(x)})["logits"],
                               converter.session.loaded(x)["logits"], atol=1e-5)


def test_the_converted_function_captures_its_large_weights_instead_of_holding_consts(
        ) -> None:
    x = sample_models.data("digits_cnn")["x_test"][:8]
    converter = converter_for("digits_cnn", minimum_segment_size=1000)  # every weight native
    func = converter.convert()
    assert not converter.result.engines
    np.testing.assert_allclose(func(x)["logits"], converter.session.loaded(x)["logits"],
                               atol=1e-5)
    graph = func.function.graph.as_graph_def()
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    consts = [n.attr["value"].tensor for n in nodes if n.op == "Const"]
    assert max(np.prod([d.size for d in c.tensor_shape.dim]) for c in consts) <= SMALL_CONST
    weights = [t for t in func.function.captured_inputs if t.shape.num_elements() > SMALL_CONST]
    assert len(weights) >= 2  # the convolution and dense kernels


def test_digits_cnn_fp32_matches_native_and_reloads_without_rebuilding(tmp_path: Path) -> None:
    data = sample_models.data("digits_cnn")
    converter = converter_for("digits_cnn")
    func = converter.convert()
    converter.build(lambda: iter([[data["x_test"][:32]], [data["x_test"][:8]]]))
    assert builds_of(func) == len(converter.result.engines) == 2  # batch 8 reuses batch 32
    native = converter.session.loaded(data["x_test"][:32])["logits"].numpy()
    converted = func(data["x_test"][:32])["logits"].numpy()
    np.testing.assert_allclose(converted, native, atol=1e-4, rtol=1e-4)
    assert (converted.argmax(1) == native.argmax(1)).all()
    assert all(op.stats.native_calls == 0 for op in func.ops.values())

    # Built engines hold the only copy of their weights: the segment exports are not kept, and
    # save() exports again and reopens the sessions it closed while TensorFlow wrote.
    assert all(s.onnx_model is None for s in func.segments.values())
    converter.save(str(tmp_path / "m"))
    assert all(e.is_active for op in func.ops.values() for _, e in op.engines())
    assert all(s.onnx_model is None for s in func.segments.values())
    assert not list((tmp_path / "m" / "assets").glob("*.onnx"))
    np.testing.assert_allclose(func(data["x_test"][:8])["logits"], native[:8], atol=1e-4)
    reloaded = workbench.load(tmp_path / "m")
    np.testing.assert_allclose(reloaded(images=data["x_test"][:16])["logits"],
                               native[:16], atol=1e-4)
    assert builds_of(reloaded) == 0
    assert reloaded.engine_table()["engine_calls"].tolist() == [1, 1]


def test_forced_build_failure_runs_the_native_segment_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TRT_ABORT_CUDA_ENGINE_BUILD", "1")
    x = sample_models.data("quickstart_mlp")["x_test"][:16]
    converter = converter_for("quickstart_mlp")
    func = converter.convert()
    np.testing.assert_allclose(func(x)["logits"], converter.session.loaded(x)["logits"],
                               atol=1e-5)
    table = func.engine_table()
    assert table["builds"].tolist() == [0] and table["native_calls"].tolist() == [1]
    assert "aborted by TF_TRT_ABORT_CUDA_ENGINE_BUILD" in table["native_reasons"][0]
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "false")
    with pytest.raises(Exception, match="User disallowed engine native segment execution"):
        func(x)


def fallback_branches(model: Any) -> int:
    """The native fallback `cond`s in the converted function's graph."""
    library = model.function.graph.as_graph_def().library.function
    return sum(node.op in ("If", "StatelessIf") for f in library for node in f.node_def)


def test_built_engines_run_without_the_fallback_branch_and_a_miss_reruns_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_models.data("quickstart_mlp")["x_test"][:16]
    converter = converter_for("quickstart_mlp")
    func = converter.convert()
    native = converter.session.loaded(x)["logits"].numpy()
    converter.build(lambda: iter([[x[:8]]]))
    assert fallback_branches(func) == 0  # the engine is built: its calls cannot need one
    np.testing.assert_allclose(func(x[:8])["logits"], native[:8], atol=1e-5)
    # Batch 16 needs a new engine, whose build fails: the call reruns with the fallback.
    monkeypatch.setenv("TF_TRT_ABORT_CUDA_ENGINE_BUILD", "1")
    for _ in range(2):
        np.testing.assert_allclose(func(x)["logits"], native, atol=1e-5)
    assert fallback_branches(func) == 1
    table = func.engine_table()
    assert table["failed_builds"].tolist() == [1]
    # The rerun calls are counted once: one engine call (batch 8), two native ones.
    assert table["engine_calls"].tolist() == [1] and table["native_calls"].tolist() == [2]


def test_allow_build_at_runtime_false_in_the_saved_model(tmp_path: Path) -> None:
    x = sample_models.data("quickstart_mlp")["x_test"]
    converter = converter_for("quickstart_mlp", allow_build_at_runtime=False)
    converter.convert()
    converter.build(lambda: iter([[x[:8]]]))
    converter.save(str(tmp_path / "m"))
    reloaded = workbench.load(tmp_path / "m")
    reloaded(x[:8])
    out = reloaded(x[:20])  # larger than the saved engine's batch: no build, native
    np.testing.assert_allclose(out["logits"], converter.session.loaded(x[:20])["logits"],
                               atol=1e-5)
    (op,) = reloaded.ops.values()
    assert op.stats.builds == 0 and op.stats.engine_calls == 1 and op.stats.native_calls == 1
    assert "allow_build_at_runtime=False" in next(iter(op.fallback_reasons))


def test_dynamic_shape_build_makes_the_strategys_profiles() -> None:
    x = sample_models.data("quickstart_mlp")["x_test"]
    converter = converter_for("quickstart_mlp", use_dynamic_shape=True,
                              dynamic_shape_profile_strategy="Optimal")
    func = converter.convert()
    converter.build(lambda: iter([[x[:8]], [x[:4]]]))
    (op,) = func.ops.values()
    assert [p.describe() for p in op.profiles] == ["[8, 8, 8]", "[4, 8, 8]"]
    assert op.stats.builds == 1
    func(x[:4])
    func(x[:6])  # no Optimal profile for batch 6: native, TF-TRT's rule
    assert op.stats.engine_calls == 1 and op.stats.native_calls >= 1
    assert "no optimization profile" in op.native_runs[-1].reason


def test_build_errors_come_before_any_work() -> None:
    converter = converter_for("quickstart_mlp")
    with pytest.raises(RuntimeError, match="Need to call convert\\(\\) before build\\(\\)"):
        converter.build(lambda: iter([]))
    func = converter.convert()
    with pytest.raises(WorkbenchError, match="input_fn yielded nothing"):
        converter.build(lambda: iter([]))
    x = np.zeros([2, 8, 8], np.float32)
    with pytest.raises(WorkbenchError, match="yielded 2 tensors in set 0; the model takes 1"):
        converter.build(lambda: iter([[x, x]]))
    assert builds_of(func) == 0
    converter.build(lambda: iter([[x]]))
    with pytest.raises(RuntimeError, match="build\\(\\) is already called"):
        converter.build(lambda: iter([[x]]))


def test_int8_calibration_data_must_have_one_shape() -> None:
    x = sample_models.data("quickstart_mlp")["x_calib"]
    converter = converter_for("quickstart_mlp", precision_mode="INT8")
    with pytest.raises(WorkbenchError, match="calibration data must have a single shape"):
        converter.convert(calibration_input_fn=lambda: iter([[x[:32]], [x[:16]]]))


def test_save_refuses_an_existing_directory_and_leaves_nothing_behind(tmp_path: Path) -> None:
    converter = converter_for("quickstart_mlp")
    converter.convert()
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(WorkbenchError, match="already exists and is not empty"):
        converter.save(str(target))
    assert os.listdir(target) == ["keep.txt"]
    converter.save(str(target), overwrite=True)
    assert (target / "saved_model.pb").is_file() and not (target / "keep.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging or replaced directories left


def test_damaged_saved_models_are_clear_errors(tmp_path: Path) -> None:
    converter = converter_for("quickstart_mlp")
    converter.convert()
    converter.build(lambda: iter([[np.zeros([4, 8, 8], np.float32)]]))
    converter.save(str(tmp_path / "m"))
    assets = tmp_path / "m" / "assets"
    (engine_file,) = assets.glob("trt-serialized-engine.*")
    engine_file.write_bytes(b"not an engine")
    with pytest.raises(DamagedModelError, match="cannot be loaded"):
        workbench.load(tmp_path / "m")
    engine_file.unlink()
    with pytest.raises(DamagedModelError, match="is missing"):
        workbench.load(tmp_path / "m")
    manifest = assets / MANIFEST
    manifest.write_text(manifest.read_text()[:50])
    with pytest.raises(DamagedModelError, match="is corrupt"):
        workbench.load(tmp_path / "m")
    manifest.unlink()
    with pytest.raises(DamagedModelError, match="has no assets/"):
        workbench.load(tmp_path / "m")


def test_segment_graphs_are_read_on_first_use_and_damage_is_still_clear(tmp_path: Path
                                                                         ) -> None:
    converter = converter_for("quickstart_mlp")
    converter.convert()
    x = np.zeros([4, 8, 8], np.float32)
    converter.build(lambda: iter([[x]]))
    converter.save(str(tmp_path / "m"))
    assets = tmp_path / "m" / "assets"
    (segment_file,) = assets.glob("*.segment.pb")
    segment_file.write_bytes(b"\x07 not a GraphDef")
    reloaded = workbench.load(tmp_path / "m")  # the engines load without the segment graphs
    assert not any(s.graph_def_held for s in reloaded.graph.segments)
    reloaded(x)  # built engines are called without the fallback: the segment is not read
    with pytest.raises(DamagedModelError, match="segment.pb is corrupt"):
        reloaded(np.zeros([8, 8, 8], np.float32))  # a larger batch needs the segment
    segment_file.unlink()
    with pytest.raises(DamagedModelError, match="segment.pb is missing"):
        workbench.load(tmp_path / "m")
    manifest = assets / MANIFEST
    manifest.write_text(manifest.read_text().replace(FORMAT, FORMAT[:-1] + "1"))
    with pytest.raises(DamagedModelError, match="saved in format .*/1.*save the model again"):
        workbench.load(tmp_path / "m")


USER_GUIDE_PROFILES = {
    "Range": ["[4-8, 128-384]"],
    "Optimal": ["[8, 128]", "[4, 384]"],
    "Range+Optimal": ["[8, 128]", "[4, 384]", "[4-8, 128-384]"],
    "ImplicitBatchModeCompatible": ["[1-8, 128]", "[1-4, 384]"],
}


@pytest.mark.parametrize("PROFILE_STRATEGY", list(USER_GUIDE_PROFILES))
def test_user_guide_dynamic_shape_example_per_strategy(PROFILE_STRATEGY: str) -> None:
    """The user guide's BERT example on tiny_bert with the guide's table shapes ([8, 128],
    [4, 384]) and its input_fn as written: random word ids in every input, which CPU
    TensorFlow's embedding lookups reject for the type ids. Only their shapes count: build()
    infers each engine's input shapes and runs no kernel."""
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("tiny_bert")),
        precision_mode=trt.TrtPrecisionMode.FP32,
        use_dynamic_shape=True,
        dynamic_shape_profile_strategy=PROFILE_STRATEGY)
    func = converter.convert()
    VOCAB_SIZE = 30522
    rng = np.random.default_rng(0)

    def get_random_input(batch_size: int, seq_length: int) -> dict[str, Any]:
        shape = (batch_size, seq_length)
        return {"input_mask": np.ones(shape, np.int32),
                "input_type_ids": np.zeros(shape, np.int32),
                "input_word_ids": rng.integers(0, VOCAB_SIZE, shape, dtype=np.int32)}

    input_shapes = [[(8, 128), (8, 128), (8, 128)], [(4, 384), (4, 384), (4, 384)]]

    def input_fn():
        for shapes in input_shapes:
            # return a list of input tensors
            yield [tf.convert_to_tensor(
                np.random.randint(low=0, high=VOCAB_SIZE, size=x, dtype=np.int32))
                for x in shapes]

    converter.build(input_fn)
    assert all(op.stats.native_calls == 0 for op in func.ops.values())
    # The first engine taking one [batch, seq] input: _000_000 on TF 2.21. TF <= 2.17 writes
    # GELU with Erf, which converts (2.21 with Erfc, which does not), so fewer, larger engines
    # form and an attention engine sorts first.
    first_name = next(e.name for e in converter.report.engines.itertuples()
                      if e.input_shapes == [[-1, -1]])
    first = func.ops[first_name]
    assert [p.describe() for p in first.profiles] == USER_GUIDE_PROFILES[PROFILE_STRATEGY]
    assert all(op.stats.builds == 1 for op in func.ops.values())
    inputs = get_random_input(4, 384)
    converted, native = func(**inputs), converter.session.loaded(**inputs)
    for key in native:
        np.testing.assert_allclose(converted[key], native[key], atol=1e-4)
    assert all(op.stats.engine_calls == 1 for op in func.ops.values())


def _data_dependent_module() -> tf.Module:
    """Rows picked by id (CPU TensorFlow rejects ids outside the table), then kept where
    positive: the engine after the mask sees a shape that depends on the values."""
    module = tf.Module()
    module.table = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    module.w = tf.Variable(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="ids")])
    def serve(ids):
        rows = tf.gather(module.table, ids)
        kept = tf.boolean_mask(rows, rows[:, 0] > 0.0)
        return {"y": tf.nn.relu(tf.matmul(kept, module.w) * 2.0 + 1.0) - 0.5}

    module.serve = serve
    return module


@pytest.mark.parametrize("dynamic", [False, True])
def test_build_runs_data_only_where_shapes_depend_on_it(tmp_path: Path, dynamic: bool) -> None:
    module = _data_dependent_module()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    ids = np.array([2, 0, 2, 1], np.int32)

    def converter() -> trt.TrtGraphConverterV2:
        return trt.TrtGraphConverterV2(input_saved_model_dir=str(tmp_path),
                                       use_dynamic_shape=dynamic, minimum_segment_size=2)

    good = converter()
    func = good.convert()
    assert len(func.ops) >= 1
    good.build(lambda: iter([[ids]]))
    assert all(op.stats.builds == 1 for op in func.ops.values())
    np.testing.assert_allclose(func(ids)["y"], good.session.loaded(ids)["y"], atol=1e-6)

    bad = converter()
    bad.convert()
    with pytest.raises(WorkbenchError) as caught:
        bad.build(lambda: iter([[np.array([7, 0], np.int32)]]))
    message = str(caught.value)
    assert "depend on the input values" in message and "input set 0 (ids)" in message
    assert "GatherV2" in message and "indices[0] = 7 is not in [0, 3)" in message
    assert "\n" not in message


def test_user_guide_int8_post_training_quantization(tmp_path: Path) -> None:
    """The user guide's PTQ example (convert with calibration_input_fn, build, save, summary,
    infer) on digits_cnn; INT8 top-1 within one point of FP32, reloaded without rebuilding."""
    data = sample_models.data("digits_cnn")
    x_test, x_calib = data["x_test"], data["x_calib"]
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("digits_cnn")),
        precision_mode=trt.TrtPrecisionMode.INT8,
        use_calibration=True
    )
    BATCH_SIZE = 32
    NUM_CALIB_BATCHES = 4

    def calibration_input_fn():
        for i in range(NUM_CALIB_BATCHES):
            start_idx = i * BATCH_SIZE
            end_idx = (i + 1) * BATCH_SIZE
            x = x_calib[start_idx:end_idx, :]
            yield [x]

    func = converter.convert(calibration_input_fn=calibration_input_fn)
    assert all(len(op.calibration_data) == NUM_CALIB_BATCHES for op in func.ops.values())
    MAX_BATCH_SIZE = 360

    def input_fn():
        yield [x_test[0:MAX_BATCH_SIZE, :]]

    converter.build(input_fn=input_fn)
    OUTPUT_SAVED_MODEL_DIR = str(tmp_path / "tftrt_saved_model")
    converter.save(output_saved_model_dir=OUTPUT_SAVED_MODEL_DIR)
    converter.summary(print_fn=lambda line: None)

    int8 = func(x_test)["logits"].numpy().argmax(1)
    fp32 = converter.session.loaded(x_test)["logits"].numpy().argmax(1)
    labels = data["y_test"]
    assert (int8 == labels).mean() >= (fp32 == labels).mean() - 0.01
    assert {e.precision for op in func.ops.values() for _, e in op.engines()} == {"INT8"}
    reloaded = workbench.load(OUTPUT_SAVED_MODEL_DIR)
    np.testing.assert_array_equal(reloaded(x_test)["logits"].numpy().argmax(1), int8)
    assert builds_of(reloaded) == 0


def test_engines_export_as_onnx_per_segment_for_use_elsewhere(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    x = sample_models.data("digits_cnn")["x_test"][:8]
    converter = converter_for("digits_cnn")
    func = converter.convert()
    converter.build(lambda: iter([[x]]))
    files = func.export_engines(tmp_path)
    assert files == ["TRTEngineOp_000_000.onnx", "TRTEngineOp_000_000.0.onnxruntime",
                     "TRTEngineOp_000_001.onnx", "TRTEngineOp_000_001.0.onnxruntime"]
    model = onnx.load(tmp_path / "TRTEngineOp_000_000.onnx")
    names = {n.name for n in model.graph.node}
    assert any(n in names for n in converter.result.engines[0].nodes)  # traceable to TF nodes
    session = ort.InferenceSession(str(tmp_path / "TRTEngineOp_000_000.onnx"))
    outputs = session.run(None, {session.get_inputs()[0].name: x})
    expected = func.segments["TRTEngineOp_000_000"].op(x)
    # Prepared for the T4: the NCHW pool for the Flatten's Shape and its NHWC Transpose.
    assert [o.shape for o in outputs] == [(8, 32, 2, 2), (8, 2, 2, 32)]
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def sample_inputs(func: Any, batch: int = 2) -> dict[str, np.ndarray]:
    """Inputs of the signature's dtypes and shapes (unknown dims `batch`; ids stay in range)."""
    rng = np.random.default_rng(0)
    inputs = {}
    for name, dtype, shape in zip(func.input_names, func.graph.input_dtypes,
                                  func.graph.input_shapes, strict=True):
        dims = [d if d > 0 else batch if i == 0 else 16 for i, d in enumerate(shape or [])]
        if np.dtype(dtype).kind in "iu":
            inputs[name] = (rng.integers(0, 2, dims) if "mask" in name or "type" in name
                            else rng.integers(0, 255, dims)).astype(dtype)
        else:
            inputs[name] = rng.random(dims, np.float32).astype(dtype)
    return inputs


@pytest.mark.parametrize("name", ["quickstart_mlp", "digits_cnn", "resnet50", "mobilenet_v2",
                                  "tiny_bert", "detector"])
def test_every_sample_model_fp32_matches_native(name: str) -> None:
    converter = converter_for(name)
    func = converter.convert()
    inputs = sample_inputs(func)
    converted, native = func(**inputs), converter.session.loaded(**inputs)
    assert sorted(converted) == sorted(native)
    for key in native:
        np.testing.assert_allclose(converted[key], native[key], atol=1e-4, rtol=1e-3)
    table = func.engine_table()
    assert (table["engine_calls"] == 1).all(), table.to_string()


def test_converted_graph_drops_control_edges_from_consts_like_tftrt() -> None:
    """A boundary Const `c` depends on the engine's `a` and the engine's `b` depends on it;
    keeping either control edge would make engine -> c -> engine (TF-TRT drops both)."""
    from tensorflow.core.framework import graph_pb2

    from workbench.conversion.result import EngineInfo
    from workbench.engines.runtime.hybrid_graph import converted_graph_def

    graph = graph_pb2.GraphDef()
    for name, op, inputs in [("x", "Placeholder", []), ("a", "Relu", ["x"]),
                             ("c", "Const", ["^a"]), ("b", "Relu", ["a", "^c"]),
                             ("k", "Const", []), ("y", "Identity", ["b", "^k", "^c"]),
                             ("z", "Identity", ["c"])]:
        graph.node.add(name=name, op=op, input=inputs)
    engine = EngineInfo(name="TRTEngineOp_000_000", nodes=("a", "b", "k"), native_ops={},
                        native_node_count=3, effective_size=3, input_dtypes=("float32",),
                        output_dtypes=("float32",), input_shapes=((-1,),),
                        output_shapes=((-1,),), inputs=("x:0",), outputs=("b:0",))
    converted = converted_graph_def(graph, [engine], {engine.name: (["float"], ["float"])},
                                    ["y", "z"])
    inputs = {n.name: list(n.input) for n in converted.node}
    assert inputs["TRTEngineOp_000_000"] == ["x:0"]  # no ^c from the outside Const
    assert inputs["y"] == ["TRTEngineOp_000_000:0", "^c"]  # no ^engine for the inner Const k
    assert inputs["c"] == ["^TRTEngineOp_000_000"]  # c still follows the engine: no cycle


def test_a_weight_whose_only_input_was_an_engine_consts_control_edge_is_lifted() -> None:
    """The converted graph made lifted decides on the inputs it keeps: `w`'s control edge from
    the engine's Const `k` is dropped, so `w` is a weight to feed; `v` still follows the
    engine's Relu, so it stays a Const (EfficientNetV2L kept 0.6x its weights as Consts)."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    from workbench.conversion.result import EngineInfo
    from workbench.engines.runtime.hybrid_graph import converted_graph_def

    value = tf.make_tensor_proto(np.arange(4096, dtype=np.float32).reshape(64, 64))
    graph = graph_pb2.GraphDef()
    for name, op, inputs in [("x", "Placeholder", []), ("k", "Const", []),
                             ("a", "Relu", ["x", "^k"]), ("w", "Const", ["^k"]),
                             ("v", "Const", ["^a"]), ("y", "AddN", ["a", "w", "v"])]:
        node = graph.node.add(name=name, op=op, input=inputs)
        if op == "Const":
            node.attr["value"].tensor.CopyFrom(value)
    engine = EngineInfo(name="TRTEngineOp_000_000", nodes=("k", "a"), native_ops={},
                        native_node_count=2, effective_size=2, input_dtypes=("float32",),
                        output_dtypes=("float32",), input_shapes=((64, 64),),
                        output_shapes=((64, 64),), inputs=("x:0",), outputs=("a:0",))
    weights: dict = {}
    converted = converted_graph_def(graph, [engine], {engine.name: (["float"], ["float"])},
                                    ["y"], weights)
    ops = {n.name: (n.op, list(n.input)) for n in converted.node}
    assert ops["w"] == ("Placeholder", [])
    assert ops["v"] == ("Const", ["^TRTEngineOp_000_000"])
    assert list(weights) == ["w"]
    np.testing.assert_array_equal(tf.make_ndarray(weights["w"]), tf.make_ndarray(value))
