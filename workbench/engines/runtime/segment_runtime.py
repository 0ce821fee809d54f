"""One engine at run time: its segment, its ONNX export (made on demand) and its engine op;
building an engine from the export, and writing the exports and engines out as files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from workbench import environment
from workbench.engines.backends.base import Backend, Engine
from workbench.engines.runtime.engine_op import EngineOp
from workbench.engines.segment import SegmentGraph
from workbench.engines.settings import BuildRequest
from workbench.errors import WorkbenchError
from workbench.hardware import release_free_memory

T = TypeVar("T")


@dataclass
class SegmentRuntime:
    """One engine's segment, its ONNX export (kept once made with `keep`) and its engine op."""

    segment: SegmentGraph
    op: EngineOp
    onnx_model: Any = None
    export_error: str = ""  # set by a failed export: the engine's builds fail with it

    @property
    def name(self) -> str:
        return self.segment.engine.name

    def onnx(self, keep: bool = True) -> Any:
        """The segment's ONNX model; raises ExportError when it cannot be. `keep=False`
        exports without holding on to it (it holds every weight of the segment again)."""
        if self.onnx_model is not None:
            return self.onnx_model
        from workbench.engines.onnx.segment_export import export_onnx

        model = self.exported(export_onnx)
        if keep:
            self.onnx_model = model
        return model

    def exported(self, export: Callable[[SegmentGraph], T]) -> T:
        """`export(segment)`, a failure recorded as `export_error`."""
        try:
            return export(self.segment)
        except Exception as exc:
            self.export_error = str(exc)
            raise

    def write_onnx(self, path: Path) -> None:
        """The ONNX model into `path` as one file, streamed: from an engine's file that is the
        export (an FP32 ONNX Runtime engine), else exported again (to a temporary file)
        unless it is kept."""
        from workbench.engines.onnx.external_data import remove_model, write_inline
        from workbench.engines.runtime.segment_engine import export_file

        if self.onnx_model is not None:
            path.write_bytes(self.onnx_model.SerializeToString())
            return
        exported = [e.exported_model for _, e in self.op.engines()
                    if getattr(e, "exported_model", None) is not None]
        source = exported[0] if exported else self.exported(export_file)
        try:
            with path.open("wb") as out:
                write_inline(source, out)
        finally:
            if not exported:
                remove_model(source)

    def build_engine(self, request: BuildRequest, backend: Backend) -> Engine:
        """An engine of the segment for `request` on `backend` (the engine op's builder)."""
        from workbench.engines.runtime.segment_engine import build_segment_engine, export_file

        if environment.ABORT_ENGINE_BUILD.read():
            raise WorkbenchError(f"engine build aborted by {environment.ABORT_ENGINE_BUILD.name}")
        if self.export_error:
            raise WorkbenchError(self.export_error)
        # The export is a file whose weights are streamed from the segment's protos: the
        # engine takes it over, and a later build or save exports again (quick) rather
        # than keep another copy of the weights for the model's life.
        model = self.onnx_model if self.onnx_model is not None else self.exported(export_file)
        self.segment.release()  # made again if needed
        try:
            return build_segment_engine(self.segment, self.op.settings, request,
                                        backend=backend, model=model)
        finally:
            release_free_memory()  # the export's and the build's freed memory


def export_engines(segments: Iterable[SegmentRuntime], directory: str | os.PathLike
                   ) -> list[str]:
    """Writes each segment's ONNX model (`<engine>.onnx`, or `<engine>.onnx.txt` saying why
    not) and each built engine (`<engine>.<n>.plan` for TensorRT, `<engine>.<n>.<backend>`
    otherwise) into `directory`; returns the file names."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for runtime in segments:
        written.append(_write_onnx_or_why_not(runtime, out))
        written += _write_engines(runtime, out)
    return written


def _write_onnx_or_why_not(runtime: SegmentRuntime, out: Path) -> str:
    try:
        runtime.write_onnx(out / f"{runtime.name}.onnx")
        return f"{runtime.name}.onnx"
    except Exception as exc:
        (out / f"{runtime.name}.onnx.txt").write_text(f"not exported: {exc}\n")
        return f"{runtime.name}.onnx.txt"


def _write_engines(runtime: SegmentRuntime, out: Path) -> list[str]:
    from workbench.engines.backends.base import unpack_engine

    written = []
    for index, (_, engine) in enumerate(runtime.op.engines()):
        _, payload = unpack_engine(engine.serialize(), engine.backend)
        suffix = "plan" if engine.backend.startswith("tensorrt") else engine.backend
        (out / f"{runtime.name}.{index}.{suffix}").write_bytes(payload)
        written.append(f"{runtime.name}.{index}.{suffix}")
    return written
