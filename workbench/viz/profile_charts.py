"""Plotly charts of per-layer timings (`workbench.profiling` tables), after TREx's report card.

Every function takes the one layer table (any mix of sources) and returns a Figure; nothing is
displayed. Every trace and title names the run, the source and the device that measured it, so
a CPU timing is never mistaken for a GPU one. Figures render offline
(`fig.to_html(include_plotlyjs=True)`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

import pandas as pd
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.errors import WorkbenchError
from workbench.profiling.layers import align_runs, shared_node_groups
from workbench.viz.charts import FONT, OTHER_PRECISION_COLOR, PRECISION_COLORS, legend_below
from workbench.viz.style import ENGINE_COLORS

# One colour per layer type, stable across charts, from a qualitative palette (ten hues that
# cannot be confused); the types beyond the ten that take the most time share one grey "other".
TYPE_PALETTE = tuple(plotly.colors.qualitative.D3)
OTHER_TYPES = "other layer types"
OTHER_COLOR = "#b5b5b5"
RUN_PALETTE = (ENGINE_COLORS[8], ENGINE_COLORS[10], ENGINE_COLORS[11], ENGINE_COLORS[9],
               ENGINE_COLORS[12], ENGINE_COLORS[13])
UNKNOWN_TYPE = "(no layer info)"
TICK_CHARS = 28  # layer names are long; ticks show their tail, hovers the whole name
SUBTITLE_CHARS = 70  # a chart's subtitle wraps here: it fits a 600 px chart


def layer_latency_chart(table: pd.DataFrame, run: str | None = None) -> go.Figure:
    """Latency per layer in execution order, coloured by layer type (TREx's report card)."""
    rows = _one_run(table, run)
    colors = _type_colors(table)
    types = _types(rows).map(lambda t: t if t in colors else OTHER_TYPES)
    fig = go.Figure()
    for layer_type in dict.fromkeys(types):
        keep = types == layer_type
        part = rows[keep]
        fig.add_bar(
            x=part.index + 1, y=part["avg_ms"], name=layer_type,
            marker_color=colors[layer_type], customdata=_hover_data(part),
            hovertemplate=_LAYER_HOVER,
        )
    _layout(fig, f"Latency per layer: {_run_label(rows)}", 460, "layer type", bargap=0.15)
    fig.update_xaxes(title_text="layer (execution order)")
    fig.update_yaxes(title_text="average latency (ms)")
    return fig


def layer_type_chart(table: pd.DataFrame) -> go.Figure:
    """Latency per layer type, stacked per run (ms and % of each run's total)."""
    colors = _type_colors(table)
    frame = table.assign(layer_type=_types(table).map(
        lambda t: t if t in colors else OTHER_TYPES))
    runs = list(dict.fromkeys(frame["run"]))
    labels, measured = _run_ticks(frame, runs)
    totals = frame.groupby(["run", "layer_type"], sort=False)[["avg_ms", "pct"]].sum()
    fig = go.Figure()
    for layer_type in _by_total(frame, "layer_type"):
        ms = [_get(totals, (r, layer_type), "avg_ms") for r in runs]
        pct = [_get(totals, (r, layer_type), "pct") for r in runs]
        fig.add_bar(x=labels, y=ms, name=layer_type, marker_color=colors[layer_type],
                    customdata=pct,
                    hovertemplate=f"{layer_type}<br>%{{y:.3f}} ms (%{{customdata:.1f}}%)"
                                  "<extra>%{x}</extra>")
    _layout(fig, f"Latency per layer type<br><sup>{measured}</sup>", 480, "layer type",
            barmode="stack")
    fig.update_yaxes(title_text="sum of layer latencies (ms)")
    return fig


def precision_chart(table: pd.DataFrame) -> go.Figure:
    """Layers and latency per precision, per run (what FP16/INT8 building changed)."""
    frame = table.assign(precision=table["precision"].fillna("unknown"))
    runs = list(dict.fromkeys(frame["run"]))
    labels, measured = _run_ticks(frame, runs)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("layers per precision (count)",
                                        "latency per precision (ms)"))
    grouped = frame.groupby(["run", "precision"], sort=False)["avg_ms"].agg(["count", "sum"])
    for precision in _precision_order(frame["precision"]):
        color = PRECISION_COLORS.get(precision, OTHER_PRECISION_COLOR)
        counts = [_get(grouped, (r, precision), "count") for r in runs]
        times = [_get(grouped, (r, precision), "sum") for r in runs]
        fig.add_bar(x=labels, y=counts, name=precision, marker_color=color, legendgroup=precision,
                    hovertemplate=f"{precision}: %{{y}} layers<extra>%{{x}}</extra>", row=1, col=1)
        fig.add_bar(x=labels, y=times, name=precision, marker_color=color, legendgroup=precision,
                    showlegend=False, row=1, col=2,
                    hovertemplate=f"{precision}: %{{y:.3f}} ms<extra>%{{x}}</extra>")
    _layout(fig, "Precision per layer (from each layer's output format)"
            f"<br><sup>{measured}</sup>", 480, "precision", barmode="stack")
    fig.update_layout(margin={"t": fig.layout.margin.t + 30})  # room for the subplots' titles
    fig.update_xaxes(tickangle=0)
    return fig


