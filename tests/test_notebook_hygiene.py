"""The tracked notebooks stay clean: stored without outputs, and `make run`'s JupyterLab saves
them so (tools/jupyter_server_config.py's pre-save hook, tried on a real Jupyter server)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyter_lab import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = ROOT / "tools" / "jupyter_server_config.py"
PYTHON_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def test_tracked_notebooks_have_no_outputs() -> None:
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        dirty = [i for i, cell in enumerate(notebook.cells)
                 if cell.cell_type == "code" and (cell.outputs or cell.execution_count)]
        assert not dirty, f"{path.name}: cells {dirty} keep outputs (clear them before commit)"
        assert "widgets" not in notebook.metadata, f"{path.name} keeps widget state"
        assert notebook.metadata == {"kernelspec": PYTHON_KERNELSPEC,
                                     "language_info": {"name": "python"}}, path.name


@pytest.mark.stack_independent(reason="the Jupyter server's pre-save hook, no TensorFlow")
def test_make_run_saves_notebooks_without_outputs(tmp_path: Path) -> None:
    assert f"--config=../{CONFIG.relative_to(ROOT)}" in (ROOT / "Makefile").read_text()
    port, token = free_port(), secrets.token_hex(8)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--config={CONFIG}", f"--port={port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--no-browser",
         "--allow-root", f"--ServerApp.root_dir={tmp_path}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("w"),
        env={"JUPYTER_CONFIG_DIR": str(tmp_path / ".config"),
             "JUPYTER_RUNTIME_DIR": str(tmp_path / ".runtime"), "PATH": "/usr/bin:/bin"})
    try:
        url = f"http://127.0.0.1:{port}/api/contents/lesson.ipynb"
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            "app", execution_count=3, outputs=[nbformat.v4.new_output(
                "display_data", {"text/plain": "Workbench(...)"})])])
        notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
        # What JupyterLab writes once a kernel ran: the kernel's own names and Python's version.
        notebook.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)",
                                           "language": "python", "name": "python3"}
        notebook.metadata["language_info"] = {"name": "python", "version": "3.12.3",
                                              "codemirror_mode": {"name": "ipython"}}
        notebook.cells[0].metadata["scrolled"] = True
        notebook.cells[0].metadata["tags"] = ["kept"]
        body = json.dumps({"type": "notebook", "content": notebook}).encode()
        request = urllib.request.Request(url, data=body, method="PUT", headers={
            "Authorization": f"token {token}", "Content-Type": "application/json"})

        def saved() -> bool:
            try:
                return urllib.request.urlopen(request, timeout=5).status in (200, 201)
            except OSError:
                return False

        wait_until("the Jupyter server saves a notebook", saved, 60)
        stored = nbformat.read(tmp_path / "lesson.ipynb", as_version=4)
        assert stored.cells[0].source == "app"
        assert stored.cells[0].outputs == [] and stored.cells[0].execution_count is None
        assert "widgets" not in stored.metadata
        tracked = nbformat.read(NOTEBOOKS[1], as_version=4).metadata
        assert stored.metadata == tracked, "saving rewrote the kernel metadata"
        assert stored.cells[0].metadata == {"tags": ["kept"]}  # the lesson's, not the editor's
    finally:
        server.terminate()
        server.wait(15)
    assert "Overriding" not in (tmp_path / "server.log").read_text()  # `make run` is quiet
