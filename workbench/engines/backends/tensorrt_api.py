"""The differences between the two TensorRT Python APIs the TensorRT backend family builds with.

`tensorrt` (TensorRT 10/11, GPU machines only) and `tensorrt_rtx` (TensorRT for RTX, on PyPI as
real wheels whose builder runs without a GPU) share TensorRT 10's API: `Builder`, `OnnxParser`,
optimization profiles, `build_serialized_network`, `Runtime`, execution contexts, the engine
inspector and `IProfiler`. TensorRT-RTX differs where precision is chosen: its networks are
strongly typed only (no FP16/INT8 builder flags, no INT8 calibrators), so an FP16 engine is
float16 ONNX and an INT8 engine is explicit Q/DQ, both made by `engines.precision`. Everything
that differs is here; `tensorrt_backend` holds what is shared.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.engines.backends.base import BackendUnavailableError, EngineBuildError
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    import onnx
    import tensorrt as trt10  # tensorrt-stubs (make typecheck): what the weak-typing path calls

# TF-TRT's builder flags per precision mode: INT8 also enables FP16 so layers without INT8
# kernels fall back to half precision (convert_nodes.cc, TF 2.16/2.17).
_PRECISION_FLAGS = {"FP32": (), "FP16": ("FP16",), "INT8": ("FP16", "INT8")}


def precision_flags(precision: str) -> tuple[str, ...]:
    """Names of the `tensorrt.BuilderFlag` members a precision mode sets (weakly typed API)."""
    try:
        return _PRECISION_FLAGS[precision.upper()]
    except KeyError:
        raise WorkbenchError(f"unknown precision {precision!r}") from None


@dataclass(frozen=True)
class TensorRTApi:
    """One TensorRT Python package and how the shared code must use it."""

    package: str  # the module to import
    label: str  # what figures call it
    strongly_typed: bool  # precision comes from the ONNX model's types, not builder flags
    install: str  # the one line saying how to get it

    def module(self) -> ModuleType:
        """The imported package; BackendUnavailableError saying how to install it if absent.

        A directory without the library (type stubs installed alone make `tensorrt` a
        namespace package) counts as absent."""
        try:
            module = importlib.import_module(self.package)
        except ImportError:
            module = None
        if module is None or not hasattr(module, "Builder"):
            raise BackendUnavailableError(f"{self.label} is not installed: {self.install}")
        return module

    def version(self) -> str | None:
        """The package's version, or None where it is not installed."""
        try:
            return str(getattr(self.module(), "__version__", "unknown version"))
        except BackendUnavailableError:
            return None

    def builder_name(self) -> str | None:
        """`TensorRT-RTX 1.7.1.116`: the builder named in verdicts and figures."""
        version = self.version()
        return None if version is None else f"{self.label} {version}"

    def typed_model(self, model: onnx.ModelProto, precision: str,
                    batches: list[tuple[np.ndarray, ...]]) -> onnx.ModelProto:
        """The ONNX model this API builds for `precision`: strongly typed networks take the
        precision from the model (float16 tensors, Q/DQ nodes), the others from flags."""
        if not self.strongly_typed or precision == "FP32":
            return model
        from workbench.engines.onnx.precision import fold_for_precision, quantize_int8, to_float16

        folded = fold_for_precision(model)
        if precision == "FP16":
            return to_float16(folded)
        return quantize_int8(folded, batches, symmetric=True)

    def configure_precision(self, trt: ModuleType, builder_config: Any, precision: str
                            ) -> None:
        """Sets the builder flags of a weakly typed API (TensorRT 10's FP16/INT8 flags)."""
        if self.strongly_typed:
            return
        config: trt10.IBuilderConfig = builder_config
        flags: type[trt10.BuilderFlag] = trt.BuilderFlag
        for flag in precision_flags(precision):
            member = getattr(flags, flag, None)
            if member is None:  # TensorRT 11 removed weakly typed precisions
                raise EngineBuildError(f"this {self.label} has no BuilderFlag.{flag}")
            config.set_flag(member)

    def calibrates(self, precision: str) -> bool:
        """Whether INT8 needs a calibrator at build time (weak typing); strongly typed INT8
        is calibrated into the model's Q/DQ scales before the build."""
        return precision == "INT8" and not self.strongly_typed


TENSORRT = TensorRTApi(
    "tensorrt", "TensorRT", strongly_typed=False,
    install="pip install tensorrt (NVIDIA's wheels, for GPU machines)")
TENSORRT_RTX = TensorRTApi(
    "tensorrt_rtx", "TensorRT-RTX", strongly_typed=True,
    install='pip install "tftrt-workbench[tensorrt]" (or: pip install tensorrt-rtx)')
