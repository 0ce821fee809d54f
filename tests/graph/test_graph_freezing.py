"""TF-TRT's `TF_TRT_EXPERIMENTAL_FEATURES=disable_graph_freezing`: native segments read the
model's variables (`ReadVariableOp` of a TF2 model, `VariableV2` of a TF1 one) instead of
holding their values as Consts, in dynamic shape mode only (graph/variables.py).

The behaviours TF-TRT 2.17's testVariableV2 / testReadVariableOp check, on models written here.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import workbench
from workbench import trt_convert as trt

FEATURE = "disable_graph_freezing"
WIDE = 1500  # elements of the wide variable: a large weight, fed apart from the graph protos


class TwoVariables(tf.Module):
    """out = a * v1 + b * v2 - 45, v1 of 13s (one element), v2 of 37s (WIDE elements)."""

    def __init__(self) -> None:
        super().__init__()
        self.v1 = tf.Variable(np.full([1, 1, 1], 13.0, np.float32))
        self.v2 = tf.Variable(np.full([1, 1, WIDE], 37.0, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 1], tf.float32, name="a"),
                                  tf.TensorSpec([None, 1, 1], tf.float32, name="b")])
    def __call__(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.identity(a * self.v1 + b * self.v2 - 45.0, name="output")


@pytest.fixture(scope="module")
def resource_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = TwoVariables()
    path = tmp_path_factory.mktemp("models") / "resource_variables"
    tf.saved_model.save(module, str(path), signatures=module.__call__.get_concrete_function())
    return path


@pytest.fixture(scope="module")
def ref_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TF1 SavedModel whose variables are VariableV2 nodes: out = a * 13 + b * 37 - 45."""
    path = tmp_path_factory.mktemp("models") / "ref_variables"
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.variable_scope("", use_resource=False):
        a, b = (tf.compat.v1.placeholder(tf.float32, [None, 1, 1], name=n) for n in "ab")
        v1, v2 = (tf.compat.v1.get_variable(n, [1, 1, 1], tf.float32,
                                            tf.compat.v1.constant_initializer(value))
                  for n, value in (("v1", 13.0), ("v2", 37.0)))
        output = tf.identity(a * v1 + b * v2 - 45.0, name="output")
        builder = tf.compat.v1.saved_model.Builder(str(path))
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": tf.compat.v1.saved_model.predict_signature_def(
                    {"a": a, "b": b}, {"output": output})})
        builder.save()
    return path


def convert_and_save(model: Path, out: Path, dynamic: bool = True) -> trt.TrtGraphConverterV2:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(model),
                                        use_dynamic_shape=dynamic, precision_mode="FP16")
    converter.convert()
    ones = np.ones([4, 1, 1], np.float32)
    converter.build(lambda: iter([(ones, ones)]))
    converter.save(str(out))
    return converter


def native_segment_ops(saved: Path) -> list[list[str]]:
    """The op types of each native segment function the plainly loaded signature holds."""
    function = tf.saved_model.load(str(saved)).signatures["serving_default"]
    return [[node.op for node in f.node_def]
            for f in function.graph.as_graph_def().library.function
            if re.search(r"TRTEngineOp_\d+_\d+_native_segment", f.signature.name)]


def plain_output(saved: Path, name: str) -> np.ndarray:
    function = tf.saved_model.load(str(saved)).signatures["serving_default"]
    return function(a=tf.ones([4, 1, 1]), b=2 * tf.ones([4, 1, 1]))[name].numpy()


