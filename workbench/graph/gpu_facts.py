"""Datasheet facts of the GPUs the latency estimate knows, by the name trtexec prints.

Peaks are dense (NVIDIA's datasheets print sparse figures for Ampere and newer tensor cores
too; those are halved here) at the boost clock. `fp16_tflops` is the tensor-core FP16 rate
TensorRT's FP16 tactics run at (FP16 accumulate: on GeForce cards twice the FP32-accumulate
rate; on data-center cards the same). `tf32_tflops` is None where the GPU has no TF32 (Turing):
TensorRT then runs FP32 layers on the CUDA cores. Each entry names its source; "derived" means
computed from the source's SM count, clock and the architecture whitepaper's per-SM rates.
`l2_mb` is the L2 cache (the whitepapers'; the H200's as PyTorch reads it).
`graph/gpu.py` prepares graphs for these GPUs too (compute capability from here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class GpuFacts:
    name: str  # as trtexec / cudaGetDeviceProperties print it
    short: str  # what people call it: "T4", "A100 PCIe 80GB"
    aliases: tuple[str, ...]
    compute_capability: str
    sms: int
    boost_clock_mhz: int
    memory_gb_s: float
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float
    int8_tops: float
    source: str
    l2_mb: float  # the L2 cache (whitepapers); a kernel's tensors that fit there skip DRAM

    def peak_tflops(self, precision: str) -> float:
        """Dense peak for a compute precision: fp32, tf32 (fp32 where none), fp16, int8."""
        if precision == "tf32":
            return self.tf32_tflops or self.fp32_tflops
        return {"fp32": self.fp32_tflops, "fp16": self.fp16_tflops,
                "int8": self.int8_tops}[precision]

    @property
    def generation(self) -> str:
        """The tensor cores' generation, by compute capability: turing, ampere, ada, hopper."""
        major, minor = (int(part) for part in self.compute_capability.split("."))
        if major >= 9:
            return "hopper"
        return {7: "turing", 8: "ada" if minor >= 9 else "ampere"}.get(major, "turing")

    def as_dict(self) -> dict:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (dense figures)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (sparse figures halved)"

GPU_FACTS: tuple[GpuFacts, ...] = (
    GpuFacts("Tesla T4", "T4", ("NVIDIA T4",), "7.5", 40, 1590, 320, 8.1, None, 65, 130,
             "NVIDIA T4 Tensor Core GPU datasheet", 4),
    GpuFacts("NVIDIA A10", "A10", (), "8.6", 72, 1695, 600, 31.2, 62.5, 125, 250,
             "NVIDIA A10 Tensor Core GPU datasheet (sparse figures halved)", 6),
    GpuFacts("NVIDIA L4", "L4", (), "8.9", 58, 2040, 300, 30.3, 60, 121, 242,
             "NVIDIA L4 Tensor Core GPU datasheet (sparse figures halved)", 48),
    GpuFacts("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", ("A100", "A100 PCIe"), "8.0", 108, 1410,
             1935, 19.5, 156, 312, 624, _A100, 40),
    GpuFacts("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", ("A100 40GB",), "8.0", 108, 1410,
             1555, 19.5, 156, 312, 624, _A100, 40),
    GpuFacts("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB", ("A100 SXM", "A100 SXM4"), "8.0", 108,
             1410, 2039, 19.5, 156, 312, 624, _A100, 40),
    GpuFacts("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB", ("A100 SXM4 40GB",), "8.0", 108, 1410,
             1555, 19.5, 156, 312, 624, _A100, 40),
    GpuFacts("NVIDIA H100 80GB HBM3", "H100 SXM", ("H100", "H100 SXM5"), "9.0", 132, 1980,
             3350, 67, 494.5, 989.5, 1979, _H100, 50),
    GpuFacts("NVIDIA H200", "H200", ("H200 SXM",), "9.0", 132, 1980, 4800, 67, 494.5, 989.5,
             1979, "NVIDIA H200 Tensor Core GPU datasheet (sparse figures halved); L2 as "
             "PyTorch reads it", 60),
    GpuFacts("NVIDIA H100 PCIe", "H100 PCIe", (), "9.0", 114, 1755, 2000, 51, 378, 756, 1513,
             _H100, 50),
    GpuFacts("NVIDIA GeForce RTX 3060 Laptop GPU", "RTX 3060 Laptop", (), "8.6", 30, 1703, 336,
             13.1, 13.1, 52.3, 104.6,
             "GeForce RTX 3060 Laptop GPU specifications (3840 cores, max boost 1703 MHz; "
             "OEMs may clock it as low as 1283 MHz; 6 GB 192-bit 14 Gbps) with the GA102 "
             "whitepaper's per-SM rates (derived)", 3),
    GpuFacts("NVIDIA GeForce RTX 3090", "RTX 3090", (), "8.6", 82, 1695, 936, 35.6, 35.6, 142,
             284, "NVIDIA Ampere GA102 GPU Architecture whitepaper, appendix A (dense)", 6),
    GpuFacts("NVIDIA GeForce RTX 4090", "RTX 4090", (), "8.9", 128, 2520, 1008, 82.6, 82.6,
             330.3, 660.6, "NVIDIA Ada GPU Architecture whitepaper, appendix A (dense)", 72),
    GpuFacts("TITAN RTX", "TITAN RTX", ("NVIDIA TITAN RTX",), "7.5", 72, 1770, 672, 16.3, None,
             130.5, 261, "NVIDIA TITAN RTX specifications and Turing GPU Architecture "
             "whitepaper", 6),
    GpuFacts("Orin", "Jetson AGX Orin", ("Jetson Orin", "NVIDIA Jetson AGX Orin", "AGX Orin"),
             "8.7", 16, 1300, 204.8, 5.3, 21.3, 42.5, 85,
             "NVIDIA Jetson AGX Orin Series datasheet (64 GB: 2048 cores, 64 tensor cores, "
             "1.3 GHz, 170 sparse INT8 TOPS, 204.8 GB/s; derived dense rates)", 4),
)


class UnknownGpuError(WorkbenchError):
    """A GPU name the datasheet table does not hold."""


_PREFIXES = ("nvidiageforce", "nvidiatesla", "nvidia", "geforce", "tesla")


def squash_name(text: str) -> str:
    """A GPU name as lower-case letters and digits, without the vendor and brand prefixes."""
    key = re.sub(r"[^a-z0-9]", "", text.lower())
    for prefix in _PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix):]
    return key


_BY_NAME = {squash_name(name): gpu for gpu in GPU_FACTS
            for name in (gpu.name, gpu.short, *gpu.aliases)}


def find_gpu(name: str) -> GpuFacts | None:
    """The GPU a name means ("NVIDIA A100 80GB PCIe", "A100", "rtx3090"), or None."""
    return _BY_NAME.get(squash_name(name))


def gpu_facts(name: str | GpuFacts) -> GpuFacts:
    """The GPU a name means; an unknown name raises with the known ones listed."""
    if isinstance(name, GpuFacts):
        return name
    gpu = find_gpu(name)
    if gpu is None:
        raise UnknownGpuError(f"Unknown GPU {name!r}: give one of "
                              f"{', '.join(g.short for g in GPU_FACTS)} (or the name trtexec "
                              "prints, e.g. 'NVIDIA A100 80GB PCIe')")
    return gpu
