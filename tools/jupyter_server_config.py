"""JupyterLab's settings for `make run`: notebooks are saved without outputs, as stored.

The app's widgets would otherwise be autosaved into the tracked notebooks (their outputs and
widget state), so every session left a diff. Like nbstripout, but at save time: the open
notebook keeps its outputs until it is reloaded.
"""

from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

# The kernel metadata the lessons are stored with. Opening a notebook fills in the running
# kernel's (its display name, Python's version, CodeMirror's mode): saved, that is a diff.
PYTHON_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
# Cell metadata that records the editor's state, not the lesson's.
EDITOR_STATE = ("collapsed", "scrolled", "execution", "ExecuteTime", "jupyter", "trusted")


def strip_outputs(model: dict[str, Any], **_kwargs: Any) -> None:
    """A pre-save hook: drops code cells' outputs and counts, the editor's state in cell
    metadata and the saved widget state, and writes a Python kernel's metadata as stored."""
    if model.get("type") != "notebook" or not model.get("content"):
        return
    notebook = model["content"]
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        for key in EDITOR_STATE:
            cell.get("metadata", {}).pop(key, None)
    metadata = notebook.setdefault("metadata", {})
    metadata.pop("widgets", None)
    if metadata.get("kernelspec", {}).get("language", "python") == "python":
        metadata["kernelspec"] = dict(PYTHON_KERNELSPEC)
        metadata["language_info"] = {"name": "python"}


class OutputStrippingContentsManager(AsyncLargeFileManager):
    """Jupyter's default contents manager with the hook registered. (Setting the
    `pre_save_hook` option instead makes Jupyter warn "Overriding existing pre_save_hook" at
    every start: its validator sees the value it is validating as an older one.)"""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.register_pre_save_hook(strip_outputs)


c = get_config()  # noqa: F821 (Jupyter's config loader provides it)
c.ServerApp.contents_manager_class = OutputStrippingContentsManager
