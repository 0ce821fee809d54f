"""trtexec's JSON exports (the files NVIDIA's TREx reads) as the per-layer timing table.

`--exportProfile` gives per-layer times (its first record `{"count": N}` is the number of
profiled runs, not a layer); `--exportLayerInfo` with `--profilingVerbosity=detailed` gives each
layer's type, tactic and output formats, from which the precision is read; `--exportTimes` is the
per-iteration trace; the `*.metadata.json` files are TREx's digest of trtexec's log (device,
performance summary, build options). Every problem is one line naming the file.
"""

from __future__ import annotations

import json
import os
import statistics
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from workbench import environment
from workbench.engines.inspection.tensorrt_kernels import (
    EngineAnatomy,
    Kernel,
    inspector_kernels,
    tf_node_of,
)
from workbench.engines.layer_table import layer_table, precision_of_format
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph
from workbench.profiling.layers import NodeLinker, split_layer_name

Source = str | os.PathLike | list | dict

# TREx's file names for one engine: <stem>.profile.json, <stem>.graph.json, ...
_DIR_FILES = {
    "layer_info": ".graph.json",
    "timing": ".timing.json",
    "profile_metadata": ".profile.metadata.json",
    "build_metadata": ".build.metadata.json",
}
_PROFILE_SUFFIX = ".profile.json"
# performance_summary statistics: 5 values in older trtexec, 7 with three percentiles in newer.
_STAT_NAMES = {5: ("min", "max", "mean", "median", "p99"),
               7: ("min", "max", "mean", "median", "p90", "p95", "p99")}
_SUMMARY_STATS = {"Latency": "latency_ms", "GPU Compute Time": "gpu_compute_ms",
                  "Enqueue Time": "enqueue_ms", "H2D Latency": "h2d_ms", "D2H Latency": "d2h_ms"}
UNKNOWN_DEVICE = "unknown GPU (no trtexec metadata)"


def read_trtexec(profile: Source, layer_info: Source | None = None, timing: Source | None = None,
                 profile_metadata: Source | None = None, build_metadata: Source | None = None,
                 *, run: str | None = None, graph: Graph | None = None,
                 engine: str | None = None) -> pd.DataFrame:
    """The per-layer table of one trtexec profile, with layer info and metadata when given.

    `run` and `engine` default to the profile's file stem. With `graph`, `tf_nodes` holds the
    graph's node names; without, the TF-looking parts of each layer name.
    `table.attrs` carries `count` (profiled runs), `summary`, `timing` and `build` when given.
    """
    profile_label = _label(profile, "profile")
    count, records = _profile_records(_load(profile, "profile"), profile_label)
    info: dict[str, Kernel] = {}
    if layer_info is not None:
        info = {kernel.name: kernel for kernel in read_trtexec_kernels(layer_info).kernels}
        if info:
            _warn_unmatched(records, info, _label(layer_info, "layer info"), profile_label)
    summary = None if profile_metadata is None else trtexec_summary(profile_metadata)
    linker = NodeLinker(None if graph is None else ((n.name, n.op) for n in graph.real_nodes))
    stem = _stem(profile)
    engine = engine or stem
    rows = [_row(rec, info.get(rec["name"]), linker, engine) for rec in records]
    table = layer_table(rows, run or stem, "trtexec", _device(summary, build_metadata))
    if not info:
        table = table.drop(columns=["tactic", "format"], errors="ignore")
    table.attrs.update(count=count, summary=summary, build=_build(build_metadata),
                       timing=None if timing is None else timing_summary(timing))
    return table


def sibling_metadata(profile: str | os.PathLike) -> str | None:
    """TREx's `<stem>.profile.metadata.json` beside the profile names the GPU, when present."""
    text = str(profile)
    stem = text.removesuffix(".json").removesuffix(".profile")
    path = f"{stem}.profile.metadata.json"
    return path if stem != text and os.path.isfile(path) else None


