"""Verified graph rewrites: forms of a model that TF-TRT 2.17 converts, computing the same.

The registry lists each rewrite once, in the order they run (a later one may finish what an
earlier one started: a bool ExpandDims moved after its Cast, then the Cast made a comparison; a
causal mask made a comparison, then the slice that gave it leading axes dropped, or made
ExpandDims where that cannot be; a Cast moved before a BroadcastTo, then the BroadcastTo dropped
or made a select).
Rewrites are a separate step a person asks for (`workbench rewrite`, `rewrite_model`); the
conversion never applies them on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from workbench.conversion.rewrites.band import MATRIX_BAND_PART
from workbench.conversion.rewrites.broadcast import (
    BROADCAST_AS_SELECT,
    BROADCAST_TO,
    CAST_BEFORE_BROADCAST,
    LEADING_AXES,
    NEW_AXES,
)
from workbench.conversion.rewrites.casts import (
    BOOL_EXPAND_DIMS,
    BOOL_FILL,
    CAST_CHAIN,
    CAST_FROM_BOOL,
    CAST_TO_BOOL,
)
from workbench.conversion.rewrites.erfc import ERFC
from workbench.conversion.rewrites.graph_edit import (
    EXPLICIT_BATCH,
    IMPLICIT_BATCH,
    GraphEdit,
    Rewrite,
)
from workbench.conversion.rewrites.splits import SPLIT_AS_SLICES
from workbench.errors import WorkbenchError
from workbench.graph.build import graph_from_graph_def
from workbench.graph.nodes import Graph
from workbench.graph.prepare import infer_shapes

REWRITES: dict[str, Rewrite] = {r.name: r for r in (
    ERFC, CAST_BEFORE_BROADCAST, BROADCAST_TO, BROADCAST_AS_SELECT, CAST_CHAIN, BOOL_EXPAND_DIMS,
    CAST_TO_BOOL, CAST_FROM_BOOL, BOOL_FILL, MATRIX_BAND_PART, LEADING_AXES, NEW_AXES,
    SPLIT_AS_SLICES)}


@dataclass
class RewrittenGraph:
    """The rewritten GraphDef and how many matches each rewrite changed (zeros left out)."""

    graph_def: Any
    counts: dict[str, int] = field(default_factory=dict)


def select(only: Iterable[str] | None = None) -> list[Rewrite]:
    """The rewrites named in `only` (all when None), in registry order; a clear error for a
    name the registry lacks."""
    if only is None:
        return list(REWRITES.values())
    names = list(only)
    unknown = [name for name in names if name not in REWRITES]
    if unknown:
        raise WorkbenchError(f"unknown rewrite {', '.join(unknown)}; the rewrites are: "
                             f"{', '.join(REWRITES)}")
    return [rewrite for name, rewrite in REWRITES.items() if name in names]


def rewrites_for(graph: Graph, rejected: Iterable[str], use_dynamic_shape: bool) -> list[str]:
    """The rewrites worth trying: a node in `rejected` (names in the prepared `graph`) looks
    like the start of their pattern, and their replacement converts in this shape mode."""
    mode = EXPLICIT_BATCH if use_dynamic_shape else IMPLICIT_BATCH
    nodes = [graph[name] for name in rejected if name in graph.by_name]
    return [r.name for r in REWRITES.values()
            if mode in r.shape_modes and any(r.may_start_at(graph, node) for node in nodes)]


def rewrite_graph(graph_def: Any, inputs: list[str], outputs: list[str],
                  only: Iterable[str] | None = None) -> RewrittenGraph:
    """Applies the rewrites to a copy of a frozen `graph_def` whose signature reads the tensors
    `inputs` and returns `outputs`; nodes the rewrites leave unused are removed."""
    from tensorflow.core.framework import graph_pb2

    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    fetches = [*inputs, *outputs]
    protected = frozenset(name.split(":")[0] for name in fetches)
    counts = {}
    for rewrite in select(only):
        if not any(node.op in rewrite.ops for node in result.node):
            continue
        graph = graph_from_graph_def(result, infer_shapes(result, fetches))
        count = rewrite.apply(GraphEdit(result, graph, protected))
        if count:
            counts[rewrite.name] = count
            remove_unused(result, protected)
    return RewrittenGraph(result, counts)


def remove_unused(graph_def: Any, keep: frozenset[str]) -> None:
    """Drops the nodes nothing in `keep` depends on (data or control)."""
    nodes = {node.name: node for node in graph_def.node}
    used, stack = set(), [name for name in keep if name in nodes]
    while stack:
        name = stack.pop()
        if name in used:
            continue
        used.add(name)
        stack.extend(t.lstrip("^").split(":")[0] for t in nodes[name].input)
    kept = [node for node in graph_def.node if node.name in used]
    del graph_def.node[:]
    graph_def.node.extend(kept)
