"""The whole model on the backend: one engine for every node between the signature's inputs and
outputs, the reference figure of the engines benchmark."""

from __future__ import annotations

import numpy as np
import pytest

import sample_models
from workbench.checks.inputs import random_inputs
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.backends.onnxruntime_backend import OnnxRuntimeBackend
from workbench.engines.onnx.segment_export import ExportError
from workbench.engines.runtime.whole_model import whole_model_engine, whole_model_segment
from workbench.engines.segment import INPUT_PREFIX
from workbench.profiling.tensorflow import native_callable


@pytest.fixture(scope="module")
def digits() -> ConversionSession:
    return ConversionSession.open(sample_models.build("digits_cnn"))


def test_segment_covers_every_node_between_inputs_and_outputs(digits) -> None:
    prepared = digits.prepared("FP32")
    segment = whole_model_segment(prepared)
    inputs = set(prepared.optimized.input_nodes)
    computed = {n.name for n in prepared.graph.nodes if n.name not in inputs
                and n.name not in ("_SOURCE", "_SINK")}
    assert set(segment.engine.nodes) == computed
    # Only the signature's inputs feed it: one placeholder per input, nothing else outside.
    placeholders = [n.name for n in segment.graph_def.node if n.op == "Placeholder"]
    assert placeholders == [f"{INPUT_PREFIX}0"]
    assert len(segment.output_names) == len(digits.loaded.output_names)


def test_digits_cnn_whole_model_equals_native(digits) -> None:
    engine = whole_model_engine(digits, ConversionParams(), OnnxRuntimeBackend())
    assert (engine.backend, engine.precision) == ("onnxruntime", "FP32")
    inputs = random_inputs(digits, batch_size=8, seed=3)
    native = native_callable(digits, inputs)()
    outputs = engine.run(list(inputs.values()))
    assert len(outputs) == len(native)
    for expected, got in zip(native.values(), outputs, strict=True):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_an_op_onnx_cannot_express_is_named(tmp_path) -> None:
    import tensorflow as tf

    class Running(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.math.cumsum(tf.nn.relu(x) * 2.0, axis=1, name="running")}

    module = Running()
    tf.saved_model.save(module, str(tmp_path / "m"), signatures=module.serve)
    session = ConversionSession.open(str(tmp_path / "m"))
    with pytest.raises(ExportError, match="Cumsum node .*running"):
        whole_model_engine(session, ConversionParams(), OnnxRuntimeBackend())


def test_deserialized_ort_engine_keeps_its_bytes(digits) -> None:
    """workbench.load's speed fix: a deserialized ONNX Runtime engine runs from the bytes it was
    given instead of writing its model out again (0.2 s of ResNet-50's 0.56 s load). A payload
    whose fields are out of protobuf's canonical order shows it: re-serializing would reorder."""
    from workbench.engines.backends.base import pack_engine, unpack_engine
    from workbench.engines.onnx.segment_export import export_onnx

    model = export_onnx(whole_model_segment(digits.prepared("FP32")))
    graph_only, rest = type(model)(), type(model)()
    graph_only.graph.CopyFrom(model.graph)
    rest.CopyFrom(model)
    rest.ClearField("graph")
    payload = graph_only.SerializeToString() + rest.SerializeToString()  # parses as `model`
    assert payload != model.SerializeToString()
    backend = OnnxRuntimeBackend()
    engine = backend.deserialize(pack_engine("onnxruntime", "FP32", payload), "digits")
    assert unpack_engine(engine.serialize(), "onnxruntime")[1] == payload
    inputs = random_inputs(digits, batch_size=2, seed=1)
    np.testing.assert_allclose(engine.run(list(inputs.values()))[0],
                               native_callable(digits, inputs)()["logits"], atol=1e-4)
