"""Time thousands of GPU kernels of real layers: the corpus the GPU latency estimate is fitted
and judged on. PyTorch (cuDNN, cuBLAS, its own kernels) and torchvision only; no TensorRT.

Run on the device machine: `python3 benchmarks/gpu_corpus.py $OUT/corpus.json` (stops
cleanly after `CORPUS_SECONDS`, 500 by default, keeping what it timed; `CORPUS_PART=0/2`
and `1/2` split the configurations between two runs); then here
`python benchmarks/gpu_corpus.py --record FILE.json [FILE2.json] [--repeat A.json B.json]`
(a second run's files: how far it lands from the first) writes
`benchmarks/results/gpu_corpus_<gpu>.json`, which `benchmarks/estimate.py` reads.

What it times, each kernel alone as a trtexec-style layer record (LayerType, Inputs/Outputs
with Dimensions and Format/Datatype, Kernel, Stride, Groups, OutMaps, Weights):
- the layers of real models found by hooks on torchvision's modules: ResNet-50,
  MobileNetV2, EfficientNet-B0 (224x224) and RetinaNet's ResNet-50-FPN backbone and heads
  (512x512): every convolution (grouped and depthwise ones included), pooling, linear layer,
  and every activation and batch-norm as an element-wise kernel;
- transformer layers built from their sizes: BERT-base (sequence 128), GPT-2 small (256,
  causal) and ViT-B/16 (197 tokens, its 16x16 patch convolution): QKV, output and FFN GEMMs,
  attention's two batched GEMMs, softmax, layer norms, GELU, residual adds, the heads'
  transposes, and flash attention as one fused kernel;
- shapes of those models for softmax, reductions, resize, concatenation, transposes and
  reformats (NCHW <-> NHWC), and element-wise chains fused by Triton (torch.compile);
at batch 1, 8, 32, 128 and 256 (RetinaNet 1, 8, 32), in FP32 (TF32 off), TF32, FP16 and
BF16, and INT8 (`torch._int_mm`) for the transformers' linear layers. Each (model, batch,
precision) lists the kernels TensorRT would run of it (`configs`: convolutions, GEMMs, pools,
and the transformers' normalisations and element-wise kernels), the model-level reference.

Timing: each kernel is captured in a CUDA graph of enough calls for about 2 ms of work and the
graph replayed 5 times (median); the launch cost of one tiny kernel in a graph and eagerly is
measured apart, with copy bandwidth and matrix-product peaks. Inputs are random; a kernel
repeated in a graph finds its inputs in L2 when they fit, as a layer does after its producer.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --record runs here, where there is no PyTorch
    torch = F = None

MATHS = ("fp32", "tf32", "fp16", "bf16")
BATCHES = (1, 8, 32, 128, 256)
DETECTION_BATCHES = (1, 8, 32)
TRANSFORMERS = {  # hidden, heads, FFN, tokens, causal
    "bert_base": (768, 12, 3072, 128, False),
    "gpt2": (768, 12, 3072, 256, True),
    "vit_b16": (768, 12, 3072, 197, False),
}
TARGET_MS = 2.0  # work per graph replay
_FORMAT = {"fp32": "FP32", "tf32": "FP32", "fp16": "FP16", "bf16": "BF16", "int8": "Int8"}


# --- Timing ----------------------------------------------------------------------------------

def gpu_ms(fn) -> float:
    """Median per-call GPU time of fn from CUDA-graph replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # cuDNN's autotuning and lazy initialisation happen here
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    repeat = max(1, min(200, round(TARGET_MS / max(start.elapsed_time(end), 1e-3))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeat):
            fn()
    graph.replay()
    times = []
    for _ in range(5):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / repeat)
    return statistics.median(times)


def dtype_of(math: str):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}.get(
        math, torch.float32)


