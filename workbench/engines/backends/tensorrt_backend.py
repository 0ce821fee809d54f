"""TensorRT engines through TensorRT's Python API: one backend family for `tensorrt` (TensorRT
10/11, GPU machines) and `tensorrt_rtx` (TensorRT for RTX), the API differences in `tensorrt_api`.

`build_plan` is the shared part every TensorRT build goes through: parse the segment's ONNX,
configure profiles (TF-TRT's implicit-batch profile, or the dynamic-shape profiles, shape-tensor
values included) and precision, build a serialized plan, and keep TensorRT's own words: the
parser's and builder's errors and its layer listing and fused regions, as text (the
inspection room, `inspection/tensorrt_kernels`, reads them into kernels). It runs wherever
the package imports: TensorRT-RTX's builder needs no GPU, so every machine gets TensorRT's
verdict (`tensorrt_verdict`).

Running engines (`TensorRTEngine`: device memory through cuda-python's runtime bindings,
`execute_async_v3`, `IProfiler` timings, the inspector's layer JSON) needs an NVIDIA GPU
TensorRT supports (TensorRT-RTX: compute capability 8.0, 8.6, 8.9 or 12.x). That path is
UNTESTED on our machines, which have no GPU; it is type-checked against the real APIs
(`make typecheck`: the installed `tensorrt_rtx`, and `tensorrt-stubs` for `tensorrt`).
The packages are imported lazily so this module imports everywhere.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.engines.backends.base import (
    BackendUnavailableError,
    EngineBase,
    EngineBuildError,
    EngineRunError,
    check_calibration_data,
    pack_engine,
    unpack_engine,
)
from workbench.engines.backends.cuda_memory import DeviceBuffer, cudart_call
from workbench.engines.backends.tensorrt_api import (
    TENSORRT,
    TENSORRT_RTX,
    TensorRTApi,
    precision_flags,
)
from workbench.engines.layer_table import layer_table, precision_of_format
from workbench.engines.profiles import Profile, Shape
from workbench.engines.settings import NO_REQUEST, BuildRequest, EngineSettings
from workbench.errors import first_line

if TYPE_CHECKING:
    import onnx
    import pandas as pd
    import tensorrt as trt10  # tensorrt-stubs: the weakly typed path (INT8 calibrators)
    import tensorrt_rtx as trt_rtx  # the installed package: the shared TensorRT 10 API

NAME = "tensorrt"
RTX_NAME = "tensorrt-rtx"
__all__ = ["precision_flags"]  # re-exported: the flags TF-TRT set, named where they were

# A shape tensor input's values: (min, opt, max), one tuple of ints each.
ShapeValues = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def profile_shapes(profile: Profile, index: int) -> tuple[Shape, Shape, Shape]:
    """The (min, opt, max) shapes of input `index`, as `IOptimizationProfile.set_shape` takes."""
    return profile.min[index], profile.opt[index], profile.max[index]


def implicit_batch_profile(max_batch_size: int, input_shapes: Sequence[Sequence[int]]
                           ) -> Profile:
    """TensorRT 10 has no implicit batch mode: one profile with batch 1..max_batch_size.

    The other dimensions must be known, as TF-TRT's implicit batch mode required.
    """
    rest = [tuple(int(d) for d in shape[1:]) for shape in input_shapes]
    if any(d < 0 for dims in rest for d in dims):
        raise EngineBuildError("implicit batch mode needs every non-batch dimension known")
    return Profile(tuple((1, *r) for r in rest), tuple((max_batch_size, *r) for r in rest),
                   tuple((max_batch_size, *r) for r in rest))


_GPUS = Path("/proc/driver/nvidia/gpus")


def gpu_present() -> bool:
    """An NVIDIA GPU the driver exposes (Linux: /proc/driver/nvidia/gpus has an entry)."""
    return _GPUS.is_dir() and any(_GPUS.iterdir())


def gpu_names() -> list[str]:
    """The model of each GPU the NVIDIA driver exposes ("GPU" where it does not say)."""
    if not _GPUS.is_dir():
        return []
    return [_gpu_model(gpu) for gpu in sorted(_GPUS.iterdir())]


def _gpu_model(gpu: Path) -> str:
    try:
        for line in (gpu / "information").read_text().splitlines():
            if line.startswith("Model:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "GPU"


def version() -> str | None:
    """The version of the `tensorrt` package, or None where it does not import."""
    return TENSORRT.version()


def status() -> tuple[bool, str]:
    """Available when `tensorrt` imports and a GPU exists; otherwise says which is missing."""
    if TENSORRT.version() is None:
        return False, "the tensorrt Python package is not installed"
    if not gpu_present():
        return False, "no NVIDIA GPU found"
    return True, ""


def rtx_status() -> tuple[bool, str]:
    """Available to run engines when `tensorrt_rtx` and cuda-python import and the GPU is one
    TensorRT-RTX runs on. Without one it still builds plans (TensorRT's verdict), which
    `build_device` says; elsewhere ONNX Runtime stays the default backend."""
    if TENSORRT_RTX.version() is None:
        return False, f"not installed: {TENSORRT_RTX.install}"
    if not gpu_present():
        return False, (f"{build_device(TENSORRT_RTX)}: no NVIDIA GPU to run engines on "
                       "(runs need compute capability 8.0, 8.6, 8.9 or 12.x)")
    try:
        major, minor = compute_capability()
    except ImportError:
        return False, "cuda-python is not installed (pip install cuda-python): it holds the "\
                      "engines' device memory"
    except EngineBuildError as error:
        return False, str(error)
    if (major, minor) not in ((8, 0), (8, 6), (8, 9)) and major != 12:
        return False, (f"this GPU has compute capability {major}.{minor}; TensorRT-RTX runs "
                       "on 8.0, 8.6, 8.9 or 12.x")
    return True, ""


def compute_capability(device: int = 0) -> tuple[int, int]:
    """The GPU's compute capability through cuda-python's runtime bindings."""
    properties = cudart_call("cudaGetDeviceProperties", device)
    return int(properties.major), int(properties.minor)


def build_device(api: TensorRTApi) -> str:
    """What figures made with `api` are labelled with: the GPU, or for a builder without one
    `TensorRT-RTX 1.7.1 builder (CPU: build only)`."""
    names = gpu_names()
    if names:
        return f"GPU ({names[0]})"
    version = ".".join((api.version() or "?").split(".")[:3])
    return f"{api.label} {version} builder (CPU: build only)"


# --- the shared build: ONNX -> network -> serialized plan, with TensorRT's own words ---------

@dataclass
class PlanBuild:
    """One build's outcome: the plan, or how far it got and TensorRT's error text."""

    parsed: bool
    built: bool
    error: str | None
    plan: bytes | None
    build_s: float | None
    builder: str
    layer_listing: str = ""  # the builder's `Layers:` message (one `Name: ...` line a kernel)
    region_messages: tuple[str, ...] = ()  # its `ForeignNode ...` messages (fused regions)
    network_nodes: tuple[str, ...] = ()  # the ONNX nodes of the model TensorRT parsed


def build_plan(api: TensorRTApi, model: onnx.ModelProto, precision: str,
               request: BuildRequest = NO_REQUEST, *,
               batches: Sequence[tuple[np.ndarray, ...]] = (),
               shape_values: Mapping[str, ShapeValues] | None = None,
               workspace_bytes: int | None = None) -> PlanBuild:
    """`model` parsed and built by `api`'s builder at `precision` for `request`'s profiles (or
    its implicit batch size). `batches` are engine inputs: INT8's calibration data.
    `shape_values` give each shape-tensor input's (min, opt, max) values. Never raises for
    what TensorRT refuses: the result carries its error text."""
    if TYPE_CHECKING:  # both APIs are TensorRT 10's: checked against the installed RTX one
        import tensorrt_rtx as trt
    else:
        trt = api.module()
    builder_name = f"{api.label} {trt.__version__}"
    start = time.perf_counter()

    def outcome(parsed: bool, error: str | None) -> PlanBuild:
        return PlanBuild(parsed, False, error, None,
                         time.perf_counter() - start if parsed else None, builder_name)

    try:
        typed = api.typed_model(model, precision, list(batches))
    except Exception as error:  # quantization or float16 conversion failed, before TensorRT
        return outcome(False, f"could not make the {precision} model: {first_line(error)}")
    log = _build_log(api)
    builder = trt.Builder(log)
    network = builder.create_network(0)  # explicit batch: the only mode in TensorRT 10
    parser = trt.OnnxParser(network, log)
    if not parser.parse(typed.SerializeToString()):
        errors = [_parser_error(parser.get_error(i)) for i in range(parser.num_errors)]
        return outcome(False, "; ".join(dict.fromkeys(errors)) or log.error_text())
    start = time.perf_counter()  # build seconds: the builder's time, not the parser's
    config = builder.create_builder_config()
    try:
        _configure(api, builder, network, config, precision, request, batches,
                   shape_values or {}, workspace_bytes)
    except EngineBuildError as error:
        return outcome(True, str(error))
    plan = builder.build_serialized_network(network, config)  # None when the build fails
    if plan is None:
        return outcome(True, log.error_text() or "the builder returned no plan")
    listing = log.layer_listing  # empty where the builder listed no layers
    data = bytes(plan)  # type: ignore[call-overload]
    return PlanBuild(True, True, None, data, time.perf_counter() - start, builder_name,
                     listing, tuple(log.region_messages),
                     tuple(n.name for n in typed.graph.node))


def _parser_error(error: trt_rtx.ParserError) -> str:
    """`node <name> (<op>): <description>` from the parser's error, on one line."""
    node, op = error.node_name(), error.node_operator()
    where = f"node {node} ({op}): " if node else f"{op}: " if op else ""
    return where + _one_line(str(error.desc()))


# What a CPU-only builder logs on every failure (it has no GPU to report to): not the reason.
_NO_GPU_NOISE = "CUDA driver version is insufficient"


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(line for line in lines if _NO_GPU_NOISE not in line)


def _configure(api: TensorRTApi, builder: trt_rtx.Builder, network: trt_rtx.INetworkDefinition,
               config: trt_rtx.IBuilderConfig, precision: str, request: BuildRequest,
               batches: Sequence[tuple[np.ndarray, ...]],
               shape_values: Mapping[str, ShapeValues], workspace_bytes: int | None) -> None:
    if TYPE_CHECKING:
        import tensorrt_rtx as trt
    else:
        trt = api.module()
    api.configure_precision(trt, config, precision)
    if workspace_bytes:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    # DETAILED so the builder lists the engine's layers and the inspector reports precisions.
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    profiles = list(request.profiles)
    if not profiles and request.max_batch_size:
        profiles = [implicit_batch_profile(request.max_batch_size,
                                           [i.shape[:] for i in inputs])]
    for profile in profiles:
        trt_profile = builder.create_optimization_profile()
        for index, tensor in enumerate(inputs):
            low, opt, high = (trt.Dims(s) for s in profile_shapes(profile, index))
            trt_profile.set_shape(tensor.name, low, opt, high)
            if tensor.is_shape_tensor:  # its values size other tensors: TensorRT needs them
                if tensor.name not in shape_values:
                    raise EngineBuildError(
                        f"input {tensor.name} is a shape tensor: its values are needed to "
                        "build (run the model on inputs first)")
                trt_profile.set_shape_input(tensor.name, *shape_values[tensor.name])
        config.add_optimization_profile(trt_profile)
    if api.calibrates(precision) and batches:
        _set_calibrator(config, builder, [i.name for i in inputs], list(batches),
                        calibration_profile=bool(profiles))


def _build_log(api: TensorRTApi) -> Any:
    """An ILogger keeping errors and the builder's layer listing (VERBOSE, DETAILED profiling
    verbosity: `Layers:` then one `Name: ...` line per engine layer, and a `ForeignNode`
    line per fused region naming its ONNX nodes)."""
    if TYPE_CHECKING:
        import tensorrt_rtx as trt
    else:
        trt = api.module()
    severity = trt.ILogger.Severity

    class BuildLog(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)  # the documented way to subclass a TensorRT interface
            self.errors: list[str] = []
            self.layer_listing = ""
            self.region_messages: list[str] = []

        def log(self, level: trt_rtx.ILogger.Severity, message: str) -> None:
            if level in (severity.ERROR, severity.INTERNAL_ERROR):
                if _NO_GPU_NOISE not in message:
                    self.errors.append(_one_line(message))
            elif message.startswith("Layers:"):
                self.layer_listing = message
            elif message.startswith("ForeignNode "):
                self.region_messages.append(message)

        def error_text(self) -> str:
            return "; ".join(dict.fromkeys(self.errors))

    return BuildLog()


# --- the backends --------------------------------------------------------------------------

class TensorRTBackend:
    """Builds TensorRT engines from ONNX with the parser and builder (for INT8 on weakly typed
    TensorRT, a calibrator), and deserializes them into runnable engines (GPU only)."""

    name = NAME
    api: TensorRTApi = TENSORRT

    def __init__(self) -> None:
        trt = self.api.module()
        self._trt = trt
        self._logger = trt.Logger(trt.Logger.WARNING)  # tensorrt.Logger
        self.device = build_device(self.api)

    def build(self, model: onnx.ModelProto, settings: EngineSettings, name: str,
              request: BuildRequest = NO_REQUEST) -> TensorRTEngine:
        precision = settings.precision_mode
        batches = _calibration(model, precision, request)
        built = build_plan(self.api, model, precision, request, batches=batches,
                           workspace_bytes=settings.max_workspace_size_bytes)
        if built.plan is None:
            step = "build" if built.parsed else "parse"
            raise EngineBuildError(
                f"{self.api.label} cannot {step} {precision} engine {name!r}: {built.error}")
        return self._engine(built.plan, name, precision)

    def deserialize(self, data: bytes, name: str) -> TensorRTEngine:
        meta, plan = unpack_engine(data, self.name)
        return self._engine(plan, name, meta["precision"])

    def _engine(self, plan: bytes, name: str, precision: str) -> TensorRTEngine:
        if not gpu_present():
            raise BackendUnavailableError(
                f"{self.device}: built a {len(plan)}-byte plan for {name!r} but cannot run it "
                "without an NVIDIA GPU")
        runtime = self._trt.Runtime(self._logger)  # tensorrt.Runtime.deserialize_cuda_engine
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise EngineBuildError(f"{self.api.label} cannot load the plan of {name!r} on this "
                                   "GPU (TensorRT-RTX runs on compute capability 8.0, 8.6, 8.9 "
                                   "or 12.x)")
        return TensorRTEngine(self._trt, engine, plan, name, precision, self.device,
                              backend=self.name)


class TensorRTRTXBackend(TensorRTBackend):
    """The same backend on TensorRT for RTX: strongly typed (FP16 is float16 ONNX, INT8 is Q/DQ
    calibrated before the build). Builds on any machine; runs engines on a supported GPU."""

    name = RTX_NAME
    api = TENSORRT_RTX


def _calibration(model: onnx.ModelProto, precision: str, request: BuildRequest
                 ) -> list[tuple[np.ndarray, ...]]:
    if precision != "INT8":
        return []
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    return check_calibration_data(request.calibration_data, names)


def _set_calibrator(builder_config: Any, network_builder: Any, names: list[str],
                    batches: list[tuple[np.ndarray, ...]], calibration_profile: bool) -> None:
    """TensorRT 10's implicit INT8 (weakly typed `tensorrt` only): an entropy calibrator that
    copies each batch to the device, and for dynamic shapes a calibration profile at the
    first-seen shapes, like TF-TRT. Checked against tensorrt-stubs."""
    if TYPE_CHECKING:
        import tensorrt as trt
    else:
        trt = TENSORRT.module()
    config: trt10.IBuilderConfig = builder_config
    builder: trt10.Builder = network_builder
    if not hasattr(trt, "IInt8EntropyCalibrator2"):
        raise EngineBuildError(
            "this TensorRT has no INT8 calibrator (implicit quantization was removed); "
            "give the segment explicit QuantizeLinear/DequantizeLinear nodes instead")
    if calibration_profile:
        calib = builder.create_optimization_profile()
        for name, x in zip(names, batches[0], strict=True):
            shape = trt.Dims(list(x.shape))
            calib.set_shape(name, shape, shape, shape)
        config.set_calibration_profile(calib)

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)  # the documented way to subclass
            self._batches = iter(batches)
            self._buffers: list[DeviceBuffer] = []

        def get_batch_size(self) -> int:
            return int(batches[0][0].shape[0]) if batches[0][0].ndim else 1

        def get_batch(self, names_asked: list[str]) -> list[int]:
            batch = next(self._batches, None)
            if batch is None:
                return []  # no more batches
            by_name = dict(zip(names, batch, strict=True))
            self._buffers = [DeviceBuffer.of(by_name[n]) for n in names_asked]
            return [b.pointer for b in self._buffers]

        def read_calibration_cache(self) -> None:  # no cache: calibrate every build
            return None

        def write_calibration_cache(self, cache: bytes) -> None:
            return None

    config.int8_calibrator = Calibrator()  # deprecated in TensorRT 10 (Q/DQ preferred)


