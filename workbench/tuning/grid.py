"""The search grid: TF-TRT's parameters, each with the values to try, expanded into points.

Every value is checked by `ConversionParams`' own validation before anything runs, so an
impossible value is one clear error. Combinations TF-TRT would not run as written (a profile
strategy in implicit-batch mode, where TF-TRT ignores it) become skipped points with the reason,
next to the implicit-batch point itself, so `use_dynamic_shape: [False, True]` with two
strategies runs three trials and lists two skipped ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from workbench.conversion.params import ConversionParams
from workbench.errors import WorkbenchError
from workbench.words import counted

GRID_KEYS = ("precision_mode", "minimum_segment_size", "use_dynamic_shape",
             "dynamic_shape_profile_strategy", "denylist", "max_engines")
_DEFAULTS = {f.name: f.default for f in fields(ConversionParams)}


class TuneError(WorkbenchError):
    """A search that cannot start as asked (bad grid, unreachable scheduler, ...)."""


@dataclass(frozen=True)
class GridPoint:
    """One configuration: its canonical parameters (`ConversionParams.to_json()`), and why it
    is not run (None when it is)."""

    params: dict[str, Any]
    skip_reason: str | None = None


def expand_grid(grid: Mapping[str, Sequence[Any]] | None) -> list[GridPoint]:
    """Every combination of the grid's values, in the grid's order (missing keys: TF-TRT's
    defaults); points that canonicalise to the same parameters are kept once."""
    values = {key: _values(key, raw) for key, raw in dict(grid or {}).items()}
    unknown = sorted(set(values) - set(GRID_KEYS))
    if unknown:
        raise TuneError(f"{counted(len(unknown), 'unknown grid key')} "
                        f"({', '.join(map(repr, unknown))}): use "
                        f"{', '.join(GRID_KEYS)}")
    keys = [k for k in GRID_KEYS if k in values]
    points: dict[str, GridPoint] = {}
    for combination in itertools.product(*(values[k] for k in keys)):
        for point in _points(dict(zip(keys, combination, strict=True))):
            points.setdefault(repr(sorted(point.params.items())), point)
    return list(points.values())


def params_of(point_params: dict[str, Any]) -> ConversionParams:
    """The `ConversionParams` a point's canonical parameters stand for."""
    values = dict(point_params)
    values["denylist"] = tuple(values.get("denylist") or ())
    return ConversionParams(**values)


def _values(key: str, raw: Any) -> list[Any]:
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raw = [raw]  # one value given bare
    if not raw:
        raise TuneError(f"grid key {key!r} has no values: give at least one or leave it out")
    if key == "denylist":
        raw = [_denylist(entry) for entry in raw]
    for value in raw:
        if key in GRID_KEYS:
            _check(key, value)
    return list(raw)


def _denylist(entry: Any) -> tuple[str, ...]:
    """A denylist given as a list of op types or as one comma-separated string."""
    if isinstance(entry, str):
        return tuple(op.strip() for op in entry.split(",") if op.strip())
    if isinstance(entry, Sequence) and all(isinstance(op, str) for op in entry):
        return tuple(entry)
    raise TuneError(f"each denylist in the grid must be a list of op types or a comma-separated "
                    f"string, got {entry!r}")


def _check(key: str, value: Any) -> None:
    """ConversionParams' own check of one value (its error names the parameter)."""
    extra = {"use_dynamic_shape": True} if key == "dynamic_shape_profile_strategy" else {}
    if key == "use_dynamic_shape" and not isinstance(value, bool):
        raise TuneError(f"use_dynamic_shape must be True or False, got {value!r}")
    ConversionParams(**{**extra, key: value})


def _points(chosen: dict[str, Any]) -> list[GridPoint]:
    """The point `chosen` stands for; a profile strategy in implicit-batch mode gives a skipped
    point saying so, and the implicit-batch point without it (TF-TRT's own reading)."""
    strategy = chosen.get("dynamic_shape_profile_strategy")
    params = params_of({**{k: _DEFAULTS[k] for k in GRID_KEYS}, **chosen}).to_json()
    if strategy is None or chosen.get("use_dynamic_shape", False):
        return [GridPoint(params)]
    skipped = GridPoint({**params, "dynamic_shape_profile_strategy": strategy},
                        f"profile strategy {strategy} needs use_dynamic_shape=True (TF-TRT "
                        "ignores it in implicit batch mode)")
    return [skipped, GridPoint(params)]


# --- grid text, as typed on the command line or in the Tune tab ----------------------------


def split_values(text: str) -> list[str]:
    """`FP32, FP16` as its non-empty parts."""
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_integers(name: str, text: str) -> list[int]:
    """`2, 3, 5` (commas or spaces) as whole numbers; `name` is what the error calls it."""
    try:
        return [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise WorkbenchError(f"{name} takes whole numbers separated by commas, "
                             f"got {text!r}") from None


def parse_switches(name: str, text: str) -> list[bool]:
    """`off`, `on` or `off,on` (or true/false, 1/0, yes/no) as booleans."""
    values = []
    for part in split_values(text):
        value = _SWITCHES.get(part.lower())
        if value is None:
            raise WorkbenchError(f"{name} takes off, on or off,on; got {part!r}")
        values.append(value)
    return values


_SWITCHES = {"on": True, "true": True, "1": True, "yes": True,
             "off": False, "false": False, "0": False, "no": False}


def grid_from_text(texts: Mapping[str, str | None], denylists: Sequence[str] | None = None,
                   names: Mapping[str, str] | None = None) -> dict[str, list[Any]]:
    """The grid typed as text per grid key (None: not given, TF-TRT's default) and denylists
    (each one comma-separated; '' for none). A profile strategy without `use_dynamic_shape`
    implies it on. `names` says what errors call each key (default: the key)."""
    names = dict(names or {})
    grid: dict[str, list[Any]] = {}
    for key in GRID_KEYS:
        text = texts.get(key)
        if key == "use_dynamic_shape" and not text and texts.get(
                "dynamic_shape_profile_strategy"):
            text = "on"
        if not text:
            continue
        if key in ("minimum_segment_size", "max_engines"):
            grid[key] = parse_integers(names.get(key, key), text)
        elif key == "use_dynamic_shape":
            grid[key] = parse_switches(names.get(key, key), text)
        elif key != "denylist":
            grid[key] = split_values(text)
    if denylists is not None:
        grid["denylist"] = [split_values(d) for d in denylists]
    return grid
