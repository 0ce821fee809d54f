"""Tuning on real Dask clusters: an external scheduler and worker started here on 127.0.0.1, a
worker killed mid-search, a trial that times out, a trial that kills every worker it runs on.
Every cluster is shut down by its fixture or test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workbench.tuning import tune

pytestmark = [pytest.mark.slow, pytest.mark.stack_independent(
    reason="Dask's clusters, workers and failures (the same dask on both stacks); trials on "
    "Dask workers run here in tuning/test_tune.py")]
DASK = str(Path(sys.executable).parent / "dask")
GRID = {"minimum_segment_size": [1, 2, 3]}


def _start(args: list[str], log: Path) -> subprocess.Popen:
    # Its own process group, so teardown ends the nanny and the worker process it started.
    return subprocess.Popen([DASK, *args], stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def external_cluster(tmp_path):
    """`dask scheduler` and one `dask worker` (one thread, with its nanny) as subprocesses;
    yields the scheduler's address and a client of the test's own."""
    from distributed import Client

    scheduler_file = tmp_path / "scheduler.json"
    processes = [_start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                         "--scheduler-file", str(scheduler_file)], tmp_path / "scheduler.log")]
    client = None
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        processes.append(_start(["worker", "--scheduler-file", str(scheduler_file),
                                 "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                                tmp_path / "worker.log"))
        client = Client(address, set_as_default=False, timeout=30)
        client.wait_for_workers(1, timeout=60)
        yield address, client
    finally:
        if client is not None:
            client.close()
        for process in reversed(processes):
            _stop(process)


def test_external_scheduler_survives_a_killed_worker(tiny_saved_model, tmp_path,
                                                     external_cluster):
    address, client = external_cluster
    (first_worker,) = client.scheduler_info()["workers"]
    killed = []

    def kill_during_the_next_trial(record):
        if killed:
            return
        killed.append(record)

        def kill():  # once the worker holds the next trial, SIGKILL its process
            deadline = time.monotonic() + 30
            while not any(client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.01)
            pids = client.run(os.getpid)
            os.kill(pids[first_worker], signal.SIGKILL)

        threading.Thread(target=kill).start()

    store = tmp_path / "runs"
    result = tune(tiny_saved_model, GRID, scheduler=address, store=store, progress=False,
                  on_trial=kill_during_the_next_trial)
    # The nanny restarted the worker, Dask ran the lost trial again: no trial is missing.
    assert [t.status for t in result.trials] == ["ok"] * 3, result.table
    assert killed[0].worker == first_worker
    assert {t.worker for t in result.trials} - {first_worker}, "no trial ran after the kill"
    assert all(t.worker.startswith("tcp://127.0.0.1:") for t in result.trials)
    assert len(list((store / "trials").glob("*/*.json"))) == 3


def test_external_scheduler_runs_trials_on_its_worker(tiny_saved_model, tmp_path,
                                                      external_cluster):
    address, client = external_cluster
    result = tune(tiny_saved_model, {"precision_mode": ["FP32", "FP16"]}, scheduler=address,
                  store=tmp_path, progress=False)
    workers = set(client.scheduler_info()["workers"])
    assert [t.status for t in result.trials] == ["ok", "ok"]
    assert {t.worker for t in result.trials} == workers


def test_a_slow_trial_times_out_and_the_search_goes_on(tiny_saved_model, tmp_path):
    # A fresh worker's first trial imports TensorFlow: far longer than half a second.
    result = tune(tiny_saved_model, {"minimum_segment_size": [1, 2]}, workers=1, timeout=0.5,
                  store=tmp_path, progress=False)
    assert [t.status for t in result.trials] == ["timeout", "timeout"]
    assert all("no result within 0.5 s" in t.reason and "worker was restarted" in t.reason
               for t in result.trials)
    # Stored: a re-run keeps them (nothing runs), --retry-failed runs them again.
    again = tune(tiny_saved_model, {"minimum_segment_size": [1, 2]}, store=tmp_path,
                 progress=False)
    assert [(t.status, t.reused) for t in again.trials] == [("timeout", True)] * 2
    retried = tune(tiny_saved_model, {"minimum_segment_size": [1, 2]}, store=tmp_path,
                   progress=False, retry_failed=True)
    assert [(t.status, t.reused) for t in retried.trials] == [("ok", False)] * 2


def test_a_trial_that_kills_its_workers_is_recorded_failed(tiny_saved_model, tmp_path):
    """Workers whose memory limit is below TensorFlow's footprint: the nanny kills each
    worker that runs the trial, until Dask gives up on it (KilledWorker)."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               memory_limit="350MB", dashboard_address=":0",
                               scheduler_kwargs={"dashboard": False})
        try:
            with Client(cluster, set_as_default=False) as client:
                result = tune(tiny_saved_model, {"minimum_segment_size": [1]}, client=client,
                              store=tmp_path, progress=False)
        finally:
            cluster.close()
    (trial,) = result.trials
    assert trial.status == "failed"
    assert trial.reason.startswith("the trial killed its worker process every time it ran")
    assert "KilledWorker" in trial.reason
