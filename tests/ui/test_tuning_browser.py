"""The Tune tab in a real browser: JupyterLab + headless Chromium, a search on 2 local Dask
workers started from the kernel, trials streaming into the table and the Pareto chart, then
Apply. Screenshots go to `test-output/browser/` (tune_*.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_lab import CHROMIUM, chromium_page, jupyter_lab, wait_until
from nbformat.v4 import new_code_cell, new_notebook
from test_browser import (
    is_idle,
    kernel_ready,
    page_text,
    screenshot,
    screenshot_on_failure,
    wait_for_state,
)

SEARCH_TIMEOUT_S = 240.0  # two workers import TensorFlow, then four small trials
TUNE_STATE_JS = """() => ({
  status: document.querySelector('.wb-tune-status')?.textContent ?? '',
  rows: document.querySelectorAll('.wb-tune-table tbody tr').length,
  plots: document.querySelectorAll('.wb-tune .js-plotly-plot').length,
  precision: document.querySelector('.wb-app .widget-toggle-button.mod-active')?.textContent,
})"""


def tune_state(page: Any) -> dict[str, Any]:
    return page.evaluate(TUNE_STATE_JS)


@pytest.mark.slow
@pytest.mark.stack_independent(reason="the Tune tab in the browser; its Python (a search on "
                               "Dask workers, Apply) runs here in ui/test_tuning_tab.py")
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium")
def test_tune_tab_streams_trials_and_applies_one(tmp_path: Path) -> None:
    notebook = tmp_path / "workbench_app.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(
        "import sample_models\nfrom workbench.ui import Workbench\n\n"
        "app = Workbench(sample_models.build('quickstart_mlp'))\napp")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}}), notebook)
    with (
        jupyter_lab([notebook], tmp_path) as lab,
        chromium_page(tmp_path / "chromium") as page,
        screenshot_on_failure(page),
    ):
        page.goto(lab.url(f"lab/tree/{notebook.name}"), wait_until="domcontentloaded")
        wait_until("the kernel starting", lambda: kernel_ready(page), 60, lambda: page_text(page))
        page.evaluate("() => { jupyterapp.shell.collapseLeft(); "
                      "jupyterapp.shell.collapseRight(); }")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        wait_for_state(page, "the workbench ready", is_idle, 150)
        page.get_by_role("tab", name="Tune", exact=True).click()
        box = page.locator(".wb-tune input[type=text]").first  # minimum_segment_size values
        box.fill("2, 5")
        box.press("Enter")
        page.locator(".wb-tune button[title=Start]").click()
        streamed = wait_until(
            "the first trial in the table while the search runs",
            lambda: (s := tune_state(page))["rows"] >= 1 and "trials:" in s["status"] and s,
            SEARCH_TIMEOUT_S, lambda: page_text(page))
        assert streamed["rows"] < 4 or not streamed["status"].startswith("done"), streamed
        apply = page.locator(".wb-tune button", has_text="Apply to the controls").first
        offered = not apply.is_disabled()  # read first: a search only goes from running to done
        running = not tune_state(page)["status"].startswith("done")
        assert not (offered and running), "Apply offered while the search was still running"
        done = wait_until("the search finishing",
                          lambda: (s := tune_state(page))["status"].startswith("done") and s,
                          SEARCH_TIMEOUT_S, lambda: page_text(page))
        assert done["rows"] == 4 and "4 trials, all ok" in done["status"], done
        page.locator(".wb-tune .js-plotly-plot").first.wait_for(state="visible", timeout=20_000)
        screenshot(page, "tune_01_search_done.png")
        # Apply the first trial in the list (FP32, minimum_segment_size 2).
        page.locator(".wb-tune select").last.select_option(index=0)
        page.locator(".wb-tune button[title='Apply to the controls']").click()
        applied = wait_until("the status saying the trial was applied",
                             lambda: "applied" in (s := tune_state(page))["status"] and s, 20,
                             lambda: page_text(page))
        wait_for_state(page, "the workbench reconverted after Apply", is_idle, 30)
        precision = applied["status"].split("applied ")[1].split(" ")[0]
        assert tune_state(page)["precision"] == precision
        screenshot(page, "tune_02_applied.png")
