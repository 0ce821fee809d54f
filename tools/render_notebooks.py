"""Executes the notebooks and keeps each, with its outputs, in docs/notebooks/ for the site.

The notebooks are stored without outputs; the site renders these executed copies (mkdocs-jupyter,
which does not execute anything at build time). Each copy records a digest of its notebook's
cells (`metadata.workbench.source_sha256`): tests/test_docs.py fails when a notebook changed
after its copy was made, without executing anything. Then run `make docs-notebooks` (every
notebook) or `python tools/render_notebooks.py 03_precision ...` (some).

Outputs are made to read offline: a plotly figure becomes its HTML without plotly.js (the site
loads plotly.js once per page, tools/docs_hooks.py), and the app's widgets, which need a live
kernel, become a screenshot of the app.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"
KEPT = ROOT / "docs" / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
APP_CLASS = "wb-app"  # the app's outermost widget (workbench.ui)
APP_SCREENSHOT = (  # the page is site/notebooks/NAME.html; the picture docs/images/workbench.png
    '<p><em>In JupyterLab this cell shows the app; a screenshot of it (taken by the browser '
    'tests):</em></p><img src="../images/workbench.png" alt="The workbench app" width="900">')
OTHER_WIDGET = "<p><em>An interactive widget: it shows when the notebook runs in JupyterLab."\
    "</em></p>"


def source_digest(notebook: nbformat.NotebookNode) -> str:
    """SHA-256 of what a notebook says and runs: its cells' types and sources, in order."""
    cells = [[cell.cell_type, cell.source] for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.ipynb"))


def stale_copies() -> list[str]:
    """Names whose kept copy is missing, out of step with its notebook, or left from a notebook
    that no longer exists."""
    stale = []
    for path in sources():
        copy = KEPT / path.name
        if not copy.is_file() or _recorded_digest(copy) != source_digest(
                nbformat.read(path, as_version=4)):
            stale.append(path.stem)
    names = {p.name for p in sources()}
    stale += [p.stem for p in KEPT.glob("*.ipynb") if p.name not in names]
    return stale


def _recorded_digest(copy: Path) -> str | None:
    return nbformat.read(copy, as_version=4).metadata.get("workbench", {}).get("source_sha256")


def samples_used(paths: list[Path]) -> list[str]:
    """The sample models the notebooks' code names in quotes (`sample_models.build("detector")`,
    `convert("resnet50")`)."""
    import sample_models

    code = "\n".join(cell.source for path in paths for cell in nbformat.read(
        path, as_version=4).cells if cell.cell_type == "code")
    return [name for name in sample_models.NAMES if f'"{name}"' in code or f"'{name}'" in code]


def render(path: Path, kept: Path = KEPT, timeout_s: int = 1200) -> Path:
    """Executes `path` in a scratch folder and writes its executed copy into `kept`."""
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    digest = source_digest(notebook)
    with tempfile.TemporaryDirectory(prefix="render-notebook-") as scratch:
        shutil.copy(path, Path(scratch) / path.name)  # runs beside nothing of the repo's
        NotebookClient(notebook, timeout=timeout_s, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": scratch}}).execute()
    widgets = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    apps = {model for model, saved in widgets.items()
            if APP_CLASS in saved.get("state", {}).get("_dom_classes", ())}
    for c, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            cell.outputs = [_readable_offline(out, f"{path.stem}-{c}-{i}", apps)
                            for i, out in enumerate(cell.outputs)]
            _refuse_errors(path, cell)
    notebook.metadata.pop("widgets", None)  # widget state: the page would fetch a renderer
    notebook.metadata["workbench"] = {
        "source_sha256": digest, "note": "executed copy for the site: tools/render_notebooks.py"}
    kept.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, kept / path.name)
    return kept / path.name


def _readable_offline(output: nbformat.NotebookNode, div_id: str,
                      apps: set[str]) -> nbformat.NotebookNode:
    data = output.get("data", {})
    if PLOTLY in data:
        import plotly.io

        html = plotly.io.to_html(data[PLOTLY], include_plotlyjs=False, full_html=False,
                                 div_id=f"plotly-{div_id}")
        output.data = {"text/html": html}
    elif WIDGET in data:
        app = data[WIDGET].get("model_id") in apps
        output.data = {"text/html": APP_SCREENSHOT if app else OTHER_WIDGET}
    return output


def _refuse_errors(path: Path, cell: nbformat.NotebookNode) -> None:
    for out in cell.outputs:
        if out.output_type == "error":
            raise SystemExit(f"{path.name} failed: {out.ename}: {out.evalue}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks to render, e.g. 03_precision "
                        "(default: every notebook; with --stale, those out of step)")
    parser.add_argument("--stale", action="store_true",
                        help="render only the notebooks whose kept copy is out of step")
    args = parser.parse_args(argv)
    # The kernel imports this checkout's workbench, quietly; plotly gives figures as data.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                             os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["PLOTLY_RENDERER"] = "plotly_mimetype"
    names = set(args.names) or (set(stale_copies()) if args.stale else {p.stem for p in sources()})
    for gone in [p for p in KEPT.glob("*.ipynb") if not (SOURCES / p.name).exists()]:
        gone.unlink()
        print(f"removed {gone.relative_to(ROOT)} (its notebook is gone)")
    chosen = [path for path in sources() if path.stem in names]
    sys.path.insert(0, str(ROOT))
    if samples := samples_used(chosen):  # built first: no build's log lands in a lesson
        subprocess.run([sys.executable, "-m", "sample_models", "build", *samples], cwd=ROOT,
                       check=True)
    for path in chosen:
        start = time.perf_counter()
        written = render(path)
        print(f"{written.relative_to(ROOT)}: {time.perf_counter() - start:.0f} s, "
              f"{written.stat().st_size / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
