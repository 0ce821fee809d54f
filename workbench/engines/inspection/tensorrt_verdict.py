"""TensorRT's own verdict on an engine, on every machine: its ONNX parsed and built into a real
plan by TensorRT-RTX's builder (which needs no GPU), with the conversion's profiles and in the
engine's precision.

`tensorrt_verdict` judges one ONNX model; `engine_verdicts` judges every engine of a converted
model (those inside `_tftrt_convert_function` functions and loops too), with the profiles
TF-TRT would build: the implicit-batch profile (batch 1 up to the largest batch seen), or in
dynamic-shape mode the profiles of `build()`'s inputs or of the given input sets, shape-tensor
values included. A built engine's verdict holds its anatomy (`tensorrt_kernels`): the kernels
TensorRT made, each with the TF nodes it holds, and the TF nodes it removed. Verdicts are
cached in memory and on disk (next to the prepared graphs, `graph/cache.py`'s directory) under
a key of everything that decides them, so a second look costs a hash, not a build.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.durable_files import atomic_write
from workbench.engines.backends.tensorrt_api import TENSORRT_RTX, TensorRTApi
from workbench.engines.backends.tensorrt_backend import (
    ShapeValues,
    build_plan,
    implicit_batch_profile,
)
from workbench.engines.backends.tensorrt_kernels import (
    EngineAnatomy,
    Kernel,
    engine_anatomy,
    kernel_table,
    onnx_producers,
    tf_nodes_of,
)
from workbench.engines.profiles import Profile, ShapeSet, optimization_profiles
from workbench.engines.settings import NO_REQUEST, BuildRequest
from workbench.errors import WorkbenchError, first_line
from workbench.graph.cache import cache_dir

if TYPE_CHECKING:
    import onnx
    import pandas as pd

    from workbench.engines.runtime.converted_model import ConvertedModel

# The contract's keys (`workbench convert --json --tensorrt`), in order.
JSON_KEYS = ("parsed", "built", "error", "plan_bytes", "build_s", "layers", "builder",
             "kernels", "removed_nodes")
# What the cache keeps of a build: the builder's words, before TF node names are given them.
_CACHED_KEYS = ("parsed", "built", "error", "plan_bytes", "build_s", "layers", "builder",
                "kernels", "regions", "network_nodes")
# Bump when what a verdict says changes for the same inputs (cached verdicts are then rebuilt);
# the key also hashes the code that makes the typed model and drives the builder.
VERDICT_VERSION = 2
_memory: dict[str, dict[str, Any]] = {}


@functools.cache
def _code_digest() -> str:
    from workbench.engines.backends import tensorrt_api, tensorrt_backend, tensorrt_kernels
    from workbench.engines.onnx import precision

    digest = hashlib.sha256()
    for module in (precision, tensorrt_api, tensorrt_backend, tensorrt_kernels):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


class TensorRTMissingError(WorkbenchError):
    """TensorRT-RTX is not installed, so no verdict can be given (the message says how)."""


@dataclass(frozen=True)
class TensorRTVerdict:
    """What TensorRT made of one engine's ONNX model."""

    engine: str
    parsed: bool
    built: bool
    error: str | None
    plan_bytes: int | None
    build_s: float | None
    layers: int | None
    builder: str
    precision: str = "FP32"
    profiles: tuple[str, ...] = ()  # the profiles built, in the user guide's notation
    anatomy: EngineAnatomy | None = None  # the built engine's kernels and removed TF nodes

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The built engine's kernels in execution order, each with its TF nodes."""
        return () if self.anatomy is None else self.anatomy.kernels

    @property
    def removed_nodes(self) -> tuple[str, ...]:
        """TF nodes TensorRT got but put in no kernel (removed or folded away)."""
        return () if self.anatomy is None else self.anatomy.removed

    def kernel_table(self) -> pd.DataFrame:
        """One row per kernel (`tensorrt_kernels.KERNEL_COLUMNS`); empty when not built."""
        return kernel_table(self.kernels, self.engine)

    def to_json(self) -> dict[str, Any]:
        """The contract's object: parsed, built, error, plan_bytes, build_s, layers, builder,
        kernels (name, type, nodes, inputs, outputs) and removed_nodes."""
        return {key: getattr(self, key) for key in JSON_KEYS[:-2]} | {
            "kernels": [k.to_json() for k in self.kernels],
            "removed_nodes": list(self.removed_nodes)}

    @property
    def outcome(self) -> str:
        """`built`, `parse failed` or `build failed`, for tables."""
        return "built" if self.built else "build failed" if self.parsed else "parse failed"


