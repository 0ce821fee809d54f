"""Progress as widgets (workbench/ui/progress_bars.py): the bars over the lower layers'
callbacks, and their text fallback outside a kernel."""

from __future__ import annotations

import pytest

from workbench.tuning.progress import Progress
from workbench.tuning.record import TrialRecord
from workbench.ui.progress_bars import trial_bar, tune, widget_progress, widget_updater


def test_widget_progress_outside_a_kernel_falls_back_to_text(capsys):
    update = widget_progress("native TF")
    update(3, 3)
    assert "native TF [" in capsys.readouterr().err


def test_widget_updater_drives_an_int_progress():
    import ipywidgets

    bar = ipywidgets.IntProgress()
    update = widget_updater(bar)
    update(1, 4)
    assert (bar.value, bar.max) == (1, 4)
    update(4, 4)
    assert (bar.value, bar.max, bar.bar_style) == (4, 4, "success")


def _record(trial_id: str) -> TrialRecord:
    params = {"precision_mode": "FP16", "minimum_segment_size": 3}
    return TrialRecord(trial_id, params, "failed", "no engine")


def test_trial_bar_shows_the_search_and_follows_each_trial(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    bar = Progress(2, trial_bar())
    (box,) = shown
    progress, label = box.children
    assert (progress.value, progress.max, label.value) == (0, 2, "2 trials to run")
    bar.update(_record("a"))
    assert progress.value == 1
    assert label.value == "[1/2] FP16 min 3: failed (no engine)"


def test_text_display_writes_a_line_per_finished_trial(capsys):
    bar = Progress(1)
    bar.update(_record("a"))
    assert capsys.readouterr().err == "workbench tune: [1/1] FP16 min 3: failed (no engine)\n"
    Progress(1, False).update(_record("b"))
    assert capsys.readouterr().err == ""


def test_workbench_tune_is_the_search_with_its_signature():
    import inspect

    import workbench
    from workbench.tuning import driver

    assert workbench.tune is tune
    assert inspect.signature(tune) == inspect.signature(driver.tune)
    with pytest.raises(Exception, match="timeout"):
        tune("no_such_model", timeout=0)
