"""TensorRT-RTX's own verdict on an ONNX model, for the tests that the exporter's ONNX is what
TensorRT accepts (the builder runs without a GPU)."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import pytest

from workbench.engines.profiles import Profile


@pytest.fixture(scope="session")
def tensorrt_error() -> Callable[[onnx.ModelProto, Profile], str]:
    """A function: (ONNX model, optimization profile) -> "" when TensorRT-RTX parses it into a
    strongly typed network and builds a plan, else TensorRT's first error."""
    trt = pytest.importorskip(
        "tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install tensorrt-rtx)")

    def build(model: onnx.ModelProto, profile: Profile) -> str:
        logger = trt.Logger(trt.Logger.ERROR)
        builder = trt.Builder(logger)
        network = builder.create_network(
            1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(model.SerializeToString()):
            return "; ".join(parser.get_error(i).desc() for i in range(parser.num_errors))
        config = builder.create_builder_config()
        trt_profile = builder.create_optimization_profile()
        for index in range(network.num_inputs):
            trt_profile.set_shape(network.get_input(index).name, profile.min[index],
                                  profile.opt[index], profile.max[index])
        config.add_optimization_profile(trt_profile)
        if builder.build_serialized_network(network, config) is None:
            return "build_serialized_network failed (see TensorRT's log above)"
        return ""

    return build
