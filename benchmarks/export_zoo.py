"""Zoo rows through the export path: tf2onnx, the check against native TensorFlow, and
TensorRT-RTX's parser and builder. Prints one line per model.

    python benchmarks/export_zoo.py [NAME ...]   # default: the feature rows and small apps
"""

from __future__ import annotations

import sys
import time

import record

from sample_models.zoo import zoo
from workbench.checks.onnx_model import check_against_tensorflow, export_whole_model
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.backends import tensorrt_rtx_onnx
from workbench.errors import WorkbenchError

DEFAULT = ["lstm", "gru", "map_fn", "strings", "cond", "xla_function", "MobileNetV3Small",
           "MobileNetV2", "EfficientNetB0", "DenseNet121", "ResNet50"]


def run(name: str) -> str:
    from workbench.checks.export_formats import build_shape_sets, engine_profiles

    start = time.perf_counter()
    session = ConversionSession.open(zoo()[name].make())
    try:
        export = export_whole_model(session)
        worst = max(r.max_abs for r in check_against_tensorflow(session, export))
    except WorkbenchError as exc:
        return f"{name}: ONNX no ({exc}) [{time.perf_counter() - start:.0f} s]"
    onnx_bytes = export.model.SerializeToString()
    verdict = "TensorRT-RTX: not installed"
    if tensorrt_rtx_onnx.available()[0]:
        capability = tensorrt_rtx_onnx.capability(onnx_bytes)
        if capability.supported:
            params = ConversionParams()
            plan = tensorrt_rtx_onnx.build_plan(
                onnx_bytes, engine_profiles(params, build_shape_sets(session)),
                export.input_names)
            verdict = f"TensorRT-RTX plan {len(plan) / 1e6:.1f} MB"
        else:
            first = capability.rejections[0] if capability.rejections else None
            verdict = "TensorRT-RTX rejects " + (f"{first.op}: {first.reason}" if first
                                                 else "a subgraph")
    return (f"{name}: ONNX yes (max abs error {worst:.2g}), {verdict} "
            f"[{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    lines = []
    for model in sys.argv[1:] or DEFAULT:
        lines.append(run(model))
        print(lines[-1], flush=True)
    record.write("export_zoo", [record.figure(line.split(":", 1)[0] + ": whole model as ONNX",
                                              line.split(":", 1)[1].strip()) for line in lines])
