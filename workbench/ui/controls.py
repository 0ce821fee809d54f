"""The app's controls: one widget per TF-TRT knob, read back as `ConversionParams`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, replace
from typing import Any

import ipywidgets as widgets

from workbench.conversion.params import (
    DEFAULT_MAX_WORKSPACE_SIZE_BYTES,
    PRECISION_MODES,
    PROFILE_STRATEGIES,
    ConversionParams,
)
from workbench.errors import WorkbenchError

WORKSPACE_CHOICES = [
    ("TF-TRT default (no limit)", DEFAULT_MAX_WORKSPACE_SIZE_BYTES),
    ("256 MiB", 1 << 28),
    ("1 GiB", 1 << 30),
    ("4 GiB", 1 << 32),
    ("16 GiB", 1 << 34),
]
_FULL = {"layout": widgets.Layout(width="250px")}
SECTION_WIDTH = "260px"
CONTROLS_WIDTH = "340px"


class Controls:
    """Widgets for every conversion parameter; `on_change` fires with the new params."""

    def __init__(self, params: ConversionParams, max_threshold: int = 64):
        self.minimum_segment_size = widgets.IntSlider(
            value=max(params.minimum_segment_size, 1), min=1, max=max_threshold,
            continuous_update=False, **_FULL,
        )
        self.minimum_segment_size.add_class("wb-min-segment-size")
        self.precision = widgets.ToggleButtons(
            options=list(PRECISION_MODES), value=params.precision_mode,
            style={"button_width": "62px"},
        )
        self.dynamic_shape = widgets.Checkbox(
            value=params.use_dynamic_shape, description="use_dynamic_shape", indent=False
        )
        self.profile_strategy = widgets.Dropdown(
            options=list(PROFILE_STRATEGIES),
            value=params.dynamic_shape_profile_strategy or "Range",
            disabled=not params.use_dynamic_shape, **_FULL,
        )
        self.denylist = widgets.TagsInput(
            value=list(params.denylist), allowed_tags=list(params.denylist), allow_duplicates=False,
            placeholder="type an op type, e.g. Conv2D", **_FULL,
        )
        self.max_engines = widgets.BoundedIntText(
            value=params.max_engines, min=0, max=10_000, **_FULL,
        )
        self.max_cached_engines = widgets.BoundedIntText(
            value=params.maximum_cached_engines, min=1, max=1000, **_FULL,
        )
        self.allow_build_at_runtime = widgets.Checkbox(
            value=params.allow_build_at_runtime, description="allow_build_at_runtime", indent=False
        )
        self.workspace = widgets.Dropdown(
            options=WORKSPACE_CHOICES, value=_workspace_choice(params.max_workspace_size_bytes),
            **_FULL,
        )
        # Not a TF-TRT setting: the app converts the rewritten model instead (conversion/rewrites/).
        self.rewrites = widgets.Checkbox(value=False, description="apply the verified rewrites",
                                         indent=False)
        for name in ("profile_strategy", "denylist", "max_engines", "max_cached_engines",
                     "workspace"):
            getattr(self, name).add_class("wb-" + name.replace("_", "-"))
        self.use_calibration = params.use_calibration
        self._callbacks: list[Callable[[], None]] = []
        self._holding = False  # set_params fires the callbacks once, not once per widget
        self.dynamic_shape.observe(self._toggle_strategy, names="value")

    @property
    def all(self) -> list[widgets.Widget]:
        return [self.minimum_segment_size, self.precision, self.dynamic_shape,
                self.profile_strategy, self.denylist, self.max_engines,
                self.max_cached_engines, self.allow_build_at_runtime, self.workspace]

    def sections(self) -> list[widgets.VBox]:
        """The controls in sections of one column each: stacked beside the tabs, side by side
        above them in a narrow notebook (`layout.py`)."""
        heading, label = widgets.HTML, _label
        sections = [
            [heading("<b>Segmentation</b>"),
             label("minimum_segment_size"), self.minimum_segment_size,
             label("max engines", "TF_TRT_MAX_ALLOWED_ENGINES; 0 = no limit"),
             self.max_engines],
            [heading("<b>Precision</b>"), label("precision_mode"), self.precision,
             heading("<b>Shapes</b>"), self.dynamic_shape,
             label("dynamic_shape_profile_strategy"), self.profile_strategy],
            [heading("<b>Never convert</b>"),
             label("op types", "TF_TRT_OP_DENYLIST; types present in the model"),
             self.denylist,
             heading("<b>The model</b> <span class='wb-note'>(not a TF-TRT setting: "
                     "<code>workbench rewrite</code>)</span>"), self.rewrites],
            [heading("<b>Engines</b> <span class='wb-note'>(recorded with runs; used when "
                     "engines are built)</span>"),
             label("maximum_cached_engines"), self.max_cached_engines,
             self.allow_build_at_runtime,
             label("max_workspace_size_bytes"), self.workspace],
        ]
        return [widgets.VBox(children, layout=widgets.Layout(width=SECTION_WIDTH))
                for children in sections]

    def set_threshold_range(self, limit: int) -> None:
        """The slider reaches `limit` (`viz.view.sweep_limit`: the sweep's last threshold)."""
        self.minimum_segment_size.max = limit

    def set_op_types(self, op_types: Iterable[str]) -> None:
        """The denylist offers the op types present in the model, and keeps only those (another
        model opened may not hold the ones chosen for the previous one)."""
        allowed = sorted(set(op_types))
        self._holding = True
        try:
            self.denylist.value = [t for t in self.denylist.value if t in allowed]
            self.denylist.allowed_tags = allowed
        finally:
            self._holding = False

    def params(self) -> ConversionParams:
        return ConversionParams(
            precision_mode=self.precision.value,
            minimum_segment_size=self.minimum_segment_size.value,
            use_dynamic_shape=self.dynamic_shape.value,
            dynamic_shape_profile_strategy=self.profile_strategy.value,
            denylist=tuple(self.denylist.value),
            max_engines=self.max_engines.value,
            maximum_cached_engines=self.max_cached_engines.value,
            max_workspace_size_bytes=self.workspace.value,
            use_calibration=self.use_calibration,
            allow_build_at_runtime=self.allow_build_at_runtime.value,
        )

    def set_params(self, params: ConversionParams | Mapping[str, Any]) -> None:
        """Sets every control from `params` (or a dict of its fields, such as a tuning trial's;
        missing fields keep their values), then fires the `observe` callbacks once."""
        if isinstance(params, ConversionParams):
            p = params
        else:
            known = {f.name for f in fields(ConversionParams)}
            unknown = sorted(set(params) - known)
            if unknown:
                raise WorkbenchError(f"unknown conversion parameters {unknown}: use "
                                     f"{sorted(known)}")
            p = replace(self.params(), **params)
        self._holding = True
        try:
            self.minimum_segment_size.max = max(self.minimum_segment_size.max,
                                                p.minimum_segment_size)
            self.minimum_segment_size.value = max(p.minimum_segment_size, 1)
            self.precision.value = p.precision_mode
            self.dynamic_shape.value = p.use_dynamic_shape
            self.profile_strategy.value = p.dynamic_shape_profile_strategy or "Range"
            self.denylist.allowed_tags = sorted({*self.denylist.allowed_tags, *p.denylist})
            self.denylist.value = list(p.denylist)
            self.max_engines.value = p.max_engines
            self.max_cached_engines.value = p.maximum_cached_engines
            self.workspace.value = _workspace_choice(p.max_workspace_size_bytes)
            self.use_calibration = p.use_calibration
            self.allow_build_at_runtime.value = p.allow_build_at_runtime
        finally:
            self._holding = False
        for callback in self._callbacks:
            callback()

    def observe(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)
        for widget in self.all:
            widget.observe(lambda _change: None if self._holding else callback(), names="value")

    def set_disabled(self, disabled: bool) -> None:
        for widget in [*self.all, self.rewrites]:
            widget.disabled = disabled
        if not disabled:
            self.profile_strategy.disabled = not self.dynamic_shape.value

    def _toggle_strategy(self, change: dict) -> None:
        self.profile_strategy.disabled = not change["new"]


def _workspace_choice(value: int) -> int:
    choices = [v for _, v in WORKSPACE_CHOICES]
    return value if value in choices else DEFAULT_MAX_WORKSPACE_SIZE_BYTES


def _label(name: str, hint: str = "") -> widgets.HTML:
    note = f" <span class='wb-note'>({hint})</span>" if hint else ""
    return widgets.HTML(f"<code>{name}</code>{note}", layout=widgets.Layout(margin="4px 0 0 0"))
