"""The app's target GPU: a picker (none: CPU measurements only) and what the Charts, Profiling
and Tune tabs show for the picked GPU.

Every figure here is estimated (`profiling.estimate.conversion`), titled with the GPU and
"estimated", with the estimate's label (the model's measured error) beside it, and drawn apart
from what this machine measured. The estimate of a sweep is kept per setting other than
minimum_segment_size, so moving the threshold slider costs nothing more.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import ipywidgets as widgets
import pandas as pd

from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GPU_FACTS, gpu_facts
from workbench.profiling.estimate.calibration import Calibration, from_measured, from_profile
from workbench.profiling.estimate.conversion import (
    conversion_estimate,
    engine_kernel_estimates,
    estimated_beside_measured,
    sweep_advice,
    sweep_estimate,
)
from workbench.ui.tables import note_html, table_html
from workbench.viz.estimate_charts import (
    estimate_table,
    kernel_estimate_chart,
    sweep_estimate_chart,
)
from workbench.viz.view import ConversionView

# How a tab puts a figure in an Output (`tabs.show_figure`), handed in: tabs import this module.
Show = Callable[[widgets.Output, Any], None]
NO_GPU = "none: CPU measurements only"
PICK_A_GPU = ("Pick a target GPU (left, under the model) to see the latency estimated for it "
              "here: estimated, never measured, with the model's measured error.")


class TargetGpu:
    """The picker: a GPU of the datasheet table (`graph.gpu_facts`) and the batch size to
    estimate at. `observe(callback)` is told of every change; `session_of()` gives the app's
    open model (None while loading)."""

    def __init__(self, session_of: Callable[[], ConversionSession | None]) -> None:
        self.session_of = session_of
        self._listeners: list[Callable[[], None]] = []
        # The last estimate, (view, gpu, batch, document): the Profiling and Segment graph tabs
        # show the same one, made once per refresh.
        self._last: tuple[ConversionView, str, int, dict] | None = None
        self.picker = widgets.Dropdown(
            options=[(NO_GPU, "")] + [(f"{g.short} ({g.name})", g.short) for g in GPU_FACTS],
            value="", layout=widgets.Layout(width="320px"),
            tooltip="Estimate the latency on this GPU (charts, profiling, tuning)")
        self.batch = widgets.BoundedIntText(value=1, min=1, max=4096, description="batch",
                                            style={"description_width": "38px"},
                                            layout=widgets.Layout(width="100px"))
        for widget in (self.picker, self.batch):
            widget.observe(lambda _change: self._changed(), names="value")
        # One latency measured on that GPU, of the conversion shown when it is entered (0: none)
        self.calibration: Calibration | None = None
        self.measured = widgets.BoundedFloatText(
            value=0.0, min=0.0, max=1e6, step=0.01, description="your measured ms",
            style={"description_width": "initial"}, layout=widgets.Layout(width="200px"),
            tooltip="The latency you measured on this GPU for the conversion shown, at this "
                    "batch: every estimate on this GPU is then rescaled (0: none)")
        self.measured.observe(lambda _change: self._measured_changed(), names="value")
        # Batch and measurement mean something only for a picked GPU: hidden until one is.
        self.per_gpu = widgets.HBox([self.batch, self.measured],
                                    layout=widgets.Layout(display="none"))
        self.widget = widgets.VBox([widgets.HTML("<b>Target GPU</b> (estimates)"),
                                    self.picker, self.per_gpu])
        self.widget.add_class("wb-target-gpu")

    @property
    def gpu(self) -> str | None:
        """The picked GPU's short name, or None (CPU measurements only)."""
        return self.picker.value or None

    @property
    def batch_size(self) -> int:
        return int(self.batch.value)

    def set(self, gpu: str | None, batch_size: int | None = None) -> None:
        """Picks `gpu` (any name `gpu_facts` knows; None: none) from Python; an unknown GPU is
        a WorkbenchError listing the known ones."""
        if batch_size is not None:
            if batch_size < 1:
                raise WorkbenchError(f"the estimated batch size must be 1 or more, not "
                                     f"{batch_size}")
            self.batch.value = batch_size
        self.picker.value = gpu_facts(gpu).short if gpu else ""

    def estimate(self, view: ConversionView) -> dict | None:
        """`conversion_estimate` of `view` for the picked GPU and batch (None: no GPU picked or
        no model open), made once per view, GPU and batch."""
        session, gpu, batch = self.session_of(), self.gpu, self.batch_size
        if session is None or gpu is None:
            return None
        last = self._last
        if last is None or last[0] is not view or last[1:4] != (gpu, batch, self.calibration):
            # TensorRT's verdicts on these settings (Summary tab's button) give the real kernels.
            document = conversion_estimate(session, view.params, gpu, batch, view.result,
                                           view.tensorrt, self.calibration)
            self._last = last = (view, gpu, batch, self.calibration, document)
        return last[-1]

    def calibrate(self, view: ConversionView | None, measured_ms: float | None = None,
                  profile: str | None = None) -> Calibration | None:
        """Calibrates every estimate on the picked GPU on one measurement: `measured_ms`, the
        latency of `view`'s conversion at the picked batch, or a trtexec `profile` of one
        engine on that GPU (neither: no calibration). Returns it."""
        session, gpu = self.session_of(), self.gpu
        if gpu is None or (measured_ms is None and not profile):
            self.calibration = None
        elif profile:
            self.calibration = from_profile(profile, gpu)
        elif session is not None and view is not None:
            self.calibration = None  # the estimate it calibrates must not be calibrated itself
            raw = self.estimate(view)
            self.calibration = from_measured(
                gpu, measured_ms, raw["converted_ms"],
                f"{view.params.precision_mode}, minimum_segment_size "
                f"{view.params.minimum_segment_size}, batch {self.batch_size}")
        self._changed()
        return self.calibration

    def forget_calibration(self) -> None:
        """A calibration measured one model: the next model starts without it."""
        self.calibration = None
        self.measured.value = 0.0  # told to _measured_changed, which has nothing to undo

    def _measured_changed(self) -> None:
        value = float(self.measured.value)
        if value <= 0 and self.calibration is None:
            return
        view = self._last[0] if self._last else None
        self.calibrate(view, value if value > 0 else None)

    def observe(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def _changed(self) -> None:
        self.per_gpu.layout.display = "flex" if self.gpu else "none"
        for callback in self._listeners:
            callback()


class SweepEstimate:
    """The Charts tab's part: latency estimated for the target GPU along the sweep."""

    def __init__(self, target: TargetGpu, show: Show) -> None:
        self.target, self.show = target, show
        self.note, self.out = widgets.HTML(), widgets.Output()
        self.widget = widgets.VBox([self.note, self.out])
        # Per session, weakly: a model opened later may reuse a closed session's id().
        self._tables: weakref.WeakKeyDictionary[Any, dict[tuple, pd.DataFrame]] = \
            weakref.WeakKeyDictionary()

    def update(self, view: ConversionView) -> dict[str, Any]:
        """Redraws for `view`; returns the figures shown by name."""
        session, gpu = self.target.session_of(), self.target.gpu
        if session is None or gpu is None:
            self.note.value, self.out.outputs = note_html(PICK_A_GPU), ()
            return {}
        batch = self.target.batch_size
        key = (replace(view.params, minimum_segment_size=1), len(view.sweep), gpu, batch)
        tables = self._tables.setdefault(session, {})
        key += (self.target.calibration,)
        if key not in tables:
            tables[key] = sweep_estimate(session, view.params, view.sweep, gpu, batch,
                                         self.target.calibration)
        table = tables[key]
        figure = sweep_estimate_chart(table, current=view.params.minimum_segment_size)
        self.show(self.out, figure)
        # The chart carries the label; the note says when fewer engines are estimated faster.
        advice = sweep_advice(table, view.params.minimum_segment_size)
        self.note.value = note_html(advice) if advice else ""
        return {"estimate sweep": figure}


class EngineEstimate:
    """The Profiling tab's part: the current conversion's engines estimated for the target GPU,
    and a trtexec profile's layers, measured beside estimated."""

    def __init__(self, target: TargetGpu, show: Show) -> None:
        self.target, self.show = target, show
        self.note, self.table, self.out = widgets.HTML(), widgets.HTML(), widgets.Output()
        self.profile = widgets.Text(placeholder="trtexec --exportProfile JSON",
                                    layout=widgets.Layout(width="300px"))
        self.layer_info = widgets.Text(placeholder="trtexec --exportLayerInfo JSON",
                                       layout=widgets.Layout(width="300px"))
        self.compare_button = widgets.Button(
            description="Measured beside estimated", icon="balance-scale",
            layout=widgets.Layout(width="230px"),
            tooltip="A trtexec profile's layer times beside the estimate of the same layers")
        self.compare_button.on_click(lambda _b: self._compare_clicked())
        self.calibrate_button = widgets.Button(
            description="Calibrate on this profile", icon="crosshairs",
            layout=widgets.Layout(width="210px"),
            tooltip="Rescale every estimate on the target GPU by this engine's measured / "
                    "estimated time (its layer info beside the profile)")
        self.calibrate_button.on_click(lambda _b: self._calibrate_clicked())
        self.compare_note, self.compare_out = widgets.HTML(), widgets.Output()
        self.figures: dict[str, Any] = {}
        self.widget = widgets.VBox([
            self.note, self.table, self.out,
            widgets.HBox([self.profile, self.layer_info, self.compare_button,
                          self.calibrate_button],
                         layout=widgets.Layout(flex_flow="row wrap")),
            self.compare_note, self.compare_out])

    def update(self, view: ConversionView) -> dict[str, Any]:
        """The engines of `view` estimated for the target GPU; returns the figures shown."""
        self.figures.pop("estimate per engine", None)
        self.figures.pop("estimate per kernel", None)
        estimate = self.target.estimate(view)
        session, gpu, batch = self.target.session_of(), self.target.gpu, self.target.batch_size
        if estimate is None or session is None or gpu is None:
            self.note.value, self.table.value, self.out.outputs = note_html(PICK_A_GPU), "", ()
            return self.figures
        if view.tensorrt:
            rows = engine_kernel_estimates(session, view.params, view.result, view.tensorrt,
                                           gpu, batch, self.target.calibration)
            rows["layer"] = rows["engine"].str.removeprefix("TRTEngineOp_") + ": " + rows["layer"]
            what = "kernel"
        else:
            rows = pd.DataFrame({"layer": [*estimate["engines"], "TF ops outside engines"],
                                 "estimated_ms": [*estimate["engines"].values(),
                                                  estimate["native_ops_ms"]]})
            span = (estimate["converted_low_ms"] / estimate["converted_ms"],
                    estimate["converted_high_ms"] / estimate["converted_ms"]) \
                if estimate["converted_ms"] else (1.0, 1.0)
            rows["estimated_low_ms"] = rows["estimated_ms"] * span[0]
            rows["estimated_high_ms"] = rows["estimated_ms"] * span[1]
            what = "engine"
        figure = kernel_estimate_chart(rows, estimate["gpu"], estimate["label"], what=what)
        self.figures[f"estimate per {what}"] = figure
        self.note.value = note_html(estimate["label"] + ("" if view.tensorrt else
                                    ". Per kernel once TensorRT's verdicts are made (Summary)"))
        self.table.value = table_html(estimate_table([estimate]))
        self.show(self.out, figure)
        return self.figures

    def compare(self, profile: str, layer_info: str) -> pd.DataFrame:
        """A trtexec profile's layers measured beside their estimate for the target GPU (or,
        with none picked, for the GPU the profile ran on); shown below, and returned."""
        table = estimated_beside_measured(profile, layer_info, self.target.gpu)
        figure = kernel_estimate_chart(table, table.attrs["gpu"], table.attrs["label"])
        self.figures["estimate beside trtexec"] = figure
        measured, estimated = table["measured_ms"].sum(), table["estimated_ms"].sum()
        self.compare_note.value = note_html(
            f"{len(table)} layers: measured {measured:.3f} ms ({table.attrs['measured_on']}), "
            f"estimated {estimated:.3f} ms for {table.attrs['gpu']}, summed over layers")
        self.show(self.compare_out, figure)
        return table

    def _calibrate_clicked(self) -> None:
        """Every estimate on the target GPU calibrated on the profile (its layer info beside)."""
        try:
            calibration = self.target.calibrate(None, profile=self.profile.value.strip())
            self.compare_note.value = note_html(calibration.label() if calibration else
                                                "Pick a target GPU to calibrate it")
        except WorkbenchError as exc:
            self.compare_note.value = note_html(str(exc), error=True)

    def _compare_clicked(self) -> None:
        try:
            self.compare(self.profile.value.strip(), self.layer_info.value.strip())
        except WorkbenchError as exc:
            self.compare_note.value = note_html(str(exc), error=True)
