"""TF-TRT's segmenter: clustering, boundary removal, thresholds, engine limit
(docs/tftrt-behaviour.md#segmentation).

`segment_graph` runs the candidate test and the clustering once; clustering does not depend on
`minimum_segment_size` or the engine limit, so `Segmentation.result(params)` and `sweep` read every
threshold off the same segments. Internals use node ids and plain lists for speed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field, replace

from workbench.conversion.candidates import (
    Candidates,
    Device,
    SegmenterOptions,
    Validator,
    device_string,
    find_candidates,
    merge_batch,
    merge_devices,
)
from workbench.conversion.engine_io import (
    SINK_ID,
    SOURCE_ID,
    EdgeTable,
    EngineIO,
    build_edges,
    engine_io,
    post_order,
    topological_positions,
)
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo, LazyList, UnconvertedNode
from workbench.graph.control_flow import branches_join, has_loops
from workbench.graph.nodes import Graph, Node

NOOP_OPS = frozenset({"Identity", "Snapshot", "StopGradient"})  # not counted as effective
ENGINE_PREFIX = "TRTEngineOp_000_"  # first ConvertGraph call of the process: sequence 000
DEFAULT_DEVICE = "/device:GPU:0"


@dataclass(frozen=True)
class Segment:
    """One cluster after boundary removal: root name, member names (sorted), effective size."""

    root: str
    nodes: tuple[str, ...]
    effective_size: int
    ids: tuple[int, ...] = field(repr=False, compare=False, default=())
    device: str = field(repr=False, compare=False, default="")


def segment_graph(graph: Graph, options: SegmenterOptions, validate: Validator) -> Segmentation:
    """Candidate test, clustering and boundary removal: everything independent of thresholds."""
    candidates = find_candidates(graph, options, validate)
    table = build_edges(graph)
    order = dfs_order(graph, table)
    roots, devices = cluster(table, order, candidates, cyclic=has_loops(graph))
    groups = _groups_by_root(graph, roots, candidates)
    segments: list[Segment] = []
    removed: dict[int, str] = {}
    for root, members in groups:
        kept = remove_boundary_nodes(graph, table, members)
        for v in sorted(members - kept):
            removed[v] = root
        if kept:
            segments.append(_make_segment(graph, root, devices, kept))
    return Segmentation(graph, options, candidates, table, segments, removed)


# --- traversal order (docs/tftrt-behaviour.md#traversal) ------------------------------------------

def dfs_order(graph: Graph, table: EdgeTable) -> list[int]:
    """Post-order of TF-TRT's StableDFS from `_SOURCE`, out-neighbours pushed by name."""
    n = len(graph.nodes)
    rank = [0] * n
    for i, v in enumerate(sorted(range(n), key=lambda v: graph.nodes[v].name)):
        rank[v] = i
    return post_order(table, rank)


# --- clustering (docs/tftrt-behaviour.md#contraction) ---------------------------------------------

