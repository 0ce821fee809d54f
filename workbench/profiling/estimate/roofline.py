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
(`benchmarks/results/gpu_h100.json`); they live in `coefficients.json` beside this
module with the measured leave-one-out errors that every estimate quotes.
"""


from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workbench.engines.backends.tensorrt_kernels import EngineAnatomy, Kernel
from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.profiling.estimate.coefficients import error_note, load_coefficients
from workbench.profiling.estimate.kernels import KernelWork, as_kernels, kernel_work


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
