"""Engine inputs and outputs of one segment, as TF-TRT's GetEngineInfo finds them
(docs/tftrt-behaviour.md#engine-ops).

Segment nodes are walked in topological order; for each, its data in-edges by edge id, then its
data out-edges by edge id. Outside Consts are copied into the engine instead of becoming inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workbench.graph.nodes import Graph, TensorRef, numpy_dtype_name

Shape = tuple[int, ...] | None
SOURCE_ID, SINK_ID = 0, 1  # node ids of `_SOURCE` and `_SINK` in a TF Graph


@dataclass(frozen=True)
class EdgeTable:
    """The TF `Graph` edges as parallel int lists; edge id = position (creation order).

    Creation order: edge 0 is `_SOURCE -> _SINK` (made by TF's Graph constructor), then per node
    in id order its data inputs and control inputs, then `_SOURCE`/`_SINK` control edges for
    nodes without in- or out-edges, in node-id order (GraphConstructor's final fix-up).
    """

    src: list[int]
    dst: list[int]
    src_port: list[int]  # -1 for control edges
    control: list[bool]
    out_edges: list[list[int]]  # per node id, edge ids ascending
    in_edges: list[list[int]]


def build_edges(graph: Graph) -> EdgeTable:
    n = len(graph.nodes)
    ids = {node.name: node.id for node in graph.nodes}
    table = EdgeTable([], [], [], [], [[] for _ in range(n)], [[] for _ in range(n)])
    _add(table, SOURCE_ID, SINK_ID, -1, True)
    for node in graph.nodes[2:]:
        for ref in node.inputs:
            _add(table, ids[ref.node], node.id, ref.port, False)
        for name in node.control_inputs:
            _add(table, ids[name], node.id, -1, True)
    for v in range(n):
        if v != SOURCE_ID and not table.in_edges[v]:
            _add(table, SOURCE_ID, v, -1, True)
        if v != SINK_ID and not table.out_edges[v]:
            _add(table, v, SINK_ID, -1, True)
    return table


def _add(table: EdgeTable, src: int, dst: int, port: int, control: bool) -> None:
    edge = len(table.src)
    table.src.append(src)
    table.dst.append(dst)
    table.src_port.append(port)
    table.control.append(control)
    table.out_edges[src].append(edge)
    table.in_edges[dst].append(edge)


def post_order(table: EdgeTable, rank: list[int] | None = None) -> list[int]:
    """Post-order of a stack-based DFS from `_SOURCE` along out-edges.

    Unvisited out-neighbours are pushed in out-edge order, or sorted by `rank` when given, so
    the last pushed is explored first (TF's GetPostOrder and TF-TRT's StableDFS both do this).
    """
    visited = [False] * len(table.out_edges)
    post: list[int] = []
    stack = [SOURCE_ID]
    dst = table.dst
    while stack:
        v = stack.pop()
        if v < 0:
            post.append(~v)
            continue
        if visited[v]:
            continue
        visited[v] = True
        stack.append(~v)
        outs = [dst[e] for e in table.out_edges[v]]
        if rank is not None:
            outs.sort(key=rank.__getitem__)
        stack.extend(w for w in outs if not visited[w])
    return post


def topological_positions(table: EdgeTable) -> list[int]:
    """Position of each node in the reverse of TF's GetPostOrder.

    GetPostOrder has no comparator, so it follows out-edge iteration order; we use edge-id
    order (what TF's EdgeSet gives for small sets).
    """
    n = len(table.out_edges)
    post = post_order(table)
    positions = [0] * n
    for i, v in enumerate(reversed(post)):
        positions[v] = i
    return positions


@dataclass(frozen=True)
class EngineIO:
    """Everything an `EngineInfo` needs except its name (cached per segment)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    native_ops: dict[str, int]
    native_node_count: int


def engine_io(
    graph: Graph, table: EdgeTable, topo: list[int], members: Iterable[int]
) -> EngineIO:
    """Inputs, outputs and native-function contents of the segment made of `members`."""
    member_set = set(members)
    inputs: dict[tuple[int, int], None] = {}
    outputs: dict[tuple[int, int], None] = {}
    copied: dict[int, None] = {}
    nodes = graph.nodes
    for v in sorted(member_set, key=topo.__getitem__):
        for e in table.in_edges[v]:
            s = table.src[e]
            if table.control[e] or s in member_set:
                continue
            if nodes[s].op == "Const":
                copied[s] = None
            else:
                inputs[(s, table.src_port[e])] = None
        for e in table.out_edges[v]:
            d = table.dst[e]
            if table.control[e] or d == SINK_ID or d in member_set:
                continue
            outputs[(v, table.src_port[e])] = None
    ops: dict[str, int] = {}
    for v in (*member_set, *copied):
        ops[nodes[v].op] = ops.get(nodes[v].op, 0) + 1
    in_refs = [TensorRef(nodes[s].name, p) for s, p in inputs]
    out_refs = [TensorRef(nodes[s].name, p) for s, p in outputs]
    return EngineIO(
        inputs=tuple(str(r) for r in in_refs),
        outputs=tuple(str(r) for r in out_refs),
        input_dtypes=tuple(_dtype(graph, r) for r in in_refs),
        output_dtypes=tuple(_dtype(graph, r) for r in out_refs),
        input_shapes=tuple(_shape(graph, r) for r in in_refs),
        output_shapes=tuple(_shape(graph, r) for r in out_refs),
        native_ops=dict(sorted(ops.items())),
        native_node_count=len(member_set) + len(copied),
    )


def _dtype(graph: Graph, ref: TensorRef) -> str:
    spec = graph.output_spec(ref)
    return numpy_dtype_name(spec.dtype) if spec is not None else "unknown"


def _shape(graph: Graph, ref: TensorRef) -> Shape:
    spec = graph.output_spec(ref)
    if spec is None or spec.shape is None:
        return None
    return tuple(d if d >= 0 else -1 for d in spec.shape)

