"""TF-TRT segmenter semantics: the cases of TF's segment_test.cc plus the spec's rules (§2)."""

from __future__ import annotations

import pytest
from random_graphs import allow_names, allow_ops, at_threshold, graph_of, node

from workbench.conversion.candidates import (
    REASON_DENYLIST,
    REASON_DEVICE,
    REASON_DYNAMIC_DIM,
    REASON_EXCLUDED,
    REASON_IMPLICIT_BATCH,
    SegmenterOptions,
    find_candidates,
    leading_shape,
    merge_batch,
    parse_device,
)
from workbench.conversion.converted import converted_top_level
from workbench.conversion.result import ConversionResult
from workbench.conversion.segmenter import segment_graph
from workbench.errors import ConversionParamsError

EXPLICIT = SegmenterOptions(use_implicit_batch=False)
STATIC_ENGINE = SegmenterOptions(use_implicit_batch=True, allow_dynamic_non_batch_dim=False)
# segment_test.cc runs with SegmentOptions' default minimum_segment_size of 2.
TEST_MIN_SIZE = 2


def engine_sets(graph, candidates, options=EXPLICIT, min_size=TEST_MIN_SIZE):
    segmentation = segment_graph(graph, options, allow_names(candidates))
    return [set(e.nodes) for e in segmentation.result(at_threshold(min_size)).engines]


def adds_graph(devices=None):
    """segment_test.cc's Simple graph: feed -> add0, add1 -> add2 -> add3, add4."""
    devices = devices or {}
    spec = {
        "add0": ["feed", "feed"], "add1": ["feed", "feed"], "add2": ["add0", "add1"],
        "add3": ["add0", "add2"], "add4": ["add2", "add2"],
    }
    nodes = [node("feed", "Placeholder")]
    nodes += [node(n, "Add", ins, device=devices.get(n, "")) for n, ins in spec.items()]
    return graph_of(*nodes)


ALL_ADDS = {"add0", "add1", "add2", "add3", "add4"}


def test_empty_graph_has_no_segments_and_reports_source_and_sink():
    segmentation = segment_graph(graph_of(), EXPLICIT, allow_ops())
    assert segmentation.segments == []
    partition = segmentation.result(at_threshold(3))
    assert partition.engines == []
    assert partition.nonconversion == {"NoOp": {"Op type NoOp is not supported.": 2}}
    assert partition.not_converted_top_level == 0


def test_simple_all_candidates_form_one_segment():
    assert engine_sets(adds_graph(), ALL_ADDS) == [ALL_ADDS]


def test_simple_without_add1():
    assert engine_sets(adds_graph(), ALL_ADDS - {"add1"}) == [ALL_ADDS - {"add1"}]


def test_avoid_cycle_when_middle_node_is_not_a_candidate():
    assert engine_sets(adds_graph(), ALL_ADDS - {"add2"}) == []


def test_device_assignments():
    cpu = adds_graph({"add1": "/device:CPU:0"})
    assert engine_sets(cpu, ALL_ADDS) == [ALL_ADDS - {"add1"}]
    candidates = find_candidates(cpu, EXPLICIT, allow_names(ALL_ADDS))
    assert candidates.reasons["add1"] == REASON_DEVICE

    gpu0 = dict.fromkeys(["add0", "add1", "add2"], "/device:GPU:0")
    two_gpus = adds_graph({**gpu0, "add3": "/device:GPU:1", "add4": "/device:GPU:1"})
    assert engine_sets(two_gpus, ALL_ADDS) == [{"add0", "add1", "add2"}]

    any_gpu = adds_graph({**gpu0, "add3": "/device:GPU:*", "add4": "/device:GPU:*"})
    assert engine_sets(any_gpu, ALL_ADDS) == [ALL_ADDS]
    segmentation = segment_graph(any_gpu, EXPLICIT, allow_names(ALL_ADDS))
    engine = segmentation.result(at_threshold(2)).engines[0]
    assert engine.device == "/device:GPU:0"


