"""`workbench inspect`: a model TF-TRT converted, read without TF-TRT."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli


def test_cli_inspect_bad_input(tiny_saved_model: Path, tmp_path: Path) -> None:
    done = run_cli("inspect", str(tmp_path / "absent"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "No such path" in done.stderr
    done = run_cli("inspect", str(tiny_saved_model))
    assert done.returncode == 2 and "has no TRTEngineOp" in done.stderr
    assert "Traceback" not in done.stderr
