"""Tuning: a grid of conversion settings taken through convert, build, validate and time, one
trial per configuration, on Dask workers (an embedded `LocalCluster` by default, or an
existing cluster), with every finished trial stored so a re-run resumes.

Above viz (the result's charts) and below the UI and the CLI, which drive it. The package
itself is callable, so `workbench.tune(model, grid)` works whether or not `workbench.tune` was
imported as a package first.
"""

import sys
import types
from typing import Any

from workbench.tuning.driver import DEFAULT_STORE, tune
from workbench.tuning.grid import GRID_KEYS, GridPoint, expand_grid
from workbench.tuning.record import TrialRecord
from workbench.tuning.result import TuneResult

__all__ = ["DEFAULT_STORE", "GRID_KEYS", "GridPoint", "TrialRecord", "TuneResult",
           "expand_grid", "tune"]


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> TuneResult:
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
