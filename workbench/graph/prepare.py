"""Graph preparation exactly as TF-TRT's `convert()` did it (docs/tftrt-behaviour.md#pipeline).

freeze variables -> clear devices -> mark the signature's inputs and outputs as fetches ->
Grappler once with TF-TRT's optimizer list -> (FP16) split Casts to float -> static shapes.
The Grappler run is the slow part, so it is done once per model (`optimize`) and the cheap,
precision-dependent rest (`finish`) is redone when the precision changes.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import ModelLoadError, WorkbenchError, first_line
from workbench.graph.build import graph_from_graph_def, specs_from_op_properties
from workbench.graph.control_flow import (
    EXIT_OPS,
    NEXT_ITERATION_OPS,
    ROOT_FRAME,
    check_frames,
    loop_frames,
)
from workbench.graph.direct_freeze import NotDirect, freeze_saved_model
from workbench.graph.freeze import FrozenGraph, freeze_function, optimize_with_stand_ins
from workbench.graph.function_library import rename_changed_functions
from workbench.graph.gpu import (
    CPU,
    PLACED_ON,
    PreparationTarget,
    grappler_cluster,
    preparation_target,
)
from workbench.graph.loading import LoadedModel, find_meta_graph, read_saved_model_proto
from workbench.graph.nodes import Graph, TensorSpec
from workbench.graph.variables import mark_variables
from workbench.lazy import tf
from workbench.quiet import environment_level, filtered_stderr
from workbench.tf_private import grappler

# The optimizers TF-TRT's TrtGraphConverterV2 asks Grappler for, in this order; TF-TRT's own
# TensorRTOptimizer (our segmenter) runs after them.
GRAPPLER_OPTIMIZERS = (
    "pruning",
    "debug_stripper",
    "layout",
    "dependency",
    "constfold",
    "common_subgraph_elimination",
)

LOOP_LEFTOVER = "unused_control_flow_input"  # lift_to_graph's stand-in Placeholders
MANUAL_CONTROL_ATTR = "_has_manual_control_dependencies"
# Bump when `optimize`'s result changes for the same model: it keys the prepared-graph cache.
PREPARATION_VERSION = 4


@dataclass
class OptimizedGraph:
    """The frozen, device-cleared graph after TF-TRT's Grappler pass."""

    graph_def: Any
    fetches: list[str]  # tensor names: signature inputs then outputs
    input_nodes: list[str]
    output_nodes: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    from_cache: bool = False  # read from the prepared-graph cache (workbench.graph.cache)
    fp32_shapes: dict[str, list[TensorSpec]] | None = None  # memo of `fp32_shapes()`
    freeze_fallback: str = ""  # why TensorFlow loaded and froze the SavedModel, if it did
    target: PreparationTarget = CPU  # the device Grappler prepared the graph for

    @property
    def input_specs(self) -> list[Any]:
        """The signature inputs' `tf.TensorSpec`s, read off their Placeholders."""
        nodes = {node.name: node for node in self.graph_def.node}
        specs = []
        for name in self.input_nodes:
            attr = nodes[name].attr
            shape = tf.TensorShape(attr["shape"].shape if "shape" in attr else None)
            specs.append(tf.TensorSpec(shape, tf.as_dtype(attr["dtype"].type), name=name))
        return specs


@dataclass
class PreparedGraph:
    """What the segmenter sees: the graph with shape properties, and the nodes to preserve."""

    graph: Graph
    graph_def: Any
    optimized: OptimizedGraph
    exclude_nodes: frozenset[str]
    timings: dict[str, float] = field(default_factory=dict)


