"""The notebook workbench in a real browser: JupyterLab + headless Chromium (Playwright).

Opens `notebooks/00_workbench.ipynb`, runs it, validates and times the conversion in the
Validation tab, then moves the `minimum_segment_size` slider to its maximum and checks that
TF-TRT's summary and the segment-graph SVG follow. Screenshots of every tab go to
`test-output/browser/`; `make screenshots` copies them into docs/images/ for the README and
the documentation. `BROWSER_TEST_NOTEBOOK=path` points the same checks at another notebook
(any that shows the DOM contract: `wb-app`, `wb-status`, `wb-min-segment-size`, `wb-summary`,
`wb-graph`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jupyter_lab import CHROMIUM, chromium_page, jupyter_lab, wait_until

from workbench.viz.scope_graphs import HIGHLIGHT

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = Path(os.environ.get("BROWSER_TEST_NOTEBOOK", REPO / "notebooks" / "00_workbench.ipynb"))
SCREENSHOTS = REPO / "test-output" / "browser"
# JupyterLab, ipywidgets, anywidget and plotly have the same versions on both of CI's stacks.
BROWSER_SIDE = pytest.mark.stack_independent(
    reason="the browser's side of the app; its Python runs here in ui/test_app.py and "
    "test_notebooks.py")

LOAD_TIMEOUT_S = 150.0  # a first run may build the sample model; a cached one loads in ~15 s
UPDATE_TIMEOUT_S = 30.0  # a threshold change reconverts in milliseconds
CHECK_TIMEOUT_S = 120.0  # ResNet-50: engine build ~6 s, two batches, 2 x 23 timed calls
ENGINES = re.compile(r"Total number of TensorRT engines:\s*(\d+)")
CONVERTED = re.compile(r"% of OPs Converted:")
ENGINE_NAME = re.compile(r"TRTEngineOp_\d+_\d+")

# One round trip reads everything the test looks at (textContent also sees hidden tabs).
READ_STATE_JS = """() => {
  const q = (s) => document.querySelector(s);
  const handle = q('.wb-min-segment-size .noUi-handle');
  return {
    app: !!q('.wb-app'),
    status: q('.wb-status')?.textContent ?? null,
    summary: q('.wb-summary')?.textContent ?? null,
    svg: [...document.querySelectorAll('.wb-graph svg')].map((e) => e.outerHTML).join(' '),
    value: q('.wb-min-segment-size .widget-readout')?.textContent?.trim() ?? null,
    max: handle?.getAttribute('aria-valuemax') ?? null,
    errors: [...document.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map((e) => e.textContent).filter((t) => t.includes('Traceback')),
  };
}"""

CHECK_STATE_JS = """() => ({
  check: document.querySelector('.wb-check')?.textContent || null,
  error: document.querySelector('.wb-status .wb-error')?.textContent || null,
})"""

KERNEL_READY_JS = """() => {
  const panel = window.jupyterapp?.shell?.currentWidget;
  return !!(panel?.context?.isReady && panel.sessionContext?.isReady
            && panel.sessionContext.session?.kernel);
}"""


def page_text(page: Any, limit: int = 4000) -> str:
    """The visible page text for failure messages (the end is where outputs appear)."""
    try:
        text = page.inner_text("body")
    except Exception as error:  # the page may be gone; the message must still be built
        return f"(page text unavailable: {error})"
    return "page text (tail):\n" + text[-limit:]


def summary_facts(summary: str) -> str:
    """The `[*] ...` lines of TF-TRT's summary (engine count, % converted)."""
    lines = [line.strip() for line in summary.splitlines() if line.strip().startswith("[*]")]
    return "\n".join(lines) or summary[:1500]


def state(page: Any) -> dict[str, Any]:
    return page.evaluate(READ_STATE_JS)


def wait_for_state(page: Any, step: str, ready: Any, timeout_s: float) -> dict[str, Any]:
    """Waits until `ready(state)` holds; fails fast on a Python traceback in the notebook."""

    def check() -> dict[str, Any] | None:
        current = state(page)
        if current["errors"]:
            raise AssertionError(f"{step}: the notebook raised\n" + "\n".join(current["errors"]))
        return current if ready(current) else None

    return wait_until(step, check, timeout_s, lambda: page_text(page))


def is_idle(current: dict[str, Any]) -> bool:
    return bool(current["app"] and current["status"] and "ready" in current["status"].lower())


def engines(summary: str) -> int:
    match = ENGINES.search(summary)
    assert match, f"no engine count in the summary:\n{summary}"
    return int(match.group(1))


def assert_graph_shows_engines(current: dict[str, Any]) -> None:
    """Every engine the summary lists is drawn in the segment graph."""
    names = set(ENGINE_NAME.findall(current["summary"]))
    missing = sorted(name for name in names if name not in current["svg"])
    assert not missing, f"engines in the summary but not in the graph SVG: {missing}"


def screenshot(page: Any, name: str) -> Path:
    """Saves the viewport with the app scrolled to the top (the code cell is above it)."""
    page.evaluate("() => document.querySelector('.wb-app')?.scrollIntoView({block: 'start'})")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=False)
    print(f"screenshot: {path}")
    return path


