"""One trial, as it runs on a worker: convert, then build, validate and time through the
conversion check (`workbench.checks.conversion_check`), timing each step. Conversions run in
parallel; the check runs one trial at a time across the cluster (`MEASURING_LOCK`), so that
timings never compete with each other's work for the cores.

A worker process opens each model once and keeps its `ConversionSession`, so later trials
reuse the prepared graph and every clustering (the prepared-graph cache on disk makes the first
open cheap too). The first trial in a process quiets TensorFlow like the CLI and gives it the
worker's thread budget. A trial's own failure becomes a `failed` record, never an exception.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workbench.errors import first_line
from workbench.lazy import tf
from workbench.tuning.grid import params_of
from workbench.tuning.record import TrialRecord

# Which step a conversion-check progress message starts (the rest of the check is "convert").
_STEP_OF_MESSAGE = (("Calibrating", "build"), ("Building", "build"),
                    ("Comparing", "validate"), ("Timing", "time"))
MEASURING_LOCK = "workbench-tune-measuring"  # one trial measures at a time, cluster-wide
_sessions: dict[tuple, Any] = {}  # (model, signature key, tags) -> ConversionSession
_threads_set = False


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial (plain data: it is pickled to the worker)."""

    trial_id: str
    model: str
    params: dict[str, Any]
    batch_sizes: tuple[int, ...] = (1,)
    validate: bool = True
    time_latency: bool = True
    signature_key: str | None = None
    tags: tuple[str, ...] | None = None
    threads: int | None = None  # TensorFlow's intra-op threads; None: the worker's nthreads
    tensorrt: bool = False  # also TensorRT's verdict on every engine (TensorRT-RTX's builder)


def run_trial(spec: TrialSpec) -> TrialRecord:
    """Runs `spec` in this process; failures are recorded with their reason."""
    start = time.perf_counter()
    steps: dict[str, float] = {}
    figures: dict[str, Any] = {}  # what was measured, kept when a later step fails
    try:
        _prepare_process(spec.threads)
        _measure(_session(spec), spec, steps, figures)
        status, reason = "ok", None
    except Exception as exc:  # the trial's failure is its record, the search goes on
        status, reason = "failed", f"{type(exc).__name__}: {first_line(exc)}"
    return TrialRecord(trial_id=spec.trial_id, params=spec.params, status=status, reason=reason,
                       worker=worker_address(), step_seconds=steps,
                       seconds=time.perf_counter() - start, **figures)


def worker_address() -> str:
    """The Dask worker running this code, or "local" outside a worker."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _session(spec: TrialSpec) -> Any:
    return session_for(spec.model, spec.signature_key, spec.tags)


def session_for(model: str, signature_key: str | None, tags: tuple[str, ...] | None) -> Any:
    """The model opened once per process (a worker's trials, the driver's estimates)."""
    from workbench.conversion.session import ConversionSession

    key = (model, signature_key, tags)
    if key not in _sessions:
        _sessions[key] = ConversionSession.open(model, signature_key, tags)
    return _sessions[key]


def _measure(session: Any, spec: TrialSpec, steps: dict[str, float],
             figures: dict[str, Any]) -> None:
    params = params_of(spec.params)
    clock = time.perf_counter()
    result = session.convert(params)
    steps["convert"] = time.perf_counter() - clock
    figures.update(percent_converted=result.percent_converted, engines=len(result.engines))
    if spec.tensorrt:
        figures["tensorrt_built"] = _tensorrt_built(session, params, result)
    if spec.validate or spec.time_latency:
        with _measuring_turn():
            figures.update(_checked(session, params, spec, steps))


@contextmanager
def _measuring_turn() -> Iterator[None]:
    """On a Dask worker, holds the cluster-wide lock MEASURING_LOCK while the trial builds,
    validates and times: trials convert in parallel but measure one at a time, so no trial's
    timing shares the cores with another's work (two trials of one conversion once measured
    152 and 190 ms, timing each other)."""
    try:
        from distributed import Lock, get_worker

        get_worker()
    except (ImportError, ValueError):  # not on a worker: nothing to share the machine with
        yield
        return
    lock = Lock(MEASURING_LOCK)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _tensorrt_built(session: Any, params: Any, result: Any) -> str:
    """How many of the conversion's engines TensorRT-RTX builds, e.g. "5/7" (generated
    inputs' profiles; verdicts are cached, so a re-run costs hashes, not builds)."""
    from workbench.checks.tensorrt_verdicts import conversion_verdicts
    from workbench.engines.runtime.converted_model import converted_model

    verdicts = conversion_verdicts(session, converted_model(session, result, params))
    return f"{sum(v.built for v in verdicts.values())}/{len(verdicts)}"


def _checked(session: Any, params: Any, spec: TrialSpec,
             steps: dict[str, float]) -> dict[str, Any]:
    """The conversion check's figures; `steps` gets each step's seconds as the check moves on."""
    from workbench.checks.conversion_check import CONVERTED, NATIVE, conversion_check_steps

    generator = conversion_check_steps(session, params, batch_sizes=spec.batch_sizes,
                                       compare=spec.validate, time_latency=spec.time_latency)
    current, since = "convert", time.perf_counter()
    while True:
        try:
            _, message = next(generator)
        except StopIteration as stop:
            check = stop.value
            break
        now = time.perf_counter()
        steps[current] = steps.get(current, 0.0) + now - since
        current = next((step for prefix, step in _STEP_OF_MESSAGE
                        if message.startswith(prefix)), current)
        since = now
    steps[current] = steps.get(current, 0.0) + time.perf_counter() - since
    latency, speedup = {}, None
    if not check.latency.empty:
        rows = check.latency
        converted = rows[rows.model == CONVERTED].set_index("batch_size")
        native = rows[rows.model == NATIVE].set_index("batch_size")
        latency = {int(b): {"mean": float(r.mean_ms), "p50": float(r.median_ms),
                            "p99": float(r.p99_ms)} for b, r in converted.iterrows()}
        first = min(latency)
        speedup = float(native.loc[first, "mean_ms"] / converted.loc[first, "mean_ms"])
    return {"latency_ms": latency, "speedup": speedup, "max_abs_error": check.max_abs_error,
            "top1_agreement": check.top1_agreement, "backend": check.backend,
            "device": check.device}


def _prepare_process(threads: int | None) -> None:
    """Once per process: TensorFlow's stderr as quiet as the CLI's, and its thread pools sized
    to the worker's budget (before TensorFlow's runtime starts, or it cannot change)."""
    global _threads_set
    if _threads_set:
        return
    _threads_set = True
    from workbench import quiet

    quiet.only_fatal_lines()
    budget = threads or _worker_threads()
    try:
        tf.config.threading.set_intra_op_parallelism_threads(budget)
        tf.config.threading.set_inter_op_parallelism_threads(budget)
    except RuntimeError:  # TensorFlow already ran something in this process: keep its pools
        pass


def _worker_threads() -> int:
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return max(1, os.cpu_count() or 1)


def thread_budget(workers: int, cores: int | None = None) -> int:
    """TensorFlow threads per worker when `workers` share this machine's cores."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, workers))

