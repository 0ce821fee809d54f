"""Long steps (loading a model, what-if analysis, big graphs) run in a background thread.

A task is a generator: it yields `(fraction, message)` progress updates and returns its result.
Cancelling is checked at every yield, so a step that cannot be interrupted (Grappler) still ends
the task at its next progress point and its result is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Any

Progress = tuple[float, str]
TaskBody = Callable[[], Generator[Progress, None, Any]]


class Cancelled(Exception):
    """Raised inside a task when the user cancelled it."""


class TaskRunner:
    """Runs one task at a time and reports progress, completion, cancellation and errors."""

    def __init__(
        self,
        on_progress: Callable[[float, str], None],
        on_done: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        on_cancelled: Callable[[], None],
    ):
        self._on_progress = on_progress
        self._on_done = on_done
        self._on_error = on_error
        self._on_cancelled = on_cancelled
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, body: TaskBody, background: bool = True) -> None:
        """Starts `body`; with `background=False` it runs in the caller's thread (tests)."""
        if self.busy:
            raise RuntimeError("a task is already running; cancel it or wait for it")
        self._cancel.clear()
        if background:
            self._thread = threading.Thread(target=self._run, args=(body,), daemon=True)
            self._thread.start()
        else:
            self._run(body)

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, body: TaskBody) -> None:
        steps = body()
        try:
            while True:
                fraction, message = next(steps)
                if self._cancel.is_set():
                    steps.close()
                    self._on_cancelled()
                    return
                self._on_progress(fraction, message)
        except StopIteration as stop:
            if self._cancel.is_set():
                self._on_cancelled()
            else:
                self._on_done(stop.value)
        except Cancelled:
            self._on_cancelled()
        except BaseException as exc:  # shown in the app; the kernel must survive
            self._on_error(exc)
