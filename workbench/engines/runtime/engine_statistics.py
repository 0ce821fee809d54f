"""What a converted model's engine ops did: per engine, the engines cached and built, the calls
served by an engine or natively, and why the native segment ran."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from workbench.engines.runtime.engine_op import EngineOp

ENGINE_TABLE_COLUMNS = ["engine", "cached_engines", "builds", "failed_builds", "engine_calls",
                        "compiled_calls", "native_calls", "native_reasons"]


def engine_table(ops: Mapping[str, EngineOp]) -> pd.DataFrame:
    """One row per engine op (`ENGINE_TABLE_COLUMNS`; compiled calls are the engine calls
    the compiled engine op served)."""
    rows = []
    for name, op in ops.items():
        stats = op.stats
        rows.append({
            "engine": name, "cached_engines": len(op.engines()), "builds": stats.builds,
            "failed_builds": stats.failed_builds, "engine_calls": stats.engine_calls,
            "compiled_calls": stats.compiled_calls, "native_calls": stats.native_calls,
            "native_reasons": "; ".join(op.fallback_reasons),
        })
    return pd.DataFrame(rows, columns=ENGINE_TABLE_COLUMNS)


def native_runs(ops: Mapping[str, EngineOp]) -> dict[str, dict[str, int]]:
    """engine -> reason -> count, for every call its native segment served."""
    return {name: op.fallback_reasons for name, op in ops.items() if op.fallback_reasons}
