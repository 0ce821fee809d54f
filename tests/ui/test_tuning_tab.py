"""The app's Tune tab running real searches on a real LocalCluster: streaming, apply, cancel."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.errors import WorkbenchError
from workbench.ui import Workbench
from workbench.ui.tune_tab import TuneTab

pytestmark = pytest.mark.slow


def view_of(model: Path | str, params: ConversionParams | None = None) -> SimpleNamespace:
    """What the tab reads of the app's view: the model path and the current parameters."""
    return SimpleNamespace(result=SimpleNamespace(model=str(model)),
                           params=params or ConversionParams())


def body_rows(table: str) -> int:
    """The rows of an HTML table's body."""
    return table.split("<tbody>")[-1].count("<tr>")


def test_search_streams_into_the_tab_and_applies_to_the_app(tmp_path: Path) -> None:
    model = sample_models.build("quickstart_mlp")
    app = Workbench(model, store=tmp_path / "runs", background=False,
                    params=ConversionParams(precision_mode="FP32", minimum_segment_size=3))
    tab = app.tune_tab
    index = app.tabs.titles.index("Tune")
    assert app.tabs.children[index] is tab.widget
    assert tab.model == str(model)
    assert tab.precisions.value == ("FP32", "FP16") and tab.thresholds.value == "3, 5"
    tab.thresholds.value, tab.workers.value = "2", 2
    tables: list[str] = []
    tab.table.observe(lambda change: tables.append(change["new"]), names="value")
    statuses: list[str] = []
    applicable: list[bool] = []  # whether Apply could be pressed at each status line
    tab.status.observe(lambda change: (statuses.append(change["new"]),
                                       applicable.append(not tab.apply_button.disabled)),
                       names="value")
    tab.start()  # the app's background=False: the search runs in this thread
    assert [r.status for r in tab.records] == ["ok", "ok"], tab.status.value
    # While trials were still arriving, none could be applied; once done, one can.
    trial_lines = [i for i, s in enumerate(statuses) if "/2 trials: " in s]
    assert len(trial_lines) == 2 and not any(applicable[i] for i in trial_lines), statuses
    # Each trial redrew the table as it finished: one row, then two.
    assert [body_rows(t) for t in tables[:2]] == [1, 2]
    assert "done: 2 trials, all ok" in tab.status.value
    assert any("2 trials on 2 local workers" in s for s in statuses), statuses  # no "(s)"
    assert set(tab.figures) == {"pareto", "latency", "conversion"}
    plotted = {t for trace in tab.figures["pareto"].data
               for t in (trace.meta or {}).get("trials", ())}
    assert plotted == {r.trial_id for r in tab.records}
    chosen = tab.result.recommended
    assert chosen is not None and "Recommended: " in tab.recommendation.value
    assert tab.choice.value == chosen["trial_id"] and len(tab.choice.options) == 2
    assert "onnxruntime on CPU" in tab.table.value  # what measured each trial
    assert not tab.apply_button.disabled

    other = next(r for r in tab.records if r.trial_id != chosen["trial_id"])
    tab.apply(other.trial_id)
    assert app.params.precision_mode == other.params["precision_mode"]
    assert app.params.minimum_segment_size == 2
    assert app.result.params.precision_mode == other.params["precision_mode"]  # reconverted
    assert "applied" in tab.status.value
    assert tab.thresholds.value == "2"  # the app's refresh leaves the user's grid alone

    # The trials were stored: a second search reuses them without a cluster.
    started = time.perf_counter()
    tab.start()
    assert all(r.reused for r in tab.records) and len(tab.records) == 2
    assert time.perf_counter() - started < 5

    # Another model: its trials are not this one's, and cannot be applied to it.
    records = tab.records
    app.open(sample_models.build("detector"))
    assert tab.records == [] and tab.choice.options == () and tab.apply_button.disabled
    with pytest.raises(WorkbenchError, match="no finished trial"):
        tab.apply(other.trial_id)
    assert tab.model == str(sample_models.build("detector"))

    # Back to the first model: the trials stored for it show again, ready to apply.
    app.open(model)
    assert {r.trial_id for r in tab.records} == {r.trial_id for r in records}
    assert "2 stored trials of this model" in tab.status.value
    assert body_rows(tab.table.value) == 2 and not tab.apply_button.disabled


def test_cancel_keeps_the_finished_trials(tmp_path: Path) -> None:
    applied: list[dict] = []
    tab = TuneTab(applied.append, store=tmp_path / "runs")
    tab.update(view_of(sample_models.build("quickstart_mlp")))
    tab.precisions.value, tab.thresholds.value = ("FP32", "FP16"), "1, 2, 3, 4, 5"
    tab.start()
    assert tab.cancel_button.disabled is False and tab.start_button.disabled is True
    deadline = time.monotonic() + 180
    while not tab.records and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tab.records, tab.status.value
    # Half-finished: the trials so far can be seen, not applied or chosen from.
    assert tab.apply_button.disabled and tab.choice.disabled
    with pytest.raises(WorkbenchError, match="a search is running"):
        tab.apply(tab.records[0].trial_id)
    tab.cancel()
    tab.wait(60)
    assert not tab._runner.busy
    assert "cancelled" in tab.status.value and "(kept)" in tab.status.value
    assert 1 <= len(tab.records) < 10
    assert tab.start_button.disabled is False and tab.cancel_button.disabled is True
    assert body_rows(tab.table.value) == len(tab.records)
    assert not tab.apply_button.disabled and not tab.choice.disabled
    tab.apply(tab.records[0].trial_id)
    assert applied == [tab.records[0].params]


def test_a_bad_grid_or_a_model_not_on_disk_is_one_clear_line(tmp_path: Path) -> None:
    tab = TuneTab(lambda _params: None, store=tmp_path / "runs")
    tab.update(view_of("Sequential"))  # a Keras model object's view names only its class
    tab.start()
    assert "tuning needs the model on disk" in tab.status.value and not tab._runner.busy
    tab.update(view_of(sample_models.build("quickstart_mlp")))
    tab.thresholds.value = "2, three"
    tab.start()
    assert "minimum_segment_size takes whole numbers" in tab.status.value
    tab.thresholds.value, tab.precisions.value = "2", ()
    tab.start()
    assert "choose at least one value of precision_mode" in tab.status.value
    tab.precisions.value, tab.batch_sizes.value = ("FP32",), "0"
    tab.start()
    assert "batch sizes" in tab.status.value and not tab._runner.busy
    assert not tab.records
    with pytest.raises(Exception, match="no finished trial"):
        tab.apply("nope")


def test_an_unreachable_scheduler_stops_the_search_with_one_line(tmp_path: Path) -> None:
    tab = TuneTab(lambda _params: None, store=tmp_path / "runs", background=False)
    tab.update(view_of(sample_models.build("quickstart_mlp")))
    tab.scheduler.value = "tcp://127.0.0.1:9"  # nothing listens on the discard port
    tab.start()
    assert "the search stopped: " in tab.status.value and "127.0.0.1:9" in tab.status.value
    assert "wb-error" in tab.status.value and "Traceback" not in tab.status.value
    assert tab.start_button.disabled is False and not tab.records
