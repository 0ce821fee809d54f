"""Plotly charts of a tuning search, drawn from its table (`TuneResult.table`, one row a trial).

The charts take the table, not the result, so this module stays in the viz layer below tune.
Columns read: trial_id, precision_mode, minimum_segment_size, use_dynamic_shape,
dynamic_shape_profile_strategy, denylist, max_engines, status, reason, percent_converted,
engines, latency_ms, latency_p50_ms, latency_p99_ms, speedup, max_abs_error, backend, device,
worker, pareto, recommended. A trial that did not finish ("failed", "timeout", "skipped") or
lacks a figure a chart needs is listed under that chart, never plotted at a made-up value.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from workbench.conversion.params import DEFAULT_MAX_ENGINES
from workbench.viz.charts import (
    LATENCY_COLORS,
    OTHER_PRECISION_COLOR,
    PRECISION_COLORS,
    _layout,
    _note,
    _number,
)
from workbench.viz.estimate_charts import label_estimate
from workbench.words import counted

PARETO_LINE = "#222222"
RECOMMENDED_COLOR = "#d62728"
MARKERS = ("circle", "square", "diamond", "triangle-up", "cross", "x")
UNLISTED = 6  # at most this many skipped trials are named under a chart, then "and N more"
# The trial table for reading (the tab, the report): configuration, then what was measured.
READABLE_COLUMNS = ("trial", "status", "percent_converted", "engines", "latency_ms",
                    "latency_p99_ms", "speedup", "max_abs_error", "top1_agreement",
                    "measured on", "worker", "pareto", "recommended", "reason")


def trial_label(row: dict[str, Any]) -> str:
    """A configuration's short name, in the words of the runs' names: "FP16 min 3
    dynamic/Optimal", plus denylist and limit."""
    parts = [str(row.get("precision_mode", "?")),
             f"min {_int_text(row.get('minimum_segment_size'))}"]
    if row.get("use_dynamic_shape") is True:
        strategy = row.get("dynamic_shape_profile_strategy")
        parts.append(f"dynamic/{strategy}" if _present(strategy) else "dynamic")
    if _present(row.get("denylist")) and str(row["denylist"]) not in ("", "[]"):
        parts.append(f"deny {_text(row['denylist'])}")
    if _number(row.get("max_engines")) not in (None, DEFAULT_MAX_ENGINES):
        parts.append(f"max engines {_int_text(row['max_engines'])}")
    return " ".join(parts)


