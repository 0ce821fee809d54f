"""The documentation: its examples run, its generated parts are current, its pictures exist.

Every ```python block of the README and of docs/*.md runs, page by page in one fresh process
(a page's blocks share their names, as a reader's session would), from a directory where the
sample models are at `sample_models/build/...` as in the repository. A block that cannot run
here is preceded by `<!-- no-run: why -->`. The site itself is built with `mkdocs build --strict`
by `make test` (a broken link or a page missing from the nav fails it).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
NO_RUN = re.compile(r"<!--\s*no-run:\s*\S.*?-->\s*$")
PAGE_TIMEOUT_S = 900

# Runs the blocks it reads on stdin in one namespace; names the block that failed. It ends with
# os._exit so threads an example started (the app's background loading) cannot keep it alive.
RUNNER = """
import json, os, sys, traceback
page, blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile(code, f"{page}, the example at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
sys.stdout.flush()
os._exit(0)
"""


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line, code, runs) for every ```python block; `runs` is False after a no-run comment."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((line, match.group(1), not NO_RUN.search(before)))
    return blocks


def relative(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


PAGES_WITH_CODE = [p for p in PAGES if any(runs for *_, runs in python_blocks(p.read_text()))]


def test_block_extraction_sees_fences_and_no_run_marks():
    text = ("intro\n```python\nx = 1\n```\n\n<!-- no-run: needs a GPU -->\n```python\n"
            "gpu()\n```\n```sh\nls\n```\n")
    assert python_blocks(text) == [(2, "x = 1\n", True), (7, "gpu()\n", False)]


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_examples_compile(page: Path):
    for line, code, _ in python_blocks(page.read_text()):
        compile(code, f"{relative(page)}:{line}", "exec")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=relative)
def test_examples_run(page: Path, tmp_path: Path):
    import sample_models

    for name in ("digits_cnn", "detector", "resnet50", "tiny_bert", "lstm"):
        sample_models.build(name)
    (tmp_path / "sample_models").symlink_to(ROOT / "sample_models")
    blocks = [(line, code) for line, code, runs in python_blocks(page.read_text()) if runs]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(
        [relative(page), blocks]), capture_output=True, text=True, cwd=tmp_path, env=env,
        timeout=PAGE_TIMEOUT_S)
    assert done.returncode == 0, f"{relative(page)}'s examples failed:\n{done.stderr[-4000:]}"


def test_pictures_exist():
    """Every image a page shows is in the repository (the README's too)."""
    for page in PAGES:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{relative(page)} shows missing {target}"


def test_readme_is_short_and_shows_the_app():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    assert "](docs/images/workbench.png)" in text


def test_readme_commands_use_the_models_make_run_builds():
    """A newcomer runs `make run`, then the README's commands: every sample model they name is
    one `make run` builds (its SAMPLES line)."""
    samples = re.search(r"^SAMPLES := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert samples, "the Makefile lost its SAMPLES line"
    built = set(samples.group(1).split())
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"sample_models/build/(\w+)", readme))
    named |= set(re.findall(r"sample_models\.build\(\"(\w+)\"\)", readme))
    assert named and named <= built, f"the README uses {sorted(named - built)}, not built"
    assert "build $(SAMPLES)" in (ROOT / "Makefile").read_text()


def test_benchmark_table_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "summarize.py"),
                           "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def tool(name: str) -> ModuleType:
    """A module of tools/ (not a package), imported by name."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_cli_reference_covers_every_subcommand():
    docs_hooks = tool("docs_hooks")
    from workbench.cli import _parser

    reference = docs_hooks.cli_reference()
    commands = _parser()._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        assert f"## `workbench {name}`" in reference
        for action in sub._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                assert f"`{option}`" in reference, f"{name} {option} missing"


def test_site_notebooks_are_executed_copies_of_the_notebooks():
    """The site renders docs/notebooks/ (tools/render_notebooks.py executes the notebooks into
    it): one copy per notebook, made from its current cells, with outputs, no error, and
    nothing that needs a kernel or the network to show."""
    render = tool("render_notebooks")
    stale = render.stale_copies()
    assert not stale, (f"docs/notebooks/ is out of step with notebooks/ for {stale}: run "
                       f"`make docs-notebooks NOTEBOOKS=\"{' '.join(stale)}\"`")
    for copy in sorted(render.KEPT.glob("*.ipynb")):
        notebook = json.loads(copy.read_text())
        outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
        assert outputs, f"{copy.name} has no outputs"
        kinds = {o["output_type"] for o in outputs}
        kinds |= {mime for o in outputs for mime in o.get("data", {})}
        assert not kinds & {"error", render.PLOTLY, render.WIDGET}, (copy.name, kinds)
        html = "".join(part for o in outputs for part in o.get("data", {}).get("text/html", ""))
        figures = re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', html)
        assert len(figures) == len(set(figures)), f"{copy.name}: figures share an id"
        assert "widgets" not in notebook["metadata"], copy.name


@pytest.mark.stack_independent(reason="a plotly figure and a widget rendered, no TensorFlow")
def test_a_rendered_copy_reads_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A plotly figure becomes HTML drawing with the site's plotly.js; a widget, a note."""
    import nbformat

    render = tool("render_notebooks")
    monkeypatch.setenv("PLOTLY_RENDERER", "plotly_mimetype")  # as `main` sets it
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import plotly.graph_objects as go\ngo.Figure(go.Bar(y=[1]))"),
        nbformat.v4.new_code_cell("import ipywidgets\nipywidgets.IntSlider()")]), lesson)
    copy = nbformat.read(render.render(lesson, tmp_path / "kept"), as_version=4)
    figure, widget = (cell.outputs[0].data for cell in copy.cells)
    assert set(figure) == {"text/html"} and 'class="plotly-graph-div"' in figure["text/html"]
    assert "plotly.min.js" not in figure["text/html"]  # plotly.js comes from the site
    assert widget == {"text/html": render.OTHER_WIDGET}
    assert copy.metadata.workbench.source_sha256 == render.source_digest(nbformat.read(
        lesson, as_version=4)) and "widgets" not in copy.metadata


