"""What TensorRT-RTX's ONNX parser takes of a whole model, and the plan it builds from it.

The export and side-by-side views' calls into `tensorrt_rtx`: the package through the TensorRT
family's adapter (`tensorrt_api.TENSORRT_RTX`), plans through its `build_plan`.
`capability()` reports what Polygraphy's `inspect capability` reports (without
`--with-partitioning`): the subgraphs of `OnnxParser.supports_model_v2`, each supported or not,
and the parser's error per rejected node. The builder runs without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx

from workbench.engines.backends import tensorrt_backend
from workbench.engines.backends.base import BackendUnavailableError
from workbench.engines.backends.tensorrt_api import TENSORRT_RTX
from workbench.engines.profiles import Profile
from workbench.engines.settings import BuildRequest
from workbench.errors import WorkbenchError


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
    """Whether `tensorrt_rtx` imports here, and its version or how to install it."""
    version = TENSORRT_RTX.version()
    return (True, version) if version is not None else \
        (False, f"TensorRT-RTX is not installed: {TENSORRT_RTX.install}")


def _trt() -> Any:
    try:
        return TENSORRT_RTX.module()
    except BackendUnavailableError as exc:
        raise WorkbenchError(str(exc)) from None


def _network(trt: Any, logger: Any) -> tuple[Any, Any, Any]:
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    return builder, network, trt.OnnxParser(network, logger)


def capability(onnx_bytes: bytes, model_path: str | None = None) -> Capability:
    """The parser's verdict on a serialized ONNX model; `model_path`: the file it was read
    from, where its weights are external (the data file beside it)."""
    trt = _trt()
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    _builder, _network_, parser = _network(trt, logger)
    parser.supports_model_v2(onnx_bytes, model_path)
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
    `profiles` entry (shapes in `input_names` order), built by the TensorRT backend family's
    `build_plan`. TensorRT-RTX is strongly typed: the plan computes in the model's own types,
    so `precision` only names it. Raises TensorRTParseError with the parser's errors when the
    model does not parse, WorkbenchError with the builder's when it does not build."""
    _trt()  # absent: one line saying how to install it
    model = onnx.load_from_string(onnx_bytes)
    order = _network_order(model, input_names) if profiles else []
    request = BuildRequest(profiles=tuple(
        Profile(*(tuple(shapes[i] for i in order) for shapes in (p.min, p.opt, p.max)))
        for p in profiles))
    build = tensorrt_backend.build_plan(TENSORRT_RTX, model, "FP32", request)
    if not build.parsed:
        raise TensorRTParseError(f"TensorRT cannot parse the ONNX model: {build.error}")
    if build.plan is None:
        raise WorkbenchError(f"TensorRT-RTX could not build a {precision} plan of the model: "
                             f"{build.error}")
    return build.plan


def _network_order(model: onnx.ModelProto, input_names: Sequence[str]) -> list[int]:
    """For each input of the parsed network (the graph's inputs that are not initializers),
    its index in `input_names`."""
    weights = {init.name for init in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    return [list(input_names).index(name) for name in names]


def _reason(error: Any) -> str:
    text = " ".join(str(error.desc()).split())
    return text.removeprefix("Assertion failed: ") or str(error.code())
