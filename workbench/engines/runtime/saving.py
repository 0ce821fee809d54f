"""Saving and loading converted models, the way TF-TRT's `save()` laid them out.

The directory is a real SavedModel laid out as TF-TRT's: its signature runs the converted graph
with one `TRTEngineOp` per engine, carrying TF-TRT's attributes, whose `segment_func` is the
engine's `<engine>_native_segment` function. Plain `tf.saved_model.load` loads it wherever the
workbench registered its TRTEngineOp (`native_op/trt_engine_op.py`, on import), which runs the
native segment, as TF-TRT's kernel did without an engine; elsewhere TensorFlow refuses it as it
refused TF-TRT's models, and `workbench strip-engines` writes it loadable anywhere. (Where the
op cannot be compiled, each engine node is the plain call of its native segment instead.)

`assets/` carries what only the workbench reads: the serialized engines (one `trt-serialized-
engine.<engine>` per engine op, as TF-TRT's, its cached engines back to back, each one's offset
and size in the manifest; empty with `save_engines=False`, as TF-TRT's after calibration; models
saved before kept a file per engine, `<engine>.<n>`, still read), the segment and converted
GraphDefs without the weights the checkpoint holds (`saved_graphs.py`), and a JSON manifest.
So each weight is on disk once in the checkpoint and once per engine built from it, as in
TF-TRT's models; a segment's ONNX model is made from the loaded model on demand
(`ConvertedModel.export_engines`). Everything is written into a temporary sibling directory,
its `saved_model.pb` hidden until the last step, and renamed into place: a failed or killed
save leaves nothing that loads (`atomic_save.py`).
"""

from __future__ import annotations

import gc
import json
import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from workbench.conversion.result import EngineInfo
from workbench.durable_files import format_bytes
from workbench.engines.profiles import Profile
from workbench.engines.runtime.atomic_save import (
    check_free_space,
    hide_saved_model,
    refuse_non_empty,
    staged,
    written_files,
)
from workbench.engines.runtime.converted_model import ConvertedModel
from workbench.engines.runtime.output_check import OutputSpec
from workbench.engines.runtime.runtime_graph import RuntimeGraph
from workbench.engines.runtime.saved_graphs import (
    CheckpointWeights,
    DamagedModelError,
    checkpoint_key,
    read_lifted,
    restoring,
    weight_bytes,
    write_without_saved,
)
from workbench.engines.settings import EngineSettings
from workbench.engines.weights import LiftedGraph, StoredBytes
from workbench.errors import WorkbenchError, first_line
from workbench.graph.loading import WORKBENCH_MANIFEST
from workbench.graph.nodes import TensorSpec, element_count
from workbench.graph.wire import read_graph_def, write_graph_def
from workbench.hardware import release_free_memory
from workbench.lazy import tf

MANIFEST = WORKBENCH_MANIFEST
FORMAT = "tftrt-workbench-converted/3"
# /2 kept every weight in the GraphDefs too: read as they are, with no saved weights to restore.
READ_FORMATS = (FORMAT, "tftrt-workbench-converted/2")
LISTED_FILE_BYTES = 1 << 20  # save()'s log names the files from this size
CONVERTED_GRAPH = "converted_graph.pb"
ENGINE_PREFIX = "trt-serialized-engine."


logger = logging.getLogger("workbench.engines")


def save_converted(model: ConvertedModel, directory: str | Path, overwrite: bool = False,
                   save_engines: bool = True,
                   write_saved_model: Callable[..., Any] | None = None) -> Path:
    """Writes `model` to `directory` (refusing a non-empty one unless `overwrite`, and a disk
    without room for it before writing anything); `write_saved_model(obj, dir, signatures)`
    writes the SavedModel (`tf.saved_model.save` by default: the facade passes the user's
    SaveOptions with it). Logs each file written and its size."""
    target = Path(directory)
    refuse_non_empty(target, overwrite)
    check_free_space(target, estimated_save_bytes(model, save_engines))
    try:
        with staged(target) as staging:
            _write(model, staging, save_engines, write_saved_model)
    finally:
        for segment in model.graph.segments:  # each held its weights again
            segment.release()
    files = written_files(target)
    logger.info("saved %s: %s in %d files (%s)", target, format_bytes(sum(files.values())),
                len(files), ", ".join(f"{n} {format_bytes(b)}" for n, b in files.items()
                                      if b >= LISTED_FILE_BYTES) or "all small")
    return target


