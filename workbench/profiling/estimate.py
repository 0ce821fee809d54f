"""GPU latency of a TensorRT engine's kernels on a named GPU, estimated without that GPU.

Per kernel (a layer of trtexec's `--exportLayerInfo` / the engine inspector's JSON): its work
(FLOPs of a convolution or matrix product, from its shapes and weights) and the bytes it moves
(inputs, outputs and weights at their datatypes), turned into time by a roofline with fitted
efficiencies:

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
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GpuFacts, gpu_facts

COEFFICIENTS_FILE = Path(__file__).with_name("estimate_coefficients.json")
KINDS = ("gemm", "memory", "norm", "myelin")
PRECISIONS = ("fp32", "fp16", "int8")  # fp32 layers run as TF32 where the GPU has it
TILE = 64  # output tile edge used to count how many SMs a convolution/GEMM can fill

_GEMM_TYPES = re.compile(r"Convolution|Deconvolution|Gemm|MatrixMultiply|FullyConnected|"
                         r"Attention", re.I)
_FREE_TYPES = {"NoOp", "Constant", "Shape", "Assertion"}
_NORM_TYPES = re.compile(r"Norm|SoftMax|Reduce|TopK", re.I)
_MYELIN_TYPES = {"Myelin", "ForeignNode"}
_DTYPE_BYTES = (("fp32", 4, ("FP32", "Float", "Int32", "INT32")),
                ("fp16", 2, ("FP16", "Half", "BF16")),
                ("int8", 1, ("INT8", "Int8", "FP8", "Bool")))


@dataclass(frozen=True)
class KernelWork:
    """What one kernel must do: its kind, FLOPs, bytes moved, compute precision and fill."""

    kind: str  # gemm, memory, norm, myelin, or free (no kernel: NoOp, Constant)
    flops: float
    bytes: float
    precision: str  # fp32, fp16 or int8 (of its first input); fp32 runs as TF32 where it can
    tiles: float  # output tiles of TILE x TILE (gemm kernels)


def kernel_work(layer: dict) -> KernelWork:
    """Work and bytes of one layer record of trtexec's layer info (shapes, formats, weights)."""
    layer_type = str(layer.get("LayerType", ""))
    inputs = [t for t in layer.get("Inputs", []) if isinstance(t, dict)]
    outputs = [t for t in layer.get("Outputs", []) if isinstance(t, dict)]
    precision = _precision(inputs[0] if inputs else (outputs[0] if outputs else {}))
    tensor_bytes = sum(_tensor_bytes(t) for t in inputs + outputs)
    weights = layer.get("Weights") if isinstance(layer.get("Weights"), dict) else {}
    weight_bytes = weights.get("Count", 0) * _type_bytes(str(weights.get("Type", "Float")))
    if layer_type in _FREE_TYPES:
        return KernelWork("free", 0.0, 0.0, precision, 0.0)
    if layer_type in _MYELIN_TYPES:
        return KernelWork("myelin", 0.0, tensor_bytes, precision, 0.0)
    if _GEMM_TYPES.search(layer_type):
        flops, positions, out_channels = _gemm_flops(layer, inputs, outputs)
        tiles = math.ceil(positions / TILE) * math.ceil(out_channels / TILE)
        return KernelWork("gemm", flops, tensor_bytes + weight_bytes, precision, tiles)
    kind = "norm" if _NORM_TYPES.search(layer_type) or _is_norm_plugin(layer) else "memory"
    return KernelWork(kind, 0.0, tensor_bytes, precision, 0.0)


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
    return (f"{text}; leave-one-out model-level error on real TensorRT profiles: median "
            f"{100 * measured:.0f}%, worst {100 * errors['max_abs_model_error']:.0f}% "
            f"({errors.get('sets', '?')} sets)")