def pareto_chart(table: pd.DataFrame) -> go.Figure:
    """Latency against max error per finished trial: colour by precision, size by % converted;
    the Pareto set highlighted and joined, the recommended trial starred, params on hover.
    With estimates for a target GPU (`estimated_ms`), latency is the estimated one, said so
    in the title and the axis, with the estimate's label under the plot."""
    target = estimate_target(table)
    latency = "estimated_ms" if target else "latency_ms"
    rows, left_out = _plottable(table, (latency, "max_abs_error"))
    rows = [{**r, "latency_ms": r[latency]} for r in rows]  # the plane's x, whichever it is
    fig = go.Figure()
    for precision in dict.fromkeys(str(r.get("precision_mode")) for r in rows):
        group = [r for r in rows if str(r.get("precision_mode")) == precision]
        fig.add_trace(go.Scatter(
            name=precision, x=[r["latency_ms"] for r in group],
            y=[r["max_abs_error"] for r in group], mode="markers",
            marker={"color": PRECISION_COLORS.get(precision, OTHER_PRECISION_COLOR),
                    "size": [_marker_size(r.get("percent_converted")) for r in group],
                    "line": {"color": [PARETO_LINE if r.get("pareto") is True else "#ffffff"
                                       for r in group],
                             "width": [2.5 if r.get("pareto") is True else 1 for r in group]},
                    "opacity": 0.9},
            customdata=[_hover(r) for r in group], meta={"trials": [r["trial_id"] for r in group]},
            hovertemplate="%{customdata}<extra></extra>",
        ))
    front = _plane_front([r for r in rows if r.get("pareto") is True])
    fig.add_trace(go.Scatter(
        name="Pareto front (latency vs error)", x=[r["latency_ms"] for r in front],
        y=[r["max_abs_error"] for r in front], mode="lines", line_shape="hv",
        line={"color": PARETO_LINE, "width": 1.5, "dash": "dot"}, hoverinfo="skip",
        meta={"trials": [r["trial_id"] for r in front]},
    ))
    chosen = [r for r in rows if r.get("recommended") is True]
    fig.add_trace(go.Scatter(
        name="recommended", x=[r["latency_ms"] for r in chosen],
        y=[r["max_abs_error"] for r in chosen], mode="markers+text",
        marker={"symbol": "star", "size": 20, "color": RECOMMENDED_COLOR,
                "line": {"color": "#ffffff", "width": 1}},
        text=["recommended"] * len(chosen), textposition="top center", cliponaxis=False,
        textfont={"color": RECOMMENDED_COLOR}, customdata=[_hover(r) for r in chosen],
        hovertemplate="<b>recommended</b><br>%{customdata}<extra></extra>",
        meta={"trials": [r["trial_id"] for r in chosen]},
    ))
    errors = [r["max_abs_error"] for r in rows]
    title = f"Latency estimated for {target['gpu']} against accuracy" if target else \
        "Latency against accuracy"
    _layout(fig, _title(title, rows, "marker size: % converted; ringed: "
                        "Pareto set (latency, error, % converted); dotted: its front in this "
                        "plane"), height=480)
    fig.update_layout(legend={"title": {"text": "precision"}})
    fig.update_xaxes(title_text=(
        f"latency per call estimated for {target['gpu']} at batch {target['batch_size']} (ms)"
        if target else f"latency per call, mean (ms){_produced_by(rows)}"), rangemode="tozero")
    # Errors span decades (FP32 1e-6, FP16 1e-3): log, unless a zero error cannot be shown so.
    log = bool(errors) and min(errors) > 0
    fig.update_yaxes(title_text="max abs error vs native TF" + (" (log)" if log else ""),
                     type="log" if log else "linear", exponentformat="e")
    _list_left_out(fig, left_out, "not plotted")
    if target:
        label_estimate(fig, target["label"])
    return fig


def estimate_target(table: pd.DataFrame) -> dict[str, Any] | None:
    """The table's target GPU ({"gpu", "batch_size", "label"}) when it holds estimates."""
    target = table.attrs.get("estimate")
    has = "estimated_ms" in table and table["estimated_ms"].notna().any()
    return target if target and has else None


def estimated_latency_chart(table: pd.DataFrame) -> go.Figure:
    """Estimated latency per configuration for the target GPU, native TF's estimate as a
    line: the ranking `tune --target-gpu` uses, apart from the measured chart."""
    target = estimate_target(table) or {"gpu": "?", "batch_size": 1, "label": "estimated"}
    rows, left_out = _plottable(table, ("estimated_ms",))
    rows.sort(key=lambda r: r["estimated_ms"])
    labels = _unique_labels(rows)
    fig = go.Figure()
    fig.add_trace(go.Bar(
        name=f"converted, estimated for {target['gpu']}", x=labels,
        y=[r["estimated_ms"] for r in rows],
        marker={"color": [PRECISION_COLORS.get(str(r.get("precision_mode")),
                                               OTHER_PRECISION_COLOR) for r in rows],
                "line": {"color": [RECOMMENDED_COLOR if r.get("recommended") is True
                                   else "rgba(0,0,0,0)" for r in rows], "width": 3}},
        texttemplate="%{y:.3~g} ms", textposition="inside", insidetextanchor="start",
        customdata=[f"{_hover(r)}<br>engines: {r.get('engines')}; estimated "
                    f"{_number(r.get('estimated_speedup')) or float('nan'):.2f}× native TF"
                    for r in rows],
        hovertemplate="%{customdata}<extra></extra>",
    ))
    native = [_number(r.get("estimated_native_ms")) for r in rows]
    if rows and native[0] is not None:
        fig.add_hline(y=native[0], line={"dash": "dash", "color": LATENCY_COLORS[0]},
                      annotation_text=f"native TF, estimated ({native[0]:.3g} ms)",
                      annotation_position="top left")
    _layout(fig, _title(f"Estimated latency on {target['gpu']} per configuration", rows,
                        f"batch {target['batch_size']}; estimated, not measured; outlined "
                        "red: recommended"), height=max(420, 300 + 8 * len(rows)),
            showlegend=True)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels,
                     tickangle=-30)
    fig.update_layout(legend={"y": -0.3})
    fig.update_yaxes(title_text=f"ms per call, estimated for {target['gpu']}",
                     rangemode="tozero")
    _list_left_out(fig, left_out, "not estimated", below=0.42)
    label_estimate(fig, target["label"])
    return fig


