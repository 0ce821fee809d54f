"""TF-TRT's per-node candidate test and cluster properties (docs/tftrt-behaviour.md#candidates,
#cluster-properties, #nonconversion-report).

Every node, `_SOURCE` and `_SINK` included, is tested in node-id order; the first failing check
is its reason. Candidates get a cluster property (batch size, max batch size, device) that
decides which clusters may merge, and the tf.cond branch they run in: the one property TF-TRT's
documented segmenter lacks (docs/differences.md). Properties are plain tuples so clustering
stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.errors import ConversionParamsError
from workbench.graph.control_flow import Branch, cond_branches
from workbench.graph.nodes import SINK, SOURCE, Graph, Node, TensorSpec

Validator = Callable[[Node], "str | None"]  # None = the validator accepts the node

# Segmenter-level reasons, exact TF-TRT text (docs/tftrt-behaviour.md#candidates).
REASON_DEVICE = "node can't be placed on GPU"
REASON_EXCLUDED = "excluded by segmenter option. Most likely an input or output node."
REASON_IMPLICIT_BATCH = "implicit batch mode requires input shape with at least two dimensions"
REASON_DYNAMIC_DIM = "dynamic non-batch dimensions not allowed"
REASON_DENYLIST = "Denylisted with the env var TF_TRT_OP_DENYLIST"
NOOP_REASON = "Op type NoOp is not supported."

# Ops whose batch size is decided by all inputs (they broadcast) or by one special input.
BROADCASTING_OPS = frozenset({
    "Add", "AddV2", "Mul", "Sub", "Div", "FloorDiv", "RealDiv", "Minimum", "Maximum", "Pow",
    "BiasAdd", "SquaredDifference", "BatchMatMul", "BatchMatMulV2",
})
BATCH_INPUT_INDEX = {"Conv2DBackpropInput": 2, "Conv3DBackpropInputV2": 2}
MAX_BATCH_SIZE_ATTR = "_tftrt_op_max_batch_size"

# (batch_size, max_batch_size); None = unset. Negative batch sizes are dynamic (-1, -2, ...).
BatchSize = tuple["int | None", "int | None"]
NO_BATCH: BatchSize = (None, None)
# Parsed device: (job, replica, task, type, id); None = field unset. "" parses to all None.
Device = tuple["str | None", "int | None", "int | None", "str | None", "int | None"]
ANY_DEVICE: Device = (None, None, None, None, None)


@dataclass(frozen=True)
class SegmenterOptions:
    """What TF-TRT passes to its segmenter besides the threshold
    (docs/tftrt-behaviour.md#segmentation)."""

    use_implicit_batch: bool = True
    # fetch/feed node names (docs/tftrt-behaviour.md#pipeline)
    exclude_nodes: frozenset[str] = frozenset()
    denylist: frozenset[str] = frozenset()  # op types from TF_TRT_OP_DENYLIST
    allow_dynamic_non_batch_dim: bool = True  # False only for TF1 static engines


@dataclass
class Candidates:
    """The outcome of the candidate test, indexed by node id."""

    is_candidate: list[bool]
    reasons: dict[str, str]  # excluded node name -> first failing reason
    batch: list[BatchSize]  # cluster batch property per node id (NO_BATCH when excluded)
    device: list[Device]  # parsed device per node id (ANY_DEVICE when excluded)
    # The tf.cond branch each node runs in (graph/control_flow.py), None for any.
    branch: list[Branch | None] = field(default_factory=list)
    nonconversion: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.is_candidate)


