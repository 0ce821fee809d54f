"""The anywidget widgets' Python side: what the browser sends (`model.send`) reaches the
handlers through ipywidgets' own message path; malformed messages are dropped."""

from __future__ import annotations

from workbench.ui.clickable import ClickableRows, Drawing
from workbench.ui.tables import table_html


def test_drawing_sends_clicked_box_names_to_its_handlers() -> None:
    drawing = Drawing(value="<svg></svg>")
    seen: list[str] = []
    drawing.on_click(seen.append)
    for message in ({"click": "scope model/block_1"}, {"click": 3}, {"row": 1}, "click"):
        drawing._handle_custom_msg(message, [])
    assert seen == ["scope model/block_1"]
    assert "model.send" in str(drawing._esm) and "wheel" in str(drawing._esm)


def test_rows_name_their_table_and_index() -> None:
    import pandas as pd

    rows = ClickableRows(value=table_html(pd.DataFrame({"op": ["A", "B"]}), rows="ops"))
    assert 'class="wb-table wb-rows wb-rows-ops"' in rows.value
    seen: list[tuple[str, int]] = []
    rows.on_row(lambda table, row: seen.append((table, row)))
    for message in ({"table": "ops", "row": 1}, {"table": "ops", "row": -1},
                    {"table": "ops", "row": "1"}):
        rows._handle_custom_msg(message, [])
    assert seen == [("ops", 1)]
