"""TensorRT-RTX plan builds per engine: ResNet-50 (implicit batch), tiny_bert (implicit batch and
dynamic shape) and the detector, on generated inputs (batch 1 and 8), FP32 unless told.

Prints, per engine: TensorRT's verdict (built, or the parser's/builder's refusal), build
seconds (the builder's time; parsing and ONNX export not counted), plan size and layers. The
workbench's cache is off unless WORKBENCH_CACHE_DIR is set, so every plan is really built
(and every graph prepared again). Needs `pip install tensorrt-rtx`.

    .venv/bin/python benchmarks/tensorrt_builds.py [--precision FP16] [MODEL[:dynamic] ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["WORKBENCH_CACHE_DIR"] = os.environ.get("WORKBENCH_CACHE_DIR", "off")

import record  # noqa: E402

import sample_models  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402
from workbench.engines.inspection.tensorrt_verdict import (  # noqa: E402
    TensorRTMissingError,
    require_tensorrt,
)

CASES = ("resnet50", "tiny_bert", "tiny_bert:dynamic", "detector")


def measure(case: str, precision: str) -> dict:
    name, _, mode = case.partition(":")
    dynamic = mode == "dynamic"
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)),
                                        precision_mode=precision, use_dynamic_shape=dynamic)
    converter.convert()
    start = time.perf_counter()
    verdicts = converter.tensorrt_verdicts()
    total = time.perf_counter() - start
    label = f"{name} ({'dynamic shape' if dynamic else 'implicit batch'}, {precision})"
    print(f"\n{label}: {len(verdicts)} engines, {total:.1f} s with exports and native runs")
    print(f"  {'engine':<22} {'verdict':<13} {'build s':>8} {'plan MB':>9} {'layers':>7}  note")
    for engine, v in verdicts.items():
        size = f"{v.plan_bytes / 1e6:.2f}" if v.plan_bytes else "-"
        seconds = f"{v.build_s:.2f}" if v.built and v.build_s is not None else "-"
        note = "" if v.built else (v.error or "").split("): ", 1)[-1][:90]
        print(f"  {engine:<22} {v.outcome:<13} {seconds:>8} {size:>9} "
              f"{v.layers if v.layers is not None else '-':>7}  {note}")
    built = [v for v in verdicts.values() if v.built]
    return record.figure(f"{label}: engines TensorRT builds, total build time",
                         f"{len(built)} of {len(verdicts)}, "
                         f"{sum(v.build_s or 0 for v in built):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--precision", default="FP32", choices=("FP32", "FP16"))
    args = parser.parse_args()
    try:
        builder = require_tensorrt()
    except TensorRTMissingError as error:
        sys.exit(str(error))
    print(f"{builder}, {os.cpu_count()} cores")
    record.write("tensorrt_builds", [measure(case, args.precision) for case in args.cases])


if __name__ == "__main__":
    main()
