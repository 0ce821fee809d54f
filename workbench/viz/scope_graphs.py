"""Segment graphs drawn by name scope (`hierarchy.ScopeTree`): collapsed groups are boxes that
say what they hold, open groups are clusters around their contents, and the three views of
`graphs` (converted, full, one engine) keep their meaning inside that frame.

A collapsed group is filled in stripes, one per engine reaching into it and one per reason
category of the nodes left native, as wide as their share of its nodes (the legend's colours).
In the converted view an engine sits in the innermost scope holding all its nodes, so an engine
spanning groups is one box beside them; in the full view its nodes carry its colour.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import graphviz

from workbench.conversion.converted import ENGINE_OP, converted_top_level
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.errors import WorkbenchError
from workbench.graph.control_flow import is_back_edge
from workbench.graph.nodes import Graph
from workbench.viz.graphs import (
    ENGINE_BORDER,
    UNCONVERTED,
    VIEWS,
    _digraph,
    _engine_box,
    _legend,
    _short_label,
    _tint,
    render,
)
from workbench.viz.hierarchy import ROOT, TOP_BOXES, Focus, Group, ScopeTree, find
from workbench.viz.style import category_color, engine_color, reason_category
from workbench.words import counted

HIGHLIGHT = "#ff6f00"
BAR_WIDTH = 150  # points: the stripes under a group's text
# The Graphviz names of a collapsed group's box and an open group's frame (the SVG <title> a
# click in the app sends back): the group id after the prefix.
GROUP_BOX = "scope "
FRAME = "cluster "
KIND_PREFIX = {"loop": "while loop ", "function": "function ", "series": "", "ops": "",
               "scope": ""}


@dataclass(frozen=True)
class ScopeDrawing:
    """What `scope_drawing` drew: the Graphviz graph, the open state, the boxes drawn."""

    digraph: graphviz.Digraph
    open: frozenset[str]
    highlight: frozenset[str]
    boxes: int


def scope_drawing(
    graph: Graph, result: ConversionResult, view: str = "converted", engine: str = "",
    open_groups: Iterable[str] | None = None, depth: int | None = None, search: str = "",
    highlight: Iterable[str] = (), errors: Mapping[str, float] | None = None,
    tree: ScopeTree | None = None, overlays: Mapping[str, str] | None = None,
) -> ScopeDrawing:
    """One of `graphs.VIEWS` by name scope. `open_groups` None: the first view (whole levels
    opened within the box budget, or `depth` levels); `search` opens and
    highlights what `hierarchy.find` finds; `highlight` marks nodes or engines (a report
    row's, a click's); `overlays` adds a line to engines' boxes and legend rows
    (`overlays.engine_overlays`: TensorRT's kernels, an estimated time)."""
    if view not in VIEWS:
        raise WorkbenchError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    if view == "engine":  # the engine's own nodes by scope
        tree = ScopeTree.build(graph, result, _engine(result, engine).nodes)
        open_groups = None if open_groups is None else [g for g in open_groups
                                                         if g in tree.groups]
    tree = tree or ScopeTree.build(graph, result)
    if open_groups is None:
        opened = tree.first_view(depth=depth)
    else:
        try:
            opened = tree.normalize(open_groups)
        except KeyError as exc:
            raise WorkbenchError(f"no group {exc.args[0]!r} in this graph; groups are scope "
                                 "paths such as " + ", ".join(_examples(tree))) from None
    marked = frozenset(highlight)
    if search:
        focus: Focus = find(tree, search, opened)
        opened, marked = focus.open, marked | focus.highlight
    units = _units(graph, result, tree, view, engine)

    def draw(opened: frozenset[str]) -> ScopeDrawing:
        drawer = _Drawer(tree, opened, marked, result, errors, overlays or {})
        return ScopeDrawing(drawer.draw(graph, result, units, view), opened, marked,
                            drawer.box_count)

    drawing = draw(opened)
    if open_groups is None and depth is None and not search:
        drawing = _fitted(tree, drawing, draw)
    return drawing


def _fitted(tree: ScopeTree, drawing: ScopeDrawing,
            draw: Callable[[frozenset[str]], ScopeDrawing]) -> ScopeDrawing:
    """A first view whose boxes missed the budget, drawn again with the budget corrected:
    `first_view` counts the full view's boxes, and the converted view draws fewer where engines
    swallow nodes (keras-hub's RetinaNet: 12 instead of 25) or more where an engine's box sits
    beside its groups (T5: 62). The second drawing wins when it is within the budget."""
    if TOP_BOXES // 3 <= drawing.boxes <= TOP_BOXES:
        return drawing
    again = draw(tree.first_view(budget=2 * TOP_BOXES - drawing.boxes))
    better = again.boxes <= TOP_BOXES or again.boxes < drawing.boxes
    return again if better else drawing


OUTPUT_FORMATS = ("svg", "dot", "png")


def write_scope_drawing(graph: Graph, result: ConversionResult, path: str | Path,
                        **options: Any) -> ScopeDrawing:
    """Draws (`scope_drawing`'s options) and writes `path`: Graphviz source for `.dot`, what
    `dot` lays out for `.svg` and `.png`."""
    path, fmt = drawing_format(path)
    drawing = scope_drawing(graph, result, **options)
    data = drawing.digraph.source.encode() if fmt == "dot" else render(drawing.digraph, fmt)
    path.write_bytes(data)
    return drawing


def drawing_format(path: str | Path) -> tuple[Path, str]:
    """(path, format) of a drawing to write; a WorkbenchError when it cannot be written."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in OUTPUT_FORMATS:
        raise WorkbenchError(f"cannot write {path}: the file must end in .svg, .dot or .png")
    if not path.parent.is_dir():
        raise WorkbenchError(f"cannot write {path}: no directory {path.parent}")
    return path, fmt


# --- what is drawn ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Units:
    """The things a view draws: prepared nodes, or (converted) kept nodes and engines; each
    engine sits in the group holding all its nodes."""

    nodes: list[str]
    engines: dict[str, str]  # engine -> its group
    edges: list[tuple[str, str, bool]]  # (unit, unit, control)


def _units(graph: Graph, result: ConversionResult, tree: ScopeTree, view: str,
           engine: str) -> _Units:
    if view == "converted":
        converted = converted_top_level(graph, result)
        consumers = {src for n in converted.nodes for src in n.inputs}
        folded = {n.name for n in converted.nodes if n.op == "Const" and n.name in consumers}
        kept = [n.name for n in converted.nodes if n.op != ENGINE_OP and n.name not in folded]
        engines = {e.name: tree.common_group(e.nodes) for e in result.engines}
        edges = [(s, d, False) for s, d in converted.edges if folded.isdisjoint((s, d))]
        return _Units(kept, engines, edges)
    chosen = set(_engine(result, engine).nodes) if view == "engine" \
        else {n.name for n in graph.real_nodes}
    # Weight Consts fold into their consumers, as in graphs.full_graph.
    drawn = [n.name for n in graph.real_nodes if n.name in chosen
             and not (n.op == "Const" and graph.consumers[n.name])]
    keep = set(drawn)
    edges = [(ref.node, name, False) for name in drawn for ref in graph.by_name[name].inputs
             if ref.node in keep]
    edges += [(src, name, True) for name in drawn for src in graph.by_name[name].control_inputs
              if src in keep]
    return _Units(drawn, {}, edges)


def _engine(result: ConversionResult, name: str) -> EngineInfo:
    for engine in result.engines:
        if engine.name == name:
            return engine
    names = [e.name for e in result.engines]
    raise WorkbenchError(f"no engine named {name!r}; this conversion has {names or 'none'}")


# --- drawing ------------------------------------------------------------------------------

class _Drawer:
    def __init__(self, tree: ScopeTree, opened: frozenset[str], marked: frozenset[str],
                 result: ConversionResult, errors: Mapping[str, float] | None,
                 overlays: Mapping[str, str]) -> None:
        self.tree, self.opened, self.marked = tree, opened, marked
        self.engine_index = {e.name: i for i, e in enumerate(result.engines)}
        self.errors = errors or {}
        self.overlays = overlays
        self.clusters: dict[str, graphviz.Digraph] = {}
        self.box_count = 0

    def draw(self, graph: Graph, result: ConversionResult, units: _Units,
             view: str) -> graphviz.Digraph:
        dot = _digraph(f"scopes_{view}", "Segment graph by name scope")
        self.dot = dot
        box_of: dict[str, str] = {}
        drawn_groups: dict[str, list[str]] = {}
        for name in units.nodes:
            box = self.tree.representative(name, self.opened)
            if box == name:
                box_of[name] = name
                self._node(graph, name)
            else:
                box_of[name] = f"{GROUP_BOX}{box}"
                drawn_groups.setdefault(box, []).append(name)
        for name, gid in units.engines.items():
            box = self._group_box(gid)
            if box == gid and gid in self.opened:
                info = result.engines[self.engine_index[name]]
                mark = {"color": HIGHLIGHT, "penwidth": "3"} if name in self.marked else {}
                _engine_box(self._target(gid), info, self.engine_index[name],
                            error=self.errors.get(name), overlay=self.overlays.get(name, ""),
                            **mark)
                box_of[name] = name
                self.box_count += 1
            else:
                box_of[name] = f"{GROUP_BOX}{box}"
                drawn_groups.setdefault(box, [])
        for gid in drawn_groups:
            self._group(gid)
        self._close()
        self._edges(graph, units.edges, box_of)
        root = self.tree.groups[ROOT]
        _legend(dot, result.engines, dict(root.reasons),
                f"{counted(root.nodes, 'node')} in "
                f"{counted(len(self.tree.groups) - 1, 'group')}; "
                f"{counted(self.box_count, 'box', 'boxes')} drawn ({view} view)",
                only=root.engines if view == "engine" else None, notes=self.overlays)
        return dot

    def _group_box(self, gid: str) -> str:
        """Where something of group `gid` is seen: `gid` itself when it and its parents are
        open, else the outermost collapsed group on its way."""
        for group in [*self.tree.ancestors(gid), gid]:
            if group not in self.opened:
                return group
        return gid

    def _target(self, gid: str) -> graphviz.Digraph:
        """The cluster of open group `gid` (the top level for the root)."""
        if gid == ROOT:
            return self.dot
        if gid not in self.clusters:
            group = self.tree.groups[gid]
            cluster = graphviz.Digraph(name=f"{FRAME}{gid}")
            loop = group.kind == "loop"
            cluster.attr(label=f"{KIND_PREFIX[group.kind]}{group.label}  [{group.nodes}]",
                         tooltip=f"{gid}: open (click this title to close it)",
                         style="dashed,rounded", color="#5b6f8f" if loop else "#9aa5b1",
                         fontcolor="#5b6f8f" if loop else "#57606a", fontsize="10",
                         labeljust="l")
            self.clusters[gid] = cluster
        return self.clusters[gid]

    def _close(self) -> None:
        """Nests the clusters of open groups, innermost first (parents made on the way)."""
        for gid in list(self.clusters):
            for parent in self.tree.ancestors(gid)[1:]:
                self._target(parent)
        depth = {gid: len(self.tree.ancestors(gid)) for gid in self.clusters}
        for gid in sorted(self.clusters, key=depth.__getitem__, reverse=True):
            parent = self.tree.groups[gid].parent or ROOT
            self._target(parent).subgraph(self.clusters[gid])

    def _node(self, graph: Graph, name: str) -> None:
        node = graph.by_name[name]
        engine = self.tree.engine_of.get(name)
        target = self._target(self.tree.group_of[name])
        extra = {"color": HIGHLIGHT, "penwidth": "3"} if name in self.marked else {}
        if engine is not None:
            target.node(name, _short_label(node.op, name), fillcolor=engine_color(
                self.engine_index[engine]), tooltip=f"{node.op}: {name}\nin {engine}", **extra)
        else:
            reason = self.tree.reason_of[name]
            target.node(name, _short_label(node.op, name),
                        fillcolor=category_color(reason_category(reason)),
                        **{**UNCONVERTED, **extra},
                        tooltip=f"{node.op}: {name}\nnot converted: {reason}")
        self.box_count += 1

    def _group(self, gid: str) -> None:
        group = self.tree.groups[gid]
        matches = sum(1 for n in self.marked if self._inside(n, gid))
        lines = [f"+ {KIND_PREFIX[group.kind]}{_short(group.label)}",
                 f"{counted(group.nodes, 'node')}, "
                 f"{_percent(group.converted, group.nodes)} converted"]
        if group.engines:
            (top, count), *rest = group.engines.most_common()
            lines.append(f"{top} ({count})" + (f" +{counted(len(rest), 'engine')}" if rest else ""))
        if group.main_reason:
            lines.append(f"native: {group.main_reason} ({group.reasons[group.main_reason]})")
        if matches:
            lines.append(f"{matches} match{'es' if matches > 1 else ''}")
        border = HIGHLIGHT if matches else ENGINE_BORDER if not group.reasons else "#57606a"
        self._target(self._parent_box(gid)).node(
            f"{GROUP_BOX}{gid}", self._label(group, lines, border, 3 if matches else 1),
            shape="plaintext", style="", tooltip=self._tooltip(group))
        self.box_count += 1

    def _parent_box(self, gid: str) -> str:
        parent = self.tree.groups[gid].parent
        return ROOT if parent is None else parent

    def _inside(self, name: str, gid: str) -> bool:
        """A marked node inside group `gid`, or a marked engine with nodes in it."""
        if name in self.tree.groups[gid].engines:
            return True
        owner = self.tree.group_of.get(name)
        return owner is not None and (owner == gid or gid in self.tree.ancestors(owner))

    def _label(self, group: Group, lines: list[str], border: str, width: int) -> str:
        """An HTML-like label: the text, and under it a bar of one stripe per engine and per
        reason category, as wide as its share of the group's nodes."""
        parts = [(engine_color(self.engine_index[e]), n) for e, n in group.engines.most_common()]
        parts += [(category_color(c), n) for c, n in group.reasons.most_common()]
        cells = "".join(f'<TD WIDTH="{max(2, round(BAR_WIDTH * n / group.nodes))}" HEIGHT="8" '
                        f'FIXEDSIZE="TRUE" CELLPADDING="0" BGCOLOR="{color}"></TD>'
                        for color, n in parts)
        text = "<BR/>".join(escape(line) for line in lines)
        return (f'<<TABLE BORDER="{width}" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2" '
                f'COLOR="{border}" BGCOLOR="{_tint(parts[0][0])}" STYLE="ROUNDED">'
                f'<TR><TD COLSPAN="{len(parts)}">{text}</TD></TR><TR>{cells}</TR></TABLE>>')

    def _tooltip(self, group: Group) -> str:
        lines = [f"{group.id or 'model'}: {counted(group.nodes, 'node')}, "
                 f"{group.converted} in engines (click to open)"]
        lines += [f"  {e}: {n}" for e, n in group.engines.most_common()]
        lines += [f"  not converted, {c}: {n}" for c, n in group.reasons.most_common()]
        return "\n".join(lines)

    def _edges(self, graph: Graph, edges: list[tuple[str, str, bool]],
               box_of: dict[str, str]) -> None:
        counts: dict[tuple[str, str], list[int]] = {}
        for src, dst, control in edges:
            a, b = box_of.get(src), box_of.get(dst)
            if a is None or b is None or a == b:
                continue
            entry = counts.setdefault((a, b), [0, 1])
            entry[0] += 1
            entry[1] &= int(control)
            if a == src and b == dst and src in graph.by_name and dst in graph.by_name \
                    and is_back_edge(graph.by_name[src], graph.by_name[dst]):
                entry.append(-1)
        for (a, b), (count, control, *back) in counts.items():
            attrs = {"tooltip": f"{count} edge{'s' if count > 1 else ''}"}
            if count > 1:
                attrs["penwidth"] = f"{min(3.0, 0.7 + 0.4 * math.log2(count)):.2f}"
            if control:
                attrs.update(style="dashed", color="#bbbbbb")
            if back:
                attrs.update(constraint="false", color="#5b6f8f")
            self.dot.edge(a, b, **attrs)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def _short(label: str, width: int = 32) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1):]


def _examples(tree: ScopeTree) -> list[str]:
    return [repr(g) for g in tree.groups[ROOT].children[:3]]

