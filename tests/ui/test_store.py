"""The experiment store: runs survive restarts and crashes; bad files are reported, not lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.ui.store import FORMAT, TABLE_COLUMNS, ExperimentStore, Run, StoreError

REPO = Path(__file__).resolve().parents[2]


def _engine(index: int, nodes: int) -> EngineInfo:
    return EngineInfo(
        name=f"TRTEngineOp_000_{index:03d}", nodes=tuple(f"n{i}" for i in range(nodes)),
        native_ops={"Conv2D": nodes}, native_node_count=nodes + 1, effective_size=nodes,
        input_dtypes=("float32",), output_dtypes=("float32",),
        input_shapes=((-1, 8),), output_shapes=((-1, 2),),
    )


def _result(params: ConversionParams, engine_sizes=(5, 3)) -> ConversionResult:
    return ConversionResult(
        params=params,
        engines=[_engine(i, n) for i, n in enumerate(engine_sizes)],
        unconverted=[], nonconversion={}, not_converted_top_level=4,
        model="/models/tiny", signature_key="serving_default",
    )


def _run(name: str, **params) -> Run:
    conversion = ConversionParams(**params)
    return Run.from_result(_result(conversion), conversion, name=name)


def test_from_result_records_params_counts_and_engines() -> None:
    params = ConversionParams(precision_mode="fp16", denylist=("Relu",), minimum_segment_size=2)
    run = Run.from_result(_result(params, engine_sizes=(3, 5)), params)
    assert run.model == "/models/tiny" and run.signature_key == "serving_default"
    assert run.params["precision_mode"] == "FP16"  # validated, as the conversion saw it
    assert run.params["denylist"] == ["Relu"]
    assert run.params["maximum_cached_engines"] == 1  # the rest of ConversionParams too
    # # Nodes counts the native segment (Consts included): 4 + 6 converted, plus 4 outside.
    assert run.counts == {"engines": 2, "converted_nodes": 10, "total_nodes": 14,
                          "percent_converted": 71.43}
    assert run.engines == [
        {"name": "TRTEngineOp_000_000", "nodes": 4, "effective_size": 3},
        {"name": "TRTEngineOp_000_001", "nodes": 6, "effective_size": 5},
    ]
    assert run.name == "FP16 min 2 deny Relu"
    assert run.created.endswith("+00:00") and run.metrics == {} and run.notes == ""


def test_a_sweep_result_keeps_its_own_threshold() -> None:
    params = ConversionParams(minimum_segment_size=3)
    result = _result(ConversionParams(minimum_segment_size=7))
    assert Run.from_result(result, params).params["minimum_segment_size"] == 7


def test_runs_survive_a_new_store_object(tmp_path: Path) -> None:
    first = ExperimentStore(tmp_path / "runs")
    kept = [first.add(_run(f"run {i}", minimum_segment_size=i + 1)) for i in range(3)]
    reopened = ExperimentStore(tmp_path / "runs")  # as after a kernel restart
    assert reopened.runs() == kept
    assert reopened.problems == []
    files = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert files == sorted(f"run-{run.run_id}.json" for run in kept)
    assert json.loads((tmp_path / "runs" / files[0]).read_text())["format"] == FORMAT


def test_runs_are_oldest_first_and_ids_unique(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    runs = [_run(str(i)) for i in range(20)]
    assert len({run.run_id for run in runs}) == 20
    for run in reversed(runs):
        store.add(run)
    assert [run.name for run in store.runs()] == [str(i) for i in range(20)]


def test_table_has_the_contract_columns_and_one_column_per_metric(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    a = store.add(_run("a", precision_mode="FP16", denylist=("Relu", "Add")))
    b = _run("b", use_dynamic_shape=True)
    b.metrics = {"latency_ms": 1.5, "accuracy": 0.98}
    store.add(b)
    c = _run("c")
    c.metrics = {"throughput": 900.0, "latency_ms": 2.5}
    store.add(c)
    table = store.table()
    assert list(table.columns) == [*TABLE_COLUMNS, "latency_ms", "accuracy", "throughput"]
    assert list(table["name"]) == ["a", "b", "c"]
    first = table.iloc[0]
    assert first["run_id"] == a.run_id and first["precision_mode"] == "FP16"
    assert first["denylist"] == "Add,Relu"
    assert pd.isna(first["dynamic_shape_profile_strategy"])
    assert table.iloc[1]["dynamic_shape_profile_strategy"] == "Range"
    assert list(table["engines"]) == [2, 2, 2]
    assert list(table["percent_converted"]) == [71.43] * 3
    assert table["latency_ms"].tolist()[1:] == [1.5, 2.5]
    assert table["latency_ms"].isna().tolist() == [True, False, False]


def test_an_empty_store_has_an_empty_table(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path / "never-created")
    assert store.runs() == [] and store.problems == []
    assert list(store.table().columns) == list(TABLE_COLUMNS)
    assert not (tmp_path / "never-created").exists()  # reading never creates the directory


def test_updating_metrics_rewrites_only_that_run(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    a, b = store.add(_run("a")), store.add(_run("b"))
    before = (tmp_path / f"run-{a.run_id}.json").stat().st_mtime_ns
    store.update(b.run_id, metrics={"latency_ms": 3.0}, notes="fast")
    assert (tmp_path / f"run-{a.run_id}.json").stat().st_mtime_ns == before
    assert store.get(b.run_id).metrics == {"latency_ms": 3.0}
    assert store.get(b.run_id).notes == "fast"
    assert len(store.runs()) == 2


def test_numpy_metrics_are_stored_as_numbers_and_junk_writes_nothing(tmp_path: Path) -> None:
    import numpy as np

    store = ExperimentStore(tmp_path)
    run = _run("np")
    run.metrics = {"latency_ms": np.float32(1.25), "batch": np.int64(8)}
    store.add(run)
    assert store.runs()[0].metrics == {"latency_ms": 1.25, "batch": 8}
    bad = _run("bad")
    bad.metrics = {"model": object()}
    with pytest.raises(TypeError, match="cannot store"):
        store.add(bad)
    assert len(list(tmp_path.iterdir())) == 1  # neither a run file nor a temp file


def test_remove_deletes_one_run(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    a, b = store.add(_run("a")), store.add(_run("b"))
    store.remove(a.run_id)
    assert store.runs() == [b]
    with pytest.raises(StoreError, match="no run"):
        store.remove(a.run_id)


@pytest.mark.parametrize("run_id", ["../escape", "", ".hidden", "a/b"])
def test_run_ids_cannot_leave_the_store(tmp_path: Path, run_id: str) -> None:
    run = _run("x")
    run.run_id = run_id
    with pytest.raises(StoreError):
        ExperimentStore(tmp_path / "runs").add(run)
    assert not (tmp_path / "escape").exists()


CORRUPT = {
    "run-truncated.json": None,  # filled in with half a real run
    "run-notjson.json": b"this is not json",
    "run-binary.json": b"\xff\xfe\x00garbage",
    "run-wrongformat.json": json.dumps({"format": "someone-else/9", "run_id": "x"}).encode(),
    "run-list.json": b"[1, 2, 3]",
    "run-missing.json": json.dumps({"format": FORMAT, "run_id": "x"}).encode(),
    "run-badtype.json": None,  # a real run whose counts is a string
}


def test_corrupt_files_are_reported_left_alone_and_good_runs_kept(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    good = [store.add(_run("good 1")), store.add(_run("good 2"))]
    whole = json.dumps(_run("victim").to_dict()).encode()
    files = dict(CORRUPT)
    files["run-truncated.json"] = whole[: len(whole) // 2]
    files["run-badtype.json"] = json.dumps({**_run("t").to_dict(), "counts": "many"}).encode()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert store.runs() == good
    assert len(store.problems) == len(files)
    for name in files:
        [line] = [p for p in store.problems if name in p]
        assert "\n" not in line and "unreadable run file" in line
    assert "expected 'tftrt-workbench-run/1'" in next(p for p in store.problems if "wrong" in p)
    assert "missing field" in next(p for p in store.problems if "run-missing" in p)
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data  # untouched
    assert len(store.table()) == 2
    store.add(_run("good 3"))  # the store stays usable
    assert len(store.runs()) == 3 and len(store.problems) == len(files)


# The child keeps three runs, says so, then writes one with ~200 MB of notes and is killed while
# that write is in flight (the parent waits for the temp file to appear).
_CHILD = """
import sys
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.ui.store import ExperimentStore, Run

