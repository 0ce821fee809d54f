"""Tuning: a grid of conversion settings taken through convert, build, validate and time, one
trial per configuration, on Dask workers (an embedded `LocalCluster` by default, or an
existing cluster), with every finished trial stored so a re-run resumes.

Above viz (the result's charts) and below the UI and the CLI, which drive it. The public name
is `workbench.tune(model, grid)`, this package's `tune`.
"""

from workbench.tuning.driver import DEFAULT_STORE, tune
from workbench.tuning.grid import GRID_KEYS, GridPoint, expand_grid
from workbench.tuning.record import TrialRecord
from workbench.tuning.tune_result import TuneResult

__all__ = ["DEFAULT_STORE", "GRID_KEYS", "GridPoint", "TrialRecord", "TuneResult",
           "expand_grid", "tune"]
