"""The workbench's state and actions without widgets: one model's truth, headless."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sample_models
from workbench.ui.controller import WorkbenchController

pytestmark = pytest.mark.slow


class Recorder(WorkbenchController):
    """The controller with its status lines kept, as a script would print them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[tuple[str, bool]] = []

    def on_status(self, text: str, error: bool) -> None:
        self.lines.append((text, error))


def test_the_controller_needs_no_widgets() -> None:
    code = "import sys, workbench.ui.controller; print('ipywidgets' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    assert found.stdout.strip() == "False"


def test_a_headless_controller_opens_converts_measures_and_switches(tmp_path: Path) -> None:
    app = Recorder(sample_models.build("detector"), store=tmp_path / "runs", background=False)
    app.start()
    assert app.model_name == "detector" and len(app.result.engines) == 3
    assert app.lines[-1][0].startswith("ready")
    app.set_params({"minimum_segment_size": 20})
    assert len(app.result.engines) == 1
    app.analyse_blocking_ops()
    assert app.measured.blocking is not None and app.view.blocking is app.measured.blocking

    app.open(tmp_path / "missing")
    assert app.model_name == "detector" and len(app.result.engines) == 1
    assert app.measured.blocking is not None  # the open model's, kept
    text, error = app.lines[-1]
    assert error and text.startswith("Could not open missing: ")
    assert text.endswith("Still showing detector.")

    app.open(sample_models.build("digits_cnn"))
    assert app.model_name == "digits_cnn" and app.measured.blocking is None
    assert app.view.blocking is None and app.error is None


class Impatient(Recorder):
    """Presses 'Profile' while a check is still running, as an impatient user would."""

    pressed = False

    def on_progress(self, fraction: float) -> None:
        if self.check_running and not self.pressed:
            self.pressed = True
            self.profile(runs=1)


def test_a_step_started_while_another_runs_waits_its_turn(tmp_path: Path) -> None:
    app = Impatient(sample_models.build("quickstart_mlp"), store=tmp_path / "runs")
    app.check_running = False
    app.start()
    app.wait(300)
    app.check_running = True
    app.run_check()
    app.wait(300)
    assert app.pressed
    assert ("busy: profiling waits until the running step ends (or cancel it)", True) in app.lines
    assert app.measured.check is not None and app.measured.profile is None  # the check's own
    assert app.lines[-1] == ("ready", False), app.lines
