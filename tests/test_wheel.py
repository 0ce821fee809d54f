"""The built wheel works on its own: built, installed with its declared dependencies into a
clean virtual environment, then `workbench convert` and `workbench doctor` run from there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from conftest import NOISY_TENSORFLOW, REPO, user_environment

# On CI's other stack, `make install` resolves the same [cpu] ranges (within all the extras), and
# test_quiet.py and cli/test_doctor_command.py run `convert --json` and `doctor` as here (a fresh
# process, NOISY_TENSORFLOW): what is left is packaging, the same on both stacks.
pytestmark = [pytest.mark.slow, pytest.mark.stack_independent(
    reason="packaging; `workbench convert` and `doctor` run here in test_quiet.py and "
    "cli/test_doctor_command.py")]


def run(*command: str | Path, cwd: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd,
                          env=user_environment(NOISY_TENSORFLOW), timeout=timeout)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def source_copy(target: Path) -> Path:
    """The files git would ship (tracked, or new and not ignored), so the build writes its
    build/ and egg-info folders there and not into the checkout."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, cwd=REPO, check=True).stdout
    for name in listed.splitlines():
        source = REPO / name
        if source.is_file() and not name.startswith(("tests/", "notebooks/", "benchmarks/")):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


def constraints() -> list[str]:
    """`-c FILE` when the repo pins CI's versions in constraints/*.txt: the only file, or the one
    pinning the TensorFlow this suite runs on."""
    files = sorted((REPO / "constraints").glob("*.txt"))
    if len(files) > 1:
        installed = {f"{dist}=={version}" for dist in ("tensorflow", "tensorflow-cpu")
                     if (version := _version(dist))}
        files = [f for f in files if installed & set(re.findall(r"^\S+==\S+", f.read_text(), re.M))]
    return ["-c", str(files[0])] if files else []


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def test_wheel_installs_and_runs(tmp_path: Path, tiny_saved_model: Path) -> None:
    source = source_copy(tmp_path / "source")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", source,
        cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("tftrt_workbench-*.whl")
    with zipfile.ZipFile(wheel) as files:  # the engine op's source, compiled on first use
        assert "workbench/engines/runtime/native_op/ort_engine_op.cc" in files.namelist()
        assert "workbench/checks/templates/tftrt_script.py.tmpl" in files.namelist()
        assert "workbench/ui/js/drawing.js" in files.namelist()
    venv = tmp_path / "venv"
    try:
        run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
        # --no-compile: pip's bytecode for TensorFlow's thousands of modules is no part of the
        # test (pip installs a module that does not compile all the same, without a word).
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", *constraints(),
            f"{wheel}[cpu]", cwd=tmp_path)
        converted = run(venv / "bin" / "workbench", "convert", tiny_saved_model, "--json",
                        cwd=tmp_path)
        doctor = run(venv / "bin" / "workbench", "doctor", cwd=tmp_path)
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # 2 GB, mostly TensorFlow
    assert converted.stderr == ""
    document = json.loads(converted.stdout)
    assert document["total_nodes"] > 0 and document["engines"]
    assert doctor.stderr == "" and str(venv) in doctor.stdout  # the venv's own Python
    assert doctor.stdout.splitlines()[-1].startswith("the workbench can run here")
