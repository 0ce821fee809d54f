"""The GPU latency estimate against real GPU timings: leave-one-out error, and the fit itself.

    .venv/bin/python benchmarks/estimate.py          # leave-one-out error per set, results
    .venv/bin/python benchmarks/estimate.py --fit    # refit on every set, write the coefficients

Sets: the six trtexec exports of `../shared/fixtures/trtexec` (per-layer profiles of real
TensorRT engines on an RTX 3090, an A100 and an A10) and the PyTorch/cuDNN kernel times measured
on an H100 (`benchmarks/results/gpu_h100.json`, made by `benchmarks/gpu_measure.py`). For each
set, the model is fitted on the others and judged on it: the model-level error (sum of estimated
kernels plus one engine launch against trtexec's GPU compute time; for the ControlNet, which has
none, against its per-layer times less profiling overhead; for the H100, against ResNet-50's
convolutions summed and the whole ResNet-50 fused as TensorRT fuses it) and the per-layer rank
correlation (Spearman). Then, with the final coefficients and never fitted on, the H100's kernels of
other architectures (`results/gpu_h100_held_out.json`, made by `benchmarks/gpu_held_out.py`:
MobileNetV2, EfficientNet-B0, a BERT-base encoder layer): the out-of-sample check.

The fit: least squares on log(time) over every timed kernel. trtexec's per-layer profile
synchronises around each layer, so its per-layer times exceed the real ones by a few
microseconds; that overhead is measured on the fixtures that also have a model-level time
((sum of layers - GPU compute time) / kernels) and taken off before fitting.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import record
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.profiling.estimate.coefficients import COEFFICIENTS_FILE
from workbench.profiling.estimate.kernels import (
    KINDS,
    PRECISIONS,
    KernelWork,
    as_kernels,
    kernel_work,
)
from workbench.profiling.estimate.roofline import kernel_time_ms
from workbench.profiling.trtexec import fixtures_dir, read_trtexec_kernels

H100_RESULTS = Path(__file__).resolve().parent / "results" / "gpu_h100.json"
# Measured on the H100 and never fitted on (benchmarks/gpu_held_out.py): the out-of-sample check.
H100_HELD_OUT = Path(__file__).resolve().parent / "results" / "gpu_h100_held_out.json"
# The ControlNet export records no GPU; its README infers the A10 (TensorRT Hackathon 2023).
FIXTURE_GPU = {"controlnet-a10-fp16": "NVIDIA A10"}


@dataclass
class TimedKernel:
    name: str
    layer_type: str
    work: KernelWork
    measured_ms: float  # the kernel's own time (profiling overhead taken off)


@dataclass
class TimedSet:
    name: str
    gpu: GpuFacts
    kernels: list[TimedKernel]
    references: dict[str, float] = field(default_factory=dict)  # model-level figures, ms
    groups: dict[str, list[int]] = field(default_factory=dict)  # kernels summed per reference
    launches: int = 1  # engine launches per reference


def fixture_sets(profile_overhead_ms: float | None = None) -> tuple[list[TimedSet], float, float]:
    """The six trtexec sets, the per-layer profiling overhead and the median enqueue time."""
    root = fixtures_dir()
    if root is None:
        sys.exit("no ../shared/fixtures/trtexec here (or $WORKBENCH_TRTEXEC_FIXTURES)")
    raw = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        profile = _one(folder, ["engine.profile.json", "profile.json"])
        info = _one(folder, ["engine.graph.json", "layerinfo.json"])
        metadata = folder / "engine.profile.metadata.json"
        meta = json.loads(metadata.read_text()) if metadata.is_file() else None
        layers = {kernel.name: kernel for kernel in read_trtexec_kernels(info).kernels}
        records = [r for r in json.loads(profile.read_text()) if "name" in r]
        timed = [(layers[r["name"]], float(r.get("medianMs", r["averageMs"]))) for r in records
                 if r["name"] in layers]
        device = (meta["device_information"]["Selected Device"] if meta
                  else FIXTURE_GPU[folder.name])
        perf = meta["performance_summary"] if meta else None
        raw.append((folder.name, gpu_facts(device), timed, perf))
    overheads, enqueues = [], []
    for _, _, timed, perf in raw:
        if perf:
            gpu_compute = perf["GPU Compute Time"][3]  # median
            busy = [ms for layer, ms in timed if kernel_work(layer).kind != "free"]
            overheads.append((sum(busy) - gpu_compute) / len(busy))
            enqueues.append(perf["Enqueue Time"][3])
    overhead = statistics.median(overheads) if profile_overhead_ms is None else profile_overhead_ms
    sets = []
    for name, gpu, timed, perf in raw:
        kernels = [TimedKernel(layer.name, layer.type, work, max(ms - overhead, 0.3 * ms))
                   for layer, ms in timed if (work := kernel_work(layer)).kind != "free"]
        if perf:
            reference = {"trtexec GPU compute time": perf["GPU Compute Time"][3]}
        else:
            reference = {"per-layer times less profiling overhead":
                         sum(k.measured_ms for k in kernels)}
        sets.append(TimedSet(name, gpu, kernels, reference,
                             {key: list(range(len(kernels))) for key in reference}))
    return sets, overhead, statistics.median(enqueues)


def h100_set(path: Path = H100_RESULTS) -> TimedSet | None:
    """The H100's PyTorch/cuDNN kernels, with each ResNet-50 configuration as a reference."""
    if not path.is_file():
        return None
    measured = json.loads(path.read_text())["data"]["measurements"]
    gpu = gpu_facts(measured["device"]["name"])
    kernels, references, groups = [], {}, {}
    for key, layers in measured["layers"].items():
        first = len(kernels)
        kernels += [TimedKernel(kernel.name, kernel.type, kernel_work(kernel),
                                layer["measured_ms"])
                    for kernel, layer in zip(as_kernels(layers), layers, strict=True)]
        model = measured["models"].get(key)
        if model:
            indices = list(range(first, len(kernels)))
            references[f"{key} layers"] = model["layers_sum_ms"]
            groups[f"{key} layers"] = indices
            if model.get("fused_model_ms"):  # fused as TensorRT fuses (gpu_measure.py)
                references[f"{key} fused model"] = model["fused_model_ms"]
                groups[f"{key} fused model"] = indices
    return TimedSet(f"h100-pytorch ({gpu.name})", gpu, kernels, references, groups, launches=0)


