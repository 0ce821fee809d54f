"""Per-engine accuracy on real architectures: what it finds and what it costs.

For each (sample model, precision): the session's opening time, then `per_engine_accuracy`
(build, capture, each engine's local and output error, remedies measured for the worst two
failing engines), its ranking and remedies as printed, its wall time and the process's peak
resident memory.

    .venv/bin/python benchmarks/per_engine.py [NAME:PRECISION ...]

Defaults: resnet50:FP16 mobilenet_v2:INT8 tiny_bert:FP16 digits_cnn:INT8.
"""

from __future__ import annotations

import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import record  # noqa: E402

import sample_models  # noqa: E402
from workbench.checks.per_engine import per_engine_accuracy  # noqa: E402
from workbench.conversion.params import ConversionParams  # noqa: E402
from workbench.conversion.session import ConversionSession  # noqa: E402

DEFAULT = ("resnet50:FP16", "mobilenet_v2:INT8", "tiny_bert:FP16", "digits_cnn:INT8")


def main(cases: list[str]) -> None:
    figures = []
    for case in cases:
        name, _, precision = case.partition(":")
        start = time.perf_counter()
        session = ConversionSession.open(sample_models.build(name))
        opened = time.perf_counter() - start
        report = per_engine_accuracy(session, ConversionParams(precision_mode=precision or "FP16"))
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"== {name} {precision}: opened in {opened:.1f} s, per-engine accuracy "
              f"{report.seconds:.1f} s, peak RSS {peak_gb:.1f} GB so far")
        print(report, flush=True)
        worst = report.engines[0] if report.engines else None
        figures.append(record.figure(
            f"{name} {precision}: per-engine accuracy (engines, worst output error)",
            f"{report.seconds:.1f} s, {len(report.engines)} engines, worst "
            + (f"{worst.engine} {worst.output_max_abs_error:.2g}" if worst else "none")))
    record.write("per_engine", figures)


if __name__ == "__main__":
    main(sys.argv[1:] or list(DEFAULT))