def optimize(loaded: LoadedModel, disable_non_trt_optimizers: bool = False,
             fast_freeze: bool = True,
             target: PreparationTarget | str | None = None,
             keep_variables: bool = False) -> OptimizedGraph:
    """Freezes the signature function and runs TF-TRT's Grappler configuration once.

    `target` is the device Grappler prepares for (graph/gpu.py): a GPU, by default the T4, as
    TF-TRT always ran on one (nodes placed on it, the layout optimizer acting), or the CPU.

    `disable_non_trt_optimizers` is TF-TRT's `_test_only_disable_non_trt_optimizers`: every
    Grappler pass but TF-TRT's own is switched off, so the segmenter sees the frozen graph.
    `fast_freeze` freezes a SavedModel from its protos and checkpoint, without TensorFlow's
    load (graph/direct_freeze.py), and keeps large weights out of the import and Grappler
    (graph/freeze.py); same result. Off, it is TensorFlow's own
    `convert_variables_to_constants_v2` of the loaded signature throughout.
    `keep_variables` (TF-TRT's `disable_graph_freezing`) marks the Consts that were variables
    (graph/variables.py).
    """
    target = preparation_target(target)
    timings: dict[str, float] = {}
    frozen, fallback = _freeze(loaded, fast_freeze, timings)
    start = time.perf_counter()
    graph_def = frozen.graph_def
    if keep_variables:
        mark_variables(graph_def, frozen.variables)
    canonical_loops(graph_def)
    move_gather_axes_into_loops(graph_def)
    for node in graph_def.node:
        node.device = PLACED_ON if target.is_gpu else ""
    timings[next(reversed(timings))] += time.perf_counter() - start  # the freezing step

    fetches = frozen.inputs + frozen.outputs
    start = time.perf_counter()
    def grappler(graph: Any) -> Any:
        return run_grappler(graph, fetches, disable_non_trt_optimizers, target)

    stand_in_result, step = None, "grappler_s"
    if frozen.weights:
        optimized, stand_in_result = optimize_with_stand_ins(frozen, grappler)
        step = "grappler_s" if stand_in_result is not None else "grappler_real_weights_s"
    else:
        optimized = grappler(graph_def)
    rename_changed_functions(optimized, graph_def.library)
    timings[step] = time.perf_counter() - start
    result = OptimizedGraph(
        graph_def=optimized,
        fetches=fetches,
        input_nodes=_node_names(frozen.inputs),
        output_nodes=_node_names(frozen.outputs),
        timings=timings,
        freeze_fallback=fallback,
        target=target,
    )
    if stand_in_result is not None:
        # Shapes of the stand-in graph: the same tensors' shapes, without carrying the weights
        # through another serialization (shape inference reads no float weight's values).
        start = time.perf_counter()
        rename_changed_functions(stand_in_result, graph_def.library)
        result.fp32_shapes = infer_shapes(stand_in_result, fetches)
        timings["shapes_s"] = time.perf_counter() - start
    return result


def _freeze(loaded: LoadedModel, fast: bool,
            timings: dict[str, float]) -> tuple[FrozenGraph, str]:
    """The frozen graph (its steps timed into `timings`) and why TensorFlow froze it ("" when
    it did not have to). A SavedModel is frozen from its protos and checkpoint
    (graph/direct_freeze.py), without TensorFlow's load; what that path does not handle is
    loaded and frozen by TensorFlow, with the fast path's stand-ins, or TensorFlow's own
    freezing when the fast path's TensorFlow internals are missing (another version)."""
    fallback = ""
    if fast and loaded.kind == "saved_model":
        try:
            return _freeze_direct(loaded, timings), ""
        except WorkbenchError:
            raise  # the model itself cannot be frozen: TensorFlow's freeze would fail too
        except Exception as exc:  # NotDirect, or TensorFlow internals this version lacks
            fallback = first_line(exc) if isinstance(exc, NotDirect) else (
                f"freezing from the protos failed: {type(exc).__name__}: {first_line(exc)}")
            timings.clear()
    start = time.perf_counter()
    function = loaded.function  # a SavedModel is loaded by TensorFlow here, on first use
    timings["read_weights_s"] = time.perf_counter() - start
    start = time.perf_counter()
    step = "tf_freeze_s" if fallback else "freeze_s"
    key = loaded.signature_key
    try:
        try:
            frozen = freeze_function(function, fast=fast, signature=key)
        except AttributeError as exc:
            if not fast:
                raise
            fallback = fallback or f"the fast path's TensorFlow internals are missing ({exc})"
            step, frozen = "tf_freeze_s", freeze_function(function, fast=False, signature=key)
    except WorkbenchError:
        raise
    except Exception as exc:
        raise ModelLoadError(f"Could not freeze {loaded.source}: {first_line(exc)}") from None
    timings[step] = time.perf_counter() - start
    return frozen, fallback


