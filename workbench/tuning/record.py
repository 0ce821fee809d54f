"""One trial's record: what was asked, what happened, and what was measured, as plain data."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from workbench.durable_files import check_format
from workbench.words import counted

FORMAT = "tftrt-workbench-trial/1"
STATUSES = ("ok", "failed", "timeout", "skipped")
STEPS = ("convert", "build", "validate", "time")


def trial_id(fingerprint: str, params: dict[str, Any], settings: dict[str, Any]) -> str:
    """A stable id: the same model, parameters and measurement settings (batch sizes, what is
    measured) give the same id in any process, so a re-run finds its stored trial."""
    text = json.dumps({"model": fingerprint, "params": params, "settings": settings},
                      sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class TrialRecord:
    """A trial's outcome. Figures a trial did not measure are None (or empty)."""

    trial_id: str
    params: dict[str, Any]  # ConversionParams.to_json() of the configuration
    status: str  # one of STATUSES
    reason: str | None = None  # why a trial is not "ok"
    percent_converted: float | None = None
    engines: int | None = None
    # Converted model's latency per batch size: {batch: {"mean": ms, "p50": ms, "p99": ms}}.
    latency_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    speedup: float | None = None  # native TF mean / converted mean, at the first batch size
    max_abs_error: float | None = None  # largest over outputs and validation batches
    top1_agreement: float | None = None  # fraction (0-1) of samples whose argmax agrees
    backend: str | None = None
    device: str | None = None
    # TensorRT's verdict (TensorRT-RTX's builder, when the search asked for it): engines it
    # built of the conversion's engines, e.g. "5/7".
    tensorrt_built: str | None = None
    worker: str | None = None  # the Dask worker's address ("local" outside Dask)
    step_seconds: dict[str, float] = field(default_factory=dict)  # STEPS -> seconds
    seconds: float | None = None  # the trial's wall time on its worker
    reused: bool = False  # read back from the store, not run by this search

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> TrialRecord:
        """A record from its JSON document; ValueError says what is wrong with it."""
        data = check_format(data, FORMAT)
        names = {f.name for f in fields(cls)}
        missing = {"trial_id", "params", "status"} - set(data)
        if missing:
            raise ValueError(f"missing {counted(len(missing), 'field')}: "
                             f"{', '.join(sorted(missing))}")
        if data["status"] not in STATUSES or not isinstance(data["params"], dict):
            raise ValueError(f"status {data['status']!r} or params are not a trial's")
        values = {k: v for k, v in data.items() if k in names}
        try:
            values["latency_ms"] = {int(b): {k: float(v) for k, v in stats.items()}
                                    for b, stats in (data.get("latency_ms") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            raise ValueError("latency_ms is not {batch: {statistic: ms}}") from None
        return cls(**values)

    def as_reused(self) -> TrialRecord:
        return replace(self, reused=True)

    @property
    def first_latency(self) -> dict[str, float]:
        """The latency statistics at the first (smallest) batch size, or {}."""
        return self.latency_ms[min(self.latency_ms)] if self.latency_ms else {}
