"""The converted model at run time: native TensorFlow between engines, engines for segments.

`ConvertedModel` is what `convert()`, `build()` and `workbench.load()` hand the user. It is
called like TF-TRT's converted function (inputs by position or name, a dict of named outputs)
and runs the converted graph (`hybrid.py`): TensorFlow runs the unconverted nodes, each
engine node calls its `EngineOp` (cache, build at run time, native fallback). The graph is put
together on first use, so `convert()` itself stays as fast as the segmentation.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from workbench import environment
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.engines.backends.base import Backend, Engine
from workbench.engines.runtime.engine_op import DISALLOWED, ENGINE_MISS, EngineOp
from workbench.engines.runtime.hybrid import engine_function, engines_in_loops, wrap_converted
from workbench.engines.runtime.output_check import OutputSpec, check_outputs, producer_of
from workbench.engines.segment import GraphMadeOnUse, NativeSegment, SegmentGraph
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.engines.weights import LiftedGraph, as_tensor
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import numpy_dtype_name
from workbench.hardware import release_free_memory
from workbench.lazy import tf

logger = logging.getLogger("workbench.engines")

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession

T = TypeVar("T")

@dataclass
class RuntimeGraph:
    """Everything the converted model runs from: the converted GraphDef (engine nodes in
    place of the segments; `save()` adds the native segment functions), the segments, and how
    the signature's names map to tensors."""

    # The converted GraphDef, or a function making (or reading) it: it holds every native
    # weight, which the converted function captures as tensors, so it is dropped once they
    # are (`release_converted`) and made again for a save.
    converted_source: Any
    segments: list[SegmentGraph]  # in engine order
    input_names: list[str]
    output_names: list[str]
    input_tensors: list[str]  # tensor names in the converted graph, signature order
    output_tensors: list[str]
    input_dtypes: list[str]  # numpy names
    input_shapes: list[tuple[int, ...] | None]
    signature_key: str = "serving_default"
    # The prepared graph the segments were cut from (in process only): where build() infers
    # each engine's input shapes from the model's.
    prepared_graph_def: Any = None
    # The converted `_tftrt_convert_function` functions (FunctionConversion, in process only):
    # their engines are segments too, and build() infers their shapes in the function body.
    functions: list[Any] = field(default_factory=list)
    # engine inside a function -> its function's EngineSettings fields (`_tftrt_*` attributes).
    engine_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    lifted_source: Callable[[], LiftedGraph] | None = None  # see lifted_converted()
    # A weak reference to the converted model's `engine -> its TRTEngineOp attributes`
    # (settings, calibration): weak, so the model and its graph make no reference cycle.
    engine_attrs: Callable[[], Callable[[str], dict[str, Any]] | None] | None = None
    # The signature's outputs every call is checked against (engines/runtime/output_check.py), and
    # the device the graph was prepared for (named when a check fails).
    output_specs: list[OutputSpec] = field(default_factory=list)
    prepared_for: str = ""

    def __post_init__(self) -> None:
        self._converted = GraphMadeOnUse(self.converted_source, self.lifted_source)

    def as_graph_def(self, add_shapes: bool = False) -> Any:
        """The converted GraphDef as TF-TRT's converted function's graph gave it: one
        TRTEngineOp per engine (`engine_nodes.tftrt_graph_def`). `add_shapes` is accepted
        for TensorFlow's signature and not used."""
        from workbench.engines.runtime.engine_nodes import tftrt_graph_def

        return tftrt_graph_def(self, self.engine_attrs() if self.engine_attrs else None)

    @property
    def converted_graph_def(self) -> Any:
        return self._converted.get()

    @property
    def converted_held(self) -> bool:
        return self._converted.held

    def release_converted(self) -> None:
        """Drops the converted GraphDef when it can be made again."""
        self._converted.release()

    def lifted_converted(self) -> LiftedGraph:
        """The converted GraphDef with its weights as Placeholders, and their protos: made
        lifted (the prepared graph's protos, no copy) unless the converted GraphDef is held."""
        return self._converted.lifted()

    @property
    def engines(self) -> list[EngineInfo]:
        return [s.engine for s in self.segments]

    @property
    def top_level_engines(self) -> list[EngineInfo]:
        """The engines of the top-level graph (the others are inside functions)."""
        inside = {e.name for f in self.functions for e in f.engines}
        return [e for e in self.engines if e.name not in inside]

    def engine_input_shapes(self, shapes: Any) -> dict[str, Any]:
        """engine -> its input shapes for the model's input `shapes` (None where they depend
        on values); see build_shapes.engine_input_shapes."""
        from workbench.engines.runtime.build_shapes import engine_input_shapes

        if self.prepared_graph_def is None:
            return {e.name: None for e in self.engines}
        found = dict.fromkeys((e.name for e in self.engines), None)
        found.update(engine_input_shapes(self.prepared_graph_def, self.input_tensors, shapes,
                                         self.top_level_engines, self.functions))
        return found

    def feed_specs(self) -> list[Any]:
        """tf.TensorSpecs of the inputs (unknown and symbolic dims as None)."""
        return [tf.TensorSpec(None if shape is None else [d if d >= 0 else None for d in shape],
                              dtype, name=name)
                for name, dtype, shape in zip(self.input_names, self.input_dtypes,
                                              self.input_shapes, strict=True)]


