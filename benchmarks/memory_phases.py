"""Peak RSS by phase of one zoo model converted, run, saved and reloaded in this process.

`.venv/bin/python benchmarks/memory_phases.py VGG16` prints, after each phase, the process's
peak RSS so far (ru_maxrss) and its current RSS, in GB: where a big model's memory goes
(building engines, saving, reloading).
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import record  # noqa: E402

import workbench  # noqa: E402
from sample_models.zoo import zoo  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402


def _gb() -> tuple[float, float]:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    with open("/proc/self/statm") as statm:
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30
    return peak, rss


PEAKS: dict[str, float] = {}  # phase -> peak RSS in GB, for the results file


def _phase(name: str, start: float) -> None:
    peak, rss = _gb()
    elapsed = time.perf_counter() - start
    PEAKS[name] = peak
    print(f"{name:<22} peak {peak:5.2f} GB  now {rss:5.2f} GB  {elapsed:6.1f} s", flush=True)


def main(name: str) -> None:
    start = time.perf_counter()
    entry = zoo()[name]
    model = entry.make()
    _phase("model built", start)
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=model) if isinstance(model, str) \
        else trt.TrtGraphConverterV2(input_model=model)
    function = converter.convert()
    _phase("convert()", start)
    inputs = entry.inputs(np.random.default_rng(0), model)
    function(*inputs)
    _phase("first call", start)
    with tempfile.TemporaryDirectory(prefix="memory-phases-") as directory:
        converter.save(directory, overwrite=True)
        _phase("save()", start)
        del function, converter, model
        reloaded = workbench.load(directory)
        _phase("workbench.load", start)
        reloaded(*inputs)
        _phase("reloaded first call", start)
    phases = ("convert()", "first call", "save()", "reloaded first call")
    record.write("memory_phases", [record.figure(
        f"{name}: peak RSS after " + " / ".join(phases),
        " / ".join(f"{PEAKS[p]:.2f}" for p in phases) + " GB")], keep_other_models=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ResNet50")
