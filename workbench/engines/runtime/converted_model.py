"""The converted model at run time: native TensorFlow between engines, engines for segments.

`ConvertedModel` is what `convert()`, `build()` and `workbench.load()` hand the user. It is
called like TF-TRT's converted function (inputs by position or name, a dict of named outputs)
and runs the converted graph (`hybrid_graph.py`): TensorFlow runs the unconverted nodes, each
engine node calls its `EngineOp` (cache, build at run time, native fallback). The graph is put
together on first use, so `convert()` itself stays as fast as the segmentation.

The model holds its collaborators, each in a module of its own:
- `runtime_graph.RuntimeGraph`: the converted graph and the signature's names;
- `segment_runtime.SegmentRuntime`: per engine, its segment, ONNX export and engine op;
- `traced_functions.ConvertedFunctions`: the TensorFlow functions a call runs, with the
  engines called directly and the fallback when one misses;
- `build_ahead`: build(), calibration, the engines built for the first call;
- `engine_statistics`: what the engine ops did.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.engines.backends.base import Backend, Engine
from workbench.engines.runtime import build_ahead, engine_statistics
from workbench.engines.runtime.engine_op import (
    DISALLOWED,
    Collected,
    EngineOp,
    collecting_natively,
)
from workbench.engines.runtime.input_sets import InputSets, call_arguments, collect_inputs
from workbench.engines.runtime.output_check import check_outputs, producer_of
from workbench.engines.runtime.runtime_graph import RuntimeGraph, runtime_graph
from workbench.engines.runtime.segment_runtime import SegmentRuntime, export_engines
from workbench.engines.runtime.traced_functions import ConvertedFunctions
from workbench.engines.segment import NativeSegment, SegmentGraph
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.errors import WorkbenchError
from workbench.graph.nodes import numpy_dtype_name
from workbench.lazy import tf

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession


class ConvertedModel:
    """The converted signature: callable like TF-TRT's converted function."""

    def __init__(self, graph: RuntimeGraph | Callable[[], RuntimeGraph],
                 settings: EngineSettings, backend: Backend | None = None,
                 in_process: bool = True):
        self.in_process = in_process  # False: loaded from a saved model
        self._graph_source = graph
        self._graph: RuntimeGraph | None = graph if isinstance(graph, RuntimeGraph) else None
        self.settings = settings
        self._backend = backend
        self._segments: dict[str, SegmentRuntime] | None = None
        self._converted_functions: ConvertedFunctions | None = None

    # --- the pieces, made on first use --------------------------------------------------------

    @property
    def graph(self) -> RuntimeGraph:
        """The converted graph; `graph.as_graph_def()` gives it with TRTEngineOp nodes, as
        TF-TRT's converted function did."""
        if self._graph is None:
            self._graph = self._graph_source()  # type: ignore[operator]
        if self._graph.engine_attrs is None:
            self._graph.engine_attrs = weakref.WeakMethod(self._engine_attrs)
        return self._graph

    def _engine_attrs(self, engine: str) -> dict[str, Any]:
        from workbench.engines.runtime.tftrt_graph_def import engine_attrs

        op = self.ops[engine]
        return engine_attrs(self.segments[engine].segment.engine, op.settings,
                            op.calibration_data)

    @property
    def segments(self) -> dict[str, SegmentRuntime]:
        if self._segments is None:
            self._segments = {s.engine.name: self._segment_runtime(s)
                              for s in self.graph.segments}
        return self._segments

    def _segment_runtime(self, segment: SegmentGraph) -> SegmentRuntime:
        name = segment.engine.name
        model = weakref.ref(self)  # the op reaches its model weakly: `del` frees the model
        op = EngineOp(
            name,
            lambda request: _alive(model)._build_engine(name, request),
            NativeSegment(segment),
            [numpy_dtype_name(s.dtype) for s in segment.output_specs],
            self.engine_settings(name).at_run_time(self.in_process),
        )
        return SegmentRuntime(segment, op)

    def _build_engine(self, name: str, request: BuildRequest) -> Engine:
        return self.segments[name].build_engine(request, self.backend)

    @property
    def ops(self) -> dict[str, EngineOp]:
        """engine name -> its EngineOp (cache, statistics, native runs)."""
        return {name: s.op for name, s in self.segments.items()}

    @property
    def converted_functions(self) -> ConvertedFunctions:
        """The TensorFlow functions calls run (`traced_functions.py`), made on first use."""
        if self._converted_functions is None:
            self._converted_functions = ConvertedFunctions(self.graph, self.ops)
        return self._converted_functions

    def _every_fallback(self) -> Any:
        """The function with every engine's fallback branch (collecting ops run natively)."""
        return self.converted_functions.every_engine_with_fallback()

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            from workbench.engines.backends.base import get_backend

            self._backend = get_backend()
        return self._backend

    def engine_settings(self, engine: str) -> EngineSettings:
        """The settings one engine runs with: an engine inside a `_tftrt_convert_function`
        function has its function's."""
        changes = self.graph.engine_settings.get(engine)
        return replace(self.settings, **changes) if changes else self.settings

    # --- as TensorFlow's ConcreteFunction, where user code written for TF-TRT touches it ----

    @property
    def input_names(self) -> list[str]:
        return self.graph.input_names

    @property
    def output_names(self) -> list[str]:
        return self.graph.output_names

    @property
    def structured_input_signature(self) -> tuple[tuple, dict[str, Any]]:
        """((), {input name: tf.TensorSpec}), as a signature function's."""
        return (), {spec.name: spec for spec in self.graph.feed_specs()}

    @property
    def structured_outputs(self) -> dict[str, Any]:
        """{output name: symbolic tensor} of the converted function, as a signature's."""
        return dict(zip(self.output_names, self.outputs, strict=True))

    @property
    def inputs(self) -> list[Any]:
        """The converted function's input placeholders (captured weights left out)."""
        function = self._every_fallback()
        return list(function.inputs[:len(self.input_names)])

    @property
    def outputs(self) -> list[Any]:
        return list(self._every_fallback().outputs)

    @property
    def function(self) -> Any:
        """The in-process converted function (ConcreteFunction over the converted graph):
        engines already built are called without the native fallback branch (see
        `converted_functions`), the others with it."""
        return self.converted_functions.current()

    @property
    def captured_weights(self) -> dict[str, Any]:
        """Placeholder -> the eager tensor the converted function captured for it (empty
        before the function is made): a save's variables share them rather than copy."""
        functions = self._converted_functions
        return {} if functions is None else functions.captured_weights

    # --- calling ------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Runs the converted model: inputs by position (signature order) or by name."""
        tensors = self.input_tensors(args, kwargs)
        if self.converted_functions.called_directly is None:
            build_ahead.build_for_first_call(self, tensors)
        try:
            outputs = self.converted_functions.call(tensors)
        except tf.errors.OpError as exc:  # TF-TRT's kernel aborted; ours ran inside TensorFlow
            refused = _native_execution_refused(exc)
            if refused is None:
                raise
            raise refused from None
        self.check_outputs(outputs)
        return dict(zip(self.output_names, outputs, strict=True))

    def input_tensors(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """One call's inputs, by position or name, as tensors in signature order."""
        return call_arguments(self.input_names, self.graph.input_dtypes, args, kwargs)

    def check_outputs(self, outputs: Sequence[Any]) -> None:
        """Raises `WrongOutputError` when an output's dtype or shape is not the signature's."""
        graph = self.graph

        def producer(index: int) -> str:
            return producer_of(graph.converted_graph_def, graph.output_tensors[index],
                               list(self.segments))

        check_outputs(outputs, graph.output_specs, graph.prepared_for, producer)

    def call_with_engines(self, engines: set[str], **inputs: Any) -> dict[str, Any]:
        """One call with only `engines` on the backend, every other segment run natively."""
        native = {name: op for name, op in self.ops.items() if name not in engines}
        with collecting_natively(native, shapes=True):
            outputs = self._every_fallback()(*self.input_tensors((), inputs))
        self.check_outputs(outputs)
        return dict(zip(self.output_names, outputs, strict=True))

    def run_natively(self, sets: InputSets, shapes: bool) -> dict[str, Collected]:
        """Runs every input set natively; engine -> the input shapes (`shapes`) or batches
        its op recorded (see `EngineOp.stop_collecting`)."""
        function = self._every_fallback()
        with collecting_natively(self.ops, shapes) as collected:
            for inputs in sets.sets:
                function(*self.input_tensors(inputs, {}))
        return collected

    # --- build() and calibration -------------------------------------------------------------

    def build(self, input_fn: Callable[[], Any]) -> None:
        """TF-TRT's build(): engines for the shapes `input_fn` yields (see `build_ahead`)."""
        build_ahead.build_engines(self, collect_inputs(input_fn, self.input_names,
                                                         "input_fn"))

    def calibrate(self, calibration_input_fn: Callable[[], Any]) -> None:
        """INT8: each op's input batches from running `calibration_input_fn` natively; they
        become the calibration data of the engines built afterwards."""
        build_ahead.calibrate(self, collect_inputs(calibration_input_fn, self.input_names,
                                                     "calibration_input_fn"))

    def engine_shape_sets(self, input_sets: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
        """engine -> its input shapes for each of the model's `input_sets` (as build() sees
        them: inferred, or from a native run where they depend on values)."""
        return build_ahead.engine_shapes(self, InputSets([list(s) for s in input_sets]))

    def engine_input_batches(self, input_sets: Sequence[Sequence[Any]]
                             ) -> dict[str, list[Any]]:
        """engine -> the input batches it received while `input_sets` ran natively (engines
        in loops once per iteration), as calibration collects them."""
        collected = self.run_natively(InputSets([list(s) for s in input_sets]), shapes=False)
        return {name: batches for name, (_, batches) in collected.items()}

    def engine_inputs(self, input_sets: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
        """engine -> the input batches it gets when the whole model runs natively on
        `input_sets` (input name -> array each): what per-engine accuracy feeds each engine."""
        sets = collect_inputs(lambda: iter(input_sets), self.input_names, "input_sets")
        return {name: batches for name, (_, batches) in
                self.run_natively(sets, shapes=False).items()}

    # --- ONNX and engines as files --------------------------------------------------------------

    def onnx_model(self, engine: str, keep: bool = True) -> Any:
        """The segment's ONNX model (exported once while kept); raises ExportError when it
        cannot be. `keep=False` exports without holding on to it: the model holds every weight
        of the segment again."""
        return self.segments[engine].onnx(keep)

    def write_onnx(self, engine: str, path: Path) -> None:
        """The segment's ONNX model into `path` as one file, streamed."""
        self.segments[engine].write_onnx(path)

    def export_engines(self, directory: str | os.PathLike) -> list[str]:
        """Writes, for use elsewhere, each segment's ONNX model (`<engine>.onnx`, for
        `trtexec --onnx=...`) and each built engine: a TensorRT plan as `<engine>.<n>.plan`,
        another backend's payload as `<engine>.<n>.<backend>` (an ONNX Runtime engine is its
        ONNX model at the engine's precision). Returns the file names; a segment the exporter
        cannot express gets `<engine>.onnx.txt` saying why."""
        return export_engines(self.segments.values(), directory)

    # --- what happened ------------------------------------------------------------------------

    def engine_table(self) -> pd.DataFrame:
        """Per engine: cached engines, builds, engine calls (and of them those the compiled
        engine op served), native calls, native reasons."""
        return engine_statistics.engine_table(self.ops)

    @property
    def native_runs(self) -> dict[str, dict[str, int]]:
        """engine -> reason -> count, for every call the native segment served."""
        return engine_statistics.native_runs(self.ops)

    def __repr__(self) -> str:
        engines = len(self.graph.segments) if self._graph is not None else "?"
        return f"ConvertedModel({engines} engines, precision {self.settings.precision_mode})"


def _alive(model: weakref.ref[ConvertedModel]) -> ConvertedModel:
    alive = model()
    if alive is None:
        raise WorkbenchError("its converted model was deleted")
    return alive


def _native_execution_refused(exc: Any) -> Any:
    """TF-TRT's AbortedError when the error is a refused native execution (the user
    disallowed it), else None."""
    refused = [line[line.index(DISALLOWED):] for line in exc.message.splitlines()
               if DISALLOWED in line]
    return tf.errors.AbortedError(exc.node_def, exc.op, refused[0]) if refused else None


def converted_model(session: ConversionSession, result: ConversionResult,
                    params: ConversionParams) -> ConvertedModel:
    """The converted function of a conversion (`ConversionSession`, `ConversionResult`,
    `ConversionParams`); its graph is put together on first use."""
    return ConvertedModel(lambda: runtime_graph(session, result),
                          EngineSettings.from_params(params))
