"""Plotly charts of GPU latency estimated for a named GPU (`profiling.estimate.conversion`).

Every chart says in its title which GPU the figures are estimated for, and carries the
estimate's label (its measured error) under the plot: estimated figures are never drawn as if
measured, and measured ones beside them say what measured them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.engines.inspection.tensorrt_kernels import NON_COMPUTE_TYPES
from workbench.viz.charts import CONVERTED_COLOR, ENGINES_COLOR, LATENCY_COLORS, _layout, _note
from workbench.words import counted

NATIVE_COLOR = LATENCY_COLORS[0]
MEASURED_COLOR = LATENCY_COLORS[2]
LABEL_WIDTH = 110  # characters per line of the estimate's label under a chart
TOP_KERNELS = 30  # the per-kernel chart shows the costliest ones


def sweep_estimate_chart(table: pd.DataFrame, current: int | None = None) -> go.Figure:
    """Estimated latency of the converted model against minimum_segment_size (a row per
    threshold: `profiling.estimate.conversion.sweep_estimate`), native TF's estimate as a
    line, the engine count on the right axis, the `current` threshold marked."""
    attrs = table.attrs
    gpu, batch = attrs.get("gpu", "?"), attrs.get("batch_size", 1)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    x = list(table["minimum_segment_size"])
    band = _error_band(table, "converted_ms")
    fig.add_trace(go.Scatter(
        name=f"converted, estimated for {gpu}", x=x, y=list(table["converted_ms"]),
        mode="lines+markers", line={"color": CONVERTED_COLOR, "width": 2.5}, error_y=band,
        customdata=list(zip(table["engines_ms"], table["native_ops_ms"], strict=True)),
        hovertemplate=("minimum segment size %{x}: %{y:.3f} ms estimated (engines "
                       "%{customdata[0]:.3f}, TF ops between them %{customdata[1]:.3f})"
                       "<extra></extra>"),
    ), secondary_y=False)
    fig.add_trace(go.Scatter(
        name=f"native TF, estimated for {gpu}", x=x, y=list(table["native_ms"]),
        mode="lines", line={"color": NATIVE_COLOR, "dash": "dash", "width": 1.5},
        hovertemplate="native TF: %{y:.3f} ms estimated<extra></extra>",
    ), secondary_y=False)
    fig.add_trace(go.Bar(
        name="TensorRT engines (count)", x=x, y=list(table["engines"]),
        marker={"color": ENGINES_COLOR}, opacity=0.25,
        hovertemplate="minimum segment size %{x}<br>engines: %{y}<extra></extra>",
    ), secondary_y=True)
    precision = attrs.get("precision")
    title = (f"Estimated latency on {gpu}<br><sup>against minimum segment size, batch {batch}"
             + (f", {precision}" if precision else "") + "; estimated, not measured</sup>")
    height = 460
    _layout(fig, title, height=height, hovermode="x unified")
    fig.update_xaxes(title_text="minimum segment size (effective nodes)")
    fig.update_yaxes(title_text="ms per call (estimated)", rangemode="tozero",
                     secondary_y=False)
    top = max([int(e) for e in table["engines"]], default=0)
    # The bars stay in the lower third, under the lines; ticks at whole engine counts.
    fig.update_yaxes(title_text="TensorRT engines (count)", range=[0, max(1, top) * 3],
                     tickmode="array", tickvals=sorted({0, top // 2, top}), showgrid=False,
                     secondary_y=True)
    if current is not None and current in x:
        fig.add_vline(x=current, line={"color": "#444444", "width": 1},
                      annotation_text=f"current ({current})", annotation_position="bottom right")
    label_estimate(fig, attrs.get("label", f"estimated for {gpu}"))
    if table.empty:
        _note(fig, "The sweep is empty: nothing to estimate.")
    return fig


def kernel_estimate_chart(rows: pd.DataFrame, gpu: str, label: str,
                          what: str = "kernel") -> go.Figure:
    """Estimated time per kernel (`layer`, `estimated_ms`; `measured_ms` where a trtexec
    profile measured the same layer), the costliest TOP_KERNELS, side by side. `what` names
    the rows (kernel, engine). Kernels that compute nothing of the network (shape calls,
    stream syncs) are one row, not a bar each."""
    rows = grouped_non_compute(rows)
    shown = rows.sort_values("estimated_ms", ascending=False).head(TOP_KERNELS)
    names = [_short(n) for n in shown["layer"]]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        name=f"estimated for {gpu}", y=names, x=list(shown["estimated_ms"]), orientation="h",
        marker={"color": CONVERTED_COLOR}, customdata=list(shown["layer"]),
        error_x=_error_band(shown, "estimated_ms"),
        hovertemplate="%{customdata}: %{x:.4f} ms estimated<extra></extra>",
    ))
    if "measured_ms" in shown and shown["measured_ms"].notna().any():
        fig.add_trace(go.Bar(
            name=f"measured ({rows.attrs.get('measured_on', 'trtexec profile')})", y=names,
            x=list(shown["measured_ms"]), orientation="h", marker={"color": MEASURED_COLOR},
            customdata=list(shown["layer"]),
            hovertemplate="%{customdata}: %{x:.4f} ms measured<extra></extra>",
        ))
    height = max(420, 160 + 22 * len(shown) * (1 + ("measured_ms" in shown)))
    # Only a cut list counts its rows: all shown, a count would also count the grouped row
    # (shape calls) or the TF ops beside the engines as one of `what`.
    which = (f"the {len(shown)} costliest of {counted(len(rows), what)}"
             if len(shown) < len(rows) else "costliest first")
    title = (f"{what.capitalize()} times estimated for {gpu}<br><sup>{which}; estimated, "
             "not measured"
             + ("; measured beside them" if len(fig.data) > 1 else "") + "</sup>")
    _layout(fig, title, height=height, barmode="group")
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title_text=f"ms per {what} call", rangemode="tozero")
    label_estimate(fig, label)
    if rows.empty:
        _note(fig, f"No {what}s to estimate.")
    return fig


def grouped_non_compute(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with the kernels of NON_COMPUTE_TYPES (`layer_type`) summed into one row,
    `shape calls / syncs (N kernels)`."""
    if "layer_type" not in rows or rows.empty:
        return rows
    idle = rows["layer_type"].isin(NON_COMPUTE_TYPES)
    if not idle.any():
        return rows
    summed = {"layer": f"shape calls / syncs ({counted(int(idle.sum()), 'kernel')})",
              "layer_type": "shape calls / syncs",
              "estimated_ms": float(rows.loc[idle, "estimated_ms"].sum())}
    if "measured_ms" in rows:
        measured = rows.loc[idle, "measured_ms"]
        summed["measured_ms"] = float(measured.sum()) if measured.notna().any() else None
    grouped = pd.concat([rows[~idle], pd.DataFrame([summed])], ignore_index=True)
    grouped.attrs = dict(rows.attrs)
    return grouped


