"""`workbench estimate`: a model's latency estimated for a named GPU."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_path, run_cli


def test_cli_estimate_json_follows_the_contract():
    graph = fixture_path("torch-resnet18-a100-fp16") / "engine.graph.json"
    done = run_cli("estimate", "--trtexec-graph", str(graph), "--gpu", "A100", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"gpu", "total_ms", "total_low_ms", "total_high_ms", "layers",
                             "error_note"}
    assert document["gpu"] == "NVIDIA A100 80GB PCIe"
    assert len(document["layers"]) == len(json.loads(graph.read_text())["Layers"])
    assert set(document["layers"][0]) == {"name", "type", "estimated_ms", "estimated_low_ms",
                                          "estimated_high_ms"}
    assert document["total_low_ms"] < document["total_ms"] < document["total_high_ms"]
    assert document["total_ms"] == pytest.approx(
        sum(layer["estimated_ms"] for layer in document["layers"]), rel=0.05)


def test_cli_estimate_table_and_one_line_errors():
    graph = str(fixture_path("controlnet-a10-fp16") / "layerinfo.json")
    done = run_cli("estimate", "--trtexec-graph", graph, "--gpu",
                   "NVIDIA GeForce RTX 3060 Laptop GPU")
    assert done.returncode == 0, done.stderr
    assert "CaskConvolution" in done.stdout
    assert "estimated for NVIDIA GeForce RTX 3060" in done.stdout
    unknown = run_cli("estimate", "--trtexec-graph", graph, "--gpu", "Voodoo 5")
    assert unknown.returncode == 2 and "TITAN RTX" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    missing = run_cli("estimate", "--trtexec-graph", "no/such.json", "--gpu", "T4")
    assert missing.returncode == 2 and "cannot read" in missing.stderr
