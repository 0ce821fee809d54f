"""The inputs a converted model is given: the sets an `input_fn` yields (build, calibration)
and one call's arguments, checked against the signature with a clear error before any work."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.lazy import tf
from workbench.words import counted


@dataclass
class InputSets:
    """The input sets an `input_fn` yielded, checked against the model's inputs."""

    sets: list[list[Any]] = field(default_factory=list)

    @property
    def shapes(self) -> list[tuple[tuple[int, ...], ...]]:
        return [tuple(tuple(int(d) for d in np.shape(x)) for x in s) for s in self.sets]


def collect_inputs(fn: Callable[[], Any], input_names: Sequence[str], what: str) -> InputSets:
    """Every input set `fn()` yields, as lists in signature order; a clear error when it yields
    nothing or the wrong number of tensors (before any work starts)."""
    if not callable(fn):
        raise WorkbenchError(f"{what} must be a callable returning a generator of input sets")
    sets = []
    for i, batch in enumerate(fn()):
        if isinstance(batch, dict):
            missing = [n for n in input_names if n not in batch]
            if missing or len(batch) != len(input_names):
                raise WorkbenchError(
                    f"{what} yielded inputs {sorted(batch)} in set {i}; the model takes "
                    f"{', '.join(input_names)}")
            items = [batch[n] for n in input_names]
        else:
            items = list(batch) if isinstance(batch, (list, tuple)) else [batch]
        if len(items) != len(input_names):
            raise WorkbenchError(
                f"{what} yielded {counted(len(items), 'tensor')} in set {i}; the model "
                f"takes {len(input_names)} ({', '.join(input_names)})")
        sets.append(items)
    if not sets:
        raise WorkbenchError(f"{what} yielded nothing: it must yield at least one input set")
    return InputSets(sets)



def call_arguments(names: Sequence[str], dtypes: Sequence[str], args: Sequence[Any],
                   kwargs: dict[str, Any]) -> list[Any]:
    """One call's inputs (by position in signature order, or by name) as tensors of the
    signature's dtypes, in signature order."""
    if len(args) > len(names):
        raise WorkbenchError(f"the model takes {counted(len(names), 'input')} "
                             f"({', '.join(names)}), got {len(args)}")
    given = dict(zip(names, args, strict=False))
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise WorkbenchError(f"{counted(len(unknown), 'unknown input')} ({', '.join(unknown)}); "
                             "the model takes "
                             f"{', '.join(names)}")
    given.update(kwargs)
    missing = [n for n in names if n not in given]
    if missing:
        raise WorkbenchError(f"missing {counted(len(missing), 'input')} ({', '.join(missing)}); "
                             "the model takes "
                             f"{', '.join(names)}")
    return [tf.convert_to_tensor(given[n], dtype=d) for n, d in zip(names, dtypes, strict=True)]
