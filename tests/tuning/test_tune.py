"""workbench.tune: the grid, records and their store, Pareto set and recommendation, and real
searches on an embedded Dask LocalCluster (resume, the CLI's JSON)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from workbench.errors import ConversionParamsError
from workbench.tuning import GRID_KEYS, TrialRecord, TuneResult, expand_grid, tune
from workbench.tuning.grid import TuneError
from workbench.tuning.record import trial_id
from workbench.tuning.trial_store import TrialStore

TABLE_COLUMNS = ["trial_id", "precision_mode", "minimum_segment_size", "use_dynamic_shape",
                 "dynamic_shape_profile_strategy", "denylist", "max_engines", "status", "reason",
                 "percent_converted", "engines", "latency_ms", "latency_p50_ms",
                 "latency_p99_ms", "speedup", "max_abs_error", "top1_agreement", "backend",
                 "device", "tensorrt_built", "worker", "pareto", "recommended", "seconds"]


# --- the grid -----------------------------------------------------------------------------


def test_grid_expands_in_order_with_tftrt_defaults():
    points = expand_grid({"minimum_segment_size": [2, 5], "precision_mode": ["fp32", "FP16"]})
    assert [(p.params["precision_mode"], p.params["minimum_segment_size"]) for p in points] == [
        ("FP32", 2), ("FP32", 5), ("FP16", 2), ("FP16", 5)]
    assert all(p.skip_reason is None for p in points)
    assert points[0].params == {"precision_mode": "FP32", "minimum_segment_size": 2,
                                "use_dynamic_shape": False,
                                "dynamic_shape_profile_strategy": None, "denylist": [],
                                "max_engines": 20}
    assert len(expand_grid(None)) == 1 and set(expand_grid({})[0].params) == set(GRID_KEYS)


def test_a_profile_strategy_without_dynamic_shape_is_skipped_with_the_reason():
    points = expand_grid({"use_dynamic_shape": [False, True],
                          "dynamic_shape_profile_strategy": ["Range", "optimal"]})
    skipped = [p for p in points if p.skip_reason]
    run = [p for p in points if not p.skip_reason]
    assert [p.params["dynamic_shape_profile_strategy"] for p in skipped] == ["Range", "optimal"]
    assert "needs use_dynamic_shape=True" in skipped[0].skip_reason
    # The implicit-batch point runs once; the explicit ones once per strategy.
    assert [(p.params["use_dynamic_shape"], p.params["dynamic_shape_profile_strategy"])
            for p in run] == [(False, None), (True, "Range"), (True, "Optimal")]


def test_denylists_are_lists_or_comma_strings():
    points = expand_grid({"denylist": [[], ["Relu", "MatMul"], "Softmax, Relu"]})
    assert [p.params["denylist"] for p in points] == [[], ["MatMul", "Relu"], ["Relu", "Softmax"]]


@pytest.mark.parametrize("grid, message", [
    ({"precision_mode": ["FP64"]}, "precision mode 'FP64' is not supported"),
    ({"minimum_segment_size": [0]}, "minimum segment size should be positive"),
    ({"dynamic_shape_profile_strategy": ["Fastest"]}, "profile_strategy 'Fastest'"),
    ({"max_engines": ["many"]}, "max_engines must be an integer"),
])
def test_an_impossible_value_is_one_clear_error(grid, message):
    with pytest.raises(ConversionParamsError, match=message):
        expand_grid(grid)


@pytest.mark.parametrize("grid, message", [
    ({"precision": ["FP16"]}, "unknown grid key"),
    ({"minimum_segment_size": []}, "has no values"),
    ({"use_dynamic_shape": ["on"]}, "True or False"),
    ({"denylist": [[1, 2]]}, "list of op types"),
])
def test_a_malformed_grid_says_what_to_do(grid, message):
    with pytest.raises(TuneError, match=message):
        expand_grid(grid)


# --- records, store, Pareto set -------------------------------------------------------------


def _record(tid: str, latency: float | None, error: float | None, percent: float,
            status: str = "ok", top1: float | None = 1.0) -> TrialRecord:
    size = max(1, int(percent))
    return TrialRecord(
        trial_id=tid, params=expand_grid({"minimum_segment_size": [size]})[0].params,
        status=status, percent_converted=percent, engines=1,
        latency_ms={1: {"mean": latency, "p50": latency, "p99": latency}} if latency else {},
        speedup=2.0 if latency else None, max_abs_error=error, top1_agreement=top1,
        backend="onnxruntime", device="CPU", worker="tcp://127.0.0.1:1",
        step_seconds={"convert": 0.1}, seconds=1.0)


def test_record_round_trips_through_json():
    record = _record("a", 1.5, 1e-6, 50.0)
    back = TrialRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back == record and back.latency_ms == {1: {"mean": 1.5, "p50": 1.5, "p99": 1.5}}
    for bad in ([], {"format": "other"}, {**record.to_dict(), "status": "great"}):
        with pytest.raises(ValueError):
            TrialRecord.from_dict(bad)


def test_trial_ids_are_stable_and_depend_on_everything_measured():
    params = expand_grid(None)[0].params
    settings = {"batch_sizes": [1], "validate": True, "time_latency": True}
    assert trial_id("m", params, settings) == trial_id("m", dict(params), dict(settings))
    assert trial_id("m", params, settings) != trial_id("other", params, settings)
    assert trial_id("m", params, settings) != trial_id("m", params, {**settings,
                                                                      "batch_sizes": [1, 8]})


def test_store_keeps_trials_atomically_and_distrusts_bad_files(tmp_path):
    store = TrialStore(tmp_path, "fingerprint")
    path = store.save(_record("abc", 1.0, 0.0, 50.0))
    assert path == tmp_path / "trials" / "fingerprint" / "abc.json"
    assert not list(path.parent.glob(".*"))  # no temporary file left behind
    (path.parent / "torn.json").write_text('{"format": "tftrt-workbench-trial/1", "tri')
    (path.parent / "moved.json").write_text(path.read_text())  # holds trial abc
    with pytest.warns(UserWarning, match="ignored stored trial") as warned:
        loaded = TrialStore(tmp_path, "fingerprint").load()
    assert list(loaded) == ["abc"] and len(warned) == 2
    assert TrialStore(tmp_path, "another model").load() == {}


def test_pareto_set_and_recommendation():
    trials = [_record("fast-inexact", 1.0, 0.5, 90.0),  # fastest, but too far from native
              _record("fast-exact", 2.0, 1e-5, 80.0),
              _record("slow-exact", 3.0, 1e-6, 95.0),
              _record("dominated", 4.0, 1e-4, 70.0),
              _record("broken", None, None, 0.0, status="failed")]
    result = TuneResult(trials)
    assert list(result.table.columns) == TABLE_COLUMNS
    assert set(result.pareto.trial_id) == {"fast-inexact", "fast-exact", "slow-exact"}
    assert result.recommended["trial_id"] == "fast-exact"
    assert result.recommended["reason"].startswith("the fastest trial whose outputs stay within")
    assert "2.00 ms at batch 1" in result.recommended["reason"]
    assert result.table.set_index("trial_id").loc["fast-exact", "recommended"]
    figures = result.figures()
    assert set(figures) == {"pareto", "latency", "conversion"}
    assert sum(len(trace.x) for trace in figures["pareto"].data) >= 4  # the ok trials, drawn
    document = json.loads(json.dumps(result.to_json()))
    assert [t["trial_id"] for t in document["pareto"]] == ["fast-inexact", "fast-exact",
                                                          "slow-exact"]


def test_without_latency_the_most_converted_trial_is_recommended():
    trials = [_record("a", None, None, 50.0), _record("b", None, None, 75.0)]
    result = TuneResult(trials)
    assert list(result.pareto.trial_id) == ["b"]
    assert "latency not measured" in result.recommended["reason"]
    assert TuneResult([_record("x", None, None, 0.0, status="failed")]).recommended is None


def test_inaccurate_trials_only_recommend_the_most_accurate():
    result = TuneResult([_record("a", 1.0, 0.5, 50.0), _record("b", 2.0, 0.2, 50.0)])
    assert result.recommended["trial_id"] == "b"
    assert result.recommended["reason"].startswith("no trial stays within")


def test_recommendation_explains_ties_and_larger_speedups_of_slower_trials():
    chosen, tie, slower = (_record("chosen", 2.00, 1e-5, 80.0), _record("tie", 2.05, 1e-5, 60.0),
                           _record("slower", 3.00, 1e-5, 40.0))
    slower = dataclasses.replace(slower, speedup=3.5)  # its native TF run happened to be slow
    reason = TuneResult([chosen, tie, slower]).recommended["reason"]
    assert TuneResult([chosen, tie, slower]).recommended["trial_id"] == "chosen"
    assert "FP32 min 60 timed within 5% of it, which is within timing noise: a tie" in reason
    assert "FP32 min 40 shows a larger speed-up (3.50x) but ran slower (3.00 ms)" in reason
    alone = TuneResult([chosen, _record("far", 9.0, 1e-5, 50.0)]).recommended["reason"]
    assert "tie" not in alone and "larger speed-up" not in alone


@pytest.mark.slow
def test_trials_on_two_workers_measure_one_at_a_time(local_client):
    """The measuring lock: two workers' checks never overlap (each would steal the other's
    cores and slow its timing)."""

    def hold_measuring_turn(seconds: float) -> tuple[float, float]:  # pickled by value
        import time

        from workbench.tuning.trial import _measuring_turn

        with _measuring_turn():
            start = time.time()
            time.sleep(seconds)
            return start, time.time()

    workers = list(local_client.scheduler_info()["workers"])
    futures = [local_client.submit(hold_measuring_turn, 1.0, pure=False, workers=[w])
               for w in workers]
    (start_a, end_a), (start_b, end_b) = sorted(local_client.gather(futures))
    assert len(workers) == 2 and end_a <= start_b


def test_tune_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(TuneError, match="No such path"):
        tune(tmp_path / "missing", store=tmp_path)
    with pytest.raises(TuneError, match="need the model on disk"):
        tune(object(), store=tmp_path)
    with pytest.raises(TuneError, match="timeout"):
        tune(tmp_path, timeout=0, store=tmp_path)
    with pytest.raises(TuneError, match="one of workers=, scheduler= or client="):
        tune(tmp_path, {"minimum_segment_size": [99]}, workers=1, scheduler="tcp://x:1",
             store=tmp_path)


# --- real searches on a LocalCluster ------------------------------------------------------


@pytest.fixture(scope="module")
def local_client():
    """Two worker processes, one thread each, shut down after the module."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", scheduler_kwargs={"dashboard": False})
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow
def test_local_cluster_search_then_resume(tiny_saved_model, tmp_path, local_client):
    grid = {"precision_mode": ["FP32", "FP16"], "minimum_segment_size": [1, 3]}
    seen = []
    result = tune(tiny_saved_model, grid, batch_sizes=(1, 4), client=local_client,
                  store=tmp_path, progress=False, on_trial=seen.append)
    assert len(result.trials) == 4 and len(seen) == 4
    assert all(t.status == "ok" and not t.reused for t in result.trials), result.table
    workers = set(local_client.scheduler_info()["workers"])
    for t in result.trials:
        assert t.worker in workers and t.percent_converted > 0 and t.engines >= 1
        assert set(t.latency_ms) == {1, 4} and set(t.latency_ms[1]) == {"mean", "p50", "p99"}
        assert t.speedup > 0 and t.max_abs_error < 1e-2 and t.top1_agreement == 1.0
        assert t.backend == "onnxruntime" and t.device
        assert set(t.step_seconds) == {"convert", "build", "validate", "time"}
    assert list(result.table.columns) == TABLE_COLUMNS
    assert not result.pareto.empty and result.recommended["reason"]
    assert all(len(figure.data) for figure in result.figures().values())
    stored = list((tmp_path / "trials").glob("*/*.json"))
    assert len(stored) == 4

    # A re-run reads the four back and runs only the two new points.
    seen.clear()
    again = tune(tiny_saved_model, {**grid, "minimum_segment_size": [1, 3, 2]},
                 batch_sizes=(4, 1), client=local_client, store=tmp_path, progress=False,
                 on_trial=seen.append)
    assert [t.reused for t in seen] == [True] * 4 + [False] * 2
    assert all(t.params["minimum_segment_size"] == 2 and t.status == "ok" for t in seen[4:])
    assert len(again.trials) == 6 and sum(t.reused for t in again.trials) == 4
    assert len(list((tmp_path / "trials").glob("*/*.json"))) == 6