def test_native_segments_read_a_tf2_models_variables(resource_model: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TRT_EXPERIMENTAL_FEATURES", FEATURE)
    converter = convert_and_save(resource_model, tmp_path / "converted")
    assert converter.freeze is False
    # In process, TF-TRT's converted GraphDef: the engine takes the variables' handles.
    described = converter._converted_graph_def
    [engine] = [n for n in described.node if n.op == "TRTEngineOp"]
    assert list(engine.attr["InT"].list.type).count(tf.resource.as_datatype_enum) == 2
    [segment] = [f for f in described.library.function if f.signature.name.endswith("segment")]
    assert [n.op for n in segment.node_def].count("ReadVariableOp") == 2
    [ops] = native_segment_ops(tmp_path / "converted")
    assert ops.count("ReadVariableOp") == 2  # the small and the wide variable
    assert ops.count("Const") == 1  # only the 45
    np.testing.assert_allclose(plain_output(tmp_path / "converted", "output_0"),
                               np.full([4, 1, WIDE], 13.0 + 74.0 - 45.0))
    reloaded = workbench.load(tmp_path / "converted")
    np.testing.assert_allclose(reloaded(np.ones([4, 1, 1], np.float32),
                                        np.ones([4, 1, 1], np.float32))["output_0"],
                               np.full([4, 1, WIDE], 5.0), rtol=1e-3)


def test_native_segments_hold_a_tf1_models_variablev2_nodes(ref_model: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("TF_TRT_EXPERIMENTAL_FEATURES", FEATURE)
    convert_and_save(ref_model, tmp_path / "converted")
    [ops] = native_segment_ops(tmp_path / "converted")
    assert ops.count("VariableV2") == 2
    for _ in range(2):  # the variables keep their values from call to call
        np.testing.assert_allclose(plain_output(tmp_path / "converted", "output"),
                                   np.full([4, 1, 1], 42.0))


def test_without_the_feature_native_segments_hold_the_values(ref_model: Path,
                                                             tmp_path: Path) -> None:
    convert_and_save(ref_model, tmp_path / "converted")
    [ops] = native_segment_ops(tmp_path / "converted")
    assert "VariableV2" not in ops and ops.count("Const") == 3


def test_implicit_batch_freezes_anyway_as_tftrt_did(ref_model: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TF_TRT_EXPERIMENTAL_FEATURES", FEATURE)
    with caplog.at_level(logging.WARNING, logger="workbench.trt_convert"):
        converter = convert_and_save(ref_model, tmp_path / "converted", dynamic=False)
    assert converter.freeze is True
    assert "Disabling graph freezing is only possible in dynamic shape mode" in caplog.text
    [ops] = native_segment_ops(tmp_path / "converted")
    assert "VariableV2" not in ops


class IntegerVariable(tf.Module):
    """An int32 variable: TF-TRT's variable converters take float and half only."""

    def __init__(self) -> None:
        super().__init__()
        self.step = tf.Variable(np.full([1, 1, 1], 3, np.int32))

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 1], tf.int32, name="a")])
    def __call__(self, a: tf.Tensor) -> tf.Tensor:
        return tf.identity((a + self.step) * 2 - 1, name="output")


def test_a_variable_of_another_dtype_stays_out_of_engines(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    module = IntegerVariable()
    tf.saved_model.save(module, str(tmp_path / "model"),
                        signatures=module.__call__.get_concrete_function())
    monkeypatch.setenv("TF_TRT_EXPERIMENTAL_FEATURES", FEATURE)
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(tmp_path / "model"),
                                        use_dynamic_shape=True, minimum_segment_size=1)
    converter.convert()
    members = {n for e in converter.result.engines for n in e.nodes}
    assert members and not any("unknown" in n for n in members)  # the variable's Const
    monkeypatch.delenv("TF_TRT_EXPERIMENTAL_FEATURES")
    frozen = trt.TrtGraphConverterV2(input_saved_model_dir=str(tmp_path / "model"),
                                     use_dynamic_shape=True, minimum_segment_size=1)
    frozen.convert()
    assert any("unknown" in n for e in frozen.result.engines for n in e.nodes)


class ReadOutside(tf.Module):
    """v1 read by the engine and by a Maximum left native: out = a*v1 + b*v2 - 45, max(a, v1)."""

    def __init__(self) -> None:
        super().__init__()
        self.v1 = tf.Variable(np.full([1, 1, 1], 13.0, np.float32))
        self.v2 = tf.Variable(np.full([1, 1, 1], 37.0, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 1], tf.float32, name="a"),
                                  tf.TensorSpec([None, 1, 1], tf.float32, name="b")])
    def __call__(self, a: tf.Tensor, b: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"sum": a * self.v1 + b * self.v2 - 45.0, "top": tf.maximum(a, self.v1)}


def test_a_variable_also_read_outside_engines_is_fed_as_its_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = ReadOutside()
    tf.saved_model.save(module, str(tmp_path / "model"),
                        signatures=module.__call__.get_concrete_function())
    monkeypatch.setenv("TF_TRT_EXPERIMENTAL_FEATURES", FEATURE)
    monkeypatch.setenv("TF_TRT_OP_DENYLIST", "Maximum")
    convert_and_save(tmp_path / "model", tmp_path / "converted")
    [ops] = native_segment_ops(tmp_path / "converted")
    assert ops.count("ReadVariableOp") == 1  # v2; v1's value comes from the top level
    outputs = tf.saved_model.load(str(tmp_path / "converted")).signatures["serving_default"](
        a=tf.ones([4, 1, 1]), b=2 * tf.ones([4, 1, 1]))
    np.testing.assert_allclose(outputs["sum"].numpy(), np.full([4, 1, 1], 42.0))
    np.testing.assert_allclose(outputs["top"].numpy(), np.full([4, 1, 1], 13.0))
