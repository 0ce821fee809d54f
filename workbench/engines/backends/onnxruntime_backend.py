"""ONNX Runtime engines: CPU everywhere, the CUDA provider where present.

FP32 runs the segment's ONNX model as is; FP16 and INT8 run the models of `engines.precision`
(`to_float16`, and `quantize_int8` calibrated with `BuildRequest.calibration_data`).
Per-layer timings come from ORT's profiler; since the exporter names ONNX nodes after their TF
nodes, each ORT node maps back to TF nodes.
"""

from __future__ import annotations

import io
import json
import logging
import re
import statistics
import tempfile
import weakref
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from workbench.engines.backends.base import (
    EngineBase,
    EngineBuildError,
    EngineRunError,
    check_calibration_data,
    engine_header,
    pack_engine,
    unpack_engine,
)
from workbench.engines.layer_table import layer_table
from workbench.engines.onnx.external_data import (
    data_file,
    model_file,
    new_model,
    remove_model,
    split_inline,
    take_model,
    write_inline,
)
from workbench.engines.onnx.precision import (
    CAST_PREFIX,
    fold_for_precision,
    graph_inputs,
    quantize_int8,
    readable_bytes,
    to_float16,
)
from workbench.engines.onnx.precision_emulation import (
    store_as_float16,
    store_unquantized_as_float16,
)
from workbench.engines.settings import NO_REQUEST, BuildRequest, EngineSettings
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import numpy_dtype
from workbench.hardware import cpu_device_name, release_free_memory, usable_cores
from workbench.lazy import ort

logger = logging.getLogger("workbench.engines")

if TYPE_CHECKING:
    import onnxruntime as ort
    import pandas as pd

NAME = "onnxruntime"
_NOT_TF_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})

# Every engine session's settings (the compiled engine op's sessions use them too): all
# graph optimizations (ORT_ENABLE_ALL) and idle threads that do not spin, since spinning
# threads take the cores TensorFlow needs for the native parts between engines (figures in
# docs/memory.md).
OPTIMIZATION_LEVEL = 99
# They share one CPU memory arena (registered with ONNX Runtime's environment, see
# `_share_one_arena`): an arena per session kept each engine's largest run's activations for
# good; no arena at all made calls slower.
# INT8 engines keep their Q/DQ pairs around float kernels (disable_quant_qdq) instead of ORT's
# fused uint8 x int8 kernels: on x86 CPUs without VNNI (AVX2 only) those sum products in int16
# and saturate (digits_cnn's INT8 logits were off by 0.38 on average on such a CPU), while
# TensorRT's INT8 kernels accumulate in int32. DQ -> float op -> Q rounds as TensorRT does on
# every CPU.
SESSION_CONFIG = {"session.intra_op.allow_spinning": "0", "session.use_env_allocators": "1",
                  "session.disable_quant_qdq": "1"}

# Profiler type names of a node's first input -> the layer's precision.
_PRECISION_OF = {"float": "FP32", "float16": "FP16", "int8": "INT8", "uint8": "INT8"}


