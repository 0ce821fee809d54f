"""Large Consts (weights) of a GraphDef, and the Placeholders that stand in for them.

Shape inference needs only a weight's shape (`engine_shapes`); the converted function captures
its weights as tensors (`runtime`) and a saved model feeds them from variables
(`saved_weights`): as Consts, TensorFlow copied them each time it instantiated, optimized or
saved a function (ConvNeXtLarge's first call: 13.9 GB for 0.8 GB of weights).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.graph.nodes import VALUE_LISTS, dtype_enum, element_count
from workbench.graph.variables import VARIABLE_OP_ATTR
from workbench.lazy import tf

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

SMALL_CONST = 1024  # elements: shape computations fold Consts up to this size
_DT_STRING = dtype_enum("string")


def large_const(node: NodeDef, inputs: Sequence[str] | None = None) -> TensorProto | None:
    """The value of a Const of more than SMALL_CONST elements with no control inputs (one in
    a loop frame has its frame's), else None. `inputs`: the node's inputs where some are
    dropped (default its own)."""
    if node.op != "Const" or (node.input if inputs is None else inputs):
        return None
    tensor = node.attr["value"].tensor
    if tensor.dtype == _DT_STRING or element_count(tensor) <= SMALL_CONST:
        return None
    return tensor


def stand_in(name: str, tensor: TensorProto, device: str = "") -> NodeDef:
    """A Placeholder of the tensor's dtype and shape."""
    from tensorflow.core.framework import node_def_pb2

    node = node_def_pb2.NodeDef(name=name, op="Placeholder", device=device)
    node.attr["dtype"].type = tensor.dtype
    node.attr["shape"].shape.CopyFrom(tensor.tensor_shape)
    return node


def stand_in_for(node: NodeDef, tensor: TensorProto) -> NodeDef:
    """The Placeholder standing in for the Const `node`; a Const that was a variable stays
    known as one (graph/variables.py)."""
    placeholder = stand_in(node.name, tensor, node.device)
    if VARIABLE_OP_ATTR in node.attr:
        placeholder.attr[VARIABLE_OP_ATTR].CopyFrom(node.attr[VARIABLE_OP_ATTR])
    return placeholder


def stored_weight(node: NodeDef, inputs: Sequence[str] | None = None) -> TensorProto | None:
    """A large Const (`large_const`) whose bytes are stored (not one repeated value, which
    the proto keeps small and a variable would not)."""
    tensor = large_const(node, inputs)
    return tensor if tensor is not None and is_stored(tensor) else None


def is_stored(tensor: TensorProto) -> bool:
    """The tensor holds every element (bytes or a full list), not one repeated value."""
    # Not ByteSize(): protobuf's upb serializes the tensor to count it (twice its bytes).
    count = element_count(tensor)
    listed = max(len(getattr(tensor, name)) for name in VALUE_LISTS)
    return listed >= count or len(tensor.tensor_content) >= count


def as_array(tensor: TensorProto) -> Any:
    """The tensor's value as a numpy array, its bytes read once (`tf.make_ndarray` copies
    them twice): read-only, for a variable or tensor to be made from."""
    import numpy as np
    content = tensor.tensor_content
    if not content:
        return tf.make_ndarray(tensor)
    dtype = tf.as_dtype(tensor.dtype).as_numpy_dtype
    return np.frombuffer(content, dtype).reshape([d.size for d in tensor.tensor_shape.dim])


def as_tensor(tensor: TensorProto) -> Any:
    """The tensor's value as an eager tensor on the CPU holding one copy: `tf.constant` of a
    numpy array holds two (the array converted, then copied to the device)."""
    with tf.device("CPU:0"):
        return tf.identity(as_array(tensor))


_SLICE_BYTES = 32 << 20


@dataclass(frozen=True)
class StoredBytes:
    """Where a weight's bytes lie in a file (`wire.write_graph_def`'s `placed`)."""

    path: Path
    offset: int


def as_variable(tensor: TensorProto, stored: StoredBytes | None = None) -> Any:
    """A variable of the tensor's value, made as zeros and then filled a slice at a time: at
    most the variable and the bytes read are held (`tf.Variable` of an array holds three copies
    at once: VGG16's 0.4 GB fully connected weight made `save()` peak 1.5x its weights higher).
    With `stored`, the slices are read from that file: protobuf hands out a bytes field only
    copied whole (that weight: 0.8x its model's weights more)."""
    dtype = tf.as_dtype(tensor.dtype)
    shape = [d.size for d in tensor.tensor_shape.dim]
    if stored is None and element_count(tensor) <= SMALL_CONST:  # scalars too: one piece
        with tf.device("CPU:0"):
            return tf.Variable(as_array(tensor), trainable=False)
    with tf.device("CPU:0"):
        variable = tf.Variable(tf.zeros(shape, dtype), trainable=False)
    rows = max(1, _SLICE_BYTES // max(1, element_count(tensor) // shape[0] * dtype.size))
    slices = _slices_read(stored, dtype.as_numpy_dtype, shape, rows) if stored else \
        _slices(as_array(tensor), rows)  # its bytes read once
    for start, value in slices:  # in place: the variable's buffer is its own
        tf.raw_ops.ResourceStridedSliceAssign(
            ref=variable.handle, begin=[start], end=[start + len(value)], strides=[1],
            value=value)
    return variable


def _slices(value: Any, rows: int) -> Iterator[tuple[int, Any]]:
    for start in range(0, len(value), rows):
        yield start, value[start:start + rows]


def _slices_read(stored: StoredBytes, dtype: Any, shape: list[int],
                 rows: int) -> Iterator[tuple[int, Any]]:
    import numpy as np

    row_bytes = np.dtype(dtype).itemsize * int(np.prod(shape[1:], dtype=np.int64))
    with stored.path.open("rb") as file:
        file.seek(stored.offset)
        for start in range(0, shape[0], rows):
            count = min(rows, shape[0] - start)
            data = np.empty(count * row_bytes, np.uint8)
            if file.readinto(data) != data.size:
                raise ValueError(f"{stored.path} ends inside a weight: truncated")
            yield start, data.view(dtype).reshape([count, *shape[1:]])


@dataclass
class LiftedGraph:
    """A GraphDef whose large weights are Placeholders to feed."""

    graph_def: GraphDef
    weights: dict[str, TensorProto] = field(default_factory=dict)  # Placeholder -> value


def lift_weights(graph_def: GraphDef,
                 select: Callable[[NodeDef], TensorProto | None] | None = None) -> LiftedGraph:
    """The GraphDef with each Const `select` picks (default: `stored_weight`) a Placeholder
    of its name, dtype and shape."""
    from tensorflow.core.framework import graph_pb2

    select = select or stored_weight
    lifted = LiftedGraph(graph_pb2.GraphDef())
    out = lifted.graph_def
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    for node in graph_def.node:
        tensor = select(node)
        if tensor is None:
            out.node.append(node)
        else:
            lifted.weights[node.name] = tensor
            out.node.append(stand_in_for(node, tensor))
    return lifted
