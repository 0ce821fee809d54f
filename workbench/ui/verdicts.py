"""TensorRT's verdicts in the app: made in the background with a runner of their own (the
controls stay live), kept per parameters, their progress shown on the Summary tab."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.ui import steps
from workbench.ui.tabs import SummaryTab
from workbench.ui.tasks import TaskRunner

Verdicts = dict[str, dict]  # engine -> TensorRT's verdict as JSON


class TensorRTVerdicts:
    """The verdicts made so far, by the parameters they were made for."""

    def __init__(self, summary: SummaryTab, shown_params: Callable[[], ConversionParams],
                 on_new: Callable[[], None], background: bool):
        self.by_params: dict[ConversionParams, Verdicts] = {}
        self._summary = summary
        self._shown_params = shown_params  # the parameters the app shows now
        self._on_new = on_new
        self._background = background
        self._runner = TaskRunner(self._progress, self._done, self._failed, lambda: None)

    @property
    def busy(self) -> bool:
        return self._runner.busy

    def start(self, session: ConversionSession, params: ConversionParams) -> None:
        self._summary.tensorrt_progress("TensorRT verdicts: starting")
        self._runner.start(partial(steps.tensorrt_verdicts, session, params),
                           background=self._background)

    def wait(self, timeout: float | None = None) -> None:
        self._runner.wait(timeout)

    def forget(self) -> None:
        """Another model: the verdicts kept are not its."""
        self.by_params.clear()
        self._summary.tensorrt_progress("")

    def _progress(self, fraction: float, message: str) -> None:
        self._summary.tensorrt_progress(f"{fraction:.0%} {message}")

    def _done(self, value: tuple[ConversionParams, Verdicts]) -> None:
        params, verdicts = value
        self.by_params[params] = verdicts
        built = sum(v["built"] for v in verdicts.values())
        # The verdict box shows them while these settings are shown; the note says when they
        # belong to settings changed in the meantime.
        current = params == self._shown_params()
        self._summary.tensorrt_progress(
            "" if current else f"TensorRT built {built} of {len(verdicts)} engines of settings "
            "changed since (set them back to see them)")
        self._on_new()

    def _failed(self, exc: BaseException) -> None:
        self._summary.tensorrt_progress(error_line(exc), error=True)


def error_line(exc: BaseException) -> str:
    """A step's error as one line: ours as they are, others with their type."""
    if isinstance(exc, WorkbenchError):
        return str(exc)
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