def precision_per_layer_chart(table: pd.DataFrame, run: str | None = None) -> go.Figure:
    """Each layer's latency coloured by its output precision."""
    rows = _one_run(table, run)
    precision = rows["precision"].fillna("unknown")
    fig = go.Figure()
    for name in _precision_order(precision):
        part = rows[precision == name]
        fig.add_bar(x=part.index + 1, y=part["avg_ms"], name=name,
                    marker_color=PRECISION_COLORS.get(name, OTHER_PRECISION_COLOR),
                    customdata=_hover_data(part), hovertemplate=_LAYER_HOVER)
    _layout(fig, f"Precision per layer: {_run_label(rows)}", 440, "precision", bargap=0.15)
    fig.update_xaxes(title_text="layer (execution order)")
    fig.update_yaxes(title_text="average latency (ms)")
    return fig


def latency_sunburst(table: pd.DataFrame, run: str | None = None) -> go.Figure:
    """Engine -> layer type -> layer, sized by latency."""
    rows = _one_run(table, run).assign(engine=lambda f: f["engine"].fillna("(no engine)"))
    rows = rows.assign(layer_type=_types(rows))
    colors = _type_colors(table)
    ids, labels, parents, values, fill = [], [], [], [], []
    for engine, by_engine in rows.groupby("engine", sort=False):
        ids.append(f"e:{engine}")
        labels.append(engine)
        parents.append("")
        values.append(by_engine["avg_ms"].sum())
        fill.append("#ffffff")
        for layer_type, by_type in by_engine.groupby("layer_type", sort=False):
            ids.append(f"t:{engine}/{layer_type}")
            labels.append(layer_type)
            parents.append(f"e:{engine}")
            values.append(by_type["avg_ms"].sum())
            fill.append(colors.get(layer_type, OTHER_COLOR))
            for index, row in by_type.iterrows():
                ids.append(f"l:{index}")
                labels.append(_tail(row["layer"]))
                parents.append(f"t:{engine}/{layer_type}")
                values.append(row["avg_ms"])
                fill.append(colors.get(layer_type, OTHER_COLOR))
    fig = go.Figure(go.Sunburst(
        ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
        marker={"colors": fill, "line": {"color": "#ffffff", "width": 1}},
        hovertemplate="%{label}<br>%{value:.3f} ms (%{percentRoot:.1%})<extra></extra>",
        maxdepth=3, insidetextorientation="radial",
    ))
    _layout(fig, f"Latency by engine, layer type and layer: {_run_label(rows)}", 620)
    fig.update_layout(margin={"l": 20, "r": 20, "b": 20})
    return fig


