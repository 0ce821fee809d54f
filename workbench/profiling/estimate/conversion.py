"""A conversion's GPU latency estimated for a named GPU: the one path behind `--target-gpu`.

`convert`, `check`, `report` and `tune` (and the app's GPU picker) all call
`conversion_estimate`, which hands the conversion's prepared graph and engines to
`profiling.estimate.graph_estimate.graph_estimate`. The sweep of `minimum_segment_size` is estimated
once per distinct set of engines (thresholds that cut the graph alike share one estimate).
`estimated_beside_measured` puts a trtexec profile's measured layer times beside the
estimate of the same layers. Every figure carries its label ("estimated for Tesla T4; ...
error ...") and is never mixed with measured ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import gpu_facts
from workbench.profiling.estimate.calibration import Calibration, calibrated, calibrated_table
from workbench.profiling.estimate.coefficients import error_note
from workbench.profiling.estimate.graph_estimate import (
    FROM_NODES,
    engine_kernels,
    graph_estimate,
    kernel_estimates,
)
from workbench.profiling.estimate.roofline import estimate_layers
from workbench.profiling.trtexec import (
    UNKNOWN_DEVICE,
    read_trtexec,
    read_trtexec_kernels,
    sibling_metadata,
)
from workbench.words import counted

SWEEP_COLUMNS = ("minimum_segment_size", "engines", "converted_ms", "native_ms", "engines_ms",
                 "native_ops_ms")  # and, from calibrated_table, `*_low_ms`/`*_high_ms`


def target_gpu_name(gpu: str) -> str:
    """The GPU's full name, checked before any slow work: an unknown GPU is a WorkbenchError
    listing the known ones."""
    return gpu_facts(gpu).name


def conversion_estimate(session: ConversionSession, params: ConversionParams, gpu: str,
                        batch_size: int = 1, result: ConversionResult | None = None,
                        tensorrt: Mapping[str, Any] | None = None,
                        calibration: Calibration | None = None) -> dict:
    """Converted vs native TF latency on `gpu` at `batch_size` (`graph_estimate`'s document:
    gpu, batch_size, converted_ms, native_ms, engines_ms, native_ops_ms, engines,
    engine_basis, label, and `*_low_ms`/`*_high_ms` beside each `*_ms`). With `tensorrt`
    (engine -> TensorRT's verdict on these parameters), the engines TensorRT built are
    estimated from their kernels, the others from TF nodes. With a `calibration` on that GPU,
    calibrated (`calibration.calibrated`)."""
    if batch_size < 1:
        raise WorkbenchError(f"the estimated batch size must be 1 or more, not {batch_size}")
    result = result if result is not None else session.convert(params)
    graph = session.prepared(params.precision_mode).graph
    return calibrated(graph_estimate(graph, result.engines, gpu, params.precision_mode,
                                     batch_size, kernels=engine_kernels(tensorrt or {})),
                      calibration)


def engine_kernel_estimates(session: ConversionSession, params: ConversionParams,
                            result: ConversionResult, tensorrt: Mapping[str, Any], gpu: str,
                            batch_size: int = 1,
                            calibration: Calibration | None = None) -> pd.DataFrame:
    """Per kernel TensorRT built of each engine (`tensorrt`: its verdicts on these
    parameters): engine, layer, layer_type, estimated_ms, estimated_low_ms,
    estimated_high_ms (no engine launch)."""
    graph = session.prepared(params.precision_mode).graph
    built = engine_kernels(tensorrt)
    rows = [{"engine": engine.name, "layer": row["name"], "layer_type": row["type"],
             "estimated_ms": row["estimated_ms"]}
            for engine in result.engines if engine.name in built
            for row in kernel_estimates(graph, engine.nodes, built[engine.name], gpu,
                                        params.precision_mode, batch_size)]
    table = pd.DataFrame(rows, columns=["engine", "layer", "layer_type", "estimated_ms"])
    table.attrs["gpu"] = gpu_facts(gpu).name
    return calibrated_table(table, calibration)


def sweep_estimate(session: ConversionSession, params: ConversionParams,
                   results: Sequence[ConversionResult], gpu: str,
                   batch_size: int = 1, calibration: Calibration | None = None) -> pd.DataFrame:
    """One row per result of a `minimum_segment_size` sweep (`SWEEP_COLUMNS`, with
    `converted_low_ms`/`converted_high_ms`), every threshold from its TF nodes' shapes (the
    one basis every threshold has); the label, GPU and basis in `attrs`. Results with the
    same engines share one estimate."""
    graph = session.prepared(params.precision_mode).graph
    known: dict[tuple, dict] = {}
    rows, estimate = [], None
    for result in results:
        key = tuple(tuple(sorted(engine.nodes)) for engine in result.engines)
        if key not in known:
            known[key] = graph_estimate(graph, result.engines, gpu, params.precision_mode,
                                        batch_size)
        estimate = known[key]
        rows.append({"minimum_segment_size": result.params.minimum_segment_size,
                     "engines": len(result.engines),
                     **{k: estimate[k] for k in SWEEP_COLUMNS[2:]}})
    table = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    facts = gpu_facts(gpu)
    table.attrs.update(gpu=facts.name, batch_size=batch_size,
                       precision=params.precision_mode, basis=FROM_NODES,
                       label=estimate["label"] if estimate else f"estimated for {facts.name}")
    return calibrated_table(table, calibration)


def sweep_advice(table: pd.DataFrame, current: int) -> str:
    """What the sweep's estimate says of the `current` threshold when another, with fewer
    engines, is estimated faster ("" when none is): more, smaller engines estimated slower."""
    rows = table[table["engines"] > 0]
    now = table[table["minimum_segment_size"] == current]
    if rows.empty or now.empty:
        return ""
    best, now = rows.loc[rows["converted_ms"].idxmin()], now.iloc[0]
    engines, threshold = int(best["engines"]), int(best["minimum_segment_size"])
    if not (engines < now["engines"] and best["converted_ms"] < now["converted_ms"]):
        return ""
    # Ratios, not times: the current setting's time is printed once, by the estimate line,
    # which may come from TensorRT's kernels; every threshold here is from the TF nodes.
    faster = 100 * (1 - best["converted_ms"] / now["converted_ms"])
    return (f"{table.attrs['gpu']} (estimated): minimum_segment_size={threshold} makes "
            f"{counted(engines, 'engine')}, estimated {faster:.0f}% faster than the current "
            f"{current} ({counted(int(now['engines']), 'engine')}), comparing every threshold "
            "from its TF nodes' shapes: more, smaller engines are estimated slower than fewer")


def estimate_line(estimate: dict[str, Any], label: bool = True) -> str:
    """One line of text: converted (engines, native ops) vs native TF, with the label (or,
    without `label`, the GPU's name only: for lines under one label)."""
    speedup = estimate["native_ms"] / estimate["converted_ms"] if estimate["converted_ms"] \
        else float("nan")
    return (f"{estimate['gpu']} (estimated), batch {estimate['batch_size']}: native TF "
            f"{_with_range(estimate, 'native')}, converted {_with_range(estimate, 'converted')} "
            f"({speedup:.2f}x; engines {estimate['engines_ms']:.3f}, native ops "
            f"{estimate['native_ops_ms']:.3f})" + (f" [{estimate['label']}]" if label else ""))


def _with_range(estimate: dict[str, Any], name: str) -> str:
    """`0.895 ms (0.50-1.45)`: the estimate and its range, where it has one."""
    text = f"{estimate[f'{name}_ms']:.3f} ms"
    if f"{name}_low_ms" in estimate:
        text += f" ({estimate[f'{name}_low_ms']:.3f}-{estimate[f'{name}_high_ms']:.3f})"
    return text


def estimated_beside_measured(profile: str | os.PathLike, layer_info: str | os.PathLike,
                              gpu: str | None = None) -> pd.DataFrame:
    """A trtexec profile's layers (`--exportProfile`) with the estimate of each for `gpu`
    (None: the GPU the profile ran on, as its TREx metadata names it) from the layer info
    (`--exportLayerInfo`): layer, layer_type, estimated_ms, measured_ms.
    `attrs`: gpu, label, measured_on (the GPU the profile ran on, where trtexec said)."""
    if not str(profile) or not str(layer_info):
        raise WorkbenchError("give both trtexec files: --exportProfile and --exportLayerInfo")
    measured = read_trtexec(profile, layer_info, profile_metadata=sibling_metadata(profile))
    devices = [d for d in measured["device"].unique() if d and d != UNKNOWN_DEVICE]
    if gpu is None and not devices:
        raise WorkbenchError(f"{profile}: trtexec's metadata does not say which GPU ran it; "
                             "pick the GPU to estimate for")
    gpu = gpu or devices[0]
    estimated = pd.DataFrame(estimate_layers(read_trtexec_kernels(layer_info), gpu))
    table = estimated.rename(columns={"name": "layer", "type": "layer_type"})[
        ["layer", "layer_type", "estimated_ms"]]
    times = measured.groupby("layer")["avg_ms"].first()
    table["measured_ms"] = table["layer"].map(times)
    table.attrs.update(gpu=gpu_facts(gpu).name,
                       label=estimate_engine_label(gpu),
                       measured_on=f"trtexec on {devices[0]}" if devices else "trtexec")
    return table


def estimate_engine_label(gpu: str) -> str:
    """The label of a per-kernel estimate (the model's measured error)."""
    return error_note(gpu_facts(gpu))
