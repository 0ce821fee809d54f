"""A search's results: the trials, one table, the Pareto set and a recommendation.

The Pareto set is over three objectives, for trials that ran: latency (mean at the first
batch size, lower is better), max abs error against native TensorFlow (lower) and % of nodes
converted (higher); an objective no trial measured is left out. The recommendation is the
fastest Pareto trial whose outputs stay close to native TensorFlow (max error <= ACCURACY_ATOL
and top-1 agreement >= TOP1_MIN where the model classifies), else the most accurate one.

With estimates for a target GPU (`tune(..., target_gpu=...)`), latency is the estimated one
(`estimated_ms`, at the first batch size): the Pareto set and the recommendation rank by it,
and the measured figures stay in their own columns, as what this machine measured.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from workbench.tuning.progress import settings_label
from workbench.tuning.record import TrialRecord
from workbench.words import counted

ACCURACY_ATOL = 1e-2
# Latencies closer than this (relative) are a tie: timings of one setting vary about as much.
LATENCY_TIE = 0.05
TOP1_MIN = 0.99
PARAM_COLUMNS = ("precision_mode", "minimum_segment_size", "use_dynamic_shape",
                 "dynamic_shape_profile_strategy", "denylist", "max_engines")
COLUMNS = ("trial_id", *PARAM_COLUMNS, "status", "reason", "percent_converted", "engines",
           "latency_ms", "latency_p50_ms", "latency_p99_ms", "speedup", "max_abs_error",
           "top1_agreement", "backend", "device", "tensorrt_built", "worker", "pareto",
           "recommended", "seconds")
# column -> True when higher is better
OBJECTIVES = {"latency_ms": False, "max_abs_error": False, "percent_converted": True}
# Added with estimates for a target GPU; "estimated_ms" then stands for "latency_ms".
ESTIMATE_COLUMNS = ("estimated_ms", "estimated_low_ms", "estimated_high_ms",
                    "estimated_native_ms", "estimated_speedup")


class TuneResult:
    """What `tune()` returns; `table`, `pareto` and `recommended` are computed once."""

    def __init__(self, trials: list[TrialRecord], model: str | None = None,
                 store: str | os.PathLike | None = None, problems: list[str] | None = None,
                 estimates: Mapping[str, dict[str, Any]] | None = None):
        self.trials = list(trials)
        self.model, self.store = model, store
        self.problems = list(problems or [])  # stored trials that were ignored, and why
        # trial id -> its estimate for a target GPU (`tuning.estimates`); {} without one
        self.estimates = dict(estimates or {})
        self.table = _table(self.trials)
        if self.estimates:
            _add_estimates(self.table, self.estimates)
        self.table["pareto"] = pareto_mask(self.table)
        self.recommended = recommend(self.table, self.trials)
        chosen = self.recommended["trial_id"] if self.recommended else None
        self.table["recommended"] = self.table["trial_id"] == chosen

    @property
    def pareto(self) -> pd.DataFrame:
        return self.table[self.table["pareto"]]

    def figures(self) -> dict[str, Any]:
        """The plotly charts of the table (`workbench.viz.tune_charts`): the Pareto scatter,
        latency per configuration, conversion against minimum_segment_size per precision."""
        from workbench.viz.tune_charts import tune_figures

        return tune_figures(self.table)

    def to_json(self) -> dict[str, Any]:
        """`{"trials": [...], "pareto": [...], "recommended": {...}}`: the trials as records,
        the Pareto set as the same records, the recommendation (or None)."""
        on_front = set(self.pareto["trial_id"])
        trials = [self._trial_json(t) for t in self.trials]
        document = {"trials": trials,
                    "pareto": [t for t in trials if t["trial_id"] in on_front],
                    "recommended": self.recommended}
        if self.estimates:
            document["estimate"] = dict(self.table.attrs["estimate"])
        return document

    @property
    def target(self) -> dict[str, Any] | None:
        """The target GPU's estimate settings ({"gpu", "batch_size", "label"}), or None."""
        return self.table.attrs.get("estimate")

    def _trial_json(self, trial: TrialRecord) -> dict[str, Any]:
        document = trial.to_dict()
        estimate = self.estimates.get(trial.trial_id)
        if estimate is not None:  # the trial's engines' and native ops' share, estimated
            document["estimate"] = {k: estimate[k] for k in (
                "converted_ms", "converted_low_ms", "converted_high_ms", "native_ms",
                "native_low_ms", "native_high_ms", "engines_ms", "native_ops_ms", "engines")
                if k in estimate}
        return document

    def __repr__(self) -> str:
        counts = self.table["status"].value_counts().to_dict()
        return (f"TuneResult({len(self.trials)} trials: "
                f"{', '.join(f'{n} {s}' for s, n in counts.items())}; "
                f"recommended: {self.recommended['trial_id'] if self.recommended else None})")


