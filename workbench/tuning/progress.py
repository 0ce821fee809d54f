"""Progress of a search: a bar in notebooks (ipywidgets), a line per finished trial on stderr
elsewhere (scripts, the CLI)."""

from __future__ import annotations

import sys
from typing import Any

from workbench.conversion.params import DEFAULT_MAX_ENGINES
from workbench.tuning.record import TrialRecord


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
    parts = [f"{record.percent_converted:.1f}% in {record.engines} engine(s)"]
    if record.first_latency:
        parts.append(f"{record.first_latency['mean']:.2f} ms")
    if record.speedup is not None:
        parts.append(f"{record.speedup:.2f}x")
    if record.max_abs_error is not None:
        parts.append(f"max error {record.max_abs_error:.2g}")
    return f"{label}: ok, " + ", ".join(parts) + (" (stored)" if record.reused else "")


class Progress:
    """Told of every finished trial; draws a bar in a notebook, writes lines elsewhere."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done = total, 0
        self.enabled = enabled
        self._bar = _notebook_bar(total) if enabled else None

    def update(self, record: TrialRecord) -> None:
        self.done += 1
        if not self.enabled:
            return
        line = f"[{self.done}/{self.total}] {describe(record)}"
        if self._bar is not None:
            bar, label = self._bar
            bar.value = self.done
            label.value = line
        else:
            print(f"workbench tune: {line}", file=sys.stderr, flush=True)


def _notebook_bar(total: int) -> Any:
    """An ipywidgets bar and label, shown, when running in a Jupyter kernel; else None."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
            return None
        import ipywidgets as widgets
        from IPython.display import display
    except ImportError:
        return None
    bar = widgets.IntProgress(value=0, min=0, max=max(total, 1), description="trials")
    label = widgets.Label(value=f"{total} trial(s) to run")
    display(widgets.HBox([bar, label]))
    return bar, label
