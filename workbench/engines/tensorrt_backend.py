"""TensorRT engines through the real `tensorrt` Python API (10.x/11.x), chosen on GPU machines.

UNTESTED on our machines: there is no GPU here and TensorRT cannot be installed. The calls were
reviewed against NVIDIA's TensorRT Python API documentation (class and method named in each
comment); only the pure helpers (`profile_shapes`, `implicit_batch_profile`, `precision_flags`,
`status`) are exercised by the tests. `tensorrt` (and `cuda.bindings` for device memory) are
imported lazily so this module imports everywhere.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.engines.backend import (
    EngineBase,
    EngineBuildError,
    EngineRunError,
    check_calibration_data,
    pack_engine,
    unpack_engine,
)
from workbench.engines.layer_table import layer_table, precision_of_format
from workbench.engines.profiles import Profile, Shape
from workbench.engines.settings import NO_REQUEST, BuildRequest, EngineSettings
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    import onnx
    import pandas as pd

NAME = "tensorrt"

# TF-TRT's builder flags per precision mode: INT8 also enables FP16 so layers without INT8
# kernels fall back to half precision (convert_nodes.cc, TF 2.16/2.17).
_PRECISION_FLAGS = {"FP32": (), "FP16": ("FP16",), "INT8": ("FP16", "INT8")}


def precision_flags(precision: str) -> tuple[str, ...]:
    """Names of the `tensorrt.BuilderFlag` members a precision mode sets."""
    try:
        return _PRECISION_FLAGS[precision.upper()]
    except KeyError:
        raise WorkbenchError(f"unknown precision {precision!r}") from None


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
    try:
        import tensorrt
    except ImportError:
        return None
    return str(getattr(tensorrt, "__version__", "unknown version"))


def status() -> tuple[bool, str]:
    """Available when `tensorrt` imports and a GPU exists; otherwise says which is missing."""
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return False, "the tensorrt Python package is not installed"
    if not gpu_present():
        return False, "no NVIDIA GPU found"
    return True, ""


class TensorRTBackend:
    """Builds TensorRT engines from ONNX with the builder, parser and (for INT8) a calibrator."""

    name = NAME

    def __init__(self) -> None:
        import tensorrt as trt

        self._trt = trt
        self._logger = trt.Logger(trt.Logger.WARNING)  # tensorrt.Logger
        self.device = f"GPU ({_device_name()})"

    def build(self, model: onnx.ModelProto, settings: EngineSettings, name: str,
              request: BuildRequest = NO_REQUEST) -> TensorRTEngine:
        trt = self._trt
        precision = settings.precision_mode
        batches = _calibration(model, precision, request)
        builder = trt.Builder(self._logger)  # tensorrt.Builder
        network = builder.create_network(0)  # explicit batch is the only mode in TRT 10
        parser = trt.OnnxParser(network, self._logger)  # tensorrt.OnnxParser.parse
        if not parser.parse(model.SerializeToString()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise EngineBuildError(f"TensorRT cannot parse {name!r}: {'; '.join(errors)}")
        config = builder.create_builder_config()  # tensorrt.IBuilderConfig
        self._configure(builder, network, config, settings, request, batches)
        plan = builder.build_serialized_network(network, config)  # -> IHostMemory or None
        if plan is None:
            raise EngineBuildError(f"TensorRT could not build {precision} engine {name!r}")
        return self._engine(bytes(plan), name, precision)

    def deserialize(self, data: bytes, name: str) -> TensorRTEngine:
        meta, plan = unpack_engine(data, NAME)
        return self._engine(plan, name, meta["precision"])

    def _engine(self, plan: bytes, name: str, precision: str) -> TensorRTEngine:
        runtime = self._trt.Runtime(self._logger)  # tensorrt.Runtime.deserialize_cuda_engine
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise EngineBuildError(f"damaged TensorRT plan for engine {name!r}")
        return TensorRTEngine(self._trt, engine, plan, name, precision, self.device)

    def _configure(self, builder: Any, network: Any, config: Any, settings: EngineSettings,
                   request: BuildRequest, batches: list[tuple[np.ndarray, ...]]) -> None:
        trt = self._trt
        for flag in precision_flags(settings.precision_mode):
            if not hasattr(trt.BuilderFlag, flag):  # weakly typed precisions may be removed
                raise EngineBuildError(f"this TensorRT has no BuilderFlag.{flag}")
            config.set_flag(getattr(trt.BuilderFlag, flag))  # IBuilderConfig.set_flag
        if settings.max_workspace_size_bytes:
            # IBuilderConfig.set_memory_pool_limit(MemoryPoolType.WORKSPACE, bytes)
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE,
                                         settings.max_workspace_size_bytes)
        # DETAILED so the engine inspector reports layer types, precisions and tactics.
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        inputs = [network.get_input(i) for i in range(network.num_inputs)]
        profiles = list(request.profiles)
        if not profiles and request.max_batch_size:
            profiles = [implicit_batch_profile(request.max_batch_size,
                                               [i.shape for i in inputs])]
        for profile in profiles:
            trt_profile = builder.create_optimization_profile()  # IOptimizationProfile
            for index, tensor in enumerate(inputs):
                trt_profile.set_shape(tensor.name, *profile_shapes(profile, index))
            config.add_optimization_profile(trt_profile)
        if batches:
            if not hasattr(trt, "IInt8EntropyCalibrator2"):
                raise EngineBuildError(
                    "this TensorRT has no INT8 calibrator (implicit quantization was removed); "
                    "give the segment explicit QuantizeLinear/DequantizeLinear nodes instead")
            if profiles:  # dynamic shapes calibrate at the first-seen shape, like TF-TRT
                shapes = [tuple(x.shape) for x in batches[0]]
                calib = builder.create_optimization_profile()
                for tensor, shape in zip(inputs, shapes, strict=True):
                    calib.set_shape(tensor.name, shape, shape, shape)
                config.set_calibration_profile(calib)  # IBuilderConfig.set_calibration_profile
            # IBuilderConfig.int8_calibrator: deprecated in TensorRT 10 (explicit Q/DQ preferred)
            config.int8_calibrator = _calibrator(trt, [i.name for i in inputs], batches)


def _calibration(model: onnx.ModelProto, precision: str, request: BuildRequest
                 ) -> list[tuple[np.ndarray, ...]]:
    if precision != "INT8":
        return []
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    return check_calibration_data(request.calibration_data, names)


def _calibrator(trt: Any, names: list[str], batches: list[tuple[np.ndarray, ...]]) -> Any:
    """An IInt8EntropyCalibrator2 that copies each batch to the device in turn."""

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)  # the documented way to subclass
            self._batches = iter(batches)
            self._buffers: list[_DeviceBuffer] = []

        def get_batch_size(self) -> int:  # IInt8Calibrator.get_batch_size
            return int(batches[0][0].shape[0]) if batches[0][0].ndim else 1

        def get_batch(self, tensor_names: list[str]) -> list[int] | None:  # .get_batch
            batch = next(self._batches, None)
            if batch is None:
                return None
            by_name = dict(zip(names, batch, strict=True))
            self._buffers = [_DeviceBuffer.of(by_name[n]) for n in tensor_names]
            return [b.pointer for b in self._buffers]

        def read_calibration_cache(self) -> None:  # no cache: calibrate every build
            return None

        def write_calibration_cache(self, cache: bytes) -> None:
            return None

    return Calibrator()


class TensorRTEngine(EngineBase):
    """A deserialized ICudaEngine; activation makes its execution context."""

    backend = NAME

    def __init__(self, trt: Any, engine: Any, plan: bytes, name: str, precision: str,
                 device: str):
        self._trt, self._engine, self._plan = trt, engine, plan
        self.name, self.precision, self.device = name, precision, device
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = trt.TensorIOMode.INPUT
        self.input_names = [n for n in names if engine.get_tensor_mode(n) == inputs]
        self.output_names = [n for n in names if engine.get_tensor_mode(n) != inputs]
        self._context: Any = None
        self.activate()

    def _activate(self) -> None:
        self._context = self._engine.create_execution_context()  # ICudaEngine

    def _deactivate(self) -> None:
        self._context = None

    def _run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Copies inputs in, `execute_async_v3` on a stream, copies outputs out."""
        ctx, engine, trt = self._context, self._engine, self._trt
        self._select_profile([tuple(np.shape(x)) for x in inputs])
        buffers = []
        for name, x in zip(self.input_names, inputs, strict=True):
            array = np.ascontiguousarray(x, dtype=trt.nptype(engine.get_tensor_dtype(name)))
            ctx.set_input_shape(name, array.shape)  # IExecutionContext.set_input_shape
            buffers.append(_DeviceBuffer.of(array))
            ctx.set_tensor_address(name, buffers[-1].pointer)  # .set_tensor_address
        outputs = []
        for name in self.output_names:
            shape = tuple(ctx.get_tensor_shape(name))  # IExecutionContext.get_tensor_shape
            outputs.append(np.empty(shape, trt.nptype(engine.get_tensor_dtype(name))))
            buffers.append(_DeviceBuffer.empty(outputs[-1].nbytes))
            ctx.set_tensor_address(name, buffers[-1].pointer)
        stream = _cudart_call("cudaStreamCreate")
        try:
            if not ctx.execute_async_v3(stream):  # IExecutionContext.execute_async_v3
                raise EngineRunError(f"TensorRT engine {self.name!r} failed to run")
            _cudart_call("cudaStreamSynchronize", stream)
        finally:
            _cudart_call("cudaStreamDestroy", stream)
        for out, buffer in zip(outputs, buffers[len(inputs):], strict=True):
            buffer.copy_to(out)
        return outputs

    def layer_timings(self, inputs: list[np.ndarray], runs: int = 10,
                      run: str | None = None) -> pd.DataFrame:
        """IProfiler times per layer, averaged over `runs`, with the inspector's layer info."""
        profiler = _profiler(self._trt)
        self.run(inputs)  # warm-up, unprofiled
        self._context.profiler = profiler  # IExecutionContext.profiler
        try:
            for _ in range(runs):
                self.run(inputs)
        finally:
            self._context.profiler = None
        info = self.layer_info()
        rows = [{"engine": self.name, "layer": layer, "avg_ms": float(np.mean(times)),
                 "median_ms": float(np.median(times)), **info.get(layer, {})}
                for layer, times in profiler.times.items()]
        return layer_table(rows, run=run or f"{self.name} {self.precision}", source=NAME,
                           device=self.device)

    def layer_info(self) -> dict[str, dict]:
        """Layer type and precision per layer from the engine inspector's JSON."""
        import json

        inspector = self._engine.create_engine_inspector()  # ICudaEngine.create_engine_inspector
        text = inspector.get_engine_information(self._trt.LayerInformationFormat.JSON)
        layers = json.loads(text).get("Layers", [])
        info = {}
        for layer in layers:
            if isinstance(layer, dict) and "Name" in layer:
                info[layer["Name"]] = {"layer_type": layer.get("LayerType"),
                                       "precision": _layer_precision(layer)}
        return info

    def serialize(self) -> bytes:
        return pack_engine(NAME, self.precision, self._plan, name=self.name)

    def _select_profile(self, shapes: list[tuple[int, ...]]) -> None:
        """The first profile that accepts these shapes, like TF-TRT's runtime."""
        engine = self._engine
        for index in range(engine.num_optimization_profiles):
            ranges = [engine.get_tensor_profile_shape(n, index) for n in self.input_names]
            profile = Profile(*(tuple(tuple(r[k]) for r in ranges) for k in range(3)))
            if profile.accepts(tuple(shapes)):
                if self._context.active_optimization_profile != index:
                    self._context.set_optimization_profile_async(index, 0)
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


