"""`workbench export`: a conversion carried out, its one-line errors."""

from __future__ import annotations

import pytest
from conftest import run_cli

import sample_models
from workbench.checks.export_formats import export
from workbench.errors import WorkbenchError


@pytest.mark.slow
def test_onnx_export_writes_only_a_checked_model(tmp_path) -> None:
    target = tmp_path / "digits.onnx"
    run = run_cli("export", str(sample_models.build("digits_cnn")), "--format", "onnx",
                  "-o", str(target))
    assert run.returncode == 0, run.stderr
    import onnx

    onnx.checker.check_model(onnx.load(str(target)))
    assert [p.name for p in tmp_path.iterdir()] == ["digits.onnx"]


@pytest.mark.slow
def test_a_model_tf2onnx_cannot_export_is_one_line_and_nothing_is_written(tmp_path) -> None:
    run = run_cli("export", str(sample_models.build("lstm")), "--format", "onnx",
                  "-o", str(tmp_path / "lstm.onnx"))
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0
    assert "tf2onnx cannot express" in run.stderr and "TensorListReserve" in run.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_missing_output_directory_is_one_line(tmp_path) -> None:
    for fmt in ("tftrt", "onnx", "trtexec"):
        run = run_cli("export", str(sample_models.build("quickstart_mlp")), "--format", fmt,
                      "-o", str(tmp_path / "missing" / "out"))
        assert run.returncode == 2
        assert run.stderr.strip() == (f"workbench: error: the output directory "
                                      f"{tmp_path / 'missing'} does not exist: create it first")
    with pytest.raises(WorkbenchError, match="unknown export format"):
        export(sample_models.build("quickstart_mlp"), "savedmodel", tmp_path / "x")
