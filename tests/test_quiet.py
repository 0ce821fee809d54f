"""TensorFlow's import-time chatter stays off stderr, whatever the CPU; --debug keeps it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import NOISY_TENSORFLOW, REPO, run_cli, user_environment

from workbench.lazy import TENSORFLOW_ENVIRONMENT, LazyModule, before_tensorflow_import
from workbench.quiet import kept_lines

ALLOCATOR = "TF_ONEDNN_USE_SYSTEM_ALLOCATOR"

ABSL = ("a line of our own\n"
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1795440363.145719    7917 port.cc:153] oneDNN custom operations are on.\n"
        "I0000 00:00:1795440363.162087    7917 cpu_feature_guard.cc:227] This TensorFlow binary\n"
        "To enable the following instructions: AVX2 AVX512F, rebuild TensorFlow.\n"
        "W0000 00:00:1795440363.2    7917 gpu_device.cc:2344] Cannot dlopen some GPU libraries.\n"
        "E0000 00:00:1795440363.3    7917 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
        "  its second line\n")
# TensorFlow <= 2.17's own format, as its 2.17 import prints it without TensorRT.
TF217 = ("2026-11-23 13:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom "
         "operations are on.\n"
         "2026-11-23 13:00:01.5: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT "
         "Warning: Could not find TensorRT\n")


def test_kept_lines_by_level() -> None:
    lines = ABSL.splitlines(keepends=True)
    assert kept_lines(ABSL, 0) == "".join(lines[:1] + lines[2:])  # only the preamble goes
    assert kept_lines(ABSL, 2) == "".join(lines[:1] + lines[-2:])  # the E entry, both lines
    assert kept_lines(ABSL, 3) == "a line of our own\n"
    assert kept_lines(TF217, 1) == TF217.splitlines(keepends=True)[1]
    assert kept_lines(TF217, 2) == ""


def _run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in user_environment(env).items()
                   if k not in TENSORFLOW_ENVIRONMENT or k in (env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=REPO, env=environment, timeout=300)


def test_importing_workbench_sets_nothing_but_the_import_finder() -> None:
    done = _run_python("""
        import os, sys
        before, finders = dict(os.environ), list(sys.meta_path)
        import workbench
        changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k))
        added = [type(f).__name__ for f in sys.meta_path if f not in finders]
        print(changed, added, "tensorflow" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[] ['_QuietFinder'] False"


def test_tensorflow_settings_are_set_just_before_the_lazy_import(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    module = LazyModule("json", before_import=lambda: seen.append("before"))
    assert not seen  # nothing at creation
    assert module.dumps([1]) == "[1]" and module.loads("2") == 2
    assert seen == ["before"]  # once, before the import
    monkeypatch.setenv(ALLOCATOR, "0")
    before_tensorflow_import()
    assert os.environ[ALLOCATOR] == "0"  # the user's value is kept


def test_filtered_stderr_on_the_real_descriptor() -> None:
    """Native writes to fd 2 are filtered; a failing block replays everything."""
    done = _run_python("""
        import os, sys
        from workbench.quiet import filtered_stderr
        with filtered_stderr(2):
            os.write(2, b"I0000 00:00:17.1    1 port.cc:153] chatter\\nkept\\n")
            print("python stderr", file=sys.stderr)
        try:
            with filtered_stderr(2):
                os.write(2, b"I0000 00:00:17.1    1 x.cc:1] shown on failure\\n")
                raise ImportError("boom")
        except ImportError:
            pass
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "kept\npython stderr\nI0000 00:00:17.1    1 x.cc:1] shown on failure\n"


@pytest.mark.slow
def test_import_after_workbench_is_quiet() -> None:
    code = """
        import os, workbench, tensorflow as tf
        print(tf.__version__, type(tf.__loader__).__name__,
              os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
              os.environ.get("TF_ONEDNN_USE_SYSTEM_ALLOCATOR"))
    """
    done = _run_python(code, NOISY_TENSORFLOW)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "Quiet" not in done.stdout  # the wrapper steps aside once TensorFlow is loaded
    # Set as TensorFlow was imported, by the user: the allocator, and the log level that
    # keeps later INFO lines (Grappler's at each conversion) off a notebook's page.
    assert done.stdout.split()[-2:] == ["2", "1"]
    loud = _run_python(code, {**NOISY_TENSORFLOW, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert "oneDNN custom operations are on" in loud.stderr  # level 0 keeps everything


def test_cli_stderr_is_ours_alone(tiny_saved_model: Path) -> None:
    done = run_cli("convert", str(tiny_saved_model), "--json", env=NOISY_TENSORFLOW)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    failed = run_cli("check", str(tiny_saved_model), "--signature-key", "nope",
                     env=NOISY_TENSORFLOW)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr


def test_cli_debug_keeps_everything(tiny_saved_model: Path) -> None:
    done = run_cli("convert", str(tiny_saved_model), "--signature-key", "nope", "--debug",
                   env=NOISY_TENSORFLOW)
    assert done.returncode == 2
    assert "oneDNN custom operations are on" in done.stderr and "Traceback" in done.stderr


@pytest.mark.slow
def test_notebook_cell_shows_no_chatter(monkeypatch: pytest.MonkeyPatch) -> None:
    """ipykernel forwards fd 2 to the cell's output: importing TensorFlow after workbench (as
    `import sample_models` does) adds nothing there."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # the kernel inherits these
    for name, value in NOISY_TENSORFLOW.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "import workbench\nimport tensorflow as tf\nprint(tf.__version__)")]
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert [o.get("name") for o in outputs] == ["stdout"], outputs


def test_quiet_notebook_keeps_tensorflow_info_and_the_report_off_the_page() -> None:
    """In a kernel TensorFlow's logger starts at INFO (its first get_logger() sees an
    interactive shell): after `workbench.quiet_notebook()` only errors reach the page."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(textwrap.dedent("""\
        import logging
        import workbench
        workbench.quiet_notebook()
        import tensorflow as tf
        from tensorflow.python.platform import tf_logging
        tf_logging.info("Assets written to: somewhere")
        logging.getLogger("workbench.trt_convert").warning("non-conversion report")
        tf_logging.error("an error shows")""")),
        nbformat.v4.new_code_cell("workbench.quiet_notebook(conversion_report=True)\n"
                                  "logging.getLogger('workbench.trt_convert').warning('report')")]
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    shown = ["".join(o.get("text", "")) for cell in notebook.cells for o in cell.outputs]
    assert "".join(shown).strip().splitlines() == ["ERROR:tensorflow:an error shows", "report"]
