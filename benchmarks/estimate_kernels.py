"""`convert --target-gpu` end to end: our sample models' engines estimated from the kernels
TensorRT-RTX built of them, and from their TF nodes, against real GPU timings.

    .venv/bin/python benchmarks/estimate_kernels.py

- ResNet-50 (the Keras sample, one engine), FP16 and FP32 at batch 32 on an RTX 3090, against
  trtexec's GPU compute time of the fixture `keras-resnet50-rtx3090-*` (a Keras ResNet-50 built
  by full TensorRT on that GPU; other weights, same network). That fixture is in the fit, but
  its kernels are not the ones estimated here: TensorRT-RTX fuses differently.
- MobileNetV2 (the Keras sample), FP16 and FP32 at batch 1, 8 and 32 on an H100, against
  torchvision's MobileNetV2 measured on the lent H100 through cuDNN
  (`results/gpu_h100_held_out.json`; in the fit since the H200 corpus came, judged out of
  sample by `estimate.py` leaving the H100 out): its convolutions, pools and classifier
  each timed alone and summed (closest to the kernels TensorRT runs, each convolution with
  its epilogue), and the whole PyTorch model (batch-norm folded; activations and residual adds
  as separate kernels, more than TensorRT runs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import record

import sample_models
from workbench.checks.tensorrt_verdicts import conversion_verdicts
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.runtime.converted_model import converted_model
from workbench.profiling.estimate.graph_estimate import engine_kernels, graph_estimate
from workbench.profiling.trtexec import fixtures_dir

HELD_OUT = Path(__file__).resolve().parent / "results" / "gpu_h100_held_out.json"


def estimates(name: str, precision: str, gpu: str, batches: tuple[int, ...]) -> dict:
    """batch -> (from kernels, from TF nodes) engine milliseconds of the sample `name`."""
    session = ConversionSession.open(sample_models.build(name))
    params = ConversionParams(precision_mode=precision)
    result = session.convert(params)
    verdicts = conversion_verdicts(session, converted_model(session, result, params))
    kernels = engine_kernels(verdicts)
    graph = session.prepared(precision).graph
    found = {}
    for batch in batches:
        from_kernels = graph_estimate(graph, result.engines, gpu, precision, batch,
                                      kernels=kernels)
        from_nodes = graph_estimate(graph, result.engines, gpu, precision, batch)
        assert set(from_kernels["engine_basis"].values()) == {"tensorrt_kernels"}, \
            from_kernels["engine_basis"]
        found[batch] = (from_kernels["converted_ms"], from_nodes["converted_ms"])
    return found


def main() -> None:
    root = fixtures_dir()
    if root is None or not HELD_OUT.is_file():
        sys.exit("needs ../shared/fixtures/trtexec and benchmarks/results/gpu_h100_held_out.json")
    rows = []
    for precision in ("FP16", "FP32"):
        metadata = json.loads((root / f"keras-resnet50-rtx3090-{precision.lower()}"
                               / "engine.profile.metadata.json").read_text())
        measured = metadata["performance_summary"]["GPU Compute Time"][3]
        kernels_ms, nodes_ms = estimates("resnet50", precision, "RTX 3090", (32,))[32]
        rows.append(["ResNet-50", precision, 32, "NVIDIA GeForce RTX 3090",
                     "trtexec GPU compute time (fixture, in the fit)", measured, kernels_ms,
                     nodes_ms])
    held_out = json.loads(HELD_OUT.read_text())["data"]["measurements"]["models"]
    for precision in ("FP16", "FP32"):
        found = estimates("mobilenet_v2", precision, "H100", (1, 8, 32))
        for batch, (kernels_ms, nodes_ms) in found.items():
            figures = held_out[f"mobilenet_v2_b{batch}_{precision.lower()}"]
            for what, key in (("torchvision's layers summed (in the fit)", "layers_sum_ms"),
                              ("torchvision's whole model", "model_ms")):
                rows.append(["MobileNetV2", precision, batch, "NVIDIA H100 80GB HBM3", what,
                             figures[key], kernels_ms, nodes_ms])
    print(f"{'model':12} {'prec':5} {'batch':>5} {'measured':>9} {'kernels':>14} "
          f"{'TF nodes':>14}  against")
    for model, precision, batch, _, what, measured, kernels_ms, nodes_ms in rows:
        print(f"{model:12} {precision:5} {batch:5d} {measured:9.3f} "
              f"{kernels_ms:7.3f} {100 * (kernels_ms / measured - 1):+5.0f}% "
              f"{nodes_ms:7.3f} {100 * (nodes_ms / measured - 1):+5.0f}%  {what}")
    figures = []
    for model, what in (("ResNet-50", "trtexec"), ("MobileNetV2", "layers summed"),
                        ("MobileNetV2", "whole model")):
        chosen = [r for r in rows if r[0] == model and what in r[4]]
        figures.append(record.figure(
            f"{model} (sample) on {chosen[0][3]} against {chosen[0][4]}: error of the estimate "
            "from TensorRT-RTX's kernels / from the TF nodes, per precision and batch",
            "; ".join(f"{r[1]} b{r[2]} {100 * (r[6] / r[5] - 1):+.0f}% / "
                      f"{100 * (r[7] / r[5] - 1):+.0f}%" for r in chosen)))
    record.write("estimate_kernels", figures, details={
        "title": "convert --target-gpu from TensorRT-RTX's kernels and from the TF nodes, "
                 "against real GPU timings (ms)",
        "columns": ["model", "precision", "batch", "GPU", "measured", "measured ms",
                    "from kernels ms", "from TF nodes ms"],
        "rows": [[*r[:5], round(r[5], 4), round(r[6], 4), round(r[7], 4)] for r in rows]})


if __name__ == "__main__":
    main()
