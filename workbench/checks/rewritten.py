"""A rewritten model's outputs beside the original's, on the same generated inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.checks.validation import as_numpy, generated_inputs
from workbench.conversion.session import ConversionSession
from workbench.graph.loading import LoadedModel


@dataclass(frozen=True)
class OutputDifference:
    """One output's largest difference: absolute, and relative to the output's largest
    magnitude in the original (the scale a person reads the output at)."""

    output: str
    max_abs_error: float
    max_rel_error: float

    def to_json(self) -> dict[str, Any]:
        return {"output": self.output, "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error}


def compare_rewritten(session: ConversionSession, rewritten: LoadedModel, batches: int = 2,
                      batch_size: int = 4, seed: int = 0) -> list[OutputDifference]:
    """Runs `session`'s model and `rewritten` natively on `batches` generated input sets
    (`generated_inputs`: uniform floats, valid ids, 0/1 masks) and gives each output's
    largest difference. NaN in the same places counts as equal."""
    largest: dict[str, list[float]] = {}
    for inputs in generated_inputs(session, batches, batch_size, seed):
        expected = as_numpy(session.loaded(**inputs))
        got = as_numpy(rewritten(**inputs))
        for name, value in expected.items():
            value, other = value.astype(np.float64), got[name].astype(np.float64)
            same = (value == other) | (np.isnan(value) & np.isnan(other))
            error = np.where(same, 0.0, np.abs(value - other))
            scale = float(np.max(np.abs(value[np.isfinite(value)]), initial=0.0))
            entry = largest.setdefault(name, [0.0, 0.0])
            entry[0] = max(entry[0], float(np.max(error, initial=0.0)))
            entry[1] = max(entry[1], entry[0] / scale if scale else entry[0])
    return [OutputDifference(name, abs_error, rel_error)
            for name, (abs_error, rel_error) in sorted(largest.items())]
