"""The TensorRT layer fusions an engine's TF ops allow, and how a real profile fused them.

The patterns are those of TensorRT's best-practices guide §2.5 (Types of Fusions, MLP Fusions).
Each node gets "kinds" (what TensorRT layer it becomes: convolution, scale, element-wise sum,
shuffle, reduce...); a fusion is a chain of kinds along single-consumer edges inside one engine.
Whether TensorRT really fuses also depends on tactics and hardware (an MLP's weights must fit in
shared memory, for example), so these are the fusions the graph *allows*; `match_fusions` puts
them beside the fused layer names of a profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.profiling.layers import NodeLinker

UNLIMITED = 10_000
MLP_MAX_LAYERS = 31  # "The total number of layers is limited to 31."


@dataclass(frozen=True)
class Step:
    """`kind` repeated min..max times; `label` names it in the fusion; `guide` the §2.5 rule."""

    kind: str
    label: str
    min: int = 1
    max: int = 1
    guide: str = ""


@dataclass(frozen=True)
class Rule:
    name: str  # the guide's name of the fusion
    steps: tuple[Step, ...]
    min_nodes: int = 2


_CONV_GUIDE = "Convolution and "
# Tried in order at each node (topological order): longer and more specific patterns first.
RULES: tuple[Rule, ...] = (
    Rule("Convolution fusion", (
        Step("conv", "Convolution"),
        Step("scale", "Scale", 0, UNLIMITED, _CONV_GUIDE + "Scale"),
        Step("sum", "ElementWise Sum", 0, 1, _CONV_GUIDE + "ElementWise Sum"),
        Step("relu", "ReLU", 0, 1, _CONV_GUIDE + "ReLU Activation"),
    )),
    Rule("MLP", (
        Step("matmul", "MatMul"),
        Step("mlp", "", 0, MLP_MAX_LAYERS * 3, "MLP Fusions"),
    )),
    Rule("L2Norm", (Step("square", "Square"), Step("reduce_sum", "Sum"), Step("sqrt", "Sqrt"))),
    Rule("Sum of Square", (Step("square", "Square"), Step("reduce_sum", "Sum"))),
    Rule("L1Norm", (Step("abs", "Abs"), Step("reduce_sum", "Sum"))),
    Rule("LogSumExp", (Step("exp", "Exp"), Step("reduce_sum", "Sum"), Step("log", "Log"))),
    Rule("LogSum", (Step("reduce_sum", "Sum"), Step("log", "Log"))),
    Rule("Scale and Activation", (Step("scale", "Scale"), Step("activation", "Activation"))),
    Rule("Shuffle and Reduce", (Step("transpose", "Shuffle"), Step("reduce_keep", "Reduce"))),
    Rule("Shuffle and Shuffle", (Step("shuffle", "Shuffle"),
                                 Step("shuffle", "Shuffle", 1, UNLIMITED))),
    Rule("Reduce as Pooling", (Step("spatial_mean", "Reduce (average) as Pooling"),), 1),
    Rule("Scale erased", (Step("identity_scale", "Scale that changes nothing"),), 1),
)

_CONV_OPS = {"Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput",
             "Conv3DBackpropInputV2"}
_MATMUL_OPS = {"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"}
_BINARY_SCALE_OPS = {"Mul", "Add", "AddV2", "Sub", "RealDiv", "BiasAdd"}
_BN_OPS = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}
_ACTIVATIONS = {"Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh", "LeakyRelu", "Softplus",
                "Softsign"}
_SHUFFLES = {"Transpose", "Reshape", "Squeeze", "ExpandDims"}
_REDUCES = {"Sum", "Mean", "Max", "Min", "Prod"}
_UNARY_KINDS = {"Abs": "abs", "Square": "square", "Sqrt": "sqrt", "Log": "log", "Exp": "exp"}
_NEUTRAL = {"Mul": 1.0, "RealDiv": 1.0, "Add": 0.0, "AddV2": 0.0, "Sub": 0.0, "BiasAdd": 0.0,
            "Pow": 1.0}
_SPATIAL_AXES = ({1, 2}, {2, 3})  # H and W in NHWC or NCHW


def expected_fusions(graph: Graph, result: ConversionResult) -> pd.DataFrame:
    """One row per fusion the engines' TF ops allow: engine, fusion, rule, guide, tf_nodes, ops."""
    rows = [row for engine in result.engines for row in _engine_fusions(graph, engine)]
    columns = ["engine", "fusion", "rule", "guide", "tf_nodes", "ops"]
    return pd.DataFrame(rows, columns=columns)


