"""The small interface every engine backend implements, and the registry that picks one.

A backend turns one segment's ONNX model into an `Engine` for the conversion's
`EngineSettings` and one `BuildRequest` (batch size or profiles, calibration data). Engines
run, report per-layer timings in the shared layer table and serialize to bytes that the same
backend deserializes without rebuilding.
`get_backend()` picks TensorRT (then TensorRT-RTX) when it imports and a GPU exists, else ONNX
Runtime, the way a TF-TRT user would get TensorRT on a GPU machine and the workbench still runs
everywhere else.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from workbench.conversion.params import PRECISION_MODES
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    import onnx
    import pandas as pd

    from workbench.engines.settings import BuildRequest, EngineSettings


class EngineBuildError(WorkbenchError):
    """An engine could not be built or loaded; the runtime falls back to the native segment."""


class EngineRunError(EngineBuildError):
    """An engine failed while running (bad shapes, a kernel error): a subclass so that the
    runtime's native-segment fallback catches it like a failed build."""


class BackendUnavailableError(WorkbenchError):
    """A backend that cannot run here (its library or device is missing); says why."""


class CalibrationDataError(WorkbenchError):
    """INT8 calibration data that cannot be used (none, wrong input count, mixed shapes).

    Not an EngineBuildError on purpose: bad user input must stop the build, not silently fall
    back to the native segment.
    """


class Engine(Protocol):
    """A backend engine, in the spirit of Polygraphy's BaseRunner: built active (ready to
    run); `deactivate()` frees what running needs (a session, an execution context) and
    `activate()` makes it again; usable as a context manager that deactivates on exit."""

    name: str
    backend: str
    device: str
    precision: str
    input_names: list[str]
    output_names: list[str]

    @property
    def is_active(self) -> bool: ...

    def activate(self) -> None: ...

    def deactivate(self) -> None: ...

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]: ...

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def layer_timings(self, inputs: list[np.ndarray], runs: int = 10,
                      run: str | None = None) -> pd.DataFrame: ...

    def serialize(self) -> bytes: ...

    def write(self, path: Path) -> None: ...

    def __enter__(self) -> Engine: ...

    def __exit__(self, *exc: object) -> None: ...


class Backend(Protocol):
    name: str
    device: str

    def build(self, model: onnx.ModelProto, settings: EngineSettings, name: str,
              request: BuildRequest = ...) -> Engine: ...

    def deserialize(self, data: bytes, name: str) -> Engine: ...


