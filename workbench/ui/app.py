"""The notebook workbench: TF-TRT's knobs as widgets, the conversion's results as tabs.

`Workbench` coordinates: the controls, the background steps (loading, checks, profiling, the
what-if), and one `ConversionView` built per change that every tab renders (`tabs.py`; the HTML
report renders the same view). Moving a control reconverts at once (the clustering is cached, so
a threshold change costs milliseconds). Everything shown is also reachable from Python:
`app.result`, `app.report`, `app.view`, `app.sweep`, `app.figures`, `app.svg`, `app.store`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import partial
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pandas as pd

from workbench.checks.conversion_check import ConversionCheck, conversion_check_steps
from workbench.checks.export import export
from workbench.checks.per_engine import PerEngineAccuracy, per_engine_accuracy
from workbench.conversion.params import ConversionParams
from workbench.conversion.report import ConversionReport
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.conversion.whatif import blocking_op_types
from workbench.diagnosis import OK, Diagnosis, doctor, footer
from workbench.errors import WorkbenchError
from workbench.profiling.engines import native_and_engines
from workbench.profiling.tensorflow import random_inputs
from workbench.ui.controls import CONTROLS_WIDTH, Controls
from workbench.ui.export_tab import ExportTab
from workbench.ui.graph_tab import GraphTab
from workbench.ui.store import ExperimentStore, Run
from workbench.ui.tables import STYLE, note_html
from workbench.ui.tabs import (
    ChartsTab,
    NonconversionTab,
    ProfileTab,
    RunsTab,
    SummaryTab,
    Tab,
    ValidationTab,
    headline_html,
)
from workbench.ui.tasks import Progress, TaskRunner
from workbench.ui.tune_tab import TuneTab
from workbench.viz.view import ConversionView, build_view, largest_segment, sweep_limit


class Workbench:
    """The TF-TRT workbench for one model (SavedModel dir, Keras model, `.keras` or `.pb`).

    `models` fills the model picker above the controls: name -> a model path, or a function
    that returns one (called when picked, e.g. `functools.partial(sample_models.build, name)`).
    `model` may be one of those names. The picker also opens any path typed into it.
    """

    def __init__(
        self,
        model: Any,
        params: ConversionParams | None = None,
        store: ExperimentStore | str | Path = "workbench_runs",
        signature_key: str | None = None,
        tags: Sequence[str] | None = None,
        output_node_names: Sequence[str] | None = None,
        background: bool = True,
        models: Mapping[str, Any] | None = None,
    ):
        self.models = dict(models or {})
        self.model = model
        self.store = store if isinstance(store, ExperimentStore) else ExperimentStore(store)
        self.session: ConversionSession | None = None
        self.view: ConversionView | None = None  # what every tab shows, built once per change
        self.error: str | None = None
        self.timings: dict[str, float] = {}
        self._load_steps = ""  # the model's preparation steps and times, once loaded
        self.check: ConversionCheck | None = None  # the latest measurements, of any settings
        self.profile_table: pd.DataFrame | None = None
        self.blocking: pd.DataFrame | None = None
        # TensorRT's verdicts (engine -> JSON object) per parameters they were made for.
        self.tensorrt: dict[ConversionParams, dict[str, dict]] = {}
        self.per_engine_report: PerEngineAccuracy | None = None  # the latest, any settings
        self.machine: Diagnosis | None = None  # workbench.doctor()'s facts, shown in the footer
        self._open_args = (signature_key, tags, output_node_names)
        self._background = background
        self.controls = Controls(params or ConversionParams())
        self.summary_tab = SummaryTab(on_tensorrt=self.check_tensorrt,
                                      on_engine=self.show_engine_in_graph)
        self.nonconversion_tab = NonconversionTab(on_show=self.show_in_graph)
        self.graph_tab = GraphTab()
        self.charts_tab = ChartsTab(on_blocking=self.analyse_blocking_ops)
        self.validation_tab = ValidationTab(on_check=self._check_clicked,
                                            on_per_engine=self._per_engine_clicked)
        self.runs_tab = RunsTab(self.store, on_keep=self._keep_clicked)
        self.profile_tab = ProfileTab(on_profile=self.profile)
        self.tune_tab = TuneTab(self.set_params, self.store.root, background)
        self.export_tab = ExportTab(on_export=self._export_clicked)
        self.tab_list: list[Tab] = [  # registering a tab: one line here, or add_tab()
            self.summary_tab, self.nonconversion_tab, self.graph_tab, self.charts_tab,
            self.validation_tab, self.runs_tab, self.profile_tab, self.tune_tab,
            self.export_tab,
        ]
        self._build_widgets()
        self.picker.value = model if isinstance(model, str) else ""
        self._runner = TaskRunner(self._on_progress, self._on_done, self._on_error,
                                  self._on_cancelled)
        # The verdicts have a runner of their own that leaves the controls live.
        self._verdicts = TaskRunner(self._verdict_progress, self._verdicts_done,
                                    self._verdicts_failed, lambda: None)
        self.controls.observe(self.refresh)
        self._start(self._load, self._loaded, "Loading")

    # --- public ---------------------------------------------------------------------------

    def show_in_graph(self, op: str, reason: str) -> None:
        """A non-conversion report row's nodes, opened and highlighted in the Segment graph."""
        self.graph_tab.show_row(op, reason)
        self.tabs.selected_index = self.tab_list.index(self.graph_tab)

    def show_engine_in_graph(self, name: str) -> None:
        """An engine of the engine table, opened and highlighted in the Segment graph."""
        self.graph_tab.show_engine(name)
        self.tabs.selected_index = self.tab_list.index(self.graph_tab)

    @property
    def params(self) -> ConversionParams:
        return self.controls.params()

    @property
    def result(self) -> ConversionResult | None:
        return self.view.result if self.view else None

    @property
    def report(self) -> ConversionReport:
        if self.view is None:
            raise WorkbenchError(self.error or "the model is still loading")
        return self.view.report

    @property
    def sweep(self) -> list[ConversionResult]:
        """One result per minimum_segment_size, up to one past the largest segment."""
        return list(self.view.sweep) if self.view else []

    @property
    def figures(self) -> dict[str, Any]:
        """Every plotly figure the tabs show, by name."""
        return {k: v for tab in self.tab_list for k, v in getattr(tab, "figures", {}).items()}

    @property
    def per_engine(self) -> pd.DataFrame:
        """The latest per-engine accuracy (`run_per_engine`), one row per engine, worst
        first; empty before one ran."""
        report = self.per_engine_report
        return report.table() if report is not None else pd.DataFrame()

    @property
    def svg(self) -> str:
        """The segment graph tab's drawing."""
        return self.graph_tab.svg

    def wait(self, timeout: float | None = None) -> Workbench:
        """Blocks until the current background step (loading, analysis, drawing) and the
        TensorRT verdicts are done."""
        self._runner.wait(timeout)
        self._verdicts.wait(timeout)
        return self

    def keep_run(self, name: str | None = None) -> Run:
        """Saves the current conversion as a run in the experiment store, with the
        validation and latency figures when the last check was of these same settings."""
        if self.view is None:
            raise WorkbenchError("nothing to keep: the model has not been converted")
        run = Run.from_result(self.view.result, self.params, name or None)
        if self.check is not None and self.check.params == self.params.validated():
            run.metrics = self.check.metrics()
        run = self.store.add(run)
        self.runs_tab.show()
        return run

    def set_params(self, params: ConversionParams | dict[str, Any]) -> None:
        """Sets the controls (a dict may name only some fields) and reconverts once."""
        self.controls.set_params(params)

    def add_tab(self, tab: Tab) -> None:
        """Adds a tab after the built-in ones (anything with `title`, `widget`, `update`)."""
        self.tab_list.append(tab)
        self.tabs.children = [*self.tabs.children, tab.widget]
        self.tabs.titles = [*self.tabs.titles, tab.title]
        if self.view is not None:
            tab.update(self.view)

    def open(self, model: Any) -> None:
        """Opens another model (a path, a Keras model, or a name of `models`) in this app: the
        measurements of the previous one are dropped, the controls kept."""
        if self._runner.busy:
            self._set_status("busy: cancel the running step before opening another model",
                             error=True)
            return
        self.model, self.session, self.view, self.error = model, None, None, None
        self.check = self.profile_table = self.blocking = self.per_engine_report = None
        self.tensorrt = {}
        self.summary_tab.tensorrt_progress("")
        self._start(self._load, self._loaded, "Loading")

    def refresh(self) -> None:
        """Reconverts with the controls' values and updates every tab."""
        if not self._runner.busy:
            self._refresh()

    def _refresh(self) -> None:
        if self.session is None:
            return
        start = time.perf_counter()
        try:
            params = self.params.validated()
            self.view = build_view(self.session, params, self.check, self.profile_table,
                                   self.blocking, self.tensorrt.get(params),
                                   per_engine=self.per_engine_report)
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        built = time.perf_counter()
        self.headline.value = headline_html(self.view.headline)
        self.knob_notes.value = knob_notes_html(self.view.knob_notes)
        tab_ms = {}
        for tab in self.tab_list:  # the graph last: Graphviz is the slow one
            if tab is not self.graph_tab:
                tab_ms[tab.title] = _timed(tab.update, self.view)
        shown = time.perf_counter()
        graph_ms = _timed(self.graph_tab.update, self.view)
        self.timings = {"view_ms": (built - start) * 1000,
                        "summary_and_charts_ms": (shown - start) * 1000,
                        "graph_ms": graph_ms,
                        **{f"tab {title}_ms": ms for title, ms in tab_ms.items()}}
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
                                            layout=widgets.Layout(width="auto", flex="0 0 auto"))
        self.cancel_button.on_click(lambda _b: self._runner.cancel())
        self.headline = widgets.HTML()
        self.knob_notes = widgets.HTML()
        self.picker = widgets.Combobox(
            options=list(self.models), ensure_option=False,
            placeholder="a sample model's name or your model's path",
            layout=widgets.Layout(width="236px"))
        self.open_button = widgets.Button(description="Open", icon="folder-open",
                                          layout=widgets.Layout(width="80px"))
        self.open_button.on_click(lambda _b: self._open_picked())
        self.picker.on_submit(lambda _w: self._open_picked())
        self.tabs = widgets.Tab(children=[tab.widget for tab in self.tab_list],
                                titles=[tab.title for tab in self.tab_list])
        bar = widgets.HBox([self.status, self.progress, self.cancel_button],
                           layout=widgets.Layout(align_items="center"))
        self.footer = widgets.HTML()
        main = widgets.VBox([widgets.HTML(STYLE), bar, self.headline, self.knob_notes, self.tabs,
                             self.footer],
                            layout=widgets.Layout(flex="1 1 auto", min_width="0"))
        picker = widgets.VBox([widgets.HTML("<b>Model</b>"),
                               widgets.HBox([self.picker, self.open_button])])
        left = widgets.VBox([picker, self.controls.box()],
                            layout=widgets.Layout(flex=f"0 0 {CONTROLS_WIDTH}"))
        self.widget = widgets.HBox([left, main])
        self.widget.add_class("wb-app")

    # --- background steps -----------------------------------------------------------------

    def _start(self, body: Any, done: Any, label: str) -> None:
        self._done_handler: Any = done
        self.controls.set_disabled(True)
        self.progress.layout.visibility = self.cancel_button.layout.visibility = "visible"
        self._set_status(f"{label}...")
        self._runner.start(body, background=self._background)

    def _open_picked(self) -> None:
        text = self.picker.value.strip()
        if text:
            self.open(text)

    def _load(self) -> Generator[Progress, None, ConversionSession]:
        yield 0.01, "Checking this machine (TensorFlow, engine backends, Graphviz)"
        self._show_machine(doctor(smoke=False))  # imports TensorFlow, as loading would
        if isinstance(self.model, str) and self.model in self.models:
            yield 0.03, f"Building or reusing {self.model}"
            self.model = _resolved(self.models[self.model])
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
        self.controls.set_threshold_range(sweep_limit(largest_segment(session, self.params)))
        self.runs_tab.show()

    def analyse_blocking_ops(self) -> None:
        """What-if: nodes each rejected op type keeps out of engines (background step)."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.1, "Re-segmenting once per rejected op type"
            return blocking_op_types(session, params)

        self._start(body, self._measured("blocking"), "Analysing")

    def profile(self, runs: int = 5) -> None:
        """Per-layer timings of native TF and of the engines on the active backend, for one
        random batch (background step)."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.1, "Profiling native TF and building and profiling each engine"
            return native_and_engines(session, params, random_inputs(session, 1), runs=runs)

        self._start(body, self._measured("profile_table"), "Profiling")

    def run_check(self, batch_sizes: Sequence[int] = (1,), batches: int = 2, **options: Any
                  ) -> None:
        """The CLI's `check` (the Validation tab's button): builds the current conversion's
        engines, compares its outputs with native TF on generated batches and times both per
        batch size (background step; `options` go to `conversion_check_steps`: atol, rtol,
        iterations, ...). `keep_run` then stores the figures with the run."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            return (yield from conversion_check_steps(
                session, params, batch_sizes=batch_sizes, batches=batches, **options))

        self._start(body, self._measured("check"), "Validating")

    def check_tensorrt(self) -> None:
        """TensorRT's verdict on every engine of the current conversion: each engine parsed
        and built by TensorRT-RTX (no GPU needed) with the profiles of generated inputs, in
        the background beside the controls; the Summary tab shows them while these
        parameters are shown."""
        if self.session is None or self._verdicts.busy:
            return
        session, params = self.session, self.params.validated()

        def body() -> Generator[Progress, None, Any]:
            from workbench.engines.inspection.tensorrt_verdict import (
                engine_verdict_steps,
                require_tensorrt,
            )
            from workbench.engines.runtime.converted_model import converted_model
            from workbench.trt_convert import generated_input_sets

            builder = require_tensorrt()
            yield 0.0, f"{builder}: exporting and building every engine"
            converted = converted_model(session, session.convert(params), params)
            sets = generated_input_sets(session, converted.input_names)
            steps = engine_verdict_steps(converted, sets)
            try:
                while True:
                    fraction, engine = next(steps)
                    yield fraction, f"{builder}: {engine}"
            except StopIteration as done:
                return params, {name: v.to_json() for name, v in done.value.items()}

        self.summary_tab.tensorrt_progress("TensorRT verdicts: starting")
        self._verdicts.start(body, background=self._background)

    def _verdict_progress(self, fraction: float, message: str) -> None:
        self.summary_tab.tensorrt_progress(f"{fraction:.0%} {message}")

    def _verdicts_done(self, value: tuple[ConversionParams, dict[str, dict]]) -> None:
        params, verdicts = value
        self.tensorrt[params] = verdicts
        built = sum(v["built"] for v in verdicts.values())
        # The verdict box below shows them while these settings are shown; the note says
        # when they belong to settings changed in the meantime.
        current = params == self.params.validated()
        self.summary_tab.tensorrt_progress(
            "" if current else f"TensorRT built {built} of {len(verdicts)} engines of settings "
            "changed since (set them back to see them)")
        self.refresh()

    def _verdicts_failed(self, exc: BaseException) -> None:
        message = str(exc) if isinstance(exc, WorkbenchError) else \
            f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        self.summary_tab.tensorrt_progress(message, error=True)

    def run_per_engine(self, batches: int = 2, batch_size: int = 8, **options: Any) -> None:
        """Per-engine accuracy of the current conversion (the Validation tab's button): each
        engine's error, worst first, and the measured effect of remedies for the worst
        (background step; `options` go to `per_engine_accuracy`: atol, rtol, remedies_for)."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.05, "Per-engine accuracy: building, capturing, comparing, remedies"
            return per_engine_accuracy(session, params, batches=batches,
                                       batch_size=batch_size, **options)

        self._start(body, self._measured("per_engine_report"), "Comparing engines")

    def _per_engine_clicked(self) -> None:
        # The check's tolerances and batches.
        self._with_options(self.validation_tab.options, lambda options: self.run_per_engine(
            batches=options["batches"], atol=options["atol"], rtol=options["rtol"]))

    def export(self, format: str, output: str | Path,
               batch_sizes: Sequence[int] = (1,)) -> None:
        """Writes the current conversion as a TF-TRT script, ONNX or trtexec commands
        (`workbench.checks.export`; background step); the Export tab shows the text."""
        if self.session is None:
            return
        session, params = self.session, self.params

        def body() -> Generator[Progress, None, Any]:
            yield 0.1, f"Exporting ({format})"
            return export(session, format, output, params, batch_sizes=batch_sizes)

        self._start(body, self.export_tab.show, "Exporting")

    def _export_clicked(self) -> None:
        self._with_options(self.export_tab.options, lambda options: self.export(**options))

    def _measured(self, attribute: str) -> Any:
        """A step's done-handler: keeps its measurement for the next view."""
        return lambda value: setattr(self, attribute, value)

    def _check_clicked(self) -> None:
        self._with_options(self.validation_tab.options, lambda options: self.run_check(**options))

    def _with_options(self, read: Callable[[], dict[str, Any]],
                      act: Callable[[dict[str, Any]], None]) -> None:
        """A button's action on its tab's options, or the options' error in the status line."""
        try:
            options = read()
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        act(options)

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
            for html in (self.summary_tab.html, self.nonconversion_tab.html, self.graph_tab.html):
                html.value = note_html(f"Could not load the model: {message}", error=True)
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

    def _show_machine(self, machine: Diagnosis) -> None:
        """The footer: what this kernel runs on (the full doctor report on hover)."""
        self.machine = machine
        dot = machine.get("Graphviz dot")
        trouble = not machine.can_run or (dot is not None and dot.state != OK)
        self.footer.value = note_html(footer(machine), error=trouble, title=str(machine))

    def _keep_clicked(self, name: str) -> None:
        try:
            run = self.keep_run(name)
        except (WorkbenchError, OSError) as exc:
            self._set_status(f"could not keep the run: {exc}", error=True)
            return
        self._set_status(f"kept run {run.name}")


def _resolved(choice: Any) -> Any:
    """A `models` entry: a path as it is, a function (or partial) called for the model."""
    is_function = isinstance(choice, partial) or inspect.isfunction(choice)
    return choice() if is_function else choice


def knob_notes_html(notes: Sequence[str]) -> str:
    """The knobs whose effect is invisible or limited for this model, one line each."""
    if not notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return f'<ul class="wb-note wb-knob-notes">{items}</ul>'


def _timed(update: Any, view: ConversionView) -> float:
    start = time.perf_counter()
    update(view)
    return (time.perf_counter() - start) * 1000
