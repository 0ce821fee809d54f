"""GPU latency of a TensorRT engine's kernels on a named GPU, estimated without that GPU.

Each kernel's work (`kernels.kernel_work`: FLOPs, bytes, the GEMM's M x N outputs and its N)
becomes time on a GPU from that GPU's datasheet (`graph.gpu_facts`: SMs, peak rates, memory
bandwidth, L2, tensor-core generation) and a few fitted shares of those peaks:

    compute = waves x (2 x tile rows x tile columns x (K + k_fill[cores])
                       / (peak / SMs x compute_eff[generation][class]) + wave_ms)
    memory  = (bytes beyond L2 + bytes within L2 / l2_speedup) / (bandwidth x memory_eff[kind])
    time    = launch[kind] + max(compute, memory)

The class is a matrix product's precision (`tf32`), a convolution's (`conv_tf32`: an implicit
GEMM that gathers its operands through the filter window), or one of the CUDA cores' at the
FP32 rate: `direct` (depthwise-like convolutions) and `simt` (convolutions of few input
channels, an image's 3: they do not fill the tensor cores' vectors). Each tile runs the GEMM's
K (FLOPs / 2 M N) plus `k_fill` steps of its main loop, its pipeline's fill and drain, which a
short K (a 1x1 convolution of few channels) pays as often as a long one; each wave pays
`wave_ms` besides, the tiles' write-out and the next wave's start.

A GEMM's output is cut into tiles whose columns are the smallest edge of 32, 64 or 128 that
holds N (N = 24 pays for 32 columns) and whose rows are the largest that still gives every
SM a tile; the tiles run in waves of one per SM: a GEMM of 133 tiles on 132 SMs takes two
waves (the wave scaling of cross-GPU predictors such as Habitat). A matrix product whose tiles
leave SMs idle splits its K over them (cuBLAS's split-K); convolutions do not
(cuDNN's leave them idle: RetinaNet's batch-1 heads). Every efficiency is at most 1 of the
datasheet peak; `l2_speedup` (L2 over DRAM bandwidth) is at least 1. The coefficients, fitted
by `benchmarks/estimate.py --fit`, and what each stands for are in `coefficients.json` and
docs/estimate.md; the label every estimate carries quotes the error measured on data the fit
never saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from workbench.engines.inspection.tensorrt_kernels import EngineAnatomy, Kernel
from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.profiling.estimate.coefficients import (
    error_note,
    load_coefficients,
    with_ranges,
)
from workbench.profiling.estimate.kernels import (
    TENSOR_CORE_KINDS,
    KernelWork,
    as_kernels,
    kernel_work,
)

TILE_EDGES = (128, 64, 32)
SPLIT_K_MIN = 256  # the shortest K slice a split GEMM gives an SM
# Convolutions on the CUDA cores at the FP32 rate: depthwise-like (direct) and of few input
# channels (simt); with FP32 (TF32 off), the compute keys the CUDA cores run.
CUDA_CORE_CLASSES = ("direct", "simt")
CUDA_CORE_RATES = ("fp32", *CUDA_CORE_CLASSES)
CORES = {True: "cuda_cores", False: "tensor_cores"}
_BORROWS = {"int8": "fp16", "fp32": "tf32", "direct": "fp32"}


def rate_key(precision: str, gpu: GpuFacts) -> str:
    """The datasheet peak a kernel of `precision` runs at: FP32 tensors as TF32 where the GPU
    has it (TensorRT's default), BF16 as FP16."""
    if precision == "fp32":
        return "tf32" if gpu.tf32_tflops else "fp32"
    return "fp32" if precision == "fp32_strict" else precision


def compute_efficiency(coefficients: dict, generation: str, key: str) -> float:
    """The share of the peak a generation's kernels of one class reach (`key`: a GEMM's
    precision, fp32, tf32, fp16 or int8; `conv_` and the precision for a convolution's implicit
    GEMM; direct or simt: convolutions on the CUDA cores at the FP32 rate). A precision a
    generation did not measure borrows FP16's (INT8: the datasheets double the rate) or
    TF32's (FP32); a class no kernel of that generation measured borrows another
    generation's share of its own peak (Ampere's first), as cross-GPU predictors transfer;
    the CUDA cores' classes never borrow a tensor core's share."""
    table = coefficients["compute_eff"]
    kind, _, precision = key.rpartition("_")
    fallback = None if precision in CUDA_CORE_CLASSES else "fp16"
    precisions = [precision] + [p for p in (_BORROWS.get(precision), fallback) if p]
    generations = [generation, "ampere", *sorted(set(table) - {generation, "ampere"})]
    for cls in (kind, "conv") if kind == "conv_nchw" else (kind,):
        for shares in (table.get(name) or {} for name in generations):
            for candidate in (f"{cls}_{p}" if cls else p for p in precisions):
                if candidate in shares:
                    return shares[candidate]
    raise WorkbenchError(f"the estimate's coefficients hold no compute efficiency for {key}")


def compute_key(work: KernelWork, gpu: GpuFacts) -> str:
    """Which compute efficiency a kernel uses: its class (GEMM, convolution or direct) and
    the datasheet peak it runs at."""
    if work.kind == "direct" or work.narrow_channels:
        return "direct" if work.kind == "direct" else "simt"
    rate = rate_key(work.precision, gpu)
    if work.kind == "conv":
        return f"conv_nchw_{rate}" if work.cudnn_nchw else f"conv_{rate}"
    return rate


def k_fill(coefficients: dict, key: str) -> float:
    """The K steps a tile pays besides its own: the CUDA cores' (FP32 with TF32 off, direct
    convolutions) or the tensor cores'."""
    fill = coefficients.get("k_fill") or {}
    return fill.get(CORES[key.rpartition("_")[2] in CUDA_CORE_RATES], 0.0)


def peak_flops(key: str, gpu: GpuFacts) -> float:
    rate = key.rpartition("_")[2]
    return gpu.peak_tflops("fp32" if rate in CUDA_CORE_RATES else rate) * 1e12


def tiles(outputs: Any, columns: Any, sms: Any, depth: Any, split: Any = False
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """How a GEMM's M x N output (K deep) is cut: (waves, tile rows, tile columns, K a tile
    runs), elementwise.

    A tile's columns are the smallest edge that holds N (N = 24 pays for 32 columns, 819 for
    7 x 128), its rows the largest edge that still gives every SM a tile; the tiles run in
    waves of one per SM. N unknown (0): square tiles over sqrt(M x N). Where `split` (a
    matrix product: cuBLAS's split-K) and the tiles leave SMs idle, K is split over them, in
    slices of at least SPLIT_K_MIN."""
    outputs = np.maximum(np.asarray(outputs, dtype=float), 1.0)
    columns = np.asarray(columns, dtype=float)
    n = np.where(columns > 0, columns, np.sqrt(outputs))
    m = outputs / np.maximum(n, 1.0)
    tile_columns = np.full_like(n, float(TILE_EDGES[0]))
    for edge in TILE_EDGES[1:]:
        tile_columns = np.where(n <= edge, float(edge), tile_columns)
    tile_rows = np.full_like(m, float(TILE_EDGES[-1]))
    for edge in reversed(TILE_EDGES[:-1]):
        enough = np.ceil(m / edge) * np.ceil(n / tile_columns) >= sms
        tile_rows = np.where(enough, float(edge), tile_rows)
    count = np.ceil(m / tile_rows) * np.ceil(n / tile_columns)
    depth = np.asarray(depth, dtype=float)
    slices = np.clip(np.minimum(np.floor(sms / count), np.ceil(depth / SPLIT_K_MIN)), 1, None)
    slices = np.where(split, slices, 1.0)
    return np.ceil(count * slices / sms), tile_rows, tile_columns, depth / slices


def roofline_ms(flops: Any, moved: Any, outputs: Any, columns: Any, peak_flops: Any, sms: Any,
                bandwidth: Any, l2_bytes: Any, compute_eff: Any, memory_eff: Any,
                l2_speedup: Any, launch_ms: Any, wave_ms: Any = 0.0,
                k_fill: Any = 0.0, split: Any = False) -> np.ndarray:
    """The model's time, elementwise over arrays (one kernel each) or scalars: waves of
    output tiles at a share of the peak against bytes at a share of the bandwidth.

    Each tile runs the GEMM's K (FLOPs / 2 M N) plus `k_fill` steps: its pipeline's fill
    and its write-out, which a short K (a 1x1 convolution of few channels) pays as often
    as a long one, in steps of its own main loop."""
    outputs, flops = np.asarray(outputs, dtype=float), np.asarray(flops, dtype=float)
    waves, rows, cols, depth = tiles(outputs, columns, sms,
                                     flops / (2.0 * np.maximum(outputs, 1.0)), split)
    tiled = waves * sms * 2.0 * rows * cols * (depth + k_fill)
    tiled_kernel = outputs > 0  # a GEMM-shaped kernel; the others (element-wise) have no tiles
    work = np.where(tiled_kernel, tiled, flops)
    compute_s = work / (peak_flops * compute_eff) + np.where(tiled_kernel, waves, 0.0) \
        * wave_ms * 1e-3
    within = np.minimum(moved, l2_bytes)
    memory_s = (np.asarray(moved) - within + within / l2_speedup) / (bandwidth * memory_eff)
    return launch_ms + 1e3 * np.maximum(compute_s, memory_s)


def kernel_time_ms(work: KernelWork, gpu: GpuFacts, coefficients: dict) -> float:
    """The model's time of one kernel on one GPU under fitted coefficients."""
    if work.kind == "free":
        return 0.0
    key = compute_key(work, gpu)
    return float(roofline_ms(
        work.flops, work.bytes, work.outputs if work.kind in TENSOR_CORE_KINDS else 0.0,
        work.columns, peak_flops(key, gpu), gpu.sms, gpu.memory_gb_s * 1e9, gpu.l2_mb * 2 ** 20,
        compute_efficiency(coefficients, gpu.generation, key),
        coefficients["memory_eff"][work.kind], coefficients["l2_speedup"],
        coefficients["launch_ms"][work.kind], coefficients.get("wave_ms", 0.0),
        k_fill(coefficients, key), work.kind == "gemm"))


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
    return with_ranges({"gpu": facts.name, "total_ms": total,
                        "layers": [{"name": r["name"], "type": r["type"],
                                    "estimated_ms": r["estimated_ms"]} for r in rows],
                        "error_note": error_note(facts, coefficients)}, coefficients)


def estimate_text(document: dict) -> str:
    """The per-layer table `workbench estimate` prints (kernels that cost nothing left out)."""
    layers = [layer for layer in document["layers"] if layer["estimated_ms"] > 0]
    width = min(70, max((len(layer["name"]) for layer in layers), default=10))
    lines = [f"{'layer':{width}}  {'type':20} {'est. ms':>9}"]
    for layer in layers:
        name = layer["name"] if len(layer["name"]) <= width else layer["name"][:width - 3] + "..."
        lines.append(f"{name:{width}}  {layer['type'][:20]:20} {layer['estimated_ms']:9.4f}")
    free = len(document["layers"]) - len(layers)
    lines.append(f"total {document['total_ms']:.3f} ms ({document['total_low_ms']:.3f}-"
                 f"{document['total_high_ms']:.3f}) over {len(layers)} kernels"
                 + (f" ({free} layers without a kernel)" if free else "")
                 + f": {document['error_note']}")
    return "\n".join(lines)
