"""A model prepared once and converted for any parameters, reusing every step it can.

Grappler runs once per model; the FP16 rewrite and shape inference once per precision family;
the candidate test and clustering once per (mode, precision, denylist); every threshold and
engine limit is then read off the one clustering (that is what makes the widgets instant).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from workbench import environment
from workbench.conversion.candidates import SegmenterOptions
from workbench.conversion.function_conversion import (
    FunctionConversion,
    call_site_specs,
    convert_functions,
    marked_for_conversion,
)
from workbench.conversion.ops import REGISTRY
from workbench.conversion.params import ConversionParams, check_denylist
from workbench.conversion.result import ConversionResult
from workbench.conversion.segmenter import Segmentation, segment_graph
from workbench.conversion.validator import ValidatorSettings, validate_node
from workbench.graph.cache import cached_optimize
from workbench.graph.gpu import PreparationTarget, preparation_target
from workbench.graph.loading import LoadedModel, load_model
from workbench.graph.prepare import OptimizedGraph, PreparedGraph, finish
from workbench.tf_compat import tensorflow_version

# Explicit-precision (QDQ) mode is on when the graph holds one of these ops
# (docs/tftrt-behaviour.md#pipeline).
EXPLICIT_QUANTIZATION_OPS = frozenset({"QuantizeAndDequantizeV2"})
# `timings` keys in the order the steps run, and what a person calls them.
PREPARATION_STEPS = (
    ("load_s", "opening"),
    ("hash_s", "hashing the model"),
    ("cache_read_s", "reading the cache"),
    ("read_weights_s", "reading weights"),
    ("freeze_s", "freezing"),
    ("tf_freeze_s", "froze with TensorFlow"),
    ("grappler_s", "Grappler"),
    ("grappler_real_weights_s", "Grappler on the real weights"),
    ("shapes_s", "shapes"),
    ("cache_write_s", "writing the cache"),
    ("segment_s", "clustering"),
)


class ConversionSession:
    """Converts one loaded model for any `ConversionParams`, caching the expensive steps."""

    def __init__(self, loaded: LoadedModel, disable_non_trt_optimizers: bool = False,
                 cache: bool = True, fast_freeze: bool = True,
                 prepare_for: PreparationTarget | str | None = None,
                 keep_variables: bool = False):
        self.loaded = loaded
        # The device TF-TRT's Grappler run saw (graph/gpu.py): a GPU, the T4 by default, or
        # "cpu" for Grappler on this machine.
        self.target = preparation_target(prepare_for)
        self.disable_non_trt_optimizers = disable_non_trt_optimizers  # TF-TRT's test-only flag
        self.cache = cache  # read and write the prepared-graph cache (workbench.graph.cache)
        self.fast_freeze = fast_freeze  # off: TensorFlow's own freezing (graph/freeze.py)
        # TF-TRT's disable_graph_freezing: Consts that were variables are marked as such
        # (graph/variables.py), and native segments read variables again.
        self.keep_variables = keep_variables
        self._optimized: OptimizedGraph | None = None
        self._prepared: dict[bool, PreparedGraph] = {}
        self._segmentations: dict[tuple, Segmentation] = {}
        self._rewritten: dict[tuple[str, ...] | None, ConversionSession] = {}
        self._frozen: Any = None  # the model frozen with its weights, for the rewrites
        # Matches changed per rewrite when this session's model is a rewritten one.
        self.rewrite_counts: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    @classmethod
    def open(
        cls,
        model: Any,
        signature_key: str | None = None,
        tags: Sequence[str] | None = None,
        output_node_names: Sequence[str] | None = None,
        input_node_names: Sequence[str] | None = None,
        disable_non_trt_optimizers: bool = False,
        cache: bool = True,
        prepare_for: PreparationTarget | str | None = None,
        keep_variables: bool = False,
    ) -> ConversionSession:
        """Loads `model` (SavedModel dir, Keras model or `.keras`, frozen `.pb`).

        With `cache` the prepared graph is read from (or stored in) the disk cache, so a
        model opened before skips freezing and Grappler; in-memory Keras models never are.
        `prepare_for` names the GPU (or "cpu") Grappler prepares the graph for (graph/gpu.py).
        """
        start = time.perf_counter()
        loaded = load_model(model, signature_key, tags, output_node_names, input_node_names)
        session = cls(loaded, disable_non_trt_optimizers, cache, prepare_for=prepare_for,
                      keep_variables=keep_variables)
        session.timings["load_s"] = time.perf_counter() - start
        return session

    def rewritten(self, only: Sequence[str] | None = None) -> ConversionSession:
        """A session of this model with the rewrites applied (conversion/rewrites/; `only`:
        their names), prepared for the same target. It is another model, converted by the
        same rules; convert() itself never rewrites. Kept per set of rewrites."""
        from workbench.conversion.rewrites.model import freeze, rewrite_model

        key = None if only is None else tuple(sorted(only))
        if key not in self._rewritten:
            self._frozen = self._frozen or freeze(self.loaded)
            rewritten = rewrite_model(self.loaded, only, self._frozen)
            session = ConversionSession(rewritten.model, self.disable_non_trt_optimizers,
                                        cache=False, fast_freeze=self.fast_freeze,
                                        prepare_for=self.target,
                                        keep_variables=self.keep_variables)
            session.rewrite_counts = rewritten.counts
            self._rewritten[key] = session
        return self._rewritten[key]

    @property
    def optimized(self) -> OptimizedGraph:
        if self._optimized is None:
            self._optimized = cached_optimize(self.loaded, self.disable_non_trt_optimizers,
                                              self.cache, self.fast_freeze, self.target,
                                              self.keep_variables)
            self.timings.update(self._optimized.timings)
        return self._optimized

    def optimized_for(self, prepare_for: PreparationTarget | str) -> OptimizedGraph:
        """The graph Grappler prepares for another target (cached like `optimized`): the
        whole-model ONNX export wants the CPU's, channels-last, without the layout optimizer's
        GPU-only ops."""
        target = preparation_target(prepare_for)
        if target == self.target:
            return self.optimized
        return cached_optimize(self.loaded, self.disable_non_trt_optimizers, self.cache,
                               self.fast_freeze, target, self.keep_variables)

    def prepared(self, precision_mode: str = "FP32") -> PreparedGraph:
        """The graph the segmenter sees; FP16 differs only by its split Casts."""
        fp16 = precision_mode.upper() == "FP16"
        if fp16 not in self._prepared:
            self._prepared[fp16] = finish(self.optimized, precision_mode)
            self.timings["shapes_s"] = self._prepared[fp16].timings["shapes_s"]
        return self._prepared[fp16]

    def preparation_steps(self) -> str:
        """The preparation steps run so far with their times, e.g. for a loading bar:
        `from cache: reading the cache 0.15 s, shapes 0.00 s, clustering 0.05 s`."""
        fallback = self._optimized.freeze_fallback if self._optimized is not None else ""
        labels = {**dict(PREPARATION_STEPS), **(
            {"tf_freeze_s": f"froze with TensorFlow ({fallback})"} if fallback else {})}
        steps = ", ".join(f"{labels[key]} {self.timings[key]:.2f} s"
                          for key, _ in PREPARATION_STEPS if key in self.timings)
        return f"from cache: {steps}" if self._from_cache else steps

    def opening_summary(self) -> str:
        """One short line for when opening ends (the steps were shown while it ran), e.g.
        `opened from the cache in 0.21 s`."""
        total = sum(self.timings[key] for key, _ in PREPARATION_STEPS if key in self.timings)
        return f"opened {'from the cache ' if self._from_cache else ''}in {total:.2f} s"

    @property
    def _from_cache(self) -> bool:
        """Whether the prepared graph was read from the cache rather than made."""
        return self._optimized is not None and self._optimized.from_cache

    def has_explicit_quantization(self, precision_mode: str = "FP32") -> bool:
        graph = self.prepared(precision_mode).graph
        return any(node.op in EXPLICIT_QUANTIZATION_OPS for node in graph)

    def validator_settings(
        self, params: ConversionParams, assume_supported: frozenset[str] = frozenset()
    ) -> ValidatorSettings:
        """`assume_supported` adds op types to TF-TRT's fake list (a what-if: the op gets a
        converter that accepts it; its inputs are still checked)."""
        explicit = self.has_explicit_quantization(params.precision_mode)
        return ValidatorSettings(
            precision_mode="INT8" if explicit else params.precision_mode,
            use_implicit_batch=params.use_implicit_batch,
            use_calibration=False if explicit else params.needs_calibration,
            use_explicit_precision=explicit,
            fake_ops=frozenset(environment.OP_FAKELIST.read()) | assume_supported,
            experimental_features=frozenset(environment.EXPERIMENTAL_FEATURES.read()),
        )

    def segmentation(
        self,
        params: ConversionParams,
        cached: bool = True,
        assume_supported: frozenset[str] = frozenset(),
    ) -> Segmentation:
        """The clustering for these parameters (independent of threshold and engine limit).

        `cached=False` redoes the candidate test and clustering (benchmarks use it);
        `assume_supported` is the what-if of `validator_settings`.
        """
        prepared = self.prepared(params.precision_mode)
        settings = self.validator_settings(params, assume_supported)
        key = (settings, frozenset(params.denylist))
        if params.denylist and key not in self._segmentations:
            check_denylist(params.denylist, model_op_types(prepared.graph_def),
                           set(REGISTRY) | settings.fake_ops)
        if key not in self._segmentations or not cached:
            start = time.perf_counter()
            graph = prepared.graph
            options = SegmenterOptions(
                use_implicit_batch=params.use_implicit_batch,
                exclude_nodes=prepared.exclude_nodes,
                denylist=frozenset(params.denylist),
            )
            self._segmentations[key] = segment_graph(
                graph, options, lambda node: validate_node(graph, node, settings)
            )
            self.timings["segment_s"] = time.perf_counter() - start
        return self._segmentations[key]

    def convert(
        self, params: ConversionParams, assume_supported: frozenset[str] = frozenset()
    ) -> ConversionResult:
        """The conversion result for `params`."""
        partition = self.segmentation(params, assume_supported=assume_supported).result(params)
        result = self._result(partition)
        result.functions = self.function_conversions(params)
        return result

    def function_conversions(self, params: ConversionParams) -> list[FunctionConversion]:
        """The library functions marked `_tftrt_convert_function`, each converted with the
        parameters its `_tftrt_*` attributes override (TF-TRT's function items)."""
        prepared = self.prepared(params.precision_mode)
        if not any(marked_for_conversion(f) for f in prepared.graph_def.library.function):
            return []
        return convert_functions(prepared.graph_def,
                                 call_site_specs(prepared.graph, prepared.graph_def), params,
                                 self.validator_settings)

    def sweep(
        self, params: ConversionParams, thresholds: Iterable[int] = range(1, 65)
    ) -> list[ConversionResult]:
        """Results for every `minimum_segment_size` in `thresholds`, from one clustering."""
        return [self._result(partition)
                for partition in self.segmentation(params).sweep(params, thresholds)]

    def _result(self, partition: ConversionResult) -> ConversionResult:
        """The segmenter's partition (with the parameters it was read at) and where it came
        from."""
        # With -1 TF-TRT leaves the main graph alone: no segmenter run, so no report either.
        minimum_segment_size = partition.params.minimum_segment_size
        nonconversion = {} if minimum_segment_size == -1 else partition.nonconversion
        return replace(
            partition,
            engines=list(partition.engines),
            nonconversion=nonconversion,
            model=self.loaded.source,
            signature_key=self.loaded.signature_key,
            tensorflow_version=tensorflow_version(),
            prepared_for=self.target.label,
        )


def model_op_types(graph_def: Any) -> set[str]:
    """The op types of a GraphDef's nodes and of its library functions' nodes."""
    ops = {node.op for node in graph_def.node}
    ops.update(node.op for function in graph_def.library.function for node in function.node_def)
    return ops
