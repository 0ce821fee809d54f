"""TF-TRT's API where user code touches it: what `convert()` returns, `_converted_graph_def`,
`save()` options and engine files, `build()`'s errors and the device scope.

Each test checks a behaviour TF-TRT 2.17's own API tests check (trt_convert_test.py, run
against this module by tools/tftrt_api_tests.py), on a model written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import workbench
from workbench import trt_convert as trt
from workbench.engines.runtime.tftrt_graph_def import CALIBRATION_HEADER

SIGNATURE = "mypredict"


class TwoInputs(tf.Module):
    """out = a * (a + w) + (a + w) + b: one engine of four nodes (and the weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable([[[1.0]]])

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 1], tf.float32, name="a"),
                                  tf.TensorSpec([None, 1, 1], tf.float32, name="b")])
    def run(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        shifted = a + self.w
        return tf.identity(a * shifted + shifted + b, name="output")


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = TwoInputs()
    path = tmp_path_factory.mktemp("models") / "two_inputs"
    tf.saved_model.save(module, str(path), signatures={SIGNATURE: module.run})
    return path


def converter_for(path: Path, **params: object) -> trt.TrtGraphConverterV2:
    return trt.TrtGraphConverterV2(input_saved_model_dir=str(path),
                                   input_saved_model_signature_key=SIGNATURE, **params)


def batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.random([n, 1, 1], np.float32) for _ in range(2))  # type: ignore[return-value]


def expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a * (a + 1) + (a + 1) + b


def engine_nodes(graph_def: tf.compat.v1.GraphDef) -> list:
    """TRTEngineOp nodes, top level and inside library functions (as TF-TRT's tests count)."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return [n for n in nodes if n.op == "TRTEngineOp"]


def test_converted_graph_holds_one_trtengineop_per_engine_with_tftrts_attributes(
        two_inputs: Path) -> None:
    converter = converter_for(two_inputs, maximum_cached_engines=2)
    func = converter.convert()
    graph_def = func.graph.as_graph_def()
    (node,) = engine_nodes(graph_def)
    assert [node.name] == [e.name for e in converter.result.engines]
    assert {n.op for n in graph_def.node} == {"Placeholder", "TRTEngineOp", "Identity"}
    library = {f.signature.name: f for f in graph_def.library.function}
    assert node.attr["segment_func"].func.name == f"{node.name}_native_segment" in library
    assert list(node.attr["InT"].list.type) == [tf.float32.as_datatype_enum] * 2
    assert list(node.attr["OutT"].list.type) == [tf.float32.as_datatype_enum]
    assert node.attr["precision_mode"].s == b"FP32"
    assert node.attr["max_cached_engines_count"].i == 2
    assert node.attr["_use_implicit_batch"].b and node.attr["_allow_build_at_runtime"].b
    assert "profile_strategy" not in node.attr  # explicit batch mode only
    assert [[d.size for d in s.dim] for s in node.attr["input_shapes"].list.shape] == \
        [[-1, 1, 1]] * 2
    assert node.attr["calibration_data"].s == b""
    assert "GPU:0" in node.device
    # The converter's own copy, as TF-TRT kept it.
    assert [n.name for n in engine_nodes(converter._converted_graph_def)] == [node.name]


def test_dynamic_shape_engines_carry_their_profile_strategy(two_inputs: Path) -> None:
    converter = converter_for(two_inputs, use_dynamic_shape=True,
                              dynamic_shape_profile_strategy="Optimal")
    (node,) = engine_nodes(converter.convert().graph.as_graph_def())
    assert node.attr["profile_strategy"].s == b"Optimal"
    assert not node.attr["_use_implicit_batch"].b


def test_the_reader_of_tftrt_converted_models_reads_our_engine_nodes(two_inputs: Path) -> None:
    """What the workbench writes as TF-TRT's TRTEngineOp, its reader of TF-TRT's models (the
    `inspect_tftrt` side) reads back as the conversion's settings."""
    from workbench.engines.tftrt.saved_model import _engine_attrs

    converter = converter_for(two_inputs, precision_mode="FP16", use_dynamic_shape=True,
                              maximum_cached_engines=3, allow_build_at_runtime=False)
    (node,) = engine_nodes(converter.convert().graph.as_graph_def())
    read = _engine_attrs(node)
    assert (read.precision_mode, read.max_cached_engines_count, read.use_implicit_batch,
            read.profile_strategy, read.use_calibration, read.static_engine,
            read.has_calibration_data) == ("FP16", 3, False, "Range", True, False, False)
    assert read.segment_func == f"{node.name}_native_segment"
    assert read.allow_build_at_runtime  # as TF-TRT: set False in the nodes only when saving


def test_converted_function_is_called_and_described_like_a_concrete_function(
        two_inputs: Path) -> None:
    func = converter_for(two_inputs).convert()
    args, kwargs = func.structured_input_signature
    assert args == () and list(kwargs) == ["a", "b"]
    assert kwargs["a"] == tf.TensorSpec([None, 1, 1], tf.float32, name="a")
    assert list(func.structured_outputs) == ["output_0"]
    assert [t.dtype for t in func.outputs] == [tf.float32]
    assert [t.shape.as_list() for t in func.inputs] == [[None, 1, 1]] * 2
    a, b = batch(4)
    by_name = func(a=tf.constant(a), b=tf.constant(b))["output_0"]
    np.testing.assert_allclose(by_name, expected(a, b), rtol=1e-6)
    np.testing.assert_allclose(func(a, b)["output_0"], by_name)