def kernel_ready(page: Any) -> bool:
    """True once the notebook's kernel is up; accepts a kernel-choice dialog if one shows."""
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    if accept.count():
        accept.first.click()
    return page.evaluate(KERNEL_READY_JS)


def open_and_run(page: Any, lab: Any) -> dict[str, Any]:
    page.goto(lab.url(f"lab/tree/{NOTEBOOK.name}"), wait_until="domcontentloaded")
    wait_until(
        "JupyterLab opening the notebook and starting its kernel",
        lambda: kernel_ready(page),
        60,
        lambda: page_text(page),
    )
    # Side panels only take room from the app in the screenshots.
    page.evaluate("() => { jupyterapp.shell.collapseLeft(); jupyterapp.shell.collapseRight(); }")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    return wait_for_state(
        page,
        "the workbench reporting `ready` after running the notebook",
        lambda s: is_idle(s) and s["summary"] and s["svg"],
        LOAD_TIMEOUT_S,
    )


def move_slider_to_max(page: Any, before: dict[str, Any]) -> dict[str, Any]:
    """Types the maximum into the slider's value box, as a user can. (noUiSlider's End key
    keeps the range the view was created with; the app widens it once the model is loaded.)"""
    readout = page.locator(".wb-min-segment-size .widget-readout")
    readout.scroll_into_view_if_needed()
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(str(int(float(before["max"]))))
    page.keyboard.press("Enter")
    return wait_for_state(
        page,
        f"the minimum_segment_size slider reaching its maximum {before['max']}",
        lambda s: s["value"] is not None and float(s["value"]) == float(before["max"]),
        10,
    )


def wait_for_new_views(page: Any, before: dict[str, Any]) -> dict[str, Any]:
    """Waits until both the summary and the graph SVG differ from `before` (the app draws the
    graph after the summary, so reading them at the first change would race)."""

    def unchanged() -> str:
        current = state(page)
        views = [v for v in ("summary", "svg") if current[v] == before[v]]
        return (
            f"minimum_segment_size moved from {before['value']} to {current['value']} (slider "
            f"max {float(before['max']):g}) but these views did not change: {views}; the "
            f"summary says:\n{summary_facts(current['summary'])}\n"
            "(if every engine is larger than the slider's maximum, nothing can change)\n"
            + page_text(page, 1500)
        )

    def changed() -> dict[str, Any] | None:
        current = state(page)
        new = current["summary"] != before["summary"] and current["svg"] != before["svg"]
        return current if is_idle(current) and new else None

    return wait_until("the summary and the graph changing after the slider moved", changed,
                      UPDATE_TIMEOUT_S, unchanged)


def validate_and_time(page: Any) -> str:
    """Opens the Validation tab, presses its button and returns the check's note."""
    page.get_by_role("tab", name="Validation").click()
    page.get_by_role("button", name="Validate and time").click()

    def done() -> str | None:
        found = page.evaluate(CHECK_STATE_JS)
        if found["error"]:
            raise AssertionError(f"the check failed: {found['error']}")
        return found["check"]

    return wait_until("the Validation tab showing the check (engines built, outputs compared, "
                      "timed)", done, CHECK_TIMEOUT_S, lambda: page_text(page))


def wait_for_plot(page: Any, tab: str, timeout_s: float = 20.0) -> None:
    """A plotly chart drawn in the visible tab (charts come from background steps too)."""
    page.locator(".wb-app .widget-tab-contents .js-plotly-plot:visible").first.wait_for(
        state="visible", timeout=timeout_s * 1000)
    assert page.locator(".wb-app .lm-TabBar-tab.lm-mod-current").first.inner_text() == tab


def show_full_graph(page: Any, current: dict[str, Any]) -> None:
    """Opens the Segment graph tab on its full view (engines as clusters) and waits for it."""
    page.get_by_role("tab", name="Segment graph").click()
    page.locator(".wb-app button", has_text="Full").first.click()
    wait_until("the full segment graph replacing the converted one",
               lambda: state(page)["svg"] not in ("", current["svg"]), UPDATE_TIMEOUT_S,
               lambda: page_text(page))


