"""Precision transforms of a segment's ONNX model, shared by every ONNX-based backend.

FP16 is `to_float16`: float tensors and initializers in half precision, Casts at the boundaries
so the engine keeps float32 inputs and outputs, a few ops kept in float32. INT8 is
`quantize_int8`: ONNX Runtime's static quantization (QDQ, uint8 activations with zero points,
symmetric int8 weights, min-max ranges) calibrated on the engine's calibration batches. Both
start from `fold_for_precision`'s folded graph. ONNX Runtime runs the results; TensorRT-RTX,
whose networks are strongly typed, builds the same models (float16 ONNX is an FP16 engine, Q/DQ
nodes are its explicit INT8).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.lazy import ort

# onnx 1.23 writes IR version 14, newer than ORT 1.31 reads (13); IR 10 covers opsets <= 21.
MAX_IR_VERSION = 10
FP16_MAX = float(np.finfo(np.float16).max)

# Ops kept in float32 by `to_float16`: control flow (subgraphs see outer tensors by name),
# random generators and detection post-processing, whose float inputs are scores/boxes.
FP32_ONLY_OPS = frozenset({
    "If", "Loop", "Scan",
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
    "EyeLike", "NonMaxSuppression", "RoiAlign", "TopK",
})
# Inputs the ONNX spec types as float32 whatever the data's type (Resize's roi and scales).
FP32_INPUTS = {"Resize": frozenset({1, 2}), "Upsample": frozenset({1})}
# Nodes `to_float16` adds; they are ours, not TF nodes, so the layer table does not list them.
CAST_PREFIX = "workbench_fp16/"


def fold_for_precision(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` after ONNX Runtime's hardware-independent optimizations: constants folded,
    batch-norm scales and offsets folded into Conv, redundant nodes removed.

    Done before FP16 or INT8, as TensorRT fuses layers before it picks precisions: quantizing
    the unfused graph put Q/DQ pairs between each Conv and its scale, so ORT could no longer
    fold them (ResNet-50 INT8 34 ms, 28 ms folded first). The layer table of such an engine
    then names the Conv's TF node, not the folded batch-norm nodes.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    with tempfile.TemporaryDirectory(prefix="workbench-fold-") as tmp:
        options.optimized_model_filepath = str(Path(tmp) / "folded.onnx")
        ort.InferenceSession(readable_bytes(model), options,
                             providers=["CPUExecutionProvider"])
        return readable_model(onnx.load(options.optimized_model_filepath))


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The model's inputs that are fed (not initializers)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def readable_bytes(model: onnx.ModelProto) -> bytes:
    """`model` serialized with its IR version capped for ORT, without copying the model."""
    ir_version = model.ir_version
    model.ir_version = min(ir_version, MAX_IR_VERSION)
    try:
        return model.SerializeToString()
    finally:
        model.ir_version = ir_version


def readable_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy ORT can load (IR version capped)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = min(copy.ir_version, MAX_IR_VERSION)
    return copy


# --- FP16 ---

def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` computing in float16 with float32 inputs and outputs (see module docstring)."""
    model = readable_model(model)
    graph = model.graph
    types = _elem_types(model)
    _rename_half_outputs(graph, types)
    keep32 = _fp32_consumed(graph)
    half = _halve_initializers(graph, keep32, {o.name for o in graph.output})
    nodes: list[onnx.NodeProto] = []
    casts: dict[tuple[str, int], str] = {}
    for node in graph.node:
        converted = _is_converted(node)
        _cast_inputs(node, converted, types, half, casts, nodes)
        if converted:
            _halve_attributes(node)
            half.update(o for o in node.output if types.get(o) == TensorProto.FLOAT)
        nodes.append(node)
    for out in graph.output:
        if out.name + "_fp16" in half:
            nodes.append(helper.make_node("Cast", [out.name + "_fp16"], [out.name],
                                          name=f"{CAST_PREFIX}{out.name}", to=TensorProto.FLOAT))
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]  # stale float32 types; ORT infers them again
    return model


def _is_converted(node: onnx.NodeProto) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type not in FP32_ONLY_OPS


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type
             for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def _rename_half_outputs(graph: onnx.GraphProto, types: dict[str, int]) -> None:
    """Float outputs made by converted nodes become `<name>_fp16`; a final Cast restores them."""
    producers = {o: n for n in graph.node for o in n.output}
    for out in graph.output:
        node = producers.get(out.name)
        if node is None or not _is_converted(node) or types.get(out.name) != TensorProto.FLOAT:
            continue
        new = out.name + "_fp16"
        types[new] = TensorProto.FLOAT
        for n in graph.node:
            n.output[:] = [new if o == out.name else o for o in n.output]
            n.input[:] = [new if i == out.name else i for i in n.input]


