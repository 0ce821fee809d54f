"""The graph representation the segmenter and the op rules read.

It mirrors what TF-TRT's segmenter sees: a TensorFlow `Graph` built from the prepared GraphDef,
with node ids (0 is `_SOURCE`, 1 is `_SINK`, then the GraphDef's nodes in order) and Grappler's
static shape properties. Attribute values are decoded lazily because Const tensors can be large.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.lazy import tf

SOURCE = "_SOURCE"
SINK = "_SINK"

# TF DataType enum -> TF's short name (the names TF-TRT prints in its messages).
DTYPE_NAMES = {
    0: "invalid", 1: "float", 2: "double", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
    7: "string", 8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8",
    13: "qint32", 14: "bfloat16", 15: "qint16", 16: "quint16", 17: "uint16", 18: "complex128",
    19: "half", 20: "resource", 21: "variant", 22: "uint32", 23: "uint64",
}
DTYPE_ENUMS = {name: enum for enum, name in DTYPE_NAMES.items()}
# TF's short name -> numpy-style name used in reports and JSON (`float32`, not `float`).
NUMPY_NAMES = {"float": "float32", "half": "float16", "double": "float64"}


def dtype_name(enum_value: int) -> str:
    """TF's short dtype name for a DataType enum value (reference types map to their base)."""
    return DTYPE_NAMES.get(enum_value % 100, f"dtype_{enum_value}")


def dtype_enum(tf_name: str) -> int:
    """The DataType enum value of TF's short name; a clear error for a name TF lacks."""
    if tf_name not in DTYPE_ENUMS:
        raise WorkbenchError(f"unsupported tensor dtype {tf_name!r}")
    return DTYPE_ENUMS[tf_name]


# A TensorProto's value fields besides `tensor_content` (a value is either its bytes or these).
VALUE_LISTS = ("float_val", "double_val", "int_val", "int64_val", "half_val", "bool_val",
               "uint32_val", "uint64_val", "scomplex_val", "dcomplex_val", "string_val")


def element_count(tensor: Any) -> int:
    """The number of elements a TensorProto's shape holds (1 for a scalar)."""
    count = 1
    for dim in tensor.tensor_shape.dim:
        count *= dim.size
    return count


def numpy_dtype_name(tf_name: str) -> str:
    """The numpy-style name (`float32`) for TF's short name (`float`)."""
    return NUMPY_NAMES.get(tf_name, tf_name)


def numpy_dtype(tf_name: str) -> np.dtype:
    """The numpy dtype of TF's short name (`float` -> float32); ONNX Runtime's element type
    names (`float`, `double`, `float16`, `int8`, ...) are read the same way."""
    return np.dtype(numpy_dtype_name(tf_name))


@dataclass(frozen=True)
class TensorSpec:
    """Static properties of one tensor: TF dtype name and shape (None = unknown rank).

    Unknown dimensions are negative: -1, or symbolic -2, -3, ... as Grappler infers them.
    """

    dtype: str
    shape: tuple[int, ...] | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass(frozen=True)
class TensorRef:
    """One output of a node: `name:port`."""

    node: str
    port: int = 0

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"

    @staticmethod
    def parse(text: str) -> TensorRef:
        name, _, port = text.partition(":")
        return TensorRef(name, int(port) if port else 0)