def estimated_save_bytes(model: ConvertedModel, save_engines: bool = True) -> int:
    """The disk a save of `model` takes at its peak: the weights twice (the checkpoint, and
    the GraphDefs it is filled from, removed before the engines are written) and the engines."""
    graph = model.graph
    saved = graph.saved_weights
    if saved is not None and saved.keys:  # a loaded model: its checkpoint's shapes, no value
        weights = saved.total_bytes()
    else:
        found = dict(graph.lifted_converted().weights)
        for segment in graph.segments:
            found.update(segment.lifted().weights)
        weights = weight_bytes(found.values())
    engines = sum(_engine_bytes(e) for op in model.ops.values() for _, e in op.engines()
                  ) if save_engines else 0
    return 2 * weights + engines


def _engine_bytes(engine: Any) -> int:
    size = getattr(engine, "model_size", None)
    return size if size is not None else len(engine.serialize())


def _write(model: ConvertedModel, out: Path, save_engines: bool,
           write_saved_model: Callable[..., Any] | None) -> None:
    graph = model.graph
    assets = out / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    full = out / ".with-weights"  # the GraphDefs with every weight, removed once read
    full.mkdir()
    stored: dict[str, StoredBytes] = {}  # where the GraphDefs written put each weight
    files = [CONVERTED_GRAPH, *(f"{s.engine.name}.segment.pb" for s in graph.segments)]
    with _sessions_closed(model):  # nothing below runs an engine
        # From the lifted forms, their Consts written around the prepared graph's protos: the
        # GraphDefs with every weight are not made.
        _write_lifted(graph.lifted_converted(), full / CONVERTED_GRAPH, stored)
        for segment, file in zip(graph.segments, files[1:], strict=True):
            _write_lifted(segment.lifted(), full / file, stored)
        # The variables are filled from the files just written, a slice at a time; then the
        # GraphDefs are kept without the weights the variables hold.
        saved = _write_saved_model(graph, out, model.captured_weights, stored, write_saved_model)
        hide_saved_model(out)
        for file in files:
            write_without_saved(full / file, assets / file, saved)
        shutil.rmtree(full)
        engines = [_segment_entry(model, s, assets, save_engines) for s in graph.segments]
    manifest = {
        "format": FORMAT,
        "signature_key": graph.signature_key,
        "input_names": graph.input_names, "output_names": graph.output_names,
        "input_tensors": graph.input_tensors, "output_tensors": graph.output_tensors,
        "input_dtypes": graph.input_dtypes,
        "input_shapes": [None if s is None else list(s) for s in graph.input_shapes],
        "output_specs": [{"dtype": s.dtype, "shape": None if s.shape is None else list(s.shape)}
                         for s in graph.output_specs],
        "prepared_for": graph.prepared_for,
        "settings": asdict(model.settings),
        "engine_settings": graph.engine_settings,
        "engines": engines,
        "saved_weights": saved,
    }
    (assets / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _segment_entry(model: ConvertedModel, segment: Any, assets: Path,
                   save_engines: bool) -> dict[str, Any]:
    """Writes the segment's engines; its manifest entry."""
    name = segment.engine.name
    entry: dict[str, Any] = {
        "info": _info_json(segment.engine),
        "input_names": segment.input_names, "output_names": segment.output_names,
        "input_specs": [asdict(s) for s in segment.input_specs],
        "output_specs": [asdict(s) for s in segment.output_specs],
        "engines": [],
    }
    op = model.ops[name]
    file = assets / f"{ENGINE_PREFIX}{name}"
    if not save_engines:
        if len(op.cache) or op.calibration_data:  # TF-TRT: a cache resource, no engines
            file.touch()
        return entry
    for index, (key, engine) in enumerate(op.engines()):
        offset = file.stat().st_size if index else 0
        _append_engine(engine, file, index)
        entry["engines"].append({"file": file.name, "offset": offset,
                                 "size": file.stat().st_size - offset, "key": _key_json(key),
                                 "backend": engine.backend, "device": engine.device,
                                 "precision": engine.precision})
    return entry


def _append_engine(engine: Any, file: Path, index: int) -> None:
    """The engine written at the end of `file` (the first one makes it)."""
    if not index:
        engine.write(file)
        return
    part = file.with_name(f"{file.name}.part")
    try:
        engine.write(part)
        with file.open("ab") as out, part.open("rb") as data:
            shutil.copyfileobj(data, out)
    finally:
        part.unlink(missing_ok=True)


@contextmanager
def _sessions_closed(model: ConvertedModel) -> Iterator[None]:
    """The built engines inactive meanwhile: TensorFlow's SavedModel writing copies every native
    weight many times, and the engines' sessions hold the converted ones again (VGG16: 1.3 GB
    of a 15 GB peak); writing the segments reads each weight once more. Their serialized
    models stay, so reactivating does not rebuild them."""
    active = [engine for op in model.ops.values() for _, engine in op.engines()
              if engine.is_active]
    for engine in active:
        engine.deactivate()
    release_free_memory()
    try:
        yield
    finally:
        release_free_memory()  # what writing left, before the sessions are made again
        # Largest first: making a session holds its weights twice for a while (read, then
        # packed), the fewer other sessions by then the lower the peak.
        for engine in sorted(active, key=lambda e: -getattr(e, "model_size", 0)):
            engine.activate()


def _write_saved_model(graph: RuntimeGraph, out: Path, captured: dict[str, Any],
                       stored: dict[str, StoredBytes],
                       write_saved_model: Callable[..., Any] | None) -> dict[str, str]:
    """The SavedModel (`_save_signature`); each weight it made a variable -> its checkpoint
    key."""
    from workbench.engines.runtime.hybrid_graph import forget_functions, native_function_name

    # Native segment functions have fixed names, registered process-wide while the function
    # saving them lives: collect it once saved, so the next model's save can use the names.
    forget_functions([native_function_name(e.name) for e in graph.engines])
    try:
        return _save_signature(graph, out, captured, stored, write_saved_model)
    finally:
        gc.collect()
        release_free_memory()  # the variables


def _save_signature(graph: RuntimeGraph, out: Path, captured: dict[str, Any],
                    stored: dict[str, StoredBytes],
                    write_saved_model: Callable[..., Any] | None) -> dict[str, str]:
    """The SavedModel: its weights variables, sharing the buffers of those the converted
    function `captured` (no copy), the others read from where they were `stored` (else made
    from their protos)."""
    from workbench.engines.runtime.hybrid_graph import wrap_converted
    from workbench.engines.runtime.saved_weights import lift_saved_weights
    from workbench.engines.weights import as_variable
    from workbench.graph.variables import DT_RESOURCE

    lifted = lift_saved_weights(graph.lifted_converted(), graph.segments)
    protos = lifted.weights
    names = list(protos)

    def variable(name: str) -> Any:  # each proto let go once it is a variable
        tensor = protos.pop(name)
        if name in captured:
            return tf.Variable(captured[name], trainable=False)
        return as_variable(tensor, stored.get(name))

    # Largest first: a weight not `stored` has its bytes and its variable held at once, the
    # fewer other variables by then the lower the peak.
    made = {n: variable(n) for n in sorted(names, key=lambda n: -element_count(protos[n]))}
    weight_names = list(names)
    module = tf.Module()
    module.weights = [made.pop(n) for n in names]
    graph.release_converted()
    for segment in graph.segments:
        segment.release()
    # Variables the native segments read themselves (TF-TRT's disable_graph_freezing,
    # graph/variables.py) are fed as their handles.
    handles = {n.name for n in lifted.graph_def.node
               if n.op == "Placeholder" and n.attr["dtype"].type == DT_RESOURCE}
    by_handle = [n in handles for n in names]
    weight_specs = [tf.TensorSpec([], tf.resource) if handle else tf.TensorSpec(v.shape, v.dtype)
                    for v, handle in zip(module.weights, by_handle, strict=True)]
    _with_engine_ops(graph, lifted.graph_def)
    native = wrap_converted(lifted.graph_def, [*graph.input_tensors,
                                               *(f"{n}:0" for n in names)],
                            [*graph.feed_specs(), *weight_specs], graph.output_tensors)
    del lifted
    names = graph.output_names

    @tf.function(input_signature=graph.feed_specs(), autograph=False)
    def serve(*args: Any) -> dict[str, Any]:
        weights = [v.handle if handle else tf.convert_to_tensor(v)
                   for v, handle in zip(module.weights, by_handle, strict=True)]
        return dict(zip(names, native(*args, *weights), strict=True))

    module.serve = serve
    (write_saved_model or tf.saved_model.save)(
        module, str(out), {graph.signature_key: serve.get_concrete_function()})
    return {name: checkpoint_key(index) for index, name in enumerate(weight_names)}


def _with_engine_ops(graph: RuntimeGraph, graph_def: Any) -> None:
    """Each engine a TRTEngineOp calling its native segment, as TF-TRT saved it, where the
    workbench's TRTEngineOp can be registered (`native_op/trt_engine_op.py`); else the engines
    stay direct calls of their native segments (which the op would run anyway)."""
    from workbench.engines.runtime.native_op.trt_engine_op import register_engine_op
    from workbench.engines.runtime.tftrt_graph_def import (
        as_engine_nodes,
        engine_attrs_of,
        engine_infos,
    )

    if register_engine_op():
        as_engine_nodes(graph_def, engine_infos(graph), engine_attrs_of(graph), to_run=True)


def _write_lifted(lifted: LiftedGraph, path: Path, stored: dict[str, StoredBytes]) -> None:
    """The GraphDef into `path` a node at a time, each weight's Const written around its proto's
    bytes (`write_graph_def`); where each weight's bytes went into `stored`."""
    placed: dict[str, int] = {}
    with path.open("wb") as out:
        write_graph_def(lifted.graph_def, out, lifted.weights, placed)
    stored.update({name: StoredBytes(path, offset) for name, offset in placed.items()})


# --- loading --------------------------------------------------------------------------------


def load_converted(directory: str | Path, backend: Any = None) -> ConvertedModel:
    """A saved converted model with its engines (deserialized, not rebuilt)."""
    path = Path(directory)
    assets = path / "assets"
    manifest = _read_manifest(path)
    if not (path / "saved_model.pb").is_file():
        raise DamagedModelError(f"{path} has no saved_model.pb; it is not a complete saved "
                                "converted model (save it again)")
    release_free_memory()  # what a model the user dropped freed goes back before this one
    try:
        saved = CheckpointWeights(path, manifest.get("saved_weights", {}))
        segments = [_segment(assets, e, saved) for e in manifest["engines"]]
        graph = RuntimeGraph(
            converted_source=_converted_graph(assets / CONVERTED_GRAPH, saved),
            lifted_source=lambda: _lifted_converted(assets / CONVERTED_GRAPH, saved),
            segments=segments,
            input_names=manifest["input_names"], output_names=manifest["output_names"],
            input_tensors=manifest["input_tensors"], output_tensors=manifest["output_tensors"],
            input_dtypes=manifest["input_dtypes"],
            input_shapes=[None if s is None else tuple(s) for s in manifest["input_shapes"]],
            signature_key=manifest["signature_key"],
            engine_settings=manifest.get("engine_settings", {}),
            output_specs=[  # absent from models saved before the output check
                OutputSpec(name, s["dtype"], None if s["shape"] is None else tuple(s["shape"]))
                for name, s in zip(manifest["output_names"], manifest.get("output_specs", ()),
                                   strict=False)],
            prepared_for=manifest.get("prepared_for", ""),
            saved_weights=saved,
        )
        settings = EngineSettings(**manifest["settings"])
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, DamagedModelError):
            raise
        raise DamagedModelError(f"{path}: the manifest assets/{MANIFEST} is incomplete "
                                f"({first_line(exc)}); save the model again") from None
    model = ConvertedModel(graph, settings, backend=backend, in_process=False)
    for entry in manifest["engines"]:
        _load_engines(model, assets, entry)
    return model


