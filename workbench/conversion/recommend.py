"""Recommended `minimum_segment_size` values, after Torch-TensorRT's dry-run report.

Torch-TensorRT's dry run recommends three `min_block_size` values from the engines of the
current partitioning: the largest engine's size (minimal segmentation), the mean engine size
rounded up (moderate) and the smallest engine's size (what the current setting amounts to).
TF-TRT compares each segment's *effective* size (Identity/Snapshot/StopGradient not counted,
docs/tftrt-behaviour.md#minimum-segment-size) against the threshold, so effective sizes play the
role of Torch's operator counts.
The fewest-engines value is read off a sweep instead, so that it is a value the sweep (and its
chart) actually shows. A mean that equals an engine's size sits on a cliff edge (one more and that
engine is gone: ResNet-50's single 503-node engine made "moderate: 503"); the moderate value then
moves down its plateau, to the value nearest the current one that gives the same engines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.conversion.result import ConversionResult
from workbench.words import counted


@dataclass(frozen=True)
class Recommendation:
    """Three `minimum_segment_size` values and one sentence on each (keys: the field names)."""

    fewest_engines: int  # fewest engines (at least one), then most nodes converted
    moderate: int  # ceil(mean effective engine size) at the current value, as Torch-TRT does
    current: int  # the user's current value
    notes: dict[str, str]

    def __str__(self) -> str:
        """The three values with their sentences, one a line (what `print` shows)."""
        return "\n".join(f"{key.replace('_', ' ')}: {getattr(self, key)}. {note}"
                         for key, note in self.notes.items())


@dataclass(frozen=True)
class _Outcome:
    engines: int
    converted: int
    total: int | None  # None when predicted: copied Consts make the exact total unknown

    def describe(self) -> str:
        if self.total is None:
            return f"{counted(self.engines, 'engine')} holding {self.converted} nodes"
        percent = 100.0 * self.converted / self.total if self.total else 0.0
        return (
            f"{counted(self.engines, 'engine')}, {percent:.2f}% of nodes converted "
            f"[{self.converted}/{self.total}]"
        )


def recommend_minimum_segment_size(
    sweep: Sequence[ConversionResult], current: int
) -> Recommendation:
    """Recommends values from `sweep` (results of one session's `sweep()`, any thresholds).

    Ties for the fewest engines go to the value closest to `current` (then the smaller one):
    every value on such a plateau gives the same engines, so the user need change least.
    """
    by_threshold = {_threshold(r): r for r in sweep if _threshold(r) >= 1}
    if not any(r.engines for r in by_threshold.values()):
        return _no_engines(current, bool(by_threshold))
    fewest = _fewest_engines(by_threshold, current)
    base = _base_result(by_threshold, current)
    sizes = [e.effective_size for e in base.engines]
    mean = math.ceil(round(sum(sizes) / len(sizes), 2))  # Torch rounds the mean to 2 places
    moderate = _off_the_edge(sizes, mean, current)
    notes = {
        "fewest_engines": (
            f"minimum_segment_size={fewest} gives the fewest engines in the sweep: "
            f"{_outcome(by_threshold[fewest]).describe()}."
        ),
        "moderate": (
            f"minimum_segment_size={moderate} is the mean effective engine size "
            f"({sum(sizes) / len(sizes):.2f}) at minimum_segment_size="
            f"{_threshold(base)}, rounded up (Torch-TensorRT's moderate choice): "
            f"{_predicted(by_threshold, base, moderate).describe()}."
        ) if moderate == mean else (
            f"minimum_segment_size={moderate}: the mean effective engine size "
            f"({sum(sizes) / len(sizes):.2f}, Torch-TensorRT's moderate choice) rounds up to "
            f"{mean}, the size of an engine, which {mean + 1} would drop; every value from "
            f"{_plateau_start(sizes, mean)} to {mean} "
            f"gives the same engines: {_predicted(by_threshold, base, moderate).describe()}."
        ),
        "current": _current_note(by_threshold, current),
    }
    return Recommendation(fewest, moderate, current, notes)


def _threshold(result: ConversionResult) -> int:
    return int(result.minimum_segment_size or 0)  # sweeps hold ConversionParams


def _outcome(result: ConversionResult) -> _Outcome:
    return _Outcome(len(result.engines), result.converted_nodes, result.total_nodes)


def _fewest_engines(by_threshold: dict[int, ConversionResult], current: int) -> int:
    with_engines = [t for t, r in by_threshold.items() if r.engines]
    return min(
        with_engines,
        key=lambda t: (
            len(by_threshold[t].engines),
            -by_threshold[t].converted_nodes,
            abs(t - current),
            t,
        ),
    )


def _base_result(by_threshold: dict[int, ConversionResult], current: int) -> ConversionResult:
    """The partitioning Torch-TRT would describe: the current one, else the smallest threshold
    with engines (a current value of -1 or beyond every engine has none to average)."""
    result = by_threshold.get(current)
    if result is not None and result.engines:
        return result
    return by_threshold[min(t for t, r in by_threshold.items() if r.engines)]


def _plateau_start(sizes: list[int], value: int) -> int:
    """The smallest threshold that keeps the same engines as `value` (from these sizes)."""
    return max((s for s in sizes if s < value), default=0) + 1


def _off_the_edge(sizes: list[int], mean: int, current: int) -> int:
    """`mean`, unless an engine has exactly that size (the next value drops it): then the
    value nearest `current` among those that give the same engines."""
    if mean not in sizes:
        return mean
    return max(_plateau_start(sizes, mean), min(current, mean))


def _predicted(
    by_threshold: dict[int, ConversionResult], base: ConversionResult, threshold: int
) -> _Outcome:
    """The outcome at `threshold`, from the sweep when it has it.

    Otherwise from `base` (threshold <= `threshold`): a larger threshold keeps exactly the base
    engines at least that large, since the engine limit keeps the largest segments.
    """
    if threshold in by_threshold:
        return _outcome(by_threshold[threshold])
    kept = [e for e in base.engines if e.effective_size >= threshold]
    return _Outcome(len(kept), sum(e.native_node_count for e in kept), None)


def _current_note(by_threshold: dict[int, ConversionResult], current: int) -> str:
    if current == -1:
        return "minimum_segment_size=-1 (current) leaves the main graph unconverted."
    result = by_threshold.get(current)
    if result is None:
        return f"minimum_segment_size={current} (current) is not in the sweep."
    if not result.engines:
        return f"minimum_segment_size={current} (current) creates no engine."
    smallest = min(e.effective_size for e in result.engines)
    same = (
        f"any value from {current} to {smallest} gives the same engines"
        if smallest > current
        else "a larger value drops it"
    )
    return (
        f"minimum_segment_size={current} (current): {_outcome(result).describe()}; "
        f"its smallest engine has {smallest} effective nodes, so {same}."
    )


def _no_engines(current: int, swept: bool) -> Recommendation:
    why = "no minimum_segment_size in the sweep creates an engine" if swept else "empty sweep"
    note = f"Keeping minimum_segment_size={current}: {why}."
    return Recommendation(
        current, current, current, {"fewest_engines": note, "moderate": note, "current": note}
    )
