"""The Segment graph tab's "TensorRT kernels" view: one engine as TensorRT-RTX's real builder
made it, after the Summary tab's "TensorRT verdicts"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sample_models
from workbench.ui import Workbench

pytestmark = pytest.mark.slow
pytest.importorskip("tensorrt_rtx", reason='needs TensorRT-RTX: pip install "tftrt-workbench'
                                           '[tensorrt]"')


def test_kernels_view_asks_for_verdicts_then_draws_the_built_engine(tmp_path: Path) -> None:
    app = Workbench(sample_models.build("digits_cnn"), store=tmp_path / "runs",
                    background=False)
    tab = app.graph_tab
    tab.choice.value = "Full"
    assert "boxes" in tab.note.value and tab.crumbs.children
    tab.choice.value = "TensorRT kernels"  # no engine chosen: the first is, and it asks
    assert tab.engine.value == "TRTEngineOp_000_000"
    assert "TensorRT verdicts" in tab.html.value and "<svg" not in tab.html.value
    assert tab.note.value == "" and not tab.crumbs.children  # nothing stale left behind
    app.check_tensorrt()
    tab.draw()
    assert tab.html.value.count("<svg") == 1
    assert "TRTEngineOp_000_000: " in tab.svg and re.search(r" kernels? holding", tab.svg)
    assert "TRTEngineOp_000_000 as TensorRT-RTX built it" in tab.note.value
    assert "Conv2D" in tab.svg  # the TF nodes inside the kernel boxes
    # The converted view carries each built engine's kernel count, in its box and legend.
    kernels = len(app.tensorrt[app.params]["TRTEngineOp_000_000"]["kernels"])
    tab.choice.value = "Converted"
    assert f"{kernels} TensorRT kernel" in tab.svg
