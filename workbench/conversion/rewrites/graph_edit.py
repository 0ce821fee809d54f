"""What a rewrite is, and the GraphDef edits rewrites are written with.

A rewrite replaces a pattern TF-TRT 2.17 rejects by an equivalent form its converters accept.
It works on a frozen GraphDef (the model before TF-TRT's Grappler pass), so the rewritten model
is an ordinary TensorFlow model that TF-TRT then converts by its own rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.graph.control_flow import NEXT_ITERATION_OPS
from workbench.graph.nodes import NUMPY_NAMES, Graph, Node, TensorRef, TensorSpec, dtype_enum
from workbench.lazy import tf

EXPLICIT_BATCH = "dynamic shape"  # use_dynamic_shape=True (explicit batch)
IMPLICIT_BATCH = "implicit batch"  # use_dynamic_shape=False
BOTH_MODES = (IMPLICIT_BATCH, EXPLICIT_BATCH)
ALL_PRECISIONS = ("FP32", "FP16", "INT8")
SELECT_TYPES = ("float", "half", "int32")  # the types TF-TRT's SelectV2 takes


class GraphEdit:
    """A frozen GraphDef being rewritten, with a read-only view of it that has Grappler's
    inferred shapes (`graph`). Edits go to the GraphDef; the view is not updated, so a rewrite
    decides from the view and then edits."""

    def __init__(self, graph_def: Any, graph: Graph, protected: frozenset[str]):
        self.graph_def = graph_def
        self.graph = graph
        self.protected = protected  # the signature's input and output nodes: never removed
        self.node_defs = {node.name: node for node in graph_def.node}
        self.has_loops = any(node.op in NEXT_ITERATION_OPS for node in graph_def.node)
        self._imported: Any = None  # a tf.Graph of graph_def, for static_shape()

    def nodes(self, op: str) -> Iterator[Node]:
        """The view's nodes of type `op`."""
        return (node for node in self.graph.real_nodes if node.op == op)

    def node_def(self, name: str) -> Any:
        return self.node_defs[name]

    def spec(self, ref: TensorRef) -> TensorSpec | None:
        return self.graph.output_spec(ref)

    def static_shape(self, ref: TensorRef) -> tuple[int, ...] | None:
        """The tensor's shape as TensorFlow's importer infers it, -1 where unknown (None: rank
        unknown). The importer evaluates shape arithmetic that Grappler leaves symbolic, as
        `tf.ones((tf.shape(x)[2], tf.shape(x)[3]))` of an x with static dims. The GraphDef is
        imported on first use."""
        if self._imported is None:
            self._imported = tf.Graph()
            with self._imported.as_default():
                tf.graph_util.import_graph_def(self.graph_def, name="")
        shape = self._imported.get_tensor_by_name(f"{ref.node}:{ref.port}").shape
        if shape.rank is None:
            return None
        return tuple(-1 if dim is None else dim for dim in shape.as_list())

    def consumers(self, node: Node) -> list[tuple[Node, int]]:
        """(consumer, input index) of every data edge leaving `node`."""
        return self.graph.consumers[node.name]

    def unique_name(self, base: str) -> str:
        name, count = base, 0
        while name in self.node_defs:
            count += 1
            name = f"{base}_{count}"
        return name

    def add(self, name: str, op: str, inputs: list[str], control_from: Any = None,
            **types: str) -> Any:
        """A new node `op` named after `name` (made unique); `types` are its type attrs
        (`T="float"`); `control_from`, a NodeDef, lends its control inputs, so the new node
        stays in the same frame and order."""
        node = self.graph_def.node.add(name=self.unique_name(name), op=op)
        node.input.extend(inputs)
        if control_from is not None:
            node.input.extend(t for t in control_from.input if t.startswith("^"))
            node.device = control_from.device
        for key, dtype in types.items():
            node.attr[key].type = dtype_enum(dtype)
        self.node_defs[node.name] = node
        return node

    def const(self, name: str, value: Any, dtype: str, anchor: str) -> str:
        """A Const next to the tensor `anchor`; returns its name. In a graph with loops it hangs
        on the anchor's producer (a control input), so it lives in the same loop frame: a Const
        outside a loop may not feed a node inside."""
        node = self.add(name, "Const", [], dtype=dtype)
        numpy_type = tf.as_dtype(NUMPY_NAMES.get(dtype, dtype))
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.asarray(value), numpy_type))
        producer = self.node_defs[anchor.split(":")[0].lstrip("^")]
        if self.has_loops and producer.op != "Placeholder":
            node.input.append("^" + producer.name)
        return node.name

    def retype(self, node_def: Any, op: str, inputs: list[str], **types: str) -> None:
        """Turns `node_def` into another op in place: same name, so its consumers, and the
        signature when it is an output, are unchanged; its control inputs are kept."""
        controls = [t for t in node_def.input if t.startswith("^")]
        node_def.op = op
        del node_def.input[:]
        node_def.input.extend([*inputs, *controls])
        node_def.attr.clear()
        for key, dtype in types.items():
            node_def.attr[key].type = dtype_enum(dtype)

    def reroute(self, consumer: str, index: int, tensor: str) -> None:
        """Makes data input `index` of node `consumer` read `tensor` instead."""
        self.node_defs[consumer].input[index] = tensor


def data_inputs(node_def: Any) -> list[str]:
    return [t for t in node_def.input if not t.startswith("^")]


@dataclass(frozen=True)
class Rewrite:
    """One verified equivalence.

    `rejects` names the op rule that refuses the pattern (a test checks our rules do);
    `valid_for` are the shape modes and precisions where the replacement converts (it is
    equivalent everywhere); `bound` is "exact" or the stated numerical bound.
    """

    name: str
    pattern: str
    replacement: str
    rejects: str  # TF-TRT's reason for the original, as the op rules word it
    ops: tuple[str, ...]  # op types the pattern starts from (a graph without them is skipped)
    apply: Callable[[GraphEdit], int]  # edits the graph, returns how many matches it rewrote
    bound: str = "exact"
    shape_modes: tuple[str, ...] = BOTH_MODES
    precisions: tuple[str, ...] = ALL_PRECISIONS
    # Whether a node of the prepared graph looks like the pattern's start (cheap: the advice
    # rewrites the model only for a rejected node that does).
    starts_at: Callable[[Graph, Node], bool] | None = None

    def may_start_at(self, graph: Graph, node: Node) -> bool:
        if node.op not in self.ops:
            return False
        return self.starts_at is None or self.starts_at(graph, node)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pattern": self.pattern, "replacement": self.replacement,
                "rejects": self.rejects, "bound": self.bound,
                "shape_modes": list(self.shape_modes), "precisions": list(self.precisions)}