def test_multiple_segments_in_root_name_order():
    spec = {
        "add0": ["feed", "feed"], "add1": ["feed", "feed"], "add7": ["feed", "feed"],
        "add2": ["add0", "add1"], "add5": ["add2", "add7"], "add8": ["add7", "add7"],
        "add3": ["add0", "add2"], "add4": ["add2", "add5"], "add6": ["add5", "add8"],
    }
    graph = graph_of(node("feed", "Placeholder"), *(node(n, "Add", i) for n, i in spec.items()))
    all_adds = set(spec)
    assert engine_sets(graph, all_adds - {"add5"}) == [
        {"add0", "add1", "add2", "add3"}, {"add6", "add8"},
    ]


def test_big_if_else():
    spec = {
        "add0": ["feed", "feed"], "add1": ["add0", "add0"], "add2": ["add1", "add1"],
        "add3": ["add2", "add2"], "add4": ["add0", "add0"], "add5": ["add4", "add4"],
        "add6": ["add5", "add5"], "add7": ["add3", "add6"],
    }
    graph = graph_of(node("feed", "Placeholder"), *(node(n, "Add", i) for n, i in spec.items()))
    assert engine_sets(graph, set(spec) - {"add2"}) == [
        {"add0", "add1"}, {"add3", "add4", "add5", "add6", "add7"},
    ]


def test_identity_ops_are_not_effective():
    graph = graph_of(
        node("feed", "Placeholder"), node("identity0", "Identity", ["feed"]),
        node("identity1", "Identity", ["identity0"]), node("identity2", "Identity", ["identity1"]),
        node("identity3", "Identity", ["identity2"]),
    )
    names = {"identity0", "identity1", "identity2", "identity3"}
    segmentation = segment_graph(graph, EXPLICIT, allow_names(names))
    assert [s.effective_size for s in segmentation.segments] == [0]
    partition = segmentation.result(at_threshold(1))
    assert partition.engines == []
    reasons = {u.reason for u in partition.unconverted if u.name in names}
    assert reasons == {"segment has no effective nodes (only Identity, Snapshot, StopGradient)"}


def test_exclude_add_with_dynamic_non_batch_dimension():
    graph = graph_of(
        node("Const", "Const", shape=()),
        node("feed-1", "Placeholder", shape=(-1, 2, 3)),
        node("feed-2", "Placeholder", shape=(-1, -1, 3)),
        node("add-0", "Add", ["feed-1", "Const"], shape=(-1, 2, 3)),
        node("add-1", "Add", ["add-0", "feed-1"], shape=(-1, 2, 3)),
        node("add-2", "Add", ["Const", "feed-2"], shape=(-1, -1, 3)),
    )
    all_nodes = {"add-0", "add-1", "add-2"}
    assert engine_sets(graph, all_nodes, STATIC_ENGINE) == [{"add-0", "add-1"}]
    reasons = find_candidates(graph, STATIC_ENGINE, allow_names(all_nodes)).reasons
    assert reasons["add-2"] == REASON_DYNAMIC_DIM


def test_exclude_reshape_with_dynamic_non_batch_dimension_in_output():
    graph = graph_of(
        node("Const", "Const", shape=()),
        node("shape", "Const", shape=(2,), dtype="int32"),
        node("feed-1", "Placeholder", shape=(-1, 2, 3)),
        node("add-0", "Add", ["feed-1", "Const"], shape=(-1, 2, 3)),
        node("reshape", "Reshape", ["add-0", "shape"], shape=(6, -1)),
        node("add-1", "Add", ["reshape", "Const"], shape=(6, -1)),
    )
    assert engine_sets(graph, {"add-0", "reshape", "add-1"}, STATIC_ENGINE) == []