def require_tensorrt(api: TensorRTApi = TENSORRT_RTX) -> str:
    """The builder's name (`TensorRT-RTX 1.7.1.116`), or TensorRTMissingError saying how to
    install it."""
    name = api.builder_name()
    if name is None:
        raise TensorRTMissingError(
            f"TensorRT's verdict needs {api.label}: {api.install}")
    return name


def tensorrt_verdict(model: onnx.ModelProto, precision: str = "FP32",
                     request: BuildRequest = NO_REQUEST, *, name: str = "engine",
                     batches: Sequence[tuple[np.ndarray, ...]] = (),
                     shape_values: Mapping[str, ShapeValues] | None = None,
                     workspace_bytes: int | None = None, api: TensorRTApi = TENSORRT_RTX,
                     use_cache: bool = True, tf_nodes: Sequence[str] | None = None
                     ) -> TensorRTVerdict:
    """TensorRT's verdict on `model` at `precision` (FP16: float16 ONNX; INT8: Q/DQ
    calibrated on `batches`, the engine's input batches) for `request`'s profiles or implicit
    batch size; `shape_values` are the (min, opt, max) values of shape-tensor inputs.
    `tf_nodes`, the engine's TF nodes, name the nodes of its kernels (`tf_node_of`).

    Raises TensorRTMissingError without the package; everything TensorRT refuses is in the
    verdict (`error`), never raised."""
    builder = require_tensorrt(api)
    profiles = _profile_notes(request)
    batches = list(batches) if precision == "INT8" else []
    key = _key(model, precision, request, batches, shape_values, builder) if use_cache else ""
    found = _cached(key)
    if found is None:
        built = build_plan(api, model, precision, request, batches=batches,
                           shape_values=shape_values, workspace_bytes=workspace_bytes)
        found = {"parsed": built.parsed, "built": built.built, "error": built.error,
                 "plan_bytes": None if built.plan is None else len(built.plan),
                 "build_s": None if built.build_s is None else round(built.build_s, 3),
                 "layers": built.layers, "builder": built.builder,
                 "kernels": [k.to_record() for k in built.kernels],
                 "regions": [[r, list(nodes)] for r, nodes in built.regions],
                 "network_nodes": list(built.network_nodes)}
        _store(key, found)
    anatomy = _anatomy(name, found, model, tf_nodes) if found["built"] else None
    return TensorRTVerdict(engine=name, precision=precision, profiles=profiles,
                           anatomy=anatomy, **{k: found[k] for k in JSON_KEYS[:-2]})


def _anatomy(name: str, found: Mapping[str, Any], model: onnx.ModelProto,
             tf_nodes: Sequence[str] | None) -> EngineAnatomy:
    kernels = [Kernel.from_record(k) for k in found["kernels"]]
    anatomy = engine_anatomy(name, kernels, found["network_nodes"], onnx_producers(model),
                             tf_nodes, found["builder"])
    return replace(anatomy, regions=tuple(
        (region, tuple(tf_nodes_of(nodes, tf_nodes))) for region, nodes in found["regions"]))


def refused_verdict(name: str, error: str, precision: str = "FP32",
                    api: TensorRTApi = TENSORRT_RTX) -> TensorRTVerdict:
    """The verdict of an engine TensorRT never saw (not exported to ONNX, no input shapes)."""
    return TensorRTVerdict(name, False, False, error, None, None, None, require_tensorrt(api),
                           precision)


# --- every engine of a converted model ---------------------------------------------------------

Progress = Callable[[int, int, str], Any]  # (done, total, engine)
Step = tuple[float, str]  # (fraction done, what is being done): the app's background steps


