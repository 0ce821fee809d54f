"""TF-TRT's Python API (TF 2.17 names, arguments and defaults), backed by the workbench.

Code from the TF-TRT user guide runs after changing its import to
`from workbench import trt_convert as trt`. `convert()` and `summary()` need no GPU: the
segmentation is the workbench's reimplementation of TF-TRT's. `convert()` returns a
`ConvertedModel` (engines on the active backend, native TensorFlow between them); `build()` and
`save()` behave like TF-TRT's (`workbench/engines/runtime/converted_model.py`, `saving.py`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from workbench import environment
from workbench.checks.tensorrt_verdicts import conversion_verdicts
from workbench.conversion.advice import Advice, advise
from workbench.conversion.conversion_report import (
    ConversionReport,
    detailed_report_setting,
    nonconversion_report,
    write_nonconversion_csv,
)
from workbench.conversion.converted import converted_top_level, tftrt_dot
from workbench.conversion.params import (
    DEFAULT_MAX_WORKSPACE_SIZE_BYTES,
    PROFILE_STRATEGIES,
    ConversionParams,
    with_environment,
)
from workbench.conversion.recommend import Recommendation, recommend_minimum_segment_size
from workbench.conversion.result import ConversionResult
from workbench.conversion.session import ConversionSession
from workbench.conversion.summary import summary_lines
from workbench.engines.runtime.converted_model import converted_model
from workbench.graph.gpu import preparation_target
from workbench.graph.nodes import Graph
from workbench.lazy import tf
from workbench.words import counted

logger = logging.getLogger("workbench.trt_convert")

DEFAULT_TRT_MAX_WORKSPACE_SIZE_BYTES = DEFAULT_MAX_WORKSPACE_SIZE_BYTES
PROFILE_STRATEGY_RANGE, PROFILE_STRATEGY_OPTIMAL = PROFILE_STRATEGIES[0], PROFILE_STRATEGIES[1]
PROFILE_STRATEGY_RANGE_OPTIMAL = PROFILE_STRATEGIES[2]
PROFILE_STRATEGY_IMPLICIT_BATCH_MODE_COMPATIBLE = PROFILE_STRATEGIES[3]


class TrtPrecisionMode:
    FP32 = "FP32"
    FP16 = "FP16"
    INT8 = "INT8"

    @staticmethod
    def supported_precision_modes() -> list[str]:
        modes = [TrtPrecisionMode.FP32, TrtPrecisionMode.FP16, TrtPrecisionMode.INT8]
        return modes + [mode.lower() for mode in modes]


def supported_profile_strategies() -> list[str]:
    return list(PROFILE_STRATEGIES)


class TrtConversionParams(NamedTuple):
    """TF-TRT's (deprecated) bundle of conversion parameters, with its defaults."""

    max_workspace_size_bytes: int = DEFAULT_TRT_MAX_WORKSPACE_SIZE_BYTES
    precision_mode: str = TrtPrecisionMode.FP32
    minimum_segment_size: int = 3
    maximum_cached_engines: int = 1
    use_calibration: bool = True
    allow_build_at_runtime: bool = True


DEFAULT_TRT_CONVERSION_PARAMS = TrtConversionParams()


