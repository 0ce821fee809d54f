"""The workbench's tabs: each a small class with a `title`, a `widget` and `update(view)`.

A tab renders a `ConversionView` (built once per change by the app, the same view the HTML report
renders) and owns its widgets and HTML. Buttons that start long steps call back into the app,
which runs them in the background and builds the next view. Measurements (a check, a profile,
the blocking op types) are redrawn only when the view brings a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from typing import Any, Protocol

import ipywidgets as widgets
import pandas as pd
from IPython import get_ipython

from workbench.checks.conversion_check import parse_batch_sizes, parse_tolerance
from workbench.conversion.advice import Advice
from workbench.tf_compat import graph_origin
from workbench.ui.clickable import ClickableRows
from workbench.ui.store import ExperimentStore, model_name
from workbench.ui.tables import note_html, pre_html, table_html
from workbench.ui.target_gpu import EngineEstimate, SweepEstimate, TargetGpu
from workbench.viz import charts
from workbench.viz.profile_charts import native_vs_engine_chart, profile_figures
from workbench.viz.view import ConversionView, Headline
from workbench.words import counted

CHECK_COLUMNS = ["name", "passed", "shape", "max_abs", "mean_abs", "max_rel", "mean_rel",
                 "mismatches", "elements", "top1_agreement", "reason"]
CHECK_ESSENTIALS = ["name", "passed", "shape", "max_abs", "mean_abs", "top1_agreement_pct",
                    "reason"]
# The engine table's columns in view; the others (dtypes, shapes, TensorRT's plan size, build
# time, layers) are in each row's details.
ENGINE_ESSENTIALS = ["name", "nodes", "inputs", "outputs", "effective_size", "tensorrt_built",
                     "tensorrt_error"]
HISTOGRAM_ENGINES = 4  # engines shown as columns of the op histogram
RUN_ESSENTIALS = ["name", "created", "precision_mode", "minimum_segment_size", "engines",
                  "percent_converted", "max_abs_error", "speedup_b1"]


class Tab(Protocol):
    """What the app needs of a tab (`figures`, optional: the plotly figures it shows)."""

    title: str
    widget: widgets.Widget

    def update(self, view: ConversionView) -> None: ...


def headline_html(headline: Headline, model: str = "") -> str:
    """The one-line headline above the tabs, after the open model's name."""
    engines = headline.engines
    version = headline.tensorflow_version
    return (
        '<div class="wb-headline">'
        + (f'<span class="wb-model">{escape(model)}</span>: ' if model else "")
        + f"<b>{counted(engines, 'TensorRT engine')}</b> · "
        f"<b>{headline.percent_converted:.2f}%</b> of nodes converted "
        f"[{headline.converted_nodes}/{headline.total_nodes}] · "
        f"<b>{counted(headline.rejected_op_types, 'op type')}</b> rejected · "
        f'<span title="{escape(graph_origin(version))}">'
        f"TensorFlow {escape(version or '?')}</span>"
        + (f" · prepared for {escape(headline.prepared_for)}" if headline.prepared_for else "")
        + "</div>"
    )


def advice_html(advice: tuple[Advice, ...]) -> str:
    """The advice on every knob, largest gain first (measured conversions, not estimates)."""
    if not advice:
        return note_html("Advice: no other TF-TRT setting converts more nodes or makes fewer "
                         "engines here.")
    rows = pd.DataFrame([{"setting": a.setting.replace("_", " "), "value": a.value_words,
                          "engines": a.engines, "% converted": a.percent_converted,
                          "largest engine (nodes)": a.largest_engine, "why": a.why}
                         for a in advice])
    return "<b>Advice</b> <span class='wb-note'>(largest gain first)</span>" + table_html(rows)


def verdict_html(verdicts: Mapping[str, Mapping[str, Any]]) -> str:
    """TensorRT's verdict at a glance: how many engines it builds, and each one it does not
    with the first line of its error."""
    built = sum(bool(v.get("built")) for v in verdicts.values())
    builder = next((v.get("builder") for v in verdicts.values() if v.get("builder")), "TensorRT")
    failed = "".join(
        f"<li><code>{escape(name)}</code>: {'build' if v.get('parsed') else 'parse'} failed"
        f" ({escape((str(v.get('error') or '').splitlines() or ['no reason given'])[0])})</li>"
        for name, v in verdicts.items() if not v.get("built"))
    css = "wb-verdict" + ("" if built == len(verdicts) else " wb-verdict-fails")
    return (f'<div class="{css}"><b>{escape(str(builder))} builds {built} of {len(verdicts)} '
            f"engines</b> of these settings (the TensorRT columns of the engine table below)"
            + (f"<ul>{failed}</ul>" if failed else "") + "</div>")