def configuration_latency_chart(table: pd.DataFrame) -> go.Figure:
    """Mean latency per configuration, whiskers from p50 to p99, one colour per backend and
    device that measured it (named in the legend and hover: every timing says what produced it)."""
    rows, left_out = _plottable(table, ("latency_ms",))
    rows.sort(key=lambda r: r["latency_ms"])
    labels = _unique_labels(rows)
    fig = go.Figure()
    producers = list(dict.fromkeys(_producer(r) for r in rows))
    for index, producer in enumerate(producers):
        keep = [_producer(r) == producer for r in rows]
        group = [r for r, k in zip(rows, keep, strict=True) if k]
        means = [r["latency_ms"] for r in group]
        p50 = [_number(r.get("latency_p50_ms")) for r in group]
        p99 = [_number(r.get("latency_p99_ms")) for r in group]
        fig.add_trace(go.Bar(
            name=f"measured with {producer}",
            x=[label for label, k in zip(labels, keep, strict=True) if k], y=means,
            marker={"color": LATENCY_COLORS[1:][index % (len(LATENCY_COLORS) - 1)],
                    "line": {"color": [RECOMMENDED_COLOR if r.get("recommended") is True
                                       else "rgba(0,0,0,0)" for r in group], "width": 3}},
            error_y={"type": "data", "symmetric": False,
                     "array": [max(0.0, (h if h is not None else m) - m)
                               for h, m in zip(p99, means, strict=True)],
                     "arrayminus": [max(0.0, m - (lo if lo is not None else m))
                                    for lo, m in zip(p50, means, strict=True)]},
            # At the bar's foot: the whiskers start at its top.
            texttemplate="%{y:.3~g} ms", textposition="inside", insidetextanchor="start",
            customdata=[_hover(r) for r in group], meta={"producer": producer},
            hovertemplate="%{customdata}<extra></extra>",
        ))
    _layout(fig, _title("Latency per configuration (mean; whiskers from p50 to p99)", rows,
                        "outlined red: recommended"), height=max(420, 300 + 8 * len(rows)),
            showlegend=True)  # even with one trace: the legend says what measured it
    # Slanted labels need room: the legend and the list of left-out trials go lower.
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels,
                     tickangle=-30)
    fig.update_layout(legend={"y": -0.3})
    fig.update_yaxes(title_text="ms per call", rangemode="tozero")
    _list_left_out(fig, left_out, "not timed", below=0.42)
    return fig


