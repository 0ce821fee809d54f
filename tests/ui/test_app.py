"""The notebook workbench driven from Python: change a control, check tables, charts, graph."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.durable_files import format_bytes
from workbench.ui import Workbench
from workbench.ui.store import ExperimentStore
from workbench.viz.hierarchy import ROOT
from workbench.viz.scope_graphs import FRAME, GROUP_BOX, HIGHLIGHT
from workbench.words import has_snake_case

pytestmark = pytest.mark.slow


@pytest.fixture
def app(tmp_path: Path) -> Workbench:
    """The detector sample: small, with rejected ops; runs load synchronously."""
    return Workbench(sample_models.build("detector"), store=tmp_path / "runs", background=False)


def engines_line(app: Workbench) -> str:
    return next(line for line in app.summary_tab.html.value.splitlines()
                if "Total number of TensorRT engines" in line)


def test_loads_and_shows_every_tab(app: Workbench) -> None:
    assert app.error is None and app.result is not None
    assert "[*] Total number of TensorRT engines: 3" in app.summary_tab.html.value
    summary = app.summary_tab.html.value
    assert "Op histogram per engine" in summary and "<td>Conv2D</td>" in summary
    # One device for every engine: said once above the table, not as a column.
    assert "all on device:GPU:0; click one" in summary and "<th>device</th>" not in summary
    assert "CombinedNonMaxSuppression" in app.nonconversion_tab.html.value
    assert f"TensorFlow {app.result.tensorflow_version}</span>" in app.headline.value
    assert ("Cannot Convert Bilinear Resize when align_corners=False"
            in app.nonconversion_tab.html.value)
    assert app.graph_tab.html.value.count("<svg") == 1 and "TRTEngineOp_000_001" in app.svg
    assert app.tabs.titles == ("Summary", "Non-conversion report", "Segment graph", "Charts",
                               "Validation", "Runs", "Profiling", "Tune", "Export")
    assert set(app.figures) >= {"sweep", "engine_sizes"}
    assert not any(w.disabled for w in app.controls.all if w is not app.controls.profile_strategy)
    assert "Conv2D" in app.controls.denylist.allowed_tags
    assert app.machine is not None and app.machine.can_run  # the footer: workbench.doctor()
    assert "TensorFlow 2." in app.footer.value and "engines: onnxruntime on CPU" in app.footer.value
    assert "dot 2." in app.footer.value and "Chromium" in app.footer.value  # its title: all


def test_slider_updates_summary_chart_and_graph(app: Workbench) -> None:
    svg_before, sweep_before = app.svg, app.figures["sweep"]
    app.controls.minimum_segment_size.value = 20  # the detector's engines: 17, 19, 25 nodes
    assert "[*] Total number of TensorRT engines: 1" in engines_line(app)
    assert app.result.params.minimum_segment_size == 20
    assert app.svg != svg_before and "TRTEngineOp_000_001" not in app.svg
    assert app.figures["sweep"] is not sweep_before
    assert app.timings["summary_and_charts_ms"] > 0


def test_precision_dynamic_shape_denylist_and_engine_limit(app: Workbench) -> None:
    controls = app.controls
    controls.precision.value = "FP16"
    assert app.result.params.precision_mode == "FP16"
    controls.dynamic_shape.value = True
    assert not controls.profile_strategy.disabled
    assert "CombinedNonMaxSuppression" not in app.result.nonconversion
    controls.profile_strategy.value = "Optimal"
    assert app.result.params.dynamic_shape_profile_strategy == "Optimal"
    controls.denylist.value = ["Conv2D"]
    assert ("Denylisted with the env var TF_TRT_OP_DENYLIST"
            in app.nonconversion_tab.html.value.replace("<wbr>", ""))
    controls.max_engines.value = 1
    assert len(app.result.engines) == 1


def test_graph_views(app: Workbench) -> None:
    converted = app.svg
    app.graph_tab.choice.value = "Full"
    assert app.svg != converted
    app.graph_tab.engine.value = None
    app.graph_tab.choice.value = "One engine"  # none chosen: the first engine is drawn
    assert app.graph_tab.engine.value == "TRTEngineOp_000_000"
    assert "TRTEngineOp_000_001" not in app.svg and "TRTEngineOp_000_000" in app.svg


def test_graph_groups_open_close_search_and_report_rows(app: Workbench) -> None:
    tab = app.graph_tab
    tree = tab.tree
    assert tree is not None and tab.open is not None and tab.group.options
    gid = next(g for g, group in tree.groups.items() if g and group.leaves)
    tab.open_group(gid)
    assert gid in tab.open
    assert [c.description for c in tab.crumbs.children] == [
        label[-40:] for _, label in tree.breadcrumb(gid)]
    leaf = tree.groups[gid].leaves[0]
    assert tree.representative(leaf, tab.open) == leaf
    tab.close_below(ROOT)
    assert tab.open == {ROOT} and gid not in tab.open
    tab.search.value = "CombinedNonMaxSuppression"  # the detector's rejected NMS
    assert tab.highlight and HIGHLIGHT in app.svg
    # A click on a non-conversion report row (the message the browser sends) leads to its
    # nodes, highlighted, on the Segment graph tab.
    app.tabs.selected_index = 0
    index, row = next((i, r) for table, rows in app.nonconversion_tab.rows.items()
                      for i, r in enumerate(rows) if "Resize" in r[0])
    table = next(t for t, rows in app.nonconversion_tab.rows.items() if row in rows)
    assert f"wb-rows-{table}" in app.nonconversion_tab.html.value
    app.nonconversion_tab.html._handle_custom_msg({"table": table, "row": index}, [])
    assert app.tabs.selected_index == app.tab_list.index(tab)
    assert tab.highlight == {u.name for u in app.result.unconverted
                             if (u.op, u.reason) == row}
    assert all(tree.representative(n, tab.open) == n for n in tab.highlight)
    clicks_in_the_drawing_and_the_engine_table(app)  # the same app: one model load less


def clicks_in_the_drawing_and_the_engine_table(app: Workbench) -> None:
    tab, tree = app.graph_tab, app.graph_tab.tree
    assert tree is not None
    tab.close_below(ROOT)  # the detector's first view opens every group
    collapsed, _ = tree.visible(tab.open)
    gid = collapsed[0]
    assert f"<title>{GROUP_BOX}{gid}</title>" in app.svg  # what a click sends back
    tab.html._handle_custom_msg({"click": f"{GROUP_BOX}{gid}"}, [])
    assert gid in tab.open and f"<title>{FRAME}{gid}</title>" in app.svg
    assert tab.html.focus == f"{FRAME}{gid}"  # the drawing centres the opened group
    tab.html._handle_custom_msg({"click": f"{FRAME}{gid}"}, [])  # its frame's title closes it
    assert gid not in tab.open
    node = next(n for n in tab.tree.op_of if tree.representative(n, tab.open) == n)
    tab.html._handle_custom_msg({"click": node}, [])
    assert tab.highlight == {node} and node in tab.note.value and HIGHLIGHT in app.svg
    tab.html._handle_custom_msg({"click": "legend"}, [])  # not a box of the graph: ignored
    assert tab.highlight == {node}
    # An engine table row: the engine's box, highlighted, its time on the chosen GPU in it.
    app.tabs.selected_index = 0
    name = app.summary_tab._engine_names[1]
    app.summary_tab.html._handle_custom_msg({"table": "engines", "row": 1}, [])
    assert app.tabs.selected_index == app.tab_list.index(tab) and tab.highlight == {name}
    assert tab.html.focus == name and f"{name}: " in tab.note.value
    app.target_gpu.set("T4")  # the app's one target GPU picker
    assert "ms on Tesla T4 (estimated)" in app.svg and "(estimated)" in tab.note.value


def test_runs_survive_a_new_app_and_compare(app: Workbench, tmp_path: Path) -> None:
    app.keep_run("default")
    app.controls.minimum_segment_size.value = 20
    app.runs_tab.name.value = "large segments only"
    app.runs_tab.button.click()
    assert app.runs_tab.name.value == ""  # kept: the box is ready for the next run's name
    again = Workbench(sample_models.build("detector"), store=tmp_path / "runs",
                      background=False)
    table = again.store.table()
    assert list(table["name"]) == ["default", "large segments only"]
    assert list(table["engines"]) == [3, 1]
    assert "large segments only" in again.runs_tab.table.value and "runs" in again.figures


def test_corrupt_store_is_reported_and_readable_runs_kept(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path / "runs")
    app = Workbench(sample_models.build("detector"), store=store, background=False)
    app.keep_run("good")
    (tmp_path / "runs" / "run-broken.json").write_text('{"format": 1, "run_id": ')
    app.keep_run("after the damage")
    assert "run-broken.json" in app.runs_tab.problems.value
    assert "good" in app.runs_tab.table.value and "after the damage" in app.runs_tab.table.value
    assert (tmp_path / "runs" / "run-broken.json").exists()  # left for the user to inspect


def test_bad_model_path_shows_the_error_in_the_app(tmp_path: Path) -> None:
    app = Workbench(tmp_path / "no-such-model", store=tmp_path / "runs", background=False)
    assert app.result is None and "No such path" in app.error
    assert "Could not open the model" in app.summary_tab.html.value
    assert "No model is open" in app.headline.value
    assert "TensorFlow 2." in app.footer.value  # the machine's facts, whatever the model
    assert all(w.disabled for w in app.controls.all)


def test_loading_in_the_background_can_be_cancelled(tmp_path: Path) -> None:
    app = Workbench(sample_models.build("resnet50"), store=tmp_path / "runs")
    app._runner.cancel()
    app.wait(120)
    assert app.session is None and "cancelled" in app.status.value


def test_background_loading_then_ready(tmp_path: Path) -> None:
    app = Workbench(sample_models.build("quickstart_mlp"), store=tmp_path / "runs",
                    params=ConversionParams(minimum_segment_size=2))
    app.wait(120)
    assert app.result is not None and "ready" in app.status.value
    assert app.controls.minimum_segment_size.value == 2


def test_profiling_tab(app: Workbench) -> None:
    assert "Nothing profiled on this model yet" in app.profile_tab.note.value
    during: list[bool] = []  # the tabs' actions and Open, off while the profile runs
    app.status.observe(lambda change: "Profiling" in change["new"] and during.extend(
        b.disabled for b in [*app.action_buttons, app.open_button]), names="value")
    app.profile(runs=1)
    assert during and all(during), during
    assert not any(b.disabled for b in [*app.action_buttons, app.open_button])
    table = app.profile_table
    assert set(table["source"]) == {"tensorflow", "onnxruntime"}
    assert "native TF on CPU" in app.profile_tab.note.value
    assert "profile: native TF vs engines" in app.figures


def test_validation_tab_measures_and_kept_runs_store_the_figures(app: Workbench) -> None:
    app.validation_tab.batch_sizes.value = "1, 4"
    app.validation_tab.whole.value = True  # the detector exports whole (its NMS too)
    app.target_gpu.set("T4")  # estimated apart from what was measured
    app.validation_tab.button.click()
    app.target_gpu.set(None)
    check = app.check
    assert "Tesla T4 (estimated), batch 4" in app.validation_tab.note.value
    assert check is not None and check.validation.batches == 2
    assert sorted(set(check.latency["batch_size"])) == [1, 4]
    assert "PASSED: FP32 converted vs native TensorFlow" in app.validation_tab.note.value
    assert "whole model" in app.validation_tab.note.value
    outputs = app.validation_tab.outputs.value
    assert all(f"<td>{o.name}</td>" in outputs for o in check.validation.outputs)
    assert "<th>reason</th>" not in outputs  # every output passed: no empty column
    assert "latency" in app.figures and app.validation_tab.stale.value == ""
    # The per-engine answer sits under the outputs, above the latency chart (in sight of its
    # button), not past it.
    shown = list(app.validation_tab.widget.children)
    assert shown.index(app.validation_tab.per_engine_note) < shown.index(app.validation_tab.out)
    names = {trace.name for trace in app.figures["latency"].data}
    assert any(n.startswith("native TF: tensorflow on CPU") for n in names)
    assert any(n.startswith("converted: onnxruntime engines + tensorflow on CPU") for n in names)
    run = app.keep_run("checked")
    assert run.metrics["validation_passed"] is True
    assert run.metrics["engines_backend"] == "onnxruntime"
    assert run.metrics["converted_ms_b4"] > 0 and run.metrics["max_abs_error"] < 1e-3
    assert not any("estimated" in key for key in run.metrics)  # measured figures only
    app.controls.minimum_segment_size.value = 12  # other settings: stale, not stored
    assert "other settings" in app.validation_tab.stale.value
    assert app.keep_run("unchecked").metrics == {}
    table = app.store.table()
    assert table.set_index("name").loc["checked", "speedup_b1"] > 0
    app.validation_tab.batch_sizes.value = "one"
    app.validation_tab.button.click()
    assert "batch sizes must be whole numbers" in app.status.value


def test_loading_ends_on_one_short_line_then_from_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = sample_models.build("quickstart_mlp")
    messages = []

    def load(store: str) -> Workbench:
        app = Workbench(model, store=tmp_path / store, background=False)
        messages.append(app.status.value)
        return app

    first, second = load("a"), load("b")
    assert re.search(r"ready \(opened in \d+\.\d\d s\)", messages[0]), messages[0]
    assert re.search(r"ready \(opened from the cache in \d+\.\d\d s\)", messages[1])
    assert second.summary_tab.html.value == first.summary_tab.html.value
    second.refresh()
    assert "opened" not in second.status.value  # shown once, when opening ends


def test_export_tab_writes_the_current_settings_and_shows_the_text(
        app: Workbench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app.controls.precision.value = "FP16"
    tab = app.export_tab
    assert "FP16" in tab.settings.value
    monkeypatch.chdir(tmp_path)  # the notebook's folder: the default file goes in a subfolder
    tab.button.click()
    assert (tmp_path / "workbench_exports" / "convert_tftrt.py").is_file()
    assert not (tmp_path / "convert_tftrt.py").exists()
    tab.path.value = str(tmp_path / "convert_tftrt.py")
    tab.button.click()
    written = tmp_path / "convert_tftrt.py"
    assert app.error is None and written.is_file()
    assert "precision_mode=trt.TrtPrecisionMode.FP16" in tab.text
    assert f"{written} ({format_bytes(written.stat().st_size)})" in tab.result.value  # disk
    assert "from tensorflow.python.compiler.tensorrt import trt_convert as trt" in tab.result.value
    tab.format.value = "trtexec"
    assert tab.path.value == str(tmp_path / "trtexec.sh")  # the default name follows
    tab.path.value = str(tmp_path / "missing" / "x.sh")
    tab.button.click()
    assert "does not exist" in app.status.value and not (tmp_path / "missing").exists()


def test_picker_opens_samples_by_name_and_paths(tmp_path: Path) -> None:
    """The model picker: a name of `models` builds (or reuses) that sample; a typed path opens;
    the previous model's measurements go; the notes say which knobs cannot change anything."""
    built: list[str] = []

    def detector() -> Path:
        built.append("detector")
        return sample_models.build("detector")

    app = Workbench("detector", models={"detector": detector}, store=tmp_path / "runs",
                    background=False)
    assert built == ["detector"] and app.error is None and len(app.result.engines) == 3
    assert app.picker.value == "detector" and list(app.picker.options) == ["detector"]
    notes = app.knob_notes.value
    assert "minimum_segment_size: every value from 1 to" in notes
    # FP16 splits the detector's Casts, dynamic shape converts its NMS: both matter here.
    assert "precision_mode" not in notes and "use_dynamic_shape" not in notes
    app.profile()
    assert app.profile_table is not None
    app.picker.value = str(sample_models.build("digits_cnn"))
    app.open_button.click()
    assert app.error is None and "digits_cnn" in str(app.result.model)
    assert app.profile_table is None  # the detector's profile does not describe this model
    assert "precision_mode: FP32, FP16 and INT8 give these same engines" in app.knob_notes.value
    app.controls.precision.value = "INT8"
    assert "INT8 needs calibration data" in app.knob_notes.value
    app.open(tmp_path / "missing")
    assert app.error and "missing" in app.error


