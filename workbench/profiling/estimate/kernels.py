"""What one kernel of a TensorRT engine must do: its kind, FLOPs, bytes and output tiles.

A kernel is a `tensorrt_kernels.Kernel`: a layer of trtexec's `--exportLayerInfo` / the engine
inspector's JSON (`profiling.trtexec.read_trtexec_kernels`), or one TensorRT-RTX's builder
listed. Its work comes from its own shapes, datatypes and weights, or, for TensorRT-RTX's fused
kernels, from the TF nodes it holds (`engine_work`). `roofline` turns the work into time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from workbench.engines.inspection.tensorrt_kernels import (
    NON_COMPUTE_TYPES,
    EngineAnatomy,
    Kernel,
    KernelTensor,
    inspector_kernels,
)

# gemm: matrix products (linear layers, attention's batched products) on tensor cores; conv:
# convolutions as implicit GEMMs on tensor cores; direct: depthwise-like grouped convolutions
# (a few channels a group) on the CUDA cores; memory: element-wise, scale, pooling, resize,
# concatenation, reformats; norm: normalisations, softmax, reductions.
KINDS = ("gemm", "conv", "direct", "memory", "norm")
TENSOR_CORE_KINDS = ("gemm", "conv")
# Of a kernel's tensors: fp32 runs as TF32 where the GPU has it (TensorRT's default);
# fp32_strict (TF32 off) only in measured corpora.
PRECISIONS = ("fp32", "fp32_strict", "fp16", "int8")
DIRECT_MAX_CHANNELS = 8  # output channels a group at most for a convolution to run direct
VECTOR_CHANNELS = 8  # FP16 channels in the tensor cores' 16-byte vectors


# Layer types of the inspector (CaskConvolution, CaskGemmConvolution...) and of TensorRT-RTX's
# listing (`correlation` is its convolution, `gemm` its matrix product); of those, the
# convolutions proper (a GEMM-convolution is a fully connected layer).
_GEMM_TYPES = re.compile(r"Convolution|Deconvolution|Gemm|MatrixMultiply|FullyConnected|"
                         r"Attention|^correlation$", re.I)
# No kernel of the network: the inspector's no-ops, TensorRT-RTX's shape calls, stream events
# and copies of shape values to the GPU (dynamic shapes).
_CONV_TYPES = re.compile(r"^(?!.*Gemm).*Convolution|^correlation$", re.I)
_FREE_TYPES = {"NoOp", "Constant", "Shape", "Assertion", "ShapeHostToDevice"} | NON_COMPUTE_TYPES
_NORM_TYPES = re.compile(r"Norm|SoftMax|Reduce|TopK", re.I)
_MYELIN_TYPES = {"Myelin", "ForeignNode"}  # fused regions the inspector lists without parts
# TensorRT-RTX's kernel types that run a convolution or matrix product of the nodes they hold
# (`kgen` kernels are generated element-wise ones: they may name a convolution they prepare).
_GEMM_HOLDERS = re.compile(r"^(correlation|gemm|runtime_fusion)$|Convolution|Gemm|Matrix", re.I)
_DTYPE_BYTES = {"FP32": 4, "TF32": 4, "INT32": 4, "FP16": 2, "BF16": 2, "INT8": 1, "FP8": 1,
                "UINT8": 1, "BOOL": 1, "INT64": 8, "INT4": 0.5}
_PRECISION_OF = {"FP16": "fp16", "BF16": "fp16", "INT8": "int8", "FP8": "int8", "INT4": "int8"}


@dataclass(frozen=True)
class KernelWork:
    """What one kernel must do: its kind, FLOPs, bytes moved, compute precision and the
    output elements its tiles cover (a GEMM's M x N; what waves of tiles over the SMs
    cover)."""

    kind: str  # one of KINDS, or free (no kernel: NoOp, Constant, shape calls)
    flops: float
    bytes: float
    precision: str  # one of PRECISIONS, of its first input
    outputs: float  # GEMM output elements (gemm kernels; 0 for others)
    # The GEMM's N (a convolution's output channels, a matrix's columns): with M = outputs / N
    # it shapes the tiles; 0 where unknown (a Myelin region), and the tiles are square.
    columns: float = 0.0
    # A convolution whose input channels (a group's) do not fill the tensor cores' 16-byte
    # vectors (not a multiple of 8: an image's 3 channels) runs on the CUDA cores: TensorRT's
    # FP32 and INT8 first layers (`scudnn`, `int8x4 icudnn` kernels), and cuDNN's in every
    # precision (set by the corpus's reader). TensorRT's FP16 first layer pads the channels
    # to 4 for the tensor cores (`first_layer_hmma`): not set for it.
    narrow_channels: bool = False
    # A convolution cuDNN ran on row-major (NCHW) tensors, in measured corpora only: its
    # tensor-core kernels want channels adjacent, so cuDNN transforms the layout or picks
    # slower kernels. TensorRT chooses its formats and lists its reformats as layers, and
    # its NCHW kernels are as fast as the others (RTX 3090 fixture): never set for them.
    cudnn_nchw: bool = False


def as_kernels(layers: EngineAnatomy | Iterable[Kernel | Mapping[str, Any]]) -> list[Kernel]:
    """Kernels of an anatomy, kernels, or layer records in the inspector's form (`Name`,
    `LayerType`, `Inputs`, `Outputs`, `Weights`, `OutMaps`...: what benchmarks write)."""
    if isinstance(layers, EngineAnatomy):
        return list(layers.kernels)
    items = list(layers)
    records = [item for item in items if not isinstance(item, Kernel)]
    converted = iter(inspector_kernels(records))
    return [item if isinstance(item, Kernel) else next(converted) for item in items]


def kernel_work(kernel: Kernel) -> KernelWork:
    """Work and bytes of one kernel from its own shapes, datatypes and weights."""
    inputs, outputs = kernel.inputs, kernel.outputs
    precision = _precision((inputs or outputs or (None,))[0])
    moved = sum(tensor_bytes(t) for t in (*inputs, *outputs, *kernel.constants))
    if kernel.type in _FREE_TYPES:
        return KernelWork("free", 0.0, 0.0, precision, 0.0)
    if kernel.type in _MYELIN_TYPES:
        return KernelWork("gemm", _myelin_flops(kernel), moved, precision,
                          _elements(inputs[0].shape) if inputs else 0.0)
    if _GEMM_TYPES.search(kernel.type):
        flops, positions, out_channels = _gemm_flops(kernel)
        groups = int(kernel.parameters.get("Groups") or 1)
        if groups > 1 and out_channels / groups <= DIRECT_MAX_CHANNELS:
            return KernelWork("direct", flops, moved, precision, 0.0)
        kind = "conv" if _CONV_TYPES.search(kernel.type) else "gemm"
        return KernelWork(kind, flops, moved, precision, positions * out_channels,
                          columns=out_channels, narrow_channels=precision != "fp16"
                          and kind == "conv" and narrow_channels(kernel, out_channels))
    kind = "norm" if _NORM_TYPES.search(kernel.type) or _is_norm_plugin(kernel) else "memory"
    return KernelWork(kind, 0.0, moved, precision, 0.0)


def engine_work(kernels: Sequence[Kernel], node_work: Mapping[str, KernelWork],
                node_weight_bytes: Mapping[str, float] | None = None) -> list[KernelWork]:
    """Work of TensorRT-RTX's kernels of one engine from the TF nodes they hold.

    A fused kernel's name and type do not say what it computes (`__myl_CorrMulAddAddRelu...`,
    `runtime_fusion`), so its FLOPs are those of the convolutions and matrix products among its
    TF nodes (`node_work`, each node's work as its own kernel), each counted once, in the
    kernel that runs it (a `correlation`, `gemm` or `runtime_fusion` kernel, else the first
    that names it); its kind is theirs (else `norm` where it holds a normalisation or
    reduction). Bytes are the kernel's own tensors at the datatypes TensorRT chose, with its
    weights; kernels listed without weights (the JSON form) take their GEMM nodes' weights from
    `node_weight_bytes`.
    """
    runner: dict[str, int] = {}
    for index, kernel in enumerate(kernels):
        for node in kernel.nodes:
            work = node_work.get(node)
            if work is None or work.kind not in ("gemm", "conv", "direct"):
                continue
            if node not in runner or (_GEMM_HOLDERS.search(kernel.type)
                                      and not _GEMM_HOLDERS.search(kernels[runner[node]].type)):
                runner[node] = index
    works = []
    for index, kernel in enumerate(kernels):
        own = kernel_work(kernel)
        gemm_nodes = [n for n, i in runner.items() if i == index]
        if gemm_nodes:
            weights = 0.0 if kernel.constants else sum(
                (node_weight_bytes or {}).get(n, 0.0) for n in gemm_nodes)
            kinds = {node_work[n].kind for n in gemm_nodes}
            kind = next(k for k in ("gemm", "conv", "direct") if k in kinds)
            works.append(replace(own, kind=kind,
                                 bytes=own.bytes + weights,
                                 flops=sum(node_work[n].flops for n in gemm_nodes),
                                 outputs=sum(node_work[n].outputs for n in gemm_nodes),
                                 columns=max(node_work[n].columns for n in gemm_nodes),
                                 narrow_channels=any(node_work[n].narrow_channels
                                                     for n in gemm_nodes)))
        elif own.kind in ("free", "gemm", "conv", "direct") or not kernel.nodes:
            works.append(own)
        else:
            norm = any(node_work.get(n, own).kind == "norm" for n in kernel.nodes)
            works.append(replace(own, kind="norm" if norm else "memory", flops=0.0,
                                 outputs=0.0))
    return works


def with_batch(kernel: Kernel, batch_size: int) -> Kernel:
    """The kernel with its dynamic leading dimension (-1, as TensorRT lists a profile's
    tensors) set to `batch_size`; other dynamic dimensions count as 1."""
    def fixed(tensors: tuple[KernelTensor, ...]) -> tuple[KernelTensor, ...]:
        return tuple(replace(t, shape=tuple(batch_size if i == 0 and d < 0 else d
                                            for i, d in enumerate(t.shape))) for t in tensors)

    return replace(kernel, inputs=fixed(kernel.inputs), outputs=fixed(kernel.outputs))


# --- Shapes and datatypes ------------------------------------------------------------------

def _precision(tensor: KernelTensor | None) -> str:
    return _PRECISION_OF.get(str(tensor.dtype), "fp32") if tensor is not None else "fp32"



def _elements(shape: Sequence[int]) -> int:
    return math.prod(max(int(d), 1) for d in shape)


def tensor_bytes(tensor: KernelTensor) -> float:
    """Bytes of a tensor at its datatype (4 a value where TensorRT names none)."""
    return _elements(tensor.shape) * _DTYPE_BYTES.get(str(tensor.dtype), 4)


def _gemm_flops(kernel: Kernel) -> tuple[float, int, int]:
    """FLOPs, output positions (GEMM M) and output channels (GEMM N) of a conv/GEMM kernel,
    from its weights (`OutMaps` output channels, else the weights' first dimension)."""
    out = kernel.outputs[0].shape if kernel.outputs else (1,)
    out_elements = _elements(out)
    weights = _weights(kernel)
    out_maps = int(kernel.parameters.get("OutMaps") or 0)
    if not out_maps and weights is not None and len(weights.shape) >= 2:
        # A convolution's weights are (out, in, *window); a matrix's (in, out) or (out, in).
        out_maps = weights.shape[-1] if len(weights.shape) == 2 and out[-1] == \
            weights.shape[-1] else weights.shape[0]
    if weights is not None and out_maps:
        positions = out_elements // out_maps
        return 2.0 * positions * _elements(weights.shape), positions, out_maps
    if kernel.type == "Attention" and kernel.inputs:
        dims = kernel.inputs[0].shape or (1, 1, 1)
        seq, head = int(dims[-2]), int(dims[-1])
        rows = _elements(dims) // head
        return 4.0 * rows * seq * head, rows, seq
    inner = int(kernel.inputs[0].shape[-1]) if kernel.inputs and kernel.inputs[0].shape else 1
    columns = int(out[-1]) if out else 1
    return 2.0 * out_elements * inner, out_elements // max(columns, 1), columns


def narrow_channels(kernel: Kernel, out_channels: float) -> bool:
    """Whether a convolution's input channels a group (from its 4-D weights: (out, in, kh,
    kw) as TensorRT lists them, (kh, kw, in, out) as TensorFlow holds them) are not a
    multiple of 8; False where unknown."""
    weights = _weights(kernel)
    shape = weights.shape if weights is not None else ()
    if len(shape) != 4 or out_channels not in (shape[0], shape[3]):
        return False
    return int(shape[1] if shape[0] == out_channels else shape[2]) % VECTOR_CHANNELS > 0


def _myelin_flops(kernel: Kernel) -> float:
    """A region Myelin compiled whole is listed without its parts; in the engines we know
    (diffusion U-Nets, BERT) it is a transformer block, so it is counted as one over its first
    input's tokens T and channels D: 24 T D^2 (QKV, output and a 4x FFN) + 4 T^2 D
    (attention's two batched products) per sample."""
    dims = [max(int(d), 1) for d in (kernel.inputs[0].shape if kernel.inputs else ())]
    if len(dims) < 3:
        return 0.0
    samples, channels = dims[0], dims[1] if len(dims) == 4 else dims[-1]
    tokens = math.prod(dims[2:]) if len(dims) == 4 else dims[1]
    return samples * (24.0 * tokens * channels ** 2 + 4.0 * tokens ** 2 * channels)


def _weights(kernel: Kernel) -> KernelTensor | None:
    """The inspector's `weights`, else the largest constant of two or more dimensions (the
    builder lists biases and folded scales beside the weights)."""
    named = [t for t in kernel.constants if t.name == "weights"]
    matrices = [t for t in kernel.constants if len(t.shape) >= 2]
    return named[0] if named else max(matrices, key=lambda t: _elements(t.shape), default=None)


def _is_norm_plugin(kernel: Kernel) -> bool:
    if not kernel.type.startswith("Plugin"):
        return False
    return "Norm" in str(kernel.parameters.get("PluginType", "")) or "Norm" in kernel.name
