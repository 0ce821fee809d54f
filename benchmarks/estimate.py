"""The GPU latency estimate: its fit, and its error on data the fit never saw.

    .venv/bin/python benchmarks/estimate.py          # out-of-sample error, results file
    .venv/bin/python benchmarks/estimate.py --fit    # ... and write the coefficients

Data, every kernel timed alone on a real GPU:
- the corpus measured on an NVIDIA H200 (`results/gpu_corpus_h200.json`,
  `benchmarks/gpu_corpus.py`): 7300 kernels of ResNet-50, MobileNetV2, EfficientNet-B0,
  RetinaNet, BERT-base, GPT-2 and ViT-B/16 at batch 1-256 in FP32 (TF32 off), TF32, FP16 and
  BF16 through cuDNN/cuBLAS; each (model, batch, precision) is a reference, its kernels summed;
- PyTorch/cuDNN kernels measured on an H100 (`results/gpu_h100.json`: ResNet-50;
  `results/gpu_h100_held_out.json`: MobileNetV2, EfficientNet-B0, a BERT-base layer);
- six real TensorRT profiles (`trtexec` fixtures: ResNet-50 FP32/FP16/INT8 on an RTX 3090,
  ResNet-18 FP32/FP16 on an A100, a ControlNet FP16 on an A10), against trtexec's GPU compute
  time (the ControlNet, which has none, against its per-layer times).

Out of sample, two ways: leave one GPU out (fit on the other GPUs' data, judge the held-out
GPU's references: transfer by datasheet) and leave one model family out (fit on every GPU's
data without that family, judge the family). Per reference: the error of the estimated sum;
per reference, the rank correlation (Spearman) of its kernels' estimated and measured times.
The pooled errors give the range every estimate carries (10th-90th percentile) and the figures
its label quotes; pairs of configurations of one held-out set give the range after calibrating
on one measurement.

The fit: least squares on log(kernel time) over every timed kernel, each set weighted by one
over the square root of its size (the corpus would drown the fixtures). Compute shares are per
generation and class (a matrix product, a convolution, cuDNN's NCHW convolutions of the H100's
FP32 data, a direct convolution, one of few input channels on the CUDA cores) and precision,
fitted only on kernels with FLOPs; with them the K steps a tile pays besides its own
(`k_fill`, tensor cores and CUDA cores) and a wave's cost (`wave_ms`).
trtexec's per-layer profile synchronises around each layer, so its per-layer times exceed the
real ones by a few microseconds; that overhead is measured on the fixtures with a model-level
time and taken off.
PyTorch's INT8 GEMMs (`torch._int_mm`, 126 TOPS on the H200: a PyTorch limit, not the card's)
stay in the corpus but out of the fit.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import record
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from workbench.graph.gpu_facts import GpuFacts, gpu_facts
from workbench.profiling.estimate.coefficients import COEFFICIENTS_FILE
from workbench.profiling.estimate.kernels import (
    KINDS,
    TENSOR_CORE_KINDS,
    KernelWork,
    as_kernels,
    kernel_work,
    narrow_channels,
)
from workbench.profiling.estimate.roofline import (
    CORES,
    CUDA_CORE_RATES,
    compute_efficiency,
    compute_key,
    peak_flops,
    roofline_ms,
)
from workbench.profiling.trtexec import fixtures_dir, read_trtexec_kernels

RESULTS = Path(__file__).resolve().parent / "results"
# The ControlNet export records no GPU; its README infers the A10 (TensorRT Hackathon 2023).
FIXTURE_GPU = {"controlnet-a10-fp16": "NVIDIA A10"}
FAMILY = {"resnet50": "resnet", "resnet18": "resnet", "keras-resnet50": "resnet",
          "torch-resnet18": "resnet", "bert_base": "bert", "bert_layer": "bert",
          "controlnet": "controlnet"}
TARGETS = {"median": 0.25, "worst": 0.50, "spearman": 0.75}


@dataclass
class TimedSet:
    name: str
    gpu: GpuFacts
    family: str  # model family ("extra": kernel classes apart from any model)
    works: list[KernelWork] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)  # each kernel's own time, ms
    references: dict[str, float] = field(default_factory=dict)  # configurations' times, ms
    groups: dict[str, list[int]] = field(default_factory=dict)  # kernels of each reference
    launches: int = 0  # engine launches in each reference
    fitted: list[bool] = field(default_factory=list)  # kernels the fit may use

    def add(self, work: KernelWork, ms: float, fit: bool = True) -> int:
        self.works.append(work)
        self.measured.append(ms)
        self.fitted.append(fit)
        return len(self.works) - 1


def family_of(name: str) -> str:
    return FAMILY.get(name, name)


# --- The data --------------------------------------------------------------------------------

def fixture_sets() -> tuple[list[TimedSet], float, float]:
    """The six trtexec sets, the per-layer profiling overhead and the median enqueue time."""
    root = fixtures_dir()
    if root is None:
        sys.exit("no trtexec fixtures found (../shared/fixtures/trtexec, or "
                 "$WORKBENCH_TRTEXEC_FIXTURES)")
    raw = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        profile = _one(folder, ["engine.profile.json", "profile.json"])
        info = _one(folder, ["engine.graph.json", "layerinfo.json"])
        metadata = folder / "engine.profile.metadata.json"
        meta = json.loads(metadata.read_text()) if metadata.is_file() else None
        layers = {kernel.name: kernel for kernel in read_trtexec_kernels(info).kernels}
        records = [r for r in json.loads(profile.read_text()) if "name" in r]
        timed = [(kernel_work(layers[r["name"]]), float(r.get("medianMs", r["averageMs"])))
                 for r in records if r["name"] in layers]
        timed = [(work, ms) for work, ms in timed if work.kind != "free"]
        device = (meta["device_information"]["Selected Device"] if meta
                  else FIXTURE_GPU[folder.name])
        raw.append((folder.name, gpu_facts(device), timed, meta and meta["performance_summary"]))
    overheads = [(sum(ms for _, ms in timed) - perf["GPU Compute Time"][3]) / len(timed)
                 for _, _, timed, perf in raw if perf]
    enqueue = statistics.median(perf["Enqueue Time"][3] for *_, perf in raw if perf)
    overhead = statistics.median(overheads)
    sets = []
    for name, gpu, timed, perf in raw:
        family = family_of(name.rsplit("-", 2)[0] if "resnet" in name else name.split("-")[0])
        timed_set = TimedSet(f"{name} (trtexec)", gpu, family, launches=1)
        for work, ms in timed:
            timed_set.add(work, max(ms - overhead, 0.3 * ms))
        key = "trtexec GPU compute time" if perf else "per-layer times less profiling overhead"
        timed_set.references[key] = (perf["GPU Compute Time"][3] if perf
                                     else sum(timed_set.measured))
        timed_set.launches = 1 if perf else 0
        timed_set.groups[key] = list(range(len(timed_set.works)))
        sets.append(timed_set)
    return sets, overhead, enqueue


def _torch_records(layers: list[dict]) -> list[KernelWork]:
    """Work of PyTorch's layers; a convolution on NCHW tensors (`Row major linear`) ran
    cuDNN's NCHW path, apart from its NHWC kernels; one of few input channels (an image's 3)
    ran on the CUDA cores in every precision."""
    works = []
    for kernel in as_kernels(layers):
        work = kernel_work(kernel)
        inputs = kernel.inputs
        nchw = work.kind == "conv" and bool(inputs) and len(inputs[0].shape) == 4 \
            and "row major linear" in inputs[0].format.lower()
        narrow = work.kind == "conv" and narrow_channels(kernel, work.columns)
        works.append(replace(work, cudnn_nchw=nchw, narrow_channels=narrow))
    return works


def h100_sets() -> list[TimedSet]:
    """The H100's PyTorch/cuDNN kernels: ResNet-50 (`gpu_h100.json`, its layers summed and
    fused as TensorRT fuses) and MobileNetV2, EfficientNet-B0, a BERT layer (layers summed)."""
    sets: dict[str, TimedSet] = {}
    for path in (RESULTS / "gpu_h100.json", RESULTS / "gpu_h100_held_out.json"):
        if not path.is_file():
            continue
        measured = json.loads(path.read_text())["data"]["measurements"]
        gpu = gpu_facts(measured["device"]["name"])
        for key, layers in measured["layers"].items():
            model, _, config = key.rpartition("_b")
            family = family_of(model) if model else "extra"
            timed = sets.setdefault(family, TimedSet(f"{family} (H100, PyTorch)", gpu, family))
            indices = [timed.add(work, layer["measured_ms"]) for work, layer in
                       zip(_torch_records(layers), layers, strict=True)]
            figures = measured["models"].get(key) or {}
            for what, ms in (("layers", figures.get("layers_sum_ms")),
                             ("fused as TensorRT fuses", figures.get("fused_model_ms"))):
                if ms:
                    timed.references[f"b{config} {what}"] = ms
                    timed.groups[f"b{config} {what}"] = indices
    return list(sets.values())


def corpus_sets(path: Path = RESULTS / "gpu_corpus_h200.json") -> list[TimedSet]:
    """The H200 corpus, one set per model family; each (batch, precision) a reference."""
    if not path.is_file():
        return []
    measured = json.loads(path.read_text())["data"]["measurements"]
    gpu = gpu_facts(measured["device"]["name"])
    rows = measured["rows"]
    works = _torch_records([row["record"] for row in rows])
    sets: dict[str, TimedSet] = {}
    where: dict[tuple[str, int], int] = {}
    for number, (row, work) in enumerate(zip(rows, works, strict=True)):
        if row["math"] == "fp32":  # TF32 off: the CUDA cores' FP32 rate
            work = replace(work, precision="fp32_strict")
        family = family_of(row["families"][0])
        timed = sets.setdefault(family, TimedSet(f"{family} (H200, PyTorch)", gpu, family))
        where[(family, number)] = timed.add(work, row["ms"], fit=row["math"] != "int8")
    for key, config in measured["configs"].items():
        name, batch, math = key.split("|")
        family = family_of(name)
        timed = sets[family]
        indices = []
        for number in config["layers"]:
            if (family, number) not in where:  # a kernel first timed for another family
                where[(family, number)] = timed.add(
                    works[number] if rows[number]["math"] != "fp32" else replace(
                        works[number], precision="fp32_strict"), rows[number]["ms"])
            indices.append(where[(family, number)])
        timed.references[f"{batch} {math}"] = config["sum_ms"]
        timed.groups[f"{batch} {math}"] = indices
    return list(sets.values())


# --- The model over arrays -------------------------------------------------------------------

MIN_KERNELS = 20  # kernels a (generation, class) needs to have its own efficiency
NO_RATE = ("", "")  # a kernel without FLOPs (memory, norm): no compute efficiency


@dataclass
class Columns:
    """Every kernel of some sets as arrays, with which coefficient each one uses."""

    flops: np.ndarray
    moved: np.ndarray
    outputs: np.ndarray
    n: np.ndarray  # the GEMM's N (0: unknown)
    cuda_cores: np.ndarray  # 1 where the kernel runs on the CUDA cores, else 0
    peak: np.ndarray
    sms: np.ndarray
    bandwidth: np.ndarray
    l2: np.ndarray
    kind: np.ndarray  # index into KINDS
    rate: list[tuple[str, str]]  # (generation, compute key) of each kernel; NO_RATE: no FLOPs
    measured: np.ndarray
    weight: np.ndarray


def columns(sets: list[TimedSet], fitted_only: bool = False) -> Columns:
    rows = [(s, w, ms, 1.0 / np.sqrt(sum(s.fitted)))
            for s in sets for w, ms, fit in zip(s.works, s.measured, s.fitted, strict=True)
            if fit or not fitted_only]
    keys = [compute_key(w, s.gpu) for s, w, *_ in rows]
    return Columns(
        flops=np.array([w.flops for _, w, *_ in rows]),
        moved=np.array([w.bytes for _, w, *_ in rows]),
        outputs=np.array([w.outputs if w.kind in TENSOR_CORE_KINDS else 0.0
                          for _, w, *_ in rows]),
        n=np.array([w.columns for _, w, *_ in rows]),
        cuda_cores=np.array([k.rpartition("_")[2] in CUDA_CORE_RATES for k in keys], dtype=int),
        peak=np.array([peak_flops(k, s.gpu) for (s, *_), k in zip(rows, keys, strict=True)]),
        sms=np.array([float(s.gpu.sms) for s, *_ in rows]),
        bandwidth=np.array([s.gpu.memory_gb_s * 1e9 for s, *_ in rows]),
        l2=np.array([s.gpu.l2_mb * 2 ** 20 for s, *_ in rows]),
        kind=np.array([KINDS.index(w.kind) for _, w, *_ in rows]),
        rate=[(s.gpu.generation, k) if w.flops > 0 else NO_RATE
              for (s, w, *_), k in zip(rows, keys, strict=True)],
        measured=np.array([ms for _, _, ms, _ in rows]),
        weight=np.array([weight for *_, weight in rows]))


def predict(data: Columns, coefficients: dict) -> np.ndarray:
    compute = np.array([compute_efficiency(coefficients, g, k) if (g, k) != NO_RATE else 1.0
                        for g, k in data.rate])
    memory = np.array([coefficients["memory_eff"][KINDS[i]] for i in data.kind])
    launch = np.array([coefficients["launch_ms"][KINDS[i]] for i in data.kind])
    fill = np.array([coefficients["k_fill"][CORES[bool(c)]] for c in data.cuda_cores])
    return roofline_ms(data.flops, data.moved, data.outputs, data.n, data.peak, data.sms,
                       data.bandwidth, data.l2, compute, memory, coefficients["l2_speedup"],
                       launch, coefficients["wave_ms"], fill, data.kind == KINDS.index("gemm"))


def fit(sets: list[TimedSet], engine_launch_ms: float) -> dict:
    """Least squares on log kernel time; efficiencies bounded by 1 of the peak."""
    data = columns(sets, fitted_only=True)
    # A precision of a generation with few kernels (a ControlNet's handful of FP32 layers)
    # would be fitted to noise: those kernels stay out, and it borrows (compute_efficiency).
    counts = {rate: data.rate.count(rate) for rate in set(data.rate)}
    keep = np.array([rate == NO_RATE or counts[rate] >= MIN_KERNELS for rate in data.rate])
    data = Columns(*(value[keep] if isinstance(value, np.ndarray)
                     else [v for v, k in zip(value, keep, strict=True) if k]
                     for value in vars(data).values()))
    rates = sorted(set(data.rate) - {NO_RATE})
    rate_index = np.array([rates.index(r) if r != NO_RATE else 0 for r in data.rate])
    kinds = len(KINDS)

    def unpack(theta: np.ndarray) -> dict:
        compute: dict[str, dict[str, float]] = {}
        for (generation, key), value in zip(rates, np.exp(theta[:len(rates)]), strict=True):
            compute.setdefault(generation, {})[key] = float(value)
        rest = np.exp(theta[len(rates):])
        return {"compute_eff": compute,
                "memory_eff": {k: float(v) for k, v in zip(KINDS, rest[:kinds], strict=True)},
                "l2_speedup": float(rest[kinds]),
                "launch_ms": {"free": 0.0, **{k: float(v) for k, v in zip(
                    KINDS, rest[kinds + 1:2 * kinds + 1], strict=True)}},
                "wave_ms": float(rest[2 * kinds + 1]),
                "k_fill": {CORES[False]: float(rest[-2]), CORES[True]: float(rest[-1])},
                "engine_launch_ms": engine_launch_ms}

    target = np.log(data.measured)
    split = data.kind == KINDS.index("gemm")

    def residuals(theta: np.ndarray) -> np.ndarray:
        rest = np.exp(theta[len(rates):])
        compute = np.exp(theta[:len(rates)])[rate_index]
        predicted = roofline_ms(data.flops, data.moved, data.outputs, data.n, data.peak,
                                data.sms, data.bandwidth, data.l2, compute, rest[data.kind],
                                rest[kinds], rest[kinds + 1:2 * kinds + 1][data.kind],
                                rest[2 * kinds + 1], rest[-2:][data.cuda_cores], split)
        return (np.log(predicted) - target) * data.weight

    start = np.log([0.5] * len(rates) + [0.7] * kinds + [1.5] + [0.003] * kinds + [5e-4]
                   + [16.0, 16.0])
    low = np.log([0.01] * len(rates) + [0.05] * kinds + [1.0] + [3e-4] * kinds + [1e-6]
                 + [0.1, 0.1])
    high = np.log([1.0] * len(rates) + [1.0] * kinds + [4.0] + [0.03] * kinds + [0.01]
                  + [4096.0, 4096.0])
    theta = least_squares(residuals, start, bounds=(low, high), x_scale="jac").x
    coefficients = unpack(theta)
    present = {KINDS[i] for i in set(data.kind.tolist())}
    coefficients["unfitted"] = sorted(set(KINDS) - present)
    return coefficients


# --- Judging ---------------------------------------------------------------------------------

def judge(timed: TimedSet, coefficients: dict, known: set[str] | None = None) -> list[dict]:
    """Per reference of a set: estimated and measured ms, error, Spearman of its kernels.
    With `known` (the compute keys some training GPU measured), references that need another
    are left out: a precision no other GPU ran cannot be transferred."""
    data = columns([timed])
    predicted = predict(data, coefficients)
    measured = np.array(timed.measured)
    found = []
    for key, reference in timed.references.items():
        group = timed.groups[key]
        if known is not None and any(data.rate[i] != NO_RATE and data.rate[i][1] not in known
                                     for i in group):
            continue
        total = float(predicted[group].sum()) + timed.launches * coefficients["engine_launch_ms"]
        rho = spearmanr(predicted[group], measured[group]).statistic if len(group) > 2 else None
        found.append({"set": timed.name, "gpu": timed.gpu.name, "family": timed.family,
                      "reference": key, "kernels": len(group),
                      "estimated_ms": round(total, 4), "measured_ms": round(reference, 4),
                      "error": round(total / reference - 1, 4),
                      "spearman": None if rho is None or np.isnan(rho) else round(float(rho), 3)})
    return found


def held_out(sets: list[TimedSet], engine_launch_ms: float) -> dict[str, list[dict]]:
    """Leave one GPU out, then one model family out: each judged by a fit without it."""
    found: dict[str, list[dict]] = {"gpu": [], "family": []}
    for gpu in sorted({s.gpu.name for s in sets}):
        training = [s for s in sets if s.gpu.name != gpu]
        coefficients = fit(training, engine_launch_ms)
        known = {key for _, key in columns(training, fitted_only=True).rate}
        found["gpu"] += [row for s in sets if s.gpu.name == gpu
                         for row in judge(s, coefficients, known)]
    for family in sorted({s.family for s in sets} - {"extra"}):
        coefficients = fit([s for s in sets if s.family != family], engine_launch_ms)
        found["family"] += [row for s in sets if s.family == family
                            for row in judge(s, coefficients)]
    return found


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows]
    rhos = [r["spearman"] for r in rows if r["spearman"] is not None]
    return {"references": len(rows), "median_abs_error": round(statistics.median(errors), 4),
            "max_abs_error": round(max(errors), 4),
            "median_spearman": round(statistics.median(rhos), 3) if rhos else None}


def error_range(rows: list[dict]) -> dict:
    """What an estimate's range is: 10th-90th percentile of measured / estimated out of
    sample; and after calibrating on one configuration of the same GPU and model, of the
    other configurations' measured / calibrated estimate."""
    ratios = np.array([r["measured_ms"] / r["estimated_ms"] for r in rows])
    pairs = []
    by_set: dict[tuple, list[dict]] = {}
    for row in rows:
        by_set.setdefault((row["set"], row["gpu"]), []).append(row)
    for members in by_set.values():
        for a, b in itertools.permutations(members, 2):
            pairs.append((b["measured_ms"] / b["estimated_ms"])
                         / (a["measured_ms"] / a["estimated_ms"]))
    return {"low": round(float(np.quantile(ratios, 0.1)), 3),
            "high": round(float(np.quantile(ratios, 0.9)), 3),
            "calibrated_low": round(float(np.quantile(pairs, 0.1)), 3),
            "calibrated_high": round(float(np.quantile(pairs, 0.9)), 3),
            "calibrated_median_abs_error": round(float(np.median(np.abs(np.array(pairs) - 1))),
                                                 4),
            "references": len(rows), "pairs": len(pairs)}


