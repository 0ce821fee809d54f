"""TF-TRT's dynamic-shape optimization profiles (docs/tftrt-behaviour.md#profiles).

`build(input_fn)` collected each input set's shapes, dropped repeats, and turned them into
TensorRT optimization profiles according to `dynamic_shape_profile_strategy`:
Range (one profile spanning all shapes), Optimal (one exact profile per shape),
Range+Optimal (the Optimal ones, then the Range one) and ImplicitBatchModeCompatible
(per shape, batch from 1 up to that shape's batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from workbench.conversion.params import PROFILE_STRATEGIES, check_profile_strategy
from workbench.errors import WorkbenchError

Shape = tuple[int, ...]
ShapeSet = tuple[Shape, ...]  # one shape per model input


@dataclass(frozen=True)
class Profile:
    """One optimization profile: min, opt and max shape for every input."""

    min: ShapeSet
    opt: ShapeSet
    max: ShapeSet

    def describe(self) -> str:
        """The user guide's notation: `[4-8, 128-384]` per input, inputs joined by `; `."""
        return "; ".join(
            "[" + ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in zip(a, b,
                                                                                   strict=True))
            + "]"
            for a, b in zip(self.min, self.max, strict=True)
        )

    def accepts(self, shapes: ShapeSet) -> bool:
        """Whether an input set falls inside this profile (TF-TRT picks the first that does)."""
        return len(shapes) == len(self.min) and all(
            len(s) == len(lo) and all(a <= d <= b for a, d, b in zip(lo, s, hi, strict=True))
            for lo, s, hi in zip(self.min, shapes, self.max, strict=True)
        )


def optimization_profiles(shape_sets: Sequence[Sequence[Sequence[int]]], strategy: str
                          ) -> list[Profile]:
    """The profiles TF-TRT would create for these collected input shapes."""
    strategy = check_profile_strategy(strategy)
    sets = unique_shape_sets(shape_sets)
    if strategy == "Range":
        return [_range_profile(sets)]
    if strategy == "Optimal":
        return [Profile(s, s, s) for s in sets]
    if strategy == "Range+Optimal":
        return [Profile(s, s, s) for s in sets] + [_range_profile(sets)]
    return [Profile(tuple(_batch_one(shape) for shape in s), s, s) for s in sets]


def profile_table(shape_sets: Sequence[Sequence[Sequence[int]]],
                  strategies: Iterable[str] = PROFILE_STRATEGIES) -> pd.DataFrame:
    """The user guide's table: input shapes, strategy, output profiles."""
    sets = unique_shape_sets(shape_sets)
    inputs = ", ".join(Profile(s, s, s).describe() for s in sets)
    rows = [
        {"input shapes": inputs, "strategy": strategy,
         "profiles": ", ".join(p.describe() for p in optimization_profiles(sets, strategy))}
        for strategy in strategies
    ]
    return pd.DataFrame(rows, columns=["input shapes", "strategy", "profiles"])


def shapes_from_input_fn(input_fn: Callable[[], Iterable[Any]]) -> list[ShapeSet]:
    """The shape set of every batch an `input_fn` yields (a tensor, or a list/tuple/dict)."""
    sets = []
    for batch in input_fn():
        items = batch.values() if isinstance(batch, dict) else \
            batch if isinstance(batch, (list, tuple)) else [batch]
        sets.append(tuple(tuple(int(d) for d in getattr(x, "shape", ())) for x in items))
    if not sets:
        raise WorkbenchError("input_fn yielded nothing: it must yield at least one input set")
    return sets


def unique_shape_sets(shape_sets: Sequence[Sequence[Sequence[int]]]) -> list[ShapeSet]:
    """Shape sets in first-seen order without repeats, checked for consistency."""
    sets = list(dict.fromkeys(tuple(tuple(int(d) for d in s) for s in ss) for ss in shape_sets))
    if not sets:
        raise WorkbenchError("no input shapes: give at least one input set")
    first = sets[0]
    for s in sets[1:]:
        if len(s) != len(first) or any(len(a) != len(b) for a, b in zip(s, first, strict=True)):
            raise WorkbenchError(
                f"input sets disagree on the number of inputs or their ranks: "
                f"{Profile(first, first, first).describe()} vs {Profile(s, s, s).describe()}"
            )
    return sets


def _range_profile(sets: list[ShapeSet]) -> Profile:
    low = tuple(tuple(min(dims) for dims in zip(*shapes, strict=True))
                for shapes in zip(*sets, strict=True))
    high = tuple(tuple(max(dims) for dims in zip(*shapes, strict=True))
                 for shapes in zip(*sets, strict=True))
    return Profile(low, high, high)


def _batch_one(shape: Shape) -> Shape:
    return (1, *shape[1:]) if shape else shape
