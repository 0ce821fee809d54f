"""`tune()`: the search. Expands the grid, reads finished trials back from the store, runs the
missing ones on Dask workers (one in flight per worker, each with its timeout), stores each
trial as it finishes, and returns the results.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.checks.conversion_check import check_batch_sizes
from workbench.errors import first_line
from workbench.graph.cache import content_key
from workbench.profiling.estimate.conversion import target_gpu_name
from workbench.tuning.cluster import Cluster, connect
from workbench.tuning.estimates import estimate_trials
from workbench.tuning.grid import TuneError, expand_grid
from workbench.tuning.progress import Progress, TrialDisplay
from workbench.tuning.record import TrialRecord, trial_id
from workbench.tuning.trial import TrialSpec, run_trial, session_for, thread_budget
from workbench.tuning.trial_store import TrialStore
from workbench.tuning.tune_result import TuneResult

DEFAULT_STORE = "workbench_runs"  # the app's runs store (workbench.ui.store) keeps its runs here
POLL_S = 0.25  # how soon a cancel or a timeout is noticed while trials run
RUNS_AGAIN = ("failed", "timeout")  # with retry_failed


def tune(model: str | os.PathLike, grid: Mapping[str, Sequence[Any]] | None = None, *,
         batch_sizes: Sequence[int] = (1,), workers: int | None = None,
         scheduler: str | None = None, client: Any = None,
         store: str | os.PathLike | None = None, timeout: float | None = None,
         validate: bool = True, time_latency: bool = True,
         progress: bool | TrialDisplay = True,
         on_trial: Callable[[TrialRecord], None] | None = None,
         cancel: threading.Event | None = None, signature_key: str | None = None,
         tags: Sequence[str] | None = None, retry_failed: bool = False,
         tensorrt: bool = False, target_gpu: str | None = None) -> TuneResult:
    """Runs one trial per grid point (keys: `GRID_KEYS`; missing keys take TF-TRT's defaults)
    on an embedded `LocalCluster` of `workers` processes, or on the cluster at `scheduler` or
    behind `client`. Finished trials are stored under `store` (default `./workbench_runs`) and
    reused by the next search; failed and timed-out ones run again with `retry_failed`.
    `progress` writes a line per finished trial on stderr, or tells a `TrialDisplay`
    (`workbench.tune` draws a bar in a notebook: `workbench.ui.progress_bars`). `on_trial` is told
    of every trial as it finishes (stored and skipped ones first); setting `cancel` stops the
    search, keeping what finished. `tensorrt` adds TensorRT's verdict (`tensorrt_built`:
    engines TensorRT-RTX builds), checking first that it is installed.
    `target_gpu` (e.g. "T4") adds each ok trial's latency estimated for that GPU at the first
    batch size, stored trials included (`tuning.estimates`); the Pareto set and the
    recommendation then rank by it, the measured figures kept beside it."""
    sizes = tuple(check_batch_sizes(batch_sizes))
    if target_gpu:  # an unknown GPU fails before any trial runs
        target_gpu_name(target_gpu)
    if timeout is not None and not timeout > 0:
        raise TuneError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    path = _model_path(model)
    tags = tuple(tags) if tags is not None else None
    points = expand_grid(grid)
    fingerprint = model_fingerprint(path, signature_key, tags)
    trial_store = TrialStore(DEFAULT_STORE if store is None else store, fingerprint)
    stored = trial_store.load()
    settings = {"batch_sizes": list(sizes), "validate": validate, "time_latency": time_latency,
                **({"tensorrt": True} if tensorrt else {})}  # ids without it stay as they were
    if tensorrt:
        from workbench.engines.inspection.tensorrt_verdict import require_tensorrt

        require_tensorrt()
    records: dict[str, TrialRecord] = {}
    order, missing = [], []
    for point in points:
        tid = trial_id(fingerprint, point.params, settings)
        order.append(tid)
        if point.skip_reason:
            records[tid] = TrialRecord(tid, point.params, "skipped", point.skip_reason)
        elif tid in stored and not (retry_failed and stored[tid].status in RUNS_AGAIN):
            records[tid] = stored[tid].as_reused()
        else:
            missing.append(TrialSpec(tid, path, point.params, sizes, validate, time_latency,
                                     signature_key, tags, tensorrt=tensorrt))
    bar = Progress(len(order), progress)

    def finished(record: TrialRecord) -> None:
        if not record.reused and record.status != "skipped":
            trial_store.save(record)
        records[record.trial_id] = record
        bar.update(record)
        if on_trial is not None:
            on_trial(record)

    for record in list(records.values()):
        finished(record)
    if missing and not (cancel is not None and cancel.is_set()):
        with connect(workers, scheduler, client) as cluster:
            threads = thread_budget(cluster.workers) if cluster.workers else None
            run_specs(cluster, [replace(s, threads=threads) for s in missing], timeout,
                      finished, cancel)
    trials = [records[t] for t in order if t in records]
    estimates = estimate_trials(session_for(path, signature_key, tags), trials, target_gpu,
                                sizes[0]) if target_gpu else None
    return TuneResult(trials, model=path, store=trial_store.directory,
                      problems=trial_store.problems, estimates=estimates)


def run_specs(cluster: Cluster, specs: Sequence[TrialSpec], timeout: float | None,
              finished: Callable[[TrialRecord], None],
              cancel: threading.Event | None = None) -> None:
    """Keeps one trial in flight per worker until every spec has a record (or `cancel`)."""
    from distributed import wait

    queue = deque(specs)
    running: dict[Any, tuple[TrialSpec, float]] = {}  # future -> (spec, handed over at)
    try:
        while queue or running:
            if cancel is not None and cancel.is_set():
                return
            while queue and len(running) < cluster.slots():
                spec = queue.popleft()
                future = cluster.client.submit(run_trial, spec, pure=False,
                                               key=f"trial-{spec.trial_id}-{time.time_ns()}")
                running[future] = (spec, time.monotonic())
            try:
                with cluster.client.as_current():  # wait() asks for "the current client"
                    done = wait(list(running), timeout=POLL_S,
                                return_when="FIRST_COMPLETED").done
            except (TimeoutError, asyncio.TimeoutError):
                done = set()
            for future in done:
                spec, _ = running.pop(future)
                finished(_outcome(future, spec))
            if timeout is not None:
                _time_out(cluster, running, timeout, finished)
    finally:
        for future in running:
            future.cancel()


def _time_out(cluster: Cluster, running: dict[Any, tuple[TrialSpec, float]], timeout: float,
              finished: Callable[[TrialRecord], None]) -> None:
    late = [f for f, (_, start) in running.items() if time.monotonic() - start >= timeout]
    if not late:
        return
    workers = cluster.processing()
    for future in late:
        spec, _ = running.pop(future)
        worker = workers.get(future.key)
        note = cluster.abandon(future, worker)
        finished(TrialRecord(spec.trial_id, spec.params, "timeout",
                             f"no result within {timeout:g} s of reaching a worker; {note}",
                             worker=worker, seconds=float(timeout)))


def _outcome(future: Any, spec: TrialSpec) -> TrialRecord:
    """The trial's record, or a failed one saying what Dask reported."""
    if future.status == "finished":
        return future.result()
    from distributed import KilledWorker

    exc = future.exception() if future.status == "error" else None
    if isinstance(exc, KilledWorker):
        reason = (f"the trial killed its worker process every time it ran (Dask's "
                  f"KilledWorker: {first_line(exc)})")
    elif exc is not None:
        reason = f"{type(exc).__name__}: {first_line(exc)}"
    else:
        reason = f"Dask reported the trial {future.status}"
    return TrialRecord(spec.trial_id, spec.params, "failed", reason)


