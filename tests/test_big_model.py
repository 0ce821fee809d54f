"""A model past protobuf's 2 GiB (2.42 GB of float32 weights, built here, not committed) through
`workbench convert`, `workbench check`, `workbench export` (the TF-TRT script and the whole
model as ONNX, its weights in a data file), the HTML report, the app (open, summary, graph,
Export tab) and the user guide's convert, build, save, reload path.

It needs about 8 GB of memory and 10 GB of disk, so it runs only when asked:
`WORKBENCH_BIG_MODEL_TESTS=1 pytest tests/test_big_model.py` (docs/memory.md has its figures).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO, user_environment

import workbench
from sample_models import big_dense
from workbench import trt_convert as trt
from workbench.cli import main as cli
from workbench.durable_files import format_bytes

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("WORKBENCH_BIG_MODEL_TESTS") != "1",
                       reason="a 2 GB model: set WORKBENCH_BIG_MODEL_TESTS=1"),
]
SHAPE = (4096, (16384, 16384, 16384), 8)
PROTOBUF_LIMIT = 2**31  # bytes: 2 GiB


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "model"
    weights = big_dense.build(path, *SHAPE)
    assert weights > PROTOBUF_LIMIT
    return path, weights


def test_cli_convert_export_and_report_past_2_gb(big_model: tuple[Path, int], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model, _ = big_model
    assert cli(["convert", str(model), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["engines"]) == 1 and report["percent_converted"] > 80  # 88.24
    assert cli(["export", str(model), "--format", "tftrt", "-o", str(tmp_path / "s.py")]) == 0
    assert "TrtGraphConverterV2" in (tmp_path / "s.py").read_text()
    assert cli(["report", str(model), "-o", str(tmp_path / "r.html")]) == 0
    assert "TRTEngineOp_000_000" in (tmp_path / "r.html").read_text()


def workbench_cli(*args: str) -> subprocess.CompletedProcess:
    """`workbench ARGS` in a process of its own: its memory is handed back when it ends."""
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True,
                          text=True, cwd=REPO, env=user_environment(), timeout=1800)


def test_cli_check_past_2_gb(big_model: tuple[Path, int]) -> None:
    run = workbench_cli("check", str(big_model[0]), "--json", "--iterations", "2")
    assert run.returncode == 0, run.stderr
    check = json.loads(run.stdout)
    assert check["passed"] is True and check["metrics"]["max_abs_error"] < 1e-4


def test_onnx_export_past_2_gb_keeps_its_weights_beside_and_runs(big_model: tuple[Path, int],
                                                                 tmp_path: Path) -> None:
    import onnxruntime

    model, weights = big_model
    target = tmp_path / "big.onnx"
    run = workbench_cli("export", str(model), "--format", "onnx", "-o", str(target))
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    assert target.stat().st_size < 1 << 20  # the graph; the weights are in the data file
    # Every kernel; the biases (zeros: TensorFlow keeps one value) stay in the model.
    assert (tmp_path / "big.onnx.data").stat().st_size >= 0.99 * weights
    x = np.random.default_rng(3).standard_normal([2, SHAPE[0]], np.float32)
    onnx_y = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"]
                                          ).run(["y"], {"x": x})[0]
    native = tf.saved_model.load(str(model)).signatures["serving_default"]
    np.testing.assert_allclose(onnx_y, native(x=tf.constant(x))["y"], atol=1e-4)


def test_app_past_2_gb(big_model: tuple[Path, int], tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.ui import Workbench

    monkeypatch.chdir(tmp_path)
    app = Workbench(big_model[0], store=tmp_path / "runs", background=False)
    assert app.error is None, app.status.value
    assert "[*] Total number of TensorRT engines: 1" in app.summary_tab.html.value
    assert app.graph_tab.html.value.count("<svg") == 1 and "TRTEngineOp_000_000" in app.svg
    app.export_tab.button.click()  # the TF-TRT script
    written = tmp_path / "workbench_exports" / "convert_tftrt.py"
    assert app.error is None and written.is_file()
    assert f"({format_bytes(written.stat().st_size)})" in app.export_tab.result.value
    del app
    gc.collect()


def test_save_and_reload_past_2_gb_store_each_weight_twice(big_model: tuple[Path, int],
                                                          tmp_path: Path) -> None:
    model, weights = big_model
    x = np.random.default_rng(1).standard_normal([2, SHAPE[0]], np.float32)
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(model))
    function = converter.convert()
    converter.build(lambda: iter([[x]]))
    expected = function(x)["y"].numpy()
    converter.save(str(tmp_path / "out"))
    del converter, function
    disk = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert disk <= 2.2 * weights
    np.testing.assert_allclose(workbench.load(tmp_path / "out")(x)["y"], expected, atol=1e-5)
    plain = tf.saved_model.load(str(tmp_path / "out")).signatures["serving_default"]
    np.testing.assert_allclose(plain(x=tf.constant(x))["y"], expected, atol=1e-4)