@cache
def _share_one_arena() -> None:
    """The CPU arena every session of this process's ONNX Runtime environment shares."""
    try:
        ort.create_and_register_allocator(ort.OrtMemoryInfo(
            "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT), None)
    except Exception as error:  # one is registered already; else each session keeps its own
        logger.debug("no shared ONNX Runtime arena: %s", first_line(error))


def status() -> tuple[bool, str]:
    """ONNX Runtime is a dependency, so it is available wherever the workbench installs."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as error:  # pragma: no cover - broken install
        return False, f"onnxruntime does not import: {error}"
    return True, ""


def default_providers() -> list[str]:
    """The CUDA provider first where this onnxruntime has it, the CPU provider always."""
    available = ort.get_available_providers()
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]


def device_label(providers: Sequence[str]) -> str:
    """What every timing is labelled with: `GPU (CUDA)` or `cpu_device_name()`."""
    if providers and providers[0] == "CUDAExecutionProvider":
        return "GPU (CUDA)"
    return cpu_device_name()


class OnnxRuntimeBackend:
    """Builds `OrtEngine`s on the given providers (default: CUDA where present, else CPU)."""

    name = NAME

    def __init__(self, providers: Sequence[str] | None = None, threads: int | None = None):
        self.providers = list(providers or default_providers())
        self.threads = threads or usable_cores()
        self.device = device_label(self.providers)

    def build(self, model: onnx.ModelProto, settings: EngineSettings, name: str,
              request: BuildRequest = NO_REQUEST) -> OrtEngine:
        """An engine for `model` at the settings' precision; INT8 data is checked before any
        work. ONNX Runtime takes any shape, so the request's batch size and profiles do not
        change the engine."""
        precision = settings.precision_mode
        if precision == "INT8":
            names = [i.name for i in graph_inputs(model)]
            batches = check_calibration_data(request.calibration_data, names)

        def convert() -> Path:
            converted = model
            if precision == "FP16":
                converted = to_float16(fold_for_precision(model))
                if self.providers[0] == "CPUExecutionProvider":  # float16 ops run in float32
                    converted = store_as_float16(converted)
            elif precision == "INT8":
                converted = store_unquantized_as_float16(
                    quantize_int8(fold_for_precision(model), batches))
            return write_model(readable_bytes(converted))

        return self._built(convert, name, precision)

    def build_file(self, path: Path, settings: EngineSettings, name: str,
                   request: BuildRequest = NO_REQUEST) -> OrtEngine:
        """`build` of the model file `path` (`build.export_file`'s), which it takes over: an FP32
        engine runs the file as it is, its session mapping the weights from the data file."""
        if settings.precision_mode != "FP32":
            return self.build(take_model(path), settings, name, request)
        return self._built(lambda: path, name, "FP32")

    def _built(self, write: Callable[[], Path], name: str, precision: str) -> OrtEngine:
        """The engine of the model file `write()` makes; a failure as one EngineBuildError
        (a WorkbenchError as it is)."""
        try:
            return self._engine(write(), name, precision)
        except WorkbenchError:
            raise
        except Exception as error:
            raise EngineBuildError(
                f"onnxruntime could not build {precision} engine {name!r}: "
                f"{first_line(error)}") from error

    def deserialize(self, data: bytes, name: str) -> OrtEngine:
        """The engine `serialize()` wrote, without converting or calibrating again."""
        meta, payload = unpack_engine(data, NAME)
        return self._deserialized(lambda: write_model(payload), name, meta)

    def deserialize_file(self, path: Path, name: str) -> OrtEngine:
        """`deserialize` of the file `write()` made, its model copied file to file, its
        weights into a data file (`onnx_files.split_inline`): never in memory but the
        session's (VGG16: 0.5 GB)."""
        with path.open("rb") as file:
            meta, _ = unpack_engine(file.readline() + file.readline(), NAME)  # magic, JSON

            def copy() -> Path:
                with new_model() as model_path:
                    split_inline(file, model_path)
                return model_path

            return self._deserialized(copy, name, meta)

    def _deserialized(self, write: Callable[[], Path], name: str, meta: dict) -> OrtEngine:
        try:
            return self._engine(write(), name, meta["precision"])
        except Exception as error:
            raise EngineBuildError(
                f"damaged serialized onnxruntime engine {name!r}: {first_line(error)}"
            ) from error

    def _engine(self, path: Path, name: str, precision: str) -> OrtEngine:
        return OrtEngine(path, name, precision, self.providers, self.threads, self.device)


def write_model(data: bytes) -> Path:
    """`data` in a new temporary `.onnx` file (see `OrtEngine`)."""
    with model_file() as (out, path):
        out.write(data)
    return path


class OrtEngine(EngineBase):
    """One segment's model in an ONNX Runtime session (the session is what activation makes).

    The engine owns its model as a temporary file (removed with the engine), not in memory:
    sessions are made from the file and `write` copies it, so the only copy of the weights in
    memory is the session's (VGG16: the serialized model held 0.5 GB more). A built engine's
    weights are in the model's data file (`onnx_files`), which its sessions map. Once the compiled
    engine op serves the engine (`hand_over`), its session is the only one: a call it does not
    serve makes the Python session again.
    """

    backend = NAME

    def __init__(self, path: Path, name: str, precision: str,
                 providers: Sequence[str], threads: int, device: str):
        self.name, self.precision = name, precision
        self.providers, self.threads, self.device = list(providers), threads, device
        self.path = path
        self._removal = weakref.finalize(self, remove_model, path)
        self._session: ort.InferenceSession | None = None
        # The compiled engine op's session (native_op.NativeSession), once handed over: open
        # while this engine is active.
        self.native: Any = None
        self.activate()  # built active: a model ORT cannot load fails the build
        session = self._session
        assert session is not None
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]
        self.input_types = [_numpy_type(i.type) for i in session.get_inputs()]
        self.output_types = [_numpy_type(o.type) for o in session.get_outputs()]

    def hand_over(self, native: Any) -> None:
        """The compiled op's session `native` serves this engine from now on (one session:
        this engine's own is dropped first, then `native` opens)."""
        self._session = None
        release_free_memory()  # the session's heap, before the next one's is taken
        self.native = native
        native.open()

    def _activate(self) -> None:
        try:
            if self.native is not None:
                try:
                    self.native.open()
                    return
                except RuntimeError:  # its calls miss to the Python path, which has a session
                    self.native = None
            self._session = self._new_session()
        finally:
            # Making a session reads each weight, then packs it: the read copies, freed,
            # stayed resident.
            release_free_memory()

    def _deactivate(self) -> None:
        self._session = None
        if self.native is not None:
            self.native.close()

    def _run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self._session is None:  # calls the compiled op does not serve
            self._session = self._new_session()
        return self._run_in(self._session, inputs)

    def layer_timings(self, inputs: list[np.ndarray], runs: int = 10,
                      run: str | None = None) -> pd.DataFrame:
        """Per-node averages of ORT's profiler over `runs` runs after one warm-up run."""
        if runs < 1:
            raise WorkbenchError(f"runs must be >= 1, got {runs}")
        self._check_inputs(inputs)
        with tempfile.TemporaryDirectory(prefix="workbench-ort-") as tmp:
            session = self._new_session(profile_dir=Path(tmp))
            for _ in range(runs + 1):
                self._run_in(session, inputs)
            trace = json.loads(Path(session.end_profiling()).read_text())
            optimized = onnx.load(str(Path(tmp) / "optimized.onnx"))
        rows = profile_rows(trace, tf_node_map(self.model, optimized), warmup=1)
        for row in rows:
            row["engine"] = self.name
        return layer_table(rows, run=run or f"{self.name} {self.precision}", source=NAME,
                           device=self.device)

    @property
    def model_bytes(self) -> bytes:
        """The serialized ONNX model, its weights inline (read from the engine's files)."""
        buffer = io.BytesIO()
        write_inline(self.path, buffer)
        return buffer.getvalue()

    @property
    def exported_model(self) -> Path | None:
        """The file of the segment's ONNX export as it was built from (FP32: the engine runs
        it as is), which a save copies (`onnx_files.write_inline`) rather than export the
        segment again."""
        return self.path if self.precision == "FP32" else None

    @property
    def model_size(self) -> int:
        """Bytes of the model and its weights."""
        data = data_file(self.path)
        return self.path.stat().st_size + (data.stat().st_size if data.exists() else 0)

    @property
    def model(self) -> onnx.ModelProto:
        """The engine's (converted or quantized) ONNX model, parsed from its file."""
        return onnx.load(str(self.path))

    def serialize(self) -> bytes:
        """The (converted or quantized) ONNX model behind a header naming its precision."""
        return pack_engine(NAME, self.precision, self.model_bytes, name=self.name)

    def write(self, path: Path) -> None:
        """`serialize()`'s bytes into `path`, the header then the model copied file to file."""
        with path.open("wb") as file:
            file.write(engine_header(NAME, self.precision, name=self.name))
            write_inline(self.path, file)

    def _new_session(self, profile_dir: Path | None = None) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel(OPTIMIZATION_LEVEL)
        options.intra_op_num_threads = self.threads
        _share_one_arena()
        for key, value in SESSION_CONFIG.items():
            options.add_session_config_entry(key, value)
        if profile_dir is not None:
            options.enable_profiling = True
            options.profile_file_prefix = str(profile_dir / "profile")
            # The graph ORT actually runs: its node names are the ones the profiler reports.
            options.optimized_model_filepath = str(profile_dir / "optimized.onnx")
            options.log_severity_level = 3
        return ort.InferenceSession(str(self.path), options, providers=self.providers)

    def _run_in(self, session: ort.InferenceSession, inputs: list[np.ndarray]
                ) -> list[np.ndarray]:
        feed = {}
        for name, x, t in zip(self.input_names, inputs, self.input_types, strict=True):
            feed[name] = x if type(x) is np.ndarray and x.dtype == t else np.asarray(x, dtype=t)
        try:
            return session.run(self.output_names, feed)
        except Exception as error:
            raise EngineRunError(
                f"onnxruntime engine {self.name!r} failed: {first_line(error)}") from error


def _numpy_type(ort_type: str) -> np.dtype | None:
    """The numpy dtype of ORT's `tensor(float)`-style type (the element names are TF's short
    names); None for strings and types numpy lacks, which are fed as given."""
    try:
        dtype = numpy_dtype(ort_type.removeprefix("tensor(").removesuffix(")"))
    except TypeError:
        return None
    return None if dtype.kind in "OSUV" else dtype


# --- profiler trace -> layer rows ---

def profile_rows(trace: list[dict], tf_nodes: dict[str, list[str]], warmup: int = 1
                 ) -> list[dict[str, Any]]:
    """One row per ORT node: op type, precision, mean and median ms after `warmup` runs."""
    times: dict[str, list[float]] = defaultdict(list)
    info: dict[str, dict] = {}
    for event in trace:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            times[node].append(float(event["dur"]) / 1000.0)  # microseconds -> ms
            info.setdefault(node, event.get("args", {}))
    rows = []
    for node, durations in times.items():
        kept = durations[warmup:] or durations
        args = info[node]
        rows.append({"layer": node, "layer_type": args.get("op_name"),
                     "precision": _precision(args), "avg_ms": statistics.fmean(kept),
                     "median_ms": statistics.median(kept), "tf_nodes": tf_nodes.get(node, [])})
    return rows


def _precision(args: dict) -> str | None:
    shapes = args.get("input_type_shape") or args.get("output_type_shape") or []
    if not shapes:
        return None
    type_name = next(iter(shapes[0]), None)
    return _PRECISION_OF.get(type_name, type_name)


def tf_node_map(source: onnx.ModelProto, optimized: onnx.ModelProto,
                limit: int = 64) -> dict[str, list[str]]:
    """For each node ORT runs, the source model's nodes (named after TF nodes) it computes.

    ORT keeps a node's name, or derives the name of a node it creates from a source node or
    tensor (`r_nchwc` for Conv+Relu ending in tensor `r`, `<name>_token_7`). Such a node covers
    its named source node plus the unnamed ones it fused: walking back from the named node's
    outputs, up to source nodes that another ORT node is named after.
    """
    graph = source.graph
    by_name = {n.name: n for n in graph.node}
    producer = {o: n for n in graph.node for o in n.output}
    known = set(producer) | {i.name for i in graph.input} | {t.name for t in graph.initializer}
    nodes = list(optimized.graph.node)
    named = {n.name: _named_node(n.name, by_name, producer) for n in nodes}
    claimed = {n.name for n in named.values() if n is not None}
    opt = _Optimized(nodes, {n for n, own in named.items() if own is not None})
    result = {}
    for node in nodes:
        own = named[node.name]
        if own is not None:
            outs = set(own.output)
        else:
            outs = opt.boundary(node, known, forward=True)
        ins = opt.boundary(node, known, forward=False)
        stop = claimed - {own.name} if own is not None else claimed
        found = _between(ins, outs, producer, stop, limit)
        if found is None:
            found = [own] if own is not None else []
        result[node.name] = sorted({_tf_name(n.name, by_name) for n in found if _is_tf_node(n)})
    return result


def _tf_name(name: str, by_name: dict[str, onnx.NodeProto]) -> str:
    """The exporter names helper nodes `<tf node>/<label>` (a layout Transpose, a constant)."""
    parent = name.rpartition("/")[0]
    return parent if parent in by_name else name


# ORT names a node it creates after a source node or tensor plus suffixes (`_token_7`, `_mul`,
# `_nchwc`); inserted casts get a prefix.
_ORT_PREFIXES = ("InsertedPrecisionFreeCast_",)
_CUT = re.compile(r"[_:]")


def _named_node(name: str, by_name: dict[str, onnx.NodeProto],
                producer: dict[str, onnx.NodeProto]) -> onnx.NodeProto | None:
    """The source node an ORT node name starts with: the longest prefix ending before `_` or
    `:` that names a source node or a source tensor (then its producer)."""
    for prefix in _ORT_PREFIXES:
        name = name.removeprefix(prefix)
    cuts = [len(name)] + [m.start() for m in reversed(list(_CUT.finditer(name)))]
    for cut in cuts:
        head = name[:cut]
        if head in by_name:
            return by_name[head]
        if head in producer:
            return producer[head]
    return None


def _is_tf_node(node: onnx.NodeProto) -> bool:
    return node.op_type not in _NOT_TF_OPS and not node.name.startswith(CAST_PREFIX)


class _Optimized:
    """Producer/consumer look-ups in the graph ORT runs."""

    def __init__(self, nodes: list[onnx.NodeProto], anchors: set[str]):
        self.anchors = anchors  # ORT nodes named after a source node: walks stop there
        self.producer = {o: n for n in nodes for o in n.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for n in nodes:
            for i in n.input:
                self.consumers[i].append(n)

    def boundary(self, node: onnx.NodeProto, known: set[str], forward: bool) -> set[str]:
        """Source tensors reached from `node` through tensors and nodes ORT created."""
        found: set[str] = set()
        stack, seen = [node], {node.name}
        while stack:
            current = stack.pop()
            for tensor in (current.output if forward else current.input):
                if tensor in known:
                    found.add(tensor)
                    continue
                nxt = self.consumers.get(tensor, []) if forward else \
                    [self.producer[tensor]] if tensor in self.producer else []
                for n in nxt:
                    if n.name not in seen and n.name not in self.anchors:
                        seen.add(n.name)
                        stack.append(n)
        return found


def _between(ins: set[str], outs: set[str], producer: dict[str, onnx.NodeProto],
             stop: set[str], limit: int) -> list[onnx.NodeProto] | None:
    """Source nodes from `outs` back to `ins`, not entering `stop` nodes; None past `limit`."""
    found: dict[str, onnx.NodeProto] = {}
    stack = [producer[t] for t in outs if t in producer and t not in ins]
    while stack:
        node = stack.pop()
        if node.name in found or node.name in stop:
            continue
        found[node.name] = node
        if len(found) > limit:
            return None
        stack.extend(producer[t] for t in node.input if t in producer and t not in ins)
    return list(found.values())
