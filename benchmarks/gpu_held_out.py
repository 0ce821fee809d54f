"""Measure, on a real GPU, layers the GPU latency estimate was never fitted on (its out-of-sample
check). PyTorch + cuDNN, no TensorRT.

Run on the device machine: `python3 benchmarks/gpu_held_out.py $OUT/held_out.json` (PyTorch
and torchvision only; it borrows the timing and record helpers of `gpu_measure.py`); then here
`python benchmarks/gpu_held_out.py --record FILE.json [REPEAT.json]` writes
`benchmarks/results/gpu_<gpu>_held_out.json` (with a second run's model-level figures, from a
fresh machine, as its repeatability), which `benchmarks/estimate.py` judges the
estimate on and never fits on. Architectures unlike the ResNet-50 the Hopper scales were
fitted on:
- MobileNetV2 and EfficientNet-B0 (torchvision, random weights): every convolution
  (depthwise ones included, squeeze-excitation's too), pooling and the classifier, found by
  hooks on the model's modules and each timed alone, as trtexec-style layer records; and
  the whole model with batch-norm folded into the convolutions (its activations, residual adds
  and SE products as PyTorch's own kernels: more kernels than TensorRT would run);
- one BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, sequence 128): its four GEMMs,
  attention, two layer-norms, GELU and two residual adds as records, and the whole layer
  (`nn.TransformerEncoderLayer`, PyTorch's fused inference path);
at batch 1, 8 and 32, FP16 (channels-last for the CNNs) and FP32 (TF32 on, as TensorRT builds
FP32 engines on Ampere and newer). Kernel times as in gpu_measure.py: CUDA-graph replays.
"""

from __future__ import annotations

import json
import sys

from gpu_measure import F, device_info, gpu_time_ms, guarded, layer_record, torch

BATCHES = (1, 8, 32)
CNNS = ("mobilenet_v2", "efficientnet_b0")
BERT = {"hidden": 768, "heads": 12, "ffn": 3072, "sequence": 128}


def _dtype(dtype_name: str):
    return torch.float16 if dtype_name == "fp16" else torch.float32


