"""The experiment store: every conversion the user keeps, as one JSON file per run on disk.

One file per run means a crash can only ever touch the run being written, and no write ever
rewrites another run's file. Each file is written atomically
(`workbench.durable_files.atomic_write`: a hidden temp file, fsynced, renamed over its final
name), so a reader sees a whole run or none.
Files that cannot be read are reported in `problems` and left on disk as they are.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.durable_files import atomic_write, check_format, fsync_directory, json_scalar
from workbench.errors import WorkbenchError, first_line

FORMAT = "tftrt-workbench-run/1"
RUN_PREFIX, RUN_SUFFIX = "run-", ".json"
# Run ids become file names: keep them to characters that are safe everywhere.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

PARAM_COLUMNS = (
    "precision_mode", "minimum_segment_size", "use_dynamic_shape",
    "dynamic_shape_profile_strategy", "denylist", "max_engines",
)
COUNT_COLUMNS = ("engines", "converted_nodes", "total_nodes", "percent_converted")
TABLE_COLUMNS = ("run_id", "name", "created", "model", *PARAM_COLUMNS, *COUNT_COLUMNS)

# Field name -> the JSON type it must have in a run file.
_FIELD_TYPES: dict[str, type] = {
    "run_id": str, "name": str, "created": str, "model": str, "signature_key": str,
    "params": dict, "counts": dict, "engines": list, "metrics": dict, "notes": str,
}


class StoreError(WorkbenchError):
    """A store operation that cannot be done (unknown run id, unusable id)."""


@dataclass
class Run:
    """One kept conversion: what it was asked (params), what it gave (counts, engines), and
    what later measurements add (metrics: latency, accuracy, ... as plain numbers)."""

    run_id: str
    name: str
    created: str  # ISO 8601, UTC
    model: str
    signature_key: str
    params: dict
    counts: dict
    engines: list[dict]
    metrics: dict = field(default_factory=dict)
    notes: str = ""

    @classmethod
    def from_result(
        cls, result: ConversionResult, params: ConversionParams, name: str | None = None
    ) -> Run:
        """A run for `result`, converted with `params`.

        The result's own parameters win over `params` where both say something (a sweep's
        result carries its own threshold); `params` supplies the rest (workspace, ...).
        """
        merged = {**params.as_dict(), **result.params.to_json()}
        now = datetime.now(timezone.utc)
        run = cls(
            run_id=f"{now:%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(3)}",
            name=name or default_name(merged),
            created=now.isoformat(timespec="microseconds"),
            model=str(result.model),
            signature_key=result.signature_key,
            params=merged,
            counts={
                "engines": len(result.engines),
                "converted_nodes": result.converted_nodes,
                "total_nodes": result.total_nodes,
                "percent_converted": result.percent_converted,
            },
            engines=[
                {"name": e.name, "nodes": e.native_node_count, "effective_size": e.effective_size}
                for e in sorted(result.engines, key=lambda e: e.name)
            ],
        )
        return run.normalised()

    def normalised(self) -> Run:
        """The run as it reads back from disk (tuples become lists, ...)."""
        return Run.from_dict(json.loads(json.dumps(self.to_dict(), default=json_scalar)))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> Run:
        """Reads a run file's document; ValueError says what is wrong with it."""
        data = check_format(data, FORMAT)
        values = {}
        for f in fields(cls):
            if f.name not in data:
                if f.name in ("metrics", "notes"):
                    continue
                raise ValueError(f"missing field {f.name!r}")
            if not isinstance(data[f.name], _FIELD_TYPES[f.name]):
                raise ValueError(f"field {f.name!r} is not a {_FIELD_TYPES[f.name].__name__}")
            values[f.name] = data[f.name]
        return cls(**values)


def default_name(params: dict[str, Any]) -> str:
    """A short label that tells runs apart in a table: `FP16 min 3 dynamic`."""
    parts = [str(params.get("precision_mode", "FP32")),
             f"min {params.get('minimum_segment_size', 3)}"]
    if params.get("use_dynamic_shape"):
        parts.append("dynamic")
    if params.get("denylist"):
        parts.append("deny " + ",".join(params["denylist"]))
    return " ".join(parts)


class ExperimentStore:
    """Runs kept as `ROOT/run-<run_id>.json`; survives kernel restarts and kernel deaths."""

    def __init__(self, root: str | os.PathLike = "workbench_runs"):
        self.root = Path(root)
        self.problems: list[str] = []

    def path_for(self, run_id: str) -> Path:
        if not _RUN_ID.fullmatch(run_id):
            raise StoreError(f"run id {run_id!r} must be letters, digits, '_', '.' or '-'")
        return self.root / f"{RUN_PREFIX}{run_id}{RUN_SUFFIX}"

    def add(self, run: Run) -> Run:
        """Writes `run` durably and atomically; adding a run again replaces its own file."""
        data = json.dumps(run.to_dict(), indent=1, default=json_scalar).encode("utf-8")
        atomic_write(self.path_for(run.run_id), data)
        return run

    def runs(self) -> list[Run]:
        """Every readable run, oldest first; unreadable files are listed in `problems`."""
        self.problems = []
        runs = []
        for path in self._run_files():
            try:
                runs.append(Run.from_dict(json.loads(path.read_bytes())))
            except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError too
                reason = f"{type(exc).__name__}: {first_line(exc)}"
                self.problems.append(f"{path}: unreadable run file ({reason})")
        return sorted(runs, key=lambda run: (run.created, run.run_id))

    def get(self, run_id: str) -> Run:
        for run in self.runs():
            if run.run_id == run_id:
                return run
        raise StoreError(f"no run {run_id!r} in {self.root}")

    def update(self, run_id: str, **changes: Any) -> Run:
        """Rewrites one run's own file with `changes` (e.g. `metrics=`, `notes=`)."""
        return self.add(replace(self.get(run_id), **changes))

    def remove(self, run_id: str) -> None:
        path = self.path_for(run_id)
        try:
            path.unlink()
        except FileNotFoundError:
            raise StoreError(f"no run {run_id!r} in {self.root}") from None
        fsync_directory(self.root)

    def table(self) -> pd.DataFrame:
        """One row per readable run, oldest first; one column per metric any run has."""
        runs = self.runs()
        metrics = list(dict.fromkeys(key for run in runs for key in run.metrics))
        rows = [_row(run, metrics) for run in runs]
        return pd.DataFrame(rows, columns=[*TABLE_COLUMNS, *metrics])

    def _run_files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        # Hidden temp files are writes in progress (or killed mid-way): never runs.
        return sorted(
            p for p in self.root.iterdir()
            if p.name.startswith(RUN_PREFIX) and p.name.endswith(RUN_SUFFIX)
        )


def _row(run: Run, metrics: list[str]) -> dict[str, Any]:
    params = run.params
    row: dict[str, Any] = {
        "run_id": run.run_id, "name": run.name, "created": run.created, "model": run.model,
    }
    row.update({key: params.get(key) for key in PARAM_COLUMNS})
    row["denylist"] = ",".join(params.get("denylist") or ())
    row.update({key: run.counts.get(key) for key in COUNT_COLUMNS})
    row.update({key: run.metrics.get(key) for key in metrics})
    return row

