"""Progress of a search, told to a display: by default a line per finished trial on stderr
(scripts, the CLI); `workbench.ui.progress_bars.trial_bar` draws it as a bar in a notebook."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from workbench.conversion.params import DEFAULT_MAX_ENGINES
from workbench.tuning.record import TrialRecord
from workbench.words import counted


def describe(record: TrialRecord) -> str:
    """One line about a finished trial: `FP16 min 3 dynamic(Range): ok, 2.31 ms, 1.8x`."""
    label = settings_label(record.params)
    if record.status != "ok":
        return f"{label}: {record.status} ({record.reason})"
    return _figures_line(label, record)


def settings_label(p: dict[str, Any]) -> str:
    """A trial's settings in a few words: `FP16 min 3 dynamic(Range) deny Conv2D`."""
    label = f"{p['precision_mode']} min {p['minimum_segment_size']}"
    if p.get("use_dynamic_shape"):
        label += f" dynamic({p.get('dynamic_shape_profile_strategy')})"
    elif p.get("dynamic_shape_profile_strategy"):
        label += f" {p['dynamic_shape_profile_strategy']} without dynamic shape"
    if p.get("denylist"):
        label += " deny " + ",".join(p["denylist"])
    if p.get("max_engines") not in (None, DEFAULT_MAX_ENGINES):
        label += f" max {p['max_engines']}"
    return label


def _figures_line(label: str, record: TrialRecord) -> str:
    parts = [f"{record.percent_converted:.1f}% in {counted(record.engines, 'engine')}"]
    if record.first_latency:
        parts.append(f"{record.first_latency['mean']:.2f} ms")
    if record.speedup is not None:
        parts.append(f"{record.speedup:.2f}x")
    if record.max_abs_error is not None:
        parts.append(f"max error {record.max_abs_error:.2g}")
    return f"{label}: ok, " + ", ".join(parts) + (" (stored)" if record.reused else "")


# Told (trials done, trials in all, a line saying where the search is): with 0 done when the
# search starts, then after every finished trial.
TrialDisplay = Callable[[int, int, str], None]


def print_line(done: int, total: int, line: str) -> None:
    """The text display: one line on stderr per finished trial."""
    if done:
        print(f"workbench tune: {line}", file=sys.stderr, flush=True)


class Progress:
    """Told of every finished trial; passes a line about it to the display (`print_line` when
    `display` is True, none when it is False)."""

    def __init__(self, total: int, display: bool | TrialDisplay = True):
        self.total, self.done = total, 0
        self._display = print_line if display is True else display or None
        if self._display is not None:
            self._display(0, total, f"{counted(total, 'trial')} to run")

    def update(self, record: TrialRecord) -> None:
        self.done += 1
        if self._display is not None:
            self._display(self.done, self.total, f"[{self.done}/{self.total}] {describe(record)}")
