"""The notebook workbench: TF-TRT's knobs as widgets, the conversion's results as tabs.

`Workbench` draws a `WorkbenchController` (`controller.py`: the open model, its measurements,
the long steps) with widgets: the controls (`controls.py`), the frame around the tabs
(`frame.py`), and one `ConversionView` built per change that every tab renders (`tabs.py` and
the `*_tab.py` modules; the HTML report renders the same view). Moving a control reconverts at
once (the clustering is cached, so a threshold change costs milliseconds). Everything shown is
also reachable from Python: `app.result`, `app.report`, `app.view`, `app.sweep`, `app.figures`,
`app.svg`, `app.store`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.diagnosis import Diagnosis
from workbench.errors import WorkbenchError
from workbench.ui.controller import WorkbenchController
from workbench.ui.controls import Controls
from workbench.ui.export_tab import ExportTab
from workbench.ui.frame import AppLayout, knob_notes_html
from workbench.ui.graph_tab import GraphTab
from workbench.ui.store import ExperimentStore
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
from workbench.ui.tune_tab import TuneTab
from workbench.viz.view import ConversionView, largest_segment, sweep_limit

__all__ = ["Workbench", "knob_notes_html"]


class Workbench(WorkbenchController):
    """The TF-TRT workbench for one model at a time (SavedModel dir, Keras model, `.keras` or
    `.pb`).

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
        super().__init__(model, params, store, (signature_key, tags, output_node_names),
                         background, models)
        self.controls = Controls(params or ConversionParams())
        self._params = self.controls.params()  # what the controls show (-1 shows as 1)
        self.target_gpu = TargetGpu(lambda: self.session)  # estimates for a GPU, if picked
        self._make_tabs()
        self._lay_out()
        self.picker.value = model if isinstance(model, str) else ""
        self.controls.observe(self._controls_changed)
        self.controls.rewrites.observe(lambda change: self.use_rewrites(change["new"]),
                                       names="value")
        self.target_gpu.observe(self.refresh)
        self.start()

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

    def _lay_out(self) -> None:
        """The frame (`frame.py`); its widgets are the app's attributes too."""
        self.layout = AppLayout(self.controls, self.tab_list, list(self.models),
                                [self.target_gpu.widget])
        for name in ("status", "progress", "cancel_button", "headline", "knob_notes", "picker",
                     "open_button", "tabs", "footer", "widget"):
            setattr(self, name, getattr(self.layout, name))
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.open_button.on_click(lambda _b: self._open_picked())
        self.picker.on_submit(lambda _w: self._open_picked())

    # --- public ---------------------------------------------------------------------------

    def set_params(self, params: ConversionParams | dict[str, Any]) -> None:
        """Sets the controls (a dict may name only some fields) and reconverts once."""
        self.controls.set_params(params)

    def _controls_changed(self) -> None:
        """The parameters are built from the controls once per change (checked there, the
        edge), then handed down as they are."""
        self._params = self.controls.params()
        self.refresh()

    def run_check(self, batch_sizes: Sequence[int] = (1,), batches: int = 2, **options: Any
                  ) -> None:
        """`WorkbenchController.run_check`; with a target GPU picked, its latency estimated
        there too, shown apart."""
        options.setdefault("target_gpu", self.target_gpu.gpu)
        super().run_check(batch_sizes, batches, **options)

    def show_in_graph(self, op: str, reason: str) -> None:
        """A non-conversion report row's nodes, opened and highlighted in the Segment graph."""
        self.graph_tab.show_row(op, reason)
        self.tabs.selected_index = self.tab_list.index(self.graph_tab)

    def show_engine_in_graph(self, name: str) -> None:
        """An engine of the engine table, opened and highlighted in the Segment graph."""
        self.graph_tab.show_engine(name)
        self.tabs.selected_index = self.tab_list.index(self.graph_tab)

    @property
    def figures(self) -> dict[str, Any]:
        """Every plotly figure the tabs show, by name."""
        return {k: v for tab in self.tab_list for k, v in getattr(tab, "figures", {}).items()}

    @property
    def svg(self) -> str:
        """The segment graph tab's drawing."""
        return self.graph_tab.svg

    def wait(self, timeout: float | None = None) -> Workbench:
        super().wait(timeout)
        return self

    def add_tab(self, tab: Tab) -> None:
        """Adds a tab after the built-in ones (anything with `title`, `widget`, `update`)."""
        self.tab_list.append(tab)
        self.layout.add_tab(tab)
        if self.view is not None:
            tab.update(self.view)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # --- what the controller says, drawn ----------------------------------------------------

    def on_status(self, text: str, error: bool) -> None:
        self.layout.set_status(text, error)

    def on_busy(self, busy: bool) -> None:
        """While a step runs: progress and Cancel shown, the controls and the tabs' actions
        off (each would start on half-done results). After it: back once a model is open."""
        self.layout.show_progress(busy)
        self.controls.set_disabled(busy or self.session is None)
        for button in self.action_buttons:
            button.disabled = busy or self.session is None
        self.open_button.disabled = busy

    @property
    def action_buttons(self) -> list[Any]:
        """The tabs' buttons that start a step on the open model or store its results."""
        return [self.validation_tab.button, self.validation_tab.per_engine_button,
                self.profile_tab.button, self.charts_tab.blocking_button,
                self.runs_tab.button, self.export_tab.button]

    def on_progress(self, fraction: float) -> None:
        self.progress.value = fraction

    def on_view(self, view: ConversionView, start: float) -> None:
        """Every tab shows `view` (the graph last: Graphviz is the slow one); the times go
        into `timings`."""
        self.headline.value = headline_html(view.headline, self.model_name)
        self.knob_notes.value = knob_notes_html(view.knob_notes)
        self.export_tab.show(self.measured.export)
        tab_ms = {tab.title: _timed(tab.update, view)
                  for tab in self.tab_list if tab is not self.graph_tab}
        self.timings["summary_and_charts_ms"] = (time.perf_counter() - start) * 1000
        self.timings["graph_ms"] = _timed(self.graph_tab.update, view)
        self.timings.update({f"tab {title}_ms": ms for title, ms in tab_ms.items()})

    def on_model_opened(self, session: ConversionSession, previous: str) -> None:
        """The controls offer the new model's op types and thresholds; what belonged to the
        previous model (verdicts, trials, exports, a Target GPU calibration) is cleared."""
        self.picker.value = self.model_name
        self.controls.rewrites.value = False  # the new model as it is (the controller's rule)
        self.controls.set_op_types(n.op for n in session.prepared().graph.real_nodes)
        self._params = self.controls.params()  # the denylist keeps the new model's op types
        self.controls.set_threshold_range(sweep_limit(largest_segment(session, self.params)))
        self.summary_tab.tensorrt_progress("")
        self.tune_tab.forget()
        self.target_gpu.forget_calibration()
        self.runs_tab.show(self.model_name)

    def on_open_failed(self, message: str) -> None:
        if self.session is None:  # nothing open: say so where the results would be
            for html in (self.summary_tab.html, self.nonconversion_tab.html, self.graph_tab.html):
                html.value = note_html(f"Could not open the model: {message}", error=True)
            self.headline.value = note_html("No model is open: type a sample's name or a "
                                            "model's path in the Model box.", error=True)

    def on_runs_changed(self) -> None:
        self.runs_tab.show(self.model_name)

    def on_machine(self, machine: Diagnosis) -> None:
        self.layout.show_machine(machine)

    def on_tensorrt_progress(self, text: str, error: bool = False) -> None:
        self.summary_tab.tensorrt_progress(text, error)

    # --- the buttons ------------------------------------------------------------------------

    def _open_picked(self) -> None:
        text = self.picker.value.strip()
        if text and text != self.model_name:
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
            self.on_status(str(exc), True)
            return
        act(options)

    def _keep_clicked(self, name: str) -> None:
        try:
            run = self.keep_run(name)
        except (WorkbenchError, OSError) as exc:
            self.on_status(f"could not keep the run: {exc}", True)
            return
        self.runs_tab.name.value = ""  # the next run gets a name of its own
        self.on_status(f"kept run {run.name}", False)


def _timed(update: Any, view: ConversionView) -> float:
    start = time.perf_counter()
    update(view)
    return (time.perf_counter() - start) * 1000
