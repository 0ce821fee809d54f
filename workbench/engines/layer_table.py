"""The one per-layer timing table that every profiling source and engine backend fills.

One row per layer (or per TF op, for the TensorFlow profiler) of one run. Every row carries the
run, the source and the device that measured it, so timings from different backends are never
mixed up unlabelled. `pct` is the layer's share of its run's total time; `tf_nodes` lists the
TensorFlow nodes the layer came from (empty when the names do not tell). It lives with the
engines because their backends build it; profiling reads and combines it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from workbench.errors import WorkbenchError

LAYER_COLUMNS = ["run", "source", "device", "engine", "layer", "layer_type", "precision",
                 "avg_ms", "median_ms", "pct", "tf_nodes"]
SOURCES = ("onnxruntime", "tensorrt", "trtexec", "tensorflow")

# Spellings of a precision seen in trtexec/TREx layer info, ONNX Runtime and TensorFlow dtypes.
_PRECISIONS = {
    "float": "FP32", "float32": "FP32", "fp32": "FP32", "tf32": "TF32",
    "half": "FP16", "float16": "FP16", "fp16": "FP16",
    "bfloat16": "BF16", "bf16": "BF16",
    "int8": "INT8", "int4": "INT4", "fp8": "FP8", "float8": "FP8",
    "int32": "INT32", "int64": "INT64", "bool": "BOOL", "uint8": "UINT8",
}


def normalise_precision(value: object) -> str | None:
    """`Float`, `float32`, `Half`, `Int8`... as FP32 / FP16 / INT8 ...; None when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    if not text:
        return None
    return _PRECISIONS.get(text.lower(), text.upper())


def layer_table(rows: Iterable[dict], run: str, source: str, device: str) -> pd.DataFrame:
    """Validate and normalise per-layer rows of one run into the shared table.

    Each row needs `layer` and `avg_ms`; `median_ms` defaults to `avg_ms`, `engine`,
    `layer_type` and `precision` to None, `tf_nodes` to []. Other keys become extra columns.
    """
    _check_label("run", run)
    _check_label("device", device)
    if source not in SOURCES:
        raise WorkbenchError(f"unknown profiling source {source!r}: expected one of {SOURCES}")
    records = [_normalise_row(row, index) for index, row in enumerate(rows)]
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(columns=LAYER_COLUMNS)
    frame["run"], frame["source"], frame["device"] = run, source, device
    frame = _order_columns(frame)
    return _with_pct(frame)


def combine(tables: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Many runs' tables as one, same schema; `pct` is recomputed per run."""
    frames = []
    for table in tables:
        missing = [c for c in LAYER_COLUMNS if c not in table.columns]
        if missing:
            raise WorkbenchError(f"not a layer table: missing columns {missing}")
        frames.append(table)
    if not frames:
        return pd.DataFrame(columns=LAYER_COLUMNS)
    frame = pd.concat(frames, ignore_index=True, sort=False)
    return _with_pct(_order_columns(frame))


def _check_label(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise WorkbenchError(f"every layer timing needs a {name} label, got {value!r}")


def _normalise_row(row: dict, index: int) -> dict:
    if not isinstance(row, dict):
        raise WorkbenchError(f"layer row {index} is a {type(row).__name__}, not a dict")
    layer = row.get("layer")
    if not isinstance(layer, str) or not layer:
        raise WorkbenchError(f"layer row {index} has no layer name")
    out = dict(row)
    out["avg_ms"] = _time(row.get("avg_ms"), "avg_ms", layer)
    median = row.get("median_ms")
    out["median_ms"] = out["avg_ms"] if median is None else _time(median, "median_ms", layer)
    out["precision"] = normalise_precision(row.get("precision"))
    for key in ("engine", "layer_type"):
        out[key] = row.get(key) or None
    out["tf_nodes"] = _node_list(row.get("tf_nodes"))
    return out


def _time(value: object, name: str, layer: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise WorkbenchError(f"layer {layer!r}: {name} {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise WorkbenchError(f"layer {layer!r}: {name} {value!r} is not a time >= 0")
    return number


def _node_list(value: object) -> list[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []  # a missing cell once the table went through pandas
    if isinstance(value, str):
        return [value] if value else []
    return [str(v) for v in value]  # type: ignore[union-attr]


def _order_columns(frame: pd.DataFrame) -> pd.DataFrame:
    for column in LAYER_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    extras = [c for c in frame.columns if c not in LAYER_COLUMNS]
    return frame[LAYER_COLUMNS + extras].reset_index(drop=True)


def _with_pct(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["avg_ms"] = frame["avg_ms"].astype(float)
    frame["median_ms"] = frame["median_ms"].astype(float)
    totals = frame.groupby("run")["avg_ms"].transform("sum")
    frame["pct"] = (100.0 * frame["avg_ms"] / totals.where(totals > 0)).fillna(0.0)
    return frame


# Format/Datatype strings name the element type among other words ("Channel major FP16 format").
_FORMAT_TYPE = re.compile(r"\b(FP32|FP16|BF16|TF32|FP8|Int8|Int4|Int32|Int64|UInt8|Bool)\b", re.I)


def precision_of_format(text: str | None) -> str | None:
    """`Channel major FP16 format where channel % 8 == 0` -> FP16; None when it names none."""
    match = _FORMAT_TYPE.search(text or "")
    return normalise_precision(match.group(1)) if match else None