def _device_name() -> str:
    names = gpu_names()
    return names[0] if names else os.environ.get("CUDA_VISIBLE_DEVICES", "CUDA")


# --- device memory through cuda-python's runtime bindings (cudaMalloc/cudaMemcpy/cudaFree) ---

def _cudart_call(function: str, *args: Any) -> Any:
    from cuda.bindings import runtime as cudart

    error, *result = getattr(cudart, function)(*args)
    if int(error) != 0:
        raise EngineBuildError(f"CUDA {function} failed: {error}")
    return result[0] if result else None


class _DeviceBuffer:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.pointer = int(_cudart_call("cudaMalloc", max(nbytes, 1)))

    @classmethod
    def empty(cls, nbytes: int) -> _DeviceBuffer:
        return cls(nbytes)

    @classmethod
    def of(cls, array: np.ndarray) -> _DeviceBuffer:
        from cuda.bindings import runtime as cudart

        array = np.ascontiguousarray(array)
        buffer = cls(array.nbytes)
        _cudart_call("cudaMemcpy", buffer.pointer, array.ctypes.data, array.nbytes,
                     cudart.cudaMemcpyKind.cudaMemcpyHostToDevice)
        return buffer

    def copy_to(self, out: np.ndarray) -> None:
        from cuda.bindings import runtime as cudart

        _cudart_call("cudaMemcpy", out.ctypes.data, self.pointer, out.nbytes,
                     cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost)

    def __del__(self) -> None:
        try:
            _cudart_call("cudaFree", self.pointer)
        except Exception:  # interpreter shutdown: the driver frees it anyway
            pass
