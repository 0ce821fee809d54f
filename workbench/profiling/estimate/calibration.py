"""Calibrating the estimate on one measurement of the user's GPU.

One configuration measured on a GPU (a trtexec profile of one engine, or one latency of the
converted model) against its estimate gives the model's error on that GPU; the estimates of
every other configuration on that GPU are then divided by it, and carry the narrower range
measured for that case (`coefficients.estimate_range(..., calibrated=True)`: pairs of
configurations of one GPU and model, judged out of sample). The label says what it was
calibrated on.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import gpu_facts
from workbench.profiling.estimate.coefficients import (
    error_note,
    estimate_range,
    load_coefficients,
    with_ranges,
)
from workbench.profiling.estimate.roofline import estimate_engine
from workbench.profiling.trtexec import read_trtexec_kernels, sibling_metadata

_LAYER_INFO_NAMES = ("layerinfo.json", "engine.graph.json")


@dataclass(frozen=True)
class Calibration:
    """measured / estimated of one configuration on `gpu`, and what it was."""

    gpu: str
    scale: float
    on: str

    def label(self) -> str:
        return error_note(gpu_facts(self.gpu), calibration=self.on)


def from_measured(gpu: str, measured_ms: float, estimated_ms: float, what: str) -> Calibration:
    """A calibration from one latency measured on `gpu` of a configuration estimated at
    `estimated_ms` (`what` names it for the label)."""
    if not measured_ms > 0:
        raise WorkbenchError(f"the measured latency must be a positive number of ms, not "
                             f"{measured_ms}")
    if not estimated_ms > 0:
        raise WorkbenchError(f"cannot calibrate on {what}: its estimate is {estimated_ms} ms")
    return Calibration(gpu_facts(gpu).name, measured_ms / estimated_ms,
                       f"{what} measured at {measured_ms:.3f} ms (estimated {estimated_ms:.3f})")


def from_profile(profile: str | os.PathLike, gpu: str,
                 coefficients: dict | None = None) -> Calibration:
    """A calibration from a trtexec profile (`--exportProfile`) of one engine on `gpu`, with
    its layer info beside it (`<stem>.graph.json` or `layerinfo.json`): trtexec's GPU compute
    time where TREx's metadata is beside it, else its per-layer times less trtexec's
    profiling overhead, against the estimate of that engine's layers."""
    path = Path(profile)
    if not path.is_file():
        raise WorkbenchError(f"{path}: no such trtexec profile (give the --exportProfile file)")
    coefficients = coefficients or load_coefficients()
    stem = path.name.removesuffix(".json").removesuffix(".profile")
    candidates = [path.with_name(f"{stem}.graph.json"),
                  *(path.with_name(name) for name in _LAYER_INFO_NAMES)]
    layer_info = next((p for p in candidates if p.is_file()), None)
    if layer_info is None:
        names = ", ".join(p.name for p in candidates)
        raise WorkbenchError(f"{path}: no layer info beside it ({names}): write it with "
                             "trtexec --exportLayerInfo")
    estimated = estimate_engine(read_trtexec_kernels(layer_info), gpu, coefficients)
    metadata = sibling_metadata(path)
    if metadata:
        summary = json.loads(Path(metadata).read_text())["performance_summary"]
        measured, how = float(summary["GPU Compute Time"][3]), "trtexec's GPU compute time"
    else:
        records = _profile_records(path)
        busy = [r for r in records if r["name"] in
                {layer["name"] for layer in estimated["layers"] if layer["estimated_ms"] > 0}]
        overhead = coefficients.get("profile_overhead_ms", 0.0)
        measured = sum(max(_ms(r) - overhead, 0.3 * _ms(r)) for r in busy)
        how = "its per-layer times"
    return from_measured(gpu, measured, estimated["total_ms"], f"{path.name} ({how})")


def calibrated(document: dict[str, Any], calibration: Calibration | None,
               coefficients: dict | None = None) -> dict[str, Any]:
    """An estimate's document with ranges (`<name>_low_ms`, `<name>_high_ms` beside every
    `<name>_ms`); with a calibration for its GPU, every `*_ms` divided by the error measured
    there, the calibrated range and the calibration's label."""
    if calibration is None or gpu_facts(document["gpu"]).name != calibration.gpu:
        return with_ranges(document, coefficients)
    scaled = _scaled(document, calibration.scale)
    scaled["label" if "label" in scaled else "error_note"] = calibration.label()
    return with_ranges(scaled, coefficients, calibrated=True)


def calibrated_table(table: pd.DataFrame, calibration: Calibration | None,
                     coefficients: dict | None = None) -> pd.DataFrame:
    """A table of estimates (columns `*_ms`, `attrs` gpu and label) the same way: with a
    calibration for its GPU every `*_ms` column rescaled and the label replaced; a
    `<stem>low_ms` and `<stem>high_ms` column beside every `<stem>ms` one."""
    on_gpu = calibration is not None and \
        gpu_facts(table.attrs["gpu"]).name == calibration.gpu
    found = table.copy()
    found.attrs.update(table.attrs)
    columns = [c for c in table.columns if str(c).endswith("ms")
               and not str(c).endswith(("low_ms", "high_ms"))]
    for column in columns:
        if on_gpu:
            found[column] = table[column] * calibration.scale
        low, high = estimate_range(1.0, coefficients, calibrated=on_gpu)
        found[f"{column[:-2]}low_ms"] = found[column] * low
        found[f"{column[:-2]}high_ms"] = found[column] * high
    if on_gpu:
        found.attrs.update(label=calibration.label(), calibrated=True)
    return found


def _scaled(value: Any, scale: float, key: str = "") -> Any:
    if isinstance(value, dict):
        # `engines` maps engine names to their times (graph_estimate's document)
        return {k: _scaled(v, scale, k if k.endswith("ms") or k == "engines" else
                           ("engine_ms" if key == "engines" else key))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v, scale, key) for v in value]
    if key.endswith("ms") and isinstance(value, int | float) and not isinstance(value, bool):
        return value * scale
    return value


def _profile_records(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return [r for r in data if isinstance(r, dict) and "name" in r]


def _ms(record: dict) -> float:
    return float(record.get("medianMs", record.get("averageMs", 0.0)))
