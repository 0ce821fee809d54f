"""The top-level graph TF-TRT leaves after conversion: engines plus the nodes it kept.

Each engine replaces its segment by one TRTEngineOp; outside Consts whose every consumer went
into engines are copied into them and pruned (the segmenter's rule, shared with it). This is
what TensorBoard showed after conversion and what `TF_TRT_EXPORT_GRAPH_VIZ_PATH` drew.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.conversion.candidates import REASON_EXCLUDED
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.conversion.segmenter import const_consumer_segments
from workbench.graph.nodes import Graph, Node, TensorRef, numpy_dtype_name

ENGINE_OP = "TRTEngineOp"
# TF-TRT's export read the compute dtype from the first of these attributes a node has.
DTYPE_ATTRS = ("DstT", "dtype", "T")
PRECISION_DTYPES = {"FP32": "float32", "FP16": "float16", "INT8": "int8"}


@dataclass(frozen=True)
class ConvertedNode:
    """One node of the converted graph; `inputs` name its producers, one per input edge
    (data inputs first, then control inputs), as the export draws them."""

    name: str
    op: str
    inputs: tuple[str, ...]
    dtype: str | None
    device: str = ""
    node_count: int = 1  # an engine's `# Nodes` (its native segment), else 1


@dataclass
class ConvertedGraph:
    """Top-level nodes (kept nodes in node-id order, then engines) and who owns what."""

    nodes: list[ConvertedNode]
    # prepared-graph node name -> the converted node holding it (itself, or its engine);
    # pruned Consts map to nothing.
    owner: dict[str, str] = field(default_factory=dict)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Distinct (producer, consumer) pairs, in node then input order."""
        seen: dict[tuple[str, str], None] = {}
        for node in self.nodes:
            for src in node.inputs:
                seen[(src, node.name)] = None
        return list(seen)

    @property
    def engines(self) -> list[ConvertedNode]:
        return [n for n in self.nodes if n.op == ENGINE_OP]


def converted_top_level(graph: Graph, result: ConversionResult) -> ConvertedGraph:
    """The graph after conversion: one TRTEngineOp per engine plus every node left outside."""
    engine_of: dict[str, str] = {}
    segment_of = [-1] * len(graph.nodes)
    for index, engine in enumerate(result.engines):
        for name in engine.nodes:
            engine_of[name] = engine.name
            segment_of[graph.by_name[name].id] = index
    dead = _dead_consts(graph, result, segment_of)
    owner = {n.name: engine_of.get(n.name, n.name) for n in graph.real_nodes
             if n.name not in dead}
    nodes = [_kept_node(graph, node, owner) for node in graph.real_nodes
             if node.name not in engine_of and node.name not in dead]
    precision = PRECISION_DTYPES.get(str(result.params.precision_mode).upper())
    nodes += [_engine_node(graph, engine, owner, precision) for engine in result.engines]
    return ConvertedGraph(nodes, owner)


def compute_dtype(node: Node) -> str | None:
    """The dtype TF-TRT's export coloured a node by: DstT (Cast), dtype (Placeholder, Const),
    else T; None when the node has none of them as a single type."""
    for key in DTYPE_ATTRS:
        value = node.attr(key)
        if isinstance(value, str) and value != "invalid":
            return numpy_dtype_name(value)
    return None


def _dead_consts(graph: Graph, result: ConversionResult, segment_of: list[int]) -> set[str]:
    """Outside Consts pruned because engines took every consumer (feeds/fetches never are)."""
    dead = {
        node.name for node in graph.real_nodes
        if segment_of[node.id] == -1
        and const_consumer_segments(graph, node, segment_of, ()) is not None
    }
    if dead:  # rare: the unconverted list is lazy, so consult it only when it matters
        excluded = {u.name for u in result.unconverted if u.reason == REASON_EXCLUDED}
        dead -= excluded
    return dead


def _kept_node(graph: Graph, node: Node, owner: dict[str, str]) -> ConvertedNode:
    # A control edge from a Const inside an engine is dropped (TF-TRT's GetEngineInfo keeps an
    # engine's control outputs only from non-Const segment nodes).
    controls = [name for name in node.control_inputs
                if owner.get(name, name) == name or graph.by_name[name].op != "Const"]
    sources = [ref.node for ref in node.inputs] + controls
    return ConvertedNode(
        node.name, node.op, tuple(owner[s] for s in sources if s in owner),
        compute_dtype(node), node.device,
    )


def _engine_node(
    graph: Graph, engine: EngineInfo, owner: dict[str, str], dtype: str | None
) -> ConvertedNode:
    members = set(engine.nodes)
    sources = [owner[TensorRef.parse(ref).node] for ref in engine.inputs]
    # Control edges from outside the segment move to the engine node, except those from a Const:
    # TF-TRT's GetEngineInfo drops them (ShallKeepControlEdgeFrom), as it copies an outside
    # Const's data into the engine instead of making it an input. A Const removed at the
    # boundary can depend on a node that depends on the engine, so keeping the edge would make
    # a cycle TF-TRT never builds.
    controls = {
        owner[name]: None
        for member in engine.nodes for name in graph.by_name[member].control_inputs
        if name not in members and name in owner and graph.by_name[name].op != "Const"
    }
    return ConvertedNode(
        engine.name, ENGINE_OP, (*sources, *controls), dtype, engine.device,
        engine.native_node_count,
    )


def tftrt_dot(converted: ConvertedGraph) -> str:
    """The `.dot` text TF-TRT's utils.draw_graphdef_as_graphviz wrote for a converted graph:
    boxes filled by compute dtype (colour scheme `set312`, first seen first), engines labelled
    `<name> [<node count>]`, a dtype legend cluster, invisible legend-to-root edges."""
    colors: dict[str, int] = {}  # str(dtype) -> colour index, first seen first
    lines = ["digraph tftrt_converted_graph {",
             '  graph [fontsize=10 fontname="Verdana"];',
             "  node [style=filled height=0.55 colorscheme=set312 shape=box];",
             "", "  subgraph tensorflow_graph {", "    node [width=1.35];"]
    roots = []
    for node in converted.nodes:
        color = colors.setdefault(str(node.dtype), len(colors) + 1)
        device = node.device.split("/")[-1] or "device:Unspecified"
        title = f"{node.name} [{node.node_count}]" if node.op == ENGINE_OP else node.op
        lines.append(f'    "{node.name}" [label=<<b>{title}</b>  <br/><i>{device}</i>> '
                     f"fillcolor={color}];")
        lines += [f'  "{src}" -> "{node.name}";' for src in node.inputs]
        if not node.inputs:
            roots.append(node.name)
    lines += ["  }", "", "  subgraph cluster_legend {", '    label="Compute Dtype Legend";',
              '    margin="30";', "    node [width=2];"]
    lines += [f"    {dtype} [fillcolor={i} label=<<b>{dtype}</b>>];" for dtype, i in colors.items()]
    lines += ["  }", "", '  edge[style="invisible", dir="none"];']
    lines += [f'  "{dtype}" -> "{root}"' for dtype in colors for root in roots]
    lines.append("}")
    return "\n".join(lines) + "\n"
