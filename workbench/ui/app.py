"""The notebook workbench: TF-TRT's knobs as widgets, the conversion's results as tabs.

`Workbench` holds the state (the session, the view, the latest measurements) and wires the
pieces: the controls (`controls.py`), the frame around the tabs (`frame.py`), the background
steps (`steps.py`, run by `tasks.py`), TensorRT's verdicts (`verdicts.py`), and one
`ConversionView` built per change that every tab renders (`tabs.py` and the `*_tab.py`
modules; the HTML report renders the same view). Moving a control reconverts at once (the
clustering is cached, so a threshold change costs milliseconds). Everything shown is also
reachable from Python: `app.result`, `app.report`, `app.view`, `app.sweep`, `app.figures`,
`app.svg`, `app.store`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.checks.conversion_check import ConversionCheck
from workbench.checks.per_engine import PerEngineAccuracy
from workbench.conversion.params import ConversionParams
from workbench.conversion.report import ConversionReport
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.diagnosis import Diagnosis
from workbench.errors import WorkbenchError
from workbench.ui import steps
from workbench.ui.controls import Controls
from workbench.ui.export_tab import ExportTab
from workbench.ui.frame import AppLayout, knob_notes_html
from workbench.ui.graph_tab import GraphTab
from workbench.ui.store import ExperimentStore, Run
from workbench.ui.tables import note_html
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
from workbench.ui.target_gpu import TargetGpu
from workbench.ui.tasks import TaskBody, TaskRunner
from workbench.ui.tune_tab import TuneTab
from workbench.ui.verdicts import TensorRTVerdicts, error_line
from workbench.viz.view import ConversionView, build_view, largest_segment, sweep_limit

__all__ = ["Workbench", "knob_notes_html"]


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
        self.per_engine_report: PerEngineAccuracy | None = None  # the latest, any settings
        self.machine: Diagnosis | None = None  # workbench.doctor()'s facts, shown in the footer
        self._open_args = (signature_key, tags, output_node_names)
        self._background = background
        self.controls = Controls(params or ConversionParams())
        self.target_gpu = TargetGpu(lambda: self.session)  # estimates for a GPU, if picked
        self._make_tabs()
        self._lay_out()
        self.picker.value = model if isinstance(model, str) else ""
        self._runner = TaskRunner(self._on_progress, self._on_done, self._on_error,
                                  self._on_cancelled)
        self._verdicts = TensorRTVerdicts(self.summary_tab, lambda: self.params,
                                          self.refresh, background)
        # TensorRT's verdicts (engine -> JSON object) per parameters they were made for.
        self.tensorrt: dict[ConversionParams, dict[str, dict]] = self._verdicts.by_params
        self.controls.observe(self.refresh)
        self.target_gpu.observe(self.refresh)
        self._start_loading()

    def _make_tabs(self) -> None:
        self.summary_tab = SummaryTab(on_tensorrt=self.check_tensorrt,
                                      on_engine=self.show_engine_in_graph)
        self.nonconversion_tab = NonconversionTab(on_show=self.show_in_graph)
        self.graph_tab = GraphTab(self.target_gpu)
        self.charts_tab = ChartsTab(on_blocking=self.analyse_blocking_ops, target=self.target_gpu)
        self.validation_tab = ValidationTab(on_check=self._check_clicked,
                                            on_per_engine=self._per_engine_clicked)
        self.runs_tab = RunsTab(self.store, on_keep=self._keep_clicked)
        self.profile_tab = ProfileTab(on_profile=self.profile, target=self.target_gpu)
        self.tune_tab = TuneTab(self.set_params, self.store.root, self._background,
                                self.target_gpu)
        self.export_tab = ExportTab(on_export=self._export_clicked)
        self.tab_list: list[Tab] = [  # registering a tab: one line here, or add_tab()
            self.summary_tab, self.nonconversion_tab, self.graph_tab, self.charts_tab,
            self.validation_tab, self.runs_tab, self.profile_tab, self.tune_tab,
            self.export_tab,
        ]

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
        if self.check is not None and self.check.params == self.params:
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
        self.layout.add_tab(tab)
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
        self._verdicts.forget()
        self._start_loading()

    def refresh(self) -> None:
        """Reconverts with the controls' values and updates every tab."""
        if not self._runner.busy:
            self._refresh()

    def _refresh(self) -> None:
        if self.session is None:
            return
        start = time.perf_counter()
        try:
            params = self.params
            self.view = build_view(self.session, params, self.check, self.profile_table,
                                   self.blocking, self.tensorrt.get(params),
                                   per_engine=self.per_engine_report)
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        self.timings = {"view_ms": (time.perf_counter() - start) * 1000}
        self._show(self.view, start)
        self._set_status(f"ready ({self._load_steps})" if self._load_steps else "ready")
        self._load_steps = ""  # the loading's steps are shown once, when it ends

    def _show(self, view: ConversionView, start: float) -> None:
        """Every tab shows `view` (the graph last: Graphviz is the slow one); the times go
        into `timings`."""
        self.headline.value = headline_html(view.headline)
        self.knob_notes.value = knob_notes_html(view.knob_notes)
        tab_ms = {tab.title: _timed(tab.update, view)
                  for tab in self.tab_list if tab is not self.graph_tab}
        self.timings["summary_and_charts_ms"] = (time.perf_counter() - start) * 1000
        self.timings["graph_ms"] = _timed(self.graph_tab.update, view)
        self.timings.update({f"tab {title}_ms": ms for title, ms in tab_ms.items()})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # --- layout ---------------------------------------------------------------------------

    def _lay_out(self) -> None:
        """The frame (`frame.py`); its widgets are the app's attributes too."""
        self.layout = AppLayout(self.controls, self.tab_list, list(self.models),
                                [self.target_gpu.widget])
        for name in ("status", "progress", "cancel_button", "headline", "knob_notes", "picker",
                     "open_button", "tabs", "footer", "widget"):
            setattr(self, name, getattr(self.layout, name))
        self.cancel_button.on_click(lambda _b: self._runner.cancel())
        self.open_button.on_click(lambda _b: self._open_picked())
        self.picker.on_submit(lambda _w: self._open_picked())

    # --- background steps -----------------------------------------------------------------

    def analyse_blocking_ops(self) -> None:
        """What-if: nodes each rejected op type keeps out of engines (background step)."""
        self._start_on_session(steps.blocking_ops, self._measured("blocking"), "Analysing")

    def profile(self, runs: int = 5) -> None:
        """Per-layer timings of native TF and of the engines on the active backend, for one
        random batch (background step)."""
        self._start_on_session(partial(steps.profiling, runs=runs),
                               self._measured("profile_table"), "Profiling")

    def run_check(self, batch_sizes: Sequence[int] = (1,), batches: int = 2, **options: Any
                  ) -> None:
        """The CLI's `check` (the Validation tab's button): builds the current conversion's
        engines, compares its outputs with native TF on generated batches and times both per
        batch size (background step; `options` go to `conversion_check_steps`: atol, rtol,
        iterations, ...); with a target GPU picked, its latency estimated there too, shown
        apart. `keep_run` then stores the measured figures with the run."""
        options.setdefault("target_gpu", self.target_gpu.gpu)
        self._start_on_session(
            partial(steps.checking, batch_sizes=batch_sizes, batches=batches, **options),
            self._measured("check"), "Validating")

    def run_per_engine(self, batches: int = 2, batch_size: int = 8, **options: Any) -> None:
        """Per-engine accuracy of the current conversion (the Validation tab's button): each
        engine's error, worst first, and the measured effect of remedies for the worst
        (background step; `options` go to `per_engine_accuracy`: atol, rtol, remedies_for)."""
        self._start_on_session(
            partial(steps.per_engine, batches=batches, batch_size=batch_size, **options),
            self._measured("per_engine_report"), "Comparing engines")

    def export(self, format: str, output: str | Path,
               batch_sizes: Sequence[int] = (1,)) -> None:
        """Writes the current conversion as a TF-TRT script, ONNX or trtexec commands
        (`workbench.checks.export`; background step); the Export tab shows the text."""
        self._start_on_session(
            partial(steps.exporting, format=format, output=output, batch_sizes=batch_sizes),
            self.export_tab.show, "Exporting")

    def check_tensorrt(self) -> None:
        """TensorRT's verdict on every engine of the current conversion: each engine parsed
        and built by TensorRT-RTX (no GPU needed) with the profiles of generated inputs, in
        the background beside the controls; the Summary tab shows them while these
        parameters are shown."""
        if self.session is not None and not self._verdicts.busy:
            self._verdicts.start(self.session, self.params)

    def _start_on_session(self, step: Callable[..., steps.Step], done: Callable[[Any], None],
                          label: str) -> None:
        """`step(session, params)` of the current conversion, once a model is loaded."""
        if self.session is not None:
            self._start(partial(step, self.session, self.params), done, label)

    def _start_loading(self) -> None:
        body = partial(steps.loading, self.model, self.models, self._open_args,
                       self.controls.precision.value, self.params, self._show_machine)
        self._start(body, self._loaded, "Loading")

    def _loaded(self, loaded: tuple[Any, ConversionSession]) -> None:
        self.model, session = loaded
        self.session = session
        self._load_steps = session.preparation_steps()
        self.controls.set_op_types(n.op for n in session.prepared().graph.real_nodes)
        self.controls.set_threshold_range(sweep_limit(largest_segment(session, self.params)))
        self.runs_tab.show()

    def _measured(self, attribute: str) -> Callable[[Any], None]:
        """A step's done-handler: keeps its measurement for the next view."""
        return lambda value: setattr(self, attribute, value)

    def _start(self, body: TaskBody, done: Callable[[Any], None], label: str) -> None:
        self._done_handler = done
        self.controls.set_disabled(True)
        self.layout.show_progress(True)
        self._set_status(f"{label}...")
        self._runner.start(body, background=self._background)

    def _on_progress(self, fraction: float, message: str) -> None:
        self.progress.value = fraction
        self._set_status(message)

    def _on_done(self, value: Any) -> None:
        self._done_handler(value)
        self._finish()
        self._refresh()

    def _on_error(self, exc: BaseException) -> None:
        self._finish()
        message = self.error = error_line(exc)
        self._set_status(message, error=True)
        if self.session is None:  # loading failed: say so where the results would be
            for html in (self.summary_tab.html, self.nonconversion_tab.html, self.graph_tab.html):
                html.value = note_html(f"Could not load the model: {message}", error=True)

    def _on_cancelled(self) -> None:
        self._finish()
        self._set_status("cancelled" + ("" if self.session else ": no model loaded"))

    def _finish(self) -> None:
        """The step is over: the controls come back once a model is loaded."""
        self.layout.show_progress(False)
        self.controls.set_disabled(self.session is None)

    def _set_status(self, text: str, error: bool = False) -> None:
        self.layout.set_status(text, error)

    def _show_machine(self, machine: Diagnosis) -> None:
        self.machine = machine  # workbench.doctor()'s facts, shown in the footer
        self.layout.show_machine(machine)

    # --- the buttons ------------------------------------------------------------------------

    def _open_picked(self) -> None:
        text = self.picker.value.strip()
        if text:
            self.open(text)

    def _check_clicked(self) -> None:
        self._with_options(self.validation_tab.options, lambda options: self.run_check(**options))

    def _per_engine_clicked(self) -> None:
        # The check's tolerances and batches.
        self._with_options(self.validation_tab.options, lambda options: self.run_per_engine(
            batches=options["batches"], atol=options["atol"], rtol=options["rtol"]))

    def _export_clicked(self) -> None:
        self._with_options(self.export_tab.options, lambda options: self.export(**options))

    def _with_options(self, read: Callable[[], dict[str, Any]],
                      act: Callable[[dict[str, Any]], None]) -> None:
        """A button's action on its tab's options, or the options' error in the status line."""
        try:
            options = read()
        except WorkbenchError as exc:
            self._set_status(str(exc), error=True)
            return
        act(options)

    def _keep_clicked(self, name: str) -> None:
        try:
            run = self.keep_run(name)
        except (WorkbenchError, OSError) as exc:
            self._set_status(f"could not keep the run: {exc}", error=True)
            return
        self._set_status(f"kept run {run.name}")


def _timed(update: Any, view: ConversionView) -> float:
    start = time.perf_counter()
    update(view)
    return (time.perf_counter() - start) * 1000
