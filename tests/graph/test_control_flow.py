"""Models with TensorFlow's v1 control flow (while loops from Keras RNNs and tf.map_fn, a cond):
loading, TF-TRT's candidate test and segmentation, the graph views, the converted model, save
and load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from random_graphs import full_search, graph_of, node

import sample_models
import workbench
from sample_models.control_flow import png_batch
from sample_models.recipes import SEQUENCE_STEPS
from workbench import trt_convert as trt
from workbench.checks.inputs import random_inputs
from workbench.conversion import segmenter
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.graph.control_flow import ROOT_FRAME, loop_frames
from workbench.graph.nodes import Node
from workbench.graph.prepare import MANUAL_CONTROL_ATTR, optimize
from workbench.profiling.engines import native_and_engines
from workbench.viz.graphs import converted_graph, full_graph, to_svg

LOOP_OPS = ("Enter", "Exit", "NextIteration", "Merge", "Switch", "LoopCond")


@pytest.fixture(scope="module")
def lstm() -> ConversionSession:
    return ConversionSession.open(sample_models.build("lstm"))


@pytest.fixture(scope="module")
def map_fn() -> ConversionSession:
    return ConversionSession.open(sample_models.build("map_fn_cnn"))


def sample_input(name: str, batch: int = 3) -> np.ndarray:
    (spec,) = sample_models.recipe(name).inputs.values()
    if spec.dtype == "string":
        return png_batch(batch)
    shape = [batch, *spec.shape[1:]]
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


def frame_of_engine(session: ConversionSession, nodes: tuple[str, ...]) -> set[str]:
    frames = loop_frames(session.prepared().graph)
    return {frames.frame_of[name] for name in nodes}


# --- loading --------------------------------------------------------------------------------

def test_loop_graph_gets_tensorflows_own_node_order(lstm: ConversionSession) -> None:
    prepared = lstm.prepared()
    imported = tf.Graph()
    with imported.as_default():
        tf.compat.v1.import_graph_def(prepared.graph_def, name="")
    assert [n.name for n in prepared.graph.real_nodes] == [
        op.name for op in imported.get_operations()]
    assert {"Merge", "NextIteration"} <= {n.op for n in prepared.graph.real_nodes}


def test_frozen_loops_are_the_same_on_every_run(lstm: ConversionSession) -> None:
    # Freezing a loop leaves a varying number of stand-in Placeholders and marks a varying set
    # of nodes `_has_manual_control_dependencies` (then Grappler merged the two zero states
    # or not); both are dropped, and node order no longer depends on the freezing order.
    optimized = lstm.optimized.graph_def
    assert not [n.name for n in optimized.node if n.name.startswith("unused_control_flow")]
    assert not [n.name for n in optimized.node if MANUAL_CONTROL_ATTR in n.attr]
    again = optimize(lstm.loaded).graph_def
    assert again.SerializeToString(deterministic=True) == optimized.SerializeToString(
        deterministic=True)


def test_every_node_sits_in_its_loop_frame(lstm: ConversionSession) -> None:
    graph = lstm.prepared().graph
    frames = loop_frames(graph)
    (frame,) = frames.names
    assert frames.parent[frame] == ROOT_FRAME and frame.endswith("while")
    for item in graph.real_nodes:
        if item.op in LOOP_OPS:
            assert frames.frame_of[item.name] == frame, item.name
        if item.op == "Exit":
            assert {frames.frame_of[c.name] for c, _ in graph.consumers[item.name]} <= {ROOT_FRAME}
    in_cell = [n for n in graph.real_nodes if "lstm_cell" in n.name and n.op == "MatMul"]
    assert in_cell and all(frames.in_loop(n.name) for n in in_cell)
    assert not frames.in_loop("keras_tensor" if "keras_tensor" in graph.by_name else "sequence")


def test_nested_loop_frames() -> None:
    def enter(name: str, source: str, frame: str) -> Node:
        made = node(name, "Enter", [source])
        made.raw_attrs = {"frame_name": frame}
        return made

    graph = graph_of(
        node("x", "Placeholder"), enter("e1", "x", "outer"), node("m1", "Merge", ["e1", "n1"]),
        node("c1", "LoopCond", ["m1"]), node("s1", "Switch", ["m1", "c1"]),
        enter("e2", "s1:1", "inner"), node("m2", "Merge", ["e2", "n2"]),
        node("c2", "LoopCond", ["m2"]), node("s2", "Switch", ["m2", "c2"]),
        node("b2", "Relu", ["s2:1"]), node("n2", "NextIteration", ["b2"]),
        node("x2", "Exit", ["s2"]), node("b1", "Relu", ["x2"]), node("n1", "NextIteration", ["b1"]),
        node("x1", "Exit", ["s1"]), node("out", "Identity", ["x1"]),
    )
    frames = loop_frames(graph)
    assert frames.names == ["outer", "inner"] and frames.parent == {"outer": "", "inner": "outer"}
    by_frame: dict[str, set[str]] = {}
    for name, frame in frames.frame_of.items():
        by_frame.setdefault(frame, set()).add(name)
    assert by_frame == {ROOT_FRAME: {"x", "out"},
                        "outer": {"e1", "m1", "c1", "s1", "b1", "n1", "x1"},
                        "inner": {"e2", "m2", "c2", "s2", "b2", "n2", "x2"}}
    assert frames.depth("inner") == 2


# --- TF-TRT's candidate test and segmentation -------------------------------------------------

def test_control_flow_ops_get_tftrt_reasons(lstm: ConversionSession) -> None:
    # Explicit batch: no shape check comes first, so each op fails TF-TRT's converter lookup.
    result = lstm.convert(ConversionParams(use_dynamic_shape=True))
    reasons = {u.op: {x.reason for x in result.unconverted if x.op == u.op}
               for u in result.unconverted if u.op in LOOP_OPS}
    assert reasons == {op: {f"Op type {op} is not supported."} for op in LOOP_OPS}
    assert {op: sum(result.nonconversion[op].values()) > 0 for op in LOOP_OPS} == dict.fromkeys(
        LOOP_OPS, True)
    # Implicit batch: scalar loop counters fail the shape check first, as in TF-TRT.
    implicit = lstm.convert(ConversionParams())
    for item in implicit.unconverted:
        if item.op in LOOP_OPS:
            assert item.reason in (f"Op type {item.op} is not supported.",
                                   "implicit batch mode requires input shape with at least "
                                   "two dimensions")


@pytest.mark.parametrize("name", ["lstm", "map_fn_cnn"])
def test_cycle_check_is_tftrts_full_reverse_search(name: str) -> None:
    # The back edges lead the search from a loop body node back round to itself; TF-TRT counts
    # that as a cycle, so loop bodies split into small segments (a DAG shortcut merges more).
    session = ConversionSession.open(sample_models.build(name))
    params = ConversionParams()
    ours = session.segmentation(params, cached=False).segments
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segmenter._Contraction, "has_other_path", full_search)
        assert session.segmentation(params, cached=False).segments == ours


def test_lstm_segments(lstm: ConversionSession) -> None:
    assert lstm.convert(ConversionParams()).engines == []  # every segment below 3 nodes
    engines = lstm.convert(ConversionParams(minimum_segment_size=1)).engines
    inside = [e for e in engines if frame_of_engine(lstm, e.nodes) != {ROOT_FRAME}]
    outside = [e for e in engines if e not in inside]
    assert len(inside) == 13 and all(len(e.nodes) == 1 for e in inside)
    assert [e.native_ops for e in outside] == [{"Const": 1, "Identity": 1, "MatMul": 1}]


def test_map_fn_segments_one_engine_in_the_loop_one_after_it(map_fn: ConversionSession) -> None:
    engines = map_fn.convert(ConversionParams()).engines
    frames = [frame_of_engine(map_fn, e.nodes) for e in engines]
    # Prepared for a GPU (the T4 default): the convolutions are NCHW, and the layout
    # optimizer's input Transpose and its permutation Const join the engine after the loop
    # (13 nodes when prepared for the CPU); the global mean pool needs no Transpose back.
    assert [len(e.nodes) for e in engines] == [3, 15]
    assert engines[1].native_ops["Transpose"] == 1 and engines[1].native_ops["Conv2D"] == 2
    assert frames[0] != {ROOT_FRAME} and len(frames[0]) == 1 and frames[1] == {ROOT_FRAME}


def test_profiling_skips_engines_inside_loops_and_says_why(map_fn: ConversionSession) -> None:
    table = native_and_engines(map_fn, ConversionParams(), random_inputs(map_fn, 2), runs=1)
    inside, after = map_fn.convert(ConversionParams()).engines
    (note,) = table.attrs["skipped"]
    assert note.startswith(f"{inside.name}: inside while loop StatefulPartitionedCall/map/while")
    assert set(table.loc[table["run"] != "native TF", "engine"]) == {after.name}


# --- graph views ----------------------------------------------------------------------------

def cluster_body(source: str, name: str) -> str:
    """The text of `subgraph <name> { ... }` in a dot source, nested clusters included."""
    start = source.index(f"subgraph {name} {{")
    depth, i = 0, source.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start:i]
        i += 1


@pytest.mark.parametrize("view", [full_graph, converted_graph])
def test_views_draw_the_loop_frame_around_its_engine(map_fn: ConversionSession, view) -> None:
    result = map_fn.convert(ConversionParams())
    dot = view(map_fn.prepared().graph, result)
    frame = cluster_body(dot.source, "cluster_frame_0")
    inside, after = result.engines
    assert inside.name in frame and f'"{after.name}"' not in frame
    assert "NextIteration" in frame and "constraint=false" in dot.source  # back edges
    svg = to_svg(dot)
    assert "while loop map/while" in svg


# --- the converted model ----------------------------------------------------------------------

def check_round_trip(name: str, minimum_segment_size: int, out: Path) -> Any:
    """Converts a sample, then checks the converted function, `workbench.load` of its save and
    plain TensorFlow's load of it against native TF; returns the converted function."""
    path = str(sample_models.build(name))
    (key,) = sample_models.recipe(name).inputs
    x = sample_input(name)
    expected = tf.saved_model.load(path).signatures["serving_default"](**{key: tf.constant(x)})
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=path,
                                        minimum_segment_size=minimum_segment_size)
    function = converter.convert()
    converter.save(str(out))
    plain = tf.saved_model.load(str(out)).signatures["serving_default"]
    for model in (function, workbench.load(out), lambda v: plain(**{key: tf.constant(v)})):
        got = model(x)
        for output, want in expected.items():
            np.testing.assert_allclose(np.asarray(got[output]), want.numpy(), atol=1e-5)
    assert not function.native_runs and converter.result.engines
    return function


def test_lstm_engines_inside_the_loop_run_every_step(tmp_path: Path) -> None:
    function = check_round_trip("lstm", 1, tmp_path / "lstm")
    calls = [op.stats.engine_calls for op in function.ops.values()]
    assert calls.count(SEQUENCE_STEPS) == 13 and calls.count(1) == 1  # 13 in the loop, 1 after


@pytest.mark.parametrize("name, minimum_segment_size",
                         [("map_fn_cnn", 3), ("png_cnn", 3), ("cond_mlp", 1)])
def test_control_flow_models_convert_run_and_reload(tmp_path: Path, name: str,
                                                     minimum_segment_size: int) -> None:
    check_round_trip(name, minimum_segment_size, tmp_path / name)
