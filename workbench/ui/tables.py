"""HTML for the app's tables and text blocks (one stylesheet, escaped content).

A table shows its essential columns with their names in words (`column_label`); the others go
into each row's "more" details, so no table is wider than the notebook. Cells read as words
too: no None or NaN, yes/no for booleans, three significant digits.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from workbench.words import column_label

STYLE = """
<style>
.wb-table { border-collapse: collapse; font-size: 12px; margin: 4px 0 12px 0; }
.wb-table th { background: #f0f3f7; text-align: left; padding: 4px 8px;
               border-bottom: 1px solid #c9d1db; }
.wb-table td { padding: 3px 8px; border-bottom: 1px solid #eceff3; vertical-align: top; }
/* Long text (reasons, errors, node paths) may break anywhere; short names never do. */
.wb-table td.wb-long { overflow-wrap: anywhere; min-width: 12em; }
.wb-table tr:hover td { background: #f7f9fc; }
.wb-table details summary { cursor: pointer; color: #3b6ea8; white-space: nowrap; }
.wb-table dl { margin: 4px 0; display: grid; grid-template-columns: max-content auto;
               gap: 1px 8px; }
.wb-table dt { color: #5f6b7a; }
.wb-table dd { margin: 0; overflow-wrap: anywhere; }
.wb-pre { font-family: var(--jp-code-font-family, monospace); font-size: 11px;
          line-height: 1.35; white-space: pre; overflow-x: auto; background: #fafbfc;
          padding: 8px; border: 1px solid #eceff3; }
/* Text to read and copy (a script) wraps on screen; a copy keeps its lines as written. */
.wb-pre.wb-wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
.wb-scroll { overflow-x: auto; max-width: 100%; }
.wb-app .widget-html-content { line-height: 1.35; }
/* Wide text scrolls inside its own box, never the whole app: every box between the app and
   it may shrink below its content's width. */
.wb-app .widget-html, .wb-app .widget-html-content, .wb-app .widget-box,
.wb-app .widget-tab-contents { min-width: 0; max-width: 100%; }
.wb-app .widget-tab-contents { overflow-x: hidden; }
/* The tabs stay in one row: titles shrink to their text, the bar scrolls if it must. */
.wb-app .lm-TabBar-content { flex-wrap: nowrap; }
.wb-app .lm-TabBar-tab { flex: 0 1 auto !important; min-width: 0 !important;
                         max-width: none !important; padding: 0 8px !important; }
.wb-app .lm-TabBar { overflow-x: auto; }
/* Labels of the controls beside their widgets wrap rather than being cut. */
.wb-app .widget-label { overflow: visible; }
.wb-knob-notes { margin: 0 0 6px 0; padding-left: 18px; }
.wb-verdict { font-size: 14px; padding: 6px 10px; margin: 6px 0; border-left: 4px solid #2ca02c;
              background: #f1f8f1; }
.wb-verdict-fails { border-left-color: #d62728; background: #fdf1f1; }
.wb-verdict ul { margin: 4px 0 0 0; font-size: 12px; }
.wb-headline { font-size: 15px; padding: 4px 0; }
.wb-headline b { font-size: 18px; }
.wb-model { font-size: 13px; color: #3b4754; }
.wb-note { color: #5f6b7a; font-size: 12px; }
.wb-error { color: #b3261e; font-weight: 600; }
</style>
"""

MISSING = "–"
LONG_CELL = 30  # characters: a cell this long may wrap inside its words


def cell_text(value: Any) -> str:
    """A cell as a person reads it: nothing shown for missing values, yes/no, 3 digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v) for v in value) or MISSING
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {cell_text(v)}" for k, v in value.items()) or MISSING
    try:
        if pd.isna(value):
            return MISSING
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):  # numpy scalars
        return cell_text(value.item())
    return str(value)


def table_html(frame: pd.DataFrame, empty: str = "Nothing to show.", rows: str = "",
               show: Sequence[str] | None = None) -> str:
    """A DataFrame as a styled, escaped HTML table, columns named in words. With `show`, only
    those columns are shown and the others go into each row's "more" details. With `rows`,
    its rows take clicks in a `clickable.ClickableRows` (which reports them as table `rows`)."""
    if frame.empty:
        return f'<div class="wb-note">{html.escape(empty)}</div>'
    shown = [c for c in (show or frame.columns) if c in frame.columns]
    rest = [c for c in frame.columns if c not in shown]
    classes = "wb-table" + (f" wb-rows wb-rows-{rows}" if rows else "")
    head = "\n".join(f"<th>{html.escape(column_label(str(c)))}</th>" for c in shown)
    if rest:
        head += "\n<th>more</th>"
    # Newlines between rows and cells: the table's text (copied, searched) keeps cells apart.
    body = "\n".join(_row_html(record, shown, rest) for record in frame.to_dict("records"))
    return (f'<div class="wb-scroll"><table class="{classes}"><thead><tr>{head}</tr></thead>'
            f"\n<tbody>\n{body}\n</tbody></table></div>")


def _row_html(record: dict[str, Any], shown: Sequence[str], rest: Sequence[str]) -> str:
    cells = "\n".join(_cell_html(cell_text(record[c])) for c in shown)
    if rest:
        items = "\n".join(f"<dt>{html.escape(column_label(str(c)))}</dt>\n"
                        f"<dd>{html.escape(cell_text(record[c]))}</dd>" for c in rest)
        cells += f"\n<td><details><summary>more</summary>\n<dl>{items}</dl></details></td>"
    return f"<tr>{cells}</tr>"


def _cell_html(text: str) -> str:
    if len(text) <= LONG_CELL:
        return f"<td>{html.escape(text)}</td>"
    # A long cell wraps after a path's "/" or a name's "_" before it cuts a word.
    breakable = html.escape(text).replace("/", "/<wbr>").replace("_", "_<wbr>")
    return f'<td class="wb-long">{breakable}</td>'



def pre_html(text: str, wrap: bool = False) -> str:
    """Monospace text, escaped. TF-TRT's summary and report keep their columns (a wide one
    scrolls in its own box); with `wrap`, long lines wrap on screen (their text unchanged)."""
    css = "wb-pre wb-wrap" if wrap else "wb-pre"
    return f'<div class="{css}">{html.escape(text)}</div>'


def note_html(text: str, error: bool = False, title: str | None = None) -> str:
    """A grey note (red when `error`), with `title` shown on hover."""
    css = "wb-error" if error else "wb-note"
    hover = f' title="{html.escape(title)}"' if title else ""
    return f'<div class="{css}"{hover}>{html.escape(text)}</div>'