class TensorRTEngine(EngineBase):
    """A deserialized ICudaEngine; activation makes its execution context."""

    backend = NAME

    def __init__(self, trt: Any, engine: trt_rtx.ICudaEngine, plan: bytes, name: str,
                 precision: str, device: str, backend: str = NAME):
        self._trt, self._engine, self._plan = trt, engine, plan
        self.backend = backend  # tensorrt or tensorrt-rtx: which backend deserializes it
        self.name, self.precision, self.device = name, precision, device
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = trt.TensorIOMode.INPUT
        self.input_names = [n for n in names if engine.get_tensor_mode(n) == inputs]
        self.output_names = [n for n in names if engine.get_tensor_mode(n) != inputs]
        self._context: trt_rtx.IExecutionContext | None = None
        self.activate()

    def _activate(self) -> None:
        self._context = self._engine.create_execution_context()  # ICudaEngine

    def _deactivate(self) -> None:
        self._context = None

    @property
    def _ctx(self) -> trt_rtx.IExecutionContext:
        if self._context is None:
            raise EngineRunError(f"engine {self.name!r} is not active: call activate() first")
        return self._context

    def _run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Copies inputs in, `execute_async_v3` on a stream, copies outputs out."""
        ctx, engine, trt = self._ctx, self._engine, self._trt
        self._select_profile([tuple(np.shape(x)) for x in inputs])
        buffers = []
        for name, x in zip(self.input_names, inputs, strict=True):
            array = np.ascontiguousarray(x, dtype=trt.nptype(engine.get_tensor_dtype(name)))
            ctx.set_input_shape(name, trt.Dims(list(array.shape)))
            buffers.append(DeviceBuffer.of(array))
            ctx.set_tensor_address(name, buffers[-1].pointer)
        outputs = []
        for name in self.output_names:
            shape = ctx.get_tensor_shape(name)[:]
            outputs.append(np.empty(shape, trt.nptype(engine.get_tensor_dtype(name))))
            buffers.append(DeviceBuffer.empty(outputs[-1].nbytes))
            ctx.set_tensor_address(name, buffers[-1].pointer)
        stream = cudart_call("cudaStreamCreate")
        try:
            if not ctx.execute_async_v3(stream):
                raise EngineRunError(f"TensorRT engine {self.name!r} failed to run")
            cudart_call("cudaStreamSynchronize", stream)
        finally:
            cudart_call("cudaStreamDestroy", stream)
        for out, buffer in zip(outputs, buffers[len(inputs):], strict=True):
            buffer.copy_to(out)
        return outputs

    def layer_timings(self, inputs: list[np.ndarray], runs: int = 10,
                      run: str | None = None) -> pd.DataFrame:
        """IProfiler times per layer, averaged over `runs`, with the inspector's layer info."""
        profiler = _profiler(self._trt)
        self.run(inputs)  # warm-up, unprofiled
        self._ctx.profiler = profiler
        try:
            for _ in range(runs):
                self.run(inputs)
        finally:
            self._ctx.profiler = None  # type: ignore[assignment]  # unset, as setProfiler(nullptr)
        info = self.layer_info()
        rows = [{"engine": self.name, "layer": layer, "avg_ms": float(np.mean(times)),
                 "median_ms": float(np.median(times)), **info.get(layer, {})}
                for layer, times in profiler.times.items()]
        return layer_table(rows, run=run or f"{self.name} {self.precision}",
                           source=self.backend, device=self.device)

    def export_profile(self, inputs: list[np.ndarray], directory: Path, runs: int = 10
                       ) -> tuple[Path, Path]:
        """`<engine>.profile.json` (IProfiler times as trtexec's `--exportProfile` writes
        them) and `<engine>.layer.json` (the inspector's layer JSON, `--exportLayerInfo`), so
        the Profiling tab and `workbench profile` read them like trtexec's files."""
        table = self.layer_timings(inputs, runs=runs)
        total = float(table["avg_ms"].sum()) or 1.0
        records = [{"count": runs}] + [
            {"name": row.layer, "timeMs": float(row.avg_ms) * runs,
             "averageMs": float(row.avg_ms), "medianMs": float(row.median_ms),
             "percentage": 100.0 * float(row.avg_ms) / total}
            for row in table.itertuples()]
        directory.mkdir(parents=True, exist_ok=True)
        profile = directory / f"{self.name}.profile.json"
        layers = directory / f"{self.name}.layer.json"
        profile.write_text(json.dumps(records))
        self.write_layer_info(layers)
        return profile, layers

    def layer_info_json(self) -> str:
        """The engine inspector's layer JSON: what trtexec's `--exportLayerInfo` writes, so
        the Profiling tab imports it (with an `--exportProfile` file) like trtexec's."""
        inspector = self._engine.create_engine_inspector()  # ICudaEngine.create_engine_inspector
        return str(inspector.get_engine_information(self._trt.LayerInformationFormat.JSON))

    def write_layer_info(self, path: Path) -> None:
        """`layer_info_json()` into `path` (e.g. `<engine>.layers.json`)."""
        path.write_text(self.layer_info_json())

    def layer_info(self) -> dict[str, dict]:
        """Layer type and precision per layer from the engine inspector's JSON."""
        layers = json.loads(self.layer_info_json()).get("Layers", [])
        info = {}
        for layer in layers:
            if isinstance(layer, dict) and "Name" in layer:
                info[layer["Name"]] = {"layer_type": layer.get("LayerType"),
                                       "precision": _layer_precision(layer)}
        return info

    def serialize(self) -> bytes:
        return pack_engine(self.backend, self.precision, self._plan, name=self.name)

    def _select_profile(self, shapes: list[tuple[int, ...]]) -> None:
        """The first profile that accepts these shapes, like TF-TRT's runtime."""
        engine = self._engine
        for index in range(engine.num_optimization_profiles):
            ranges = [engine.get_tensor_profile_shape(n, index) for n in self.input_names]
            profile = Profile(*(tuple(r[k][:] for r in ranges) for k in range(3)))
            if profile.accepts(tuple(shapes)):
                if self._ctx.active_optimization_profile != index:
                    self._ctx.set_optimization_profile_async(index, 0)
                return
        if engine.num_optimization_profiles > 1:
            raise EngineRunError(f"no optimization profile of {self.name!r} accepts {shapes}")


def _layer_precision(layer: dict) -> str | None:
    """From the first output's format, e.g. `Row major linear FP32` (trtexec's layer info)."""
    outputs = layer.get("Outputs") or []
    first = outputs[0] if outputs and isinstance(outputs[0], dict) else {}
    return precision_of_format(first.get("Format/Datatype"))


def _profiler(trt: Any) -> Any:
    class Profiler(trt.IProfiler):
        def __init__(self) -> None:
            trt.IProfiler.__init__(self)
            self.times: dict[str, list[float]] = defaultdict(list)

        def report_layer_time(self, layer_name: str, ms: float) -> None:  # IProfiler
            self.times[layer_name].append(ms)

    return Profiler()