def test_rank_one_cannot_use_implicit_batch():
    graph = graph_of(
        node("input-0", "Placeholder", shape=(3,)), node("input-1", "Placeholder", shape=(3,)),
        node("const-scalar", "Const", shape=()),
        node("output-0", "Add", ["input-0", "const-scalar"], shape=(3,)),
        node("output-1", "Add", ["input-1", "const-scalar"], shape=(3,)),
    )
    names = {"const-scalar", "output-0", "output-1"}
    assert engine_sets(graph, names, STATIC_ENGINE) == []
    reasons = find_candidates(graph, STATIC_ENGINE, allow_names(names)).reasons
    assert reasons["output-0"] == reasons["output-1"] == REASON_IMPLICIT_BATCH


def two_chains(shape0, shape1, const_shape=()):
    return graph_of(
        node("input-0", "Placeholder", shape=shape0), node("input-1", "Placeholder", shape=shape1),
        node("const-scalar", "Const", shape=const_shape),
        node("output-0", "Add", ["input-0", "const-scalar"], shape=shape0),
        node("output-1", "Add", ["input-1", "const-scalar"], shape=shape1),
    )


def test_two_chains_with_different_batch_sizes_take_the_first_edge():
    graph = two_chains((2, 3), (5, 3))
    names = {"const-scalar", "output-0", "output-1"}
    segmentation = segment_graph(graph, STATIC_ENGINE, allow_names(names))
    assert segmentation.candidates.batch[graph["output-1"].id] == (5, 5)
    assert segmentation.candidates.batch[graph["const-scalar"].id] == (None, None)
    # The Const joins output-0 (its first out-edge), then output-1's batch size 5 conflicts.
    # segment_test.cc expects {output-0, const-scalar} because its output-edge function
    # accepts Consts; TF-TRT's OutputEdgeValidator then drops the Const, which also feeds
    # output-1 outside the segment.
    assert [(s.root, s.nodes) for s in segmentation.segments] == [
        ("const-scalar", ("output-0",)), ("output-1", ("output-1",)),
    ]
    assert segmentation.boundary_removed == {graph["const-scalar"].id: "const-scalar"}


def test_same_rank_implicit_broadcasting_static_batch_size():
    graph = graph_of(
        node("input-0", "Placeholder", shape=(2, 3, 1)),
        node("input-1", "Placeholder", shape=(1, 3, 4)),
        node("input-2", "Placeholder", shape=(2, 3, 4)),
        node("multiple", "Mul", ["input-2", "input-2"], shape=(2, 3, 4)),
        node("output-0", "Add", ["input-0", "multiple"], shape=(2, 3, 4)),
        node("output-1", "Add", ["input-1", "multiple"], shape=(2, 3, 4)),
    )
    names = {"multiple", "output-0", "output-1"}
    assert engine_sets(graph, names, STATIC_ENGINE) == [names]


def test_same_rank_implicit_broadcasting_dynamic_batch_size():
    graph = graph_of(
        node("input-0", "Placeholder", shape=(-1, 2)),
        node("const-val", "Const", shape=(1, 1)),
        node("add-0", "Add", ["input-0", "const-val"], shape=(-1, 2)),
        node("output-0", "Add", ["input-0", "add-0"], shape=(-1, 2)),
    )
    names = {"const-val", "add-0", "output-0"}
    assert engine_sets(graph, names, STATIC_ENGINE) == [names]


def test_incompatible_batch_sizes():
    graph = graph_of(
        node("input-0", "Placeholder", shape=(-1, 2)),
        node("const-val", "Const", shape=(2, 2)),
        node("add-0", "Add", ["input-0", "const-val"], shape=(2, 2)),
        node("output-0", "Add", ["input-0", "add-0"], shape=(2, 2)),
    )
    assert engine_sets(graph, {"const-val", "add-0", "output-0"}, STATIC_ENGINE) == []


# --- rules from the spec beyond segment_test.cc ------------------------------------------

def test_leading_shape_examples_from_segment_cc():
    assert leading_shape([(1, 3, 4), (2, 3, 4)]) == (2, 3, 4)
    assert leading_shape([(2, 3, 4), ()]) == (2, 3, 4)
    assert leading_shape([(-1, 3, 4), (1, 3, 4)]) == (-1, 3, 4)
    assert leading_shape([(-1, 3, 4), (2, 3, 4)]) is None


