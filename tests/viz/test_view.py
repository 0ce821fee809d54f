"""One view of a conversion: the app's tabs and the HTML report render the same ConversionView."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.checks.conversion_check import ConversionCheck, check_conversion
from workbench.checks.inputs import random_inputs
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import recommend_minimum_segment_size
from workbench.conversion.session import ConversionSession
from workbench.profiling.engines import native_and_engines
from workbench.ui.graph_tab import GraphTab
from workbench.ui.store import ExperimentStore, Run
from workbench.ui.tabs import (
    ChartsTab,
    NonconversionTab,
    ProfileTab,
    RunsTab,
    SummaryTab,
    ValidationTab,
    headline_html,
)
from workbench.viz.html_report import html_report
from workbench.viz.view import build_view, sweep_limit


def _tanh_chain(x, steps: int, seed: int):
    import tensorflow as tf

    for i in range(steps):
        x = tf.tanh(x * tf.constant(1.0 + 0.01 * (i + seed), shape=[1, 4]))
    return x


@pytest.fixture(scope="module")
def two_big_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two segments of 105 and 120 effective nodes, split by an Erfc TF-TRT rejects."""
    import tensorflow as tf

    class TwoChains(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": _tanh_chain(tf.math.erfc(_tanh_chain(x, 35, 0)), 40, 100)}

    module = TwoChains()
    path = tmp_path_factory.mktemp("models") / "two_big_segments"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.mark.slow
def test_app_and_report_recommend_the_same_beyond_64(two_big_segments: Path,
                                                     tmp_path: Path) -> None:
    from workbench.ui import Workbench

    params = ConversionParams()
    session = ConversionSession.open(str(two_big_segments))
    sizes = sorted(s.effective_size for s in session.segmentation(params).segments)
    assert sizes == [105, 120]
    # The old report swept 1..64: two engines everywhere, so "fewest" stayed at the current 3.
    old = recommend_minimum_segment_size(session.sweep(params, range(1, 65)), 3)
    assert old.fewest_engines == 3

    app = Workbench(str(two_big_segments), store=tmp_path / "runs", background=False)
    assert app.error is None and len(app.sweep) == sweep_limit(120) == 121
    fewest = app.view.recommendation.fewest_engines
    assert fewest == 106  # one engine (the 120-node one), the value closest to the current
    page = html_report(session, params)
    shown = re.search(r"<b>Fewest engines: (\d+)</b>", page)
    assert shown is not None and int(shown.group(1)) == fewest
    assert app.controls.minimum_segment_size.max == 121  # the slider reaches it too


@pytest.fixture(scope="module")
def tiny_session(tiny_saved_model: Path) -> ConversionSession:
    return ConversionSession.open(str(tiny_saved_model))


def test_view_holds_what_both_renderers_show(tiny_session: ConversionSession) -> None:
    view = build_view(tiny_session, ConversionParams(minimum_segment_size=2))
    result = view.result
    assert view.headline.engines == len(result.engines) == 1
    assert view.headline.percent_converted == result.percent_converted
    assert [r.params.minimum_segment_size for r in view.sweep] == list(range(1, 17))
    assert view.recommendation.current == 2
    assert list(view.op_histogram["op"]) == sorted(result.engines[0].native_ops)
    assert "Total number of TensorRT engines: 1" in view.summary_text
    assert "TensorRT unsupported/non-converted OP Report" in view.nonconversion_text
    assert not view.check_is_current and view.engine_names == (result.engines[0].name,)
    assert "<b>1 TensorRT engine</b> ·" in headline_html(view.headline)


@pytest.fixture(scope="module")
def tiny_check(tiny_session: ConversionSession) -> ConversionCheck:
    """A check of the tiny model at minimum_segment_size=2."""
    return check_conversion(tiny_session, ConversionParams(minimum_segment_size=2),
                            batch_sizes=[1], batches=1, iterations=2)


def test_report_says_when_its_check_is_of_other_settings(
        tiny_session: ConversionSession, tiny_check: ConversionCheck) -> None:
    stale = "measured with other settings"
    assert stale not in html_report(tiny_session, ConversionParams(minimum_segment_size=2),
                                    tiny_check)
    assert stale in html_report(tiny_session, ConversionParams(), tiny_check)


def test_each_tab_updates_from_a_view_without_the_app(
        tiny_session: ConversionSession, tiny_check: ConversionCheck, tmp_path: Path) -> None:
    params = ConversionParams(minimum_segment_size=2)
    check = tiny_check
    profile = native_and_engines(tiny_session, params, random_inputs(tiny_session, 1), runs=1)
    view = build_view(tiny_session, params, check=check, profile=profile)
    engine = view.result.engines[0].name

    summary = SummaryTab()
    summary.update(view)
    assert "Total number of TensorRT engines: 1" in summary.html.value
    assert "<td>MatMul</td>" in summary.html.value
    nonconversion = NonconversionTab()
    nonconversion.update(view)
    assert "Placeholder" in nonconversion.html.value
    graph = GraphTab()
    graph.update(view)
    assert graph.svg.startswith("<svg") and engine in graph.svg
    clicks: list[str] = []
    charts = ChartsTab(on_blocking=lambda: clicks.append("blocking"))
    charts.update(view)
    assert set(charts.figures) == {"sweep", "engine_sizes"}
    charts.blocking_button.click()
    validation = ValidationTab(on_check=lambda: clicks.append("check"))
    validation.update(view)
    assert "PASSED" in validation.note.value and validation.stale.value == ""
    validation.update(build_view(tiny_session, ConversionParams(), check=check))
    assert "other settings" in validation.stale.value
    validation.batch_sizes.value = "1, 8"
    assert validation.options()["batch_sizes"] == [1, 8]
    profiling = ProfileTab(on_profile=lambda: clicks.append("profile"))
    profiling.update(view)
    assert "native TF on CPU" in profiling.note.value and profiling.table is profile
    store = ExperimentStore(tmp_path / "runs")
    runs = RunsTab(store, on_keep=clicks.append)
    store.add(Run.from_result(view.result, params, "kept"))
    runs.update(view)
    runs.show()
    assert "kept" in runs.table.value and "runs" in runs.figures
    runs.name.value = " mine "
    runs.button.click()
    assert clicks == ["blocking", "mine"]


def test_controls_take_a_params_dict_and_fire_once() -> None:
    from workbench.errors import WorkbenchError
    from workbench.ui.controls import Controls

    controls = Controls(ConversionParams())
    calls: list[ConversionParams] = []
    controls.observe(lambda: calls.append(controls.params()))
    controls.set_params({"minimum_segment_size": 7, "precision_mode": "FP16",
                         "denylist": ["Conv2D"], "use_dynamic_shape": True})
    assert len(calls) == 1
    assert calls[0] == ConversionParams(minimum_segment_size=7, precision_mode="FP16",
                                        denylist=("Conv2D",), use_dynamic_shape=True,
                                        dynamic_shape_profile_strategy="Range")
    assert not controls.profile_strategy.disabled
    with pytest.raises(WorkbenchError, match="unknown conversion parameters \\['min_size'\\]"):
        controls.set_params({"min_size": 3})
    controls.minimum_segment_size.value = 4  # one widget, one change
    assert len(calls) == 2
