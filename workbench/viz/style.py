"""Colours, reason categories and counted nouns shared by the segment graphs and the charts.

Rules are data: an unconverted node's reason falls in the first category whose pattern it
contains, so the legend stays at a handful of colours while tooltips keep the full reason.
"""

from __future__ import annotations

import math

# Engines: a qualitative palette (Tableau 20's light tones), cycled past 20 engines.
ENGINE_COLORS = (
    "#aec7e8", "#98df8a", "#ffbb78", "#c5b0d5", "#9edae5", "#f7b6d2", "#dbdb8d", "#c49c94",
    "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#e377c2", "#bcbd22", "#8c564b",
    "#6baed6", "#74c476", "#fd8d3c", "#9e9ac8",
)
ENGINE_BORDER = "#4a6fa5"

# (category, substrings of the reason, colour). Order matters: first match wins.
REASON_CATEGORIES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("input/output", ("excluded by segmenter option",), "#e0e0e0"),
    ("denylisted", ("Denylisted",), "#b0b0b0"),
    ("op not supported", ("is not supported", "not supported in implicit batch"), "#f4a6a6"),
    ("dtype", ("data type", "dtype", "type ", "Type "), "#f9d49b"),
    ("shape / batch", ("shape", "dimension", "batch", "rank", "Rank", "dims"), "#fbe3a6"),
    ("op settings", ("Cannot ", "only support", "must be", "Unsupported", "not supported"),
     "#f6c1a0"),
    ("segment too small", ("minimum_segment_size",), "#e8e2f2"),
    ("engine limit", ("TF_TRT_MAX_ALLOWED_ENGINES",), "#cfe2f3"),
    ("segment boundary", ("boundary", "no inputs", "no effective nodes"), "#ead1dc"),
    ("device", ("placed on GPU",), "#d5d5f0"),
)
OTHER_CATEGORY = ("other reason", "#d7c5b6")


def engine_color(index: int) -> str:
    """The fill colour of the `index`-th engine (stable across views and charts)."""
    return ENGINE_COLORS[index % len(ENGINE_COLORS)]


def reason_category(reason: str) -> str:
    """The short category of an unconverted node's reason (for colour and legend)."""
    for category, patterns, _ in REASON_CATEGORIES:
        if any(p in reason for p in patterns):
            return category
    return OTHER_CATEGORY[0]


def category_color(category: str) -> str:
    for name, _, color in REASON_CATEGORIES:
        if name == category:
            return color
    return OTHER_CATEGORY[1]


# Per-engine accuracy: small errors green to large (or NaN/inf) red, on a log scale.
ERROR_COLORS = ("#1a9850", "#91cf60", "#fee08b", "#fc8d59", "#d73027")
ERROR_RANGE = (1e-5, 1e-1)  # errors at or below the first are green, at or above the last red


def error_color(error: float) -> str:
    """The colour of an engine's max abs error (NaN and inf: the worst colour)."""
    if not math.isfinite(error):
        return ERROR_COLORS[-1]
    low, high = (math.log10(v) for v in ERROR_RANGE)
    where = (math.log10(max(error, 1e-30)) - low) / (high - low)
    return ERROR_COLORS[round(min(max(where, 0.0), 1.0) * (len(ERROR_COLORS) - 1))]