class TrtGraphConverterV2:
    """TF-TRT's converter for TF2 SavedModels; also accepts Keras models and frozen GraphDefs.

    Beyond TF-TRT: `input_model` (a Keras model, `.keras` or frozen `.pb` path, in place of
    `input_saved_model_dir`), `output_node_names` (for a `.pb`), `prepare_for` (the GPU
    TF-TRT's Grappler run saw: "T4" by default, another GPU or compute capability, or "cpu";
    see graph/gpu.py), and the results as data (`report`, `result`, `sweep()`).
    """

    def __init__(
        self,
        input_saved_model_dir: str | None = None,
        input_saved_model_tags: Sequence[str] | None = None,
        input_saved_model_signature_key: str | None = None,
        use_dynamic_shape: bool | None = None,
        dynamic_shape_profile_strategy: str | None = None,
        max_workspace_size_bytes: int = DEFAULT_TRT_MAX_WORKSPACE_SIZE_BYTES,
        precision_mode: str = TrtPrecisionMode.FP32,
        minimum_segment_size: int = 3,
        maximum_cached_engines: int = 1,
        use_calibration: bool = True,
        allow_build_at_runtime: bool = True,
        conversion_params: TrtConversionParams | None = None,
        *,
        input_model: Any = None,
        output_node_names: Sequence[str] | None = None,
        prepare_for: str | None = None,
    ):
        if conversion_params is None:
            conversion_params = TrtConversionParams(
                max_workspace_size_bytes, precision_mode, minimum_segment_size,
                maximum_cached_engines, use_calibration, allow_build_at_runtime,
            )
        # Checked here, as TF-TRT did; its fields keep their names.
        self._params = ConversionParams(
            **conversion_params._asdict(), use_dynamic_shape=bool(use_dynamic_shape),
            dynamic_shape_profile_strategy=dynamic_shape_profile_strategy,
        )
        if input_saved_model_dir is None and input_model is None:
            raise ValueError("input_saved_model_dir is required (or input_model)")
        self._model = input_model if input_model is not None else input_saved_model_dir
        self._tags = list(input_saved_model_tags or ["serve"])
        self._signature_key = input_saved_model_signature_key or "serving_default"
        self._output_node_names = output_node_names
        self._target = preparation_target(prepare_for)  # a bad name fails here, not later
        if dynamic_shape_profile_strategy is not None and not use_dynamic_shape:
            logger.warning("dynamic_shape_profile_strategy is ignored without use_dynamic_shape")
        # TF-TRT's disable_graph_freezing: native segments keep the variable reads
        # (graph/variables.py), in dynamic shape mode only.
        self.freeze = "disable_graph_freezing" not in environment.EXPERIMENTAL_FEATURES.read()
        if not self.freeze and not use_dynamic_shape:
            logger.warning("Disabling graph freezing is only possible in dynamic shape mode. "
                           "The graph will be frozen.")
            self.freeze = True
        self._session: ConversionSession | None = None
        self._result: ConversionResult | None = None
        self._converted_func: Any = None
        self._calibration_input_fn: Callable | None = None
        self._calibrated = False
        self._built = False
        self._tensorrt: dict[str, Any] | None = None  # engine -> TensorRTVerdict, once made
        # TF-TRT's testing field: True skips Grappler's non-TensorRT passes (constant folding,
        # layout, pruning, ...), so the segmenter sees the frozen graph as it is.
        self._test_only_disable_non_trt_optimizers = False

    @property
    def params(self) -> ConversionParams:
        return self._params

    def convert(self, calibration_input_fn: Callable | None = None) -> Any:
        """Segments the graph as TF-TRT would and returns the converted function.

        Calling it runs the converted graph: engines (built on first use when `build()` was
        not called, as TF-TRT did) for the segments, TensorFlow for the rest. INT8 with
        calibration calibrates here, or in `build()` with dynamic shapes (TF-TRT's order).
        """
        if self._result is not None:
            raise RuntimeError("convert() was already called; create a new converter to "
                               "convert again")
        _check_device_scope()
        needs_calibration = self._params.needs_calibration
        if needs_calibration and not calibration_input_fn:
            raise ValueError("Should specify calibration_input_fn because INT8 calibration "
                             "is needed")
        if not needs_calibration and calibration_input_fn:
            raise ValueError("Should not specify calibration_input_fn because INT8 calibration "
                             "is not needed")
        self._calibration_input_fn = calibration_input_fn
        # TF-TRT read its environment variables at every conversion.
        self._params = with_environment(self._params)
        self._session = ConversionSession.open(
            self._model, self._signature_key, self._tags, self._output_node_names,
            disable_non_trt_optimizers=self._test_only_disable_non_trt_optimizers,
            prepare_for=self._target, keep_variables=not self.freeze,
        )
        self._result = self._session.convert(self._params)
        _log_nonconversion_report(self._result)
        _log_function_conversions(self._result)
        self._converted_func = converted_model(self._session, self._result, self._params)
        _export_graphviz(self._session, self._result)
        if needs_calibration and not self._params.use_dynamic_shape:
            self._converted_func.calibrate(calibration_input_fn)
            self._calibrated = True
            # TF-TRT's calibration built the INT8 engines for the calibration shapes.
            self._converted_func.build(calibration_input_fn)
        return self._converted_func

    @property
    def _converted_graph_def(self) -> Any:
        """TF-TRT's converted GraphDef, with TRTEngineOp nodes (`calibration_data` set once
        calibrated): `convert().graph.as_graph_def()`, made on each use."""
        if self._converted_func is None:
            raise AttributeError("_converted_graph_def exists once convert() was called")
        return self._converted_func.graph.as_graph_def()

    def build(self, input_fn: Callable) -> None:
        """TF-TRT's build(): engines for the input shapes `input_fn` yields (callable once).

        Implicit batch: each distinct input shape builds an engine (up to
        `maximum_cached_engines`). Dynamic shape: every input's shapes make the optimization
        profiles of the chosen strategy, then one engine per segment holds them all.
        """
        if self._built:
            raise NotImplementedError("build() is already called. It is not supported to "
                                      "call build() more than once.")
        if not input_fn:
            raise RuntimeError("input_fn is None. Method build() needs input_fn to be "
                               "specified in order to build TensorRT engines")
        if self._converted_func is None:
            raise RuntimeError("Need to call convert() before build()")
        if self._params.needs_calibration and not self._calibrated:
            self._converted_func.calibrate(self._calibration_input_fn)
            self._calibrated = True
        failed = {name: op.stats.failed_builds for name, op in self._converted_func.ops.items()}
        self._converted_func.build(input_fn)
        _refuse_native_segments(self._converted_func, failed)
        self._built = True

    def save(self, output_saved_model_dir: str, save_gpu_specific_engines: bool = True,
             options: Any = None, *, overwrite: bool = False) -> None:
        """Writes a SavedModel as TF-TRT's: one TRTEngineOp per engine (which, with the workbench
        imported, plain `tf.saved_model.load` loads and runs natively), the engines in its
        assets, each weight stored at most twice (the checkpoint and its engine);
        `workbench.load()` reloads it with the engines, `workbench strip-engines` makes it
        loadable without the workbench. An existing non-empty directory is refused unless
        `overwrite=True`, a disk without room for the save before anything is written; the
        model appears whole or not at all. `options` (`tf.saved_model.SaveOptions`) go to
        `saved_model.save`, as in TF-TRT."""
        if self._converted_func is None:
            raise RuntimeError("Need to call convert() before save()")
        if self._params.needs_calibration and not self._calibrated:
            raise RuntimeError("A model that requires INT8 calibration has to be built before "
                               "saving it. Call build() to build and calibrate the TensorRT "
                               "engines.")
        from workbench.engines.runtime.saving import save_converted

        # Through this module's `save` (TensorFlow's saved_model save module), as TF-TRT's.
        writer = sys.modules[__name__].save.save
        save_converted(self._converted_func, output_saved_model_dir, overwrite=overwrite,
                       save_engines=save_gpu_specific_engines,
                       write_saved_model=lambda *args: writer(*args, options=options))

    def summary(self, line_length: int = 160, detailed: bool = True,
                print_fn: Callable[[str], Any] | None = None) -> None:
        """Prints TF-TRT's engine table (same layout as TF-TRT's `summary()`)."""
        print_fn = print_fn or print
        for line in summary_lines(self.result, line_length, detailed):
            print_fn(line)

    @property
    def result(self) -> ConversionResult:
        if self._result is None:
            raise RuntimeError("TrtGraphConverterV2.convert() must be called first")
        return self._result

    @property
    def report(self) -> ConversionReport:
        """Engines, non-converted nodes and the advice on every knob as DataFrames, and the
        CLI's JSON (`to_json()`); with TensorRT's verdicts (`tensorrt_*` columns) once
        `tensorrt_verdicts()` ran."""
        tensorrt = None if self._tensorrt is None else \
            {name: v.to_json() for name, v in self._tensorrt.items()}
        return ConversionReport(self.result, self.advice, tensorrt=tensorrt)

    def tensorrt_verdicts(self, input_fn: Callable | None = None,
                          progress: Callable[[int, int, str], Any] | None = None
                          ) -> dict[str, Any]:
        """TensorRT's verdict on every engine (engine -> `TensorRTVerdict`): each engine's
        ONNX parsed and built into a plan by TensorRT-RTX's builder, which needs no GPU, with
        the profiles `build()` made, else those of `input_fn`'s input sets, else of generated
        inputs (batch 1 and 8). Needs `pip install "tftrt-workbench[tensorrt]"`."""
        if self._converted_func is None:
            raise RuntimeError("Need to call convert() before tensorrt_verdicts()")
        sets = None
        if input_fn is not None:
            from workbench.engines.runtime.input_sets import collect_inputs

            sets = collect_inputs(input_fn, self._converted_func.input_names, "input_fn").sets
        self._tensorrt = conversion_verdicts(self.session, self._converted_func, sets, progress)
        return dict(self._tensorrt)

    @property
    def advice(self) -> list[Advice]:
        """What each other TF-TRT setting would give (measured), largest gain first: see
        `workbench.conversion.advice`."""
        return advise(self.session, self._params)

    @property
    def session(self) -> ConversionSession:
        """The model loaded and prepared once (`ConversionSession`): what the checks, profiles
        and sweeps take (`workbench.check_conversion(converter.session, converter.params)`)."""
        if self._session is None:
            raise RuntimeError("TrtGraphConverterV2.convert() must be called first")
        return self._session

    @property
    def graph(self) -> Graph:
        """The graph TF-TRT segmented, prepared for this converter's precision (FP16 splits
        float Casts): its nodes by name (`graph.by_name[name].op`), as the drawings take it."""
        return self.session.prepared(self._params.precision_mode).graph

    def export(self, format: str, output: str, *,
               batch_sizes: Sequence[int] = (1,)) -> Any:
        """Writes this conversion as a TF-TRT script, the whole model as ONNX or trtexec
        commands (`workbench.checks.export_formats.export`); returns the path."""
        from workbench.checks.export_formats import export

        return export(self.session, format, output, self._params, batch_sizes=batch_sizes)

    def estimate(self, target_gpu: str, batch_size: int = 1) -> dict[str, Any]:
        """The converted model's latency estimated for `target_gpu` ("T4", "NVIDIA A100 80GB
        PCIe", ...) at `batch_size`, as `convert --target-gpu` gives it: gpu, batch_size,
        converted_ms, native_ms, engines_ms, native_ops_ms, engines (per engine), label;
        engines TensorRT built (`tensorrt_verdicts()`) from their kernels."""
        from workbench.profiling.estimate.conversion import conversion_estimate

        return conversion_estimate(self.session, self._params, target_gpu, batch_size,
                                   self.result, tensorrt=self._tensorrt)

    def sweep(self, thresholds: Sequence[int] = range(1, 65)) -> list[ConversionResult]:
        """The conversion for every `minimum_segment_size` in `thresholds`, at once."""
        return self.session.sweep(self._params, thresholds)

    def recommend_minimum_segment_size(self, thresholds: Sequence[int] = range(1, 65)
                                       ) -> Recommendation:
        """Recommended `minimum_segment_size` values read off `sweep(thresholds)`: the fewest
        engines, a moderate one (Torch-TensorRT's dry run) and the current one, each with a
        sentence (`print` shows them)."""
        return recommend_minimum_segment_size(self.sweep(thresholds),
                                              self._params.minimum_segment_size)


