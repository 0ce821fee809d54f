"""`workbench doctor` and `workbench.doctor()`: what this machine can run, for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import NOISY_TENSORFLOW, run_cli

import workbench
from workbench.diagnosis import FAILED, OK, WARNING, Diagnosis, Finding, footer


def states(stdout: str) -> dict[str, str]:
    """check name -> state, read from the doctor's text lines."""
    found = {}
    for line in stdout.splitlines()[:-1]:
        name, state = line[:22].strip(), line[23:31].strip()
        found[name] = state
    return found


def test_doctor_command_on_this_machine() -> None:
    done = run_cli("doctor", env=NOISY_TENSORFLOW)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    found = states(done.stdout)
    assert found["TensorFlow"] == found["backend onnxruntime"] == found["engine backend"] == OK
    assert {"TF-TRT", "TensorRT", "TensorRT-RTX", "GPUs", "backend tensorrt", "Graphviz dot",
            "Chromium", "CPU", "workbench"} <= set(found)
    assert "ran an engine" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("the workbench can run here")
    assert found["engine calls"] == OK and "compiled op" in done.stdout


def test_doctor_says_when_engine_calls_go_through_python() -> None:
    done = run_cli("doctor", "--json", env={"WORKBENCH_ENGINE_CALLS": "python"})
    found = {f["name"]: f for f in json.loads(done.stdout)["findings"]}
    assert found["engine calls"]["state"] == WARNING
    assert found["engine calls"]["detail"] == "through Python: WORKBENCH_ENGINE_CALLS=python"


def test_missing_dot_and_chromium_are_warnings(tmp_path: Path) -> None:
    done = run_cli("doctor", "--json", env={"PATH": str(tmp_path)})  # an empty PATH folder
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    found = {f["name"]: f for f in document["findings"]}
    assert document["can_run"] and found["Graphviz dot"]["state"] == WARNING
    assert "install Graphviz" in found["Graphviz dot"]["detail"]
    assert found["Chromium"]["state"] == WARNING


def test_broken_tensorflow_and_onnxruntime_fail(tmp_path: Path) -> None:
    """Shadowing packages whose import fails, as a broken install's would."""
    for package in ("tensorflow", "onnxruntime"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(
            f"raise ImportError('lib{package}.so: cannot open shared object file')\n")
    done = run_cli("doctor", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1 and done.stderr == "", done.stderr
    found = states(done.stdout)
    assert found["TensorFlow"] == found["backend onnxruntime"] == found["engine backend"] == FAILED
    assert "libtensorflow.so: cannot open" in done.stdout and "pip install" in done.stdout
    assert done.stdout.splitlines()[-1] == (
        "the workbench cannot run here: fix the 3 FAILED lines above (TensorFlow, backend "
        "onnxruntime, engine backend)")


def test_doctor_in_a_notebook() -> None:
    diagnosis = workbench.doctor()
    assert isinstance(diagnosis, Diagnosis) and diagnosis.can_run
    text, page = str(diagnosis), diagnosis._repr_html_()
    assert len(text.splitlines()) == len(diagnosis.findings) + 1
    assert page.count("<tr>") == len(diagnosis.findings) + 1 and "onnxruntime" in page
    line = footer(diagnosis)
    assert line.startswith("TensorFlow 2.") and "engines: onnxruntime on CPU" in line
    assert "dot " in line and "TF-TRT absent" in line


@pytest.mark.parametrize("state, can_run", [(OK, True), (WARNING, True), (FAILED, False)])
def test_only_failed_stops_the_workbench(state: str, can_run: bool) -> None:
    diagnosis = Diagnosis((Finding("TensorFlow", OK, "2.21.0"), Finding("x", state, "why")))
    assert diagnosis.can_run is can_run
    assert diagnosis.to_dict()["can_run"] is can_run