class SummaryTab:
    """The advice on every knob, the engine table (with TensorRT's verdicts once asked for),
    each engine's op histogram and TF-TRT's summary()."""

    title = "Summary"

    def __init__(self, on_tensorrt: Callable[[], None] | None = None,
                 on_engine: Callable[[str], None] | None = None) -> None:
        self.html = ClickableRows()  # an engine table row leads to it in the graph (`on_engine`)
        self.html.add_class("wb-summary")
        self._engine_names: list[str] = []
        self.html.on_row(lambda table, row: on_engine is not None and table == "engines"
                         and row < len(self._engine_names) and on_engine(self._engine_names[row]))
        # TensorRT's verdicts run beside the controls (a slider move never waits for them).
        self.tensorrt_button = widgets.Button(
            description="TensorRT verdicts", icon="cogs", layout=widgets.Layout(width="180px"),
            tooltip="Parse and build every engine with TensorRT-RTX (no GPU needed)")
        self.tensorrt_button.on_click(lambda _b: on_tensorrt and on_tensorrt())
        self.tensorrt_note = widgets.HTML()
        # TensorRT's verdict on these very settings, at the top (the engine table's tensorrt_*
        # columns are far right); emptied as soon as a setting changes.
        self.verdict = widgets.HTML()
        self.widget = widgets.VBox([widgets.HBox([self.tensorrt_button, self.tensorrt_note]),
                                    self.verdict, self.html])

    def tensorrt_progress(self, text: str, error: bool = False) -> None:
        """The verdicts' progress, or why they cannot be made (e.g. how to install)."""
        self.tensorrt_note.value = note_html(text, error=error)

    def update(self, view: ConversionView) -> None:
        self.verdict.value = verdict_html(view.tensorrt) if view.tensorrt else ""
        engines = view.report.engines.drop(columns=["ops"], errors="ignore")
        self._engine_names = list(engines["name"]) if "name" in engines else []
        where = ""
        if "device" in engines and engines["device"].nunique() == 1:  # said once: a column less
            where = f"all on {escape(str(engines['device'].iloc[0]))}; "
            engines = engines.drop(columns=["device"])
        self.html.value = (
            advice_html(view.advice)
            + f"<b>Engines</b> <span class='wb-note'>({where}click one to see it in the "
              "Segment graph; more: its inputs, outputs and TensorRT's details)</span>"
            + table_html(engines, rows="engines", show=ENGINE_ESSENTIALS)
            + "<b>Op histogram per engine</b>" + op_histogram_html(view.op_histogram)
            + "<details><summary>As TF-TRT's <code>summary()</code> prints it</summary>"
            + pre_html(view.summary_text) + "</details>"
        )


def op_histogram_html(histogram: pd.DataFrame) -> str:
    """Op type x engine counts; past a few engines, each engine's count goes in the row's
    details (the table stays as wide as the notebook)."""
    engines = [c for c in histogram.columns if c not in ("op", "total")]
    shown = ["op", *engines, "total"] if len(engines) <= HISTOGRAM_ENGINES else ["op", "total"]
    return table_html(histogram, "No engines.", show=shown)


class NonconversionTab:
    """What TF-TRT's candidate test rejected, the candidates left out, TF-TRT's report text."""

    title = "Non-conversion report"

    def __init__(self, on_show: Callable[[str, str], None] | None = None) -> None:
        # A row leads to its nodes in the segment graph (`on_show(op, reason)`).
        self.html = ClickableRows()
        self.rows: dict[str, list[tuple[str, str]]] = {}  # table -> (op, reason) per row
        self.html.on_row(lambda table, row: on_show is not None
                         and row < len(self.rows.get(table, ()))
                         and on_show(*self.rows[table][row]))
        self.widget = self.html

    def update(self, view: ConversionView) -> None:
        self.rows = {table: list(zip(frame["op"], frame["reason"], strict=True))
                     for table, frame in (("rejected", view.rejected), ("left_out", view.left_out))
                     if len(frame)}
        self.html.value = (
            "<b>Rejected by TF-TRT's candidate test</b> "
            + "<span class='wb-note'>(click a row to see its nodes in the Segment graph)</span>"
            + table_html(view.rejected, "Every node was a candidate.", rows="rejected")
            + "<b>Candidates left outside engines</b> "
            + "<span class='wb-note'>(TF-TRT did not report these)</span>"
            + table_html(view.left_out, "Every candidate is in an engine.", rows="left_out")
            + "<details><summary>TF-TRT's report text</summary>"
            + pre_html(view.nonconversion_text) + "</details>"
        )