def test_a_notebook_copy_goes_stale_when_its_cells_change():
    render = tool("render_notebooks")
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    digest = render.source_digest(notebook)
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text="out")]
    assert render.source_digest(notebook) == digest  # outputs are not the source
    notebook.cells[0].source = "x = 2"
    assert render.source_digest(notebook) != digest


CONCEPT_PAGES = ("segments.md", "shapes.md", "precision.md", "engine-runtime.md")


def test_concept_pages_show_diagrams_the_workbench_draws():
    """Each of these Concepts pages shows diagrams tools/draw_concept_diagrams.py draws (every
    one of them shown somewhere), and a `workbench graph` diagram's caption quotes its command."""
    drawer = tool("draw_concept_diagrams")
    shown: dict[str, str] = {}
    for page in CONCEPT_PAGES:
        text = (ROOT / "docs" / page).read_text()
        names = re.findall(r"!\[[^\]]*\]\(images/concepts/([^)\s]+)\)", text)
        assert names, f"docs/{page} shows no diagram of docs/images/concepts/"
        shown.update(dict.fromkeys(names, text))
    assert set(shown) == set(drawer.DRAWERS)
    for name, command in drawer.GRAPH_COMMANDS.items():
        assert f"workbench graph {command}" in shown[name], f"{name}'s caption: {command}"


def test_every_benchmark_writes_its_figures():
    """Each benchmark script ends in the table: it writes benchmarks/results/<name>.json."""
    scripts = sorted(set((ROOT / "benchmarks").glob("*.py"))
                     - {ROOT / "benchmarks" / "record.py", ROOT / "benchmarks" / "summarize.py"})
    silent = [s.name for s in scripts if "record.write(" not in s.read_text()]
    assert not silent, f"benchmarks that do not write their figures (record.write): {silent}"


@pytest.mark.slow
@pytest.mark.stack_independent(reason="MkDocs and its search in Chromium, no TensorFlow")
def test_site_searches_when_opened_from_disk(tmp_path: Path):
    """The README says to open site/index.html: search must work on file://, with nothing
    fetched from the network (this machine reaches none)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from jupyter_lab import CHROMIUM, CHROMIUM_ARGS
    finally:
        sys.path.remove(str(ROOT / "tests"))
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "-d", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    assert "unpkg.com" not in (site / "index.html").read_text()  # nothing from a CDN
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                             args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((site / "index.html").as_uri())
            search = page.locator("input.md-search__input")
            search.click()
            search.type("minimum_segment_size", delay=20)
            page.locator(".md-search-result__item").first.wait_for(timeout=20_000)
            meta = page.locator(".md-search-result__meta").inner_text()
        finally:
            browser.close()
    assert re.match(r"\d+ matching documents", meta), meta


def test_code_cites_sections_that_exist():
    """Comments cite the docs' sections (`docs/tftrt-behaviour.md#candidates`, and further
    `#anchors` on the next line): each page and anchor must exist, so a renamed section cannot
    leave a comment pointing nowhere."""
    cited = re.compile(r"docs/([\w-]+\.md)#([\w-]+)((?:,\s*(?:#\s*)?#[\w-]+)*)")
    anchors: dict[str, set[str]] = {}
    missing = []
    for path in sorted((ROOT / "workbench").rglob("*.py")):
        for match in cited.finditer(path.read_text()):
            page = match.group(1)
            if page not in anchors:
                text = (ROOT / "docs" / page).read_text() if (ROOT / "docs" / page).exists() else ""
                anchors[page] = set(re.findall(r"\{#([\w-]+)\}", text))
            names = [match.group(2), *re.findall(r"#([\w-]+)", match.group(3))]
            missing += [f"{path.relative_to(ROOT)}: docs/{page}#{name}" for name in names
                        if name not in anchors[page]]
    assert anchors, "no comment cites a docs section: the pattern no longer matches"
    assert not missing, "cited sections that do not exist:\n" + "\n".join(missing)
