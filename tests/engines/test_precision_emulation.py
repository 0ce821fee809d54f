"""FP16 and INT8 engines compute as TensorRT stores tensors, on ONNX Runtime's CPU provider."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from workbench.engines.backends.onnxruntime_backend import OnnxRuntimeBackend
from workbench.engines.onnx.precision import fold_for_precision, readable_bytes, to_float16
from workbench.engines.settings import BuildRequest, EngineSettings

# Squares of a few thousand pass float16's 65504; their root is representable again.
X = np.array([[3000.0, -300.0, 2.0]], np.float32)


def square_root_model(square: str = "Mul") -> object:
    """y = sqrt(x * x) (or MatMul(x, I) then Pow(., 2)): x's magnitude, through a value float16
    cannot hold."""
    first = [helper.make_node("MatMul", ["x", "eye"], ["mixed"], name="mix")] \
        if square == "Pow" else []
    source = "mixed" if first else "x"
    inputs = [source, source] if square == "Mul" else [source, "two"]
    nodes = [*first, helper.make_node(square, inputs, ["squared"], name="square"),
             helper.make_node("Sqrt", ["squared"], ["y"], name="root")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
         helper.make_tensor("eye", TensorProto.FLOAT, [3, 3], np.eye(3).ravel().tolist())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_orts_cpu_float16_hides_the_overflow_the_emulation_shows() -> None:
    half = to_float16(fold_for_precision(square_root_model()))
    session = ort.InferenceSession(readable_bytes(half), providers=["CPUExecutionProvider"])
    (hidden,) = session.run(None, {"x": X})
    assert np.isfinite(hidden).all()  # ORT computed the square in float32
    engine = OnnxRuntimeBackend(["CPUExecutionProvider"]).build(
        square_root_model(), EngineSettings("FP16"), "e")
    (out,) = engine.run([X])
    assert np.isinf(out[0, 0]) and np.isinf(out[0, 1])  # as TensorRT's FP16 kernels store
    assert out[0, 2] == 2.0
    (fp32,) = OnnxRuntimeBackend(["CPUExecutionProvider"]).build(
        square_root_model(), EngineSettings(), "e").run([X])
    np.testing.assert_allclose(fp32, np.abs(X))


def test_fp16_rounds_every_tensor_to_float16() -> None:
    x = np.array([[1.0001, 200.3, 0.1]], np.float32)
    engine = OnnxRuntimeBackend(["CPUExecutionProvider"]).build(
        square_root_model(), EngineSettings("FP16"), "e")
    (out,) = engine.run([x])
    squared = (x.astype(np.float16).astype(np.float32) ** 2).astype(np.float16)
    expected = np.sqrt(squared.astype(np.float32)).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_int8_rounds_what_it_does_not_quantize_to_float16() -> None:
    """MatMul is quantized; Pow and Sqrt have no INT8 kernel: TF-TRT's INT8 engines may run
    them in FP16."""
    batches = [(X,), (X * 0.5,)]
    engine = OnnxRuntimeBackend(["CPUExecutionProvider"]).build(
        square_root_model("Pow"), EngineSettings("INT8"), "e",
        BuildRequest(calibration_data=batches))
    ops = [n.op_type for n in engine.model.graph.node]
    assert {"QuantizeLinear", "DequantizeLinear"} <= set(ops)
    (out,) = engine.run([X])
    assert np.isinf(out[0, 0])
