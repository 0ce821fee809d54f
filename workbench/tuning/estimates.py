"""A search's trials estimated for a named GPU (`tune(..., target_gpu=...)`).

The estimate needs no worker: it is the conversion's prepared graph and engines run through
`profiling.conversion_estimate`, milliseconds per trial once the model is open. So it is made
here, in the process that drives the search, for every trial that finished ok, stored ones
included: a search run without a GPU gets estimates for any GPU later without running again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.conversion.session import ConversionSession
from workbench.profiling.conversion_estimate import conversion_estimate
from workbench.tuning.grid import params_of
from workbench.tuning.record import TrialRecord
from workbench.tuning.tune_result import TuneResult


def estimate_trials(session: ConversionSession, trials: Sequence[TrialRecord], gpu: str,
                    batch_size: int = 1) -> dict[str, dict[str, Any]]:
    """trial id -> the estimate of its conversion on `gpu` at `batch_size`, for ok trials."""
    return {t.trial_id: conversion_estimate(session, params_of(t.params), gpu, batch_size)
            for t in trials if t.status == "ok"}


def with_estimates(result: TuneResult, session: ConversionSession, gpu: str | None,
                   batch_size: int = 1) -> TuneResult:
    """`result` ranked by its trials' estimates on `gpu` (None: by what was measured)."""
    estimates = estimate_trials(session, result.trials, gpu, batch_size) if gpu else None
    return TuneResult(result.trials, model=result.model, store=result.store,
                      problems=result.problems, estimates=estimates)