class ChartsTab:
    """The minimum_segment_size sweep with recommendations, engine sizes, blocking op types."""

    title = "Charts"

    def __init__(self, on_blocking: Callable[[], None], target: TargetGpu | None = None) -> None:
        self.figures: dict[str, Any] = {}
        self.sweep_out, self.sizes_out, self.blocking_out = (widgets.Output() for _ in range(3))
        self.blocking_button = widgets.Button(description="Find blocking op types",
                                              icon="search", layout=widgets.Layout(width="220px"))
        self.blocking_button.on_click(lambda _b: on_blocking())
        self._blocking: pd.DataFrame | None = None
        # The sweep's latency estimated for the app's target GPU, under the measured sweep.
        self.estimate = SweepEstimate(target, show_figure) if target is not None else None
        self.widget = widgets.VBox([self.sweep_out,
                                    *([self.estimate.widget] if self.estimate else []),
                                    self.sizes_out, self.blocking_button, self.blocking_out])

    def update(self, view: ConversionView) -> None:
        if self.estimate is not None:
            self.figures.pop("estimate sweep", None)
            self.figures.update(self.estimate.update(view))
        self.figures["sweep"] = charts.sweep_chart(view.sweep, view.recommendation)
        self.figures["engine_sizes"] = charts.engine_sizes_chart(view.result)
        show_figure(self.sweep_out, self.figures["sweep"])
        show_figure(self.sizes_out, self.figures["engine_sizes"])
        if view.blocking is not self._blocking:
            self._blocking = view.blocking
            self.figures.pop("blocking_ops", None)
            self.blocking_out.outputs = ()
            if view.blocking is not None:
                self.figures["blocking_ops"] = charts.blocking_ops_chart(view.blocking)
                show_figure(self.blocking_out, self.figures["blocking_ops"])


def outputs_html(table: pd.DataFrame) -> str:
    """The check's outputs: top-1 agreement in %, the reason column only when one failed."""
    table = table[CHECK_COLUMNS].rename(columns={"top1_agreement": "top1_agreement_pct"})
    table["top1_agreement_pct"] = table["top1_agreement_pct"] * 100
    reasons = table["reason"].fillna("").astype(str).str.strip().ne("").any()
    shown = [c for c in CHECK_ESSENTIALS if c != "reason" or reasons]
    return table_html(table, show=shown)


