"""TF-TRT 2.17's `TrtNodeValidator::IsTensorRTCandidate` (docs/tftrt-behaviour.md#validator),
TensorRT 8.6 assumed.

Three steps, first failure wins: is there a converter for the op (quantization ops only in
INT8; `TF_TRT_OP_FAKELIST` ops always pass), can every data input become a tensor-or-weights,
and does the op's converter accept the node in validation-only mode. The segmenter's own checks
(device, exclude list, implicit-batch translatability, denylist;
docs/tftrt-behaviour.md#candidates) are not done here.
"""

from __future__ import annotations

from functools import lru_cache

from workbench.conversion.operands import (
    MAX_DIMS,
    RESOURCE,
    TENSOR,
    TRT_DTYPES,
    Ctx,
    Operand,
    Reject,
    ValidatorSettings,
    const_weights,
    fail,
    shape_debug_string,
)
from workbench.conversion.ops import QUANTIZATION_OPS, REGISTRY
from workbench.conversion.ops.misc import read_variable_weights
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.graph.variables import VARIABLE_OP_ATTR

__all__ = ["INPUT_FAILURE", "ValidatorSettings", "convert_input", "supported_op_types",
           "validate_node"]

INPUT_FAILURE = "Failed to convert at least one input to a TRT_TensorOrWeights: "


@lru_cache(maxsize=64)  # settings are frozen and hashable; the segmenter asks once per node
def supported_op_types(settings: ValidatorSettings) -> frozenset[str]:
    """Op types with a converter (the registry, docs/tftrt-behaviour.md#op-rules), for these
    settings."""
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
    # A Const that was a variable (disable_graph_freezing, graph/variables.py) is checked as
    # TF-TRT's variable converters checked it: float or half only.
    op = "VariableV2" if node.attr(VARIABLE_OP_ATTR) else node.op
    try:
        REGISTRY[op](Ctx(graph, node, inputs, settings))
    except Reject as error:
        return str(error)
    except (IndexError, TypeError, ValueError) as error:
        # TF-TRT would hit an internal assertion on such malformed nodes.
        return f"Internal error validating {node.op}: {error}"
    return None


# ---------------------------------------------------------------- input conversion
# (docs/tftrt-behaviour.md#validator)

def convert_input(graph: Graph, ref: TensorRef, settings: ValidatorSettings) -> Operand:
    """The tensor-or-weights descriptor for one data input, or Reject with the inner message."""
    # TF-TRT walks up Identity chains but keeps the *original edge's* port (an Identity has one
    # output, so this is port 0 in practice).
    source = graph.by_name[graph.resolve_identity(ref).node]
    op = source.op
    if op in ("VarHandleOp", "Placeholder") and source.attr("dtype") == "resource":
        return Operand(RESOURCE, "resource")
    if op in ("Const", "VariableV2"):
        if ref.port != 0:
            fail(f"{op} node should only have one output.")
        return const_weights(source)
    if op == "ReadVariableOp":
        return read_variable_weights(source, settings)
    spec = graph.output_spec(TensorRef(source.name, ref.port))
    if spec is None:
        fail("Shape and data type are unknown")
    return _tensor_of(op, spec.dtype, spec.shape, settings.use_implicit_batch)


def _tensor_of(producer_op: str, dtype: str, shape: tuple[int, ...] | None,
               ib: bool) -> Operand:
    """ValidateTensorProperties in validation-only mode."""
    if dtype not in TRT_DTYPES:
        fail(f"Unsupported tensorflow data type {dtype}")
    if shape is None:
        fail("Input tensor rank is unknown.")
    max_rank = MAX_DIMS + (1 if ib else 0)
    if len(shape) > max_rank:
        fail(f"Input tensor rank is greater than {max_rank}")
    if ib and producer_op != "Const" and len(shape) < 1:
        fail("Scalar input tensor is not supported since the first dimension is treated as "
             "batch dimension by TRT")
    first = 1 if ib else 0
    if any(d == 0 for d in shape[first:]):
        fail(f"Input tensor with shape {shape_debug_string(shape)} is an empty tensor, which "
             "is not supported by TRT")
    # Grappler's symbolic unknowns (-2, -3, ...) reach the converters as plain -1 (TRT dims
    # have a single "unknown" value), so converter checks compare against -1.
    shape = tuple(-1 if d < 0 else d for d in shape)
    return Operand(TENSOR, dtype, shape, shape[first:])