@dataclass
class SegmentRuntime:
    """One engine's segment, its ONNX export (made once, on demand) and its engine op."""

    segment: SegmentGraph
    op: EngineOp
    onnx_model: Any = None
    export_error: str = ""


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
        self._functions: dict[frozenset[str], Any] = {}  # by the engines called without fallback
        self._engine_functions: dict[tuple[str, bool], Any] = {}
        # Engines the current function calls without the native fallback branch, and those
        # that missed or failed, always called with it.
        self._without_fallback: frozenset[str] | None = None
        self._always_fallback: set[str] = set()
        self._weights: tuple[Any, dict[str, Any]] | None = None  # see _lifted_weights

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
        from workbench.engines.runtime.engine_nodes import engine_attrs

        op = self.ops[engine]
        return engine_attrs(self.segments[engine].segment.engine, op.settings,
                            op.calibration_data)

    # --- as TensorFlow's ConcreteFunction, where user code written for TF-TRT touches it ----

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
        return list(self._function_with(frozenset()).inputs[:len(self.input_names)])

    @property
    def outputs(self) -> list[Any]:
        return list(self._function_with(frozenset()).outputs)

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            from workbench.engines.backends.base import get_backend

            self._backend = get_backend()
        return self._backend

    @property
    def input_names(self) -> list[str]:
        return self.graph.input_names

    @property
    def output_names(self) -> list[str]:
        return self.graph.output_names

    @property
    def segments(self) -> dict[str, SegmentRuntime]:
        if self._segments is None:
            self._segments = {s.engine.name: self._segment_runtime(s)
                              for s in self.graph.segments}
        return self._segments

    @property
    def ops(self) -> dict[str, EngineOp]:
        """engine name -> its EngineOp (cache, statistics, native runs)."""
        return {name: s.op for name, s in self.segments.items()}

    def _segment_runtime(self, segment: SegmentGraph) -> SegmentRuntime:
        name = segment.engine.name
        model = weakref.ref(self)  # the op reaches its model weakly: `del` frees the model
        op = EngineOp(
            name,
            lambda request: _model_alive(model)._build_engine(name, request),
            NativeSegment(segment),
            [numpy_dtype_name(s.dtype) for s in segment.output_specs],
            self.engine_settings(name).at_run_time(self.in_process),
        )
        return SegmentRuntime(segment, op)

    def engine_settings(self, engine: str) -> EngineSettings:
        """The settings one engine runs with: an engine inside a `_tftrt_convert_function`
        function has its function's."""
        changes = self.graph.engine_settings.get(engine)
        return replace(self.settings, **changes) if changes else self.settings

    def onnx_model(self, engine: str, keep: bool = True) -> Any:
        """The segment's ONNX model (exported once while kept); raises ExportError when it
        cannot be. `keep=False` exports without holding on to it: the model holds every weight
        of the segment again."""
        runtime = self.segments[engine]
        if runtime.onnx_model is not None:
            return runtime.onnx_model
        from workbench.engines.onnx.export import export_onnx

        model = self._exported(engine, export_onnx)
        if keep:
            runtime.onnx_model = model
        return model

    def _exported(self, engine: str, export: Callable[[SegmentGraph], T]) -> T:
        """`export(segment)` of the engine's segment; a failure is recorded as the segment's
        `export_error` (its builds fail with it from then on)."""
        runtime = self.segments[engine]
        try:
            return export(runtime.segment)
        except Exception as exc:
            runtime.export_error = str(exc)
            raise

    def write_onnx(self, engine: str, path: Path) -> None:
        """The segment's ONNX model into `path` as one file, streamed: from an engine's file
        that is the export (an FP32 ONNX Runtime engine), else exported again (to a temporary
        file) unless it is kept."""
        from workbench.engines.onnx.files import remove_model, write_inline
        from workbench.engines.runtime.build import export_file

        runtime = self.segments[engine]
        if runtime.onnx_model is not None:
            path.write_bytes(runtime.onnx_model.SerializeToString())
            return
        exported = [e.exported_model for _, e in runtime.op.engines()
                    if getattr(e, "exported_model", None) is not None]
        source = exported[0] if exported else self._exported(engine, export_file)
        try:
            with path.open("wb") as out:
                write_inline(source, out)
        finally:
            if not exported:
                remove_model(source)

    def _build_engine(self, name: str, request: BuildRequest) -> Engine:
        from workbench.engines.runtime.build import build_segment_engine, export_file

        if environment.ABORT_ENGINE_BUILD.read():
            raise WorkbenchError(f"engine build aborted by {environment.ABORT_ENGINE_BUILD.name}")
        runtime = self.segments[name]
        if runtime.export_error:
            raise WorkbenchError(runtime.export_error)
        # The export is a file whose weights are streamed from the segment's protos: the
        # engine takes it over, and a later build or save exports again (quick) rather
        # than keep another copy of the weights for the model's life.
        model = runtime.onnx_model if runtime.onnx_model is not None else \
            self._exported(name, export_file)
        runtime.segment.release()  # made again if needed
        try:
            return build_segment_engine(runtime.segment, runtime.op.settings, request,
                                        backend=self.backend, model=model)
        finally:
            release_free_memory()  # the export's and the build's freed memory

    @property
    def function(self) -> Any:
        """The in-process converted function (ConcreteFunction over the converted graph):
        engines already built are called without the native fallback branch (see
        `engine_function`), the others with it."""
        ops = self.ops
        decided = self._without_fallback
        if decided is None or (len(decided) + len(self._always_fallback) < len(ops)
                               and self._more_without_fallback(ops)):
            for name, op in ops.items():
                if not op.ready_without_fallback and len(op.cache):  # failed or refused: for good
                    self._always_fallback.add(name)
            self._without_fallback = frozenset(
                n for n, op in ops.items()
                if op.ready_without_fallback and n not in self._always_fallback)
        return self._function_with(self._without_fallback)

    def _more_without_fallback(self, ops: dict[str, EngineOp]) -> bool:
        direct = self._without_fallback or frozenset()
        return any(op.ready_without_fallback for n, op in ops.items()
                   if n not in direct and n not in self._always_fallback)

    def _function_with(self, direct: frozenset[str]) -> Any:
        if direct not in self._functions:
            graph = self.graph
            # An engine inside a function may run inside a loop wherever the function is
            # called: never inlined either.
            lifted, weights = self._lifted_weights()  # the converted GraphDef, no weights
            in_loops = engines_in_loops(lifted) | {
                node.name for function in lifted.library.function
                for node in function.node_def if node.name in self.segments}
            functions = {}
            for segment in graph.segments:
                name = segment.engine.name
                key = (name, name not in direct)
                if key not in self._engine_functions:
                    self._engine_functions[key] = engine_function(
                        self.segments[name].op, segment, inline=name not in in_loops,
                        fallback=key[1])
                functions[name] = self._engine_functions[key]
            # Kept: this one and the all-fallback one (calibration and shape collection).
            self._functions = {k: f for k, f in self._functions.items() if not k}
            self._functions[direct] = wrap_converted(
                lifted, graph.input_tensors, graph.feed_specs(), graph.output_tensors,
                functions, captured=weights)
        return self._functions[direct]

    def _lifted_weights(self) -> tuple[Any, dict[str, Any]]:
        """The converted GraphDef with its large weights as Placeholders, and the weights as
        eager tensors for the function to capture (made once, shared by its versions)."""
        if self._weights is None:
            lifted = self.graph.lifted_converted()
            protos = lifted.weights  # each let go once it is a tensor (a saved model's own)
            self._weights = lifted.graph_def, {
                name: as_tensor(protos.pop(name)) for name in list(protos)}
            del lifted
            release_free_memory()  # each weight's bytes, read to make its tensor
            self.graph.release_converted()  # its weights are the tensors now
        return self._weights

    @property
    def captured_weights(self) -> dict[str, Any]:
        """Placeholder -> the eager tensor the converted function captured for it (empty
        before the function is made): a save's variables share them rather than copy."""
        return {} if self._weights is None else self._weights[1]

    # --- calling ------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Runs the converted model: inputs by position (signature order) or by name."""
        tensors = self.input_tensors(args, kwargs)
        try:
            outputs = self._call(tensors)
        except tf.errors.OpError as exc:  # TF-TRT's kernel aborted; ours ran inside TensorFlow
            refused = [line[line.index(DISALLOWED):] for line in exc.message.splitlines()
                       if DISALLOWED in line]
            if not refused:
                raise
            raise tf.errors.AbortedError(exc.node_def, exc.op, refused[0]) from None
        self.check_outputs(outputs)
        return dict(zip(self.output_names, outputs, strict=True))

    def check_outputs(self, outputs: Sequence[Any]) -> None:
        """Raises `WrongOutputError` when an output's dtype or shape is not the signature's."""
        graph = self.graph

        def producer(index: int) -> str:
            return producer_of(graph.converted_graph_def, graph.output_tensors[index],
                               list(self.segments))

        check_outputs(outputs, graph.output_specs, graph.prepared_for, producer)

    def _call(self, tensors: list[Any]) -> list[Any]:
        """One call; when an engine called without fallback found no engine to run, the
        call's counts are undone and it reruns with that engine's fallback branch."""
        if self._without_fallback is None:
            self._build_for_first_call(tensors)
        while True:
            function = self.function
            if not self._without_fallback:
                return function(*tensors)
            counts = {name: op.call_counts() for name, op in self.ops.items()}
            try:
                return function(*tensors)
            except tf.errors.OpError as exc:
                missed = [n for n in self._without_fallback
                          if f"{ENGINE_MISS}[{n}]" in str(exc.message)]
                if not missed:
                    raise
            for name, op in self.ops.items():
                op.restore_counts(counts[name])
            self._always_fallback.update(missed)
            self._without_fallback = self._without_fallback - set(missed)

    def input_tensors(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        names = self.input_names
        if len(args) > len(names):
            raise WorkbenchError(f"the model takes {len(names)} input(s) ({', '.join(names)}), "
                                 f"got {len(args)}")
        given = dict(zip(names, args, strict=False))
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise WorkbenchError(f"unknown input(s) {', '.join(unknown)}; the model takes "
                                 f"{', '.join(names)}")
        given.update(kwargs)
        missing = [n for n in names if n not in given]
        if missing:
            raise WorkbenchError(f"missing input(s) {', '.join(missing)}; the model takes "
                                 f"{', '.join(names)}")
        return [tf.convert_to_tensor(given[n], dtype=d)
                for n, d in zip(names, self.graph.input_dtypes, strict=True)]

    def _build_for_first_call(self, tensors: list[Any]) -> None:
        """Implicit batch: the engines the first call would build at run time, built before
        the graph is put together, so that it holds no native fallback branch (with every
        weight again) for TensorFlow to optimize: VGG16's first call spent most of its time
        there. Engines whose input shapes need a data run are left to the call."""
        ops = self.ops
        graph = self.graph
        if (self.settings.use_dynamic_shape or graph.prepared_graph_def is None
                or not all(op.settings.allow_build_at_runtime and not len(op.cache)
                           for op in ops.values())):
            return
        shapes = InputSets([tensors]).shapes[0]
        try:
            found = graph.engine_input_shapes(shapes)
        except Exception as error:  # the call itself builds (and reports) as TF-TRT's kernel did
            logger.debug("engine shapes left to the first call: %s", first_line(error))
            return
        for name, engine_shapes in found.items():
            if engine_shapes is not None and name in ops and ops[name].settings.use_implicit_batch:
                ops[name].build(engine_shapes)

    # --- build() and calibration -------------------------------------------------------------

    def build(self, input_fn: Callable[[], Any]) -> None:
        """TF-TRT's build(): engines for the shapes `input_fn` yields. Only the shapes count
        (as on a GPU): each engine's input shapes are inferred, and data runs through the
        model only for engines whose input shapes depend on values."""
        from workbench.engines.profiles import optimization_profiles

        sets = collect_inputs(input_fn, self.input_names, "input_fn")
        shapes = self._engine_shapes(sets)
        for name, op in self.ops.items():
            settings = self.engine_settings(name)  # a function's engines have their own
            if settings.use_dynamic_shape:
                # One engine per op holding every profile the strategy makes of its shapes.
                strategy = settings.dynamic_shape_profile_strategy or "Range"
                if shapes[name]:
                    op.profiles = tuple(optimization_profiles(shapes[name], strategy))
                    op.build()
                continue
            # Implicit batch: each distinct input shape set serves or builds an engine (up to
            # maximum_cached_engines per op, the LRU keeping the most recent).
            for engine_shapes in dict.fromkeys(shapes[name]):
                op.build(engine_shapes)

    def _engine_shapes(self, sets: InputSets) -> dict[str, list[Any]]:
        """engine -> its input shapes for each input set (inferred; from a native run of the
        set when they depend on values, with a clear error when that run fails)."""
        from workbench.engines.runtime.build_shapes import data_run_error

        graph = self.graph
        inferred: dict[Any, dict[str, Any]] = {}
        found: dict[str, list[Any]] = {name: [] for name in self.ops}
        for index, (inputs, set_shapes) in enumerate(zip(sets.sets, sets.shapes, strict=True)):
            if set_shapes not in inferred:
                inferred[set_shapes] = graph.engine_input_shapes(set_shapes)
            engine_shapes = dict(inferred[set_shapes])
            unknown = [name for name, value in engine_shapes.items() if value is None]
            if unknown:
                try:
                    collected = self._run_collecting(InputSets([inputs]), shapes=True)
                except tf.errors.OpError as exc:
                    ops = {n.name: n.op for n in graph.prepared_graph_def.node} if (
                        graph.prepared_graph_def is not None) else {}
                    raise data_run_error(exc, unknown, index, ops, self.input_names) from None
                for name in unknown:
                    engine_shapes[name] = (collected[name][0] or [None])[0]
            for name, value in engine_shapes.items():
                if value is not None:
                    found[name].append(value)
        return found

    def engine_shape_sets(self, input_sets: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
        """engine -> its input shapes for each of the model's `input_sets` (as build() sees
        them: inferred, or from a native run where they depend on values)."""
        return self._engine_shapes(InputSets([list(s) for s in input_sets]))

    def engine_input_batches(self, input_sets: Sequence[Sequence[Any]]
                             ) -> dict[str, list[Any]]:
        """engine -> the input batches it received while `input_sets` ran natively (engines
        in loops once per iteration), as calibration collects them."""
        collected = self._run_collecting(InputSets([list(s) for s in input_sets]), shapes=False)
        return {name: batches for name, (_, batches) in collected.items()}

    def calibrate(self, calibration_input_fn: Callable[[], Any]) -> None:
        """INT8: each op's input batches from running `calibration_input_fn` natively; they
        become the calibration data of the engines built afterwards."""
        sets = collect_inputs(calibration_input_fn, self.input_names, "calibration_input_fn")
        distinct = list(dict.fromkeys(sets.shapes))
        if len(distinct) > 1:
            raise WorkbenchError(
                "calibration data must have a single shape (TF-TRT's rule); "
                f"calibration_input_fn yielded {len(distinct)}: "
                + ", ".join(str([list(s) for s in shapes]) for shapes in distinct[:4]))
        collected = self._run_collecting(sets, shapes=False)
        for name, op in self.ops.items():
            op.calibration_data = tuple(collected[name][1])

    def engine_inputs(self, input_sets: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
        """engine -> the input batches it gets when the whole model runs natively on
        `input_sets` (input name -> array each): what per-engine accuracy feeds each engine."""
        sets = collect_inputs(lambda: iter(input_sets), self.input_names, "input_sets")
        return {name: batches for name, (_, batches) in
                self._run_collecting(sets, shapes=False).items()}

    def call_with_engines(self, engines: set[str], **inputs: Any) -> dict[str, Any]:
        """One call with only `engines` on the backend, every other segment run natively."""
        ops = self.ops
        native = [op for name, op in ops.items() if name not in engines]
        for op in native:
            op.start_collecting(shapes=True)  # a collecting op runs its native segment
        try:
            outputs = self._function_with(frozenset())(*self.input_tensors((), inputs))
        finally:
            for op in native:
                op.stop_collecting()
        self.check_outputs(outputs)
        return dict(zip(self.output_names, outputs, strict=True))

    def _run_collecting(self, sets: InputSets, shapes: bool
                        ) -> dict[str, tuple[list[Any], list[Any]]]:
        ops = self.ops
        for op in ops.values():
            op.start_collecting(shapes)
        try:
            safe = self._function_with(frozenset())  # collecting engines run natively
            for inputs in sets.sets:
                safe(*self.input_tensors(inputs, {}))
        finally:
            collected = {name: op.stop_collecting() for name, op in ops.items()}
        return collected

    # --- export -------------------------------------------------------------------------------

    def export_engines(self, directory: str | os.PathLike) -> list[str]:
        """Writes, for use elsewhere, each segment's ONNX model (`<engine>.onnx`, for
        `trtexec --onnx=...`) and each built engine: a TensorRT plan as `<engine>.<n>.plan`,
        another backend's payload as `<engine>.<n>.<backend>` (an ONNX Runtime engine is its
        ONNX model at the engine's precision). Returns the file names; a segment the exporter
        cannot express gets `<engine>.onnx.txt` saying why."""
        from workbench.engines.backends.base import unpack_engine

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, runtime in self.segments.items():
            try:
                self.write_onnx(name, out / f"{name}.onnx")
                written.append(f"{name}.onnx")
            except Exception as exc:
                (out / f"{name}.onnx.txt").write_text(f"not exported: {exc}\n")
                written.append(f"{name}.onnx.txt")
            for index, (_, engine) in enumerate(runtime.op.engines()):
                _, payload = unpack_engine(engine.serialize(), engine.backend)
                suffix = "plan" if engine.backend.startswith("tensorrt") else engine.backend
                (out / f"{name}.{index}.{suffix}").write_bytes(payload)
                written.append(f"{name}.{index}.{suffix}")
        return written

    # --- what happened ------------------------------------------------------------------------

    def engine_table(self) -> pd.DataFrame:
        """Per engine: cached engines, builds, engine calls (and of them those the compiled
        engine op served), native calls, native reasons."""
        rows = []
        for name, runtime in self.segments.items():
            op = runtime.op
            stats = op.stats
            rows.append({
                "engine": name, "cached_engines": len(op.engines()), "builds": stats.builds,
                "failed_builds": stats.failed_builds, "engine_calls": stats.engine_calls,
                "compiled_calls": stats.compiled_calls, "native_calls": stats.native_calls,
                "native_reasons": "; ".join(op.fallback_reasons),
            })
        return pd.DataFrame(rows, columns=["engine", "cached_engines", "builds", "failed_builds",
                                           "engine_calls", "compiled_calls", "native_calls",
                                           "native_reasons"])

    @property
    def native_runs(self) -> dict[str, dict[str, int]]:
        """engine -> reason -> count, for every call the native segment served."""
        return {name: op.fallback_reasons for name, op in self.ops.items()
                if op.fallback_reasons}

    def __repr__(self) -> str:
        engines = len(self.graph.segments) if self._graph is not None else "?"
        return f"ConvertedModel({engines} engines, precision {self.settings.precision_mode})"


def _model_alive(model: weakref.ref[ConvertedModel]) -> ConvertedModel:
    alive = model()
    if alive is None:
        raise WorkbenchError("its converted model was deleted")
    return alive


@dataclass
class InputSets:
    """The input sets an `input_fn` yielded, checked against the model's inputs."""

    sets: list[list[Any]] = field(default_factory=list)

    @property
    def shapes(self) -> list[tuple[tuple[int, ...], ...]]:
        return [tuple(tuple(int(d) for d in np.shape(x)) for x in s) for s in self.sets]


def collect_inputs(fn: Callable[[], Any], input_names: Sequence[str], what: str) -> InputSets:
    """Every input set `fn()` yields, as lists in signature order; a clear error when it yields
    nothing or the wrong number of tensors (before any work starts)."""
    if not callable(fn):
        raise WorkbenchError(f"{what} must be a callable returning a generator of input sets")
    sets = []
    for i, batch in enumerate(fn()):
        if isinstance(batch, dict):
            missing = [n for n in input_names if n not in batch]
            if missing or len(batch) != len(input_names):
                raise WorkbenchError(
                    f"{what} yielded inputs {sorted(batch)} in set {i}; the model takes "
                    f"{', '.join(input_names)}")
            items = [batch[n] for n in input_names]
        else:
            items = list(batch) if isinstance(batch, (list, tuple)) else [batch]
        if len(items) != len(input_names):
            raise WorkbenchError(
                f"{what} yielded {len(items)} tensor(s) in set {i}; the model takes "
                f"{len(input_names)} ({', '.join(input_names)})")
        sets.append(items)
    if not sets:
        raise WorkbenchError(f"{what} yielded nothing: it must yield at least one input set")
    return InputSets(sets)


def converted_model(session: ConversionSession, result: ConversionResult,
                    params: ConversionParams) -> ConvertedModel:
    """The converted function of a conversion (`ConversionSession`, `ConversionResult`,
    `ConversionParams`); its graph is put together on first use."""
    return ConvertedModel(lambda: runtime_graph(session, result),
                          EngineSettings.from_params(params))


def runtime_graph(session: ConversionSession, result: ConversionResult) -> RuntimeGraph:
    """The converted graph of a conversion (`ConversionSession`, `ConversionResult`)."""
    from workbench.engines.runtime.hybrid import converted_graph_def
    from workbench.engines.segment import extract_segment
    from workbench.graph.nodes import TensorRef

    prepared = session.prepared(str(result.params.precision_mode))
    loaded = session.loaded
    fetches = prepared.optimized.fetches
    count = len(loaded.input_names)
    inputs, outputs = fetches[:count], fetches[count:]
    segments = [extract_segment(prepared, engine) for engine in result.engines]
    dtypes = {s.engine.name: ([x.dtype for x in s.input_specs], [x.dtype for x in s.output_specs])
              for s in segments}
    functions = [f for f in result.functions if f.engines and f.body is not None]
    engine_settings = {}
    replaced = []
    for conversion in functions:
        function_segments = [extract_segment(conversion.body, e) for e in conversion.engines]
        replaced.append((conversion, function_segments))
        segments += function_segments
        own = asdict(EngineSettings.from_params(conversion.params))
        engine_settings.update({e.name: dict(own) for e in conversion.engines})

    def converted(weights: dict[str, Any] | None = None) -> Any:  # made on use, and again
        graph_def = converted_graph_def(prepared.graph_def, result.engines, dtypes,
                                        [TensorRef.parse(t).node for t in outputs], weights)
        for conversion, function_segments in replaced:
            _replace_function(graph_def, conversion, function_segments)
        return graph_def

    def lifted() -> LiftedGraph:
        weights: dict[str, Any] = {}
        return LiftedGraph(converted(weights), weights)

    graph = prepared.graph
    specs = [graph.output_spec(TensorRef.parse(t)) for t in inputs]
    out_specs = [graph.output_spec(TensorRef.parse(t)) for t in outputs]
    return RuntimeGraph(
        converted_source=converted,
        lifted_source=lifted,
        segments=segments,
        input_names=list(loaded.input_names),
        output_names=list(loaded.output_names),
        input_tensors=list(inputs),
        output_tensors=list(outputs),
        input_dtypes=[numpy_dtype_name(s.dtype) if s else "float32" for s in specs],
        input_shapes=[s.shape if s else None for s in specs],
        signature_key=loaded.signature_key,
        prepared_graph_def=prepared.graph_def,
        functions=functions,
        engine_settings=engine_settings,
        output_specs=[OutputSpec.of(name, spec)
                      for name, spec in zip(loaded.output_names, out_specs, strict=True)],
        prepared_for=result.prepared_for,
    )


def _replace_function(converted: Any, conversion: Any, segments: list[Any]) -> None:
    """Puts the function of `conversion` with its engines in place into the converted
    GraphDef's library."""
    from workbench.engines.runtime.hybrid import converted_function_def

    library = converted.library.function
    index = next(i for i, f in enumerate(library) if f.signature.name == conversion.function)
    library[index].CopyFrom(converted_function_def(library[index], conversion.body, segments))
