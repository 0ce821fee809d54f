"""The workbench's state and actions, without widgets: which model is open, what was measured on
it, and the long steps that measure more. `Workbench` (`app.py`) draws it; this class alone runs
headless (scripts, tests) and says what happens through its `on_*` methods, which do nothing
here.

One truth per model: every measurement (validation, profile, blocking op types, per-engine
accuracy, TensorRT's verdicts, the last export) is kept in `measured`, which belongs to the open
model. Opening another model replaces it only once the new model has loaded; a failed open
leaves the previous model, its results and its controls as they were, and says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.checks.conversion_check import ConversionCheck
from workbench.checks.per_engine import PerEngineAccuracy
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.diagnosis import Diagnosis
from workbench.errors import WorkbenchError
from workbench.ui import steps
from workbench.ui.store import ExperimentStore, Run, model_name
from workbench.ui.tasks import TaskBody, TaskRunner
from workbench.ui.verdicts import TensorRTVerdicts, error_line
from workbench.viz.view import ConversionView, build_view


@dataclass
class Measurements:
    """What was measured on the open model, each of the settings it was measured with."""

    check: ConversionCheck | None = None
    profile: pd.DataFrame | None = None
    blocking: pd.DataFrame | None = None
    per_engine: PerEngineAccuracy | None = None
    export: Path | None = None
    # TensorRT's verdicts (engine -> JSON object) per parameters they were made for.
    tensorrt: dict[ConversionParams, dict[str, dict]] = field(default_factory=dict)


class Screen:
    """What the controller tells whoever draws it (`Workbench`); headless, nothing is shown."""

    def on_status(self, text: str, error: bool) -> None:
        """A one-line status (errors say what to do)."""

    def on_busy(self, busy: bool) -> None:
        """A step started (controls off, progress on) or ended."""

    def on_progress(self, fraction: float) -> None:
        """The running step's progress, 0 to 1."""

    def on_view(self, view: ConversionView, start: float) -> None:
        """A new view of the open model (`start`: when building it began)."""

    def on_model_opened(self, session: ConversionSession, previous: str) -> None:
        """Another model is open (`previous`: the one it replaced, if any); its results were
        dropped, a view of it comes next."""

    def on_open_failed(self, message: str) -> None:
        """Opening a model failed; `session` says whether the previous one is still open."""

    def on_runs_changed(self) -> None:
        """The experiment store has another run."""

    def on_machine(self, machine: Diagnosis) -> None:
        """workbench.doctor()'s facts about this kernel's machine."""

    def on_tensorrt_progress(self, text: str, error: bool = False) -> None:
        """The TensorRT verdicts' progress, or why they cannot be made."""


