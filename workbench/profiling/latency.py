"""Latency and throughput measurement, every figure labelled with its backend and device.

`fn` is timed call by call after a warm-up (first calls pay for graph tracing, allocation and
autotuning, which a served model pays once). `fn` must block until its results exist: TF runs
ops asynchronously, so a call that returns tensors without `.numpy()` would time only the launch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError

# Called with (done, total) after each measured run.
ProgressCallback = Callable[[int, int], None]

# Below this interval a progress display is not redrawn (except at the end): redrawing a
# widget or a terminal line on every fast iteration would cost more than the iteration.
REDRAW_S = 0.1


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency of one backend on one device at one batch size."""

    backend: str  # "tensorflow", "onnxruntime", ...
    device: str  # e.g. "CPU AMD EPYC (x86_64, 2 cores)" or a GPU name
    batch_size: int
    iterations: int
    mean_ms: float
    median_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    throughput: float  # samples per second: batch_size / mean latency

    def as_row(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (f"{self.backend} on {self.device}, batch {self.batch_size}: "
                f"mean {self.mean_ms:.3f} ms, median {self.median_ms:.3f} ms, "
                f"p99 {self.p99_ms:.3f} ms, {self.throughput:.1f} samples/s "
                f"({self.iterations} iterations)")


def measure_latency(
    fn: Callable[[], Any],
    *,
    backend: str,
    device: str,
    batch_size: int,
    warmup: int = 10,
    iterations: int = 100,
    min_seconds: float = 0.0,
    progress: ProgressCallback | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> LatencyStats:
    """Times `fn()` `iterations` times after `warmup` untimed calls.

    Timing continues past `iterations` until `min_seconds` of measured time have passed, so
    fast functions get enough samples for stable tail percentiles. `progress(done, total)` is
    called after each timed call (outside the timed region). `clock` returns seconds.
    """
    _check_measure_args(backend, device, batch_size, warmup, iterations, min_seconds)
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    spent = 0.0
    while len(samples) < iterations or spent < min_seconds:
        start = clock()
        fn()
        elapsed = clock() - start
        samples.append(elapsed)
        spent += elapsed
        if progress is not None:
            progress(len(samples), max(iterations, len(samples)))
    return _stats(samples, backend, device, batch_size)


def batch_sweep(
    make_fn: Callable[[int], Callable[[], Any]], batch_sizes: Iterable[int], **kwargs: Any
) -> pd.DataFrame:
    """`measure_latency` for each batch size: one row per batch, `LatencyStats`' columns.

    `make_fn(batch)` returns the function to time (inputs of that batch already made, so
    input creation stays outside the measurement); `kwargs` go to `measure_latency`.
    """
    if "batch_size" in kwargs:
        raise WorkbenchError("batch_sweep sets batch_size itself; pass batch_sizes instead")
    rows = [measure_latency(make_fn(batch), batch_size=batch, **kwargs).as_row()
            for batch in batch_sizes]
    if not rows:
        raise WorkbenchError("batch_sweep needs at least one batch size")
    return pd.DataFrame(rows)



# --- progress display (the UI's widget bar: workbench.ui.progress_bars) ------------------------


def text_progress(label: str = "", stream: TextIO | None = None,
                  width: int = 30) -> ProgressCallback:
    """A one-line text bar redrawn in place on stderr (or `stream`); ends with a newline."""
    last = [-REDRAW_S]

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if not finished and now - last[0] < REDRAW_S:
            return
        last[0] = now
        out = stream or sys.stderr
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        name = f"{label} " if label else ""
        out.write(f"\r{name}[{bar}] {done}/{total}" + ("\n" if finished else ""))
        out.flush()

    return update


# --- helpers -------------------------------------------------------------------------------


def _check_measure_args(backend: str, device: str, batch_size: int, warmup: int,
                        iterations: int, min_seconds: float) -> None:
    for name, value in (("backend", backend), ("device", device)):
        if not isinstance(value, str) or not value.strip():
            raise WorkbenchError(f"every latency figure needs a {name} label, got {value!r}")
    if batch_size < 1:
        raise WorkbenchError(f"batch_size must be >= 1, got {batch_size}")
    if iterations < 1:
        raise WorkbenchError(f"iterations must be >= 1, got {iterations}")
    if warmup < 0 or min_seconds < 0:
        raise WorkbenchError("warmup and min_seconds must be >= 0")


def _stats(samples: list[float], backend: str, device: str, batch_size: int) -> LatencyStats:
    ms = np.asarray(samples, dtype=float) * 1000.0
    mean = float(ms.mean())
    p50, p90, p95, p99 = (float(v) for v in np.percentile(ms, [50, 90, 95, 99]))
    throughput = batch_size / (mean / 1000.0) if mean > 0 else float("inf")
    return LatencyStats(backend, device, batch_size, len(samples), mean, p50, p90, p95, p99,
                        throughput)