def engine_verdicts(converted: ConvertedModel, input_sets: Sequence[Sequence[Any]] = (),
                    progress: Progress | None = None, api: TensorRTApi = TENSORRT_RTX
                    ) -> dict[str, TensorRTVerdict]:
    """engine name -> TensorRT's verdict, for every engine of `converted` (inside functions
    too). Profiles come from what `build()` built, else from `input_sets` (input sets of the
    model, in signature order), which also run natively once to give INT8 calibration data
    and shape-tensor values. `progress(done, total, engine)` is told before each engine."""
    steps = engine_verdict_steps(converted, input_sets, api)
    total = len(converted.ops)
    try:
        while True:
            _fraction, engine = next(steps)
            if progress is not None and engine in converted.ops:
                progress(list(converted.ops).index(engine), total, engine)
    except StopIteration as done:
        if progress is not None:
            progress(total, total, "")
        return dict(done.value)


def engine_verdict_steps(converted: ConvertedModel, input_sets: Sequence[Sequence[Any]] = (),
                         api: TensorRTApi = TENSORRT_RTX
                         ) -> Generator[Step, None, dict[str, TensorRTVerdict]]:
    """`engine_verdicts` as a generator of (fraction, engine about to be judged) steps, for a
    background task with progress; returns the verdicts."""
    require_tensorrt(api)
    shapes: dict[str, list[ShapeSet]] = {}
    inputs: dict[str, list[tuple[np.ndarray, ...]]] = {}
    if input_sets:
        yield 0.0, "running the model natively for each engine's input shapes and data"
        shapes = converted.engine_shape_sets(input_sets)
        inputs = converted.engine_input_batches(input_sets)
    ops = converted.ops
    largest = max((np.shape(s[0])[0] for s in input_sets if s and np.ndim(s[0])), default=1)
    verdicts = {}
    for done, (name, op) in enumerate(ops.items()):
        yield done / max(len(ops), 1), name
        verdicts[name] = _verdict_of(converted, name, op, shapes.get(name, []),
                                     inputs.get(name, []), api, largest)
    return verdicts


def _verdict_of(converted: ConvertedModel, name: str, op: Any, seen: list[ShapeSet],
                inputs: list[tuple[np.ndarray, ...]], api: TensorRTApi, largest: int = 1
                ) -> TensorRTVerdict:
    settings = converted.engine_settings(name)
    precision = settings.precision_mode
    batches = list(op.calibration_data) or inputs
    request = _request(op, settings.use_dynamic_shape, settings.dynamic_shape_profile_strategy,
                       seen)
    try:
        model = converted.onnx_model(name, keep=False)
    except Exception as error:  # the exporter cannot express the segment
        return refused_verdict(name, f"not exported to ONNX: {first_line(error)}", precision,
                               api)
    if request is None:  # nothing built, no input set reached it
        request = unreached_request(model, settings.use_dynamic_shape, largest)
    if request is None:
        return refused_verdict(
            name, "no input shapes to build for: call build(input_fn) or give input sets",
            precision, api)
    return tensorrt_verdict(model, precision, request, name=name, batches=batches,
                            shape_values=shape_values(model, batches),
                            workspace_bytes=settings.max_workspace_size_bytes, api=api,
                            tf_nodes=converted.segments[name].segment.engine.nodes)


def _request(op: Any, dynamic: bool, strategy: str | None, seen: list[ShapeSet]
             ) -> BuildRequest | None:
    """The build TF-TRT would make: the op's own (after build()), else one of `seen`."""
    if dynamic:
        profiles = tuple(op.profiles) or (
            tuple(optimization_profiles(seen, strategy or "Range")) if seen else ())
        return BuildRequest(profiles=profiles) if profiles else None
    built = [key for key, entry in op.cache.items() if entry.engine is not None]
    candidates = [tuple(k) for k in built] or list(seen)
    if not candidates:
        return None
    largest = max(candidates, key=lambda s: s[0][0] if s and s[0] else 1)
    batch = largest[0][0] if largest and largest[0] else 1
    return BuildRequest(profiles=(implicit_batch_profile(batch, largest),))


