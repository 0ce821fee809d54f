"""What TensorRT-RTX's ONNX parser takes of a whole model, and the plan it builds from it.

Every call into `tensorrt_rtx` for the export and side-by-side views is in this one module, so
it can later point at the TensorRT-RTX backend's own helpers. `capability()` reports what
Polygraphy's `inspect capability` reports (without `--with-partitioning`): the subgraphs of
`OnnxParser.supports_model_v2`, each supported or not, and the parser's error per rejected
node. The builder runs without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.engines.profiles import Profile
from workbench.errors import WorkbenchError

MODULE = "tensorrt_rtx"


class TensorRTParseError(WorkbenchError):
    """TensorRT's ONNX parser rejected a model that had to parse whole (building a plan)."""


@dataclass(frozen=True)
class Rejection:
    """One node the parser rejected: its index and name in the ONNX graph, op and reason."""

    index: int
    node: str
    op: str
    reason: str


@dataclass(frozen=True)
class Capability:
    """The parser's partition of an ONNX graph: (node indices, supported) per subgraph."""

    subgraphs: list[tuple[tuple[int, ...], bool]]
    rejections: list[Rejection] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return all(ok for _, ok in self.subgraphs)


def available() -> tuple[bool, str]:
    """Whether `tensorrt_rtx` imports here, and its version or why not."""
    try:
        import tensorrt_rtx as trt
    except Exception as exc:  # ImportError, or a broken install's OSError
        return False, f"{MODULE} is not installed ({type(exc).__name__}: {exc})"
    return True, str(trt.__version__)


def _trt() -> Any:
    ok, detail = available()
    if not ok:
        raise WorkbenchError(f"{detail}; install the [tensorrt] extra")
    import tensorrt_rtx as trt

    return trt


def _network(trt: Any, logger: Any) -> tuple[Any, Any, Any]:
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    return builder, network, trt.OnnxParser(network, logger)


def capability(onnx_bytes: bytes) -> Capability:
    """The parser's verdict on a serialized ONNX model."""
    trt = _trt()
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    _builder, _network_, parser = _network(trt, logger)
    parser.supports_model_v2(onnx_bytes)
    subgraphs = [(tuple(int(i) for i in parser.get_subgraph_nodes(s)),
                  bool(parser.is_subgraph_supported(s))) for s in range(parser.num_subgraphs)]
    rejections = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        rejections.append(Rejection(int(error.node()), str(error.node_name()),
                                    str(error.node_operator()), _reason(error)))
    return Capability(subgraphs, rejections)


def build_plan(onnx_bytes: bytes, profiles: Sequence[Profile], input_names: Sequence[str],
               precision: str = "FP32") -> bytes:
    """A serialized TensorRT-RTX plan of the whole model, one optimization profile per
    `profiles` entry (shapes in `input_names` order). TensorRT-RTX picks precisions itself
    (strongly typed); FP16/INT8 come from the model's own types, so `precision` only names it.
    Raises TensorRTParseError with the parser's first error when the model does not parse."""
    trt = _trt()
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    builder, network, parser = _network(trt, logger)
    if not parser.parse(onnx_bytes):
        error = parser.get_error(0)
        raise TensorRTParseError(
            f"TensorRT cannot parse the ONNX model at node {error.node_name()} "
            f"({error.node_operator()}): {_reason(error)}")
    config = builder.create_builder_config()
    for profile in profiles:
        optimization = builder.create_optimization_profile()
        for index, name in enumerate(input_names):
            optimization.set_shape(name, profile.min[index], profile.opt[index],
                                   profile.max[index])
        config.add_optimization_profile(optimization)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise WorkbenchError(f"TensorRT-RTX could not build a {precision} plan of the model")
    return bytes(plan)


def _reason(error: Any) -> str:
    text = " ".join(str(error.desc()).split())
    return text.removeprefix("Assertion failed: ") or str(error.code())
