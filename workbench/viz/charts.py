"""Plotly charts of conversions: threshold sweep, engine sizes, blocking op types, runs,
latency.

Every function returns a `plotly.graph_objects.Figure` and displays nothing. Figures carry
their data inline, so `fig.to_html(include_plotlyjs=True)` renders offline. Colours come from
`workbench.viz.style`, so an engine or a reason has the same colour here as in the graphs.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from collections.abc import Sequence
from pathlib import PurePath

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.conversion.recommend import Recommendation
from workbench.conversion.result import ConversionResult
from workbench.viz.style import (
    ENGINE_BORDER,
    ENGINE_COLORS,
    category_color,
    engine_color,
    error_color,
    reason_category,
)
from workbench.words import column_label, counted

# Series colours: the strong tones of the engine palette, one meaning each.
CONVERTED_COLOR = ENGINE_COLORS[8]  # blue: % of nodes converted
ENGINES_COLOR = ENGINE_COLORS[10]  # orange: engine counts
GAINED_COLOR = ENGINE_COLORS[9]  # green: nodes a what-if would add
RECOMMENDATION_STYLES = {  # field -> (label, colour, dash)
    "fewest_engines": ("fewest engines", ENGINE_COLORS[9], "dash"),
    "moderate": ("moderate", ENGINE_COLORS[11], "dot"),
    "current": ("current", "#444444", "solid"),
}
PRECISION_COLORS = {"FP32": ENGINE_COLORS[8], "FP16": ENGINE_COLORS[10], "INT8": ENGINE_COLORS[11]}
OTHER_PRECISION_COLOR = "#7f7f7f"
LATENCY_COLORS = ("#7f7f7f", ENGINE_COLORS[8], ENGINE_COLORS[9])  # native grey, then engines

# The experiment store's own columns; any other numeric column is a measurement to plot.
RUN_BASE_COLUMNS = frozenset({
    "run_id", "name", "created", "model", "precision_mode", "minimum_segment_size",
    "use_dynamic_shape", "dynamic_shape_profile_strategy", "denylist", "max_engines",
    "engines", "converted_nodes", "total_nodes", "percent_converted",
})
RUN_COUNTS = (  # column, subplot title, axis unit
    ("percent_converted", "nodes converted (%)", "%"),
    ("engines", "TensorRT engines (count)", "count"),
)
# Units recognised as words of a metric's name ("latency_ms_p50" -> ms); rules as data.
UNIT_WORDS = {
    "ms": "ms", "us": "µs", "s": "s", "seconds": "s", "fps": "1/s", "qps": "queries/s",
    "mb": "MB", "mib": "MiB", "bytes": "bytes", "percent": "%", "pct": "%",
}
FONT = {"family": "Helvetica, Arial, sans-serif", "size": 13}
ROW_HEIGHT = 260
MARGIN = {"l": 70, "r": 70, "t": 90, "b": 60}
LEGEND_GAP_PX = 80  # from the plot's bottom edge to the legend: below the x-axis title
LABEL_HEADROOM = 1.3  # the sweep chart's y ranges leave the top for its labels


def sweep_chart(sweep: Sequence[ConversionResult], recommendation: Recommendation) -> go.Figure:
    """% converted and engine count against `minimum_segment_size`, recommendations marked."""
    by_threshold = {r.minimum_segment_size: r for r in sweep}
    x = sorted(t for t in by_threshold if t is not None and t >= 1)
    points = [by_threshold[t] for t in x]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(_converted_trace(points, x), secondary_y=False)
    fig.add_trace(_engines_trace(points, x), secondary_y=True)
    top = max([len(r.engines) for r in points], default=0)
    for key in RECOMMENDATION_STYLES:
        _add_recommendation(fig, recommendation, key, x)
    _label_recommendations(fig, recommendation, x)
    title = "Conversion against minimum segment size"
    _layout(fig, _with_model(title, points), height=440, hovermode="x unified")
    fig.update_xaxes(title_text="minimum segment size (effective nodes)")
    # Headroom above 100% (and above the most engines) for the recommendations' labels.
    fig.update_yaxes(title_text="nodes converted (%)", range=[0, 100 * LABEL_HEADROOM],
                     tickvals=list(range(0, 101, 20)), secondary_y=False)
    fig.update_yaxes(
        title_text="TensorRT engines (count)", range=[0, max(1, top) * LABEL_HEADROOM],
        tickmode="linear", tick0=0, dtick=max(1, math.ceil(top / 5)),
        secondary_y=True, showgrid=False,
    )
    if not x:
        _note(fig, "The sweep is empty: no minimum_segment_size to show.")
    return fig


def engine_sizes_chart(result: ConversionResult) -> go.Figure:
    """One bar per engine (summary()'s # Nodes) with its effective size and the threshold."""
    engines = list(result.engines)
    names = [e.name for e in engines]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        name="nodes (summary's # Nodes)", x=names, y=[e.native_node_count for e in engines],
        marker={"color": [engine_color(i) for i in range(len(engines))],
                "line": {"color": ENGINE_BORDER, "width": 1}},
        customdata=[_engine_hover(e) for e in engines],
        hovertemplate="%{customdata}<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        name="effective size (compared with minimum_segment_size)", x=names,
        y=[e.effective_size for e in engines], mode="markers",
        marker={"symbol": "diamond", "size": 11, "color": ENGINE_BORDER},
        hovertemplate="%{x}: %{y} effective nodes<extra></extra>",
    ))
    threshold = result.minimum_segment_size
    if engines and threshold is not None and threshold >= 1:
        fig.add_hline(
            y=threshold, line={"dash": "dash", "color": "#444444", "width": 1},
            annotation_text=f"minimum_segment_size = {threshold}",
            annotation_position="top right", annotation_bgcolor="rgba(255,255,255,0.8)",
        )
    title = f"Engine sizes: {counted(len(engines), 'TensorRT engine')}"
    _layout(fig, _with_model(title, [result]), height=420)
    fig.update_xaxes(
        title_text="engine (TRTEngineOp_ + number)", type="category", tickvals=names,
        ticktext=[n.removeprefix("TRTEngineOp_") for n in names],
    )
    fig.update_yaxes(title_text="nodes per engine (count)", rangemode="tozero")
    if not engines:
        _note(fig, "No TensorRT engines: nothing was converted.")
    return fig