def read_trtexec_dir(directory: str | os.PathLike, **kwargs: Any) -> pd.DataFrame:
    """The `<stem>.profile.json` of a folder with whichever of TREx's sibling files exist.

    `run` defaults to the folder's name.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise WorkbenchError(f"{folder}: not a directory of trtexec exports")
    profiles = sorted(folder.glob(f"*{_PROFILE_SUFFIX}"))
    if len(profiles) != 1:
        found = ", ".join(p.name for p in profiles) or "none"
        raise WorkbenchError(f"{folder}: expected one *{_PROFILE_SUFFIX}, found {found}; "
                             "pass the files to read_trtexec instead")
    stem = profiles[0].name[: -len(_PROFILE_SUFFIX)]
    for key, suffix in _DIR_FILES.items():
        path = folder / f"{stem}{suffix}"
        if key not in kwargs and path.is_file():
            kwargs[key] = path
    kwargs.setdefault("run", folder.name)
    return read_trtexec(profiles[0], **kwargs)


def read_trtexec_kernels(layer_info: Source, graph: Graph | None = None,
                         engine: str | None = None) -> EngineAnatomy:
    """The kernels of an engine a GPU built, from the inspector's layer JSON
    (`--exportLayerInfo`, `TensorRTEngine.layer_info_json()`): the same `Kernel`s as
    TensorRT-RTX's build log gives, so `kernel_table` and the engine drawing take both.

    Each kernel's ONNX nodes come from its `Metadata` (TensorRT 10), else from the parts of
    its layer name; TF nodes are named through `graph` when given (`NodeLinker`), else by
    the TF-looking parts of those names. `removed` stays empty: the file does not list the
    network TensorRT parsed."""
    label = _label(layer_info, "layer info")
    layers = list(_layer_info(_load(layer_info, "layer info"), label).values())
    kernels = inspector_kernels(layers, split_layer_name)
    linker = NodeLinker(None if graph is None else ((n.name, n.op) for n in graph.real_nodes))
    names = None if graph is None else {n.name for n in graph.real_nodes}
    named = [_with_linked_nodes(k, linker, names) for k in kernels]
    return EngineAnatomy(engine or _stem(layer_info), tuple(named),
                         source=f"TensorRT engine inspector ({label})")


def _with_linked_nodes(kernel: Kernel, linker: NodeLinker, names: set[str] | None) -> Kernel:
    """Our exporter's names (`<TF node>/<label>`) first, then the names other exporters write
    (tf2onnx's `__N`, Keras' `_N` scopes)."""
    found = (tf_node_of(part, names) if names is not None and tf_node_of(part, names)
             else linker.tf_node(part) for part in kernel.onnx_nodes)
    return replace(kernel, nodes=tuple(dict.fromkeys(n for n in found if n)))


def trtexec_summary(profile_metadata: Source) -> dict:
    """Throughput, latency statistics (ms) and the device from TREx's profile metadata."""
    label = _label(profile_metadata, "profile metadata")
    data = _load(profile_metadata, "profile metadata")
    perf = data.get("performance_summary") if isinstance(data, dict) else None
    if not isinstance(perf, dict):
        raise WorkbenchError(f"{label}: no 'performance_summary' object")
    device = data.get("device_information") or {}
    summary: dict[str, Any] = {
        "device": device.get("Selected Device"),
        "compute_capability": device.get("Compute Capability"),
        "throughput_qps": _number(perf, "Throughput", label),
        "total_host_walltime_s": perf.get("Total Host Walltime"),
        "total_gpu_compute_s": perf.get("Total GPU Compute Time"),
        "input_shapes": (data.get("inference_options") or {}).get("Input inference shape"),
    }
    for key, name in _SUMMARY_STATS.items():
        if key in perf:
            summary[name] = _stats(perf[key], key, label)
    if "latency_ms" not in summary:
        raise WorkbenchError(f"{label}: performance_summary has no 'Latency'")
    return summary


def timing_summary(timing: Source) -> dict:
    """Iterations and mean/median/p99 latency and GPU compute time of an --exportTimes trace."""
    label = _label(timing, "timing")
    data = _load(timing, "timing")
    if not isinstance(data, list) or not data:
        raise WorkbenchError(f"{label}: expected a non-empty JSON array of iterations")
    try:
        latency = sorted(float(it["latencyMs"]) for it in data)
        compute = [float(it["computeMs"]) for it in data]
    except (KeyError, TypeError, ValueError) as exc:
        raise WorkbenchError(f"{label}: an iteration lacks a numeric {exc}") from None
    p99 = latency[min(len(latency) - 1, int(0.99 * len(latency)))]
    return {"iterations": len(data), "latency_mean_ms": statistics.fmean(latency),
            "latency_median_ms": statistics.median(latency), "latency_p99_ms": p99,
            "gpu_compute_mean_ms": statistics.fmean(compute)}


def fixtures_dir() -> Path | None:
    """The real trtexec exports beside the repository (`../shared/fixtures/trtexec`), or
    `$WORKBENCH_TRTEXEC_FIXTURES`; None when absent (they are Apache-2.0, not copied here)."""
    default = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "trtexec"
    path = Path(environment.TRTEXEC_FIXTURES.read() or default)
    return path if path.is_dir() else None


