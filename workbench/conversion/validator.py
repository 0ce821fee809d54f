"""TF-TRT 2.17's `TrtNodeValidator::IsTensorRTCandidate` (spec §2.3), TensorRT 8.6 assumed.

Three steps, first failure wins: is there a converter for the op (quantization ops only in
INT8; `TF_TRT_OP_FAKELIST` ops always pass), can every data input become a tensor-or-weights,
and does the op's converter accept the node in validation-only mode. The segmenter's own checks
(device, exclude list, implicit-batch translatability, denylist; spec §2.2) are not done here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from workbench.conversion.operands import Ctx, Reject, convert_input
from workbench.conversion.ops import QUANTIZATION_OPS, REGISTRY
from workbench.graph.nodes import Graph, Node

INPUT_FAILURE = "Failed to convert at least one input to a TRT_TensorOrWeights: "


@dataclass(frozen=True)
class ValidatorSettings:
    precision_mode: str = "FP32"  # "FP32" | "FP16" | "INT8"
    use_implicit_batch: bool = True
    use_calibration: bool = True
    use_explicit_precision: bool = False  # QDQ mode (spec §1 step 6)
    fake_ops: frozenset[str] = frozenset()  # TF_TRT_OP_FAKELIST
    experimental_features: frozenset[str] = frozenset()  # e.g. "reject_all_fp_cast_ops"


@lru_cache(maxsize=64)  # settings are frozen and hashable; the segmenter asks once per node
def supported_op_types(settings: ValidatorSettings) -> frozenset[str]:
    """Op types with a converter (the registry, spec §3), for these settings."""
    ops = set(REGISTRY) | set(settings.fake_ops)
    if settings.precision_mode != "INT8":
        ops -= QUANTIZATION_OPS
    return frozenset(ops)


def validate_node(graph: Graph, node: Node, settings: ValidatorSettings) -> str | None:
    """None when TF-TRT's validator accepts the node; otherwise TF-TRT's exact reason text."""
    if node.op not in supported_op_types(settings):
        return f"Op type {node.op} is not supported."
    try:
        inputs = [convert_input(graph, ref, settings) for ref in node.inputs]
    except Reject as error:
        return INPUT_FAILURE + str(error)
    if node.op in settings.fake_ops:
        return None  # the registry hands out the FakeOp converter, which always validates
    try:
        REGISTRY[node.op](Ctx(graph, node, inputs, settings))
    except Reject as error:
        return str(error)
    except (IndexError, TypeError, ValueError) as error:
        # TF-TRT would hit an internal assertion on such malformed nodes.
        return f"Internal error validating {node.op}: {error}"
    return None
