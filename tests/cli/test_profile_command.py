"""`workbench profile`: trtexec's exports as one layer table."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_path

from workbench.cli import main


def test_cli_prints_the_table(capsys):
    folder = fixture_path("keras-resnet50-rtx3090-qat")
    code = main(["profile", "--trtexec-profile", str(folder / "engine.profile.json"),
                 "--layer-info", str(folder / "engine.graph.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "63 layers, trtexec on NVIDIA GeForce RTX 3090" in out
    assert "INT8" in out and "CaskConvolution" in out and "resnet50/quant_avg_pool/Mean" in out


def test_cli_json_is_one_document(capsys):
    folder = fixture_path("keras-resnet50-rtx3090-fp16")
    code = main(["profile", "--trtexec-profile", str(folder / "engine.profile.json"), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(document["layers"]) == 86
    assert document["summary"]["throughput_qps"] == pytest.approx(248.211)
    assert document["layers"][2]["tf_nodes"] == ["resnet50/conv1_relu/Relu"]


def test_cli_bad_file_is_one_line_and_exit_code_2(tmp_path, capsys):
    path = tmp_path / "t.profile.json"
    path.write_text("[{")
    assert main(["profile", "--trtexec-profile", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("workbench: error: ") and "truncated JSON" in err
    assert "\n" not in err
