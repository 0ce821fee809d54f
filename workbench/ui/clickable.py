"""Two small widgets for what ipywidgets' HTML cannot do (anywidget, JavaScript in `js/`):
`Drawing`, a Graphviz SVG that pans, zooms and takes clicks, and `ClickableRows`, HTML whose
table rows take clicks. Both only say what was clicked; the tabs decide what it means, so the
Python side is tested without a browser by sending the messages the browser sends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

JS = Path(__file__).with_name("js")
CSS = """
.wb-drawing { max-width: 100%; min-width: 0; }
.wb-drawing-bar { display: flex; gap: 4px; align-items: center; margin: 2px 0 4px 0;
                  font-size: 12px; color: #5f6b7a; }
.wb-drawing-button { min-width: 34px; height: 24px; border: 1px solid #c9d1db;
                     background: #f7f9fc; border-radius: 3px; cursor: pointer; }
.wb-drawing-zoom { min-width: 42px; text-align: right; margin-right: 8px; }
.wb-drawing-port { position: relative; overflow: hidden; border: 1px solid #e1e5ea;
                   cursor: grab; touch-action: none; }
.wb-drawing-stage { position: absolute; left: 0; top: 0; transform-origin: 0 0; }
.wb-drawing-stage svg { display: block; }
.wb-drawing g.node, .wb-drawing g.cluster text { cursor: pointer; }
.wb-drawing-empty .wb-drawing-bar { display: none; }
.wb-drawing-empty .wb-drawing-port { border: none; overflow: visible; cursor: auto; }
.wb-drawing-empty .wb-drawing-stage { position: static; }
table.wb-rows tbody tr { cursor: pointer; }
table.wb-rows tbody tr:hover td { background: #e8f0fb; }
"""


class _Clickable(anywidget.AnyWidget):
    _css = CSS
    value = traitlets.Unicode("").tag(sync=True)  # the HTML shown

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handlers: list[Callable[..., None]] = []
        self.on_msg(self._message)

    def _message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        args = self._arguments(content) if isinstance(content, dict) else None
        if args is not None:
            for handler in self._handlers:
                handler(*args)

    def _arguments(self, content: dict) -> tuple | None:
        raise NotImplementedError


class Drawing(_Clickable):
    """HTML (a Graphviz SVG, or a note) in a viewport that pans and zooms; a click on a box
    calls `on_click` handlers with its Graphviz name (`cluster NAME` for a frame's title)."""

    _esm = JS / "drawing.js"
    focus = traitlets.Unicode("").tag(sync=True)  # the box to centre: its Graphviz name

    def on_click(self, handler: Callable[[str], None]) -> None:
        self._handlers.append(handler)

    def _arguments(self, content: dict) -> tuple | None:
        name = content.get("click")
        return (name,) if isinstance(name, str) else None


class ClickableRows(_Clickable):
    """HTML whose tables made with `table_html(..., rows=NAME)` take clicks: `on_row`
    handlers get (NAME, row index)."""

    _esm = JS / "rows.js"

    def on_row(self, handler: Callable[[str, int], None]) -> None:
        self._handlers.append(handler)

    def _arguments(self, content: dict) -> tuple | None:
        table, row = content.get("table"), content.get("row")
        ok = isinstance(table, str) and isinstance(row, int) and row >= 0
        return (table, row) if ok else None