def test_int8_calibration_fills_calibration_data_and_builds_engines_to_save(
        two_inputs: Path, tmp_path: Path) -> None:
    converter = converter_for(two_inputs, precision_mode="INT8")
    func = converter.convert(calibration_input_fn=lambda: iter([batch(4)]))
    (node,) = engine_nodes(converter._converted_graph_def)
    table = node.attr["calibration_data"].s
    assert table.startswith(CALIBRATION_HEADER)
    assert table.count(b"TensorRTInputPH_") == 2
    assert [len(op.engines()) for op in func.ops.values()] == [1]  # built by calibration
    converter.save(str(tmp_path / "engines"))
    assert (tmp_path / "engines/assets" / f"trt-serialized-engine.{node.name}").stat().st_size
    converter.save(str(tmp_path / "portable"), save_gpu_specific_engines=False)
    portable = tmp_path / "portable/assets" / f"trt-serialized-engine.{node.name}"
    assert portable.is_file() and portable.stat().st_size == 0


def test_save_passes_its_options_to_saved_model_save(two_inputs: Path, tmp_path: Path) -> None:
    converter = converter_for(two_inputs)
    converter.convert()
    converter.save(str(tmp_path / "plain"))
    converter.save(str(tmp_path / "debug"),
                   options=tf.saved_model.SaveOptions(save_debug_info=True))
    assert not (tmp_path / "plain/debug").exists()
    assert (tmp_path / "debug/debug/saved_model_debug_info.pb").is_file()


def test_build_aborts_when_an_engine_fails_and_native_segments_are_disallowed(
        two_inputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    converter = converter_for(two_inputs)
    converter.convert()
    monkeypatch.setenv("TF_TRT_ABORT_CUDA_ENGINE_BUILD", "True")
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "False")
    with pytest.raises(tf.errors.AbortedError,
                       match="User disallowed engine native segment execution"):
        converter.build(lambda: iter([batch(4)]))
    monkeypatch.delenv("TF_TRT_ABORT_CUDA_ENGINE_BUILD")
    monkeypatch.delenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION")
    converter.build(lambda: iter([batch(4)]))  # the aborted build did not count
    with pytest.raises(NotImplementedError, match="more than once"):
        converter.build(lambda: iter([batch(4)]))


def test_convert_under_a_cpu_device_scope_is_refused_as_tftrt_did(two_inputs: Path) -> None:
    converter = converter_for(two_inputs)
    with pytest.raises(ValueError, match="Specified device is not a GPU"), tf.device("CPU"):
        converter.convert()
    converter.convert()  # without a scope a CPU-only machine converts


def test_one_engine_file_per_engine_holds_every_cached_engine(two_inputs: Path,
                                                              tmp_path: Path) -> None:
    converter = converter_for(two_inputs, maximum_cached_engines=2)
    func = converter.convert()
    name = converter.result.engines[0].name
    converter.save(str(tmp_path / "unbuilt"))
    assert not list((tmp_path / "unbuilt/assets").glob("trt-serialized-engine.*"))
    converter.build(lambda: iter([batch(2), batch(5)]))
    converter.save(str(tmp_path / "built"))
    assets = tmp_path / "built/assets"
    assert [p.name for p in assets.glob("trt-serialized-engine.*")] == \
        [f"trt-serialized-engine.{name}"]
    reloaded = workbench.load(str(tmp_path / "built"))
    assert len(reloaded.ops[name].engines()) == 2
    a, b = batch(5, seed=1)
    np.testing.assert_allclose(reloaded(a, b)["output_0"], func(a, b)["output_0"], rtol=1e-6)
    assert reloaded.engine_table()["builds"].sum() == 0


def test_models_saved_with_a_file_per_cached_engine_still_load(two_inputs: Path,
                                                               tmp_path: Path) -> None:
    """Earlier versions wrote `trt-serialized-engine.<engine>.<n>` with no offsets."""
    converter = converter_for(two_inputs)
    converter.convert()
    converter.build(lambda: iter([batch(4)]))
    converter.save(str(tmp_path / "old"))
    assets = tmp_path / "old/assets"
    manifest = json.loads((assets / "workbench_converted.json").read_text())
    (saved,) = manifest["engines"][0]["engines"]
    (assets / saved["file"]).rename(assets / f"{saved['file']}.0")
    saved["file"] += ".0"
    del saved["offset"], saved["size"]
    (assets / "workbench_converted.json").write_text(json.dumps(manifest))
    reloaded = workbench.load(str(tmp_path / "old"))
    a, b = batch(4)
    np.testing.assert_allclose(reloaded(a, b)["output_0"], expected(a, b), rtol=1e-5)
    assert reloaded.engine_table()["builds"].sum() == 0


def test_a_call_that_may_not_run_a_native_segment_aborts_as_tftrts_kernel_did(
        two_inputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    func = converter_for(two_inputs).convert()
    monkeypatch.setenv("TF_TRT_ABORT_CUDA_ENGINE_BUILD", "True")
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "False")
    with pytest.raises(tf.errors.AbortedError,
                       match="^User disallowed engine native segment execution") as caught:
        func(*batch(4))
    assert "\n" not in caught.value.message
