"""A converted model's GPU latency estimated for `--target-gpu`: per engine from the kernels
TensorRT built where they are at hand, else from the engine's TF nodes; native TF from its nodes.

- **From TensorRT's kernels** (`kernels`: engine -> the kernels TensorRT-RTX's builder made of
  it, `convert --tensorrt`): each kernel is timed by the fitted roofline of
  `roofline.py` with its own tensors (shapes with the batch size asked, datatypes
  TensorRT chose, weights) and the FLOPs of the convolutions and matrix products among the TF
  nodes it holds (`kernels.engine_work`): fusion is what TensorRT did, not a rule.
- **From the TF nodes** otherwise: each TF node of the prepared graph becomes a kernel with
  Grappler's shapes (the unknown batch dimension set to `batch_size`); inside an engine,
  element-wise nodes that follow a convolution, matrix product or another element-wise node in
  the same engine are fused (TensorRT's vertical fusion, a rule of thumb) and cost nothing.

Outside engines, and for the native model, every node is a TensorFlow kernel plus TensorFlow's
per-op overhead. `engine_basis` says which engines were estimated from which; the label too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workbench.engines.inspection.tensorrt_kernels import Kernel, KernelTensor
from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.graph.nodes import Graph, Node
from workbench.profiling.estimate.coefficients import error_note, load_coefficients, with_ranges
from workbench.profiling.estimate.kernels import (
    KernelWork,
    engine_work,
    kernel_work,
    tensor_bytes,
    with_batch,
)
from workbench.profiling.estimate.roofline import estimate_layers, kernel_time_ms

# Assumed, not measured (no GPU ran TensorFlow here): TensorFlow's executor spends a few
# microseconds per GPU op launching it; a TRTEngineOp call adds its own bookkeeping before
# TensorRT's enqueue. Both are orders of magnitude the TF-TRT user guide's discussion of
# small engines implies; docs/estimate.md says so.
TF_OP_OVERHEAD_MS = 0.005
ENGINE_OP_OVERHEAD_MS = 0.02
FROM_KERNELS, FROM_NODES = "tensorrt_kernels", "tf_nodes"  # `engine_basis` values
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
_DTYPES = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8"}


def graph_estimate(graph: Graph, engines: Sequence[Any], gpu: str | GpuFacts,
                   precision_mode: str = "FP32", batch_size: int = 1,
                   coefficients: dict | None = None, *,
                   kernels: Mapping[str, Sequence[Kernel]] | None = None) -> dict:
    """Converted vs native TF latency of one model on a GPU, with per-engine times.

    `engines` are the conversion result's engines (`.name`, `.nodes`); `kernels`, engine name
    -> the kernels TensorRT built of it (`engine_kernels` of the TensorRT verdicts): those
    engines are estimated from their kernels, the others from their TF nodes.
    """
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    engine_precision = _precision(precision_mode)
    in_engine = {node: engine.name for engine in engines for node in engine.nodes}
    built = {name: list(found) for name, found in (kernels or {}).items() if found}
    engine_ms = {engine.name: ENGINE_OP_OVERHEAD_MS + coefficients["engine_launch_ms"]
                 for engine in engines}
    basis = {engine.name: FROM_KERNELS if engine.name in built else FROM_NODES
             for engine in engines}
    for engine in engines:
        if engine.name in built:
            engine_ms[engine.name] += sum(row["estimated_ms"] for row in kernel_estimates(
                graph, engine.nodes, built[engine.name], facts, precision_mode, batch_size,
                coefficients))
    native_ops_ms = native_ms = 0.0
    for node in graph.real_nodes:
        if node.op in _FREE:
            continue
        native = _kernel_ms(graph, node, None, batch_size, facts, coefficients) \
            + TF_OP_OVERHEAD_MS
        native_ms += native
        engine = in_engine.get(node.name)
        if engine is None:
            native_ops_ms += native
        elif basis[engine] == FROM_NODES and not _fused(graph, node, engine, in_engine):
            engine_ms[engine] += _kernel_ms(graph, node, engine_precision, batch_size, facts,
                                            coefficients)
    engines_total = sum(engine_ms.values())
    return with_ranges({"gpu": facts.name, "batch_size": batch_size,
                        "converted_ms": engines_total + native_ops_ms, "native_ms": native_ms,
                        "engines_ms": engines_total, "native_ops_ms": native_ops_ms,
                        "engines": engine_ms, "engine_basis": basis,
                        "label": f"{error_note(facts, coefficients)}; {basis_note(basis)}"},
                       coefficients)


def basis_note(basis: Mapping[str, str]) -> str:
    """What the estimate of a model's engines started from, for its label."""
    from_kernels = sum(value == FROM_KERNELS for value in basis.values())
    if not from_kernels:
        return BASIS
    engines = ("every engine" if from_kernels == len(basis)
               else f"{from_kernels} of {len(basis)} engines")
    return (f"{engines} from the kernels TensorRT built (the rest and native TF from the TF "
            f"nodes' shapes); native TF adds an assumed {TF_OP_OVERHEAD_MS * 1e3:.0f} us per op")