def compare_runs_chart(table: pd.DataFrame, runs: Sequence[str] | None = None) -> go.Figure:
    """Per-layer latency of several runs side by side, layers aligned across runs.

    Layers align by name, else by the TF nodes (scopes) they came from, so an FP32, FP16 and
    INT8 build of one model line up although TensorRT fused and named them differently.
    Layers that take no time in any run (format copies optimised away) are left out.
    """
    order = list(runs) if runs is not None else list(dict.fromkeys(table["run"]))
    aligned = align_runs(table, order)
    aligned = aligned[(aligned[order].fillna(0) > 0).any(axis=1)].reset_index(drop=True)
    fig = go.Figure()
    for index, run in enumerate(order):
        names = aligned[f"{run}:layer"].fillna("(no such layer in this run)")
        fig.add_bar(
            x=aligned.index + 1, y=aligned[run], name=_run_label(table[table["run"] == run]),
            marker_color=RUN_PALETTE[index % len(RUN_PALETTE)], customdata=names,
            hovertemplate="%{customdata}<br>%{y:.4f} ms<extra>" + run + "</extra>",
        )
    totals = ", ".join(f"{r}: {table.loc[table['run'] == r, 'avg_ms'].sum():.2f} ms"
                       for r in order)
    _layout(fig, f"Layer latency by run, aligned by layer: {totals}", 500, "run",
            barmode="group", bargap=0.2, bargroupgap=0.0)
    _legend_below(fig, 500)
    fig.update_xaxes(title_text="aligned layer (execution order of the first run)")
    fig.update_yaxes(title_text="average latency (ms)")
    return fig


def native_vs_engine_chart(table: pd.DataFrame, native_run: str, engine_run: str) -> go.Figure:
    """Time of the same TF nodes in two runs: e.g. native TF ops against the engine layer
    that fused them. Works with any two runs whose rows carry `tf_nodes`."""
    groups = shared_node_groups(table, native_run, engine_run)
    first = _run_label(table[table["run"] == native_run])
    second = _run_label(table[table["run"] == engine_run])
    fig = go.Figure()
    if groups.empty:
        _note(fig, "no TF node is timed in both runs")
    labels = [_tail(label) for label in groups["label"]]
    hover = ["<br>".join(textwrap.shorten(n, 90) for n in nodes[:8])
             for nodes in groups["tf_nodes"]]
    for name, column, color in ((first, "first_ms", RUN_PALETTE[0]),
                                (second, "second_ms", RUN_PALETTE[1])):
        fig.add_bar(y=labels, x=groups[column], name=name, orientation="h", marker_color=color,
                    customdata=hover,
                    hovertemplate="%{x:.4f} ms<br>TF nodes:<br>%{customdata}<extra></extra>")
    share = (f"{groups['first_ms'].sum():.2f} ms vs {groups['second_ms'].sum():.2f} ms "
             f"over {len(groups)} groups of TF nodes")
    height = max(360, 110 + 24 * len(groups))
    _layout(fig, f"Same TF nodes, two runs: {share}", height, barmode="group")
    _legend_below(fig, height)
    fig.update_yaxes(autorange="reversed", title_text="layer (its TF nodes in the hover)")
    fig.update_xaxes(title_text="average latency (ms)")
    return fig


def profile_figures(table: pd.DataFrame, run: str | None = None) -> dict[str, go.Figure]:
    """The report card of one run plus, with several runs, their comparison."""
    run = run or table["run"].iloc[0]
    figures = {
        "latency per layer": layer_latency_chart(table, run),
        "latency per layer type": layer_type_chart(table),
        "precision": precision_chart(table),
        "precision per layer": precision_per_layer_chart(table, run),
        "sunburst": latency_sunburst(table, run),
    }
    if table["run"].nunique() > 1:
        figures["runs compared"] = compare_runs_chart(table)
    return figures


# --- Helpers -------------------------------------------------------------------------------

_LAYER_HOVER = ("<b>%{customdata[0]}</b><br>%{customdata[1]} · %{customdata[2]}<br>"
                "%{y:.4f} ms (%{customdata[3]:.2f}%)<extra></extra>")


def _one_run(table: pd.DataFrame, run: str | None) -> pd.DataFrame:
    runs = list(dict.fromkeys(table["run"]))
    if run is None:
        if len(runs) != 1:
            raise WorkbenchError(f"the table holds {len(runs)} runs ({', '.join(runs)}): "
                                 "say which one to draw")
        run = runs[0]
    if run not in runs:
        raise WorkbenchError(f"no run {run!r} in the table (runs: {', '.join(runs)})")
    return table[table["run"] == run].reset_index(drop=True)


