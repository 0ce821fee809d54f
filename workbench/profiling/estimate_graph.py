"""A converted model's GPU latency estimated from its TensorFlow nodes, for `--target-gpu`.

Where TensorRT's own kernels of an engine are not at hand, each TF node of the prepared graph
becomes a kernel record in trtexec's layer-info form (shapes from Grappler's shape inference,
the unknown batch dimension set to `batch_size`), timed by the fitted roofline of
`profiling/estimate.py`. Inside an engine, element-wise nodes that follow a convolution,
matrix product or another element-wise node in the same engine are fused (TensorRT's vertical
fusion) and cost nothing; outside, every node is a TensorFlow kernel plus TensorFlow's per-op
overhead. Everything here is labelled as estimated, from TF nodes rather than TensorRT kernels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.graph.nodes import Graph, Node
from workbench.profiling.estimate import error_note, kernel_time_ms, kernel_work, load_coefficients

# Assumed, not measured (no GPU ran TensorFlow here): TensorFlow's executor spends a few
# microseconds per GPU op launching it; a TRTEngineOp call adds its own bookkeeping before
# TensorRT's enqueue. Both are orders of magnitude the TF-TRT user guide's discussion of
# small engines implies; docs/estimate.md says so.
TF_OP_OVERHEAD_MS = 0.005
ENGINE_OP_OVERHEAD_MS = 0.02
BASIS = ("from the TF nodes' shapes, not TensorRT's kernels; native TF adds an assumed "
         f"{TF_OP_OVERHEAD_MS * 1e3:.0f} us per op")

_FREE = {"Const", "Identity", "IdentityN", "NoOp", "Placeholder", "PlaceholderWithDefault",
         "Shape", "ShapeN", "Size", "Rank", "Reshape", "Squeeze", "ExpandDims", "StopGradient",
         "Snapshot", "_Arg", "_Retval", "TRTEngineOp"}
_GEMM = {"Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "MatMul",
         "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "_FusedConv2D", "_FusedMatMul"}
_POINTWISE = {"BiasAdd", "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Add",
              "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "FusedBatchNorm",
              "FusedBatchNormV2", "FusedBatchNormV3", "Cast", "Rsqrt", "Sqrt", "Square", "Exp",
              "Erf", "Pow", "Neg", "Softplus", "Abs", "Log", "SquaredDifference", "Reciprocal"}
_NORM = {"Softmax", "LogSoftmax", "Mean", "Sum", "Max", "Min", "Prod", "ArgMax", "ArgMin",
         "TopKV2"}
_FORMATS = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8"}


def graph_estimate(graph: Graph, engines: Sequence[Any], gpu: str | GpuFacts,
                   precision_mode: str = "FP32", batch_size: int = 1,
                   coefficients: dict | None = None) -> dict:
    """Converted vs native TF latency of one model on a GPU, with per-engine times.

    `engines` are the conversion result's engines (`.name`, `.nodes`).
    """
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    in_engine = {node: engine.name for engine in engines for node in engine.nodes}
    engine_ms = {engine.name: ENGINE_OP_OVERHEAD_MS + coefficients["engine_launch_ms"]
                 for engine in engines}
    native_ops_ms = native_ms = 0.0
    engine_precision = {"FP16": "fp16", "INT8": "int8"}.get(precision_mode.upper(), "fp32")
    for node in graph.real_nodes:
        if node.op in _FREE:
            continue
        native = _kernel_ms(graph, node, None, batch_size, facts, coefficients) \
            + TF_OP_OVERHEAD_MS
        native_ms += native
        engine = in_engine.get(node.name)
        if engine is None:
            native_ops_ms += native
        elif not _fused(graph, node, engine, in_engine):
            engine_ms[engine] += _kernel_ms(graph, node, engine_precision, batch_size, facts,
                                            coefficients)
    engines_total = sum(engine_ms.values())
    return {"gpu": facts.name, "batch_size": batch_size,
            "converted_ms": engines_total + native_ops_ms, "native_ms": native_ms,
            "engines_ms": engines_total, "native_ops_ms": native_ops_ms,
            "engines": engine_ms, "label": f"{error_note(facts, coefficients)}; {BASIS}"}


def node_record(graph: Graph, node: Node, precision: str | None, batch_size: int) -> dict:
    """One TF node as a trtexec-style layer record (`precision` None: the tensors' own)."""
    inputs = [graph.output_spec(ref) for ref in node.inputs]
    output = node.output_specs[0] if node.output_specs else None
    data_inputs = inputs[:1] if node.op in _GEMM else inputs

    def tensor(spec: Any) -> dict:
        dims = [batch_size if i == 0 and d < 0 else max(d, 1)
                for i, d in enumerate(spec.shape or ())] if spec is not None else [1]
        kind = precision or ("fp16" if spec is not None and spec.dtype in ("half", "float16")
                             else "fp32")
        return {"Dimensions": dims, "Format/Datatype": _FORMATS[kind]}

    record = {"Name": node.name, "LayerType": _layer_type(node.op),
              "Inputs": [tensor(spec) for spec in data_inputs],
              "Outputs": [tensor(output)]}
    if node.op in _GEMM and len(inputs) > 1 and inputs[1] is not None and inputs[1].shape:
        record.update(_weights(node, inputs[1].shape, record["Outputs"][0]["Dimensions"]))
    return record


def _kernel_ms(graph: Graph, node: Node, precision: str | None, batch_size: int,
               gpu: GpuFacts, coefficients: dict) -> float:
    return kernel_time_ms(kernel_work(node_record(graph, node, precision, batch_size)), gpu,
                          coefficients)


def _fused(graph: Graph, node: Node, engine: str, in_engine: dict[str, str]) -> bool:
    """An element-wise node TensorRT fuses into its producer in the same engine."""
    if node.op not in _POINTWISE:
        return False
    producers: Iterable[Node] = (graph.by_name[ref.node] for ref in node.inputs)
    return any(in_engine.get(p.name) == engine and (p.op in _GEMM or p.op in _POINTWISE)
               for p in producers)


def _layer_type(op: str) -> str:
    if op in _GEMM:
        return "Convolution" if "Conv" in op else "MatrixMultiply"
    if op in _NORM:
        return "Reduce" if op not in ("Softmax", "LogSoftmax") else "SoftMax"
    return "ElementWise" if op in _POINTWISE else op


def _weights(node: Node, filter_shape: tuple[int, ...], out_dims: list[int]) -> dict:
    """Weights and output channels of a convolution or a matrix product with a 2-D operand."""
    shape = [max(d, 1) for d in filter_shape]
    if "Conv" in node.op:
        out_maps = out_dims[1] if node.attr("data_format", b"NHWC") in (b"NCHW", "NCHW") \
            else out_dims[-1]
        return {"Weights": {"Type": "Float", "Count": math.prod(shape)}, "OutMaps": out_maps}
    if len(shape) == 2:
        columns = shape[0] if node.attr("transpose_b", False) else shape[1]
        return {"Weights": {"Type": "Float", "Count": math.prod(shape)}, "OutMaps": columns}
    return {}
