"""The one way a segment becomes a backend engine: ONNX export, then the backend's build.

The converted model's engine ops (runtime.py), the per-layer profile (profiling/engines.py)
and the whole-model reference (whole_model.py) all build through `build_segment_engine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.engines.backend import Backend, Engine, get_backend
from workbench.engines.segment import SegmentGraph
from workbench.engines.settings import NO_REQUEST, BuildRequest, EngineSettings

if TYPE_CHECKING:
    import onnx


def build_segment_engine(segment: SegmentGraph, settings: EngineSettings,
                         request: BuildRequest = NO_REQUEST, *, backend: Backend | None = None,
                         model: onnx.ModelProto | None = None) -> Engine:
    """`segment` built on `backend` (default: `get_backend()`) for `settings` and `request`.

    `model` is the segment's ONNX export when the caller made it already (the converted model
    exports each segment once for all its builds); otherwise it is exported here, raising
    `ExportError` for an op ONNX cannot express.
    """
    if model is None:
        from workbench.engines.onnx_export import export_onnx

        model = export_onnx(segment)
    return (backend or get_backend()).build(model, settings, segment.engine.name, request)