def _model_path(model: Any) -> str:
    if not isinstance(model, (str, os.PathLike)):
        raise TuneError(f"tune() runs trials in worker processes, which need the model on disk, "
                        f"not a {type(model).__name__}: save it (model.save('model.keras')) and "
                        "pass the path")
    path = Path(model).resolve()
    if not path.exists():
        raise TuneError(f"No such path: {model}. Give a SavedModel directory, .keras or .pb.")
    return str(path)


def stored_trials(model: str | os.PathLike, store: str | os.PathLike | None = None,
                  ) -> list[TrialRecord]:
    """The trials earlier searches stored for the model at `model` under `store` (default
    `./workbench_runs`); the model is hashed only when the store holds any trial."""
    root = Path(DEFAULT_STORE if store is None else store)
    if not (root / "trials").is_dir():
        return []
    return list(TrialStore(root, model_fingerprint(model)).load().values())


def model_fingerprint(path: str | os.PathLike, signature_key: str | None = None,
                      tags: Sequence[str] | None = None) -> str:
    """The store's key for a model: its files' content key (`graph.cache.content_key`) with the
    signature and tags; moving or copying the model keeps it, any changed byte changes it."""
    content = content_key(path)
    if content is None:
        raise TuneError(f"No such path: {path}. Give a SavedModel directory, .keras or .pb.")
    signature = {"signature_key": signature_key or "serving_default",
                 "tags": sorted(tags) if tags else ["serve"]}
    digest = hashlib.blake2b(digest_size=10)
    digest.update(content.encode())
    digest.update(json.dumps(signature, sort_keys=True).encode())
    return digest.hexdigest()