def blocking_ops_chart(blocking: pd.DataFrame) -> go.Figure:
    """Horizontal bars per rejected op type: nodes rejected, and nodes gained if it converted."""
    table = blocking.reset_index(drop=True)
    ops = list(table["op"]) if "op" in table else []
    reasons = list(table["top_reason"]) if "top_reason" in table else [""] * len(ops)
    reasons = [r if isinstance(r, str) else "" for r in reasons]
    categories = [reason_category(r) if r else "reason not given" for r in reasons]
    rejected = list(table["rejected"]) if ops else []
    gained = list(table["gained"]) if ops else []
    hover = [_blocking_hover(row, reason) for row, reason in zip(
        table.to_dict("records"), reasons, strict=True)]
    fig = go.Figure()
    for category in dict.fromkeys(categories):
        keep = [c == category for c in categories]
        fig.add_trace(go.Bar(
            name=f"rejected ({category})", y=_pick(ops, keep), x=_pick(rejected, keep),
            orientation="h", offsetgroup="rejected", legendgroup="rejected",
            marker={"color": category_color(category), "line": {"color": "#666666", "width": 1}},
            customdata=_pick(hover, keep), hovertemplate="%{customdata}<extra></extra>",
        ))
    fig.add_trace(go.Bar(
        name="nodes that would join engines if it converted", y=ops, x=gained,
        orientation="h", offsetgroup="gained", marker={"color": GAINED_COLOR},
        text=[f"+{g}" for g in gained], textposition="outside", cliponaxis=False,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
    ))
    _layout(fig, "Unsupported op types that block the most nodes",
            height=max(320, 140 + 34 * len(ops)), barmode="group")
    fig.update_xaxes(title_text="nodes (count)", rangemode="tozero")
    # Biggest blocker on top: the table is sorted by gain, categories draw bottom-up.
    fig.update_yaxes(title_text="op type", type="category", categoryorder="array",
                     categoryarray=ops[::-1])
    if not ops:
        _note(fig, "No op type blocks conversion: every rejected node is an input or output.")
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    return fig


