"""Conversion inside functions marked `_tftrt_convert_function` (TF-TRT's function items,
`trt_optimization_pass.cc`), on the model of TF-TRT's own tf_function_test.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.saved_model import loader_impl

import workbench
from workbench import trt_convert as trt
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import ConversionParamsError
from workbench.profiling.engines import profile_engines

pytestmark = pytest.mark.slow

# TF-TRT's test function: conv + bias + relu + identity + max pool, then a squeeze. Its test
# expected the identity in the engine too, with Grappler's other optimizers off; with the
# converter's list, `dependency` removes it from the function body first.
ENGINE_NODES = ("bias", "bias_add", "conv", "max_pool", "relu", "weights")


class ConvAndPool(tf.Module):
    # tf.function only lets `_noinline` through; TF-TRT's test, too, wrote the `_tftrt_*`
    # attributes into the saved FunctionDef.
    @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 2], tf.float32)],
                 experimental_attributes={"_noinline": True})
    def conv_and_pool(self, x):
        weights = tf.constant([[[[1., 0.5, 4.], [1., 0.5, 1.]]]], name="weights")
        conv = tf.nn.conv2d(x, weights, strides=[1, 2, 2, 1], padding="SAME", name="conv")
        bias = tf.constant([4., 1.5, 2.], name="bias")
        relu = tf.nn.relu(tf.nn.bias_add(conv, bias, name="bias_add"), "relu")
        identity = tf.identity(relu, "identity")
        pool = tf.nn.max_pool2d(identity, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="max_pool")
        return tf.squeeze(pool)

    @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 2], tf.float32, name="x")])
    def serve(self, x):
        return {"output_0": tf.identity(self.conv_and_pool(x), name="output_0")}


class TwoCalls(ConvAndPool):
    """A top-level engine's worth of ops, then the function called twice."""

    @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 2], tf.float32, name="x")])
    def serve(self, x):
        y = tf.nn.relu(tf.tanh(x * 2.0 + 1.0))
        total = self.conv_and_pool(y) + self.conv_and_pool(x)
        return {"output_0": tf.identity(total, name="output_0")}


def _saved(path: Path, attrs: dict, module_class: type = ConvAndPool) -> str:
    module = module_class()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    proto = loader_impl.parse_saved_model(str(path))
    marked = 0
    for function in proto.meta_graphs[0].graph_def.library.function:
        if function.signature.name.startswith("__inference_conv_and_pool"):
            for key, value in attrs.items():
                field = {bool: "b", int: "i", str: "s"}[type(value)]
                setattr(function.attr[key], field, value.encode() if field == "s" else value)
            marked += 1
    assert marked == 1
    (path / "saved_model.pb").write_bytes(proto.SerializeToString())
    return str(path)


ATTRS = {"_tftrt_convert_function": True, "_tftrt_precision_mode": "FP16",
         "_tftrt_minimum_segment_size": 2, "_tftrt_max_cached_engines": 1,
         "_tftrt_use_implicit_batch": True, "_tftrt_trt_logger_name": "DefaultLogger",
         "_tftrt_max_batch_size": 10, "_tftrt_is_dyn_op": True}


def test_marked_function_is_converted_with_its_own_parameters(tmp_path: Path) -> None:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path / "m", ATTRS),
                                        minimum_segment_size=5)
    converter.convert()
    # The attributes survived freezing and Grappler into the prepared graph's library.
    library = converter.session.prepared().graph_def.library.function
    (marked,) = [f for f in library if "_tftrt_convert_function" in f.attr]
    assert marked.attr["_tftrt_minimum_segment_size"].i == 2

    (conversion,) = converter.result.functions
    assert conversion.function == marked.signature.name
    assert conversion.params.precision_mode == "FP16"
    assert conversion.params.minimum_segment_size == 2
    assert conversion.attrs["_tftrt_trt_logger_name"] == "DefaultLogger"
    (engine,) = conversion.engines
    assert engine.name == "TRTEngineOp_001_000"  # the function's own ConvertGraph call
    assert engine.nodes == ENGINE_NODES

    # The main graph is converted with the converter's parameters; summary() ignores
    # function engines as TF-TRT's did, the report lists them.
    assert converter.result.engines == []
    table = converter.report.function_engines
    assert list(table.name) == ["TRTEngineOp_001_000"]
    assert table.precision_mode[0] == "FP16" and table.nodes[0] == 6
    document = json.loads(converter.report.to_json())
    assert document["functions"][0]["engines"][0]["nodes"] == list(ENGINE_NODES)
    assert document["functions"][0]["params"]["minimum_segment_size"] == 2


def _engine_calls(model: object, engine: str) -> tuple[int, int, int]:
    row = model.engine_table().set_index("engine").loc[engine]  # type: ignore[attr-defined]
    return int(row.builds), int(row.engine_calls), int(row.native_calls)