def _fp32_consumed(graph: onnx.GraphProto) -> set[str]:
    return {name for node in graph.node for i, name in enumerate(node.input)
            if not _is_converted(node) or i in FP32_INPUTS.get(node.op_type, ())}


def _halve_initializers(graph: onnx.GraphProto, keep32: set[str], outputs: set[str]) -> set[str]:
    half = set()
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT and tensor.name not in keep32 | outputs:
            graph.initializer[index].CopyFrom(half_tensor(tensor))
            half.add(tensor.name)
    return half


def half_tensor(tensor: onnx.TensorProto) -> onnx.TensorProto:
    """`tensor` as float16, clipped so that large float32 values become +-65504, not inf."""
    values = np.clip(numpy_helper.to_array(tensor), -FP16_MAX, FP16_MAX).astype(np.float16)
    return numpy_helper.from_array(values, tensor.name)


def _cast_inputs(node: onnx.NodeProto, converted: bool, types: dict[str, int], half: set[str],
                 casts: dict[tuple[str, int], str], nodes: list[onnx.NodeProto]) -> None:
    for index, name in enumerate(node.input):
        is_half = name in half
        if not name or not (is_half or types.get(name) == TensorProto.FLOAT):
            continue
        want_half = converted and index not in FP32_INPUTS.get(node.op_type, ())
        if want_half != is_half:
            to = TensorProto.FLOAT16 if want_half else TensorProto.FLOAT
            node.input[index] = _cast(name, to, casts, nodes)


def _cast(name: str, to: int, casts: dict[tuple[str, int], str],
          nodes: list[onnx.NodeProto]) -> str:
    if (name, to) not in casts:
        suffix = "fp16" if to == TensorProto.FLOAT16 else "fp32"
        out = f"{name}_{suffix}_cast"
        nodes.append(helper.make_node("Cast", [name], [out], name=f"{CAST_PREFIX}{out}", to=to))
        casts[(name, to)] = out
    return casts[(name, to)]


def _halve_attributes(node: onnx.NodeProto) -> None:
    """Float results fixed by attributes: Cast's target, Constant(OfShape)'s value."""
    for attr in node.attribute:
        if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
            attr.i = TensorProto.FLOAT16
        elif attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
            attr.t.CopyFrom(half_tensor(attr.t))


# --- INT8 ---

class _CalibrationReader:
    """ORT's CalibrationDataReader protocol over the spec's batches."""

    def __init__(self, names: list[str], batches: list[tuple[np.ndarray, ...]]):
        self._feeds: Iterator[dict[str, np.ndarray]] = iter(
            [{n: np.asarray(x, np.float32) if x.dtype == np.float64 else x
              for n, x in zip(names, batch, strict=True)} for batch in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)

    def set_range(self, start_index: int, end_index: int) -> None:  # pragma: no cover
        raise NotImplementedError


def quantize_int8(model: onnx.ModelProto, batches: list[tuple[np.ndarray, ...]],
                  symmetric: bool = False) -> onnx.ModelProto:
    """Static QDQ quantization calibrated on `batches`.

    TensorRT would use symmetric int8 activations and per-channel weights; on digits_cnn that
    lost 9 points of top-1 under ORT, while asymmetric uint8 activations with per-tensor weights
    (ORT's x86 U8S8 kernels) match FP32, so the ONNX Runtime engine uses those. `symmetric`
    makes TensorRT's kind (the only Q/DQ TensorRT builds: int8, zero points 0).
    """
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    reader_class = type("Reader", (_CalibrationReader, CalibrationDataReader), {})
    reader = reader_class([i.name for i in graph_inputs(model)], batches)
    model = readable_model(model)  # quantize_static moves the initializers of what it is given
    with tempfile.TemporaryDirectory(prefix="workbench-int8-") as tmp, _quiet_root_logger():
        out = Path(tmp) / "int8.onnx"
        quantize_static(
            model, out, reader, quant_format=QuantFormat.QDQ, per_channel=symmetric,
            activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
            weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
            # TensorRT dequantizes int8 only: biases stay float (ORT would make them int32).
            extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": True,
                           **({"QuantizeBias": False} if symmetric else {})},
        )
        return readable_model(onnx.load(str(out)))


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """quantize_static logs a pre-processing hint on the root logger at every call."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        root.setLevel(level)
