"""Graphviz drawings of a conversion: the prepared graph by engine, the converted graph, one
engine opened up, and TF-TRT's own `TF_TRT_EXPORT_GRAPH_VIZ_PATH` export.

Readability rules for big graphs (ResNet-50: hundreds of nodes, BERT: thousands):
weight Consts fold into their consumer, Identity chains inside one engine (or between two
unconverted nodes) collapse, and above a node budget the full view collapses engines, biggest
first, into one node each. Layout is `dot` top to bottom with cheap crossing minimisation.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from html import escape

import graphviz

from workbench.conversion.converted import ENGINE_OP, converted_top_level
from workbench.conversion.result import ConversionResult, EngineInfo, UnconvertedNode
from workbench.errors import WorkbenchError
from workbench.graph.control_flow import (
    ROOT_FRAME,
    Frames,
    has_loops,
    is_back_edge,
    loop_frames,
)
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.viz.style import (
    ENGINE_BORDER,
    category_color,
    engine_color,
    error_color,
    reason_category,
)
from workbench.words import counted

# Drawn nodes above which views collapse engines, then unconverted regions: dot lays out 400
# nodes in about a second, 2,000 take over a minute.
NODE_BUDGET = 400
COLLAPSIBLE_OPS = frozenset({"Identity", "Snapshot", "StopGradient"})
LEGEND = "legend"
LEGEND_ONE_COLUMN_ROWS = 6  # a key this short stays one column: narrow diagrams stay narrow
WRAPPER_SCOPE = re.compile(r"^(Stateful)?PartitionedCall(_\d+)?$")

GRAPH_ATTR = {
    "rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "nodesep": "0.15",
    "ranksep": "0.3", "newrank": "true",
    # Bounded crossing minimisation and network simplex: most of dot's time on big graphs.
    "mclimit": "0.5", "nslimit": "2", "nslimit1": "2", "remincross": "false",
}
NODE_ATTR = {
    "shape": "box", "style": "rounded,filled", "fontname": "Helvetica", "fontsize": "9",
    "height": "0.25", "margin": "0.06,0.02", "penwidth": "0.6",
}
# Unconverted nodes: square corners and a dark red border, whatever their category colour.
UNCONVERTED = {"style": "filled", "color": "#9c2f2f", "penwidth": "1"}
EDGE_ATTR = {"arrowsize": "0.45", "color": "#8a8a8a", "penwidth": "0.7"}


# --- public views --------------------------------------------------------------------------

def full_graph(graph: Graph, result: ConversionResult) -> graphviz.Digraph:
    """View (a): the prepared graph, nodes coloured by engine, unconverted nodes by reason."""
    plan = _plan(graph, result)
    dot = _digraph("full_graph", "Prepared graph by engine")
    frames = _Frames(dot, graph)
    drawn_reasons: dict[str, int] = {}
    for index, engine in enumerate(result.engines):
        members = plan.members[engine.name]
        target = frames.target(engine.nodes)
        if engine.name in plan.collapsed:
            _engine_box(target, engine, index, note="collapsed")
            continue
        with target.subgraph(name=f"cluster_{engine.name}") as cluster:
            cluster.attr(label=f"{engine.name}  [{counted(engine.native_node_count, 'node')}]",
                         style="rounded,filled", fillcolor=_tint(engine_color(index)),
                         color=ENGINE_BORDER, fontsize="10", tooltip=_engine_tooltip(engine))
            for node in members:
                _op_node(cluster, node, engine_color(index),
                         f"{node.name}\nin {engine.name}{plan.folded_note(node)}")
    outside = [_Outside(node.name, node.op, _reason(plan.unconverted, node.name),
                        plan.folded_note(node)) for node in plan.outside]
    excess = plan.drawn - NODE_BUDGET
    edges = _draw_outside(frames, outside, plan.edges, excess, drawn_reasons)
    frames.close()
    _edges(dot, edges, frames.back_edges)
    caption = plan.caption + (", big unconverted regions collapsed" if excess > 0 else "")
    _legend(dot, result.engines, drawn_reasons, caption + ")")
    return dot


# The outline of a node in the side-by-side view: TensorRT's verdict on the ONNX it became.
TENSORRT_OUTLINES = {"taken": "#1a7f37", "rejected": "#d1242f",
                     "in an unsupported subgraph": "#bf8700", "no ONNX node": "#6e7781"}


def side_by_side_graph(graph: Graph, result: ConversionResult,
                       tensorrt: dict[str, str]) -> graphviz.Digraph:
    """View (a) with a second colouring: fill by TF-TRT engine, thick outline by TensorRT's
    verdict on the node through ONNX (`tensorrt`: node -> a TENSORRT_OUTLINES key)."""
    dot = full_graph(graph, result)
    drawn = {line.strip().split(" [", 1)[0] for line in dot.body if " [" in line}
    counts: dict[str, int] = {}
    for name, verdict in tensorrt.items():
        color = TENSORRT_OUTLINES.get(verdict)
        if color and graphviz.quoting.quote(name) in drawn:
            # A later statement of a drawn node only updates its attributes (cluster kept).
            dot.node(name, color=color, penwidth="2.5")
            counts[verdict] = counts.get(verdict, 0) + 1
    rows = "".join(f'<tr><td bgcolor="{TENSORRT_OUTLINES[v]}" width="14"></td>'
                   f'<td align="left">outline: TensorRT {escape(v)} ({n})</td></tr>'
                   for v, n in counts.items())
    dot.node(f"{LEGEND}_tensorrt", '<<table border="0" cellborder="1" cellspacing="0" '
             f'cellpadding="3">{rows}</table>>', shape="plaintext", style="",
             tooltip="TensorRT via ONNX")
    return dot


def converted_graph(graph: Graph, result: ConversionResult,
                    errors: Mapping[str, float] | None = None) -> graphviz.Digraph:
    """View (b): the graph as TF-TRT leaves it, each engine one node with its node count
    (with `errors`, engine -> max abs error: coloured by error, green to red)."""
    converted = converted_top_level(graph, result)
    reasons = _reasons(result)
    infos = {engine.name: engine for engine in result.engines}
    dot = _digraph("converted_graph", "Converted graph (TF-TRT's top level)")
    frames = _Frames(dot, graph)
    drawn_reasons: dict[str, int] = {}
    consumers = {src for n in converted.nodes for src in n.inputs}
    folded = {n.name for n in converted.nodes if n.op == "Const" and n.name in consumers}
    outside = []
    for node in converted.nodes:
        if node.op == ENGINE_OP:
            info = infos[node.name]
            _engine_box(frames.target(info.nodes), info, list(infos).index(node.name),
                        error=(errors or {}).get(node.name))
        elif node.name not in folded:
            outside.append(_Outside(node.name, node.op, _reason(reasons, node.name)))
    edges = [(s, d, False) for s, d in converted.edges if folded.isdisjoint((s, d))]
    excess = len(outside) + len(infos) - NODE_BUDGET
    edges = _draw_outside(frames, outside, edges, excess, drawn_reasons)
    frames.close()
    _edges(dot, edges, frames.back_edges)
    notes = [f"{len(folded)} weight Consts not drawn"] if folded else []
    notes += ["big unconverted regions collapsed"] if excess > 0 else []
    _legend(dot, result.engines, drawn_reasons,
            f"{counted(len(converted.nodes), 'top-level node')}, "
            f"{counted(len(result.engines), 'engine')}"
            + (f" ({', '.join(notes)})" if notes else ""))
    return dot


def engine_graph(graph: Graph, result: ConversionResult, engine: str) -> graphviz.Digraph:
    """View (c): one engine opened up, every node of its segment, with its inputs and outputs."""
    names = [e.name for e in result.engines]
    if engine not in names:
        raise WorkbenchError(f"no engine named {engine!r}; this conversion has {names or 'none'}")
    index = names.index(engine)
    info = result.engines[index]
    members = set(info.nodes)
    dot = _digraph(f"engine_{engine}", f"{engine}: {counted(len(members), 'segment node')}")
    with dot.subgraph(name=f"cluster_{engine}") as cluster:
        cluster.attr(label=f"{engine}  [{counted(info.native_node_count, 'node')}]",
                     style="rounded,filled", fillcolor=_tint(engine_color(index)),
                     color=ENGINE_BORDER, tooltip=_engine_tooltip(info))
        for name in info.nodes:
            node = graph.by_name[name]
            _op_node(cluster, node, engine_color(index), f"{name}\nin {engine}",
                     small=node.op == "Const")
    edges = [(s.node, name, False) for name in info.nodes
             for s in graph.by_name[name].inputs if s.node in members]
    for port, ref in enumerate(info.inputs):
        io = f"engine_input_{port}"
        dot.node(io, f"input {port}\n{_last(TensorRef.parse(ref).node)}", shape="invhouse",
                 fillcolor="#ffffff", tooltip=f"engine input {port}: {ref}")
        edges += [(io, c.name, False) for c, i in _consumers_of(graph, ref) if c.name in members]
    for port, ref in enumerate(info.outputs):
        io = f"engine_output_{port}"
        dot.node(io, f"output {port}", shape="house", fillcolor="#ffffff",
                 tooltip=f"engine output {port}: {ref}")
        edges.append((TensorRef.parse(ref).node, io, False))
    _edges(dot, edges)
    return dot


VIEWS = ("converted", "full", "engine")  # what `draw` can draw
# dot's SVG starts with an XML declaration and a DOCTYPE, which are invalid inside HTML.
_SVG_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)


def draw(graph: Graph, result: ConversionResult, view: str, engine: str = "",
         errors: Mapping[str, float] | None = None) -> graphviz.Digraph:
    """One of the VIEWS: the converted graph (engines coloured by `errors` when given), the
    full graph by engine, or `engine` opened up."""
    if view == "engine":
        return engine_graph(graph, result, engine)
    return full_graph(graph, result) if view == "full" else converted_graph(graph, result,
                                                                            errors)


def inline_svg(digraph: graphviz.Digraph) -> str:
    """The drawing as SVG to put inside an HTML page (no XML prologue)."""
    return _SVG_PROLOGUE.sub("", to_svg(digraph), count=1)


def to_svg(digraph: graphviz.Digraph, timeout_s: float = 60) -> str:
    """Renders with Graphviz's `dot`; a missing `dot` or a timeout is a one-line WorkbenchError."""
    return render(digraph, "svg", timeout_s).decode()