def _read_manifest(path: Path) -> dict[str, Any]:
    file = path / "assets" / MANIFEST
    if not path.is_dir():
        raise WorkbenchError(f"No such directory: {path}")
    if not file.is_file():
        raise DamagedModelError(f"{path} has no assets/{MANIFEST}: it is not a converted model "
                                "saved by the workbench, or its assets were lost")
    try:
        manifest = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedModelError(f"{file} is corrupt ({first_line(exc)}); save the model again"
                                ) from None
    if not isinstance(manifest, dict) or not str(manifest.get("format")).startswith(
            FORMAT.rpartition("/")[0]):
        raise DamagedModelError(f"{file} is not a {FORMAT} manifest")
    if manifest["format"] not in READ_FORMATS:
        raise DamagedModelError(f"{path} was saved in format {manifest['format']}, this "
                                f"workbench reads {FORMAT}: convert and save the model again")
    return manifest


def _converted_graph(file: Path, saved: CheckpointWeights) -> Callable[[], Any]:
    """Reads the converted GraphDef on use (it holds every native weight, which the converted
    function captures as tensors, see `RuntimeGraph.release_converted`)."""
    if not file.is_file():
        raise DamagedModelError(f"{file} is missing; save the model again")
    return lambda: _graph_def(file, restoring(saved)[0])