def estimate_table(estimates: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The estimates per batch size as a table for reading (the app, the report)."""
    return pd.DataFrame([{
        "batch size": e["batch_size"], "native TF ms": round(e["native_ms"], 4),
        "converted ms": round(e["converted_ms"], 4),
        "converted range ms": (f"{e['converted_low_ms']:.3g}-{e['converted_high_ms']:.3g}"
                               if "converted_low_ms" in e else None),
        "speed-up": round(e["native_ms"] / e["converted_ms"], 2) if e["converted_ms"] else None,
        "engines ms": round(e["engines_ms"], 4),
        "TF ops between engines ms": round(e["native_ops_ms"], 4)} for e in estimates])


def label_estimate(fig: go.Figure, label: str) -> None:
    """The estimate's label (GPU, measured error, basis) between the title and the plot,
    wrapped, and in `fig.layout.meta["estimate_label"]`."""
    lines = textwrap.wrap(label, LABEL_WIDTH)
    fig.add_annotation(text="<br>".join(lines), x=0, y=1.03, xref="paper", yref="paper",
                       yanchor="bottom", xanchor="left", showarrow=False, align="left",
                       font={"size": 11, "color": "#616e7c"})
    extra = 16 * len(lines) + 10
    fig.update_layout(height=fig.layout.height + extra,
                      margin={"t": (fig.layout.margin.t or 90) + extra},
                      meta={**(fig.layout.meta or {}), "estimate_label": label})


def _error_band(table: pd.DataFrame, column: str) -> dict | None:
    """Plotly error bars from the estimate's range (`<stem>low_ms`, `<stem>high_ms` beside
    `column`, `<stem>ms`), None where the table has none."""
    stem = column[:-2]
    low, high = f"{stem}low_ms", f"{stem}high_ms"
    if low not in table or high not in table:
        return None
    return {"type": "data", "symmetric": False, "color": "#9aa5b1", "thickness": 1,
            "array": list(table[high] - table[column]),
            "arrayminus": list(table[column] - table[low])}


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