def _table(trials: list[TrialRecord]) -> pd.DataFrame:
    rows = []
    for t in trials:
        first = t.first_latency
        rows.append({"trial_id": t.trial_id, **{k: t.params.get(k) for k in PARAM_COLUMNS},
                     "denylist": ",".join(t.params.get("denylist") or ()),
                     "status": t.status, "reason": t.reason,
                     "percent_converted": t.percent_converted, "engines": t.engines,
                     "latency_ms": first.get("mean"), "latency_p50_ms": first.get("p50"),
                     "latency_p99_ms": first.get("p99"), "speedup": t.speedup,
                     "max_abs_error": t.max_abs_error, "top1_agreement": t.top1_agreement,
                     "backend": t.backend, "device": t.device,
                     "tensorrt_built": t.tensorrt_built, "worker": t.worker,
                     "pareto": False, "recommended": False, "seconds": t.seconds})
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in ("percent_converted", "latency_ms", "latency_p50_ms", "latency_p99_ms",
                   "speedup", "max_abs_error", "top1_agreement", "seconds"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype(float)
    for column in ("minimum_segment_size", "max_engines", "engines"):  # NaN for skipped ones
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
    return table


def _add_estimates(table: pd.DataFrame, estimates: Mapping[str, dict[str, Any]]) -> None:
    """The ESTIMATE_COLUMNS from each trial's estimate; the GPU, batch and label in attrs."""
    found = [estimates.get(tid) or {} for tid in table["trial_id"]]
    table["estimated_ms"] = [e.get("converted_ms", math.nan) for e in found]
    table["estimated_low_ms"] = [e.get("converted_low_ms", math.nan) for e in found]
    table["estimated_high_ms"] = [e.get("converted_high_ms", math.nan) for e in found]
    table["estimated_native_ms"] = [e.get("native_ms", math.nan) for e in found]
    table["estimated_speedup"] = table["estimated_native_ms"] / table["estimated_ms"]
    first = next(iter(estimates.values()))
    table.attrs["estimate"] = {"gpu": first["gpu"], "batch_size": first["batch_size"],
                               "label": first["label"]}


def latency_column(table: pd.DataFrame) -> str:
    """The latency the search ranks by: "estimated_ms" when estimated, else "latency_ms"."""
    return "estimated_ms" if "estimated_ms" in table and table["estimated_ms"].notna().any() \
        else "latency_ms"


def pareto_mask(table: pd.DataFrame) -> pd.Series:
    """True for the ok trials no other ok trial beats on every measured objective (latency:
    the estimated one where the table has it)."""
    ok = table[table["status"] == "ok"]
    latency = latency_column(table)
    goals = {latency if c == "latency_ms" else c: better for c, better in OBJECTIVES.items()}
    objectives = [c for c in goals if ok[c].notna().any()]
    # Lower is better for every column of `costs`; a missing figure counts as the worst.
    costs = pd.DataFrame({c: (-ok[c] if goals[c] else ok[c]).fillna(math.inf)
                          for c in objectives}, index=ok.index)
    mask = pd.Series(False, index=table.index)
    for index, row in costs.iterrows():
        others = costs.drop(index)
        dominated = ((others <= row).all(axis=1) & (others < row).any(axis=1)).any()
        mask[index] = bool(objectives) and not dominated
    return mask


def recommend(table: pd.DataFrame, trials: list[TrialRecord]) -> dict[str, Any] | None:
    """The trial to convert with, and why (None when no trial ran)."""
    front = table[table["pareto"]]
    if front.empty:
        return None
    accurate = front[front["max_abs_error"].isna() | (front["max_abs_error"] <= ACCURACY_ATOL)]
    accurate = accurate[accurate["top1_agreement"].isna()
                        | (accurate["top1_agreement"] >= TOP1_MIN)]
    measured = front["max_abs_error"].notna().any()
    latency = latency_column(table)
    target = table.attrs.get("estimate") if latency == "estimated_ms" else None
    fastest = f"the fastest trial estimated for {target['gpu']}" if target else "the fastest trial"
    if accurate.empty:
        row = front.sort_values(["max_abs_error", latency]).iloc[0]
        why = (f"no trial stays within {ACCURACY_ATOL:g} of native TensorFlow; this one is "
               f"the most accurate")
    elif accurate[latency].notna().any():
        row = accurate.sort_values([latency, "percent_converted"],
                                   ascending=[True, False]).iloc[0]
        why = (f"{fastest} whose outputs stay within "
               f"{ACCURACY_ATOL:g} of native TensorFlow" if measured else
               f"{fastest} (outputs not compared)")
    else:
        row = accurate.sort_values(["percent_converted", "engines"],
                                   ascending=[False, True]).iloc[0]
        why = "the most converted trial, in the fewest engines (latency not measured)"
    record = next(t for t in trials if t.trial_id == row["trial_id"])
    by_id = {t.trial_id: t for t in trials}
    others = [by_id[i] for i in table.loc[table["status"] == "ok", "trial_id"]
              if i != record.trial_id and i in by_id]
    if target:
        estimated = table.loc[table["trial_id"] == record.trial_id].iloc[0]
        return {"trial_id": record.trial_id, "params": record.params,
                "reason": f"{why}: {_estimated(estimated, target)}; measured here: "
                          f"{_figures(record)}{_engines_note(table, target)} "
                          f"[{target['label']}]"}
    return {"trial_id": record.trial_id, "params": record.params,
            "reason": f"{why}: {_figures(record)}{_next_to(record, others)}"}


def _estimated(row: pd.Series, target: dict[str, Any]) -> str:
    return (f"{row['estimated_ms']:.3f} ms estimated on {target['gpu']} at batch "
            f"{target['batch_size']} ({row['estimated_speedup']:.2f}x native TF, estimated)")


def _engines_note(table: pd.DataFrame, target: dict[str, Any]) -> str:
    """Where more, smaller engines are estimated slower than fewer: among ok trials that
    differ only in minimum_segment_size or max_engines, the pair with the largest such gap."""
    ok = table[(table["status"] == "ok") & table["estimated_ms"].notna()]
    same = ["precision_mode", "use_dynamic_shape", "dynamic_shape_profile_strategy",
            "denylist"]
    worst = None
    for _, group in ok.groupby(same, dropna=False, sort=False):
        for more in group.itertuples():
            for fewer in group.itertuples():
                gap = more.estimated_ms - fewer.estimated_ms
                if more.engines > fewer.engines and gap > 0 and (worst is None or gap > worst[0]):
                    worst = (gap, more, fewer)
    if worst is None:
        return ""
    from workbench.viz.tune_charts import trial_label

    _, more, fewer = worst
    return (f"; on {target['gpu']}, {trial_label(more._asdict())}'s {more.engines} engines "
            f"are estimated slower ({more.estimated_ms:.3f} ms) than "
            f"{trial_label(fewer._asdict())}'s {fewer.engines} ({fewer.estimated_ms:.3f} "
            "ms): each engine adds its launch, and the smaller ones save little GPU work")


def _next_to(chosen: TrialRecord, others: list[TrialRecord]) -> str:
    """What a reader comparing the table would ask: a trial timed within LATENCY_TIE of the
    chosen one (a tie, not a win), and a trial with a larger speed-up although it ran slower
    (each speed-up divides by that trial's own native TensorFlow timing)."""
    if not chosen.first_latency:
        return ""
    mine = chosen.first_latency["mean"]
    notes = []
    ties = [t for t in others if t.first_latency
            and abs(t.first_latency["mean"] - mine) <= LATENCY_TIE * mine]
    if ties:
        names = ", ".join(settings_label(t.params) for t in ties[:3])
        notes.append(f"{names} timed within {LATENCY_TIE:.0%} of it, which is within timing "
                     "noise: a tie")
    faster_looking = [t for t in others if t.speedup is not None and chosen.speedup is not None
                      and t.speedup > chosen.speedup and t.first_latency
                      and t.first_latency["mean"] > mine]
    if faster_looking:
        best = max(faster_looking, key=lambda t: t.speedup or 0.0)
        notes.append(f"{settings_label(best.params)} shows a larger speed-up "
                     f"({best.speedup:.2f}x) but ran slower ({best.first_latency['mean']:.2f} "
                     "ms): each speed-up divides by its own trial's native TensorFlow timing")
    return "".join(f"; {note}" for note in notes)


def _figures(t: TrialRecord) -> str:
    parts = []
    if t.first_latency:
        batch = min(t.latency_ms)
        parts.append(f"{t.first_latency['mean']:.2f} ms at batch {batch}")
    if t.speedup is not None:
        parts.append(f"{t.speedup:.2f}x native TF")
    if t.max_abs_error is not None:
        parts.append(f"max error {t.max_abs_error:.2g}")
    if t.top1_agreement is not None:
        parts.append(f"top-1 agreement {t.top1_agreement:.1%}")
    parts.append(f"{t.percent_converted:.1f}% converted in {counted(t.engines, 'engine')}")
    if not t.engines:
        parts.append("no engines: TF-TRT would leave the model as it is")
    return ", ".join(parts)
