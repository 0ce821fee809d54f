"""The notebook workbench: TF-TRT's knobs as widgets, the conversion's results as tabs.

Moving a control reconverts at once (the clustering is cached, so a threshold change costs a
millisecond). Loading a model and other long steps run in the background with a progress bar and
a Cancel button. Everything shown is also reachable from Python: `app.result`, `app.report`,
`app.sweep`, `app.figures`, `app.svg`, `app.store`.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd
from IPython import get_ipython

from workbench.checks.conversion_check import (
    ConversionCheck,
    conversion_check_steps,
    parse_batch_sizes,
)
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import recommend_minimum_segment_size
from workbench.conversion.report import ConversionReport, nonconversion_report
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.conversion.summary import summary_lines
from workbench.conversion.whatif import blocking_op_types
from workbench.diagnosis import OK, Diagnosis, doctor, footer
from workbench.errors import WorkbenchError
from workbench.profiling.engines import native_and_engines
from workbench.profiling.tensorflow import random_inputs
from workbench.tf_compat import graph_origin
from workbench.ui.controls import Controls
from workbench.ui.store import ExperimentStore, Run
from workbench.ui.tables import STYLE, note_html, pre_html, table_html
from workbench.ui.tasks import Progress, TaskRunner
from workbench.ui.tune_tab import TuneTab
from workbench.viz import charts, graphs
from workbench.viz.profile_charts import native_vs_engine_chart, profile_figures

TAB_TITLES = ("Summary", "Non-conversion report", "Segment graph", "Charts", "Validation",
              "Runs", "Profiling", TuneTab.title)
GRAPH_VIEWS = ("Converted", "Full", "One engine")


class Workbench:
    """The TF-TRT workbench for one model (SavedModel dir, Keras model, `.keras` or `.pb`)."""

    def __init__(
        self,
        model: Any,
        params: ConversionParams | None = None,
        store: ExperimentStore | str | Path = "workbench_runs",
        signature_key: str | None = None,
        tags: Sequence[str] | None = None,
        output_node_names: Sequence[str] | None = None,
        background: bool = True,
    ):
        self.model = model
        self.store = store if isinstance(store, ExperimentStore) else ExperimentStore(store)
        self.session: ConversionSession | None = None
        self.result: ConversionResult | None = None
        self.sweep: list[ConversionResult] = []
        self.figures: dict[str, Any] = {}
        self.svg = ""
        self.error: str | None = None
        self.timings: dict[str, float] = {}
        self._load_steps = ""  # the model's preparation steps and times, once loaded
        self.check: ConversionCheck | None = None
        self.machine: Diagnosis | None = None  # workbench.doctor()'s facts, shown in the footer
        self._open_args = (signature_key, tags, output_node_names)
        self._background = background
        self.controls = Controls(params or ConversionParams())
        self._build_widgets()
        self._runner = TaskRunner(self._on_progress, self._on_done, self._on_error,
                                  self._on_cancelled)
        self.controls.observe(self.refresh)
        self._start(self._load, self._loaded, "Loading")

    # --- public ---------------------------------------------------------------------------

    @property
    def params(self) -> ConversionParams:
        return self.controls.params()

    @property
    def report(self) -> ConversionReport:
        if self.result is None:
            raise WorkbenchError(self.error or "the model is still loading")
        return ConversionReport(self.result)

    def wait(self, timeout: float | None = None) -> Workbench:
        """Blocks until the current background step (loading, analysis, drawing) is done."""
        self._runner.wait(timeout)
        return self

    def keep_run(self, name: str | None = None) -> Run:
        """Saves the current conversion as a run in the experiment store, with the
        validation and latency figures when the last check was of these same settings."""
        if self.result is None:
            raise WorkbenchError("nothing to keep: the model has not been converted")
        run = Run.from_result(self.result, self.params, name or None)
        if self.check is not None and self.check.params == self.params.validated().as_dict():
            run.metrics = self.check.metrics()
        run = self.store.add(run)
        self._show_runs()
        return run

    def refresh(self) -> None:
        """Reconverts with the controls' values and updates every view."""
        if not self._runner.busy:
            self._refresh()

    def _refresh(self) -> None:
        if self.session is None:
            return
        start = time.perf_counter()
        try:
            params = self.params
            self.result = self.session.convert(params)
            self.sweep = self.session.sweep(
                params, range(1, self.controls.minimum_segment_size.max + 1))
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        converted = time.perf_counter()
        self._show_results()
        self.tune_tab.update(self)
        self._show_check_staleness()
        shown = time.perf_counter()
        self._show_graph()
        self.timings = {"convert_ms": (converted - start) * 1000,
                        "summary_and_charts_ms": (shown - start) * 1000,
                        "graph_ms": (time.perf_counter() - shown) * 1000}
        self._set_status(f"ready ({self._load_steps})" if self._load_steps else "ready")
        self._load_steps = ""  # the loading's steps are shown once, when it ends

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # --- layout ---------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        self.status = widgets.HTML(note_html("starting"))
        self.status.add_class("wb-status")
        self.progress = widgets.FloatProgress(value=0, min=0, max=1,
                                              layout=widgets.Layout(width="200px"))
        self.cancel_button = widgets.Button(description="Cancel", icon="stop",
                                            layout=widgets.Layout(width="90px"))
        self.cancel_button.on_click(lambda _b: self._runner.cancel())
        self.headline = widgets.HTML()
        self.summary = widgets.HTML()
        self.summary.add_class("wb-summary")
        self.nonconversion = widgets.HTML()
        self.graph_view = widgets.ToggleButtons(options=GRAPH_VIEWS, value="Converted",
                                                style={"button_width": "105px"})
        self.engine_choice = widgets.Dropdown(description="engine", options=[])
        self.graph = widgets.HTML()
        self.graph.add_class("wb-graph")
        self.graph_view.observe(lambda _c: self._show_graph(), names="value")
        self.engine_choice.observe(self._engine_chosen, names="value")
        self.sweep_out, self.sizes_out, self.blocking_out = (widgets.Output() for _ in range(3))
        self.blocking_button = widgets.Button(description="Find blocking op types",
                                              icon="search", layout=widgets.Layout(width="220px"))
        self.blocking_button.on_click(lambda _b: self.analyse_blocking_ops())
        self.run_name = widgets.Text(placeholder="run name (optional)")
        self.keep_button = widgets.Button(description="Keep this run", icon="save",
                                          button_style="primary")
        self.keep_button.on_click(lambda _b: self._keep_clicked())
        self.runs_table, self.runs_problems = widgets.HTML(), widgets.HTML()
        self.runs_out = widgets.Output()
        self.profile_button = widgets.Button(
            description="Profile native TF and engines", icon="clock-o",
            layout=widgets.Layout(width="260px"))
        self.profile_button.on_click(lambda _b: self.profile())
        self.profile_note, self.profile_out = widgets.HTML(), widgets.Output()
        self.check_batch_sizes = widgets.Text(value="1", description="batch sizes",
                                              layout=widgets.Layout(width="220px"))
        self.check_batches = widgets.BoundedIntText(value=2, min=1, max=100,
                                                    description="batches",
                                                    layout=widgets.Layout(width="160px"))
        self.check_atol = widgets.FloatText(value=1e-5, description="atol",
                                            layout=widgets.Layout(width="160px"))
        self.check_rtol = widgets.FloatText(value=1e-5, description="rtol",
                                            layout=widgets.Layout(width="160px"))
        self.check_whole = widgets.Checkbox(value=False, description="whole model too",
                                            indent=False, layout=widgets.Layout(width="150px"))
        self.check_button = widgets.Button(
            description="Validate and time", icon="check", layout=widgets.Layout(width="200px"))
        self.check_button.on_click(lambda _b: self._check_clicked())
        self.check_stale, self.check_note = widgets.HTML(), widgets.HTML()
        self.check_note.add_class("wb-check")
        self.check_outputs = widgets.HTML()
        self.check_out = widgets.Output()
        self.profile_table = None
        self.tune_tab = TuneTab(self.controls.set_params, self.store.root, self._background)
        self.tabs = widgets.Tab(children=[
            self.summary,
            self.nonconversion,
            widgets.VBox([widgets.HBox([self.graph_view, self.engine_choice]), self.graph]),
            widgets.VBox([self.sweep_out, self.sizes_out, self.blocking_button,
                          self.blocking_out]),
            widgets.VBox([widgets.HBox([self.check_batch_sizes, self.check_batches,
                                        self.check_atol, self.check_rtol, self.check_whole,
                                        self.check_button],
                                       layout=widgets.Layout(flex_flow="row wrap")),
                          self.check_stale, self.check_note, self.check_outputs,
                          self.check_out]),
            widgets.VBox([widgets.HBox([self.run_name, self.keep_button]), self.runs_problems,
                          self.runs_table, self.runs_out]),
            widgets.VBox([self.profile_button, self.profile_note, self.profile_out]),
            self.tune_tab.widget,
        ], titles=TAB_TITLES)
        bar = widgets.HBox([self.status, self.progress, self.cancel_button],
                           layout=widgets.Layout(align_items="center"))
        self.footer = widgets.HTML()
        main = widgets.VBox([widgets.HTML(STYLE), bar, self.headline, self.tabs, self.footer],
                            layout=widgets.Layout(flex="1 1 auto", min_width="0"))
        self.widget = widgets.HBox([self.controls.box(), main])
        self.widget.add_class("wb-app")

    # --- background steps -----------------------------------------------------------------

    def _start(self, body: Any, done: Any, label: str) -> None:
        self._done_handler: Any = done
        self.controls.set_disabled(True)
        self.progress.layout.visibility = self.cancel_button.layout.visibility = "visible"
        self._set_status(f"{label}...")
        self._runner.start(body, background=self._background)

    def _load(self) -> Generator[Progress, None, ConversionSession]:
        yield 0.01, "Checking this machine (TensorFlow, engine backends, Graphviz)"
        self._show_machine(doctor(smoke=False))  # imports TensorFlow, as loading would
        yield 0.05, f"Loading {self.model if isinstance(self.model, (str, Path)) else 'model'}"
        session = ConversionSession.open(self.model, *self._open_args)
        yield 0.25, ("Preparing the graph as TF-TRT did (reading weights, freezing, Grappler, "
                     "shapes), or reading it from the cache")
        session.prepared(self.controls.precision.value)
        yield 0.8, f"Clustering ({session.preparation_steps()})"
        session.segmentation(self.params)
        self._load_steps = session.preparation_steps()
        yield 0.95, f"Showing the results ({self._load_steps})"
        return session

    def _loaded(self, session: ConversionSession) -> None:
        self.session = session
        self.controls.set_op_types(n.op for n in session.prepared().graph.real_nodes)
        segments = session.segmentation(self.params).segments
        self.controls.set_threshold_range(max((s.effective_size for s in segments), default=0))
        self._show_runs()

    def analyse_blocking_ops(self) -> None:
        """What-if: nodes each rejected op type keeps out of engines (background step)."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.1, "Re-segmenting once per rejected op type"
            return blocking_op_types(session, params)

        self._start(body, self._show_blocking, "Analysing")

    def profile(self, runs: int = 5) -> None:
        """Per-layer timings of native TF and of the engines on the active backend, for one
        random batch (background step)."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.1, "Profiling native TF and building and profiling each engine"
            return native_and_engines(session, params, random_inputs(session, 1), runs=runs)

        self._start(body, self._show_profile, "Profiling")

    def validate(self, batch_sizes: Sequence[int] = (1,), batches: int = 2, **options: Any
                 ) -> None:
        """Builds the current conversion's engines, compares its outputs with native TF on
        generated batches and times both per batch size (background step; `options` go to
        `conversion_check_steps`: atol, rtol, iterations, ...). `keep_run` then stores the
        figures with the run."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            return (yield from conversion_check_steps(
                session, params, batch_sizes=batch_sizes, batches=batches, **options))

        self._start(body, self._show_check, "Validating")

    def _check_clicked(self) -> None:
        try:
            sizes = parse_batch_sizes(self.check_batch_sizes.value)
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        self.validate(sizes, self.check_batches.value, atol=self.check_atol.value,
                      rtol=self.check_rtol.value, whole_model=self.check_whole.value)

    def _show_check(self, check: ConversionCheck) -> None:
        self.check = check
        validation = check.validation
        lines = check.summary().splitlines()
        self.check_note.value = note_html(lines[0], error=not validation.passed) + "".join(
            note_html(line) for line in lines[1:]) + note_html(
            "Kept runs of these settings store these figures (Runs tab).")
        columns = ["name", "passed", "shape", "max_abs", "mean_abs", "max_rel", "mean_rel",
                   "mismatches", "elements", "top1_agreement", "reason"]
        table = validation.table()[columns]
        errors = table.select_dtypes("float").columns  # 3 significant digits fit the tab
        table[errors] = table[errors].map(lambda v: f"{v:.3g}")
        self.check_outputs.value = "<b>Outputs: converted vs native TF</b>" + table_html(table)
        self.figures["latency"] = charts.latency_chart(check.latency)
        _show_figure(self.check_out, self.figures["latency"])

    def _show_check_staleness(self) -> None:
        stale = self.check is not None and \
            self.check.params != self.params.validated().as_dict()
        self.check_stale.value = note_html(
            "These figures were measured with other settings: press 'Validate and time' to "
            "measure the current ones.", error=True) if stale else ""

    def _show_profile(self, table: pd.DataFrame) -> None:
        self.profile_table = table
        runs = table.groupby(["run", "device"])["avg_ms"].sum()
        lines = [f"{run} on {device}: {ms:.1f} ms summed over layers"
                 for (run, device), ms in runs.items()]
        skipped = table.attrs.get("skipped", [])
        self.profile_note.value = "".join(note_html(line) for line in lines + [
            f"engine not profiled: {s}" for s in skipped])
        engine_run = next((r for r in table["run"].unique() if r != "native TF"), None)
        figures = profile_figures(table, engine_run)
        if engine_run is not None:
            figures["native TF vs engines"] = native_vs_engine_chart(table, "native TF",
                                                                     engine_run)
        self.figures.update({f"profile: {k}": v for k, v in figures.items()})
        self.profile_out.outputs = ()
        for figure in figures.values():
            _append_figure(self.profile_out, figure)

    def _on_progress(self, fraction: float, message: str) -> None:
        self.progress.value = fraction
        self._set_status(message)

    def _on_done(self, value: Any) -> None:
        self._done_handler(value)
        self._finish()
        self._refresh()

    def _on_error(self, exc: BaseException) -> None:
        self._finish()
        message = str(exc) if isinstance(exc, WorkbenchError) else \
            f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        self.error = message
        self._set_status(message, error=True)
        if self.session is None:  # loading failed: say so where the results would be
            for view in (self.summary, self.nonconversion, self.graph):
                view.value = note_html(f"Could not load the model: {message}", error=True)
        else:
            self.controls.set_disabled(False)

    def _on_cancelled(self) -> None:
        self._finish()
        self._set_status("cancelled" + ("" if self.session else ": no model loaded"))
        if self.session is not None:
            self.controls.set_disabled(False)

    def _finish(self) -> None:
        self.progress.layout.visibility = self.cancel_button.layout.visibility = "hidden"
        self.controls.set_disabled(False)
        if self.session is None:
            self.controls.set_disabled(True)

    def _set_status(self, text: str, error: bool = False) -> None:
        self.status.value = note_html(text, error=error)

    # --- views ----------------------------------------------------------------------------

    def _show_machine(self, machine: Diagnosis) -> None:
        """The footer: what this kernel runs on (the full doctor report on hover)."""
        self.machine = machine
        dot = machine.get("Graphviz dot")
        trouble = not machine.can_run or (dot is not None and dot.state != OK)
        self.footer.value = note_html(footer(machine), error=trouble, title=str(machine))

    def _show_results(self) -> None:
        result, report = self.result, self.report
        assert result is not None
        self.headline.value = _headline(result)
        summary = "\n".join(summary_lines(result))
        self.summary.value = (
            "<b>Engines</b>"
            + table_html(report.engines.drop(columns=["ops"], errors="ignore"))
            + "<b>Op histogram per engine</b>"
            + table_html(_op_histogram(result), "No engines.")
            + "<b>As TF-TRT's <code>summary()</code> prints it</b>" + pre_html(summary)
        )
        tftrt_report = nonconversion_report(result.nonconversion, detailed=True) \
            if result.nonconversion else "minimum_segment_size is -1: nothing was segmented."
        self.nonconversion.value = (
            "<b>Rejected by TF-TRT's candidate test</b>"
            + table_html(_reasons_table(report), "Every node was a candidate.")
            + "<b>Candidates left outside engines</b> "
            + "<span class='wb-note'>(TF-TRT did not report these)</span>"
            + table_html(_left_out_table(report), "None.")
            + "<details><summary>TF-TRT's report text</summary>"
            + pre_html(tftrt_report) + "</details>"
        )
        names = tuple(e.name for e in result.engines)
        if names != tuple(self.engine_choice.options):
            self.engine_choice.options = names
        recommendation = recommend_minimum_segment_size(
            self.sweep, self.controls.minimum_segment_size.value)
        self.figures["sweep"] = charts.sweep_chart(self.sweep, recommendation)
        self.figures["engine_sizes"] = charts.engine_sizes_chart(result)
        _show_figure(self.sweep_out, self.figures["sweep"])
        _show_figure(self.sizes_out, self.figures["engine_sizes"])

    def _show_graph(self) -> None:
        if self.session is None or self.result is None:
            return
        graph = self.session.prepared(self.params.precision_mode).graph
        view = self.graph_view.value
        if view == "One engine" and self.engine_choice.value:
            digraph = graphs.engine_graph(graph, self.result, self.engine_choice.value)
        elif view == "Full":
            digraph = graphs.full_graph(graph, self.result)
        else:
            digraph = graphs.converted_graph(graph, self.result)
        try:
            self.svg = graphs.to_svg(digraph)
        except WorkbenchError as exc:
            self.graph.value = note_html(str(exc), error=True)
            return
        self.graph.value = f'<div style="overflow:auto; max-height:800px">{self.svg}</div>'

    def _engine_chosen(self, _change: Any) -> None:
        if self.graph_view.value == "One engine":
            self._show_graph()

    def _show_blocking(self, frame: Any) -> None:
        self.figures["blocking_ops"] = charts.blocking_ops_chart(frame)
        _show_figure(self.blocking_out, self.figures["blocking_ops"])

    def _keep_clicked(self) -> None:
        try:
            run = self.keep_run(self.run_name.value.strip())
        except (WorkbenchError, OSError) as exc:
            self._set_status(f"could not keep the run: {exc}", error=True)
            return
        self._set_status(f"kept run {run.name}")

    def _show_runs(self) -> None:
        runs = self.store.table()
        self.runs_problems.value = "".join(note_html(p, error=True) for p in self.store.problems)
        self.runs_table.value = table_html(runs, "No runs kept yet: press 'Keep this run'.")
        if not runs.empty:
            self.figures["runs"] = charts.runs_chart(runs)
            _show_figure(self.runs_out, self.figures["runs"])


def _headline(result: ConversionResult) -> str:
    engines = len(result.engines)
    return (
        f'<div class="wb-headline"><b>{engines}</b> TensorRT engine{"s" * (engines != 1)} · '
        f"<b>{result.percent_converted:.2f}%</b> of nodes converted "
        f"[{result.converted_nodes}/{result.total_nodes}] · "
        f"<b>{len(result.nonconversion)}</b> op types rejected · "
        f'<span title="{escape(graph_origin(result.tensorflow_version))}">'
        f"TensorFlow {escape(result.tensorflow_version or '?')}</span></div>"
    )


def _op_histogram(result: ConversionResult) -> pd.DataFrame:
    """Op type x engine node counts (the native segment's ops, as summary() lists them)."""
    counts = pd.DataFrame({e.name: e.native_ops for e in result.engines}).fillna(0)
    if counts.empty:
        return counts
    counts = counts.astype(int).sort_index()
    counts.insert(0, "op", counts.index)
    counts["total"] = counts[[e.name for e in result.engines]].sum(axis=1)
    return counts


def _reasons_table(report: ConversionReport) -> Any:
    frame = report.nonconversion
    return frame[["op", "count", "reason"]] if not frame.empty else frame


def _left_out_table(report: ConversionReport) -> Any:
    frame = report.unconverted
    if frame.empty:
        return frame
    left_out = frame[~frame["in_tftrt_report"]]
    return left_out[["name", "op", "reason"]]


def _append_figure(output: widgets.Output, figure: Any) -> None:
    # Setting the widget's outputs (not `with output: display(...)`) works from the background
    # threads that finish long steps: the context manager only captures the kernel's thread.
    # Outside a kernel (scripts, benchmarks) there is nothing to show.
    # Plotly's own MIME bundle: IPython's formatter would call the figure's
    # `_ipython_display_`, which displays into whatever cell ran last instead.
    if getattr(get_ipython(), "kernel", None) is not None:
        output.outputs += ({"output_type": "display_data", "metadata": {},
                            "data": figure._repr_mimebundle_()},)


def _show_figure(output: widgets.Output, figure: Any) -> None:
    output.outputs = ()
    _append_figure(output, figure)
