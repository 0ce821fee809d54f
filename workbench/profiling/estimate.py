"""GPU latency of a TensorRT engine's kernels on a named GPU, estimated without that GPU.

Per kernel (`tensorrt_kernels.Kernel`: a layer of trtexec's `--exportLayerInfo` / the engine
inspector's JSON read by `profiling.trtexec.read_trtexec_kernels`, or one TensorRT-RTX's
builder listed): its work (FLOPs of a convolution or matrix product, from its shapes and
weights, or from the TF nodes it holds) and the bytes it moves (inputs, outputs and weights at
their datatypes), turned into time by a roofline with fitted efficiencies:

    time = launch[kind] + max(FLOPs / (peak[precision] * compute_eff[precision] * fill**power),
                              bytes / (bandwidth * memory_eff[kind]))

where `fill` (<= 1) is the share of the GPU's SMs the kernel's output tiles can occupy. The
coefficients are fitted by `benchmarks/estimate.py --fit` on real TensorRT profiles
(`../shared/fixtures/trtexec`) and on PyTorch/cuDNN kernel times measured on an H100
(`benchmarks/results/gpu_h100.json`); they live in `estimate_coefficients.json` beside this
module with the measured leave-one-out errors that every estimate quotes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.engines.inspection.tensorrt_kernels import (
    NON_COMPUTE_TYPES,
    EngineAnatomy,
    Kernel,
    KernelTensor,
    inspector_kernels,
)
from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GpuFacts, gpu_facts

COEFFICIENTS_FILE = Path(__file__).with_name("estimate_coefficients.json")
KINDS = ("gemm", "memory", "norm", "myelin")
PRECISIONS = ("fp32", "fp16", "int8")  # fp32 layers run as TF32 where the GPU has it
TILE = 64  # output tile edge used to count how many SMs a convolution/GEMM can fill

# Layer types of the inspector (CaskConvolution, CaskGemmConvolution...) and of TensorRT-RTX's
# listing (`correlation` is its convolution, `gemm` its matrix product).
_GEMM_TYPES = re.compile(r"Convolution|Deconvolution|Gemm|MatrixMultiply|FullyConnected|"
                         r"Attention|^correlation$", re.I)
# No kernel of the network: the inspector's no-ops, TensorRT-RTX's shape calls, stream events
# and copies of shape values to the GPU (dynamic shapes).
_FREE_TYPES = {"NoOp", "Constant", "Shape", "Assertion", "ShapeHostToDevice"} | NON_COMPUTE_TYPES
_NORM_TYPES = re.compile(r"Norm|SoftMax|Reduce|TopK", re.I)
_MYELIN_TYPES = {"Myelin", "ForeignNode"}  # opaque fused regions of the inspector
# TensorRT-RTX's kernel types that run a convolution or matrix product of the nodes they hold
# (`kgen` kernels are generated element-wise ones: they may name a convolution they prepare).
_GEMM_HOLDERS = re.compile(r"^(correlation|gemm|runtime_fusion)$|Convolution|Gemm|Matrix", re.I)
_DTYPE_BYTES = {"FP32": 4, "TF32": 4, "INT32": 4, "FP16": 2, "BF16": 2, "INT8": 1, "FP8": 1,
                "UINT8": 1, "BOOL": 1, "INT64": 8, "INT4": 0.5}
_PRECISION_OF = {"FP16": "fp16", "BF16": "fp16", "INT8": "int8", "FP8": "int8", "INT4": "int8"}


@dataclass(frozen=True)
class KernelWork:
    """What one kernel must do: its kind, FLOPs, bytes moved, compute precision and fill."""

    kind: str  # gemm, memory, norm, myelin, or free (no kernel: NoOp, Constant)
    flops: float
    bytes: float
    precision: str  # fp32, fp16 or int8 (of its first input); fp32 runs as TF32 where it can
    tiles: float  # output tiles of TILE x TILE (gemm kernels)


def as_kernels(layers: EngineAnatomy | Iterable[Kernel | Mapping[str, Any]]) -> list[Kernel]:
    """Kernels of an anatomy, kernels, or layer records in the inspector's form (`Name`,
    `LayerType`, `Inputs`, `Outputs`, `Weights`, `OutMaps`...: what benchmarks write)."""
    if isinstance(layers, EngineAnatomy):
        return list(layers.kernels)
    items = list(layers)
    records = [item for item in items if not isinstance(item, Kernel)]
    converted = iter(inspector_kernels(records))
    return [item if isinstance(item, Kernel) else next(converted) for item in items]


def kernel_work(kernel: Kernel) -> KernelWork:
    """Work and bytes of one kernel from its own shapes, datatypes and weights."""
    inputs, outputs = kernel.inputs, kernel.outputs
    precision = _precision((inputs or outputs or (None,))[0])
    moved = sum(tensor_bytes(t) for t in (*inputs, *outputs, *kernel.constants))
    if kernel.type in _FREE_TYPES:
        return KernelWork("free", 0.0, 0.0, precision, 0.0)
    if kernel.type in _MYELIN_TYPES:
        return KernelWork("myelin", 0.0, moved, precision, 0.0)
    if _GEMM_TYPES.search(kernel.type):
        flops, positions, out_channels = _gemm_flops(kernel)
        tiles = math.ceil(positions / TILE) * math.ceil(out_channels / TILE)
        return KernelWork("gemm", flops, moved, precision, tiles)
    kind = "norm" if _NORM_TYPES.search(kernel.type) or _is_norm_plugin(kernel) else "memory"
    return KernelWork(kind, 0.0, moved, precision, 0.0)


def engine_work(kernels: Sequence[Kernel], node_work: Mapping[str, KernelWork],
                node_weight_bytes: Mapping[str, float] | None = None) -> list[KernelWork]:
    """Work of TensorRT-RTX's kernels of one engine from the TF nodes they hold.

    A fused kernel's name and type do not say what it computes (`__myl_CorrMulAddAddRelu...`,
    `runtime_fusion`), so its FLOPs are those of the convolutions and matrix products among its
    TF nodes (`node_work`, each node's work as its own kernel), each counted once, in the
    kernel that runs it (a `correlation`, `gemm` or `runtime_fusion` kernel, else the first
    that names it); its kind is theirs (else `norm` where it holds a normalisation or
    reduction). Bytes are the kernel's own tensors at the datatypes TensorRT chose, with its
    weights; kernels listed without weights (the JSON form) take their GEMM nodes' weights from
    `node_weight_bytes`.
    """
    runner: dict[str, int] = {}
    for index, kernel in enumerate(kernels):
        for node in kernel.nodes:
            work = node_work.get(node)
            if work is None or work.kind != "gemm":
                continue
            if node not in runner or (_GEMM_HOLDERS.search(kernel.type)
                                      and not _GEMM_HOLDERS.search(kernels[runner[node]].type)):
                runner[node] = index
    works = []
    for index, kernel in enumerate(kernels):
        own = kernel_work(kernel)
        gemm_nodes = [n for n, i in runner.items() if i == index]
        if gemm_nodes:
            weights = 0.0 if kernel.constants else sum(
                (node_weight_bytes or {}).get(n, 0.0) for n in gemm_nodes)
            works.append(replace(own, kind="gemm", bytes=own.bytes + weights,
                                 flops=sum(node_work[n].flops for n in gemm_nodes),
                                 tiles=sum(node_work[n].tiles for n in gemm_nodes)))
        elif own.kind in ("free", "myelin", "gemm") or not kernel.nodes:
            works.append(own)
        else:
            norm = any(node_work.get(n, own).kind == "norm" for n in kernel.nodes)
            works.append(replace(own, kind="norm" if norm else "memory", flops=0.0, tiles=0.0))
    return works


def with_batch(kernel: Kernel, batch_size: int) -> Kernel:
    """The kernel with its dynamic leading dimension (-1, as TensorRT lists a profile's
    tensors) set to `batch_size`; other dynamic dimensions count as 1."""
    def fixed(tensors: tuple[KernelTensor, ...]) -> tuple[KernelTensor, ...]:
        return tuple(replace(t, shape=tuple(batch_size if i == 0 and d < 0 else d
                                            for i, d in enumerate(t.shape))) for t in tensors)

    return replace(kernel, inputs=fixed(kernel.inputs), outputs=fixed(kernel.outputs))


def kernel_time_ms(work: KernelWork, gpu: GpuFacts, coefficients: dict) -> float:
    """The roofline time of one kernel on one GPU under fitted coefficients."""
    if work.kind == "free":
        return 0.0
    # An architecture measured apart from the fit (Hopper, on the H100) scales compute and launch.
    scale = coefficients.get("architecture", {}).get(gpu.compute_capability.split(".")[0], {})
    memory_s = work.bytes / (gpu.memory_gb_s * 1e9 * coefficients["memory_eff"][work.kind])
    compute_s = 0.0
    if work.flops:
        fill = min(1.0, work.tiles / gpu.sms) if work.tiles else 1.0
        precision = "tf32" if work.precision == "fp32" else work.precision
        rate = (gpu.peak_tflops(precision) * 1e12 * coefficients["compute_eff"][work.precision]
                * scale.get("compute", {}).get(work.precision, 1.0))
        compute_s = work.flops / (rate * fill ** coefficients["fill_power"])
    launch = coefficients["launch_ms"][work.kind] * scale.get("launch", 1.0)
    return launch + 1e3 * max(memory_s, compute_s)


def load_coefficients(path: Path = COEFFICIENTS_FILE) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot read the estimate's fitted coefficients ({exc}); "
                             "run `python benchmarks/estimate.py --fit`") from None


def error_note(gpu: GpuFacts, coefficients: dict | None = None) -> str:
    """The label every estimated figure carries, with the model's measured error."""
    errors = (coefficients or load_coefficients()).get("errors", {})
    measured = errors.get("median_abs_model_error")
    text = f"estimated for {gpu.name}"
    if measured is None:
        return text + " (model error not measured)"
    text += (f"; leave-one-out model-level error on real TensorRT profiles: median "
             f"{100 * measured:.0f}%, worst {100 * errors['max_abs_model_error']:.0f}% "
             f"({errors.get('sets', '?')} sets)")
    held_out = errors.get("h100_held_out")
    if held_out:  # architectures measured on an H100 and never fitted on
        median, worst = held_out["median_abs_layers_error"], held_out["max_abs_layers_error"]
        text += f"; out of sample on an H100: median {100 * median:.0f}%, worst {100 * worst:.0f}%"
    return text


def estimate_layers(layers: EngineAnatomy | Iterable[Kernel | Mapping[str, Any]],
                    gpu: str | GpuFacts, coefficients: dict | None = None,
                    works: Sequence[KernelWork] | None = None) -> list[dict]:
    """Per kernel: name, type, estimated_ms, with the work behind it (flops, bytes, kind).

    `works` (one per kernel, `engine_work`) replace the work read from the kernels' own
    shapes."""
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    kernels = as_kernels(layers)
    works = list(works) if works is not None else [kernel_work(k) for k in kernels]
    return [{"name": kernel.name, "type": kernel.type,
             "estimated_ms": kernel_time_ms(work, facts, coefficients),
             "kind": work.kind, "flops": work.flops, "bytes": work.bytes,
             "precision": work.precision}
            for kernel, work in zip(kernels, works, strict=True)]


def estimate_engine(layers: EngineAnatomy | Iterable[Kernel | Mapping[str, Any]],
                    gpu: str | GpuFacts, coefficients: dict | None = None) -> dict:
    """The contract's document for one engine: gpu, total_ms, layers, error_note.

    The total is the kernels' sum plus one engine launch (TensorRT's enqueue, as trtexec
    measured it on the fixtures' GPUs with CUDA graphs).
    """
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    kernels = as_kernels(layers)
    if not any(k.inputs or k.outputs for k in kernels):
        raise WorkbenchError("the layers hold no shapes (names only?): write the layer info "
                             "with trtexec --exportLayerInfo=FILE --profilingVerbosity=detailed")
    rows = estimate_layers(kernels, facts, coefficients)
    total = sum(r["estimated_ms"] for r in rows) + coefficients["engine_launch_ms"]
    return {"gpu": facts.name, "total_ms": total,
            "layers": [{"name": r["name"], "type": r["type"], "estimated_ms": r["estimated_ms"]}
                       for r in rows],
            "error_note": error_note(facts, coefficients)}


def estimate_text(document: dict) -> str:
    """The per-layer table `workbench estimate` prints (kernels that cost nothing left out)."""
    layers = [layer for layer in document["layers"] if layer["estimated_ms"] > 0]
    width = min(70, max((len(layer["name"]) for layer in layers), default=10))
    lines = [f"{'layer':{width}}  {'type':20} {'est. ms':>9}"]
    for layer in layers:
        name = layer["name"] if len(layer["name"]) <= width else layer["name"][:width - 3] + "..."
        lines.append(f"{name:{width}}  {layer['type'][:20]:20} {layer['estimated_ms']:9.4f}")
    free = len(document["layers"]) - len(layers)
    lines.append(f"total {document['total_ms']:.3f} ms over {len(layers)} kernels"
                 + (f" ({free} layers without a kernel)" if free else "")
                 + f": {document['error_note']}")
    return "\n".join(lines)


# --- Shapes and datatypes ------------------------------------------------------------------

def _precision(tensor: KernelTensor | None) -> str:
    return _PRECISION_OF.get(str(tensor.dtype), "fp32") if tensor is not None else "fp32"


def _elements(shape: Sequence[int]) -> int:
    return math.prod(max(int(d), 1) for d in shape)


def tensor_bytes(tensor: KernelTensor) -> float:
    """Bytes of a tensor at its datatype (4 a value where TensorRT names none)."""
    return _elements(tensor.shape) * _DTYPE_BYTES.get(str(tensor.dtype), 4)


def _gemm_flops(kernel: Kernel) -> tuple[float, int, int]:
    """FLOPs, output positions (GEMM M) and output channels (GEMM N) of a conv/GEMM kernel,
    from its weights (`OutMaps` output channels, else the weights' first dimension)."""
    out = kernel.outputs[0].shape if kernel.outputs else (1,)
    out_elements = _elements(out)
    weights = _weights(kernel)
    out_maps = int(kernel.parameters.get("OutMaps") or 0)
    if not out_maps and weights is not None and len(weights.shape) >= 2:
        # A convolution's weights are (out, in, *window); a matrix's (in, out) or (out, in).
        out_maps = weights.shape[-1] if len(weights.shape) == 2 and out[-1] == \
            weights.shape[-1] else weights.shape[0]
    if weights is not None and out_maps:
        positions = out_elements // out_maps
        return 2.0 * positions * _elements(weights.shape), positions, out_maps
    if kernel.type == "Attention" and kernel.inputs:
        dims = kernel.inputs[0].shape or (1, 1, 1)
        seq, head = int(dims[-2]), int(dims[-1])
        rows = _elements(dims) // head
        return 4.0 * rows * seq * head, rows, seq
    inner = int(kernel.inputs[0].shape[-1]) if kernel.inputs and kernel.inputs[0].shape else 1
    columns = int(out[-1]) if out else 1
    return 2.0 * out_elements * inner, out_elements // max(columns, 1), columns


def _weights(kernel: Kernel) -> KernelTensor | None:
    """The inspector's `weights`, else the largest constant of two or more dimensions (the
    builder lists biases and folded scales beside the weights)."""
    named = [t for t in kernel.constants if t.name == "weights"]
    matrices = [t for t in kernel.constants if len(t.shape) >= 2]
    return named[0] if named else max(matrices, key=lambda t: _elements(t.shape), default=None)


def _is_norm_plugin(kernel: Kernel) -> bool:
    if not kernel.type.startswith("Plugin"):
        return False
    return "Norm" in str(kernel.parameters.get("PluginType", "")) or "Norm" in kernel.name