class _Contraction:
    """TF-TRT's SimpleGraph: a mutable copy of the edges that contraction rewires."""

    def __init__(self, table: EdgeTable):
        self.src = list(table.src)
        self.dst = list(table.dst)
        self.control = list(table.control)
        self.alive = [True] * len(table.src)
        # Insertion-ordered dicts: edge-id order like TF's vectors, with O(1) removal.
        self.out_edges = [dict.fromkeys(edges) for edges in table.out_edges]
        self.in_edges = [dict.fromkeys(edges) for edges in table.in_edges]
        # (dst, control) -> edge, per source: a copy of an existing edge is never added.
        # Duplicates change neither reachability nor the first-occurrence order of out-edges,
        # and new edges always come last in id order, so relative edge order is unchanged.
        self._out_keys: list[dict[tuple[int, bool], int]] = [{} for _ in table.out_edges]
        for e in range(len(table.src)):
            self._out_keys[table.src[e]].setdefault((table.dst[e], table.control[e]), e)
        self._marks = [0] * len(table.out_edges)
        self._stamp = 0

    def has_other_path(
        self, n: int, d: int, step: int, position: list[int] | None
    ) -> bool:
        """True when a path n -> ... -> d other than direct edges exists (would be a cycle).

        Reverse DFS from d's other in-neighbours looking for n. In a DAG, nodes later in
        `order` than n are upstream of or unrelated to n and keep their original in-edges, so n
        cannot be reached through them: they are skipped (same answer as TF's full search).
        A graph with loops (`position` None) gets TF-TRT's full search: its back edges let the
        search come round to n through d itself, which TF-TRT also counts as a cycle.
        """
        # Another path must leave n through a neighbour other than d (`_SINK` leads nowhere);
        # weight Consts and plain chains have none, which spares most searches.
        dst = self.dst
        if position is not None and all(dst[e] == d or dst[e] == SINK_ID
                                        for e in self.out_edges[n]):
            return False
        self._stamp += 1
        stamp, marks, src = self._stamp, self._marks, self.src
        stack = [src[e] for e in self.in_edges[d] if src[e] != n]
        while stack:
            u = stack.pop()
            if marks[u] == stamp or (position is not None and position[u] > step):
                continue
            marks[u] = stamp
            for e in self.in_edges[u]:
                w = src[e]
                if w == n:
                    return True
                if marks[w] != stamp and (position is None or position[w] < step):
                    stack.append(w)
        return False

    def add(self, src: int, dst: int, control: bool) -> None:
        keys = self._out_keys[src]
        if (dst, control) in keys:
            return
        # Our graphs have no freed edge ids, so new edges take the next id.
        edge = len(self.src)
        keys[(dst, control)] = edge
        self.src.append(src)
        self.dst.append(dst)
        self.control.append(control)
        self.alive.append(True)
        self.out_edges[src][edge] = None
        self.in_edges[dst][edge] = None

    def contract(self, n: int, d: int) -> None:
        """Moves d's edges onto n, then disconnects d."""
        src, dst, control = self.src, self.dst, self.control
        for e in list(self.in_edges[d]):
            if src[e] != n:
                self.add(src[e], n, control[e] or src[e] == SOURCE_ID)
        for e in list(self.out_edges[d]):
            self.add(n, dst[e], control[e] or dst[e] == SINK_ID)
        for e in self.in_edges[d]:
            del self.out_edges[src[e]][e]
            self._out_keys[src[e]].pop((d, control[e]), None)
            self.alive[e] = False
        for e in self.out_edges[d]:
            del self.in_edges[dst[e]][e]
            self.alive[e] = False
        self.in_edges[d] = {}
        self.out_edges[d] = {}
        self._out_keys[d] = {}


def cluster(
    table: EdgeTable, order: list[int], candidates: Candidates, cyclic: bool = False
) -> tuple[list[int], list[Device]]:
    """Greedy union-find clustering along output edges.

    Returns each node's root id and, per root, the merged device of its cluster. Clusters of
    different tf.cond branches never merge (graph/control_flow.py `cond_branches`). `cyclic`
    (the graph has while loops) turns off the cycle check's DAG-only shortcuts.
    """
    graph = _Contraction(table)
    parent = list(range(len(order)))
    batch = list(candidates.batch)
    device = list(candidates.device)
    branch = list(candidates.branch) or [None] * len(order)
    position: list[int] | None = None
    if not cyclic:
        position = [0] * len(order)
        for i, v in enumerate(order):
            position[v] = i
    is_candidate = candidates.is_candidate
    for step, n in enumerate(order):
        if not is_candidate[n]:
            continue
        while True:
            expected_batch, expected_device, expected_branch = batch[n], device[n], branch[n]
            accepted = []
            for e in graph.out_edges[n]:
                d = graph.dst[e]
                if graph.control[e] or not is_candidate[d]:
                    continue
                merged_batch = merge_batch(expected_batch, batch[d])
                if merged_batch is None:
                    continue
                merged_device = merge_devices(expected_device, device[d])
                if merged_device is None or not branches_join(expected_branch, branch[d]):
                    continue
                if not graph.has_other_path(n, d, step, position):
                    accepted.append(e)
                    expected_batch, expected_device = merged_batch, merged_device
                    expected_branch = expected_branch if branch[d] is None else branch[d]
            if not accepted:
                break
            for e in sorted(accepted):
                if not graph.alive[e]:
                    continue  # removed with an earlier contraction of the same node
                d = graph.dst[e]
                parent[d] = n
                batch[n] = merge_batch(batch[n], batch[d])  # type: ignore[assignment]
                device[n] = merge_devices(device[n], device[d])  # type: ignore[assignment]
                if branch[n] is None:
                    branch[n] = branch[d]
                graph.contract(n, d)
    return [_find(parent, v) for v in range(len(parent))], device