def test_batch_merge_rules():
    assert merge_batch((-1, None), (8, 8)) is None
    assert merge_batch((-2, None), (-3, None)) is None
    assert merge_batch((None, None), (8, 8)) == (8, 8)
    assert merge_batch((-1, None), (None, None)) == (-1, None)


def test_max_batch_size_annotation_wins_over_the_leading_dim():
    annotated = node("a", "Relu", ["x"])
    annotated.raw_attrs = {"_tftrt_op_max_batch_size": 4}
    graph = graph_of(node("x", "Placeholder", shape=(8, 8)), annotated,
                     node("b", "Relu", ["x"], shape=(8, 8)))
    candidates = find_candidates(graph, SegmenterOptions(), allow_ops())
    assert candidates.batch[graph["a"].id] == (4, 4)
    assert candidates.batch[graph["b"].id] == (8, 8)
    assert find_candidates(graph, EXPLICIT, allow_ops()).batch[graph["a"].id] == (None, None)


def test_explicit_batch_must_allow_dynamic_dims():
    options = SegmenterOptions(use_implicit_batch=False, allow_dynamic_non_batch_dim=False)
    with pytest.raises(ConversionParamsError):
        find_candidates(graph_of(), options, allow_ops())


def test_device_parsing():
    assert parse_device("") == (None, None, None, None, None)
    assert parse_device("/job:w/replica:0/task:1/device:GPU:2") == ("w", 0, 1, "GPU", 2)
    assert parse_device("/gpu:1") == (None, None, None, "GPU", 1)
    assert parse_device("/device:GPU:*") == (None, None, None, "GPU", None)
    assert parse_device("GPU:0") is None
    assert parse_device("/device:G-PU:0") is None


def test_candidate_check_order_and_report_map():
    graph = graph_of(
        node("x", "Placeholder"),
        node("cpu_relu", "Relu", ["x"], device="/device:CPU:0"),
        node("out", "Relu", ["x"]),
        node("deny", "MatMul", ["x", "x"]),
        node("nms", "NonMaxSuppressionV5", ["x"]),
        node("bad_device", "Relu", ["x"], device="not a device"),
    )
    options = SegmenterOptions(exclude_nodes=frozenset({"out", "cpu_relu"}),
                               denylist=frozenset({"MatMul"}))
    candidates = find_candidates(graph, options, allow_ops())
    assert candidates.reasons == {
        "_SOURCE": "Op type NoOp is not supported.",
        "_SINK": "Op type NoOp is not supported.",
        "x": "Op type Placeholder is not supported.",
        "cpu_relu": REASON_DEVICE,  # the device check comes before the exclusion list
        "out": REASON_EXCLUDED,
        "deny": REASON_DENYLIST,
        "nms": "Op type NonMaxSuppressionV5 is not supported.",
        "bad_device": REASON_DEVICE,
    }
    assert candidates.nonconversion == {
        "MatMul": {REASON_DENYLIST: 1},
        "NoOp": {"Op type NoOp is not supported.": 2},
        "NonMaxSuppressionV5": {"Op type NonMaxSuppressionV5 is not supported.": 1},
        "Placeholder": {"Op type Placeholder is not supported.": 1},
        "Relu": {REASON_DEVICE: 2, REASON_EXCLUDED: 1},
    }


def conv_graph():
    """input -> conv(w) -> bias(b) -> relu -> out, where w also feeds an unsupported op."""
    return graph_of(
        node("input", "Placeholder"),
        node("w", "Const", shape=(3, 3, 8, 8)),
        node("b", "Const", shape=(8,)),
        node("conv", "Conv2D", ["input", "w"]),
        node("bias", "BiasAdd", ["conv", "b"]),
        node("relu", "Relu", ["bias"]),
        node("id", "Identity", ["relu"]),
        node("peek", "Unsupported", ["w"]),
        node("out", "Identity", ["id"]),
    )