def estimate_layers(layers: list[dict], gpu: str | GpuFacts,
                    coefficients: dict | None = None) -> list[dict]:
    """Per layer: name, type, estimated_ms, with the work behind it (flops, bytes, kind)."""
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    rows = []
    for layer in layers:
        work = kernel_work(layer)
        rows.append({"name": str(layer.get("Name", "")), "type": str(layer.get("LayerType", "")),
                     "estimated_ms": kernel_time_ms(work, facts, coefficients),
                     "kind": work.kind, "flops": work.flops, "bytes": work.bytes,
                     "precision": work.precision})
    return rows


def estimate_engine(layers: list[dict], gpu: str | GpuFacts,
                    coefficients: dict | None = None) -> dict:
    """The contract's document for one engine: gpu, total_ms, layers, error_note.

    The total is the kernels' sum plus one engine launch (TensorRT's enqueue, as trtexec
    measured it on the fixtures' GPUs with CUDA graphs).
    """
    facts = gpu_facts(gpu)
    coefficients = coefficients or load_coefficients()
    rows = estimate_layers(layers, facts, coefficients)
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


def read_layer_info(path: str | Path) -> list[dict]:
    """The layer records of a trtexec `--exportLayerInfo` / inspector JSON file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read the layer-info file ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WorkbenchError(f"{path}: not a JSON layer-info file (trtexec --exportLayerInfo "
                             "--profilingVerbosity=detailed)") from None
    layers = data.get("Layers") if isinstance(data, dict) else None
    if not isinstance(layers, list) or not layers:
        raise WorkbenchError(f"{path}: no 'Layers' array (write it with trtexec "
                             "--exportLayerInfo=FILE --profilingVerbosity=detailed)")
    if all(isinstance(layer, str) for layer in layers):
        raise WorkbenchError(f"{path}: layers hold names only; rebuild with "
                             "--profilingVerbosity=detailed to get shapes")
    return [layer for layer in layers if isinstance(layer, dict)]


# --- Shapes and datatypes ------------------------------------------------------------------

def _type_bytes(text: str) -> int:
    for _, size, words in _DTYPE_BYTES:
        if any(word in text for word in words):
            return size
    return 4


def _precision(tensor: dict) -> str:
    text = str(tensor.get("Format/Datatype", ""))
    for name, _, words in _DTYPE_BYTES:
        if any(word in text for word in words):
            return name
    return "fp32"


def _elements(tensor: dict) -> int:
    dims = tensor.get("Dimensions") or []
    return math.prod(max(int(d), 1) for d in dims) if dims else 1


def _tensor_bytes(tensor: dict) -> float:
    return _elements(tensor) * _type_bytes(str(tensor.get("Format/Datatype", "")))


def _gemm_flops(layer: dict, inputs: list[dict], outputs: list[dict]) -> tuple[float, int, int]:
    """FLOPs, output positions (GEMM M) and output channels (GEMM N) of a conv/GEMM layer."""
    out = outputs[0] if outputs else {}
    out_elements = _elements(out)
    weights = layer.get("Weights") if isinstance(layer.get("Weights"), dict) else {}
    out_maps = int(layer.get("OutMaps") or 0)
    if weights.get("Count") and out_maps:
        positions = out_elements // out_maps
        return 2.0 * positions * weights["Count"], positions, out_maps
    if str(layer.get("LayerType")) == "Attention" and inputs:
        dims = inputs[0].get("Dimensions") or [1, 1, 1]
        seq, head = int(dims[-2]), int(dims[-1])
        rows = _elements(inputs[0]) // head
        return 4.0 * rows * seq * head, rows, seq
    dims_a = (inputs[0].get("Dimensions") if inputs else None) or [1]
    inner = int(dims_a[-1])
    out_dims = out.get("Dimensions") or [1]
    columns = int(out_dims[-1]) if out_dims else 1
    return 2.0 * out_elements * inner, out_elements // max(columns, 1), columns


def _is_norm_plugin(layer: dict) -> bool:
    if not str(layer.get("LayerType", "")).startswith("Plugin"):
        return False
    return "Norm" in str(layer.get("PluginType", "")) or "Norm" in str(layer.get("Name", ""))