def find_candidates(graph: Graph, options: SegmenterOptions, validate: Validator) -> Candidates:
    """Runs TF-TRT's candidate test on every node (docs/tftrt-behaviour.md#candidates) and records
    the report map."""
    if not options.use_implicit_batch and not options.allow_dynamic_non_batch_dim:
        # TF's SegmentGraph refuses this combination with an internal error.
        raise ConversionParamsError("Explicit batch mode should allow dynamic non-batch dimensions")
    n = len(graph.nodes)
    branches = cond_branches(graph)
    result = Candidates([False] * n, {}, [NO_BATCH] * n, [ANY_DEVICE] * n,
                        [branches.get(node.name) for node in graph.nodes])
    counts: dict[str, dict[str, int]] = {}
    for node in graph.nodes:
        device = parse_device(node.device)
        reason = _first_failure(graph, node, device, options, validate)
        if reason is None:
            result.is_candidate[node.id] = True
            result.batch[node.id] = node_batch_size(graph, node, options.use_implicit_batch)
            result.device[node.id] = device  # type: ignore[assignment]
            continue
        result.reasons[node.name] = reason
        per_op = counts.setdefault(node.op, {})
        per_op[reason] = per_op.get(reason, 0) + 1
    # std::map order in TF: op type, then reason.
    result.nonconversion = {op: dict(sorted(r.items())) for op, r in sorted(counts.items())}
    return result


def _first_failure(
    graph: Graph, node: Node, device: Device | None, options: SegmenterOptions,
    validate: Validator,
) -> str | None:
    if device is None or (device[3] is not None and device[3] != "GPU"):
        return REASON_DEVICE
    if node.name in options.exclude_nodes:
        return REASON_EXCLUDED
    if options.use_implicit_batch and not can_use_implicit_batch(graph, node):
        return REASON_IMPLICIT_BATCH
    if not options.allow_dynamic_non_batch_dim and has_dynamic_non_batch_dim(node):
        return REASON_DYNAMIC_DIM
    reason = validate(node)
    if node.name in (SOURCE, SINK):
        # The real validator rejects NoOp; never let a permissive one make them candidates.
        return reason or NOOP_REASON
    if reason is not None:
        return reason
    if node.op in options.denylist:
        return REASON_DENYLIST
    return None


# --- device names (TF's DeviceNameUtils::ParseFullName) -------------------------------------

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_NUM_OR_ANY = r"(\*|\d+)"
_COMPONENT = re.compile(
    rf"/job:(?P<job>\*|{_NAME})"
    rf"|/replica:(?P<replica>{_NUM_OR_ANY})"
    rf"|/task:(?P<task>{_NUM_OR_ANY})"
    rf"|/device:(?P<dtype>\*|{_NAME})(?::(?P<did>{_NUM_OR_ANY}))?"
    rf"|/(?P<legacy>cpu|CPU|gpu|GPU):(?P<lid>{_NUM_OR_ANY})"
)


def parse_device(text: str) -> Device | None:
    """Parses a TF device string; None when it does not parse. `*` leaves a field unset.

    Only the legacy `/gpu:0` form is upper-cased, as in TF; `/device:gpu:0` keeps its case.
    """
    fields: list = [None] * 5
    pos = 0
    if text == "/":
        return ANY_DEVICE
    while pos < len(text):
        match = _COMPONENT.match(text, pos)
        if match is None:
            return None
        pos = match.end()
        _store_component(match, fields)
    return tuple(fields)  # type: ignore[return-value]


def _store_component(match: re.Match, fields: list) -> None:
    def value(text: str | None, convert=int):
        return None if text in (None, "*") else convert(text)

    if match["job"] is not None:
        fields[0] = value(match["job"], str)
    elif match["replica"] is not None:
        fields[1] = value(match["replica"])
    elif match["task"] is not None:
        fields[2] = value(match["task"])
    elif match["dtype"] is not None:
        fields[3] = value(match["dtype"], str)
        fields[4] = value(match["did"])
    else:
        fields[3] = match["legacy"].upper()
        fields[4] = value(match["lid"])


def merge_devices(a: Device, b: Device) -> Device | None:
    """MergeDevNames without soft placement: every field set on both sides must agree."""
    if a == b or b == ANY_DEVICE:
        return a
    merged = []
    for x, y in zip(a, b, strict=True):
        if x is not None and y is not None and x != y:
            return None
        merged.append(x if x is not None else y)
    return tuple(merged)  # type: ignore[return-value]


def device_string(device: Device) -> str:
    """The canonical text of a parsed device, as TF's ParsedNameToString writes it."""
    job, replica, task, dtype, did = device
    parts = []
    if job is not None:
        parts.append(f"/job:{job}")
    if replica is not None:
        parts.append(f"/replica:{replica}")
    if task is not None:
        parts.append(f"/task:{task}")
    if dtype is not None:
        parts.append(f"/device:{dtype}:{'*' if did is None else did}")
    return "".join(parts)