def decode_attr(value: Any) -> Any:
    """Turns an AttrValue proto into a plain Python value (tensors become numpy arrays)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "s":
        return value.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b"):
        return getattr(value, kind)
    if kind == "type":
        return dtype_name(value.type)
    if kind == "shape":
        return _shape_of(value.shape)
    if kind == "tensor":
        return tf.make_ndarray(value.tensor)  # imports TensorFlow: only when needed
    if kind == "func":
        return value.func.name
    if kind == "list":
        lst = value.list
        if lst.s:
            return [s.decode("utf-8", "replace") for s in lst.s]
        if lst.i:
            return list(lst.i)
        if lst.f:
            return list(lst.f)
        if lst.b:
            return list(lst.b)
        if lst.type:
            return [dtype_name(t) for t in lst.type]
        if lst.shape:
            return [_shape_of(s) for s in lst.shape]
        return []
    return None


def _shape_of(shape_proto: Any) -> tuple[int, ...] | None:
    if shape_proto.unknown_rank:
        return None
    return tuple(int(d.size) for d in shape_proto.dim)


@dataclass
class Node:
    """One node of the prepared graph.

    `inputs` are the data inputs in order; `control_inputs` the names after `^`.
    `output_specs` come from Grappler's static shape inference (empty when unknown).
    """

    id: int
    name: str
    op: str
    device: str = ""
    inputs: list[TensorRef] = field(default_factory=list)
    control_inputs: list[str] = field(default_factory=list)
    output_specs: list[TensorSpec] = field(default_factory=list)
    raw_attrs: Any = None  # the NodeDef's attr map (protobuf), or a plain dict in tests
    _decoded: dict[str, Any] = field(default_factory=dict, repr=False)

    def attr(self, key: str, default: Any = None) -> Any:
        """The decoded value of attribute `key`, or `default` when it is absent."""
        if key in self._decoded:
            return self._decoded[key]
        if self.raw_attrs is None or key not in self.raw_attrs:
            return default
        raw = self.raw_attrs[key]
        value = raw if isinstance(self.raw_attrs, dict) else decode_attr(raw)
        self._decoded[key] = value
        return value

    def has_attr(self, key: str) -> bool:
        return key in self._decoded or (self.raw_attrs is not None and key in self.raw_attrs)

    def attr_names(self) -> list[str]:
        return sorted(set(self._decoded) | set(self.raw_attrs or ()))


class Graph:
    """Nodes in TF node-id order plus the edge structure and shape properties.

    Ids 0 and 1 are the implicit `_SOURCE` and `_SINK` (op `NoOp`), as in a TF `Graph`.
    """

    def __init__(self, nodes: list[Node]):
        source = Node(0, SOURCE, "NoOp")
        sink = Node(1, SINK, "NoOp")
        self.nodes: list[Node] = [source, sink, *nodes]
        for i, node in enumerate(self.nodes):
            node.id = i
        self.by_name: dict[str, Node] = {n.name: n for n in self.nodes}
        if len(self.by_name) != len(self.nodes):
            raise ValueError("node names must be unique")

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, name: str) -> Node:
        return self.by_name[name]

    @property
    def real_nodes(self) -> list[Node]:
        """All nodes except `_SOURCE` and `_SINK`."""
        return self.nodes[2:]

    @cached_property
    def consumers(self) -> dict[str, list[tuple[Node, int]]]:
        """node name -> (consumer, input index) for every data edge leaving it."""
        result: dict[str, list[tuple[Node, int]]] = {n.name: [] for n in self.nodes}
        for node in self.nodes:
            for index, ref in enumerate(node.inputs):
                result[ref.node].append((node, index))
        return result

    @cached_property
    def control_consumers(self) -> dict[str, list[Node]]:
        result: dict[str, list[Node]] = {n.name: [] for n in self.nodes}
        for node in self.nodes:
            for name in node.control_inputs:
                result[name].append(node)
        return result

    def output_spec(self, ref: TensorRef) -> TensorSpec | None:
        """Static properties of one tensor, or None when shape inference knows nothing."""
        specs = self.by_name[ref.node].output_specs
        return specs[ref.port] if ref.port < len(specs) else None

    def input_specs(self, node: Node) -> list[TensorSpec | None]:
        """Properties of each data input of `node` (Grappler's input properties)."""
        return [self.output_spec(ref) for ref in node.inputs]

    def resolve_identity(self, ref: TensorRef) -> TensorRef:
        """Walks up a chain of Identity nodes (input 0 each time), as TF-TRT's validator does."""
        seen = set()
        while True:
            node = self.by_name[ref.node]
            if node.op != "Identity" or not node.inputs or node.name in seen:
                return ref
            seen.add(node.name)
            ref = node.inputs[0]

    def const_value(self, name: str) -> np.ndarray:
        """The value of a Const node as a numpy array."""
        return np.asarray(self.by_name[name].attr("value"))