class ValidationTab:
    """'Validate and time' (the CLI's `check`): its options, verdict, outputs and latency."""

    title = "Validation"
    # What the tab shows before anything is measured on the open model.
    NOTHING_MEASURED = ("Nothing measured on this model yet: 'Validate and time' runs the "
                        "converted model and native TensorFlow on the same inputs, compares "
                        "their outputs and times both.")

    def __init__(self, on_check: Callable[[], None],
                 on_per_engine: Callable[[], None] | None = None) -> None:
        self.figures: dict[str, Any] = {}
        small = {"layout": widgets.Layout(width="200px")}
        self.batch_sizes = widgets.Text(value="1", description="batch sizes",
                                        layout=widgets.Layout(width="220px"))
        self.batches = widgets.BoundedIntText(value=2, min=1, max=100, description="batches",
                                              **small)
        # Empty: the engines' precision decides (FP32 1e-5, FP16 1e-2, INT8 0.1 on the mean).
        self.atol = widgets.Text(value="", placeholder="by precision", description="atol",
                                 **small)
        self.rtol = widgets.Text(value="", placeholder="by precision", description="rtol",
                                 **small)
        self.whole = widgets.Checkbox(value=False, description="whole model too", indent=False,
                                      layout=widgets.Layout(width="150px"))
        self.button = widgets.Button(description="Validate and time", icon="check",
                                     layout=widgets.Layout(width="200px"))
        self.button.on_click(lambda _b: on_check())
        self.stale, self.note, self.outputs = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self.note.add_class("wb-check")  # the check's verdict, once there is one
        self.outputs.value = note_html(self.NOTHING_MEASURED)
        self.out = widgets.Output()
        self._check: Any = None
        self.per_engine_button = widgets.Button(description="Per-engine accuracy",
                                                icon="sort-amount-desc",
                                                layout=widgets.Layout(width="200px"))
        self.per_engine_button.on_click(lambda _b: on_per_engine and on_per_engine())
        self.per_engine_note, self.per_engine_out = widgets.HTML(), widgets.Output()
        self.per_engine_stale = widgets.HTML()
        self._per_engine: Any = None
        options = widgets.HBox([self.batch_sizes, self.batches, self.atol, self.rtol,
                                self.whole, self.button, self.per_engine_button],
                               layout=widgets.Layout(flex_flow="row wrap"))
        # Accuracy first (the outputs, then each engine's share), latency last: the per-engine
        # answer shows under the buttons, not past the latency chart.
        self.widget = widgets.VBox([options, self.stale, self.note, self.outputs,
                                    self.per_engine_stale, self.per_engine_note,
                                    self.per_engine_out, self.out])

    def options(self) -> dict[str, Any]:
        """The check's arguments from the widgets; bad batch sizes are a WorkbenchError."""
        return {"batch_sizes": parse_batch_sizes(self.batch_sizes.value),
                "batches": self.batches.value, "atol": parse_tolerance(self.atol.value, "atol"),
                "rtol": parse_tolerance(self.rtol.value, "rtol"), "whole_model": self.whole.value}

    def update(self, view: ConversionView) -> None:
        self._show_per_engine(view)
        stale = view.check is not None and not view.check_is_current
        self.stale.value = note_html(
            "These figures were measured with other settings: press 'Validate and time' to "
            "measure the current ones.", error=True) if stale else ""
        if view.check is self._check:
            return
        check = self._check = view.check
        if check is None:  # another model: nothing measured on it yet
            self.note.value, self.outputs.value = "", note_html(self.NOTHING_MEASURED)
            self.figures.pop("latency", None)
            self.out.outputs = ()
            return
        lines = check.summary().splitlines()
        self.note.value = note_html(lines[0], error=not check.validation.passed) + "".join(
            note_html(line) for line in lines[1:]) + note_html(
            "Kept runs of these settings store these figures (Runs tab).")
        self.outputs.value = "<b>Outputs: converted vs native TF</b>" + outputs_html(
            check.validation.table())
        self.figures["latency"] = charts.latency_chart(check.latency)
        show_figure(self.out, self.figures["latency"])

    def _show_per_engine(self, view: ConversionView) -> None:
        """Engines ranked by the error each adds to the outputs, with measured remedies."""
        report = view.per_engine
        self.per_engine_stale.value = "" if report is None or view.engine_errors is not None \
            else note_html("This per-engine accuracy was measured with other settings.",
                           error=True)
        if report is self._per_engine:
            return
        self._per_engine = report
        if report is None:
            self.per_engine_note.value = ""
            self.figures.pop("per_engine", None)
            self.per_engine_out.outputs = ()
            return
        lines = str(report).splitlines()
        self.per_engine_note.value = note_html(
            lines[0], error=not report.model_passed) + pre_html("\n".join(lines[1:]))
        self.figures["per_engine"] = charts.per_engine_chart(report.table())
        show_figure(self.per_engine_out, self.figures["per_engine"])