# --- batch sizes (docs/tftrt-behaviour.md#cluster-properties) -------------------------------------

def batch_deciding_specs(graph: Graph, node: Node) -> list[TensorSpec | None]:
    """The input properties that decide the node's batch size."""
    specs = graph.input_specs(node)
    index = BATCH_INPUT_INDEX.get(node.op)
    if index is not None:
        return specs[index:index + 1]
    if node.op in BROADCASTING_OPS:
        return specs
    return specs[:1]


def leading_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """TF-TRT's FindLeadingShape: the highest-rank shape, preferring a dynamic batch dim.

    None when a dynamic batch dim meets a static one larger than 1 (ambiguous batch).
    """
    result = shapes[0]
    max_batch = 1 if len(result) < 1 else result[0]
    for shape in shapes[1:]:
        if len(shape) < len(result):
            continue
        if len(shape) > len(result):
            result, max_batch = shape, (1 if len(shape) < 1 else shape[0])
            continue
        if len(result) < 1:
            continue
        if shape[0] < 0 or result[0] < 0:
            if shape[0] < 0 and result[0] >= 0:
                result = shape
            else:
                max_batch = max(max_batch, shape[0])
            continue
        if shape[0] > result[0]:
            result, max_batch = shape, shape[0]
    if len(result) > 0 and result[0] < 0 and max_batch > 1:
        return None
    return result


def _known_shapes(graph: Graph, node: Node) -> list[tuple[int, ...]] | None:
    specs = batch_deciding_specs(graph, node)
    if not specs or any(s is None or s.shape is None for s in specs):
        return None  # missing properties count as unknown rank
    return [s.shape for s in specs]  # type: ignore[misc]


def can_use_implicit_batch(graph: Graph, node: Node) -> bool:
    """Check 3: a leading shape of rank >= 2 exists (nodes without data inputs pass)."""
    if not node.inputs:
        return True
    shapes = _known_shapes(graph, node)
    if shapes is None:
        return False
    lead = leading_shape(shapes)
    return lead is not None and len(lead) >= 2


def has_dynamic_non_batch_dim(node: Node) -> bool:
    """Check 4 (TF1 static engines): output 0 has an unknown non-batch dimension.

    We cannot tell an op without outputs from one without shape information, so a node
    with no output properties counts as dynamic (TF's conservative answer).
    """
    if not node.inputs:
        return False
    if not node.output_specs:
        return True
    shape = node.output_specs[0].shape
    if shape is None:
        return True
    return any(d <= -1 for d in shape[1:])


def node_batch_size(graph: Graph, node: Node, use_implicit_batch: bool) -> BatchSize:
    """A candidate's own cluster batch property (docs/tftrt-behaviour.md#cluster-properties),
    quirks included."""
    if not use_implicit_batch or not node.inputs:
        return NO_BATCH
    prop: BatchSize = NO_BATCH
    annotated = node.attr(MAX_BATCH_SIZE_ATTR)
    if annotated is not None:
        # TF's SetMaxBatchSize goes through SetBatchSize: both fields take the value.
        prop = _set_batch(prop, int(annotated))
    shapes = _known_shapes(graph, node)
    if shapes is None:
        return prop
    lead = leading_shape(shapes)
    if lead is None or not lead:
        return prop
    return _set_batch(prop, lead[0])


def _set_batch(prop: BatchSize, value: int | None) -> BatchSize:
    batch = prop[0] if prop[0] is not None else value
    max_batch = prop[1]
    if batch is not None and batch >= 0 and max_batch is None:
        max_batch = batch
    return (batch, max_batch)


def merge_batch(a: BatchSize, b: BatchSize) -> BatchSize | None:
    """ClusterBatchSize::MergeIfCompatible: None when batch or max batch sizes conflict."""
    if a == b or b == NO_BATCH:
        return a
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return None
    if a[1] is not None and b[1] is not None and a[1] != b[1]:
        return None
    merged = _set_batch(a, b[0])
    return (merged[0], merged[1] if merged[1] is not None else b[1])