def held_out_sets(path: Path = H100_HELD_OUT) -> list[TimedSet]:
    """The H100's kernels of architectures never fitted on, one set per architecture
    (MobileNetV2, EfficientNet-B0, a BERT encoder layer); each configuration (batch,
    precision) gives two references: its layers summed and the whole model (PyTorch's, with
    more kernels than TensorRT would run)."""
    if not path.is_file():
        return []
    measured = json.loads(path.read_text())["data"]["measurements"]
    gpu = gpu_facts(measured["device"]["name"])
    sets: dict[str, TimedSet] = {}
    for key, layers in measured["layers"].items():
        if not layers:
            continue
        model, _, config = key.rpartition("_b")
        timed = sets.setdefault(model, TimedSet(f"{model} (H100, held out)", gpu, [],
                                                launches=0))
        first = len(timed.kernels)
        timed.kernels += [TimedKernel(kernel.name, kernel.type, kernel_work(kernel),
                                      layer["measured_ms"])
                          for kernel, layer in zip(as_kernels(layers), layers, strict=True)]
        indices = list(range(first, len(timed.kernels)))
        figures = measured["models"][key]
        for what, ms in (("layers", figures["layers_sum_ms"]), ("whole model",
                                                                  figures["model_ms"])):
            if ms:
                timed.references[f"b{config} {what}"] = ms
                timed.groups[f"b{config} {what}"] = indices
    return list(sets.values())


