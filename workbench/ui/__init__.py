"""The notebook workbench: widgets (the app, progress bars) and the experiment store."""

from typing import Any


def __getattr__(name: str) -> Any:
    # `Workbench` pulls in ipywidgets and plotly; the CLI's report path should not pay for it.
    if name == "Workbench":
        from workbench.ui.app import Workbench

        return Workbench
    raise AttributeError(name)


__all__ = ["Workbench"]