class WorkbenchController(Screen):
    """The open model (SavedModel dir, Keras model, `.keras`, `.pb`, or a name of `models`),
    its conversion with the current parameters and its measurements."""

    def __init__(self, model: Any, params: ConversionParams | None = None,
                 store: ExperimentStore | str | Path = "workbench_runs",
                 open_args: Sequence[Any] = (None, None, None), background: bool = True,
                 models: Mapping[str, Any] | None = None):
        self.models = dict(models or {})
        self.model: Any = None  # the open model, once loaded
        self.store = store if isinstance(store, ExperimentStore) else ExperimentStore(store)
        self.session: ConversionSession | None = None
        self._original_session: ConversionSession | None = None  # while the rewrites are on
        self.view: ConversionView | None = None  # what every tab shows, built once per change
        self.error: str | None = None
        self.timings: dict[str, float] = {}
        self.measured = Measurements()
        self.machine: Diagnosis | None = None  # workbench.doctor()'s facts
        self._params = params or ConversionParams()
        self._open_args = tuple(open_args)
        self._background = background
        self._opening: Any = None  # the model being loaded
        self._opened_note = ""  # how long opening took, once loaded
        self._done_handler: Callable[[Any], None] = lambda _value: None
        self._runner = TaskRunner(self._on_progress, self._on_done, self._on_error,
                                  self._on_cancelled)
        self._verdicts = TensorRTVerdicts(self.on_tensorrt_progress,
                                          lambda: self.params, self._verdicts_made,
                                          background)
        self._first_model = model

    def start(self) -> None:
        """Opens the model given to the constructor (separate so a subclass can build its
        widgets first)."""
        self.open(self._first_model)

    # --- state ----------------------------------------------------------------------------

    @property
    def params(self) -> ConversionParams:
        return self._params

    def set_params(self, params: ConversionParams | dict[str, Any]) -> None:
        """Sets the parameters (a dict may name only some fields) and reconverts once."""
        if not isinstance(params, ConversionParams):
            params = replace(self._params, **params)
        self._params = params
        self.refresh()

    @property
    def busy(self) -> bool:
        return self._runner.busy

    @property
    def model_name(self) -> str:
        return model_name(self.model) if self.session is not None else ""

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
    def tensorrt(self) -> dict[ConversionParams, dict[str, dict]]:
        return self.measured.tensorrt

    @property
    def check(self) -> ConversionCheck | None:
        """The open model's latest validation (`run_check`), of any settings."""
        return self.measured.check

    @property
    def profile_table(self) -> pd.DataFrame | None:
        """The open model's latest per-layer profile (`profile`)."""
        return self.measured.profile

    @property
    def per_engine_report(self) -> PerEngineAccuracy | None:
        """The open model's latest per-engine accuracy (`run_per_engine`)."""
        return self.measured.per_engine

    @property
    def per_engine(self) -> pd.DataFrame:
        """The latest per-engine accuracy (`run_per_engine`), one row per engine, worst
        first; empty before one ran."""
        report = self.measured.per_engine
        return report.table() if report is not None else pd.DataFrame()

    def wait(self, timeout: float | None = None) -> WorkbenchController:
        """Blocks until the current background step and the TensorRT verdicts are done."""
        self._runner.wait(timeout)
        self._verdicts.wait(timeout)
        return self

    # --- actions --------------------------------------------------------------------------

    def open(self, model: Any) -> None:
        """Opens another model (a path, a Keras model, or a name of `models`); the open one,
        with its results, stays until the new one has loaded."""
        if self._runner.busy:
            self.on_status("busy: cancel the running step before opening another model", True)
            return
        self._opening = model
        # The denylist names op types of the open model: the new one is clustered without it.
        params = replace(self.params, denylist=())
        body = partial(steps.loading, model, self.models, self._open_args,
                       params.precision_mode, params, self._machine_checked)
        self._start(body, self._loaded, f"Opening {model_name(model)}")

    def refresh(self) -> None:
        """Reconverts with the current parameters and shows the new view."""
        if not self._runner.busy:
            self._refresh()

    def _refresh(self) -> None:
        if self.session is None:
            return
        start = time.perf_counter()
        try:
            params = self.params
            measured = self.measured
            self.view = build_view(self.session, params, measured.check, measured.profile,
                                   measured.blocking, measured.tensorrt.get(params),
                                   per_engine=measured.per_engine)
        except WorkbenchError as exc:
            self.on_status(str(exc), True)
            return
        self.timings = {"view_ms": (time.perf_counter() - start) * 1000}
        self.on_view(self.view, start)
        self.on_status(f"ready ({self._opened_note})" if self._opened_note else "ready", False)
        self._opened_note = ""  # shown once, when opening ends

    def keep_run(self, name: str | None = None) -> Run:
        """Saves the current conversion as a run in the experiment store (under the model's
        name), with the validation and latency figures when the last check was of these
        same settings."""
        if self.view is None:
            raise WorkbenchError("nothing to keep: the model has not been converted")
        run = Run.from_result(self.view.result, self.params, name or None)
        check = self.measured.check
        if check is not None and check.params == self.params:
            run.metrics = check.metrics()
        run = self.store.add(run)
        self.on_runs_changed()
        return run

    def analyse_blocking_ops(self) -> None:
        """What-if: nodes each rejected op type keeps out of engines (background step)."""
        self._start_on_session(steps.blocking_ops, "blocking", "Analysing")

    def profile(self, runs: int = 5) -> None:
        """Per-layer timings of native TF and of the engines on the active backend, for one
        random batch (background step)."""
        self._start_on_session(partial(steps.profiling, runs=runs), "profile", "Profiling")

    def run_check(self, batch_sizes: Sequence[int] = (1,), batches: int = 2, **options: Any
                  ) -> None:
        """The CLI's `check` (the Validation tab's button): builds the current conversion's
        engines, compares its outputs with native TF on generated batches and times both per
        batch size (background step; `options` go to `conversion_check_steps`: atol, rtol,
        iterations, target_gpu, ...). `keep_run` then stores the measured figures."""
        self._start_on_session(
            partial(steps.checking, batch_sizes=batch_sizes, batches=batches, **options),
            "check", "Validating")

    def run_per_engine(self, batches: int = 2, batch_size: int = 8, **options: Any) -> None:
        """Per-engine accuracy of the current conversion (the Validation tab's button): each
        engine's error, worst first, and the measured effect of remedies for the worst
        (background step; `options` go to `per_engine_accuracy`: atol, rtol, remedies_for)."""
        self._start_on_session(
            partial(steps.per_engine, batches=batches, batch_size=batch_size, **options),
            "per_engine", "Comparing engines")

    def export(self, format: str, output: str | Path,
               batch_sizes: Sequence[int] = (1,)) -> None:
        """Writes the current conversion as a TF-TRT script, ONNX or trtexec commands
        (`workbench.checks.export_formats`; background step)."""
        self._start_on_session(
            partial(steps.exporting, format=format, output=output, batch_sizes=batch_sizes),
            "export", "Exporting")

    def check_tensorrt(self) -> None:
        """TensorRT's verdict on every engine of the current conversion (TensorRT-RTX, no GPU
        needed), in the background beside the controls; shown while these parameters are."""
        if self.session is not None and not self._verdicts.busy:
            self._verdicts.start(self.session, self.params)

    def use_rewrites(self, on: bool) -> None:
        """Converts the model rewritten by the verified rewrites (made in the background the
        first time), or the original again; measurements of the other model are dropped."""
        if self.session is None or (not on and self._original_session is None):
            return
        original = self._original_session = self._original_session or self.session
        self.measured = Measurements()
        if on:
            self._start(partial(steps.rewriting, original), self._use_session, "Rewriting")
        else:
            self._use_session(original)
            self._refresh()

    def _use_session(self, session: ConversionSession) -> None:
        self.session = session

    def cancel(self) -> None:
        self._runner.cancel()

    # --- background steps -----------------------------------------------------------------

    def _start_on_session(self, step: Callable[..., steps.Step], measurement: str,
                          label: str) -> None:
        """`step(session, params)` of the current conversion, once a model is loaded; its
        value is kept as `measured.<measurement>`."""
        if self.session is None:
            self.on_status("no model is open: open one first", True)
            return
        session = self.session

        def keep(value: Any) -> None:
            if session is self.session:  # a result belongs to the model that made it
                setattr(self.measured, measurement, value)

        self._start(partial(step, session, self.params), keep, label)

    def _verdicts_made(self, session: ConversionSession, params: ConversionParams,
                       verdicts: dict[str, dict]) -> None:
        if session is self.session:
            self.measured.tensorrt[params] = verdicts
            self.refresh()

    def _machine_checked(self, machine: Diagnosis) -> None:
        self.machine = machine
        self.on_machine(machine)

    def _loaded(self, loaded: tuple[Any, ConversionSession]) -> None:
        previous = self.model_name
        self.model, self.session = loaded
        self._original_session = None
        self._opening, self.error, self.view = None, None, None
        self.measured = Measurements()
        self._verdicts.forget()
        self._opened_note = self.session.opening_summary()
        self.on_model_opened(self.session, previous)

    def _start(self, body: TaskBody, done: Callable[[Any], None], label: str) -> None:
        if self._runner.busy:  # its result would land on another step's half-done state
            self.on_status(f"busy: {label.lower()} waits until the running step ends "
                           "(or cancel it)", True)
            return
        self._done_handler = done
        self.on_busy(True)
        self.on_status(f"{label}...", False)
        self._runner.start(body, background=self._background)

    def _on_progress(self, fraction: float, message: str) -> None:
        self.on_progress(fraction)
        self.on_status(message, False)

    def _on_done(self, value: Any) -> None:
        self._done_handler(value)
        self.on_busy(False)
        self._refresh()

    def _on_error(self, exc: BaseException) -> None:
        self.on_busy(False)
        message = error_line(exc)
        if self._opening is None:
            self.on_status(message, True)
            return
        opening, self._opening = model_name(self._opening), None
        self.error = message
        still = f". Still showing {self.model_name}." if self.session is not None else ""
        self.on_status(f"Could not open {opening}: {message.rstrip('.')}{still}", True)
        self.on_open_failed(message)

    def _on_cancelled(self) -> None:
        self._opening = None
        self.on_busy(False)
        self.on_status("cancelled" + ("" if self.session else ": no model open"), False)