@pytest.mark.slow
def test_conversion_only_trials_skip_build_and_timing(tiny_saved_model, tmp_path,
                                                      local_client):
    result = tune(tiny_saved_model, {"minimum_segment_size": [1, 2]}, client=local_client,
                  store=tmp_path, validate=False, time_latency=False, progress=False)
    for t in result.trials:
        assert t.status == "ok" and set(t.step_seconds) == {"convert"}
        assert t.latency_ms == {} and t.max_abs_error is None and t.speedup is None
    assert "latency not measured" in result.recommended["reason"]


def _save_numbers_model(path: Path) -> Path:
    """A model whose string input feeds StringToNumber: it converts, but no input for it can be
    generated, so its check fails."""
    import tensorflow as tf

    class Numbers(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(tf.random.stateless_normal([4, 8], seed=[1, 2]))
            self.v = tf.Variable(tf.random.stateless_normal([8, 2], seed=[3, 4]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.string, name="numbers")])
        def serve(self, numbers):
            hidden = tf.nn.relu(tf.matmul(tf.strings.to_number(numbers), self.w) + 1.0)
            return {"logits": tf.matmul(hidden, self.v)}

    model = Numbers()
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    return path


@pytest.mark.slow
def test_a_failing_trial_keeps_its_reason_and_what_it_measured(tmp_path, local_client):
    model = _save_numbers_model(tmp_path / "numbers")
    result = tune(model, {"minimum_segment_size": [3]},
                  client=local_client, store=tmp_path / "store", progress=False)
    (trial,) = result.trials
    assert trial.status == "failed" and "cannot generate string input 'numbers'" in trial.reason
    assert trial.percent_converted > 0 and trial.engines >= 1 and trial.latency_ms == {}
    assert result.recommended is None and result.pareto.empty


def test_workbench_tune_is_the_function_whatever_was_imported_first():
    import workbench
    import workbench.tuning  # the package imported first must not hide the function
    from workbench.ui.progress_bars import tune as tune_with_a_bar

    # workbench.tune is the search with a progress bar in a notebook; the search itself
    # (workbench.tuning.tune) stays below the UI.
    assert workbench.tuning.tune is tune and workbench.tune is tune_with_a_bar
