"""The app's Tune tab: choose a grid, run it on Dask workers, watch trials arrive, apply one.

The search is `workbench.tune()` in the app's background thread (`TaskRunner`); each finished
trial comes back through `on_trial` and redraws the table and the Pareto chart from the trials so
far. Cancel sets tune's own cancel event: finished trials stay (they are stored, so a re-run
reuses them). "Apply" hands the chosen trial's parameters to the app's controls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from workbench.checks.conversion_check import parse_batch_sizes
from workbench.conversion.params import PRECISION_MODES, PROFILE_STRATEGIES
from workbench.errors import WorkbenchError
from workbench.tuning import TrialRecord, TuneResult, expand_grid, tune
from workbench.tuning.driver import stored_trials
from workbench.tuning.estimates import estimate_trials
from workbench.tuning.grid import parse_integers
from workbench.ui.tables import note_html, table_html
from workbench.ui.tabs import show_figure
from workbench.ui.target_gpu import TargetGpu
from workbench.ui.tasks import Progress, TaskRunner
from workbench.ui.verdicts import error_line
from workbench.viz.tune_charts import (
    pareto_chart,
    readable_table,
    trial_label,
    tune_figures,
)
from workbench.words import counted

SHAPES = {"off": False, "on": True}
# The trial table's columns in view (estimates, when a GPU is picked, too); the rest is in each
# row's details.
TRIAL_ESSENTIALS = ("trial", "status", "percent_converted", "engines", "latency_ms", "speedup",
                    "max_abs_error", "recommended")
_WIDE = widgets.Layout(width="230px")


class TuneTab:
    """A tab of the workbench: `title`, `widget`, `update(view)` (the view gives the model path
    and the current parameters). `on_apply(params)` gets a trial's `ConversionParams.to_json()`
    values when the user applies it."""

    title = "Tune"

    def __init__(self, on_apply: Callable[[dict[str, Any]], None],
                 store: str | Path | None = None, background: bool = True,
                 target: TargetGpu | None = None):
        self._on_apply = on_apply
        # With a target GPU picked, trials rank by their estimate for it (cached per trial).
        self.target = target
        self._estimates: dict[tuple[str, int, str], dict[str, Any]] = {}
        self.store = store
        self.model: str | None = None
        self._records_model: str | None = None  # the model the trials shown are of
        self.records: list[TrialRecord] = []
        self.result: TuneResult | None = None
        self.figures: dict[str, Any] = {}
        self._total = 0
        self._running = False  # a search is under way: its trials are not all in yet
        self._cancel = threading.Event()
        self._background = background
        self._runner = TaskRunner(lambda _f, message: self._say(message), self._done,
                                  self._failed, self._cancelled)
        self._build()
        if target is not None:
            target.observe(self._retarget)

    # --- the tab interface ----------------------------------------------------------------

    def update(self, view: Any) -> None:
        """Takes the model path and, the first time, the current parameters as the grid's
        starting point (later changes of the controls leave the user's grid alone)."""
        first, self.model = self.model is None, str(view.result.model)
        if not first and self._records_model not in (None, self.model):
            self.forget()
            first, self.model = True, str(view.result.model)
        if first:
            params = view.params
            self.precisions.value = tuple(dict.fromkeys((params.precision_mode, "FP16")))
            current = max(params.minimum_segment_size, 1)
            self.thresholds.value = ", ".join(map(str, sorted({current, current + 2})))
            self._show_stored()

    def _show_stored(self) -> None:
        """A model opened (again): the trials earlier searches stored for it, ready to apply."""
        if self._runner.busy or self.model is None or not Path(self.model).exists():
            return
        try:
            stored = sorted(stored_trials(self.model, self.store),
                            key=lambda r: trial_label(r.params))
        except (OSError, WorkbenchError):  # an unreadable store: the tab starts empty
            return
        if stored:
            self.records, self._records_model = stored, self.model
            self._show(TuneResult(stored), final=True)
            self._say(f"{counted(len(stored), 'stored trial')} of this model; Start reuses them")

    def forget(self) -> None:
        """Another model is open: its trials, chart and choice go (a running search is
        cancelled; its finished trials stay in the store for when that model is back)."""
        if self._runner.busy:
            self.cancel()
        self.model = self._records_model = None
        self.records, self.result, self.figures = [], None, {}
        self.table.value = self.recommendation.value = ""
        self.chart.outputs = ()
        self.choice.options = []
        self.apply_button.disabled = True
        self.progress.value = 0
        self._say("Choose a grid and press Start.")

    # --- Python API (what the buttons call) -----------------------------------------------

    def grid(self) -> dict[str, list[Any]]:
        """The grid the widgets describe (`tune()`'s `grid`); WorkbenchError says what is wrong."""
        grid: dict[str, list[Any]] = {
            "precision_mode": list(self.precisions.value),
            "minimum_segment_size": parse_integers("minimum_segment_size", self.thresholds.value),
            "use_dynamic_shape": [SHAPES[v] for v in self.shapes.value],
        }
        if True in grid["use_dynamic_shape"]:
            grid["dynamic_shape_profile_strategy"] = list(self.strategies.value)
        for key, values in grid.items():
            if not values:
                raise WorkbenchError(f"choose at least one value of {key} to tune")
        return grid

    def start(self) -> None:
        """Starts the search the widgets describe, in the background."""
        if self._runner.busy:
            self._say("a search is running: cancel it or wait for it", error=True)
            return
        try:
            if self.model is None or not Path(self.model).exists():
                raise WorkbenchError(
                    f"tuning needs the model on disk (Dask workers open it there), not "
                    f"{self.model!r}: save it and open the workbench on its path")
            grid, sizes = self.grid(), parse_batch_sizes(self.batch_sizes.value)
            self._total = len(expand_grid(grid))
        except WorkbenchError as exc:
            self._say(str(exc), error=True)
            return
        options = {"batch_sizes": sizes, "store": self.store, "progress": False,
                   "timeout": self.timeout.value or None, "on_trial": self._trial_done,
                   "cancel": self._cancel}
        scheduler = self.scheduler.value.strip()
        options.update({"scheduler": scheduler} if scheduler else {"workers": self.workers.value})
        self.records, self.result = [], None
        self._records_model = self.model
        self._cancel.clear()
        self._set_running(True)
        where = f"the cluster at {scheduler}" if scheduler else \
            f"{counted(self.workers.value, 'local worker')}"
        model = self.model

        def body() -> Generator[Progress, None, TuneResult]:
            yield 0.0, f"{counted(self._total, 'trial')} on {where} (stored ones are reused)"
            return tune(model, grid, **options)

        self._runner.start(body, background=self._background)

    def cancel(self) -> None:
        """Stops the search; finished trials stay in the table and the store."""
        self._cancel.set()
        self._runner.cancel()

    def wait(self, timeout: float | None = None) -> TuneTab:
        self._runner.wait(timeout)
        return self

    def apply(self, trial_id: str | None = None) -> dict[str, Any]:
        """Hands the trial's parameters (default: the one chosen in the list) to `on_apply`."""
        if self._running:
            raise WorkbenchError("a search is running: wait for it to end (or cancel it), "
                                 "then apply one of its trials")
        trial_id = trial_id or self.choice.value
        ours = self.records if self._records_model == self.model else []
        record = next((r for r in ours if r.trial_id == trial_id), None)
        if record is None:
            raise WorkbenchError(f"no finished trial {trial_id!r} to apply")
        params = dict(record.params)
        self._on_apply(params)
        self._say(f"applied {trial_label(params)} to the controls")
        return params

    # --- widgets --------------------------------------------------------------------------

    def _build(self) -> None:
        self.precisions = widgets.SelectMultiple(
            options=list(PRECISION_MODES), value=("FP32", "FP16"), rows=3,
            description="precision", layout=_WIDE)
        self.thresholds = widgets.Text(value="3, 5", description="minimum_segment_size",
                                       placeholder="2, 3, 5", style={"description_width": "auto"},
                                       layout=widgets.Layout(width="300px"))
        self.shapes = widgets.SelectMultiple(options=list(SHAPES), value=("off",), rows=2,
                                             description="dynamic", layout=_WIDE)
        self.strategies = widgets.SelectMultiple(
            options=list(PROFILE_STRATEGIES), value=("Range",), rows=4,
            description="profiles", layout=widgets.Layout(width="330px"))
        self.batch_sizes = widgets.Text(value="1", description="batch sizes", layout=_WIDE)
        self.workers = widgets.BoundedIntText(value=2, min=1, max=256, description="workers",
                                              layout=_WIDE)
        self.scheduler = widgets.Text(description="scheduler", placeholder="tcp://host:8786",
                                      layout=widgets.Layout(width="330px"))
        self.timeout = widgets.BoundedFloatText(value=0, min=0, max=86_400,
                                                description="timeout s", layout=_WIDE)
        self.start_button = widgets.Button(description="Start", icon="play",
                                           button_style="primary")
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", disabled=True)
        self.start_button.on_click(lambda _b: self.start())
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.progress = widgets.IntProgress(value=0, min=0, max=1,
                                            layout=widgets.Layout(width="200px"))
        self.status = widgets.HTML(note_html("Choose a grid and press Start."))
        self.status.add_class("wb-tune-status")
        self.recommendation = widgets.HTML()
        self.choice = widgets.Dropdown(description="trial", options=[],
                                       layout=widgets.Layout(width="420px", max_width="100%"))
        self.apply_button = widgets.Button(description="Apply to the controls", icon="check",
                                           disabled=True, layout=widgets.Layout(width="auto"))
        self.apply_button.on_click(lambda _b: self._apply_clicked())
        self.table = widgets.HTML()
        self.table.add_class("wb-tune-table")
        self.chart = widgets.Output()
        row = widgets.HBox
        self.widget = widgets.VBox([
            row([self.precisions, self.shapes, self.strategies],
                layout=widgets.Layout(flex_flow="row wrap")),
            row([self.thresholds, self.batch_sizes, self.timeout],
                layout=widgets.Layout(flex_flow="row wrap")),
            row([self.workers, self.scheduler, row([self.start_button, self.cancel_button])],
                layout=widgets.Layout(flex_flow="row wrap")),
            widgets.HTML(note_html("A timeout of 0 s lets each trial run to its end. A "
                                   "scheduler address runs the trials on that Dask cluster "
                                   "instead of local workers. Finished trials are stored and "
                                   "reused by the next search.")),
            row([self.progress, self.status], layout=widgets.Layout(align_items="center")),
            self.recommendation,
            row([self.choice, self.apply_button], layout=widgets.Layout(flex_flow="row wrap")),
            self.table, self.chart,
        ])
        self.widget.add_class("wb-tune")

    # --- progress (called from the search's thread) ----------------------------------------

    def _trial_done(self, record: TrialRecord) -> None:
        if self._records_model is None:  # a search of a model no longer open
            return
        self.records.append(record)
        self._show(TuneResult(self.records))
        self.progress.max, self.progress.value = max(self._total, 1), len(self.records)
        self._say(f"{len(self.records)}/{self._total} trials: {trial_label(record.params)} "
                  f"{record.status}" + (" (stored)" if record.reused else ""))

    def _done(self, result: TuneResult) -> None:
        if self._records_model is None:
            self._set_running(False)
            return
        self.records = list(result.trials)
        self._show(result, final=True)
        self._set_running(False)
        failed = sum(r.status != "ok" for r in result.trials)
        self._say(f"done: {counted(len(result.trials), 'trial')}, "
                  + (f"{failed} not ok" if failed else "all ok")
                  + (f"; {counted(len(result.problems), 'stored trial')} ignored" if result.problems
                     else ""))

    def _failed(self, exc: BaseException) -> None:
        self._set_running(False)
        self._say(f"the search stopped: {error_line(exc)}", error=True)

    def _cancelled(self) -> None:
        self._set_running(False)
        if self.records:
            self._show(TuneResult(self.records), final=True)
        self._say(f"cancelled: {len(self.records)} of {self._total} trials finished (kept)")

    # --- views ----------------------------------------------------------------------------

    def _show(self, result: TuneResult, final: bool = False) -> None:
        result = self._estimated(result)
        self.result = result
        self.table.value = table_html(readable_table(result.table), "No trials yet.",
                                      show=essential_columns(result))
        self.figures = tune_figures(result.table) if final else {
            "pareto": pareto_chart(result.table)}
        show_figure(self.chart, self.figures["pareto"])
        chosen = result.recommended
        self.recommendation.value = note_html(
            f"Recommended: {trial_label(chosen['params'])}: {chosen['reason']}"
            if chosen else "No recommendation yet: no trial finished ok.")
        ok = [r for r in result.trials if r.status == "ok"]
        self.choice.options = [(trial_label(r.params) + f" [{r.trial_id[:6]}]", r.trial_id)
                               for r in ok]
        if chosen:
            self.choice.value = chosen["trial_id"]
        self.apply_button.disabled = self._running or not ok

    def _estimated(self, result: TuneResult) -> TuneResult:
        """`result` ranked by the target GPU's estimate, when one is picked."""
        session = self.target.session_of() if self.target is not None else None
        gpu = self.target.gpu if self.target is not None else None
        if session is None or gpu is None:
            return result
        batch = self.target.batch_size
        missing = [t for t in result.trials if (gpu, batch, t.trial_id) not in self._estimates]
        for trial_id, estimate in estimate_trials(session, missing, gpu, batch).items():
            self._estimates[(gpu, batch, trial_id)] = estimate
        found = {t.trial_id: self._estimates[(gpu, batch, t.trial_id)] for t in result.trials
                 if (gpu, batch, t.trial_id) in self._estimates}
        return TuneResult(result.trials, model=result.model, store=result.store,
                          problems=result.problems, estimates=found)

    def _retarget(self) -> None:
        """The target GPU changed: the finished trials ranked again (none run again)."""
        if self.records and not self._runner.busy:
            try:
                self._show(TuneResult(self.records), final=True)
            except WorkbenchError as exc:
                self._say(str(exc), error=True)

    def _apply_clicked(self) -> None:
        try:
            self.apply()
        except WorkbenchError as exc:
            self._say(str(exc), error=True)

    def _set_running(self, running: bool) -> None:
        """While a search runs, its half-finished results cannot be applied or chosen from."""
        self._running = running
        self.start_button.disabled = running
        self.cancel_button.disabled = not running
        self.choice.disabled = running
        self.apply_button.disabled = running or not self.choice.options

    def _say(self, text: str, error: bool = False) -> None:
        self.status.value = note_html(text, error=error)


def essential_columns(result: TuneResult) -> list[str]:
    """The trial table's columns in view: the estimate's (named with their GPU) after the
    status."""
    estimated = [c for c in readable_table(result.table).columns if "estimated" in c]
    return [*TRIAL_ESSENTIALS[:2], *estimated, *TRIAL_ESSENTIALS[2:]]
