"""Latency statistics, labels, batch sweeps and progress displays.

Exact statistics come from a clock that advances by known durations per call (the statistics
code is the real one, only time is controlled); real sleeps check the wall-clock path.
"""

from __future__ import annotations

import io
import os
import platform
import time

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.hardware import cpu_device_name
from workbench.profiling.latency import (
    LatencyStats,
    batch_sweep,
    measure_latency,
    text_progress,
)

LABELS = {"backend": "tensorflow", "device": "CPU test"}


class SteppingClock:
    """A clock in seconds; `work()` advances it by the next duration (ms) of a list."""

    def __init__(self, durations_ms: list[float]):
        self.now = 0.0
        self.durations = iter(durations_ms)

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += next(self.durations) / 1000.0


def test_statistics_of_known_durations_exclude_warmup():
    timed = list(range(1, 101))  # 1..100 ms, in shuffled order
    rng = np.random.default_rng(0)
    clock = SteppingClock([5000.0] * 3 + list(rng.permutation(timed)))
    stats = measure_latency(clock.work, batch_size=8, warmup=3, iterations=100, clock=clock,
                            **LABELS)
    assert stats.iterations == 100
    assert stats.mean_ms == pytest.approx(50.5)
    assert stats.median_ms == pytest.approx(50.5)
    assert stats.p90_ms == pytest.approx(90.1)
    assert stats.p95_ms == pytest.approx(95.05)
    assert stats.p99_ms == pytest.approx(99.01)
    assert stats.throughput == pytest.approx(8 / 0.0505)


def test_min_seconds_extends_the_measurement():
    clock = SteppingClock([10.0] * 1000)
    stats = measure_latency(clock.work, batch_size=1, warmup=0, iterations=5, min_seconds=0.2,
                            clock=clock, **LABELS)
    assert stats.iterations == 20
    assert stats.mean_ms == pytest.approx(10.0)


def test_real_sleeps_are_labelled_and_ordered():
    stats = measure_latency(lambda: time.sleep(0.002), backend="onnxruntime",
                            device=cpu_device_name(), batch_size=4, warmup=1, iterations=15)
    assert isinstance(stats, LatencyStats)
    assert stats.backend == "onnxruntime" and stats.device == cpu_device_name()
    assert stats.batch_size == 4 and stats.iterations == 15
    assert 2.0 <= stats.median_ms <= stats.p90_ms <= stats.p95_ms <= stats.p99_ms
    assert stats.mean_ms >= 2.0
    assert stats.throughput == pytest.approx(4 / (stats.mean_ms / 1000))
    assert "onnxruntime" in str(stats) and cpu_device_name() in str(stats)


def test_progress_is_called_after_every_timed_call():
    calls: list[tuple[int, int]] = []
    measure_latency(lambda: None, batch_size=1, warmup=2, iterations=7,
                    progress=lambda done, total: calls.append((done, total)), **LABELS)
    assert calls == [(i, 7) for i in range(1, 8)]


@pytest.mark.parametrize(
    "overrides",
    [{"backend": ""}, {"device": " "}, {"batch_size": 0}, {"iterations": 0}, {"warmup": -1},
     {"min_seconds": -1.0}],
)
def test_bad_arguments_are_refused(overrides):
    kwargs = {**LABELS, "batch_size": 1, "warmup": 0, "iterations": 3, **overrides}
    with pytest.raises(WorkbenchError):
        measure_latency(lambda: None, **kwargs)


def test_batch_sweep_one_row_per_batch():
    clock = SteppingClock([1.0 * b for b in (1, 2, 4) for _ in range(4)])
    made = []

    def make_fn(batch):
        made.append(batch)
        return clock.work

    frame = batch_sweep(make_fn, [1, 2, 4], warmup=1, iterations=3, clock=clock, **LABELS)
    assert made == [1, 2, 4]
    assert list(frame["batch_size"]) == [1, 2, 4]
    assert set(frame["backend"]) == {"tensorflow"} and set(frame["device"]) == {"CPU test"}
    assert list(frame["mean_ms"]) == pytest.approx([1.0, 2.0, 4.0])
    # The time per call doubles with the batch, so throughput stays 1000 samples/s.
    assert list(frame["throughput"]) == pytest.approx([1000.0] * 3)


def test_batch_sweep_refuses_batch_size_and_empty_sweeps():
    with pytest.raises(WorkbenchError, match="batch_sizes"):
        batch_sweep(lambda b: (lambda: None), [1], batch_size=2, **LABELS)
    with pytest.raises(WorkbenchError, match="at least one"):
        batch_sweep(lambda b: (lambda: None), [], **LABELS)


def test_cpu_device_name_names_arch_and_usable_cores():
    name = cpu_device_name()
    assert name.startswith("CPU")
    assert platform.machine() in name
    assert f"{len(os.sched_getaffinity(0))} cores" in name


def test_text_progress_draws_a_bar_and_ends_the_line():
    stream = io.StringIO()
    update = text_progress("resnet50", stream=stream, width=10)
    for done in range(1, 101):
        update(done, 100)
    text = stream.getvalue()
    assert text.endswith("resnet50 [##########] 100/100\n")
    # Fast updates are throttled: far fewer redraws than calls.
    assert text.count("\r") < 100