def test_const_feeding_outside_is_removed_at_the_boundary_but_copied_in():
    graph = conv_graph()
    options = SegmenterOptions(exclude_nodes=frozenset({"input", "out"}))
    segmentation = segment_graph(graph, options, allow_ops())
    (segment,) = segmentation.segments
    assert (segment.root, segment.nodes) == ("b", ("b", "bias", "conv", "id", "relu"))
    assert segment.effective_size == 4  # Identity does not count; the Const b does
    (engine,) = segmentation.result(at_threshold(3)).engines
    assert engine.name == "TRTEngineOp_000_000"
    assert engine.inputs == ("input:0",)  # w is copied in, not an input
    assert engine.outputs == ("id:0",)
    assert engine.native_ops == {"BiasAdd": 1, "Const": 2, "Conv2D": 1, "Identity": 1, "Relu": 1}
    assert engine.native_node_count == 6
    assert engine.input_dtypes == ("float32",) and engine.input_shapes == ((-1, 8),)
    partition = segmentation.result(at_threshold(3))
    removed = {u.name: u for u in partition.unconverted}["w"]
    assert not removed.in_tftrt_report
    assert removed.reason.startswith("removed from segment b at its boundary: a Const")
    # input, w (still used by peek), peek, out: w stays alive, so it is counted.
    assert partition.not_converted_top_level == 4


def test_const_feeding_only_unsupported_nodes_is_a_boundary_node_of_its_own():
    graph = graph_of(node("x", "Placeholder"), node("k", "Const"),
                     node("u", "Unsupported", ["x", "k"]))
    segmentation = segment_graph(graph, SegmenterOptions(), allow_ops())
    assert segmentation.segments == []
    (const,) = [u for u in segmentation.result(at_threshold(1)).unconverted if u.name == "k"]
    assert const.reason.startswith("a Const that only feeds nodes TF-TRT does not convert")


def converted_edges(graph, partition):
    result = ConversionResult(partition.params, partition.engines, partition.unconverted,
                              partition.nonconversion, partition.not_converted_top_level)
    return converted_top_level(graph, result).edges


def test_boundary_const_depending_on_the_segment_is_copied_in_without_a_cycle():
    """P -> A -> ^C, C -> D and ^C -> E inside, C -> O outside (traced by hand in TF-TRT's code).

    Clustering puts P, A, C, D, E in one segment. C feeds O, so §2.8 removes it and, C being a
    Const, its in-node A; A's out-nodes (only C) are gone already. The segment keeps P, D and E,
    and P -> A -> C -> D, E leaves it and comes back. TF-TRT has no later cycle check, but its
    GetEngineInfo copies C into the engine as weights and drops control edges from Consts, so
    the converted graph is a DAG and the engine is built as usual.
    """
    graph = graph_of(
        node("x", "Placeholder"), node("P", "Relu", ["x"]), node("A", "Relu", ["P"]),
        node("C", "Const", control=["A"]), node("D", "Add", ["P", "C"]),
        node("E", "Relu", ["D"], control=["C"]),
        node("O", "Unsupported", ["C"]), node("y", "Unsupported", ["E"]),
    )
    segmentation = segment_graph(graph, EXPLICIT, allow_ops())
    assert [(s.root, s.nodes) for s in segmentation.segments] == [("P", ("D", "E", "P"))]
    partition = segmentation.result(at_threshold(3))
    (engine,) = partition.engines
    assert engine.inputs == ("x:0",) and engine.outputs == ("P:0", "E:0")
    assert engine.native_ops == {"Add": 1, "Const": 1, "Relu": 2}  # C copied in
    reasons = {u.name: u.reason for u in partition.unconverted}
    assert reasons["C"].startswith("removed from segment P at its boundary: a Const")
    assert reasons["A"].startswith("removed from segment P at its boundary along with")
    assert sorted(converted_edges(graph, partition)) == [
        ("A", "C"), ("C", "O"), ("TRTEngineOp_000_000", "A"), ("TRTEngineOp_000_000", "y"),
        ("x", "TRTEngineOp_000_000"),
    ]


