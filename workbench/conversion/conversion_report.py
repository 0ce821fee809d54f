"""TF-TRT's non-conversion report and CSV (segment.cc,
docs/tftrt-behaviour.md#nonconversion-report), and a conversion result
as pandas DataFrames and as the CLI's JSON document (DESIGN.md, "CLI").

TF-TRT sorts op types and reasons with an unstable `std::sort` on the count alone, so ties have
no fixed order there. We break ties alphabetically: count descending, then name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

import pandas as pd

from workbench import environment
from workbench.conversion.result import ConversionResult, EngineInfo, Shape
from workbench.errors import ConversionParamsError

RULE_WIDTH = 80
REPORT_TITLE = "TensorRT unsupported/non-converted OP Report:"
SUPPORTED_OPS_URL = (
    "https://docs.nvidia.com/deeplearning/frameworks/tf-trt-user-guide/index.html#supported-ops"
)
CSV_SEPARATOR = "|"
CSV_HEADER = ("OP Name", "Reason", "Count")
CSV_ERROR_PREFIX = (
    "Problem encountered while generating the TF-TRT Non-Conversion Report in CSV Format:\n"
)

# segment.cc treats a value made only of these characters as a number (std::stoi).
_NUMERIC_CHARS = frozenset("-0123456789")
# std::stoi reads an optional sign and digits, ignoring whatever follows ("5-3" is 5).
_STOI_PREFIX = re.compile(r"[-+]?\d+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# DESIGN.md's `params` keys, in order, with the value TF-TRT uses when one is not given.
PARAM_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("precision_mode", "FP32"),
    ("minimum_segment_size", 3),
    ("use_dynamic_shape", False),
    ("dynamic_shape_profile_strategy", None),
    ("denylist", []),
    ("max_engines", 20),
)

ENGINE_COLUMNS = (
    "name", "device", "nodes", "inputs", "outputs", "input_dtypes", "output_dtypes",
    "input_shapes", "output_shapes", "effective_size", "ops",
)
# TensorRT's verdict on each engine (`tensorrt_<name>` columns when verdicts are given).
TENSORRT_COLUMNS = ("parsed", "built", "error", "plan_bytes", "build_s", "layers", "builder")
NONCONVERSION_COLUMNS = ("op", "reason", "count")
UNCONVERTED_COLUMNS = ("name", "op", "reason", "in_tftrt_report")
ADVICE_COLUMNS = ("setting", "value", "engines", "percent_converted", "largest_engine",
                  "native_nodes", "why", "trade_off")


# ----------------------------------------------------------------------------- ordering


def _count_then_name(items: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    return sorted(items, key=lambda item: (-item[1], item[0]))


def report_order(
    nonconversion: Mapping[str, Mapping[str, int]],
) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(op, total, [(reason, count), ...]) in the report's order, ties broken by name."""
    totals = {op: sum(reasons.values()) for op, reasons in nonconversion.items()}
    return [
        (op, total, _count_then_name(nonconversion[op].items()))
        for op, total in _count_then_name(totals.items())
    ]


# ----------------------------------------------------------------------------- text report


def nonconversion_report(nonconversion: Mapping[str, Mapping[str, int]], detailed: bool) -> str:
    """The report segment.cc logs on every conversion, byte for byte."""
    parts = ["\n\n", "#" * RULE_WIDTH, "\n", REPORT_TITLE]
    grand_total = 0
    for op, total, reasons in report_order(nonconversion):
        grand_total += total
        parts.append(f"\n\t- {op} -> {total}x")
        if detailed:
            parts.extend(f"\n\t\t- [Count: {n}x] {reason}" for reason, n in reasons if n)
            parts.append("\n")
    parts += [
        "\n", "-" * RULE_WIDTH,
        f"\n\t- Total nonconverted OPs: {grand_total}",
        f"\n\t- Total nonconverted OP Types: {len(nonconversion)}",
        f"\nFor more information see {SUPPORTED_OPS_URL}.",
        "\n", "#" * RULE_WIDTH, "\n",
    ]
    return "".join(parts)


def _stoi(value: str) -> int:
    """std::stoi on `value`; raises ConversionParamsError where C++ would throw."""
    match = _STOI_PREFIX.match(value)
    number = int(match.group()) if match else None
    if number is None or not _INT32_MIN <= number <= _INT32_MAX:
        raise ConversionParamsError(
            f"{environment.SHOW_DETAILED_REPORT.name}={value!r} is not a valid integer "
            "(TF-TRT would abort): "
            "use 1 for the detailed report, 0 for the short one, or a CSV file path."
        )
    return number


def detailed_report_setting(value: str | None) -> tuple[bool, str | None]:
    """(detailed, csv_path) for a TF_TRT_SHOW_DETAILED_REPORT value (None when unset).

    Unset or empty: short report. Only `-` and digits: an integer, detailed when >= 1. Anything
    else, even "1.0", is a CSV path, and the detailed report is shown as well.
    """
    if not value:
        return False, None
    if not set(value) <= _NUMERIC_CHARS:
        return True, value
    return _stoi(value) >= 1, None


