"""`workbench convert`: TF-TRT's summary and report, the JSON, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import NOISY_TENSORFLOW, run_cli

import sample_models


def test_cli_json_advice_is_empty_when_nothing_helps(tiny_saved_model: Path) -> None:
    done = run_cli("convert", str(tiny_saved_model), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["advice"] == []


@pytest.mark.parametrize("flags, message", [
    (["--precision", "fp64"], "precision mode 'fp64' is not supported"),
    (["--minimum-segment-size", "0"], "minimum segment size should be positive or -1"),
    (["--use-dynamic-shape", "--profile-strategy", "Fastest"],
     "profile_strategy 'Fastest' is not supported"),
])
def test_cli_bad_parameters(flags: list[str], message: str, tiny_saved_model: Path) -> None:
    done = run_cli("convert", str(tiny_saved_model), *flags)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: ") and message in lines[0]


@pytest.mark.parametrize("extra, message", [
    ([], "No such path"),
    (["--signature-key", "predict"], "Signature key 'predict' not found"),
    (["--tags", "train"], "No MetaGraph with tags 'train'"),
])
def test_cli_bad_model(extra: list[str], message: str, tiny_saved_model: Path,
                       tmp_path: Path) -> None:
    model = str(tmp_path / "missing") if not extra else str(tiny_saved_model)
    done = run_cli("convert", model, *extra, env=NOISY_TENSORFLOW)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_cli_converts_a_loop_model() -> None:
    done = run_cli("convert", str(sample_models.build("lstm")), "--json",
                   "--minimum-segment-size", "1")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert len(document["engines"]) == 14
    assert "internal error" not in done.stderr


@pytest.mark.slow
def test_cli_text_prints_summary_then_report() -> None:
    done = run_cli("convert", str(sample_models.build("detector")), "--detailed")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("TRTEngineOP Name") < out.index("TensorRT unsupported/non-converted OP Report")
    assert "[Count: 1x] Cannot Convert Bilinear Resize when align_corners=False" in out


@pytest.mark.slow
def test_cli_frozen_graph_def(tiny_frozen_pb: Path) -> None:
    done = run_cli("convert", str(tiny_frozen_pb), "--outputs", "y", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["total_nodes"] > 0
    assert {u["name"] for u in document["unconverted"]} >= {"x", "y"}