def _find(parent: list[int], v: int) -> int:
    root = v
    while parent[root] != root:
        root = parent[root]
    while parent[v] != root:
        parent[v], v = root, parent[v]
    return root


def _groups_by_root(
    graph: Graph, roots: list[int], candidates: Candidates
) -> list[tuple[str, set[int]]]:
    """Clusters keyed by root name, in root-name order (TF's std::map,
    docs/tftrt-behaviour.md#segment-order)."""
    groups: dict[str, set[int]] = {}
    for v, is_candidate in enumerate(candidates.is_candidate):
        if is_candidate:
            groups.setdefault(graph.nodes[roots[v]].name, set()).add(v)
    return sorted(groups.items())


# --- boundary removal (docs/tftrt-behaviour.md#boundary) ------------------------------------------

def remove_boundary_nodes(graph: Graph, table: EdgeTable, members: set[int]) -> set[int]:
    """Drops Consts that also feed outside the segment, and what their removal drags along.

    TF-TRT's input-edge check always passes, so only the output side removes nodes. The BFS
    follows in-nodes from a Const and out-nodes from anything else (data and control edges).
    """
    kept = set(members)
    nodes = graph.nodes
    while True:
        queue = deque(v for v in sorted(kept, key=lambda v: nodes[v].name)
                      if nodes[v].op == "Const" and _feeds_outside(table, v, kept))
        if not queue:
            return kept
        visited: set[int] = set()
        while queue:
            v = queue.popleft()
            if v in visited:
                continue
            visited.add(v)
            kept.discard(v)
            if nodes[v].op == "Const":
                neighbours = (table.src[e] for e in table.in_edges[v])
            else:
                neighbours = (table.dst[e] for e in table.out_edges[v])
            queue.extend(w for w in neighbours if w in kept)


def _feeds_outside(table: EdgeTable, v: int, kept: set[int]) -> bool:
    return any(
        not table.control[e] and table.dst[e] != SINK_ID and table.dst[e] not in kept
        for e in table.out_edges[v]
    )


def _make_segment(graph: Graph, root: str, devices: list[Device], kept: set[int]) -> Segment:
    nodes = graph.nodes
    ids = tuple(sorted(kept, key=lambda v: nodes[v].name))
    effective = sum(1 for v in ids if nodes[v].op not in NOOP_OPS)
    # The cluster property lives on the root; a device with a type becomes the engine's.
    device = devices[graph.by_name[root].id]
    engine_device = device_string(device) if device[3] is not None else DEFAULT_DEVICE
    return Segment(root, tuple(nodes[v].name for v in ids), effective, ids, engine_device)


def const_consumer_segments(
    graph: Graph, node: Node, segment_of: Sequence[int], exclude_nodes: Container[str]
) -> frozenset[int] | None:
    """The segments of every consumer of a Const that may die with conversion, else None.

    A Const outside the engines dies (is pruned from the converted graph) when every data and
    control consumer lies in an engine; a fetch/feed Const or one with no consumers never does.
    `segment_of` maps node ids to a segment index, -1 for none. The converted-graph view
    (converted.py) shares this rule so both count the same top-level nodes.
    """
    if node.op != "Const" or node.name in exclude_nodes:
        return None
    consumers = [c.id for c, _ in graph.consumers[node.name]]
    consumers += [c.id for c in graph.control_consumers[node.name]]
    segs = frozenset(segment_of[c] for c in consumers)
    return segs if consumers and -1 not in segs else None


# --- thresholds, engine limit, engines (docs/tftrt-behaviour.md#minimum-segment-size) -------------