def _lifted_converted(file: Path, saved: CheckpointWeights) -> LiftedGraph:
    """The converted GraphDef read lifted (`weights.lift_weights`' form), a node at a time:
    each weight's value (read from the checkpoint, or its parsed Const) kept apart, a
    Placeholder in its place. The GraphDef with every weight is not made, nor its bytes read
    whole (ConvNeXtXLarge's reload: 1x each)."""
    from workbench.engines.weights import stored_weight

    return read_lifted(lambda replace: _graph_def(file, replace), saved, stored_weight)


def _graph_def(file: Path, replace: Callable[[Any], Any] | None = None) -> Any:
    from google.protobuf.message import DecodeError

    if not file.is_file():
        raise DamagedModelError(f"{file} is missing; save the model again")
    try:
        with file.open("rb") as opened:
            return read_graph_def(opened, replace)
    except (DecodeError, ValueError) as exc:
        raise DamagedModelError(f"{file} is corrupt ({first_line(exc)})") from None


def _segment(assets: Path, entry: dict[str, Any], saved: CheckpointWeights) -> Any:
    from workbench.engines.segment import SegmentGraph
    from workbench.engines.weights import large_const

    info = _info_from_json(entry["info"])
    file = assets / f"{info.name}.segment.pb"
    if not file.is_file():
        raise DamagedModelError(f"{file} is missing; save the model again")
    return SegmentGraph(
        engine=info,
        source=lambda: _graph_def(file, restoring(saved)[0]),
        input_names=entry["input_names"], output_names=entry["output_names"],
        input_specs=[_spec(s) for s in entry["input_specs"]],
        output_specs=[_spec(s) for s in entry["output_specs"]],
        lifted_source=lambda: read_lifted(lambda replace: _graph_def(file, replace), saved,
                                          large_const),
    )