def _folded(model):
    """The model with each Conv2d's following BatchNorm2d folded into it (torchvision's
    Conv2dNormActivation is a Sequential of conv, batch-norm, activation)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    for module in model.modules():
        if isinstance(module, torch.nn.Sequential):
            for i in range(len(module) - 1):
                if isinstance(module[i], torch.nn.Conv2d) and \
                        isinstance(module[i + 1], torch.nn.BatchNorm2d):
                    module[i] = fuse_conv_bn_eval(module[i], module[i + 1])
                    module[i + 1] = torch.nn.Identity()
    return model


def cnn(name: str, batch: int, dtype_name: str) -> tuple[list[dict], float | None]:
    """(layer records with measured_ms, whole folded model ms) of a torchvision CNN."""
    import torchvision

    dtype, channels_last = _dtype(dtype_name), dtype_name == "fp16"
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = _folded(getattr(torchvision.models, name)().eval()).to(
        "cuda", dtype=dtype, memory_format=memory_format)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype).contiguous(
        memory_format=memory_format)
    seen: list[tuple] = []
    kinds = (torch.nn.Conv2d, torch.nn.Linear, torch.nn.AdaptiveAvgPool2d, torch.nn.MaxPool2d)
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append((m, i[0].shape, o.shape)))
             for m in model.modules() if isinstance(m, kinds)]
    with torch.inference_mode():
        model(x)
    for hook in hooks:
        hook.remove()
    records = []
    with torch.inference_mode():
        for index, (module, in_shape, out_shape) in enumerate(seen):
            records.append(_module_record(f"{name}_{index}", module, tuple(in_shape),
                                          tuple(out_shape), dtype, dtype_name, memory_format))
        whole = guarded(f"{name} model", gpu_time_ms, lambda: model(x), 3, 5)
    return records, whole


def _module_record(name, module, in_shape, out_shape, dtype, dtype_name, memory_format):
    channels_last = dtype_name == "fp16"
    x = torch.randn(in_shape, device="cuda", dtype=dtype)
    if x.dim() == 4:
        x = x.contiguous(memory_format=memory_format)
    weight_type = "Half" if dtype_name == "fp16" else "Float"
    if isinstance(module, torch.nn.Conv2d):
        w = module.weight.detach()
        k, s, p, g = module.kernel_size, module.stride, module.padding, module.groups
        ms = gpu_time_ms(lambda: F.conv2d(x, w, None, s, p, module.dilation, g))
        return layer_record(name, "CaskConvolution", [in_shape], [out_shape], dtype_name,
                            channels_last, ParameterType="Convolution", Kernel=list(k),
                            Stride=list(s), PrePadding=list(p), OutMaps=module.out_channels,
                            Groups=g, Weights={"Type": weight_type, "Count": w.numel()},
                            measured_ms=ms)
    if isinstance(module, torch.nn.Linear):
        w = module.weight.detach()
        ms = gpu_time_ms(lambda: F.linear(x, w))
        dims = [(in_shape[0], in_shape[1], 1, 1)], [(out_shape[0], out_shape[1], 1, 1)]
        return layer_record(name, "CaskGemmConvolution", *dims, dtype_name, channels_last,
                            ParameterType="Convolution", Kernel=[1, 1], Stride=[1, 1],
                            OutMaps=module.out_features, Groups=1,
                            Weights={"Type": weight_type, "Count": w.numel()}, measured_ms=ms)
    pooling = "MAX" if isinstance(module, torch.nn.MaxPool2d) else "AVERAGE"
    ms = gpu_time_ms(lambda: module(x))
    return layer_record(name, "CaskPooling", [in_shape], [out_shape], dtype_name, channels_last,
                        ParameterType="Pooling", PoolingType=pooling, measured_ms=ms)


def bert_layer(batch: int, dtype_name: str) -> tuple[list[dict], float | None]:
    """(records of one BERT-base encoder layer's kernels, the whole layer's ms)."""
    dtype = _dtype(dtype_name)
    hidden, heads, ffn, seq = BERT["hidden"], BERT["heads"], BERT["ffn"], BERT["sequence"]
    head = hidden // heads
    weight_type = "Half" if dtype_name == "fp16" else "Float"
    x = torch.randn(batch, seq, hidden, device="cuda", dtype=dtype)
    records = []

    def linear(name, inner, outer):
        a = torch.randn(batch, seq, inner, device="cuda", dtype=dtype)
        w = torch.randn(outer, inner, device="cuda", dtype=dtype) * inner ** -0.5
        records.append(layer_record(
            f"bert_{name}", "CaskGemmConvolution", [(batch, seq, inner)], [(batch, seq, outer)],
            dtype_name, False, ParameterType="Convolution", Kernel=[1, 1], Stride=[1, 1],
            OutMaps=outer, Groups=1, Weights={"Type": weight_type, "Count": inner * outer},
            measured_ms=gpu_time_ms(lambda: F.linear(a, w))))

    def pointwise(name, layer_type, fn):
        shape = (batch, seq, hidden if name != "gelu" else ffn)
        a = torch.randn(shape, device="cuda", dtype=dtype)
        b = torch.randn(shape, device="cuda", dtype=dtype)
        inputs = [shape, shape] if layer_type == "ElementWise" else [shape]
        records.append(layer_record(f"bert_{name}", layer_type, inputs, [shape], dtype_name,
                                    False, measured_ms=gpu_time_ms(lambda: fn(a, b))))

    with torch.inference_mode():
        linear("qkv", hidden, 3 * hidden)
        q = torch.randn(batch, heads, seq, head, device="cuda", dtype=dtype)
        records.append(layer_record(
            "bert_attention", "Attention", [(batch, heads, seq, head)] * 3,
            [(batch, heads, seq, head)], dtype_name, False,
            measured_ms=gpu_time_ms(lambda: F.scaled_dot_product_attention(q, q, q))))
        linear("attention_output", hidden, hidden)
        pointwise("residual_1", "ElementWise", torch.add)
        pointwise("layernorm_1", "Normalization", lambda a, b: F.layer_norm(a, (hidden,)))
        linear("ffn_in", hidden, ffn)
        pointwise("gelu", "PointWiseV2", lambda a, b: F.gelu(a))
        linear("ffn_out", ffn, hidden)
        pointwise("residual_2", "ElementWise", torch.add)
        pointwise("layernorm_2", "Normalization", lambda a, b: F.layer_norm(a, (hidden,)))
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, activation="gelu",
                                                 batch_first=True, dropout=0.0).eval().to(
            "cuda", dtype=dtype)
        whole = guarded("bert layer", gpu_time_ms, lambda: layer(x), 3, 5)
    return records, whole


def main() -> None:
    if sys.argv[1:2] == ["--record"]:
        record_figures(*sys.argv[2:4])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "held_out.json"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True  # TensorRT's FP32 engines run TF32
    result: dict = {"device": device_info(), "method": __doc__.strip().splitlines()[0],
                    "layers": {}, "models": {}}
    print(result["device"], flush=True)
    for dtype_name in ("fp16", "fp32"):
        for batch in BATCHES:
            for name, measure in [*((n, lambda b, d, n=n: cnn(n, b, d)) for n in CNNS),
                                  ("bert_layer", bert_layer)]:
                key = f"{name}_b{batch}_{dtype_name}"
                records, whole = guarded(key, measure, batch, dtype_name) or ([], None)
                result["layers"][key] = records
                result["models"][key] = {"layers_sum_ms": sum(r["measured_ms"]
                                                              for r in records),
                                         "model_ms": whole}
                print(key, len(records), result["models"][key], flush=True)
                with open(out, "w") as handle:
                    json.dump(result, handle, indent=1)
    print("wrote", out)


def record_figures(path: str, repeat: str | None = None) -> None:
    """Here, without a GPU: the device's JSON as this benchmark's results file; `repeat`, a
    second run's JSON, gives the run-to-run difference of every model-level figure."""
    import record

    measured = json.loads(open(path).read())
    device = measured["device"]
    figures = [record.figure(f"{key}: layers summed / whole model (PyTorch, CUDA graph)",
                             f"{model['layers_sum_ms']:.3f} / "
                             + (f"{model['model_ms']:.3f} ms" if model["model_ms"] else "-"))
               for key, model in measured["models"].items()]
    if repeat:
        again = json.loads(open(repeat).read())["models"]
        differences = sorted(abs(again[key][what] / model[what] - 1)
                             for key, model in measured["models"].items()
                             for what in ("layers_sum_ms", "model_ms") if model[what])
        measured["repeat"] = {"models": again, "median_abs_difference":
                              differences[len(differences) // 2],
                              "max_abs_difference": differences[-1]}
        figures.append(record.figure(
            "a second run on a fresh machine: difference of those figures, median / worst",
            f"{100 * differences[len(differences) // 2]:.1f}% / {100 * differences[-1]:.0f}%"))
    short = device["name"].split()[1].lower()  # "NVIDIA H100 80GB HBM3" -> h100
    path = record.write(f"gpu_{short}_held_out", figures, data={"measurements": measured},
                        machine=f"{device['name']} (lent device machine; torch "
                                f"{device['torch']}, cuDNN {device['cudnn']})")
    document = json.loads(path.read_text())
    document["command"] = ("python3 benchmarks/gpu_held_out.py OUT.json (on the GPU, twice), "
                           "then python benchmarks/gpu_held_out.py --record OUT.json "
                           "REPEAT.json")
    path.write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
