"""Every notebook executes headless on a real kernel; its cells assert what they show, or (for
the notebooks rewritten as lessons) the checks below run in its kernel after its last cell."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import fixture_path
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
pytestmark = pytest.mark.slow


# Notebook 02's text and asserts show tiny_bert's engines under TF 2.21's graph.
TINY_BERT_GELU = pytest.mark.newest_stack(
    reason="TF <= 2.17 writes tiny_bert's GELU with Erf, which converts (2.21 with Erfc, "
    "rejected): other engine counts than the notebook explains")
NEWEST_STACK_NOTEBOOKS = {"02_minimum_segment_size": TINY_BERT_GELU}

# What a lesson shows, checked in its own kernel after it ran (kept out of the lesson's cells).
CHECKS = {
    "00_workbench": """
assert app.error is None and len(app.result.engines) == 13, app.result.engines
assert app.tabs.titles[-2:] == ("Tune", "Export") and len(app.tabs.titles) == 9
""",
    "01_quickstart": """
assert len(converter.result.engines) == 1
reasons = set(converter.report.nonconversion.reason)
assert 'The input "shape" for Reshape must be a constant in implicit batch mode.' in reasons
assert accuracy > 0.85
assert dynamic.result.percent_converted > converter.result.percent_converted
assert difference < 1e-4 and plain_difference < 1e-4
""",
    "02_minimum_segment_size": """
engines = [len(r.engines) for r in sweep]
converted = [r.converted_nodes for r in sweep]
assert all(a >= b for a, b in zip(converted, converted[1:])), converted  # only drops
assert engines[0] == 20 and engines[2] == 13 and engines[5] == 5 and engines[13] == 0
assert [sweep[i].total_nodes for i in (0, 2, 5)] == [256, 254, 251]  # the text's totals
assert (recommendation.fewest_engines, recommendation.moderate) == (6, 8)
assert dynamic.result.percent_converted > converter.result.percent_converted
""",
    "03_precision": """
split = dict(zip(table.precision, table["split casts"]))
assert split["FP16"] >= 1 and split["FP32"] == 0  # FP16 splits the float Casts
assert "calibration_input_fn" in message  # INT8 without one: TF-TRT's ValueError
assert not check.validation.passed  # FP16 overflows inside the middle engine
assert check.validation.outputs[0].nan + check.validation.outputs[0].inf > 0
worst = ranking.engines[0]
assert "Square" in worst.ops and worst.inf > 0
""",
    "04_dynamic_shapes": """
assert dynamic.result.percent_converted > implicit.result.percent_converted
assert dynamic.result.total_nodes != implicit.result.total_nodes  # the text explains why
assert len(batch_reasons) > 0
best = implicit.advice[0]
assert best.setting == "use_dynamic_shape"
assert best.percent_converted == dynamic.result.percent_converted  # measured, not estimated
by_strategy = guide.set_index("strategy")["profiles"]
assert by_strategy["Range"] == "[4-8, 128-384]"
assert by_strategy["ImplicitBatchModeCompatible"] == "[1-8, 128], [1-4, 384]"
accepts = {s: any(p.accepts((request,) * 3) for p in optimization_profiles(shape_sets, s))
           for s in strategies}
assert accepts == {"Range": True, "Optimal": False, "Range+Optimal": True,
                   "ImplicitBatchModeCompatible": False}
""",
    "05_native_fallback": """
inside = (served.batch <= 4) & served.length.between(16, 32)
assert (served["served by"] == "engines").eq(inside).all(), served
assert (served.loc[~inside, "engines that fell back"] == len(converter.result.engines)).all()
assert "no optimization profile" in next(iter(model.native_runs[engine]))
assert "User disallowed engine native segment execution" in refusal
assert (served_fixed["served by"] == "engines").all()
assert (building.builds == 1).all() and (building.native_calls == 0).all()
assert (refusing.cached_engines == 0).all() and (refusing.native_calls == 2).all()
""",
}


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=NEWEST_STACK_NOTEBOOKS.get(p.stem, ())) for p in NOTEBOOKS
], ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    # Run from a scratch copy so experiment stores and outputs never land in the repo.
    if path.stem == "08_profiling":
        fixture_path()  # it walks through the shared trtexec exports
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    if path.stem in CHECKS:
        notebook.cells.append(nbformat.v4.new_code_cell(CHECKS[path.stem]))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [out for cell in notebook.cells for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not errors, errors


def test_there_are_notebooks() -> None:
    names = [p.stem for p in NOTEBOOKS]
    assert names[:5] == ["00_workbench", "01_quickstart", "02_minimum_segment_size",
                         "03_precision", "04_dynamic_shapes"]