class EngineBase:
    """What every backend engine shares on top of its `_activate`, `_deactivate` and `_run`:
    the activation state, `run` refusing an inactive engine, `infer` by name and the context
    manager."""

    name: str
    input_names: list[str]
    output_names: list[str]
    _active = False

    @property
    def is_active(self) -> bool:
        return self._active

    def activate(self) -> None:
        if not self._active:
            self._activate()
            self._active = True

    def deactivate(self) -> None:
        if self._active:
            self._deactivate()
            self._active = False

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs in the engine's output order for inputs in its input order."""
        if not self._active:
            raise WorkbenchError(f"engine {self.name!r} is not active: call activate() first")
        self._check_inputs(inputs)
        return self._run(inputs)

    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        if len(inputs) != len(self.input_names):
            raise WorkbenchError(
                f"engine {self.name!r} takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(inputs)}")

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for inputs by name (Polygraphy's `infer(feed_dict)`)."""
        missing = [n for n in self.input_names if n not in feeds]
        unknown = sorted(set(feeds) - set(self.input_names))
        if missing or unknown:
            raise WorkbenchError(
                f"engine {self.name!r} takes inputs {', '.join(self.input_names)}; "
                + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"))
        outputs = self.run([feeds[n] for n in self.input_names])
        return dict(zip(self.output_names, outputs, strict=True))

    def __enter__(self) -> EngineBase:
        self.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.deactivate()

    def write(self, path: Path) -> None:
        """`serialize()`'s bytes into the file `path` (backends override it to stream)."""
        path.write_bytes(self.serialize())

    def _activate(self) -> None:
        raise NotImplementedError

    def _deactivate(self) -> None:
        raise NotImplementedError

    def _run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


def check_calibration_data(data: Sequence[Sequence[np.ndarray]], input_names: Sequence[str]
                           ) -> list[tuple[np.ndarray, ...]]:
    """The calibration batches as arrays, or a clear error before any calibration work starts.

    Like TF-TRT's `calibration_input_fn`, every batch must feed every input with one shape
    throughout (docs/tftrt-behaviour.md#int8).
    """
    batches = [tuple(np.asarray(x) for x in batch) for batch in data]
    if not batches:
        raise CalibrationDataError(
            "INT8 needs calibration data: give at least one batch of engine inputs")
    for index, batch in enumerate(batches):
        if len(batch) != len(input_names):
            raise CalibrationDataError(
                f"calibration batch {index} has {len(batch)} tensors; the engine has "
                f"{len(input_names)} inputs ({', '.join(input_names)})")
    first = [x.shape for x in batches[0]]
    for index, batch in enumerate(batches[1:], start=1):
        shapes = [x.shape for x in batch]
        if shapes != first:
            raise CalibrationDataError(
                f"calibration data has mixed shapes: batch 0 is {_shapes(first)}, batch {index} "
                f"is {_shapes(shapes)}; every calibration batch must have the same shape")
    return batches


def _shapes(shapes: Sequence[tuple[int, ...]]) -> str:
    return "; ".join(str(list(s)) for s in shapes)


# --- serialized engines: a small header so a blob says which backend and precision made it ---

_MAGIC = b"WBENGINE1\n"


def pack_engine(backend: str, precision: str, payload: bytes, **meta: object) -> bytes:
    """`payload` (ONNX bytes, a TensorRT plan) behind a one-line JSON header."""
    return engine_header(backend, precision, **meta) + payload


def engine_header(backend: str, precision: str, **meta: object) -> bytes:
    """What `pack_engine` puts before the payload; written alone, then the payload, a packed
    engine's file needs no second copy of a payload of hundreds of MB."""
    header = json.dumps({"backend": backend, "precision": precision, **meta}, sort_keys=True)
    return _MAGIC + header.encode() + b"\n"


def unpack_engine(data: bytes, backend: str) -> tuple[dict, bytes]:
    """The header and payload of a packed engine made by `backend`; damaged data is an error."""
    if not isinstance(data, (bytes, bytearray)) or not data.startswith(_MAGIC):
        raise EngineBuildError(f"not a serialized {backend} engine (missing workbench header)")
    end = data.find(b"\n", len(_MAGIC))  # slicing once: payloads are ~100 MB for ResNet-50
    try:
        meta = json.loads(data[len(_MAGIC):end]) if end >= 0 else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("precision") not in PRECISION_MODES:
        raise EngineBuildError(f"damaged serialized {backend} engine: unreadable header")
    if meta.get("backend") != backend:
        raise EngineBuildError(
            f"this engine was serialized by {meta.get('backend')!r}, not {backend!r}")
    return meta, bytes(data[end + 1:])


# --- registry ---

@dataclass(frozen=True)
class _Entry:
    module: str
    factory: str
    status: str  # a function () -> (available, reason) in that module


# Preference order: the first available backend is the default.
_REGISTRY = {
    "tensorrt": _Entry("workbench.engines.backends.tensorrt_backend", "TensorRTBackend", "status"),
    # Builds everywhere it installs (TensorRT's verdict) but runs engines only on a GPU: its
    # status is available only there, so ONNX Runtime stays the default elsewhere.
    "tensorrt-rtx": _Entry("workbench.engines.backends.tensorrt_backend", "TensorRTRTXBackend",
                           "rtx_status"),
    "onnxruntime": _Entry("workbench.engines.backends.onnxruntime_backend", "OnnxRuntimeBackend",
                          "status"),
}


def _call(entry: _Entry, attr: str) -> Callable:
    return getattr(importlib.import_module(entry.module), attr)


def backend_status() -> dict[str, tuple[bool, str]]:
    """Every registered backend: whether it can run here, and if not why not."""
    return {name: _status(entry) for name, entry in _REGISTRY.items()}


def _status(entry: _Entry) -> tuple[bool, str]:
    try:
        return _call(entry, entry.status)()
    except ImportError as error:  # a dependency of the backend's module is broken
        return False, f"{entry.module} does not import: {error}"


def available_backends() -> list[str]:
    """Names of the backends that can build engines here, preferred first."""
    return [name for name, (ok, _) in backend_status().items() if ok]


def get_backend(name: str | None = None) -> Backend:
    """The named backend, or the preferred available one (TensorRT on a GPU, else ONNX Runtime)."""
    if name is None:
        names = available_backends()
        if not names:
            raise BackendUnavailableError("no engine backend can run here")
        name = names[0]
    entry = _REGISTRY.get(name)
    if entry is None:
        raise WorkbenchError(
            f"unknown backend {name!r}: expected one of {', '.join(_REGISTRY)}")
    ok, reason = _status(entry)
    if not ok:
        raise BackendUnavailableError(f"backend {name!r} is not available here: {reason}")
    return _call(entry, entry.factory)()
