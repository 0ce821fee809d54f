"""The device TF-TRT's Grappler run saw: a GPU (by name or compute capability) or the CPU.

TF-TRT only ran where a GPU was, so its Grappler pass placed the graph on `/device:GPU:0` and
the layout optimizer rewrote NHWC convolutions and pools to NCHW, with Transposes at the
edges. It keeps NHWC instead when at least half the GPU's convolutions are float16 on Volta+
(sm_70), bfloat16 on Ampere+ (sm_80), or float32 on Ampere+ with TensorFloat-32 on (TF >= 2.10).
We give Grappler a virtual cluster with such a GPU, so the graph we segment is the one TF-TRT
segmented. Only the compute capability matters to Grappler's passes in TF-TRT's list; the other
properties only make the device look like the real one.

The default is the NVIDIA T4 (Turing, sm_75): the inference GPU of TF-TRT's years (AWS g4dn,
Google Cloud, Colab's free GPU, NVIDIA's TF-TRT blog figures). For a float32 model it gives the
NCHW graph every Volta/Turing GPU gives; Ampere and newer keep NHWC (docs/gpu-preparation.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import find_gpu, squash_name
from workbench.lazy import tf

GPU_DEVICE = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"
PLACED_ON = "/device:GPU:0"  # what each node requests, as TF-TRT's convert() set it


@dataclass(frozen=True)
class PreparationTarget:
    """Where Grappler prepares the graph: a GPU of this compute capability, or the CPU."""

    name: str  # "NVIDIA T4", or "CPU"
    compute_capability: str | None = None  # "7.5"; None for the CPU

    @property
    def is_gpu(self) -> bool:
        return self.compute_capability is not None

    @property
    def key(self) -> str:
        """A stable text for cache keys and JSON: "sm_75" or "cpu"."""
        return f"sm_{self.compute_capability.replace('.', '')}" if self.is_gpu else "cpu"

    @property
    def label(self) -> str:
        """What reports print: "NVIDIA T4 (sm_75)" or "CPU"."""
        return f"{self.name} ({self.key})" if self.is_gpu else "CPU"


# Common GPUs of TF-TRT's users and their compute capabilities (NVIDIA's CUDA GPU list).
KNOWN_GPUS = {
    "K80": "3.7", "P4": "6.1", "P40": "6.1", "P100": "6.0", "V100": "7.0",
    "Jetson Xavier": "7.2", "T4": "7.5", "RTX 2080 Ti": "7.5", "A100": "8.0", "A10": "8.6",
    "A30": "8.0", "RTX 3090": "8.6", "Jetson Orin": "8.7", "L4": "8.9", "RTX 4090": "8.9",
    "H100": "9.0",
}
DEFAULT_GPU = "T4"
CPU = PreparationTarget("CPU")


class UnknownTargetError(WorkbenchError):
    """A `prepare_for` setting that names neither a known GPU, a compute capability nor cpu."""


def preparation_target(setting: str | PreparationTarget | None = None) -> PreparationTarget:
    """The target a setting names: a GPU ("T4", "RTX 3090", "A100"), a compute capability
    ("7.5", "sm_75"), or "cpu"; None gives the default GPU (T4)."""
    if isinstance(setting, PreparationTarget):
        return setting
    text = (setting if setting is not None else DEFAULT_GPU).strip()
    if text.lower() == "cpu":
        return CPU
    by_name = {squash_name(name): name for name in KNOWN_GPUS}
    name = by_name.get(squash_name(text))
    if name is not None:
        return PreparationTarget(f"NVIDIA {name}", KNOWN_GPUS[name])
    facts = find_gpu(text)  # the latency estimate's GPUs, by trtexec's names too
    if facts is not None:
        return PreparationTarget(facts.name, facts.compute_capability)
    match = re.fullmatch(r"(?:sm_?(\d)(\d)|(\d+)\.(\d))", text.lower())
    if match:
        major, minor = (g for g in match.groups() if g is not None)
        capability = f"{int(major)}.{minor}"
        return PreparationTarget("GPU", capability)
    raise UnknownTargetError(
        f"Unknown GPU {text!r} to prepare the graph for: give a compute capability "
        f"(7.5 or sm_75), cpu, or one of {', '.join(KNOWN_GPUS)}")


def tf32_enabled() -> bool:
    """TensorFlow's TensorFloat-32 setting, which Grappler's layout optimizer reads."""
    return bool(tf.config.experimental.tensor_float_32_execution_enabled())


def grappler_cluster(target: PreparationTarget) -> Any:
    """A virtual Grappler cluster with the CPU and, for a GPU target, that GPU (None for the
    CPU: Grappler then uses this machine, as before)."""
    if not target.is_gpu:
        return None
    from tensorflow.core.protobuf import device_properties_pb2 as dp

    from workbench.tf_private.grappler import virtual_cluster

    gpu = dp.DeviceProperties(type="GPU", vendor="NVIDIA", model=target.name,
                              environment={"architecture": target.compute_capability})
    return virtual_cluster([
        dp.NamedDevice(name=CPU_DEVICE, properties=dp.DeviceProperties(type="CPU")),
        dp.NamedDevice(name=GPU_DEVICE, properties=gpu),
    ])
