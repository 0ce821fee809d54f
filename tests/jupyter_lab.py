"""Test harness: a throw-away JupyterLab server and a headless Chromium driven by Playwright.

Everything lives in temp dirs (notebooks, Jupyter config/runtime/data, browser profile), so a
test never writes into the repo or the user's home, and the server and its kernels are always
stopped, even when the test fails.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench.diagnosis import chromium_path

# The Chromium `workbench doctor` finds (Debian's package); the test skips without one.
CHROMIUM = Path(chromium_path() or "/usr/bin/chromium")

# This machine reaches nothing but package registries: without these flags Chromium waits on
# network services (component updates, sync, QUIC probes) or fills the log with retries.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# User settings that keep JupyterLab quiet and offline: no news or update toasts (they would
# also sit on top of the screenshots).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

SERVER_START_TIMEOUT_S = 60.0
SERVER_STOP_TIMEOUT_S = 15.0


class StepTimeout(AssertionError):
    """A bounded wait ran out; the message says which step and what the page showed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(
    step: str, check: Callable[[], Any], timeout_s: float, describe: Callable[[], str] = str
) -> Any:
    """Polls `check` until it returns something truthy; raises `StepTimeout` naming `step`.

    `describe` is called only on failure, to attach what the page (or server) looked like.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise StepTimeout(f"timed out after {timeout_s:.0f} s: {step}\n{describe()}")
        time.sleep(0.25)


class JupyterLab:
    """A running `python -m jupyterlab` serving `root_dir` on 127.0.0.1 with a random token."""

    def __init__(self, root_dir: Path, state_dir: Path, extra_args: Sequence[str] = ()):
        self.root_dir = root_dir
        self.extra_args = list(extra_args)  # e.g. `make run`'s own settings
        self.state_dir = state_dir
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = state_dir / "server.log"
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """`path` (e.g. `lab/tree/x.ipynb`) with the token, so the browser needs no login."""
        return f"{self.base_url}/{path.lstrip('/')}?token={self.token}"

    def environment(self) -> dict[str, str]:
        """Isolated Jupyter dirs; the venv's own share/jupyter (labextensions of ipywidgets and
        plotly, the python3 kernelspec) stays visible because Jupyter always searches
        sys.prefix."""
        dirs = {
            "JUPYTER_CONFIG_DIR": "config",
            "JUPYTER_RUNTIME_DIR": "runtime",
            "JUPYTER_DATA_DIR": "data",
            "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
            "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
            "IPYTHONDIR": "ipython",
        }
        env = {**os.environ, "JUPYTER_PLATFORM_DIRS": "1", "PYTHONUNBUFFERED": "1"}
        for name, sub in dirs.items():
            path = self.state_dir / sub
            path.mkdir(parents=True, exist_ok=True)
            env[name] = str(path)
        env.pop("JUPYTER_PATH", None)
        return env

    def _write_lab_settings(self, settings_dir: Path) -> None:
        for relative, values in LAB_SETTINGS.items():
            path = settings_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def start(self) -> None:
        env = self.environment()
        self._write_lab_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))
        command = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=",
            "--LabApp.extension_manager=readonly",  # the PyPI manager would go online
            "--ServerApp.terminals_enabled=False",
            *self.extra_args,
        ]  # fmt: skip
        if os.geteuid() == 0:  # CI containers run as root; Jupyter refuses that by default
            command.append("--allow-root")
        log = self.log_path.open("wb")
        # A new session makes the server and its kernels one process group we can end as one.
        self._process = subprocess.Popen(
            command, cwd=self.root_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        wait_until(
            "JupyterLab answering /api/status", self._answers, SERVER_START_TIMEOUT_S,
            self.log_tail,
        )  # fmt: skip

    def _answers(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise AssertionError(
                f"JupyterLab exited with code {self._process.returncode}\n{self.log_tail()}"
            )
        try:
            self.api("GET", "api/status")
        except (OSError, urllib.error.URLError):
            return False
        return True

    def api(self, method: str, path: str) -> Any:
        """Calls the server's REST API with the token; returns the decoded JSON (or None)."""
        request = urllib.request.Request(
            f"{self.base_url}/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "server log (tail):\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stops the kernels and the server; signals the server's process group if it lingers.

        Kernels run in sessions of their own, so they are shut down through the API first
        (ipykernel also exits by itself once its parent server is gone)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            for kernel in self.api("GET", "api/kernels") or []:
                self.api("DELETE", f"api/kernels/{kernel['id']}")
            self.api("POST", "api/shutdown")
            process.wait(timeout=SERVER_STOP_TIMEOUT_S)
        except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process.poll() is not None:
                break
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


@contextmanager
def jupyter_lab(notebooks: list[Path], work_dir: Path, extra_args: Sequence[str] = ()
                ) -> Iterator[JupyterLab]:
    """Serves copies of `notebooks` from `work_dir/root` (`extra_args` go to JupyterLab);
    always stops the server."""
    root = work_dir / "root"
    root.mkdir(parents=True, exist_ok=True)
    for notebook in notebooks:
        shutil.copy(notebook, root / notebook.name)
    lab = JupyterLab(root, work_dir / "jupyter", extra_args)
    lab.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


@contextmanager
def chromium_page(profile_dir: Path, width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A Playwright page in Debian's Chromium with a fresh profile; closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport={"width": width, "height": height},
            timeout=60_000,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(30_000)
            yield page
        finally:
            context.close()
