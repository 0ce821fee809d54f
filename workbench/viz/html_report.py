"""The workbench's view as one static, offline HTML page (`workbench report MODEL -o FILE`).

It renders the same `ConversionView` as the notebook app's tabs (`workbench.viz.view`), so
the two agree by construction. Everything is inside the file: CSS, the SVG drawings and
plotly.js (inlined once, before the charts that need it), so the page opens anywhere, with no
network and no kernel.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.checks.conversion_check import ConversionCheck
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import Recommendation
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.conversion.whatif import blocking_op_types
from workbench.errors import WorkbenchError
from workbench.profiling.estimate.conversion import target_gpu_name
from workbench.tf_compat import graph_origin
from workbench.viz.view import ConversionView, Headline, build_view

CHART_HEIGHT = "440px"
PARAM_LABELS = (
    ("precision_mode", "Precision"),
    ("minimum_segment_size", "minimum_segment_size"),
    ("use_dynamic_shape", "use_dynamic_shape"),
    ("dynamic_shape_profile_strategy", "Profile strategy"),
    ("denylist", "Denylist"),
    ("max_engines", "Max engines"),
)
RECOMMENDATION_LABELS = (
    ("fewest_engines", "Fewest engines"),
    ("moderate", "Moderate"),
    ("current", "Current"),
)

CSS = """
:root { --ink: #1f2933; --muted: #616e7c; --line: #d9e2ec; --panel: #f5f7fa;
        --accent: #76b900; --warn: #c05621; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Helvetica, Arial,
       sans-serif; color: var(--ink); background: #fff; }
header { padding: 28px 40px 20px; border-bottom: 4px solid var(--accent); background: #111827;
         color: #f9fafb; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 600; }
header p { margin: 2px 0; color: #cbd2d9; }
header code { color: #f9fafb; }
main { padding: 8px 40px 48px; max-width: 1400px; }
section { margin-top: 32px; }
h2 { font-size: 19px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 1px solid
     var(--line); }
h3 { font-size: 16px; margin: 18px 0 8px; }
p.note { color: var(--muted); margin: 4px 0 10px; }
.cards { display: flex; gap: 16px; flex-wrap: wrap; }
.card { flex: 1 1 180px; padding: 14px 18px; border: 1px solid var(--line); border-radius: 8px;
        background: var(--panel); }
.card .value { font-size: 30px; font-weight: 650; }
.card .label { color: var(--muted); font-size: 13px; text-transform: uppercase;
               letter-spacing: .04em; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0; }
th, td { text-align: left; padding: 5px 12px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.params td:first-child { color: var(--muted); }
pre { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
      background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
      padding: 12px 14px; overflow: auto; max-height: 900px; }
.scroll { max-height: 640px; overflow: auto; border-bottom: 1px solid var(--line); }
.scroll th { position: sticky; top: 0; }
.graph { border: 1px solid var(--line); border-radius: 6px; overflow: auto; max-height: 900px;
         padding: 8px; background: #fff; }
.graph svg { max-width: 100%; height: auto; }
.chart { border: 1px solid var(--line); border-radius: 6px; padding: 4px; margin: 8px 0 16px; }
ul.recs li { margin: 4px 0; }
details summary { cursor: pointer; color: var(--muted); margin: 6px 0; }
.empty { color: var(--muted); font-style: italic; }
"""


def collect(session: ConversionSession, params: ConversionParams,
            check: ConversionCheck | None = None,
            tensorrt: Mapping[str, Mapping[str, Any]] | None = None,
            per_engine: Any = None) -> ConversionView:
    """The report's view: the app's, with the blocking op types always measured."""
    return build_view(session, params, check=check,
                      blocking=blocking_op_types(session, params), tensorrt=tensorrt,
                      per_engine=per_engine)


def html_report(session: ConversionSession, params: ConversionParams,
                check: ConversionCheck | None = None, tuning: Any = None,
                tensorrt: Mapping[str, Mapping[str, Any]] | None = None,
                per_engine: Any = None, target_gpu: str | None = None,
                batch_sizes: Sequence[int] = (1,)) -> str:
    """The whole report page for converting `session`'s model with `params`; with `check` (a
    `ConversionCheck` of the same parameters), its validation and latency too; with `tuning`
    (a `TuneResult`), the search's trials, Pareto set, recommendation and charts; with
    `tensorrt` (engine -> TensorRT's verdict object), TensorRT's verdict on each engine; with
    `per_engine` (a `PerEngineAccuracy`), the engines ranked by error and their remedies;
    with `target_gpu`, the latency estimated for that GPU at `batch_sizes` and along the
    sweep (`estimate_html`)."""
    data = collect(session, params, check, tensorrt, per_engine=per_engine)
    estimates = _estimates(session, data, target_gpu, batch_sizes) if target_gpu else []
    sections = [
        _section("Parameters", _params_table(data.params)),
        _section("Result", _headline(data.headline) + _knob_notes(data.knob_notes)),
        _section("Advice", _advice(data)),
        _section("TF-TRT summary()", _summary(data)),
        *([_section("TensorRT's verdict", _tensorrt(data.tensorrt))] if data.tensorrt else []),
        _section("TF-TRT non-conversion report", _nonconversion(data)),
        _section("Charts", _charts(data)),
        *([_section("Validation and latency", _validation(data))] if data.check else []),
        *([_section(f"GPU latency estimated for {target_gpu_name(target_gpu)}",
                    estimate_html(session, data, estimates, batch_sizes))]
          if target_gpu else []),
        *([_section("Per-engine accuracy", _per_engine(data))] if data.per_engine else []),
        *([_section("Tuning", tuning_html(tuning))] if tuning is not None else []),
        _section("Converted graph", _graph_view("converted", data, estimates)),
        _section("Full graph by engine", _graph_view("full", data, estimates)),
        _section("Nodes outside engines", _unconverted(data.report)),
    ]
    return _page(_title(data.result), _header(data), sections)


def write_html_report(
    session: ConversionSession, params: ConversionParams, path: str | os.PathLike,
    check: ConversionCheck | None = None, tuning: Any = None,
    tensorrt: Mapping[str, Mapping[str, Any]] | None = None, per_engine: Any = None,
    target_gpu: str | None = None, batch_sizes: Sequence[int] = (1,),
) -> Path:
    """Writes the report to `path` (whole or not at all) and returns the path."""
    target = check_report_path(path)
    text = html_report(session, params, check, tuning, tensorrt, per_engine=per_engine,
                       target_gpu=target_gpu, batch_sizes=batch_sizes)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise WorkbenchError(f"cannot write the report to {target}: {exc.strerror}") from None
    return target


def check_report_path(path: str | os.PathLike) -> Path:
    """Refuses a target in a missing directory: better said before minutes of work than after."""
    target = Path(path)
    if not target.parent.is_dir():
        raise WorkbenchError(f"cannot write the report to {target}: no directory {target.parent}")
    return target


# --- page pieces ---------------------------------------------------------------------------

def _title(result: ConversionResult) -> str:
    return f"TF-TRT Workbench report: {Path(str(result.model)).name or result.model}"


def _page(title: str, header: str, sections: Iterable[str]) -> str:
    from plotly.offline import get_plotlyjs

    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        header,
        "<main>",
        *sections,
        "</main></body></html>",
    ])


def _header(data: ConversionView) -> str:
    result = data.result
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<header><h1>{escape(_title(result))}</h1>"
        f"<p>Model <code>{escape(str(result.model))}</code>, signature "
        f"<code>{escape(result.signature_key)}</code></p>"
        f"<p>Segmented as TF-TRT 2.16/2.17 would, without a GPU. Generated {generated}.</p>"
        f"<p>{escape(graph_origin(result.tensorflow_version))}</p>"
        + (f"<p>Graph prepared for: {escape(result.prepared_for)}</p>"
           if result.prepared_for else "")
        + "</header>"
    )


def _section(title: str, content: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return f'<section id="{slug}"><h2>{escape(title)}</h2>{content}</section>'


def _params_table(params: ConversionParams) -> str:
    values = params.to_json()
    rows = [(label, _param_text(values[key])) for key, label in PARAM_LABELS]
    return _table(["Parameter", "Value"], rows, css="params")


def _param_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "(none)"
    return "(none)" if value is None else str(value)


def _headline(headline: Headline) -> str:
    cards = [
        (str(headline.engines), "TensorRT engines"),
        (f"{headline.percent_converted:.2f}%", "of ops converted"),
        (f"{headline.converted_nodes} / {headline.total_nodes}", "ops converted / total"),
        (f"{headline.rejected_nodes} in {headline.rejected_op_types} types",
         "non-converted ops reported"),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
        for value, label in cards
    ) + "</div>"


def _knob_notes(notes: tuple[str, ...]) -> str:
    """The knobs that cannot change anything visible for this model, and why (as in the app)."""
    if not notes:
        return ""
    return '<ul class="note">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"


def _advice(data: ConversionView) -> str:
    if not data.advice:
        return '<p class="empty">No other TF-TRT setting converts more nodes or makes fewer ' \
               "engines.</p>"
    rows = [(a.setting, a.value_words, a.engines, f"{a.percent_converted:.2f}%",
             a.largest_engine, a.why) for a in data.advice]
    return ('<p class="note">Each setting converted for real, largest gain first (fewer nodes '
            "left to TensorFlow, then fewer engines).</p>"
            + _table(["Setting", "Value", "Engines", "Converted", "Largest engine", "Why"], rows,
                     numeric={2, 4}))


def _tensorrt(verdicts: Mapping[str, Mapping[str, Any]]) -> str:
    """Per engine: built or refused, build seconds, plan size, layers, TensorRT's own error."""
    builders = sorted({str(v.get("builder")) for v in verdicts.values()})
    rows = [(name, "built" if v["built"] else "parsed, not built" if v["parsed"] else "refused",
             v.get("build_s") if v["built"] else "",
             f"{v['plan_bytes'] / 1e6:.2f}" if v.get("plan_bytes") else "",
             v.get("layers") if v.get("layers") is not None else "", v.get("error") or "")
            for name, v in sorted(verdicts.items())]
    table = _table(["Engine", "Verdict", "Build s", "Plan MB", "Layers", "TensorRT's error"],
                   rows, numeric={2, 3, 4})
    return (table + f'<p class="note">Each engine\'s ONNX parsed and built into a plan by '
            f"{escape(', '.join(builders))}; a refused engine still runs on the active "
            "backend.</p>")


def _summary(data: ConversionView) -> str:
    engines = data.report.engines
    table = _table(
        ["Engine", "# Nodes", "Effective size", "# Inputs", "# Outputs", "Input shapes",
         "Output shapes"],
        [
            (row.name, row.nodes, row.effective_size, row.inputs, row.outputs,
             _shapes(row.input_shapes), _shapes(row.output_shapes))
            for row in engines.itertuples()
        ],
        numeric={1, 2, 3, 4},
    )
    text = data.summary_text
    return (
        (table if len(engines) else '<p class="empty">No engines.</p>')
        + '<p class="note">As <code>converter.summary()</code> prints it:</p>'
        + f"<pre>{escape(text)}</pre>"
    )


def _shapes(shapes: Sequence[Any]) -> str:
    return ", ".join(str(shape) for shape in shapes)


def _nonconversion(data: ConversionView) -> str:
    frame = data.report.nonconversion
    if not len(frame):
        return '<p class="empty">TF-TRT reports no non-converted ops.</p>'
    totals = frame.groupby("op", sort=False)["count"].sum()
    first_of_op = ~frame["op"].duplicated()  # op and total once, on the op's first reason
    table = _table(
        ["Op", "Total", "Reason", "Count"],
        [
            (row.op, totals[row.op], row.reason, row.count) if first
            else ("", "", row.reason, row.count)
            for row, first in zip(frame.itertuples(), first_of_op, strict=True)
        ],
        numeric={1, 3},
    )
    text = data.nonconversion_text
    return (
        f'<div class="scroll">{table}</div>'
        + "<details><summary>The report as TF-TRT logs it "
        "(TF_TRT_SHOW_DETAILED_REPORT=1)</summary>"
        + f"<pre>{escape(text)}</pre></details>"
    )


def _charts(data: ConversionView) -> str:
    from workbench.viz.charts import blocking_ops_chart, engine_sizes_chart, sweep_chart

    parts = [
        "<h3>minimum_segment_size sweep</h3>",
        _chart("sweep", sweep_chart(data.sweep, data.recommendation)),
        _recommendations(data.recommendation),
        "<h3>Engine sizes</h3>",
    ]
    if data.result.engines:
        parts.append(_chart("engine-sizes", engine_sizes_chart(data.result)))
    else:
        parts.append('<p class="empty">No engines at these parameters.</p>')
    parts.append("<h3>Op types that block conversion</h3>")
    if data.blocking is not None and len(data.blocking):
        parts += [
            '<p class="note">Nodes converted if TF-TRT supported each rejected op type '
            "(the model segmented again with that op on TF_TRT_OP_FAKELIST).</p>",
            _chart("blocking-ops", blocking_ops_chart(data.blocking)),
        ]
    else:
        parts.append('<p class="empty">No rejected op types.</p>')
    return "".join(parts)


def _validation(data: ConversionView) -> str:
    """The check's verdict, one line per output, latency per batch, and its chart (said to be
    of other settings when it is, as the app's Validation tab says)."""
    from workbench.viz.charts import latency_chart

    check = data.check
    stale = "" if data.check_is_current else (
        '<p class="note">These figures were measured with other settings than this report\'s.</p>')
    lines = "".join(f"<p>{escape(line)}</p>" for line in check.summary(outputs=True).splitlines())
    return stale + lines + _chart("latency", latency_chart(check.latency))


def _per_engine(data: ConversionView) -> str:
    """Engines worst first with their measured remedies, and the per-engine error chart."""
    from workbench.viz.charts import per_engine_chart

    report = data.per_engine
    stale = "" if data.engine_errors is not None else (
        '<p class="note">Measured with other settings than this report\'s.</p>')
    head, *lines = str(report).splitlines()
    return (stale + f"<p>{escape(head)}</p><pre>{escape(chr(10).join(lines))}</pre>"
            + _chart("per-engine", per_engine_chart(report.table())))


def _estimates(session: ConversionSession, data: ConversionView, gpu: str,
               batch_sizes: Sequence[int]) -> list[dict]:
    """The conversion's latency estimated for `gpu` at each batch size."""
    from workbench.profiling.estimate.conversion import conversion_estimate

    return [conversion_estimate(session, data.params, gpu, b, data.result, data.tensorrt)
            for b in batch_sizes]


def estimate_html(session: ConversionSession, data: ConversionView, estimates: Sequence[dict],
                  batch_sizes: Sequence[int]) -> str:
    """The conversion's latency estimated for a GPU (`estimates`: one per batch size), per
    engine, and along the minimum_segment_size sweep, the estimate's label (its measured
    error) first."""
    from workbench.profiling.estimate.conversion import sweep_advice, sweep_estimate
    from workbench.viz.estimate_charts import estimate_table, sweep_estimate_chart

    gpu = estimates[0]["gpu"]
    engines = pd.DataFrame({"engine": list(estimates[0]["engines"]),
                            f"estimated ms at batch {batch_sizes[0]}":
                                [round(v, 4) for v in estimates[0]["engines"].values()]})
    sweep = sweep_estimate(session, data.params, data.sweep, gpu, batch_sizes[0])
    return (f'<p class="note">{escape(estimates[0]["label"])}. Estimated, not measured: '
            "the measured figures are in their own sections.</p>"
            + _frame(estimate_table(estimates)) + "<h3>Per engine</h3>" + _frame(engines)
            + "<h3>Along the minimum_segment_size sweep</h3>"
            + (f"<p>{escape(advice)}.</p>" if (advice := sweep_advice(
                sweep, data.params.minimum_segment_size)) else "")
            + _chart("estimate-sweep", sweep_estimate_chart(
                sweep, current=data.params.minimum_segment_size)))


def tuning_html(result: Any) -> str:
    """A `TuneResult` as HTML: counts, the recommendation and why, the Pareto set, the three
    charts and every trial (failed ones with their reason)."""
    from workbench.viz.tune_charts import readable_table, trial_label, tune_figures

    table = result.table
    counts = ", ".join(f"{n} {status}" for status, n in table["status"].value_counts().items())
    parts = [f'<p class="note">{len(table)} trials ({escape(counts or "none")}) of '
             f"<code>{escape(str(result.model))}</code>, stored in "
             f"<code>{escape(str(result.store))}</code>.</p>"]
    chosen = result.recommended
    parts.append(
        f"<p><b>Recommended: {escape(trial_label(chosen['params']))}</b>, "
        f"{escape(chosen['reason'])}.</p>" if chosen else
        '<p class="empty">No recommendation: no trial finished ok.</p>')
    parts += [f'<p class="note">{escape(p)}</p>' for p in result.problems]
    for name, figure in tune_figures(table).items():
        parts.append(_chart(f"tune-{name}", figure))
    parts.append("<h3>Pareto set</h3>" + _frame(readable_table(result.pareto)))
    parts.append(f"<details><summary>All {len(table)} trials</summary>"
                 f"{_frame(readable_table(table))}</details>")
    return "".join(parts)


def _frame(frame: pd.DataFrame) -> str:
    if frame.empty:
        return '<p class="empty">None.</p>'
    return f'<div class="scroll">{_table(list(frame.columns), frame.itertuples(index=False))}</div>'


def _chart(name: str, figure: Any) -> str:
    html = figure.to_html(
        full_html=False, include_plotlyjs=False, div_id=f"chart-{name}",
        default_height=CHART_HEIGHT, config={"displaylogo": False, "responsive": True},
    )
    return f'<div class="chart">{html}</div>'


def _recommendations(recommendation: Recommendation) -> str:
    items = "".join(
        f"<li><b>{escape(label)}: {getattr(recommendation, key)}</b>. "
        f"{escape(recommendation.notes.get(key, ''))}</li>"
        for key, label in RECOMMENDATION_LABELS
    )
    return f'<p class="note">Recommended values:</p><ul class="recs">{items}</ul>'


def _graph_view(kind: str, data: ConversionView, estimates: Sequence[dict] = ()) -> str:
    """The Segment graph tab's first view of `kind`, by name scope (`workbench graph` opens
    more of it); engines carry TensorRT's kernels when the report has its verdicts, and their
    estimated time at the first batch size when it has a target GPU."""
    from workbench.viz.graphs import inline_svg
    from workbench.viz.overlays import engine_overlays
    from workbench.viz.scope_graphs import scope_drawing

    drawing = scope_drawing(data.graph, data.result, kind, errors=data.engine_errors,
                            overlays=engine_overlays(data.tensorrt,
                                                     estimates[0] if estimates else None))
    return f'<div class="graph" id="graph-{kind}">{inline_svg(drawing.digraph)}</div>'


def _unconverted(report: ConversionReport) -> str:
    frame = report.unconverted
    if not len(frame):
        return '<p class="empty">Every node is inside an engine.</p>'
    rows = [
        (row.name, row.op, row.reason, "yes" if row.in_tftrt_report else "no (workbench)")
        for row in frame.itertuples()
    ]
    table = _table(["Node", "Op", "Reason", "In TF-TRT's report"], rows)
    return (
        f"<details><summary>{len(rows)} nodes outside every engine, and why</summary>"
        f"{table}</details>"
    )


def _table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: set[int] = frozenset(),
    css: str = "",
) -> str:
    def cell(tag: str, index: int, value: Any) -> str:
        cls = ' class="num"' if index in numeric else ""
        return f"<{tag}{cls}>{escape(str(value))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    css_attr = f' class="{css}"' if css else ""
    return f"<table{css_attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