def set_math(math: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    torch.backends.cudnn.allow_tf32 = math == "tf32"


def layer_record(name: str, layer_type: str, inputs, outputs, math: str, **extra) -> dict:
    out_format = "Int32" if math == "int8" and layer_type == "CaskGemmConvolution" else None
    return {"Name": name, "LayerType": layer_type,
            "Inputs": [{"Dimensions": list(d), "Format/Datatype": _FORMAT[math]}
                       for d in inputs],
            "Outputs": [{"Dimensions": list(d), "Format/Datatype": out_format or _FORMAT[math]}
                        for d in outputs], **extra}


def randn(shape, math: str, channels_last: bool = False):
    if math == "int8":
        return torch.randint(-64, 64, shape, device="cuda", dtype=torch.int8)
    t = torch.randn(shape, device="cuda", dtype=dtype_of(math))
    return t.contiguous(memory_format=torch.channels_last) if channels_last else t


# --- Layers: each spec gives (record, callable) at a batch and precision ---------------------

def conv(spec: dict, batch: int, math: str):
    cin, cout, (kh, kw), (sh, sw), (ph, pw), groups, (h, w), (oh, ow) = (
        spec["cin"], spec["cout"], spec["k"], spec["s"], spec["p"], spec["g"], spec["hw"],
        spec["ohw"])
    x = randn((batch, cin, h, w), math, True)
    weight = randn((cout, cin // groups, kh, kw), math, True) * 0.05
    rec = layer_record("conv", "CaskConvolution", [(batch, cin, h, w)],
                       [(batch, cout, oh, ow)], math, Kernel=[kh, kw], Stride=[sh, sw],
                       PrePadding=[ph, pw], OutMaps=cout, Groups=groups,
                       Weights={"Type": _FORMAT[math], "Count": weight.numel()})
    return rec, lambda: F.conv2d(x, weight, None, (sh, sw), (ph, pw), 1, groups)


def linear(spec: dict, batch: int, math: str):
    rows, din, dout = batch * spec["tokens"], spec["din"], spec["dout"]
    shape_in, shape_out = (batch, spec["tokens"], din), (batch, spec["tokens"], dout)
    rec = layer_record("linear", "CaskGemmConvolution", [shape_in], [shape_out], math,
                 Kernel=[1, 1], Stride=[1, 1], OutMaps=dout, Groups=1,
                 Weights={"Type": _FORMAT[math], "Count": din * dout})
    if math == "int8":
        a, b = randn((max(rows, 32), din), math), randn((dout, din), math).t()
        return rec, lambda: torch._int_mm(a, b)
    x, weight = randn(shape_in, math), randn((dout, din), math) * 0.05
    return rec, lambda: F.linear(x, weight)


def bmm(spec: dict, batch: int, math: str):
    heads, m, k, n = spec["heads"], spec["m"], spec["k"], spec["n"]
    a, b = randn((batch, heads, m, k), math), randn((batch, heads, k, n), math)
    rec = layer_record("bmm", "MatrixMultiply", [a.shape, b.shape], [(batch, heads, m, n)], math)
    return rec, lambda: torch.matmul(a, b)


def attention(spec: dict, batch: int, math: str):
    heads, tokens, head = spec["heads"], spec["tokens"], spec["head"]
    q = randn((batch, heads, tokens, head), math)
    rec = layer_record("attention", "Attention", [q.shape] * 3, [q.shape], math)
    causal = spec["causal"]
    return rec, lambda: F.scaled_dot_product_attention(q, q, q, is_causal=causal)


def pointwise(spec: dict, batch: int, math: str):
    shape = (batch, *spec["shape"])
    channels_last = len(shape) == 4
    x = randn(shape, math, channels_last)
    op = spec["fn"]
    if op == "add":
        y = randn(shape, math, channels_last)
        return layer_record("add", "ElementWise", [shape, shape], [shape], math), lambda: x + y
    if op == "scale":  # a batch-norm at inference: per-channel multiply and add
        a = randn((1, shape[1], *([1] * (len(shape) - 2))), math)
        b = randn(a.shape, math)
        return (layer_record("scale", "Scale", [shape], [shape], math),
                lambda: torch.addcmul(b, x, a))
    if op == "se_mul":  # squeeze-excitation: a feature map times its per-channel gate
        gate = randn((shape[0], shape[1], 1, 1), math, True)
        return (layer_record("se_mul", "ElementWise", [shape, gate.shape], [shape], math),
                lambda: x * gate)
    fns = {"relu": F.relu, "relu6": F.relu6, "silu": F.silu, "sigmoid": torch.sigmoid,
           "hardswish": F.hardswish, "gelu": F.gelu}
    return layer_record(op, "PointWise", [shape], [shape], math), lambda: fns[op](x)


_FUSED = {}


def fused_pointwise(spec: dict, batch: int, math: str):
    """scale, bias, SiLU and a residual add in one Triton kernel (what Myelin generates)."""
    shape = (batch, *spec["shape"])
    x, r = randn(shape, math, True), randn(shape, math, True)
    a, b = randn((1, shape[1], 1, 1), math), randn((1, shape[1], 1, 1), math)
    if "fn" not in _FUSED:
        _FUSED["fn"] = torch.compile(lambda x, r, a, b: F.silu(x * a + b) + r, dynamic=True)
    fn = _FUSED["fn"]
    return (layer_record("fused", "PointWiseV2", [shape, shape], [shape], math),
            lambda: fn(x, r, a, b))


def normalization(spec: dict, batch: int, math: str):
    shape = (batch, spec["tokens"], spec["dim"])
    x, weight = randn(shape, math), randn((spec["dim"],), math)
    return (layer_record("layernorm", "Normalization", [shape], [shape], math),
            lambda: F.layer_norm(x, (spec["dim"],), weight))


def softmax(spec: dict, batch: int, math: str):
    shape = (batch, *spec["shape"])
    x = randn(shape, math)
    return (layer_record("softmax", "CudaSoftMax", [shape], [shape], math),
            lambda: torch.softmax(x, -1))


def reduce(spec: dict, batch: int, math: str):
    shape = (batch, *spec["shape"])
    x = randn(shape, math, len(shape) == 4)
    dims = tuple(spec["dims"])
    out = tuple(1 if i in dims else d for i, d in enumerate(shape))
    return (layer_record("reduce", "Reduce", [shape], [out], math),
            lambda: x.mean(dims, keepdim=True))


def pool(spec: dict, batch: int, math: str):
    c, (h, w) = spec["c"], spec["hw"]
    x = randn((batch, c, h, w), math, True)
    if spec["kind"] == "global":
        rec = layer_record("avgpool", "CaskPooling", [x.shape], [(batch, c, 1, 1)], math,
                     PoolingType="AVERAGE", WindowSize=[h, w])
        return rec, lambda: F.adaptive_avg_pool2d(x, 1)
    k, s, p = spec["k"], spec["s"], spec["p"]
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    rec = layer_record("maxpool", "CaskPooling", [x.shape], [(batch, c, oh, ow)], math,
                 PoolingType="MAX", WindowSize=[k, k], Stride=[s, s])
    return rec, lambda: F.max_pool2d(x, k, s, p)


def resize(spec: dict, batch: int, math: str):
    c, (h, w), mode = spec["c"], spec["hw"], spec["mode"]
    x = randn((batch, c, h, w), math, True)
    rec = layer_record("resize", "Resize", [x.shape], [(batch, c, 2 * h, 2 * w)], math,
                 ResizeMode=mode)
    return rec, lambda: F.interpolate(x, scale_factor=2, mode=mode)


def concat(spec: dict, batch: int, math: str):
    parts = [randn((batch, c, *spec["hw"]), math, True) for c in spec["cs"]]
    out = (batch, sum(spec["cs"]), *spec["hw"])
    return (layer_record("concat", "Concatenation", [p.shape for p in parts], [out], math),
            lambda: torch.cat(parts, 1))


def transpose(spec: dict, batch: int, math: str):
    shape = (batch, *spec["shape"])
    x = randn(shape, math)
    perm = spec["perm"]
    out = tuple(shape[i] for i in perm)
    return (layer_record("transpose", "Shuffle" if spec["what"] == "heads" else "Reformat", [shape],
                   [out], math), lambda: x.permute(*perm).contiguous())


BUILDERS = {"conv": conv, "linear": linear, "bmm": bmm, "attention": attention,
            "pointwise": pointwise, "fused": fused_pointwise, "norm": normalization,
            "softmax": softmax, "reduce": reduce, "pool": pool, "resize": resize,
            "concat": concat, "transpose": transpose}


# --- The models' layers ----------------------------------------------------------------------

def hooked_layers(model, inputs: list) -> list[tuple[dict, bool]]:
    """(spec, in the model-level sum) of every convolution, linear layer, pooling, activation
    and batch-norm a forward pass of `model` runs, in order, from hooks on its modules."""
    nn = torch.nn
    found = []

    def hook(module, args, output):
        if not args or not hasattr(args[0], "shape"):
            return
        x = args[0]
        if isinstance(module, nn.Conv2d):
            found.append(({"op": "conv", "cin": module.in_channels, "cout": module.out_channels,
                           "k": list(module.kernel_size), "s": list(module.stride),
                           "p": list(module.padding), "g": module.groups,
                           "hw": list(x.shape[2:]), "ohw": list(output.shape[2:])}, True))
        elif isinstance(module, nn.Linear):
            found.append(({"op": "linear", "tokens": 1, "din": module.in_features,
                           "dout": module.out_features}, True))
        elif isinstance(module, nn.MaxPool2d):
            found.append(({"op": "pool", "kind": "max", "c": x.shape[1],
                           "hw": list(x.shape[2:]), "k": module.kernel_size,
                           "s": module.stride, "p": module.padding}, True))
        elif isinstance(module, nn.AdaptiveAvgPool2d):
            found.append(({"op": "pool", "kind": "global", "c": x.shape[1],
                           "hw": list(x.shape[2:])}, True))
        elif isinstance(module, nn.BatchNorm2d):
            found.append(({"op": "pointwise", "fn": "scale", "shape": list(x.shape[1:])}, False))
        else:
            name = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Sigmoid: "sigmoid",
                    nn.Hardswish: "hardswish"}.get(type(module))
            if name and x.dim() == 4:
                found.append(({"op": "pointwise", "fn": name, "shape": list(x.shape[1:])},
                              False))
        if type(module).__name__ == "SqueezeExcitation":
            found.append(({"op": "pointwise", "fn": "se_mul", "shape": list(x.shape[1:])},
                          False))

    hooks = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.inference_mode():
        model(*inputs)
    for h in hooks:
        h.remove()
    return found


def cnn_families() -> dict[str, list[tuple[dict, bool]]]:
    import torchvision

    models = torchvision.models
    x = torch.zeros(1, 3, 224, 224)
    families = {name: hooked_layers(getattr(models, name)().eval(), [x])
                for name in ("resnet50", "mobilenet_v2", "efficientnet_b0")}
    retina = models.detection.retinanet_resnet50_fpn(weights=None,
                                                     weights_backbone=None).eval()
    image = torch.zeros(1, 3, 512, 512)
    layers = hooked_layers(retina.backbone, [image])
    with torch.inference_mode():
        features = list(retina.backbone(image).values())
    layers += hooked_layers(retina.head, [features])
    for level in features[1:3]:  # FPN's top-down path: P5 and P4 upsampled (nearest, 2x)
        c, h, w = level.shape[1:]
        layers.append(({"op": "resize", "c": c, "hw": [h, w], "mode": "nearest"}, True))
    families["retinanet"] = layers
    return families


def transformer_layers(hidden: int, heads: int, ffn: int, tokens: int,
                       causal: bool) -> list[tuple[dict, bool]]:
    head = hidden // heads

    def lin(din, dout):
        return {"op": "linear", "tokens": tokens, "din": din, "dout": dout}

    return [(lin(hidden, 3 * hidden), True),
            ({"op": "transpose", "what": "heads", "shape": [tokens, heads, head],
              "perm": [0, 2, 1, 3]}, False),
            ({"op": "bmm", "heads": heads, "m": tokens, "k": head, "n": tokens}, True),
            ({"op": "softmax", "shape": [heads, tokens, tokens]}, True),
            ({"op": "bmm", "heads": heads, "m": tokens, "k": tokens, "n": head}, True),
            ({"op": "attention", "heads": heads, "tokens": tokens, "head": head,
              "causal": causal}, False),
            (lin(hidden, hidden), True),
            ({"op": "pointwise", "fn": "add", "shape": [tokens, hidden]}, True),
            ({"op": "norm", "tokens": tokens, "dim": hidden}, True),
            (lin(hidden, ffn), True),
            ({"op": "pointwise", "fn": "gelu", "shape": [tokens, ffn]}, True),
            (lin(ffn, hidden), True),
            ({"op": "pointwise", "fn": "add", "shape": [tokens, hidden]}, True),
            ({"op": "norm", "tokens": tokens, "dim": hidden}, True)]


def extra_layers() -> list[tuple[dict, bool]]:
    """Kernel classes the models above run rarely: reductions, concatenations, reformats,
    bilinear resizes, fused element-wise chains, at those models' shapes."""
    maps = [(64, 56), (128, 28), (256, 56), (256, 14), (512, 28), (1024, 14), (2048, 7),
            (96, 112), (144, 56), (240, 28), (672, 14), (1152, 7)]
    layers = []
    for c, hw in maps:
        layers.append(({"op": "reduce", "shape": [c, hw, hw], "dims": [2, 3]}, False))
        layers.append(({"op": "concat", "cs": [c, c], "hw": [hw, hw]}, False))
        layers.append(({"op": "transpose", "what": "reformat", "shape": [c, hw, hw],
                        "perm": [0, 2, 3, 1]}, False))
        layers.append(({"op": "fused", "shape": [c, hw, hw]}, False))
        if hw <= 56:
            layers.append(({"op": "resize", "c": c, "hw": [hw, hw], "mode": "bilinear"}, False))
    for tokens, dim in [(128, 768), (197, 768), (256, 768), (128, 3072)]:
        layers.append(({"op": "reduce", "shape": [tokens, dim], "dims": [2]}, False))
        layers.append(({"op": "softmax", "shape": [tokens, dim]}, False))
        layers.append(({"op": "concat", "cs": [tokens, tokens], "hw": [dim, 1]}, False))
    return layers


# --- The run ---------------------------------------------------------------------------------

def device_info() -> dict:
    props = torch.cuda.get_device_properties(0)
    info = {"name": props.name, "sms": props.multi_processor_count,
            "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}",
            "l2_bytes": getattr(props, "L2_cache_size", None), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "nvidia_smi": smi()}
    return info


def smi() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
             "clocks.mem,clocks.max.mem,power.limit,temperature.gpu", "--format=csv"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def ceilings() -> dict:
    """Launch cost (a tiny kernel in a graph, and eagerly), copy bandwidth, GEMM peaks."""
    x = torch.zeros(1, device="cuda")
    in_graph = gpu_ms(lambda: x.add_(1))
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    torch.cuda.synchronize()
    found = {"launch_in_graph_ms": in_graph,
             "launch_eager_ms": (time.perf_counter() - start) / 2000 * 1e3, "copy": [],
             "matmul": []}
    for size in (1 << 22, 1 << 26, 1 << 30):
        src = torch.randn(size // 4, device="cuda")
        dst = torch.empty_like(src)
        ms = gpu_ms(lambda src=src, dst=dst: dst.copy_(src))
        found["copy"].append({"bytes_moved": 2 * size, "ms": ms, "gb_s": 2 * size / ms / 1e6})
    for math in ("fp32", "tf32", "fp16", "bf16", "int8"):
        set_math(math)
        n = 8192
        a, b = randn((n, n), math), randn((n, n), math)
        fn = ((lambda a=a, b=b: torch._int_mm(a, b)) if math == "int8"
              else (lambda a=a, b=b: a @ b))
        ms = gpu_ms(fn)
        found["matmul"].append({"math": math, "n": n, "ms": ms, "tflops": 2 * n ** 3 / ms / 1e9})
    return found


def configs(families: dict) -> list[tuple[str, int, str, list]]:
    """(family, batch, precision, layers) in a shuffled order: a cut run keeps a spread."""
    found = []
    for family, layers in families.items():
        batches = DETECTION_BATCHES if family == "retinanet" else BATCHES
        maths = MATHS + (("int8",) if family in TRANSFORMERS else ())
        found += [(family, b, m, layers) for b in batches for m in maths]
    random.Random(0).shuffle(found)
    part, parts = (int(n) for n in os.environ.get("CORPUS_PART", "0/1").split("/"))
    return found[part::parts]


def main() -> None:
    if sys.argv[1:2] == ["--record"]:
        paths = sys.argv[2:]
        split = paths.index("--repeat") if "--repeat" in paths else len(paths)
        record_results(paths[:split], paths[split + 1:])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "corpus.json"
    deadline = time.monotonic() + float(os.environ.get("CORPUS_SECONDS", 500))
    torch.backends.cudnn.benchmark = True
    result: dict = {"device": device_info(), "method": __doc__.strip().splitlines()[0]}
    print(result["device"], flush=True)
    result["ceilings"] = ceilings()
    print({k: v for k, v in result["ceilings"].items()}, flush=True)
    families = cnn_families()
    families.update({name: transformer_layers(*sizes) for name, sizes in TRANSFORMERS.items()})
    families["vit_b16"].insert(0, ({"op": "conv", "cin": 3, "cout": 768, "k": [16, 16],
                                    "s": [16, 16], "p": [0, 0], "g": 1, "hw": [224, 224],
                                    "ohw": [14, 14]}, True))
    families["extra"] = extra_layers()
    print({f: len(v) for f, v in families.items()}, flush=True)
    rows: dict[str, dict] = {}
    result.update(rows=rows, configs={}, failed=[])
    started, cut = time.monotonic(), False
    for family, batch, math, layers in configs(families):
        if time.monotonic() > deadline:
            cut = True
            break
        set_math(math)
        members, complete = [], True
        for spec, in_sum in layers:
            if math == "int8" and spec["op"] != "linear":
                continue
            key = json.dumps(spec, sort_keys=True) + f"|b{batch}|{math}"
            if key not in rows:
                try:
                    with torch.inference_mode():
                        rec, fn = BUILDERS[spec["op"]](spec, batch, math)
                        ms = gpu_ms(fn)
                    rows[key] = {"record": rec, "ms": ms, "op": spec["op"], "batch": batch,
                                 "math": math, "families": []}
                except Exception as exc:  # noqa: BLE001 - keep the rest of the corpus
                    result["failed"].append(f"{key}: {type(exc).__name__}: {exc}"[:300])
                    complete = False
                    continue
            if family not in rows[key]["families"]:
                rows[key]["families"].append(family)
            if in_sum:
                members.append(key)
        if family != "extra" and math != "int8":
            result["configs"][f"{family}|b{batch}|{math}"] = {
                "layers": members, "complete": complete,
                "sum_ms": sum(rows[k]["ms"] for k in members)}
        print(f"{time.monotonic() - started:6.0f}s {family} b{batch} {math}: {len(rows)} "
              f"kernels", flush=True)
    result["cut_by_deadline"] = cut
    result["seconds"] = time.monotonic() - started
    result["nvidia_smi_after"] = smi()
    keys = list(rows)
    index = {key: i for i, key in enumerate(keys)}
    result["rows"] = [{"spec": key.split("|")[0], **rows[key]} for key in keys]
    for config in result["configs"].values():
        config["layers"] = [index[k] for k in config["layers"]]
    with open(out, "w") as handle:
        json.dump(result, handle, separators=(",", ":"))
    print(f"wrote {out}: {len(rows)} kernels, {len(result['configs'])} configurations, "
          f"{len(result['failed'])} failed, cut={cut}", flush=True)
    for line in result["failed"][:10]:
        print("failed:", line)


def merged(paths: list[str]) -> dict:
    """The runs of several parts as one: rows appended, configurations re-indexed."""
    runs = [json.loads(open(p).read()) for p in paths]
    measured = {**runs[0], "rows": [], "configs": {}, "failed": [], "parts": []}
    for run in runs:
        offset = len(measured["rows"])
        measured["rows"] += run["rows"]
        measured["failed"] += run["failed"]
        measured["parts"].append({k: run[k] for k in ("seconds", "cut_by_deadline",
                                                      "nvidia_smi_after", "ceilings")})
        for key, config in run["configs"].items():
            measured["configs"][key] = {**config, "layers": [i + offset for i in
                                                             config["layers"]]}
    return measured


def repeatability(measured: dict, repeat: dict) -> dict:
    """How far a second run on a fresh machine lands from the first, per kernel (all, and
    those of 50 us or more) and per configuration's sum: median and 90th percentile."""
    def times(run: dict) -> dict:
        return {(row["spec"], row["batch"], row["math"]): row["ms"] for row in run["rows"]}

    first, second = times(measured), times(repeat)
    found: dict = {}
    for name, keys in (("kernels", [k for k in first if k in second]),
                       ("kernels_50us", [k for k in first if k in second and first[k] >= 0.05])):
        gaps = sorted(abs(second[k] / first[k] - 1) for k in keys)
        found[name] = {"count": len(gaps), "median": statistics.median(gaps),
                       "p90": gaps[int(0.9 * (len(gaps) - 1))]}
    sums = sorted(abs(repeat["configs"][k]["sum_ms"] / c["sum_ms"] - 1)
                  for k, c in measured["configs"].items() if k in repeat["configs"])
    found["configurations"] = {"count": len(sums), "median": statistics.median(sums),
                               "p90": sums[int(0.9 * (len(sums) - 1))], "max": sums[-1]}
    return found


def record_results(paths: list[str], repeat_paths: list[str] = ()) -> None:
    """Here, without a GPU: the device's JSON (one per part) as
    `benchmarks/results/gpu_corpus_<gpu>.json`; with a second run's files (`--repeat`), how
    far it lands from the first."""
    import record

    measured = merged(paths)
    if repeat_paths:
        measured["repeatability"] = repeatability(measured, merged(repeat_paths))
    device = measured["device"]
    peaks = {m["math"]: m["tflops"] for m in measured["ceilings"]["matmul"]}
    dram = max(measured["ceilings"]["copy"], key=lambda c: c["bytes_moved"])
    ops: dict[str, int] = {}
    for row in measured["rows"]:
        ops[row["op"]] = ops.get(row["op"], 0) + 1
    figures = [
        record.figure("kernels timed (CUDA-graph replays), by class",
                       f"{len(measured['rows'])}: " + ", ".join(
                           f"{op} {n}" for op, n in sorted(ops.items()))),
        record.figure("model configurations (model, batch, precision) summed",
                       str(len(measured["configs"]))),
        record.figure("copy bandwidth (1 GiB, read+written) / launch in a CUDA graph",
                       f"{dram['gb_s']:.0f} GB/s / "
                       f"{measured['ceilings']['launch_in_graph_ms'] * 1e3:.1f} us"),
        record.figure("matrix product at n=8192, TFLOP/s (FP32 / TF32 / FP16 / BF16 / INT8)",
                       " / ".join(f"{peaks.get(m, 0):.0f}" for m in
                                  ("fp32", "tf32", "fp16", "bf16", "int8")))]
    if "repeatability" in measured:
        again = measured["repeatability"]
        figures.append(record.figure(
            "a second run on a fresh machine: difference per kernel, median / 90th percentile "
            "(all; 50 us or more); per configuration's sum, median / worst",
            f"{100 * again['kernels']['median']:.1f}% / {100 * again['kernels']['p90']:.1f}%; "
            f"{100 * again['kernels_50us']['median']:.1f}% / "
            f"{100 * again['kernels_50us']['p90']:.1f}%; "
            f"{100 * again['configurations']['median']:.1f}% / "
            f"{100 * again['configurations']['max']:.1f}%"))
    short = device["name"].split()[1].lower()  # "NVIDIA H200" -> h200
    written = record.write(
        f"gpu_corpus_{short}", figures, data={"measurements": measured},
        machine=f"{device['name']} (lent device machine; torch {device['torch']}, cuDNN "
                f"{device['cudnn']}; {device['nvidia_smi'].splitlines()[-1]})")
    document = json.loads(written.read_text())
    document["command"] = ("CORPUS_PART=0/2 and 1/2 python3 benchmarks/gpu_corpus.py OUT.json "
                           "(on two GPUs, twice), then python benchmarks/gpu_corpus.py "
                           "--record OUT0.json OUT1.json --repeat AGAIN0.json AGAIN1.json")
    written.write_text(json.dumps(document, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
