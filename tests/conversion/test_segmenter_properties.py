"""Properties of the segmenter on random DAGs (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_graphs import (
    allow_ops,
    at_threshold,
    full_search,
    large_random_graph,
    random_dags,
)

from workbench.conversion import segmenter
from workbench.conversion.candidates import SegmenterOptions
from workbench.conversion.engine_io import build_edges
from workbench.conversion.segmenter import segment_graph

OPTIONS = st.builds(
    SegmenterOptions,
    use_implicit_batch=st.booleans(),
    exclude_nodes=st.sets(st.sampled_from(["n00", "n01", "n05", "n10"])).map(frozenset),
    denylist=st.sampled_from([frozenset(), frozenset({"MatMul"})]),
)
THRESHOLDS = [-1, 1, 2, 3, 4, 6]
FAST = settings(max_examples=100, deadline=None)


def quotient_is_acyclic(graph, segments) -> bool:
    """Contract every segment to one vertex, wired as TF-TRT wires its engines; Kahn's algorithm.

    Data and control edges count, except an edge from a Const that crosses a segment boundary:
    TF-TRT's GetEngineInfo copies an outside Const into the engine instead of making it an
    input, and drops control edges from Consts both ways (ShallKeepControlEdgeFrom).
    """
    table = build_edges(graph)
    group = list(range(len(graph.nodes)))
    for i, segment in enumerate(segments):
        for v in segment.ids:
            group[v] = len(graph.nodes) + i
    edges = {(group[s], group[d]) for s, d in zip(table.src, table.dst, strict=True)
             if group[s] == s and group[d] == d or graph.nodes[s].op != "Const"}
    edges = {(s, d) for s, d in edges if s != d}
    indegree: dict[int, int] = {}
    for _, d in edges:
        indegree[d] = indegree.get(d, 0) + 1
    vertices = set(group)
    ready = [v for v in vertices if indegree.get(v, 0) == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for s, d in edges:
            if s == v:
                indegree[d] -= 1
                if indegree[d] == 0:
                    ready.append(d)
    return seen == len(vertices)


@FAST
@given(random_dags(), OPTIONS)
def test_segments_are_disjoint_acyclic_and_made_of_candidates(graph, options):
    # TF-TRT's boundary rule (spec §2.8) can leave a path out of a segment and back when a Const
    # it drops is control-dependent on a computed segment node. The path always re-enters
    # through that Const, and GetEngineInfo (convert_graph.cc, as of TF 2.16/2.17) never wires
    # an outside Const to an engine, so quotient_is_acyclic checks the graph TF-TRT builds.
    segmentation = segment_graph(graph, options, allow_ops())
    seen: set[str] = set()
    for segment in segmentation.segments:
        assert seen.isdisjoint(segment.nodes)
        seen.update(segment.nodes)
        assert all(segmentation.candidates.is_candidate[v] for v in segment.ids)
        assert list(segment.nodes) == sorted(segment.nodes)
    assert [s.root for s in segmentation.segments] == sorted(s.root for s in segmentation.segments)
    assert quotient_is_acyclic(graph, segmentation.segments)


@FAST
@given(random_dags(), OPTIONS, st.sampled_from(THRESHOLDS), st.integers(-1, 4))
def test_engines_respect_threshold_and_limit(graph, options, threshold, max_engines):
    segmentation = segment_graph(graph, options, allow_ops())
    partition = segmentation.result(at_threshold(threshold, max_engines))
    if threshold == -1:
        assert partition.engines == []
    for engine in partition.engines:
        assert engine.effective_size >= max(threshold, 1)
        assert engine.native_node_count >= len(engine.nodes)
        assert engine.inputs  # engines without data inputs stay native
    if max_engines > 0:
        assert len(partition.engines) <= max_engines
    names = [e.name for e in partition.engines]
    assert names == sorted(names) and len(set(names)) == len(names)
    inside = {n for e in partition.engines for n in e.nodes}
    outside = {u.name for u in partition.unconverted}
    assert inside.isdisjoint(outside)
    assert inside | outside == {n.name for n in graph.real_nodes}


@FAST
@given(random_dags(), OPTIONS)
def test_deterministic_and_sweep_equals_fresh_results(graph, options):
    first = segment_graph(graph, options, allow_ops())
    swept = first.sweep(at_threshold(1, max_engines=2), THRESHOLDS)
    for threshold, partition in zip(THRESHOLDS, swept, strict=True):
        fresh = segment_graph(graph, options, allow_ops()).result(
            at_threshold(threshold, max_engines=2))
        assert partition == fresh
        assert partition.minimum_segment_size == threshold
    assert first.segments == segment_graph(graph, options, allow_ops()).segments


@FAST
@given(random_dags(max_nodes=30), OPTIONS)
def test_pruned_cycle_check_matches_plain_reverse_search(graph, options):
    pruned = segment_graph(graph, options, allow_ops()).segments
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segmenter._Contraction, "has_other_path", full_search)
        full = segment_graph(graph, options, allow_ops()).segments
    assert pruned == full


def test_large_graph_sweep_is_consistent():
    graph = large_random_graph(1500, seed=3)
    segmentation = segment_graph(graph, SegmenterOptions(), allow_ops())
    partitions = segmentation.sweep(at_threshold(1), range(1, 65))
    counts = [len(p.engines) for p in partitions]
    assert counts[0] == 20 and counts == sorted(counts, reverse=True)
    assert partitions[10] == segmentation.result(at_threshold(11))
    assert quotient_is_acyclic(graph, segmentation.segments)