# The title of a collapsed group's box whose centre lies inside the drawing's viewport.
GROUP_IN_SIGHT_JS = """() => {
  const port = document.querySelector('.wb-graph .wb-drawing-port').getBoundingClientRect();
  const boxes = [...document.querySelectorAll('.wb-graph svg g.node')].filter((g) =>
    g.querySelector(':scope > title').textContent.startsWith('scope '));
  const inside = boxes.find((g) => {
    const r = g.getBoundingClientRect();
    const [x, y] = [r.left + r.width / 2, r.top + r.height / 2];
    return x > port.left && x < port.right && y > port.top && y < port.bottom;
  });
  return inside ? inside.querySelector(':scope > title').textContent : null;
}"""


def open_group_by_click(page: Any) -> None:
    """A click on a collapsed group's box in the drawing opens it in place: the anywidget
    sends the box's name to Python, which redraws with the group's frame."""
    port = page.locator(".wb-graph .wb-drawing-port").first.bounding_box()
    page.mouse.move(port["x"] + port["width"] / 2, port["y"] + port["height"] / 2)
    for _ in range(20):  # the wheel pans the drawing until a collapsed group shows
        title = page.evaluate(GROUP_IN_SIGHT_JS)
        if title:
            break
        page.mouse.wheel(0, 300)
    assert title, "no collapsed group in sight after panning the segment graph"
    page.locator(".wb-graph svg g.node").filter(has=page.locator(f'title:text-is("{title}")')
                                                ).first.click()
    frame = "cluster " + title.removeprefix("scope ")
    wait_until(f"the group {title!r} opening after a click",
               lambda: frame in state(page)["svg"], UPDATE_TIMEOUT_S, lambda: page_text(page))
    assert page.locator(".wb-graph .wb-drawing-bar button", has_text="Fit").count() == 1


def report_row_leads_to_graph(page: Any) -> None:
    """A click on a row of the non-conversion report opens the Segment graph tab with that
    row's nodes highlighted."""
    page.get_by_role("tab", name="Non-conversion report").click()
    page.locator(".wb-app table.wb-rows-rejected tbody tr").first.click()
    current = page.locator(".wb-app .lm-TabBar-tab.lm-mod-current").first
    wait_until("the Segment graph showing the clicked row's nodes, highlighted",
               lambda: current.inner_text() == "Segment graph"
               and HIGHLIGHT in state(page)["svg"], UPDATE_TIMEOUT_S, lambda: page_text(page))


def keep_run_and_profile(page: Any) -> None:
    """Keeps the checked run (Runs tab) and profiles native TF and the engines (Profiling tab),
    a screenshot of each: the documentation shows every tab."""
    page.get_by_role("tab", name="Runs").click()
    page.get_by_role("button", name="Keep this run").click()
    wait_for_plot(page, "Runs")
    screenshot(page, "02_runs.png")
    page.get_by_role("tab", name="Profiling").click()
    page.get_by_role("button", name="Profile native TF and engines").click()
    wait_for_plot(page, "Profiling", CHECK_TIMEOUT_S)
    wait_for_state(page, "the workbench ready after profiling", is_idle, CHECK_TIMEOUT_S)
    screenshot(page, "02_profiling.png")


@contextmanager
def screenshot_on_failure(page: Any) -> Iterator[None]:
    try:
        yield
    except BaseException:
        screenshot(page, "failure.png")
        raise


@pytest.mark.slow
@BROWSER_SIDE
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium")
def test_slider_updates_summary_and_graph(tmp_path: Path) -> None:
    assert NOTEBOOK.exists(), f"missing notebook {NOTEBOOK}"
    for old in SCREENSHOTS.glob("*.png"):  # a stale picture must not pass for this run's
        old.unlink()
    with (
        jupyter_lab([NOTEBOOK], tmp_path) as lab,
        chromium_page(tmp_path / "chromium") as page,
        screenshot_on_failure(page),
    ):
        before = open_and_run(page, lab)
        assert CONVERTED.search(before["summary"]), before["summary"]
        screenshot(page, "01_before_slider.png")
        page.get_by_role("tab", name="Non-conversion report").click()
        screenshot(page, "01_nonconversion_report.png")
        show_full_graph(page, before)
        screenshot(page, "01_segment_graph_full.png")
        open_group_by_click(page)
        screenshot(page, "01_segment_graph_opened.png")
        report_row_leads_to_graph(page)
        screenshot(page, "01_segment_graph_report_row.png")
        page.get_by_role("tab", name="Summary").click()
        check = validate_and_time(page)
        wait_for_state(page, "the workbench ready after the check", is_idle, 10)
        wait_for_plot(page, "Validation")
        screenshot(page, "02_validation.png")
        keep_run_and_profile(page)
        page.get_by_role("tab", name="Charts").click()
        wait_for_plot(page, "Charts")
        screenshot(page, "03_charts.png")

        page.get_by_role("tab", name="Summary").click()
        move_slider_to_max(page, before)
        after = wait_for_new_views(page, before)
        screenshot(page, "04_after_slider.png")
        page.get_by_role("tab", name="Segment graph").click()
        page.locator(".wb-graph svg").first.wait_for(state="visible", timeout=10_000)
        screenshot(page, "05_segment_graph.png")

    assert "PASSED: FP32 converted vs native TensorFlow" in check, check
    assert "no engines" not in check, check
    assert re.search(r"batch 1: native TF [\d.]+ ms, converted [\d.]+ ms", check), check
    # A larger threshold can only drop segments (the clustering does not depend on it).
    assert engines(after["summary"]) < engines(before["summary"])
    assert engines(before["summary"]) == len(set(ENGINE_NAME.findall(before["summary"])))
    assert_graph_shows_engines(before)
    assert_graph_shows_engines(after)
    assert CONVERTED.search(after["summary"]), after["summary"]