def _freeze_direct(loaded: LoadedModel, timings: dict[str, float]) -> FrozenGraph:
    start = time.perf_counter()
    path = Path(loaded.source)
    meta_graph = find_meta_graph(read_saved_model_proto(path), loaded.tags, path)
    frozen = freeze_saved_model(path, meta_graph, loaded.signature_key, timings)
    timings["freeze_s"] = time.perf_counter() - start - timings.get("read_weights_s", 0.0)
    return frozen


def canonical_loops(graph_def: Any) -> None:
    """Makes a frozen graph with while loops the same on every run.

    Freezing copies loops with TensorFlow's lift_to_graph, whose node order varies from run to
    run (and so did Grappler's result), and which leaves unconnected `unused_control_flow_input`
    Placeholders, a varying number of them, and sets `_has_manual_control_dependencies` on a
    varying set of nodes (Grappler then merges duplicate nodes or not). We drop those
    Placeholders and that attribute, and order the nodes by name.
    """
    if not any(node.op in NEXT_ITERATION_OPS for node in graph_def.node):
        return
    used = {text.lstrip("^").split(":")[0] for node in graph_def.node for text in node.input}
    keep = [node for node in graph_def.node
            if not (node.op == "Placeholder" and node.name.startswith(LOOP_LEFTOVER)
                    and node.name not in used)]
    keep.sort(key=lambda node: node.name)
    for node in keep:
        node.attr.pop(MANUAL_CONTROL_ATTR, None)
    del graph_def.node[:]
    graph_def.node.extend(keep)


def move_gather_axes_into_loops(graph_def: Any) -> int:
    """Puts the `axis` Consts TensorFlow's freezing adds in the loop frame of their gather.

    Freezing rewrites a `ResourceGather` of a variable as `GatherV2` with a new Const
    `<gather>/axis` that has no inputs, so TensorFlow places it outside every loop; for a gather
    inside a while loop (embedding lookups in a beam search) the graph cannot run: "has inputs
    from different frames". A Const inside a loop body is tied to its frame by a control input
    (the body's input control node, after lowering); the axis Const gets one from the node that
    feeds the gather's params (or indices), which is in the gather's frame. Returns how many
    Consts moved."""
    if not any(node.op in NEXT_ITERATION_OPS for node in graph_def.node):
        return 0
    frames = loop_frames(graph_from_graph_def(graph_def))
    nodes = {node.name: node for node in graph_def.node}
    moved = 0
    for gather in graph_def.node:
        axis = nodes.get(gather.input[2].split(":")[0]) if gather.op == "GatherV2" else None
        if axis is None or axis.op != "Const" or axis.input or axis.name != f"{gather.name}/axis":
            continue
        anchors = [nodes[text.split(":")[0]] for text in gather.input[:2]]
        anchors = [node for node in anchors if node.op not in (*EXIT_OPS, "Switch", "RefSwitch")
                   and frames.frame_of.get(node.name, ROOT_FRAME) != ROOT_FRAME]
        if anchors:
            axis.input.append(f"^{anchors[0].name}")
            moved += 1
    return moved


