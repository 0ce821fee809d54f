"""The Segment graph tab: the conversion drawn by name scope (`viz.scope_graphs`).

The first view fits the column; a group opens in place from the `group` list (or a search, or a
non-conversion report row), the breadcrumb closes what lies below one of its steps. The open
state survives a new conversion of the same graph (group ids are scope paths), so moving the
slider redraws the same region.
"""

from __future__ import annotations

from collections.abc import Iterable

import ipywidgets as widgets

from workbench.errors import WorkbenchError
from workbench.ui.tables import note_html
from workbench.viz.graphs import inline_svg
from workbench.viz.hierarchy import ROOT, Focus, ScopeTree, find, focus_on_row
from workbench.viz.kernel_graph import verdict_kernel_graph
from workbench.viz.scope_graphs import scope_drawing
from workbench.viz.view import ConversionView

GRAPH_VIEWS = {"Converted": "converted", "Full": "full", "One engine": "engine",
               "TensorRT kernels": "kernels"}  # kernels: one engine as TensorRT built it
SVG_BOX = '<div style="overflow:auto; max-height:800px; max-width:100%">{}</div>'


class GraphTab:
    """The converted graph, the full graph or one engine, grouped by name scope."""

    title = "Segment graph"

    def __init__(self) -> None:
        # Buttons as wide as their labels; rows wrap in a narrow app (JupyterLab's sidebar open).
        self.choice = widgets.ToggleButtons(options=list(GRAPH_VIEWS), value="Converted",
                                            style={"button_width": "auto"})
        self.engine = widgets.Dropdown(description="engine", options=[])
        self.search = widgets.Text(placeholder="find a node, op type or scope",
                                   continuous_update=False, layout=widgets.Layout(width="260px"))
        self.group = widgets.Dropdown(description="group", options=[("", None)],
                                      layout=widgets.Layout(width="420px", max_width="100%"))
        self.crumbs = widgets.HBox()
        self.note = widgets.HTML()
        self.html = widgets.HTML()
        self.html.add_class("wb-graph")
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
            widgets.HBox([self.choice, self.engine], layout={"flex_flow": "row wrap"}),
            widgets.HBox([self.search, self.group], layout={"flex_flow": "row wrap"}),
            self.crumbs, self.note, self.html])

    def update(self, view: ConversionView) -> None:
        if self._view is None or view.graph is not self._view.graph:
            self.open, self.highlight, self.focus = None, frozenset(), ROOT
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

    def show_row(self, op: str, reason: str | None = None) -> None:
        """A non-conversion report row: its nodes, opened and highlighted."""
        if self.tree is None or self._view is None:
            return
        if GRAPH_VIEWS[self.choice.value] in ("engine", "kernels"):
            self.choice.value = "Full"
        self._show(focus_on_row(self.tree, self._view.result, op, reason))

    def _show(self, focus: Focus, gid: str | None = None) -> None:
        assert self.tree is not None
        self.open, self.highlight = focus.open, focus.highlight
        if gid is None and focus.highlight:
            gid = self.tree.group_of[min(focus.highlight)]
        self.focus = gid or ROOT
        self.draw()

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
            kind = "converted"
        if kind == "kernels":
            self._draw_kernels(view)
            return
        try:
            drawing = scope_drawing(view.graph, view.result, kind, self.engine.value or "",
                                    open_groups=self.open, highlight=self.highlight,
                                    errors=view.engine_errors, tree=tree)
            self.svg = inline_svg(drawing.digraph)
        except WorkbenchError as exc:
            self.html.value = note_html(str(exc), error=True)
            return
        self.open = drawing.open
        self._controls(tree, drawing.open)
        found = f"; {len(self.highlight)} highlighted" if self.highlight else ""
        self.note.value = note_html(f"{drawing.boxes} boxes{found}. Open a group from the list "
                                    "or search; the path above closes what lies below a step.")
        self.html.value = SVG_BOX.format(self.svg)

    def _draw_kernels(self, view: ConversionView) -> None:
        """One engine as TensorRT built it (after the Summary tab's TensorRT verdicts)."""
        try:
            self.svg = inline_svg(verdict_kernel_graph(view.tensorrt, self.engine.value,
                                                       view.graph))
        except WorkbenchError as exc:
            self.html.value = note_html(str(exc), error=True)
            return
        self.note.value = ""
        self.html.value = SVG_BOX.format(self.svg)

    def _controls(self, tree: ScopeTree, opened: frozenset[str]) -> None:
        collapsed, _ = tree.visible(opened)
        by_size = sorted(collapsed, key=lambda g: -tree.groups[g].nodes)
        options: list[tuple[str, tuple[str, str] | None]] = [("", None)]
        options += [(f"open ▸ {tree.groups[g].label} ({tree.groups[g].nodes} nodes)",
                     ("open", g)) for g in by_size]
        options += [(f"close ▾ {tree.groups[g].label}", ("close", g))
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
