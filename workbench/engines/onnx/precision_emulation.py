"""FP16 as TensorRT stores it, on backends that compute float16 in float32.

TensorRT's FP16 kernels write every tensor they produce as float16: values round to float16
and pass +-65504 to +-inf. ONNX Runtime's CPU provider has few float16 kernels: it casts a
float16 model's tensors to float32 around each op and then drops the casts between
neighbouring ops, so an intermediate value past 65504 survives in float32 (a segment squaring
values of about 3000 and taking the root again validated within 2e-3 of native TensorFlow).

`store_as_float16` turns the float16 model `to_float16` makes into one that computes in
float32 but rounds each float16 tensor through a float16 Cast pair where it is produced, which
ONNX Runtime keeps (it drops only the casts it inserted itself). The values are those of a
float16 engine storing every tensor in float16; the arithmetic inside one op runs in float32,
like TensorRT's FP16 kernels, which accumulate in float32.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.engines.onnx.precision import half_tensor

# Nodes this module adds (not TF nodes: the layer table leaves them out, as to_float16's casts).
ROUND_PREFIX = "workbench_fp16/round/"


def store_as_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (float16 tensors inside, float32 at its inputs and outputs) computing in float32
    with every float16 tensor rounded to float16 where it is made (overflow to +-inf)."""
    halves = _float16_tensors(model)
    graph = model.graph
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT16:  # exact in float32
            graph.initializer[index].CopyFrom(_as_float32(tensor))
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        _widen_attributes(node)
        nodes.append(node)
        for port, name in enumerate(node.output):
            if name in halves:
                nodes.extend(_rounded(node, port, name))
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]  # float16 types no longer hold; ONNX Runtime infers them again
    return model


def store_unquantized_as_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """An INT8 (QDQ) `model` whose float tensors outside quantization are rounded to float16.

    TF-TRT builds INT8 engines with FP16 allowed too, so a layer without an INT8 kernel may run
    in FP16: its weights and the tensors it makes are float16 (the worst case assumed here).
    Tensors a QuantizeLinear reads and those a DequantizeLinear makes keep their INT8 meaning;
    scales and zero points are untouched."""
    quantization = {"QuantizeLinear", "DequantizeLinear"}
    floats = _typed_tensors(model, TensorProto.FLOAT)
    quantized = {name for node in model.graph.node if node.op_type in quantization
                 for name in node.input}
    graph = model.graph
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT and tensor.name not in quantized:
            graph.initializer[index].CopyFrom(_as_float32(half_tensor(tensor)))
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        nodes.append(node)
        if node.op_type in quantization:
            continue
        for port, name in enumerate(node.output):
            if name in floats and name not in quantized:
                nodes.extend(_rounded(node, port, name))
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _float16_tensors(model: onnx.ModelProto) -> set[str]:
    return _typed_tensors(model, TensorProto.FLOAT16)


def _typed_tensors(model: onnx.ModelProto, elem_type: int) -> set[str]:
    """Names of the tensors nodes make with this element type (ONNX shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    return {v.name for v in [*inferred.value_info, *inferred.output]
            if v.type.tensor_type.elem_type == elem_type}


def _rounded(node: onnx.NodeProto, port: int, name: str) -> list[onnx.NodeProto]:
    """Renames output `port` of `node` and rebuilds `name` from it through float16."""
    raw, half = f"{ROUND_PREFIX}{name}", f"{ROUND_PREFIX}{name}_fp16"
    node.output[port] = raw
    if node.op_type == "Cast":  # a cast to float16 already rounds: compute in float32 after
        node.output[port] = half
        return [helper.make_node("Cast", [half], [name], name=f"{ROUND_PREFIX}{name}",
                                 to=TensorProto.FLOAT)]
    return [helper.make_node("Cast", [raw], [half], name=f"{ROUND_PREFIX}{name}_to_fp16",
                             to=TensorProto.FLOAT16),
            helper.make_node("Cast", [half], [name], name=f"{ROUND_PREFIX}{name}",
                             to=TensorProto.FLOAT)]


def _widen_attributes(node: onnx.NodeProto) -> None:
    """Float16 constants in attributes (Constant, ConstantOfShape) back to float32 values."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.FLOAT16:
            attr.t.CopyFrom(_as_float32(attr.t))


def _as_float32(tensor: onnx.TensorProto) -> onnx.TensorProto:
    values = numpy_helper.to_array(tensor).astype(np.float32)
    return numpy_helper.from_array(values, tensor.name)
