"""What-if: which rejected op types hold the most nodes out of engines.

For each op type TF-TRT rejected, the model is segmented again with that op on TF-TRT's fake
list (`TF_TRT_OP_FAKELIST`): the op then passes the converter checks, but its inputs are still
converted and the segmenter's own checks still apply (docs/tftrt-behaviour.md#candidates). A
denylisted op is also
taken off the denylist, since the question is what converting it would give. The difference in
nodes inside engines is what supporting that op would gain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pandas as pd

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, UnconvertedNode
from workbench.conversion.session import ConversionSession
from workbench.conversion.validator import INPUT_FAILURE

COLUMNS = (
    "op", "rejected", "converted_now", "converted_if_supported", "gained",
    "engines_now", "engines_if_supported", "top_reason",
)
EXCLUDED_REASON = "excluded by segmenter option. Most likely an input or output node."
# Reasons a fake converter cannot lift: the segmenter's checks before the validator (device,
# implicit-batch translatability, dynamic non-batch dims) and the validator's input conversion,
# which runs for fake ops too. A type rejected only for these gains nothing, so it is not re-run.
UNLIFTABLE_REASONS = (
    "node can't be placed on GPU",
    "implicit batch mode requires input shape with at least two dimensions",
    "dynamic non-batch dimensions not allowed",
)
IGNORED_OPS = frozenset({"NoOp"})  # _SOURCE and _SINK


def blocking_op_types(
    session: ConversionSession, params: ConversionParams, top: int | None = 10
) -> pd.DataFrame:
    """One row per rejected op type (input/output nodes and NoOps aside), most gained first.

    `converted_*` count graph nodes inside engines, each once. `summary()`'s count also has
    the Consts copied into each engine, so merging two engines that share a Const would show as
    a loss there. `gained` is the difference; `top_reason` the commonest rejection reason.
    """
    now = session.convert(params)
    rejected = _rejected_by_op(now)
    rows = [_row(session, params, now, op, nodes) for op, nodes in rejected.items()]
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table = table.sort_values(
        ["gained", "rejected", "op"], ascending=[False, False, True], kind="stable"
    ).reset_index(drop=True)
    return table if top is None else table.head(top)


def _rejected_by_op(result: ConversionResult) -> dict[str, list[UnconvertedNode]]:
    """Nodes in TF-TRT's non-conversion report, by op type, without inputs/outputs and NoOps."""
    by_op: dict[str, list[UnconvertedNode]] = {}
    for node in result.unconverted:
        if node.in_tftrt_report and node.reason != EXCLUDED_REASON and node.op not in IGNORED_OPS:
            by_op.setdefault(node.op, []).append(node)
    return by_op


def _row(
    session: ConversionSession,
    params: ConversionParams,
    now: ConversionResult,
    op: str,
    nodes: list[UnconvertedNode],
) -> dict:
    if all(_unliftable(n.reason) for n in nodes):
        then = now
    else:
        allowed = replace(params, denylist=tuple(d for d in params.denylist if d != op))
        then = session.convert(allowed, assume_supported=frozenset({op}))
    return {
        "op": op,
        "rejected": len(nodes),
        "converted_now": _in_engines(now),
        "converted_if_supported": _in_engines(then),
        "gained": _in_engines(then) - _in_engines(now),
        "engines_now": len(now.engines),
        "engines_if_supported": len(then.engines),
        "top_reason": Counter(n.reason for n in nodes).most_common(1)[0][0],
    }


def _in_engines(result: ConversionResult) -> int:
    return sum(len(engine.nodes) for engine in result.engines)


def _unliftable(reason: str) -> bool:
    return reason in UNLIFTABLE_REASONS or reason.startswith(INPUT_FAILURE)
