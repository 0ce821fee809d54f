"""TensorRT's verdicts in the app: made in the background with a runner of their own (the
controls stay live); the controller keeps them with the model and parameters they were made
for."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.ui import steps
from workbench.ui.tasks import TaskRunner
from workbench.words import counted

Verdicts = dict[str, dict]  # engine -> TensorRT's verdict as JSON
Progress = Callable[[str, bool], None]
Made = Callable[[ConversionSession, ConversionParams, Verdicts], None]


class TensorRTVerdicts:
    """One run of verdicts at a time; `on_made(session, params, verdicts)` when it ends."""

    def __init__(self, progress: Progress, shown_params: Callable[[], ConversionParams],
                 on_made: Made, background: bool):
        self._progress_line = progress
        self._shown_params = shown_params  # the parameters the app shows now
        self._on_made = on_made
        self._background = background
        self._session: ConversionSession | None = None  # the model they are being made for
        self._runner = TaskRunner(self._progress, self._done, self._failed, lambda: None)

    @property
    def busy(self) -> bool:
        return self._runner.busy

    def start(self, session: ConversionSession, params: ConversionParams) -> None:
        self._session = session
        self._progress_line("TensorRT verdicts: starting", False)
        self._runner.start(partial(steps.tensorrt_verdicts, session, params),
                           background=self._background)

    def wait(self, timeout: float | None = None) -> None:
        self._runner.wait(timeout)

    def forget(self) -> None:
        """Another model: verdicts still being made are not its."""
        self._session = None
        self._progress_line("", False)

    def _progress(self, fraction: float, message: str) -> None:
        if self._session is not None:
            self._progress_line(f"{fraction:.0%} {message}", False)

    def _done(self, value: tuple[ConversionParams, Verdicts]) -> None:
        params, verdicts = value
        if self._session is None:
            return
        built = sum(v["built"] for v in verdicts.values())
        # The verdict box shows them while these settings are shown; the note says when they
        # belong to settings changed in the meantime.
        current = params == self._shown_params()
        self._progress_line(
            "" if current else f"TensorRT built {built} of "
            f"{counted(len(verdicts), 'engine')} of settings changed since (set them back to "
            "see them)", False)
        self._on_made(self._session, params, verdicts)

    def _failed(self, exc: BaseException) -> None:
        if self._session is not None:
            self._progress_line(error_line(exc), True)


def error_line(exc: BaseException) -> str:
    """A step's error as one line: ours as they are, others with their type."""
    if isinstance(exc, WorkbenchError):
        return str(exc)
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