def render(digraph: graphviz.Digraph, fmt: str, timeout_s: float = 60) -> bytes:
    """The drawing in one of `dot`'s output formats (svg, png, ...), laid out by `dot`."""
    exe = dot_executable()
    try:
        run = subprocess.run([exe, f"-T{fmt}"], input=digraph.source.encode(),
                             capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise WorkbenchError(f"`dot` took more than {timeout_s:g} s to lay out the graph: draw a "
                             "smaller view (converted or one engine) or raise timeout_s") from exc
    if run.returncode != 0:
        message = run.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
        raise WorkbenchError(f"`dot` failed (exit {run.returncode}): {message[0]}")
    return run.stdout


def dot_executable() -> str:
    """The path of Graphviz's `dot`, or a WorkbenchError saying how to install it."""
    exe = shutil.which("dot")
    if exe is None:
        raise WorkbenchError("Graphviz's `dot` is not on PATH: install Graphviz "
                             "(apt-get install graphviz) and restart the kernel")
    return exe


def dot_version() -> str:
    """`dot -V`'s version ("2.43.0"); a WorkbenchError when `dot` is missing or broken."""
    try:
        run = subprocess.run([dot_executable(), "-V"], capture_output=True, timeout=10,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkbenchError(f"`dot -V` failed: {exc}") from exc
    words = run.stderr.decode(errors="replace").split()  # dot - graphviz version 2.43.0 (0)
    if run.returncode != 0 or "version" not in words[:-1]:
        raise WorkbenchError(f"`dot -V` failed (exit {run.returncode}): {' '.join(words)}")
    return words[words.index("version") + 1]


# --- unconverted nodes, one by one or as regions ---------------------------------------------

@dataclass(frozen=True)
class _Outside:
    """An unconverted node to draw: name, op, full reason, extra tooltip text."""

    name: str
    op: str
    reason: str
    note: str = ""

    @property
    def category(self) -> str:
        return reason_category(self.reason)


def _draw_outside(
    frames: _Frames, outside: list[_Outside], edges: list[tuple[str, str, bool]],
    excess: int, counts: dict[str, int],
) -> list[tuple[str, str, bool]]:
    """Draws unconverted nodes (counting categories into `counts`), each in its loop frame;
    when the drawing is `excess` nodes over budget, connected regions of them become one node
    each, largest first. Returns the edges rewired to the drawn nodes."""
    regions = _regions([o.name for o in outside], edges, excess)
    grouped: dict[str, list[_Outside]] = {}
    for item in outside:
        counts[item.category] = counts.get(item.category, 0) + 1
        if item.name in regions:
            grouped.setdefault(regions[item.name], []).append(item)
        else:
            frames.target([item.name]).node(
                item.name, _short_label(item.op, item.name),
                fillcolor=category_color(item.category), **UNCONVERTED,
                tooltip=f"{item.op}: {item.name}\nnot converted: {item.reason}{item.note}")
    for region, items in grouped.items():
        _region_node(frames.target([item.name for item in items]), region, items)
    rewired: dict[tuple[str, str], bool] = {}
    for src, dst, control in edges:
        src, dst = regions.get(src, src), regions.get(dst, dst)
        if src != dst:
            rewired[(src, dst)] = rewired.get((src, dst), True) and control
    return [(s, d, control) for (s, d), control in rewired.items()]


def _regions(names: list[str], edges: list[tuple[str, str, bool]], excess: int) -> dict[str, str]:
    """node -> region id for the largest connected regions of `names` that cut `excess`."""
    if excess <= 0:
        return {}
    parent = {name: name for name in names}

    def find(v: str) -> str:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for src, dst, _ in edges:
        if src in parent and dst in parent:
            parent[find(src)] = find(dst)
    components: dict[str, list[str]] = {}
    for name in names:
        components.setdefault(find(name), []).append(name)
    regions: dict[str, str] = {}
    for index, members in enumerate(sorted(components.values(), key=len, reverse=True)):
        if excess <= 0 or len(members) < 2:
            break
        regions.update(dict.fromkeys(members, f"unconverted_region_{index}"))
        excess -= len(members) - 1
    return regions


def _region_node(dot: graphviz.Digraph, region: str, items: list[_Outside]) -> None:
    by_category: dict[str, int] = {}
    for item in items:
        by_category[item.category] = by_category.get(item.category, 0) + 1
    main = max(by_category, key=by_category.__getitem__)
    lines = [f"{n} {c}" for c, n in sorted(by_category.items(), key=lambda kv: -kv[1])]
    sample = ", ".join(item.name for item in items[:5])
    dot.node(region, f"not converted\n[{counted(len(items), 'node')}]", shape="folder",
             fillcolor=category_color(main), **{**UNCONVERTED, "style": "filled"},
             tooltip=f"{len(items)} connected nodes not converted: {'; '.join(lines)}\n"
                     f"e.g. {sample}")


def _reason(unconverted: dict[str, UnconvertedNode], name: str) -> str:
    item = unconverted.get(name)
    return item.reason if item else "outside every engine"


# --- loop frames ---------------------------------------------------------------------------

class _Frames:
    """Draws each while loop's frame as a cluster (nested loops nested) around its nodes.

    `target(names)` is where nodes of those prepared-graph names go: the cluster of their
    common frame, or the top level. `close()` puts the clusters into the drawing, innermost
    first; call it before drawing edges, so nodes are declared inside their clusters first.
    """

    def __init__(self, dot: graphviz.Digraph, graph: Graph):
        self.dot = dot
        self.frames: Frames | None = loop_frames(graph) if has_loops(graph) else None
        self.clusters: dict[str, graphviz.Digraph] = {}
        # Back edges do not rank: the loop body reads top to bottom, the edge goes back up.
        self.back_edges = {(ref.node, node.name) for node in graph.real_nodes
                           for ref in node.inputs if is_back_edge(graph[ref.node], node)
                           } if self.frames else set()

    def frame(self, names: Iterable[str]) -> str:
        if self.frames is None:
            return ROOT_FRAME
        found = {self.frames.frame_of.get(name, ROOT_FRAME) for name in names}
        return found.pop() if len(found) == 1 else ROOT_FRAME

    def target(self, names: Iterable[str]) -> graphviz.Digraph:
        frame = self.frame(names)
        return self.dot if frame == ROOT_FRAME else self._cluster(frame)

    def _cluster(self, frame: str) -> graphviz.Digraph:
        if frame not in self.clusters:
            cluster = graphviz.Digraph(name=f"cluster_frame_{len(self.clusters)}")
            label = "/".join(frame.split("/")[-2:])
            cluster.attr(label=f"while loop {label}", tooltip=f"while loop frame {frame}",
                         style="dashed,rounded", color="#5b6f8f", fontcolor="#5b6f8f",
                         fontsize="10", labeljust="l")
            self.clusters[frame] = cluster
        return self.clusters[frame]

    def close(self) -> None:
        frames = self.frames
        if frames is None:
            return
        for frame in list(self.clusters):  # a loop holding only loops still gets its cluster
            while (frame := frames.parent[frame]) != ROOT_FRAME:
                self._cluster(frame)
        for frame in sorted(self.clusters, key=frames.depth, reverse=True):
            parent = frames.parent[frame]
            outer = self.dot if parent == ROOT_FRAME else self.clusters[parent]
            outer.subgraph(self.clusters[frame])
        self.clusters.clear()


# --- planning the full view ----------------------------------------------------------------

@dataclass
class _Plan:
    """What the full view draws: members per engine, outside nodes, edges, collapsed engines."""

    members: dict[str, list[Node]]
    outside: list[Node]
    edges: list[tuple[str, str, bool]]
    collapsed: set[str]
    unconverted: dict[str, UnconvertedNode]
    folded: dict[str, int] = field(default_factory=dict)  # consumer -> folded Consts
    drawn: int = 0  # nodes drawn before unconverted regions collapse
    caption: str = ""

    def folded_note(self, node: Node) -> str:
        count = self.folded.get(node.name, 0)
        return f"\n+{counted(count, 'weight Const')} folded in" if count else ""


def _plan(graph: Graph, result: ConversionResult) -> _Plan:
    engine_of = {name: e.name for e in result.engines for name in e.nodes}
    rep, folded = _representatives(graph, engine_of)
    members: dict[str, list[Node]] = {e.name: [] for e in result.engines}
    outside: list[Node] = []
    for node in graph.real_nodes:
        if rep.get(node.name) == node.name:
            (members[engine_of[node.name]] if node.name in engine_of else outside).append(node)
    collapsed = _engines_to_collapse(members, len(outside))
    # Everything drawn as a collapsed engine's member (Identity chains too) moves to its box.
    moved = {node.name: name for name in collapsed for node in members[name]}
    for key, target in rep.items():
        if target in moved:
            rep[key] = moved[target]
    edges = _plan_edges(graph, rep)
    drawn = len(outside) + len(collapsed) + sum(
        len(m) for n, m in members.items() if n not in collapsed)
    caption = (f"{len(graph.real_nodes)} nodes (weight Consts folded, Identity chains collapsed"
               + (f", {len(collapsed)} largest engines collapsed" if collapsed else ""))
    return _Plan(members, outside, edges, collapsed, _reasons(result), folded, drawn, caption)


def _representatives(
    graph: Graph, engine_of: dict[str, str]
) -> tuple[dict[str, str | None], dict[str, int]]:
    """Drawn node for every node: itself, the start of its Identity chain, or None (folded)."""
    rep: dict[str, str | None] = {}
    folded: dict[str, int] = {}
    for node in graph.real_nodes:  # node-id order puts producers first in prepared graphs
        if node.op == "Const" and _has_consumers(graph, node):
            rep[node.name] = None
            for consumer in {c.name for c, _ in graph.consumers[node.name]}:
                folded[consumer] = folded.get(consumer, 0) + 1
        elif _collapses(graph, node, engine_of):
            rep[node.name] = rep.get(node.inputs[0].node, node.inputs[0].node)
        else:
            rep[node.name] = node.name
    # A chain may start at a node seen later in id order: resolve to a fixed point.
    for name, target in rep.items():
        seen = {name}
        while target is not None and rep.get(target) not in (target, None) and target not in seen:
            seen.add(target)
            target = rep[target]
        rep[name] = target
    return rep, folded


def _collapses(graph: Graph, node: Node, engine_of: dict[str, str]) -> bool:
    """Pass-through nodes with consumers disappear when their input is in the same group."""
    if node.op not in COLLAPSIBLE_OPS or not node.inputs or not graph.consumers[node.name]:
        return False
    source = node.inputs[0].node
    return graph.by_name[source].op != "Const" and engine_of.get(source) == engine_of.get(
        node.name)


def _has_consumers(graph: Graph, node: Node) -> bool:
    return bool(graph.consumers[node.name] or graph.control_consumers[node.name])


def _engines_to_collapse(members: dict[str, list[Node]], outside: int) -> set[str]:
    """Largest engines first, until the drawing fits NODE_BUDGET."""
    drawn = outside + sum(len(m) for m in members.values())
    collapsed: set[str] = set()
    for name in sorted(members, key=lambda n: -len(members[n])):
        if drawn <= NODE_BUDGET:
            break
        collapsed.add(name)
        drawn -= len(members[name]) - 1
    return collapsed


def _plan_edges(graph: Graph, rep: dict[str, str | None]) -> list[tuple[str, str, bool]]:
    edges: dict[tuple[str, str], bool] = {}
    for node in graph.real_nodes:
        dst = rep.get(node.name)
        if dst is None:
            continue
        sources = [(r.node, False) for r in node.inputs] + [(c, True) for c in node.control_inputs]
        for name, control in sources:
            src = rep.get(name)
            if src is not None and src != dst:
                edges[(src, dst)] = edges.get((src, dst), True) and control
    return [(s, d, control) for (s, d), control in edges.items()]


# --- drawing helpers -----------------------------------------------------------------------

def _digraph(name: str, title: str) -> graphviz.Digraph:
    dot = graphviz.Digraph(name, graph_attr=GRAPH_ATTR, node_attr=NODE_ATTR, edge_attr=EDGE_ATTR)
    dot.attr(tooltip=title)
    return dot


def _op_node(dot: graphviz.Digraph, node: Node, fill: str, tooltip: str,
             small: bool = False, **extra: str) -> None:
    if small:
        extra.update(fontsize="7", height="0.15")
    dot.node(node.name, _short_label(node.op, node.name), fillcolor=fill,
             tooltip=f"{node.op}: {tooltip}", **extra)


def _engine_box(dot: graphviz.Digraph, engine: EngineInfo, index: int, note: str = "",
                error: float | None = None, overlay: str = "", **attrs: str) -> None:
    """An engine as one box; `overlay` adds a line (its kernels, its estimated time), `attrs`
    override the box's Graphviz attributes (a highlight)."""
    suffix = f" ({note})" if note else ""
    fill = engine_color(index) if error is None else error_color(error)
    if error is not None:
        suffix += f"\nmax abs error {error:.2g}"
    if overlay:
        suffix += f"\n{overlay}"
    dot.node(engine.name, f"{engine.name}\n[{counted(engine.native_node_count, 'node')}]{suffix}",
             **{"shape": "box3d", "style": "filled", "fillcolor": fill, "color": ENGINE_BORDER,
                "penwidth": "1.2", "fontsize": "10",
                "tooltip": _engine_tooltip(engine) + (f"\n{overlay}" if overlay else ""),
                **attrs})


def _engine_tooltip(engine: EngineInfo) -> str:
    ops = ", ".join(f"{op} x{n}" for op, n in sorted(engine.native_ops.items(),
                                                     key=lambda item: -item[1]))
    return (f"{engine.name}: {counted(engine.native_node_count, 'node')}, "
            f"{counted(len(engine.inputs), 'input')}, {counted(len(engine.outputs), 'output')}"
            f"\n{ops}")


def _edges(dot: graphviz.Digraph, edges: Iterable[tuple[str, str, bool]],
           back: Container[tuple[str, str]] = ()) -> None:
    for src, dst, control in edges:
        if control:
            dot.edge(src, dst, style="dashed", color="#bbbbbb")
        elif (src, dst) in back:
            dot.edge(src, dst, constraint="false", color="#5b6f8f", tooltip="loop back edge")
        else:
            dot.edge(src, dst)


def _legend(dot: graphviz.Digraph, engines: list[EngineInfo], categories: dict[str, int],
            caption: str, only: Container[str] | None = None,
            notes: Mapping[str, str] | None = None) -> None:
    """One HTML-table node: engines with their colours (those in `only`, when given) and
    `notes` (an overlay's line per engine) on the left, reason categories with counts on the
    right when it is long (two columns keep it half as tall, so the first view shows the
    graph, not the key); a short one stays one narrow column."""
    notes = notes or {}
    left = [(engine_color(i), f'{e.name} [{e.native_node_count}]'
             f'{escape(" · " + notes[e.name]) if e.name in notes else ""}')
            for i, e in enumerate(engines) if only is None or e.name in only]
    right = [(category_color(c), f"not converted: {escape(c)} ({n})")
             for c, n in sorted(categories.items(), key=lambda item: -item[1])]
    columns = [column for column in (left, right) if column]
    if len(left) + len(right) <= LEGEND_ONE_COLUMN_ROWS:
        columns = [left + right]
    rows = [f'<tr><td colspan="{2 * len(columns)}"><b>{escape(caption)}</b></td></tr>']
    for line in itertools.zip_longest(*columns):
        rows.append("<tr>" + "".join(
            f'<td bgcolor="{cell[0]}" width="14"></td><td align="left">{cell[1]}</td>'
            if cell else '<td border="0"></td><td border="0"></td>' for cell in line) + "</tr>")
    table = '<table border="0" cellborder="1" cellspacing="0" cellpadding="3">'
    dot.node(LEGEND, f"<{table}{''.join(rows)}</table>>", shape="plaintext", style="",
             tooltip="legend")


def _short_label(op: str, name: str) -> str:
    return f"{op}\n{_last(name, op)}"


def _last(name: str, op: str = "") -> str:
    """The last name component, or its parent when the last only repeats the op type (the
    layer name says more than `Conv2D/convolution`), unless the parent is a call wrapper."""
    parts = name.split("/")
    last = parts[-1]
    generic = re.sub(r"_\d+$", "", last).lower() in (op.lower(), "convolution")
    if generic and len(parts) > 1 and not WRAPPER_SCOPE.match(parts[-2]):
        last = parts[-2]
    return last if len(last) <= 24 else last[:22] + "…"


def _tint(color: str) -> str:
    """A light version of a hex colour for cluster backgrounds (alpha channel)."""
    return f"{color}40"


def _reasons(result: ConversionResult) -> dict[str, UnconvertedNode]:
    return {item.name: item for item in result.unconverted}


def _consumers_of(graph: Graph, ref: str) -> list[tuple[Node, int]]:
    tensor = TensorRef.parse(ref)
    return [(c, i) for c, i in graph.consumers[tensor.node] if c.inputs[i] == tensor]