class RunsTab:
    """Kept runs: keep the current one, compare them in a table and a chart. The runs are the
    store's, not the conversion's: `show()` redraws when the store changes."""

    title = "Runs"

    def __init__(self, store: ExperimentStore, on_keep: Callable[[str], None]) -> None:
        self.store = store
        self.figures: dict[str, Any] = {}
        self.name = widgets.Text(placeholder="run name (optional)")
        self.button = widgets.Button(description="Keep this run", icon="save",
                                     button_style="primary")
        self.button.on_click(lambda _b: on_keep(self.name.value.strip()))
        self.table, self.problems = widgets.HTML(), widgets.HTML()
        self.out = widgets.Output()
        self.widget = widgets.VBox([widgets.HBox([self.name, self.button]), self.problems,
                                    self.table, self.out])

    def update(self, view: ConversionView) -> None:
        """Nothing here depends on the conversion."""

    def show(self, model: str = "") -> None:
        """The runs kept of `model` (a name, as `controller.model_name` gives it; all runs
        without one), in a table and a chart; runs of other models are counted, not shown."""
        runs = self.store.table()
        self.problems.value = "".join(note_html(p, error=True) for p in self.store.problems)
        if model:
            runs["model"] = [model_name(m) for m in runs["model"]]
            others = int((runs["model"] != model).sum())
            runs = runs[runs["model"] == model].reset_index(drop=True)
            if others:
                self.problems.value += note_html(
                    f"{counted(others, 'run')} of other models kept in "
                    f"{self.store.root} (shown when their model is open).")
        runs["created"] = [str(c)[:16].replace("T", " ") for c in runs["created"]]
        self.table.value = table_html(runs, "No runs of this model kept yet: press 'Keep "
                                      "this run'.", show=RUN_ESSENTIALS)
        self.figures.pop("runs", None)
        self.out.outputs = ()
        if not runs.empty:
            self.figures["runs"] = charts.runs_chart(runs)
            show_figure(self.out, self.figures["runs"])


class ProfileTab:
    """Per-layer timings of native TF and of the engines, side by side by TF node."""

    title = "Profiling"
    # What the tab shows before the open model is profiled.
    NOTHING_MEASURED = ("Nothing profiled on this model yet: 'Profile native TF and engines' "
                        "times every layer of native TensorFlow and of the engines on one "
                        "random batch, side by side by TF node.")

    def __init__(self, on_profile: Callable[[], None], target: TargetGpu | None = None) -> None:
        self.figures: dict[str, Any] = {}
        self.button = widgets.Button(description="Profile native TF and engines",
                                     icon="clock-o", layout=widgets.Layout(width="260px"))
        self.button.on_click(lambda _b: on_profile())
        self.note, self.out = widgets.HTML(note_html(self.NOTHING_MEASURED)), widgets.Output()
        self.table: pd.DataFrame | None = None
        # The engines estimated for the app's target GPU; trtexec's layers beside estimates.
        self.estimate = EngineEstimate(target, show_figure) if target is not None else None
        self.widget = widgets.VBox([self.button, self.note, self.out,
                                    *([self.estimate.widget] if self.estimate else [])])

    def update(self, view: ConversionView) -> None:
        if self.estimate is not None:
            self.figures = {**{k: v for k, v in self.figures.items() if "estimate" not in k},
                            **self.estimate.update(view)}
        if view.profile is self.table:
            return
        table = self.table = view.profile
        if table is None:  # another model: not profiled yet
            self.note.value = note_html(self.NOTHING_MEASURED)
            self.figures = {k: v for k, v in self.figures.items() if "estimate" in k}
            self.out.outputs = ()
            return
        runs = table.groupby(["run", "device"])["avg_ms"].sum()
        lines = [f"{run} on {device}: {ms:.1f} ms summed over layers"
                 for (run, device), ms in runs.items()]
        skipped = table.attrs.get("skipped", [])
        self.note.value = "".join(note_html(line) for line in lines + [
            f"engine not profiled: {s}" for s in skipped])
        engine_run = next((r for r in table["run"].unique() if r != "native TF"), None)
        figures = profile_figures(table, engine_run)
        if engine_run is not None:
            figures["native TF vs engines"] = native_vs_engine_chart(table, "native TF",
                                                                     engine_run)
        self.figures = {**{k: v for k, v in self.figures.items() if "estimate" in k},
                        **{f"profile: {k}": v for k, v in figures.items()}}
        self.out.outputs = ()
        for figure in figures.values():
            append_figure(self.out, figure)


def append_figure(output: widgets.Output, figure: Any) -> None:
    """Adds a plotly figure to `output`.

    Setting the widget's outputs (not `with output: display(...)`) works from the background
    threads that finish long steps: the context manager only captures the kernel's thread.
    Outside a kernel (scripts, benchmarks) there is nothing to show. Plotly's own MIME bundle:
    IPython's formatter would call the figure's `_ipython_display_`, which displays into
    whatever cell ran last instead.
    """
    if getattr(get_ipython(), "kernel", None) is not None:
        output.outputs += ({"output_type": "display_data", "metadata": {},
                            "data": figure._repr_mimebundle_()},)


def show_figure(output: widgets.Output, figure: Any) -> None:
    """Replaces what `output` shows with `figure`."""
    output.outputs = ()
    append_figure(output, figure)
