"""Progress shown as ipywidgets bars: the lower layers report progress through callbacks
(`profiling.latency.ProgressCallback`, the tuning search's `TrialDisplay`), and these draw them
in a notebook. Outside a Jupyter kernel each falls back to the text display of its layer.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

from workbench.profiling.latency import REDRAW_S, ProgressCallback, text_progress
from workbench.tuning import driver
from workbench.tuning.progress import TrialDisplay


def in_kernel() -> bool:
    """True inside a Jupyter kernel (where widgets can be shown)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and hasattr(shell, "kernel")


def widget_progress(label: str = "") -> ProgressCallback:
    """An ipywidgets bar displayed in the notebook; outside a kernel, `text_progress`."""
    if not in_kernel():
        return text_progress(label)
    import ipywidgets
    from IPython.display import display

    bar = ipywidgets.IntProgress(value=0, min=0, max=1, description=label)
    display(bar)
    return widget_updater(bar)


def widget_updater(bar: Any) -> ProgressCallback:
    """The callback that drives an existing `IntProgress` (the app puts it in its layout)."""
    last = [-REDRAW_S]

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < REDRAW_S:
            return
        last[0] = now
        bar.max = max(total, 1)
        bar.value = done
        bar.bar_style = "success" if done >= total else ""

    return update


def trial_bar() -> TrialDisplay:
    """A tuning search's display as a bar and a label, shown when the search starts."""
    import ipywidgets as widgets
    from IPython.display import display

    shown: list[Any] = []

    def update(done: int, total: int, line: str) -> None:
        if not shown:
            shown.extend([widgets.IntProgress(value=0, min=0, max=max(total, 1),
                                              description="trials"), widgets.Label()])
            display(widgets.HBox(shown))
        bar, label = shown
        bar.value, label.value = done, line

    return update


@functools.wraps(driver.tune)
def tune(*args: Any, **options: Any) -> Any:
    # `workbench.tune`: the tuning search (its docstring), drawing its progress as a bar in a
    # notebook unless told otherwise.
    if options.get("progress", True) is True and in_kernel():
        options["progress"] = trial_bar()
    return driver.tune(*args, **options)
