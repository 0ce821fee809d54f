"""The Export tab: write the current conversion for production and show the text to copy.

One button writes the file (`workbench.checks.export_formats.export`: a TF-TRT script, the
whole model as ONNX checked against native TensorFlow, or trtexec commands) from the current
controls; the app runs it in the background like its other long steps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from workbench.checks.conversion_check import parse_batch_sizes
from workbench.checks.export_formats import describe
from workbench.durable_files import format_bytes
from workbench.ui.tables import note_html, pre_html
from workbench.viz.view import ConversionView

DEFAULT_FILES = {"tftrt": "convert_tftrt.py", "onnx": "model.onnx", "trtexec": "trtexec.sh"}
# Exports go into a folder of their own beside the notebook (ignored by git, as workbench_runs/),
# made on first export, so they never land among the notebooks.
EXPORT_DIR = "workbench_exports"
FORMAT_LABELS = {"TF-TRT script (TensorFlow <= 2.17)": "tftrt",
                 "ONNX model (tf2onnx, checked)": "onnx", "trtexec commands": "trtexec"}


def written_with(path: Path) -> list[Path]:
    """The file an export wrote and the external data files beside it that its name starts
    (an ONNX model past protobuf's 2 GB keeps its weights in `<file>.data`)."""
    return [path, *sorted(p for p in path.parent.glob(f"{path.name}.*") if p.is_file())]


class ExportTab:
    """Format, file and batch sizes; 'Export' writes the file and shows its text."""

    title = "Export"

    def __init__(self, on_export: Callable[[], None]) -> None:
        self.format = widgets.Dropdown(options=FORMAT_LABELS, value="tftrt",
                                       description="format",
                                       layout=widgets.Layout(width="380px"))
        self.path = widgets.Text(value=f"{EXPORT_DIR}/{DEFAULT_FILES['tftrt']}", description="file",
                                 layout=widgets.Layout(width="360px"))
        self.batch_sizes = widgets.Text(value="1", description="batch sizes",
                                        layout=widgets.Layout(width="220px"))
        self.button = widgets.Button(description="Export", icon="download",
                                     layout=widgets.Layout(width="120px"))
        self.button.on_click(lambda _b: on_export())
        self.format.observe(self._format_changed, names="value")
        self.settings, self.result = widgets.HTML(), widgets.HTML()
        options = widgets.HBox([self.format, self.path, self.batch_sizes, self.button],
                               layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([options, self.settings, self.result])
        self.text = ""  # the last exported script or commands
        self.written: Path | None = None  # the file shown

    def options(self) -> dict[str, Any]:
        """The export's arguments; bad batch sizes are a WorkbenchError."""
        if Path(self.path.value).parent == Path(EXPORT_DIR):
            Path(EXPORT_DIR).mkdir(exist_ok=True)
        return {"format": self.format.value, "output": self.path.value,
                "batch_sizes": parse_batch_sizes(self.batch_sizes.value)}

    def update(self, view: ConversionView) -> None:
        self.settings.value = note_html(f"Exports the current settings: {describe(view.params)}.")

    def show(self, path: Path | None) -> None:
        """The written files of the open model: their paths and sizes, and the text to copy
        (scripts and commands); nothing before an export (or after another model opened)."""
        if path == self.written:
            return
        self.written = path
        if path is None:
            self.text, self.result.value = "", ""
            return
        self.text = "" if path.suffix == ".onnx" else path.read_text()
        message = note_html("wrote " + ", ".join(
            f"{p.resolve()} ({format_bytes(p.stat().st_size)})" for p in written_with(path)))
        if path.suffix == ".onnx":
            message += note_html("The ONNX model matched native TensorFlow on generated inputs.")
        self.result.value = message + (pre_html(self.text, wrap=True) if self.text else "")

    def _format_changed(self, change: dict[str, Any]) -> None:
        if Path(self.path.value).name in DEFAULT_FILES.values():
            self.path.value = str(Path(self.path.value).with_name(DEFAULT_FILES[change["new"]]))