# ----------------------------------------------------------------------------- CSV


def nonconversion_csv(nonconversion: Mapping[str, Mapping[str, int]]) -> str:
    """TF-TRT's CSV text: std::map order (op, then reason), `|`-separated, nothing escaped."""
    rows = [CSV_HEADER]
    for op in sorted(nonconversion):
        reasons = nonconversion[op]
        rows.extend((op, reason, str(reasons[reason])) for reason in sorted(reasons))
    return "".join(CSV_SEPARATOR.join(row) + "\n" for row in rows)


def write_nonconversion_csv(
    nonconversion: Mapping[str, Mapping[str, int]], path: str
) -> str | None:
    """Write the CSV to `path`; return None, or TF-TRT's logged error text (never raises).

    Like TF-TRT, a failure only produces a message: conversion goes on.
    """
    text = nonconversion_csv(nonconversion)
    # No `with`: opening, writing and closing each have their own TF-TRT message.
    try:
        handle = open(path, "w", encoding="utf-8", newline="")
    except (OSError, ValueError):
        return f"{CSV_ERROR_PREFIX}Failed to open output file: `{path}`"
    try:
        handle.write(text)
    except (OSError, ValueError):
        handle.close()
        return f"{CSV_ERROR_PREFIX}Error writing to output file `{path}`."
    try:
        handle.close()
    except OSError:
        return f"{CSV_ERROR_PREFIX}Error closing the file `{path}`. The file might be corrupted."
    return None


# ----------------------------------------------------------------------------- per-engine data


def shape_list(shape: Shape) -> list[int] | None:
    """A shape as a list with -1 for every unknown dim; None for unknown rank."""
    if shape is None:
        return None
    return [dim if dim >= 0 else -1 for dim in shape]


def engine_device(engine: EngineInfo) -> str:
    """What summary() shows: the last `/` component, e.g. `device:GPU:0`."""
    return engine.device.split("/")[-1]


def engines_by_name(result: ConversionResult) -> list[EngineInfo]:
    """Engines in summary() order (by node name)."""
    return sorted(result.engines, key=lambda engine: engine.name)


def _engine_row(engine: EngineInfo) -> dict[str, Any]:
    # Counts come from the dtype lists, as summary() counts `InT`/`OutT`.
    return {
        "name": engine.name,
        "device": engine_device(engine),
        "nodes": engine.native_node_count,
        "inputs": len(engine.input_dtypes),
        "outputs": len(engine.output_dtypes),
        "input_dtypes": list(engine.input_dtypes),
        "output_dtypes": list(engine.output_dtypes),
        "input_shapes": [shape_list(s) for s in engine.input_shapes],
        "output_shapes": [shape_list(s) for s in engine.output_shapes],
        "effective_size": engine.effective_size,
        "ops": dict(sorted(engine.native_ops.items())),
    }


# ----------------------------------------------------------------------------- JSON helpers


def _plain(value: Any) -> Any:
    """A JSON-ready copy of a parameter value (tuples, sets, enums, numpy scalars)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return str(value)


def params_dict(params: Mapping[str, Any]) -> dict[str, Any]:
    """DESIGN.md's `params` object: its keys in its order; other keys are not part of it."""
    return {key: _plain(params.get(key, default)) for key, default in PARAM_DEFAULTS}


def _engine_json(engine: EngineInfo, tensorrt: Mapping[str, Mapping[str, Any]] | None = None
                 ) -> dict[str, Any]:
    row = _engine_row(engine)
    verdict = {} if tensorrt is None else {"tensorrt": _verdict(tensorrt, engine.name)}
    return {
        "name": engine.name,
        "nodes": list(engine.nodes),
        "ops": row["ops"],
        "inputs": row["inputs"],
        "outputs": row["outputs"],
        "input_dtypes": row["input_dtypes"],
        "output_dtypes": row["output_dtypes"],
        "input_shapes": row["input_shapes"],
        "output_shapes": row["output_shapes"],
    } | verdict


def _verdict(tensorrt: Mapping[str, Mapping[str, Any]], engine: str) -> dict[str, Any]:
    """An engine's TensorRT verdict object (`--tensorrt`); every engine gets one."""
    found = tensorrt.get(engine)
    if found is None:
        found = {**dict.fromkeys(TENSORRT_COLUMNS), "parsed": False, "built": False,
                 "error": "no verdict was made for this engine"}
    return dict(found)


def _verdict_columns(tensorrt: Mapping[str, Mapping[str, Any]] | None, engine: str
                     ) -> dict[str, Any]:
    if tensorrt is None:
        return {}
    return {f"tensorrt_{key}": value for key, value in _verdict(tensorrt, engine).items()
            if key in TENSORRT_COLUMNS}