def unreached_request(model: onnx.ModelProto, dynamic: bool, largest: int
                      ) -> BuildRequest | None:
    """A build for an engine the input sets never reached (a loop body they run zero times, a
    cond branch they do not take: TF-TRT would build it when first called): its static input
    shapes, each unknown dim from 1 to `largest` (the largest batch of the sets), in
    dynamic-shape mode; the shapes at `largest` in implicit batch mode. None when an input
    has an unknown rank."""
    from workbench.engines.onnx.precision import graph_inputs

    low, high = [], []
    for value in graph_inputs(model):
        if not value.type.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in value.type.tensor_type.shape.dim]
        low.append(tuple(1 if d is None else d for d in dims))
        high.append(tuple(largest if d is None else d for d in dims))
    if not dynamic:
        batch = high[0][0] if high and high[0] else 1
        return BuildRequest(profiles=(implicit_batch_profile(batch, tuple(high)),))
    return BuildRequest(profiles=(Profile(tuple(low), tuple(high), tuple(high)),))


def shape_values(model: onnx.ModelProto, batches: Sequence[tuple[np.ndarray, ...]]
                 ) -> dict[str, ShapeValues]:
    """(min, opt, max) values of every integer input of rank <= 1 over `batches`: what
    TensorRT needs for an input that is a shape tensor (opt = max, as for shapes)."""
    from workbench.engines.onnx.precision import graph_inputs

    names = [i.name for i in graph_inputs(model)]
    found: dict[str, ShapeValues] = {}
    for index, name in enumerate(names):
        values = [np.asarray(b[index]) for b in batches if index < len(b)]
        if not values or values[0].dtype.kind not in "iu" or values[0].ndim > 1:
            continue
        if any(v.shape != values[0].shape for v in values):
            continue
        stack = np.stack([v.reshape(-1) for v in values])
        low = tuple(int(x) for x in stack.min(axis=0))
        high = tuple(int(x) for x in stack.max(axis=0))
        found[name] = (low, high, high)
    return found


def _profile_notes(request: BuildRequest) -> tuple[str, ...]:
    if request.profiles:
        return tuple(p.describe() for p in request.profiles)
    return (f"implicit batch <= {request.max_batch_size}",) if request.max_batch_size else ()


# --- the cache ----------------------------------------------------------------------------------

def _key(model: onnx.ModelProto, precision: str, request: BuildRequest,
         batches: Sequence[tuple[np.ndarray, ...]],
         shape_values: Mapping[str, ShapeValues] | None, builder: str) -> str:
    digest = hashlib.sha256()
    digest.update(model.SerializeToString(deterministic=True))
    described = {"v": VERDICT_VERSION, "code": _code_digest(), "precision": precision,
                 "builder": builder, "batch": request.max_batch_size,
                 "profiles": [asdict(p) for p in request.profiles],
                 "shape_values": {k: list(v) for k, v in sorted((shape_values or {}).items())}}
    digest.update(json.dumps(described, sort_keys=True).encode())
    for batch in batches:
        for array in batch:
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _verdict_dir() -> Path | None:
    root = cache_dir()
    return None if root is None else root / "tensorrt-verdicts"


def _cached(key: str) -> dict[str, Any] | None:
    if not key:
        return None
    if key in _memory:
        return dict(_memory[key])
    directory = _verdict_dir()
    path = None if directory is None else directory / f"{key}.json"
    try:
        found = json.loads(path.read_text()) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict) or set(found) != set(_CACHED_KEYS):
        return None
    _memory[key] = found
    return dict(found)


def _store(key: str, verdict: dict[str, Any]) -> None:
    if not key:
        return
    _memory[key] = dict(verdict)
    directory = _verdict_dir()
    if directory is None:
        return
    try:
        atomic_write(directory / f"{key}.json", json.dumps(verdict).encode())
    except OSError:  # a read-only cache only costs the next look a build
        pass


def verdict_columns(verdicts: Mapping[str, TensorRTVerdict]) -> dict[str, dict[str, Any]]:
    """engine -> the `tensorrt_*` columns of the engine tables (report, Summary tab, HTML)."""
    return {name: {f"tensorrt_{key}": getattr(v, key) for key in JSON_KEYS[:-2]}
            for name, v in verdicts.items()}

