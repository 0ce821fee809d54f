"""Measure what grounds the GPU latency estimate on a real GPU (PyTorch + cuDNN; no TensorRT).

Run on the device machine: `python3 benchmarks/gpu_measure.py $OUT/gpu_measure.json`
(self-contained, PyTorch only); then here `python benchmarks/gpu_measure.py --record
FILE.json` writes its figures to `benchmarks/results/gpu_h100.json` (named by the GPU), the
raw measurements under `data.measurements`, which `benchmarks/estimate.py` checks against.
It records:
- the device (name, SMs, clocks, memory) as PyTorch and nvidia-smi report it;
- achievable memory bandwidth: device-to-device copies and an elementwise op from 64 KiB to 1 GiB;
- matrix throughput per datatype (FP32, TF32, FP16, BF16, INT8) at several sizes;
- the time of one launch (an empty-ish kernel in a CUDA graph and eagerly);
- ResNet-50's layers (convs, pools, the FC) at batch 1/8/32: the bare convolution (TensorRT
  runs bias+ReLU in its epilogue) and with PyTorch's bias+ReLU, FP16 channels_last and FP32
  (TF32 on, as TensorRT builds FP32 engines on Ampere+),
  each written as a trtexec-style layer record (LayerType, Inputs/Outputs dims and
  Format/Datatype, Kernel, Stride, Groups, OutMaps) with its measured time, so the estimate
  reads them like a trtexec --exportLayerInfo file;
- the whole ResNet-50 at the same settings: torchvision's (batch-norm folded; bias, ReLU and
  residual adds as PyTorch's separate kernels) and one fused as TensorRT fuses it (cuDNN's
  convolution+bias+ReLU and convolution+bias+add+ReLU), the model-level check.

Every kernel time is the replay of a CUDA graph of REPEAT calls divided by REPEAT (no host
launch gaps, as trtexec --useCudaGraph), median of several replays, on random data.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --record runs here, where there is no PyTorch
    torch = F = None

REPEAT = 20
REPLAYS = 7


def gpu_time_ms(fn, repeat: int = REPEAT, replays: int = REPLAYS) -> float:
    """Median per-call GPU time of fn, from a CUDA graph of `repeat` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeat):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / repeat)
    return statistics.median(times)