def runs_chart(runs: pd.DataFrame) -> go.Figure:
    """Runs side by side: % converted, engines, then every extra numeric column (metrics).

    One row of bars per quantity, one bar per run in table order, coloured by precision mode.
    """
    table = runs.reset_index(drop=True)
    labels = _run_labels(table)
    metrics = [(c, t, u) for c, t, u in RUN_COUNTS if c in table]
    metrics += [(c, _metric_title(c), _unit(c)) for c in _extra_numeric_columns(table)]
    rows = max(1, len(metrics))
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.3 / rows,
                        subplot_titles=[t for _, t, _ in metrics] or [""])
    precision = table["precision_mode"] if "precision_mode" in table else pd.Series(
        ["?"] * len(table), dtype=object)
    precisions = [str(p) if isinstance(p, str) else "?" for p in precision]
    hover = [_run_hover(row) for row in table.to_dict("records")]
    for row, (column, _, unit) in enumerate(metrics, start=1):
        values = [_number(v) for v in table[column]]
        for mode in dict.fromkeys(precisions):
            keep = [p == mode for p in precisions]
            fig.add_trace(go.Bar(
                name=mode, legendgroup=mode, showlegend=row == 1,
                x=_pick(labels, keep), y=_pick(values, keep), meta={"column": column},
                marker={"color": PRECISION_COLORS.get(mode, OTHER_PRECISION_COLOR)},
                # Outside the bar: a tiny value (FP32's 4e-6 error) still shows its number.
                texttemplate="%{y:.3~g}", textposition="outside", cliponaxis=False,
                customdata=_pick(hover, keep),
                hovertemplate=f"%{{customdata}}<br><b>{column}: %{{y}}</b><extra></extra>",
            ), row=row, col=1)
        for label, value in zip(labels, values, strict=True):
            if value is None:  # say so rather than leave a silent gap
                fig.add_annotation(x=label, y=0, text="not measured", showarrow=False,
                                   yshift=12, font={"color": "#888888", "size": 11},
                                   row=row, col=1)
        fig.update_yaxes(title_text=unit or "", rangemode="tozero", row=row, col=1)
    _layout(fig, f"Runs compared ({counted(len(table), 'run')})",
            height=120 + ROW_HEIGHT * rows, barmode="group")
    fig.update_layout(legend={"title": {"text": "precision"}, "y": 1.0, "x": 1.0,
                              "yanchor": "bottom", "xanchor": "right"})
    # Shared axes label only the bottom row by default: every row names its bars' runs.
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels,
                     showticklabels=True)
    fig.update_xaxes(title_text="run", row=rows, col=1)
    if table.empty:
        _note(fig, "No runs yet: keep a conversion to compare it here.")
    return fig


# sweep chart parts


def latency_chart(latency: pd.DataFrame) -> go.Figure:
    """Mean latency per batch size, one bar per model (`ConversionCheck.latency`), whiskers
    from the median to p99; each bar's legend entry and hover say what ran it, on which device."""
    fig = go.Figure()
    for index, (model, rows) in enumerate(latency.groupby("model", sort=False)):
        backend, device = rows["backend"].iloc[0], rows["device"].iloc[0]
        fig.add_trace(go.Bar(
            name=f"{model}: {backend} on {device}", x=[f"batch {b}" for b in rows["batch_size"]],
            y=rows["mean_ms"], marker={"color": LATENCY_COLORS[index % len(LATENCY_COLORS)]},
            error_y={"type": "data", "symmetric": False,
                     "array": (rows["p99_ms"] - rows["mean_ms"]).clip(lower=0),
                     "arrayminus": (rows["mean_ms"] - rows["median_ms"]).clip(lower=0)},
            # The value at the bar's base: the whisker (median to p99) crosses its top half.
            texttemplate="%{y:.3~g} ms", textposition="inside", insidetextanchor="start",
            customdata=rows[["median_ms", "p90_ms", "p99_ms", "throughput"]].to_numpy(),
            hovertemplate=(f"<b>{model}</b> ({backend} on {device})<br>%{{x}}: mean %{{y:.3f}} "
                           "ms, median %{customdata[0]:.3f}, p90 %{customdata[1]:.3f}, "
                           "p99 %{customdata[2]:.3f}<br>%{customdata[3]:.1f} samples/s"
                           "<extra></extra>"),
        ))
    _layout(fig, "Latency per call (mean; whiskers from median to p99)", height=420,
            barmode="group")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    if latency.empty:
        _note(fig, "not measured")
    return fig


