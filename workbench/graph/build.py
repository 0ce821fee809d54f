"""GraphDef + Grappler shape properties -> our `Graph`, with TF's node-id order.

TF's GraphConstructor adds nodes as they become ready (all inputs added), taking the ready node
with the smallest GraphDef index first; node ids follow that order. We reproduce it so that
candidate-test order and edge ids match a TF `Graph` built from the same GraphDef.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from workbench.graph.control_flow import MERGE_OPS, NEXT_ITERATION_OPS
from workbench.graph.nodes import Graph, Node, TensorRef, TensorSpec, dtype_name


def graph_from_graph_def(
    graph_def: Any, properties: Mapping[str, list[TensorSpec]] | None = None
) -> Graph:
    """Builds a `Graph` from a GraphDef; `properties` maps node name -> output specs."""
    properties = properties or {}
    order = _construction_order(graph_def)
    nodes = []
    for index in order:
        nd = graph_def.node[index]
        data, control = _split_inputs(nd.input)
        nodes.append(
            Node(
                id=0,
                name=nd.name,
                op=nd.op,
                device=nd.device,
                inputs=data,
                control_inputs=control,
                output_specs=list(properties.get(nd.name, [])),
                raw_attrs=nd.attr,
            )
        )
    return Graph(nodes)


def specs_from_op_properties(op_properties: Mapping[str, Any]) -> dict[str, list[TensorSpec]]:
    """Converts Grappler `OpInfo.TensorProperties` lists into `TensorSpec` lists."""
    result = {}
    for name, props in op_properties.items():
        result[name] = [
            TensorSpec(
                dtype_name(p.dtype),
                None if p.shape.unknown_rank else tuple(int(d.size) for d in p.shape.dim),
            )
            for p in props
        ]
    return result


def _split_inputs(inputs: Any) -> tuple[list[TensorRef], list[str]]:
    data, control = [], []
    for text in inputs:
        if text.startswith("^"):
            control.append(text[1:])
        else:
            data.append(TensorRef.parse(text))
    return data, control


def _construction_order(graph_def: Any) -> list[int]:
    """GraphDef indices in the order TF's GraphConstructor adds the nodes."""
    index_of = {nd.name: i for i, nd in enumerate(graph_def.node)}
    pending = [0] * len(graph_def.node)
    outputs: list[list[int]] = [[] for _ in graph_def.node]
    for i, nd in enumerate(graph_def.node):
        for text in nd.input:
            src = index_of.get(text.lstrip("^").split(":")[0])
            if src is not None:
                pending[i] += 1
                outputs[src].append(i)
        if nd.op in MERGE_OPS and _has_back_edge(nd, graph_def, index_of):
            # A loop's Merge waits for its control inputs and one data input, not for the
            # NextIteration back edge (TF's GraphConstructor, which makes loops importable).
            controls = sum(1 for text in nd.input if text.startswith("^"))
            pending[i] = controls + 1
    ready = [i for i, count in enumerate(pending) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in outputs[i]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(graph_def.node):
        raise ValueError("the graph has a cycle outside while loops or an input naming no node")
    return order


def _has_back_edge(nd: Any, graph_def: Any, index_of: Mapping[str, int]) -> bool:
    for text in nd.input:
        src = index_of.get(text.split(":")[0])
        if not text.startswith("^") and src is not None \
                and graph_def.node[src].op in NEXT_ITERATION_OPS:
            return True
    return False