def held_out_errors(results: list[dict]) -> dict:
    """Median and worst absolute error of the held-out references, layers summed and whole
    models apart, with every reference's signed error."""
    found: dict = {"layers": [], "whole model": []}
    signed = {}
    for result in results:
        for key, error in result["model_level"].items():
            found["whole model" if key.endswith("whole model") else "layers"].append(
                abs(error["error"]))
            signed[f"{result['set'].split(' ')[0]} {key}"] = error["error"]
    return {**{f"{stat}_abs_{what.replace(' ', '_')}_error": fn(values)
               for what, values in found.items() if values
               for stat, fn in (("median", statistics.median), ("max", max))},
            "median_spearman": statistics.median(r["spearman"] for r in results),
            "references": signed}


# --- The fit -------------------------------------------------------------------------------

def _coefficients(theta: np.ndarray, engine_launch_ms: float,
                  absent: frozenset = frozenset()) -> dict:
    """Coefficients from the fitted vector; a precision no training set holds gets the
    geometric mean of the others' compute efficiency."""
    n, m = len(KINDS), len(PRECISIONS)
    compute = dict(zip(PRECISIONS, np.exp(theta[:m]), strict=True))
    fitted = [v for k, v in compute.items() if k not in absent]
    for precision in absent:
        compute[precision] = float(np.exp(np.mean(np.log(fitted))))
    rest = theta[m:]
    return {"compute_eff": {k: float(v) for k, v in compute.items()},
            "fill_power": float(rest[0]),
            "memory_eff": {k: float(np.exp(v)) for k, v in zip(KINDS, rest[1:1 + n],
                                                               strict=True)},
            "launch_ms": {"free": 0.0, **{k: float(np.exp(v)) for k, v in zip(
                KINDS, rest[1 + n:], strict=True)}},
            "engine_launch_ms": engine_launch_ms}


def fit(sets: list[TimedSet], engine_launch_ms: float) -> dict:
    kernels = [(s.gpu, k) for s in sets for k in s.kernels]
    present = {k.work.kind for _, k in kernels}
    absent = frozenset(set(PRECISIONS) - {k.work.precision for _, k in kernels
                                          if k.work.kind == "gemm"})
    # Plain log residuals: weighting them towards the long kernels was tried (power 1 and 2 of
    # the time) and gave larger leave-one-out errors.
    target = np.log([k.measured_ms for _, k in kernels])

    def residuals(theta: np.ndarray) -> np.ndarray:
        coefficients = _coefficients(theta, engine_launch_ms, absent)
        predicted = [kernel_time_ms(k.work, gpu, coefficients) for gpu, k in kernels]
        return np.log(predicted) - target

    n, m = len(KINDS), len(PRECISIONS)
    start = np.array([np.log(0.5)] * m + [0.5] + [np.log(0.6)] * n + [np.log(0.004)] * n)
    low = np.array([np.log(0.05)] * m + [0.0] + [np.log(0.05)] * n + [np.log(5e-4)] * n)
    high = np.array([0.0] * m + [1.0] + [np.log(1.5)] * n + [np.log(0.2)] * n)
    theta = least_squares(residuals, start, bounds=(low, high)).x
    coefficients = _coefficients(theta, engine_launch_ms, absent)
    # A kind or precision no set holds keeps a guess; say so.
    coefficients["unfitted"] = sorted((set(KINDS) - present) | absent)
    return coefficients


