"""The graph a converted model runs from: the converted GraphDef (engine nodes in place of
the segments), the segments, and how the signature's names map to tensors (`RuntimeGraph`),
put together from a conversion by `runtime_graph()` or read from a save (`saving.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.engines.runtime.output_check import OutputSpec
from workbench.engines.segment import GraphMadeOnUse, SegmentGraph
from workbench.engines.settings import EngineSettings
from workbench.engines.weights import LiftedGraph
from workbench.graph.nodes import numpy_dtype_name
from workbench.lazy import tf

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession


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
    # A loaded model's weights read from its checkpoint (saved_graphs.CheckpointWeights).
    saved_weights: Any = None

    def __post_init__(self) -> None:
        self._converted = GraphMadeOnUse(self.converted_source, self.lifted_source)

    def as_graph_def(self, add_shapes: bool = False) -> Any:
        """The converted GraphDef as TF-TRT's converted function's graph gave it: one
        TRTEngineOp per engine (`tftrt_graph_def.tftrt_graph_def`). `add_shapes` is accepted
        for TensorFlow's signature and not used."""
        from workbench.engines.runtime.tftrt_graph_def import tftrt_graph_def

        return tftrt_graph_def(self)

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
        on values); see engine_shapes.engine_input_shapes."""
        from workbench.engines.runtime.engine_shapes import engine_input_shapes

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


def runtime_graph(session: ConversionSession, result: ConversionResult) -> RuntimeGraph:
    """The converted graph of a conversion (`ConversionSession`, `ConversionResult`)."""
    from workbench.engines.runtime.hybrid_graph import converted_graph_def
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
    replaced = [(f, [extract_segment(f.body, e) for e in f.engines]) for f in functions]
    segments += [segment for _, function_segments in replaced for segment in function_segments]

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
        engine_settings=_function_engine_settings(functions),
        output_specs=[OutputSpec.of(name, spec)
                      for name, spec in zip(loaded.output_names, out_specs, strict=True)],
        prepared_for=result.prepared_for,
    )


def _function_engine_settings(functions: list[Any]) -> dict[str, dict[str, Any]]:
    """engine inside a converted function -> its function's EngineSettings fields."""
    found = {}
    for conversion in functions:
        own = asdict(EngineSettings.from_params(conversion.params))
        found.update({e.name: dict(own) for e in conversion.engines})
    return found


def _replace_function(converted: Any, conversion: Any, segments: list[Any]) -> None:
    """Puts the function of `conversion` with its engines in place into the converted
    GraphDef's library."""
    from workbench.engines.runtime.hybrid_graph import converted_function_def

    library = converted.library.function
    index = next(i for i, f in enumerate(library) if f.signature.name == conversion.function)
    library[index].CopyFrom(converted_function_def(library[index], conversion.body, segments))