class Segmentation:
    """The clustering of one graph; `result(t)` gives the partition for any threshold."""

    def __init__(
        self, graph: Graph, options: SegmenterOptions, candidates: Candidates,
        table: EdgeTable, segments: list[Segment], boundary_removed: dict[int, str],
    ):
        self.graph = graph
        self.options = options
        self.candidates = candidates
        self.segments = segments
        self.boundary_removed = boundary_removed
        self._table = table
        self._topo: list[int] | None = None
        self._io: dict[int, EngineIO | None] = {}
        self._fixed: dict[int, UnconvertedNode] | None = None
        # Segment indices by effective size, descending; ties keep root-name order (stable).
        self._by_size = sorted(range(len(segments)), key=lambda i: -segments[i].effective_size)
        self._neg_sizes = [-segments[i].effective_size for i in self._by_size]
        self._segment_of = [-1] * len(graph.nodes)
        for i, segment in enumerate(segments):
            for v in segment.ids:
                self._segment_of[v] = i
        self._dead_const_groups = self._const_groups()

    def result(self, params: ConversionParams, prefix: str = ENGINE_PREFIX) -> ConversionResult:
        """Engines and unconverted nodes at `params`' threshold (-1: main graph not converted)
        and engine limit, the partition carrying `params` as given (valid when built);
        engines are named `prefix` + their index (functions have their own sequence)."""
        t, max_engines = params.minimum_segment_size, params.max_engines
        if t == -1:
            real = len(self.graph.nodes) - 2
            return _partition(params, [], real, {}, self._unconverted_builder(t, {}, max_engines))
        # Eligible segments: effective > 0 and >= t; a prefix of the size ranking.
        eligible = self._by_size[: bisect_right(self._neg_sizes, -max(t, 1))]
        kept = sorted(eligible if max_engines <= 0 else eligible[:max_engines])
        engines: list[EngineInfo] = []
        fate: dict[int, str] = {i: "engine" for i in kept}
        converted = 0
        for index, i in enumerate(kept):
            io = self._engine_io(i)
            if io is None:
                fate[i] = "no_inputs"  # TF-TRT keeps it native; the name index stays used
                continue
            engines.append(self._engine_info(f"{prefix}{index:03d}", i, io))
            converted += len(self.segments[i].ids)
        engine_set = {i for i, f in fate.items() if f == "engine"}
        top_level = len(self.graph.nodes) - 2 - converted - self._dead_consts(engine_set)
        return _partition(params, engines, top_level, self.candidates.nonconversion,
                          self._unconverted_builder(t, fate, max_engines))

    def sweep(self, params: ConversionParams, thresholds: Iterable[int]
              ) -> list[ConversionResult]:
        """`result` at every threshold (`params` with each), all read off this one clustering."""
        return [self.result(replace(params, minimum_segment_size=t)) for t in thresholds]

    # engines

    def _engine_io(self, i: int) -> EngineIO | None:
        if i not in self._io:
            if self._topo is None:
                self._topo = topological_positions(self._table)
            io = engine_io(self.graph, self._table, self._topo, self.segments[i].ids)
            self._io[i] = io if io.inputs else None  # no data inputs: engine creation fails
        return self._io[i]

    def _engine_info(self, name: str, i: int, io: EngineIO) -> EngineInfo:
        segment = self.segments[i]
        return EngineInfo(
            name=name, nodes=segment.nodes, native_ops=io.native_ops,
            native_node_count=io.native_node_count, effective_size=segment.effective_size,
            input_dtypes=io.input_dtypes, output_dtypes=io.output_dtypes,
            input_shapes=io.input_shapes, output_shapes=io.output_shapes,
            inputs=io.inputs, outputs=io.outputs, device=segment.device,
        )

    # summary counts

    def _const_groups(self) -> list[tuple[int, frozenset[int], int]]:
        """Consts that become dead when every consumer is in an engine, grouped for speed.

        Each group: (the Const's own segment or -1, consumer segments, number of Consts).
        Consts with a consumer outside every segment, or that are fetch/feed nodes, never die.
        """
        segment_of = self._segment_of
        counts: dict[tuple[int, frozenset[int]], int] = {}
        for node in self.graph.real_nodes:
            segs = const_consumer_segments(self.graph, node, segment_of, self.options.exclude_nodes)
            if segs is not None:
                key = (segment_of[node.id], segs)
                counts[key] = counts.get(key, 0) + 1
        return [(own, segs, count) for (own, segs), count in counts.items()]

    def _dead_consts(self, engine_set: set[int]) -> int:
        if not engine_set:
            return 0
        return sum(
            count for own, segs, count in self._dead_const_groups
            if own not in engine_set and segs <= engine_set
        )

    # unconverted nodes

    def _unconverted_builder(
        self, t: int, fate: dict[int, str], max_engines: int
    ) -> Callable[[], list[UnconvertedNode]]:
        return lambda: self._unconverted(t, fate, max_engines)

    def _unconverted(self, t: int, fate: dict[int, str], max_engines: int) -> list[UnconvertedNode]:
        """Every real node outside engines, in node-id order, with the reason."""
        if t == -1:
            reason = "minimum_segment_size=-1: TF-TRT does not convert the main graph"
            return [UnconvertedNode(n.name, n.op, reason, False) for n in self.graph.real_nodes]
        fixed = self._fixed_unconverted()
        segment_reasons: dict[int, str] = {}
        result = []
        for node in self.graph.real_nodes:
            v = node.id
            if v in fixed:
                result.append(fixed[v])
            elif fate.get(self._segment_of[v]) != "engine":
                i = self._segment_of[v]
                if i not in segment_reasons:
                    segment_reasons[i] = self._segment_reason(i, t, fate, max_engines)
                result.append(UnconvertedNode(node.name, node.op, segment_reasons[i], False))
        return result

    def _fixed_unconverted(self) -> dict[int, UnconvertedNode]:
        """Nodes outside engines at every threshold: excluded and boundary-removed ones."""
        if self._fixed is None:
            reasons, fixed = self.candidates.reasons, {}
            for node in self.graph.real_nodes:
                if node.id in self.boundary_removed:
                    reason = self._boundary_reason(node.id)
                    fixed[node.id] = UnconvertedNode(node.name, node.op, reason, False)
                elif not self.candidates.is_candidate[node.id]:
                    fixed[node.id] = UnconvertedNode(node.name, node.op, reasons[node.name], True)
            self._fixed = fixed
        return self._fixed

    def _boundary_reason(self, v: int) -> str:
        root = self.boundary_removed[v]
        if self.graph.nodes[v].op != "Const":
            return f"removed from segment {root} at its boundary along with a boundary Const"
        consumers = self.graph.consumers[self.graph.nodes[v].name]
        if all(not self.candidates.is_candidate[c.id] for c, _ in consumers):
            return "a Const that only feeds nodes TF-TRT does not convert (removed at the boundary)"
        return (f"removed from segment {root} at its boundary: a Const that also feeds "
                "nodes outside the segment (engines still get it as weights)")

    def _segment_reason(self, i: int, t: int, fate: dict[int, str], max_engines: int) -> str:
        size = self.segments[i].effective_size
        if fate.get(i) == "no_inputs":
            return "segment has no inputs (possible constfold failure); TF-TRT keeps it native"
        if size == 0:
            return "segment has no effective nodes (only Identity, Snapshot, StopGradient)"
        if size < t:
            return f"{size} effective nodes < minimum_segment_size {t}"
        return (f"segment of {size} effective nodes dropped by the engine limit "
                f"TF_TRT_MAX_ALLOWED_ENGINES={max_engines}")


def _partition(params: ConversionParams, engines: list[EngineInfo], top_level: int,
               nonconversion: dict[str, dict[str, int]],
               build_unconverted: Callable[[], list[UnconvertedNode]]) -> ConversionResult:
    """The outcome of one threshold, as the session's ConversionResult without its provenance
    (the session adds the model and the TensorFlow version). Unconverted nodes are listed on
    first access: sweeps mostly need only counts and engines."""
    return ConversionResult(params=params, engines=engines,
                            unconverted=LazyList(build_unconverted), nonconversion=nonconversion,
                            not_converted_top_level=top_level)