def fit_architecture(timed: TimedSet, coefficients: dict) -> dict:
    """Compute scales per precision and a launch scale for the architecture of one measured
    set (the H100's Hopper), the fixture-fitted coefficients held fixed: least squares on log
    kernel time. A precision the set lacks gets the geometric mean of the others."""
    major = timed.gpu.compute_capability.split(".")[0]
    present = [p for p in PRECISIONS if any(k.work.precision == p and k.work.flops
                                            for k in timed.kernels)]
    target = np.log([k.measured_ms for k in timed.kernels])

    def scales(theta: np.ndarray) -> dict:
        compute = dict(zip(present, np.exp(theta[:-1]).tolist(), strict=True))
        mean = float(np.exp(np.mean(theta[:-1])))
        return {"compute": {p: compute.get(p, mean) for p in PRECISIONS},
                "launch": float(np.exp(theta[-1]))}

    def residuals(theta: np.ndarray) -> np.ndarray:
        trial = {**coefficients, "architecture": {major: scales(theta)}}
        return np.log([kernel_time_ms(k.work, timed.gpu, trial) for k in timed.kernels]) - target

    low = np.log([0.05] * len(present) + [0.2])
    high = np.log([2.0] * len(present) + [10.0])
    theta = least_squares(residuals, np.zeros(len(present) + 1), bounds=(low, high)).x
    return {major: {**scales(theta), "fitted_on": timed.name}}


def judge(timed: TimedSet, coefficients: dict) -> dict:
    predicted = [kernel_time_ms(k.work, timed.gpu, coefficients) for k in timed.kernels]
    measured = [k.measured_ms for k in timed.kernels]
    errors = {}
    for key, reference in timed.references.items():
        total = sum(predicted[i] for i in timed.groups[key])
        total += timed.launches * coefficients["engine_launch_ms"]
        errors[key] = {"estimated_ms": round(total, 4), "measured_ms": round(reference, 4),
                       "error": round(total / reference - 1, 4)}
    rho = spearmanr(predicted, measured).statistic
    return {"set": timed.name, "gpu": timed.gpu.name, "kernels": len(measured),
            "spearman": round(float(rho), 3), "model_level": errors}