def match_fusions(expected: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Each expected fusion beside the profiled layers that hold its TF nodes, per run.

    `status` is "one layer" when all of its nodes the profile names sit in one layer, "split
    over N layers" when TensorRT fused them differently, "not in profile" when the profile names
    none of them. Format-copy layers are left out (their names repeat the layer they feed).
    """
    names = [(n, op) for nodes, ops in zip(expected["tf_nodes"], expected["ops"], strict=True)
             for n, op in zip(nodes, ops, strict=True)]
    linker = NodeLinker(names)
    rows = []
    for run, table in layers.groupby("run", sort=False):
        where = _layers_by_node(table, linker)
        for fusion in expected.itertuples(index=False):
            rows.append({**fusion._asdict(), "run": run, **_match(fusion.tf_nodes, where)})
    return pd.DataFrame(rows, columns=[*expected.columns, "run", "layers", "layer_ms",
                                       "status"])


# --- Expected fusions ----------------------------------------------------------------------

def _engine_fusions(graph: Graph, engine: EngineInfo) -> Iterator[dict]:
    members = set(engine.nodes)
    leaving = {TensorRef.parse(t).node for t in engine.outputs}
    kinds = {name: _kinds(graph, graph[name]) for name in members}
    used: set[str] = set()
    for name in _topological(graph, members):
        if name in used or not kinds[name]:
            continue
        for rule in RULES:
            chain = _match_rule(rule, name, graph, members, leaving, kinds, used)
            if chain:
                used.update(n for n, _ in chain)
                yield _fusion_row(engine.name, rule, chain, graph)
                break


def _match_rule(rule: Rule, start: str, graph: Graph, members: set[str], leaving: set[str],
                kinds: dict[str, set[str]], used: set[str]) -> list[tuple[str, Step]] | None:
    chain: list[tuple[str, Step]] = []
    current: str | None = start
    for step in rule.steps:
        taken = 0
        while current is not None and taken < step.max and step.kind in kinds[current]:
            chain.append((current, step))
            taken += 1
            current = _single_consumer(graph, current, members, leaving, used)
        if taken < step.min:
            return None
    return chain if len(chain) >= rule.min_nodes else None


def _single_consumer(graph: Graph, name: str, members: set[str], leaving: set[str],
                     used: set[str]) -> str | None:
    """The one engine node reading `name`'s output (through Identities), or None.

    A second reader, or the output leaving the engine, keeps the intermediate tensor alive,
    and TensorRT cannot fuse across it.
    """
    if name in leaving:
        return None
    readers = list(_readers(graph, name))
    if len(readers) != 1 or readers[0] not in members or readers[0] in used:
        return None
    return readers[0]


def _readers(graph: Graph, name: str) -> Iterator[str]:
    for consumer, _ in graph.consumers[name]:
        if consumer.op == "Identity":
            yield from _readers(graph, consumer.name)
        else:
            yield consumer.name


def _fusion_row(engine: str, rule: Rule, chain: list[tuple[str, Step]], graph: Graph) -> dict:
    labels: list[str] = []
    for name, step in chain:
        label = step.label or _layer_label(graph, graph[name])
        if not labels or labels[-1] != label:
            labels.append(label)
    fusion = " + ".join(labels)
    if rule.name == "MLP":
        matmuls = sum(graph[n].op in _MATMUL_OPS for n, _ in chain)
        fusion = f"{matmuls}-layer MLP: {fusion}"
    guides = list(dict.fromkeys(s.guide for _, s in chain if s.guide)) or [rule.name]
    return {"engine": engine, "fusion": fusion, "rule": rule.name, "guide": "; ".join(guides),
            "tf_nodes": [n for n, _ in chain], "ops": [graph[n].op for n, _ in chain]}


def _layer_label(graph: Graph, node: Node) -> str:
    """What an MLP member becomes in TensorRT: MatMul, Scale, ReLU or its activation."""
    kinds = _kinds(graph, node)
    for kind, label in (("matmul", "MatMul"), ("scale", "Scale"), ("relu", "ReLU")):
        if kind in kinds:
            return label
    return node.op


def _topological(graph: Graph, members: set[str]) -> list[str]:
    """Engine nodes, producers before consumers (ties in graph order)."""
    order = sorted(members, key=lambda n: graph[n].id)
    pending = {n: {r.node for r in graph[n].inputs} & members for n in order}
    done: list[str] = []
    ready = [n for n in order if not pending[n]]
    while ready:
        name = ready.pop(0)
        done.append(name)
        for consumer, _ in graph.consumers[name]:
            waiting = pending.get(consumer.name)
            if waiting is not None and name in waiting:
                waiting.discard(name)
                if not waiting:
                    ready.append(consumer.name)
    return done + [n for n in order if n not in done]  # cycles cannot happen; be safe anyway


# --- Kinds: what TensorRT layer a TF node becomes ------------------------------------------

def _kinds(graph: Graph, node: Node) -> set[str]:
    op = node.op
    kinds: set[str] = set()
    if op in _CONV_OPS:
        kinds.add("conv")
    elif op in _MATMUL_OPS and _is_2d_matmul(graph, node):
        kinds |= {"matmul", "mlp"}
    elif op in _BINARY_SCALE_OPS:
        kinds |= _binary_kinds(graph, node)
    elif op in _BN_OPS:
        kinds |= {"scale", "mlp"}
    elif op == "Relu":
        kinds |= {"relu", "activation", "mlp"}
    elif op in _ACTIVATIONS:
        kinds |= {"activation", "mlp"}
    elif op in _SHUFFLES:
        kinds |= {"shuffle", "transpose"} if op == "Transpose" else {"shuffle"}
    elif op in _REDUCES:
        kinds |= _reduce_kinds(graph, node)
    elif op in _UNARY_KINDS:
        kinds.add(_UNARY_KINDS[op])
    if op in _NEUTRAL and _const_equals(graph, node, _NEUTRAL[op]):
        kinds.add("identity_scale")
    return kinds


def _binary_kinds(graph: Graph, node: Node) -> set[str]:
    if len(node.inputs) != 2:
        return set()
    a, b = (graph.resolve_identity(r) for r in node.inputs)
    if node.op == "Mul" and a == b:
        return {"square"}
    if _is_const(graph, a) or _is_const(graph, b):
        return {"scale", "mlp"}
    if node.op in ("Add", "AddV2") and _same_shape(graph, node):
        return {"sum"}
    return set()


def _reduce_kinds(graph: Graph, node: Node) -> set[str]:
    kinds = {"reduce"}
    if node.op == "Sum":
        kinds.add("reduce_sum")
    if node.attr("keep_dims", False):
        kinds.add("reduce_keep")
    axes = _const_input(graph, node, 1)
    if node.op == "Mean" and axes is not None and _spatial(axes, graph, node):
        kinds.add("spatial_mean")
    return kinds


def _spatial(axes: np.ndarray, graph: Graph, node: Node) -> bool:
    spec = graph.output_spec(node.inputs[0])
    rank = spec.rank if spec is not None and spec.rank is not None else 4
    normalised = {int(a) % rank for a in np.atleast_1d(axes)}
    return rank == 4 and normalised in _SPATIAL_AXES


def _is_2d_matmul(graph: Graph, node: Node) -> bool:
    if node.op == "MatMul":
        return True
    specs = graph.input_specs(node)
    return all(s is not None and s.rank == 2 for s in specs)


def _same_shape(graph: Graph, node: Node) -> bool:
    # "The sum must not use broadcasting, unless the broadcasting is across the batch size."
    specs = graph.input_specs(node)
    if any(s is None or s.shape is None for s in specs):
        return True  # unknown: allow, as TensorRT would see the real shapes
    a, b = (s.shape for s in specs)
    return len(a) == len(b) and a[1:] == b[1:]


def _is_const(graph: Graph, ref: TensorRef) -> bool:
    return graph[ref.node].op == "Const"


def _const_input(graph: Graph, node: Node, index: int) -> np.ndarray | None:
    if len(node.inputs) <= index:
        return None
    ref = graph.resolve_identity(node.inputs[index])
    return graph.const_value(ref.node) if _is_const(graph, ref) else None


def _const_equals(graph: Graph, node: Node, neutral: float) -> bool:
    value = _const_input(graph, node, 1)
    return value is not None and value.size > 0 and bool(np.all(value == neutral))


# --- Matching a profile --------------------------------------------------------------------

def _layers_by_node(table: pd.DataFrame, linker: NodeLinker) -> dict[str, list[tuple[str, float]]]:
    where: dict[str, list[tuple[str, float]]] = {}
    for row in table.itertuples(index=False):
        if row.layer.startswith("Reformatting CopyNode"):
            continue
        for node in _nodes_of(row, linker):
            where.setdefault(node, []).append((row.layer, float(row.avg_ms)))
    return where


def _nodes_of(row: object, linker: NodeLinker) -> Iterable[str]:
    linked = linker.tf_nodes(row.layer)  # type: ignore[attr-defined]
    return dict.fromkeys([*linked, *(row.tf_nodes or [])])  # type: ignore[attr-defined]


def _match(nodes: list[str], where: dict[str, list[tuple[str, float]]]) -> dict:
    hits = dict.fromkeys(hit for n in nodes for hit in where.get(n, []))
    names = [name for name, _ in hits]
    if not names:
        status = "not in profile"
    elif len(names) == 1:
        status = "one layer"
    else:
        status = f"split over {len(names)} layers"
    return {"layers": names, "layer_ms": sum(ms for _, ms in hits), "status": status}
