"""HTML for the app's tables and text blocks (one stylesheet, escaped content)."""

from __future__ import annotations

import html

import pandas as pd

STYLE = """
<style>
.wb-table { border-collapse: collapse; font-size: 12px; margin: 4px 0 12px 0; }
.wb-table th { background: #f0f3f7; text-align: left; padding: 4px 8px;
               border-bottom: 1px solid #c9d1db; }
.wb-table td { padding: 3px 8px; border-bottom: 1px solid #eceff3; vertical-align: top; }
.wb-table tr:hover td { background: #f7f9fc; }
.wb-pre { font-family: var(--jp-code-font-family, monospace); font-size: 11px;
          line-height: 1.35; white-space: pre; overflow-x: auto; background: #fafbfc;
          padding: 8px; border: 1px solid #eceff3; }
.wb-scroll { overflow-x: auto; max-width: 100%; }
.wb-app .widget-html-content { line-height: 1.35; }
/* Wide tables and text scroll inside their own box, never the whole app: every box between
   the app and them may shrink below its content's width. */
.wb-app .widget-html, .wb-app .widget-html-content, .wb-app .widget-box,
.wb-app .widget-tab-contents { min-width: 0; max-width: 100%; }
.wb-app .widget-tab-contents { overflow-x: hidden; }
/* Nine tabs wrap onto a second row in a narrow notebook (JupyterLab's sidebar open) rather
   than overflow their bar; each keeps its whole title. */
.wb-app .lm-TabBar-content { flex-wrap: wrap; }
.wb-app .lm-TabBar-tab { flex: 0 0 auto !important; min-width: 0; max-width: none !important; }
.wb-knob-notes { margin: 0 0 6px 0; padding-left: 18px; }
.wb-verdict { font-size: 14px; padding: 6px 10px; margin: 6px 0; border-left: 4px solid #2ca02c;
              background: #f1f8f1; }
.wb-verdict-fails { border-left-color: #d62728; background: #fdf1f1; }
.wb-verdict ul { margin: 4px 0 0 0; font-size: 12px; }
.wb-headline { font-size: 15px; padding: 4px 0; }
.wb-headline b { font-size: 18px; }
.wb-note { color: #5f6b7a; font-size: 12px; }
.wb-error { color: #b3261e; font-weight: 600; }
</style>
"""


def table_html(frame: pd.DataFrame, empty: str = "Nothing to show.", rows: str = "") -> str:
    """A DataFrame as a styled, escaped HTML table; with `rows`, its rows take clicks in a
    `clickable.ClickableRows` (which reports them as table `rows`)."""
    if frame.empty:
        return f'<div class="wb-note">{html.escape(empty)}</div>'
    classes = ["wb-table", "wb-rows", f"wb-rows-{rows}"] if rows else "wb-table"
    table = frame.to_html(index=False, classes=classes, border=0, escape=True, justify="left")
    return f'<div class="wb-scroll">{table}</div>'


def pre_html(text: str) -> str:
    """Monospace text, escaped (TF-TRT's summary and report keep their layout)."""
    return f'<div class="wb-pre">{html.escape(text)}</div>'


def note_html(text: str, error: bool = False, title: str | None = None) -> str:
    """A grey note (red when `error`), with `title` shown on hover."""
    css = "wb-error" if error else "wb-note"
    hover = f' title="{html.escape(title)}"' if title else ""
    return f'<div class="{css}"{hover}>{html.escape(text)}</div>'

