"""The one way a segment becomes a backend engine: ONNX export, then the backend's build.

The converted model's engine ops (segment_runtime.py), the per-layer profile (profiling/engines.py)
and the whole-model reference (whole_model.py) all build through `build_segment_engine`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench.engines.backends.base import Backend, Engine, get_backend
from workbench.engines.onnx.external_data import new_model, take_model
from workbench.engines.segment import SegmentGraph
from workbench.engines.settings import NO_REQUEST, BuildRequest, EngineSettings

if TYPE_CHECKING:
    import onnx


def export_file(segment: SegmentGraph) -> Path:
    """The segment's ONNX export in a new temporary file, its weights in the data file beside
    it (`onnx_export.write_export`); raises `ExportError` for an op ONNX cannot express."""
    from workbench.engines.onnx.segment_export import write_export

    with new_model() as path:
        write_export(segment, path)
    return path


def build_segment_engine(segment: SegmentGraph, settings: EngineSettings,
                         request: BuildRequest = NO_REQUEST, *, backend: Backend | None = None,
                         model: onnx.ModelProto | Path | None = None) -> Engine:
    """`segment` built on `backend` (default: `get_backend()`) for `settings` and `request`.

    `model` is the segment's ONNX export when the caller made it already (the converted model
    exports each segment once for all its builds): a ModelProto, or the file `export_file`
    wrote, which the build takes over. Otherwise it is exported here (to a file), raising
    `ExportError` for an op ONNX cannot express. A backend with `build_file` builds from the
    file (ONNX Runtime maps its weights); the others get the model loaded.
    """
    backend = backend or get_backend()
    name = segment.engine.name
    if model is None:
        model = export_file(segment)
    if isinstance(model, Path):
        build_file = getattr(backend, "build_file", None)
        if build_file is not None:
            return build_file(model, settings, name, request)
        model = take_model(model)
    return backend.build(model, settings, name, request)