def per_engine_chart(table: pd.DataFrame) -> go.Figure:
    """Each engine's max abs error, worst first (`PerEngineAccuracy.table()`): on the model's
    outputs with only this engine on the backend (coloured by size), and on the engine's own
    outputs against its native segment. NaN and inf are drawn at the top, labelled."""
    fig = go.Figure()
    finite = [v for column in ("output_max_abs_error", "local_max_abs_error")
              for v in table.get(column, []) if math.isfinite(v) and v > 0]
    top = max(finite, default=1.0) * 10
    for column, name, opacity in (("output_max_abs_error", "model outputs, this engine only", 1),
                                  ("local_max_abs_error", "engine vs its native segment", 0.45)):
        values = list(table[column]) if column in table else []
        fig.add_trace(go.Bar(
            name=name, x=list(table["engine"]) if len(table) else [],
            y=[v if math.isfinite(v) else top for v in values],
            text=[f"{v:.2g}" if math.isfinite(v) else str(v) for v in values],
            textposition="outside", opacity=opacity,
            marker={"color": [error_color(v) for v in values], "line": {"color": ENGINE_BORDER,
                                                                        "width": 1}},
            hovertemplate=f"<b>%{{x}}</b><br>{name}: %{{text}}<extra></extra>",
        ))
    _layout(fig, "Max abs error per engine, worst first", height=420, barmode="group")
    fig.update_yaxes(title_text="max abs error", type="log")
    if table.empty:
        _note(fig, "no engines")
    return fig


def _converted_trace(points: list[ConversionResult], x: list[int]) -> go.Scatter:
    return go.Scatter(
        name="nodes converted (%)", x=x, y=[r.percent_converted for r in points],
        mode="lines+markers", line={"color": CONVERTED_COLOR, "width": 2, "shape": "hv"},
        marker={"size": 5}, customdata=[[r.converted_nodes, r.total_nodes] for r in points],
        hovertemplate="%{y:.2f}% converted [%{customdata[0]}/%{customdata[1]}]<extra></extra>",
    )


def _engines_trace(points: list[ConversionResult], x: list[int]) -> go.Scatter:
    return go.Scatter(
        name="TensorRT engines", x=x, y=[len(r.engines) for r in points],
        mode="lines+markers", line={"color": ENGINES_COLOR, "width": 2, "shape": "hv"},
        marker={"size": 5, "symbol": "square"},
        hovertemplate="engines: %{y}<extra></extra>",
    )


def _add_recommendation(
    fig: go.Figure, recommendation: Recommendation, key: str, x: list[int]
) -> None:
    """A vertical line with the note as hover text. A value beyond the sweep starts hidden
    (a click on its legend entry shows it) so that it does not squash the swept range."""
    label, color, dash = RECOMMENDATION_STYLES[key]
    value = getattr(recommendation, key)
    inside = bool(x) and min(x) <= value <= max(x)
    note = "<br>".join(textwrap.wrap(recommendation.notes.get(key, ""), 70))
    heights = [i * 10 for i in range(11)]  # points all the way up, so hover works anywhere
    fig.add_trace(go.Scatter(
        name=f"{label}: {value}" + ("" if inside else " (beyond the sweep)"),
        x=[value] * len(heights), y=heights, mode="lines",
        line={"color": color, "dash": dash, "width": 2},
        visible=True if inside else "legendonly",
        hovertemplate=f"<b>{label} = {value}</b><br>{note}<extra></extra>",
        meta={"recommendation": key, "value": value},
    ), secondary_y=False)


def _label_recommendations(fig: go.Figure, recommendation: Recommendation, x: list[int]) -> None:
    """One label per distinct value inside the sweep ("fewest engines = current (3)")."""
    by_value: dict[int, list[str]] = {}
    for key in RECOMMENDATION_STYLES:
        by_value.setdefault(getattr(recommendation, key), []).append(key)
    shown = [(v, keys) for v, keys in by_value.items() if x and min(x) <= v <= max(x)]
    for offset, (value, keys) in enumerate(sorted(shown)):
        text = " = ".join(RECOMMENDATION_STYLES[k][0] for k in keys)
        fig.add_annotation(
            x=value, y=1.0, yref="paper", yanchor="top", yshift=-14 * offset,
            text=f"{text} ({value})", showarrow=False, xanchor="left", xshift=3,
            font={"color": RECOMMENDATION_STYLES[keys[0]][1], "size": 11},
        )