# --- Loading -------------------------------------------------------------------------------

def _label(source: Source, what: str) -> str:
    return str(source) if isinstance(source, str | os.PathLike) else f"<{what} data>"


def _stem(source: Source) -> str:
    if not isinstance(source, str | os.PathLike):
        return "trtexec"
    name = Path(source).name
    for suffix in (_PROFILE_SUFFIX, ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _load(source: Source, what: str) -> Any:
    if isinstance(source, list | dict):
        return source
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read the {what} file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise WorkbenchError(f"{path}: the {what} file is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = "truncated" if exc.pos >= len(text.rstrip()) else "not valid"
        raise WorkbenchError(f"{path}: {hint} JSON in the {what} file ({exc.msg} at line "
                             f"{exc.lineno} column {exc.colno})") from None


def _profile_records(data: Any, label: str) -> tuple[int | None, list[dict]]:
    if not isinstance(data, list):
        raise WorkbenchError(f"{label}: expected a JSON array of layer records "
                             f"(trtexec --exportProfile), found a {type(data).__name__}")
    count = None
    if data and isinstance(data[0], dict) and "count" in data[0] and "name" not in data[0]:
        count, data = data[0]["count"], data[1:]
    for index, record in enumerate(data, start=1 if count is not None else 0):
        if not isinstance(record, dict):
            raise WorkbenchError(f"{label}: record {index} is not an object")
        for key in ("name", "averageMs"):
            if key not in record:
                raise WorkbenchError(f"{label}: record {index} has no '{key}' field")
    return count, data


def _layer_info(data: Any, label: str) -> dict[str, dict]:
    layers = data.get("Layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise WorkbenchError(f"{label}: expected an object with a 'Layers' array "
                             "(trtexec --exportLayerInfo)")
    info = {}
    for index, layer in enumerate(layers):
        # --profilingVerbosity=layer_names_only writes bare names.
        layer = {"Name": layer} if isinstance(layer, str) else layer
        if not isinstance(layer, dict) or "Name" not in layer:
            raise WorkbenchError(f"{label}: layer {index} has no 'Name'")
        info[layer["Name"]] = layer
    return info


def _warn_unmatched(records: list[dict], info: dict, info_label: str, label: str) -> None:
    missing = [r["name"] for r in records if r["name"] not in info]
    if missing:
        warnings.warn(f"{info_label}: {len(missing)} of {len(records)} layers of {label} have no "
                      f"layer info (first: {missing[0]!r}); is it the same engine? "
                      "Their type and precision are left empty.", stacklevel=3)


# --- Rows and metadata ---------------------------------------------------------------------

def _row(record: dict, kernel: Kernel | None, linker: NodeLinker, engine: str) -> dict:
    name = record["name"]
    row = {"engine": engine, "layer": name, "avg_ms": record["averageMs"],
           "median_ms": record.get("medianMs"), "time_ms": record.get("timeMs"),
           "tf_nodes": linker.tf_nodes(name)}
    if kernel is not None:
        fmt = (kernel.outputs[0].format if kernel.outputs else "") or None
        row.update(layer_type=kernel.type or None, precision=precision_of_format(fmt),
                   tactic=kernel.tactic or None, format=fmt)
    return row


def _device(summary: dict | None, build_metadata: Source | None) -> str:
    if summary and summary.get("device"):
        return summary["device"]
    build = _build(build_metadata) or {}
    return (build.get("device_information") or {}).get("Selected Device") or UNKNOWN_DEVICE


def _build(build_metadata: Source | None) -> dict | None:
    if build_metadata is None:
        return None
    data = _load(build_metadata, "build metadata")
    if not isinstance(data, dict):
        raise WorkbenchError(f"{_label(build_metadata, 'build metadata')}: expected an object")
    return data


def _number(perf: dict, key: str, label: str) -> float:
    try:
        return float(perf[key])
    except (KeyError, TypeError, ValueError):
        raise WorkbenchError(f"{label}: performance_summary has no numeric '{key}'") from None


def _stats(values: Any, key: str, label: str) -> dict[str, float]:
    names = _STAT_NAMES.get(len(values)) if isinstance(values, list) else None
    if names is None:
        raise WorkbenchError(f"{label}: '{key}' should list 5 or 7 statistics (min, max, "
                             "mean, median, percentiles)")
    return dict(zip(names, map(float, values), strict=True))