def finish(optimized: OptimizedGraph, precision_mode: str = "FP32") -> PreparedGraph:
    """Applies the precision-dependent rewrite and infers static shapes
    (docs/tftrt-behaviour.md#pipeline, step 7)."""
    from tensorflow.core.framework import graph_pb2

    start = time.perf_counter()
    graph_def = optimized.graph_def
    fp16 = precision_mode.upper() == "FP16"
    if fp16:
        graph_def = graph_pb2.GraphDef()
        graph_def.CopyFrom(optimized.graph_def)
        split_casts_to_fp32(graph_def)
        properties = infer_shapes(graph_def, optimized.fetches)
    else:
        properties = fp32_shapes(optimized)
    graph = graph_from_graph_def(graph_def, properties)
    check_frames(graph)
    exclude = frozenset(optimized.input_nodes + optimized.output_nodes)
    shapes_s = time.perf_counter() - start
    if not fp16:  # the inference may have run earlier, for the cache
        shapes_s += optimized.timings.get("shapes_s", 0.0)
    timings = {**optimized.timings, "shapes_s": shapes_s}
    return PreparedGraph(graph, graph_def, optimized, exclude, timings)


def fp32_shapes(optimized: OptimizedGraph) -> dict[str, list[TensorSpec]]:
    """`infer_shapes` of the optimized graph itself, inferred once (the cache stores it)."""
    if optimized.fp32_shapes is None:
        start = time.perf_counter()
        optimized.fp32_shapes = infer_shapes(optimized.graph_def, optimized.fetches)
        optimized.timings["shapes_s"] = time.perf_counter() - start
    return optimized.fp32_shapes


def prepare(loaded: LoadedModel, precision_mode: str = "FP32",
            disable_non_trt_optimizers: bool = False,
            target: PreparationTarget | str | None = None) -> PreparedGraph:
    """`optimize` then `finish`: the whole preparation for one precision."""
    return finish(optimize(loaded, disable_non_trt_optimizers, target=target), precision_mode)


def run_grappler(graph_def: Any, fetches: list[str],
                 disable_non_trt_optimizers: bool = False,
                 target: PreparationTarget | None = None) -> Any:
    """One Grappler meta-iteration with TF-TRT's optimizer list, remapping off; or, with
    `disable_non_trt_optimizers`, TF-TRT's test-only config where no Grappler pass runs.

    For a GPU `target` Grappler sees a virtual cluster with that GPU; the device strings it
    needed are cleared afterwards (our segmenter, like TF-TRT's on clean TF2 graphs, sees one
    device everywhere), so the graph imports on any machine."""
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.remapping = rewriter_config_pb2.RewriterConfig.OFF
    if disable_non_trt_optimizers:
        _disable_non_trt_optimizers(rewrite)
    else:
        rewrite.optimizers.extend(GRAPPLER_OPTIMIZERS)
    target = target or CPU
    optimized = _optimize_graph(config, graph_def, fetches, grappler_cluster(target))
    if target.is_gpu:
        # The layout optimizer's node order varies from run to run (and with the frozen
        # graph's order); ordered by name, the same model always gives the same graph.
        nodes = sorted(optimized.node, key=lambda node: node.name)
        for node in nodes:
            node.device = ""
        del optimized.node[:]
        optimized.node.extend(nodes)
    return optimized


def _disable_non_trt_optimizers(rewrite: Any) -> None:
    """The toggles TF-TRT's `disable_non_trt_optimizers_in_rewriter_config` sets (with no
    optimizer list, Grappler's defaults apply, and these turn every one of them off)."""
    from tensorflow.core.protobuf import rewriter_config_pb2

    off = rewriter_config_pb2.RewriterConfig.OFF
    for toggle in ("arithmetic_optimization", "auto_mixed_precision", "constant_folding",
                   "debug_stripper", "dependency_optimization", "function_optimization",
                   "implementation_selector", "layout_optimizer", "loop_optimization",
                   "pin_to_host_optimization", "remapping", "scoped_allocator_optimization",
                   "shape_optimization"):
        setattr(rewrite, toggle, off)
    rewrite.auto_parallel.enable = False
    rewrite.disable_meta_optimizer = False
    rewrite.disable_model_pruning = True
    rewrite.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rewrite.min_graph_nodes = -1


