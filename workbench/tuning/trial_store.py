"""The trial store: `ROOT/trials/<model fingerprint>/<trial_id>.json`, one file per trial.

ROOT is the runs store the app keeps its runs in (`workbench_runs` by default). Each file is
written atomically (`workbench.durable_files.atomic_write`), so a search killed at any moment
loses no finished trial. A file that cannot be read, or whose content does not match its name, is
reported with a warning and not trusted: its trial runs again.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from workbench.durable_files import atomic_write, json_scalar
from workbench.errors import first_line
from workbench.tuning.record import TrialRecord

SUFFIX = ".json"


class TrialStore:
    """The stored trials of one model (one fingerprint) under a runs store root."""

    def __init__(self, root: str | os.PathLike, fingerprint: str):
        self.directory = Path(root) / "trials" / fingerprint
        self.problems: list[str] = []

    def path_for(self, trial_id: str) -> Path:
        return self.directory / f"{trial_id}{SUFFIX}"

    def save(self, record: TrialRecord) -> Path:
        data = json.dumps(record.to_dict(), indent=1, default=json_scalar).encode("utf-8")
        return atomic_write(self.path_for(record.trial_id), data)

    def load(self) -> dict[str, TrialRecord]:
        """Every trustworthy stored trial by id; the others are warned about in `problems`."""
        self.problems = []
        records = {}
        if not self.directory.is_dir():
            return records
        for path in sorted(self.directory.glob(f"[!.]*{SUFFIX}")):  # hidden: writes under way
            try:
                record = TrialRecord.from_dict(json.loads(path.read_bytes()))
                if record.trial_id != path.stem:
                    raise ValueError(f"it holds trial {record.trial_id!r}")
            except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
                problem = (f"ignored stored trial {path} ({type(exc).__name__}: "
                           f"{first_line(exc)}); it runs again")
                self.problems.append(problem)
                warnings.warn(problem, stacklevel=2)
                continue
            records[record.trial_id] = record
        return records