def test_control_edge_from_a_const_inside_an_engine_is_dropped():
    """TF-TRT keeps an engine's control outputs only from non-Const segment nodes."""
    graph = graph_of(
        node("x", "Placeholder"), node("k", "Const"), node("P", "Relu", ["x"]),
        node("D", "Add", ["P", "k"]), node("y", "Unsupported", ["D"]),
        node("U", "Unsupported", ["x"], control=["k"]),
    )
    partition = segment_graph(graph, EXPLICIT, allow_ops()).result(at_threshold(3))
    (engine,) = partition.engines
    assert engine.nodes == ("D", "P", "k")
    assert sorted(converted_edges(graph, partition)) == [
        ("TRTEngineOp_000_000", "y"), ("x", "TRTEngineOp_000_000"), ("x", "U"),
    ]


def test_minimum_segment_size_counts_effective_nodes_only():
    segmentation = segment_graph(conv_graph(), SegmenterOptions(), allow_ops())
    assert len(segmentation.result(at_threshold(4)).engines) == 1
    partition = segmentation.result(at_threshold(5))
    assert partition.engines == []
    reasons = {u.name: u.reason for u in partition.unconverted}
    assert reasons["conv"] == "4 effective nodes < minimum_segment_size 5"
    assert reasons["input"] == "Op type Placeholder is not supported."


def test_outside_const_used_only_by_engines_is_not_counted():
    graph = graph_of(
        node("x", "Placeholder"),
        node("c", "Const", control=["x"]),  # excluded below, so it stays outside
        node("a", "Relu", ["x"]), node("b", "Add", ["a", "c"]), node("d", "Relu", ["b"]),
        node("y", "Identity", ["d"]),
    )
    options = SegmenterOptions(exclude_nodes=frozenset({"x", "y"}))
    validate = allow_ops({"Relu", "Add"})
    partition = segment_graph(graph, options, validate).result(at_threshold(3))
    (engine,) = partition.engines
    assert engine.nodes == ("a", "b", "d") and engine.native_ops["Const"] == 1
    assert partition.not_converted_top_level == 2  # x and y; c is dead after conversion


def chains_graph(lengths):
    """Independent Relu chains c<i>_<j> fed by one placeholder."""
    nodes = [node("x", "Placeholder")]
    for i, length in enumerate(lengths):
        previous = "x"
        for j in range(length):
            nodes.append(node(f"c{i}_{j}", "Relu", [previous]))
            previous = f"c{i}_{j}"
        nodes.append(node(f"stop{i}", "Unsupported", [previous]))
    return graph_of(*nodes)


def test_max_engines_keeps_the_largest_in_root_name_order():
    segmentation = segment_graph(chains_graph([3, 5, 4, 5, 2]), SegmenterOptions(), allow_ops())
    assert [s.effective_size for s in segmentation.segments] == [3, 5, 4, 5, 2]
    partition = segmentation.result(at_threshold(1, max_engines=3))
    assert [(e.name, e.nodes[0]) for e in partition.engines] == [
        ("TRTEngineOp_000_000", "c1_0"), ("TRTEngineOp_000_001", "c2_0"),
        ("TRTEngineOp_000_002", "c3_0"),
    ]
    reasons = {u.name: u.reason for u in partition.unconverted}
    assert "TF_TRT_MAX_ALLOWED_ENGINES=3" in reasons["c0_0"]
    assert len(segmentation.result(at_threshold(1, max_engines=0)).engines) == 5
    assert len(segmentation.result(at_threshold(1, max_engines=-1)).engines) == 5
    # A tie keeps the earlier root name: c1 and c3 both have 5.
    first = segmentation.result(at_threshold(1, max_engines=1))
    assert [e.nodes[0] for e in first.engines] == ["c1_0"]