def _run_label(rows: pd.DataFrame) -> str:
    """`run (source on device)`: every timing says what measured it."""
    if rows.empty:
        return "(empty)"
    first = rows.iloc[0]
    return f"{first['run']} ({first['source']} on {first['device']})"


def _run_ticks(frame: pd.DataFrame, runs: list[str]) -> tuple[list[str], str]:
    """Category ticks naming the runs, and a subtitle saying what measured which: long
    `source on device` ticks slant and eat the plot (and print over each other side by side)."""
    producers: dict[str, list[str]] = {}
    for run in runs:
        first = frame[frame["run"] == run].iloc[0]
        producers.setdefault(f"{first['source']} on {first['device']}", []).append(run)
    measured = "; ".join(f"{', '.join(names)}: {producer}"
                         for producer, names in producers.items())
    return [f"<b>{run}</b>" for run in runs], measured


def _types(rows: pd.DataFrame) -> pd.Series:
    return rows["layer_type"].fillna(UNKNOWN_TYPE)


def _type_colors(table: pd.DataFrame) -> dict[str, str]:
    """Colours by layer type, most time first, so the same type has one colour everywhere;
    beyond the palette, the types that take the least time share OTHER_TYPES' grey."""
    frame = table.assign(layer_type=_types(table))
    order = _by_total(frame, "layer_type")
    shown = order if len(order) <= len(TYPE_PALETTE) else order[:len(TYPE_PALETTE) - 1]
    colors = {t: TYPE_PALETTE[i] for i, t in enumerate(shown)}
    return colors if len(shown) == len(order) else {**colors, OTHER_TYPES: OTHER_COLOR}


def _by_total(frame: pd.DataFrame, column: str) -> list[str]:
    return frame.groupby(column)["avg_ms"].sum().sort_values(ascending=False).index.tolist()


def _precision_order(values: pd.Series) -> list[str]:
    known = [p for p in PRECISION_COLORS if p in set(values)]
    return known + sorted(set(values) - set(known))


def _get(frame: pd.DataFrame, key: tuple, column: str) -> float:
    return float(frame[column].get(key, 0.0))


def _hover_data(rows: pd.DataFrame) -> list[list]:
    return [[textwrap.shorten(r.layer, 120, placeholder=" …"), r.layer_type or "?",
             r.precision or "?", r.pct] for r in rows.itertuples(index=False)]


def _tail(name: str) -> str:
    return name if len(name) <= TICK_CHARS else "…" + name[-(TICK_CHARS - 1):]


def _layout(fig: go.Figure, title: str, height: int, legend: str = "", **extra) -> None:
    text, lines = _titled(title)
    fig.update_layout(
        title={"text": text, "x": 0.01, "xanchor": "left", "font": {"size": 16}},
        height=height + 14 * (lines - 2), font=FONT, template="plotly_white",
        margin={"l": 70, "r": 40, "t": 56 + 14 * lines, "b": 60},
        legend={"yanchor": "top", "y": 1.0, "x": 1.01, "title": {"text": legend}}, **extra,
    )


def _titled(title: str) -> tuple[str, int]:
    """A title that fits a notebook-wide chart (plotly never wraps one): its head, then what
    follows the first ": " as a smaller subtitle wrapped in lines; and its number of lines."""
    head, _, rest = title.partition("<br>") if "<br>" in title else title.partition(": ")
    lines: list[str] = []
    # Lines break after a list's commas or semicolons only: a run's label stays whole.
    for part in re.split(r"(?<=[,;]) ", re.sub(r"</?sup>", "", rest)):
        if lines and len(lines[-1]) + len(part) < SUBTITLE_CHARS:
            lines[-1] += " " + part
        elif part:
            lines.append(part)
    return head + "".join(f"<br><sup>{line}</sup>" for line in lines), 1 + len(lines)


def _legend_below(fig: go.Figure, height: int) -> None:
    """A horizontal legend under the plot: above it, two rows of long run names ran into the
    title."""
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": legend_below(height),
                              "x": 0})


def _note(fig: go.Figure, text: str) -> None:
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 14, "color": "#666666"})