def conversion_chart(table: pd.DataFrame) -> go.Figure:
    """% converted against minimum_segment_size, one line per precision (and per other setting
    that varies, dashed when dynamic shape is on)."""
    rows, left_out = _plottable(table, ("percent_converted", "minimum_segment_size"),
                                statuses=None)
    fig = go.Figure()
    lines = _lines(rows)
    for index, (name, group) in enumerate(lines.items()):
        group.sort(key=lambda r: r["minimum_segment_size"])
        precision = str(group[0].get("precision_mode"))
        # Precision rarely changes what converts, so lines coincide: earlier ones are drawn
        # wider, with other markers, to stay visible under later ones.
        wider = len(lines) - 1 - index
        fig.add_trace(go.Scatter(
            name=name, x=[r["minimum_segment_size"] for r in group],
            y=[r["percent_converted"] for r in group], mode="lines+markers",
            line={"color": PRECISION_COLORS.get(precision, OTHER_PRECISION_COLOR),
                  "width": 2 + 3 * wider,
                  "dash": "dash" if group[0].get("use_dynamic_shape") is True else "solid"},
            marker={"size": 8 + 4 * wider, "symbol": MARKERS[index % len(MARKERS)]},
            customdata=[_hover(r) for r in group],
            hovertemplate="%{customdata}<extra></extra>",
        ))
    _layout(fig, _title("Conversion against minimum segment size", rows, "one line per "
                        "precision"), height=440)
    fig.update_layout(legend={"title": {"text": "configuration"}})
    fig.update_xaxes(title_text="minimum segment size (effective nodes)", tickmode="array",
                     tickvals=sorted({r["minimum_segment_size"] for r in rows}))
    fig.update_yaxes(title_text="nodes converted (%)", range=[0, 105])
    _list_left_out(fig, left_out, "not converted")
    return fig


def tune_figures(table: pd.DataFrame) -> dict[str, go.Figure]:
    """The charts by name (with estimates, "estimated latency" too), as
    `TuneResult.figures()` and the report show them."""
    figures = {"pareto": pareto_chart(table), "latency": configuration_latency_chart(table)}
    if estimate_target(table):
        figures["estimated latency"] = estimated_latency_chart(table)
    figures["conversion"] = conversion_chart(table)
    return figures


def readable_table(table: pd.DataFrame) -> pd.DataFrame:
    """The trial table for reading: a "trial" label, a "measured on" column, 3 digits."""
    if table.empty:
        return pd.DataFrame(columns=list(READABLE_COLUMNS))
    readable = table.copy()
    rows = readable.to_dict("records")
    readable["trial"] = [trial_label(r) for r in rows]
    readable["measured on"] = [_producer(r) if r.get("backend") else "" for r in rows]
    columns = list(READABLE_COLUMNS)
    target = estimate_target(table)
    if target:  # the estimate's columns first, named with their GPU: never read as measured
        estimated = {"estimated_ms": f"estimated ms on {target['gpu']}",
                     "estimated_speedup": "estimated speed-up"}
        readable = readable.rename(columns=estimated)
        columns[2:2] = list(estimated.values())
    return readable[columns].astype(object).map(_cell)


# rows


def _plottable(table: pd.DataFrame, needed: tuple[str, ...], statuses: tuple | None = ("ok",)
               ) -> tuple[list[dict], list[str]]:
    """Rows with every `needed` figure (numbers, NaN as missing) and, with `statuses`, one of
    those statuses; the others as "label: why" lines."""
    rows, left_out = [], []
    for row in table.to_dict("records"):
        row = {k: (None if _missing(v) else v) for k, v in row.items()}
        status = row.get("status") or "?"
        missing = [c for c in needed if _number(row.get(c)) is None]
        if statuses is not None and status not in statuses:
            left_out.append(f"{trial_label(row)}: {status}" + (
                f" ({_short(row['reason'])})" if row.get("reason") else ""))
        elif missing:
            left_out.append(f"{trial_label(row)}: no {', '.join(missing)}"
                            + (f" ({status})" if status != "ok" else ""))
        else:
            rows.append({**row, **{c: _number(row[c]) for c in needed}})
    return rows, left_out