def __getattr__(name: str) -> Any:
    """`save`: TensorFlow's saved_model save module, which TF-TRT's `save()` wrote through;
    imported on use (importing this module does not import TensorFlow)."""
    if name == "save":
        from workbench.tf_private.tftrt import saved_model_save

        return saved_model_save()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_device_scope() -> None:
    """TF-TRT's convert() refused a device scope that is not a GPU. Without a scope the
    workbench converts anywhere (TF-TRT required a GPU): docs/differences.md."""
    from workbench.tf_private.eager import device_scope

    device = device_scope()
    if device and "gpu" not in device.lower():
        raise ValueError(f"Specified device is not a GPU: {device}")


def _refuse_native_segments(converted: Any, failed_before: dict[str, int]) -> None:
    """TF-TRT's build() ran the converted function: an engine whose build failed ran its
    native segment, or, with TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION false, aborted."""
    from workbench.engines.runtime.engine_op import DISALLOWED

    failed = [name for name, op in converted.ops.items()
              if op.stats.failed_builds > failed_before.get(name, 0)]
    if failed and not environment.ALLOW_NATIVE_SEGMENT.read():
        raise tf.errors.AbortedError(
            None, None, f"{DISALLOWED}: the engine build failed for {', '.join(failed)}")


def _log_nonconversion_report(result: ConversionResult) -> None:
    """TF-TRT logged its report as a warning on every conversion, and wrote the CSV if asked."""
    if not result.nonconversion:
        return
    detailed, csv_path = detailed_report_setting(environment.SHOW_DETAILED_REPORT.read() or None)
    logger.warning(nonconversion_report(result.nonconversion, detailed))
    if csv_path:
        error = write_nonconversion_csv(result.nonconversion, csv_path)
        if error:
            logger.warning(error)
        else:
            logger.warning("TF-TRT Non-Conversion Report saved at: `%s`", csv_path)