def _optimize_graph(config: Any, graph_def: Any, fetches: list[str], cluster: Any = None) -> Any:
    # With a virtual GPU, Grappler warns once per node that this TensorFlow has no GPU kernel
    # for it (with every CPU kernel listed): those warnings go below TF_CPP_MIN_LOG_LEVEL.
    quiet = filtered_stderr(environment_level()) if cluster is not None \
        else contextlib.nullcontext()
    try:
        with quiet:
            return grappler.optimize_graph(config, _meta_graph(graph_def, fetches),
                                           cluster=cluster)
    except Exception as exc:
        raise ModelLoadError(f"Grappler could not optimize the graph: {first_line(exc)}") from None


def infer_shapes(graph_def: Any, fetches: list[str]) -> dict[str, list]:
    """Grappler's static shape inference: node name -> output `TensorSpec`s.

    TF-TRT ran it with `assume_valid_feeds=true`, so a Placeholder keeps its declared shape;
    Python's wrapper only offers `false`, which forgets it. Inferring on a copy where each
    Placeholder feeds its consumers through an `EnsureShape` of its declared shape gives the
    same shapes, symbolic batch dims included.
    """
    from tensorflow.core.framework import graph_pb2
    pinned = graph_pb2.GraphDef()
    pinned.CopyFrom(graph_def)
    stand_ins = _pin_placeholder_shapes(pinned)
    item = grappler.grappler_item(_meta_graph(pinned, fetches))
    specs = specs_from_op_properties(item.GetOpProperties())
    for placeholder, stand_in in stand_ins.items():
        if stand_in in specs:
            specs[placeholder] = specs.pop(stand_in)
    return specs


def _pin_placeholder_shapes(graph_def: Any) -> dict[str, str]:
    """Routes every Placeholder with a known rank through `EnsureShape`; returns name map."""
    stand_ins = {}
    for node in list(graph_def.node):
        if node.op != "Placeholder" or "shape" not in node.attr:
            continue
        if node.attr["shape"].shape.unknown_rank:
            continue
        pin = graph_def.node.add(name=f"{node.name}/_workbench_pinned_shape", op="EnsureShape")
        pin.input.append(node.name)
        pin.attr["T"].type = node.attr["dtype"].type
        pin.attr["shape"].shape.CopyFrom(node.attr["shape"].shape)
        stand_ins[node.name] = pin.name
    for node in graph_def.node:
        if node.name in stand_ins.values():
            continue
        for i, text in enumerate(node.input):
            source, _, port = text.partition(":")
            if source in stand_ins and port in ("", "0"):
                node.input[i] = stand_ins[source]
    return stand_ins


def split_casts_to_fp32(graph_def: Any) -> int:
    """FP16 mode: `Cast(x->float)` with x not half becomes `Cast(x->half)` + `Cast(half->float)`.

    The new node is named `<name>_split` and appended, as TF-TRT's ConvertGraph does; returns
    how many Casts were split.
    """
    from tensorflow.core.framework import types_pb2

    split = 0
    for node in list(graph_def.node):
        if node.op != "Cast" or node.attr["DstT"].type != types_pb2.DT_FLOAT:
            continue
        if node.attr["SrcT"].type == types_pb2.DT_HALF:
            continue
        to_half = graph_def.node.add()
        to_half.CopyFrom(node)
        to_half.name = node.name + "_split"
        del to_half.input[:]
        to_half.input.append(node.input[0])
        to_half.attr["DstT"].type = types_pb2.DT_HALF
        node.input[0] = to_half.name + ":0"
        node.attr["SrcT"].type = types_pb2.DT_HALF
        split += 1
    return split


def _meta_graph(graph_def: Any, fetches: list[str]) -> Any:
    from tensorflow.core.protobuf import meta_graph_pb2

    meta_graph = meta_graph_pb2.MetaGraphDef()
    meta_graph.graph_def.CopyFrom(graph_def)
    meta_graph.collection_def["train_op"].node_list.value.extend(fetches)
    return meta_graph


def _node_names(tensor_names: list[str]) -> list[str]:
    return [name.split(":")[0] for name in tensor_names]
