"""JupyterLab's settings for `make run`: notebooks are saved without outputs.

The app's widgets would otherwise be autosaved into the tracked notebooks (their outputs and
widget state), so every session left a diff. Like nbstripout, but at save time: the open
notebook keeps its outputs until it is reloaded.
"""

from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager


def strip_outputs(model: dict[str, Any], **_kwargs: Any) -> None:
    """A pre-save hook: drops code cells' outputs and counts, and the saved widget state."""
    if model.get("type") != "notebook" or not model.get("content"):
        return
    notebook = model["content"]
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    notebook.get("metadata", {}).pop("widgets", None)


class OutputStrippingContentsManager(AsyncLargeFileManager):
    """Jupyter's default contents manager with the hook registered. (Setting the
    `pre_save_hook` option instead makes Jupyter warn "Overriding existing pre_save_hook" at
    every start: its validator sees the value it is validating as an older one.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.register_pre_save_hook(strip_outputs)


c = get_config()  # noqa: F821 (Jupyter's config loader provides it)
c.ServerApp.contents_manager_class = OutputStrippingContentsManager