def _one(folder: Path, names: list[str]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    sys.exit(f"{folder}: none of {names}")


def main(argv: list[str]) -> None:
    sets, overhead, enqueue = fixture_sets()
    h100 = h100_set()
    print(f"profiling overhead per layer (fixtures): {overhead * 1e3:.2f} us; engine launch "
          f"(trtexec enqueue, CUDA graph): {enqueue * 1e3:.2f} us")
    results = [judge(held_out, fit([s for s in sets if s is not held_out], enqueue))
               for held_out in sets]
    final = fit(sets, enqueue)
    if h100:  # not in the main fit: PyTorch/cuDNN kernels are not TensorRT's (docs/estimate.md)
        results.append(judge(h100, final))  # out of sample: what Ampere's fit says of Hopper
        final["architecture"] = fit_architecture(h100, final)
        in_sample = judge(h100, final)
        in_sample["set"] += " with its Hopper scales (in sample)"
        results.append(in_sample)
    _print(results)
    held_out = [judge(timed, final) for timed in held_out_sets()]
    if held_out:  # judged with the final coefficients, Hopper's scales included; never fitted
        print("\nOut of sample on the H100 (benchmarks/gpu_held_out.py; never fitted on):")
        _print(held_out)
    fixture_errors = [abs(e["error"]) for r in results[:len(sets)]
                      for e in r["model_level"].values()]
    h100_errors = {key: e["error"] for r in results[len(sets):len(sets) + 1]
                   for key, e in r["model_level"].items()}
    scaled_errors = {key: e["error"] for r in results[len(sets) + 1:]
                     for key, e in r["model_level"].items()}
    final["profile_overhead_ms"] = overhead
    final["errors"] = {
        "median_abs_model_error": statistics.median(fixture_errors),
        "max_abs_model_error": max(fixture_errors), "sets": len(sets),
        "median_spearman": statistics.median(r["spearman"] for r in results[:len(sets)]),
        "h100_resnet50_errors": h100_errors,
        "h100_resnet50_errors_with_hopper_scales": scaled_errors}
    if held_out:
        final["errors"]["h100_held_out"] = held_out_errors(held_out)
    final["fitted_by"] = ("python benchmarks/estimate.py --fit: least squares on log kernel "
                          "time over the six trtexec fixture sets; 'architecture' scales for "
                          "Hopper then on the H100's cuDNN kernels (gpu_h100.json)")
    print("\ncoefficients fitted on every fixture set:", json.dumps(final, indent=1))
    if "--fit" in argv:
        COEFFICIENTS_FILE.write_text(json.dumps(final, indent=1) + "\n")
        print(f"written to {COEFFICIENTS_FILE}")
    figures = [record.figure(
        "GPU latency estimate: leave-one-out model-level error on the trtexec fixtures "
        "(median / worst)",
        f"{100 * final['errors']['median_abs_model_error']:.0f}% / "
        f"{100 * final['errors']['max_abs_model_error']:.0f}% ({len(sets)} sets)"),
        record.figure("GPU latency estimate: per-layer rank correlation (median Spearman over "
                      "the held-out fixture sets)", f"{final['errors']['median_spearman']:.2f}")]
    if h100_errors:
        for what, suffix in (("convolutions summed", "layers"), ("whole model fused as "
                                                                 "TensorRT fuses", "fused model")):
            figures.append(record.figure(
                f"GPU latency estimate on the H100, fitted on the fixtures only: ResNet-50 {what} "
                "through cuDNN, batch 1/8/32, FP16; FP32", "; ".join(", ".join(
                    f"{100 * h100_errors[f'resnet50_b{b}_{p} {suffix}']:+.0f}%"
                    for b in (1, 8, 32)) for p in ("fp16", "fp32"))))
        figures.append(record.figure(
            "... with Hopper's compute and launch scales fitted on those H100 kernels (in "
            "sample): whole model fused, batch 1/8/32, FP16; FP32", "; ".join(", ".join(
                f"{100 * scaled_errors[f'resnet50_b{b}_{p} fused model']:+.0f}%"
                for b in (1, 8, 32)) for p in ("fp16", "fp32"))))
    if held_out:
        summary = final["errors"]["h100_held_out"]
        figures.append(record.figure(
            "GPU latency estimate out of sample on the H100 (MobileNetV2, EfficientNet-B0, a "
            "BERT encoder layer; batch 1/8/32, FP16/FP32; never fitted on): layers summed, "
            "median / worst; whole PyTorch model, median / worst; median Spearman",
            f"{100 * summary['median_abs_layers_error']:.0f}% / "
            f"{100 * summary['max_abs_layers_error']:.0f}%; "
            f"{100 * summary['median_abs_whole_model_error']:.0f}% / "
            f"{100 * summary['max_abs_whole_model_error']:.0f}%; "
            f"{summary['median_spearman']:.2f}"))
    rows = [[r["set"], r["gpu"], r["kernels"], r["spearman"], f"{100 * e['error']:+.0f}% "
             f"({e['estimated_ms']:.3f} vs {e['measured_ms']:.3f} ms, {key})"]
            for r in results + held_out for key, e in r["model_level"].items()
            ]
    details = {"title": "GPU latency estimate, leave-one-out per set (H100: fitted on the "
                        "fixtures only, then with Hopper scales fitted on it; then the H100's "
                        "held-out architectures, never fitted on)",
               "columns": ["held-out set", "GPU", "kernels", "Spearman", "model-level error"],
               "rows": rows}
    record.write("estimate", figures, details=details,
                 data={"leave_one_out": results, "held_out": held_out, "coefficients": final})


def _print(results: list[dict]) -> None:
    print(f"\n{'held-out set':38} {'GPU':24} {'kern':>4} {'rho':>5}  model-level error")
    for result in results:
        lead = (f"{result['set'][:38]:38} {result['gpu'][:24]:24} {result['kernels']:4d} "
                f"{result['spearman']:5.2f}")
        for key, err in result["model_level"].items():
            print(f"{lead}  {100 * err['error']:+6.1f}%  ({err['estimated_ms']:.3f} vs "
                  f"{err['measured_ms']:.3f} ms, {key})")
            lead = " " * len(lead)


if __name__ == "__main__":
    main(sys.argv[1:])
