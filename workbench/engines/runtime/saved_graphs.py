"""The GraphDefs a saved converted model keeps beside its SavedModel, without the weights its
variables hold.

The converted GraphDef and each segment's are written with every weight that is a variable of
the SavedModel a Placeholder, the manifest naming the variable (its checkpoint key); read back,
each such Placeholder is the Const of the variable's value again. So a saved model holds each
weight once in its checkpoint (TensorFlow's copy, the native segments') and once in the engine
built from it, as TF-TRT's did, instead of once more per GraphDef.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.engines.weights import LiftedGraph, stand_in_for
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import element_count
from workbench.graph.variables import VARIABLE_OP_ATTR
from workbench.graph.wire import read_graph_def, write_graph_def
from workbench.lazy import tf

if TYPE_CHECKING:
    from tensorflow.core.framework.node_def_pb2 import NodeDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

VARIABLES_PREFIX = Path("variables") / "variables"  # the SavedModel's checkpoint


class DamagedModelError(WorkbenchError):
    """A saved converted model whose manifest, graph or engine files are missing or corrupt."""


def checkpoint_key(index: int, attribute: str = "weights") -> str:
    """The checkpoint key of the `index`-th variable of the saved module's list `attribute`."""
    return f"{attribute}/{index}/.ATTRIBUTES/VARIABLE_VALUE"


def write_without_saved(full: Path, out: Path, saved: Collection[str]) -> None:
    """The GraphDef file `full` written into `out` with each Const named in `saved` (a
    variable of the SavedModel) a Placeholder of its dtype and shape, read a node at a time."""
    def lift(node: NodeDef) -> NodeDef | None:
        if node.op != "Const" or node.name not in saved:
            return None
        return stand_in_for(node, node.attr["value"].tensor)

    with full.open("rb") as opened:
        graph_def = read_graph_def(opened, lift)
    with out.open("wb") as written:
        write_graph_def(graph_def, written)


class CheckpointWeights:
    """A saved model's weights read from its variables by Const name (the manifest's
    `saved_weights`: name -> checkpoint key), as TensorProtos."""

    def __init__(self, model_dir: Path, keys: dict[str, str]) -> None:
        self.prefix = model_dir / VARIABLES_PREFIX
        self.keys = dict(keys)
        self._reader: Any = None

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def proto(self, name: str) -> TensorProto:
        try:
            if self._reader is None:
                self._reader = tf.train.load_checkpoint(str(self.prefix))
            value = self._reader.get_tensor(self.keys[name])
        except (tf.errors.OpError, ValueError, KeyError) as exc:
            raise DamagedModelError(
                f"{self.prefix.parent}: the variable of weight {name} cannot be read "
                f"({first_line(exc)}); save the model again") from None
        return tf.make_tensor_proto(value)

    def total_bytes(self) -> int:
        """The bytes of every weight, from the checkpoint's shapes (no value read)."""
        try:
            reader = tf.train.load_checkpoint(str(self.prefix))
        except (tf.errors.OpError, ValueError) as exc:
            raise WorkbenchError(f"{self.prefix.parent}: {first_line(exc)}") from None
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
        total = 0
        for key in self.keys.values():
            count = 1
            for size in shapes.get(key, ()):
                count *= size
            total += count * dtypes[key].size if key in dtypes else 0
        return total


def restoring(weights: CheckpointWeights | None,
              lift: Callable[[NodeDef], TensorProto | None] | None = None
              ) -> tuple[Callable[[NodeDef], NodeDef | None], dict[str, TensorProto]]:
    """A `read_graph_def` replacement for a file `write_without_saved` wrote, and the weights
    it found: without `lift`, each saved weight's Placeholder is its Const again (the
    GraphDef as it was); with it, saved weights stay Placeholders and every Const `lift`
    picks becomes one too (`LiftedGraph`'s form), their values in the dict."""
    found: dict[str, TensorProto] = {}

    def replace(node: NodeDef) -> NodeDef | None:
        if weights is not None and node.op == "Placeholder" and node.name in weights:
            tensor = weights.proto(node.name)
            if lift is not None:
                found[node.name] = tensor
                return None
            return _const_of(node, tensor)
        tensor = None if lift is None else lift(node)
        if tensor is None:
            return None
        found[node.name] = tensor
        return stand_in_for(node, tensor)

    return replace, found


def read_lifted(read: Callable[[Callable[[Any], Any]], Any], weights: CheckpointWeights | None,
                lift: Callable[[NodeDef], TensorProto | None]) -> LiftedGraph:
    """The GraphDef `read(replace)` parses, lifted (`restoring`)."""
    replace, found = restoring(weights, lift)
    return LiftedGraph(read(replace), found)


def _const_of(placeholder: NodeDef, tensor: TensorProto) -> NodeDef:
    from tensorflow.core.framework import node_def_pb2

    node = node_def_pb2.NodeDef(name=placeholder.name, op="Const", device=placeholder.device)
    node.attr["dtype"].type = tensor.dtype
    node.attr["value"].tensor.CopyFrom(tensor)
    if VARIABLE_OP_ATTR in placeholder.attr:
        node.attr[VARIABLE_OP_ATTR].CopyFrom(placeholder.attr[VARIABLE_OP_ATTR])
    return node


def weight_bytes(tensors: Collection[TensorProto]) -> int:
    """The bytes of the tensors' values."""
    return sum(element_count(t) * tf.as_dtype(t.dtype).size for t in tensors)