def engine_kernels(verdicts: Mapping[str, Any]) -> dict[str, list[Kernel]]:
    """engine -> the kernels TensorRT built, from TensorRT verdicts (`TensorRTVerdict`s or
    their JSON objects, `convert --json --tensorrt`'s); engines not built are left out."""
    found = {}
    for name, verdict in verdicts.items():
        listed = verdict.get("kernels") if isinstance(verdict, Mapping) else verdict.kernels
        if listed:
            found[name] = [k if isinstance(k, Kernel) else Kernel.from_record(k) for k in listed]
    return found


def kernel_estimates(graph: Graph, engine_nodes: Iterable[str], kernels: Sequence[Kernel],
                     gpu: str | GpuFacts, precision_mode: str = "FP32", batch_size: int = 1,
                     coefficients: dict | None = None) -> list[dict]:
    """Per kernel TensorRT built of one engine (`engine_nodes`, its TF nodes): name, type,
    estimated_ms, kind, flops, bytes, precision at `batch_size` on `gpu` (no engine launch)."""
    return estimate_layers(kernels, gpu, coefficients,
                           works=kernels_work(graph, engine_nodes, kernels,
                                              _precision(precision_mode), batch_size))


def kernels_work(graph: Graph, engine_nodes: Iterable[str], kernels: Sequence[Kernel],
                 precision: str, batch_size: int) -> list[KernelWork]:
    """The work of an engine's kernels at `batch_size`, FLOPs from the TF nodes they hold."""
    node_work, weight_bytes = {}, {}
    for name in engine_nodes:
        node = graph.by_name.get(name)
        if node is None or node.op in _FREE:
            continue
        as_kernel = node_kernel(graph, node, precision, batch_size)
        node_work[name] = kernel_work(as_kernel)
        weight_bytes[name] = sum(tensor_bytes(t) for t in as_kernel.constants)
    return engine_work([with_batch(k, batch_size) for k in kernels], node_work, weight_bytes)


def node_kernel(graph: Graph, node: Node, precision: str | None, batch_size: int) -> Kernel:
    """One TF node as a kernel of its own (`precision` None: the tensors' own datatypes)."""
    inputs = [graph.output_spec(ref) for ref in node.inputs]
    output = node.output_specs[0] if node.output_specs else None
    data_inputs = inputs[:1] if node.op in _GEMM else inputs

    def tensor(spec: Any, name: str) -> KernelTensor:
        dims = tuple(batch_size if i == 0 and d < 0 else max(d, 1)
                     for i, d in enumerate(spec.shape or ())) if spec is not None else (1,)
        kind = precision or ("fp16" if spec is not None and spec.dtype in ("half", "float16")
                             else "fp32")
        return KernelTensor(name, dims, _DTYPES[kind], _DTYPES[kind])

    constants: tuple[KernelTensor, ...] = ()
    parameters: dict[str, int] = {}
    if node.op in _GEMM and len(inputs) > 1 and inputs[1] is not None and inputs[1].shape:
        out = tensor(output, "output").shape
        found = _weights(node, inputs[1].shape, out, _DTYPES[precision or "fp32"])
        if found:
            constants, parameters = (found[0],), {"OutMaps": found[1]}
            if node.op == "DepthwiseConv2dNative":  # one group per input channel
                parameters["Groups"] = max(inputs[1].shape[2], 1)
    return Kernel(node.name, _layer_type(node.op), (node.name,), (node.name,),
                  inputs=tuple(tensor(spec, f"input{i}") for i, spec in enumerate(data_inputs)),
                  outputs=(tensor(output, "output"),), constants=constants,
                  parameters=parameters)


def _precision(precision_mode: str) -> str:
    """The estimate's datatype key for a TF-TRT precision mode (INT8 and FP16 as such)."""
    return {"FP16": "fp16", "INT8": "int8"}.get(precision_mode.upper(), "fp32")


def _kernel_ms(graph: Graph, node: Node, precision: str | None, batch_size: int,
               gpu: GpuFacts, coefficients: dict) -> float:
    return kernel_time_ms(kernel_work(node_kernel(graph, node, precision, batch_size)), gpu,
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


def _weights(node: Node, filter_shape: tuple[int, ...], out_dims: tuple[int, ...],
             dtype: str) -> tuple[KernelTensor, int] | None:
    """Weights and output channels of a convolution or a matrix product with a 2-D operand."""
    shape = tuple(max(d, 1) for d in filter_shape)
    if "Conv" in node.op:
        out_maps = out_dims[1] if node.attr("data_format", b"NHWC") in (b"NCHW", "NCHW") \
            else out_dims[-1]
        return KernelTensor("weights", shape, dtype, dtype), out_maps
    if len(shape) == 2:
        columns = shape[0] if node.attr("transpose_b", False) else shape[1]
        return KernelTensor("weights", shape, dtype, dtype), columns
    return None