def _function_json(conversion: Any, tensorrt: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> dict[str, Any]:
    return {
        "function": conversion.function,
        "attributes": _plain(conversion.attrs),
        "params": params_dict(conversion.params.to_json()),
        "engines": [_engine_json(e, tensorrt)
                    for e in sorted(conversion.engines, key=lambda e: e.name)],
        "unconverted": [{"name": n.name, "op": n.op, "reason": n.reason}
                        for n in conversion.unconverted],
    }


# ----------------------------------------------------------------------------- the report


class ConversionReport:
    """One conversion's engines, non-conversion counts and unconverted nodes as data, and the
    advice on every knob when given (`advice.advise`: `Advice` entries, largest gain first).

    `tensorrt` (engine -> TensorRT's verdict as `TensorRTVerdict.to_json()` gives it) adds the
    `tensorrt_*` columns to the engine tables and a `tensorrt` object to each engine's JSON.
    `estimate` (`profiling.estimate.conversion`'s, for a target GPU) adds each engine's
    estimated time to its JSON and the model's estimate at the top.
    """

    def __init__(self, result: ConversionResult, advice: Sequence[Any] | None = None,
                 tensorrt: Mapping[str, Mapping[str, Any]] | None = None,
                 estimate: Mapping[str, Any] | None = None):
        self.result = result
        self.tensorrt = tensorrt
        self.estimate = estimate
        self.advice_entries = None if advice is None else list(advice)
        self.advice = pd.DataFrame(
            [{k: v for k, v in a.to_json().items() if k != "params"}
             for a in self.advice_entries or []], columns=list(ADVICE_COLUMNS))
        engines = engines_by_name(result)
        verdict_columns = [f"tensorrt_{c}" for c in TENSORRT_COLUMNS] if tensorrt is not None \
            else []
        self.engines = pd.DataFrame(
            [_engine_row(e) | _verdict_columns(tensorrt, e.name) for e in engines],
            columns=[*ENGINE_COLUMNS, *verdict_columns]
        )
        self.nonconversion = pd.DataFrame(
            [
                (op, reason, count)
                for op, _total, reasons in report_order(result.nonconversion)
                for reason, count in reasons
                if count  # the detailed report skips zero counts too
            ],
            columns=list(NONCONVERSION_COLUMNS),
        )
        self.unconverted = pd.DataFrame(
            [(n.name, n.op, n.reason, n.in_tftrt_report) for n in result.unconverted],
            columns=list(UNCONVERTED_COLUMNS),
        )
        # Engines inside functions marked `_tftrt_convert_function`, with their function and
        # the parameters its attributes set (summary() leaves them out, as TF-TRT's did).
        self.function_engines = pd.DataFrame(
            [{"function": f.function, **_engine_row(e),
              "precision_mode": f.params.precision_mode,
              "minimum_segment_size": f.params.minimum_segment_size,
              **_verdict_columns(tensorrt, e.name)}
             for f in result.functions for e in f.engines],
            columns=["function", *ENGINE_COLUMNS, "precision_mode", "minimum_segment_size",
                     *verdict_columns],
        )

    def to_dict(self) -> dict:
        """The CLI's JSON document (DESIGN.md), keys in its order."""
        result = self.result
        document = {
            "model": result.model,
            "signature_key": result.signature_key,
            "params": params_dict(result.params.to_json()),
            "engines": [_engine_json(e, self.tensorrt) for e in engines_by_name(result)],
            "unconverted": [
                {"name": n.name, "op": n.op, "reason": n.reason} for n in result.unconverted
            ],
            "converted_nodes": result.converted_nodes,
            "total_nodes": result.total_nodes,
            "percent_converted": result.percent_converted,
            "tensorflow_version": result.tensorflow_version or None,
            "prepared_for": result.prepared_for or None,
        } | ({"functions": [_function_json(f, self.tensorrt) for f in result.functions]}
             if result.functions else {}) | (
            {"advice": [a.to_json() for a in self.advice_entries]}
            if self.advice_entries is not None else {})
        return document if self.estimate is None else _with_estimate(document, self.estimate)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def _with_estimate(document: dict, estimate: Mapping[str, Any]) -> dict:
    """The document with each engine's estimated time (inside its TensorRT verdict when there
    is one, with what it was estimated from) and the model's estimate at the top."""
    basis = estimate.get("engine_basis", {})
    for engine in document["engines"]:
        target = engine["tensorrt"] if "tensorrt" in engine else engine
        ms = estimate["engines"].get(engine["name"])
        # The engine's range is the model's, scaled: one out-of-sample error band for all.
        low, high = (ms * estimate["converted_low_ms"] / estimate["converted_ms"],
                     ms * estimate["converted_high_ms"] / estimate["converted_ms"]) \
            if ms is not None and estimate.get("converted_ms") else (None, None)
        target.update(estimated_ms=ms, estimated_low_ms=low, estimated_high_ms=high,
                      estimated_from=basis.get(engine["name"]))
    document["estimate"] = {key: value for key, value in estimate.items()
                            if key not in ("engines", "engine_basis")}
    return document
