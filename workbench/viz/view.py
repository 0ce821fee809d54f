"""One view of a conversion: what the notebook app's tabs and the HTML report both show.

`build_view` computes it once per change (result, report, sweep, recommendation, advice, headline
figures, tables) from a session, the parameters and the latest measurements; the app's tabs and
the report only render it, so the two cannot disagree (they once swept different thresholds and
recommended different values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import pandas as pd

from workbench.checks.conversion_check import ConversionCheck
from workbench.checks.per_engine import PerEngineAccuracy
from workbench.conversion.advice import RANGE, Advice, advise, precision_changes_segments
from workbench.conversion.conversion_report import ConversionReport, nonconversion_report
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import Recommendation, recommend_minimum_segment_size
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.conversion.summary import summary_lines
from workbench.graph.nodes import Graph

MIN_SWEEP_LIMIT = 16  # a short sweep still shows the shape of the curve


def sweep_limit(largest_segment: int) -> int:
    """The largest `minimum_segment_size` worth showing: one past the largest segment (no
    engines from there on), so every outcome is reachable, on the slider and in the sweep."""
    return max(MIN_SWEEP_LIMIT, largest_segment + 1)


def largest_segment(session: ConversionSession, params: ConversionParams) -> int:
    """The largest effective segment size of this clustering (any threshold)."""
    return max((s.effective_size for s in session.segmentation(params).segments), default=0)


@dataclass(frozen=True)
class Headline:
    """The conversion's numbers at a glance (summary()'s footer and the report's totals)."""

    engines: int
    percent_converted: float
    converted_nodes: int
    total_nodes: int
    rejected_op_types: int
    rejected_nodes: int
    tensorflow_version: str | None
    prepared_for: str = ""  # the device Grappler prepared the graph for (graph/gpu.py)

    @classmethod
    def of(cls, result: ConversionResult) -> Headline:
        return cls(
            engines=len(result.engines),
            percent_converted=result.percent_converted,
            converted_nodes=result.converted_nodes,
            total_nodes=result.total_nodes,
            rejected_op_types=len(result.nonconversion),
            rejected_nodes=sum(sum(r.values()) for r in result.nonconversion.values()),
            tensorflow_version=result.tensorflow_version,
            prepared_for=result.prepared_for,
        )


@dataclass(frozen=True)
class ConversionView:
    """Everything shown about one conversion; built by `build_view`, rendered by the app's
    tabs and the HTML report. Measurements (check, profile, blocking op types) are the latest
    ones, which may belong to other parameters: `check_is_current` says."""

    params: ConversionParams
    graph: Graph  # the prepared graph the result segments (for drawings)
    result: ConversionResult
    report: ConversionReport
    sweep: tuple[ConversionResult, ...]  # thresholds 1 .. sweep_limit(largest segment)
    recommendation: Recommendation
    advice: tuple[Advice, ...] = ()  # other settings that convert better, largest gain first
    check: ConversionCheck | None = None
    profile: pd.DataFrame | None = None
    blocking: pd.DataFrame | None = None
    # TensorRT's verdict per engine (`TensorRTVerdict.to_json()`) for these very parameters,
    # when one was made; the report's engine tables then carry the tensorrt_* columns.
    tensorrt: Mapping[str, Mapping[str, Any]] | None = None
    per_engine: PerEngineAccuracy | None = None
    # What each knob can change for this model, where the answer is "nothing visible here"
    # (`knob_notes`): a knob that seems broken is explained, not left to guess.
    knob_notes: tuple[str, ...] = ()

    @cached_property
    def headline(self) -> Headline:
        return Headline.of(self.result)

    @cached_property
    def summary_text(self) -> str:
        """summary() as TF-TRT prints it."""
        return "\n".join(summary_lines(self.result))

    @cached_property
    def nonconversion_text(self) -> str:
        """TF-TRT's detailed non-conversion report, as it logs it."""
        if not self.result.nonconversion and self.params.minimum_segment_size == -1:
            return "minimum_segment_size is -1: nothing was segmented."
        return nonconversion_report(self.result.nonconversion, detailed=True).strip("\n")

    @cached_property
    def op_histogram(self) -> pd.DataFrame:
        """Op type x engine node counts (the native segment's ops, as summary() lists them)."""
        engines = [e.name for e in self.result.engines]
        counts = pd.DataFrame({e.name: e.native_ops for e in self.result.engines}).fillna(0)
        if counts.empty:
            return counts
        counts = counts.astype(int).sort_index()
        counts.insert(0, "op", counts.index)
        counts["total"] = counts[engines].sum(axis=1)
        return counts

    @cached_property
    def rejected(self) -> pd.DataFrame:
        """TF-TRT's candidate test's rejections: op, count, reason."""
        frame = self.report.nonconversion
        return frame[["op", "count", "reason"]] if not frame.empty else frame

    @cached_property
    def left_out(self) -> pd.DataFrame:
        """Candidates left outside engines, which TF-TRT's report did not list."""
        frame = self.report.unconverted
        if frame.empty:
            return frame
        return frame[~frame["in_tftrt_report"]][["name", "op", "reason"]]

    @property
    def check_is_current(self) -> bool:
        """The latest check measured these very parameters."""
        return self.check is not None and self.check.params == self.params

    @property
    def engine_errors(self) -> dict[str, float] | None:
        """engine -> its output max abs error, when the latest per-engine accuracy measured
        these very parameters (the segment graph colours engines by it)."""
        if self.per_engine is None or self.per_engine.params != self.params:
            return None
        return {e.engine: e.output_max_abs_error for e in self.per_engine.engines}

    @property
    def engine_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.result.engines)


