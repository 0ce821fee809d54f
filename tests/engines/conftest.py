"""TensorRT-RTX's own verdict on an ONNX model, for the tests that the exporter's ONNX is what
TensorRT accepts (the builder runs without a GPU)."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import pytest

from workbench.engines.profiles import Profile
from workbench.engines.settings import BuildRequest


@pytest.fixture(scope="session")
def tensorrt_error() -> Callable[[onnx.ModelProto, str, Profile], str]:
    """A function: (FP32 ONNX model, precision, optimization profile) -> "" when TensorRT-RTX
    parses it into a strongly typed network at that precision and builds a plan, else
    TensorRT's error (`tensorrt_verdict`, uncached)."""
    pytest.importorskip(
        "tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install tensorrt-rtx)")
    from workbench.engines.tensorrt_verdict import tensorrt_verdict

    def build(model: onnx.ModelProto, precision: str, profile: Profile) -> str:
        verdict = tensorrt_verdict(model, precision, BuildRequest(profiles=(profile,)),
                                   use_cache=False)
        return "" if verdict.built else verdict.error or "no plan"

    return build
