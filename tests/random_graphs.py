"""Small graph builders for segmenter tests and benchmarks: hand-made, hypothesis and large DAGs.

Graphs use TF-TRT-like ops with float tensors of shape [-1, 8] unless told otherwise, so the
implicit-batch check passes. `allow_ops` is a fake validator: the op types it names are
supported, everything else fails with TF-TRT's "Op type X is not supported." message.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from hypothesis import strategies as st

from workbench.conversion.params import DEFAULT_MAX_ENGINES, ConversionParams
from workbench.graph.nodes import Graph, Node, TensorRef, TensorSpec

DEFAULT_SHAPE = (-1, 8)
SUPPORTED_OPS = frozenset({"Add", "Relu", "MatMul", "Const", "Identity", "Conv2D", "BiasAdd"})


def at_threshold(minimum_segment_size: int, max_engines: int = DEFAULT_MAX_ENGINES
                 ) -> ConversionParams:
    """The parameters a segmentation is read at (`Segmentation.result`): a threshold and an
    engine limit, TF-TRT's defaults for the rest."""
    return ConversionParams(minimum_segment_size=minimum_segment_size, max_engines=max_engines)


def node(
    name: str,
    op: str = "Add",
    inputs: Iterable[str] = (),
    control: Iterable[str] = (),
    shape: tuple[int, ...] | None = DEFAULT_SHAPE,
    dtype: str = "float",
    device: str = "",
) -> Node:
    """A node with one output of `shape`; inputs are "name" or "name:port"."""
    return Node(
        id=0, name=name, op=op, device=device,
        inputs=[TensorRef.parse(i) for i in inputs], control_inputs=list(control),
        output_specs=[TensorSpec(dtype, shape)], raw_attrs={},
    )


def graph_of(*nodes: Node) -> Graph:
    return Graph(list(nodes))


def allow_ops(ops: Iterable[str] = SUPPORTED_OPS):
    """A fake validator accepting exactly these op types."""
    allowed = frozenset(ops)

    def validate(n: Node) -> str | None:
        return None if n.op in allowed else f"Op type {n.op} is not supported."

    return validate


def allow_names(names: Iterable[str]):
    """A fake validator accepting exactly these node names (segment_test.cc's candidate_fn)."""
    allowed = frozenset(names)

    def validate(n: Node) -> str | None:
        return None if n.name in allowed else "Not a user specified candidate"

    return validate


@st.composite
def random_dags(draw, max_nodes: int = 24, with_conflicts: bool = True) -> Graph:
    """Random DAGs: placeholders, Consts, supported and unsupported ops, control edges.

    With `with_conflicts`, some nodes get a static batch size or another device, so batch and
    device merge rules take part.
    """
    count = draw(st.integers(1, max_nodes))
    nodes: list[Node] = []
    for i in range(count):
        name = f"n{i:02d}"
        kinds = ["Placeholder", "Const"] if i < 2 else ["Const", "Add", "Relu", "Identity",
                                                        "Unsupported", "MatMul", "Add"]
        op = draw(st.sampled_from(kinds))
        inputs: list[str] = []
        control: list[str] = []
        if op not in ("Placeholder", "Const") and nodes:
            k = draw(st.integers(1, min(3, len(nodes))))
            inputs = [nodes[j].name for j in draw(st.lists(
                st.integers(0, len(nodes) - 1), min_size=k, max_size=k))]
        if nodes and draw(st.integers(0, 5)) == 0:
            control = [nodes[draw(st.integers(0, len(nodes) - 1))].name]
        shape, device = DEFAULT_SHAPE, ""
        if with_conflicts and op != "Const":
            shape = draw(st.sampled_from([DEFAULT_SHAPE] * 4 + [(4, 8)]))
            device = draw(st.sampled_from([""] * 5 + ["/device:GPU:1", "/device:GPU:0"]))
        nodes.append(node(name, op, inputs, sorted(set(control)), shape=shape, device=device))
    return Graph(nodes)


def large_random_graph(n: int, seed: int = 0, unsupported: float = 0.08) -> Graph:
    """A model-like DAG of about `n` nodes: a main chain with short skips and weight Consts.

    Each compute node reads one or two recent nodes (like residual blocks), half of them take
    a weight Const, and a fraction of ops is unsupported, which splits the graph into segments
    of many sizes. Deterministic for a given seed.
    """
    rng = random.Random(seed)
    nodes = [node("input", "Placeholder")]
    recent = ["input"]
    ops = ["Conv2D", "BiasAdd", "Relu", "Add", "MatMul", "Identity"]
    while len(nodes) < n:
        i = len(nodes)
        op = "Unsupported" if rng.random() < unsupported else rng.choice(ops)
        inputs = [rng.choice(recent[-3:])]
        if op == "Add" and len(recent) > 1:
            inputs.append(rng.choice(recent[-8:]))
        if op in ("Conv2D", "BiasAdd", "MatMul") and rng.random() < 0.5 and len(nodes) < n - 1:
            nodes.append(node(f"w{i}", "Const"))
            inputs.append(f"w{i}")
        nodes.append(node(f"op{i}", op, inputs))
        recent.append(f"op{i}")
    nodes.append(node("output", "Identity", [recent[-1]]))
    return Graph(nodes)


def full_search(self, n, d, step, position):
    """TF's CanContractEdge test as written: reverse DFS from d's other in-neighbours for n."""
    src = self.src
    stack = [src[e] for e in self.in_edges[d] if src[e] != n]
    seen = set()
    while stack:
        u = stack.pop()
        if u == n:
            return True
        if u not in seen:
            seen.add(u)
            stack.extend(src[e] for e in self.in_edges[u])
    return False
