"""`workbench tune`: the search from the command line, its JSON and one-line errors."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli


@pytest.mark.slow
def test_cli_tune_json_is_one_document(tiny_saved_model, tmp_path):
    done = run_cli("tune", str(tiny_saved_model), "--minimum-segment-size", "1,2",
                   "--profile-strategy", "Range", "--use-dynamic-shape", "off,on",
                   "--no-validate", "--store", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"trials", "pareto", "recommended"}
    assert len(document["trials"]) == 6  # 2 sizes x (implicit, explicit, skipped)
    for trial in document["trials"]:
        assert {"params", "status", "percent_converted", "engines", "latency_ms", "speedup",
                "max_abs_error", "top1_agreement", "backend", "device", "worker"} <= set(trial)
    ran = [t for t in document["trials"] if t["status"] == "ok"]
    assert len(ran) == 4 and all(t["worker"].startswith("tcp://127.0.0.1:") for t in ran)
    assert all(t["max_abs_error"] is None and t["latency_ms"]["1"]["mean"] > 0 for t in ran)
    assert {t["status"] for t in document["trials"]} == {"ok", "skipped"}
    assert document["recommended"]["reason"] and document["pareto"]
    # One line per finished trial on stderr, nothing else.
    lines = done.stderr.splitlines()
    assert len(lines) == 6 and all(line.startswith("workbench tune: [") for line in lines)


def test_cli_tune_errors_are_one_line(tmp_path):
    done = run_cli("tune", str(tmp_path), "--minimum-segment-size", "two")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "workbench: error: --minimum-segment-size takes whole numbers separated by commas, "
        "got 'two'"]
    done = run_cli("tune", str(tmp_path), "--scheduler", "tcp://127.0.0.1:9",
                   "--store", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("workbench: error: cannot reach Dask scheduler at "
                                  "tcp://127.0.0.1:9: ")
    assert "start one with `dask scheduler` or drop --scheduler" in done.stderr