def device_info() -> dict:
    props = torch.cuda.get_device_properties(0)
    info = {"name": props.name, "sms": props.multi_processor_count,
            "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "l2_bytes": getattr(props, "L2_cache_size", None)}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.max.sm,clocks.max.mem,"
                              "clocks.sm,power.limit,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        info["nvidia_smi"] = out
    except (OSError, subprocess.SubprocessError) as exc:
        info["nvidia_smi"] = f"unavailable: {exc}"
    return info


def bandwidth() -> list[dict]:
    rows = []
    for size in [1 << 16, 1 << 20, 1 << 23, 1 << 26, 1 << 28, 1 << 30]:
        src = torch.randn(size // 4, device="cuda")
        dst = torch.empty_like(src)
        ms = gpu_time_ms(lambda src=src, dst=dst: dst.copy_(src))
        rows.append({"op": "copy", "bytes_moved": 2 * size, "ms": ms,
                     "gb_s": 2 * size / ms / 1e6})
        ms = gpu_time_ms(lambda src=src, dst=dst: torch.add(src, src, out=dst))
        rows.append({"op": "add", "bytes_moved": 2 * size, "ms": ms,
                     "gb_s": 2 * size / ms / 1e6})
        del src, dst
    return rows


def matmuls() -> list[dict]:
    rows = []
    for dtype_name in ["fp32", "tf32", "fp16", "bf16", "int8"]:
        for n in [512, 1024, 2048, 4096, 8192]:
            torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
            if dtype_name == "int8":
                a = torch.randint(-64, 64, (n, n), device="cuda", dtype=torch.int8)
                b = torch.randint(-64, 64, (n, n), device="cuda", dtype=torch.int8)
                fn = lambda a=a, b=b: torch._int_mm(a, b)  # noqa: E731
            else:
                dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype_name,
                                                                            torch.float32)
                a = torch.randn(n, n, device="cuda", dtype=dtype)
                b = torch.randn(n, n, device="cuda", dtype=dtype)
                fn = lambda a=a, b=b: a @ b  # noqa: E731
            try:
                ms = gpu_time_ms(fn, repeat=5 if n >= 4096 else REPEAT)
            except RuntimeError as exc:
                rows.append({"dtype": dtype_name, "n": n, "error": str(exc)[:200]})
                continue
            rows.append({"dtype": dtype_name, "n": n, "ms": ms,
                         "tflops": 2 * n ** 3 / ms / 1e9})
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def launch_overhead() -> dict:
    x = torch.zeros(1, device="cuda")
    graph_ms = gpu_time_ms(lambda: x.add_(1), repeat=200)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    torch.cuda.synchronize()
    eager_ms = (time.perf_counter() - start) / 2000 * 1e3
    return {"tiny_kernel_in_graph_ms": graph_ms, "tiny_kernel_eager_ms": eager_ms}


# --- ResNet-50 layers, written as trtexec layer records --------------------------------------

def resnet50_convs() -> list[tuple]:
    """(in_ch, out_ch, kernel, stride, in_hw) of ResNet-50's convolutions, in order."""
    convs = [(3, 64, 7, 2, 224)]
    in_ch, hw = 64, 56
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for block in range(blocks):
            s = stride if block == 0 else 1
            convs.append((in_ch, width, 1, 1, hw))
            convs.append((width, width, 3, s, hw))
            out_hw = hw // s
            convs.append((width, width * 4, 1, 1, out_hw))
            if block == 0:
                convs.append((in_ch, width * 4, 1, s, hw))
            in_ch, hw = width * 4, out_hw
    return convs


def fmt(dtype_name: str, channels_last: bool) -> str:
    if dtype_name == "fp16":
        return ("Channel major FP16 format where channel % 8 == 0" if channels_last
                else "Row major linear FP16 format")
    return "Row major linear FP32"


def layer_record(name, layer_type, inputs, outputs, dtype_name, channels_last, **extra):
    f = fmt(dtype_name, channels_last)
    return {"Name": name, "LayerType": layer_type,
            "Inputs": [{"Name": f"{name}_in{i}", "Dimensions": list(d), "Format/Datatype": f}
                       for i, d in enumerate(inputs)],
            "Outputs": [{"Name": f"{name}_out{i}", "Dimensions": list(d), "Format/Datatype": f}
                        for i, d in enumerate(outputs)],
            **extra}


def resnet50_layers(batch: int, dtype_name: str) -> list[dict]:
    dtype = torch.float16 if dtype_name == "fp16" else torch.float32
    memory_format = torch.channels_last if dtype_name == "fp16" else torch.contiguous_format
    channels_last = dtype_name == "fp16"
    records = []
    for index, (cin, cout, k, s, hw) in enumerate(resnet50_convs()):
        x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype).to(
            memory_format=memory_format)
        w = torch.randn(cout, cin, k, k, device="cuda", dtype=dtype).to(
            memory_format=memory_format) * 0.05
        b = torch.randn(cout, device="cuda", dtype=dtype)
        pad = k // 2
        # TensorRT runs bias and ReLU in the convolution's epilogue: the bare convolution is
        # the closest cuDNN equivalent; PyTorch's separate bias+ReLU passes are kept beside.
        ms = gpu_time_ms(lambda x=x, w=w, s=s, pad=pad: F.conv2d(x, w, None, s, pad))
        unfused = gpu_time_ms(
            lambda x=x, w=w, b=b, s=s, pad=pad: F.relu_(F.conv2d(x, w, b, s, pad)))
        out_hw = (hw + 2 * pad - k) // s + 1
        records.append(layer_record(
            f"conv{index}", "CaskConvolution", [(batch, cin, hw, hw)],
            [(batch, cout, out_hw, out_hw)], dtype_name, channels_last,
            ParameterType="Convolution", Kernel=[k, k], Stride=[s, s], PrePadding=[pad, pad],
            OutMaps=cout, Groups=1, Weights={"Type": "Half" if channels_last else "Float",
                                            "Count": cout * cin * k * k},
            measured_ms=ms, with_bias_relu_ms=unfused))
    x = torch.randn(batch, 64, 112, 112, device="cuda", dtype=dtype).to(
        memory_format=memory_format)
    records.append(layer_record("maxpool", "CaskPooling", [(batch, 64, 112, 112)],
                                [(batch, 64, 56, 56)], dtype_name, channels_last,
                                ParameterType="Pooling", PoolingType="MAX", WindowSize=[3, 3],
                                Stride=[2, 2],
                                measured_ms=gpu_time_ms(lambda: F.max_pool2d(x, 3, 2, 1))))
    x = torch.randn(batch, 2048, 7, 7, device="cuda", dtype=dtype).to(
        memory_format=memory_format)
    records.append(layer_record("avgpool", "CaskPooling", [(batch, 2048, 7, 7)],
                                [(batch, 2048, 1, 1)], dtype_name, channels_last,
                                ParameterType="Pooling", PoolingType="AVERAGE",
                                WindowSize=[7, 7], Stride=[1, 1],
                                measured_ms=gpu_time_ms(lambda: F.adaptive_avg_pool2d(x, 1))))
    x = torch.randn(batch, 2048, device="cuda", dtype=dtype)
    w = torch.randn(1000, 2048, device="cuda", dtype=dtype)
    records.append(layer_record("fc", "CaskGemmConvolution", [(batch, 2048, 1, 1)],
                                [(batch, 1000, 1, 1)], dtype_name, channels_last,
                                ParameterType="Convolution", Kernel=[1, 1], Stride=[1, 1],
                                OutMaps=1000, Groups=1,
                                Weights={"Type": "Float", "Count": 2048 * 1000},
                                measured_ms=gpu_time_ms(lambda: F.linear(x, w))))
    y = torch.randn(batch, 1000, device="cuda", dtype=dtype)
    records.append(layer_record("softmax", "CudaSoftMax", [(batch, 1000)], [(batch, 1000)],
                                dtype_name, False,
                                measured_ms=gpu_time_ms(lambda: torch.softmax(y, 1))))
    return records


