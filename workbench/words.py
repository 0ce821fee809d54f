"""Words for people, shared by every layer: internal names in words for every table and chart
(`tensorrt_plan_bytes` -> "TensorRT plan size (bytes)", `converted_ms_b1` -> "converted (ms,
batch 1)") and counts that agree in number ("1 engine", "3 engines")."""

from __future__ import annotations

import re

# Column names that words alone do not make readable (units, abbreviations).
LABELS = {
    "percent_converted": "% converted", "plan": "plan size", "build": "build time",
    "max_abs": "largest error", "mean_abs": "mean error", "max_rel": "largest relative error",
    "mean_rel": "mean relative error", "top1_agreement": "top-1 agreement",
    "effective_size": "effective size (nodes)", "in_tftrt_report": "in TF-TRT's report",
    "speedup": "speed-up", "avg": "average", "top1_agreement_pct": "top-1 agreement (%)",
    "max_abs_error": "largest error", "engines_backend": "engines' backend",
    "engines_device": "engines' device", "validation_passed": "validation passed",
}
_UNITS = {"ms": "ms", "s": "s", "bytes": "bytes", "mib": "MiB", "pct": "%"}  # unit words
_RATIOS = {"speedup"}  # words whose column is a ratio: "speed-up (×)"
_LOWER = re.compile(r"[a-z0-9_]+")
_BATCH = re.compile(r"b\d+")  # a batch size: converted_ms_b4
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def column_label(name: str) -> str:
    """A column's name in words: `tensorrt_plan_bytes` -> "TensorRT plan size (bytes)",
    `converted_ms_b1` -> "converted (ms, batch 1)". Names that are not snake_case (an
    engine's, an op's) stay as they are."""
    if name in LABELS and name not in _RATIOS:
        return LABELS[name]
    if not _LOWER.fullmatch(name):
        return name
    prefix = ""
    if name.startswith("tensorrt_"):
        prefix, name = "TensorRT ", name.removeprefix("tensorrt_")
    words = name.split("_")
    units = [_UNITS[w] for w in words if w in _UNITS][:1]
    if not units and _RATIOS & set(words):
        units = ["×"]
    if _BATCH.fullmatch(words[-1]):
        units.append(f"batch {words[-1][1:]}")
        words = words[:-1]
    name = "_".join(w for w in words if w not in _UNITS)
    text = LABELS.get(name, name.replace("_", " "))
    return prefix + text + (f" ({', '.join(units)})" if units else "")


def has_snake_case(text: str) -> bool:
    """Whether `text` holds a snake_case word (an internal name, not one for people)."""
    return bool(_SNAKE.search(text))


def counted(count: int, noun: str, plural: str = "") -> str:
    """`1 kernel`, `2 kernels` (`plural` where it is not the noun and an s: `boxes`): a count
    and its noun, agreeing in number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
