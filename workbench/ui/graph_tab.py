"""The Segment graph tab: the conversion drawn by name scope (`viz.scope_graphs`).

The first view fits the column and pans and zooms (`clickable.Drawing`); a group opens in place
on a click (or from the `group` list, a search, a non-conversion report row or the engine
table), a click on an open group's frame title closes it, the breadcrumb closes what lies below
one of its steps, a click on a node or an engine selects it. The open state survives a new
conversion of the same graph (group ids are scope paths), so moving the slider redraws the same
region. Engines carry TensorRT's kernels (after the Summary tab's verdicts) and, with a GPU
chosen, their estimated time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import ipywidgets as widgets

from workbench.errors import WorkbenchError
from workbench.ui.clickable import Drawing
from workbench.ui.tables import note_html
from workbench.viz.graphs import inline_svg
from workbench.viz.hierarchy import (
    ROOT,
    Focus,
    ScopeTree,
    find,
    focus_on,
    focus_on_engine,
    focus_on_row,
)
from workbench.viz.kernel_graph import NO_VERDICT, verdict_kernel_graph
from workbench.viz.overlays import engine_overlays
from workbench.viz.scope_graphs import FRAME, GROUP_BOX, scope_drawing
from workbench.viz.view import ConversionView
from workbench.words import counted

if TYPE_CHECKING:
    from workbench.ui.target_gpu import TargetGpu

GRAPH_VIEWS = {"Converted": "converted", "Full": "full", "One engine": "engine",
               "TensorRT kernels": "kernels"}  # kernels: one engine as TensorRT built it


class GraphTab:
    """The converted graph, the full graph or one engine, grouped by name scope."""

    title = "Segment graph"

    def __init__(self, target: TargetGpu | None = None) -> None:
        self.target = target  # the app's target GPU: each engine's estimated time in its box
        # Buttons as wide as their labels (a fixed width cut "TensorRT kernels").
        self.choice = widgets.ToggleButtons(options=list(GRAPH_VIEWS), value="Converted",
                                            style={"button_width": "auto"})
        self.engine = widgets.Dropdown(description="engine", options=[])
        self.search = widgets.Text(placeholder="find a node, op type or scope",
                                   continuous_update=False, layout=widgets.Layout(width="220px"))
        self.group = widgets.Dropdown(description="group", options=[("", None)],
                                      layout=widgets.Layout(width="340px"))
        self.crumbs = _row()
        self.note = widgets.HTML()
        self.html = Drawing()  # .value: the SVG, or a note saying why there is none
        self.html.add_class("wb-graph")
        self.html.on_click(self.clicked)
        self.selected = ""  # the node or engine a click selected
        self.svg = ""
        self.tree: ScopeTree | None = None
        self.open: frozenset[str] | None = None  # None: the first view
        self.highlight: frozenset[str] = frozenset()
        self.focus = ROOT  # the group the breadcrumb leads to
        self._view: ConversionView | None = None
        self.choice.observe(lambda _c: self.draw(), names="value")
        self.engine.observe(lambda _c: GRAPH_VIEWS[self.choice.value] in ("engine", "kernels")
                            and self.draw(), names="value")
        self.search.observe(lambda change: self.find(change["new"]), names="value")
        self.group.observe(self._group_chosen, names="value")
        self.widget = widgets.VBox([
            _row(self.choice, self.engine), _row(self.search, self.group),
            self.crumbs, self.note, self.html])

    def update(self, view: ConversionView) -> None:
        if self._view is None or view.graph is not self._view.graph:
            self.open, self.highlight, self.focus, self.selected = None, frozenset(), ROOT, ""
        self._view = view
        self.tree = ScopeTree.build(view.graph, view.result)
        if view.engine_names != tuple(self.engine.options):
            self.engine.options = view.engine_names  # redraws through the observer if needed
        self.draw()

    # --- finding your way ------------------------------------------------------------------

    def open_group(self, gid: str) -> None:
        """Opens `gid` (and the groups around it) in place."""
        if self.tree is None:
            return
        self._show(Focus(self.tree.normalize([*(self.open or ()), gid]), self.highlight), gid)

    def close_below(self, gid: str) -> None:
        """The breadcrumb: closes every group inside `gid` (the root: all of them)."""
        if self.tree is None:
            return
        kept = [g for g in self.open or () if g == gid or gid not in self.tree.ancestors(g)]
        self._show(Focus(self.tree.normalize(kept), self.highlight), gid)

    def close_group(self, gid: str) -> None:
        """Closes `gid` and every group inside it."""
        if self.tree is None:
            return
        kept = [g for g in self.open or () if g != gid and gid not in self.tree.ancestors(g)]
        self._show(Focus(self.tree.normalize(kept), self.highlight),
                   self.tree.groups[gid].parent or ROOT)

    def find(self, text: str) -> None:
        """Opens and highlights the nodes whose name or op type matches `text`."""
        if self.tree is not None:
            self._show(find(self.tree, text, self.open or ()))

    def clicked(self, name: str) -> None:
        """A click in the drawing (a box's Graphviz name): a collapsed group opens, an open
        group's frame title closes it, a node or an engine is selected (highlighted and
        described above the drawing)."""
        tree = self.tree
        if tree is None or self._view is None:
            return
        if name.startswith(GROUP_BOX) and name[len(GROUP_BOX):] in tree.groups:
            self.open_group(name[len(GROUP_BOX):])
        elif name.startswith(FRAME) and name[len(FRAME):] in tree.groups:
            self.close_group(name[len(FRAME):])
        elif name in tree.op_of or name in self._view.engine_names:
            self.selected = name
            self._show(Focus(tree.normalize(self.open or ()), frozenset({name})))

    def show_engine(self, name: str) -> None:
        """An engine of the engine table: its box in the converted view (its nodes in the
        others), opened and highlighted."""
        if self.tree is None or self._view is None:
            return
        engine = next((e for e in self._view.result.engines if e.name == name), None)
        if engine is None:
            return
        self.selected = name
        if GRAPH_VIEWS[self.choice.value] == "converted":
            self._show(focus_on_engine(self.tree, engine))
        else:
            if GRAPH_VIEWS[self.choice.value] in ("engine", "kernels"):
                self.choice.value = "Full"
            self._show(focus_on(self.tree, engine.nodes))

    def show_row(self, op: str, reason: str | None = None) -> None:
        """A non-conversion report row: its nodes, opened and highlighted."""
        if self.tree is None or self._view is None:
            return
        if GRAPH_VIEWS[self.choice.value] in ("engine", "kernels"):
            self.choice.value = "Full"
        self._show(focus_on_row(self.tree, self._view.result, op, reason))

    def _show(self, focus: Focus, gid: str | None = None) -> None:
        assert self.tree is not None and self._view is not None
        self.open, self.highlight = focus.open, focus.highlight
        first = min(focus.highlight, default="")
        if gid is not None:  # a group opened or closed: the drawing centres it
            self.html.focus = "" if gid == ROOT else \
                f"{FRAME if gid in self.open else GROUP_BOX}{gid}"
        elif first:  # a node's group, or the group holding an engine; centred on the box
            gid = self.tree.group_of.get(first) or self.tree.common_group(
                next((e.nodes for e in self._view.result.engines if e.name == first), ()))
            self.html.focus = self._box_of(first)
        else:
            self.html.focus = ""
        self.focus = gid or ROOT
        self.draw()

    def _box_of(self, name: str) -> str:
        """The Graphviz name of the box showing node or engine `name`."""
        assert self.tree is not None and self.open is not None
        if name not in self.tree.group_of:  # an engine: in its group, or that group's box
            return name
        box = self.tree.representative(name, self.open)
        return name if box == name else f"{GROUP_BOX}{box}"

    def _group_chosen(self, change: dict) -> None:
        if change["new"] is None:
            return
        action, gid = change["new"]
        self.group.value = None
        (self.open_group if action == "open" else self.close_group)(gid)

    # --- drawing ---------------------------------------------------------------------------

    def draw(self) -> None:
        view, tree = self._view, self.tree
        if view is None or tree is None:
            return
        kind = GRAPH_VIEWS[self.choice.value]
        if kind in ("engine", "kernels") and not self.engine.value:
            self._pick_engine(view, kind)
            return
        if kind == "kernels":
            self._draw_kernels(view)
            return
        try:
            drawing = scope_drawing(view.graph, view.result, kind, self.engine.value or "",
                                    open_groups=self.open, highlight=self.highlight,
                                    errors=view.engine_errors, tree=tree,
                                    overlays=engine_overlays(view.tensorrt, self._gpu_estimate()))
            self.svg = inline_svg(drawing.digraph)
        except WorkbenchError as exc:
            self._say(str(exc), error=True)
            return
        self.open = drawing.open
        self._controls(tree, drawing.open)
        found = f"; {len(self.highlight)} highlighted" if self.highlight else ""
        chosen = self._describe(self.selected) if self.selected in self.highlight else ""
        boxes = counted(drawing.boxes, "box", "boxes")
        self.note.value = note_html(f"{chosen or f'{boxes}{found}.'} Click a group "
                                    "to open it (or pick it from the list, or search); the path "
                                    "above closes what lies below a step.")
        self.html.value = self.svg

    def _describe(self, name: str) -> str:
        """One line on a selected node or engine."""
        assert self.tree is not None and self._view is not None
        if name in self.tree.op_of:
            engine = self.tree.engine_of.get(name)
            where = f"in {engine}" if engine else f"not converted: {self.tree.reason_of[name]}"
            return f"{self.tree.op_of[name]} {name}: {where}."
        engine = next(e for e in self._view.result.engines if e.name == name)
        extra = engine_overlays(self._view.tensorrt, self._gpu_estimate()).get(name)
        return (f"{name}: {engine.native_node_count} nodes, {len(engine.inputs)} inputs, "
                f"{len(engine.outputs)} outputs{f'; {extra}' if extra else ''}.")

    def _gpu_estimate(self) -> dict | None:
        """The target GPU's estimate of this conversion (the one the Profiling tab shows)."""
        if self._view is None or self.target is None:
            return None
        return self.target.estimate(self._view)

    def _pick_engine(self, view: ConversionView, kind: str) -> None:
        """A view of one engine with none chosen: the first engine (for kernels, the first
        TensorRT built), drawn through the engine list's observer; without engines, why."""
        names = view.engine_names
        if not names:
            self._say("This conversion has no engines: lower minimum_segment_size or look at "
                      "the non-conversion report.")
            return
        built = [n for n in names if ((view.tensorrt or {}).get(n) or {}).get("built")]
        self.engine.value = (built or names)[0] if kind == "kernels" else names[0]

    def _say(self, text: str, error: bool = False) -> None:
        """A note in place of the drawing; nothing of the previous drawing stays."""
        self.svg = ""
        self.note.value = ""
        self.crumbs.children = []
        self.html.value = note_html(text, error=error)

    def _draw_kernels(self, view: ConversionView) -> None:
        """One engine as TensorRT built it (after the Summary tab's TensorRT verdicts)."""
        try:
            self.svg = inline_svg(verdict_kernel_graph(view.tensorrt, self.engine.value,
                                                       view.graph))
        except WorkbenchError as exc:
            self._say(str(exc), error=str(exc) != NO_VERDICT)  # no verdict: an ask
            return
        self.crumbs.children = []
        self.note.value = note_html(f"{self.engine.value} as TensorRT-RTX built it: its "
                                    "kernels, the tensors between them, and the TF nodes in "
                                    "no kernel. Pick another engine above.")
        self.html.value = self.svg

    def _controls(self, tree: ScopeTree, opened: frozenset[str]) -> None:
        collapsed, _ = tree.visible(opened)
        by_size = sorted(collapsed, key=lambda g: -tree.groups[g].nodes)
        options: list[tuple[str, tuple[str, str] | None]] = [("", None)]
        options += [(f"open ▸ {_left_cut(tree.path_label(g))} "
                     f"({counted(tree.groups[g].nodes, 'node')})", ("open", g))
                    for g in by_size]
        options += [(f"close ▾ {_left_cut(tree.path_label(g))}", ("close", g))
                    for g in sorted(opened - {ROOT})]
        self.group.options = options
        if self.focus not in tree.groups:
            self.focus = ROOT
        self.crumbs.children = list(self._crumbs(tree.breadcrumb(self.focus)))

    def _crumbs(self, path: Iterable[tuple[str, str]]) -> Iterable[widgets.Button]:
        for gid, label in path:
            button = widgets.Button(description=label[-40:], layout=widgets.Layout(width="auto"),
                                    tooltip=f"close what lies in {gid or 'the model'}")
            button.on_click(lambda _b, g=gid: self.close_below(g))
            yield button


def _left_cut(text: str, limit: int = 64) -> str:
    """The end of a long group path, which names the group (its start is shared)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _row(*children: widgets.Widget) -> widgets.HBox:
    """Controls side by side, wrapping in a narrow column (JupyterLab's sidebar open)."""
    return widgets.HBox(list(children), layout=widgets.Layout(flex_flow="row wrap"))