def _log_function_conversions(result: ConversionResult) -> None:
    """Each function TF-TRT converted was its own ConvertGraph call, with its own report."""
    for conversion in result.functions:
        if conversion.nonconversion:
            logger.warning(nonconversion_report(
                conversion.nonconversion,
                detailed_report_setting(environment.SHOW_DETAILED_REPORT.read() or None)[0]))
        if conversion.engines:
            logger.warning(
                "%s inside function %s (_tftrt_convert_function): %s; summary() "
                "lists top-level engines only, as TF-TRT's did: see "
                "converter.report.function_engines", counted(len(conversion.engines), "engine"),
                conversion.function,
                ", ".join(e.name for e in conversion.engines))


def _export_graphviz(session: ConversionSession, result: ConversionResult) -> None:
    """TF_TRT_EXPORT_GRAPH_VIZ_PATH: TF-TRT wrote the converted graph as .dot, logging (not
    raising) any failure, and printed how to render it."""
    path = environment.EXPORT_GRAPH_VIZ_PATH.read()
    if not path:
        return
    graph = session.prepared(str(result.params.precision_mode)).graph
    try:
        with open(path, "w") as f:
            f.write(tftrt_dot(converted_top_level(graph, result)))
    except Exception as e:  # TF-TRT logged every export failure and went on
        logger.error("An Exception occured during the export of the graph visualization: %s", e)
        return
    print(f"Graph Visualization Exported to: `{path}`.\n"
          "You can use the `graphviz` utility to convert it to PNG format:\n"
          "  - `sudo apt install -y graphviz`\n"
          "  - `dot -Tpng <input_filename>.dot -o <output_filename>.png`")
