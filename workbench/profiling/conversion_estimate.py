"""A conversion's GPU latency estimated for a named GPU: the one path behind `--target-gpu`.

`convert`, `check`, `report` and `tune` (and the app's GPU picker) all call
`conversion_estimate`, which hands the conversion's prepared graph and engines to
`profiling.estimate_graph.graph_estimate`. The sweep of `minimum_segment_size` is estimated
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
from workbench.profiling.estimate import error_note, estimate_layers
from workbench.profiling.estimate_graph import engine_kernels, graph_estimate, kernel_estimates
from workbench.profiling.trtexec import (
    UNKNOWN_DEVICE,
    read_trtexec,
    read_trtexec_kernels,
    sibling_metadata,
)

SWEEP_COLUMNS = ("minimum_segment_size", "engines", "converted_ms", "native_ms", "engines_ms",
                 "native_ops_ms")


def target_gpu_name(gpu: str) -> str:
    """The GPU's full name, checked before any slow work: an unknown GPU is a WorkbenchError
    listing the known ones."""
    return gpu_facts(gpu).name


def conversion_estimate(session: ConversionSession, params: ConversionParams, gpu: str,
                        batch_size: int = 1, result: ConversionResult | None = None,
                        tensorrt: Mapping[str, Any] | None = None) -> dict:
    """Converted vs native TF latency on `gpu` at `batch_size` (`graph_estimate`'s document:
    gpu, batch_size, converted_ms, native_ms, engines_ms, native_ops_ms, engines,
    engine_basis, label). With `tensorrt` (engine -> TensorRT's verdict on these parameters),
    the engines TensorRT built are estimated from their kernels, the others from TF nodes."""
    if batch_size < 1:
        raise WorkbenchError(f"the estimated batch size must be 1 or more, not {batch_size}")
    result = result if result is not None else session.convert(params)
    graph = session.prepared(params.precision_mode).graph
    return graph_estimate(graph, result.engines, gpu, params.precision_mode, batch_size,
                          kernels=engine_kernels(tensorrt or {}))


def engine_kernel_estimates(session: ConversionSession, params: ConversionParams,
                            result: ConversionResult, tensorrt: Mapping[str, Any], gpu: str,
                            batch_size: int = 1) -> pd.DataFrame:
    """Per kernel TensorRT built of each engine (`tensorrt`: its verdicts on these
    parameters): engine, layer, layer_type, estimated_ms (no engine launch)."""
    graph = session.prepared(params.precision_mode).graph
    built = engine_kernels(tensorrt)
    rows = [{"engine": engine.name, "layer": row["name"], "layer_type": row["type"],
             "estimated_ms": row["estimated_ms"]}
            for engine in result.engines if engine.name in built
            for row in kernel_estimates(graph, engine.nodes, built[engine.name], gpu,
                                        params.precision_mode, batch_size)]
    return pd.DataFrame(rows, columns=["engine", "layer", "layer_type", "estimated_ms"])


def sweep_estimate(session: ConversionSession, params: ConversionParams,
                   results: Sequence[ConversionResult], gpu: str,
                   batch_size: int = 1) -> pd.DataFrame:
    """One row per result of a `minimum_segment_size` sweep (`SWEEP_COLUMNS`); the label and
    GPU in `attrs`. Results with the same engines share one estimate."""
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
                       precision=params.precision_mode,
                       label=estimate["label"] if estimate else f"estimated for {facts.name}")
    return table


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
    return (f"{table.attrs['gpu']} (estimated): minimum_segment_size={threshold} makes "
            f"{engines} engine(s), estimated {best['converted_ms']:.3f} ms against "
            f"{now['converted_ms']:.3f} ms for the current {current} ({int(now['engines'])} "
            "engines), every threshold from its TF nodes' shapes: more, smaller engines are "
            "estimated slower than fewer")


def estimate_line(estimate: dict[str, Any], label: bool = True) -> str:
    """One line of text: converted (engines, native ops) vs native TF, with the label (or,
    without `label`, the GPU's name only: for lines under one label)."""
    speedup = estimate["native_ms"] / estimate["converted_ms"] if estimate["converted_ms"] \
        else float("nan")
    return (f"{estimate['gpu']} (estimated), batch {estimate['batch_size']}: native TF "
            f"{estimate['native_ms']:.3f} ms, converted {estimate['converted_ms']:.3f} ms "
            f"({speedup:.2f}x; engines {estimate['engines_ms']:.3f}, native ops "
            f"{estimate['native_ops_ms']:.3f})" + (f" [{estimate['label']}]" if label else ""))


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