def processes_with(text: str) -> list[int]:
    """Pids whose command line mentions `text` (Linux /proc; the kernels' connection file)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:  # the process ended while we looked
            continue
    return pids


@pytest.mark.slow
@pytest.mark.stack_independent(reason="the test harness's JupyterLab server and its kernels")
def test_lab_server_stops_with_its_kernels(tmp_path: Path) -> None:
    with jupyter_lab([], tmp_path) as lab:
        kernel_id = lab.api("POST", "api/kernels")["id"]
        connection_file = f"kernel-{kernel_id}.json"
        wait_until("the kernel process starting", lambda: processes_with(connection_file), 30)
    wait_until(
        "the kernel process ending after the server stopped",
        lambda: not processes_with(connection_file),
        10,
        lambda: f"still running: {processes_with(connection_file)}",
    )
    with pytest.raises(OSError):
        lab.api("GET", "api/status")


# What overflows sideways: the tabs out of their bar, the app out of its output area, a table
# out of its tab (a table must scroll inside its own box), the notebook out of the window; and
# a button whose label its width cuts short (an ellipsis).
LAYOUT_JS = """() => {
  const app = document.querySelector('.wb-app');
  const right = (e) => e.getBoundingClientRect().right;
  const panel = app.querySelector('.widget-tab-contents');
  const out = app.closest('.jp-OutputArea-output');
  const notebook = app.closest('.jp-WindowedPanel-outer') || app.closest('.jp-Notebook');
  return {
    app_width: app.getBoundingClientRect().width,
    tabs_out: [...app.querySelectorAll('.lm-TabBar-tab')]
      .filter((t) => right(t) > right(app) + 1).map((t) => t.textContent),
    app_overflow: out.scrollWidth - out.clientWidth,
    notebook_overflow: notebook.scrollWidth - notebook.clientWidth,
    tables_out: [...app.querySelectorAll('.wb-scroll')]
      .filter((e) => e.offsetParent && right(e) > right(panel) + 1).length,
    labels_cut: [...app.querySelectorAll('button')]
      .filter((b) => b.offsetParent && b.scrollWidth > b.clientWidth + 1)
      .map((b) => b.textContent.trim()),
  };
}"""


@pytest.mark.slow
@BROWSER_SIDE
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium")
def test_app_fits_the_window_with_the_sidebar_open(tmp_path: Path) -> None:
    """At 1280 and 1440 px with JupyterLab's file browser open (its default), no tab, table
    or chart pushes the app sideways; screenshots `layout_<width>_<tab>.png`."""
    with (
        jupyter_lab([NOTEBOOK], tmp_path) as lab,
        chromium_page(tmp_path / "chromium", width=1280) as page,
        screenshot_on_failure(page),
    ):
        page.goto(lab.url(f"lab/tree/{NOTEBOOK.name}"), wait_until="domcontentloaded")
        wait_until("JupyterLab opening the notebook", lambda: kernel_ready(page), 60,
                   lambda: page_text(page))
        page.evaluate("() => { jupyterapp.shell.activateById('filebrowser');"
                      " jupyterapp.shell.collapseRight(); }")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        wait_for_state(page, "the workbench ready", lambda s: is_idle(s) and s["summary"],
                       LOAD_TIMEOUT_S)
        problems = {}
        for width in (1280, 1440):
            page.set_viewport_size({"width": width, "height": 1000})
            for tab in ("Summary", "Segment graph", "Charts", "Export"):
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(500)  # plotly and Lumino settle on the new width
                layout = page.evaluate(LAYOUT_JS)
                screenshot(page, f"layout_{width}_{tab.lower().replace(' ', '_')}.png")
                bad = {k: v for k, v in layout.items() if k != "app_width" and v}
                if bad:
                    problems[f"{width} px, {tab}"] = {**bad, "app_width": layout["app_width"]}
        assert not problems, problems