def _load_engines(model: ConvertedModel, assets: Path, entry: dict[str, Any]) -> None:
    name = entry["info"]["name"]
    op = model.ops[name]
    for saved in entry["engines"]:
        file = assets / saved["file"]
        if not file.is_file():
            raise DamagedModelError(f"engine file {file} is missing; save the model again")
        try:
            backend = model.backend if model.backend.name == saved["backend"] else None
            if backend is None:
                from workbench.engines.backends.base import get_backend

                backend = get_backend(saved["backend"])
            engine = _read_engine(backend, file, saved, name)
        except Exception as exc:
            raise DamagedModelError(f"engine file {file} cannot be loaded: {first_line(exc)}"
                                    ) from None
        key = _key_from_json(saved["key"])
        if not op.settings.use_implicit_batch:
            op.profiles = key
        op.add_engine(key, engine)


def _read_engine(backend: Any, file: Path, saved: dict[str, Any], name: str) -> Any:
    """One engine of an engine file: a file holding just it is streamed where the backend
    can, one of several cached engines is read from its offset."""
    offset, size = saved.get("offset", 0), saved.get("size")
    from_file = getattr(backend, "deserialize_file", None)  # streams the model
    if size is None or (offset == 0 and size == file.stat().st_size):
        return from_file(file, name) if from_file else backend.deserialize(file.read_bytes(),
                                                                           name)
    with file.open("rb") as opened:
        opened.seek(offset)
        return backend.deserialize(opened.read(size), name)


# --- JSON forms -----------------------------------------------------------------------------


def _info_json(info: EngineInfo) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(info)))


def _info_from_json(data: dict[str, Any]) -> EngineInfo:
    def shapes(items: list) -> tuple:
        return tuple(None if s is None else tuple(s) for s in items)

    return EngineInfo(
        name=data["name"], nodes=tuple(data["nodes"]), native_ops=dict(data["native_ops"]),
        native_node_count=data["native_node_count"], effective_size=data["effective_size"],
        input_dtypes=tuple(data["input_dtypes"]), output_dtypes=tuple(data["output_dtypes"]),
        input_shapes=shapes(data["input_shapes"]), output_shapes=shapes(data["output_shapes"]),
        inputs=tuple(data["inputs"]), outputs=tuple(data["outputs"]), device=data["device"],
    )


def _spec(data: dict[str, Any]) -> TensorSpec:
    shape = data["shape"]
    return TensorSpec(data["dtype"], None if shape is None else tuple(shape))


def _key_json(key: Any) -> dict[str, Any]:
    if key and isinstance(key[0], Profile):
        return {"profiles": [{"min": p.min, "opt": p.opt, "max": p.max} for p in key]}
    return {"shapes": [list(s) for s in key]}


def _key_from_json(data: dict[str, Any]) -> Any:
    def shape_set(items: list) -> tuple:
        return tuple(tuple(int(d) for d in s) for s in items)

    if "profiles" in data:
        return tuple(Profile(shape_set(p["min"]), shape_set(p["opt"]), shape_set(p["max"]))
                     for p in data["profiles"])
    return shape_set(data["shapes"])