# hover texts and labels


def _pick(values: list, keep: list[bool]) -> list:
    return [v for v, k in zip(values, keep, strict=True) if k]


def _engine_hover(engine) -> str:
    ops = sorted(engine.native_ops.items(), key=lambda kv: (-kv[1], kv[0]))
    top = ", ".join(f"{op} {n}x" for op, n in ops[:6]) + (", ..." if len(ops) > 6 else "")
    return (
        f"<b>{engine.name}</b><br>{engine.native_node_count} nodes, "
        f"{engine.effective_size} effective<br>{counted(len(engine.input_dtypes), 'input')}, "
        f"{counted(len(engine.output_dtypes), 'output')}<br>{top}"
    )


def _blocking_hover(row: dict, reason: str) -> str:
    text = (
        f"<b>{row.get('op')}</b><br>{counted(row.get('rejected', 0), 'node')} rejected"
        f"<br>if supported: +{counted(row.get('gained', 0), 'node')} in engines "
        f"({row.get('converted_now')} -> {row.get('converted_if_supported')}), "
        f"engines {row.get('engines_now')} -> {row.get('engines_if_supported')}"
    )
    if reason:
        text += "<br>" + "<br>".join(textwrap.wrap(f"reason: {reason}", 80))
    return text


def _run_labels(table: pd.DataFrame) -> list[str]:
    """Run names, made unique with the run id where two runs share a name."""
    ids = [str(r) for r in table["run_id"]] if "run_id" in table else [
        str(i + 1) for i in range(len(table))
    ]
    names = list(table["name"]) if "name" in table else ids
    names = [n if isinstance(n, str) and n else i for n, i in zip(names, ids, strict=True)]
    return [n if names.count(n) == 1 else f"{n} [{i}]" for n, i in zip(names, ids, strict=True)]


def _run_hover(row: dict) -> str:
    params = (
        f"{row.get('precision_mode')}, minimum_segment_size={row.get('minimum_segment_size')}, "
        f"dynamic shape={row.get('use_dynamic_shape')}"
    )
    if row.get("dynamic_shape_profile_strategy"):
        params += f" ({row['dynamic_shape_profile_strategy']})"
    lines = [f"<b>{row.get('name', row.get('run_id'))}</b>", params]
    if row.get("denylist"):
        lines.append(f"denylist: {row['denylist']}")
    if "converted_nodes" in row:
        lines.append(f"{row.get('converted_nodes')}/{row.get('total_nodes')} nodes converted")
    if row.get("model"):
        lines.append(f"model: {PurePath(str(row['model'])).name}")
    return "<br>".join(lines)


def _extra_numeric_columns(table: pd.DataFrame) -> list[str]:
    """Columns beyond the store's own that hold numbers (booleans and text are skipped)."""
    extra = []
    for column in table.columns:
        if column in RUN_BASE_COLUMNS:
            continue
        values = table[column].dropna()
        if len(values) and all(_number(v) is not None for v in values.tolist()):
            extra.append(column)
    return extra


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        return None
    return float(value)


def _unit(column: str) -> str | None:
    return next((UNIT_WORDS[w] for w in column.lower().split("_") if w in UNIT_WORDS), None)


def _metric_title(column: str) -> str:
    return column_label(column)


# layout


def _with_model(title: str, results: Sequence[ConversionResult]) -> str:
    if not results or not results[0].model:
        return title
    params = results[0].params
    return (
        f"{title}<br><sup>{PurePath(str(results[0].model)).name}, "
        f"{params.precision_mode or ''}, "
        f"{'dynamic' if params.use_dynamic_shape else 'implicit batch'}</sup>"
    )


def _layout(fig: go.Figure, title: str, height: int, **extra) -> None:
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"}, height=height, font=FONT,
        template="plotly_white", margin=MARGIN,
        legend={"orientation": "h", "yanchor": "top", "y": legend_below(height), "x": 0},
        **extra,
    )


def legend_below(height: int) -> float:
    """The legend's y (paper units) that puts it LEGEND_GAP_PX below the plot, clear of the
    x-axis title whatever the figure's height (a fixed fraction overlapped short figures)."""
    plot = max(height - MARGIN["t"] - MARGIN["b"], 100)
    return -LEGEND_GAP_PX / plot


def _note(fig: go.Figure, text: str) -> None:
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 14, "color": "#666666"})