def _lines(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped into lines: one per configuration but for minimum_segment_size (so one
    per precision when nothing else varies), named by its label without the threshold."""
    lines: dict[str, list[dict]] = {}
    for row in rows:
        name = re.sub(r" min \S+", "", trial_label(row), count=1)
        lines.setdefault(name, []).append(row)
    return lines


def _plane_front(rows: list[dict]) -> list[dict]:
    """The rows no other row beats on both latency and error, fastest first: the Pareto set is
    over three objectives, so some of its trials are beaten in this plane (they convert more)
    and joining them all would zigzag."""
    front: list[dict] = []
    for row in sorted(rows, key=lambda r: (r["latency_ms"], r["max_abs_error"])):
        if not front or row["max_abs_error"] < front[-1]["max_abs_error"]:
            front.append(row)
    return front


def _unique_labels(rows: list[dict]) -> list[str]:
    labels = [trial_label(r) for r in rows]
    return [label if labels.count(label) == 1 else f"{label} [{str(r['trial_id'])[:6]}]"
            for label, r in zip(labels, rows, strict=True)]


# texts


def _hover(row: dict) -> str:
    lines = [f"<b>{trial_label(row)}</b> (trial {row.get('trial_id')})"]
    figures = [
        ("latency", row.get("latency_ms"), "{:.3f} ms mean"),
        ("p50", row.get("latency_p50_ms"), "{:.3f}"),
        ("p99", row.get("latency_p99_ms"), "{:.3f}"),
        ("speed-up", row.get("speedup"), "{:.2f}x vs native TF"),
        ("max error", row.get("max_abs_error"), "{:.3g}"),
        ("top-1", row.get("top1_agreement"), "{:.1%}"),
        ("converted", row.get("percent_converted"), "{:.1f}%"),
        ("engines", row.get("engines"), "{:.0f}"),
    ]
    shown = [f"{name} {fmt.format(v)}" for name, v, fmt in figures if _number(v) is not None]
    lines += [", ".join(shown[:4]), ", ".join(shown[4:])]
    if row.get("backend") or row.get("device"):
        lines.append(f"measured with {_producer(row)} on worker {row.get('worker') or '?'}")
    if row.get("pareto") is True:
        lines.append("in the Pareto set")
    return "<br>".join(line for line in lines if line)


def _producer(row: dict) -> str:
    return f"{row.get('backend') or 'unknown backend'} on {row.get('device') or 'unknown device'}"


def _produced_by(rows: list[dict]) -> str:
    """The backends and devices, on a line of their own (one line overflowed narrow charts)."""
    producers = list(dict.fromkeys(_producer(r) for r in rows))
    return f"<br><sup>{', '.join(producers)}</sup>" if producers else ""


def _title(title: str, rows: list[dict], note: str) -> str:
    return f"{title}<br><sup>{counted(len(rows), 'trial')}; {note}</sup>"


def _list_left_out(fig: go.Figure, left_out: list[str], verb: str, below: float = 0.3
                   ) -> None:
    """Names the trials a chart skips (also in `fig.layout.meta["left_out"]`): below the
    legend, or in the middle of a chart that has nothing else to show."""
    fig.update_layout(meta={"left_out": left_out})
    if not left_out:
        return
    shown = left_out[:UNLISTED] + ([f"and {len(left_out) - UNLISTED} more"]
                                   if len(left_out) > UNLISTED else [])
    text = "<br>".join([f"{counted(len(left_out), 'trial')} {verb}:"]
                       + [f"- {line}" for line in shown])
    if not any(len(trace.x or ()) for trace in fig.data):
        _note(fig, text)
        return
    fig.add_annotation(text=text, x=0, y=-below, xref="paper", yref="paper", yanchor="top",
                       xanchor="left", showarrow=False, align="left",
                       font={"size": 11, "color": "#b3261e"})
    fig.update_layout(height=fig.layout.height + 18 * (len(shown) + 1),
                      margin={"b": 110 + 18 * (len(shown) + 1)})


def _cell(value: Any) -> Any:
    if value is None or value is pd.NA or _missing(value):
        return ""
    return f"{value:.3g}" if isinstance(value, float) else value


def _marker_size(percent: Any) -> float:
    value = _number(percent)
    return 8.0 if value is None else 8.0 + 0.16 * value  # 8 px at 0%, 24 px at 100%


def _short(reason: Any, width: int = 60) -> str:
    text = str(reason).splitlines()[0] if str(reason) else ""
    return text if len(text) <= width else text[: width - 3] + "..."


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def _int_text(value: Any) -> str:
    number = _number(value)
    return "?" if number is None else f"{number:.0f}"


def _present(value: Any) -> bool:
    return value is not None and not _missing(value)


def _missing(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