def build_view(
    session: ConversionSession,
    params: ConversionParams,
    check: ConversionCheck | None = None,
    profile: pd.DataFrame | None = None,
    blocking: pd.DataFrame | None = None,
    tensorrt: Mapping[str, Mapping[str, Any]] | None = None,
    per_engine: PerEngineAccuracy | None = None,
) -> ConversionView:
    """The view of converting `session`'s model with `params`, swept over every threshold up
    to one past the largest segment, with the latest measurements."""
    result = session.convert(params)
    limit = sweep_limit(largest_segment(session, params))
    sweep = tuple(session.sweep(params, range(1, limit + 1)))
    advice = tuple(advise(session, params))
    return ConversionView(
        knob_notes=knob_notes(session, params, result, sweep),
        params=params,
        graph=session.prepared(params.precision_mode).graph,
        result=result,
        report=ConversionReport(result, advice, tensorrt=tensorrt),
        sweep=sweep,
        recommendation=recommend_minimum_segment_size(sweep, params.minimum_segment_size),
        advice=advice,
        check=check,
        profile=profile,
        blocking=blocking,
        tensorrt=tensorrt,
        per_engine=per_engine,
    )


def knob_notes(session: ConversionSession, params: ConversionParams, result: ConversionResult,
               sweep: tuple[ConversionResult, ...]) -> tuple[str, ...]:
    """One sentence per knob whose effect is invisible or limited for this model and why."""
    notes = [_threshold_note(params.minimum_segment_size, sweep)]
    if not precision_changes_segments(session, params):
        notes.append("precision_mode: FP32, FP16 and INT8 give these same engines (no op rule "
                     "of this model differs by precision); precision changes the engines' "
                     "kernels, so it shows once engines are built: Validation, Profiling, "
                     "TensorRT verdicts.")
    if params.needs_calibration:
        notes.append("INT8 needs calibration data: Validation calibrates on generated batches; "
                     "for your own data use the CLI's check --inputs FILE.npz "
                     "--calibration-key KEY.")
    dynamic = not params.use_dynamic_shape
    flipped = session.convert(replace(params, use_dynamic_shape=dynamic,
                                      dynamic_shape_profile_strategy=RANGE if dynamic else None))
    if _engine_nodes(flipped) == _engine_nodes(result):
        notes.append("use_dynamic_shape: the same engines either way for this model; it changes "
                     "the shapes each engine accepts (input shapes, in the engine table's "
                     "details).")
    return tuple(note for note in notes if note)


def _engine_nodes(result: ConversionResult) -> list[frozenset[str]]:
    return sorted((frozenset(e.nodes) for e in result.engines), key=sorted)


def _threshold_note(current: int, sweep: tuple[ConversionResult, ...]) -> str:
    """The range of minimum_segment_size values that give the current engines."""
    outcome = {int(r.minimum_segment_size or 0): (len(r.engines), r.converted_nodes)
               for r in sweep}
    if current not in outcome:
        return ""
    low = high = current
    while outcome.get(low - 1) == outcome[current]:
        low -= 1
    while outcome.get(high + 1) == outcome[current]:
        high += 1
    if low == high:
        return ""
    note = f"minimum_segment_size: every value from {low} to {high} gives these engines"
    if outcome.get(high + 1, (None,))[0] == 0:
        note += f"; from {high + 1} on nothing is converted (the largest segment has {high} " \
                "effective nodes)"
    return note + "."