store = ExperimentStore(sys.argv[1])
params = ConversionParams()
result = ConversionResult(params=params, engines=[], unconverted=[],
                          nonconversion={}, not_converted_top_level=1, model="m")
for i in range(3):
    store.add(Run.from_result(result, params, name=f"kept {i}"))
print("ready", flush=True)
sys.stdin.readline()
huge = Run.from_result(result, params, name="huge")
huge.notes = "x" * 200_000_000
while True:
    store.add(huge)
"""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # renamed away between listing and stat
        return 0


def _kill_during_write(root: Path) -> bool:
    """Runs the child; True when it was killed with a write in flight."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root)], cwd=REPO, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        kept = set(root.iterdir())
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill as soon as the new write has begun
            started = [p for p in set(root.iterdir()) - kept if _size(p) > 0]
            if started:
                os.kill(child.pid, signal.SIGKILL)
                break
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return any(p.name.endswith(".tmp") for p in root.iterdir())


def test_a_kill_during_a_write_loses_nothing_already_kept(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    killed_mid_write = _kill_during_write(root)
    store = ExperimentStore(root)
    names = [run.name for run in store.runs()]
    # The huge run may have completed on an earlier loop pass; never half of it.
    assert names[:3] == ["kept 0", "kept 1", "kept 2"]
    assert set(names[3:]) <= {"huge"}
    assert all(len(run.notes) == 200_000_000 for run in store.runs()[3:])
    assert store.problems == []  # the half-written temp file is no run and no problem
    assert killed_mid_write, "the child finished its write before the kill: nothing tested"
    store.add(_run("after the crash"))
    assert [run.name for run in store.runs()][-1] == "after the crash"