def test_one_truth_per_model(app: Workbench, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """What was measured on one model never shows as another's: a switch clears it (kept
    runs stay in the store, under their model's name); a failed open keeps the open model."""
    monkeypatch.chdir(tmp_path)
    app.run_check(batches=1)
    app.keep_run("detector run")
    app.export("trtexec", "detector.sh")
    assert "PASSED" in app.validation_tab.note.value and "latency" in app.figures
    assert "detector.sh" in app.export_tab.result.value
    assert "detector run" in app.runs_tab.table.value
    assert "detector" in app.headline.value

    app.controls.denylist.value = ["CombinedNonMaxSuppression"]  # the detector's only
    app.open(sample_models.build("digits_cnn"))
    assert app.model_name == "digits_cnn" and "digits_cnn" in app.headline.value
    assert list(app.controls.denylist.value) == [] and app.params.denylist == ()
    assert app.check is None and app.measured.export is None
    assert app.validation_tab.note.value == ""
    assert "Nothing measured on this model yet" in app.validation_tab.outputs.value
    assert "latency" not in app.figures and "runs" not in app.figures
    assert app.export_tab.result.value == ""
    assert "detector run" not in app.runs_tab.table.value
    assert "1 run of other models kept" in app.runs_tab.problems.value
    assert app.store.table()["name"].tolist() == ["detector run"]  # still kept

    headline = app.headline.value
    app.open(tmp_path / "missing")
    assert app.model_name == "digits_cnn" and app.headline.value == headline
    assert "Could not open missing" in app.status.value
    assert "Still showing digits_cnn" in app.status.value
    assert not any(w.disabled for w in app.controls.all if w is not app.controls.profile_strategy)


def test_tables_name_their_columns_in_words(app: Workbench) -> None:
    """Headers without internal names (snake_case), cells without None or NaN; the engine
    table's other columns in each row's details."""
    html = app.summary_tab.html.value
    headers = re.findall(r"<th>(.*?)</th>", html) + re.findall(r"<dt>(.*?)</dt>", html)
    assert "effective size (nodes)" in headers and "input shapes" in headers
    assert not [h for h in headers if has_snake_case(h)], headers
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert "None" not in cells and "nan" not in cells and "NaN" not in cells
    assert "<details><summary>more</summary>" in html


def test_long_cells_wrap_between_words_not_inside_them() -> None:
    """A node path or a list of rewrite names wraps after "/" or "_" (the Advice table cut
    `bool_expand_dims_before_cas|t`); short cells and the copied text stay as they are."""
    import pandas as pd

    from workbench.ui.tables import table_html

    path = "StatefulPartitionedCall/tiny_bert_1/self_attention_1/einsum/Einsum"
    html = table_html(pd.DataFrame([{"op": "Einsum", "reason": f"not supported, at {path}"}]))
    assert "<td>Einsum</td>" in html
    assert "self_<wbr>attention_<wbr>1/<wbr>einsum/<wbr>Einsum" in html
    assert path in html.replace("<wbr>", "")


def test_check_outputs_show_agreement_in_percent_and_reasons_only_when_one_fails() -> None:
    import pandas as pd

    from workbench.ui.tabs import CHECK_COLUMNS, outputs_html

    row = dict.fromkeys(CHECK_COLUMNS, 0.0) | {"name": "logits", "passed": True, "shape": "1, 10",
                                               "top1_agreement": 0.5, "reason": ""}
    passed = outputs_html(pd.DataFrame([row]))
    assert "<th>top-1 agreement (%)</th>" in passed and "<td>50</td>" in passed
    assert "<th>reason</th>" not in passed
    failed = outputs_html(pd.DataFrame([row, row | {"passed": False, "reason": "NaN in output"}]))
    assert "<th>reason</th>" in failed and "<td>NaN in output</td>" in failed
