"""Shape nodes found from a real TF graph: values computed from tensor shapes and constants."""

from __future__ import annotations

import tensorflow as tf

from workbench.engines.inspection.shape_arithmetic import shape_computations, shape_nodes_of


def test_tensordot_shape_arithmetic_is_found_from_the_graph():
    weights = tf.constant(tf.ones((8, 4)))

    @tf.function(input_signature=[tf.TensorSpec([None, None, 8], tf.float32)])
    def dense(x: tf.Tensor) -> tf.Tensor:
        return tf.tensordot(x, weights, axes=1)

    graph_def = dense.get_concrete_function().graph.as_graph_def()
    ops = {n.name: n.op for n in graph_def.node}
    found = shape_computations(graph_def)
    found_ops = {ops[n] for n in found}
    # Tensordot's target shape: Shape -> GatherV2 -> Prod -> Pack/ConcatV2.
    assert {"Shape", "GatherV2", "Prod", "ConcatV2"} <= found_ops, found_ops
    # The data path is no shape computation, nor are constants alone.
    assert not found_ops & {"MatMul", "Reshape", "Placeholder", "Const", "Transpose"}


def test_constants_alone_are_no_shape_and_data_wins():
    nodes = [("x", "Placeholder", []), ("c", "Const", []), ("size", "Size", ["x"]),
             ("twice", "Mul", ["size", "c"]), ("folded", "Mul", ["c", "c"]),
             ("data", "Mul", ["x", "twice"]), ("cast", "Cast", ["twice:0", "^x"])]
    assert shape_nodes_of(nodes) == {"size", "twice", "cast"}
