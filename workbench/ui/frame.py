"""The app's frame: the model picker and the controls on the left; the status bar, the headline,
the knob notes, the tabs and the machine footer on the right. Widgets only: what they do is
wired by the Workbench (`app.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import ipywidgets as widgets

from workbench.diagnosis import OK, Diagnosis, footer
from workbench.ui.controls import CONTROLS_WIDTH, Controls
from workbench.ui.tables import STYLE, note_html
from workbench.ui.tabs import Tab


class AppLayout:
    """The app's widgets around the tabs and controls."""

    def __init__(self, controls: Controls, tabs: Sequence[Tab], models: Sequence[str],
                 under_picker: Sequence[widgets.Widget] = ()):
        self.status = widgets.HTML(note_html("starting"))
        self.status.add_class("wb-status")
        self.progress = widgets.FloatProgress(value=0, min=0, max=1,
                                              layout=widgets.Layout(width="200px"))
        self.cancel_button = widgets.Button(description="Cancel", icon="stop",  # not squeezed
                                            layout=widgets.Layout(width="auto", flex="0 0 auto"))
        self.headline = widgets.HTML()
        self.knob_notes = widgets.HTML()
        self.picker = widgets.Combobox(
            options=list(models), ensure_option=False,
            placeholder="a sample model's name or your model's path",
            layout=widgets.Layout(width="236px"))
        self.open_button = widgets.Button(description="Open", icon="folder-open",
                                          layout=widgets.Layout(width="80px"))
        self.tabs = widgets.Tab(children=[tab.widget for tab in tabs],
                                titles=[tab.title for tab in tabs])
        self.footer = widgets.HTML()
        self.widget = widgets.HBox([self._left(controls, under_picker), self._main()])
        self.widget.add_class("wb-app")

    def _main(self) -> widgets.VBox:
        bar = widgets.HBox([self.status, self.progress, self.cancel_button],
                           layout=widgets.Layout(align_items="center"))
        return widgets.VBox([widgets.HTML(STYLE), bar, self.headline, self.knob_notes,
                             self.tabs, self.footer],
                            layout=widgets.Layout(flex="1 1 auto", min_width="0"))

    def _left(self, controls: Controls, under_picker: Sequence[widgets.Widget]) -> widgets.VBox:
        picker = widgets.VBox([widgets.HTML("<b>Model</b>"),
                               widgets.HBox([self.picker, self.open_button])])
        return widgets.VBox([picker, *under_picker, controls.box()],
                            layout=widgets.Layout(flex=f"0 0 {CONTROLS_WIDTH}"))

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.value = note_html(text, error=error)

    def show_progress(self, visible: bool) -> None:
        """The progress bar and the Cancel button, shown while a step runs."""
        shown = "visible" if visible else "hidden"
        self.progress.layout.visibility = self.cancel_button.layout.visibility = shown

    def show_machine(self, machine: Diagnosis) -> None:
        """The footer: what this kernel runs on (the full doctor report on hover)."""
        dot = machine.get("Graphviz dot")
        trouble = not machine.can_run or (dot is not None and dot.state != OK)
        self.footer.value = note_html(footer(machine), error=trouble, title=str(machine))

    def add_tab(self, tab: Tab) -> None:
        self.tabs.children = [*self.tabs.children, tab.widget]
        self.tabs.titles = [*self.tabs.titles, tab.title]


def knob_notes_html(notes: Sequence[str]) -> str:
    """The knobs whose effect is invisible or limited for this model, one line each."""
    if not notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return f'<ul class="wb-note wb-knob-notes">{items}</ul>'