def _one(folder: Path, names: list[str]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    sys.exit(f"{folder}: none of {names}")


def _by(rows: list[dict], key: str) -> dict[str, dict]:
    return {value: summary([r for r in rows if r[key] == value])
            for value in sorted({r[key] for r in rows})}


def main(argv: list[str]) -> None:
    fixtures, overhead, enqueue = fixture_sets()
    sets = fixtures + h100_sets() + corpus_sets()
    print(f"{len(sets)} sets, {sum(len(s.works) for s in sets)} kernels; profiling overhead "
          f"per layer (fixtures) {overhead * 1e3:.2f} us; engine launch {enqueue * 1e3:.2f} us")
    found = held_out(sets, enqueue)
    pooled = found["gpu"] + found["family"]
    by_gpu, by_family = _by(found["gpu"], "gpu"), _by(found["family"], "family")
    overall = summary(pooled)
    _print("held out: one GPU", by_gpu)
    _print("held out: one model family", by_family)
    print(f"\npooled out of sample: {overall}")
    final = fit(sets, enqueue)
    final["profile_overhead_ms"] = overhead
    final["range"] = error_range(pooled)
    final["errors"] = {"out_of_sample": overall, "by_gpu": by_gpu, "by_family": by_family,
                       "data": "leave one GPU out (H200, H100, RTX 3090, A100, A10) and one "
                               "model family out, over the H200 corpus, the H100's kernels "
                               "and six TensorRT profiles"}
    final["fitted_by"] = ("python benchmarks/estimate.py --fit: least squares on log kernel "
                          "time over the H200 corpus, the H100's kernels and the six trtexec "
                          "fixtures")
    print("\ncoefficients fitted on every set:", json.dumps(final, indent=1))
    if "--fit" in argv:
        COEFFICIENTS_FILE.write_text(json.dumps(final, indent=1) + "\n")
        print(f"written to {COEFFICIENTS_FILE}")
    met = {"median": overall["median_abs_error"] <= TARGETS["median"],
           "worst": overall["max_abs_error"] <= TARGETS["worst"],
           "spearman": (overall["median_spearman"] or 0) >= TARGETS["spearman"]}
    figures = [
        record.figure("GPU latency estimate out of sample (leave one GPU out and one model "
                      "family out; model-level error of each configuration): median",
                      f"{100 * overall['median_abs_error']:.0f}% ({overall['references']} "
                      "configurations)", "<= 25%", met["median"]),
        record.figure("... worst", f"{100 * overall['max_abs_error']:.0f}%", "<= 50%",
                      met["worst"]),
        record.figure("... per-layer rank correlation (median Spearman)",
                      f"{overall['median_spearman']:.2f}", ">= 0.75", met["spearman"]),
        record.figure("range carried by every estimate (10th-90th percentile of measured / "
                      "estimated, out of sample)",
                      f"x{final['range']['low']:.2f} to x{final['range']['high']:.2f}"),
        record.figure("after calibrating on one configuration of the same GPU and model: "
                      "median error / range", _calibrated_figure(final["range"]))]
    figures += [record.figure(f"held-out GPU {gpu}: median / worst / Spearman",
                              _figure(stats)) for gpu, stats in by_gpu.items()]
    figures += [record.figure(f"held-out family {family}: median / worst / Spearman",
                              _figure(stats)) for family, stats in by_family.items()]
    rows = [[r["set"], r["reference"], r["kernels"], r["spearman"],
             f"{100 * r['error']:+.0f}% ({r['estimated_ms']:.3f} vs {r['measured_ms']:.3f} ms)",
             split] for split in ("gpu", "family") for r in found[split]]
    details = {"title": "GPU latency estimate out of sample: each configuration judged by a "
                        "fit without its GPU (gpu) or without its model family (family)",
               "columns": ["set", "configuration", "kernels", "Spearman", "error", "held out"],
               "rows": rows}
    record.write("estimate", figures, details=details,
                 data={"held_out": found, "coefficients": final})


def _calibrated_figure(span: dict) -> str:
    return (f"{100 * span['calibrated_median_abs_error']:.0f}% / x{span['calibrated_low']:.2f} "
            f"to x{span['calibrated_high']:.2f}")


def _figure(stats: dict) -> str:
    rho = f"{stats['median_spearman']:.2f}" if stats["median_spearman"] is not None else "-"
    return (f"{100 * stats['median_abs_error']:.0f}% / {100 * stats['max_abs_error']:.0f}% / "
            f"{rho} ({stats['references']})")


def _print(title: str, table: dict[str, dict]) -> None:
    print(f"\n{title}:\n{'':28} {'refs':>5} {'median':>7} {'worst':>7} {'rho':>5}")
    for name, stats in table.items():
        rho = stats["median_spearman"]
        print(f"{name[:28]:28} {stats['references']:5d} {100 * stats['median_abs_error']:6.0f}% "
              f"{100 * stats['max_abs_error']:6.0f}% {rho if rho is not None else '-':>5}")


if __name__ == "__main__":
    main(sys.argv[1:])