def test_minus_one_converts_nothing():
    segmentation = segment_graph(conv_graph(), SegmenterOptions(), allow_ops())
    partition = segmentation.result(at_threshold(-1))
    assert partition.engines == [] and partition.nonconversion == {}
    assert partition.not_converted_top_level == len(conv_graph().real_nodes)
    assert all(not u.in_tftrt_report for u in partition.unconverted)


def test_segment_without_data_inputs_stays_native_and_uses_its_index():
    graph = graph_of(
        node("c", "Const"), node("a", "Relu", ["c"]), node("b", "Relu", ["a"]),
        node("stop", "Unsupported", ["b"]),
        node("x", "Placeholder"), node("d", "Relu", ["x"]), node("e", "Relu", ["d"]),
        node("y", "Unsupported", ["e"]),
    )
    partition = segment_graph(graph, EXPLICIT, allow_ops()).result(at_threshold(2))
    assert [(e.name, e.nodes) for e in partition.engines] == [("TRTEngineOp_000_001", ("d", "e"))]
    reasons = {u.name: u.reason for u in partition.unconverted}
    assert reasons["a"].startswith("segment has no inputs")


def test_contraction_prefers_output_side():
    """A->B, A->C, B->D, C->D with C not a candidate: {B, D} merge, A stays alone."""
    graph = graph_of(
        node("x", "Placeholder"), node("A", "Relu", ["x"]), node("B", "Relu", ["A"]),
        node("C", "Unsupported", ["A"]), node("D", "Add", ["B", "C"]),
    )
    segmentation = segment_graph(graph, EXPLICIT, allow_ops())
    assert [s.nodes for s in segmentation.segments] == [("A",), ("B", "D")]


@pytest.mark.parametrize("threshold", [1, 2, 3, 5])
def test_sweep_matches_result(threshold):
    segmentation = segment_graph(chains_graph([3, 5, 4, 1]), SegmenterOptions(), allow_ops())
    swept = segmentation.sweep(at_threshold(1, max_engines=2), [threshold])[0]
    assert swept == segmentation.result(at_threshold(threshold, max_engines=2))


def cond_graph(switch_op: str = "Switch"):
    """A lowered tf.cond whose branches share a Const without control inputs (the layout
    optimizer's permutation, deduplicated by Grappler): then = t1 -> t2, else = e1 -> e2."""
    return graph_of(
        node("x", "Placeholder"), node("pred", "Placeholder", shape=(), dtype="bool"),
        node("sw", switch_op, ["x", "pred"]),
        node("perm", "Const", shape=(4,), dtype="int32"),
        node("t1", "Transpose", ["sw:1", "perm"]), node("t2", "Relu", ["t1"]),
        node("e1", "Transpose", ["sw:0", "perm"]), node("e2", "Relu", ["e1"]),
        node("merge", "Merge", ["t2", "e2"]), node("after", "Relu", ["merge"]),
        node("after2", "Relu", ["after"]))


@pytest.mark.parametrize("switch_op", ["Switch", "_SwitchN"])
def test_nodes_of_different_cond_branches_never_share_an_engine(switch_op):
    # One engine over both branches would wait for the branch that did not run (its input is
    # dead) and take the live branch down with it: the converted model returned nothing.
    engines = engine_sets(cond_graph(switch_op), {"perm", "t1", "t2", "e1", "e2", "after",
                                                  "after2"})
    assert {"after", "after2"} in engines
    assert not any({"t1", "e1"} <= engine for engine in engines)
    assert any({"t1", "t2"} <= engine for engine in engines)
    assert any({"e1", "e2"} <= engine for engine in engines)


def test_cond_branches_follow_the_predicate_and_end_at_the_merge():
    from workbench.graph.control_flow import cond_branches

    branches = cond_branches(cond_graph())
    assert branches["perm"] is None  # no inputs: usable in any branch
    assert branches["t2"] == {("pred:0", 1)} and branches["e2"] == {("pred:0", 0)}
    assert branches["after"] == branches["sw"] == frozenset()