def test_engines_inside_a_function_run_as_engines(tmp_path: Path) -> None:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path / "m", ATTRS),
                                        minimum_segment_size=5)
    func = converter.convert()
    x = np.random.default_rng(0).standard_normal((4, 32, 32, 2)).astype(np.float32)
    want = converter.session.loaded(x)["output_0"].numpy()

    # build() infers the engine's input shape in the function body from the call site.
    converter.build(lambda: iter([(x,)]))
    assert _engine_calls(func, "TRTEngineOp_001_000") == (1, 0, 0)
    # The converted function library holds the function with the engine call in place.
    (rewritten,) = [f for f in func.graph.converted_graph_def.library.function
                    if f.signature.name == converter.result.functions[0].function]
    calls = {n.name: n.attr["f"].func.name for n in rewritten.node_def if "f" in n.attr}
    assert calls == {"TRTEngineOp_001_000": "TRTEngineOp_001_000_native_segment"}
    assert not {"conv", "relu", "max_pool"} & {n.name for n in rewritten.node_def}

    # The engine runs at the function's FP16 (its _tftrt_precision_mode), not the FP32 of
    # the converter: close to native TF, not equal.
    got = func(x)["output_0"]
    assert _engine_calls(func, "TRTEngineOp_001_000") == (1, 1, 0)
    assert func.ops["TRTEngineOp_001_000"].settings.precision_mode == "FP16"
    np.testing.assert_allclose(got, want, atol=2e-2)
    assert np.abs(got - want).max() > 0

    converter.save(str(tmp_path / "converted"))
    loaded = workbench.load(tmp_path / "converted")
    np.testing.assert_allclose(loaded(x)["output_0"], got, atol=1e-6)
    assert _engine_calls(loaded, "TRTEngineOp_001_000") == (0, 1, 0)  # the saved engine
    assert loaded.ops["TRTEngineOp_001_000"].settings.precision_mode == "FP16"
    # Plain TensorFlow runs the saved function's native segment.
    plain = tf.saved_model.load(str(tmp_path / "converted")).signatures["serving_default"]
    np.testing.assert_allclose(plain(x=x)["output_0"], want, atol=1e-5)


def test_unmarked_or_false_functions_are_left_alone(tmp_path: Path) -> None:
    attrs = {"_noinline": True, "_tftrt_convert_function": False}
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path, attrs))
    converter.convert()
    assert converter.result.functions == []
    assert converter.report.function_engines.empty
    assert "functions" not in json.loads(converter.report.to_json())


def test_attribute_of_the_wrong_kind_is_a_clear_error(tmp_path: Path) -> None:
    attrs = {"_tftrt_convert_function": True, "_tftrt_minimum_segment_size": "two"}
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path, attrs))
    with pytest.raises(ConversionParamsError,
                       match="attribute _tftrt_minimum_segment_size holds a s value where "
                             "TF-TRT expects an int"):
        converter.convert()


def test_function_called_twice_next_to_top_level_engines(tmp_path: Path) -> None:
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=_saved(tmp_path / "m", {**ATTRS, "_tftrt_precision_mode": "FP32"},
                                     TwoCalls), minimum_segment_size=3)
    func = converter.convert()
    assert [e.name for e in converter.result.engines] == ["TRTEngineOp_000_000"]
    x = np.random.default_rng(2).standard_normal((3, 32, 32, 2)).astype(np.float32)
    want = converter.session.loaded(x)["output_0"].numpy()
    for calls in (1, 2):
        np.testing.assert_allclose(func(x)["output_0"], want, rtol=1e-5, atol=1e-5)
        # Both call sites run the one function with the engine in it.
        assert _engine_calls(func, "TRTEngineOp_001_000")[1:] == (2 * calls, 0)
        assert _engine_calls(func, "TRTEngineOp_000_000")[1:] == (calls, 0)
    converter.save(str(tmp_path / "converted"))
    loaded = workbench.load(tmp_path / "converted")
    np.testing.assert_allclose(loaded(x)["output_0"], want, rtol=1e-5, atol=1e-5)
    assert _engine_calls(loaded, "TRTEngineOp_001_000") == (0, 2, 0)


def test_engines_inside_a_function_are_profiled(tmp_path: Path) -> None:
    """Per-layer profiling cuts the function's engine from its body and feeds it what the
    function's call passes in; it runs at the function's precision."""
    session = ConversionSession.open(_saved(tmp_path / "m", ATTRS), cache=False)
    x = np.random.default_rng(1).standard_normal((2, 32, 32, 2)).astype(np.float32)
    table = profile_engines(session, ConversionParams(minimum_segment_size=5), {"x": x}, runs=2)
    assert set(table["engine"]) == {"TRTEngineOp_001_000"}
    assert "FP16" in set(table["precision"])
    assert {"conv", "max_pool"} <= {n for nodes in table["tf_nodes"] for n in nodes}


def test_function_in_dynamic_shape_mode_builds_profiles(tmp_path: Path) -> None:
    """`_tftrt_use_implicit_batch=false` makes the function's engine dynamic-shaped while the
    converter stays in implicit batch: build() gives it one engine with a profile covering
    input_fn's shapes, and both batch sizes run on it."""
    attrs = {**ATTRS, "_tftrt_precision_mode": "FP32", "_tftrt_use_implicit_batch": False}
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=_saved(tmp_path / "m", attrs),
                                        minimum_segment_size=5)
    func = converter.convert()
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((n, 32, 32, 2)).astype(np.float32) for n in (2, 6)]
    converter.build(lambda: iter([(x,) for x in batches]))
    op = func.ops["TRTEngineOp_001_000"]
    assert not op.settings.use_implicit_batch and len(op.profiles) >= 1
    assert _engine_calls(func, "TRTEngineOp_001_000") == (1, 0, 0)
    for x in batches:
        np.testing.assert_allclose(func(x)["output_0"],
                                   converter.session.loaded(x)["output_0"], atol=1e-5)
    assert _engine_calls(func, "TRTEngineOp_001_000") == (1, 2, 0)