def other_layers() -> list[dict]:
    """Elementwise, normalisation and attention layers at transformer-ish sizes (FP16)."""
    records = []
    for tokens, dim in [(1536, 320), (6144, 320), (384, 1280)]:
        x = torch.randn(1, tokens, dim, device="cuda", dtype=torch.float16)
        w = torch.randn(dim, device="cuda", dtype=torch.float16)
        shape = (1, tokens, dim)
        records.append(layer_record(f"layernorm_{tokens}x{dim}", "Normalization", [shape],
                                    [shape], "fp16", False, measured_ms=gpu_time_ms(
                                        lambda x=x, w=w, dim=dim: F.layer_norm(x, (dim,), w))))
        records.append(layer_record(f"gelu_{tokens}x{dim}", "PointWiseV2", [shape], [shape],
                                    "fp16", False,
                                    measured_ms=gpu_time_ms(lambda x=x: F.gelu(x))))
        for out_dim in (dim, 4 * dim):
            lw = torch.randn(out_dim, dim, device="cuda", dtype=torch.float16)
            records.append(layer_record(
                f"linear_{tokens}x{dim}x{out_dim}", "CaskGemmConvolution", [shape],
                [(1, tokens, out_dim)], "fp16", False, ParameterType="Convolution",
                Kernel=[1, 1], Stride=[1, 1], OutMaps=out_dim, Groups=1,
                Weights={"Type": "Half", "Count": dim * out_dim},
                measured_ms=gpu_time_ms(lambda x=x, lw=lw: F.linear(x, lw))))
        heads = 8
        q = torch.randn(1, heads, tokens, dim // heads, device="cuda", dtype=torch.float16)
        records.append(layer_record(
            f"attention_{tokens}x{dim}", "Attention", [(1, heads, tokens, dim // heads)] * 3,
            [(1, heads, tokens, dim // heads)], "fp16", False,
            measured_ms=gpu_time_ms(lambda q=q: F.scaled_dot_product_attention(q, q, q))))
    return records


def resnet50_model(batch: int, dtype_name: str) -> float | None:
    """Whole ResNet-50 (torchvision, batch-norm folded into the convs) as a CUDA graph."""
    try:
        import torchvision
        from torch.nn.utils.fusion import fuse_conv_bn_eval
    except ImportError:
        return None
    model = torchvision.models.resnet50().eval()
    for module in model.modules():
        if isinstance(module, torchvision.models.resnet.Bottleneck):
            module.conv1 = fuse_conv_bn_eval(module.conv1, module.bn1)
            module.conv2 = fuse_conv_bn_eval(module.conv2, module.bn2)
            module.conv3 = fuse_conv_bn_eval(module.conv3, module.bn3)
            module.bn1 = module.bn2 = module.bn3 = torch.nn.Identity()
            if module.downsample is not None:
                module.downsample = fuse_conv_bn_eval(module.downsample[0], module.downsample[1])
    model.conv1 = fuse_conv_bn_eval(model.conv1, model.bn1)
    model.bn1 = torch.nn.Identity()
    dtype = torch.float16 if dtype_name == "fp16" else torch.float32
    memory_format = torch.channels_last if dtype_name == "fp16" else torch.contiguous_format
    model = model.to("cuda", dtype=dtype, memory_format=memory_format)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype).to(
        memory_format=memory_format)
    with torch.inference_mode():
        return gpu_time_ms(lambda: model(x), repeat=3, replays=5)


def guarded(what: str, fn, *args):
    """fn(*args), or None with the error printed: one failing part keeps the others."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - a measurement run must write what it has
        print(f"{what} failed: {type(exc).__name__}: {exc}"[:400], flush=True)
        return None


def record_figures(path: str) -> None:
    """Here, without a GPU: the device's JSON as this benchmark's results file."""
    import record

    measured = json.loads(open(path).read())
    device = measured["device"]
    best = {}
    for row in measured["matmul"]:
        best[row["dtype"]] = max(best.get(row["dtype"], 0), row.get("tflops", 0))
    largest = max(r["bytes_moved"] for r in measured["bandwidth"])  # far beyond L2
    dram = max((r for r in measured["bandwidth"] if r["bytes_moved"] == largest),
               key=lambda r: r["gb_s"])
    cached = max(measured["bandwidth"], key=lambda r: r["gb_s"])
    figures = [record.figure("achievable memory bandwidth (copy or add, bytes read+written): "
                             "DRAM / within L2",
                             f"{dram['gb_s']:.0f} GB/s ({dram['op']}, {largest >> 20} MiB) / "
                             f"{cached['gb_s']:.0f} GB/s ({cached['op']}, "
                             f"{cached['bytes_moved'] >> 20} MiB)"),
               record.figure("matrix product peak TFLOP/s (FP32 / TF32 / FP16 / BF16 / INT8 "
                             "TOPS, n <= 8192)",
                             " / ".join(f"{best[d]:.0f}" for d in ("fp32", "tf32", "fp16",
                                                                   "bf16", "int8")))]
    for key, model in measured["models"].items():
        figures.append(record.figure(
            f"{key}: convolutions summed / whole model fused as TensorRT fuses / torchvision's "
            "(CUDA graphs)", f"{model['layers_sum_ms']:.3f} / {model['fused_model_ms']:.3f} / "
                             f"{model['model_ms']:.3f} ms"))
    short = device["name"].split()[1].lower()  # "NVIDIA H100 80GB HBM3" -> h100
    path = record.write(f"gpu_{short}", figures, data={"measurements": measured},
                        machine=f"{device['name']} (lent device machine; torch "
                                f"{device['torch']}, cuDNN {device['cudnn']})")
    document = json.loads(path.read_text())  # the script that measured, not this file's name
    document["command"] = ("python3 benchmarks/gpu_measure.py OUT.json (on the GPU), then "
                           "python benchmarks/gpu_measure.py --record OUT.json")
    path.write_text(json.dumps(document, indent=1) + "\n")


def resnet50_fused(batch: int, dtype_name: str) -> float:
    """ResNet-50 fused as TensorRT fuses it: each convolution with its bias and ReLU, the
    block's last one with the residual add too (cuDNN's fused convolutions), as a CUDA graph."""
    dtype = torch.float16 if dtype_name == "fp16" else torch.float32
    memory_format = torch.channels_last if dtype_name == "fp16" else torch.contiguous_format

    def weight(cin, cout, k):
        w = torch.randn(cout, cin, k, k, device="cuda", dtype=dtype) * (2 / (cin * k * k)) ** .5
        return w.contiguous(memory_format=memory_format), torch.zeros(cout, device="cuda",
                                                                      dtype=dtype)

    convs = resnet50_convs()
    params = [weight(cin, cout, k) for cin, cout, k, _, _ in convs]
    fc = torch.randn(1000, 2048, device="cuda", dtype=dtype) * 0.02
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype).contiguous(
        memory_format=memory_format)

    def conv_relu(t, index):
        (w, b), (_, _, k, s, _) = params[index], convs[index]
        return torch.cudnn_convolution_relu(t, w, b, [s, s], [k // 2] * 2, [1, 1], 1)

    def forward():
        t = F.max_pool2d(conv_relu(x, 0), 3, 2, 1)
        index = 1
        for blocks in (3, 4, 6, 3):
            for block in range(blocks):
                y = conv_relu(conv_relu(t, index), index + 1)
                w3, b3 = params[index + 2]
                if block == 0:
                    (wd, bd), s = params[index + 3], convs[index + 3][3]
                    shortcut = F.conv2d(t, wd, bd, s)
                    index += 4
                else:
                    shortcut = t
                    index += 3
                t = torch.cudnn_convolution_add_relu(y, w3, shortcut, 1.0, b3, [1, 1], [0, 0],
                                                     [1, 1], 1)
        return torch.softmax(F.linear(F.adaptive_avg_pool2d(t, 1).flatten(1), fc), 1)

    with torch.inference_mode():
        return gpu_time_ms(forward, repeat=3, replays=5)


def main() -> None:
    if sys.argv[1:2] == ["--record"]:
        record_figures(sys.argv[2])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu_measure.json"
    torch.backends.cudnn.benchmark = True
    result: dict = {"device": device_info(), "method": __doc__.strip().splitlines()[0]}
    print(result["device"], flush=True)
    result["launch"] = guarded("launch", launch_overhead)
    print(result["launch"], flush=True)
    result["bandwidth"] = guarded("bandwidth", bandwidth) or []
    print("bandwidth GB/s:", [round(r["gb_s"]) for r in result["bandwidth"]], flush=True)
    result["matmul"] = guarded("matmul", matmuls) or []
    print("matmul TFLOP/s:", [(r["dtype"], r["n"], round(r.get("tflops", 0)))
                              for r in result["matmul"]], flush=True)
    result["layers"] = {}
    result["models"] = {}
    for dtype_name in ["fp16", "fp32"]:
        torch.backends.cudnn.allow_tf32 = True  # TensorRT's FP32 engines use TF32 on Ampere+
        for batch in [1, 8, 32]:
            key = f"resnet50_b{batch}_{dtype_name}"
            result["layers"][key] = guarded(key, resnet50_layers, batch, dtype_name) or []
            total = sum(r["measured_ms"] for r in result["layers"][key])
            result["models"][key] = {"layers_sum_ms": total, "model_ms": guarded(
                key + " model", resnet50_model, batch, dtype_name), "fused_model_ms": guarded(
                key + " fused model", resnet50_fused, batch, dtype_name)}
            print(key, result["models"][key], flush=True)
            with open(out, "w") as handle:
                json.dump(result, handle, indent=1)
    result["layers"]["transformer_fp16"] = guarded("other", other_layers) or []
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
